"""The correction of rlscope's own cost: the one entry the analysis imports (none of the modules below).

Three calls: :func:`plan_correction` once per trace (which correction it gets: a calibration's costs,
the run's windows alone, or none, and why), :func:`correct_process` once per process (its
timeline with rlscope's cost removed, and all its corrected breakdown needs besides:
:class:`~rlscope.overhead.correct.process.Corrected`), and :func:`module_calls_between_stretches`
(the automatic operations' module-call cost in the time a long run keeps as aggregates). Besides
them, the names those take and give (``CorrectionPlan``, ``EventCosts``, ``Corrected``,
``GpuScale``), what the analysis reads of the windows before and beside the correction
(``has_light_windows``, ``window_spans``) and the share of the writer's flushes that stalls the job
where the run cannot measure it (``ASSUMED_STALL_SHARE``).

The parts: ``plan``, ``process`` (one process's correction), ``residual`` (per-event costs),
``module_calls`` (the automatic operations' module-call wrapper), ``windows`` and ``pieces``
(what the expensive collectors cost in this run), ``full_windows`` and
``window_notes`` (what the full windows stand for, what the summary says of them), ``flush_stall``,
``reference`` and ``calibration`` (the calibration file).

Loaded lazily: the session imports ``reference`` and ``calibration`` at ``import rlscope``, and must
not pay for numpy or pyarrow there; the names above load their modules on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from rlscope.analysis.timeline import Timeline
    from rlscope.overhead.correct.flush_stall import ASSUMED as ASSUMED_STALL_SHARE
    from rlscope.overhead.correct.full_windows import FullFraction, GpuScale
    from rlscope.overhead.correct.plan import CorrectionPlan, has_light_windows
    from rlscope.overhead.correct.process import Corrected
    from rlscope.overhead.correct.residual import EventCosts
    from rlscope.overhead.correct.windows import window_spans
    from rlscope.trace.reader import ProcessTrace

__all__ = [
    "ASSUMED_STALL_SHARE",
    "Corrected",
    "CorrectionPlan",
    "EventCosts",
    "FullFraction",
    "GpuScale",
    "correct_process",
    "has_light_windows",
    "module_calls_between_stretches",
    "plan_correction",
    "window_spans",
]


def plan_correction(
    metadata: list[dict[str, str]],
    light_windows: list[bool],
    calibration: str | None = None,
    correct: bool = True,
) -> CorrectionPlan:
    """The correction for a trace (:func:`rlscope.overhead.correct.plan.plan`)."""
    from rlscope.overhead.correct import plan

    return plan.plan(metadata, light_windows, calibration, correct)


def correct_process(
    proc: ProcessTrace, tl: Timeline, costs: EventCosts, launches: tuple[np.ndarray, np.ndarray] | None = None
) -> Corrected:
    """One process's timeline corrected for ``costs`` and its own windows, and what its corrected
    breakdown needs besides (:func:`rlscope.overhead.correct.process.correct_process`)."""
    from rlscope.overhead.correct import process

    return process.correct_process(proc, tl, costs, launches)


def module_calls_between_stretches(proc: ProcessTrace, costs: EventCosts) -> np.ndarray:
    """Per row of ``proc``'s aggregates: the automatic operations' module-call cost (ns) in the
    time between the detail stretches (:func:`rlscope.overhead.correct.module_calls.summary_cut`)."""
    from rlscope.overhead.correct import module_calls

    return module_calls.summary_cut(proc, costs.module_call_ns)


# the names re-exported from the modules, loaded on first use
_LAZY = frozenset(__all__) - {"correct_process", "plan_correction", "module_calls_between_stretches"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:  # a submodule not imported yet, or no such name
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rlscope.overhead.correct import flush_stall, full_windows, plan, process, residual, windows

    found = {
        "ASSUMED_STALL_SHARE": flush_stall.ASSUMED,
        "Corrected": process.Corrected,
        "CorrectionPlan": plan.CorrectionPlan,
        "EventCosts": residual.EventCosts,
        "FullFraction": full_windows.FullFraction,
        "GpuScale": full_windows.GpuScale,
        "has_light_windows": plan.has_light_windows,
        "window_spans": windows.window_spans,
    }
    return found[name]
