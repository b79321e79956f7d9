"""The native event buffer grown ahead by the writer, against grown by the job's own appends.

    python benchmarks/buffer_ahead.py [--rounds 20] [--pairs 20000] [--nest 1|3]

A fresh session per timing, as a short run or a run's first second has: each round times the
loop unprofiled, under a session whose writer grows the buffer ahead (pages touched on its own
thread, without the GIL: rlscope/trace/writer.py), and under one whose buffer grows from the appends
(the writer's ``_reserve_ahead`` off, no initial reservation), the order of the two rotated per
round. Printed: per scope pair, the cost over the unprofiled loop (median and range over rounds),
and the minor page faults taken on the job's thread (``RUSAGE_THREAD``).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time


def _loop(n: int, nest: int, scopes: list) -> None:
    acc = 0
    for _ in range(n):
        for sc in scopes[:nest]:
            with sc:
                for j in range(10):
                    acc = (acc * 31 + j) & 0xFFFFFF


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--pairs", type=int, default=20_000, help="scope pairs per timing")
    p.add_argument("--nest", type=int, default=3, choices=(1, 2, 3), help="scopes per iteration")
    args = p.parse_args()
    import rlscope
    from rlscope.trace import writer

    scopes = [rlscope.scope(f"s{i}") for i in range(3)]
    n = args.pairs // args.nest
    pairs = n * args.nest
    grow_ahead, min_rows = writer.TraceWriter._reserve_ahead, writer.AHEAD_MIN_ROWS

    def variant(ahead: bool) -> None:
        writer.TraceWriter._reserve_ahead = grow_ahead if ahead else (lambda self, rows: None)
        writer.AHEAD_MIN_ROWS = min_rows if ahead else 0

    def timed(profiled: bool) -> tuple[float, int]:
        d = tempfile.mkdtemp(prefix="rlscope-bench-")
        s = (
            rlscope.profile(d, backend=False, gpu=False, windows=False, nvml_hz=0).start()
            if profiled
            else None
        )
        f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        t0 = time.perf_counter_ns()
        _loop(n, args.nest, scopes)
        t = time.perf_counter_ns() - t0
        f = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - f0
        if s is not None:
            s.stop()
        shutil.rmtree(d, ignore_errors=True)
        return t, f

    _loop(n // 10, args.nest, scopes)
    cost: dict[bool, list[float]] = {True: [], False: []}
    faults: dict[bool, list[int]] = {True: [], False: []}
    for r in range(args.rounds):
        base = timed(False)[0]
        for ahead in (True, False) if r % 2 == 0 else (False, True):
            variant(ahead)
            t, f = timed(True)
            cost[ahead].append((t - base) / pairs)
            faults[ahead].append(f)
    variant(True)
    print(f"{pairs} scope pairs per timing ({args.nest} per iteration), {args.rounds} rounds, fresh sessions")
    for ahead in (True, False):
        c = cost[ahead]
        label = "grown ahead (writer)" if ahead else "grown by the appends"
        print(
            f"  {label:22s} {statistics.median(c):6.0f} ns/pair (range {min(c):.0f}-{max(c):.0f}),"
            f" job-thread faults median {statistics.median(faults[ahead]):.0f}"
        )
    ratio = [a / b for a, b in zip(cost[True], cost[False], strict=True) if b > 0]
    lo, hi = min(ratio), max(ratio)
    print(f"  ratio ahead/appends per round: median {statistics.median(ratio):.2f} (range {lo:.2f}-{hi:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
