"""What one recorded GPU allocator event costs the job: the calibration's ``memory`` entry.

Why it needs its own measurement: the memory recorder (collectors/gpu_memory.py) is on in light
and full windows alike, so the windows cannot see its cost, and on GPU loops it is the light
state's largest part (BENCHMARKS.md §9: the eager simulator's light state read 1.056 of a twin
process with it, 1.012 without). Every allocator event pays torch's trace entry (built for every
event once any tracker is attached) and rlscope's tracker call, synchronously, on the thread that
allocates or frees: a launch-bound backward pass, one allocation and one free per kernel, pays it
at every op.

Why a child process per round: torch cannot detach a tracker, so "without" can only be timed
before the tracker is attached, in a process that never had one. Each child times a loop of small
CUDA allocations and frees (``torch.empty`` + ``del``: two recorded events and three torch entries
an iteration, the proportion of real code's alloc/free pairs) before attaching the tracker, then
with it attached and recording, and counts the events it recorded. Each side is the minimum of
many short timings spread over the phase (disturbance only adds time), and the round's estimate
is (with - without) per recorded event, in ns. The rounds are judged in ns, like the C scope
methods: the cost is C++ (torch's allocator and the tracker), which does not follow the Python
reference loop. Run as ``python -m rlscope.calibrate_memory N M``: one round, one JSON line.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

ENTRY = "memory"
CHILD_TIMEOUT_S = 120.0  # a child builds nothing (the parent built the tracker) and runs ~1 s


def _loop(torch: Any, n: int) -> float:
    """Wall ns of ``n`` small CUDA allocations, each freed at once (the allocator's cache serves
    them: no cudaMalloc, no device work, only the allocator's bookkeeping and its trace)."""
    empty = torch.empty
    t0 = time.perf_counter_ns()
    for _ in range(n):
        x = empty(64, device="cuda")
        del x
    return float(time.perf_counter_ns() - t0)


def child_round(n: int, m: int) -> dict[str, float]:
    """One round in this (fresh) process: ``m`` timings of ``n`` iterations each side."""
    import torch

    from rlscope.collectors import gpu_memory

    lib = gpu_memory.load_native(torch)
    torch.cuda.init()
    _loop(torch, 2000)  # the allocator's cache and the interpreter warm
    without = min(_loop(torch, n) for _ in range(m))
    if lib.mn_start() != 0:
        raise RuntimeError("torch refused the allocator trace tracker")
    lib.mn_enable(1)
    _loop(torch, 200)
    gpu_memory.drain_native(lib, 0)
    timings, events = [], []
    for _ in range(m):
        before = lib.mn_pending()
        timings.append(_loop(torch, n))
        events.append(lib.mn_pending() - before)
        gpu_memory.drain_native(lib, 0)  # outside the clock, as the writer thread drains
    lib.mn_enable(0)
    gated = min(_loop(torch, n) for _ in range(m))  # attached, recording nothing: torch's part alone
    per_iter = statistics.median(events) / n
    if per_iter <= 0:
        raise RuntimeError("the allocator trace tracker recorded no events")
    with_ = min(timings)
    return {
        "per_event": (with_ - without) / (per_iter * n),
        "torch_part": (gated - without) / (per_iter * n),
        "events_per_iteration": per_iter,
        "unrecorded_ns_per_iteration": without / n,
    }


def run_child(n: int, m: int, timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, float]:
    """One round in a fresh child process (the tracker cannot be detached from this one)."""
    proc = subprocess.run(
        [sys.executable, "-m", "rlscope.calibrate_memory", str(n), str(m)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"memory calibration child failed (exit {proc.returncode}): {last}")
    out = json.loads(lines[-1])
    return {k: float(v) for k, v in out.items()}


def main(argv: list[str]) -> int:
    n, m = int(argv[0]), int(argv[1])
    print(json.dumps(child_round(n, m)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
