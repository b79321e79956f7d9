"""The analysis's C loops (rlscope/analysis/native): built, loaded, refused and switched off.

What each loop computes is checked against its numpy version in the tests of the module that uses
it; here, only the library's life: where it cannot be had, the numpy loops run and nothing fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlscope import clib
from rlscope.analysis import native


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process that has not loaded the library yet, with its own empty build cache."""
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_LIB", native._library())


def test_the_library_builds_and_its_functions_are_found(fresh):
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    assert native.unavailable() is None
    abi = native.function("analysis_native_abi", restype=native.N)
    assert abi is not None and abi() == native.ABI
    assert list((clib.build_dir()).glob("analysis_native-*.so"))


def test_switched_off_the_numpy_loops_run(fresh, monkeypatch):
    monkeypatch.setenv(native.ENV, "0")
    assert native.function("analysis_native_abi", restype=native.N) is None
    assert native.unavailable() == f"{native.ENV}=0"


def test_without_a_compiler_the_numpy_loops_run(fresh, monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert native.function("analysis_native_abi", restype=native.N) is None
    assert native.unavailable() == "no C compiler (cc)"


def test_a_library_of_another_version_is_not_called(fresh, monkeypatch):
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    monkeypatch.setattr(native, "_LIB", native._library())
    monkeypatch.setattr(native, "ABI", native.ABI + 1)
    assert native.function("analysis_native_abi", restype=native.N) is None
    assert "version mismatch" in native.unavailable()


def test_a_typed_loop_is_found_for_the_widths_it_is_made_for(fresh):
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    args = (native.N, native.N, native.I64, native.N, native.I64, None, native.N, None)
    for dtype in (np.int8, np.int16, np.int32, np.int64):  # timeline.c makes the fill for each
        assert native.typed("timeline_fill", [np.dtype(dtype)], *args) is not None
        assert (
            native.function(f"timeline_fill_i{8 * np.dtype(dtype).itemsize}").argtypes[5]
            is native.INTEGER[np.dtype(dtype)]
        )
    assert native.typed("timeline_fill", [np.dtype(np.float64)], *args) is None  # not an integer type
    assert native.typed("windows_row_window", [np.dtype(np.int8)]) is None  # a width windows.c lacks
    assert native.typed("timeline_fill", []) is None
