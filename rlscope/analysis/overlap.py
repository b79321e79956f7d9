"""Resource overlap: a vectorized sweep over interval endpoints.

Given two families of intervals (say, an operation's CPU time and the GPU work it launched),
each tagged with a group (the operation), return per group the time covered by A only, by B only
and by both. Intervals of one family may overlap each other (several threads, several streams):
the sweep counts how many are open, so overlapping intervals are not double counted.
"""

from __future__ import annotations

import numpy as np


def overlap_by_group(
    group_a: np.ndarray,
    start_a: np.ndarray,
    end_a: np.ndarray,
    group_b: np.ndarray,
    start_b: np.ndarray,
    end_b: np.ndarray,
    n_groups: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: (time in A only, time in B only, time in both), as float64 arrays of n_groups.

    Groups are ints in [0, n_groups). Intervals are half-open [start, end); empty or inverted
    intervals contribute nothing. One sort of all endpoints, then cumulative sums: O(n log n).
    """
    ga, sa, ea = _clean(group_a, start_a, end_a)
    gb, sb, eb = _clean(group_b, start_b, end_b)
    na, nb = len(ga), len(gb)
    g = np.concatenate([ga, ga, gb, gb])
    t = np.concatenate([sa, ea, sb, eb])
    one_a, one_b = np.ones(na, np.int64), np.ones(nb, np.int64)
    da = np.concatenate([one_a, -one_a, np.zeros(2 * nb, np.int64)])
    db = np.concatenate([np.zeros(2 * na, np.int64), one_b, -one_b])
    zeros = np.zeros(n_groups, np.float64)
    if len(g) == 0:
        return zeros, zeros.copy(), zeros.copy()
    t0, span = int(t.min()), int(t.max() - t.min()) + 1
    if span * n_groups < 2**62:
        # One int64 key; a stable sort (timsort) is fast on the long sorted runs that
        # per-thread, time-ordered input gives.
        order = np.argsort(g * span + (t - t0), kind="stable")
    else:
        order = np.lexsort((t, g))
    g, t = g[order], t[order]
    # Each group's deltas sum to zero, so plain cumulative sums restart at 0 for every group.
    ca = np.cumsum(da[order])
    cb = np.cumsum(db[order])
    length = np.zeros(len(t), np.float64)
    same = g[1:] == g[:-1]
    length[:-1] = np.where(same, t[1:] - t[:-1], 0)
    in_a, in_b = ca > 0, cb > 0
    a_only = np.bincount(g, weights=length * (in_a & ~in_b), minlength=n_groups)
    b_only = np.bincount(g, weights=length * (in_b & ~in_a), minlength=n_groups)
    both = np.bincount(g, weights=length * (in_a & in_b), minlength=n_groups)
    return a_only, b_only, both


def merge_adjacent(
    start: np.ndarray, end: np.ndarray, *keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Join consecutive intervals that touch and share every key (same group, thread, ...).

    Returns (start, end, keys) of the joined runs. The timeline splits a stretch of one operation
    or category at every boundary inside it; joined, there are fewer endpoints to sort or draw.
    """
    if len(start) == 0:
        return start, end, keys
    new = np.ones(len(start), bool)
    new[1:] = start[1:] != end[:-1]
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(start) - 1)
    return start[first], end[last], tuple(k[first] for k in keys)


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Total length of the union of intervals [start, end)."""
    g = np.zeros(len(start), np.int64)
    empty = np.zeros(0, np.int64)
    a_only, _, _ = overlap_by_group(g, start, end, empty, empty, empty, 1)
    return float(a_only[0])


def _clean(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g, s, e = np.asarray(g, np.int64), np.asarray(s, np.int64), np.asarray(e, np.int64)
    keep = e > s
    if keep.all():
        return g, s, e
    return g[keep], s[keep], e[keep]
