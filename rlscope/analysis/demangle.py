"""Readable names for GPU kernels: ``_Z10add_kernelPfS_S_i`` -> ``add_kernel(float*, float*, float*, int)``.

The trace keeps kernel names as CUPTI recorded them (mangled); reports show them demangled.

Why the C++ runtime's ``abi::__cxa_demangle`` (libstdc++, through ctypes): it is the demangler the
compilers and ``c++filt`` use, so names read exactly as in the kernel's source and in Nsight; it is
already loaded with torch and present wherever CUDA runs, so rlscope gains no dependency; and it is
called once per distinct name (cached), which is a few hundred names for a whole training run. A
hand-written demangler would be wrong on the templates that matter most (torch's elementwise and
reduction kernels). Where no C++ runtime is found, or a name does not demangle, the name is shown
as recorded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

__all__ = ["demangle"]

# libstdc++ (Linux), then libc++abi / libc++ (macOS, clang toolchains): each exports __cxa_demangle
_RUNTIMES = ("stdc++", "c++abi", "c++")


@functools.cache
def _runtime() -> tuple[Any, Any] | None:
    """``(__cxa_demangle, free)`` of the first C++ runtime found, or None."""
    for lib in _RUNTIMES:
        path = ctypes.util.find_library(lib)
        if path is None and lib == "stdc++":
            path = "libstdc++.so.6"  # find_library needs ldconfig or a compiler; the soname does not
        if path is None:
            continue
        try:
            cxa = getattr(ctypes.CDLL(path), "__cxa_demangle")
            free = ctypes.CDLL(ctypes.util.find_library("c")).free  # None: the process's own free
        except (OSError, AttributeError, TypeError):
            continue
        # char* __cxa_demangle(const char* mangled, char* buf, size_t* len, int* status): buf NULL,
        # so the result is malloc'd (freed below) and the call is thread-safe
        cxa.restype = ctypes.c_void_p
        cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        free.restype = None
        free.argtypes = [ctypes.c_void_p]
        return cxa, free
    return None


@functools.lru_cache(maxsize=16384)
def demangle(name: str) -> str:
    """``name`` demangled when it is a mangled C++ name (``_Z...``), else ``name`` unchanged."""
    if not name.startswith("_Z"):
        return name
    runtime = _runtime()
    if runtime is None:
        return name
    cxa, free = runtime
    status = ctypes.c_int(-1)
    out = cxa(name.encode("utf-8", "replace"), None, None, ctypes.byref(status))
    if not out:
        return name
    try:
        return ctypes.string_at(out).decode("utf-8", "replace") if status.value == 0 else name
    finally:
        free(out)
