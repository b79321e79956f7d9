"""The analysis's detail budget: the most event rows of one process it holds at once.

Why: the analysis holds a process's event detail in memory all at once (its timeline, the
breakdown's keys, the correction's copies: about 0.3 KB a row at the peak), and the detail a run
keeps grows with the run's length (a stretch every ``EVERY``) and its speed (a fast PPO on a CPU
writes 100 k torch-op rows a second). So, past a budget, the analysis takes a process's detail only
up to a time ``C``, the same instant of the run in every process, and the rest of the run comes from
the aggregates, as the time between detail stretches does (rlscope/analysis/whole_run.py). The
trace keeps everything; a larger budget (``--detail-budget``) analyzes more of it.

The cut lies on a flush of each process's writer (an aggregates batch), so the detail and the
aggregates split the run exactly there: aggregates batches after the cut count as summarized time
(their detail-mode rows become ``MODE_LEFT_OUT``), event rows after it are left out, and the rows
the reader puts at the cut are the ones the writer writes where a detail stretch ends for good
(rlscope/trace/aggregate.py): a ``DETAIL`` pause at the cut, then at the process's end a resume
with the ends of the scopes that ended after the cut (``FLAG_SUMMARIZED``: the aggregates count
those calls) and the category each thread was left in.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.errors import RLScopeError
from rlscope.trace import schema as S

# rows (events and torch ops) of one process the analysis holds by default: its peak memory stays
# under 1 GB (BENCHMARKS.md, long runs)
DEFAULT_ROWS = 1_000_000
_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000}


def parse(spec: str | int | None) -> int | None:
    """``all`` (None: no budget), or a count of rows such as ``2000000``, ``500k`` or ``2M``."""
    if spec is None:
        return DEFAULT_ROWS
    text = str(spec) if isinstance(spec, int) else spec.strip().lower()
    if text == "all":
        return None
    number, unit = (text[:-1], text[-1]) if text[-1:] in ("k", "m") else (text, "")
    try:
        rows = int(float(number) * _SUFFIX[unit])
    except ValueError:
        rows = 0
    if rows < 1000:
        raise RLScopeError(f"bad detail budget {spec!r}: give 'all' or at least 1000 rows (e.g. 2M, 500k)")
    return rows


@dataclasses.dataclass(frozen=True)
class FlushRows:
    """A process's flushes (its aggregates batches' times, own clock, ascending) and the detail rows
    (events, torch ops, GPU records) with times up to each of them."""

    times: np.ndarray
    rows: np.ndarray  # cumulative, one per flush
    total: int  # every detail row of the process

    def last_within(self, budget: int) -> int:
        """The last flush whose rows fit ``budget`` (the first flush when none does)."""
        k = int(np.searchsorted(self.rows, budget, "right")) - 1
        return int(self.times[max(k, 0)])


def _batches(path: Path, column: str):
    """Each record batch's ``column`` as int64, from the memory-mapped file; stops at damage (the
    full load reads the file with its checks and says what it found)."""
    try:
        reader = pa.ipc.open_stream(pa.memory_map(str(path), "r"))
        i = reader.schema.get_field_index(column)
        if i < 0 or not pa.types.is_integer(reader.schema.field(i).type):
            return
        for batch in reader:
            values = batch.column(i)
            if values.null_count:  # a damaged batch: left out, as the full load leaves it out
                continue
            yield values.to_numpy().astype(np.int64, copy=False)
    except Exception:  # a damaged, missing or unreadable file: its rows up to there
        return


def flush_rows(process_dir: Path) -> FlushRows | None:
    """The process's :class:`FlushRows`; None without aggregates (a trace written before them, or
    one whose aggregates are unreadable): such a process is never cut."""
    times = [int(ts[0]) for ts in _batches(process_dir / S.AGGREGATES_FILE, "ts_ns") if len(ts)]
    if not times:
        return None
    flush = np.maximum.accumulate(np.asarray(times, np.int64))
    counts = np.zeros(len(flush) + 1, np.int64)
    for filename, column in (
        (S.EVENTS_FILE, "ts_ns"),
        (S.BACKEND_FILE, "start_ns"),
        (S.GPU_FILE, "start_ns"),
    ):
        if (process_dir / filename).is_file():
            for ts in _batches(process_dir / filename, column):
                counts += np.bincount(np.searchsorted(flush, ts, "left"), minlength=len(counts))
    return FlushRows(flush, np.cumsum(counts[:-1]), int(counts.sum()))


def choose_cuts(flushes: list[FlushRows | None], offsets: list[int], budget: int | None) -> list[int | None]:
    """Per process, where its detail is cut (own clock; None: kept whole).

    ``offsets``: each process's clock offset onto the run's clock. The cut is one instant ``C`` of
    the run: the earliest time at which a process's detail reaches ``budget``. Every process with
    detail after ``C`` is cut at its last flush at or before it, so the processes' joined timelines
    still cover the same stretch of the run.
    """
    over = [
        f.last_within(budget) + off
        for f, off in zip(flushes, offsets, strict=True)
        if budget is not None and f is not None and f.total > budget
    ]
    if not over:
        return [None] * len(flushes)
    at = min(over)
    cuts: list[int | None] = []
    for f, off in zip(flushes, offsets, strict=True):
        if f is None or (f.rows[-1] >= f.total and f.times[-1] + off <= at):
            cuts.append(None)  # no aggregates to stand for the rest, or no detail after C
            continue
        k = int(np.searchsorted(f.times, at - off, "right")) - 1
        cuts.append(int(f.times[max(k, 0)]))
    return cuts


class Tail:
    """Splits a process's event batches at ``cut``: the rows up to it are kept; of the rest it keeps
    what the rows put at the cut need (module docstring), bounded by the scopes open at once."""

    def __init__(self, cut: int) -> None:
        self.cut = cut
        self.rows = 0  # event rows left out
        self.end: pa.RecordBatch | None = None  # the session's end row
        self.last_ts = cut
        self.schema: pa.Schema | None = None
        self._ended = _Rows()  # ends, after the cut, of scopes begun before it (in their order)
        self._begun = np.zeros(0, np.int64)  # ids begun after the cut, not ended yet
        self._cats: dict[int, tuple[int, int]] = {}  # thread -> (category before its first change, after)
        self._window: int | None = None
        self._pauses: list[tuple[int, int]] = []  # the detail schedule's own cuts after the cut

    def split(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of ``batch`` to keep; remembers what the cut needs of the others."""
        if self.schema is None:
            self.schema = batch.schema
        ts = _ints(batch, "ts_ns")
        after = ts > self.cut
        if not after.any():
            return batch
        kind = _ints(batch, "kind")
        self.last_ts = max(self.last_ts, int(ts.max()))
        end = after & (kind == S.SESSION_END)
        if end.any() and self.end is None:
            self.end = batch.filter(pa.array(end)).slice(0, 1)
        late = np.flatnonzero(after & (kind != S.SESSION_START) & ~end)
        self.rows += len(late)
        self._scopes(batch.take(pa.array(late)))
        keep = ~after | (kind == S.SESSION_START)
        return batch.filter(pa.array(keep))

    def _scopes(self, rows: pa.RecordBatch) -> None:
        c = {
            k: rows.column(k).to_numpy().astype(np.int64, copy=False)
            for k in ("thread", "kind", "id", "parent")
        }
        kind, ident = c["kind"], c["id"]
        begins = (kind == S.OP_BEGIN) | (kind == S.PHASE_BEGIN)
        ends = (kind == S.OP_END) | (kind == S.PHASE_END)
        known = np.concatenate([self._begun, ident[begins]])
        earlier = ends & ~np.isin(ident, known)  # ends of scopes begun before the cut
        self._ended.add(rows.filter(pa.array(earlier)))
        self._begun = known[~np.isin(known, ident[ends])]
        cat = np.flatnonzero((kind == S.CAT_BEGIN) | (kind == S.CAT_END))
        for i in cat.tolist():  # few: a simulator's boundaries, two a step
            th, begin = int(c["thread"][i]), kind[i] == S.CAT_BEGIN
            before = int(c["parent"][i] if begin else ident[i])
            now = int(ident[i] if begin else c["parent"][i])
            self._cats[th] = (self._cats.get(th, (before, now))[0], now)
        window = np.flatnonzero(kind == S.WINDOW)
        if len(window):
            self._window = int(ident[window[-1]])
        ts = _ints(rows, "ts_ns")
        self._pauses += [(int(ts[i]), int(ident[i])) for i in np.flatnonzero(kind == S.DETAIL).tolist()]

    def end_ns(self) -> int:
        """Where the process's recording ends: its session's end row, else its last row."""
        return int(self.end.column("ts_ns")[0].as_py()) if self.end is not None else self.last_ts

    def detail_left_out_ns(self) -> int:
        """The detail time after the cut: from it to the end, less the schedule's gaps there."""
        from rlscope.trace.glue import gaps_of

        end = self.end_ns()
        if not self._pauses:
            return end - self.cut
        pauses = sorted(self._pauses)
        if pauses[0][1] == S.DETAIL_RESUME:  # the cut fell between stretches: a gap from it
            pauses.insert(0, (self.cut, S.DETAIL_PAUSE))
        ts, what = (np.asarray(x, np.int64) for x in zip(*pauses, strict=True))
        rows = pa.table({"ts_ns": ts, "kind": np.full(len(ts), S.DETAIL), "id": what})
        return end - self.cut - gaps_of(rows, end).total_ns

    def rows_at_cut(self, main: int, schema: pa.Schema) -> pa.Table:
        """The rows to append to the kept ones (``schema``: theirs): the pause at the cut, the
        session's end row, then the resume at the process's end with what changed after the cut."""
        end_ts = self.end_ns()
        out = [_row(schema, self.cut, main, S.DETAIL, S.DETAIL_PAUSE, -1, -1, 0)]
        if self.end is not None:
            out.append(pa.Table.from_batches([self.end]).select(schema.names).cast(schema))
        out.append(_row(schema, end_ts, main, S.DETAIL, S.DETAIL_RESUME, -1, -1, 0))
        ended = self._ended.table(self.schema) if self.schema is not None else None
        if ended is not None and ended.num_rows:
            c = {k: ended.column(k).to_numpy() for k in ("thread", "kind", "id", "parent", "name", "flags")}
            for i in range(ended.num_rows):  # in the order they ended: innermost first on each thread
                flags = (int(c["flags"][i]) & S.FLAG_RECURSIVE) | S.FLAG_SUMMARIZED
                out.append(
                    _row(
                        schema,
                        end_ts,
                        int(c["thread"][i]),
                        int(c["kind"][i]),
                        int(c["id"][i]),
                        int(c["parent"][i]),
                        int(c["name"][i]),
                        flags,
                    )
                )
        for th in sorted(self._cats):
            then, now = self._cats[th]
            if then != now:
                if then != categories.PYTHON:
                    out.append(_row(schema, end_ts, th, S.CAT_END, then, categories.PYTHON, -1, 0))
                if now != categories.PYTHON:
                    out.append(_row(schema, end_ts, th, S.CAT_BEGIN, now, categories.PYTHON, -1, 0))
        if self._window is not None:
            out.append(_row(schema, end_ts, main, S.WINDOW, self._window, -1, -1, 0))
        return pa.concat_tables(out)


def _ints(batch: pa.RecordBatch, column: str) -> np.ndarray:
    return batch.column(column).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


class _Rows:
    """Record batches gathered a few rows at a time."""

    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch] = []

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.batches.append(batch)

    def table(self, schema: pa.Schema) -> pa.Table:
        return pa.Table.from_batches(self.batches, schema=schema)


def _row(
    schema: pa.Schema, ts: int, thread: int, kind: int, ident: int, parent: int, name: int, flags: int
) -> pa.Table:
    values = {"ts_ns": ts, "thread": thread, "kind": kind, "id": ident, "parent": parent, "name": name}
    values |= {"flags": flags, "cost": 0}
    return pa.table({f.name: pa.array([values[f.name]], f.type) for f in schema}, schema=schema)


class Before:
    """A row filter for a table of times (an optional table: torch ops, GPU work, samples): the rows
    that start at or before ``cut``; counts those left out."""

    def __init__(self, cut: int, column: str) -> None:
        self.cut, self.column, self.rows = cut, column, 0

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        ts = batch.column(self.column).to_numpy(zero_copy_only=False)
        keep = ts <= self.cut
        if keep.all():
            return batch
        self.rows += int((~keep).sum())
        return batch.filter(pa.array(keep))


def as_summary(batch: pa.RecordBatch, cut: int) -> pa.RecordBatch:
    """An aggregates batch flushed after ``cut``: its detail-mode rows become ``MODE_LEFT_OUT``
    (summarized time recorded with the collectors on: rlscope.analysis.whole_run corrects it as the
    detail was)."""
    ts = batch.column("ts_ns")
    if not batch.num_rows or int(ts[0].as_py()) <= cut:
        return batch
    i = batch.schema.get_field_index("mode")
    mode = batch.column(i).to_numpy(zero_copy_only=False)
    left = np.where(mode == S.MODE_SUMMARY, mode, S.MODE_LEFT_OUT)
    return batch.set_column(i, "mode", pa.array(left, batch.schema.field(i).type))
