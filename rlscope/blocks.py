"""Elementwise work over millions of rows, a block of rows at a time.

Why: a chain of numpy operations over a whole timeline (millions of rows) makes each intermediate a
fresh array of tens of MB, and the analysis is then bound by memory traffic and, where it first
reaches that size, page faults. Over blocks of :data:`BLOCK_ROWS` rows the intermediates stay in the
CPU's cache. Each value comes from the same operations on the same operands, so the results are the
same to the bit.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

BLOCK_ROWS = 1 << 16
SEARCH_BLOCK = 1 << 12  # sorted values searched at a time (search_sorted)


def blocks(n: int, size: int = BLOCK_ROWS) -> Iterator[slice]:
    """Slices covering ``range(n)`` in order, ``size`` rows each (the last one fewer)."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def search_sorted(a: np.ndarray, v: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted(a, v, side)`` where ``v`` is sorted too: a block of ``v`` at a time, each
    searched within the part of ``a`` between where its first and its last value fall. That part is
    a few times the block and stays in the CPU's cache, where a search over the whole of ``a``
    (millions of rows) misses it at every step. The same positions: a value of the block falls
    between those of its first and its last."""
    out = np.empty(len(v), np.intp)
    for r in blocks(len(v), SEARCH_BLOCK):
        part = v[r]
        lo, hi = np.searchsorted(a, [part[0], part[-1]], side).tolist()
        out[r] = np.searchsorted(a[lo:hi], part, side)
        out[r] += lo
    return out


def take(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``table[index]`` (a lookup table read at a column of millions of small codes, such as event
    kinds), a block at a time: numpy converts a whole index column to its index type before it reads
    one entry, an array of eight bytes a row; a block's stays in the CPU's cache."""
    out = np.empty(len(index), table.dtype)
    for r in blocks(len(index), BLOCK_ROWS):
        np.take(table, index[r], out=out[r])
    return out
