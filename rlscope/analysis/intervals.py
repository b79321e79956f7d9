"""Intervals for timeline views and exports: operation and phase instances, CPU category segments,
GPU records, CUDA API calls and native-recorded torch ops, per process, as Arrow tables.

Pure functions: a loaded :class:`~rlscope.trace.reader.Trace` in, tables out. The breakdown
aggregates time away; a timeline (Chrome/Perfetto export, the HTML report's timeline) needs the
instances themselves, derived from the same :func:`~rlscope.analysis.timeline.build_timeline`
state so both views agree.

Times are integer nanoseconds since the run start (the start of the process that started first),
with processes aligned through their clock anchors as in the summary. A window (seconds since the run start)
keeps the intervals that overlap it, clipped to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis import gpu, native
from rlscope.analysis.overlap import merge_adjacent
from rlscope.analysis.timeline import Timeline, contiguous
from rlscope.errors import RLScopeError
from rlscope.keys import compute, factorize
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessHeader, ProcessTrace, Trace, clock_offset, name_of

__all__ = [
    "API_SCHEMA",
    "BACKEND_SCHEMA",
    "CPU_SCHEMA",
    "GPU_SCHEMA",
    "INTERVAL_KINDS",
    "OPS_SCHEMA",
    "PHASES_SCHEMA",
    "Intervals",
    "ProcessIntervals",
    "clip",
    "clip_rows",
    "clip_table",
    "intervals",
    "intervals_from",
    "parse_window",
    "process_intervals",
    "run_span",
    "window_ns",
]

OPS_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("thread", pa.int64()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("depth", pa.int64()),  # 0: outermost operation on its thread
        ("parent", pa.int64()),  # enclosing instance id, -1: none
        ("phase", pa.string()),  # the phase open at its begin ("" when none)
    ]
)
PHASES_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("thread", pa.int64()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
    ]
)
CPU_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("thread", pa.int64()),
        ("category", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
    ]
)
GPU_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("category", pa.string()),
        ("name", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("device", pa.int64()),
        ("stream", pa.int64()),
        ("correlation", pa.int64()),
        ("bytes", pa.int64()),
    ]
)
API_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("thread", pa.int64()),
        ("name", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("correlation", pa.int64()),
    ]
)

BACKEND_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("thread", pa.int64()),
        ("name", pa.string()),  # the outermost torch op (aten::addmm, autograd node, compiled region)
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
    ]
)


@dataclasses.dataclass
class Intervals:
    """Interval tables of a whole trace (all processes concatenated; ``pid`` tells them apart)."""

    operations: pa.Table  # OPS_SCHEMA
    phases: pa.Table  # PHASES_SCHEMA
    cpu: pa.Table  # CPU_SCHEMA: CPU category segments other than python
    gpu: pa.Table  # GPU_SCHEMA: kernels, copies, memsets
    api: pa.Table  # API_SCHEMA: CUDA API calls
    run_start_ns: int  # the run start on the aligned (Unix-anchored) clock
    run_end_ns: int  # the run end, relative to the run start
    window_ns: tuple[int, int] | None  # the window kept, relative to the run start
    main_threads: dict[int, int]  # pid -> its session's main thread
    # BACKEND_SCHEMA: torch ops from the native backend recorder (empty in the Python mode)
    backend: pa.Table = dataclasses.field(default_factory=BACKEND_SCHEMA.empty_table)
    # pid -> (session start, end) ns since the run start: every process, even one with no operations
    spans: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)

    def tables(self) -> dict[str, pa.Table]:
        return {
            "operations": self.operations,
            "phases": self.phases,
            "cpu": self.cpu,
            "gpu": self.gpu,
            "api": self.api,
            "backend": self.backend,
        }


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``START:END`` in seconds (either side may be empty) -> (start, end)."""
    start, sep, end = text.partition(":")
    if not sep:
        raise RLScopeError(f"--window {text!r}: expected START:END in seconds, e.g. 1.5:3")
    try:
        s = float(start) if start.strip() else None
        e = float(end) if end.strip() else None
    except ValueError:
        raise RLScopeError(f"--window {text!r}: START and END must be numbers of seconds") from None
    if s is not None and e is not None and e <= s:
        raise RLScopeError(f"--window {text!r}: END must be after START")
    return s, e


@dataclasses.dataclass
class _Proc:
    """One process's timeline and raw GPU columns, before shifting to run-relative time."""

    proc: ProcessTrace
    tl: Timeline
    gpu_cols: dict[str, np.ndarray] | None
    api_start: np.ndarray
    api_end: np.ndarray


def _prepare(proc: ProcessTrace, joined: gpu.JoinedTimeline | None) -> _Proc:
    """The timeline the breakdown uses (CUDA API time as category cuda_api), built here if not given."""
    tl, api, _ = joined if joined is not None else gpu.timeline_with_gpu(proc)
    if api is None:
        empty = np.zeros(0, np.int64)
        return _Proc(proc, tl, None, empty, empty)
    cols = {c: proc.gpu.column(c).to_numpy().astype(np.int64) for c in S.GPU_COLUMNS}
    return _Proc(proc, tl, cols, api.start, api.end)


def _labels(values: np.ndarray, label: Callable[[int], str]) -> pa.Array:
    """A string column of ``label(v)`` per value, built from the distinct values (rows can be millions)."""
    uniq, inv = factorize(np.asarray(values, np.int64))
    # Arrow's take, called without importing pyarrow.compute (Array.take does, ~35 ms of a start)
    return compute("take", pa.array([label(v) for v in uniq.tolist()], pa.string()), pa.array(inv))


def _names(names: list[str], ids: np.ndarray, none: str = "") -> pa.Array:
    return _labels(ids, lambda i: name_of(names, i, none))


def _categories(cats: np.ndarray) -> pa.Array:
    return _labels(cats, lambda c: categories.CATEGORY_NAMES.get(c, str(c)))


def _part(schema: pa.Schema, pid: int, columns: dict[str, Any]) -> pa.Table:
    """One process's rows of an interval table: ``pid`` and the other columns (arrays or numpy)."""
    n = len(next(iter(columns.values())))
    cols = {"pid": np.full(n, pid, np.int64), **columns}
    return pa.table([pa.array(cols[f.name], f.type) for f in schema], schema=schema)


def _instances(p: _Proc, begin_kind: int) -> dict[str, np.ndarray]:
    """Instances opened by ``begin_kind`` rows (operations' or phases'): thread, id, name id, start, end,
    parent, phase."""
    tl = p.tl
    rows = tl.scope_begins()  # the operations' and phases' begins, found once
    parent_state = tl.op if begin_kind == S.OP_BEGIN else tl.phase
    found = _instances_c(tl, rows, begin_kind, parent_state)
    if found is not None:
        return found
    rows = rows[tl.kind[rows] == begin_kind]
    ident = tl.id[rows]
    # the state before a begin row is the previous row's state on the same thread
    prev = np.maximum(rows - 1, 0)
    same = (rows > 0) & (tl.thread_idx[prev] == tl.thread_idx[rows])
    parent = np.where(same, parent_state[prev], -1)
    return {
        "thread": tl.thread_of(rows),
        "id": ident,
        "name": tl.name[rows].astype(np.int64),
        "start": tl.ts[rows],
        "end": tl.inst_end[ident],
        "parent": parent,
        "phase": tl.phase[rows],
    }


def _instances_c(
    tl: Timeline, rows: np.ndarray, begin_kind: int, parent_state: np.ndarray
) -> dict[str, np.ndarray] | None:
    """:func:`_instances` of the scope begins ``rows`` in one C loop over them (breakdown.c), each
    begin's columns read together where numpy gathers from one column of every row at a time; None
    where numpy's runs (no C loops, or columns of other types than the timeline makes)."""
    ids = tl.id.dtype
    args = native.N, native.I64, native.I8, native.N, native.I16, native.I32, None, native.I32, native.I64
    args += native.I64, native.N, None, None, native.I32, None, native.I64, native.I64, native.I64, None, None
    fn = native.typed("intervals_instances", [ids], *args, restype=native.N)
    typed = tl.op.dtype == tl.phase.dtype == ids and tl.threads.dtype == tl.name.dtype == np.int32
    if fn is None or not typed or tl.kind.dtype != np.int8 or rows.dtype != np.int64:
        return None
    if tl.thread_idx.dtype != np.int16:  # more threads than int16 holds: numpy's gathers
        return None
    columns = tl.kind, tl.thread_idx, tl.threads, tl.id, tl.name, tl.ts, tl.inst_end, tl.op, tl.phase, rows
    if not contiguous(*columns):
        return None
    m = len(rows)
    out = {
        "thread": np.empty(m, np.int32),
        "id": np.empty(m, ids),
        "name": np.empty(m, np.int64),
        "start": np.empty(m, np.int64),
        "end": np.empty(m, np.int64),
        "parent": np.empty(m, ids),
        "phase": np.empty(m, ids),
    }
    columns = (
        tl.kind,
        begin_kind,
        tl.thread_idx,
        tl.threads,
        tl.id,
        tl.name,
        tl.ts,
        tl.inst_end,
        len(tl.inst_end),
    )
    count = fn(m, rows, *columns, parent_state, tl.phase, *out.values())
    return {k: v[:count] for k, v in out.items()}


def _backend_ops(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(thread, name id, start, end) of the native recorder's ops on the timeline.

    Their intervals are non-empty and disjoint per thread, and the timeline keeps an end before
    the next begin at equal times, so per thread the rows alternate begin, end: the i-th begin
    row pairs with the i-th end row.
    """
    begins = np.flatnonzero(tl.kind == S.BACKEND_BEGIN)
    ends = np.flatnonzero(tl.kind == S.BACKEND_END)
    return tl.thread_of(begins), tl.name[begins].astype(np.int64), tl.ts[begins], tl.ts[ends]


def _backend_part(
    pid: int, names: list[str], thread: np.ndarray, name: np.ndarray, start: np.ndarray, end: np.ndarray
) -> pa.Table:
    """One process's torch ops as a BACKEND_SCHEMA table, built column-wise (they can be millions)."""
    labels = pa.array([*names, ""], pa.string())  # index -1 (no name) reads the last, empty label
    ids = np.where((name >= 0) & (name < len(names)), name, len(names))
    ints = [pa.array(np.asarray(c, np.int64)) for c in (np.full(len(thread), pid), thread, start, end)]
    labels = compute("take", labels, pa.array(ids))  # Array.take imports pyarrow.compute
    return pa.table([ints[0], ints[1], labels, ints[2], ints[3]], schema=BACKEND_SCHEMA)


def _depth(ident: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Nesting depth from parent links (vectorized pointer jumping: log2(levels) passes).

    Bounded whatever the links: a cycle (which the reader's checks leave no room for) ends after
    the passes a chain of every instance needs, with a large depth instead of a hang.
    """
    if len(ident) == 0:
        return np.zeros(0, np.int64)
    top = int(max(ident.max(), parent.max(), 0)) + 1
    if top <= 4 * len(ident) + 1024:  # compact ids (the timeline renumbers spread ones): index by them
        in_order = _depth_in_order(ident, parent, top)
        if in_order is not None:
            return in_order
        n = top

        def dense(values: np.ndarray) -> np.ndarray:  # the id itself; n for "no instance"
            return np.where((values >= 0) & (values < n), values, n)

    else:
        ids = np.unique(ident)
        n = len(ids)

        def dense(values: np.ndarray) -> np.ndarray:  # index into ids; n for "no instance"
            pos = np.minimum(np.searchsorted(ids, values), n - 1)
            return np.where(ids[pos] == values, pos, n)

    par = np.full(n + 1, n, np.int64)
    par[dense(ident)] = dense(parent)
    links = np.zeros(n + 1, np.int64)  # each instance's links to the root, a parent of no instance counted
    links[dense(ident)] = parent >= 0
    anc = par.copy()
    for _ in range(int(n).bit_length() + 1):
        live = anc != n
        if not live.any():
            break
        links = links + np.where(live, links[anc], 0)
        anc = anc[anc]
    own = dense(parent)
    return (parent >= 0).astype(np.int64) + np.where(own != n, links[own], 0)


def _depth_in_order(ident: np.ndarray, parent: np.ndarray, top: int) -> np.ndarray | None:
    """:func:`_depth` of compact ids (in ``[0, top)``) in one C pass (breakdown.c) where each parent
    comes before its children, as the begins do in row order; None where they do not (or numpy's
    loops run)."""
    args = native.N, native.I64, native.I64, native.N, native.U8, native.I64, native.I64
    fn = native.function("intervals_depth", *args, restype=native.N)
    if fn is None:
        return None
    ident, parent = np.ascontiguousarray(ident, np.int64), np.ascontiguousarray(parent, np.int64)
    out = np.empty(len(ident), np.int64)
    if fn(len(ident), ident, parent, top, np.zeros(top, np.uint8), np.empty(top, np.int64), out) < 0:
        return None
    return out


def _cpu_segments(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(thread, category, start, end) of non-python time, touching same-category segments joined.

    Timeline rows split a category's time at every operation boundary; a viewer wants one box per
    stretch of simulator/backend time, so consecutive rows of one category on one thread merge.
    """
    keep = np.flatnonzero((tl.cat != categories.PYTHON) & _positive(tl))
    # joined by thread index (the same runs as by thread id), the joined runs' ids read after
    start, end, (th, cat) = merge_adjacent(
        tl.ts[keep], tl.seg_end_of(keep), tl.thread_idx[keep], tl.cat[keep]
    )
    return tl.threads[th], cat, start, end


def _positive(tl: Timeline) -> np.ndarray:
    """Per row: whether its segment holds time. Read off the times (a segment ends where the next row
    on its thread starts, a thread's last one at the thread's end), not a column of every row's end."""
    out = np.empty(len(tl.ts), bool)
    np.greater(tl.ts[1:], tl.ts[:-1], out=out[:-1])
    last = tl.thread_last()
    out[last] = tl.thread_end > tl.ts[last]
    return out


def clip_rows(
    start: np.ndarray, end: np.ndarray, window: tuple[int, int] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows kept, clipped start, clipped end): overlapping the window, or instants inside it.

    The one window rule of every view (exports, the report's timeline).
    """
    if window is None:
        return np.arange(len(start)), start, end
    w0, w1 = window
    keep = ((start < w1) & (end > w0)) | ((start == end) & (start >= w0) & (start <= w1))
    idx = np.flatnonzero(keep)
    return idx, np.clip(start[idx], w0, w1), np.clip(end[idx], w0, w1)


def clip_table(table: pa.Table, window: tuple[int, int]) -> pa.Table:
    """The rows of an interval table overlapping ``window``, their times clipped to it."""
    start = table.column("start_ns").to_numpy().astype(np.int64)
    end = table.column("end_ns").to_numpy().astype(np.int64)
    idx, s, e = clip_rows(start, end, window)
    out = compute("take", table, pa.array(idx, pa.int64()))  # Table.take imports pyarrow.compute
    out = out.set_column(out.schema.get_field_index("start_ns"), "start_ns", pa.array(s, pa.int64()))
    return out.set_column(out.schema.get_field_index("end_ns"), "end_ns", pa.array(e, pa.int64()))


def clip(iv: Intervals, window: tuple[float | None, float | None] | None) -> Intervals:
    """``iv`` (the whole run) cut to ``window`` (seconds since the run start); a missed window is an error."""
    win = window_ns(window, iv.run_end_ns)
    if win is None:
        return iv
    tables = {k: clip_table(t, win) for k, t in iv.tables().items()}
    return dataclasses.replace(iv, **tables, window_ns=win)


INTERVAL_KINDS = ("operations", "phases", "cpu", "gpu", "api", "backend")  # Intervals.tables()' keys


@dataclasses.dataclass
class ProcessIntervals:
    """One process's share of :class:`Intervals`: what a worker sends back for the run's tables."""

    pid: int
    main_thread: int
    span: tuple[int, int]  # session start, end: ns since the run start
    tables: dict[str, pa.Table]  # some of INTERVAL_KINDS, this process's rows, run-relative times


def process_intervals(
    proc: ProcessTrace,
    joined: gpu.JoinedTimeline | None,
    run_start_ns: int,
    kinds: tuple[str, ...] = INTERVAL_KINDS,
) -> ProcessIntervals:
    """The interval tables of one process with events (``kinds`` of them), on the run's time axis."""
    p = _prepare(proc, joined)
    shift = clock_offset(proc) - run_start_ns
    pid, names, tl = proc.pid, proc.names, p.tl
    tables: dict[str, pa.Table] = {}

    def instances(begin_kind: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        i = _instances(p, begin_kind)
        ends = {"start_ns": i["start"] + shift, "end_ns": i["end"] + shift}
        ids = tl.trace_ids(i["id"])  # the trace's ids, however the timeline numbers its instances
        return i, {"thread": i["thread"], "id": ids, "name": _names(names, i["name"]), **ends}

    if "operations" in kinds:
        o, columns = instances(S.OP_BEGIN)
        phase_name = np.append(tl.inst_name, -1)[o["phase"]]
        columns["depth"] = _depth(o["id"], o["parent"])
        columns["parent"] = tl.trace_ids(o["parent"])
        columns["phase"] = _names(names, phase_name)
        tables["operations"] = _part(OPS_SCHEMA, pid, columns)
    if "phases" in kinds:
        tables["phases"] = _part(PHASES_SCHEMA, pid, instances(S.PHASE_BEGIN)[1])
    if "cpu" in kinds:
        thread, cat, start, end = _cpu_segments(tl)
        columns = {
            "thread": thread,
            "category": _categories(cat),
            "start_ns": start + shift,
            "end_ns": end + shift,
        }
        tables["cpu"] = _part(CPU_SCHEMA, pid, columns)
    if "backend" in kinds:
        thread, name, start, end = _backend_ops(tl)
        tables["backend"] = _backend_part(pid, names, thread, name, start + shift, end + shift)
    g = p.gpu_cols
    if g is not None and "api" in kinds:
        a = np.flatnonzero(g["category"] == categories.CUDA_API)
        columns = {
            "thread": g["thread"][a],
            "name": _names(names, g["name"][a]),
            "start_ns": p.api_start + shift,
            "end_ns": p.api_end + shift,
            "correlation": g["correlation"][a],
        }
        tables["api"] = _part(API_SCHEMA, pid, columns)
    if g is not None and "gpu" in kinds:
        r = np.flatnonzero(g["category"] != categories.CUDA_API)
        columns = {
            "category": _categories(g["category"][r]),
            "name": _names(names, g["name"][r]),
            "start_ns": g["start_ns"][r] + shift,
            "end_ns": g["end_ns"][r] + shift,
            "device": g["device"][r],
            "stream": g["stream"][r],
            "correlation": g["correlation"][r],
            "bytes": g["bytes"][r],
        }
        tables["gpu"] = _part(GPU_SCHEMA, pid, columns)
    _instants_for_reversed(tables, proc)
    return ProcessIntervals(pid, tl.main_thread, (tl.start_ns + shift, tl.end_ns + shift), tables)


def _instants_for_reversed(tables: dict[str, pa.Table], proc: ProcessTrace) -> None:
    """Intervals ending before they start become instants at their start, and a warning of the process
    says so: the reader's checks leave none, so one is damage they did not foresee, and no export
    may show a negative duration."""
    for kind, table in tables.items():
        start = table.column("start_ns").to_numpy()
        end = table.column("end_ns").to_numpy()
        reversed_ = end < start
        if reversed_.any():
            i = table.schema.get_field_index("end_ns")
            tables[kind] = table.set_column(i, "end_ns", pa.array(np.maximum(end, start), pa.int64()))
            proc.warnings.append(
                f"{proc.path}: {int(reversed_.sum())} {kind} interval(s) ending before they start (damaged"
                " data): shown as instants"
            )


_SCHEMAS = {
    "operations": OPS_SCHEMA,
    "phases": PHASES_SCHEMA,
    "cpu": CPU_SCHEMA,
    "gpu": GPU_SCHEMA,
    "api": API_SCHEMA,
    "backend": BACKEND_SCHEMA,
}


def intervals_from(parts: list[ProcessIntervals], run_start_ns: int, run_end_ns: int) -> Intervals:
    """The run's :class:`Intervals` (no window) from its processes' parts, in trace order."""

    def joined(kind: str) -> pa.Table:
        tables = [p.tables[kind] for p in parts if kind in p.tables]
        return pa.concat_tables(tables).combine_chunks() if tables else _SCHEMAS[kind].empty_table()

    return Intervals(
        **{kind: joined(kind) for kind in INTERVAL_KINDS},
        run_start_ns=run_start_ns,
        run_end_ns=run_end_ns,
        window_ns=None,
        main_threads={p.pid: p.main_thread for p in parts},
        spans={p.pid: p.span for p in parts},
    )


def run_span(procs: list[tuple[ProcessHeader, int, int]]) -> tuple[int, int]:
    """(run start on the aligned clock, run end ns since it) of (process, session start, end) triples."""
    if not procs:
        raise RLScopeError("no events to export")
    start = min(s + clock_offset(p) for p, s, _ in procs)
    return start, max(e + clock_offset(p) for p, _, e in procs) - start


def intervals(
    trace: Trace,
    window: tuple[float | None, float | None] | None = None,
    timelines: list[gpu.JoinedTimeline] | None = None,
) -> Intervals:
    """Interval tables of every process; ``window`` = (start, end) seconds since the run start.

    ``timelines``: each process's joined timeline, when the caller already built them. Raises
    :class:`RLScopeError` when the window does not overlap the run.
    """
    procs = [
        (p, timelines[i] if timelines is not None else gpu.timeline_with_gpu(p))
        for i, p in enumerate(trace.processes)
        if p.events.num_rows
    ]
    if not procs:
        raise RLScopeError(f"{trace.path}: no events to export")
    run_start, run_end = run_span([(p, j[0].start_ns, j[0].end_ns) for p, j in procs])
    whole = intervals_from([process_intervals(p, j, run_start) for p, j in procs], run_start, run_end)
    return clip(whole, window)


def window_ns(window: tuple[float | None, float | None] | None, run_end: int) -> tuple[int, int] | None:
    """Seconds since the run start -> ns; a window that misses the run is an error, not an empty file."""
    if window is None or (window[0] is None and window[1] is None):
        return None
    s = 0 if window[0] is None else round(window[0] * 1e9)
    e = run_end if window[1] is None else round(window[1] * 1e9)
    if e <= s:
        raise RLScopeError(f"window {s / 1e9:g}:{e / 1e9:g} s is empty (END must be after START)")
    if s >= run_end or e <= 0:
        raise RLScopeError(
            f"window {s / 1e9:g}:{e / 1e9:g} s is outside the run (0:{run_end / 1e9:g} s since its start)"
        )
    return s, e
