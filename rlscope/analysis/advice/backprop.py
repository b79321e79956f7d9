"""Backprop-bound runs: the learner update takes a large share of the run, whatever its Python share.

stable-baselines3's PPO on the CPU spends 53-59% of its run in ``backprop``, with its torch ops and its
Python about even, so no Python-dominated rule fires, yet the update is where the time goes. What is
left to win without changing the algorithm is the update's fixed cost per step: the interpreter around
the ops (compiled code removes it) and the optimizer's loop over parameters (a fused optimizer makes it
one kernel). Fewer, larger optimizer steps cut the same costs but change what is learned, so the rule
names them as hyperparameters.
"""

from __future__ import annotations

from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs
from rlscope.analysis.advice.changes import update_change
from rlscope.analysis.advice.python_time import MIN_CALLS, UPDATE_WORDS, where_python

__all__ = ["BACKPROP_BOUND_SHARE", "backprop_bound"]

BACKPROP_BOUND_SHARE = 0.40
"""The update's share of the run (of the processes' time, with several) above which the run is
backprop-bound: the update takes more than the rollout's simulation and acting together usually do. A
share must clear it by the margin (:data:`~rlscope.analysis.advice.base.SHARE_MARGIN`), so 45% and up."""


def backprop_bound(facts: Facts) -> list[Finding]:
    """Per update operation that takes a large share of the run, when the trace records torch ops.

    Time at stake: the update's Python and CUDA API time: the fixed cost per step that compiled code, a
    fused optimizer and fewer, larger steps remove at most; its torch ops' own work stays.
    """
    run = facts.process_time_s
    if run <= 0 or not facts.has_backend():
        return []
    out = []
    for name, op in facts.operations_named(UPDATE_WORDS, MIN_CALLS):
        total = float(op.get("total_s", 0.0))
        excl = float(op["exclusive_s"])
        calls = int(op["calls"])
        if not clears(total / run, BACKPROP_BOUND_SHARE, sd=facts.noise_s(op, "total_s") / run):
            continue
        py, api, backend = (facts.cpu_s(op, c) for c in ("python", "cuda_api", "backend"))
        of = "of the processes' time" if run != facts.wall_s else "of the run"
        evidence = (
            f"{name} took {secs(total)} ({pct(total, run)} {of}) over {count(calls)} calls"
            f" ({secs(total / calls)} each): {pct(backend, excl)} of its own time in torch ops"
            f" ({secs(backend)}), {pct(py, excl)} Python ({secs(py)})"
            + (f", {pct(api, excl)} CUDA API calls ({secs(api)})" if api > 0 else "")
            + where_python(facts, name)
        )
        stake = py + api
        out.append(
            Finding(
                "backprop_bound",
                name,
                evidence,
                stake,
                update_change(facts, name),
                parts=("python", "cuda_api"),
            )
        )
    return out
