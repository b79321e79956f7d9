"""Intra-op thread oversubscription: torch splits each op of a tiny network over threads that wait for
one another, or for the cores, and a one-thread run is many times faster.

torch starts as many intra-op threads as the machine has physical cores, whatever the process may use
(its affinity, a container's CPU quota) and however many processes do the same. A small MLP's ops gain
nothing from them, and where the threads outnumber the cores each op waits for threads that are not
running: measured on a contended machine, CleanRL's PPO took 67 s against 6.5 s with one thread,
stable-baselines3's DQN 229 s against 9.2 s, its SAC 646 s against 17 s; under rlscope DQN's backprop
took 23 ms a call against 0.48 ms, 96% of it in torch ops.

The rule needs each process's intra-op thread count and usable cores in the summary's process entries
(:data:`THREADS_KEY`); without them it says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs
from rlscope.analysis.advice.changes import THREADS
from rlscope.analysis.advice.python_time import MIN_CALLS
from rlscope.categories import UNANNOTATED

__all__ = [
    "ONE_THREAD_PYTHON_RATIO",
    "THREADS_KEY",
    "TINY_TORCH_CALL_S",
    "TORCH_DOMINATED_SHARE",
    "intra_op_oversubscription",
]

THREADS_KEY = "threads"
"""The summary's per-process entry the rule reads: ``torch_intra_op`` (``torch.get_num_threads()`` while
the process ran its torch ops) and ``usable_cores`` (the cores it may use: its CPU affinity, capped by a
cgroup CPU quota), recorded in the trace's metadata (rlscope/runtime/metadata.py)."""

TINY_TORCH_CALL_S = 1e-3
"""Torch-op time per call of an operation under which its ops are too small to split across threads (a
64-64 MLP's update or forward pass takes 0.1-0.5 ms of torch ops on one core): with more than one thread
and no oversubscription counted, the rule fires only on such operations."""

TORCH_DOMINATED_SHARE = 0.80
"""Torch ops' share of such an operation's own time above which its threads, not its Python, are where
the time goes (one-thread runs of small networks keep it near half; cleared by the share margin)."""

ONE_THREAD_PYTHON_RATIO = 2.0
"""The one-thread estimate of an operation's torch-op time, as a multiple of its Python time: a small
network's torch op on one thread costs about what the Python that calls it costs (0.4-1.7x in the
committed one-thread CPU PPO trace, tests/golden/ppo_cpu), so twice the Python time is a generous
ceiling and the time at stake a conservative one. Python time under contention is inflated too, which
keeps the estimate on the generous side."""


def _facts(proc: Mapping[str, Any]) -> tuple[int, int] | None:
    """(torch intra-op threads, usable cores) of a process, when the trace recorded both."""
    t = proc.get(THREADS_KEY) or {}
    threads, cores = t.get("torch_intra_op"), t.get("usable_cores")
    if not threads or not cores:
        return None
    return int(threads), int(cores)


def _uses_torch(proc: Mapping[str, Any]) -> bool:
    return float((proc.get("categories") or {}).get("backend", 0.0)) > 0


def intra_op_oversubscription(facts: Facts) -> list[Finding]:
    """When a process runs torch with more than one intra-op thread, and either the torch processes of
    its host run more intra-op threads than it has usable cores, or its operations are tiny calls
    dominated by torch-op time.

    One finding for the run (one change for every process), on the operation with most torch-op time,
    also speaking for the others (``covers``): ranked by their torch time rather than by what each has at
    stake, which is a difference of two similar times and orders near-equal operations by noise (three
    runs of one CleanRL command named backprop once and inference twice, 0.20 s at stake each).
    Time at stake: per affected operation, its torch-op time minus
    the one-thread estimate (:data:`ONE_THREAD_PYTHON_RATIO` times its Python time), summed.
    """
    procs = [(p, f) for p in facts.processes() if _uses_torch(p) and (f := _facts(p)) is not None]
    per_op: dict[str, float] = {}
    torch_s: dict[str, float] = {}
    clauses: dict[str, str] = {}
    why = ""
    for proc, (threads, cores) in procs:
        if threads <= 1:
            continue
        host = proc.get("node") or proc.get("host")
        peers = [f for p, f in procs if (p.get("node") or p.get("host")) == host]
        on_host = sum(t for t, _ in peers)
        oversubscribed = on_host > cores
        for name, op in (proc.get("operations") or {}).items():
            backend = facts.cpu_s(op, "backend")
            excl = float(op.get("exclusive_s", 0.0))
            calls = int(op.get("calls", 0))
            if name == UNANNOTATED or backend <= 0 or excl <= 0 or calls < MIN_CALLS:
                continue
            if facts.gpu_s(op, "gpu_kernel") > 0:
                continue  # its torch ops run on the GPU: intra-op threads are not its cost
            if not oversubscribed and (
                backend / calls >= TINY_TORCH_CALL_S
                or not clears(backend / excl, TORCH_DOMINATED_SHARE, sd=facts.noise_s(op, "backend") / excl)
            ):
                continue
            one_thread = min(backend, ONE_THREAD_PYTHON_RATIO * facts.cpu_s(op, "python"))
            if backend - one_thread <= 0:
                continue
            per_op[name] = per_op.get(name, 0.0) + backend - one_thread
            torch_s[name] = torch_s.get(name, 0.0) + backend
            clauses.setdefault(
                name,
                f"{name}: {secs(backend / calls)} of torch ops a call over {count(calls)} calls"
                f" ({pct(backend, excl)} of its own time), one-thread estimate {secs(one_thread / calls)}",
            )
            if not why or oversubscribed:
                why = _why(proc, threads, cores, len(peers), on_host, oversubscribed)
    if not per_op:
        return []
    ranked = sorted(per_op, key=lambda n: -torch_s[n])
    evidence = (
        f"{why}; "
        + "; ".join(clauses[n] for n in ranked[:3])
        + f" (one-thread estimate: {ONE_THREAD_PYTHON_RATIO:g}x the operation's Python time, at most its"
        " torch time: a small network's op on one thread costs about the Python that calls it)"
    )
    change = THREADS[facts.library]
    return [
        Finding(
            "intra_op_oversubscription", ranked[0], evidence, sum(per_op.values()), change, tuple(ranked[1:])
        )
    ]


def _why(
    proc: Mapping[str, Any], threads: int, cores: int, peers: int, on_host: int, oversubscribed: bool
) -> str:
    """What makes the threads too many: the cores they share, or the size of the work they split."""
    if not oversubscribed:
        return (
            f"torch runs {threads} intra-op threads on {cores} usable cores, for torch work of under"
            f" {secs(TINY_TORCH_CALL_S)} a call"
        )
    if peers == 1:
        return f"torch runs {threads} intra-op threads on {cores} usable cores"
    return (
        f"{peers} processes with torch ops run {on_host} intra-op threads on their host's {cores} usable"
        f" cores ({threads} in pid {proc.get('pid')})"
    )
