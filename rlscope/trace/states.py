"""The state each event row leaves its thread in, forward-filled along the thread.

Each row says what the thread's state is *after* it: a begin makes its id current, an end makes
its parent current. Shared by the writer's fold (rlscope/trace/aggregate.py) and the analysis's
timeline (rlscope/analysis/timeline.py), so both read a trace's rows by one rule.
"""

from __future__ import annotations

import numpy as np


def state_after(changed: np.ndarray, after: np.ndarray, first: np.ndarray, default: int) -> np.ndarray:
    """Forward-fill ``after`` from the ``changed`` rows (rows grouped by thread, in time order); each
    thread's first row restarts at ``default`` unless it changes the state itself."""
    # each run from a marked row to the next is one value, repeated: a pass over the marked rows only
    # (few, for most states), not a running maximum and a gather over every row
    marker = changed | first
    marker[:1] = True  # rows before any mark hold the default
    at = np.flatnonzero(marker)
    values = np.where(changed[at], after[at], default)
    return np.repeat(values, np.diff(at, append=len(marker)))
