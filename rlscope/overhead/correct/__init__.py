"""Plan and apply the correction of rlscope's own cost: what the analysis imports.

The public entry: :func:`plan_correction` (which correction a trace gets: a calibration's costs,
the run's windows alone, or none, and why) and :func:`apply_correction` (a process's timeline with
the residual per-event costs removed). The parts: ``plan``, ``residual``, ``windows``,
``flush_stall``, ``reference`` and ``calibration`` (the calibration file).

Imported lazily: the session imports ``reference`` and ``calibration`` at ``import rlscope``, and
must not pay for numpy or pyarrow there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from rlscope.analysis.timeline import Timeline
    from rlscope.overhead.correct.plan import CorrectionPlan
    from rlscope.overhead.correct.residual import Correction, EventCosts


def plan_correction(
    metadata: list[dict[str, str]],
    light_windows: list[bool],
    calibration: str | None = None,
    correct: bool = True,
) -> CorrectionPlan:
    """The correction for a trace (:func:`rlscope.overhead.correct.plan.plan`)."""
    from rlscope.overhead.correct import plan

    return plan.plan(metadata, light_windows, calibration, correct)


def apply_correction(
    tl: Timeline, costs: EventCosts, nvml_samples: int = 0, memory: np.ndarray | None = None
) -> Correction:
    """A process's timeline with rlscope's residual costs removed
    (:func:`rlscope.overhead.correct.residual.correct_timeline`)."""
    from rlscope.overhead.correct import residual

    return residual.correct_timeline(tl, costs, nvml_samples, memory)
