"""Python-dominated operations: the learner update, or acting with the policy, spends its time in the
interpreter around the tensor ops.

With a small network the tensor work is tiny and the Python around it (minibatch slicing, loss terms op
by op, per-parameter optimizer steps, distribution objects per step) is what the clock sees. Without the
backend recorder (``backend=False``) time inside torch ops counts as Python, so both rules need backend
time somewhere in the run before they trust a Python share. The change is said in the library's words
(:mod:`rlscope.analysis.advice.changes`), and where stack samples were taken the evidence names the line
the Python time is spent on rather than guessing what that line does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlscope.analysis.advice import program
from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs
from rlscope.analysis.advice.changes import acting_change, update_change
from rlscope.analysis.advice.gpu_idle import POLICY_WORDS, UPDATE_WORDS

__all__ = ["MIN_CALLS", "PYTHON_SHARE", "UPDATE_WORDS", "python_backprop", "python_inference", "where_python"]

PYTHON_SHARE = 0.50
"""Python's share of the operation's own CPU time above which it is Python-dominated: more of it goes to
the interpreter than to torch ops, CUDA calls and the simulator together. A share must clear it by the
margin (:data:`~rlscope.analysis.advice.base.SHARE_MARGIN`): typical RL code sits near 50%, and a line
there without a band fired on one run of a command and not on the next."""

MIN_CALLS = 10
"""Calls an operation needs before its Python share is a habit of the loop, not a one-off setup."""


PY = ("python",)  # the time these rules put at stake (Finding.parts)


def where_python(facts: Facts, name: str) -> str:
    """The evidence's clause naming the program's line with most of the operation's Python samples:
    in a script's own loop (empty without samples, and under a library, where the program's line is its
    one call into the library's loop)."""
    line = program.top_python_line(facts.summary, name)
    if line is None or facts.library != program.SCRIPT:
        return ""
    where = "/".join(str(line.get("file", "?")).replace("\\", "/").split("/")[-2:])
    return (
        f"; most of its Python samples at {where}:{line.get('line')} in {line.get('function')}"
        f" ({pct(float(line.get('share', 0.0)), 1.0)})"
    )


def _python_dominated(facts: Facts, words: frozenset[str]) -> list[tuple[str, Mapping[str, Any], str]]:
    """(name, operation, evidence) of the operations named with ``words`` whose own time is clearly
    mostly Python."""
    if not facts.has_backend():
        return []
    out = []
    for name, op in facts.operations_named(words, MIN_CALLS):
        excl = float(op["exclusive_s"])
        py = facts.cpu_s(op, "python")
        calls = int(op["calls"])
        if not clears(py / excl, PYTHON_SHARE, sd=facts.noise_s(op, "python") / excl):
            continue
        total = float(op.get("total_s", 0.0))
        backend, api = facts.cpu_s(op, "backend"), facts.cpu_s(op, "cuda_api")
        evidence = (
            f"{name} took {secs(total)} over {count(calls)} calls ({secs(total / calls)} each);"
            f" {pct(py, excl)} of its own time is Python ({secs(py)}), {pct(backend, excl)} torch ops"
            + (f", {pct(api, excl)} CUDA API calls" if api > 0 else "")
            + where_python(facts, name)
        )
        out.append((name, op, evidence))
    return out


def python_backprop(facts: Facts) -> list[Finding]:
    """Per update operation whose own time is clearly mostly Python, when the trace records torch ops.

    Time at stake: the update's Python time, which compiled or batched code mostly removes.
    """
    return [
        Finding(
            "python_backprop", name, evidence, facts.cpu_s(op, "python"), update_change(facts, name), parts=PY
        )
        for name, op, evidence in _python_dominated(facts, UPDATE_WORDS)
    ]


def python_inference(facts: Facts) -> list[Finding]:
    """Per acting operation whose own time is clearly mostly Python, when the trace records torch ops.

    Time at stake: its Python time. A call's Python cost hardly grows with the batch, so k times more
    envs per forward pass spends (1 - 1/k) of it less for the same env steps: all of it, as k grows.
    """
    return [
        Finding(
            "python_inference",
            name,
            evidence,
            facts.cpu_s(op, "python"),
            acting_change(facts, name),
            parts=PY,
        )
        for name, op, evidence in _python_dominated(facts, POLICY_WORDS)
    ]
