"""Measure rlscope's per-event costs on this machine and store them (``rlscope calibrate``).

The public entry is :func:`run_calibration`. The parts: ``workloads`` (the micro-workloads and
how a round times them), ``rounds`` (rounds until stable, the machine's speed), ``store`` (what is
stored, what is refused), ``measure`` (one measurement per kind of event), ``memory`` (the GPU
memory recorder's, one child process a round), ``run`` (every cost, the file's contents) and
``cli``. The file itself is read and written by :mod:`rlscope.overhead.correct.calibration`, which
the analysis uses.

Imported lazily: a measuring child process (``memory``) pays for nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def run_calibration(
    rounds: int | None = None,
    scale: float | None = None,
    gpu: bool = True,
    log: Callable[[str], None] = print,
    *,
    quick: bool = False,
    budget_s: float | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure every event cost until stable; the calibration dict (:mod:`.run` says how)."""
    from rlscope.overhead.calibrate import run

    extra = {} if warn is None else {"warn": warn}
    return run.run_calibration(rounds, scale, gpu, log, quick=quick, budget_s=budget_s, **extra)
