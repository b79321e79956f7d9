"""Elementwise work over millions of rows, a block of rows at a time.

Why: a chain of numpy operations over a whole timeline (millions of rows) makes each intermediate a
fresh array of tens of MB, and the analysis is then bound by memory traffic and, where it first
reaches that size, page faults. Over blocks of :data:`BLOCK_ROWS` rows the intermediates stay in the
CPU's cache. Each value comes from the same operations on the same operands, so the results are the
same to the bit.
"""

from __future__ import annotations

from collections.abc import Iterator

BLOCK_ROWS = 1 << 16


def blocks(n: int, size: int = BLOCK_ROWS) -> Iterator[slice]:
    """Slices covering ``range(n)`` in order, ``size`` rows each (the last one fewer)."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))
