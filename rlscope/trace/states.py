"""The state each event row leaves its thread in, forward-filled along the thread.

Each row says what the thread's state is *after* it: a begin makes its id current, an end makes
its parent current. Shared by the writer's fold (rlscope/trace/aggregate.py) and the analysis's
timeline (rlscope/analysis/timeline.py), so both read a trace's rows by one rule.
"""

from __future__ import annotations

import numpy as np

from rlscope.blocks import search_sorted


def state_after(changed: np.ndarray, after: np.ndarray, first: np.ndarray, default: int) -> np.ndarray:
    """Forward-fill ``after`` from the ``changed`` rows (rows grouped by thread, in time order); each
    thread's first row restarts at ``default`` unless it changes the state itself."""
    rows = np.flatnonzero(changed)
    return state_after_rows(rows, after[rows], first, default)


def state_after_rows(rows: np.ndarray, values: np.ndarray, first: np.ndarray, default: int) -> np.ndarray:
    """:func:`state_after` given the changed ``rows`` (sorted) and the state after each of them only:
    a caller whose changes are a few rows in millions reads their states, not a column of all rows."""
    # each run from a marked row to the next is one value, repeated: a pass over the marked rows only
    # (few, for most states), not a running maximum and a gather over every row
    marker = first.copy()
    marker[rows] = True
    marker[:1] = True  # rows before any mark hold the default
    at = np.flatnonzero(marker)
    held = np.full(len(at), default, values.dtype)
    held[search_sorted(at, rows)] = values
    return np.repeat(held, np.diff(at, append=len(marker)))
