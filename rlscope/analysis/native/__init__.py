"""The analysis's row loops in C: one pass over a column where numpy makes several.

Analysing a dense trace is dozens of numpy passes over timelines of millions of rows, most of them
writing a fresh temporary the length of the timeline (and fresh pages cost about a second a GB on a
virtual machine). A loop here does one such chain in one pass over the rows, writing only its result.

Every ``*.c`` file in this folder is compiled together into one plain C library on first use, with
``cc`` (no Python headers: it works on numpy's buffers through ctypes), and cached like the
collectors' libraries, keyed by the sources and the compiler (rlscope/clib.py, which loads it).

Each loop keeps its numpy version, which runs where no library can be built or loaded, or with
``RLSCOPE_NATIVE_ANALYSIS=0``; the tests check that the two give the same bits. To that end the C
code adds floats in numpy's order (one after another, as ``np.add.at`` and ``np.cumsum`` do) and is
built without fast-math or contracted multiply-adds, so a figure does not depend on the path taken.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlscope import clib

ENV = clib.ENV
ABI = 13  # abi.c's: raised with any change of a function's arguments
SOURCES = Path(__file__).parent


def array_type(dtype: Any) -> type:
    """The ctypes argument type of a C-contiguous numpy array of ``dtype``, passed as the address of
    its first element: ``numpy.ctypeslib.ndpointer(dtype, flags="C_CONTIGUOUS")``'s checks at each
    call, without the objects numpy's ``array.ctypes`` makes for it, one of them in a reference cycle
    that only the cyclic garbage collector frees (rlscope-analyze runs without it: cli/heap.py)."""
    want = np.dtype(dtype)

    class Array(ctypes.c_void_p):
        @classmethod
        def from_param(cls, obj: Any) -> ctypes.c_void_p:
            if not isinstance(obj, np.ndarray) or obj.dtype != want or not obj.flags.c_contiguous:
                got = f"{obj.dtype} array" if isinstance(obj, np.ndarray) else type(obj).__name__
                raise TypeError(f"expected a C-contiguous {want} array, got {got}")
            return ctypes.c_void_p(obj.__array_interface__["data"][0])

    Array.__name__ = Array.__qualname__ = f"array_{want}"
    return Array


# argument types: arrays (C-contiguous, of this dtype; checked at each call) and scalars
F64 = array_type(np.float64)
I64 = array_type(np.int64)
I32 = array_type(np.int32)
I16 = array_type(np.int16)
I8 = array_type(np.int8)
U8 = array_type(np.uint8)
BOOL = array_type(np.bool_)  # one byte, 0 or 1: a C ``uint8_t``
N = ctypes.c_int64
DOUBLE = ctypes.c_double
# the array type of each integer column type a loop can be made for (typed)
INTEGER = {np.dtype(np.int8): I8, np.dtype(np.int16): I16, np.dtype(np.int32): I32, np.dtype(np.int64): I64}


def _library() -> clib.Library:
    return clib.Library("analysis_native", SOURCES, "the analysis's C loops")


_LIB = _library()


def wanted() -> bool:
    """Whether the C loops are asked for (``RLSCOPE_NATIVE_ANALYSIS=0`` says no)."""
    return clib.wanted()


def build() -> Path:
    """Compile (once, cached) and return the library's path; :class:`clib.BuildError` when it cannot
    be built here."""
    return _LIB.build()


def library() -> Any:
    """The loaded library, or None (no compiler, a failed build or load, or not wanted)."""
    return _LIB.library(ABI)


def unavailable() -> str | None:
    """Why the numpy loops run (None: the C ones do)."""
    return _LIB.unavailable(ABI)


def function(name: str, *argtypes: Any, restype: Any = None) -> Callable[..., Any] | None:
    """The C function ``name`` taking ``argtypes``, or None when the numpy loops run instead."""
    return _LIB.function(ABI, name, *argtypes, restype=restype)


def typed(
    name: str, dtypes: Sequence[np.dtype], *argtypes: Any, restype: Any = None
) -> Callable[..., Any] | None:
    """The C loop ``name`` made for integer columns of ``dtypes``: the function named with a suffix
    per column (``name_i32``, ``name_i32_i16``), an argument type None standing for the first
    column's array type; None where the numpy loops run: no C loops, or none made for those types
    (not an integer type, or a width the C file does not define).

    Why: the timeline narrows its id columns to what the trace holds, and a loop is written for each
    width rather than each column copied to one."""
    return _LIB.typed(ABI, INTEGER, name, [np.dtype(d) for d in dtypes], *argtypes, restype=restype)


class Segments(ctypes.Structure):
    """A timeline's segments as the C loops read them (segments.h): the rows' starts, each thread's
    last row and its end. Made by ``Timeline.segments``, which keeps the arrays it points at alive
    on it; passed where a loop takes ``SEGMENTS``."""

    _fields_ = [
        ("ts", ctypes.c_void_p),
        ("n", ctypes.c_int64),
        ("n_last", ctypes.c_int64),
        ("last", ctypes.c_void_p),
        ("end", ctypes.c_void_p),
    ]


SEGMENTS = ctypes.POINTER(Segments)  # an argument: a Segments passed by address
