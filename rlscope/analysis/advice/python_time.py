"""Python-dominated operations: the learner update, or acting with the policy, spends its time in the
interpreter around the tensor ops.

With a small network the tensor work is tiny and the Python around it (minibatch slicing, loss terms op
by op, per-parameter optimizer steps, observation conversion and distribution objects per step,
``.item()`` for logging) is what the clock sees. Without the backend recorder (``backend=False``) time
inside torch ops counts as Python, so both rules need backend time somewhere in the run before they
trust a Python share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlscope.analysis.advice.base import Facts, Finding, count, pct, secs, words_of
from rlscope.analysis.advice.gpu_idle import POLICY_WORDS

__all__ = ["MIN_CALLS", "PYTHON_SHARE", "UPDATE_WORDS", "python_backprop", "python_inference"]

PYTHON_SHARE = 0.50
"""Python's share of the operation's own CPU time above which it is Python-dominated: more of it goes to
the interpreter than to torch ops, CUDA calls and the simulator together."""

MIN_CALLS = 10
"""Calls an operation needs before its Python share is a habit of the loop, not a one-off setup."""

UPDATE_WORDS = frozenset({"backprop", "update", "train", "learn", "learner", "optimize", "loss", "sgd"})
"""Words of an operation name that mark the learner update (rlscope's automatic ``backprop``, the
stable-baselines3 adapter's ``update``, user scopes such as ``train_step``)."""


def _python_dominated(facts: Facts, words: frozenset[str]) -> list[tuple[str, Mapping[str, Any], str]]:
    """(name, operation, evidence) of the operations named with ``words`` whose own time is mostly Python."""
    if float((facts.summary.get("categories") or {}).get("backend", 0.0)) <= 0:
        return []
    out = []
    for name, op in facts.operations():
        if not words_of(name) & words:
            continue
        excl = float(op.get("exclusive_s", 0.0))
        py = facts.cpu_s(op, "python")
        calls = int(op.get("calls", 0))
        if excl <= 0 or calls < MIN_CALLS or py < PYTHON_SHARE * excl:
            continue
        total = float(op.get("total_s", 0.0))
        backend, api = facts.cpu_s(op, "backend"), facts.cpu_s(op, "cuda_api")
        evidence = (
            f"{name} took {secs(total)} over {count(calls)} calls ({secs(total / calls)} each);"
            f" {pct(py, excl)} of its own time is Python ({secs(py)}), {pct(backend, excl)} torch ops"
            + (f", {pct(api, excl)} CUDA API calls" if api > 0 else "")
        )
        out.append((name, op, evidence))
    return out


def python_backprop(facts: Facts) -> list[Finding]:
    """Per update operation whose own time is mostly Python, when the trace records torch ops.

    Time at stake: the update's Python time, which compiled or batched code mostly removes.
    """
    change = (
        "fewer, larger minibatches (one optimizer step does more work), torch.compile the loss and"
        " update, a fused optimizer (torch.optim.Adam(..., fused=True) on the GPU, foreach=True on the"
        " CPU), and no per-sample Python loops or .item() inside the update"
    )
    return [
        Finding("python_backprop", name, evidence, facts.cpu_s(op, "python"), change)
        for name, op, evidence in _python_dominated(facts, UPDATE_WORDS)
    ]


def python_inference(facts: Facts) -> list[Finding]:
    """Per acting operation whose own time is mostly Python, when the trace records torch ops.

    Time at stake: its Python time. A call's Python cost hardly grows with the batch, so k times more
    envs per forward pass spends (1 - 1/k) of it less for the same env steps: all of it, as k grows.
    """
    change = (
        "step more envs per forward pass (each call's Python cost is paid once for the whole batch),"
        " convert observations once per batch, not per env, and torch.compile the policy's forward and"
        " action sampling"
    )
    return [
        Finding("python_inference", name, evidence, facts.cpu_s(op, "python"), change)
        for name, op, evidence in _python_dominated(facts, POLICY_WORDS)
    ]
