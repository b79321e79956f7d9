"""GPU activity through torch.profiler (Kineto): the default GPU backend when torch has CUDA.

Kineto collects CUPTI records in C++ (about 3 µs per CUDA call on an H200, against about 55 µs when
every record goes through cupti-python), but hands them over only when the profiler stops, and
only on the thread that started it. So the collector runs in cycles: every ``cycle_s`` seconds,
at the next scope exit on that thread, it stops Kineto, restarts it, and queues the finished
cycle's events; the writer thread converts them to ``gpu.arrows`` rows at its next flush. Memory
stays bounded by one cycle. A kernel still running at a cycle boundary can be missed.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from rlscope import _imports, annotate, categories
from rlscope.collectors.clock import clock_offset
from rlscope.trace import schema as S


class KinetoCollector:
    def __init__(self, session: Any, cycle_s: float = 10.0, warn: Any = print) -> None:
        self.session = session
        self.cycle_ns = int(cycle_s * 1e9)
        self._warn = warn
        self._pending: collections.deque[tuple[Any, int]] = collections.deque()
        self.prof: Any = None
        self.rows: Any = None
        self._owner = 0

    def start(self) -> KinetoCollector:
        _imports.when_imported("torch", self._begin)
        return self

    def _begin(self, torch: Any) -> None:
        if annotate._active is not self.session:
            return
        if not torch.cuda.is_available():
            self._warn("GPU tracing off: torch sees no CUDA device; CPU-only trace")
            return
        from torch._C._autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        self._cuda = DeviceType.CUDA
        self._disable = torch.autograd._disable_profiler
        self._profile = lambda: profile(activities=[ProfilerActivity.CUDA])
        self.rows = self.session.writer.add_stream(S.GPU_FILE, S.columns_schema(S.GPU_COLUMNS_DOC, "kineto"))
        self._owner = threading.get_ident()
        self._start_cycle()
        self.session.writer.before_flush(self.flush)
        self.session.set_ticker(self.tick, self.cycle_ns)

    def _start_cycle(self) -> None:
        self.offset = clock_offset(time.time_ns)  # Kineto reports Unix-epoch nanoseconds
        self.prof = self._profile()
        self.prof.start()

    def _end_cycle(self, restart: bool) -> None:
        # Not prof.stop(): that also parses every event into Python FunctionEvents on this (the
        # user's) thread. The raw result is kept, and its events are read on the writer thread.
        self.prof = None
        result = self._disable()
        self._pending.append((result, self.offset))
        if restart:
            self._start_cycle()

    def tick(self) -> None:
        """Called on a scope exit once a cycle is due: rotate Kineto (only on its own thread)."""
        if self.prof is not None and threading.get_ident() == self._owner:
            self._end_cycle(restart=True)

    def flush(self) -> None:
        """Convert finished cycles' events to rows (on the writer thread)."""
        while self._pending:
            result, offset = self._pending.popleft()
            self._convert(result.events(), offset)

    def _convert(self, events: Any, offset: int) -> None:
        threads = {st.ident32: st.thread for st in self.session.thread_states()}
        intern = annotate.intern
        append = self.rows.append
        cuda = self._cuda
        for e in events:
            name = e.name()
            start = e.start_ns() - offset
            end = start + e.duration_ns()
            if e.device_type() == cuda:
                if name.startswith("Memcpy"):
                    cat = categories.GPU_MEMCPY
                elif name.startswith("Memset"):
                    cat = categories.GPU_MEMSET
                else:
                    cat = categories.GPU_KERNEL
                append(
                    (
                        cat,
                        start,
                        end,
                        e.correlation_id(),
                        -1,
                        e.device_index(),
                        e.device_resource_id(),
                        intern(name),
                        0,
                    )
                )
            elif name.startswith("cu"):  # CUDA runtime/driver call: cudaLaunchKernel, cuLaunchKernel, ...
                tid = e.device_resource_id() & 0xFFFFFFFF  # Kineto: the calling thread's pthread id
                append(
                    (
                        categories.CUDA_API,
                        start,
                        end,
                        e.correlation_id(),
                        threads.get(tid, -2 - tid),
                        -1,
                        -1,
                        intern(name),
                        0,
                    )
                )

    def stop(self) -> None:
        if self.prof is not None:
            if threading.get_ident() == self._owner:
                self._end_cycle(restart=False)
            else:
                self._warn("GPU records of the last cycle lost: the session stopped on another thread")
                self.prof = None
        self.flush()

    def __repr__(self) -> str:
        return "KinetoCollector"
