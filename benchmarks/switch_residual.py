"""How long does a window switch keep costing after it is over? Iteration time by distance from a switch.

    python benchmarks/switch_residual.py [--rounds 3] [--iters 8000] [--json FILE]

`tests/test_gpu_windows.py`'s launch-bound loop (a ~200 us kernel, 20 ``torch.add`` launches and a
synchronize, then 100 us of CPU work) runs unprofiled, then under the default profile (windows:
CUPTI detached in light windows, attached again in full ones), in one process. Every iteration's
start is taken with ``perf_counter_ns`` (the trace's clock), so each iteration is placed against the
trace's ``WINDOW`` rows: the iteration holding a switch is left out (its time is the switch, which
the analyzer removes as rlscope's), the others are binned by how many iterations came since the
last switch, per window kind. Printed per bin: the median iteration time over the unprofiled median,
the count, and the excess in ms summed over the run (over the same window kind's late iterations,
where the switch is long past): where the post-switch cost lies and how much of the run it is. The
analyzer's corrected time per iteration is printed beside, over the same unprofiled median.

``--attached``: also run with CUPTI kept attached in light windows (``RLSCOPE_CUPTI_DETACH=0``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

BINS = ((1, 1), (2, 2), (3, 5), (6, 20), (21, 100), (101, 400), (401, 1 << 30))


def bin_of(k: int) -> str:
    return next(
        f"{a}" if a == b else f"{a}+" if b == BINS[-1][1] else f"{a}-{b}" for a, b in BINS if a <= k <= b
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=8000)
    p.add_argument("--attached", action="store_true", help="also with CUPTI attached in light windows")
    p.add_argument("--device", default="cuda", help="cuda, or cpu to check the wiring (backend ops switched)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import numpy as np
    import torch
    from loops import launch_step  # this script's directory

    import rlscope
    from rlscope.analysis import analyze
    from rlscope.trace import schema as S

    cuda = args.device == "cuda"
    step = launch_step(args.device)

    def loop(n: int) -> np.ndarray:
        starts = [0] * (n + 1)
        clock = time.perf_counter_ns
        for i in range(n):
            starts[i] = clock()
            step()
        starts[n] = clock()
        return np.asarray(starts, dtype=np.int64)

    def profiled(tmp: str, detach: bool) -> dict:
        os.environ["RLSCOPE_CUPTI_DETACH"] = "1" if detach else "0"
        opts = {"backend": False, "gpu": "cupti"} if cuda else {"backend": True, "gpu": False}
        with rlscope.profile(tmp, nvml_hz=0, **opts):
            starts = loop(args.iters)
        trace = rlscope.load_trace(tmp)
        ev = trace.processes[0].events
        kind = ev.column("kind").to_numpy()
        win_ts = ev.column("ts_ns").to_numpy()[kind == S.WINDOW]
        win_mode = ev.column("id").to_numpy()[kind == S.WINDOW]
        s = analyze(trace).summary
        ops = s["operations"]
        corrected = (ops["step"]["total_s"] + ops["cpu"]["total_s"]) / ops["step"]["calls"]
        dur = np.diff(starts)
        # switches inside iteration i: WINDOW rows in [starts[i], starts[i+1])
        where = np.searchsorted(starts, win_ts, side="right") - 1
        inside = np.zeros(len(dur), bool)
        ok = (where >= 0) & (where < len(dur))
        inside[where[ok]] = True
        mode = np.full(len(dur), -1)
        since = np.full(len(dur), -1)
        before = win_mode[~ok & (where < 0)]
        last_i, last_m = -1, int(before[-1]) if len(before) else S.WINDOW_FULL  # the session start's mode
        for i in range(len(dur)):
            if inside[i]:  # a switch iteration: left out (mode -1)
                last_i, last_m = i, int(win_mode[np.flatnonzero(where == i)[-1]])
            else:
                mode[i], since[i] = last_m, i - last_i
        return {
            "dur": dur,
            "mode": mode,
            "since": since,
            "switch_iters": int(inside.sum()),
            "corrected": corrected,
        }

    def table(run: dict, base: float) -> dict:
        out: dict = {}
        for m, label in ((S.WINDOW_FULL, "full"), (S.WINDOW_LIGHT, "light")):
            sel = run["mode"] == m
            late = run["dur"][sel & (run["since"] > 400)]
            ref = float(np.median(late)) if len(late) else float("nan")
            rows = {}
            for lo, hi in BINS:
                d = run["dur"][sel & (run["since"] >= lo) & (run["since"] <= hi)]
                if len(d):
                    rows[bin_of(lo)] = {
                        "n": len(d),
                        "median_over_unprofiled": float(np.median(d)) / base,
                        "excess_ms": float((d - ref).sum()) / 1e6,
                    }
            out[label] = {"late_over_unprofiled": ref / base, "bins": rows}
        return out

    loop(200)
    with tempfile.TemporaryDirectory() as tmp:  # the first session loads the native collectors
        profiled(os.path.join(tmp, "first"), True)
    configs = ["detached", *(["attached"] if args.attached else [])]
    results: dict = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "iters": args.iters,
        "rounds": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for c in configs if r % 2 == 0 else configs[::-1]:
                b0 = float(np.median(np.diff(loop(args.iters // 2))))
                run = profiled(os.path.join(tmp, f"{c}-{r}"), c == "detached")
                b1 = float(np.median(np.diff(loop(args.iters // 2))))
                base = (b0 + b1) / 2
                total = float(run["dur"].sum()) / 1e9
                row = {
                    "config": c,
                    "round": r + 1,
                    "unprofiled_us": base / 1e3,
                    "raw_over_unprofiled": float(np.mean(run["dur"])) / base,
                    "corrected_over_unprofiled": run["corrected"] * 1e9 / base,
                    "switch_iterations": run["switch_iters"],
                    "switch_time_ms": float(
                        run["dur"][run["since"] < 0].sum() - base * (run["since"] < 0).sum()
                    )
                    / 1e6,
                    "run_s": total,
                    **table(run, base),
                }
                results["rounds"].append(row)
                print(
                    f"round {r + 1} {c:9} unprofiled {base / 1e3:.1f} us/it;"
                    f" raw {row['raw_over_unprofiled']:.3f},"
                    f" corrected {row['corrected_over_unprofiled']:.3f}; {run['switch_iters']} switches"
                    f" ({row['switch_time_ms']:.0f} ms over unprofiled iterations) in {total:.2f} s"
                )
                for label in ("full", "light"):
                    t = row[label]
                    cells = "  ".join(
                        f"{k}: {v['median_over_unprofiled']:.3f} n={v['n']} {v['excess_ms']:+.1f}ms"
                        for k, v in t["bins"].items()
                    )
                    print(f"   {label:5} late {t['late_over_unprofiled']:.3f} | {cells}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
