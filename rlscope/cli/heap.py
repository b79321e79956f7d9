"""Keep freed memory in the process for the analysis's next arrays (glibc only; elsewhere a no-op).

Why: the analysis makes and drops hundreds of temporary arrays of a timeline's length (tens of MB
each). By default glibc maps each one fresh from the kernel and unmaps it when freed, so every array
pays a page fault per page it touches again: on real traces that was about 40% of the analysis's CPU
time. Served from the heap, and the heap not trimmed when they are freed, the pages are reused. The
peak memory stays about the same (the largest arrays alive at once); the heap is returned at exit.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_LARGE = 1 << 30  # allocations below it come from the heap; a free leaves up to it on the heap


def keep_freed_memory() -> bool:
    """Ask glibc to serve large allocations from the heap and keep freed ones; whether it took."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        return False
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGE)) and bool(mallopt(_M_TRIM_THRESHOLD, _LARGE))
