"""From one process's point events to elementary CPU segments.

Each event row says what the thread's state is *after* it: an operation begin makes that
instance the innermost one, its end makes the parent innermost again, and likewise for phases
and categories. Forward-filling those states along each thread (``np.maximum.accumulate`` over
row indices) gives, for every gap between consecutive events, the innermost operation, category
and phase. No Python loop over events, so millions of events take well under a second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis import native
from rlscope.blocks import blocks, search_sorted, take
from rlscope.keys import compute, set_lookup
from rlscope.trace import schema as S
from rlscope.trace.glue import Gaps
from rlscope.trace.header import main_thread, session_span
from rlscope.trace.states import state_after_rows


@dataclasses.dataclass
class Timeline:
    """Events of one process sorted by (thread, time), with the state after each row.

    Row ``i`` opens the segment ``[ts[i], seg_end[i])`` during which the thread was in
    ``op[i]`` (operation instance, -1: none), ``cat[i]`` (CPU category) and ``phase[i]``. ``op``,
    ``phase``, ``id`` and ``threads`` are int32 where their values fit (:func:`narrow_ids`); tables
    and exports built from them keep their own int64 types. A row's OS thread id is read from the
    per-thread table ``threads`` at its ``thread_idx`` (:meth:`thread_of`): no column of every row's.

    A segment ends where the next row on its thread starts, and a thread's last one where the thread
    ends (``thread_end``), so no column of the ends is kept: the C loops read them off ``ts``
    (:meth:`segments`), :meth:`seg_end_of` gives them at some rows, and ``seg_end`` makes the column
    for the numpy loops. Why: a column of the ends is 8 bytes a row on two timelines (raw and
    corrected) held through the whole correction, the analysis's peak of memory.
    A timeline made from a column of the ends (:meth:`with_seg_end`, :meth:`retimed`) keeps it as the
    numpy loops' one; its segments must end where the next row on their thread starts.
    """

    ts: np.ndarray
    threads: np.ndarray  # thread index -> OS thread id, one entry per thread (rows are grouped by thread)
    kind: np.ndarray
    id: np.ndarray
    name: np.ndarray
    flags: np.ndarray
    op: np.ndarray
    cat: np.ndarray
    phase: np.ndarray
    main_thread: int
    start_ns: int
    end_ns: int
    inst_name: np.ndarray  # instance id -> name id (-1 unknown)
    inst_end: np.ndarray  # instance id -> end time (end_ns when never closed)
    thread_idx: np.ndarray  # dense thread index of each row (rows are grouped by thread), int16 or int32
    # per row: what the boundary measured it cost (schema.EVENT_COST_COLUMN; 0: not measured), kept at
    # the events' rows; None for traces without the column
    cost: RowValues | None = None
    # instance index -> the trace's instance id, where the timeline renumbered them (_dense_instances);
    # None: ``id``, ``op`` and ``phase`` hold the trace's ids
    inst_ids: np.ndarray | None = None
    # per thread index: its last row's segment end (int64)
    thread_end: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    # lookups derived from the rows, made once by whoever needs them first (the window each row is in):
    # the arrays are never changed in place, and ``dataclasses.replace`` starts a new timeline's empty
    memo: dict[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def with_seg_end(cls, seg_end: np.ndarray, **fields: Any) -> Timeline:
        """A timeline of ``fields`` whose segments end at ``seg_end`` (a column, kept as the numpy
        loops' one)."""
        tl = cls(**fields)
        tl._take_seg_end(seg_end)
        return tl

    def retimed(self, ts: np.ndarray, seg_end: np.ndarray | None = None, **changes: Any) -> Timeline:
        """This timeline's rows on other times: ``ts``, and the segments' ends ``seg_end`` (a column,
        kept as the numpy loops' one) or ``thread_end`` among ``changes``."""
        tl = dataclasses.replace(self, ts=ts, **changes)
        if seg_end is not None:
            tl._take_seg_end(seg_end)
        return tl

    def _take_seg_end(self, seg_end: np.ndarray) -> None:
        """The threads' ends read off a column of every row's segment end, which is kept for the numpy
        loops; ValueError where a segment does not end where the next row on its thread starts."""
        if len(seg_end) != len(self.ts):
            raise ValueError(f"{len(seg_end)} segment ends for {len(self.ts)} rows")
        last = self.thread_last()
        for a, b in zip(self.thread_starts()[:-1].tolist(), last.tolist(), strict=True):  # a thread's rows
            if b >= a and not np.array_equal(seg_end[a:b], self.ts[a + 1 : b + 1]):
                raise ValueError("a segment must end where the next row on its thread starts")
        self.thread_end = seg_end[last].astype(np.int64)
        self.memo["seg_end"] = seg_end

    def thread_last(self) -> np.ndarray:
        """Each thread index's last row (int64, ascending; the last is the last row); a thread index
        without rows has the row before its next thread's first (-1 before the first)."""
        got = self.memo.get("thread_last")
        if got is None:
            starts = self.thread_starts()
            got = self.memo["thread_last"] = (starts[1:] - 1).astype(np.int64)
        return got

    def _row_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(the last row of each thread that has rows, ascending and distinct; its segment's end):
        where a segment does not end at the next row's start."""
        got = self.memo.get("row_ends")
        if got is None:
            starts = self.thread_starts()
            has = starts[1:] > starts[:-1]
            end = np.asarray(self.thread_end, np.int64)
            got = self.memo["row_ends"] = (self.thread_last()[has], np.ascontiguousarray(end[has]))
        return got

    def _seg_end_column(self) -> np.ndarray:
        """Every row's segment end, made once (for the numpy loops; the C loops read :meth:`segments`)."""
        got = self.memo.get("seg_end")
        if got is None:
            got = np.empty(len(self.ts), np.int64)
            got[:-1] = self.ts[1:]
            last, end = self._row_ends()
            got[last] = end
            self.memo["seg_end"] = got
        return got

    def seg_end_of(self, rows: np.ndarray | slice | int) -> np.ndarray:
        """The segment ends of ``rows`` (indices, a mask or a slice), without a column of every row's."""
        if "seg_end" in self.memo:
            return self.memo["seg_end"][rows]
        last, end = self._row_ends()
        n = len(self.ts)
        if isinstance(rows, slice):
            a, b, step = rows.indices(n)
            if step == 1:  # the next rows' starts, the threads' last rows among them set to their ends
                out = np.empty(max(b - a, 0), np.int64)
                if b > a:
                    out[: b - a - 1] = self.ts[a + 1 : b]
                    out[-1] = self.ts[b] if b < n else 0
                    inside = (last >= a) & (last < b)
                    out[last[inside] - a] = end[inside]
                return out
            rows = np.arange(a, b, step)
        idx = np.asarray(rows)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        out = self.ts[np.minimum(idx + 1, max(n - 1, 0))]
        for row, e in zip(last.tolist(), end.tolist(), strict=True):
            out[idx == row] = e
        return out

    def segments(self) -> native.Segments:
        """The segments as the C loops read them (native/segments.h), made once: ``ts`` must be a
        C-contiguous int64 column (the timeline's are)."""
        got = self.memo.get("segments")
        if got is None:
            last, end = self._row_ends()
            ts = self.ts
            got = native.Segments(
                ts.__array_interface__["data"][0], len(ts), len(last),
                last.__array_interface__["data"][0], end.__array_interface__["data"][0],
            )  # fmt: skip
            got.keep = (ts, last, end)  # the arrays it points at, alive as long as it is
            self.memo["segments"] = got
        return got

    def thread_of(self, rows: np.ndarray | slice | int) -> np.ndarray:
        """The OS thread ids of ``rows`` (indices, a mask or a slice): the per-thread table read at
        their thread indices, where a column of every row's ids would be held through the analysis."""
        return self.threads[self.thread_idx[rows]]

    @property
    def thread(self) -> np.ndarray:
        """Every row's OS thread id, made on each read (a column of the timeline's length): the
        analysis reads :meth:`thread_of` at the rows it needs."""
        return self.thread_of(slice(None))

    @property
    def seg_end(self) -> np.ndarray:
        """Every row's segment end: a column made once, for the numpy loops (the C loops read
        :meth:`segments`)."""
        return self._seg_end_column()

    @property
    def duration(self) -> np.ndarray:
        return self.seg_end - self.ts

    def float_duration(self, rows: slice = slice(None)) -> np.ndarray:
        """The segments' lengths (ns) of ``rows`` as a new float64 array, made in one pass (no integer
        array first); exact: ns counts are far below 2**53."""
        ts, end = self.ts[rows], self.seg_end_of(rows)
        return np.subtract(end, ts, out=np.empty(len(ts)), casting="unsafe")

    def instance_time(self, rows: slice, n_inst: int) -> np.ndarray:
        """Per instance (``n_inst`` of them): its time in ``rows`` (consecutive rows of one thread),
        the rows outside every instance left out; doubles, each a sum of whole ns (exact).

        Summed per run of rows of one instance whose segments each end where the next begins: a
        run's time is its last end less its first start, the same integer as its segments' sum, and
        the runs are a few of the torch ops' millions of rows.
        """
        if rows.stop <= rows.start:
            return np.zeros(n_inst)
        fn = native.function(
            "timeline_instance_time",
            *(native.N, native.N, native.SEGMENTS, native.I32, native.N, native.F64),
            restype=native.N,
        )
        columns = (self.ts, self.op)
        if fn is not None and [c.dtype for c in columns] == [np.int64, np.int32] and contiguous(*columns):
            out = np.zeros(n_inst + 1)
            if fn(rows.start, rows.stop, self.segments(), self.op, len(out), out) == 0:
                return out[1:]  # else an instance beyond n_inst: numpy's table grows to hold it
        first = [np.array([rows.start], np.int64)]
        for block in blocks(rows.stop - rows.start - 1):
            a, b = rows.start + block.start, rows.start + block.stop
            new = self.op[a + 1 : b + 1] != self.op[a:b]
            new |= self.seg_end[a:b] != self.ts[a + 1 : b + 1]
            first.append(np.flatnonzero(new) + (a + 1))
        starts = np.concatenate(first)
        last = np.append(starts[1:], rows.stop) - 1
        ns = self.seg_end[last] - self.ts[starts]
        return np.bincount(self.op[starts] + 1, weights=ns, minlength=n_inst + 1)[1:]

    def scope_ends(self) -> np.ndarray:
        """The rows (sorted) that end an operation or a phase: a few in the torch ops' millions, found
        once for a set of rows (a timeline rebuilt on other times keeps them)."""
        got = self.memo.get("scope_ends")
        if got is None:
            got = self.memo["scope_ends"] = np.flatnonzero(kinds_among(self.kind, (S.OP_END, S.PHASE_END)))
        return got

    def scope_begins(self) -> np.ndarray:
        """The rows (sorted) that begin an operation or a phase, found once like :meth:`scope_ends`."""
        got = self.memo.get("scope_begins")
        if got is None:
            got = self.memo["scope_begins"] = np.flatnonzero(
                kinds_among(self.kind, (S.OP_BEGIN, S.PHASE_BEGIN))
            )
        return got

    def thread_starts(self) -> np.ndarray:
        """Each thread's first row, then the row count: thread k's rows are ``[s[k], s[k + 1])``.
        A search of the sorted ``thread_idx``, not a pass over the rows."""
        if len(self.thread_idx) == 0:
            return np.zeros(1, np.int64)
        # the queries in the column's own type: another would convert the whole column to search it
        return np.searchsorted(
            self.thread_idx, np.arange(int(self.thread_idx[-1]) + 2, dtype=self.thread_idx.dtype)
        )

    def on_threads(self, threads: np.ndarray) -> np.ndarray:
        """Per row: whether it is on one of ``threads`` (``np.isin(self.thread, threads)``), read at
        each thread's first row and filled a thread's block at a time."""
        out = np.zeros(len(self.ts), bool)
        starts = self.thread_starts()
        for k in np.flatnonzero(np.isin(self.thread_of(starts[:-1]), threads)).tolist():
            out[starts[k] : starts[k + 1]] = True
        return out

    def main_rows(self) -> slice:
        """The main thread's rows, one block (rows are grouped by thread); empty without them. Read
        at each thread's first row, not by a comparison over every row."""
        starts = self.thread_starts()
        on_main = np.flatnonzero(self.thread_of(starts[:-1]) == self.main_thread)
        return slice(int(starts[on_main[0]]), int(starts[on_main[0] + 1])) if len(on_main) else slice(0, 0)

    def trace_ids(self, inst: np.ndarray) -> np.ndarray:
        """The trace's instance ids of instance indices (-1, none, stays -1): what exports show."""
        if self.inst_ids is None:
            return inst
        return np.where(inst >= 0, self.inst_ids[np.maximum(inst, 0)], -1)


def contiguous(*arrays: np.ndarray) -> bool:
    """Whether each array is one block of memory in order: what a C loop over a timeline's columns
    reads (a column of a timeline made otherwise runs numpy's loops, not a copy of it)."""
    return all(a.flags.c_contiguous for a in arrays)


# per event kind: which stack it changes (0 op, 1 category, 2 phase, 3 none, 4 CUDA API,
# 5 native backend op, 6 compilation) and whether it opens
_STACK = np.full(S.COMPILE_END + 1, 3, np.int8)
_OPENS = np.zeros(S.COMPILE_END + 1, bool)
_STACK[[S.OP_BEGIN, S.OP_END]] = 0
_STACK[[S.CAT_BEGIN, S.CAT_END]] = 1
_STACK[[S.PHASE_BEGIN, S.PHASE_END]] = 2
_STACK[[S.API_BEGIN, S.API_END]] = 4
_STACK[[S.BACKEND_BEGIN, S.BACKEND_END]] = 5
_STACK[[S.COMPILE_BEGIN, S.COMPILE_END]] = 6
_OPENS[[S.OP_BEGIN, S.CAT_BEGIN, S.PHASE_BEGIN, S.API_BEGIN, S.BACKEND_BEGIN, S.COMPILE_BEGIN]] = True


def _state_of_kind() -> np.ndarray:
    """Per kind byte (a negative kind from the end, as numpy reads it), what timeline_merge's states
    read: the stack it changes (``_STACK``'s 0, 1 or 2; 3 none), plus 4 where it opens."""
    table = np.full(256, 3, np.uint8)
    for b in range(256):
        k = b if b < 128 else b - 256
        if -len(_STACK) <= k < len(_STACK) and _STACK[k] < 3:
            table[b] = _STACK[k] + 4 * _OPENS[k]
    return table


_STATE_OF_KIND = _state_of_kind()
_OPENS_BYTE = (_STATE_OF_KIND >> 2).astype(np.uint8)  # per kind byte: 1 where it opens a stack of 0-2
_STATE_DEFAULTS = np.array([-1, categories.PYTHON, -1], np.int64)  # operation, category, phase


def kinds_among(kind: np.ndarray, kinds: tuple[int, ...]) -> np.ndarray:
    """Whether each timeline row's kind is one of ``kinds``: a comparison per kind on the one-byte
    column (``np.isin`` over millions of rows took tens of ms a call, a few times these), or for
    more kinds than ``_FEW_KINDS`` one lookup per row in a table of every byte (a pass per kind was
    most of the time)."""
    if len(kinds) > _FEW_KINDS and kind.dtype.itemsize == 1:
        table = np.zeros(256, bool)  # a byte reads its entry, a negative one from the end
        table[np.asarray(kinds)] = True
        return take(table, kind)
    out = kind == kinds[0]
    for k in kinds[1:]:
        out |= kind == k
    return out


_FEW_KINDS = 3


def _dense_instances(
    ident: np.ndarray, scoped: np.ndarray, parents: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Operation and phase rows' ``id`` (``scoped``: those rows) as indices 0..k-1 where the trace's
    ids are spread; (id, the trace's id of each index), or the column as it is and None. ``parents``:
    the ``parent`` of each ``scoped`` row (their ids are among the instances too; :func:`_dense_parents`
    renumbers them).

    Why: the timeline's per-instance tables (``inst_name``, ``inst_end``, and the analyses' own)
    are indexed by instance id. A session numbers its instances for the whole run, so a trace kept
    in detail stretches (rlscope/trace/detail.py) holds ids up to the run's count of instances but
    the instances of its stretches only: tables sized by its largest id would grow with the run's
    length (hours in, tens of millions of entries each), not with the trace.
    """
    ids = ident[scoped]  # a few rows in millions of torch ops' rows
    top = max(int(ids.max(initial=-1)), int(parents.max(initial=-1)))
    if top < 2 * len(ids) + 1024:  # compact enough: ids index the tables directly
        return ident, None
    both = np.concatenate([ids, parents])
    inst_ids = np.unique(both[both >= 0])
    ident = ident.astype(np.int64)  # a copy: the renumbered rows set in it
    ident[scoped] = np.searchsorted(inst_ids, ids)
    return ident, inst_ids


def _dense_parents(parent: np.ndarray, scoped: np.ndarray, inst_ids: np.ndarray | None) -> np.ndarray:
    """``parent`` values of some rows (``scoped``: theirs are instance ids) as :func:`_dense_instances`
    numbered the instances."""
    if inst_ids is None:
        return parent
    renumber = scoped & (parent >= 0)
    return np.where(renumber, np.searchsorted(inst_ids, parent), parent)


@dataclasses.dataclass(frozen=True)
class RowValues:
    """A column of the events on the timeline's rows, kept at the events' rows only: ``values`` of the
    rows ``at_rows`` (sorted; None: every row, in order), 0 at the rows an added interval made.

    Why: the events' ``parent`` and ``cost`` are read at a few rows, and a column of every row would
    be tens of MB of zeros on the torch ops' millions of rows.
    """

    values: np.ndarray
    at_rows: np.ndarray | None = None

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The column at ``rows``."""
        if self.at_rows is None:
            return self.values[rows]
        if len(self.at_rows) == 0:
            return np.zeros(len(rows), self.values.dtype)
        fn = native.function("timeline_values_at", *(native.N, native.I64, native.I64) * 2, restype=native.N)
        if fn is not None and self.values.dtype == self.at_rows.dtype == rows.dtype == np.int64:
            out = np.empty(len(rows), np.int64)
            at_rows, values = np.ascontiguousarray(self.at_rows), np.ascontiguousarray(self.values)
            if fn(len(at_rows), at_rows, values, len(rows), np.ascontiguousarray(rows), out) == 0:
                return out  # else rows out of order: searched below
        ordered = len(rows) < 2 or bool((rows[1:] >= rows[:-1]).all())  # as callers pass them, mostly
        j = search_sorted(self.at_rows, rows) if ordered else np.searchsorted(self.at_rows, rows)
        np.minimum(j, len(self.at_rows) - 1, out=j)
        return np.where(self.at_rows[j] == rows, self.values[j], 0).astype(self.values.dtype, copy=False)

    def positive(self) -> np.ndarray:
        """The rows (sorted) whose value is above 0."""
        above = np.flatnonzero(self.values > 0)
        return above if self.at_rows is None else self.at_rows[above]


def _with_interval_rows(
    col: dict[str, np.ndarray],
    added: list[tuple],
    ts_min: int | None = None,
    end_ns: int | None = None,
    kinds: np.ndarray | None = None,
    states: MergedStates | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, RowValues]]:
    """The events' columns with begin/end rows added for intervals recorded outside the events stream
    (disjoint per thread), every row sorted by (thread, time); and their ``parent`` and ``cost``
    columns, read at a few rows, at the events' rows only (:class:`RowValues`), not made for all.

    ``added``: (begin kind, end kind, thread, start, end, name or None[, clip]) per source, ``clip``
    None or the (start, end) of a session its intervals are clipped to and cut in
    (:meth:`BackendOps.intervals`). The state after
    a begin row is its ``id`` (1: inside), after an end row its ``parent`` (0: outside). The order is
    a stable sort of the events then each source's rows laid out begin, end, begin, end... in time
    order per thread: at equal times an event comes before an added row, an end before the next
    interval's begin and an empty interval's begin before its end.

    Each part (the events, each source) is put in (thread, time) order on its own, and the parts
    are merged (:func:`_merged_native`, else :func:`_merged`). The columns an added row holds one
    value in (id, flags, cost) hold it there and the events' values where the events' rows land.
    ``ts_min``: the merged times are no earlier (np.maximum; None: as they are), written so by the C
    merge, whose order is that of the times as given.

    What the timeline reads off the merged rows next, made in the C merge's pass where asked: with
    ``end_ns``, the column ``thread_idx`` (:func:`_thread_index`) and each thread index's thread
    (``threads``) in place of the column ``thread`` (no segment ends: a segment ends where the next
    row on its thread starts, :func:`_thread_end` gives the threads' last ones);
    with ``kinds`` (:func:`_table_of_kinds`), ``kind_rows``: the rows whose kind it marks, and
    ``kind_rows_ev``: the event's row each of them is (of ``col``; -1: an added row). With
    ``states`` (and ``end_ns``), the states after each row where the C merge writes them
    (:class:`MergedStates`); the events' ``parent`` then is read there, not kept (RowValues).
    """
    ev, as_is = _events_order(col)
    sources = [_source(source) for source in added]  # taken as given by the C merge, which checks the order
    ts_min = _I64.min if ts_min is None else ts_min
    merged = _merged_native(col, ev, sources, ts_min, end_ns, kinds, states, not as_is)
    if merged is None:  # each source's intervals clipped, in (thread, start) order, then merged again
        given = sources
        sources = [_in_thread_order(_clipped(source)) for source in given]
        if any(s is not g for s, g in zip(sources, given, strict=True)):
            merged = _merged_native(col, ev, sources, ts_min, end_ns, kinds, states, not as_is)
    kept = _SPARSE if states is None or states.op is None else ("cost",)
    if merged is not None:
        out, events_at = merged
    else:
        out, events_at = _merged(col, ev, sources)
        if ts_min != _I64.min:
            np.maximum(out["ts_ns"], ts_min, out=out["ts_ns"])
        if end_ns is not None:
            starts = _thread_starts(out["thread"])
            out["thread_idx"] = _thread_index(len(out["ts_ns"]), starts)
            out["threads"] = out.pop("thread")[starts]  # as the C merge writes them: no column
        if kinds is not None:
            marked = out["kind_rows"] = _rows_of_kinds(out["kind"], kinds)
            # the event's row of each: searched among the rows the events landed on (sorted)
            j = np.minimum(np.searchsorted(events_at, marked), max(len(events_at) - 1, 0))
            landed = events_at[j] == marked if len(events_at) else np.zeros(len(marked), bool)
            out["kind_rows_ev"] = np.where(landed, ev[j] if len(ev) else -1, -1).astype(np.int64)
    sparse = {}
    for k in kept:
        if k in col:  # in the events' (thread, time) order, as the C merge read the costs
            values = out.pop(f"{k}_ev", None)
            sparse[k] = RowValues(col[k] if as_is else (col[k][ev] if values is None else values), events_at)
    return out, sparse


def _events_order(col: dict[str, np.ndarray]) -> tuple[np.ndarray, bool]:
    """(the events' rows in (thread, time) order, whether that is the rows as they are): np.lexsort's
    stable order, which needs no sort where the events are in that order already (one thread's rows,
    as the reader writes them), and where each thread's times never fall a counting sort by thread in
    two C passes (timeline_events_order) where lexsort sorts two keys."""
    thread, ts = col["thread"], col["ts_ns"]
    if _sorted_by_thread(thread, ts):
        return np.arange(len(ts)), True
    fn = native.function(
        "timeline_events_order", native.N, native.I64, native.I64, native.I64, restype=native.N
    )
    if fn is not None and thread.dtype == ts.dtype == np.int64:
        order = np.empty(len(ts), np.int64)
        if fn(len(ts), np.ascontiguousarray(thread), np.ascontiguousarray(ts), order) == 0:
            return order, False  # else a thread's times fall, or many threads: sorted
    return np.lexsort((ts, thread)), False


def _source(source: tuple) -> tuple:
    """A source of :func:`_with_interval_rows` as (begin kind, end kind, thread, start, end, name, clip)."""
    return tuple(source) if len(source) == 7 else (*source, None)


def _clipped(source: tuple) -> tuple:
    """A source (:func:`_source`'s) with its intervals clipped and cut as its ``clip`` says
    (:meth:`BackendOps.intervals`): itself where it says none."""
    begin_kind, end_kind, thread, start, end, name, clip = source
    if clip is None:
        return source
    return begin_kind, end_kind, *BackendOps(thread, start, end, name, *clip).intervals(), None


def _in_thread_order(source: tuple) -> tuple:
    """A source (:func:`_source`'s, clipped) with its intervals in (thread, start) order: itself where
    they are."""
    begin_kind, end_kind, thread, start, end, name, clip = source
    if _sorted_by_thread(thread, start):
        return source
    order = np.lexsort((start, thread))
    name = None if name is None else name[order]
    return begin_kind, end_kind, thread[order], start[order], end[order], name, clip


def _merged(col: dict[str, np.ndarray], ev: np.ndarray, sources: list[tuple]) -> tuple[dict, np.ndarray]:
    """:func:`_with_interval_rows`'s rows in numpy: (the merged columns, where the events' rows land).

    Per thread, a row's place is its rank in its part plus the rows of the other parts before it
    (searched), but for the largest part's rows, which fill the places left in their order (a sort
    and a gather of every column over millions of torch-op rows were most of the timeline's time).
    """
    # per part: its rows' times, kinds and names in order, and its threads' bounds as (values, starts)
    parts = [(col["ts_ns"][ev], col["kind"][ev], col["name"][ev], *_runs(col["thread"][ev], 1))]
    for begin_kind, end_kind, thread, start, end, name, _ in sources:  # none clipped (_clipped)
        n = len(thread)
        ts = np.empty(2 * n, col["ts_ns"].dtype)
        ts[0::2], ts[1::2] = start, end
        kind = np.empty(2 * n, col["kind"].dtype)
        kind[0::2], kind[1::2] = begin_kind, end_kind
        names = np.full(2 * n, -1, col["name"].dtype)
        if name is not None:
            names[0::2], names[1::2] = name, name
        values, at = _runs(thread, 2)
        for a, b in zip(at[:-1].tolist(), at[1:].tolist(), strict=True):
            if not (ts[a + 1 : b] >= ts[a : b - 1]).all():  # overlapping intervals: their rows sorted
                order = np.argsort(ts[a:b], kind="stable") + a
                ts[a:b], kind[a:b], names[a:b] = ts[order], kind[order], names[order]
        parts.append((ts, kind, names, values, at))
    threads = np.unique(np.concatenate([p[3] for p in parts])).astype(col["thread"].dtype)
    # each part's rows of each thread: [lo, hi)
    spans = []
    for _, _, _, values, at in parts:
        if len(values) == 0:  # a part without rows (a source of no intervals): none on any thread
            spans.append((np.zeros(len(threads), np.int64), np.zeros(len(threads), np.int64)))
            continue
        i = np.minimum(np.searchsorted(values, threads), len(values) - 1)
        present = values[i] == threads
        spans.append((np.where(present, at[i], 0), np.where(present, at[i + 1], 0)))
    # the largest part (the torch ops) is placed last, into the rows the others leave, in its order
    fill = max(range(len(parts)), key=lambda p: len(parts[p][0]))
    placed = [p for p in range(len(parts)) if p != fill]
    pos = {p: np.zeros(len(parts[p][0]), np.int64) for p in placed}
    per_thread = np.zeros(len(threads), np.int64)
    offset = 0
    for t in range(len(threads)):
        rows = [slice(int(lo[t]), int(hi[t])) for lo, hi in spans]
        for i in placed:
            if rows[i].stop == rows[i].start:
                continue
            mine = parts[i][0][rows[i]]  # in time order, as every part's rows of a thread
            # the rows of every other part before each of these: at equal times the earlier part's
            # row goes first (a row counts the later parts' rows strictly before it, the earlier's at
            # or before it)
            for j in range(len(parts)):
                if j != i and rows[j].stop > rows[j].start:
                    side = "left" if i < j else "right"
                    pos[i][rows[i]] += search_sorted(parts[j][0][rows[j]], mine, side=side)
            pos[i][rows[i]] += np.arange(offset, offset + (rows[i].stop - rows[i].start))
        per_thread[t] = sum(r.stop - r.start for r in rows)
        offset += int(per_thread[t])
    n_rows = offset
    free = np.ones(n_rows, bool)  # the rows left to the largest part
    for p in placed:
        free[pos[p]] = False
    out = {}
    for c, k in enumerate(("ts_ns", "kind", "name")):
        out[k] = np.empty(n_rows, col[k].dtype)
        for p in placed:
            out[k][pos[p]] = parts[p][c]
        out[k][free] = parts[fill][c]
    out["thread"] = np.repeat(narrow_ids(threads), per_thread)
    events_at = pos[0] if fill else np.flatnonzero(free)  # where the events' rows land
    for k, on_added in (("id", 1), ("flags", 0)):
        values = col[k][ev]
        if k == "id":
            values = narrow_ids(values)
        out[k] = np.full(n_rows, on_added, values.dtype)
        out[k][events_at] = values
    return out, events_at


def _merged_native(
    col: dict[str, np.ndarray],
    ev: np.ndarray,
    sources: list[tuple],
    ts_min: int,
    end_ns: int | None = None,
    kinds: np.ndarray | None = None,
    states: MergedStates | None = None,
    read_cost: bool = False,
    thread_column: bool = False,
) -> tuple[dict, np.ndarray] | None:
    """:func:`_merged` in one C pass writing each row once (timeline_merge), each time no earlier than
    ``ts_min`` (np.iinfo(np.int64).min: as they are), and where asked what :func:`_with_interval_rows`
    reads off the rows (``end_ns``, ``kinds``) in the same pass, and each source's intervals clipped
    and cut as its ``clip`` says (:func:`_source`); None where the numpy merge runs: no C loops,
    columns of other types, more than three sources, a source's intervals out of (thread, start) order
    or overlapping on a thread (numpy sorts their rows) or ids or threads beyond int32.

    ``states`` (with ``end_ns``): the states after each row written in the same pass, set in it
    (:class:`MergedStates`); left unset where a state does not fit its column (the merge then made
    again without them), or where the numpy merge runs. ``read_cost``: the events' ``cost`` read in
    their order ``ev`` as they are laid out (``cost_ev``), where it is not their own.

    With ``end_ns``, each thread index's thread (``threads``) where no column of every row's is
    written, unless ``thread_column`` (made so again where the threads are too many for the int16
    thread index)."""
    fn = _merge_function()
    events = [col[k] for k in ("ts_ns", "thread", "kind", "name", "id", "flags")]
    if states is not None and end_ns is not None and states.parent.dtype == np.int64:
        events[4] = states.ident  # the instances renumbered (_dense_instances)
    if fn is None or len(sources) > _MAX_SOURCES or [c.dtype for c in events] != _EVENT_TYPES:
        return None
    none32 = np.zeros(0, np.int32)
    args: list[Any] = []
    sources = [_source(source) for source in sources]
    for begin_kind, end_kind, thread, start, end, name, clip in sources:
        if any(c.dtype != np.int64 for c in (thread, start, end)) or (
            name is not None and name.dtype != np.int32
        ):
            return None
        named = name is not None
        args += [len(thread), thread, start, end, name if named else none32, int(named), begin_kind, end_kind]
        args += [int(clip is not None), *(clip or (0, 0))]
    none64 = np.zeros(0, np.int64)
    args += [0, none64, none64, none64, none32, 0, 0, 0, 0, 0, 0] * (_MAX_SOURCES - len(sources))
    n = len(ev) + 2 * sum(len(src[2]) for src in sources)
    # with ``end_ns``: the k-th thread's id at k, for as many threads as the int16 thread index counts
    # (past them, the merge made again with the column); else each row's
    table_of_threads = end_ns is not None and not thread_column
    out = {
        "ts_ns": np.empty(n, np.int64),
        "kind": np.empty(n, np.int8),
        "name": np.empty(n, np.int32),
        "thread": np.empty(min(n, int(_I16.max)) if table_of_threads else n, np.int32),
        "id": np.empty(n, np.int32),
        "flags": np.empty(n, np.int8),
    }
    events_at = np.empty(len(ev), np.int64)
    # the events' costs in their (thread, time) order, read as the rows are laid out (RowValues' values)
    with_cost = read_cost and "cost" in col and col["cost"].dtype == np.int64
    ev_cost = np.ascontiguousarray(col["cost"]) if with_cost else np.zeros(0, np.int64)
    cost = np.empty(len(ev) if with_cost else 0, np.int64)
    extras = end_ns is not None or kinds is not None
    thread_idx = np.empty(n if extras else 0, np.int16)
    table = kinds if kinds is not None else np.zeros(256, np.uint8)
    # the rows marked: events' rows, and an added row where its source's kinds are marked
    cap = len(ev) + sum(2 * len(s[2]) for s in sources if table[s[0] & 255] or table[s[1] & 255])
    rows, rows_ev = np.empty(cap if extras else 0, np.int64), np.empty(cap if extras else 0, np.int64)
    cols = [np.ascontiguousarray(c) for c in events]
    extra_args = (int(extras), thread_idx, table.view(np.uint8))
    info = np.zeros(3, np.int64)
    with_states = states is not None and end_ns is not None and states.parent.dtype == np.int64
    m = n if with_states else 0
    op, cat, phase = np.empty(m, np.int32), np.empty(m, np.int8), np.empty(m, np.int32)
    state_args = (
        (1, _STATE_OF_KIND, np.ascontiguousarray(states.parent), states.marks(sources))
        if with_states
        else (0, _STATE_OF_KIND, none64, np.full(_MAX_SOURCES, -1, np.int64))
    )
    state_args += (_STATE_DEFAULTS, categories.PROFILER, op, cat, phase)
    merged_columns = (*list(out.values())[:4], len(out["thread"]) if table_of_threads else 0)
    merged_columns += tuple(out.values())[4:]
    got = fn(
        len(ev), ev.astype(np.int64, copy=False), *cols, *args, *merged_columns, events_at, ts_min,
        int(with_cost), ev_cost, cost, *extra_args, rows, rows_ev, cap, info, *state_args,
    )  # fmt: skip
    if got == -5:  # a state beyond its column's type: the merge without them, the states filled after
        return _merged_native(col, ev, sources, ts_min, end_ns, kinds, None, read_cost, thread_column)
    if got < 0:
        return None
    if got < n:  # clipped intervals left out: the rows written
        n = got
        out = {k: v if k == "thread" and table_of_threads else v[:n] for k, v in out.items()}
        thread_idx = thread_idx[: n if extras else 0]
        op, cat, phase = op[: min(m, n)], cat[: min(m, n)], phase[: min(m, n)]
    if with_states:
        states.op, states.cat, states.phase, states.top = op, cat, phase, int(info[2])
    if end_ns is not None:
        threads = int(info[1])
        if threads >= _I16.max and table_of_threads:  # the index not written past int16: the column
            return _merged_native(col, ev, sources, ts_min, end_ns, kinds, states, read_cost, True)
        if table_of_threads:
            out["thread_idx"], out["threads"] = thread_idx, out.pop("thread")[:threads].copy()
        else:  # int16 where the threads are that few (the merge counts on past them), else _thread_index's
            starts = _thread_starts(out["thread"])
            out["thread_idx"] = thread_idx if threads < _I16.max else _thread_index(n, starts)
            out["threads"] = out.pop("thread")[starts]
    if kinds is not None:
        out["kind_rows"], out["kind_rows_ev"] = rows[: info[0]], rows_ev[: info[0]]
    if with_cost:
        out["cost_ev"] = cost
    return out, events_at


def _merge_function() -> Callable[..., Any] | None:
    """timeline_merge (:func:`_merged_native`); None: no C loops."""
    i64 = native.I64
    return native.function(
        "timeline_merge",
        *(native.N, i64, i64, i64, native.I8, native.I32, i64, native.I8),
        *(native.N, i64, i64, i64, native.I32, native.N, native.N, native.N, native.N, native.N, native.N)
        * _MAX_SOURCES,
        *(i64, native.I8, native.I32, native.I32, native.N, native.I32, native.I8, i64, native.N, native.N),
        *(i64, i64),
        *(native.N, native.I16, native.U8, i64, i64, native.N, i64),
        *(native.N, native.U8, i64, i64, i64, native.N, native.I32, native.I8, native.I32),
        restype=native.N,
    )


@dataclasses.dataclass
class MergedStates:
    """What the C merge (timeline_merge) reads to write the states after each row in its pass, and
    what it writes: the forward fills of :func:`_state_after` and the marks of :func:`_mark_inside`
    made as the rows are laid out, not in passes over the merged rows after.

    The events' columns here are in their own row order: ``ident`` and ``parent`` as
    :func:`_dense_instances` and :func:`_dense_parents` number them (a row changes its stack's state
    to its ``ident`` where its kind opens, else to its ``parent``). ``mark``: per kind of source
    begin, the category code its intervals mark (rlscope's own work keeps its own); the events hold
    no rows of those kinds. Set by the merge: ``op`` and ``phase`` (int32), ``cat`` (int8), and
    ``top``, the largest instance an operation's or phase's state takes (-1: none).
    """

    ident: np.ndarray
    parent: np.ndarray
    mark: dict[int, int]
    inst_ids: np.ndarray | None  # the trace's id of each instance where ``ident`` renumbers them
    op: np.ndarray | None = None
    cat: np.ndarray | None = None
    phase: np.ndarray | None = None
    top: int = -1

    def marks(self, sources: list[tuple]) -> np.ndarray:
        """Per source of the merge (and -1 past them): the code its intervals mark, -1 none."""
        out = np.full(_MAX_SOURCES, -1, np.int64)
        for k, source in enumerate(sources):
            out[k] = self.mark.get(int(source[0]), -1)
        return out


_MAX_SOURCES = 3  # timeline_merge's
_EVENT_TYPES = [np.dtype(t) for t in (np.int64, np.int64, np.int8, np.int32, np.int64, np.int8)]

_SPARSE = ("parent", "cost")  # the events' columns a timeline keeps at their rows only (RowValues)


def narrow_ids(values: np.ndarray) -> np.ndarray:
    """``values`` (ids, instance indices) as int32 where they fit, else as they are: half the bytes
    of an int64 column over the torch ops' millions of rows, for every pass that reads it."""
    if values.dtype.itemsize <= 4 or (len(values) and (values.min() < _I32.min or values.max() > _I32.max)):
        return values
    return values.astype(np.int32)


_I32 = np.iinfo(np.int32)
_I64 = np.iinfo(np.int64)
_I16 = np.iinfo(np.int16)


def _runs(thread: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(each thread, where its rows begin, then the row count) of entries sorted by thread, each
    ``width`` rows."""
    new = np.ones(len(thread), bool)
    np.not_equal(thread[1:], thread[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return thread[first], np.append(first, len(thread)) * width


def _fill_function(dtype: np.dtype) -> Callable[..., Any] | None:
    """The C forward fill of states of ``dtype`` (timeline_fill_*); None: no C loops, or none for
    that type."""
    return native.typed(
        "timeline_fill", [dtype], native.N, native.N, native.I64, native.N, native.I64, None, native.N, None
    )


def _state_after(
    rows: np.ndarray, values: np.ndarray, n: int, starts: np.ndarray, default: int
) -> np.ndarray:
    """:func:`~rlscope.trace.states.state_after_rows` over ``n`` rows (``starts``: each thread's first
    row) in one C pass writing each row once, where numpy marks, searches and repeats."""
    fn = _fill_function(values.dtype)
    if fn is None or rows.dtype != np.int64:
        return state_after_rows(rows, values, _first_rows(n, starts), default)
    out = np.empty(n, values.dtype)
    fn(n, len(starts), starts, len(rows), rows, np.ascontiguousarray(values), default, out)
    return out


def _thread_index(n: int, starts: np.ndarray) -> np.ndarray:
    """Each of the ``n`` rows' thread index (``starts``: each thread's first row), int16 where the
    threads are that few (a process's are): two bytes a row. The C fill holds index k from the k-th
    thread's first row on."""
    dtype = np.dtype(np.int16 if len(starts) < _I16.max else np.int32)
    fn = _fill_function(dtype)
    if fn is None:
        out = np.cumsum(_first_rows(n, starts), dtype=dtype)
        out -= 1
        return out
    out = np.empty(n, dtype)
    none = np.zeros(0, np.int64)
    fn(n, 0, none, len(starts), starts, np.arange(len(starts), dtype=dtype), -1, out)
    return out


def _first_rows(n: int, starts: np.ndarray) -> np.ndarray:
    """Per row of ``n``: whether it is its thread's first (one of ``starts``), as the numpy loops read it."""
    first = np.zeros(n, bool)
    first[starts] = True
    return first


_MAX_SEARCHED_THREADS = 1024  # past this many threads, every row is compared with the next


def _thread_starts(thread: np.ndarray) -> np.ndarray:
    """Each thread's first row (int64, in order), where each thread's rows are one block (the
    timeline's layout). Each block's end is searched, its length doubled then halved: some fifty reads
    of the column per thread where a comparison of every row with the next reads and writes millions
    of rows. Past ``_MAX_SEARCHED_THREADS`` blocks, that comparison (np.flatnonzero) does the rest."""
    n, a = len(thread), 0
    starts: list[int] = []
    while a < n:
        if len(starts) == _MAX_SEARCHED_THREADS:
            rest = np.flatnonzero(thread[a + 1 :] != thread[a:-1]) + (a + 1)
            return np.concatenate([np.array([*starts, a], np.int64), rest.astype(np.int64)])
        starts.append(a)
        current = thread[a]
        inside, step = a, 1  # ``inside``: a row of the block; the block ends after it
        while a + step < n and thread[a + step] == current:
            inside, step = a + step, step * 2
        outside = min(a + step, n)  # the block's end, or a row past it
        while outside - inside > 1:
            mid = (inside + outside) // 2
            if thread[mid] == current:
                inside = mid
            else:
                outside = mid
        a = outside
    return np.array(starts, np.int64)


def _table_of_kinds(stacks: tuple[int, ...]) -> np.ndarray:
    """Per kind byte (a negative kind from the end, as numpy reads it): whether the kind changes one
    of ``stacks`` (``_STACK``'s)."""
    table = np.zeros(256, bool)
    for b in range(256):
        k = b if b < 128 else b - 256
        table[b] = -len(_STACK) <= k < len(_STACK) and int(_STACK[k]) in stacks
    return table


_CHANGES = _table_of_kinds((0, 1, 2))  # the kinds that change an operation, a category or a phase
_CHANGES_ANY = _table_of_kinds((0, 1, 2, 4, 5, 6))  # and the recorded intervals' (read as rows)
_SCOPES = _table_of_kinds((0, 2))  # the operations' and phases' begins and ends


def _rows_of_kinds(kind: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The rows (in order) whose kind is marked in ``table`` (:func:`_table_of_kinds`), in a C pass
    that counts them and one that writes them, where numpy looks each row up, then searches the marks."""
    count = native.function("timeline_count_kinds", native.N, native.I8, native.BOOL, restype=native.N)
    write = native.function("timeline_kind_rows", native.N, native.I8, native.BOOL, native.I64)
    if count is None or write is None or kind.dtype != np.int8:
        return np.flatnonzero(take(table, kind))
    kind = np.ascontiguousarray(kind)
    out = np.empty(count(len(kind), kind, table), np.int64)
    write(len(kind), kind, table, out)
    return out


def _thread_end(ts: np.ndarray, starts: np.ndarray, end_ns: int) -> np.ndarray:
    """Each thread's end (``Timeline.thread_end``): the end of the data, or its last row's time if
    later. ``starts``: each thread's first row. A segment ends where the next row on its thread starts,
    so these few values stand for a column of every row's end."""
    last = np.append(starts[1:], len(ts)).astype(np.int64) - 1
    return np.maximum(ts[last], end_ns).astype(np.int64)


def _inside(kind: np.ndarray, begin_kind: int, end_kind: int) -> np.ndarray:
    """Per row: 1 inside an interval added by :func:`_with_interval_rows` (from its begin row to its
    end row), else 0. Their rows alternate begin, end along each thread and every interval ends on
    its thread, so a running count is the state rlscope.trace.states would forward-fill, without a
    pass over the millions of rows that change it."""
    delta = (kind == begin_kind).astype(np.int8)
    delta -= kind == end_kind
    return np.cumsum(delta, dtype=np.int8)


def _mark_inside(kind: np.ndarray, cat: np.ndarray, begin_kind: int, end_kind: int, code: int) -> bool:
    """``cat`` set to ``code`` where :func:`_inside` is 1 and it is not rlscope's own, in one C pass
    where numpy counts, compares and masks; False where the C loops do not run (nothing done)."""
    fn = native.function(
        "timeline_mark_inside", native.N, native.I8, native.N, native.N, native.I8, native.N, native.N
    )
    if fn is None or kind.dtype != np.int8 or cat.dtype != np.int8:
        return False
    fn(len(kind), np.ascontiguousarray(kind), begin_kind, end_kind, cat, code, categories.PROFILER)
    return True


def _compile_inside_op(kind: np.ndarray, both: np.ndarray) -> np.ndarray:
    """Per row: inside a compilation that began inside the open torch op (not the other way round).

    The innermost interval names the time: the torch ops a compiler runs while it traces and
    benchmarks are its ``backend`` time, but a compilation torch starts inside one of the program's
    ops is ``compile`` (the backward graph compiled at its first ``loss.backward()``, an optimizer
    step compiled under its ``record_function``). A thread's ops and its compilations are each
    disjoint, so at a row inside both the later of their begin rows is the inner one."""
    out = np.zeros(len(kind), bool)
    if not both.any():
        return out
    rows = np.arange(len(kind))
    last_compile = np.maximum.accumulate(np.where(kind == S.COMPILE_BEGIN, rows, -1))
    last_op = np.maximum.accumulate(np.where(kind == S.BACKEND_BEGIN, rows, -1))
    out[both] = last_compile[both] > last_op[both]
    return out


def _sorted_by_thread(thread: np.ndarray, start: np.ndarray) -> bool:
    """Whether intervals are in (thread, start) order already (the backend's are), so need no sort."""
    fn = native.function("timeline_sorted_by_thread", native.N, native.I64, native.I64, restype=native.N)
    if fn is not None and thread.dtype == start.dtype == np.int64:
        return bool(fn(len(thread), np.ascontiguousarray(thread), np.ascontiguousarray(start)))
    for rows in blocks(len(thread) - 1):  # each row against the next, a block at a time (in cache)
        t0, t1 = thread[rows], thread[rows.start + 1 : rows.stop + 1]
        if (t1 < t0).any() or (start[rows.start + 1 : rows.stop + 1] < start[rows])[t1 == t0].any():
            return False
    return True


@dataclasses.dataclass
class BackendOps:
    """Native backend ops as the recorder wrote them (thread, start, end, name: int64 but the names, as
    stored) and the session's bounds. :func:`build_timeline` reads them as :func:`backend_intervals`
    makes them, clipped and cut in its merge's pass (timeline_merge), where a pass of their own wrote
    two new columns of their length first."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    start_ns: int
    end_ns: int

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(thread, start, end, name): :func:`backend_intervals`."""
        lo, hi = self.start_ns, self.end_ns
        start, end = np.clip(self.start, lo, hi), np.clip(self.end, lo, hi)
        thread, name = self.thread, self.name
        if not _sorted_by_thread(thread, start):  # the recorder writes them in order: no sort, no copies
            order = np.lexsort((start, thread))
            thread, start, end, name = thread[order], start[order], end[order], name[order]
        same = thread[1:] == thread[:-1]
        np.minimum(end[:-1], start[1:], out=end[:-1], where=same)  # cut where the thread's next op starts
        keep = end > start
        if keep.all():
            return thread, start, end, name
        return thread[keep], start[keep], end[keep], name[keep]


def backend_ops(backend: pa.Table, start_ns: int, end_ns: int) -> BackendOps:
    """The :class:`BackendOps` of ``backend`` (backend.arrows), of a session from ``start_ns`` to
    ``end_ns``."""
    c = {
        k: np.ascontiguousarray(backend.column(k).to_numpy(), np.int64)
        for k in ("start_ns", "end_ns", "thread")
    }
    name = backend.column("name").to_numpy()  # name ids as stored: the timeline's type
    return BackendOps(c["thread"], c["start_ns"], c["end_ns"], name, start_ns, end_ns)


def backend_intervals(
    backend: pa.Table, start_ns: int, end_ns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(thread, start, end, name) of native backend ops, clipped to the session, disjoint per thread.

    The recorder keeps only the outermost op per thread, so one thread's ops should not overlap;
    one that does (a record function ended on another thread) is cut where the next one starts,
    keeping the timeline's begins and ends alternating. Empty intervals are left out.
    """
    return backend_ops(backend, start_ns, end_ns).intervals()


def compile_intervals(
    compiles: pa.Table, start_ns: int, end_ns: int, gaps: Gaps | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thread, start, end) of the compilations (compile.arrows: JAX's stages, torch.compile's
    compilations) on the timeline's clock, clipped to the session; empty ones left out, nested ones
    not merged (spans.union_per_thread); points and torch's stage durations are no time of the timeline.

    The reader gives the stages on the process's own clock (they are counted over the whole run), so
    a run kept in detail stretches maps them here as rlscope/trace/glue.py maps every other table: a
    stage between two stretches leaves nothing, one across a cut keeps its part in the detail.
    """
    c = {k: compiles.column(k).to_numpy().astype(np.int64, copy=False) for k in S.COMPILE_COLUMNS}
    timed = ~np.isin(c["stage"], S.COMPILE_UNTIMED)
    thread, start, end = c["thread"][timed], c["start_ns"][timed], c["end_ns"][timed]
    if gaps is not None and len(gaps):
        start, end = gaps.map(start), gaps.map(end)
    start, end = np.clip(start, start_ns, end_ns), np.clip(end, start_ns, end_ns)
    keep = end > start
    return thread[keep], start[keep], end[keep]


def _event_states(
    col: dict[str, np.ndarray], has_api: bool, has_backend: bool, has_compile: bool
) -> MergedStates | None:
    """What the C merge reads to write the states after each row (:class:`MergedStates`), from the
    events' own rows; None where no C merge runs (numpy fills them after its merge).

    The categories inside the added intervals are marked in the merge but where both compilations and
    torch ops were added: which of the two is inner is read off their begin rows after
    (:func:`_compile_inside_op`)."""
    if _merge_function() is None:
        return None
    mark = {}
    if not (has_compile and has_backend):
        mark = {S.API_BEGIN: categories.CUDA_API, S.BACKEND_BEGIN: categories.BACKEND}
        mark[S.COMPILE_BEGIN] = categories.COMPILE
    kind, ident, parent = col["kind"], col["id"], col["parent"]
    if _compact_instances(kind, ident, parent):  # the ids as they are, as _dense_instances keeps them
        return MergedStates(ident, parent, mark, None)
    stack = take(_STATE_OF_KIND, kind) & 3
    scoped = (stack == 0) | (stack == 2)
    rows = np.flatnonzero(scoped)
    ident, inst_ids = _dense_instances(ident, rows, parent[rows])
    return MergedStates(ident, _dense_parents(parent, scoped, inst_ids), mark, inst_ids)


def _compact_instances(kind: np.ndarray, ident: np.ndarray, parent: np.ndarray) -> bool:
    """Whether :func:`_dense_instances` keeps the events' ids as they are (its test of their largest
    id and parent against their count), found in one C pass over the events (timeline_scoped_top);
    False where it does not run (the ids are then read as that function reads them)."""
    fn = native.function(
        "timeline_scoped_top", native.N, native.I8, native.I64, native.I64, native.U8, native.I64
    )
    if fn is None or [c.dtype for c in (kind, ident, parent)] != [np.int8, np.int64, np.int64]:
        return False
    out = np.zeros(3, np.int64)
    fn(len(kind), *(np.ascontiguousarray(c) for c in (kind, ident, parent)), _STATE_OF_KIND, out)
    count, top_id, top_parent = out.tolist()
    return max(top_id, top_parent) < 2 * count + 1024


def _scope_rows(
    scoped: np.ndarray, at: np.ndarray, events: dict[str, np.ndarray], ident: np.ndarray, ts_min: int
) -> tuple[np.ndarray, ...]:
    """(the begins' rows, instances, names, the ends' rows, instances, names, times) of the merged rows
    ``scoped``, each an operation's or a phase's begin or end, in order: read off the events' own
    rows (``at``: the event's row of each, of ``events``' columns and ``ident``, the instances as
    renumbered), a few MB, not the merged columns' (a cache miss a row over the torch ops' millions).
    The times no earlier than ``ts_min``, as merged."""
    kind, name, ts = events["kind"], events["name"], events["ts_ns"]
    fn = native.function(
        "timeline_scope_rows",
        *(native.N, native.I64, native.I64, native.I8, native.I64, native.I32, native.I64, native.N),
        *(native.U8, native.I64, native.I64, native.I32, native.I64, native.I32, native.I64),
        restype=native.N,
    )
    types = [c.dtype for c in (kind, ident, name, ts)]
    if fn is not None and types == [np.int8, np.int64, np.int32, np.int64]:
        n = len(scoped)
        rows = np.empty(n, np.int64)  # the begins then the ends: kept with the timeline, no spare rows
        b_ident, b_name = np.empty(n, np.int64), np.empty(n, np.int32)
        e_ident, e_name, e_ts = np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.int64)
        args = [np.ascontiguousarray(c) for c in (scoped, at, kind, ident, name, ts)]
        nb = fn(n, *args, ts_min, _OPENS_BYTE, rows, b_ident, b_name, e_ident, e_name, e_ts)
        ne = n - nb
        return rows[:nb], b_ident[:nb], b_name[:nb], rows[nb:], e_ident[:ne], e_name[:ne], e_ts[:ne]
    opens = take(_OPENS_BYTE, kind[at]).view(bool)
    b, e = np.flatnonzero(opens), np.flatnonzero(~opens)
    b_at, e_at = at[b], at[e]
    e_ts = np.maximum(ts[e_at], ts_min)
    return scoped[b], ident[b_at], name[b_at], scoped[e], ident[e_at], name[e_at], e_ts


def _filled_states(
    col: dict[str, np.ndarray],
    sparse: dict[str, RowValues],
    kind: np.ndarray,
    changes: np.ndarray,
    starts: np.ndarray,
) -> tuple:
    """(op, cat, phase, the largest instance a state holds, id, inst_ids, the scopes' begin rows, their
    end rows, the forward fill of a stack's states) of the merged rows: each state forward-filled from
    the rows that change it (``changes``' kinds; :func:`_state_after`), where the C merge wrote none."""
    n = len(kind)
    # the rows that change a state (read at those rows only: the torch ops' millions change none of
    # these): a begin makes its id current, an end makes its parent current
    rows = col["kind_rows"] if "kind_rows" in col else _rows_of_kinds(kind, changes)
    row_kind = kind[rows]
    row_stack = _STACK[row_kind]
    is_scoped = (row_stack == 0) | (row_stack == 2)
    parent = sparse["parent"].at(rows)
    ident, inst_ids = _dense_instances(col["id"], rows[is_scoped], parent[is_scoped])
    ident = narrow_ids(ident)
    parent = _dense_parents(parent, is_scoped, inst_ids)
    after = np.where(_OPENS[row_kind], ident[rows], parent)
    del parent

    def state(s: int, default: int, narrow: bool = False) -> np.ndarray:
        """Per row: the state of stack ``s`` after it; ``narrow``: one byte a row where the states fit
        (categories: a few codes, where an instance id needs eight), else four where they fit."""
        mine = row_stack == s
        values = after[mine]
        if narrow and (len(values) == 0 or (values.min() >= -128 and values.max() <= 127)):
            values = values.astype(np.int8)
        return _state_after(rows[mine], narrow_ids(values), n, starts, default)

    op = state(0, -1)
    cat = state(1, categories.PYTHON, narrow=True)  # a fresh array: set in place after
    phase = state(2, -1)
    # the largest instance a state holds: each of their values is held at its row
    top_state = after[is_scoped].max(initial=-1)
    # the begin and end rows of operations and phases, found once: a few in millions of torch-op rows
    begins = rows[kinds_among(row_kind, (S.OP_BEGIN, S.PHASE_BEGIN))]
    ends = rows[kinds_among(row_kind, (S.OP_END, S.PHASE_END))]
    return op, cat, phase, top_state, ident, inst_ids, begins, ends, state


def build_timeline(
    events: pa.Table,
    api: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    backend: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | BackendOps | None = None,
    compiles: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Timeline:
    """Sort one process's events per thread and derive the state after every row.

    ``api``: (thread, start, end) of CUDA API calls, disjoint per thread; time inside them is
    category ``cuda_api``, the innermost of all. ``backend``: (thread, start, end, name) of torch
    ops from the native recorder (:func:`backend_intervals`, or the :class:`BackendOps` it makes them
    from, made so in the merge); time inside them is ``backend``
    unless inside a CUDA API call, and their rows keep the op's name id in ``name``. ``compiles``:
    (thread, start, end) of compilations (JAX, torch.compile), disjoint per thread
    (rlscope/analysis/compilation.py); time inside them is ``compile`` unless inside a torch op or a
    CUDA API call.
    """
    col = {name: events.column(name).to_numpy() for name in S.EVENT_COLUMNS}
    if S.EVENT_COST_COLUMN[0] in events.column_names:
        col["cost"] = events.column(S.EVENT_COST_COLUMN[0]).to_numpy()
    if len(col["ts_ns"]) == 0:  # no events: no run, whatever was recorded beside them
        empty = np.zeros(0, np.int64)
        return Timeline(
            ts=empty,
            threads=empty,
            kind=empty.astype(np.int8),
            id=empty,
            name=empty.astype(np.int32),
            flags=empty.astype(np.int8),
            op=empty,
            cat=empty.astype(np.int8),
            phase=empty,
            main_thread=-1,
            start_ns=0,
            end_ns=0,
            inst_name=empty,
            inst_end=empty,
            thread_idx=empty.astype(np.int32),
        )
    start_ns, end_ns = session_span(col["ts_ns"], col["kind"])
    main = main_thread(col["ts_ns"], col["kind"], col["thread"], start_ns)
    has_api = api is not None and len(api[0]) > 0
    backend_source = None
    if isinstance(backend, BackendOps):  # clipped and cut as the rows are merged
        clip = (backend.start_ns, backend.end_ns)
        backend_source = (backend.thread, backend.start, backend.end, backend.name, clip)
    elif backend is not None:
        backend_source = (*backend, None)
    has_backend = backend_source is not None and len(backend_source[0]) > 0
    has_compile = compiles is not None and len(compiles[0]) > 0
    # the merged kinds come only from the added intervals (the reader drops them from events): then a
    # running count says which rows are inside one (_inside); else each row's own state is read
    merged_only = not kinds_among(col["kind"], S.MERGED_KINDS).any()
    added = []
    if has_api:
        added.append((S.API_BEGIN, S.API_END, *api, None))
    if has_backend:
        added.append((S.BACKEND_BEGIN, S.BACKEND_END, *backend_source))
    if has_compile:
        added.append((S.COMPILE_BEGIN, S.COMPILE_END, *compiles, None))
    sparse = {k: RowValues(col[k]) for k in _SPARSE if k in col}
    changes = _CHANGES if merged_only else _CHANGES_ANY  # the kinds of the rows that change a state
    # the states written in the C merge's pass, read off the events' rows (where the events hold none
    # of the added intervals' kinds: else their own rows set those states, filled after)
    states = _event_states(col, has_api, has_backend, has_compile) if added and merged_only else None
    if added:  # sorted: the added rows are not in time order; their times no earlier than the start
        kinds = changes if states is None else _SCOPES
        events_col = col
        col, sparse = _with_interval_rows(col, added, start_ns, end_ns, kinds, states)
        if states is not None and states.op is None:  # not written in the merge: filled below
            states, col["kind_rows"] = None, _rows_of_kinds(col["kind"], changes)
            del col["kind_rows_ev"]
    ts = col["ts_ns"].astype(np.int64, copy=False)
    # OS thread ids fit in 32 bits; merged with ``end_ns``, each thread index's, no column of every row's
    thread = narrow_ids(col["thread"] if "thread" in col else col["threads"])
    kind = col["kind"]
    n = len(ts)
    # the run starts at SESSION_START: rows before it (collectors starting up, e.g. the native
    # backend recorder loading) set the state the run starts in, but take none of its time
    if not added:  # the merged column is clamped as it is merged
        ts = np.maximum(ts, start_ns)
    if not added and not (thread == thread[0]).all():
        # rows of one thread are already in time order: a stable sort by thread is enough. Dense
        # small thread indices (hash-based unique, no sort) let numpy use its O(n) radix sort.
        col_thread = events.column("thread")
        dense = compute("index_in", col_thread, options=set_lookup(compute("unique", col_thread))).to_numpy()
        order = np.argsort(dense.astype(np.int16 if dense.max() < 2**15 else np.int32), kind="stable")
        ts, thread, kind = ts[order], thread[order], kind[order]
        col = {k: v[order] for k, v in col.items()}
        sparse = {k: RowValues(col[k]) for k in _SPARSE if k in col}
    if "thread" in col:
        starts = _thread_starts(thread)  # each thread's first row
        threads = thread[starts]
    else:  # each thread index's first row, searched
        thread_idx = col["thread_idx"]
        starts, threads = np.searchsorted(thread_idx, np.arange(len(thread), dtype=thread_idx.dtype)), thread

    if states is not None:  # the merge wrote the states; its marked rows are the scopes' begins and ends
        op, cat, phase, top_state = states.op, states.cat, states.phase, states.top
        ident, inst_ids = narrow_ids(col["id"]), states.inst_ids
        begins, b_ident, b_name, ends, e_ident, e_name, e_ts = _scope_rows(
            col["kind_rows"], col["kind_rows_ev"], events_col, states.ident, start_ns
        )
        if not (has_compile and has_backend):  # marked in the merge, as below
            has_api = has_backend = has_compile = False
    else:
        op, cat, phase, top_state, ident, inst_ids, begins, ends, state = _filled_states(
            col, sparse, kind, changes, starts
        )
        b_ident, e_ident = ident[begins], ident[ends]
        b_name, e_name, e_ts = col["name"][begins], col["name"][ends], ts[ends]

    def inside(begin_kind: int, end_kind: int) -> np.ndarray:
        """Per row: 1 inside an interval of these kinds."""
        if merged_only:
            return _inside(kind, begin_kind, end_kind)
        return state(_STACK[begin_kind], 0)

    def marked(begin_kind: int, end_kind: int, code: int) -> bool:
        """Whether ``cat`` is set to ``code`` inside these intervals in one C pass (else numpy's below)."""
        return merged_only and _mark_inside(kind, cat, begin_kind, end_kind, code)

    in_compile = None
    # inside any category of the program's; rlscope's own work stays rlscope's (the torch ops' need
    # the compilations' rows)
    if has_compile and (has_backend or not marked(S.COMPILE_BEGIN, S.COMPILE_END, categories.COMPILE)):
        in_compile = inside(S.COMPILE_BEGIN, S.COMPILE_END) == 1
        np.putmask(cat, in_compile & (cat != categories.PROFILER), categories.COMPILE)
    # innermost but for CUDA API calls and compiles; rlscope's own work stays rlscope's
    if has_backend and (
        in_compile is not None or not marked(S.BACKEND_BEGIN, S.BACKEND_END, categories.BACKEND)
    ):
        in_op = inside(S.BACKEND_BEGIN, S.BACKEND_END) == 1
        if in_compile is not None:
            in_op &= ~_compile_inside_op(kind, in_compile & in_op)
        np.putmask(cat, in_op & (cat != categories.PROFILER), categories.BACKEND)
    # a CUDA call of rlscope's own (a twin run's synchronize at a turn) stays rlscope's
    if has_api and not marked(S.API_BEGIN, S.API_END, categories.CUDA_API):
        in_api = inside(S.API_BEGIN, S.API_END)
        np.putmask(cat, (in_api == 1) & (cat != categories.PROFILER), categories.CUDA_API)

    # a thread's last state lasts to the end of the data
    thread_end = _thread_end(ts, starts, end_ns)

    top = max(b_ident.max(initial=-1), e_ident.max(initial=-1), top_state, 0)
    n_inst = int(top) + 1
    inst_name = np.full(n_inst, -1, np.int64)
    inst_name[e_ident] = e_name
    inst_name[b_ident] = b_name
    inst_end = np.full(n_inst, end_ns, np.int64)
    inst_end[e_ident] = e_ts
    # a thread's index, int16 where the threads are that few (a process's are): a row each
    thread_idx = col["thread_idx"] if "thread_idx" in col else _thread_index(n, starts)
    out = Timeline(
        ts=ts,
        threads=threads,
        kind=kind,
        id=ident,
        name=col["name"],
        flags=col["flags"],
        op=op,
        cat=cat,
        phase=phase,
        main_thread=main,
        start_ns=start_ns,
        end_ns=end_ns,
        inst_name=inst_name,
        inst_end=inst_end,
        thread_idx=thread_idx,
        cost=sparse.get("cost"),
        inst_ids=inst_ids,
        thread_end=thread_end,
    )
    out.memo["scope_ends"], out.memo["scope_begins"] = ends, begins
    return out
