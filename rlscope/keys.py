"""Distinct values of a large integer array, and each value's index into them, by hashing.

Why not ``np.unique``: it sorts the whole array, and the analysis groups millions of timeline rows
by a few hundred keys (operations, instances, threads) many times over; that sort was a third of its
time on real traces. Values within a compact range are looked up in a table over the range; others
go through Arrow's hash table (``dictionary_encode``), which finds the distinct values in one pass, and
only they are sorted. The results equal ``np.unique(values, return_inverse=True)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa


def compute(name: str, *args: Any, options: Any = None) -> Any:
    """Arrow's compute function ``name`` of ``args`` (``options``: its options object, e.g.
    :func:`set_lookup`'s), called without importing ``pyarrow.compute``: that module makes a Python
    wrapper with a parsed docstring of each of Arrow's ~300 functions when imported (30 ms of an
    analysis's start), and its own calls go through this one."""
    try:
        from pyarrow._compute import call_function
    except ImportError:  # a pyarrow whose private module moved: its public one
        from pyarrow.compute import call_function
    return call_function(name, list(args), options)


def set_lookup(value_set: Any) -> Any:
    """The options of Arrow's ``index_in`` / ``is_in`` for ``value_set`` (see :func:`compute`)."""
    try:
        from pyarrow._compute import SetLookupOptions
    except ImportError:
        from pyarrow.compute import SetLookupOptions
    return SetLookupOptions(value_set)


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each value's index into them) of a 1-D integer array."""
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer) or len(values) < 1024:
        uniq, inverse = np.unique(values, return_inverse=True)
        return uniq, inverse.reshape(-1)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= 2 * len(values) + (1 << 16) and lo > -(2**62) and hi < 2**62:
        # a compact range (name ids, keys built from them): a table over it, no hashing
        offset = values.astype(np.int64, copy=False) - lo
        present = np.zeros(hi - lo + 1, bool)
        present[offset] = True
        rank = np.cumsum(present, dtype=np.int64)
        rank -= 1
        return (np.flatnonzero(present) + lo).astype(values.dtype), rank[offset]
    encoded = compute("dictionary_encode", pa.array(values))
    found = encoded.dictionary.to_numpy()
    order = np.argsort(found, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return found[order], rank[encoded.indices.to_numpy()]


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D integer array (``np.unique``'s)."""
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer) or len(values) < 1024:
        return np.unique(values)
    return np.sort(compute("unique", pa.array(values)).to_numpy())


def distinct_times(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-D integer array of mostly distinct values made of a few sorted runs (time
    points gathered from several sorted sources). A stable sort (a merge of the runs) and one pass:
    ``np.unique`` hashes every value, which on millions of distinct values is many times slower."""
    values = np.sort(np.asarray(values), kind="stable")
    keep = np.ones(len(values), bool)
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def factorize_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=1, return_inverse=True)`` of a 2-D integer array: its distinct columns in
    lexicographic order, and each column's index into them. Each row is factorized on its own and the
    ranks combined in mixed radix, which keeps the lexicographic order."""
    rows = np.asarray(rows)
    code = np.zeros(rows.shape[1], np.int64)
    parts = []
    size = 1
    for row in rows:
        uniq, inv = factorize(row)
        size *= max(len(uniq), 1)
        if size >= 2**62:  # too many combinations for one int64 code: sort the columns
            out, inverse = np.unique(rows, axis=1, return_inverse=True)
            return out, inverse.reshape(-1)
        parts.append(uniq)
        code = code * len(uniq) + inv
    seen, inverse = factorize(code)
    out = np.empty((len(parts), len(seen)), rows.dtype)
    rest = seen
    for k in range(len(parts) - 1, -1, -1):
        rest, at = np.divmod(rest, len(parts[k]))
        out[k] = parts[k][at]
    return out, inverse
