"""Keep freed memory in the process for the analysis's next arrays (glibc only; elsewhere a no-op).

Why: the analysis makes and drops hundreds of temporary arrays of a timeline's length (tens of MB
each). By default glibc maps each one fresh from the kernel and unmaps it when freed, so every array
pays a page fault per page it touches again: on real traces that was about 40% of the analysis's CPU
time. Served from the heap, and the heap not trimmed when they are freed, the pages are reused. The
peak memory stays about the same (the largest arrays alive at once); the heap is returned at exit.

numpy's advice that large arrays use huge pages is turned off with it: where the kernel compacts
memory on demand for advised regions (``transparent_hugepage/defrag`` ``madvise``, the usual
default) each new huge page cost more system time than the fewer page faults saved, and with the
heap reused most pages are touched fresh only once.

Arrow's buffers (the trace as read) come from the same heap with it: under Arrow's own allocator
(mimalloc) what the reading freed served Arrow alone, and the analysis's arrays took fresh pages.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import importlib
from collections.abc import Iterator

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
    taken = bool(mallopt(_M_MMAP_THRESHOLD, _LARGE)) and bool(mallopt(_M_TRIM_THRESHOLD, _LARGE))
    if taken:
        _no_huge_pages()
        _arrow_on_the_heap()
    return taken


def _no_huge_pages() -> None:
    """numpy's huge-page advice off (``numpy._core`` since 2.0, ``numpy.core`` before)."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            importlib.import_module(module)._set_madvise_hugepage(False)
            return
        except (ImportError, AttributeError):
            continue


def _arrow_on_the_heap() -> None:
    """Arrow's buffers (the trace's columns as read) from the same heap: freed, they serve the
    analysis's arrays, where Arrow's own allocator (mimalloc) kept them for Arrow alone."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


@contextlib.contextmanager
def no_cycle_collection(process_ends: bool) -> Iterator[None]:
    """Python's cyclic garbage collector off while the analysis runs; ``process_ends``: the process
    exits after it, and what is left is frozen (``gc.freeze``), not scanned by the exit's collection.

    Why: the collector scans every container made since its last pass, each ~700 allocations, and
    the imports and the analysis make tens of thousands (modules' functions and dicts, argparse's
    and the summary's objects): 20-60 ms of a run on a 2-core VM, for about 1,000 small objects in
    reference cycles left at the end of a 4.95 M-row trace (functions and classes made while
    importing, argparse's formatters), about as many on any trace. No array is held by a cycle
    (the C loops' arguments make none: rlscope/analysis/native), so the peak memory does not change."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if process_ends:
            gc.freeze()
        if enabled:
            gc.enable()
