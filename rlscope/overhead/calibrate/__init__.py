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

from typing import Any

__all__ = ["run_calibration"]


def __getattr__(name: str) -> Any:
    """``run_calibration`` from :mod:`.run`, imported on first use (PEP 562)."""
    if name == "run_calibration":
        from rlscope.overhead.calibrate.run import run_calibration

        return run_calibration
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
