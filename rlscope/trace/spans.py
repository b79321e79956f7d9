"""Time spans as numpy arrays: their union per thread, and how much of them lies before a time.

Shared by the analysis (GPU busy time, compilations, CUDA API calls) and the trace writer's fold
(compilations in the aggregates, rlscope/trace/aggregate.py), which may not import the analysis.
"""

from __future__ import annotations

import numpy as np


def union_per_thread(
    thread: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint intervals covering the same time, per thread (nested runtime/driver calls merge),
    sorted by thread, then start."""
    if len(thread) == 0:
        return thread, start, end
    order = np.lexsort((start, thread))
    t, s, e = thread[order], start[order], end[order]
    # running max of end within a thread: a new interval starts where start > that max
    new_thread = np.ones(len(t), bool)
    new_thread[1:] = t[1:] != t[:-1]
    # cummax restarting per thread: offset each thread's values above the previous thread's
    offset = np.cumsum(new_thread) * (int(e.max()) - int(s.min()) + 1)
    reach = np.maximum.accumulate(e + offset) - offset
    new = new_thread.copy()
    new[1:] |= s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(t) - 1)
    return t[first], s[first], reach[last]


def covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time in ``t``, how much of the sorted, disjoint intervals ``[s, e)`` lies before it (in
    their units: exact for integer nanoseconds)."""
    if len(s) == 0:
        return np.zeros(len(t), np.asarray(e).dtype)
    cum = np.concatenate([[0], np.cumsum(e - s)])
    i = np.searchsorted(s, t, side="right")  # intervals starting at or before t
    last = np.maximum(i - 1, 0)
    partial = np.where(i > 0, np.minimum(t, e[last]) - s[last], 0)
    return np.where(i > 0, cum[last] + np.maximum(partial, 0), 0)
