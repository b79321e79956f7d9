"""One process's correction in one call: what the per-process analysis gets back to aggregate.

Why one call: its steps depend on one another. The residual per-event costs leave out the classes
the windows measure, and the windows are estimated on the residual-corrected timeline; windows that
measured nothing send it back to the calibrated costs; GPU work moves with its launches through both
corrections; and what the summary reports of it reads all of them. The analysis hands over a
process's timeline and builds its corrected breakdown from the :class:`Corrected` it gets back
(rlscope/analysis/breakdown.py), with the same aggregation as the raw one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rlscope.analysis.timeline import Timeline
from rlscope.overhead.correct import module_calls, residual, windows
from rlscope.overhead.correct.full_windows import (
    FullFraction,
    GpuScale,
    full_fraction,
    gpu_scale,
    nominal_full_share,
    thin_full_windows,
)
from rlscope.overhead.correct.residual import Correction, EventCosts
from rlscope.overhead.correct.window_notes import window_info, window_notes
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace
from rlscope.trace.schema import CostClass

# the note of a run whose windows measured no operation (WindowEstimate.measured), and its end: the
# calibrated per-event costs removed instead, or none to remove (no calibration of those classes)
UNMEASURED = (
    "collector cost not measured by the windows: no operation ran often enough in both kinds of"
    " window (too few switches for this run's length); "
)
REMOVED = "the calibrated per-event costs were removed instead"
NOT_REMOVED = "no calibrated per-event cost applies either, so the collectors' cost is left in"


@dataclasses.dataclass
class Corrected:
    """A process's timeline with rlscope's cost removed, and what its corrected breakdown needs besides."""

    timeline: Timeline  # residual costs removed, then what the windows measured
    costs: EventCosts  # the per-event costs removed: less the classes the windows measured, at run speed
    overhead: dict[str, Any]  # the breakdown's ``overhead``: what was removed, notes, the windows' evidence
    gpu_shift_ns: np.ndarray | None = None  # per GPU record: how much earlier it ran (None: no launches)
    # per row of ``timeline``: the share of it that ran in full windows (:func:`full_fraction`; its
    # ``column`` of the raw rows' starts), whose category split stands for the run (None: as recorded)
    full_fraction: FullFraction | None = None
    gpu_scale: GpuScale | None = None  # GPU figures recorded in full windows only (None: as recorded)
    scaled_from_full_windows: bool | None = None  # the breakdown's gpu entry (None: GPU tracing not switched)


def correct_process(
    proc: ProcessTrace, tl: Timeline, costs: EventCosts, launches: tuple[np.ndarray, np.ndarray] | None = None
) -> Corrected:
    """``proc``'s timeline ``tl`` corrected for the calibrated ``costs`` and its own windows.

    ``launches``: (thread, time) of each GPU record's launch on ``tl``'s clock
    (:func:`rlscope.analysis.gpu.launch_points`); GPU work keeps its durations and moves with them.
    """
    nvml_samples = proc.nvml.num_rows if proc.nvml is not None else 0
    switched = windows.toggled(tl)
    moving = launches is not None  # GPU launches to move: each correction keeps its ratios for them
    run_ref_ns = residual.run_reference_ns(proc.events)

    def remove(measured: bool) -> tuple[EventCosts, list[str], Correction]:
        """The per-event correction: without the classes the windows measure when ``measured``."""
        used = residual.without(
            costs, backend=switched["backend"] and measured, cuda_api=switched["gpu"] and measured
        )
        used = residual.at_run_speed(used, run_ref_ns)
        mem_times, mem_notes = residual.memory_times(proc, used)
        mods = module_calls.spread(
            proc, tl, used.module_call_ns
        )  # a column, or what spreads it over the rows
        if mods.any() and module_calls.ENTRY not in used.used:
            mem_notes.append(
                f"{module_calls.ENTRY} not calibrated on this machine: the automatic operations' module"
                f" calls are priced at the default {used.module_call_ns:.0f} ns each (`rlscope calibrate`)"
            )
        fix = residual.correct_timeline(tl, used, nvml_samples, mem_times, mods, keep_ratio=moving)
        return used, mem_notes, fix

    # what the windows measure in the run is not subtracted again per event; a process without any
    # operation gives the windows nothing to compare, and keeps the calibrated per-event costs
    measurable = bool((tl.kind[tl.scope_begins()] == S.OP_BEGIN).any())
    used, mem_notes, fix = remove(measurable)
    est = windows.estimate(fix.timeline, raw=tl)
    if measurable and est is not None and not est.measured and (switched["backend"] or switched["gpu"]):
        # the windows measured nothing after all (WindowEstimate.measured): the calibrated costs
        used, mem_notes, fix = remove(False)
        est = windows.estimate(fix.timeline, raw=tl)
        if est is not None:
            est.notes = [n for n in est.notes if not n.startswith(windows.NOT_MEASURABLE)]
            est.notes.append(UNMEASURED + (REMOVED if _has_costs(used, switched) else NOT_REMOVED))
    fixes = [(tl, fix)]
    if est is not None:
        # the estimate's factors, a column of every row, are read once (their memory takes the time gone)
        factor, est.factor = est.factor, np.zeros(0)
        # without launches to move the residual-corrected timeline is read no further: its columns
        # take the new times (the analysis's peak of memory)
        windows_fix = residual.correct_windows(
            fix.timeline, factor, keep_ratio=moving, consume=not moving, row_mode=est.row_mode
        )
        est.main_mode_ns = windows_fix.main_mode_ns
        fixes.append((fix.timeline, windows_fix))
        del factor
    final = fixes[-1][1].timeline
    out = Corrected(final, used, {}, gpu_shift_ns=_gpu_shift(fixes, launches))
    removed = dict(fix.removed_s)
    if est is not None:
        removed.update(fixes[-1][1].removed_s)
    background, clamped, writer_stall = fix.background_share, fix.clamped_s, fix.writer_stall
    # the timeline between the corrections and each one's ratios (columns of every row) are read no
    # further: let go before the passes over the rows below and the rest of the analysis
    del fixes, fix
    notes = list(used.notes) + mem_notes
    info: dict[str, Any] = {}
    if est is not None:
        notes += est.notes + window_notes(est, proc.names)
        info = window_info(est, proc.names, final, switched)
        share = nominal_full_share(final)
        thin = thin_full_windows(share, proc.metadata, switched)
        if thin is not None:  # too little seen with the collectors on to stand for the run
            notes.append(thin)
            out.scaled_from_full_windows = False if switched["gpu"] else None
        else:
            out.full_fraction = full_fraction(tl)  # the raw rows: the corrected timeline keeps their order
            if switched["gpu"]:
                out.gpu_scale = gpu_scale(est, proc.names, share)
                out.scaled_from_full_windows = True
    # each raw row's window (windows.row_window) is read by the correction alone: a column of every
    # row the rest of the analysis does not hold
    tl.memo.pop("row_window", None)
    out.overhead = {
        "removed_s": removed,
        "wall_removed_s": (tl.end_ns - tl.start_ns) / 1e9 - (final.end_ns - final.start_ns) / 1e9,
        "background_share": background,
        "not_removable_s": clamped,
        "costs_used": used.used,
        "notes": notes,
        "windows": info,
        "writer_stall": writer_stall,
        "reference_loop_ns": run_ref_ns,
    }
    return out


def _gpu_shift(
    fixes: list[tuple[Timeline, Correction]], launches: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray | None:
    """Per GPU record: how much earlier its launch falls on the corrected clock than on the raw one."""
    if launches is None:
        return None
    thread, at = launches
    moved_at = at
    for before, f in fixes:
        moved_at = f.remap(before, thread, moved_at)
    return at - moved_at


def _has_costs(costs: EventCosts, switched: dict[str, bool]) -> bool:
    """Whether ``costs`` removes anything per event of the collectors the windows switched."""
    classes = [
        c for c, on in ((CostClass.BACKEND, switched["backend"]), (CostClass.CUDA_API, switched["gpu"])) if on
    ]
    return any(costs.inside[c] + costs.outside[c] > 0 for c in classes)
