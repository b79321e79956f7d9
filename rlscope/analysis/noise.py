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

from collections.abc import Callable

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
    keep = group >= 0
    g, t, x = group[keep].astype(np.int64), when[keep], values[keep]
    total = np.bincount(g, minlength=n_groups)
    if not len(g):
        return total, np.zeros((n_groups, values.shape[1])), np.zeros((n_groups, values.shape[1]))
    order, spread = _spread(g, t, n_groups, None if one_time is None else one_time[keep])
    new_index = np.cumsum(spread) - 1  # of each kept instance among the spread ones
    sub_order = new_index[order[spread[order]]]  # still in (group, time) order: no second sort
    left, mean, var = _spread_variance(g[spread], x[spread], n_groups, sub_order)
    var *= np.divide(total, left, out=np.ones(n_groups), where=left > 0)[:, None]
    return total, var, _excess(g[~spread], x[~spread], mean, n_groups)


def _excess(g: np.ndarray, x: np.ndarray, mean: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group and column: what the instances given (``g``, ``x``: those left out of the spread)
    took beyond their group's ``mean``, each floored at 0."""
    out = np.zeros((n_groups, x.shape[1]))
    fn = _group_loop("breakdown_group_excess", native.F64)
    if fn is not None:
        fn(len(g), x.shape[1], g, x, mean, out)
        return out
    x = np.asfortranarray(x)  # each column contiguous: the counts read a column at a time
    for c in range(x.shape[1]):
        excess = np.maximum(x[:, c] - mean[g, c], 0.0)
        out[:, c] = np.bincount(g, weights=excess, minlength=n_groups)
    return out


def _group_loop(name: str, *argtypes: object) -> Callable[..., object] | None:
    """The C loop ``name`` over groups of instances (rlscope/analysis/native/breakdown.c), taking the
    instances' count, the columns', their groups and values, then ``argtypes`` and the output."""
    return native.function(name, native.N, native.N, native.I64, native.F64, *argtypes, native.F64)


def group_sums(g: np.ndarray, x: np.ndarray, n_groups: int) -> np.ndarray:
    """(groups, columns): per group (``g``, int64; < 0: left out), the sum of its rows of ``x``
    (instances, columns), added in row order (np.bincount's, so the same bits either way)."""
    fn = _group_loop("breakdown_group_sums")
    out = np.zeros((n_groups, x.shape[1]))
    if fn is not None:
        fn(len(g), x.shape[1], g, np.ascontiguousarray(x), out)
        return out
    keep = g >= 0
    if not keep.all():
        g, x = g[keep], x[keep]
    x = np.asfortranarray(x)  # each column contiguous: the counts read a column at a time
    for c in range(x.shape[1]):
        out[:, c] = np.bincount(g, weights=x[:, c], minlength=n_groups)
    return out


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
    order = np.lexsort((t, g))
    spread = np.ones(len(g), bool) if one_time is None else ~one_time
    spread[order[np.searchsorted(g[order], np.arange(n_groups))[total > 0]]] = False
    spread |= (np.bincount(g[spread], minlength=n_groups) < MIN_SPREAD)[g]
    return order, spread


def _spread_variance(
    g: np.ndarray, x: np.ndarray, n_groups: int, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instances, mean, :func:`sum_variance`) per group of the instances given, all of them in the
    spread; ``order``: their indices in (group, time) order."""
    ncol = x.shape[1]
    n = np.bincount(g, minlength=n_groups).astype(np.float64)
    if not len(g):
        return n.astype(np.int64), np.zeros((n_groups, ncol)), np.zeros((n_groups, ncol))
    sums = group_sums(g, x, n_groups)
    mean = np.divide(sums, n[:, None], out=np.zeros_like(sums), where=n[:, None] > 0)
    sq_dev = _group_loop("breakdown_group_sq_dev", native.F64)
    if sq_dev is not None:
        ss = np.zeros_like(sums)
        sq_dev(len(g), ncol, g, np.ascontiguousarray(x), mean, ss)
    else:
        ss = group_sums(g, (x - mean[g]) ** 2, n_groups)
    several = n > 1
    iid = np.where(several[:, None], ss * (n / np.maximum(n - 1, 1))[:, None], 0.0)

    # batch means: rank of each instance in its group by time, then block = rank * B // n
    blocks = np.minimum(MAX_BLOCKS, n // MIN_PER_BLOCK).astype(np.int64)
    g_sorted = g[order]
    first = np.searchsorted(g_sorted, np.arange(n_groups))
    rank = np.empty(len(g), np.int64)
    rank[order] = np.arange(len(g)) - first[g_sorted]
    nb = blocks[g]
    use = nb >= 2
    if not use.any():
        return n.astype(np.int64), mean, iid
    block = np.where(use, rank * nb // np.maximum(n[g], 1).astype(np.int64), 0)
    key = np.where(use, g * MAX_BLOCKS + block, -1)
    size = np.bincount(key[use], minlength=n_groups * MAX_BLOCKS).astype(np.float64)
    bsum = group_sums(key, x, n_groups * MAX_BLOCKS)
    bmean = np.divide(bsum, size[:, None], out=np.zeros_like(bsum), where=size[:, None] > 0)
    grp_of_block = np.arange(n_groups * MAX_BLOCKS) // MAX_BLOCKS
    wdev = size[:, None] * (bmean - mean[grp_of_block]) ** 2  # empty blocks weigh 0
    between = wdev.reshape(n_groups, MAX_BLOCKS, ncol).sum(axis=1)
    batch = np.where((blocks >= 2)[:, None], n[:, None] * between / np.maximum(blocks - 1, 1)[:, None], 0.0)
    return n.astype(np.int64), mean, np.maximum(iid, batch)
