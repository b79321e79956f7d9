"""Timelines on other clocks for the tests: a timeline's segments end where the next row on their
thread starts (rlscope.analysis.timeline.Timeline), so a timeline with other durations is its rows
laid out again from each thread's first time, not its ends moved."""

from __future__ import annotations

import numpy as np

from rlscope.analysis.timeline import Timeline


def stretched(tl: Timeline, extra: np.ndarray | int, shift: int = 0) -> Timeline:
    """``tl``'s rows with each segment ``extra`` ns longer (per row, or one for all; a segment never
    below 0 ns), every thread starting ``shift`` ns later."""
    dur = tl.seg_end - tl.ts
    dur = np.maximum(dur + np.broadcast_to(np.asarray(extra, np.int64), dur.shape), 0)
    ts = np.empty_like(tl.ts)
    starts = tl.thread_starts()
    for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        ts[a:b] = tl.ts[a] + shift + np.concatenate([[0], np.cumsum(dur[a : b - 1])])
    seg_end = np.empty_like(ts)
    seg_end[:-1] = ts[1:]
    last = tl.thread_last()
    seg_end[last] = ts[last] + dur[last]
    return tl.retimed(ts, seg_end)
