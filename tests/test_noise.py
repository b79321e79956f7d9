"""The noise of a sum from its instances (rlscope.analysis.noise) against a plain-Python reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlscope.analysis.noise import MAX_BLOCKS, MIN_PER_BLOCK, MIN_SPREAD, one_time_excess, sum_variance


def _reference(values: list[float]) -> float:
    """max(n * s^2, batch means) written out loop by loop, for one group in time order; the first
    instance out of the spread where MIN_SPREAD others remain, the estimate scaled back to all."""
    if len(values) > MIN_SPREAD:
        return len(values) / (len(values) - 1) * _spread_reference(values[1:])
    return _spread_reference(values)


def _spread_reference(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    iid = n * sum((x - mean) ** 2 for x in values) / (n - 1)
    b = min(MAX_BLOCKS, n // MIN_PER_BLOCK)
    if b < 2:
        return iid
    blocks: list[list[float]] = [[] for _ in range(b)]
    for rank, x in enumerate(values):
        blocks[rank * b // n].append(x)
    between = sum(len(blk) * (sum(blk) / len(blk) - mean) ** 2 for blk in blocks)
    return max(iid, n * between / (b - 1))


def test_matches_the_reference_per_group_and_column():
    rng = np.random.default_rng(7)
    sizes = [1, 2, 5, 9, 40, 333]
    group = np.concatenate([np.full(k, g) for g, k in enumerate(sizes)] + [np.full(4, -1)])
    when = rng.permutation(len(group)).astype(np.int64)  # instances arrive in any order
    values = np.stack([rng.gamma(2.0, 1.0, len(group)), rng.normal(5, 1, len(group))], axis=1)
    values[group == 4, 1] += np.linspace(0, 3, sizes[4])[np.argsort(np.argsort(when[group == 4]))]  # drift
    count, var = sum_variance(group, when, values, len(sizes))
    assert count.tolist() == sizes
    for g in range(len(sizes)):
        sel = np.flatnonzero(group == g)
        in_time = sel[np.argsort(when[sel])]
        for c in range(2):
            assert var[g, c] == pytest.approx(_reference(values[in_time, c].tolist()), rel=1e-9, abs=1e-12)


def test_independent_instances_give_n_sigma_squared():
    """Over many simulated runs, the estimate's mean is the sum's true variance n * sigma^2."""
    rng = np.random.default_rng(3)
    n, sigma, runs = 400, 0.3, 300
    x = rng.normal(1.0, sigma, (runs, n))
    group = np.repeat(np.arange(runs), n)
    _, var = sum_variance(group, np.tile(np.arange(n), runs), x.reshape(-1), runs)
    assert math.sqrt(var.mean()) == pytest.approx(math.sqrt(n) * sigma, rel=0.1)


def test_drift_raises_the_estimate():
    """A machine slowing down through the run: neighbouring instances move together, the sum's noise
    is larger than independent instances would say, and batch means see it."""
    rng = np.random.default_rng(5)
    n = 1000
    steady = rng.normal(1.0, 0.1, n)
    drifting = steady + np.linspace(0, 0.5, n)
    group = np.repeat([0, 1], n)
    _, var = sum_variance(group, np.tile(np.arange(n), 2), np.concatenate([steady, drifting]), 2)
    assert var[1, 0] > 4 * var[0, 0]


def test_a_first_call_paying_a_one_time_cost_is_no_noise():
    """A JIT compiling at the first of 2,000 steps of 0.3 ms: every run pays it, so the sum's noise is
    the steps' (within 10% of sqrt(n) * sigma over simulated runs), not the compile's second."""
    rng = np.random.default_rng(11)
    n, sigma, runs = 2000, 30e-6, 200
    x = rng.normal(300e-6, sigma, (runs, n))
    x[:, 0] += 0.7  # the first step compiles
    group = np.repeat(np.arange(runs), n)
    when = np.tile(np.arange(n), runs)
    listed = rng.permutation(len(group))  # instances listed in any order: the first is the earliest
    _, var = sum_variance(group[listed], when[listed], x.reshape(-1)[listed], runs)
    assert math.sqrt(var.mean()) == pytest.approx(math.sqrt(n) * sigma, rel=0.1)
    # the sums themselves: the compile is in every run, so they spread by the steps' noise alone
    assert x.sum(axis=1).std() == pytest.approx(math.sqrt(n) * sigma, rel=0.15)


def test_the_instances_that_compiled_are_no_noise_either():
    """The first step resets, the second JIT-compiles (a second): the caller names the compiling one,
    and the estimate is the other steps' spread scaled to all of them, exactly."""
    rng = np.random.default_rng(13)
    x = rng.normal(300e-6, 30e-6, 1000)
    x[0], x[1] = 0.05, 1.1
    one_time = np.zeros(1000, bool)
    one_time[1] = True
    group = np.zeros(1000, np.int64)
    _, var = sum_variance(group, np.arange(1000), x, 1, one_time=one_time)
    assert var[0, 0] == pytest.approx(1000 / 998 * _spread_reference(x[2:].tolist()), rel=1e-9)


def test_no_instances():
    count, var = sum_variance(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3)), 2)
    assert count.tolist() == [0, 0] and var.shape == (2, 3) and not var.any()


def test_the_one_time_excess_is_what_the_left_out_calls_took_beyond_the_others():
    """Two operations listed in any order: the first's first call pays 0.7 s of warm-up in column 0
    and none in column 1, its third compiles (0.2 s); the second's first call is quicker than the
    rest (no excess). Brute force: each left-out instance against the mean of the others."""
    rng = np.random.default_rng(17)
    n = 500
    x = rng.uniform(1e-3, 2e-3, (2 * n, 2))
    x[0, 0] += 0.7
    x[2, 0] += 0.2
    x[n, :] = 0.0
    one_time = np.zeros(2 * n, bool)
    one_time[2] = True
    group = np.repeat([0, 1], n)
    when = np.tile(np.arange(n), 2)
    listed = rng.permutation(2 * n)
    got = one_time_excess(group[listed], when[listed], x[listed], 2, one_time=one_time[listed])
    rest = np.delete(x[:n], [0, 2], axis=0).mean(axis=0)
    want0 = np.maximum(x[0] - rest, 0) + np.maximum(x[2] - rest, 0)
    assert got[0] == pytest.approx(want0, rel=1e-12)
    assert got[0, 0] == pytest.approx(0.9, abs=5e-3)
    assert got[1].tolist() == [0.0, 0.0]


def test_no_one_time_excess_without_enough_other_calls():
    """Two calls: nothing is left out of the spread (MIN_SPREAD), so nothing is one-time."""
    got = one_time_excess(np.zeros(2, np.int64), np.arange(2), np.array([5.0, 1.0]), 1)
    assert got.tolist() == [[0.0]]


@pytest.mark.parametrize(
    "n, n_groups, in_time",
    [(5000, 3, True), (5000, 300, True), (5000, 40_000, True), (5000, 3, False), (1, 1, True), (0, 1, True)],
)
def test_time_order_is_lexsorts(n, n_groups, in_time):
    """The instances' (group, time) order, ties in their order: a stable sort by group where they come
    in time order (8- and 16-bit keys), lexsort where they do not or groups are too many for 16 bits."""
    from rlscope.analysis.noise import _time_order

    rng = np.random.default_rng(n + n_groups)
    g = rng.integers(0, n_groups, n)
    t = rng.integers(0, 50, n)  # many equal times: ties keep the instances' order
    t = np.sort(t) if in_time else t
    got = _time_order(g, t, n_groups)
    assert got.tolist() == np.lexsort((t, g)).tolist()
