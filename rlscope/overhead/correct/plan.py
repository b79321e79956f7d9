"""Which overhead correction a trace gets: the calibration's costs, the run's windows only, the
boundaries' own measurements only, or none.

The plan is chosen once per trace before any process is aggregated (every process must match the
same calibration), and says in ``info`` and ``warnings`` what the summary reports about it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlscope.overhead.correct.residual import EventCosts
from rlscope.trace.reader import ProcessTrace

__all__ = ["CorrectionPlan", "has_light_windows", "plan"]


@dataclasses.dataclass(frozen=True)
class CorrectionPlan:
    """Per process, the residual costs to remove (None: raw figures only), and what to report."""

    costs: list[EventCosts | None]
    info: dict[str, Any]  # the summary's "calibration" section
    warnings: list[str]  # said before the correction's own notes

    @property
    def corrected(self) -> bool:
        return any(c is not None for c in self.costs)


def has_light_windows(proc: ProcessTrace) -> bool:
    """Whether the session switched its expensive collectors off for part of the run."""
    from rlscope.trace import schema as S

    ev = proc.events
    light = (ev.column("kind").to_numpy() == S.WINDOW) & (ev.column("id").to_numpy() == S.WINDOW_LIGHT)
    return bool(light.any())


# the C scope methods measure their own cost from this ABI on (collectors/scope_native.c)
SELF_TIMED_ABI = 5


def self_timed(metadata: dict[str, str]) -> bool:
    """Whether the process's boundaries stamped their measured cost into its events (the C scope
    methods, ABI 5 on: the trace's ``scopes`` field is ``native-<ABI>`` or ``native-full-<ABI>``; the
    Python methods do not)."""
    scopes = metadata.get("scopes", "")
    abi = scopes.rpartition("-")[2]
    return scopes.startswith("native-") and abi.isdigit() and int(abi) >= SELF_TIMED_ABI


def plan(
    metadata: list[dict[str, str]],
    light_windows: list[bool],
    calibration: str | None = None,
    correct: bool = True,
) -> CorrectionPlan:
    """The correction for a trace: a matching calibration's costs, else the windows alone, else the
    boundaries' own measurements alone, else none.

    ``metadata``: each process's; ``light_windows``: whether each switched its expensive collectors
    off for part of the run (:func:`has_light_windows`; known before any process is analyzed, so the
    plan can be handed to workers). ``calibration``: a calibration file to use instead of the one
    embedded in the trace or found for its machine and stack (rlscope.overhead.correct.calibration.for_trace).
    ``correct=False``: raw figures only.
    """
    from rlscope.overhead.correct import calibration as cal_mod
    from rlscope.overhead.correct.residual import costs_for

    # the calibration embedded in the trace first (the costs it was recorded with), unless a file
    # is named; else the cache's for the trace's machine and stack (calibration.for_trace)
    cal, why = (None, None) if not correct else cal_mod.for_trace(metadata[0], calibration)
    if cal is not None:
        for meta in metadata[1:]:
            other, why = cal_mod.for_trace(meta, calibration)
            if other is None or not cal_mod.same(other, cal):
                pid = int(meta.get("pid", "0") or 0)
                cal, why = None, f"process {pid}: {why or 'another calibration than process 0'}"
                break
    if cal is None and correct and any(light_windows):
        # the collectors' cost is measured in the run itself, and so is what each scope and
        # category boundary cost (where it measured itself); the dispatch around the boundaries and
        # the writer's stall would need a calibration
        return CorrectionPlan(
            costs=[EventCosts.measured_only() for _ in metadata],
            info={"status": "windows only", "reason": why or ""},
            warnings=[f"residual per-event costs removed only as boundaries measured them: {why}"],
        )
    if cal is None and correct and all(self_timed(m) for m in metadata):
        # no windows either (scopes only, or windows=False): what each boundary measured of itself
        # is still this run's own measurement, and leaving it in reads every operation high
        return CorrectionPlan(
            costs=[EventCosts.measured_only() for _ in metadata],
            info={"status": "boundaries only", "reason": why or ""},
            warnings=[
                "only what the scope and category boundaries measured of themselves is removed (no"
                f" light windows measured the collectors, no calibration the rest): {why}"
            ],
        )
    if cal is None:
        return CorrectionPlan(
            costs=[None for _ in metadata],
            info={"status": "off" if not correct else "none", "reason": why or "raw figures requested"},
            warnings=[f"figures are uncorrected: {why}"] if why else [],
        )
    # a native cost calibrated in the host's slow regime, priced at the machine's fastest known speed
    cal, repriced = cal_mod.at_machine_speed(cal, cal_mod.machine_fastest_for(cal, metadata[0]))
    info = {
        "status": "applied",
        "path": cal["path"],
        "source": "file" if calibration else "trace" if cal["path"] == cal_mod.EMBEDDED else "cache",
        "created": cal.get("created", ""),
        "key": cal["key"],
        "costs_ns": cal["costs_ns"],
        "refused": cal.get("refused", []),
    }
    if repriced:
        info["repriced"] = repriced
    costs = [costs_for(cal, meta) for meta in metadata]
    for c in costs:
        c.notes.extend(repriced)
    return CorrectionPlan(costs=costs, info=info, warnings=[])
