"""Simulation-bound on a CPU simulator: stepping the environments takes much of the run.

RL-Scope's central finding: RL data collection is simulation-bound because simulators run on the CPU.
Fixes, the algorithm's learning kept first: envs stepped in parallel processes, more envs per step call
(a hyperparameter), a GPU simulator (rlscope's CartPole backends, docs/simulators.md, measure how far
each goes).
"""

from __future__ import annotations

from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs
from rlscope.analysis.advice.changes import MORE_ENVS, PARALLEL_ENVS, join

__all__ = ["GPU_SIMULATOR_SHARE", "SIMULATION_BOUND_SHARE", "SIMULATOR_CODE_SHARE", "simulation_bound"]

SIMULATION_BOUND_SHARE = 0.30
"""The operation's share of the run (of the processes' time, with several) above which the run is
simulation-bound: speeding the rest up leaves at least this much, so the simulator is worth a change.
Cleared by the margin (:data:`~rlscope.analysis.advice.base.SHARE_MARGIN`), like the next."""

SIMULATOR_CODE_SHARE = 0.50
"""Share of the operation's own CPU time inside simulator code (env step/reset) above which its time is
the simulator's, not the Python or policy around it."""

GPU_SIMULATOR_SHARE = 0.05
"""GPU kernel time of the operation above this share of its time: the simulator already runs on the GPU,
and the CPU-simulator advice does not apply. No band: a CPU simulator's kernel share is nil and a GPU
simulator's far above it."""


def simulation_bound(facts: Facts) -> list[Finding]:
    """Per operation mostly in CPU simulator code that takes a large share of the run.

    Time at stake: the operation's simulator time, which a faster or parallel simulator cuts (the
    ceiling: all of it, as a fused GPU simulator makes stepping negligible next to training).
    """
    run = facts.process_time_s
    if run <= 0:
        return []
    out = []
    for name, op in facts.operations():
        total = float(op.get("total_s", 0.0))
        excl = float(op.get("exclusive_s", 0.0))
        sim = facts.cpu_s(op, "simulator")
        if excl <= 0:
            continue
        if not clears(sim / excl, SIMULATOR_CODE_SHARE, sd=facts.noise_s(op, "simulator") / excl):
            continue
        if not clears(total / run, SIMULATION_BOUND_SHARE, sd=facts.noise_s(op, "total_s") / run):
            continue
        if facts.gpu_s(op, "gpu_kernel") > GPU_SIMULATOR_SHARE * total:
            continue
        calls = int(op.get("calls", 0))
        of = "of the processes' time" if run != facts.wall_s else "of the run"
        evidence = (
            f"{name} took {secs(total)} ({pct(total, run)} {of}) over {count(calls)} calls"
            f" ({secs(total / max(calls, 1))} each), {pct(sim, excl)} of its own time in simulator code"
            f" on the CPU ({secs(sim)})"
        )
        change = join(
            [
                PARALLEL_ENVS[facts.library],
                f"or {MORE_ENVS[facts.library]}",
                "or simulate on the GPU: rlscope's CartPole backends show the ceiling (`rlscope-analyze"
                " bench-sim`, docs/simulators.md)",
            ]
        )
        out.append(Finding("simulation_bound", name, evidence, sim, change, parts=("simulator",)))
    return out
