"""Overhead correction: remove rlscope's own cost from a timeline, where it was paid.

Every recorded event costs CPU time, and that time lands on the thread's timeline on one side of
the event's timestamp or the other. For a begin/end pair (a scope, a category, a backend op, a
CUDA API call under CUPTI) calibration measures the part that falls *inside* the pair (charged to
the operation or category it opens) and the part that falls *outside* (charged to the enclosing
one); overhead/calibrate/rounds.py says how. Correction shrinks each segment of the timeline by the cost
of the events that bound it, removes the ``rlscope`` category (the profiler's periodic work)
entirely, and scales what is left by the share of the run that background work (the trace writer
and the NVML sampler, which stall the job through the GIL) took. The corrected timestamps are
then rebuilt per thread, so every figure computed from the timeline -- exclusive and inclusive
time, wall time, phases, resource overlap -- comes out corrected by the same code that computes
the raw ones. GPU work keeps its durations and moves with the CPU time before its launch.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from typing import Any

import numpy as np

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline, kinds_among
from rlscope.blocks import BLOCK_ROWS, blocks, search_sorted, take
from rlscope.overhead.correct import flush_stall, module_calls, reference
from rlscope.overhead.correct.row_factors import (
    LEAF_SLOTS,
    ROW_FACTORS,
    SLOT_SIZE,
    RowFactors,
    RowFactorsC,
)
from rlscope.overhead.correct.sums import changed_sum_loop, streams_agree, sum_at_rows
from rlscope.trace import schema as S
from rlscope.trace.header import recorded_options
from rlscope.trace.schema import CostClass

# cost class -> the name the calibration, the summary and the notes use
CLASS_NAMES = tuple(c.name.lower() for c in CostClass)
# "0": ignore what boundaries measured, calibrated costs for every row (to compare the two)
MEASURED_ENV = "RLSCOPE_MEASURED_COSTS"
MAX_BACKGROUND_SHARE = 0.5  # a larger share means a calibration that does not fit this run
# the costs of rlscope's Python code, priced at the run's own speed (at_run_speed); the calibration
# entries they come from are judged in reference-loop units (rlscope.overhead.calibrate.rounds)
SPEED_PRICED_CLASSES = (CostClass.SCOPE, CostClass.CATEGORY)
SPEED_PRICED_ENTRIES = ("scope", "scope_nvtx", "category", "writer")
SPEED_SAMPLE_BAND = 2.5  # run_reference_ns: samples up to this many times the fastest count
MAX_SPEED_SCALE = 3.0  # at_run_speed scales by at most this, either way
SPEED_NOTE = 0.10  # a scale further from 1 than this is said in the notes


def _unknown() -> np.ndarray:
    return np.full(len(CLASS_NAMES), np.nan)


@dataclasses.dataclass
class EventCosts:
    """Per-event costs (ns) that apply to one process's trace, chosen from a calibration."""

    inside: np.ndarray  # per class: cost inside a begin/end pair
    outside: np.ndarray  # per class: cost outside it (the enclosing operation or category pays)
    # per class, for boundaries that measured their own cost (schema.EVENT_COST_COLUMN): the
    # calibrated part around what they measure (the interpreter's dispatch into the C methods and
    # back), inside and outside; NaN where the calibration has no such figure (calibrated costs
    # then apply to every row, measured or not)
    dispatch_inside: np.ndarray = dataclasses.field(default_factory=lambda: _unknown())
    dispatch_outside: np.ndarray = dataclasses.field(default_factory=lambda: _unknown())
    writer_per_event: float = 0.0  # background: the writer's GIL time per event row written
    nvml_per_sample: float = 0.0  # background: the NVML sampler's GIL time per sample
    # the GPU memory recorder per recorded allocator event (torch's trace entry and rlscope's
    # tracker, paid on the allocating thread); 0: not calibrated (rlscope/overhead/calibrate/memory.py)
    memory_per_event: float = 0.0
    # the automatic operations' wrapper per module call (rlscope/overhead/correct/module_calls.py), and
    # the reference loop's ns it is stored at: Python, priced at the run's speed (:func:`at_run_speed`);
    # module_calls.DEFAULT unless a calibration has the entry
    module_call_ns: float = module_calls.DEFAULT["inside"]
    module_call_ref_ns: float = module_calls.DEFAULT["ref_ns"]
    # per class (and the writer's): the reference loop's ns per iteration at which the calibration
    # stored the cost; NaN: a cost not priced at the run's speed (:func:`at_run_speed`)
    ref_ns: np.ndarray = dataclasses.field(default_factory=lambda: _unknown())
    writer_ref_ns: float = math.nan
    used: dict[str, str] = dataclasses.field(default_factory=dict)  # class -> calibration entry used
    # calibration entry -> why `rlscope calibrate` refused it: a note then says so, instead of
    # sending the user to calibrate a machine that was calibrated
    refused: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)  # what could not be corrected, and why

    @classmethod
    def zero(cls) -> EventCosts:
        return cls(np.zeros(len(CLASS_NAMES)), np.zeros(len(CLASS_NAMES)))

    @classmethod
    def measured_only(cls) -> EventCosts:
        """No calibration: only what scope and category boundaries measured of themselves."""
        costs = cls.zero()
        for c in (CostClass.SCOPE, CostClass.CATEGORY):
            costs.dispatch_inside[c] = costs.dispatch_outside[c] = 0.0
        return costs

    def scope_dispatch_ns(self) -> float:
        """The calibrated part of a scope boundary's cost that it does not measure itself, per boundary
        (the mean of inside and outside; 0 without that figure): what a boundary counted in the
        aggregates loses besides the cost it measured (rlscope/analysis/whole_run.py)."""
        parts = [self.dispatch_inside[CostClass.SCOPE], self.dispatch_outside[CostClass.SCOPE]]
        parts = [p for p in parts if not math.isnan(p)]
        return float(sum(parts)) / 2 if parts else 0.0


def costs_for(calibration: dict[str, Any], metadata: dict[str, str]) -> EventCosts:
    """The costs of the events a process recorded, given how it was profiled (its metadata)."""
    table = calibration["costs_ns"]
    costs = EventCosts.zero()
    costs.refused = _refusals(calibration)
    gpu_collector = metadata.get("gpu.collector", "")
    nvtx = bool(gpu_collector) and recorded_options(metadata).get("nvtx", True)
    wanted = {
        CostClass.SCOPE: "scope_nvtx" if nvtx else "scope",
        CostClass.CATEGORY: "category",
        CostClass.BACKEND: "backend",  # measured by `rlscope calibrate` with the recorder a session would use
        CostClass.CUDA_API: f"cuda_api.{gpu_collector}" if gpu_collector else "",
    }
    for cls, entry in wanted.items():
        if not entry:
            continue
        if entry not in table and entry == "scope_nvtx" and "scope" in table:
            costs.notes.append("scope cost with NVTX ranges not calibrated: the cost without them is used")
            entry = "scope"
        if entry not in table and cls in (CostClass.SCOPE, CostClass.CATEGORY):
            # refused (unstable) or not measured: the boundaries' own measurements still apply
            costs.dispatch_inside[cls] = costs.dispatch_outside[cls] = 0.0
            costs.used[CLASS_NAMES[cls]] = "measured by its boundaries only"
            costs.notes.append(
                f"{_missing(entry, costs.refused)}: boundaries that measured their own cost have"
                " it removed; the dispatch around them and unmeasured boundaries are not corrected"
            )
            continue
        if entry not in table:
            costs.notes.append(f"{_missing(entry, costs.refused)}: its overhead is not removed")
            continue
        row = table[entry]
        if cls in SPEED_PRICED_CLASSES:
            costs.ref_ns[cls] = _ref(row)
        costs.inside[cls] = float(row.get("inside", 0.0))
        costs.outside[cls] = float(row.get("outside", 0.0))
        costs.used[CLASS_NAMES[cls]] = entry
        if "measured_inside" in row:  # the calibration read what its boundaries measured
            costs.dispatch_inside[cls] = max(costs.inside[cls] - float(row["measured_inside"]), 0.0)
            costs.dispatch_outside[cls] = max(costs.outside[cls] - float(row["measured_outside"]), 0.0)
    costs.writer_per_event = float(table.get("writer", {}).get("per_event", 0.0))
    costs.writer_ref_ns = _ref(table.get("writer", {}))
    costs.nvml_per_sample = float(table.get("nvml", {}).get("per_sample", 0.0))
    if "memory" in table:
        costs.memory_per_event = max(float(table["memory"].get("per_event", 0.0)), 0.0)
        costs.used["memory"] = "memory"
    row = table.get(module_calls.ENTRY)
    if isinstance(row, dict) and "inside" in row:
        costs.module_call_ns = max(float(row["inside"]), 0.0)
        costs.module_call_ref_ns = _ref(row)
        costs.used[module_calls.ENTRY] = module_calls.ENTRY
    return costs


def _ref(row: dict[str, Any]) -> float:
    """The reference loop's ns at which a calibration entry is stored (NaN: none, an old file)."""
    try:
        ref = float(row.get("ref_ns", math.nan))
    except (TypeError, ValueError):
        return math.nan
    return ref if ref > 0 else math.nan


def run_reference_ns(events: Any) -> float | None:
    """The run's own Python speed: the reference loop's ns per iteration the session timed at its
    start, at every window switch and at its end (``parent`` of those rows, overhead/correct/reference.py);
    None when it timed none (traces before them, or a session stopped by a signal at once).

    The mean of the samples within SPEED_SAMPLE_BAND of the fastest: the samples are spread over
    the run (window lengths are random), so their mean weighs a slow stretch by its share of the
    run; a sample far above the rest was itself disturbed (an interrupt storm, a page fault), not
    the machine's speed (the VM's two speeds are 1.4-1.9x apart)."""
    if events is None or events.num_rows == 0:
        return None
    kind, parent = events.column("kind").to_numpy(), events.column("parent").to_numpy()
    timed = np.isin(kind, [S.SESSION_START, S.SESSION_END, S.WINDOW]) & (parent > 0)
    ps = parent[timed]
    if len(ps) == 0:
        return None
    ns = ps.astype(np.float64) / reference.PS_PER_NS
    return float(ns[ns <= SPEED_SAMPLE_BAND * ns.min()].mean())


def at_run_speed(costs: EventCosts, run_ref_ns: float | None) -> EventCosts:
    """``costs`` with those of rlscope's Python code priced at the run's own speed.

    Why: the dispatch around the scope and category boundaries and the writer's conversions are
    Python, whose speed on a shared host moves 1.4-1.9x for seconds to minutes at a time; a
    calibration stores them at the speed it saw (the reference loop's ``ref_ns``), which a run on
    the same machine may not have had. Each is scaled by the run's reference loop over the
    calibration's (within MAX_SPEED_SCALE either way; unscaled where either is unknown). The
    native costs (the backend recorder, CUPTI, the memory tracker) do not follow the interpreter
    and stay as calibrated."""
    if run_ref_ns is None or not run_ref_ns > 0:
        return costs
    inside, outside = costs.inside.copy(), costs.outside.copy()
    d_in, d_out = costs.dispatch_inside.copy(), costs.dispatch_outside.copy()
    scales: list[tuple[float, float]] = []  # (scale, the calibration's reference)
    for cls in SPEED_PRICED_CLASSES:
        f = _speed_scale(run_ref_ns, costs.ref_ns[cls])
        if f is None:
            continue
        scales.append((f, costs.ref_ns[cls]))
        for a in (inside, outside, d_in, d_out):
            a[cls] *= f  # NaN (no dispatch figure) stays NaN
    writer = costs.writer_per_event
    fw = _speed_scale(run_ref_ns, costs.writer_ref_ns)
    if fw is not None:
        writer *= fw
    module_call = costs.module_call_ns
    fm = _speed_scale(run_ref_ns, costs.module_call_ref_ns)
    if fm is not None:
        module_call *= fm
    notes = list(costs.notes)
    if scales and abs(scales[0][0] - 1) > SPEED_NOTE:
        notes.append(
            f"rlscope's Python costs priced at this run's speed: reference loop {run_ref_ns:.0f} ns an"
            f" iteration against the calibration's {scales[0][1]:.0f} (x{scales[0][0]:.2f})"
        )
    return dataclasses.replace(
        costs,
        inside=inside,
        outside=outside,
        dispatch_inside=d_in,
        dispatch_outside=d_out,
        writer_per_event=writer,
        module_call_ns=module_call,
        notes=notes,
    )


def _speed_scale(run_ref_ns: float, cal_ref_ns: float) -> float | None:
    if not cal_ref_ns > 0:
        return None
    return min(MAX_SPEED_SCALE, max(1 / MAX_SPEED_SCALE, run_ref_ns / cal_ref_ns))


def _refusals(calibration: dict[str, Any]) -> dict[str, str]:
    """Calibration entry -> the reason `rlscope calibrate` gave for refusing it."""
    out: dict[str, str] = {}
    for r in calibration.get("refused") or []:
        if isinstance(r, dict) and isinstance(r.get("entry"), str):
            reason = str(r.get("reason", ""))
            prefix = f"{r['entry']}: refused: "
            out[r["entry"]] = reason[len(prefix) :] if reason.startswith(prefix) else reason
    return out


def _missing(entry: str, refused: dict[str, str], hint: str = "") -> str:
    """Why a calibration has no cost for ``entry``: refused (with the calibration's reason) or not
    measured on this machine."""
    if entry in refused:
        return f"{entry} cost refused by the calibration ({refused[entry] or 'no reason given'})"
    return f"{entry} not calibrated on this machine{hint}"


def memory_times(proc: Any, costs: EventCosts) -> tuple[np.ndarray, list[str]]:
    """(times of the process's recorded allocator events whose cost applies, notes): the native
    tracker's events when the calibration has their cost; none otherwise, with a note where the
    process recorded events the correction cannot remove."""
    table = getattr(proc, "memory", None)
    if table is None or table.num_rows == 0:
        return np.zeros(0, np.int64), []
    meta = table.schema.metadata or {}
    source = meta.get(b"rlscope.collector", b"").decode()
    if source == "torch-windows":  # recorded in full windows only: the windows measure its cost
        return np.zeros(0, np.int64), []
    if source != "native":
        return np.zeros(0, np.int64), [
            "GPU memory recorded through torch's allocator history: its cost per event is not"
            " calibrated and not removed"
        ]
    if costs.memory_per_event <= 0:
        return np.zeros(0, np.int64), [
            f"{_missing('memory', costs.refused, ' (`rlscope calibrate` with a GPU)')}: the cost of"
            f" {table.num_rows} recorded allocator events is not removed"
        ]
    return table.column("ts_ns").to_numpy().astype(np.int64), []


def _memory_planned(tl: Timeline, times: np.ndarray | None, per_event_ns: float) -> np.ndarray | None:
    """Per timeline row: the memory recorder's cost of the allocator events in its segment (None:
    no events to charge).

    Every event is charged to the main thread's segment at its time, whichever thread allocated:
    in RL loops the other allocating threads are autograd's device threads running a backward pass
    the main thread waits for (its wait is what lengthened), as rlscope/analysis/memory.py
    attributes them. A thread allocating on its own beside the main thread (a data loader filling
    GPU buffers) would have its cost taken from the main thread's time: not corrected right."""
    if times is None or per_event_ns <= 0 or len(times) == 0:
        return None
    main = tl.main_rows()
    rows = np.arange(main.start, main.stop)
    if len(rows) == 0:
        return None
    i = np.searchsorted(tl.ts[rows], times, side="right") - 1
    ok = i >= 0
    row = rows[np.maximum(i, 0)]
    ok &= times <= tl.seg_end_of(row)
    return np.bincount(row[ok], minlength=len(tl.ts)).astype(np.float64) * per_event_ns


def without(costs: EventCosts, backend: bool, cuda_api: bool) -> EventCosts:
    """``costs`` less the classes measured in the run itself (rlscope/overhead/correct/windows.py)."""
    inside, outside, used = costs.inside.copy(), costs.outside.copy(), dict(costs.used)
    notes = list(costs.notes)
    for cls, drop in ((CostClass.BACKEND, backend), (CostClass.CUDA_API, cuda_api)):
        if drop:
            inside[cls] = outside[cls] = 0.0
            used[CLASS_NAMES[cls]] = "measured in this run (windows)"
            notes = [n for n in notes if not n.startswith(CLASS_NAMES[cls])]  # not needed after all
    return dataclasses.replace(costs, inside=inside, outside=outside, used=used, notes=notes)


# per event kind: the cost class its rows pay (category rows: by their category, event_classes), and
# whether the row opens a begin/end pair
_KIND_CLASS = np.zeros(S.COMPILE_END + 1, np.int8)
_KIND_CLASS[[S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END]] = CostClass.SCOPE
_KIND_CLASS[[S.CAT_BEGIN, S.CAT_END]] = CostClass.CATEGORY
_KIND_CLASS[[S.API_BEGIN, S.API_END]] = CostClass.CUDA_API
_KIND_CLASS[[S.BACKEND_BEGIN, S.BACKEND_END]] = CostClass.BACKEND
_KIND_OPENS = np.zeros(S.COMPILE_END + 1, bool)
_KIND_OPENS[[S.OP_BEGIN, S.PHASE_BEGIN, S.CAT_BEGIN, S.API_BEGIN, S.BACKEND_BEGIN]] = True


# the kinds written to the trace, as a table of every byte (a negative one from the end) for the C loops
_WRITTEN_BYTES = np.zeros(256, bool)
_WRITTEN_BYTES[list(S.WRITTEN_KINDS)] = True


def event_classes(tl: Timeline) -> np.ndarray:
    """The cost class of every timeline row (NONE for rows rlscope wrote itself, e.g. forced closes)."""
    cls = take(_KIND_CLASS, tl.kind)  # a lookup per row; the category rows (few) then read their category
    cat_rows = np.flatnonzero(cls == CostClass.CATEGORY)
    ident = tl.id[cat_rows]
    cls[cat_rows[ident == categories.BACKEND]] = CostClass.BACKEND
    cls[cat_rows[ident == categories.PROFILER]] = CostClass.NONE  # its whole segment is removed instead
    cls[(tl.flags & S.FLAG_FORCED_CLOSE) != 0] = CostClass.NONE
    return cls


@dataclasses.dataclass
class Correction:
    """A corrected timeline and how to move other timestamps (GPU launches) onto it."""

    timeline: Timeline
    ratio: np.ndarray | None  # per row: corrected / raw segment duration (None: not kept, nothing to move)
    removed_s: dict[str, float]  # CPU seconds removed per cost kind (all threads)
    background_share: float
    clamped_s: float  # planned removal that exceeded the segments it fell in (not removed)
    writer_stall: dict[str, Any] | None = None  # flush_stall.StallShare, where flushes were marked
    # the main thread's corrected ns, all and in full windows, where correct_windows summed them
    main_mode_ns: tuple[int, int] | None = None

    def remap(self, raw: Timeline, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Corrected times of raw times ``t`` on ``thread`` (the main thread's map for unknown threads)."""
        if len(t) == 0 or len(raw.ts) == 0:
            return t.copy()
        assert self.ratio is not None, "corrected without keep_ratio"
        fn = native.function(
            "residual_remap",
            native.N,
            *(native.I64,) * 3,
            native.SEGMENTS,
            native.I64,
            native.F64,
            native.I64,
        )
        c_ok = fn is not None and t.dtype == raw.ts.dtype == np.int64
        block = _thread_blocks(raw, thread) if c_ok else None
        if block is not None:  # each query searched on its thread's rows (residual.c)
            t, out = np.ascontiguousarray(t), np.empty(len(t), np.int64)
            # and an empty block past the last thread: the map of a main thread without rows, none
            first = np.append(raw.thread_starts(), len(raw.ts)).astype(np.int64)
            fn(len(t), block, t, first, raw.segments(), self.timeline.ts, self.ratio, out)
            return out
        threads = np.unique(raw.threads)
        known = np.isin(thread, threads)
        # a main thread without rows has no map: times on threads without rows then stay as they are
        has_main = bool(np.isin(raw.main_thread, threads))
        q_thread = np.where(known, thread, raw.main_thread if has_main else threads[0])
        order_key = raw.thread_idx.astype(np.int64)
        qi = np.searchsorted(threads, q_thread)
        # rows are grouped by thread in thread_idx order, which follows first appearance, not value
        tid_of_idx = raw.threads
        idx_of_thread = np.empty(len(threads), np.int64)
        idx_of_thread[np.searchsorted(threads, tid_of_idx)] = np.arange(len(tid_of_idx))
        qidx = idx_of_thread[qi]
        t0 = min(int(raw.ts.min()), int(t.min()))
        span = max(int(raw.seg_end.max()), int(t.max())) - t0 + 2
        key = order_key * span + (raw.ts - t0)
        pos = np.searchsorted(key, qidx * span + (t - t0), side="right") - 1
        ok = (pos >= 0) & (order_key[np.maximum(pos, 0)] == qidx)
        if not has_main:
            ok &= known
        pos = np.maximum(pos, 0)
        into = np.minimum(t - raw.ts[pos], raw.seg_end[pos] - raw.ts[pos])
        new = self.timeline.ts[pos] + np.rint(into * self.ratio[pos]).astype(np.int64)
        return np.where(ok, new, t)


def _thread_blocks(raw: Timeline, thread: np.ndarray) -> np.ndarray | None:
    """Per query of :meth:`Correction.remap`: the thread index (``raw.thread_idx``) of its thread,
    the main thread's for a thread without rows, or one past the last thread (an empty block: no
    map, the time stays) where the main thread has no rows either; None where the thread indices do
    not stand one for one for threads with rows (the numpy search then decides)."""
    starts = raw.thread_starts()
    if not (starts[1:] > starts[:-1]).all():
        return None
    tids = raw.thread_of(starts[:-1])
    order = np.argsort(tids, kind="stable")
    by_tid = tids[order]
    if (by_tid[1:] == by_tid[:-1]).any():
        return None
    at = np.minimum(np.searchsorted(by_tid, thread), len(by_tid) - 1)
    main = order[np.searchsorted(by_tid, raw.main_thread)] if raw.main_thread in by_tid else len(tids)
    return np.where(by_tid[at] == thread, order[at], main).astype(np.int64)


def _place(planned: np.ndarray, dur: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Removal per segment: what is planned, and what a segment cannot hold moves to its neighbours.

    An event's total cost is calibrated; which side of its timestamp it falls on varies with the
    call (a torch operator defined in Python pays its dispatch inside the backend interval, a C++
    one outside), so cost that does not fit on one side goes to the other (one pass each way: each
    segment's excess moves to the next segment on its thread as far as that one has room, then what
    is left to the previous one). Only the segments with an excess move anything: a few in millions.
    """
    removal = np.minimum(planned, dur)
    over = np.flatnonzero(~(planned <= dur))
    _move_excess(over, planned[over] - removal[over], dur, last, removal)
    return removal


def _move_excess(
    over: np.ndarray,
    excess: np.ndarray,
    dur: np.ndarray | Timeline,
    last: np.ndarray | _LastRows,
    removal: np.ndarray,
    left: np.ndarray | None = None,
    at: Any = None,
) -> np.ndarray:
    """:func:`_place`'s moves: ``removal`` (``np.minimum(planned, dur)``) with the ``excess`` of each
    segment whose plan does not fit (``over``, sorted: planned less removal there) moved to its
    neighbours on its thread, in place. ``dur``: the segments' lengths, or the timeline to read them
    from at the rows moved to (no column of every row). ``left``: each segment's length less its
    removal, where the caller keeps it: kept so at the rows that take an excess. ``at``: where
    ``removal`` holds some rows only (those of the segments that give or take an excess, and more), what
    gives their places in it (rows -> indices); ``left`` then gives the number of rows. Returns the rows
    that took one (once per pass)."""
    length = dur.float_duration if isinstance(dur, Timeline) else dur.__getitem__
    moved = [np.zeros(0, np.int64)]
    if len(over) == 0:
        return moved[0]
    n = len(removal) if at is None else len(left)
    excess = excess.copy()
    for shift in (1, -1):  # forward to the next segment, then back to the previous one
        # a segment and its neighbour on another thread: nothing moves between them
        gives = (over + shift >= 0) & (over + shift < n)
        gives[gives] &= ~last[over[gives] + min(shift, 0)]
        to = over[gives] + shift
        k = to if at is None else at(to)
        dur_to = length(to)
        take = np.minimum(excess[gives], dur_to - removal[k])  # the neighbours' room before the pass
        excess[gives] -= take
        removal[k] += take
        if left is not None:
            left[to] = dur_to - removal[k]
        moved.append(to)
    return np.concatenate(moved)


def flush_intervals(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, rows converted, measured CPU ns) of each flush the writer thread marked during
    the session; the CPU time is what the flush measured of itself (its end row's ``cost``, native
    event buffer), 0 where it measured nothing."""
    rows = _flush_marks(tl)
    begins = rows[tl.kind[rows] == S.CAT_BEGIN]
    ends = rows[tl.kind[rows] == S.CAT_END]
    ends = ends[: len(begins)]
    begins = begins[: len(ends)]  # a flush still running at the end: its cost fell after the run
    start, end = tl.ts[begins], tl.ts[ends]
    cpu = S.unpack_cost(tl.cost.at(ends))[0] if tl.cost is not None else np.zeros(len(ends), np.int64)
    order = np.argsort(start)
    start, end, cpu = start[order], end[order], cpu[order]
    # each flush converts every row recorded before it started that an earlier flush did not: the
    # recorded rows before each start, counted per thread (whose rows are in time order), no sort
    count = native.function(
        "residual_count_kinds", native.N, native.N, native.I64, native.I8, native.BOOL, native.I64
    )
    native_kinds = count is not None and tl.kind.dtype == np.int8
    recorded = None if native_kinds else kinds_among(tl.kind, S.WRITTEN_KINDS)
    upto = np.zeros(len(start), np.int64)
    bounds = tl.thread_starts()
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        # the thread's rows before each start (sorted), and the recorded ones among them counted
        # from one start's to the next: no copy of the recorded rows' times
        edges = np.searchsorted(tl.ts[a:b], start, side="left") + a
        if recorded is None:  # in one pass over the thread's kinds, no column of every row (residual.c)
            counts = np.empty(len(edges), np.int64)
            count(a, len(edges), edges.astype(np.int64), tl.kind, _WRITTEN_BYTES, counts)
        else:
            counts = [np.count_nonzero(recorded[p:q]) for p, q in itertools.pairwise([a, *edges.tolist()])]
        upto += np.cumsum(np.array(counts, np.int64))
    converted = np.diff(np.concatenate([[0], upto]))
    return start, end, converted, cpu


def _flush_marks(tl: Timeline) -> np.ndarray:
    """Rows (sorted) that open or close a writer flush: the ``rlscope`` category off the main thread
    (an operation row's id is an instance id, which can be the category's number too). Compared on
    the other threads' rows only: the main thread's are most of the timeline."""
    main = tl.main_rows()
    out = []
    for part in (slice(0, main.start), slice(main.stop, len(tl.ts))):
        kind = tl.kind[part]
        mark = (kind == S.CAT_BEGIN) | (kind == S.CAT_END)
        mark &= tl.id[part] == categories.PROFILER
        out.append(np.flatnonzero(mark) + part.start)
    return np.concatenate(out)


def _flush_stall(tl: Timeline, per_event_ns: float) -> np.ndarray:
    """Per segment: the GIL time flushes took from it (:func:`_flush_stall_rows`), a column of every row."""
    out = np.zeros(len(tl.ts))
    rows, stall = _flush_stall_rows(tl, per_event_ns)
    out[rows] = stall
    return out


def _flush_stall_rows(tl: Timeline, per_event_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, stall): the GIL time flushes took from each segment (each flush's stall spread over its
    interval), at the rows (sorted) whose segment meets a flush; every other segment's is 0. A flush
    stalls for the CPU time it measured of itself, else the calibrated ``per_event_ns`` per row
    converted."""
    start, end, converted, cpu = flush_intervals(tl)
    stall = np.where(cpu > 0, cpu, converted * max(per_event_ns, 0.0)).astype(np.float64)
    keep = (end > start) & (converted > 0) & (stall > 0)
    start, end, stall = start[keep], end[keep], stall[keep]
    if len(start) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    length = (end - start).astype(np.float64)
    density = np.minimum(stall / length, 1.0)  # share of the flush spent stalling
    cum = np.concatenate([[0.0], np.cumsum(density * length)])

    def stall_until(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(start, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(t - start[j], 0, end[j] - start[j]) * density[j]
        return np.where(i >= 0, cum[j] + inside, 0.0)

    # stall_until is constant between flushes: a segment that meets none takes exactly 0, so only
    # the rows that meet one are looked up (flushes cover a small part of the run)
    rows = _rows_meeting(tl, start, end)
    return rows, stall_until(tl.seg_end_of(rows)) - stall_until(tl.ts[rows])


def _rows_meeting(tl: Timeline, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The rows whose segment ``[ts, seg_end]`` meets one of the intervals ``[start, end]`` (sorted by
    start), and perhaps a neighbour of one: per thread, from the row holding an interval's start to
    the last row beginning by its end. Relies on the timeline's layout (rows of a thread in time
    order, each segment ending by the next row's start)."""
    bounds = tl.thread_starts()
    lo_all, hi_all = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        ts = tl.ts[a:b]
        lo = np.maximum(np.searchsorted(ts, start, side="left") - 1, 0)
        hi = np.searchsorted(ts, end, side="right")
        keep = hi > lo
        lo_all.append(lo[keep] + a)
        hi_all.append(hi[keep] + a)
    return _union_rows(np.concatenate(lo_all), np.concatenate(hi_all))


def _union_rows(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The rows (sorted) in any of the ranges ``[lo, hi)``: the ranges merged where they meet, then
    listed, a pass over the rows they cover only."""
    if len(lo) == 0:
        return lo
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])  # how far the ranges so far reach
    new = np.ones(len(lo), bool)
    new[1:] = lo[1:] > hi[:-1]  # a range past every earlier one's reach starts a new run
    first = np.flatnonzero(new)
    start, stop = lo[first], hi[np.append(first[1:] - 1, len(lo) - 1)]
    length = stop - start
    # each run's rows: a count from 0 over all of them, shifted by where each run starts
    shift = start - np.concatenate([[0], np.cumsum(length[:-1])])
    return np.arange(int(length.sum())) + np.repeat(shift, length)


@dataclasses.dataclass
class _Scaled:
    """:func:`rebuild`'s new durations as each segment's length times its factor (correct_windows'),
    worked out in its C pass: ``gone`` gets each length less its new one (for numpy to sum; it may be
    the factors' own column), ``ratio`` (where not None) new over length (1 where the length is 0).
    ``row_mode`` (int8, each row's kind of window; None: not asked): the main thread's new lengths
    summed in the same pass into ``mode_ns``, [all, those of the rows in full windows], whole ns
    (residual_rebuild); ``mode_ns`` stays None where that pass did not run. ``factors``: the factors
    as residual.c works them out (RowFactors.tables), read there, not in the new durations' column
    (then empty), and ``gone`` not written."""

    gone: np.ndarray
    ratio: np.ndarray | None
    row_mode: np.ndarray | None = None
    mode_ns: np.ndarray | None = None
    factors: RowFactorsC | None = None


# residual_rebuild's arguments: (n, new_dur, ts, thread_end, threads, first, rel0, start_ns, k0, k1,
# before, m, rows, sums, scaled, old segments, gone, keep_ratio, ratio, n_ends, ends, id, n_inst,
# inst_end, end_row, bad, n_mode, row_mode, full_mode, mode_ns, factors)
_REBUILD = (
    native.N, native.F64, native.I64, native.I64, native.N, native.I64, native.F64, native.N,
    native.N, native.N, native.DOUBLE, native.N, native.I64, native.F64,
    native.N, native.SEGMENTS, native.F64, native.N, native.F64,
    native.N, native.I64, native.I32, native.N, native.I64, native.I64, native.I64,
    native.N, native.I8, native.N, native.I64, ROW_FACTORS,
)  # fmt: skip
_SUMS_BEFORE = (native.F64, native.N, native.I64, native.F64, native.N, native.SEGMENTS, ROW_FACTORS)


_NO_IDS = np.zeros(0, np.int32)
_NO_MODES = (0, np.zeros(0, np.int8), 0, np.zeros(0, np.int64))  # residual_rebuild counting nothing


def _rebuild_loops(tl: Timeline, new_dur: np.ndarray) -> tuple[Any, Any] | None:
    """rebuild's C loops (residual_rebuild, residual_sums_before) over ``tl`` and its new durations
    ``new_dur``, or None where numpy's run (no loops, or columns of other types)."""
    if not _doubles(new_dur) or tl.ts.dtype != np.int64:
        return None
    fill = native.function("residual_rebuild", *_REBUILD, restype=native.DOUBLE)
    sums_before = native.function("residual_sums_before", *_SUMS_BEFORE)
    return (fill, sums_before) if fill is not None and sums_before is not None else None


def rebuild(
    tl: Timeline,
    new_dur: np.ndarray,
    spare: tuple[np.ndarray, ...] = (),
    scaled: _Scaled | None = None,
    in_place: bool = False,
) -> Timeline:
    """The timeline with every segment shortened to ``new_dur``, timestamps rebuilt per thread.

    Other threads start, and the run ends, where the main thread's corrected time says. The C loops
    write the new starts and each thread's end, no column of the segments' ends (a segment ends
    where the next row on its thread starts: Timeline); numpy's write that column too, whose memory
    holds their running sum first. ``spare``: columns of every row the caller no longer needs, whose
    memory takes the new columns (:func:`_spare_columns`). ``scaled``: the new durations are the
    segments' lengths times ``new_dur`` (correct_windows' factors), worked out in the C pass that
    writes the timestamps (:class:`_Scaled`; the C loops only, where :func:`_rebuild_loops` has them):
    its ``gone`` may then be ``new_dur`` itself, each row's factor read before its time gone is written
    over it, and ``spare`` be ``tl``'s own ``ts``, each row's (and the next row's, its segment's end)
    read before its new start is written over it. ``in_place``: ``new_dur`` is read no further, and its
    memory takes the new starts where the C loops rebuild (they read each row's duration before its
    start is written over it): a column of every row fewer at the correction's peak.
    """
    # relative to the session start: float64 stays exact there
    first = _thread_firsts(tl)
    loops = _rebuild_loops(tl, new_dur)
    own = in_place and scaled is None and loops is not None
    # the C loops: the new starts, and each thread's (of ``first``'s) end; numpy's: the ends' column too
    columns = _spare_columns(len(tl.ts), spare, new_dur, own, 1 if loops is not None else 2)
    ts, seg_end = columns[0], columns[1] if loops is None else None
    k_end = np.empty(len(first), np.int64)
    del columns
    fill, sums_before = loops if loops is not None else (None, None)
    old = tl.segments() if loops is not None else None  # the raw segments, read before they are written
    f64 = np.zeros(0)
    gone = scaled.gone if scaled is not None else f64
    ratio = scaled.ratio if scaled is not None and scaled.ratio is not None else f64
    after = None
    if scaled is not None:
        assert loops is not None and _doubles(gone, ratio), "rebuild's scaled durations: C loops only"
    elif loops is None:
        # the running sum of the new durations over every row (np.cumsum: one addition after
        # another), held in ``seg_end``'s memory until each block of it is written: no column of its own
        assert seg_end is not None
        after = seg_end.view(np.float64)  # after[i]: the sum up to row i, row i included
        np.cumsum(new_dur, out=after)
    first64 = first.astype(np.int64, copy=False)
    # each instance's end: the new start of its scope's end row, written by the C passes as they go
    # where the ids are as they read them (no gathers from the columns at the ends), else after them
    ends = tl.scope_ends()
    inst_end = np.empty(len(tl.inst_end), np.int64)
    end_row = bad = None
    ends_at = np.zeros(0, np.int64)
    if after is None and tl.id.dtype == np.int32:
        ends_at = ends.astype(np.int64, copy=False)
        end_row, bad = np.full(len(inst_end), -1, np.int64), np.zeros(1, np.int64)

    def cum(rows: np.ndarray) -> np.ndarray:
        """The running sum before each of ``rows`` (read before their blocks are written; summed up
        to them where the C loops keep it as they go)."""
        if after is not None:
            return np.where(rows > 0, after[np.maximum(rows - 1, 0)], 0.0)
        order = np.argsort(rows, kind="stable")
        at, got, out = rows[order].astype(np.int64), np.empty(len(rows)), np.empty(len(rows))
        sums_before(new_dur, len(at), at, got, scaled is not None, old, factors)
        out[order] = got
        return out

    counted = _counted_modes(scaled, len(ts))
    factors = scaled.factors if scaled is not None else None

    def rows_from(
        k0: int, k1: int, before: float, rel0: np.ndarray, asked: np.ndarray, main: bool = False
    ) -> tuple[float, np.ndarray]:
        """Threads ``k0`` to ``k1 - 1`` rebuilt in one C pass from the running sum ``before`` (its
        value before their first row), and that sum before each of ``asked`` (rows among theirs) read
        on the way: (the running sum after their rows, those sums). ``main``: the main thread's, whose
        new lengths ``scaled`` may ask summed by kind of window (:class:`_Scaled`)."""
        order = np.argsort(asked, kind="stable")
        got, out = np.empty(len(asked)), np.empty(len(asked))
        rows = asked[order].astype(np.int64)
        rel0 = np.ascontiguousarray(rel0, np.float64)
        args = (
            len(ts), new_dur, ts, k_end, len(first), first64, rel0, tl.start_ns,
            k0, k1, before, len(rows), rows, got,
            scaled is not None, old, gone, len(ratio) > 0, ratio,
            len(ends_at), ends_at, tl.id if end_row is not None else _NO_IDS, len(inst_end), inst_end,
            end_row if end_row is not None else ends_at, bad if bad is not None else ends_at,
        )  # fmt: skip
        if main and counted is not None and scaled is not None:
            mode_ns = np.zeros(2, np.int64)
            end = fill(*args, len(counted), counted, S.WINDOW_FULL, mode_ns, factors)
            scaled.mode_ns = mode_ns
        else:
            end = fill(*args, *_NO_MODES, factors)
        out[order] = got
        return end, out

    rel0 = (tl.ts[first] - tl.start_ns).astype(np.float64)
    rel_end = np.array([float(tl.end_ns - tl.start_ns)])
    on_main = np.flatnonzero(tl.thread_of(first) == tl.main_thread)
    if len(on_main):  # other threads start, and the run ends, where the main thread's time says
        km = int(on_main[0])
        m0 = int(first[km])
        m1 = int(np.append(first[first > m0], len(tl.ts))[0])  # the next thread's first row, or the end
        # looked up at the few times asked (a start per thread, the end), each as a whole-row pass did
        at = np.append(tl.ts[first], tl.end_ns)  # the times asked, on the raw clock
        i = np.searchsorted(tl.ts[m0:m1], at, side="right") - 1
        ok = i >= 0
        row = m0 + np.maximum(i, 0)
        m_ts = (tl.ts[row] - tl.start_ns).astype(np.float64)
        dur_row = tl.float_duration(row)  # the segments' raw lengths, at these rows only
        new_row = new_dur[row] if scaled is None else dur_row * _factors_at(scaled, new_dur, row)
        m_ratio = np.divide(new_row, dur_row, out=np.ones(len(row)), where=dur_row > 0)
        rel = np.append(rel0, rel_end)
        asked = np.append(row, m0)  # before each row asked, then before the main thread's first

        def moved(sums: np.ndarray) -> np.ndarray:
            """Each thread's start, then the run's end, on the main thread's corrected time (``sums``:
            the running sum before each row ``asked``)."""
            m_new = float(tl.ts[m0] - tl.start_ns) + sums[:-1] - sums[-1]
            into = np.minimum(rel - m_ts, dur_row)
            return np.where(ok, m_new + into * m_ratio, rel)

        if after is not None:
            moved_at = moved(cum(asked))
        else:
            # the main thread's own start needs the sums before its first rows only (those at its first
            # time); its rows rebuilt, the sums before the rows asked come from that pass
            sums = np.zeros(len(asked))
            sums[[km, -1]] = cum(asked[[km, -1]])
            rel0[km] = moved(sums)[km]
            main_end, sums = rows_from(km, km + 1, float(sums[-1]), rel0, asked, main=True)
            moved_at = moved(sums)
        rel0, rel_end = moved_at[:-1], moved_at[-1:]  # the main thread's own start as it was rebuilt
    # each row's start: its thread's first start plus the corrected time before it on the thread
    none = np.zeros(0, np.int64)
    if after is not None:
        assert seg_end is not None
        _rebuild_rows(tl, new_dur, first, rel0, after, ts, seg_end)
    elif len(on_main):  # the threads before the main thread's, from row 0, and those after it
        rows_from(0, km, 0.0, rel0, none)
        rows_from(km + 1, len(first), main_end, rel0, none)
    else:
        rows_from(0, len(first), 0.0, rel0, none)
    # the session's end (not the last row: rlscope's own teardown, e.g. CUPTI's, may come after it)
    end_ns = int(np.rint(rel_end[0])) + tl.start_ns
    if end_row is not None and not bad[0]:  # the instances without an end row end with the session
        inst_end[end_row < 0] = end_ns
    else:
        inst_end.fill(end_ns)
        inst_end[tl.id[ends]] = ts[ends]
    if seg_end is not None:
        out = tl.retimed(ts, seg_end, end_ns=end_ns, inst_end=inst_end)
    else:  # each thread index's end: that of the thread of ``first`` its last row is in
        k_last = np.append(first[1:], len(ts)) - 1
        at = np.searchsorted(k_last, tl.thread_last() % len(ts))  # -1: no rows before, the last row's
        out = tl.retimed(ts, end_ns=end_ns, inst_end=inst_end, thread_end=k_end[at])
    out.memo["scope_ends"] = ends  # the same rows
    return out


def _gone_leaves(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(each leaf's first row, then n; their sums; the slots of leaves a pass cuts): where residual.c's
    rebuild sums the time gone of ``n`` rows as np.sum sums their column (numpy's pairwise tree,
    RowFactors' GoneLeaf), or None where the C loops do not run."""
    fn = native.function("residual_gone_leaves", native.N, native.I64, restype=native.N)
    if fn is None:
        return None
    lo = np.empty(n // 32 + 4, np.int64)
    k = int(fn(n, lo))
    return lo, np.zeros(k), np.full(LEAF_SLOTS * SLOT_SIZE, -1.0)


def _factors_at(scaled: _Scaled, new_dur: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The factors of ``rows`` (read before rows are written): in ``new_dur``, or worked out where
    ``scaled`` holds them as tables (residual_factors_at)."""
    if scaled.factors is None:
        return new_dur[rows]
    fn = native.function("residual_factors_at", ROW_FACTORS, native.N, native.I64, native.F64)
    assert fn is not None, "factors as tables: C loops only"
    out = np.empty(len(rows))
    fn(scaled.factors, len(rows), np.ascontiguousarray(rows, np.int64), out)
    return out


def _counted_modes(scaled: _Scaled | None, n: int) -> np.ndarray | None:
    """The column of each row's kind of window residual_rebuild sums the main thread's lengths by,
    where ``scaled`` asks for them and it is one (int8, contiguous, every row's), else None."""
    mode = scaled.row_mode if scaled is not None else None
    if mode is None or mode.dtype != np.int8 or len(mode) != n or not mode.flags.c_contiguous:
        return None
    return mode


def _thread_firsts(tl: Timeline) -> np.ndarray:
    """Each thread's first row, of the threads with rows (the row after each :func:`thread_last` row
    but the final one, and row 0): read off Timeline.thread_starts, not a pass over the rows."""
    starts = tl.thread_starts()[:-1]
    starts = starts[(starts > 0) & (starts < len(tl.ts))]
    new = np.ones(len(starts), bool)
    new[1:] = starts[1:] != starts[:-1]  # threads without rows: none
    return np.append(0, starts[new]).astype(np.int64)


def _spare_columns(
    n: int, spare: tuple[np.ndarray, ...], new_dur: np.ndarray, own: bool = False, count: int = 2
) -> list[np.ndarray]:
    """:func:`rebuild`'s ``count`` int64 columns of ``n`` rows: in the memory of ``spare`` columns (of
    8-byte items, C-contiguous, not ``new_dur``'s), as far as there are such, else new; the first in
    ``new_dur``'s own where ``own`` (a C-contiguous float64 column of ``n`` rows). Why: pages the
    process has not touched yet cost about a second a GB to fault in on a virtual machine, and a
    column the caller no longer needs has its pages already."""
    usable = [new_dur.view(np.int64)] if own else []
    usable += [
        c.view(np.int64)
        for c in spare
        if len(c) == n
        and c.dtype.itemsize == 8
        and c.flags.c_contiguous
        and not np.may_share_memory(c, new_dur)
    ]
    usable = usable[:count]
    return usable + [np.empty(n, np.int64) for _ in range(count - len(usable))]


def _rebuild_rows(
    tl: Timeline,
    new_dur: np.ndarray,
    first: np.ndarray,
    rel0: np.ndarray,
    after: np.ndarray,
    ts: np.ndarray,
    seg_end: np.ndarray,
) -> None:
    """:func:`rebuild`'s rows: each row's start is its thread's first start (``rel0``, per thread from
    its ``first`` row) plus the corrected time before it on the thread, read from the running sum
    ``after`` (``seg_end``'s memory, each block written after it is read), a block of rows at a time
    (rlscope.blocks); ``ts`` and ``seg_end`` rounded, on the raw clock. A segment ends where the next
    row on its thread starts: both are that row's start, not the sum of a start and a length rounded
    apart (which could leave a nanosecond between them)."""
    rel, rel_seg_end = np.empty(BLOCK_ROWS), np.empty(BLOCK_ROWS)  # one block's operands, reused
    before = 0.0  # the running sum before the next block
    for k, (a, b) in enumerate(zip(first.tolist(), np.append(first[1:], len(ts)).tolist(), strict=True)):
        base, start = before, rel0[k]  # the thread's own: its rows are consecutive
        for block in blocks(b - a):
            rows = slice(a + block.start, a + block.stop)
            m = rows.stop - rows.start
            ts_rel, end_rel = rel[:m], rel_seg_end[:m]
            ts_rel[0], ts_rel[1:] = before, after[rows.start : rows.stop - 1]
            before = after[rows.stop - 1]
            ts_rel -= base
            ts_rel += start
            # a segment ends where the next row on its thread starts, the thread's last where its
            # length takes it
            end_rel[:-1] = ts_rel[1:]
            end_rel[-1] = (before - base) + start if rows.stop < b else ts_rel[-1] + new_dur[rows.stop - 1]
            ts[rows] = np.rint(ts_rel, out=ts_rel)
            ts[rows] += tl.start_ns
            seg_end[rows] = np.rint(end_rel, out=end_rel)
            seg_end[rows] += tl.start_ns


def measured_rows(tl: Timeline, cls: np.ndarray, costs: EventCosts) -> np.ndarray:
    """The rows (sorted) of scope and category boundaries that measured their own cost, with a
    calibration that says what lies around the measurement."""
    if tl.cost is None or os.environ.get(MEASURED_ENV) == "0":
        return np.zeros(0, np.int64)
    rows = tl.cost.positive()
    c = cls[rows]
    known = ~np.isnan(costs.dispatch_inside[c])
    return rows[known & ((c == CostClass.SCOPE) | (c == CostClass.CATEGORY))]


def thread_last(tl: Timeline) -> np.ndarray:
    """Per row: whether it is its thread's last row: the row before each thread's first and the last
    row, marked at those few rows (Timeline.thread_starts), not a comparison of every row with the next."""
    last = np.zeros(len(tl.ts), bool)
    last[tl.thread_starts()[1:] - 1] = True
    return last


class _LastRows:
    """:func:`thread_last`'s column read at some rows only (where the excess moves, :func:`_move_excess`):
    whether each is its thread's last row, looked up among those few rows (Timeline.thread_starts), no
    column of every row."""

    def __init__(self, tl: Timeline) -> None:
        self.rows = np.unique(tl.thread_starts()[1:] - 1)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        return np.isin(rows, self.rows)


def _planned(
    tl: Timeline,
    costs: EventCosts,
    last: np.ndarray,
    on_writer: np.ndarray,
    mem: np.ndarray | None,
    mods: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(dur, planned, removal, profiler, per_class) of :func:`correct_timeline`: each segment's length,
    the cost planned in it, the removal placed (:func:`_place`), whether it is rlscope's periodic work
    (removed whole) and the cost per class. ``mem``, ``mods``: per row, the memory recorder's and the
    module calls' cost, added to the plan (None: none)."""
    n = len(tl.ts)
    # every full-length array is dropped once its part is done: at millions of rows, each one alive
    # at once is tens of MB of fresh pages
    dur = tl.float_duration()
    cls = event_classes(tl)
    # a begin pays its outside half before its timestamp (the previous segment) and its inside half
    # after it (the segment it opens); an end the reverse: one lookup per row in (opens, class)
    code = np.add(cls, take(_KIND_OPENS, tl.kind) * np.int8(len(CLASS_NAMES)), dtype=np.int8)
    before_of, after_of = _cost_tables(costs)
    # the rows that pay something (a class without a cost, such as the torch ops' where the windows
    # measure them, pays nothing: millions of rows skipped, the sums below the same)
    paying = take((before_of != 0) | (after_of != 0), code)
    measured = measured_rows(tl, cls, costs)
    paying[measured] = True
    rows = np.flatnonzero(paying)
    del paying
    row_code = code[rows]
    del code
    before, after = before_of[row_code], after_of[row_code]
    if len(measured):  # what these boundaries measured, plus the calibrated dispatch around it
        at = search_sorted(rows, measured)  # both sorted
        pre, post = S.unpack_cost(tl.cost.at(measured))
        d_in, d_out = costs.dispatch_inside[cls[measured]] / 2, costs.dispatch_outside[cls[measured]] / 2
        o = row_code[at] >= len(CLASS_NAMES)  # opens
        before[at] = pre + np.where(o, d_out, d_in)
        after[at] = post + np.where(o, d_in, d_out)
    per_class = np.bincount(cls[rows], weights=before + after, minlength=len(CLASS_NAMES))
    # a row's segment pays what falls after its timestamp, and before the next one's on its thread
    planned = np.zeros(n)
    planned[rows] = after
    prev = rows - 1
    pays_prev = prev >= 0
    pays_prev[pays_prev] = ~last[prev[pays_prev]]
    planned[prev[pays_prev]] += before[pays_prev]
    del before, after, rows, prev, pays_prev
    if mem is not None:
        planned += mem
    if mods is not None:
        planned += mods
    profiler = tl.cat == categories.PROFILER
    profiler &= ~on_writer
    np.copyto(planned, dur, where=profiler)
    return dur, planned, _place(planned, dur, last), profiler, per_class


# residual_planned's arguments, in the groups of its call in _planned_native
_PLANNED_ARGS = (
    native.N, native.SEGMENTS, native.I8, native.I8, native.I8, native.I32, native.BOOL,
    native.I8, native.BOOL, native.N, native.N,
    native.N, native.N, native.N, native.N, native.N, native.N,
    native.F64, native.F64, native.BOOL,
    native.N, native.N, native.I64, native.I64, native.F64, native.F64,
    native.N, native.F64,
    native.N, native.F64,
    native.N, native.I64, native.I64, native.F64, native.N, native.BOOL, native.F64, native.BOOL,
    native.N, native.F64, native.N, native.N, native.I32, native.N, native.F64,
    native.N, native.F64, native.N, native.I64, native.F64,
    native.F64, native.N, native.BOOL, native.I64, native.F64,
    native.N, native.I64, native.I64, native.F64, native.F64,
)  # fmt: skip
_OVER_ROWS = (
    1 << 16
)  # the rows whose planned removal does not fit that residual_planned lists: a few in millions


def _saved_room(n: int) -> int:
    """The room made for the plans residual_planned keeps near the rows over their plan, where it
    makes no column of them (of ``n`` rows): a row in 16, and 65,536 rows at least (the pages written
    only as far as they are kept)."""
    return min(n, max(n // 16, 1 << 16))


def _changed_saved_loop() -> Any:
    """residual.c's residual_changed_sum_saved, or None where the C loops do not run."""
    args = (native.N, native.N, native.I64, native.F64, native.F64, native.N, native.I64, native.I64)
    return native.function("residual_changed_sum_saved", *args, restype=native.DOUBLE)


def _native_columns(tl: Timeline) -> bool:
    """Whether the timeline's columns have the types residual_planned reads (ids narrowed to int32)."""
    return (
        tl.ts.dtype == np.int64
        and tl.id.dtype == np.int32
        and tl.op.dtype == np.int32
        and all(c.dtype == np.int8 for c in (tl.kind, tl.cat, tl.flags))
    )


def _doubles(*columns: np.ndarray | None) -> bool:
    """Whether each of ``columns`` (None: left out) is C-contiguous float64, as the C loops read them."""
    return all(c is None or (c.dtype == np.float64 and c.flags.c_contiguous) for c in columns)


@dataclasses.dataclass
class _Plan:
    """:func:`_planned_native`'s columns and figures, those of :func:`_planned` and what the steps
    after it read besides."""

    left: np.ndarray  # per row: its segment's length less its removal (the time left in it)
    planned_sum: float  # the plan's column summed (numpy's pairwise sum)
    removal: np.ndarray  # in the plan's memory, made the removal where it differs from the plan
    profiler: np.ndarray | None  # None: not marked (no column summed off it), its rows ``prof_rows``
    per_class: np.ndarray
    excl: np.ndarray  # per instance: its time on the main thread (Timeline.instance_time)
    # whether every ``left`` is a number not below +0: np.minimum(0, left) is then 0 at every row, and
    # the flushes' stall is 0 off the rows that meet a flush (:func:`_stall_taken`)
    regular: bool
    # the module calls' cost of the rows that are not rlscope's periodic work, summed as numpy sums
    # mods[~profiler], where it was worked out row by row (a module_calls.Spread); None: given as a column
    kept_sum: float | None = None
    removal_sum: float | None = None  # ``removal`` summed (numpy's pairwise sum); None: not yet
    prof_rows: np.ndarray | None = None  # the ``profiler`` rows (sorted); None: read off ``profiler``
    # the rows ``removal`` holds (ascending: those near the rows whose removal is not their plan, the
    # pass writing no column of the plans); None: every row
    removal_rows: np.ndarray | None = None


def _planned_native(
    tl: Timeline,
    costs: EventCosts,
    last: np.ndarray | _LastRows,
    on_writer: np.ndarray,
    mem: np.ndarray | None,
    mods: np.ndarray | module_calls.Spread | None,
) -> _Plan | None:
    """:func:`_planned` in one pass over the rows (residual.c's residual_planned), with the time left
    per segment in place of the segments' lengths (a column fewer: each is read where it is needed)
    and the main thread's time per instance (flush_stall.measure's) read on the way. ``mods``: a
    column, or what spreads the module calls' cost (module_calls.Spread), read row by row (no column
    of it). None where the numpy loops must run."""
    fn = native.function("residual_planned", *_PLANNED_ARGS, restype=native.N)
    spread = mods if isinstance(mods, module_calls.Spread) else None
    column = mods if spread is None else None
    if fn is None or not _native_columns(tl) or not _doubles(mem, column):
        return None
    n = len(tl.ts)
    before_of, after_of = _cost_tables(costs)
    # the boundaries' own costs, read as they are kept (RowValues: at some rows, or at every row)
    cost_rows = cost_values = none = np.zeros(0, np.int64)
    every_row = False
    if tl.cost is not None and os.environ.get(MEASURED_ENV) != "0":
        cost_values, every_row = tl.cost.values, tl.cost.at_rows is None
        cost_rows = none if every_row else tl.cost.at_rows
    if cost_values.dtype != np.int64 or (every_row and len(cost_values) != n):
        return None
    left = np.empty(n)
    # the plan's column and the module costs kept off the periodic work: summed as the pass works them
    # out (numpy's sums, no column of the costs kept), the plan's leaves kept for the removal's sum,
    # where those sums are numpy's here (sums.streams_agree); else numpy sums the columns
    stream = streams_agree()
    # no column of the plans where no column is summed off the periodic work's rows (whose mask's
    # memory it then takes): the plans near the rows whose removal is not their plan kept, all the
    # removal's sum reads again (the pass run again with the column where they do not fit)
    saved = _changed_saved_loop() if stream and mem is None and column is None else None
    half_d_in, half_d_out = costs.dispatch_inside / 2, costs.dispatch_outside / 2
    main, n_inst = tl.main_rows(), len(tl.inst_name)
    none_f, none_b = np.zeros(0), np.zeros(0, bool)
    span_a = span_b = none
    tables, has_python, total = none_f, none_b, none_f
    if spread is not None:
        span_a, span_b, tables = spread.tables()
        has_python, total = spread.has_python, spread.total
    for keep in (False, True) if saved is not None else (True,):
        planned = np.empty(n) if keep else none_f
        saved_rows = none if keep else np.empty(_saved_room(n), np.int64)
        saved_vals = none_f if keep else np.empty(len(saved_rows))
        kept = (np.zeros(1) if stream else np.empty(n)) if spread is not None else None
        sums, leaves = (np.zeros(1), np.empty(n // 64 + 2)) if stream else (np.zeros(0), np.zeros(0))
        # the periodic work's rows, listed; marked in a column only for the columns summed off them
        profiler = np.empty(n, bool) if mem is not None or column is not None else None
        per_class = np.zeros(len(CLASS_NAMES))
        over_rows = np.empty(min(n, _OVER_ROWS), np.int64)
        prof_rows = np.empty(min(n, _OVER_ROWS), np.int64)
        # the irregular rows, the module costs kept, the periodic work's rows, the plans kept
        excl, counts = np.zeros(n_inst), np.zeros(4, np.int64)
        listed = fn(
            n, tl.segments(), tl.kind, tl.cat, tl.flags, tl.id, on_writer,
            _KIND_CLASS, _KIND_OPENS, len(_KIND_CLASS), len(CLASS_NAMES),
            CostClass.SCOPE, CostClass.CATEGORY, CostClass.BACKEND,
            categories.BACKEND, categories.PROFILER, S.FLAG_FORCED_CLOSE,
            before_of, after_of, (before_of != 0) | (after_of != 0),
            len(cost_values), every_row, cost_rows, cost_values, half_d_in, half_d_out,
            n if mem is not None else 0, mem if mem is not None else np.zeros(0),
            n if column is not None else 0, column if column is not None else none_f,
            len(span_a), span_a, span_b, tables, len(total), has_python, total, module_calls.NOT_PYTHON_BYTES,
            stream, kept if kept is not None else none_f,
            main.start, main.stop, tl.op, n_inst, excl,
            len(planned), planned, len(saved_rows), saved_rows, saved_vals,
            left, n if profiler is not None else 0, profiler if profiler is not None else none_b,
            prof_rows, per_class, len(over_rows), over_rows, counts, sums, leaves,
        )  # fmt: skip
        if keep:
            break
        n_saved = int(counts[3])
        if listed > len(over_rows) or n_saved > len(saved_rows):
            continue  # more rows than the lists hold: the pass again, with the column
        saved_rows, saved_vals = saved_rows[:n_saved], saved_vals[:n_saved]
        plan = _kept_plans(tl, last, left, listed, over_rows, saved_rows, saved_vals, leaves, sums[0], saved)
        if plan is not None:
            removal, removal_sum, moved_rows = plan
            removal_rows = saved_rows
            break
    regular = int(counts[0]) == 0
    n_prof = int(counts[2])
    kept_sum = None
    if kept is not None:
        kept_sum = float(kept[0] if stream else kept[: int(counts[1])].sum())
    del kept
    if n_prof <= len(prof_rows):
        prof_rows = prof_rows[:n_prof]
    else:  # more rows than the list holds
        prof_rows = np.flatnonzero((tl.cat == categories.PROFILER) & ~on_writer)
    planned_sum = sums[0] if stream else planned.sum()  # before the column becomes the removal
    if keep:
        removal_rows = None
        removal, summed, moved_rows = _removal(tl, last, left, listed, over_rows, planned, leaves, stream)
        removal_sum = planned_sum if summed is None else summed
    moved = left[moved_rows]
    regular = regular and not (np.isnan(moved) | np.signbit(moved)).any()
    return _Plan(
        left, planned_sum, removal, profiler, per_class, excl, regular, kept_sum, removal_sum, prof_rows,
        removal_rows,
    )  # fmt: skip


def _removal(
    tl: Timeline,
    last: np.ndarray | _LastRows,
    left: np.ndarray,
    listed: int,
    over_rows: np.ndarray,
    planned: np.ndarray,
    leaves: np.ndarray,
    stream: bool,
) -> tuple[np.ndarray, float | None, np.ndarray]:
    """(removal, its sum, the rows moved to) of :func:`_planned_native`'s pass that wrote the plans'
    column ``planned``: made the removal in place (np.minimum(planned, d), the plan but at the
    ``listed`` rows), the excess moved (``left`` kept). The sum: None where it is the plan's (no row
    listed)."""
    n = len(planned)
    removal = planned
    if listed <= len(over_rows):
        rows = over_rows[:listed]
        dur, plan_at = tl.float_duration(rows), planned[rows]
        removal[rows] = np.minimum(plan_at, dur)
        over = ~(plan_at <= dur)
        rows, excess = rows[over], plan_at[over] - removal[rows[over]]
    else:  # more rows than the list holds: the lengths of every row
        dur = tl.float_duration()
        rows = np.flatnonzero(~(planned <= dur))
        plan_at = planned[rows]
        np.minimum(planned, dur, out=removal)
        excess = plan_at - removal[rows]
    del dur
    moved_rows = _move_excess(rows, excess, tl, last, removal, left=left)
    if listed == 0:  # every row's removal its plan to the bit: the same column, the same sum
        return removal, None, moved_rows
    if stream and listed <= len(over_rows):
        # the plan but at the rows listed and those moved to: the plan's sum, their leaves summed again
        changed = _changed_rows(over_rows[:listed], moved_rows)
        return removal, float(changed_sum_loop()(n, removal, leaves, len(changed), changed)), moved_rows
    return removal, float(removal.sum()), moved_rows


def _changed_rows(listed: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """The rows whose removal is not their plan (``listed``) and those an excess moved to (``moved``:
    two ascending runs), ascending, a row perhaps twice (the changed sums read which leaves hold one):
    runs merged by a stable sort, not np.union1d's hashing and sort."""
    return np.sort(np.concatenate([listed, moved]).astype(np.int64, copy=False), kind="stable")


def _kept_plans(
    tl: Timeline,
    last: np.ndarray | _LastRows,
    left: np.ndarray,
    listed: int,
    over_rows: np.ndarray,
    saved_rows: np.ndarray,
    saved_vals: np.ndarray,
    leaves: np.ndarray,
    planned_sum: float,
    changed_sum: Any,
) -> tuple[np.ndarray, float, np.ndarray] | None:
    """:func:`_removal` where the pass wrote no column of the plans, only those of the rows near the
    ``listed`` ones (``saved_rows``, ascending, their plans ``saved_vals``: made the removal there, in
    place): (the removal at ``saved_rows``, its sum over every row, the rows moved to); None where a
    leaf of the sum to take again is not among the rows kept."""
    n = len(left)
    if listed == 0:
        return saved_vals, planned_sum, np.zeros(0, np.int64)
    rows = over_rows[:listed]
    pos = np.searchsorted(saved_rows, rows)
    dur, plan_at = tl.float_duration(rows), saved_vals[pos]
    saved_vals[pos] = np.minimum(plan_at, dur)
    over = ~(plan_at <= dur)
    excess = plan_at[over] - saved_vals[pos[over]]
    moved_rows = _move_excess(
        rows[over], excess, tl, last, saved_vals, left=left, at=lambda r: np.searchsorted(saved_rows, r)
    )
    changed = _changed_rows(rows, moved_rows)
    ok = np.zeros(1, np.int64)
    total = changed_sum(n, len(saved_rows), saved_rows, saved_vals, leaves, len(changed), changed, ok)
    return (saved_vals, float(total), moved_rows) if ok[0] else None


def _cost_tables(costs: EventCosts) -> tuple[np.ndarray, np.ndarray]:
    """(before, after): the cost a row pays before and after its timestamp, per code (its class, plus
    the number of classes where it opens a pair)."""
    half_in, half_out = costs.inside / 2, costs.outside / 2
    return np.concatenate([half_in, half_out]), np.concatenate([half_out, half_in])


def _sums_off(
    n: int,
    profiler: np.ndarray | None,
    prof_rows: np.ndarray,
    prof_dur: np.ndarray,
    mem: np.ndarray | None,
    mods: np.ndarray | None,
    scratch: np.ndarray | None,
) -> tuple[float, float, float]:
    """The periodic work's time (the segments' lengths ``prof_dur`` at its rows ``prof_rows``, the
    ``profiler`` ones, summed as numpy sums np.where(profiler, dur, 0.0): pairwise over a column of
    all ``n`` rows), and ``mem`` and ``mods`` summed off them (0 where None; numpy sums the masked
    column; ``profiler``, the rows' mask, is read for them only). ``scratch``: a column of every row
    that is not needed after, to hold what is summed instead of a new one."""
    unmasked = native.function(
        "residual_unmasked", native.N, native.F64, native.BOOL, native.F64, restype=native.N
    )
    totals = []
    for col in (mem, mods):
        if col is None:
            totals.append(0.0)
        elif unmasked is None or scratch is None or not _doubles(col, scratch):
            totals.append(float(col[~profiler].sum()))
        else:
            totals.append(float(scratch[: unmasked(n, col, profiler, scratch)].sum()))
    # np.where(profiler, dur, 0.0) summed without the lengths of every row: the few rows' own
    profiler_ns = sum_at_rows(n, prof_rows, prof_dur)
    return profiler_ns, totals[0], totals[1]


def _stall_taken(
    tl: Timeline,
    left: np.ndarray,
    bound: np.ndarray | None,
    on_writer: np.ndarray,
    per_event_ns: float,
    excl: np.ndarray | None,
) -> tuple[dict[str, Any] | None, float]:
    """(the stall share's evidence, the writer's seconds removed): the flushes' stall taken from the
    time ``left`` per segment (in place): their bound (:func:`_flush_stall_rows`) within what is left,
    off the writer's threads, times the share flush_stall.measure finds (None where no bound is left).
    ``bound``: a column of every row, all 0, that takes the stall (numpy sums it). ``excl``: the main
    thread's time per instance, where the C loops' plan (:func:`_planned_native`) is ``regular``
    (np.minimum(0, left) is 0 off the rows that meet a flush): the stall is then worked out at those
    rows only, and ``bound`` is not read (None: none made)."""
    rows, stall = _flush_stall_rows(tl, per_event_ns)
    if excl is None:  # the columns of every row
        assert bound is not None, "the stall over every row: a column to take it"
        bound[rows] = stall
        np.minimum(bound, left, out=bound)
        bound[on_writer] = 0.0  # the flush itself, not a stall of the job
        measured = flush_stall.measure(tl, bound) if bound.any() else None
        if measured is not None:
            bound *= measured.share
        writer_ns = float(bound.sum()) if measured is not None else 0.0
        left -= bound
        return measured.as_dict() if measured is not None else None, writer_ns / 1e9
    stall = np.minimum(stall, left[rows])
    stall[on_writer[rows]] = 0.0
    measured = flush_stall.measure(tl, stall, rows, excl) if stall.any() else None
    if measured is None:
        return None, 0.0
    stall *= measured.share
    left[rows] -= stall  # less 0 elsewhere: as it is
    return measured.as_dict(), sum_at_rows(len(left), rows, stall) / 1e9  # the column's sum


def _ratio(tl: Timeline, new_dur: np.ndarray, dur: np.ndarray | None = None) -> np.ndarray:
    """Per row: its new duration over its segment's length (1 where that is 0): what
    :meth:`Correction.remap` moves launches by. ``dur``: the lengths, where the caller has them."""
    fn = native.function("residual_ratio", native.N, native.SEGMENTS, native.F64, native.F64)
    n = len(new_dur)
    if fn is not None and _doubles(new_dur) and tl.ts.dtype == np.int64:
        ratio = np.empty(n)
        fn(n, tl.segments(), new_dur, ratio)
        return ratio
    dur = tl.float_duration() if dur is None else dur
    return np.divide(new_dur, dur, out=np.ones(n), where=dur > 0)


def correct_timeline(
    tl: Timeline,
    costs: EventCosts,
    nvml_samples: int = 0,
    memory: np.ndarray | None = None,
    modules: np.ndarray | module_calls.Spread | None = None,
    keep_ratio: bool = True,
) -> Correction:
    """Remove the calibrated overhead from every thread's segments and rebuild the timestamps.
    ``memory``: times of the recorded GPU allocator events (:func:`memory_times`); ``modules``: per
    row, the automatic operations' module-call cost in its segment (module_calls.planned; empty: none),
    or what spreads it over the rows (module_calls.spread's).
    ``keep_ratio``: keep each row's ratio of durations (``Correction.remap``: GPU launches to move)."""
    n = len(tl.ts)
    if n == 0:
        return Correction(tl, np.ones(0), {}, 0.0, 0.0)
    last = _LastRows(tl)  # read at the rows an excess moves from only; numpy's plan reads the column
    mem = _memory_planned(tl, memory, costs.memory_per_event)
    mods = None if isinstance(modules, np.ndarray) and len(modules) != n else modules  # empty: none
    # rlscope's periodic work on the job's threads (not the writer's own flush marks)
    on_writer = tl.on_threads(np.unique(tl.thread_of(_flush_marks(tl))))
    plan = _planned_native(tl, costs, last, on_writer, mem, mods)
    dur = mods_total = excl = prof_rows = None
    if plan is not None:
        planned_sum, removal, profiler, per_class = (
            plan.planned_sum,
            plan.removal,
            plan.profiler,
            plan.per_class,
        )
        left, mods_total = plan.left, plan.kept_sum  # mods[~profiler] summed, where worked out row by row
        removal_sum = removal.sum() if plan.removal_sum is None else plan.removal_sum
        # not needed after its sum, where a column (the pass kept the plans of a few rows only: none)
        scratch = removal if plan.removal_rows is None else None
        # a regular plan: the flushes' stall worked out at the rows that meet a flush (_stall_taken)
        excl = plan.excl if plan.regular else None
        prof_rows = plan.prof_rows
        del plan
    else:
        if isinstance(mods, module_calls.Spread):
            mods = mods.column(tl)
        last = thread_last(tl)
        dur, planned, removal, profiler, per_class = _planned(tl, costs, last, on_writer, mem, mods)
        planned_sum, removal_sum = planned.sum(), removal.sum()
        left = np.subtract(dur, removal, out=removal)  # ``removal`` is not needed after its sum
        scratch = planned  # not needed after its sum
        del planned
    del removal
    prof_rows = np.flatnonzero(profiler) if prof_rows is None else prof_rows
    prof_dur = tl.float_duration(prof_rows)
    mods_col = None if mods_total is not None else mods
    profiler_ns, mem_total, col_total = _sums_off(n, profiler, prof_rows, prof_dur, mem, mods_col, scratch)
    mods_total = col_total if mods_total is None else mods_total
    del mem, mods, mods_col, profiler, last
    placed = float(removal_sum - profiler_ns)

    # the writer's flushes stall every thread while they hold the GIL: removed where they happened,
    # the share of their CPU time that did stall measured on the job's own operations (flush_stall);
    # a column of every row takes it where it is worked out over every row, none at the flushed rows
    bound = None
    if excl is None:
        bound = np.zeros(n) if scratch is None else scratch
        bound.fill(0.0)
    del scratch
    stall_info, writer_s = _stall_taken(tl, left, bound, on_writer, costs.writer_per_event, excl)
    del on_writer
    # the NVML sampler's few samples per second: in proportion to time, against the main thread
    background_ns = costs.nvml_per_sample * nvml_samples
    share = 0.0
    if background_ns != 0 or math.copysign(1.0, background_ns) < 0:  # else 0 over any main thread's time
        main_left = float(left[tl.main_rows()].sum())
        share = min(background_ns / main_left, MAX_BACKGROUND_SHARE) if main_left > 0 else 0.0
    nvml_s = float((left * share).sum()) / 1e9 if share else 0.0
    new_dur = left
    if share:
        new_dur *= 1.0 - share
    periodic_s = float(prof_dur.sum()) / 1e9 if len(prof_rows) else None
    ratio = _ratio(tl, new_dur, dur) if keep_ratio else None
    # the new times' memory: the new durations' own where the C loops rebuild (each row's read before
    # its start is written over it), the lengths (numpy's) and the bound where made
    spare = tuple(c for c in (dur, bound) if c is not None)
    del dur, bound
    corrected = rebuild(tl, new_dur, spare=spare, in_place=True)
    del spare, new_dur, left

    removed: dict[str, float] = {}
    wanted = float(per_class[1:].sum()) + mem_total + mods_total
    if wanted > placed >= 0:  # report what was removed, never more than the segments held
        per_class = per_class * (placed / wanted)
        mem_total *= placed / wanted
        mods_total *= placed / wanted
    for c in range(1, len(CLASS_NAMES)):
        if per_class[c]:
            removed[CLASS_NAMES[c]] = float(per_class[c]) / 1e9
    if mem_total:
        removed["memory"] = mem_total / 1e9
    if mods_total:
        removed[module_calls.ENTRY] = mods_total / 1e9
    if periodic_s is not None:
        removed["rlscope_periodic"] = periodic_s
    if writer_s:
        removed["writer"] = writer_s
    if share:
        removed["nvml"] = nvml_s
    clamped = float(max(planned_sum - removal_sum, 0.0)) / 1e9
    return Correction(corrected, ratio, removed, share, clamped, stall_info)


def correct_windows(
    tl: Timeline,
    factor: np.ndarray | RowFactors,
    keep_ratio: bool = True,
    consume: bool = False,
    row_mode: np.ndarray | None = None,
) -> Correction:
    """Scale each segment by its window factor (overhead/correct/windows.py) and rebuild the timeline;
    ``keep_ratio``: as :func:`correct_timeline`'s. ``factor`` is overwritten (the estimate's column,
    used once: its memory takes the time gone per row, no other column of every row for it).
    ``consume``: ``tl`` is read no further (no launches to move over it): where the C loops run, its
    ``ts`` takes the new starts, each row's read before it is written. Why: this is the analysis's
    peak of memory, a column of every row fewer. ``row_mode``: each row's kind of window
    (WindowEstimate.row_mode), whose corrected main-thread time by kind the rebuild's pass sums where
    the C loops run (Correction.main_mode_ns: full_windows.full_share's figures). ``factor`` as
    :class:`RowFactors`: each row's factor worked out where the C passes read it, the time gone summed
    in the rebuild's pass as numpy sums its column (its tree's leaves, where sums.streams_agree), no
    column of either; else their column is made."""
    if len(tl.ts) == 0:
        return Correction(tl, np.ones(0), {}, 0.0, 0.0)
    n = len(tl.ts)
    main_mode_ns = None
    if isinstance(factor, RowFactors):
        f64 = np.zeros(0)
        leaves = _gone_leaves(n) if _rebuild_loops(tl, f64) is not None and streams_agree() else None
        tables = factor.tables(leaves) if leaves is not None else None
        join = changed_sum_loop()
        if tables is not None and join is not None:
            ratio = np.empty(n) if keep_ratio else None
            scaled = _Scaled(f64, ratio, row_mode, factors=tables)
            corrected = rebuild(tl, f64, spare=(tl.ts,) if consume else (), scaled=scaled)
            assert leaves is not None
            removed = float(join(n, f64, leaves[1], 0, np.zeros(0, np.int64))) / 1e9
            if scaled.mode_ns is not None:
                main_mode_ns = (int(scaled.mode_ns[0]), int(scaled.mode_ns[1]))
            removed_s = {"collectors (windows)": removed} if removed else {}
            return Correction(corrected, ratio, removed_s, 0.0, 0.0, main_mode_ns=main_mode_ns)
        factor = factor.column()
    if _rebuild_loops(tl, factor) is not None:
        # the new durations worked out in the rebuild's own pass, the time gone written over the factors
        gone, ratio = factor, np.empty(n) if keep_ratio else None
        spare = (tl.ts,) if consume else ()
        scaled = _Scaled(gone, ratio, row_mode)
        corrected = rebuild(tl, factor, spare=spare, scaled=scaled)
        removed = float(gone.sum()) / 1e9
        if scaled.mode_ns is not None:
            main_mode_ns = (int(scaled.mode_ns[0]), int(scaled.mode_ns[1]))
    else:
        dur = tl.float_duration()
        new_dur = np.multiply(dur, factor, out=factor)
        ratio = np.divide(new_dur, dur, out=np.ones(len(dur)), where=dur > 0) if keep_ratio else None
        gone = np.subtract(dur, new_dur, out=dur)  # ``dur`` is not needed after
        removed = float(gone.sum()) / 1e9
        corrected = rebuild(tl, new_dur, spare=(gone,))  # its memory holds new times
    del gone
    removed_s = {"collectors (windows)": removed} if removed else {}
    return Correction(corrected, ratio, removed_s, 0.0, 0.0, main_mode_ns=main_mode_ns)
