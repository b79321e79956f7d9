"""What are the machine's "two speeds"? Blocks of fixed work, timed with what the kernel says about them.

    python benchmarks/machine_speed.py [--seconds 40] [--cpu 3] [--kinds py,mem,launch] [--json F]

On the device machines (Firecracker guests) the same loop runs at one of two speeds ~1.5x apart, in
unprofiled processes too (BENCHMARKS §9), and no ±5% verdict survives that. This pins itself to one
core and runs fixed blocks of work in rotation, each timed by the wall clock and by the thread's CPU
clock, next to what the guest kernel reports for that block:

- ``steal``: the core's steal time (``/proc/stat``, the hypervisor running something else on it);
- ``run_delay``: time this thread waited on the guest's run queue (``/proc/thread-self/schedstat``);
- ``nivcsw``: involuntary context switches (``getrusage(RUSAGE_THREAD)``).

Block kinds: ``py`` (pure Python arithmetic), ``mem`` (a numpy copy of 64 MiB: memory bandwidth),
``launch`` (200 small CUDA launches and one synchronize, the eager simulator's shape). A block is
slow when its wall time is over 1.3x its kind's fastest decile. If slow blocks show steal or
run-queue delay, the machine took the core away; if their thread CPU time grew as much as their
wall, the core itself ran slower (frequency, or a neighbour on the same physical core).
Run two copies on different cores at once to see whether slow periods are machine-wide.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from pathlib import Path

SLOW = 1.3


def _core_stat(cpu: int) -> tuple[int, int]:
    """(busy, steal) jiffies of one core, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            f = [int(x) for x in line.split()[1:]]
            return f[0] + f[1] + f[2] + f[5] + f[6], f[7]
    return 0, 0


def _run_delay() -> int:
    """ns this thread has waited on the run queue (0 where schedstat is missing)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _work(kind: str, device: str):
    if kind == "py":

        def py() -> None:
            t = 0
            for i in range(60_000):
                t += i * i % 7

        return py
    if kind == "mem":
        import numpy as np

        src = np.ones(8 << 20)  # 64 MiB
        dst = np.empty_like(src)

        def mem() -> None:
            np.copyto(dst, src)

        return mem
    import torch

    x = torch.ones(64, device=device)

    def launch() -> None:
        for _ in range(200):
            torch.add(x, 1, out=x)
        if device == "cuda":
            torch.cuda.synchronize()

    return launch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--cpu", type=int, default=None, help="core to pin to (default: the first allowed)")
    p.add_argument("--kinds", default="py,mem,launch")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()
    cpu = a.cpu if a.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    device = a.device
    kinds = a.kinds.split(",")
    if "launch" in kinds and device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    works = {k: _work(k, device or "cpu") for k in kinds}
    for w in works.values():  # warm up
        for _ in range(3):
            w()
    rows = []
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        for kind, w in works.items():
            b0, s0 = _core_stat(cpu)
            d0, r0 = _run_delay(), resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(5):
                w()
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            d1, r1 = _run_delay(), resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            b1, s1 = _core_stat(cpu)
            rows.append(
                {
                    "kind": kind,
                    "t": time.monotonic(),
                    "wall": t1 - t0,
                    "cpu": c1 - c0,
                    "steal_j": s1 - s0,
                    "busy_j": b1 - b0,
                    "run_delay": d1 - d0,
                    "nivcsw": r1 - r0,
                }
            )
    summary = {}
    print(f"core {cpu}, {len(rows)} blocks, {a.seconds:.0f} s")
    print(
        f"{'kind':7} {'blocks':>6} {'p10 ms':>8} {'p50 ms':>8} {'p90 ms':>8} {'slow':>6} "
        f"{'cpu/wall fast':>13} {'cpu/wall slow':>13} {'steal slow':>10} {'steal fast':>10} "
        f"{'rq slow ms':>10}"
    )
    for kind in kinds:
        rs = [r for r in rows if r["kind"] == kind]
        walls = sorted(r["wall"] for r in rs)
        fast = walls[max(0, len(walls) // 10 - 1)]
        slow = [r for r in rs if r["wall"] > SLOW * fast]
        quick = [r for r in rs if r["wall"] <= SLOW * fast]

        def ratio(sel: list[dict]) -> float:
            return sum(r["cpu"] for r in sel) / max(1, sum(r["wall"] for r in sel))

        def steal_share(sel: list[dict]) -> float:  # jiffies are 10 ms: a share over many blocks
            return sum(r["steal_j"] for r in sel) * 1e7 / max(1, sum(r["wall"] for r in sel))

        s = {
            "blocks": len(rs),
            "p10_ms": walls[len(walls) // 10] / 1e6,
            "p50_ms": statistics.median(walls) / 1e6,
            "p90_ms": walls[9 * len(walls) // 10] / 1e6,
            "slow_share": len(slow) / max(1, len(rs)),
            "cpu_over_wall_fast": ratio(quick),
            "cpu_over_wall_slow": ratio(slow) if slow else None,
            "steal_share_slow": steal_share(slow) if slow else None,
            "steal_share_fast": steal_share(quick),
            "run_delay_slow_ms": sum(r["run_delay"] for r in slow) / 1e6,
            "cpu_ms_fast_median": statistics.median(r["cpu"] for r in quick) / 1e6,
            "cpu_ms_slow_median": statistics.median(r["cpu"] for r in slow) / 1e6 if slow else None,
        }
        summary[kind] = s

        def f(v: float | None, fmt: str) -> str:
            return "-" if v is None else format(v, fmt)

        print(
            f"{kind:7} {s['blocks']:6d} {s['p10_ms']:8.2f} {s['p50_ms']:8.2f} {s['p90_ms']:8.2f} "
            f"{s['slow_share']:6.0%} {f(s['cpu_over_wall_fast'], '13.2f')} "
            f"{f(s['cpu_over_wall_slow'], '13.2f')} {f(s['steal_share_slow'], '10.1%')} "
            f"{f(s['steal_share_fast'], '10.1%')} {s['run_delay_slow_ms']:10.1f}"
        )
        print(
            f"        thread-cpu ms per block: fast {s['cpu_ms_fast_median']:.2f}, "
            f"slow {f(s['cpu_ms_slow_median'], '.2f')}"
        )
    if a.json:
        a.json.write_text(json.dumps({"cpu": cpu, "summary": summary, "rows": rows}))


if __name__ == "__main__":
    main()
