"""GPU activity: CUDA API intervals for the CPU timeline, attribution of GPU work to operations,
GPU-bound time, and NVML's utilization next to the same metric recomputed from the kernel trace.

Attribution: a kernel, copy or memset belongs to the operation that was innermost on the
launching thread when its CUDA API call started (joined through CUPTI's correlation id), so
asynchronous work that runs after its scope closed still counts for that scope. A launch from a
thread with no open operation during an autograd engine call made on another thread (the
engine's device thread running ``backward()``'s nodes on CUDA, DDP's all-reduce from its reducer's
hooks) belongs to the operation open on the thread that made the call (:func:`state_at_launch`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import (
    Timeline,
    backend_ops,
    build_timeline,
    compile_intervals,
    contiguous,
    session_span,
)
from rlscope.trace import schema as S
from rlscope.trace import spans
from rlscope.trace.spans import union_per_thread

if TYPE_CHECKING:
    from rlscope.trace.reader import ProcessTrace


@dataclasses.dataclass
class GpuRecords:
    """GPU work of one process as arrays (kernels, copies, memsets; no API rows)."""

    category: np.ndarray
    start: np.ndarray
    end: np.ndarray
    correlation: np.ndarray
    name: np.ndarray
    bytes: np.ndarray | None = None  # bytes copied or set (0 for kernels)


@dataclasses.dataclass
class ApiCalls:
    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    correlation: np.ndarray
    name: np.ndarray | None = None  # API function name ids (rlscope.analysis.gpu_calls reads them)


# a process's timeline with its CUDA API calls and GPU records (None without GPU data): the one
# per-process pass that the breakdown, the interval tables and the kernel tables all start from
JoinedTimeline = tuple[Timeline, "ApiCalls | None", "GpuRecords | None"]


def split(gpu: pa.Table, start_ns: int, end_ns: int) -> tuple[ApiCalls, GpuRecords]:
    """API calls (clipped to the session) and GPU records from a ``gpu.arrows`` table. The int64 columns'
    rows are taken once (a gather is a fresh array already), the narrower ones converted as they are taken."""
    keys = ("category", "start_ns", "end_ns", "correlation", "thread", "name", "bytes")
    c = {k: gpu.column(k).to_numpy() for k in keys}
    is_api = c["category"] == categories.CUDA_API
    a = np.flatnonzero(is_api)
    g = np.flatnonzero(~is_api)
    api = ApiCalls(
        thread=c["thread"][a].astype(np.int64, copy=False),
        start=np.clip(c["start_ns"][a], start_ns, end_ns),
        end=np.clip(c["end_ns"][a], start_ns, end_ns),
        correlation=c["correlation"][a].astype(np.int64, copy=False),
        name=c["name"][a].astype(np.int64),
    )
    records = GpuRecords(
        category=c["category"][g].astype(np.int64),
        start=c["start_ns"][g].astype(np.int64, copy=False),
        end=c["end_ns"][g].astype(np.int64, copy=False),
        correlation=c["correlation"][g].astype(np.int64, copy=False),
        name=c["name"][g].astype(np.int64),
        bytes=c["bytes"][g].astype(np.int64, copy=False),
    )
    return api, records


def session_bounds(proc: ProcessTrace) -> tuple[int, int]:
    """(when a process's sessions start, when they end), or its first/last event without them."""
    ev = proc.events
    return session_span(ev.column("ts_ns").to_numpy(), ev.column("kind").to_numpy())


def timeline_with_gpu(proc: ProcessTrace) -> JoinedTimeline:
    """A process's timeline, with CUDA API time as its innermost category, and its GPU work.

    The one place that combines events with ``gpu.arrows``, ``backend.arrows`` (torch ops from
    the native recorder) and ``compile.arrows`` (compilations): the breakdown, the interval
    tables and the kernel tables all start here. API calls and records are None without GPU data.
    """
    has_gpu = proc.gpu is not None and proc.gpu.num_rows > 0
    has_backend = proc.backend is not None and proc.backend.num_rows > 0
    has_compile = proc.compile is not None and proc.compile.num_rows > 0
    if not (has_gpu or has_backend or has_compile) or proc.events.num_rows == 0:
        return build_timeline(proc.events), None, None
    # recorded intervals count within the session: CUPTI's teardown after its end is rlscope's
    start, end = session_bounds(proc)
    backend = backend_ops(proc.backend, start, end) if has_backend else None  # clipped as it is merged
    compiles = None
    if has_compile:  # compilations, nested ones (a jitted call made while tracing) merged
        compiles = union_per_thread(*compile_intervals(proc.compile, start, end, proc.gaps))
    if not has_gpu:
        return build_timeline(proc.events, backend=backend, compiles=compiles), None, None
    api, records = split(proc.gpu, start, end)
    api_time = union_per_thread(api.thread, api.start, api.end)
    tl = build_timeline(proc.events, api=api_time, backend=backend, compiles=compiles)
    return tl, api, records


def state_at(tl: Timeline, thread: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(operation instance, phase instance) innermost on ``thread`` at time ``ts`` (-1: none)."""
    if len(thread) == 0 or len(tl.ts) == 0:
        return np.full(len(thread), -1, np.int64), np.full(len(thread), -1, np.int64)
    found = _state_at_native(tl, thread, ts)
    if found is not None:
        return found
    # each row's thread block (rows are grouped by thread, in time order within a block; the blocks
    # are in ascending thread order only where the build sorted them), each query's block by its thread
    starts = tl.thread_starts()
    block_thread = tl.thread_of(starts[:-1]).astype(np.int64)
    order = np.argsort(block_thread, kind="stable")
    at = np.minimum(np.searchsorted(block_thread[order], thread), len(order) - 1)
    known = block_thread[order][at] == thread
    q_block = order[at]
    row_block = tl.thread_idx.astype(np.int64)
    t0 = min(int(tl.ts.min()), int(ts.min()))
    span = max(int(tl.ts.max()), int(ts.max())) - t0 + 2
    key = row_block * span + (tl.ts - t0)  # sorted: by block, then by time
    pos = np.searchsorted(key, q_block * span + (ts - t0), side="right") - 1
    ok = known & (pos >= 0)
    pos = np.maximum(pos, 0)
    ok &= row_block[pos] == q_block
    # instance ids as int64 (the timeline keeps them narrower): callers build keys from them
    return np.where(ok, tl.op[pos], -1).astype(np.int64), np.where(ok, tl.phase[pos], -1).astype(np.int64)


def _state_at_native(
    tl: Timeline, thread: np.ndarray, ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`state_at` by a search of each query's thread's rows alone (timeline_state_at), where
    numpy searches keys built for every row; None where the
    numpy search runs: no C loops, other types, or a timeline whose threads' blocks are not in
    ascending order or whose rows are not in time order along each (the two searches could differ)."""
    i64 = native.I64
    fn = native.function(
        "timeline_state_at", *(native.N, i64, i64, i64, native.I32, native.I32, native.N, i64, i64, i64, i64)
    )
    columns = (tl.ts, tl.op, tl.phase)
    if fn is None or [c.dtype for c in columns] != [np.int64, np.int32, np.int32] or not contiguous(*columns):
        return None
    if thread.dtype != np.int64 or ts.dtype != np.int64 or not _in_thread_order(tl):
        return None
    starts = tl.thread_starts()
    block_thread = tl.thread_of(starts[:-1]).astype(np.int64)
    op, phase = np.empty(len(thread), np.int64), np.empty(len(thread), np.int64)
    queries = (len(thread), np.ascontiguousarray(thread), np.ascontiguousarray(ts))
    fn(len(block_thread), block_thread, starts, *columns, *queries, op, phase)
    return op, phase


def _in_thread_order(tl: Timeline) -> bool:
    """Whether the timeline's threads' blocks are in ascending order and each in time order (what the
    search of (thread, time) keys takes), found once per timeline."""
    got = tl.memo.get("in_thread_order")
    if got is None:
        fn = native.function("timeline_sorted_in_blocks", native.N, native.I64, native.I64, restype=native.N)
        starts = tl.thread_starts()
        ascending = bool((np.diff(tl.thread_of(starts[:-1]).astype(np.int64)) > 0).all())
        got = tl.memo["in_thread_order"] = ascending and bool(fn(len(starts) - 1, starts, tl.ts))
    return got


def engine_calls(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(calling thread, start, end) of each autograd engine call (``engine_begin``/``end`` rows),
    sorted by start; a call still running at the end of the data lasts to it. Found once per
    timeline: each attribution of GPU work asks (two passes over every row)."""
    got = tl.memo.get("engine_calls")
    if got is None:
        got = tl.memo["engine_calls"] = _engine_calls(tl)
    return got


def _engine_calls(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    begin = np.flatnonzero(tl.kind == S.ENGINE_BEGIN)
    if len(begin) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    end_rows = np.flatnonzero(tl.kind == S.ENGINE_END)
    # a call's end row shares its id (and thread) with its begin row
    key_end = tl.id[end_rows]
    order = np.argsort(key_end, kind="stable")
    pos = np.minimum(np.searchsorted(key_end[order], tl.id[begin]), max(len(end_rows) - 1, 0))
    ends = np.full(len(begin), tl.end_ns, np.int64)
    if len(end_rows):
        cand = end_rows[order][pos]
        found = (tl.id[cand] == tl.id[begin]) & (tl.thread_idx[cand] == tl.thread_idx[begin])
        ends = np.where(found, tl.ts[cand], ends)
    by_start = np.argsort(tl.ts[begin], kind="stable")
    return tl.thread_of(begin)[by_start], tl.ts[begin][by_start], ends[by_start]


def state_at_launch(tl: Timeline, thread: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`state_at`, and for a launch on a thread with no open operation made while an autograd
    engine call ran on another thread, the state of the thread that made the call.

    Why: on CUDA the engine's device thread launches every kernel of ``backward()`` while the
    caller waits inside its ``backprop``; without this, all of backward's GPU work (and DDP's
    all-reduce) would be ``[unannotated]``. Of calls overlapping in time (``backward()`` from two
    threads at once) the latest begun that still runs is taken: the engine's thread serves both.
    """
    op, phase = state_at(tl, thread, ts)
    c_thread, c_start, c_end = engine_calls(tl)
    lost = np.flatnonzero(op < 0)
    if len(c_start) == 0 or len(lost) == 0:
        return op, phase
    t = ts[lost]
    i = np.searchsorted(c_start, t, side="right") - 1  # the latest call begun at or before t
    ok = i >= 0
    i = np.maximum(i, 0)
    ok &= (c_end[i] > t) & (c_thread[i] != thread[lost])
    if not ok.any():
        return op, phase
    hit = lost[ok]
    c_op, c_phase = state_at(tl, c_thread[i[ok]], t[ok])
    op, phase = op.copy(), phase.copy()
    op[hit] = c_op
    phase[hit] = np.where(phase[hit] < 0, c_phase, phase[hit])
    return op, phase


def launching_call(api: ApiCalls, records: GpuRecords) -> tuple[np.ndarray, np.ndarray]:
    """(index into ``api``, found) of the CUDA API call that launched each GPU record (correlation id)."""
    if len(api.correlation) == 0:
        n = len(records.correlation)
        return np.zeros(n, np.int64), np.zeros(n, bool)
    order = np.argsort(api.correlation)
    corr = api.correlation[order]
    pos = np.minimum(np.searchsorted(corr, records.correlation), len(corr) - 1)
    return order[pos], corr[pos] == records.correlation


def launch_points(
    tl: Timeline, api: ApiCalls, records: GpuRecords, launch: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(thread, time) of each GPU record's launch (``launch``: :func:`launching_call`'s): its API
    call's, else the main thread at the record's start; the correction moves GPU work with them."""
    idx, found = launch
    if not len(api.start):  # no launch seen: GPU work moves with the main thread's time
        return np.full(len(records.start), tl.main_thread), records.start
    return np.where(found, api.thread[idx], tl.main_thread), np.where(found, api.start[idx], records.start)


def attribute(
    tl: Timeline, api: ApiCalls, records: GpuRecords, launch: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(operation instance, phase instance) of each GPU record; -1 where no launch was seen.
    ``launch``: :func:`launching_call`'s result, when the caller has it already."""
    idx, found = launch if launch is not None else launching_call(api, records)
    if not found.any():
        none = np.full(len(records.correlation), -1, np.int64)
        return none, none.copy()
    op, phase = state_at_launch(tl, api.thread, api.start)
    return np.where(found, op[idx], -1), np.where(found, phase[idx], -1)


def busy_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of GPU intervals as sorted disjoint (start, end) arrays."""
    zeros = np.zeros(len(start), np.int64)
    _, s, e = union_per_thread(zeros, start, end)
    return s, e


def covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Busy time in [min, t) for sorted disjoint intervals (s, e), for each t, as a float array
    (rlscope.trace.spans.covered)."""
    return spans.covered(s, e, t).astype(np.float64)


def nvml_comparison(nvml: pa.Table | None, s: np.ndarray, e: np.ndarray, wall_ns: int) -> dict:
    """NVML's utilization next to the kernel trace's, at NVML's sample period, and true GPU-bound time.

    For each NVML sample at t (period P between samples), the kernel trace gives the busy share of
    [t - P, t) and whether *any* GPU work ran in it; NVML-style utilization is the latter.
    """
    busy = float((e - s).sum()) if len(s) else 0.0
    out: dict = {"gpu_bound_s": busy / 1e9, "gpu_bound_fraction": busy / wall_ns if wall_ns else 0.0}
    if nvml is None or nvml.num_rows < 2:
        out["nvml_samples"] = 0 if nvml is None else nvml.num_rows
        return out
    ts = nvml.column("ts_ns").to_numpy()
    dev = nvml.column("device").to_numpy()
    sel = dev == dev.min()  # the first GPU (the one the job used, in single-GPU runs)
    ts, util = ts[sel], nvml.column("util_gpu").to_numpy()[sel].astype(np.float64)
    period = np.diff(ts)
    t_end, t_start = ts[1:], ts[:-1]
    busy_win = covered(s, e, t_end) - covered(s, e, t_start)
    out.update(
        nvml_samples=len(ts),
        nvml_period_s=float(np.median(period)) / 1e9,
        nvml_util_mean=float(util[1:].mean()) / 100.0,
        trace_any_activity_fraction=float((busy_win > 0).mean()),
        trace_busy_fraction_in_windows=float((busy_win / period).mean()),
        nvml_util=[float(u) / 100 for u in util[1:]],
        trace_busy_in_windows=[float(b) for b in busy_win / period],
        sample_t_s=[float(t) / 1e9 for t in t_end],
    )
    return out
