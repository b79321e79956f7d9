"""The analysis's detail budget: how much of a process's event detail the analysis holds at once.

Why: the analysis holds a process's event detail in memory all at once (its timeline, the
breakdown's keys, the correction's copies: about 0.6 KB a row at the peak), and the detail a run
keeps grows with the run's length (a stretch every ``EVERY``) and its speed (a fast PPO on a CPU
writes 100 k torch-op rows a second). So the analysis holds at most a budget of rows per process,
and leaves the rest of the detail to the aggregates, which stand for it as they stand for the time
between detail stretches (rlscope/analysis/whole_run.py). The trace keeps everything.

The default budget, ``auto``, is the process's first stretch (at least ``FLOOR_ROWS``, at most
``AUTO_ROWS``): the analysis of a long run holds no more than the analysis of its first minutes, so
its memory does not grow with the run's length. Within the budget, half goes to the later stretches,
whole ones evenly spaced over the run (the same ones in every process), and the rest to the first
stretch, from its start up to one instant of the run. A fixed budget (``4M``) spends itself the same
way; ``all`` analyzes every row. What is left out, and how the reader joins what is kept, is
rlscope/trace/drops.py's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlscope.errors import RLScopeError
from rlscope.trace import schema as S
from rlscope.trace.glue import gaps_of

AUTO = "auto"
AUTO_ROWS = 1_000_000  # the most an auto budget holds: under 1 GB at the peak (BENCHMARKS.md §9)
FLOOR_ROWS = 100_000  # the least: a process with a thin first stretch still gets its later ones
_FEW_FLUSHES = 4  # a batch over more flushes than this has its rows searched (_count_per_flush)
_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000}

Budget = int | str | None  # rows, AUTO, or None (no budget)
Drop = tuple[int, int | None]  # [start, end) on the process's own clock; end None: to the process's end


def parse(spec: str | int | None) -> Budget:
    """``auto`` (the default), ``all`` (None: no budget), or rows: ``2000000``, ``500k``, ``2M``."""
    if spec is None:
        return AUTO
    text = str(spec).strip().lower()
    if text in ("all", AUTO):
        return None if text == "all" else AUTO
    number, unit = (text[:-1], text[-1]) if text[-1:] in ("k", "m") else (text, "")
    try:
        rows = int(float(number) * _SUFFIX[unit])
    except ValueError:
        rows = 0
    if rows < 1000:
        raise RLScopeError(
            f"bad detail budget {spec!r}: give 'auto', 'all' or at least 1000 rows (e.g. 2M, 500k)"
        )
    return rows


@dataclasses.dataclass(frozen=True)
class DetailRows:
    """What the driver knows of one process's detail: its flushes (its aggregates batches' times,
    own clock, ascending), the detail rows (events, torch ops, GPU records) up to each, and its
    detail stretches."""

    times: np.ndarray
    rows: np.ndarray  # cumulative, one per flush
    total: int  # every detail row of the process
    stretches: np.ndarray  # (n, 2): [start, end) of each detail stretch, the first one first

    def rows_in(self, start: int, end: int) -> int:
        """Detail rows between the flushes around ``[start, end)`` (no rows are written between
        stretches, so a stretch's are exact)."""
        a = int(np.searchsorted(self.times, start, "right")) - 1
        b = int(np.searchsorted(self.times, end, "left"))
        before = int(self.rows[a]) if a >= 0 else 0
        upto = int(self.rows[b]) if b < len(self.rows) else self.total
        return upto - before

    @property
    def first_rows(self) -> int:
        return self.rows_in(*self.stretches[0]) if len(self.stretches) else self.total

    def last_within(self, rows: int, end: int) -> int | None:
        """The last flush before ``end`` whose rows fit ``rows`` (None: none does)."""
        k = min(int(np.searchsorted(self.rows, rows, "right")), int(np.searchsorted(self.times, end, "left")))
        return int(self.times[k - 1]) if k > 0 else None


def _batches(path: Path, columns: list[str]):
    """Each record batch's ``columns`` as int64 arrays, from the memory-mapped file; stops at damage
    (the full load reads the file with its checks and says what it found)."""
    try:
        schema = pa.ipc.open_stream(pa.memory_map(str(path), "r")).schema
        where = [schema.get_field_index(c) for c in columns]
        if any(i < 0 or not pa.types.is_integer(schema.field(i).type) for i in where):
            return
        # only these columns decoded (a torch-op file's others are most of its bytes)
        reader = pa.ipc.open_stream(pa.memory_map(str(path), "r"), options=S.read_options(where))
        for batch in reader:
            values = [batch.column(c) for c in columns]
            if any(v.null_count for v in values):  # a damaged batch: left out, as the full load does
                continue
            yield [v.to_numpy().astype(np.int64, copy=False) for v in values]
    except Exception:  # a damaged, missing or unreadable file: its rows up to there
        return


def detail_rows(process_dir: Path) -> DetailRows | None:
    """The process's :class:`DetailRows`; None without aggregates (a trace written before them, or
    one whose aggregates are unreadable): such a process is analyzed whole."""
    count = DetailCount.of(process_dir)
    if count is None:
        return None
    for ts, kind, ident in _batches(process_dir / S.EVENTS_FILE, ["ts_ns", "kind", "id"]):
        count.add_events(ts, kind, ident)
    return count.rows()


class DetailCount:
    """A process's detail rows counted per flush as its event batches are read (:meth:`events`: the
    survey's light load reads the same columns, so they are decoded once), then its torch ops and
    GPU records (:meth:`rows`)."""

    def __init__(self, process_dir: Path, flush: np.ndarray) -> None:
        self.process_dir = process_dir
        self.flush = flush
        self.counts = np.zeros(len(flush) + 1, np.int64)
        self.marks: list[np.ndarray] = []  # (ts, kind, id) of the session's and the schedule's rows
        self.lo, self.hi = 2**63 - 1, -(2**63)

    @classmethod
    def of(cls, process_dir: Path) -> DetailCount | None:
        """None without aggregates (:func:`detail_rows`)."""
        times = [int(b[0][0]) for b in _batches(process_dir / S.AGGREGATES_FILE, ["ts_ns"]) if len(b[0])]
        if not times:
            return None
        return cls(process_dir, np.maximum.accumulate(np.asarray(times, np.int64)))

    def events(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A reader's row hook: counts an intact event batch's rows, keeps them all."""
        values = [batch.column(c).to_numpy().astype(np.int64, copy=False) for c in ("ts_ns", "kind", "id")]
        self.add_events(*values)
        return batch

    def add_events(self, ts: np.ndarray, kind: np.ndarray, ident: np.ndarray) -> None:
        _count_per_flush(self.counts, self.flush, ts)
        keep = np.isin(kind, (S.SESSION_START, S.SESSION_END, S.DETAIL))
        self.marks.append(np.stack([ts[keep], kind[keep], ident[keep]]))
        if len(ts):
            self.lo, self.hi = min(self.lo, int(ts.min())), max(self.hi, int(ts.max()))

    def rows(self) -> DetailRows | None:
        """The :class:`DetailRows`, once the events are counted; None where they hold no row."""
        for filename in (S.BACKEND_FILE, S.GPU_FILE):
            for (ts,) in _batches(self.process_dir / filename, ["start_ns"]):
                _count_per_flush(self.counts, self.flush, ts)
        if self.hi < self.lo:
            return None
        counts = self.counts
        stretches = _stretches(self.marks, self.lo, self.hi)
        return DetailRows(self.flush, np.cumsum(counts[:-1]), int(counts.sum()), stretches)


def _count_per_flush(counts: np.ndarray, flush: np.ndarray, ts: np.ndarray) -> None:
    """Add a batch's rows to ``counts`` by the flush each falls before (``flush`` sorted). A batch is
    written at a flush and its rows mostly lie between two: then its first and last row say where
    all of them go, and its millions of torch ops are not searched one by one. One that spans a few
    flushes is counted by a comparison with each of them (the rows at or before it), not searched."""
    if not len(ts):
        return
    first, last = np.searchsorted(flush, [ts.min(), ts.max()], "left")
    if first == last:
        counts[first] += len(ts)
    elif last - first <= _FEW_FLUSHES:
        # rows at or before flush j, for the flushes the batch spans: the counts between them
        upto = [np.count_nonzero(ts <= flush[j]) for j in range(first, last)]
        counts[first : last + 1] += np.diff(upto, prepend=0, append=len(ts))
    else:
        counts += np.bincount(np.searchsorted(flush, ts, "left"), minlength=len(counts))


def _stretches(marks: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
    """The detail stretches of a process: its session less the schedule's gaps. A process that
    starts after the run's origin (a spawned worker) has the gaps of the schedule before its start
    too (its joined clock is the run's): they lie outside its session, and so do its stretches."""
    ts, kind, ident = np.concatenate(marks, axis=1) if marks else np.zeros((3, 0), np.int64)
    starts, ends = ts[kind == S.SESSION_START], ts[kind == S.SESSION_END]
    start = int(starts.min()) if len(starts) else lo
    end = int(ends.max()) if len(ends) else hi
    detail = kind == S.DETAIL
    gaps = gaps_of(pa.table({"ts_ns": ts[detail], "kind": kind[detail], "id": ident[detail]}), end)
    inside = np.clip(np.column_stack([gaps.start, gaps.end]), start, max(start, end))
    inside = inside[inside[:, 1] > inside[:, 0]]
    edges = np.concatenate([[start], np.ravel(inside), [end]])
    out = edges.reshape(-1, 2)
    return out[out[:, 1] > out[:, 0]]


def _rows_of(d: DetailRows, budget: Budget) -> int:
    if budget == AUTO:
        return min(AUTO_ROWS, max(d.first_rows, FLOOR_ROWS))
    return int(budget)  # type: ignore[arg-type]


def choose_drops(details: list[DetailRows | None], offsets: list[int], budget: Budget) -> list[list[Drop]]:
    """Per process, the stretches of its detail the analysis leaves out (own clock; [] keeps it whole).

    ``offsets``: each process's clock offset onto the run's clock. Every process over its budget
    gives half of it to later stretches: as many whole ones as fit each process, evenly spaced, the
    same instants of the run in every process (time schedules share one origin). The rest goes to
    the first stretch, up to one instant ``C`` of the run: the earliest at which a process's first
    stretch fills what is left of its budget. Each process's cut lies on its own last flush at or
    before ``C`` (within a flush of the others'), where its detail and its aggregates split exactly.
    """
    known = [(i, d) for i, d in enumerate(details) if d is not None and len(d.stretches)]
    out: list[list[Drop]] = [[] for _ in details]
    if budget is None or not any(d.total > _rows_of(d, budget) for _, d in known):
        return out
    later = max((d.stretches[1:, 0] + offsets[i] for i, d in known), key=len)  # run-clock starts
    fits = []
    for _, d in known:  # the later stretches each process can afford in half its budget
        rows = [d.rows_in(a, b) for a, b in d.stretches[1:]]
        fits.append(int(_rows_of(d, budget) / 2 // max(max(rows, default=1), 1)))
    k = min(min(fits), len(later))
    # k of the n later stretches, each the middle one of its n/k: spread over the whole run
    chosen = later[np.unique(((np.arange(k) + 0.5) * len(later) / max(k, 1)).astype(np.int64))]
    cut_at: int | None = None  # the run instant C
    kept_later: dict[int, np.ndarray] = {}
    for i, d in known:
        starts = d.stretches[1:, 0] + offsets[i]
        pick = np.zeros(len(starts), bool)  # each chosen instant's nearest stretch (the same one
        if len(starts):  # in every process of a time schedule: they share its origin)
            pick[[int(np.abs(starts - t).argmin()) for t in chosen.tolist()]] = True
        kept_later[i] = pick
        used = sum(d.rows_in(a, b) for (a, b), p in zip(d.stretches[1:], pick, strict=True) if p)
        room = _rows_of(d, budget) - used
        first_end = int(d.stretches[0, 1])
        if d.first_rows > room:
            f = d.last_within(room, first_end)
            at = (f if f is not None else int(d.times[0])) + offsets[i]
            cut_at = at if cut_at is None else min(cut_at, at)
    for i, d in known:
        drops: list[Drop] = []
        stretches = d.stretches
        if cut_at is not None and cut_at - offsets[i] < stretches[0, 1]:
            k_f = int(np.searchsorted(d.times, cut_at - offsets[i], "right")) - 1
            c = int(d.times[max(k_f, 0)])
            if c < stretches[0, 1]:
                drops.append((c + 1, None))  # the rows at the flush itself are on its kept side
        for (a, _b), keep in zip(stretches[1:], kept_later[i], strict=True):
            if not keep:
                drops.append((int(a), None))
        out[i] = _on_flushes(_joined(drops, stretches), d)
    return out


def _on_flushes(drops: list[Drop], d: DetailRows) -> list[Drop]:
    """``drops`` moved so that each flush's aggregates lie wholly inside or outside every drop.

    A flush's aggregates cover the time since the flush before it; a process that did not flush for
    a whole gap between two stretches (starved of the CPU) has one flush over the end of the first
    and the start of the second. A drop that starts at the second's resume starts after the last
    flush before it instead (the kept stretch before loses its tail to the aggregates); one that
    ends there goes on to the next kept stretch that a flush in its gap precedes."""
    starts, ends = d.stretches[:, 0], d.stretches[:, 1]

    def stretch_at(t: int) -> int:
        """The index of the stretch that resumes at ``t`` (0: none, or the first)."""
        j = int(np.searchsorted(starts, t))
        return j if j < len(starts) and int(starts[j]) == t else 0

    def flush_at_or_before(t: int) -> int | None:
        k = int(np.searchsorted(d.times, t, "right")) - 1
        return int(d.times[k]) if k >= 0 else None

    def flushed_in_gap(b: int) -> bool:
        """Whether the process flushed after the stretch before the one that resumes at ``b`` (a
        flush at ``b`` itself lies in a drop that ends there, drops.as_left_out)."""
        j = stretch_at(b)
        f = flush_at_or_before(b)
        return j == 0 or (f is not None and f >= ends[j - 1])

    if not drops:
        return drops
    later = starts[1:]
    first = np.asarray([a for a, _ in drops], np.int64)
    last = np.asarray([2**63 - 1 if b is None else b for _, b in drops], np.int64)
    k = np.maximum(np.searchsorted(first, later, "right") - 1, 0)
    kept = later[~((later >= first[k]) & (later < last[k]))]  # the kept stretches' resumes
    out: list[Drop] = []
    for a, b in drops:
        j = stretch_at(a)
        f = flush_at_or_before(a)
        if j and (f is None or f < ends[j - 1]):
            a = f + 1 if f is not None else int(starts[0])
        while b is not None and not flushed_in_gap(b):
            after = int(np.searchsorted(kept, b, "right"))
            b = int(kept[after]) if after < len(kept) else None
        if out and (out[-1][1] is None or a <= out[-1][1]):  # it reaches the drop before it: one drop
            a0, b0 = out.pop()
            a, b = min(a, a0), None if b is None or b0 is None else max(b, b0)
        out.append((a, b))
    return out


def _joined(drops: list[Drop], stretches: np.ndarray) -> list[Drop]:
    """Drops that follow each other merged, each ending where the next kept stretch starts (None:
    at the process's end)."""
    starts = sorted(a for a, _ in drops)
    kept = [int(a) for a, _ in stretches[1:] if int(a) not in starts]
    out: list[Drop] = []
    for a in starts:
        if out and not any(out[-1][0] < s <= a for s in kept):
            continue  # inside the drop before it
        out.append((a, next((s for s in kept if s > a), None)))
    return out
