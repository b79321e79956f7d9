"""numpy's sum of a column that is 0 but at a few rows, read at those rows (rlscope/overhead/correct/sums.py):
the C loop walks numpy's summation tree and must give np.sum's bits for every shape of that tree."""

from __future__ import annotations

import numpy as np
import pytest

from rlscope.analysis import native
from rlscope.overhead.correct import sums

pytestmark = pytest.mark.skipif(native.library() is None, reason="no C compiler: numpy sums")


def _column(n: int, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    column = np.zeros(n)
    column[rows] = values
    return column


# lengths at every edge of numpy's tree: under 8, one block of 8-128, halves rounded to 8, large
LENGTHS = [*range(1, 140), 255, 256, 257, 1000, 8191, 8192, 8193, 65_537, 1_000_003]


@pytest.mark.parametrize("share", [0.0001, 0.01, 0.3, 1.0])
def test_the_c_loop_gives_np_sums_bits(share):
    rng = np.random.default_rng(int(share * 1e4))
    for n in LENGTHS:
        rows = np.unique(rng.integers(0, n, max(1, int(n * share))))
        values = rng.standard_normal(len(rows)) * 10.0 ** rng.uniform(-9, 12, len(rows))
        values[rng.random(len(rows)) < 0.1] = -0.0
        want = np.sum(_column(n, rows, values))
        got = sums._c(n, rows, values)
        assert got is not None and got == want and np.signbit(got) == np.signbit(want), n


@pytest.mark.parametrize(
    "rows, values",
    [
        ([0], [1.5]),
        ([99], [-2.0]),
        ([0, 99], [1e300, -1e300]),
        ([3, 50], [np.inf, -np.inf]),
        ([7], [np.nan]),
        ([1, 2, 3], [-0.0, -0.0, -0.0]),
    ],
)
def test_edge_values_give_np_sums_bits(rows, values):
    rows, values = np.array(rows, np.int64), np.array(values)
    want = np.sum(_column(100, rows, values))
    got = sums.sum_at_rows(100, rows, values)
    assert (np.isnan(want) and np.isnan(got)) or (got == want and np.signbit(got) == np.signbit(want))


def test_no_rows_sum_to_zero():
    assert sums.sum_at_rows(10, np.zeros(0, np.int64), np.zeros(0)) == 0.0
    assert sums.sum_at_rows(0, np.zeros(0, np.int64), np.zeros(0)) == 0.0


@pytest.mark.parametrize("rows", [[5, 3], [2, 2], [-1], [10]])
def test_rows_not_strictly_ascending_in_range_are_left_to_numpy(rows):
    rows = np.array(rows, np.int64)
    values = np.arange(1.0, len(rows) + 1)
    assert sums._c(10, rows, values) is None
    if rows.min() >= 0 and rows.max() < 10:  # numpy's own: the last value at a row repeated stays
        assert sums.sum_at_rows(10, rows, values) == np.sum(_column(10, rows, values))


def test_the_check_against_numpy_holds_here_and_a_failed_one_sums_with_numpy(monkeypatch):
    assert sums._agrees()
    rows, values = np.array([1, 4], np.int64), np.array([0.1, 0.2])
    monkeypatch.setattr(sums, "_checked", [False])
    monkeypatch.setattr(sums, "_c", lambda *a: pytest.fail("the C loop ran after a failed check"))
    assert sums.sum_at_rows(8, rows, values) == np.sum(_column(8, rows, values))


def test_a_wrong_tree_is_seen_by_the_check(monkeypatch):
    """The check is what keeps another numpy's summation from changing figures: a sum that adds in
    row order (a plain loop, not numpy's tree) fails it."""
    monkeypatch.setattr(sums, "_checked", [])
    monkeypatch.setattr(sums, "_c", lambda n, rows, values: float(sum(np.asarray(values).tolist())))
    assert not sums._agrees()


def _streamed(n: int, values: np.ndarray, chunk: int, leaves: np.ndarray | None = None) -> float:
    leaves = np.empty(n // 64 + 2) if leaves is None else leaves
    return sums._pairwise()(n, np.ascontiguousarray(values, np.float64), chunk, leaves)


@pytest.mark.parametrize("chunk", [1, 7, 8, 13, 2048, 1 << 30])
def test_the_running_sum_gives_np_sums_bits_in_chunks_cut_anywhere(chunk):
    """residual.c's Pairwise, the sum a pass takes of the values it works out a chunk at a time, is
    np.sum's for every shape of numpy's tree, zeros among the values or not."""
    rng = np.random.default_rng(chunk % 1000)
    for n in [0, *LENGTHS]:
        values = rng.standard_normal(n) * 10.0 ** rng.uniform(-9, 12, n)
        values[rng.random(n) < 0.5] = 0.0
        values[rng.random(n) < 0.05] = -0.0
        want, got = np.sum(values), _streamed(n, values, chunk)
        assert got == want and np.signbit(got) == np.signbit(want), n


@pytest.mark.parametrize(
    "values", [[np.inf, -np.inf, 1.0], [np.nan] + [1.0] * 200, [-0.0] * 300, [1e300] * 300 + [-1e300] * 300]
)
def test_the_running_sum_of_edge_values_is_np_sums(values):
    values = np.array(values)
    want, got = np.sum(values), _streamed(len(values), values, 64)
    assert (np.isnan(want) and np.isnan(got)) or (got == want and np.signbit(got) == np.signbit(want))


def test_the_running_sum_is_checked_once_and_a_wrong_one_is_not_used(monkeypatch):
    assert sums.streams_agree()
    monkeypatch.setattr(sums, "_streamed", [])
    real = native.function

    def in_row_order(name, *args, **kw):  # a sum in row order, not numpy's tree
        if name == "residual_pairwise":
            return lambda n, values, chunk, leaves: float(sum(np.asarray(values[:n]).tolist()))
        return real(name, *args, **kw)

    monkeypatch.setattr(native, "function", in_row_order)
    assert not sums.streams_agree()


@pytest.mark.parametrize("share", [0.0, 0.001, 0.05, 1.0])
@pytest.mark.parametrize("chunk", [13, 2048])
def test_a_column_summed_again_from_its_leaves_after_changes_is_np_sums(share, chunk):
    """residual_changed_sum: the leaves' sums a running sum kept, those holding changed rows summed
    again from the column, give np.sum of the changed column."""
    rng = np.random.default_rng(int(share * 1000) + chunk)
    for n in [0, *LENGTHS]:
        values = rng.standard_normal(n) * 10.0 ** rng.uniform(-9, 12, n)
        values[rng.random(n) < 0.3] = 0.0
        leaves = np.empty(n // 64 + 2)
        _streamed(n, values, chunk, leaves)
        rows = np.flatnonzero(rng.random(n) < share).astype(np.int64)
        values[rows] = rng.standard_normal(len(rows)) * 1e6
        got = sums.changed_sum_loop()(n, values, leaves, len(rows), rows)
        assert got == np.sum(values), n
        if len(rows):  # the leaves are read: a change left out is seen
            values[rows[0]] += 1e9
            assert sums.changed_sum_loop()(n, values, leaves, 0, rows) != np.sum(values), n
