"""What a scope pair costs inside a real loop, against what ``rlscope calibrate`` stored for it.

    python benchmarks/scope_insitu.py [--rounds 30] [--iters 400] [--device cpu|cuda] [--recorder both]

``rlscope calibrate`` times scopes in a tight loop (a little Python between events), where the
scope code stays in the caches. In an RL loop tens of microseconds of framework work run between
two boundaries and evict it. Here the eager simulator's step (benchmarks/loops.py: three scopes,
~50 torch ops) runs in blocks of ``--iters`` iterations: unprofiled (scopes on their no-session
path), then under a session that records scopes only (no backend ops, no GPU tracing, no windows,
no NVML, no periodic flush), then unprofiled again, ``--rounds`` times. The profiled block less the
mean of the two around it, over three scope pairs, is a scope pair's cost in that loop; printed
beside the calibration's for this machine. ``--recorder both`` (default) measures the C scope
methods (collectors/scope_native.c) and annotate.py's Python ones in turn, the order rotated per round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--iters", type=int, default=400)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-gc", action="store_true", help="the garbage collector off in the timed blocks")
    p.add_argument("--recorder", choices=("native", "python", "both"), default="both", help="scope methods")
    args = p.parse_args()
    os.environ["RLSCOPE_GPU_MEMORY"] = "0"
    sys.path.insert(0, str(Path(__file__).parent))
    import torch
    from loops import sim_eager_step

    import rlscope
    from rlscope.collectors import scope_native
    from rlscope.overhead.correct import calibration

    torch.set_num_threads(1)
    step = sim_eager_step(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    for _ in range(500):
        step()

    def block() -> float:
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(args.iters):
            step()
        sync()
        return (time.perf_counter_ns() - t0) / args.iters

    if args.no_gc:
        import gc

        gc.disable()
    tmp = tempfile.mkdtemp()
    recorders = ["native", "python"] if args.recorder == "both" else [args.recorder]
    diffs: dict[str, list[float]] = {rec: [] for rec in recorders}
    options = dict(backend=False, gpu=False, windows=False, nvml_hz=0, flush_interval=1e6)
    for r in range(args.rounds):
        for rec in recorders[r % len(recorders) :] + recorders[: r % len(recorders)]:  # order rotated
            os.environ[scope_native.ENV] = "1" if rec == "native" else "0"
            before = block()
            session = rlscope.profile(f"{tmp}/t{r}{rec}", **options).start()
            assert session.scope_recorder == rec, f"asked for {rec}, got {session.scope_recorder}"
            on = block()
            session.stop()
            diffs[rec].append(on - (before + block()) / 2)
    for rec in recorders:
        pair = [d / 3 for d in diffs[rec]]  # policy, step, stats
        q = statistics.quantiles(pair, n=4)
        med = statistics.median(pair)
        print(f"{rec} scope pair in the loop: {med:.0f} ns (quartiles {q[0]:.0f}..{q[2]:.0f})")
    path = calibration.path_for(calibration.current_key())
    if path.exists():
        cost = calibration.load(path)["costs_ns"].get("scope", {})
        print(f"calibrated scope pair ({path.name}): {cost.get('total', float('nan')):.0f} ns")
    else:
        print("no calibration for this machine (rlscope calibrate)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
