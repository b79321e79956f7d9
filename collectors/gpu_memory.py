"""GPU memory: the CUDA caching allocator's allocations and frees, into ``memory.arrows``.

Source: torch's allocator history (``torch.cuda.memory._record_memory_history``) with no context
and no stacks, so each allocation costs the allocator one small trace entry and no Python. The writer
thread drains the entries at every flush (``torch.cuda.memory._snapshot()``, then the history is
cleared so the next drain sees only new entries) and writes them as rows, times converted to the
events' clock. benchmarks/memory_cost.py measures what this costs per allocation and per drained
entry (BENCHMARKS.md, "GPU memory and sharing"); CUPTI's memory activity was not used because it sees
only the allocator's cudaMalloc/cudaFree of whole segments, not the blocks the program asks for.

Limits: the history has no thread id, so rows carry thread -1 and the analysis attributes them to the
main thread's open operation (rlscope/analysis/memory.py); an entry recorded between a drain's
snapshot and its clear is lost (the analysis tolerates unpaired events). Starts when the program
imports torch, with CUDA available; anything failing warns once and the recording stops, never the job.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rlscope import _imports
from rlscope.errors import warn_once
from rlscope.trace import schema as S

MAX_ENTRIES = 1_000_000  # history ring buffer between two drains (a drain per flush, 1 s by default)
ACTIONS = {
    "alloc": S.MEMORY_ALLOC,
    "free_requested": S.MEMORY_FREE,
    "segment_alloc": S.MEMORY_SEGMENT_ALLOC,
    "segment_free": S.MEMORY_SEGMENT_FREE,
}
# entries the analysis does not use: not recorded (fewer to drain)
SKIP = ["free_completed", "segment_map", "segment_unmap", "snapshot", "oom"]


def enabled_for(session: Any) -> bool:
    """Recorded with GPU collection on, unless ``RLSCOPE_GPU_MEMORY=0``."""
    if os.environ.get("RLSCOPE_GPU_MEMORY", "1") == "0":
        return False
    return session.options.get("gpu", "auto") not in (False, None, "off")


def record_history(torch: Any, on: bool, clear: bool = False) -> None:
    """Switch the allocator history on (no context, no stacks) or off."""
    mem = torch.cuda.memory
    if not on:
        mem._record_memory_history(enabled=None)
        return
    kwargs: dict[str, Any] = {"context": None, "stacks": "python", "max_entries": MAX_ENTRIES}
    try:
        mem._record_memory_history(enabled="all", clear_history=clear, skip_actions=SKIP, **kwargs)
    except TypeError:  # older torch: no skip_actions / clear_history
        mem._record_memory_history(enabled="all", **kwargs)


def unix_to_trace_ns(time_us: Any, now_unix_ns: int, now_trace_ns: int) -> int:
    """An entry's ``time_us`` on the events' clock (torch stamps Unix time; a monotonic stamp is kept)."""
    t_ns = int(time_us * 1000)
    if abs(t_ns - now_unix_ns) < 86_400 * 10**9:
        return t_ns - (now_unix_ns - now_trace_ns)
    return t_ns


def entries_to_rows(snapshot: dict[str, Any], now_unix_ns: int, now_trace_ns: int) -> list[tuple]:
    """Rows (MEMORY_COLUMNS order) from a snapshot's ``device_traces``; unused actions dropped."""
    rows = []
    for device, entries in enumerate(snapshot.get("device_traces", []) or []):
        for e in entries:
            action = ACTIONS.get(e.get("action"))
            if action is None:
                continue
            ts = unix_to_trace_ns(e.get("time_us", 0), now_unix_ns, now_trace_ns)
            rows.append(
                (
                    ts,
                    -1,
                    device,
                    action,
                    int(e.get("addr", 0)),
                    int(e.get("size", 0)),
                    int(e.get("stream", 0)),
                )
            )
    rows.sort(key=lambda r: r[0])
    return rows


def initial_rows(snapshot: dict[str, Any], ts: int) -> list[tuple]:
    """What the allocator already held when recording started: its segments and live blocks, at ``ts``."""
    rows = []
    for seg in snapshot.get("segments", []) or []:
        dev, stream, addr = int(seg.get("device", 0)), int(seg.get("stream", 0)), int(seg.get("address", 0))
        rows.append((ts, -1, dev, S.MEMORY_SEGMENT_ALLOC, addr, int(seg.get("total_size", 0)), stream))
        for block in seg.get("blocks", []) or []:
            if block.get("state") == "active_allocated":
                rows.append((ts, -1, dev, S.MEMORY_ALLOC, addr, int(block.get("size", 0)), stream))
            addr += int(block.get("size", 0))
    return rows


class MemoryRecorder:
    """Records allocator events once torch is imported (a no-op collector until then)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch: Any = None
        self.rows: Any = None
        self.failed = False

    def start(self) -> MemoryRecorder:
        if enabled_for(self.session):
            _imports.when_imported("torch", self._begin)
        return self

    def _begin(self, torch: Any) -> None:
        from rlscope import annotate

        if annotate._active is not self.session or self.session.writer is None:
            return
        try:
            if not torch.cuda.is_available():
                return
            from rlscope.collectors.device_limits import devices_metadata

            schema = S.columns_schema(S.MEMORY_COLUMNS_DOC, "torch-history", devices_metadata())
            record_history(torch, True, clear=True)
            self.torch = torch
            self.rows = self.session.writer.add_stream(S.MEMORY_FILE, schema)
            self.rows.extend(initial_rows(torch.cuda.memory._snapshot(), self.session.clock()))
            record_history(torch, True, clear=True)
            self.session.writer.before_flush(self.flush)
        except Exception as e:  # never break the user's job
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        if not self.failed:
            self.failed = True
            warn_once(f"GPU memory recording off: {type(e).__name__}: {e}")
        try:
            if self.torch is not None:
                record_history(self.torch, False)
        except Exception:
            pass
        self.torch = None

    def flush(self) -> None:
        """Drain the allocator history into rows (writer thread)."""
        torch = self.torch
        if torch is None:
            return
        try:
            snap = torch.cuda.memory._snapshot()
            record_history(torch, True, clear=True)
            now_unix, now_trace = time.time_ns(), time.perf_counter_ns()
            self.rows.extend(entries_to_rows(snap, now_unix, now_trace))
        except Exception as e:
            self._fail(e)

    def stop(self) -> None:
        if self.torch is None:
            return
        self.flush()
        try:
            if self.torch is not None:
                record_history(self.torch, False)
        except Exception as e:
            self._fail(e)
        self.torch = None

    def __repr__(self) -> str:
        return "MemoryRecorder"
