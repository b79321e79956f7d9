"""Leaving stretches of a process's detail out as it is read (the detail budget, rlscope/trace/budget.py).

A drop ``[start, end)`` (own clock) becomes what the writer makes of the time between two detail
stretches (rlscope/trace/aggregate.py), so the reader joins the rest as any run kept in stretches
(rlscope/trace/glue.py) and the whole-run figures come out the same:

- the event rows inside it are left out as their batches are read; a ``DETAIL`` pause is put at its
  start;
- at its end (the next kept stretch's resume, or the process's end) come the ends of the scopes that
  began before it and ended inside (``FLAG_SUMMARIZED``: the aggregates count those calls), the
  category each thread was left in, the begins of the scopes still open, and the window mode; at
  the process's end, a resume after the session's end row, as the writer writes it;
- the optional tables' rows that start inside it are left out;
- its aggregates flushes count as summarized time: their detail-mode rows become ``MODE_LEFT_OUT``
  (recorded with the collectors on; rlscope.analysis.whole_run corrects them as the detail was).

A drop starts on a flush of the process or at a stretch's resume, and ends at a resume or the end,
so each flush's aggregates lie wholly inside or outside it. What it keeps of the rows it leaves out
is bounded by the scopes open at once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.keys import compute
from rlscope.trace import schema as S
from rlscope.trace.budget import Drop
from rlscope.trace.glue import gaps_of

_LAST = 2**63 - 1


def _ints(batch: pa.RecordBatch | pa.Table, column: str) -> np.ndarray:
    return batch.column(column).to_numpy().astype(np.int64, copy=False)


def _rows(batch: pa.RecordBatch, mask: np.ndarray) -> pa.RecordBatch:
    """``batch``'s rows where ``mask`` is set: Arrow's filter, called without importing
    pyarrow.compute (RecordBatch.filter does, ~35 ms of an analysis's start)."""
    return compute("filter", batch, pa.array(mask))


def _as_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (the same columns) with ``schema``'s types and metadata; a column is cast only where
    its type differs (Table.cast of every column imports pyarrow.compute)."""
    columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(table.columns, schema, strict=True)]
    return pa.Table.from_arrays(columns, schema=schema)


class _Drop:
    """What one drop keeps of the rows it leaves out."""

    def __init__(self, start: int, end: int | None) -> None:
        self.start, self.end = start, end
        self.rows = 0
        self.ended: list[pa.RecordBatch] = []  # ends of scopes begun before it, in their order
        self.begun: list[pa.RecordBatch] = []  # begins inside it, in their order
        self.open = np.zeros(0, np.int64)  # ids of those begins not ended yet
        self.cats: dict[int, tuple[int, int]] = {}  # thread -> (category before its first change, after)
        self.window: int | None = None
        self.marks: list[tuple[int, int]] = []  # the schedule's own pauses and resumes inside it
        self.last_ts = start

    def take(self, rows: pa.RecordBatch) -> None:
        c = {k: _ints(rows, k) for k in ("ts_ns", "thread", "kind", "id", "parent")}
        kind, ident = c["kind"], c["id"]
        self.rows += rows.num_rows
        if rows.num_rows:
            self.last_ts = max(self.last_ts, int(c["ts_ns"].max()))
        begins = (kind == S.OP_BEGIN) | (kind == S.PHASE_BEGIN)
        ends = (kind == S.OP_END) | (kind == S.PHASE_END)
        known = np.concatenate([self.open, ident[begins]])
        self.open = known[~np.isin(known, ident[ends])]
        ended = _rows(rows, ends & ~np.isin(ident, known))
        # the begins still open: a few batches (no more than scopes open at once), not one a batch
        begun = [*self.begun, _rows(rows, begins)]
        begun = [_rows(b, np.isin(_ints(b, "id"), self.open)) for b in begun]
        self.ended += [ended] if ended.num_rows else []
        self.begun = [b for b in begun if b.num_rows]
        # per thread: the category before its first change here (unless an earlier batch had one)
        # and after its last, found for the whole batch at once (a simulator's loop changes it
        # tens of thousands of times a batch)
        cat = np.flatnonzero((kind == S.CAT_BEGIN) | (kind == S.CAT_END))
        if len(cat):
            th, begin = c["thread"][cat], kind[cat] == S.CAT_BEGIN
            before = np.where(begin, c["parent"][cat], ident[cat])
            now = np.where(begin, ident[cat], c["parent"][cat])
            threads, first = np.unique(th, return_index=True)
            last = len(th) - 1 - np.unique(th[::-1], return_index=True)[1]
            for k in np.argsort(first, kind="stable").tolist():  # in the order the threads appear
                t = int(threads[k])
                self.cats[t] = (self.cats.get(t, (int(before[first[k]]), 0))[0], int(now[last[k]]))
        window = np.flatnonzero(kind == S.WINDOW)
        if len(window):
            self.window = int(ident[window[-1]])
        detail = np.flatnonzero(kind == S.DETAIL)
        self.marks += list(zip(c["ts_ns"][detail].tolist(), ident[detail].tolist(), strict=True))

    def detail_ns(self, end: int) -> int:
        """The detail time it left out: its length less the schedule's own gaps inside it."""
        marks = sorted(self.marks)
        if marks and marks[0][1] == S.DETAIL_RESUME:  # it began between stretches: a gap from its start
            marks.insert(0, (self.start, S.DETAIL_PAUSE))
        if not marks:
            return end - self.start
        ts, what = (np.asarray(x, np.int64) for x in zip(*marks, strict=True))
        return (
            end
            - self.start
            - gaps_of(pa.table({"ts_ns": ts, "kind": np.full(len(ts), S.DETAIL), "id": what}), end).total_ns
        )


class Drops:
    """Splits a process's event batches by its drops (module docstring); ``split`` is the reader's
    row filter, ``rows_at_cuts`` what it appends."""

    def __init__(self, drops: list[Drop]) -> None:
        self.drops = [_Drop(a, b) for a, b in sorted(drops)]
        self._starts = np.asarray([d.start for d in self.drops], np.int64)
        self._ends = np.asarray([_LAST if d.end is None else d.end for d in self.drops], np.int64)
        self.end_row: pa.RecordBatch | None = None  # the session's end row, when a drop reaches it
        self.schema: pa.Schema | None = None

    @property
    def rows(self) -> int:
        return sum(d.rows for d in self.drops)

    def inside(self, ts: np.ndarray) -> np.ndarray:
        """Per time, the index of the drop it lies in (-1: none)."""
        k = np.searchsorted(self._starts, ts, "right") - 1
        ok = (k >= 0) & (ts < self._ends[np.maximum(k, 0)])
        return np.where(ok, k, -1)

    def split(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of ``batch`` to keep; remembers what the drops need of the others."""
        if self.schema is None:
            self.schema = batch.schema
        where = self.inside(_ints(batch, "ts_ns"))
        if (where < 0).all():
            return batch
        kind = _ints(batch, "kind")
        where = np.where(kind == S.SESSION_START, -1, where)  # the session's rows stay
        end = (where >= 0) & (kind == S.SESSION_END)
        if end.any() and self.end_row is None:
            self.end_row = _rows(batch, end).slice(0, 1)
        where = np.where(end, -1, where)
        for k in np.unique(where[where >= 0]).tolist():
            self.drops[k].take(_rows(batch, (where == k) & ~end))
        return _rows(batch, (where < 0) & ~end)

    def session_end(self) -> int | None:
        return int(self.end_row.column("ts_ns")[0].as_py()) if self.end_row is not None else None

    def rows_at_cuts(self, events: pa.Table, main: int) -> pa.Table:
        """``events`` (the kept rows) with the drops' rows put in, in time order (stable: at one
        time the rows put at a drop's end come before the kept rows there, but for the session's
        end row, which comes first, as the writer puts it)."""
        schema = events.schema
        last = max([int(_ints(events, "ts_ns").max())] + [d.last_ts for d in self.drops] + [0])
        process_end = self.session_end() or last
        parts, first = [events], [np.ones(events.num_rows, np.int8)]
        for d in self.drops:
            end = process_end if d.end is None else d.end
            rows = [_row(schema, d.start, main, S.DETAIL, S.DETAIL_PAUSE, -1, -1, 0)]
            at_end = []
            if d.end is None:
                if self.end_row is not None:
                    end_row = pa.Table.from_batches([self.end_row]).select(schema.names)
                    at_end.append(_as_schema(end_row, schema))
                at_end.append(_row(schema, end, main, S.DETAIL, S.DETAIL_RESUME, -1, -1, 0))
            at_end += _changes(d, schema, end, main)
            parts += rows + at_end
            first += [np.zeros(1, np.int8)] + [
                np.full(t.num_rows, 0 if d.end is not None else 2, np.int8) for t in at_end
            ]
        table = pa.concat_tables(parts)
        order = np.lexsort((np.concatenate(first), _ints(table, "ts_ns")))
        return compute("take", table, pa.array(order))  # Table.take imports pyarrow.compute

    def detail_left_out_s(self, events_end: int) -> float:
        end = self.session_end() or events_end
        return sum(d.detail_ns(end if d.end is None else d.end) for d in self.drops) / 1e9


def _changes(d: _Drop, schema: pa.Schema, t: int, main: int) -> list[pa.Table]:
    """The rows at a drop's end: what changed inside it (as the writer's resume writes them)."""
    out = []
    for batch in d.ended:  # in the order they ended: innermost first on each thread
        c = {k: _ints(batch, k) for k in ("thread", "kind", "id", "parent", "name", "flags")}
        for i in range(batch.num_rows):
            flags = (int(c["flags"][i]) & S.FLAG_RECURSIVE) | S.FLAG_SUMMARIZED
            out.append(
                _row(schema, t, c["thread"][i], c["kind"][i], c["id"][i], c["parent"][i], c["name"][i], flags)
            )
    for th in sorted(d.cats):
        then, now = d.cats[th]
        if then != now:
            if then != categories.PYTHON:
                out.append(_row(schema, t, th, S.CAT_END, then, categories.PYTHON, -1, 0))
            if now != categories.PYTHON:
                out.append(_row(schema, t, th, S.CAT_BEGIN, now, categories.PYTHON, -1, 0))
    for batch in d.begun:  # outermost first
        c = {k: _ints(batch, k) for k in ("thread", "kind", "id", "parent", "name", "flags")}
        for i in range(batch.num_rows):
            flags = (int(c["flags"][i]) & S.FLAG_RECURSIVE) | S.FLAG_SUMMARIZED
            out.append(
                _row(schema, t, c["thread"][i], c["kind"][i], c["id"][i], c["parent"][i], c["name"][i], flags)
            )
    if d.window is not None:
        out.append(_row(schema, t, main, S.WINDOW, d.window, -1, -1, 0))
    return out


def _row(
    schema: pa.Schema, ts: int, thread: int, kind: int, ident: int, parent: int, name: int, flags: int
) -> pa.Table:
    values = {"ts_ns": ts, "thread": thread, "kind": kind, "id": ident, "parent": parent, "name": name}
    values |= {"flags": flags, "cost": 0}
    return pa.table({f.name: pa.array([int(values[f.name])], f.type) for f in schema}, schema=schema)


class Before:
    """A row filter for a table of times (torch ops, GPU work, samples): the rows that start outside
    the drops; counts those left out."""

    def __init__(self, drops: Drops, column: str) -> None:
        self.drops, self.column, self.rows = drops, column, 0

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        keep = self.drops.inside(_ints(batch, self.column)) < 0
        if keep.all():
            return batch
        self.rows += int((~keep).sum())
        return _rows(batch, keep)


def as_left_out(batch: pa.RecordBatch, drops: Drops) -> pa.RecordBatch:
    """An aggregates batch flushed inside a drop: its detail-mode rows become ``MODE_LEFT_OUT``. A
    flush's aggregates cover the time up to it: one at a drop's start has its detail on the kept
    side, one at its end inside the drop."""
    if not batch.num_rows:
        return batch
    t = int(batch.column("ts_ns")[0].as_py())
    k = drops.inside(np.asarray([t], np.int64))[0]
    at_end = bool((drops._ends == t).any())
    if (k < 0 or t == drops.drops[k].start) and not at_end:
        return batch
    i = batch.schema.get_field_index("mode")
    mode = batch.column(i).to_numpy(zero_copy_only=False)
    left = np.where(mode == S.MODE_SUMMARY, mode, S.MODE_LEFT_OUT)
    return batch.set_column(i, "mode", pa.array(left, batch.schema.field(i).type))
