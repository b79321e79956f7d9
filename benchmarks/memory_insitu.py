"""Does the memory recorder's cost per event depend on the loop around the events? (GPU only.)

    python benchmarks/memory_insitu.py [--rounds 3] [--pairs 30] [--kinds tight,launch,mlp] [--json FILE]

Why: the calibration prices an allocator event in a tight loop of ``torch.empty`` + ``del``
(rlscope/overhead/calibrate/memory.py), ~100 ns on the devices, while a twin process put the memory
recorder's share of the eager simulator's light state at ~4% (BENCHMARKS.md §9), several times what
the calibrated price times the events explains. If the price of an event rises when driver work or
an autograd step runs between events (cold caches, longer paths), the calibration under-prices real
code and the light state keeps a cost the correction never removes. Each round runs one fresh child
per loop kind (the order rotating): ``tight`` (the calibration's), ``launch`` (one kernel on each
allocation) and ``mlp`` (a small MLP's forward, backward and Adam step), each timed before the
tracker is attached, attached and recording, and attached but dropping events, paired with the
same loop on the CPU. Reported per kind: ns per recorded event (median of rounds, with the range),
torch's part alone, events per iteration and the share of an unrecorded iteration the recorder
adds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from rlscope.overhead.calibrate import memory as calibrate_memory

ITERS = {"tight": 1000, "launch": 1000, "mlp": 100}  # ~5-50 ms a timing


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--kinds", default=",".join(calibrate_memory.LOOPS))
    p.add_argument("--json", default=None)
    args = p.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    got: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            t0 = time.perf_counter()
            try:
                row = calibrate_memory.run_child(ITERS.get(kind, 200), args.pairs, kind=kind)
            except (RuntimeError, OSError) as e:
                print(f"{kind}: round {r + 1} failed: {e}", flush=True)
                continue
            row["seconds"] = time.perf_counter() - t0
            got[kind].append(row)
            # each child as it ends: a cut run still shows what it measured
            print(f"round {r + 1} {kind}: {json.dumps({k: round(v, 3) for k, v in row.items()})}", flush=True)
    out = {}
    print(f"{'loop':8} {'ns/event':>10} {'range':>16} {'torch part':>10} {'events/it':>9} {'share':>7}")
    for kind, rows in got.items():
        if not rows:
            continue
        ev = [x["per_event"] for x in rows]
        share = [x["per_event"] * x["events_per_iteration"] / x["unrecorded_ns_per_iteration"] for x in rows]
        out[kind] = {
            "per_event_ns": statistics.median(ev),
            "per_event_range": [min(ev), max(ev)],
            "torch_part_ns": statistics.median(x["torch_part"] for x in rows),
            "events_per_iteration": statistics.median(x["events_per_iteration"] for x in rows),
            "share": statistics.median(share),
            "rounds": rows,
        }
        o = out[kind]
        print(
            f"{kind:8} {o['per_event_ns']:10.0f} {min(ev):7.0f}-{max(ev):<8.0f} {o['torch_part_ns']:10.0f} "
            f"{o['events_per_iteration']:9.1f} {o['share']:7.1%}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
