"""Advice: ranked findings over one analysis, each naming a change, its evidence in this trace and the
time at stake.

One module per rule family (Holistic Trace Analysis' one-analyzer-per-module habit); each rule is a pure
function of :class:`~rlscope.analysis.advice.base.Facts` (the summary and the per-operation CUDA API
evidence of :mod:`rlscope.analysis.gpu_calls`) with its thresholds as named, documented constants.
:func:`advise` runs them all and ranks what they find; the analysis stores the result in the summary's
``advice`` list and the renderers show it (the table's footer, the HTML report's first section).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from rlscope.analysis.advice.backprop import backprop_bound
from rlscope.analysis.advice.base import Facts, Finding, secs
from rlscope.analysis.advice.copies import pageable_copies
from rlscope.analysis.advice.gpu_idle import gpu_idle_small_policy
from rlscope.analysis.advice.launch import launch_bound
from rlscope.analysis.advice.python_time import python_backprop, python_inference
from rlscope.analysis.advice.simulation import simulation_bound
from rlscope.analysis.advice.stragglers import role_stragglers, worker_stragglers
from rlscope.analysis.advice.syncs import device_to_host_sync
from rlscope.analysis.advice.threads import intra_op_oversubscription
from rlscope.analysis.gpu_calls import GpuCalls

__all__ = ["MIN_STAKE_SHARE", "RULES", "SUPERSEDES", "Facts", "Finding", "advise", "findings"]

Rule = Callable[[Facts], list[Finding]]

RULES: tuple[Rule, ...] = (
    gpu_idle_small_policy,
    simulation_bound,
    launch_bound,
    device_to_host_sync,
    pageable_copies,
    worker_stragglers,
    role_stragglers,
    python_backprop,
    python_inference,
    backprop_bound,
    intra_op_oversubscription,
)

MIN_STAKE_SHARE = 0.01
"""Findings whose time at stake is under this share of the run's wall are left out: a change that wins
back less than 1% is lost in run-to-run noise and not worth a researcher's time."""

SUPERSEDES = {
    "gpu_idle_small_policy": ("launch_bound", "python_inference", "python_backprop", "backprop_bound"),
    "intra_op_oversubscription": ("backprop_bound",),
    "python_backprop": ("backprop_bound",),
}
"""A finding of the key's rule hides the value rules' findings on the operations it speaks for (its own
and its ``covers``): a small policy on the GPU is one problem (its launches and the Python that drives
them), and acting and learning on the CPU is the one change for those seconds; an update slowed by its
intra-op threads is theirs to fix first; a Python-dominated update has the more specific finding."""


def on_the_critical_path(facts: Facts, found: Finding) -> Finding:
    """``found`` with its stake at most what the run's what-if says making its time infinitely fast
    saves (the time it names that overlapped other work or waited on it does not shorten the run).

    Why: a rule's stake is the time a change removes from an operation; the run is shorter by that only
    where the time lay on the critical path. The what-if replays the run to tell (whatif.saving)."""
    from rlscope.analysis import whatif

    w = facts.summary.get("what_if")
    if not w or not found.parts or not found.operation:
        return found
    saved = [whatif.saving(w, found.operation, part) for part in found.parts]
    if any(s is None for s in saved):
        return found
    cap = float(sum(s for s in saved if s is not None))
    if cap >= found.seconds_at_stake * (1 - 1e-9):
        return found
    evidence = (
        f"{found.evidence}; the run's what-if: at most {secs(cap)} shorter were that time gone"
        f" ({', '.join(found.parts)} off the critical path for the rest)"
    )
    return dataclasses.replace(found, seconds_at_stake=cap, evidence=evidence)


def findings(facts: Facts) -> list[Finding]:
    """Every rule's findings worth saying, most time at stake first (ties: rule, then operation)."""
    found = [on_the_critical_path(facts, f) for rule in RULES for f in rule(facts)]
    hidden = {(r, op) for f in found for r in SUPERSEDES.get(f.rule, ()) for op in (f.operation, *f.covers)}
    floor = MIN_STAKE_SHARE * facts.wall_s
    kept = [
        _with_hidden(f, found)
        for f in found
        if (f.rule, f.operation) not in hidden and f.seconds_at_stake > 0 and f.seconds_at_stake >= floor
    ]
    return sorted(kept, key=lambda f: (-f.seconds_at_stake, f.rule, f.operation))


def _with_hidden(f: Finding, found: list[Finding]) -> Finding:
    """``f`` with the findings it supersedes (SUPERSEDES) on the operations it speaks for."""
    rules, ops = SUPERSEDES.get(f.rule, ()), (f.operation, *f.covers)
    hides = tuple(
        (g.rule, g.operation, g.seconds_at_stake)
        for g in found
        if g.rule in rules and g.operation in ops and g.seconds_at_stake > 0
    )
    return dataclasses.replace(f, hides=hides) if hides else f


def advise(summary: Mapping[str, Any], gpu_calls: GpuCalls | None = None) -> list[dict[str, Any]]:
    """The summary's ``advice`` list: ``{"rule", "operation", "evidence", "seconds_at_stake", "change"}``
    per finding, ranked by ``seconds_at_stake``, and ``hides`` (the findings it superseded) where any."""
    return [f.as_dict() for f in findings(Facts(summary, gpu_calls or {}))]
