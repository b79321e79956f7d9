"""What one recorded GPU allocator event costs the job: the calibration's ``memory`` entry.

Why it needs its own measurement: the memory recorder (collectors/gpu_memory.py) is on in light
and full windows alike, so the windows cannot see its cost, and on GPU loops it is the light
state's largest part (the eager simulator's light state read 1.056 of a twin process with it,
1.012 without). Every allocator event pays torch's trace entry (built for every
event once any tracker is attached) and rlscope's tracker call, synchronously, on the thread that
allocates or frees: a launch-bound backward pass, one allocation and one free per kernel, pays it
at every op.

Why a child process per round: torch cannot detach a tracker, so "without" can only be timed
before the tracker is attached, in a process that never had one. Each child times a loop of small
CUDA allocations and frees (``torch.empty`` + ``del``: two recorded events and three torch entries
an iteration, the proportion of real code's alloc/free pairs) before attaching the tracker, then
with it attached and recording, and counts the events it recorded; each timing is paired with one
of the same loop on the CPU (no allocator trace), and the round's estimate is the rise of the
paired ratio, in ns at the CPU loop's fastest, per recorded event. The rounds are judged in ns,
like the C scope methods: the cost is C++ (torch's allocator and the tracker), which does not
follow the Python reference loop.
Run as ``python -m rlscope.overhead.calibrate.memory N M``: one round, one JSON line.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

CHILD_TIMEOUT_S = 120.0  # a child builds nothing (the parent built the tracker) and runs ~1 s


# the calibration's loop, and two closer to real code, to compare them in place
LOOPS = ("tight", "launch", "mlp")


def _step(torch: Any, device: str, kind: str = "tight") -> Any:
    """One iteration of a loop kind on ``device``: ``tight`` a small allocation freed at once (the
    caching allocator serves CUDA ones from its cache: no cudaMalloc, no device work, only its
    bookkeeping and its trace); ``launch`` the same with one kernel on it (driver work between
    events, as in real code); ``mlp`` a small MLP's forward, backward and Adam step (an RL update's
    allocation pattern). On the CPU the same Python and dispatcher path with no allocator trace: the
    reference that follows the machine's speed as the CUDA loop does."""
    empty = torch.empty
    if kind == "tight":

        def step() -> None:
            x = empty(64, device=device)
            del x

    elif kind == "launch":

        def step() -> None:
            x = empty(64, device=device)
            x.add_(1.0)
            del x

    elif kind == "mlp":
        net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)).to(device)
        opt = torch.optim.Adam(net.parameters(), lr=1e-4)
        xb = torch.zeros(32, 8, device=device)

        def step() -> None:
            loss = net(xb).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    else:
        raise ValueError(f"unknown loop {kind!r} (one of {', '.join(LOOPS)})")
    return step


def _loop(step: Any, n: int) -> float:
    """Wall ns of ``n`` iterations of ``step``."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        step()
    return float(time.perf_counter_ns() - t0)


def _pairs(
    cuda: Any, cpu: Any, n: int, m: int, lib: Any = None
) -> tuple[list[float], list[float], list[int]]:
    """``m`` pairs of adjacent timings (CUDA loop, CPU loop), and the events recorded in each CUDA
    one (drained outside the clock, as the writer thread drains) when ``lib`` records."""
    from rlscope.collectors import gpu_memory

    ratios, cpu_ns, events = [], [], []
    for _ in range(m):
        before = lib.mn_pending() if lib is not None else 0
        c = _loop(cuda, n)
        if lib is not None:
            events.append(lib.mn_pending() - before)
            gpu_memory.drain_native(lib, 0)
        h = _loop(cpu, n)
        ratios.append(c / h)
        cpu_ns.append(h / n)
    return ratios, cpu_ns, events


def child_round(n: int, m: int, kind: str = "tight") -> dict[str, float]:
    """One round in this (fresh) process: ``m`` pairs before attaching the tracker, ``m`` after.

    Each pair's CUDA timing is judged against the CPU timing next to it: the machine's speed moves
    over fractions of a second (the devices' two regimes are 1.2-1.4x apart), which between a phase
    before and a phase after the attach read as a cost (one per-event figure per child of 92-170 ns
    on an H200 with plain minima). The cost is the median ratio's rise times the CPU loop's time at
    its fastest, per recorded event."""
    import torch

    from rlscope.collectors import gpu_memory

    lib = gpu_memory.load_native(torch)
    torch.cuda.init()
    cuda, cpu = _step(torch, "cuda", kind), _step(torch, "cpu", kind)
    _loop(cuda, 2000)  # the allocator's cache and the interpreter warm
    _loop(cpu, 2000)
    torch.cuda.synchronize()
    r0, cpu0, _ = _pairs(cuda, cpu, n, m)
    if lib.mn_start() != 0:
        raise RuntimeError("torch refused the allocator trace tracker")
    lib.mn_enable(1)
    _loop(cuda, 200)
    gpu_memory.drain_native(lib, 0)
    r1, cpu1, events = _pairs(cuda, cpu, n, m, lib)
    lib.mn_enable(0)
    r2, cpu2, _ = _pairs(cuda, cpu, n, m)  # attached, recording nothing: torch's part alone
    per_iter = statistics.median(events) / n
    if per_iter <= 0:
        raise RuntimeError("the allocator trace tracker recorded no events")
    base = statistics.median(r0)
    fastest = min(cpu0 + cpu1 + cpu2)
    return {
        "per_event": (statistics.median(r1) - base) * fastest / per_iter,
        "torch_part": (statistics.median(r2) - base) * fastest / per_iter,
        "events_per_iteration": per_iter,
        "unrecorded_ns_per_iteration": base * fastest,
    }


def run_child(n: int, m: int, timeout_s: float = CHILD_TIMEOUT_S, kind: str = "tight") -> dict[str, float]:
    """One round in a fresh child process (the tracker cannot be detached from this one)."""
    proc = subprocess.run(
        [sys.executable, "-m", "rlscope.overhead.calibrate.memory", str(n), str(m), kind],
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
    kind = argv[2] if len(argv) > 2 else "tight"
    print(json.dumps(child_round(n, m, kind)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
