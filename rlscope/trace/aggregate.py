"""The writer's fold of event rows into the whole run's aggregates, and its detail cuts.

Every flush hands the rows recorded since the last one to :meth:`Aggregator.fold`. It returns
the rows to keep as events (those inside detail stretches, rlscope/trace/detail.py, plus the
session and cut rows) and the aggregate rows of the interval (schema.AGGREGATE_COLUMNS): per
thread, window mode and state, the exclusive time, the boundaries that ran in it and what they
measured they cost; per operation, the calls that ended and their inclusive time. So a run of any
length costs a bounded trace, and the whole run is still accounted for.

The fold is vectorized like the analysis's timeline (rlscope/analysis/timeline.py): the state after
each row is forward-filled along its thread, starting from the state the thread was left in at
the last flush. What it carries from flush to flush is bounded by the threads and the scopes
open at once, not by the run's length.

At a detail pause it writes a ``DETAIL`` pause row; at the resume a ``DETAIL`` resume row, then
the ends of the scopes that ended unrecorded and the begins of those that began unrecorded
(``FLAG_SUMMARIZED``), so the stretches join into one consistent timeline (rlscope/trace/glue.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading

import numpy as np

from rlscope import categories
from rlscope.trace import detail
from rlscope.trace import schema as S
from rlscope.trace.detail import NEVER, DetailSchedule
from rlscope.trace.spans import covered, union_per_thread
from rlscope.trace.states import state_after

# event columns of a row array (the native buffer's has the cost column as well)
TS, THREAD, KIND, ID, PARENT, NAME, FLAGS, COST = range(8)
_BEGINS = (S.OP_BEGIN, S.PHASE_BEGIN)
_ENDS = (S.OP_END, S.PHASE_END)
_BOUNDARY_KINDS = (S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.CAT_END, S.PHASE_BEGIN, S.PHASE_END)
PAST_ENDS = 100_000  # iteration ends kept from earlier folds (an iteration schedule's cuts)
_PSEUDO = -1  # the kind of the fold's own rows (a thread's carried state): never written


def _kinds(*kinds: int) -> np.ndarray:
    """A lookup table over ``kind + 1`` (the pseudo kind -1 included): faster than ``np.isin``."""
    table = np.zeros(max(S.WRITTEN_KINDS) + 2, bool)
    table[[k + 1 for k in kinds]] = True
    return table


_IS_OPEN = _kinds(S.OP_BEGIN, S.CAT_BEGIN, S.PHASE_BEGIN)
_IS_OP = _kinds(S.OP_BEGIN, S.OP_END)
_IS_CAT = _kinds(S.CAT_BEGIN, S.CAT_END)
_IS_PHASE = _kinds(S.PHASE_BEGIN, S.PHASE_END)
_IS_BEGIN = _kinds(*_BEGINS)
_IS_END = _kinds(*_ENDS)
_IS_BOUNDARY = _kinds(*_BOUNDARY_KINDS)
_IS_UNCUT = _kinds(*S.UNCUT_KINDS)


def _absent(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per entry of ``sorted_ids`` (sorted, unique): whether it is not among ``ids``."""
    out = np.ones(len(sorted_ids), bool)
    if len(sorted_ids) and len(ids):
        pos = np.searchsorted(sorted_ids, ids)
        hit = pos < len(sorted_ids)
        hit[hit] = sorted_ids[pos[hit]] == ids[hit]
        out[pos[hit]] = False
    return out


@dataclasses.dataclass
class _Open:
    """Scope instances (operations and phases) open at the end of the last fold, by id."""

    id: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    kind: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    thread: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    parent: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    name: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    flags: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    begin: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    FIELDS = ("id", "kind", "thread", "parent", "name", "flags", "begin")

    def select(self, keep: np.ndarray) -> _Open:
        return _Open(*(getattr(self, f)[keep] for f in self.FIELDS))

    def concat(self, other: _Open) -> _Open:
        return _Open(*(np.concatenate([getattr(self, f), getattr(other, f)]) for f in self.FIELDS))

    def sorted(self) -> _Open:
        return self.select(np.argsort(self.id, kind="stable"))

    def lookup(self, ids: np.ndarray, field: str, missing: int) -> np.ndarray:
        """``field`` of each of ``ids`` (this table sorted by id); ``missing`` where not found."""
        if not len(self.id):
            return np.full(len(ids), missing, np.int64)
        at = np.clip(np.searchsorted(self.id, ids), 0, len(self.id) - 1)
        return np.where(self.id[at] == ids, getattr(self, field)[at], missing)


class _Index:
    """Lookups of instances by id among those open before a fold (few, sorted) and those begun in
    it (many; ids from one counter, so nearly dense): a direct index for the new ones, a binary
    search only among the old ones. A search over all of them per row cost most of a fold."""

    def __init__(self, old: _Open, new: _Open) -> None:
        self.old, self.new = old, new
        self.lo, hi = (int(new.id.min()), int(new.id.max())) if len(new.id) else (0, -1)
        span = hi - self.lo + 1
        if span > 4 * len(new.id) + 4096:  # ids far apart (not one counter's): search them too
            self.old, self.new = old.concat(new).sorted(), _Open()
            self.lo, span = 0, 0
        self.pos = np.full(max(span, 0), -1, np.int64)
        self.pos[self.new.id - self.lo] = np.arange(len(self.new.id))

    def where(self, ids: np.ndarray) -> np.ndarray:
        """Each id's row among the new ones (-1: not begun in this fold)."""
        rel = ids - self.lo
        inside = (rel >= 0) & (rel < len(self.pos))
        out = np.full(len(ids), -1, np.int64)
        out[inside] = self.pos[rel[inside]]
        return out

    def lookup(self, ids: np.ndarray, field: str, missing: int) -> np.ndarray:
        at = self.where(ids)
        hit = at >= 0
        out = np.full(len(ids), missing, np.int64)
        out[hit] = getattr(self.new, field)[at[hit]]
        rest = ~hit & (ids >= 0)
        if len(self.old.id) <= 8:  # the few open before the fold (a phase, a long operation): by value
            values = getattr(self.old, field)
            for i, old_id in enumerate(self.old.id.tolist()):
                out[rest & (ids == old_id)] = values[i]
        elif rest.any():
            out[rest] = self.old.lookup(ids[rest], field, missing)
        return out

    def still_open(self, closed: np.ndarray) -> _Open:
        """The instances open after the fold (sorted by id): all of them but ``closed``."""
        gone = self.where(closed)
        keep_new = np.ones(len(self.new.id), bool)
        keep_new[gone[gone >= 0]] = False
        return self.old.select(_absent(self.old.id, closed)).concat(self.new.select(keep_new)).sorted()

    def table(self) -> _Open:
        """Every instance known to the fold, sorted by id (for the cuts: rare)."""
        return self.old.concat(self.new).sorted()


@dataclasses.dataclass
class Fold:
    """What one fold returns: event rows to write, and aggregate rows (an (n, columns) array)."""

    events: np.ndarray
    aggregates: np.ndarray


class Aggregator:
    """Folds one process's event rows into aggregates and cuts the detail kept (see module doc)."""

    def __init__(
        self,
        schedule: DetailSchedule,
        origin_ns: int,
        main_thread: int,
        width: int,
        stretch_rows: int | None = None,
    ) -> None:
        """``origin_ns``: the schedule's origin on the events' clock; ``width``: columns of a row
        (7, or 8 with the measured cost); ``stretch_rows``: the most rows a detail stretch holds
        (default ``detail.STRETCH_ROWS``; a schedule of ``all`` has no limit)."""
        self.schedule = schedule
        self.stretch_rows = detail.STRETCH_ROWS if stretch_rows is None else stretch_rows
        self._rows_in_stretch = 0
        # a stretch cut because it filled: from that time (events' clock) until the schedule's
        # position of its next change (the next stretch's start)
        self._full: tuple[int, int] | None = None
        self.origin_ns = origin_ns
        self.main_thread = main_thread
        self.width = width
        # per thread, the state it was left in: last row's time, operation, category, phase and
        # the collectors' window mode then
        self._threads: dict[int, tuple[int, int, int, int, int]] = {}
        self._open = _Open()
        self._window = S.WINDOW_LIGHT  # the collectors' window mode as of the last fold
        self._horizon = -(2**62)  # the last fold's time: cuts up to it are done
        self.lost_ns = 2**63 - 1  # when the events could no longer be written (detail_lost)
        self.end_ns = 2**63 - 1  # the session's end, once timed (session_ends)
        self._iterations = 0  # iterations of the outermost operation ended before this fold
        self._ends = np.zeros(0, np.int64)  # the times of those ending in this fold
        self._past = np.zeros(0, np.int64)  # the latest earlier ones (PAST_ENDS at most)
        self._paused: _Open | None = None  # the scopes open at the current pause (None: in detail)
        self._paused_cats: dict[int, int] = {}
        self.folded_rows = 0
        self.kept_rows = 0
        # compilations (compile_began/compile_ended): per thread the one in progress, and those ended
        # since the last fold; their time is the compile category in the aggregates (_compile_split)
        self._compiling: dict[int, int] = {}
        self._compiled: list[tuple[int, int, int]] = []
        self._compile_lock = threading.Lock()

    # -- compilations, from the compile collectors ---------------------------------------------
    def compile_began(self, thread: int, start: int) -> None:
        """A compilation began on ``thread`` at ``start`` (events' clock): a compile collector's call
        (collectors/torch_compile.py), on the compiling thread or any other."""
        with self._compile_lock:
            self._compiling[thread] = start

    def compile_ended(self, thread: int, end: int) -> None:
        """The compilation in progress on ``thread`` ended at ``end``."""
        with self._compile_lock:
            start = self._compiling.pop(thread, None)
        if start is not None:
            self.compiled(thread, start, end)

    def compiled(self, thread: int, start: int, end: int) -> None:
        """A compilation known once it ended (Triton's listener): of its time, what a fold has not
        taken yet is compile; what the last folds took before it was told stays as they counted it."""
        if end > start:
            with self._compile_lock:
                self._compiled.append((thread, start, end))

    def _compilations(self, until: int) -> list[tuple[int, int, int]]:
        """The compilations to fold up to ``until``: those ended since the last fold and those in
        progress (to ``until``); the ended ones are then done."""
        with self._compile_lock:
            out = self._compiled + [(t, s, until) for t, s in self._compiling.items() if s < until]
            self._compiled = []
        return out

    # -- the schedule on the events' clock --------------------------------------------------
    def _position(self, ts: np.ndarray) -> np.ndarray:
        """Each time's position in the schedule: ns since the origin, or the index of the iteration
        it falls in (an iteration's end row is its own; the outermost operation's ends on the
        main thread count them)."""
        if self.schedule.iterations:
            base = self._iterations - len(self._past)
            return base + np.searchsorted(np.concatenate([self._past, self._ends]), ts, "left")
        return ts - self.origin_ns

    def in_detail(self, ts: np.ndarray) -> np.ndarray:
        ts = np.asarray(ts, np.int64)
        sch = self.schedule
        if sch.whole_run:
            keep = np.ones(len(ts), bool)
        else:
            pos = self._position(ts)
            keep = sch.in_detail_each(pos)
            if self._full is not None:
                keep &= ~((ts >= self._full[0]) & (pos < self._full[1]))
        return keep & (ts < self.lost_ns)

    def detail_now(self) -> bool:
        """Whether detail is kept as of the last fold (an iteration schedule's session asks this)."""
        sch = self.schedule
        pos = self._iterations if sch.iterations else self._horizon - self.origin_ns
        return sch.whole_run or (sch.in_detail(pos) and not self.stretch_full(self._horizon))

    def stretch_full(self, t: int) -> bool:
        """Whether the detail stretch of time ``t`` (events' clock) was cut because it filled."""
        if self._full is None or t < self._full[0]:
            return False
        pos = self._iterations if self.schedule.iterations else t - self.origin_ns
        return pos < self._full[1]

    def _fill(self, kept: int, until: int, state: dict[str, np.ndarray]) -> np.ndarray | None:
        """Count a fold's kept rows (``kept``: events and the collectors' rows) against its stretch;
        the pause row when the stretch fills, at the fold's time ``until`` (None: not full)."""
        if self.schedule.whole_run or self._paused is not None:
            return None
        self._rows_in_stretch += kept
        if self._rows_in_stretch <= self.stretch_rows:
            return None
        # the position just after this fold (its iterations counted), and the schedule's next change
        pos = self._iterations + len(self._ends) if self.schedule.iterations else until - self.origin_ns
        self._full = (until, self.schedule.next_change(pos))
        return self._pause(until, state)

    def detail_lost(self, t: int) -> None:
        """The events can no longer be written (a write failed at ``t``): from then on every
        aggregate is summary, which the analysis adds to the detail written before."""
        self.lost_ns = min(self.lost_ns, t)

    def session_ends(self, t: int) -> None:
        """The session ended at ``t``. It hands its end row over later, after stopping its
        collectors (milliseconds), and a flush may come in between: the aggregates end at ``t``,
        as the detail does, so none counts that stop as the job's time."""
        self.end_ns = min(self.end_ns, t)

    def _cuts(self, until: int) -> list[int]:
        """Cut times in (horizon, until], on the events' clock."""
        return self._cut_times(self._horizon, until + 1)

    # -- the fold -----------------------------------------------------------------------------
    def fold(self, rows: np.ndarray, now: int, collected: int = 0) -> Fold:
        """Fold ``rows`` (append order; int64, ``width`` columns) recorded up to ``now``;
        ``collected``: the collectors' rows of the same flush (torch ops, GPU work), which count
        towards the stretch's rows (``stretch_rows``)."""
        rows = np.asarray(rows, np.int64).reshape(-1, self.width)
        top = (rows[:, KIND] == S.OP_END) & (rows[:, THREAD] == self.main_thread) & (rows[:, PARENT] == -1)
        self._ends = np.sort(rows[top, TS])  # this fold's iterations of the outermost operation
        end = np.flatnonzero(rows[:, KIND] == S.SESSION_END)
        end_at = int(rows[end[0], TS]) if len(end) else None
        until = end_at if end_at is not None else max(now, int(rows[:, TS].max(initial=now)))
        until = min(until, self.end_ns)
        cuts = self._cuts(until)
        self.folded_rows += len(rows)
        state, aggregates = self._table(rows, until)
        events = self._events(rows, state, cuts, end_at)
        full = self._fill(len(events) + collected, until, state) if end_at is None else None
        if full is not None:
            events = np.concatenate([events, full])
        self._horizon = max(self._horizon, until)
        # the ends a thread's carried segment may still span (bounded: an idle thread's segment
        # older than PAST_ENDS iterations is split at the recent cuts only)
        oldest = min((st[0] for st in self._threads.values()), default=until)
        past = np.concatenate([self._past, self._ends])
        self._past = past[past >= oldest][-PAST_ENDS:]
        self._iterations += len(self._ends)
        self._ends = self._ends[:0]
        self.kept_rows += len(events)
        return Fold(events, aggregates)

    def _table(self, rows: np.ndarray, stamp: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Rows with each thread's carried state, sorted per thread; the state after each, and the
        aggregate rows (stamped ``stamp``). Updates the carried state."""
        n = len(rows)
        threads = _threads(rows[:, THREAD]) if n else np.zeros(0, np.int64)
        known = np.array(sorted(set(self._threads) | set(threads.tolist())), np.int64)
        carried = [t for t in known.tolist() if t in self._threads]
        # pseudo rows: each carried thread's state at its last row, first among its rows
        c_ts = np.array([self._threads[t][0] for t in carried], np.int64)
        ts = np.concatenate([c_ts, rows[:, TS]])
        thread = np.concatenate([np.asarray(carried, np.int64), rows[:, THREAD]])
        kind = np.concatenate([np.full(len(carried), _PSEUDO), rows[:, KIND]])
        seq = np.concatenate([np.full(len(carried), -1), np.arange(n)])
        # a thread's rows are in time order already, its carried state first: group by thread
        dense = np.searchsorted(known, thread)
        order = np.argsort(dense.astype(np.int16 if len(known) < 2**15 else np.int32), kind="stable")
        ts, thread, kind, seq = ts[order], thread[order], kind[order], seq[order]
        is_carry = seq == -1
        is_real = ~is_carry
        if carried:
            # a row timed before the last fold's time but handed over after it (its thread appended
            # it as the writer drained): it takes effect at that time, whose state is already counted
            group_first = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])
            floor = np.where(is_carry[group_first], ts[group_first], np.iinfo(np.int64).min)
            ts = np.maximum(ts, np.repeat(floor, np.diff(np.r_[group_first, len(ts)])))
        ts = np.minimum(ts, self.end_ns)  # what comes after the session's end is not the run's
        src = np.where(is_real, seq, 0)
        ident, parent, name, flags = (
            rows[src, c] if n else np.zeros(len(ts), np.int64) for c in (ID, PARENT, NAME, FLAGS)
        )
        cost = rows[src, COST] if n and self.width > COST else np.zeros(len(ts), np.int64)
        m = len(ts)
        first = np.ones(m, bool)
        first[1:] = thread[1:] != thread[:-1]
        last = np.ones(m, bool)
        last[:-1] = first[1:]
        # the state after each row: carried rows set all three, begins their id, ends their parent
        c_op = np.zeros(m, np.int64)
        c_cat = np.full(m, categories.PYTHON, np.int64)
        c_phase = np.zeros(m, np.int64)
        if carried:
            where = np.flatnonzero(is_carry)
            st = np.array([self._threads[t][1:4] for t in thread[where].tolist()], np.int64).reshape(-1, 3)
            c_op[where], c_cat[where], c_phase[where] = st[:, 0], st[:, 1], st[:, 2]
        k1 = kind + 1  # the lookup tables' index (kinds are validated small ints, the pseudo one -1)
        after = np.where(_IS_OPEN[k1], ident, parent)
        op = state_after(
            is_carry | _IS_OP[k1],
            np.where(is_carry, c_op, after),
            first,
            -1,
        )
        cat = state_after(
            is_carry | _IS_CAT[k1],
            np.where(is_carry, c_cat, after),
            first,
            categories.PYTHON,
        )
        phase = state_after(
            is_carry | _IS_PHASE[k1],
            np.where(is_carry, c_phase, after),
            first,
            -1,
        )
        dur = np.zeros(m, np.int64)
        dur[:-1] = np.maximum(ts[1:] - ts[:-1], 0)
        # a thread's last state lasts to the fold's time: each flush's aggregates end there, so the
        # detail budget's cut at a flush (rlscope/trace/budget.py) splits the run exactly
        dur[last] = np.maximum(stamp - ts[last], 0)
        # the collectors' window mode, and summary outside the detail stretches
        win_ts, win_mode = [self._horizon], [self._window]
        w = is_real & (kind == S.WINDOW)
        if w.any():
            wo = np.argsort(ts[w], kind="stable")
            win_ts += ts[w][wo].tolist()
            win_mode += ident[w][wo].tolist()
            self._window = int(win_mode[-1])
        mode = np.asarray(win_mode, np.int64)[np.clip(np.searchsorted(win_ts, ts, "right") - 1, 0, None)]
        if carried:  # a thread's carried segment began in the mode of its time, maybe folds ago
            mode[is_carry] = [self._threads[t][4] for t in thread[is_carry].tolist()]
        window_mode = mode
        mode = np.where(self.in_detail(ts), window_mode, S.MODE_SUMMARY)
        # names of the instances: open before this fold, or begun in it
        begun = _IS_BEGIN[k1]
        new = _Open(
            id=ident[begun],
            kind=kind[begun],
            thread=thread[begun],
            parent=parent[begun],
            name=name[begun],
            flags=flags[begun],
            begin=ts[begun],
        )
        table = _Index(self._open, new)
        op_name = table.lookup(op, "name", -1)
        phase_name = table.lookup(phase, "name", -1)
        # boundaries: their count and post-cost on the segment they open, pre-cost on the one before
        bound = _IS_BOUNDARY[k1]
        pre, post = cost & 0xFFFFFFFF, cost >> 32
        seg_cost = np.where(bound, post, 0)
        prev_ok = np.zeros(m, bool)
        prev_ok[1:] = ~first[1:]
        give = np.flatnonzero(bound & prev_ok & (pre > 0))
        seg_cost[give - 1] += pre[give]  # distinct rows: each boundary gives to the one before it
        keys = np.stack([thread, mode, phase_name, op_name, cat])
        values = np.stack([dur, np.zeros(m, np.int64), bound.astype(np.int64), seg_cost])
        keys, values, seg_ts, seg_window = _compile_split(
            keys, values, ts, window_mode, self._compilations(stamp)
        )
        # a compilation's piece takes the mode of its own start, not its segment's: one begun after a
        # detail stretch ended, in an operation begun inside it, is time between the stretches
        if len(seg_ts) > m:
            keys[1, m:] = np.where(self.in_detail(seg_ts[m:]), seg_window[m:], S.MODE_SUMMARY)
        keys, values = self._split_at_cuts(keys, values, seg_ts, seg_window)
        # off the main thread only operations are work (the analysis's rule), and the writer's own
        # flushes (their stall is corrected): an idle thread's time is not kept, flush after flush
        counted = (keys[0] == self.main_thread) | (keys[3] >= 0) | (keys[4] == categories.PROFILER)
        time_rows = _group(keys, values, keep=counted & ((values[0] > 0) | (values[2] > 0)))
        # calls: operations that ended, with their inclusive time
        ended = is_real & (kind == S.OP_END)
        e_ts, e_id = ts[ended], ident[ended]
        b_ts = table.lookup(e_id, "begin", -1)
        b_flags = table.lookup(e_id, "flags", 0)
        incl = np.where((b_ts >= 0) & ((b_flags & S.FLAG_RECURSIVE) == 0), np.maximum(e_ts - b_ts, 0), 0)
        call_rows = _group(
            np.stack(
                [
                    thread[ended],
                    mode[ended],
                    phase_name[ended],
                    name[ended],
                    np.full(ended.sum(), S.AGGREGATE_CALLS),
                ]
            ),
            np.stack(
                [
                    incl,
                    np.ones(len(e_ts), np.int64),
                    np.zeros(len(e_ts), np.int64),
                    np.zeros(len(e_ts), np.int64),
                ]
            ),
            keep=np.ones(len(e_ts), bool),
        )
        # what is carried to the next fold: each thread's last state, the instances still open
        closed = ident[_IS_END[k1]]
        self._open = table.still_open(closed)
        for i in np.flatnonzero(last).tolist():
            self._threads[int(thread[i])] = (
                max(int(ts[i]), stamp),
                int(op[i]),
                int(cat[i]),
                int(phase[i]),
                int(window_mode[i]),
            )
        now_col = np.full(len(time_rows) + len(call_rows), stamp, np.int64)
        agg = np.concatenate([time_rows, call_rows]) if len(call_rows) else time_rows
        aggregates = (
            np.column_stack([now_col, agg]) if len(agg) else np.zeros((0, len(S.AGGREGATE_COLUMNS)), np.int64)
        )
        state = {
            "ts": ts,
            "thread": thread,
            "kind": kind,
            "ident": ident,
            "cat": cat,
            "table": table,
        }
        return state, aggregates

    def _split_at_cuts(
        self, keys: np.ndarray, values: np.ndarray, ts: np.ndarray, window_mode: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Segments that span a detail cut, split there: each piece takes the mode of its start."""
        if self.schedule.whole_run or not len(ts):
            return keys, values
        dur = values[0]
        cuts = np.asarray(self._cut_times(int(ts.min()), int((ts + dur).max())), np.int64)
        if not len(cuts):
            return keys, values
        lo = np.searchsorted(cuts, ts, "right")
        hi = np.searchsorted(cuts, ts + dur, "left")
        extra_keys, extra_values = [], []
        for i in np.flatnonzero(hi > lo).tolist():
            points = [int(ts[i]), *cuts[lo[i] : hi[i]].tolist(), int(ts[i] + dur[i])]
            values[0, i] = points[1] - points[0]
            for a, b in itertools.pairwise(points[1:]):
                k = keys[:, i].copy()
                k[1] = window_mode[i] if self.in_detail(np.array([a]))[0] else S.MODE_SUMMARY
                extra_keys.append(k)
                extra_values.append(np.array([b - a, 0, 0, 0], np.int64))
        if not extra_keys:
            return keys, values
        return (
            np.concatenate([keys, np.stack(extra_keys, axis=1)], axis=1),
            np.concatenate([values, np.stack(extra_values, axis=1)], axis=1),
        )

    def _cut_times(self, lo: int, hi: int) -> list[int]:
        """Cut times in (lo, hi), on the events' clock: where ``in_detail`` changes."""
        sch = self.schedule
        if sch.whole_run:
            return []
        if sch.iterations:  # at the end row of the last iteration before a change
            base = self._iterations - len(self._past)
            ends = np.concatenate([self._past, self._ends]).tolist()
            return [
                int(t)
                for k, t in enumerate(ends)
                if lo < t < hi and sch.in_detail(base + k) != sch.in_detail(base + k + 1)
            ]
        out = []
        t = max(lo, self.origin_ns - 1)
        while True:
            nxt = sch.next_change(t - self.origin_ns + 1)
            if nxt >= NEVER or self.origin_ns + nxt >= hi:
                return out
            t = self.origin_ns + nxt
            out.append(t)

    @staticmethod
    def _open_at(state: dict[str, np.ndarray], t: int) -> _Open:
        """The scopes open at ``t`` within the fold's span (``state``: :meth:`_table`'s)."""
        table = state["table"].table()  # type: ignore[union-attr]
        ts, kind, ident = state["ts"], state["kind"], state["ident"]
        begun_after = _IS_BEGIN[kind + 1] & (ts > t)
        ended_by = _IS_END[kind + 1] & (ts <= t)
        out = ~np.isin(table.id, ident[begun_after]) & ~np.isin(table.id, ident[ended_by])
        return table.select(out)

    def _cats_at(self, state: dict[str, np.ndarray], t: int) -> dict[int, int]:
        """Each thread's category at ``t`` (the last row of its at or before ``t``)."""
        ts, thread, cat = state["ts"], state["thread"], state["cat"]
        before = np.flatnonzero(ts <= t)
        # rows are grouped by thread, in time order: each thread's last row at or before t
        last = before[np.append(thread[before][1:] != thread[before][:-1], True)] if len(before) else before
        return dict(zip(thread[last].tolist(), cat[last].tolist(), strict=True))

    def _events(
        self, rows: np.ndarray, state: dict[str, np.ndarray], cuts: list[int], end_at: int | None
    ) -> np.ndarray:
        """The rows to write: those in detail, the session's, and the cut rows."""
        keep = self.in_detail(rows[:, TS])
        if not keep.all():
            keep |= _IS_UNCUT[rows[:, KIND] + 1]
        out = [rows if keep.all() else rows[keep]]
        started = np.flatnonzero(rows[:, KIND] == S.SESSION_START)
        if len(started) and self._paused is None:  # a session that starts between detail stretches
            t = int(rows[started[0], TS])
            if not self.in_detail(np.array([t]))[0]:
                out.append(self._pause(t, state))
        for cut in cuts:
            # the state just after the cut (an iteration's end row still belongs to it)
            resumes = bool(self.in_detail(np.array([cut + 1]))[0])
            if resumes and self._paused is not None:
                out.append(self._resume(cut, state))
            elif not resumes and self._paused is None:
                out.append(self._pause(cut, state))
        if end_at is not None and self._paused is not None:  # the session ended unrecorded
            out.append(self._resume(end_at, state))
        events = np.concatenate(out) if len(out) > 1 else out[0]
        if len(out) > 1:  # the cut rows among the others, in time order (stable: ends before begins)
            events = events[np.argsort(events[:, TS], kind="stable")]
        return events

    def _pause(self, t: int, state: dict[str, np.ndarray]) -> np.ndarray:
        """Detail stops at ``t``: remember what is open, for the resume."""
        self._paused = self._open_at(state, t)
        self._paused_cats = self._cats_at(state, t)
        return self._row(t, self.main_thread, S.DETAIL, S.DETAIL_PAUSE, -1, -1, 0)

    def _resume(self, t: int, state: dict[str, np.ndarray]) -> np.ndarray:
        """Rows at a detail resume at ``t``: the resume, then ends and begins of what changed."""
        paused, self._paused = self._paused, None
        assert paused is not None
        self._full, self._rows_in_stretch = None, 0  # a new stretch
        now = self._open_at(state, t)
        rows = [self._row(t, self.main_thread, S.DETAIL, S.DETAIL_RESUME, -1, -1, 0)]
        gone = paused.select(~np.isin(paused.id, now.id))
        for i in np.argsort(-gone.begin, kind="stable").tolist():  # innermost first
            end_kind = S.OP_END if gone.kind[i] == S.OP_BEGIN else S.PHASE_END
            rows.append(
                self._row(
                    t, gone.thread[i], end_kind, gone.id[i], gone.parent[i], gone.name[i], S.FLAG_SUMMARIZED
                )
            )
        cats_then, cats_now = self._paused_cats, self._cats_at(state, t)
        for th in sorted(set(cats_then) | set(cats_now)):
            a, b = cats_then.get(th, categories.PYTHON), cats_now.get(th, categories.PYTHON)
            if a != b:
                if a != categories.PYTHON:
                    rows.append(self._row(t, th, S.CAT_END, a, categories.PYTHON, -1, 0))
                if b != categories.PYTHON:
                    rows.append(self._row(t, th, S.CAT_BEGIN, b, categories.PYTHON, -1, 0))
        came = now.select(~np.isin(now.id, paused.id))
        for i in np.argsort(came.begin, kind="stable").tolist():  # outermost first
            flags = (int(came.flags[i]) & S.FLAG_RECURSIVE) | S.FLAG_SUMMARIZED
            rows.append(
                self._row(
                    t, came.thread[i], int(came.kind[i]), came.id[i], came.parent[i], came.name[i], flags
                )
            )
        rows.append(self._row(t, self.main_thread, S.WINDOW, self._window, -1, -1, 0))
        return np.concatenate(rows)

    def _row(
        self, ts: int, thread: int, kind: int, ident: int, parent: int, name: int, flags: int
    ) -> np.ndarray:
        row = np.zeros((1, self.width), np.int64)
        row[0, :7] = (ts, thread, kind, ident, parent, name, flags)
        return row


_COMPILED_CATEGORIES = (categories.PYTHON, categories.SIMULATOR)  # what a compilation's time had been


def _compile_split(
    keys: np.ndarray,
    values: np.ndarray,
    ts: np.ndarray,
    window_mode: np.ndarray,
    compilations: list[tuple[int, int, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Segments (``keys`` by column: thread, mode, phase, operation, category; ``values``: duration
    first) with the time a compilation ran in as the compile category: a segment of python or
    simulator time on the compiling thread is split at the compilations' starts and ends, its parts
    inside one ``compile``. The events do not say it (a compilation sets no category boundary: it is
    an interval of compile.arrows); without it, the aggregates, which stand for the run between the
    detail stretches and feed the live view, would count a compilation as its operation's Python.

    Returns keys, values and each segment's start and window mode, the pieces appended."""
    if not compilations or not len(ts):
        return keys, values, ts, window_mode
    extra: list[tuple[int, int, int, int]] = []  # (segment, start, end, category)
    # per thread its compilations' time as disjoint spans: one nested in another (a Triton kernel's
    # inside a torch.compile frame) counts once
    threads, starts, ends = union_per_thread(*np.array(compilations, np.int64).T)
    dur = values[0]
    for thread in np.unique(threads).tolist():
        s, e = starts[threads == thread], ends[threads == thread]
        mine = np.flatnonzero((keys[0] == thread) & np.isin(keys[4], _COMPILED_CATEGORIES))
        # the segments a span overlaps (vectorized: a fold holds many, a compilation meets few)
        mine = mine[covered(s, e, ts[mine] + dur[mine]) > covered(s, e, ts[mine])]
        pairs = list(zip(s.tolist(), e.tolist(), strict=True))
        for i in mine.tolist():
            a, b = int(ts[i]), int(ts[i] + dur[i])
            inside = [(max(a, lo), min(b, hi)) for lo, hi in pairs if lo < b and hi > a]
            was = int(keys[4, i])
            pieces, at = [], a
            for lo, hi in inside:
                pieces += [(at, lo, was), (lo, hi, categories.COMPILE)]
                at = hi
            pieces = [p for p in [*pieces, (at, b, was)] if p[1] > p[0]]
            # the segment keeps its first piece (and its boundaries' count and cost)
            values[0, i] = pieces[0][1] - pieces[0][0]
            keys[4, i] = pieces[0][2]
            extra += [(i, x, y, c) for x, y, c in pieces[1:]]
    if not extra:
        return keys, values, ts, window_mode
    idx = np.array([e[0] for e in extra], np.int64)
    k = keys[:, idx].copy()
    k[4] = [e[3] for e in extra]
    v = np.zeros((values.shape[0], len(extra)), np.int64)
    v[0] = [e[2] - e[1] for e in extra]
    return (
        np.concatenate([keys, k], axis=1),
        np.concatenate([values, v], axis=1),
        np.concatenate([ts, np.array([e[1] for e in extra], np.int64)]),
        np.concatenate([window_mode, window_mode[idx]]),
    )


def _threads(column: np.ndarray) -> np.ndarray:
    """The distinct threads of a fold's rows, sorted: nearly all rows are one thread's (the main
    one's), so the others are found first and only they are sorted."""
    first = column[0]
    others = column[column != first]
    if not len(others):
        return column[:1].copy()
    return np.unique(np.concatenate([column[:1], others]))


def _dense(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, each entry's index among them) of small-range ints, without a sort."""
    lo = int(row.min())
    span = int(row.max()) - lo + 1
    if span > 1 << 16:
        values, idx = np.unique(row, return_inverse=True)
        return values, idx.reshape(-1)
    present = np.zeros(span, bool)
    present[row - lo] = True
    index = np.cumsum(present) - 1
    return np.flatnonzero(present) + lo, index[row - lo]


def _group(keys: np.ndarray, values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Sum ``values`` (4 rows) over distinct ``keys`` (5 rows: thread, mode, phase, operation,
    category) of the kept columns; one row per key: keys then sums.

    Each key row is mapped to dense indices (its values are small ints: names, categories, modes, a
    handful of threads) and the indices are combined into one code, summed with ``np.bincount``:
    no sort, where ``np.unique`` over the rows took a third of a fold. float64 sums of int64 ns are
    exact up to 2**53 ns (104 days) per key and flush.
    """
    if not keep.all():
        keys, values = keys[:, keep], values[:, keep]
    if not keys.shape[1]:
        return np.zeros((0, 9), np.int64)
    code = np.zeros(keys.shape[1], np.int64)
    distinct = []
    size = 1
    for row in keys:
        vals, idx = _dense(row)
        distinct.append(vals)
        code = code * len(vals) + idx
        size *= len(vals)
    if size <= 1 << 20:
        seen = np.flatnonzero(np.bincount(code, minlength=size))
        inverse = np.searchsorted(seen, code)
    else:  # many distinct keys at once: sort them
        seen, inverse = np.unique(code, return_inverse=True)
        inverse = inverse.reshape(-1)
    out_keys = np.empty((len(distinct), len(seen)), np.int64)
    rest = seen.copy()
    for k in range(len(distinct) - 1, -1, -1):
        rest, at = np.divmod(rest, len(distinct[k]))
        out_keys[k] = distinct[k][at]
    sums = [np.rint(np.bincount(inverse, weights=v, minlength=len(seen))).astype(np.int64) for v in values]
    return np.concatenate([out_keys, np.stack(sums)]).T
