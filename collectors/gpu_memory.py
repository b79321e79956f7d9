"""GPU memory: the CUDA caching allocator's allocations and frees, into ``memory.arrows``.

Source, in order of preference:

1. ``windows`` (the default with the session's windows on; ``RLSCOPE_GPU_MEMORY=windows``): torch's
   allocator history, on in full windows only (docs/overhead.md), like GPU tracing. Why: once
   anything records (a tracker attached, or the history on), the allocator builds a trace entry for
   every event, ~300 ns an event inside a real loop against ~100 in a tight one; recorded always,
   the light windows pay it where no window can see it, and torch cannot detach a tracker. The
   history can be switched off, and then the allocator builds nothing. Measured on an H100 (the
   eager simulator, ``validate --twin``): raw slowdown
   1.13-1.14x against 1.29-1.34x with the native tracker always on, and the corrected total +0.3% and
   +1.7% against +2.4% and +5.1%. A full window opens with the allocator's live blocks and segments
   (``MEMORY_LIVE``, ``MEMORY_SEGMENT_LIVE`` rows, from a snapshot) and closes with a snapshot of its
   entries, both on the job's thread inside the switch (rlscope's time, removed). The memory
   figures then cover the full windows (rlscope/analysis/memory.py), and the process's peaks come
   from the allocator's own high-water marks (``MEMORY_PEAK`` rows, below), which see every event.
2. ``native`` (without windows, ``windows=False``, or ``RLSCOPE_GPU_MEMORY=native``): rlscope's
   allocator trace tracker (``memory_native.cpp``), built on first use like the backend recorder.
   Each allocator event is stamped (events' clock, allocating thread) and queued in C++; the writer
   thread drains the queue into numpy arrays, no Python per event. Every event is recorded, and the
   analysis removes its calibrated cost per event.
3. ``history``: torch's allocator history (``torch.cuda.memory._record_memory_history``) with no
   context, drained at every flush with ``torch.cuda.memory._snapshot()`` and then cleared. Used
   when the native tracker cannot be built (no CUDA headers, no compiler) or with
   ``RLSCOPE_GPU_MEMORY=history``. Why it is only the fallback: the drain builds a Python dict per
   event while holding the GIL -- on PPO with the policy on the GPU about 50k events a second,
   which the job's own thread waits for in light and full windows alike, so the in-run windows
   cannot see or remove it. benchmarks/memory_cost.py measures both per event and per drain.

Every source also records the allocator's high-water marks per device (``MEMORY_PEAK``,
``MEMORY_SEGMENT_PEAK``: ``torch.cuda.max_memory_allocated`` / ``_reserved``, two counter reads)
as recording starts and as it stops: a peak reached outside a recording window is still known, and
with every event recorded the marks check the recorded curve.

CUPTI's memory activity was not used because it sees only the allocator's cudaMalloc/cudaFree of
whole segments, not the blocks the program asks for.

Limits: history rows carry thread -1 (torch's history has no thread id; the analysis attributes them
to the main thread's open operation, rlscope/analysis/memory.py); with the history an entry
recorded between a drain's snapshot and its clear is lost, and the native queue drops (and counts)
events past 16M undrained ones (the analysis tolerates unpaired events). Starts when the program
imports torch, with CUDA available; anything failing warns once and the recording stops, never the
job.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlscope import _imports, annotate, categories
from rlscope.errors import warn_once
from rlscope.trace import schema as S

NATIVE_SOURCE = Path(__file__).with_name("memory_native.cpp")
NATIVE_ABI = 2
_native: Any = None  # the loaded library (the tracker is process-wide)

MAX_ENTRIES = 1_000_000  # history ring buffer between two drains (a drain per flush, 1 s by default)
ACTIONS = {
    "alloc": S.MEMORY_ALLOC,
    "free_requested": S.MEMORY_FREE,
    "segment_alloc": S.MEMORY_SEGMENT_ALLOC,
    "segment_free": S.MEMORY_SEGMENT_FREE,
}
# entries the analysis does not use: not recorded (fewer to drain)
SKIP = ["free_completed", "segment_map", "segment_unmap", "snapshot", "oom"]


class NativeMemoryUnavailable(RuntimeError):
    """The native tracker cannot be built or loaded here; the message is one line saying why."""


def cuda_include_dirs() -> list[Path]:
    """Directories holding ``cuda_runtime_api.h`` (c10's CUDA headers include it)."""
    from rlscope.collectors.cupti_native import cuda_roots

    out = []
    for r in cuda_roots():
        for inc in (r / "include", r / "targets/x86_64-linux/include"):
            if (inc / "cuda_runtime_api.h").exists() and inc not in out:
                out.append(inc)
    return out


def load_native(torch: Any) -> Any:
    """Build (first use, cached like the backend recorder) and load memory_native.cpp."""
    global _native
    if _native is not None:
        return _native
    lib = open_tracker(torch)
    if lib.mn_abi_version() != NATIVE_ABI:
        raise NativeMemoryUnavailable("native memory tracker: version mismatch with its Python side")
    _native = lib
    return lib


def open_tracker(torch: Any, source: Path = NATIVE_SOURCE, what: str = "the native memory tracker") -> Any:
    """Build ``source`` (memory_native.cpp, or another version of it with the same C functions, as
    a variant built to measure one part's cost) and load it with its C functions declared; no version check,
    not cached: :func:`load_native` is the collector's way in."""
    from rlscope.collectors import torch_native

    inc = cuda_include_dirs()
    if not inc:
        raise NativeMemoryUnavailable(
            "no CUDA headers (cuda_runtime_api.h) to build the native memory tracker"
        )
    try:
        extra = (f"-I{inc[0]}", "-lc10_cuda")
        path = torch_native.build(torch, source, extra, what=what)
        lib = ctypes.CDLL(str(path))
    except torch_native.NativeBackendUnavailable as e:
        raise NativeMemoryUnavailable(str(e)) from None
    except OSError as e:
        raise NativeMemoryUnavailable(f"cannot load the native memory tracker: {e}") from None
    lib.mn_pending.restype = ctypes.c_size_t
    lib.mn_drops.restype = ctypes.c_uint64
    lib.mn_now.restype = ctypes.c_int64
    lib.mn_enable.argtypes = [ctypes.c_int]
    p64, p16, p8 = (ctypes.POINTER(t) for t in (ctypes.c_int64, ctypes.c_int16, ctypes.c_int8))
    lib.mn_drain.restype = ctypes.c_size_t
    lib.mn_drain.argtypes = [p64, p64, p16, p8, p64, p64, p64, ctypes.c_size_t]
    return lib


def drain_native(lib: Any, since_ns: int) -> list[np.ndarray] | None:
    """The queued events as MEMORY_COLUMNS arrays (events before ``since_ns`` dropped: a
    previous session's in this process); None when there are none."""
    n = lib.mn_pending()
    if not n:
        return None
    ts, tid, addr, size, stream = (np.empty(n, np.int64) for _ in range(5))
    dev, action = np.empty(n, np.int16), np.empty(n, np.int8)
    cols = (ts, tid, dev, action, addr, size, stream)
    ptrs = [a.ctypes.data_as(ctypes.POINTER(np.ctypeslib.as_ctypes_type(a.dtype))) for a in cols]
    k = lib.mn_drain(*ptrs, n)
    keep = ts[:k] >= since_ns
    if not keep.any():
        return None
    return [c[:k][keep] for c in cols]


def memory_mode() -> str:
    """``RLSCOPE_GPU_MEMORY``: ``0`` off, ``native``, ``history`` or ``windows`` (module docstring);
    anything else (``1``, unset) the default, ``windows`` (the native tracker in a session without
    windows)."""
    value = os.environ.get("RLSCOPE_GPU_MEMORY", "windows")
    if value == "0":
        return "off"
    return value if value in ("native", "history", "windows") else "windows"


def high_water_rows(torch: Any, ts: int) -> list[tuple]:
    """The allocator's high-water marks (allocated, reserved) of every device at ``ts``, as
    MEMORY_PEAK and MEMORY_SEGMENT_PEAK rows; 0 before CUDA is initialized (nothing allocated yet,
    and reading the counters then is not worth initializing CUDA for). Counter reads only: no CUDA
    call, no context on a device the job never used."""
    init = torch.cuda.is_initialized()
    rows = []
    for dev in range(torch.cuda.device_count()):
        allocated = int(torch.cuda.max_memory_allocated(dev)) if init else 0
        reserved = int(torch.cuda.max_memory_reserved(dev)) if init else 0
        rows.append((ts, -1, dev, S.MEMORY_PEAK, -1, allocated, 0))
        rows.append((ts, -1, dev, S.MEMORY_SEGMENT_PEAK, -1, reserved, 0))
    return rows


def enabled_for(session: Any) -> bool:
    """Recorded with GPU collection on, unless ``RLSCOPE_GPU_MEMORY=0``."""
    if memory_mode() == "off":
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


def initial_rows(snapshot: dict[str, Any], ts: int, live: bool = False) -> list[tuple]:
    """What the allocator already held when recording started: its segments and live blocks, at
    ``ts``; ``live``: as MEMORY_SEGMENT_LIVE / MEMORY_LIVE rows (a recording window opening)."""
    seg_action, block_action = (
        (S.MEMORY_SEGMENT_LIVE, S.MEMORY_LIVE) if live else (S.MEMORY_SEGMENT_ALLOC, S.MEMORY_ALLOC)
    )
    rows = []
    for seg in snapshot.get("segments", []) or []:
        dev, stream, addr = int(seg.get("device", 0)), int(seg.get("stream", 0)), int(seg.get("address", 0))
        rows.append((ts, -1, dev, seg_action, addr, int(seg.get("total_size", 0)), stream))
        for block in seg.get("blocks", []) or []:
            if block.get("state") == "active_allocated":
                rows.append((ts, -1, dev, block_action, addr, int(block.get("size", 0)), stream))
            addr += int(block.get("size", 0))
    return rows


class MemoryWindows:
    """The windows mode's switch: the allocator history on in full windows, off in light ones
    (a toggler of the session's windows, rlscope/session.py)."""

    def __init__(self, recorder: MemoryRecorder) -> None:
        self.recorder = recorder

    def set_enabled(self, on: bool) -> None:
        self.recorder.record_window(on)

    def __repr__(self) -> str:
        return "MemoryWindows"


class MemoryRecorder:
    """Records allocator events once torch is imported (a no-op collector until then)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.torch: Any = None
        self._lib: Any = None  # the native tracker's library, when it is the source
        self.native: Any = None  # the same, once attached to the allocator
        self.rows: Any = None
        self.failed = False
        self.drops = 0
        self._drops0 = 0
        self._t0 = 0
        self.windowed = False  # the windows mode: history on in full windows only
        self.recording = False  # windows mode: a full window's history is on

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

            # the windows mode needs the session's windows; without them it is the history mode
            self.windowed = memory_mode() == "windows" and bool(self.session.options.get("windows"))
            native = None if self.windowed else self._native(torch)
            source = "native" if native is not None else "torch-windows" if self.windowed else "torch-history"
            self._schema = S.columns_schema(S.MEMORY_COLUMNS_DOC, source, devices_metadata())
            self.rows = self.session.writer.add_stream(S.MEMORY_FILE, self._schema)
            self.torch = torch
            self._add(high_water_rows(torch, self.session.clock()), batch=native is not None)
            if self.windowed:  # nothing recorded until a full window opens
                self.session.add_toggler(MemoryWindows(self))
                return
            if native is not None:
                self._lib = native
                self._drops0 = native.mn_drops()
                if torch.cuda.is_initialized():
                    self._attach(snapshot=True)
                else:  # the allocator has no per-device state to attach to until CUDA is initialized
                    torch.cuda._lazy_call(self._attach)
            else:
                record_history(torch, True, clear=True)
                self.rows.extend(initial_rows(torch.cuda.memory._snapshot(), self.session.clock()))
                record_history(torch, True, clear=True)
            self.session.writer.before_flush(self.flush)
        except Exception as e:  # never break the user's job
            self._fail(e)

    def _attach(self, snapshot: bool = False) -> None:
        """Attach the native tracker: now, or from CUDA's lazy initialization (a tracker attached
        before it reaches no device, and initializing CUDA ourselves at torch's import would change
        the job: a context's memory, no CUDA in processes it forks). ``snapshot``: first record what
        the allocator already holds. Never raises (it may run inside the job's first CUDA call)."""
        lib, torch = self._lib, self.torch
        if lib is None or torch is None or self.native is not None:
            return
        try:
            self._t0 = lib.mn_now()
            if lib.mn_start() != 0:
                raise RuntimeError("torch refused the allocator trace tracker")
            self.native = lib
            init = initial_rows(torch.cuda.memory._snapshot(), self._t0) if snapshot else []
            if init:  # a batch too: the writer takes a flush's rows as all tuples or all batches
                self._append([np.asarray(c) for c in zip(*init, strict=True)])
        except Exception as e:  # never break the user's job
            self._fail(e)

    def record_window(self, on: bool) -> None:
        """Windows mode, at a switch on the job's thread: open a recording window (history on, then
        what the allocator holds, as LIVE rows) or close one (its entries, then history off, which
        clears it). Never raises. A window that opens before CUDA is initialized records nothing:
        initializing it here would change the job."""
        torch = self.torch
        if torch is None or on == self.recording:
            return
        try:
            if on:
                if not torch.cuda.is_initialized():
                    return
                record_history(torch, True, clear=True)
                self.recording = True
                ts = self.session.clock()  # after the history is on: an event before it is in the LIVE set
                self.rows.extend(initial_rows(torch.cuda.memory._snapshot(), ts, live=True))
            else:
                snap = torch.cuda.memory._snapshot()
                now_unix, now_trace = time.time_ns(), time.perf_counter_ns()
                record_history(torch, False)
                self.recording = False
                self.rows.extend(entries_to_rows(snap, now_unix, now_trace))
        except Exception as e:
            self._fail(e)

    def _high_water_at_stop(self) -> None:
        torch = self.torch
        if torch is None:  # recording failed on the way
            return
        try:
            self._add(high_water_rows(torch, self.session.clock()), batch=self._lib is not None)
        except Exception as e:  # never break the user's job
            self._fail(e)

    def _native(self, torch: Any) -> Any:
        """The native tracker's library, or None (history fallback, with a one-line warning why)."""
        if memory_mode() == "history":
            return None
        annotate.category_enter(self.session, categories.PROFILER)  # a first build takes seconds
        try:
            return load_native(torch)
        except NativeMemoryUnavailable as e:
            warn_once(f"{e}; recording GPU memory with torch's allocator history (slower to drain)")
            return None
        finally:
            annotate.category_exit(self.session, categories.PROFILER)

    def _fail(self, e: BaseException) -> None:
        if not self.failed:
            self.failed = True
            warn_once(f"GPU memory recording off: {type(e).__name__}: {e}")
        try:
            if self.native is not None:
                self.native.mn_enable(0)
            elif self.torch is not None and self._lib is None:
                record_history(self.torch, False)
        except Exception:
            pass
        self.torch = self.native = self._lib = None
        self.recording = False

    def flush(self) -> None:
        """Drain the native queue or the allocator history into rows (writer thread)."""
        torch = self.torch
        if torch is None:
            return
        if self._lib is not None:  # native: nothing to drain before it is attached
            if self.native is not None:
                self._flush_native(self.native)
            return
        if self.windowed:  # drained as each full window closes, on the job's thread
            return
        try:
            snap = torch.cuda.memory._snapshot()
            record_history(torch, True, clear=True)
            now_unix, now_trace = time.time_ns(), time.perf_counter_ns()
            self.rows.extend(entries_to_rows(snap, now_unix, now_trace))
        except Exception as e:
            self._fail(e)

    def _flush_native(self, lib: Any) -> None:
        try:
            cols = drain_native(lib, self._t0)
            self.drops = int(lib.mn_drops() - self._drops0)
            if cols is not None:
                self._append(cols)
        except Exception as e:
            self._fail(e)

    def _add(self, rows: list[tuple], batch: bool) -> None:
        """Add tuple rows; ``batch``: as one batch (the writer takes a flush's rows as all tuples
        or all batches, and the native tracker's are batches)."""
        if not rows:
            return
        if batch:
            self._append([np.asarray(c) for c in zip(*rows, strict=True)])
        else:
            self.rows.extend(rows)

    def _append(self, cols: list[np.ndarray]) -> None:
        import pyarrow as pa

        from rlscope.trace.writer import to_arrow

        arrays = [to_arrow(c, f.type) for c, f in zip(cols, self._schema, strict=True)]
        self.rows.append(pa.RecordBatch.from_arrays(arrays, schema=self._schema))

    def stop(self) -> None:
        if self.torch is None:
            return
        if self.native is not None:
            self.native.mn_enable(0)  # the tracker stays attached (torch cannot detach one): gated off
        if self.windowed:
            self.record_window(False)  # the last full window's entries
            self._high_water_at_stop()
            self.torch = None
            return
        self.flush()
        self._high_water_at_stop()
        try:
            if self._lib is None and self.torch is not None:
                record_history(self.torch, False)
        except Exception as e:
            self._fail(e)
        if self.drops:
            warn_once(f"the native memory tracker dropped {self.drops} allocator event(s) (queue full)")
        self.torch = self.native = self._lib = None

    def __repr__(self) -> str:
        return "MemoryRecorder"


def start_for(session: Any, started: Sequence[Any]) -> MemoryRecorder:
    """The registry's factory (rlscope/collectors/registry.py): allocator events once torch is imported."""
    return MemoryRecorder(session).start()
