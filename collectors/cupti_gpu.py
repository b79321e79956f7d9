"""GPU activity through the CUPTI Activity API (cupti-python): kernels, copies, memsets, CUDA API calls.

CUPTI hands over full buffers of records on its own thread; each record becomes one row of
``gpu.arrows`` (schema in rlscope.trace.schema), with timestamps moved onto the events' clock
(perf_counter_ns) by an offset re-measured at every flush. Buffers are force-flushed at every
writer flush, so records stream to disk while the job runs and memory stays bounded.

Attribution needs no per-scope cost: the analyzer joins each GPU record to its API call through
the CUPTI correlation id, and the API call to the operation open on its thread at that time.
Kernels launched by any library in the process (Triton, CuPy, JAX) are seen, not only torch's.
"""

from __future__ import annotations

import contextlib
from typing import Any

from rlscope import annotate, categories
from rlscope.collectors.clock import clock_offset
from rlscope.trace import schema as S

BUFFER_BYTES = 8 * 1024 * 1024
COPY_KINDS = {
    1: "memcpy HtoD",
    2: "memcpy DtoH",
    3: "memcpy HtoA",
    4: "memcpy AtoH",
    8: "memcpy DtoD",
    10: "memcpy PtoP",
}
PAGEABLE = 1  # CUpti_ActivityMemoryKind: CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE


def copy_label(kind: int, pageable: bool) -> str:
    """A copy's name in the trace: its direction, and ``pageable`` when its host side is pageable memory
    (the driver stages such copies and the caller blocks; rlscope.analysis.advice.copies reads it)."""
    return COPY_KINDS.get(kind, "memcpy") + (" pageable" if pageable else "")


class CuptiUnavailable(RuntimeError):
    """cupti-python is missing, does not match the CUDA runtime, or CUPTI refused to trace."""


class CuptiCollector:
    """Streams CUPTI activity records into the session's ``gpu.arrows``."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.offset = 0
        self._cupti: Any = None
        self._kinds: list[Any] = []
        self.rows: Any = None
        self._threads: dict[int, int] = {}

    def start(self) -> CuptiCollector:
        try:
            from cupti import cupti
        except Exception as e:  # ImportError, or a binding that does not match the runtime
            raise CuptiUnavailable(f"cupti-python not usable ({type(e).__name__}: {e})") from None
        self._cupti = cupti
        kinds = cupti.ActivityKind
        schema = S.columns_schema(S.GPU_COLUMNS_DOC, "cupti-python")
        self.rows = self.session.writer.add_stream(S.GPU_FILE, schema)
        self._handlers = {
            int(kinds.CONCURRENT_KERNEL): self._kernel,
            int(kinds.MEMCPY): self._memcpy,
            int(kinds.MEMSET): self._memset,
            int(kinds.RUNTIME): self._api,
            int(kinds.DRIVER): self._api,
        }
        try:
            cupti.activity_register_callbacks(self._request, self._complete)
            for kind in (kinds.CONCURRENT_KERNEL, kinds.MEMCPY, kinds.MEMSET, kinds.RUNTIME, kinds.DRIVER):
                cupti.activity_enable(kind)
                self._kinds.append(kind)
        except Exception as e:  # e.g. CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, no driver
            self._disable()
            raise CuptiUnavailable(f"CUPTI refused activity tracing ({e})") from None
        self._sync_clock()
        self.session.writer.before_flush(self.flush)
        return self

    # -- clock ----------------------------------------------------------------------------
    def _sync_clock(self) -> None:
        """offset = CUPTI clock - perf_counter_ns (re-measured at every flush: the clocks drift apart)."""
        self.offset = clock_offset(self._cupti.get_timestamp)

    # -- CUPTI callbacks (on CUPTI's thread) ------------------------------------------------
    def _request(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _complete(self, activities: list[Any]) -> None:
        self._threads = {st.ident32: st.thread for st in self.session.thread_states()}
        handlers = self._handlers
        for r in activities:
            h = handlers.get(int(r.kind))
            if h is not None:
                h(r)

    def _gpu(self, r: Any, category: int, name: int, nbytes: int) -> None:
        off = self.offset
        row = (
            category,
            r.start - off,
            r.end - off,
            r.correlation_id,
            -1,
            r.device_id,
            r.stream_id,
            name,
            nbytes,
        )
        self.rows.append(row)

    def _kernel(self, r: Any) -> None:
        self._gpu(r, categories.GPU_KERNEL, annotate.intern(r.name or "<kernel>"), 0)

    def _memcpy(self, r: Any) -> None:
        kinds = (int(getattr(r, "src_kind", 0)), int(getattr(r, "dst_kind", 0)))
        name = annotate.intern(copy_label(int(r.copy_kind), PAGEABLE in kinds))
        self._gpu(r, categories.GPU_MEMCPY, name, r.bytes)

    def _memset(self, r: Any) -> None:
        self._gpu(r, categories.GPU_MEMSET, annotate.intern("memset"), r.bytes)

    def _api(self, r: Any) -> None:
        off = self.offset
        tid = r.thread_id & 0xFFFFFFFF
        thread = self._threads.get(tid, -2 - tid)  # threads rlscope never saw keep a distinct id
        api = "runtime" if int(r.kind) == int(self._cupti.ActivityKind.RUNTIME) else "driver"
        self.rows.append(
            (
                categories.CUDA_API,
                r.start - off,
                r.end - off,
                r.correlation_id,
                thread,
                -1,
                -1,
                annotate.intern(f"cuda {api} cbid {r.cbid}"),
                0,
            )
        )

    # -- lifecycle --------------------------------------------------------------------------
    def flush(self) -> None:
        self._sync_clock()
        self._cupti.activity_flush_all(1)  # forced: incomplete buffers too, so records stream

    def _disable(self) -> None:
        for kind in self._kinds:
            with contextlib.suppress(Exception):
                self._cupti.activity_disable(kind)
        self._kinds = []

    def stop(self) -> None:
        if self._cupti is None:
            return
        try:
            self.flush()
        finally:
            self._disable()

    def __repr__(self) -> str:
        return "CuptiCollector"
