"""rlscope.blocks: block-wise helpers give numpy's own results, checked against numpy on random data."""

from __future__ import annotations

import numpy as np
import pytest

from rlscope import blocks


def test_blocks_cover_the_range_in_order_once():
    for n, size in [(0, 4), (1, 4), (4, 4), (9, 4), (10, 3)]:
        covered = [i for s in blocks.blocks(n, size) for i in range(n)[s]]
        assert covered == list(range(n))
        assert all(s.stop - s.start <= size for s in blocks.blocks(n, size))


@pytest.mark.parametrize("side", ["left", "right"])
def test_search_sorted_gives_searchsorted_positions(side, monkeypatch):
    """Sorted needles with repeats, ties with the haystack, values before its first and past its last,
    over blocks smaller than the needles (several blocks, a short last one): every position equals
    ``np.searchsorted``'s."""
    monkeypatch.setattr(blocks, "SEARCH_BLOCK", 7)
    rng = np.random.default_rng(0)
    for trial in range(50):
        a = np.sort(rng.integers(0, 200, size=int(rng.integers(1, 300))))
        v = np.sort(rng.integers(-20, 220, size=int(rng.integers(1, 100))))
        if trial % 5 == 0:
            v = np.concatenate([v, a[: len(a) // 2]])
            v.sort()
        got = blocks.search_sorted(a, v, side)
        np.testing.assert_array_equal(got, np.searchsorted(a, v, side))


def test_search_sorted_of_nothing():
    a = np.arange(10)
    assert len(blocks.search_sorted(a, np.array([], dtype=np.int64))) == 0


def test_take_reads_the_table_as_fancy_indexing_does(monkeypatch):
    """Codes of one byte (negative ones read from the end, as numpy's indexing does) and of eight,
    over several blocks and a short last one, and an empty column: ``table[index]``, dtype and all."""
    monkeypatch.setattr(blocks, "BLOCK_ROWS", 7)
    rng = np.random.default_rng(0)
    table = rng.integers(0, 100, 12).astype(np.int8)
    for n in (0, 1, 7, 30):
        for index in (rng.integers(-12, 12, n).astype(np.int8), rng.integers(0, 12, n)):
            got = blocks.take(table, index)
            assert got.dtype == table.dtype
            np.testing.assert_array_equal(got, table[index])
    floats = rng.random(5)
    np.testing.assert_array_equal(blocks.take(floats, np.array([4, 0, 4])), floats[[4, 0, 4]])
