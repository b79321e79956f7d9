"""Compile a native part of rlscope once and cache it, for the collectors' modules.

The scope recorder (``scope_native.c``), the backend-op recorder (``torch_native.cpp``), the GPU memory
tracker (``memory_native.cpp``, built through torch_native) and the CUPTI consumer (``cupti_native.c``)
are compiled on first use against what this machine has (Python's headers, torch's, CUDA's), not
shipped prebuilt: a wheel cannot know which torch or CUDA it will meet. The cache and the build
(``$RLSCOPE_CACHE_DIR/build``, keyed by everything that went into a library; the atomic rename that
lets several processes build at once; :class:`BuildError`) are rlscope/clib.py's, shared with the
plain C libraries of the trace's checks and the analysis; this module names them for the collectors.
"""

from __future__ import annotations

from rlscope.clib import (
    CACHE_ENV,
    DEPRECATED_CACHE_ENV,
    BuildError,
    build,
    build_dir,
    cache_key,
    cache_root,
    find_compiler,
    first_error,
)

__all__ = [
    "CACHE_ENV",
    "DEPRECATED_CACHE_ENV",
    "BuildError",
    "build",
    "build_dir",
    "cache_key",
    "cache_root",
    "find_compiler",
    "first_error",
]
