"""A windows estimate's factor of each row as the small tables it is worked out from.

Why a module of its own: the windows estimate (windows.py) makes these tables and the residual
correction's rebuild (residual.py) reads them; residual already imports what imports windows, so
the tables live below both.
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from rlscope.analysis import native


class RowFactorsC(ctypes.Structure):
    """residual.c's RowFactors: :class:`RowFactors`' tables as the C passes read them."""

    _fields_ = [
        ("op", ctypes.c_void_p),
        ("full_row", ctypes.c_void_p),
        ("n", ctypes.c_int64),
        ("n_ranges", ctypes.c_int64),
        ("ranges", ctypes.c_void_p),
        ("counted", ctypes.c_void_p),
        ("rest", ctypes.c_void_p),
        ("n_compared", ctypes.c_int64),
        ("compared", ctypes.c_void_p),
        ("bounds", ctypes.c_void_p),
        ("first", ctypes.c_int64),
        ("piece_factor", ctypes.c_void_p),
        ("n_leaves", ctypes.c_int64),
        ("leaf_lo", ctypes.c_void_p),
        ("leaves", ctypes.c_void_p),
        ("slots", ctypes.c_void_p),
    ]


LEAF_SLOTS, SLOT_SIZE = 8, 2 + 128  # residual.c's LEAF_SLOTS and SLOT_SIZE (2 + PAIRWISE_BLOCK)


ROW_FACTORS = ctypes.POINTER(RowFactorsC)


@dataclasses.dataclass
class RowFactors:
    """A windows estimate's factor of each row, as the small tables windows_factor_pass makes them
    from (windows._factor_pass): per instance + 1 ``counted`` (the counted rows' factor: a full-window
    row in an instance or on the main thread, ``main``'s [start, stop) pairs) and ``rest`` (the
    others'), and the compared pieces' rows (``compared``, ascending, of ``bounds`` after ``first``)
    with their factors, in full-window rows (``full_row``). Why: a column of every row (72 MB on a
    4.95 M-row trace) at the analysis's peak of memory; correct_windows' rebuild works each row's
    factor out where it reads it (:meth:`tables`), or makes the column (:meth:`column`)."""

    op: np.ndarray
    full_row: np.ndarray
    main: np.ndarray
    counted: np.ndarray
    rest: np.ndarray
    compared: np.ndarray
    bounds: np.ndarray
    first: int
    piece_factor: np.ndarray

    def column(self) -> np.ndarray:
        """The factor of every row (windows_factor_pass)."""
        types = (native.N, None, native.BOOL, native.N, native.I64, native.F64, native.F64, native.N)
        types += (native.I64, native.I64, native.N, native.F64, native.F64)
        fn = native.typed("windows_factor_pass", [self.op.dtype], *types)
        assert fn is not None, "RowFactors are made where windows_factor_pass runs"
        out = np.empty(len(self.op))
        args = (self.counted, self.rest, len(self.compared), self.compared, self.bounds, self.first)
        fn(len(out), self.op, self.full_row, len(self.main) // 2, self.main, *args, self.piece_factor, out)
        return out

    def tables(self, leaves: tuple[np.ndarray, np.ndarray, np.ndarray]) -> RowFactorsC | None:
        """The tables as residual.c reads them (pointing at these arrays: kept alive with this), or None
        where it reads no such columns (an op column other than int32's). ``leaves``: where the
        rebuild sums the time gone (:func:`_gone_leaves`)."""
        if self.op.dtype != np.int32 or not all(
            c.flags.c_contiguous for c in (self.op, self.full_row, self.main, self.counted, self.rest)
        ):
            return None
        f = RowFactorsC()
        f.n_leaves, f.leaf_lo = len(leaves[1]), leaves[0].ctypes.data
        f.leaves, f.slots = leaves[1].ctypes.data, leaves[2].ctypes.data
        f.op, f.full_row, f.n = self.op.ctypes.data, self.full_row.ctypes.data, len(self.op)
        f.n_ranges, f.ranges = len(self.main) // 2, self.main.ctypes.data
        f.counted, f.rest = self.counted.ctypes.data, self.rest.ctypes.data
        f.n_compared, f.compared = len(self.compared), self.compared.ctypes.data
        f.bounds, f.first, f.piece_factor = self.bounds.ctypes.data, self.first, self.piece_factor.ctypes.data
        return f
