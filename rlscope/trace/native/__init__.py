"""The trace's checks in C: one pass over a process's event rows that confirms them intact, and the
load's other passes over a table's rows (``load.c``).

:func:`rlscope.trace.validate.validate_events` checks a dozen invariants with a dozen numpy passes
over the events; on an intact table (the common case) they find nothing. :func:`intact` checks them
all in one pass over the rows (``intact.c``): a table it confirms skips the numpy checks, and any
other goes through them as before. It never confirms a table the numpy checks would change or say
anything about (tests/test_trace_native.py checks that on every damaged table of the corpus and on
fuzzed ones).

Every ``*.c`` file in this folder is compiled together into one plain C library on first use
(rlscope/clib.py); without a compiler, or with ``RLSCOPE_NATIVE_ANALYSIS=0``, :func:`intact` says
None and the numpy checks run; :func:`times_scan` and :func:`names_used` say None and their callers
run the numpy code each mirrors.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from rlscope import clib

ABI = 2  # the library's (trace_native_abi): raised with any change of a function's arguments
SOURCES = Path(__file__).parent

_I64 = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
_I32 = np.ctypeslib.ndpointer(np.int32, flags="C_CONTIGUOUS")
_I8 = np.ctypeslib.ndpointer(np.int8, flags="C_CONTIGUOUS")
_U8 = np.ctypeslib.ndpointer(np.uint8, flags="C_CONTIGUOUS")
_N = ctypes.c_int64
_MAX_TS_NS = 1 << 60  # validate.MAX_TS_NS: load.c's times are below it
# the columns intact.c reads, of the writer's types (rlscope/trace/schema.py); "cost" may be absent
_TYPES = {
    "ts_ns": np.int64,
    "thread": np.int64,
    "kind": np.int8,
    "id": np.int64,
    "parent": np.int64,
    "name": np.int32,
    "flags": np.int8,
}

# intact.c's answers: 0 intact, else the first check that fails
REASONS = (
    "intact",
    "kind",
    "time",
    "scoped id",
    "category code",
    "window mode",
    "time order",
    "session order",
    "after end",
    "end unmatched",
    "parent",
    "open at end",
    "flags",
    "recursive",
    "cost",
    "id spread",
    "no window",
    "reference speed",
    "category nesting",
    "repeated id",
    "bound",
    "memory",
)


def _library() -> clib.Library:
    return clib.Library("trace_native", SOURCES, "the trace's C checks")


_LIB = _library()


def unavailable() -> str | None:
    """Why the numpy checks run on every table (None: the C pass runs first)."""
    return _LIB.unavailable(ABI)


def check(
    columns: dict[str, np.ndarray], kind_ok: np.ndarray, category_ok: np.ndarray, complete: bool | None
) -> str | None:
    """What ``intact.c`` says of the event ``columns``: ``"intact"`` or the first check that fails
    (:data:`REASONS`); None where it cannot run (no library, a column missing or of another type
    than the writer's: the numpy checks read those). ``kind_ok``: 256 bools, True at each written
    kind; ``category_ok``: validate's lookup table of category codes."""
    fn = _LIB.function(
        ABI,
        "trace_intact",
        _N,
        _I64,
        _I64,
        _I8,
        _I64,
        _I64,
        _I32,
        _I8,
        ctypes.c_void_p,
        _U8,
        _U8,
        _N,
        _N,
        restype=ctypes.c_int64,
    )
    if fn is None:
        return None
    for name, dtype in _TYPES.items():
        values = columns.get(name)
        if values is None or values.dtype != dtype or not values.flags.c_contiguous:
            return None
    cost = columns.get("cost")
    cost_ptr: Any = None
    if cost is not None:
        if cost.dtype != np.int64 or not cost.flags.c_contiguous:
            return None
        cost_ptr = cost.ctypes.data
    c = columns
    reason = fn(
        len(c["ts_ns"]),
        c["ts_ns"],
        c["thread"],
        c["kind"],
        c["id"],
        c["parent"],
        c["name"],
        c["flags"],
        cost_ptr,
        kind_ok.view(np.uint8),
        category_ok.view(np.uint8),
        len(category_ok),
        -1 if complete is None else int(complete),
    )
    return REASONS[reason]


def _flat(values: np.ndarray, dtype: type) -> bool:
    return values.dtype == dtype and values.ndim == 1 and values.flags.c_contiguous


def times_scan(start: np.ndarray, end: np.ndarray | None, after: int) -> tuple[bool, bool, bool] | None:
    """validate_table's reductions over a table's times in one pass (``load.c``): (an interval ends
    before it starts, ``start`` strictly increases, an end is past ``after``). None where the numpy
    reductions run: no library, columns not int64, ``after`` or a time not one a clock gives."""
    fn = _LIB.function(ABI, "trace_times_scan", _N, _I64, ctypes.c_void_p, _N, _I64, restype=ctypes.c_int64)
    if fn is None or not _flat(start, np.int64) or (end is not None and not _flat(end, np.int64)):
        return None
    if (end is not None and len(end) != len(start)) or not 0 <= after < _MAX_TS_NS:
        return None
    out = np.zeros(3, np.int64)
    if not fn(len(start), start, None if end is None else end.ctypes.data, after, out):
        return None
    return bool(out[0]), bool(out[1]), bool(out[2])


def names_used(kind: np.ndarray, name: np.ndarray, n_names: int) -> np.ndarray | None:
    """Whether each name id in [0, n_names) names an operation's or a phase's row (``load.c``); None
    where the numpy code runs: no library, or columns not of the writer's types."""
    fn = _LIB.function(ABI, "trace_names_used", _N, _I8, _I32, _N, _U8)
    if fn is None or not _flat(kind, np.int8) or not _flat(name, np.int32) or len(kind) != len(name):
        return None
    used = np.zeros(n_names, np.uint8)
    fn(len(kind), kind, name, n_names, used)
    return used.view(bool)
