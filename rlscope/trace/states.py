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
    marker = changed | first
    pos = np.where(marker, np.arange(len(marker), dtype=np.int32 if len(marker) < 2**31 else np.int64), 0)
    np.maximum.accumulate(pos, out=pos)
    return np.where(changed, after, default)[pos]
