"""A profiled run's main-thread speed in its light windows and in its full windows.

Why: ``rlscope validate`` sets every run's times at one main-thread speed (speed_adjust.py), read
by the speed probe (speed_probe.py). In a profiled run the probe's samples fall in both kinds of
window; the unprofiled runs it is compared with are closer to the light state, whose own cost is
~2%, than to the full one, where GPU tracing keeps the main thread in CUPTI's callbacks instead of
waiting for the GPU. This module splits a profiled run's samples by the trace's windows, so the
result can say what each kind of window read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlscope.errors import RLScopeError
from rlscope.overhead.correct import windows
from rlscope.overhead.validate import speed_probe
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace

_END = 2**63 - 1


def window_spans(
    trace_dir: str | Path, pid: int | None = None, end: int = _END
) -> dict[int, list[tuple[int, int]]]:
    """The light and full windows of process ``pid`` in ``trace_dir`` (None: its first process), as
    (start, end) clock readings per kind (``S.WINDOW_LIGHT``, ``S.WINDOW_FULL``); the last window
    runs to ``end`` (default: the end of time, for samples taken inside the session only)."""
    procs = load_trace(trace_dir, light=True).processes
    proc = next((p for p in procs if p.pid == pid), procs[0])
    starts, ends, mode = windows.window_spans(proc.events, end)
    return {
        kind: list(zip(starts[mode == kind].tolist(), ends[mode == kind].tolist(), strict=True))
        for kind in (S.WINDOW_LIGHT, S.WINDOW_FULL)
    }


def levels(
    samples: Sequence[Sequence[float]], trace_dir: str | Path, pid: int | None = None
) -> dict[str, dict[str, float] | None] | None:
    """The probe's level ({ns_per_iteration, samples}, or None) in the light and in the full windows
    of a profiled run, from its ``samples`` ([clock reading, ns per iteration]); None where the
    trace cannot be read or holds no windows."""
    try:
        spans = window_spans(trace_dir, pid)
    except RLScopeError:
        return None
    if not spans[S.WINDOW_LIGHT] and not spans[S.WINDOW_FULL]:
        return None
    return {
        "light": speed_probe.level(samples, spans[S.WINDOW_LIGHT]),
        "full": speed_probe.level(samples, spans[S.WINDOW_FULL]),
    }
