"""numpy's sum of a column that is 0 but at a few rows, read at those rows only; and whether the C
passes' sums of the values they work out, taken as they come, are numpy's.

Why: the correction sums columns of every row with numpy (a pairwise sum, whose bits depend on
every value's place), and some are 0 off a few rows: the flushes' stall (~110 k rows of 9 M on a
minute of PPO), the periodic work's time. Each such sum read 72 MB for a handful of values. The C
loop (rlscope/analysis/native/sums.c) walks numpy's own summation tree over the rows alone, so the
figure keeps its bits; it is checked against np.sum once per process, and numpy sums wherever the
two differ (a numpy that sums another way) or the C loops do not run. A C pass that works out a
column's values in order can sum them as numpy would without writing the column (residual.c's
Pairwise): :func:`streams_agree` checks that sum against np.sum once per process, and the pass writes
the column for numpy to sum where they differ.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rlscope.analysis import native

_checked: list[bool] = []  # [whether the C loop gave np.sum's bits on the check], once made
_streamed: list[bool] = []  # [whether residual.c's running pairwise sum gave np.sum's bits], once made
# the check's column lengths: every shape of numpy's tree (short columns, blocks of 8 to 128, halves)
_LENGTHS = (1, 7, 8, 9, 127, 128, 129, 1000, 8193, 100_003)


_SCALES = 10.0 ** np.arange(-6, 10)


def _values(i: np.ndarray) -> np.ndarray:
    """Values of a check by a fixed formula (numpy.random is imported by no analysis but the windows'
    bootstrap; np.sin of large arguments and a float's % are slow): both signs, magnitudes over 15
    decades."""
    x = i * 0.6180339887498949
    return (x - np.floor(x) - 0.5) * _SCALES[i & 15]


@functools.cache
def _spread(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, values) of a check: a row in about 7, spread by a fixed formula, and a row at each edge
    (sorted, each once); made once for both checks (read only)."""
    k = np.arange(max(1, n // 7))
    rows = np.sort(np.r_[0, n - 1, (k * 7919) % n])
    rows = rows[np.r_[True, rows[1:] != rows[:-1]]]
    return rows, _values(np.arange(len(rows)))


def _numpy(n: int, rows: np.ndarray, values: np.ndarray) -> float:
    """The reference: the column made, and numpy's sum of it."""
    column = np.zeros(n)
    column[rows] = values
    return float(column.sum())


def _c(n: int, rows: np.ndarray, values: np.ndarray) -> float | None:
    """sums.c's sum, or None where it cannot run (no C loops, rows not strictly ascending in [0, n))."""
    args = (native.N, native.N, native.I64, native.F64, native.I64)
    fn = native.function("sums_at_rows", *args, restype=native.DOUBLE)
    if fn is None:
        return None
    rows = np.ascontiguousarray(rows, np.int64)
    values = np.ascontiguousarray(values, np.float64)
    ok = np.zeros(1, np.int64)
    got = fn(n, len(rows), rows, values, ok)
    return float(got) if ok[0] else None


def _agrees() -> bool:
    """Whether the C loop gives np.sum's bits here: sums of every shape of numpy's tree (short
    columns, blocks of 8 to 128, halves), values of wide magnitudes, a row at each edge. Not made
    (nor kept) where the C loops do not run: a process that asks for them later checks then."""
    if native.unavailable() is not None:
        return False
    if not _checked:
        ok = True
        for n in _LENGTHS:
            rows, values = _spread(n)
            got = _c(n, rows, values)
            ok = ok and got is not None and got == _numpy(n, rows, values)
        _checked.append(ok)
    return _checked[0]


def sum_at_rows(n: int, rows: np.ndarray, values: np.ndarray) -> float:
    """``np.sum`` of a float64 column of ``n`` rows that is +0.0 but ``values`` at ``rows`` (strictly
    ascending, in [0, n)), to the bit, without making the column where the C loops run."""
    if len(rows) and _agrees():
        got = _c(n, rows, values)
        if got is not None:
            return got
    return _numpy(n, rows, values) if len(rows) else 0.0


def streams_agree() -> bool:
    """Whether residual.c's sum of values taken a chunk at a time (Pairwise, residual_pairwise) gives
    np.sum's bits here, on columns of every shape of numpy's tree, in chunks cut anywhere: the C passes
    then sum what they work out as they go, with no column for numpy to sum. False where the C loops
    do not run."""
    fn = _pairwise()
    changed = changed_sum_loop()
    if fn is None or changed is None:  # not checked (nor kept): a process that asks for the C loops later
        return False
    if not _streamed:
        ok = True
        dense = _values(np.arange(_LENGTHS[-1]))  # the longest column's values, cut for the rest
        for n in _LENGTHS:
            rows, values = _spread(n)
            column = np.zeros(n)
            column[rows] = values
            for col, chunk in ((column, 2048), (dense[:n].copy(), 13)):
                leaves = np.empty(n // 64 + 2)
                ok = ok and _bits(fn(n, col, chunk, leaves)) == _bits(col.sum())
                # a value changed in a row about one in 50: the column summed again from the leaves
                at = np.arange(0, n, 50, dtype=np.int64)
                col[at] = _values(at + 1) * 1e3
                ok = ok and _bits(changed(n, col, leaves, len(at), at)) == _bits(col.sum())
        _streamed.append(ok)
    return _streamed[0]


def _bits(x: float) -> bytes:
    return np.float64(x).tobytes()


def _pairwise() -> Any:
    """residual.c's residual_pairwise, or None where the C loops do not run."""
    args = (native.N, native.F64, native.N, native.F64)
    return native.function("residual_pairwise", *args, restype=native.DOUBLE)


def changed_sum_loop() -> Any:
    """residual.c's residual_changed_sum (numpy's sum of a column from its leaves' kept sums, those
    holding changed rows summed again), or None where the C loops do not run."""
    args = (native.N, native.F64, native.F64, native.N, native.I64)
    return native.function("residual_changed_sum", *args, restype=native.DOUBLE)
