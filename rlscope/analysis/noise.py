"""How much a summed figure would move between two runs of the same program: its noise.

An operation's total is the sum of its instances. From their spread in one trace we estimate the
variance of that sum, which ``rlscope-analyze diff`` adds up for two traces to say whether a change
is larger than noise. Two estimates, the larger wins:

- independent instances: ``n * s**2`` (``s``: the sample standard deviation of one instance);
- batch means: the instances in time order cut into up to :data:`MAX_BLOCKS` consecutive blocks,
  ``n * sum(n_j * (m_j - m)**2) / (B - 1)`` (``m_j``: block j's mean). Where the machine's speed
  drifts during the run (a busy neighbour, a clock change), neighbouring instances move together and
  the blocks' means spread more than independent instances would: the sum's noise is larger, and this
  estimate sees it.

The first instance in time, and the instances the caller names as paying a one-time cost (those that
compiled), are left out of the spread (the estimate is scaled back to all ``n``) where at least
:data:`MIN_SPREAD` others remain: they carry costs every run pays again (a JIT compiling at the first
call or the first step of a kernel, modules loading, allocators warming up), so their distance from
the others is no run-to-run noise. Left in, one call of a second among a thousand of a millisecond
would read as a second of noise, and hide every change smaller than that.

Variances of independent groups add, so a row's variance can be summed over phases and processes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rlscope.analysis import native

__all__ = [
    "MAX_BLOCKS",
    "MIN_PER_BLOCK",
    "MIN_SPREAD",
    "one_time_excess",
    "sum_variance",
    "variance_and_one_time",
]

MAX_BLOCKS = 16
MIN_PER_BLOCK = 4  # fewer instances per block than this: batch means too noisy, independent only
MIN_SPREAD = 2  # instances besides the first a group needs before the first is left out of the spread


def sum_variance(
    group: np.ndarray,
    when: np.ndarray,
    values: np.ndarray,
    n_groups: int,
    one_time: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(instances per group, variance of each group's sum per column of ``values``).

    ``group``: each instance's group (< 0: left out); ``when``: its start, to order it in time;
    ``values``: (instances, columns); ``one_time``: per instance, True where it paid a one-time cost
    (module docstring). A group of fewer than two instances has variance 0 (unknown: the caller looks
    at the count).
    """
    count, var, _ = variance_and_one_time(group, when, values, n_groups, one_time)
    return count, var


def one_time_excess(
    group: np.ndarray,
    when: np.ndarray,
    values: np.ndarray,
    n_groups: int,
    one_time: np.ndarray | None = None,
) -> np.ndarray:
    """Per group and column of ``values``: what the instances left out of the spread (the first, and
    those ``one_time`` names) took beyond the mean of the others, each instance's excess floored at 0.

    That is the warm-up a run pays once (modules loading at a first launch, a library's handles created
    at a first call, a compilation), which a change to the per-call work (a CUDA graph replaying the
    launches) does not remove. 0 where no instance was left out (:data:`MIN_SPREAD`). Arguments as
    :func:`sum_variance`'s.
    """
    return variance_and_one_time(group, when, values, n_groups, one_time)[2]


def variance_and_one_time(
    group: np.ndarray,
    when: np.ndarray,
    values: np.ndarray,
    n_groups: int,
    one_time: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instances per group, :func:`sum_variance`'s variances, :func:`one_time_excess`'s excess): the
    two from one sort of the instances, and one mean per group of those in the spread, which both
    read."""
    values = _columns(group, values)
    none = np.zeros((n_groups, values.shape[1]))
    moments = _moments_fn()
    split = _spread_c(group, when, n_groups, one_time) if moments is not None else None
    if split is not None:  # the instances in time order: split in one C pass, no sort
        total, n, in_spread, spread_order = split
        if not total.any():
            return total, none, none.copy()
        blocks = _blocks(n)
        m = _moments_c(moments, group, values, in_spread, spread_order, n, blocks)
    else:
        keep = group >= 0
        g, t = group[keep].astype(np.int64, copy=False), when[keep]
        total = np.bincount(g, minlength=n_groups)
        if not len(g):
            return total, none, none.copy()
        order, spread = _spread(g, t, n_groups, None if one_time is None else one_time[keep])
        n = np.bincount(g[spread], minlength=n_groups).astype(np.float64)  # instances in the spread
        blocks = _blocks(n)
        if moments is not None:
            kept = np.flatnonzero(keep)
            in_spread = np.zeros(len(group), bool)
            in_spread[kept] = spread
            m = _moments_c(moments, group, values, in_spread, kept[order[spread[order]]], n, blocks)
        else:
            new_index = np.cumsum(spread) - 1  # of each kept instance among the spread ones
            sub_order = new_index[order[spread[order]]]  # still in (group, time) order: no second sort
            m = _moments(g, values[keep], spread, sub_order, n, blocks)
    left = n.astype(np.int64)
    var = _variance(n, blocks, m)
    var *= np.divide(total, left, out=np.ones(n_groups), where=left > 0)[:, None]
    return total, var, m.excess


def _blocks(n: np.ndarray) -> np.ndarray:
    """Per group of ``n`` instances in the spread: its batch-means blocks, up to :data:`MAX_BLOCKS` of
    consecutive instances (module docstring)."""
    return np.minimum(MAX_BLOCKS, n // MIN_PER_BLOCK).astype(np.int64)


def _spread_c(
    group: np.ndarray, when: np.ndarray, n_groups: int, one_time: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(instances per group, those in the spread, whether each instance is in it, the spread ones in
    (group, time) order): :func:`_spread` and its counts in one C pass over the instances, where the
    kept ones come in time order (as instances numbered as they began do): their (group, time) order
    is then their order by group, made by counting. None where numpy's sort runs (times out of order,
    no C loops, columns of other types)."""
    args = native.N, native.I64, native.I64, native.N, native.BOOL, native.N, native.N, native.I64
    args += native.F64, native.BOOL, native.I64, native.I64
    fn = native.function("breakdown_noise_spread", *args, restype=native.N)
    ours = group.dtype == when.dtype == np.int64 and group.flags.c_contiguous and when.flags.c_contiguous
    given = one_time is not None and one_time.dtype == np.bool_ and one_time.flags.c_contiguous
    if fn is None or not ours or (one_time is not None and not given):
        return None
    n_inst = len(group)
    total, n, in_spread = np.zeros(n_groups, np.int64), np.zeros(n_groups), np.zeros(n_inst, bool)
    order = np.empty(n_inst, np.int64)
    flags = one_time if one_time is not None else in_spread  # without: never read
    args = n_inst, group, when, int(one_time is not None), flags, n_groups, MIN_SPREAD, total, n, in_spread
    m = fn(*args, np.empty(n_groups, np.int64), order)
    return None if m < 0 else (total, n, in_spread, order[:m])


@dataclasses.dataclass
class _Moments:
    """Per group (and column): what the variance and the one-time excess are made of."""

    mean: np.ndarray  # (groups, columns): the mean instance in the spread
    ss: np.ndarray  # (groups, columns): the spread instances' squared deviations from it, summed
    bsum: np.ndarray  # (groups * MAX_BLOCKS, columns): the sum of each batch-means block
    size: np.ndarray  # (groups * MAX_BLOCKS): the instances in each block (all 0: no group has blocks)
    excess: np.ndarray  # (groups, columns): one_time_excess


def _moments(
    g: np.ndarray, x: np.ndarray, spread: np.ndarray, order: np.ndarray, n: np.ndarray, blocks: np.ndarray
) -> _Moments:
    """The :class:`_Moments` of the kept instances (``g``, ``x``), whether each is in the ``spread``;
    ``order``: the spread ones' indices among them in (group, time) order; ``n``: per group, how many
    are in the spread; ``blocks``: its batch-means blocks."""
    n_groups, ncol = len(n), x.shape[1]
    g_in, x_in = g[spread], np.asfortranarray(x[spread])  # each column contiguous: read a column a count
    sums = np.stack([np.bincount(g_in, weights=x_in[:, c], minlength=n_groups) for c in range(ncol)], axis=1)
    mean = np.divide(sums, n[:, None], out=np.zeros_like(sums), where=n[:, None] > 0)
    dev2 = np.asfortranarray((x_in - mean[g_in]) ** 2)
    ss = np.stack([np.bincount(g_in, weights=dev2[:, c], minlength=n_groups) for c in range(ncol)], axis=1)

    # rank of each instance in its group by time, then block = rank * B // n
    g_sorted = g_in[order]
    first = np.searchsorted(g_sorted, np.arange(n_groups))
    rank = np.empty(len(g_in), np.int64)
    rank[order] = np.arange(len(g_in)) - first[g_sorted]
    nb = blocks[g_in]
    use = nb >= 2
    size, bsum = np.zeros(n_groups * MAX_BLOCKS), np.zeros((n_groups * MAX_BLOCKS, ncol))
    if use.any():
        block = np.where(use, rank * nb // np.maximum(n[g_in], 1).astype(np.int64), 0)
        key = (g_in * MAX_BLOCKS + block)[use]
        size = np.bincount(key, minlength=n_groups * MAX_BLOCKS).astype(np.float64)
        x_use = np.asfortranarray(x_in[use])
        bsum = np.stack(
            [np.bincount(key, weights=x_use[:, c], minlength=n_groups * MAX_BLOCKS) for c in range(ncol)],
            axis=1,
        )

    g_out, x_out = g[~spread], np.asfortranarray(x[~spread])
    excess = np.zeros((n_groups, ncol))
    for c in range(ncol):
        above = np.maximum(x_out[:, c] - mean[g_out, c], 0.0)
        excess[:, c] = np.bincount(g_out, weights=above, minlength=n_groups)
    return _Moments(mean, ss, bsum, size, excess)


def _moments_fn() -> Any:
    """breakdown.c's :func:`_moments` (a ctypes function), or None where numpy's loops run."""
    args = native.N, native.N, native.I64, native.BOOL, native.F64, native.N, native.I64, native.N, native.F64
    args += native.I64, native.N, native.F64, native.F64, native.F64, native.I64, native.F64, native.F64
    return native.function("breakdown_noise_moments", *args)


def _moments_c(
    fn: Any,
    group: np.ndarray,
    values: np.ndarray,
    in_spread: np.ndarray,
    spread_order: np.ndarray,
    n: np.ndarray,
    blocks: np.ndarray,
) -> _Moments:
    """:func:`_moments` in a few C passes over every instance (``fn``: :func:`_moments_fn`'s),
    gathering none of them. ``group``, ``values``: :func:`variance_and_one_time`'s; ``in_spread``: per
    instance, whether it is in the spread (:func:`_spread`); ``spread_order``: those in (group, time)
    order; ``n``, ``blocks``: per group, the instances in the spread and their batch-means blocks."""
    n_inst, ncol = values.shape
    n_groups = len(n)
    mean, ss, excess = np.zeros((n_groups, ncol)), np.zeros((n_groups, ncol)), np.zeros((n_groups, ncol))
    size, bsum = np.zeros(n_groups * MAX_BLOCKS), np.zeros((n_groups * MAX_BLOCKS, ncol))
    key = np.empty(n_inst, np.int64)  # each instance's block (-1: none), made by the C
    # the C leaves out every instance of a negative group (as keep does): read as it is where it is int64
    group_c = np.ascontiguousarray(group, np.int64)
    fn(
        n_inst, ncol, group_c, in_spread, np.ascontiguousarray(values),
        len(spread_order), spread_order, n_groups, n, blocks, MAX_BLOCKS, mean, ss, excess, key, bsum, size,
    )  # fmt: skip
    return _Moments(mean, ss, bsum, size, excess)


def _variance(n: np.ndarray, blocks: np.ndarray, m: _Moments) -> np.ndarray:
    """:func:`sum_variance` of the spread instances (scaled back to all by the caller): the larger of
    the independent instances' estimate and the batch means' (module docstring)."""
    n_groups, ncol = m.mean.shape
    several = n > 1
    iid = np.where(several[:, None], m.ss * (n / np.maximum(n - 1, 1))[:, None], 0.0)
    if not m.size.any():
        return iid
    bmean = np.divide(m.bsum, m.size[:, None], out=np.zeros_like(m.bsum), where=m.size[:, None] > 0)
    grp_of_block = np.arange(n_groups * MAX_BLOCKS) // MAX_BLOCKS
    wdev = m.size[:, None] * (bmean - m.mean[grp_of_block]) ** 2  # empty blocks weigh 0
    between = wdev.reshape(n_groups, MAX_BLOCKS, ncol).sum(axis=1)
    batch = np.where((blocks >= 2)[:, None], n[:, None] * between / np.maximum(blocks - 1, 1)[:, None], 0.0)
    return np.maximum(iid, batch)


def _columns(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` as a float (instances, columns) array."""
    values = np.asarray(values, np.float64)
    return values.reshape(len(group), values.shape[1] if values.ndim == 2 else 1)


def _spread(
    g: np.ndarray, t: np.ndarray, n_groups: int, one_time: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(the instances' (group, time) order, whether each is in the spread): each group's first
    instance in time and its one-time ones left out, where :data:`MIN_SPREAD` others remain (module
    docstring)."""
    total = np.bincount(g, minlength=n_groups)
    order = _time_order(g, t, n_groups)
    spread = np.ones(len(g), bool) if one_time is None else ~one_time
    spread[order[np.searchsorted(g[order], np.arange(n_groups))[total > 0]]] = False
    spread |= (np.bincount(g[spread], minlength=n_groups) < MIN_SPREAD)[g]
    return order, spread


def _time_order(g: np.ndarray, t: np.ndarray, n_groups: int) -> np.ndarray:
    """The instances' (group, time) order, ties in their order: ``np.lexsort((t, g))``. Instances
    numbered as they began mostly come in time order already: then a stable sort by group alone keeps
    that order, a radix sort of 8- or 16-bit keys where lexsort sorts twice."""
    if n_groups <= np.iinfo(np.int16).max and bool(np.all(t[1:] >= t[:-1])):
        return np.argsort(g.astype(np.uint8 if n_groups <= 256 else np.int16), kind="stable")
    return np.lexsort((t, g))
