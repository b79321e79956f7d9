"""Is the devices' "two speeds" a neighbour on the same physical core? The eager step beside a busy sibling.

    python benchmarks/smt_probe.py [--cpu 2] [--rounds 15] [--iters 150] [--device cuda] [--json F]

The eager CartPole step (``benchmarks/loops.py``'s ``sim_eager_step``, launch-bound, no synchronize
inside) runs pinned to one core, in blocks, while a spinning helper process is moved between three
places, in rotation, every block: stopped (``idle``), on the core's SMT sibling (``sibling``), on a
core of another physical core (``other``). If ``sibling`` blocks run ~1.5x the ``idle`` ones and
``other`` does not, the two speeds are a busy sibling hyperthread: the profiler's own threads, the
driver's, or another guest's landing there. The machine's topology (``thread_siblings_list``) is
printed first; with no sibling (SMT off), ``sibling`` is skipped. A guest may be shown no SMT
while two of its cores share a physical one: ``--scan`` puts the helper on every other core in turn.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path


def _siblings(cpu: int) -> list[int]:
    """The other logical CPUs on ``cpu``'s physical core (empty without SMT or sysfs)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        text = path.read_text().strip()
    except OSError:
        return []
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return [c for c in out if c != cpu]


def _spin(where: mp.Value, stop: mp.Value) -> None:
    """Spin on the core ``where`` says (-1: sleep), until ``stop``."""
    here = -2
    while not stop.value:
        w = where.value
        if w != here:
            here = w
            if w >= 0:
                os.sched_setaffinity(0, {w})
        if w < 0:
            time.sleep(0.001)
            continue
        x = 0
        for i in range(20000):
            x += i


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", type=int, default=2, help="the core the step runs on")
    p.add_argument("--rounds", type=int, default=15, help="rounds of the three placements")
    p.add_argument("--iters", type=int, default=150, help="iterations per block")
    p.add_argument("--device", default="cuda")
    p.add_argument("--scan", action="store_true", help="the helper on each other core in turn")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    ncpu = os.cpu_count() or 1
    topo = {c: _siblings(c) for c in range(ncpu)}
    print("siblings:", " ".join(f"{c}:{'/'.join(map(str, s)) or '-'}" for c, s in topo.items()))
    sib = topo.get(args.cpu, [])
    others = [c for c in range(ncpu) if c != args.cpu and c not in sib and args.cpu not in topo.get(c, [])]
    places = {"idle": -1, "other": others[0] if others else -1}
    if sib:
        places["sibling"] = sib[0]
    if args.scan:  # a guest may not see the host's topology: which of its cores slows this one?
        places = {"idle": -1, **{f"cpu{c}": c for c in range(ncpu) if c != args.cpu}}
    print("step on", args.cpu, "helper places:", places)

    where, stop = mp.Value("i", -1), mp.Value("i", 0)
    helper = mp.Process(target=_spin, args=(where, stop), daemon=True)
    helper.start()
    os.sched_setaffinity(0, {args.cpu})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from loops import sim_eager_step

    step = sim_eager_step(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    for _ in range(300):
        step()
    sync()
    blocks: dict[str, list[float]] = {k: [] for k in places}
    for r in range(args.rounds):
        order = list(places)[r % len(places) :] + list(places)[: r % len(places)]
        for name in order:
            where.value = places[name]
            time.sleep(0.05)  # the helper has moved
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(args.iters):
                step()
            sync()
            wall = (time.perf_counter() - t0) / args.iters * 1e6
            cpu = (time.thread_time() - c0) / args.iters * 1e6
            blocks[name].append(wall)
            print(f"round {r:2d} {name:8s} {wall:7.1f} us/it wall, {cpu:7.1f} cpu", flush=True)
    stop.value = 1
    helper.join(2)
    base = statistics.median(blocks["idle"])
    for name, xs in blocks.items():
        xs_sorted = sorted(xs)
        print(
            f"{name:8s} median {statistics.median(xs):7.1f} us/it ({statistics.median(xs) / base:.3f}x idle),"
            f" p10 {xs_sorted[len(xs) // 10]:7.1f}, max {xs_sorted[-1]:7.1f}"
        )
    if args.json:
        out = {"topology": topo, "places": places, "blocks": blocks}
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
