"""Checks and repairs of one process's events: what every analysis and ``rlscope-analyze check`` read.

The analysis relies on what the writer guarantees: known kinds, each row once, one thread's rows in
time order, every operation and phase ended on the thread that began it, nested as recorded, valid
category codes and flags. A damaged file (a flipped bit, a batch written twice, a stretch
overwritten, a clock gone wrong) breaks these, and an analysis of it would fail, loop, or report a
negative wall or an operation longer than its run without a word. So the reader passes every
process's events through :func:`validate_events`: each check is a few vectorized passes over the
columns (no Python loop per event); each repair drops or changes the fewest rows that make the table
what the analysis relies on; and each one is a :class:`Finding` naming the process, the time span and
what was dropped or changed. The reader turns the findings into the process's warnings (so into the
result's), and ``rlscope-analyze check`` lists the same findings: one validation for both.

An intact table passes unchanged (the same object): one C pass over the rows (rlscope/trace/native)
confirms it intact where it can (checking everything the checks below check), and only a table it
does not confirm goes through them. Repairs, in order:

- rows of an unknown kind, of a negative or impossibly large time, an operation or phase row with a
  negative instance or name id, a category code or a window mode that does not exist: dropped;
- copies (a batch written twice): a row out of time order equal in every column to an earlier row,
  and an operation or phase row repeating an instance id: the later one dropped;
- a thread's rows out of time order: a single row out of line with both neighbours dropped, the
  rest put back in time order (a batch written out of order);
- no session start row at or before the last session end row: all start and end rows dropped,
  and the run spans its first to its last row;
  rows after the session's end: clipped to it;
- operation and phase ends with no begin, or not on their begin's thread, after it, of its name:
  dropped; an end's parent differing from its begin's: set to the begin's;
- a begin whose parent is no instance begun earlier on its thread: its parent set to what was open;
- begins never ended: closed (a row flagged closed by rlscope) where their thread left them, the
  first row after which neither they nor anything inside them is open; those still open at the end
  of a session that ended normally are left to the analysis, which closes them at the end of the
  data, and said;
- unknown flag bits cleared, the recursive flag set as the nesting says, measured costs that do not
  fit between a row and its neighbours set to 0 (not measured: the calibrated cost applies);
- instance ids spread far wider than the rows could number: renumbered in order (the analysis
  sizes arrays by them); no window row: a full one added where the session starts (the analysis
  reads the collectors' mode from them).

What stays inconsistent after that (a category or nesting row that contradicts the rows before it)
is said, not repaired: its time is counted as the rows say, and the finding says where.
:func:`validate_table` does the same for the collectors' tables (GPU records, torch ops, ...).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.keys import factorize
from rlscope.trace import native
from rlscope.trace import schema as S

__all__ = ["MAX_TS_NS", "Finding", "inside_same_name", "validate_events", "validate_table"]

# No clock the trace records (perf_counter_ns, CLOCK_MONOTONIC: time since boot) reaches 2**60 ns
# (36 years); beyond it a timestamp is damage, and sums with the Unix anchor (about 2**61) would wrap
MAX_TS_NS = 1 << 60
_KNOWN_FLAGS = S.FLAG_RECURSIVE | S.FLAG_FORCED_CLOSE | S.FLAG_SUMMARIZED
_CATEGORY_CODES = np.array(sorted(categories.CATEGORY_NAMES), np.int64)
# the codes as a lookup table, True at each code; its last entry (False) stands for every other value
_CATEGORY_OK = np.zeros(int(_CATEGORY_CODES.max()) + 2, bool)
_CATEGORY_OK[_CATEGORY_CODES] = True
_EXAMPLES = 4  # values, threads named in a finding before "..."


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing worth knowing about a trace: ``error`` (damage: the analysis dropped or changed
    rows, as the message says), ``warning`` or ``info``. ``span_ns``: where, on the process's clock."""

    level: str
    where: str
    message: str
    span_ns: tuple[int, int] | None = None

    def __str__(self) -> str:
        return f"{self.level}: {self.where}: {self.message}"

    @property
    def warning(self) -> str:
        """The line the analysis result carries in its warnings."""
        return f"{self.where}: {self.message}"


_SCOPED = (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END)
assert min(_SCOPED) >= 0 and max(_SCOPED) < 8  # _drop_repeats packs a kind into three bits


def _among(values: np.ndarray, codes: tuple[int, ...]) -> np.ndarray:
    """``np.isin`` for a few codes: one comparison per code, where np.isin sorts (millions of rows)."""
    out = values == codes[0]
    for code in codes[1:]:
        out |= values == code
    return out


# the written kinds as a lookup table indexed by the kind's byte: one pass, no sort (np.isin's)
_KIND_OK = np.zeros(256, bool)
_KIND_OK[list(S.WRITTEN_KINDS)] = True


def _category_code(values: np.ndarray) -> np.ndarray:
    """``np.isin(values, _CATEGORY_CODES)`` for int64 values, by the lookup table: one pass, where
    np.isin compares once per code. A negative value, read as unsigned, is past the table's end too."""
    return _CATEGORY_OK[np.minimum(values.view(np.uint64), len(_CATEGORY_OK) - 1)]


# whether the written kinds are 0 to their largest (below 128): then an int8 kind read as its byte
# (a negative one past 127) is unknown when above it, one comparison where a lookup by the byte
# takes ten times as long
_LAST_KIND = max(S.WRITTEN_KINDS)
_KINDS_FROM_0 = set(S.WRITTEN_KINDS) == set(range(_LAST_KIND + 1)) and _LAST_KIND < 128


def _unknown_kind(kind: np.ndarray) -> np.ndarray:
    if kind.dtype == np.int8 and _KINDS_FROM_0:  # the writer's type
        return kind.view(np.uint8) > _LAST_KIND
    return ~_KIND_OK[kind.astype(np.uint8)] | (kind < 0) | (kind > 255)


def _no_clock(ts: np.ndarray) -> np.ndarray:
    """Timestamps no clock the trace records gives (MAX_TS_NS). On int64 times one comparison of their
    bits as unsigned (a negative time reads as 2**63 or more), where two and an or make two temporaries."""
    if ts.dtype == np.int64:
        return ts.view(np.uint64) >= MAX_TS_NS
    return (ts < 0) | (ts >= MAX_TS_NS)


def _any_no_clock(ts: np.ndarray) -> bool:
    """``_no_clock(ts).any()`` by reductions, without a mask (int64 times: one maximum of their bits
    as unsigned)."""
    if not len(ts):
        return False
    if ts.dtype == np.int64:
        return int(ts.view(np.uint64).max()) >= MAX_TS_NS
    return int(ts.min()) < 0 or int(ts.max()) >= MAX_TS_NS


_BLOCK = 1 << 16  # rows compared at a time: a mask of them stays in cache, no mask of a whole column


def _any_less(a: np.ndarray, b: np.ndarray, less: np.ufunc = np.less) -> bool:
    """``less(a, b).any()`` (``a < b``) a block of rows at a time, into one small mask."""
    out = np.empty(min(len(a), _BLOCK), bool)
    for i in range(0, len(a), _BLOCK):
        m = less(a[i : i + _BLOCK], b[i : i + _BLOCK], out=out[: min(_BLOCK, len(a) - i)])
        if m.any():
            return True
    return False


def _unknown_mode(kind: np.ndarray, ident: np.ndarray) -> np.ndarray:
    """Window rows of a mode that does not exist. The modes are read at the window rows alone: a few
    in millions of rows."""
    bad = np.zeros(len(kind), bool)
    for window, modes in (
        (S.WINDOW, (S.WINDOW_LIGHT, S.WINDOW_FULL)),
        (S.DETAIL, (S.DETAIL_PAUSE, S.DETAIL_RESUME)),
    ):
        rows = np.flatnonzero(kind == window)
        bad[rows] = ~_among(ident[rows], modes)
    return bad


def _few(values: np.ndarray) -> str:
    """Up to _EXAMPLES distinct values, for a message."""
    u = np.unique(values)
    shown = ", ".join(str(int(v)) for v in u[:_EXAMPLES])
    return shown + (", ..." if len(u) > _EXAMPLES else "")


class _Table:
    """The events' columns as numpy arrays while they are checked: rows dropped, changed, added.

    Columns of the writer's types are read in place (read-only views of the Arrow buffers) until a
    check reorders or repairs them: an intact table is read, never copied. A column a repair writes
    into is made the table's own first (:meth:`writable`)."""

    def __init__(self, events: pa.Table, where: str, columns: dict[str, np.ndarray] | None = None) -> None:
        self.where = where
        self.names = events.column_names
        self.schema = events.schema
        self.c = columns if columns is not None else _columns(events)
        self.changed = False
        self.findings: list[Finding] = []
        ts = self.c["ts_ns"]
        if len(ts) and int(ts.view(np.uint64).max()) < MAX_TS_NS:  # every time plausible: no mask
            self.origin = int(ts.min())
        else:
            plausible = ~_no_clock(ts)
            self.origin = int(ts[plausible].min()) if plausible.any() else 0

    @property
    def c(self) -> dict[str, np.ndarray]:
        return self._c

    @c.setter
    def c(self, columns: dict[str, np.ndarray]) -> None:
        self._c = columns
        self._rows: dict[tuple[int, ...], np.ndarray] = {}
        self._stacks: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def rows(self, *kinds: int) -> np.ndarray:
        """Indices of the rows of these kinds, in row order (not to be written into). Several checks
        read the same kinds' rows: found once per set of rows (rows dropped, added or reordered
        replace ``c``, and with it these)."""
        if kinds not in self._rows:
            self._rows[kinds] = np.flatnonzero(_among(self._c["kind"], kinds))
        return self._rows[kinds]

    def stack(self, begin: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One stack's rows (:meth:`rows`), which of them are begins, and which are their thread's
        first (rows grouped by thread): read by the checks that only say. Kinds and threads are never
        written in place, so these hold until ``c`` is replaced."""
        if (begin, end) not in self._stacks:
            rows = self.rows(begin, end)
            is_begin = self._c["kind"][rows] == begin
            self._stacks[begin, end] = rows, is_begin, _boundaries(self._c["thread"][rows])[0]
        return self._stacks[begin, end]

    def writable(self, name: str) -> np.ndarray:
        """Column ``name``, made the table's own (a copy of a read-only view) before a repair writes it."""
        values = self._c[name]
        if not values.flags.writeable:
            values = self._c[name] = values.copy()
        return values

    def __len__(self) -> int:
        return len(self.c["ts_ns"])

    def span_text(self, ts: np.ndarray) -> str:
        """Where rows are, in seconds since the process's first event."""
        ts = ts[~_no_clock(ts)]
        if not len(ts):
            return "at times no clock gives"
        a, b = (int(ts.min()) - self.origin) / 1e9, (int(ts.max()) - self.origin) / 1e9
        return f"at {a:.6g} s" if a == b else f"between {a:.6g} s and {b:.6g} s"

    def threads_text(self, rows: np.ndarray) -> str:
        threads = self.c["thread"][rows]
        label = "thread" if len(np.unique(threads)) == 1 else "threads"
        return f"{label} {_few(threads)}"

    def say(self, rows: np.ndarray, message: str, level: str = "error") -> None:
        """A finding about ``rows`` (indices or a mask): the message, their threads and time span."""
        rows = np.flatnonzero(rows) if rows.dtype == bool else rows
        ts = self.c["ts_ns"][rows]
        ok = ts[~_no_clock(ts)]
        span = (int(ok.min()), int(ok.max())) if len(ok) else None
        text = f"{message} ({self.threads_text(rows)}, {self.span_text(ts)} into the process)"
        self.findings.append(Finding(level, self.where, text, span))

    def drop(self, mask: np.ndarray, message: str) -> None:
        """Drop the rows of ``mask`` (said first)."""
        if not mask.any():
            return
        self.say(mask, message)
        self.keep(~mask)

    def keep(self, mask: np.ndarray) -> None:
        self.c = {k: v[mask] for k, v in self.c.items()}
        self.changed = True
        if hasattr(self, "first"):
            self.first, self.last = _boundaries(self.c["thread"])

    def take(self, order: np.ndarray, change: bool = True) -> None:
        self.c = {k: v[order] for k, v in self.c.items()}
        self.changed |= change

    def group(self) -> None:
        """Rows grouped by thread, each thread's in file order: how the checks read them. Not a
        change: an intact table goes back as it came."""
        self.first, self.last = _boundaries(self.c["thread"])
        runs = _thread_runs(self.c["thread"], self.first)
        if runs is None:  # each thread's rows are together already
            return
        if len(runs) <= _RUN_SLICES:  # a few stretches of rows moved: copied as slices, no index
            pieces = runs.tolist()
            self.c = {k: np.concatenate([v[a:b] for a, b in pieces]) for k, v in self.c.items()}
        else:
            start, stop = runs[:, 0], runs[:, 1]
            at = np.cumsum(stop - start) - (stop - start)  # where each run goes
            self.take(np.arange(len(self)) + np.repeat(start - at, stop - start), change=False)
        self.first, self.last = _boundaries(self.c["thread"])

    def table(self) -> pa.Table:
        """The repaired rows in time order (stable: a thread's rows keep their order), as the writer
        appends rows of all threads."""
        order = np.argsort(self.c["ts_ns"], kind="stable")
        cols = [pa.array(self.c[f.name][order].astype(S.numpy_dtype(f.type)), f.type) for f in self.schema]
        return pa.Table.from_arrays(cols, schema=self.schema)


# the writer's type of each event column (schema.EVENT_COLUMNS_DOC, EVENT_COST_COLUMN): read as it is
_WRITTEN_TYPES = {c: np.dtype(t) for c, t, _ in [*S.EVENT_COLUMNS_DOC, S.EVENT_COST_COLUMN]}
# columns read only by comparison: any signed width compares as int64 would; the others (times, ids)
# enter sums and products, read as int64
_COMPARED = ("kind", "name", "flags")


def _columns(events: pa.Table) -> dict[str, np.ndarray]:
    return {k: _column(events.column(k), k) for k in events.column_names}


def _column(column: pa.ChunkedArray, name: str) -> np.ndarray:
    """An event column as the checks read it: its values in place where the writer's type (or a
    signed integer, for a column only compared), else as int64 (a column of another integer type:
    an older or damaged file), copied once."""
    values = column.to_numpy()
    kept = values.dtype == _WRITTEN_TYPES.get(name) or (name in _COMPARED and values.dtype.kind == "i")
    return values if kept else values.astype(np.int64)


_RUN_SLICES = 4096  # up to this many runs of one thread's rows, grouping copies slices of the columns


def _thread_runs(thread: np.ndarray, first: np.ndarray) -> np.ndarray | None:
    """The runs of rows of one thread (``first``: where each starts), as (start, stop) rows in the
    order that groups them: threads by first appearance, each thread's runs in file order. None when
    each thread has one run (the rows are grouped already).

    Found from the runs alone (a thread's first row starts a run): a hash of the runs' threads and a
    stable sort of the runs, where a sort of every row would take ten times as long."""
    import pyarrow.compute as pc

    starts = np.flatnonzero(first)
    col = pa.array(thread[starts])
    threads = pc.unique(col)
    if len(starts) == len(threads):
        return None
    order = np.argsort(pc.index_in(col, value_set=threads).to_numpy(), kind="stable")
    bounds = np.append(starts, len(thread))
    return np.stack([bounds[:-1][order], bounds[1:][order]], axis=1)


def _boundaries(thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) masks of each thread's rows, for rows grouped by thread."""
    n = len(thread)
    first = np.ones(n, bool)
    first[1:] = thread[1:] != thread[:-1]
    last = np.ones(n, bool)
    last[:-1] = first[1:]
    return first, last


def _drop_impossible(t: _Table) -> None:
    """Rows no writer makes: unknown kinds, times no clock gives, ids and codes out of range."""
    kind = t.c["kind"]
    bad = _unknown_kind(kind)
    t.drop(bad, f"{bad.sum()} row(s) of unknown kind ({_few(kind[bad])}) dropped")
    ts = t.c["ts_ns"]
    bad = _no_clock(ts)
    t.drop(bad, f"{bad.sum()} row(s) with a timestamp no clock gives ({_few(ts[bad])} ns) dropped")
    c, kind = t.c, t.c["kind"]
    scoped = _among(kind, _SCOPED)
    bad = scoped & ((c["id"] < 0) | (c["name"] < 0))
    t.drop(bad, f"{bad.sum()} operation or phase row(s) with a negative instance or name id dropped")
    c = t.c
    cat = t.rows(S.CAT_BEGIN, S.CAT_END)  # the codes read at these rows alone
    bad = np.zeros(len(t), bool)
    bad[cat] = ~(_category_code(c["id"][cat]) & _category_code(c["parent"][cat]))
    t.drop(bad, f"{bad.sum()} category row(s) with a category code that does not exist dropped")
    c = t.c
    bad = _unknown_mode(c["kind"], c["id"])
    t.drop(bad, f"{bad.sum()} window row(s) of an unknown mode ({_few(c['id'][bad])}) dropped")


def _behind(t: _Table) -> np.ndarray:
    """Rows (grouped by thread) earlier than a row before them on their thread."""
    ts, first = t.c["ts_ns"], t.first
    back = np.zeros(len(t), bool)
    back[1:] = ts[1:] < ts[:-1]
    back &= ~first
    if not back.any():
        return back
    # one running maximum over all threads: each thread's time ranks lifted above the previous ones'
    rank = factorize(ts)[1].astype(np.int64)
    lifted = rank + (np.cumsum(first) - 1) * (len(ts) + 1)
    before = np.empty(len(ts), np.int64)
    before[1:] = np.maximum.accumulate(lifted)[:-1]
    return ~first & (lifted < before)


def _drop_repeats(t: _Table) -> None:
    """Copies of rows (a batch written twice): a row out of time order on its thread that equals an
    earlier row in every column, and an operation or phase row repeating an earlier row's instance
    id (ids are unique in a process): the later one dropped.

    Rows in time order that equal each other are left alone: a coarse or fake clock gives two
    identical boundaries (entering rlscope's category twice in one tick) honestly.
    """
    behind = _behind(t)
    if behind.any():
        c = t.c
        n = len(t)
        suspects = np.isin(c["ts_ns"], c["ts_ns"][behind])  # a copy shares its original's time
        cand = np.flatnonzero(suspects)
        keys = [cand] + [c[k][cand] for k in reversed(S.EVENT_COLUMNS)]  # lexsort: last key first
        order = cand[np.lexsort(keys)]
        equal = np.ones(len(order) - 1, bool)
        for k in S.EVENT_COLUMNS:
            v = c[k][order]
            equal &= v[1:] == v[:-1]
        copy = np.zeros(n, bool)
        copy[order[1:][equal]] = True
        copy &= behind
        t.drop(copy, f"{copy.sum()} row(s) written twice (a batch repeated) dropped")
    c = t.c
    kind = c["kind"]
    scoped = np.flatnonzero(_among(kind, _SCOPED))
    key_kind, key_id = kind[scoped], c["id"][scoped]
    if len(scoped) and int(key_id.min()) >= 0 and int(key_id.max()) < 1 << 59:
        # whether any (kind, id) repeats: one sort of id * 8 + kind (the kinds are below 8), where
        # the sort that says which rows repeat takes three keys; it runs only then (never when intact)
        key = np.sort(key_id * 8 + key_kind, kind="stable")  # nearly in order: the stable sort's runs
        if not (key[1:] == key[:-1]).any():
            return
    order = np.lexsort((scoped, key_id, key_kind))
    again = np.zeros(len(t), bool)
    dup = (key_kind[order][1:] == key_kind[order][:-1]) & (key_id[order][1:] == key_id[order][:-1])
    again[scoped[order][1:][dup]] = True
    t.drop(again, f"{again.sum()} operation or phase row(s) repeating an earlier row's instance id dropped")


def _restore_time_order(t: _Table) -> None:
    """Each thread's rows in time order: a lone row out of line with both neighbours (a flipped
    bit in its time) dropped, what is still out of order then sorted (a batch written out of order)."""
    ts, first, last = t.c["ts_ns"], t.first, t.last
    prev = np.concatenate(([0], ts[:-1]))
    back = ~first & (ts < prev)
    if not back.any():
        return
    nxt = np.concatenate((ts[1:], [0]))
    in_line = prev <= nxt  # the rows around this one are in order
    # a spike: later than the next row; a dip: earlier than the row before
    spike = ~last & (ts > nxt) & (first | in_line)
    dip = ~first & (ts < prev) & (last | in_line)
    dip[1:] &= ~spike[:-1]
    lone = spike | dip
    t.drop(lone, f"{lone.sum()} row(s) out of time order with both neighbours (a damaged timestamp) dropped")
    ts, first = t.c["ts_ns"], t.first
    back = np.zeros(len(t), bool)
    back[1:] = ts[1:] < ts[:-1]
    back &= ~first
    if not back.any():
        return
    t.say(
        back,
        f"timestamps go backwards ({back.sum()} row(s) earlier than the row before); rows put back in"
        " time order",
    )
    t.take(np.lexsort((np.arange(len(t)), ts, np.cumsum(first))))


def _session_rows(t: _Table) -> None:
    """Session bounds that contradict each other dropped; rows after the session's end clipped to it."""
    c = t.c
    kind, ts = c["kind"], c["ts_ns"]
    starts, ends = kind == S.SESSION_START, kind == S.SESSION_END
    if starts.any() and ends.any() and ts[starts].min() > ts[ends].max():
        t.drop(
            starts | ends,
            "the session starts after it ends: its start and end rows dropped, the run taken to span its"
            " first to its last row",
        )
        c, kind, ts = t.c, t.c["kind"], t.c["ts_ns"]
        ends = kind == S.SESSION_END
    if ends.any():
        end = ts[ends].max()
        # the writer's flush marks (the rlscope category) may end after it: a flush that was running
        # as the session stopped, stamped before the writer closed; they are rlscope's, not the job's
        cat_row = (kind == S.CAT_BEGIN) | (kind == S.CAT_END)
        late = (ts > end) & ~(cat_row & (c["id"] == categories.PROFILER))
        if late.any():
            t.say(late, f"{late.sum()} row(s) after the session's end clipped to it")
            c["ts_ns"] = np.where(late, end, ts)
            t.changed = True


def _state_before(first: np.ndarray, after: np.ndarray, default: int) -> np.ndarray:
    """For rows of one stack (grouped by thread, in time order; ``first``: each thread's first row):
    the state before each row, the state after the row before it on its thread."""
    before = np.empty(len(after), np.int64)
    before[1:] = after[:-1]
    before[first] = default  # a thread's first row: nothing before it
    return before


class _Tree:
    """Instances of one stack (operations or phases) by dense index, with parent and depth links.

    Parents point to smaller instance ids (ids count up as instances begin), so the links form a
    forest and pointer jumping ends after log2(instances) rounds.
    """

    def __init__(self, ids: np.ndarray, parents: np.ndarray) -> None:
        order = np.argsort(ids)
        self.ids = ids[order]
        n = len(ids)
        self.root = n  # the sentinel "no instance", its own parent
        par = self.index(parents[order])
        self.par = np.append(par, n)
        self.rounds = rounds = max(int(n).bit_length(), 1) + 1
        self._up: list[np.ndarray] = []
        depth = np.append((par != n).astype(np.int64), 0)
        anc = self.par.copy()
        for _ in range(rounds):
            live = anc != n
            if not live.any():
                break
            depth = depth + np.where(live, depth[anc], 0)
            anc = anc[anc]
        self.depth = depth

    def index(self, ids: np.ndarray) -> np.ndarray:
        """Dense index of each id (the sentinel for ids of no instance)."""
        n = len(self.ids)
        pos = np.searchsorted(self.ids, ids)
        pos = np.minimum(pos, max(n - 1, 0))
        found = (n > 0) & (self.ids[pos] == ids) if n else np.zeros(len(ids), bool)
        return np.where(found, pos, n)

    def ancestor_at(self, nodes: np.ndarray, level: int) -> np.ndarray:
        """The ancestor of each node at depth ``level`` (itself at it; the sentinel when shallower)."""
        if not self._up:  # 2**k levels up, for each k (binary lifting), made on first use
            self._up = [self.par]
            for _ in range(self.rounds):
                self._up.append(self._up[-1][self._up[-1]])
        steps = np.maximum(self.depth[nodes] - level, 0)
        out = nodes.copy()
        for k, up in enumerate(self._up):
            sel = ((steps >> k) & 1).astype(bool)
            if sel.any():
                out = np.where(sel, up[out], out)
        return np.where(self.depth[nodes] < level, self.root, out)


def _stack(t: _Table, begin: int, end: int, noun: str, complete: bool) -> None:
    """One stack (operations or phases): ends matched to begins, parents checked, begins closed."""
    c = t.c
    kind, thread, ts = c["kind"], c["thread"], c["ts_ns"]
    n = len(t)
    b = t.rows(begin)
    e = t.rows(end)
    # ends matched to their begins by id (ids are unique per kind by now)
    ids_b, ids_e = c["id"][b], c["id"][e]
    b_sorted = np.argsort(ids_b)
    bid, b_by_id = ids_b[b_sorted], b[b_sorted]
    at = np.minimum(np.searchsorted(bid, ids_e), max(len(bid) - 1, 0))
    has = bid[at] == ids_e if len(bid) else np.zeros(len(e), bool)
    mate = np.where(has, b_by_id[at] if len(bid) else 0, -1)
    ok = mate >= 0
    some = np.maximum(mate, 0)  # a row for every end: its begin's, or the first row (masked by ok)
    placed = (thread[some] == thread[e]) & (some < e) & (c["name"][some] == c["name"][e])
    misplaced = ok & ~placed
    if not ok.all() or misplaced.any():  # masks of the table's rows only then
        unmatched, wrong = e[~ok], e[misplaced]
        if len(unmatched):
            t.say(unmatched, f"{len(unmatched)} {noun} end(s) without a begin dropped")
        if len(wrong):
            t.say(
                wrong,
                f"{len(wrong)} {noun} end(s) not on their begin's thread, before it or of another name"
                " dropped",
            )
        drop = np.zeros(n, bool)
        drop[unmatched] = True
        drop[wrong] = True
        t.keep(~drop)
        _stack(t, begin, end, noun, complete)
        return
    # an end's parent is its begin's
    differs = c["parent"][e] != c["parent"][mate]
    if differs.any():
        t.say(
            e[differs],
            f"{differs.sum()} {noun} end(s) naming another parent than their begin: set to the begin's",
        )
        t.writable("parent")[e[differs]] = c["parent"][mate[differs]]
        t.changed = True
    # a begin's parent: an instance begun earlier on its thread (ids count up), or none
    rows = t.rows(begin, end)

    def opened_before(parents: np.ndarray) -> np.ndarray:
        """Which ``parents`` (one per begin) are none, or an instance begun earlier on its thread."""
        if not len(bid):
            return parents == -1
        at = np.minimum(np.searchsorted(bid, parents), len(bid) - 1)
        p_row = b_by_id[at]
        known = (bid[at] == parents) & (parents < ids_b) & (thread[p_row] == thread[b]) & (p_row < b)
        return (parents == -1) | known

    valid = opened_before(c["parent"][b])
    if not valid.all():
        after_state = np.where(kind[rows] == begin, c["id"][rows], c["parent"][rows])
        before = _state_before(_boundaries(thread[rows])[0], after_state, -1)
        guess = before[np.searchsorted(rows, b)]
        fixed = np.where(opened_before(guess), guess, -1)
        t.say(
            b[~valid],
            f"{(~valid).sum()} {noun} begin(s) naming a parent that is not open before them:"
            " set to what was open",
        )
        t.writable("parent")[b[~valid]] = fixed[~valid]
        # their ends' parents follow
        ends_of = np.zeros(n, bool)
        ends_of[e] = True
        mate_of = np.full(n, -1)
        mate_of[e] = mate
        for_ends = np.isin(mate_of, b[~valid]) & ends_of
        c["parent"][for_ends] = c["parent"][mate_of[for_ends]]
        t.changed = True
    # begins never ended: closed where their thread left them
    ended = np.zeros(len(b), bool)  # by position in b: every end has its begin by now
    ended[b_sorted[at]] = True
    open_b = b[~ended]
    if not len(open_b):
        return
    tree = _Tree(c["id"][b], c["parent"][b])
    after_state = tree.index(np.where(kind[rows] == begin, c["id"][rows], c["parent"][rows]))
    first, _ = _boundaries(thread[rows])  # of the stack's rows
    node = tree.index(c["id"][open_b])
    where_open = np.searchsorted(rows, open_b)
    close_at = np.full(len(open_b), -1)
    for level in np.unique(tree.depth[node]):
        mine = tree.depth[node] == level
        anc = tree.ancestor_at(after_state, int(level))
        change = first.copy()
        change[1:] |= anc[1:] != anc[:-1]
        idx = np.where(change, np.arange(len(rows)), len(rows))
        nxt = np.minimum.accumulate(idx[::-1])[::-1]
        nxt = np.append(nxt, len(rows))
        q = nxt[where_open[mine] + 1]
        inside = q < len(rows)
        same = np.zeros(len(q), bool)
        same[inside] = thread[rows[q[inside]]] == thread[open_b[mine]][inside]
        close_at[np.flatnonzero(mine)[same]] = rows[q[same]]
    left = close_at >= 0
    if left.any():
        closing = open_b[left]
        t.say(closing, f"{left.sum()} {noun}(s) begun but never ended: closed where their thread left them")
        new = {k: v[closing].copy() for k, v in c.items()}
        new["kind"][:] = end
        new["ts_ns"] = ts[close_at[left]]
        new["flags"][:] = S.FLAG_FORCED_CLOSE
        if "cost" in new:
            new["cost"][:] = 0
        primary = np.concatenate([2 * np.arange(n) + 1, 2 * close_at[left]])
        secondary = np.concatenate([np.zeros(n, np.int64), -tree.depth[node[left]]])
        order = np.lexsort((secondary, primary))
        t.c = {k: np.concatenate([v, new[k]])[order] for k, v in c.items()}
        t.changed = True
        t.first, t.last = _boundaries(t.c["thread"])
    if complete and (~left).any():
        t.say(
            open_b[~left],
            f"{(~left).sum()} {noun}(s) begun but never ended in a session that ended"
            " normally: closed at the end of the data",
        )


def inside_same_name(ids: np.ndarray, parents: np.ndarray, names: np.ndarray) -> np.ndarray:
    """For operation begins (instance ids, parent instance ids, name ids): whether each opened inside
    an open instance of its own name, what ``FLAG_RECURSIVE`` says (its inclusive time is the outer
    one's already)."""
    tree = _Tree(ids, parents)
    name = np.append(names[np.argsort(ids)], -1)
    node = tree.index(ids)
    recursive = np.zeros(len(ids), bool)
    walking, anc = np.arange(len(ids)), tree.par[node]
    for _ in range(len(ids)):  # one round per nesting level: links point to earlier instances only
        if not len(walking):
            break
        live = anc != tree.root
        walking, anc = walking[live], anc[live]
        recursive[walking] |= name[anc] == name[node[walking]]
        anc = tree.par[anc]
    return recursive


def _flags(t: _Table) -> None:
    """Unknown flag bits cleared; the recursive flag of operation begins as their nesting says."""
    c = t.c
    flags = c["flags"]
    unknown = (flags & ~_KNOWN_FLAGS) != 0
    forced = np.flatnonzero(flags & S.FLAG_FORCED_CLOSE)  # closing rows: a few, the kinds read there
    unknown[forced] |= _among(c["kind"][forced], (S.OP_BEGIN, S.PHASE_BEGIN))
    if unknown.any():
        t.say(unknown, f"{unknown.sum()} row(s) with flags no writer sets: cleared")
        begin_flags = S.FLAG_RECURSIVE | S.FLAG_SUMMARIZED
        keep = np.where(_among(c["kind"], (S.OP_BEGIN, S.PHASE_BEGIN)), begin_flags, _KNOWN_FLAGS)
        c["flags"] = flags & keep
        t.changed = True
    b = t.rows(S.OP_BEGIN)
    if not len(b):
        return
    recursive = inside_same_name(c["id"][b], c["parent"][b], c["name"][b])
    flagged = (c["flags"][b] & S.FLAG_RECURSIVE) != 0
    wrong = flagged != recursive
    if wrong.any():
        t.say(
            b[wrong],
            f"{wrong.sum()} operation begin(s) flagged recursive against their nesting, or the"
            " other way round: set as the nesting says",
        )
        t.writable("flags")[b] = np.where(
            recursive, c["flags"][b] | S.FLAG_RECURSIVE, c["flags"][b] & ~S.FLAG_RECURSIVE
        )
        t.changed = True


def _costs(t: _Table) -> None:
    """Measured boundary costs (``pre | post << 32``) lie between a row and its thread's neighbours:
    one that does not fit is set to 0, not measured (the calibrated cost applies instead)."""
    if "cost" not in t.c or not t.c["cost"].any():
        return
    c = t.c
    cost, ts, kind = c["cost"], c["ts_ns"], c["kind"]
    pre, post = S.unpack_cost(cost)
    gap = np.diff(ts, prepend=ts[:1])  # the time since the row before; none before a thread's first:
    gap[t.first] = MAX_TS_NS  # the next row's is the time until it, none after a thread's last
    bad = pre > gap
    bad[:-1] |= post[:-1] > gap[1:]
    # the writer's flush marks carry the flush's CPU time, not a pre | post pair: read after the
    # row's clock, no gap bounds it
    flush = np.flatnonzero((kind == S.CAT_END) & (c["id"] == categories.PROFILER))
    bad[flush] = cost[flush] > S.FLUSH_CPU_MAX
    bad |= cost < 0
    bad &= cost != 0
    if bad.any():
        t.say(
            bad,
            f"{bad.sum()} measured boundary cost(s) longer than the time around their row: set to not"
            " measured",
        )
        c["cost"] = np.where(bad, 0, cost)
        t.changed = True


# instance ids count up from where the process's counter started (a forked child's from its
# parent's count), so the ids of one process lie close together; the analysis indexes arrays by them
_ID_SPREAD = 1 << 22


NS_PER_SCOPE = 50  # a scope's begin and end take more than this (~150 ns in a tight C loop)


def _compact_ids(t: _Table) -> None:
    """Operation and phase ids spread far wider than the rows could number (a damaged id) renumbered
    in their order, parents with them, so that no array is sized by a damaged value."""
    c = t.c
    scoped = _among(c["kind"], _SCOPED)
    ids = c["id"][scoped]
    allowed = _ID_SPREAD + 16 * len(t)
    if len(ids) and (c["kind"] == S.DETAIL).any():
        # kept in detail stretches (rlscope/trace/detail.py): the ids count the scopes of the whole
        # run, of which the rows are a sample; no boundary pair takes under NS_PER_SCOPE ns
        span = int(c["ts_ns"].max()) - int(c["ts_ns"].min())
        allowed = max(allowed, _ID_SPREAD + span // NS_PER_SCOPE)
    if not len(ids) or int(ids.max()) - int(ids.min()) <= allowed:
        return
    u, lo = np.unique(ids), int(ids.min())
    t.say(
        scoped & (c["id"] > lo + allowed),
        "instance ids far beyond what the process could count (a damaged id): the process's ids renumbered"
        " in order",
    )
    t.writable("id")[scoped] = lo + np.searchsorted(u, ids)
    linked = scoped & (c["parent"] >= 0)
    parents = c["parent"][linked]
    at = np.minimum(np.searchsorted(u, parents), len(u) - 1)
    t.writable("parent")[linked] = np.where(u[at] == parents, lo + at, -1)
    t.changed = True


# the reference Python loop's speed (ps per iteration) that session and window rows carry in
# ``parent`` (rlscope/overhead/correct/reference.py: ~0.3 us on a cloud VM): no machine runs it
# below a nanosecond or above a millisecond
_REFERENCE_PS = (1_000, 1_000_000_000)


def _reference_speeds(t: _Table) -> None:
    """A reference loop speed no machine has (a damaged value) set to not timed (-1): the correction
    then prices rlscope's Python costs as it does for sessions that did not time it."""
    c = t.c
    timed = _among(c["kind"], (S.SESSION_START, S.SESSION_END, S.WINDOW)) & (c["parent"] != -1)
    bad = timed & ((c["parent"] < _REFERENCE_PS[0]) | (c["parent"] > _REFERENCE_PS[1]))
    if bad.any():
        t.say(
            bad,
            f"{bad.sum()} reference loop speed(s) no machine has ({_few(c['parent'][bad])} ps): set to not"
            " timed",
        )
        c["parent"] = np.where(bad, -1, c["parent"])
        t.changed = True


def _category_ends(t: _Table) -> None:
    """Say category ends that restore another category than their begin left (``parent``): which of
    the two is damaged the rows do not tell, so the time is counted as recorded. Begins and ends
    pair as a stack per thread."""
    c = t.c
    rows, is_begin, first = t.stack(S.CAT_BEGIN, S.CAT_END)
    if not len(rows):
        return
    step = np.where(is_begin, 1, -1)
    total = np.cumsum(step)
    starts = np.flatnonzero(first)
    depth_after = total  # per thread: less the depth before the thread's first row, when more threads
    if len(starts) > 1:
        depth_after = total - np.repeat(total[starts] - step[starts], np.diff(starts, append=len(rows)))
    level = depth_after + ~is_begin  # the level a begin opens, an end closes (one deeper)
    order, key = _group_order(first, level)
    ob, ok = is_begin[order], key[order]
    pair = ~ob[1:] & ob[:-1] & (ok[1:] == ok[:-1])
    ends, begins = rows[order[1:][pair]], rows[order[:-1][pair]]
    differs = c["parent"][ends] != c["parent"][begins]
    if differs.any():
        t.say(
            ends[differs],
            f"{differs.sum()} category end(s) restoring another category than their begin left: times there"
            " are counted as recorded",
        )


def _group_order(first: np.ndarray, level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.lexsort((np.arange(n), level, np.cumsum(first)))`` (``first``: where each group starts,
    rows grouped), and the key it sorts: group and level in one integer, sorted once where lexsort
    sorts three times; a key below 2**15 sorts as 16-bit integers, by radix."""
    lo = int(level.min())
    span = int(level.max()) - lo + 1
    groups = int(np.count_nonzero(first))
    key = level - lo
    if groups > 1:
        key += (np.cumsum(first) - 1) * span
    if groups * span <= np.iinfo(np.int16).max:
        key = key.astype(np.int16)
    return np.argsort(key, kind="stable"), key


def _nesting(t: _Table) -> None:
    """Say (not repair) rows whose recorded nesting contradicts the rows before them on their thread."""
    c = t.c
    for begin, end, default, noun in (
        (S.OP_BEGIN, S.OP_END, -1, "operation"),
        (S.PHASE_BEGIN, S.PHASE_END, -1, "phase"),
        (S.CAT_BEGIN, S.CAT_END, categories.PYTHON, "category"),
    ):
        rows, is_begin, first = t.stack(begin, end)
        if not len(rows):
            continue
        ids, parents = c["id"][rows], c["parent"][rows]
        before = _state_before(first, np.where(is_begin, ids, parents), default)
        wrong = np.where(is_begin, parents, ids) != before
        if wrong.any():
            t.say(
                rows[wrong],
                f"{wrong.sum()} {noun} row(s) whose nesting contradicts the rows before"
                " them: times there are counted as recorded",
            )


def _window_row(t: _Table) -> None:
    """Every session writes a window row as it starts (the collectors' mode, ``WINDOW_FULL`` without
    windows); the analysis reads the mode from them. Without one (lost to damage), one is added
    where the session starts, full: what the analysis assumes before a session's first window."""
    c = t.c
    if not len(t) or (c["kind"] == S.WINDOW).any():
        return
    starts = np.flatnonzero(c["kind"] == S.SESSION_START)
    at = int(starts[0]) if len(starts) else int(np.argmin(c["ts_ns"]))
    row = {k: v[at : at + 1].copy() for k, v in c.items()}
    row["kind"][:] = S.WINDOW
    row["id"][:] = S.WINDOW_FULL
    row["parent"][:] = -1
    row["name"][:] = -1
    row["flags"][:] = 0
    if "cost" in row:
        row["cost"][:] = 0
    t.say(np.array([at]), "no window row (the collectors' mode): a full one added where the session starts")
    t.c = {k: np.concatenate([v[: at + 1], row[k], v[at + 1 :]]) for k, v in c.items()}
    t.changed = True
    t.first, t.last = _boundaries(t.c["thread"])


def plausible_rows(events: pa.Table) -> pa.Table:
    """``events`` without the rows no writer makes: unknown kinds, times no clock gives, window rows of
    an unknown mode (the checks of :func:`validate_events` that need no order and no other row). The
    same object when every row passes."""
    if events.num_rows == 0:
        return events
    kind = events.column("kind").to_numpy()
    ts = events.column("ts_ns").to_numpy()
    bad = _unknown_kind(kind) | _no_clock(ts)
    if "id" in events.column_names:
        bad |= _unknown_mode(kind, events.column("id").to_numpy())
    return events.filter(pa.array(~bad)) if bad.any() else events


def validate_events(
    events: pa.Table, where: str, complete: bool | None = None
) -> tuple[pa.Table, list[Finding]]:
    """``events`` checked and repaired, and what was found (module docstring); ``where``: the process,
    as findings name it. ``complete``: the session ended normally (None: from the rows)."""
    if events.num_rows == 0:
        return events, []
    columns = _columns(events)
    # one C pass that confirms an intact table (rlscope/trace/native): then the checks below would
    # find nothing; any other table (or no C pass here) goes through them
    if native.check(columns, _KIND_OK, _CATEGORY_OK, complete) == "intact":
        return events, []
    t = _Table(events, where, columns)
    _check(t, complete)
    if not t.changed:
        return events, t.findings
    return t.table(), t.findings


def _check(t: _Table, complete: bool | None) -> None:
    """The checks and repairs of :func:`validate_events`, in order, on ``t``."""
    _drop_impossible(t)
    t.group()
    _drop_repeats(t)
    _restore_time_order(t)
    _session_rows(t)
    if complete is None:
        complete = bool((t.c["kind"] == S.SESSION_END).any())
    _stack(t, S.OP_BEGIN, S.OP_END, "operation", complete)
    _stack(t, S.PHASE_BEGIN, S.PHASE_END, "phase", complete)
    _flags(t)
    _costs(t)
    _compact_ids(t)
    _window_row(t)
    _reference_speeds(t)
    _category_ends(t)
    _nesting(t)


# the rows of the collectors' files no writer makes: (time columns, column of a code, its codes)
_TABLE_RULES: dict[str, tuple[tuple[str, ...], str | None, tuple[int, ...]]] = {
    "gpu": (("start_ns", "end_ns"), "category", tuple(range(categories.CUDA_API, categories.GPU_MEMSET + 1))),
    "backend": (("start_ns", "end_ns"), None, ()),
    "nvml": (("ts_ns",), None, ()),
    "memory": (("ts_ns",), "action", tuple(range(S.MEMORY_ALLOC, S.MEMORY_SEGMENT_PEAK + 1))),
    "collectives": (("ts_ns",), None, ()),
    "stacks": (("ts_ns",), None, ()),
    "compile": (("start_ns", "end_ns"), "stage", S.COMPILE_STAGE_CODES),
}


def validate_table(
    table: pa.Table, kind: str, where: str, session: tuple[int, int] | None = None
) -> tuple[pa.Table, list[Finding]]:
    """A collector's table (``kind``: gpu, backend, nvml, memory, collectives) without the rows no
    writer makes (times no clock gives, an interval ending before it starts, an unknown code) or
    writes twice, and a finding for each kind of row dropped. The table comes back unchanged (the
    same object) when intact.

    ``session``: the process's session (start, end); a torch op of the backend recorder ends inside
    it (the analysis counts none of its time past the end): one ending after it is said."""
    if table.num_rows == 0 or kind not in _TABLE_RULES:
        return table, []
    found = []
    times, code, codes = _TABLE_RULES[kind]
    cols = {c: table.column(c).to_numpy().astype(np.int64, copy=False) for c in times}
    # masks of millions of rows made only where a reduction finds rows to mark (never when intact)
    bad = None
    # the reductions in one C pass where it runs and every time is one a clock gives: (an interval
    # ending before it starts, the first times strictly increasing, an end past the session's)
    after = session[1] if session is not None else 0
    scan = native.times_scan(cols[times[0]], cols[times[1]] if len(times) == 2 else None, after)
    if scan is not None:
        impossible = scan[0]
    else:
        impossible = any(_any_no_clock(v) for v in cols.values()) or (
            len(times) == 2 and _any_less(cols[times[1]], cols[times[0]])
        )
    if impossible:
        bad = np.zeros(table.num_rows, bool)
        for v in cols.values():
            bad |= _no_clock(v)
        if len(times) == 2:
            bad |= cols[times[1]] < cols[times[0]]
    if code is not None:
        unknown = ~np.isin(table.column(code).to_numpy(), codes)
        bad = unknown if bad is None else bad | unknown
    if bad is not None and not bad.any():
        bad = None
    if bad is not None:
        message = (
            f"{int(bad.sum())} of {table.num_rows} row(s) with impossible times or codes (damaged?) dropped"
        )
        found.append(Finding("error", where, message))
    copy = _copies(table, times[0], None if scan is None else scan[1]) if kind in _UNIQUE_ROWS else None
    if copy is not None and bad is not None:
        copy &= ~bad
    if copy is not None and not copy.any():
        copy = None
    if copy is not None:
        found.append(
            Finding("error", where, f"{int(copy.sum())} row(s) written twice (a batch repeated) dropped")
        )
    if (
        kind == "backend"
        and session is not None
        and (scan[2] if scan is not None else int(cols["end_ns"].max()) > session[1])
    ):
        end = cols["end_ns"]
        late = end > session[1]
        if bad is not None:
            late &= ~bad
        if late.any():
            found.append(
                Finding(
                    "warning",
                    where,
                    f"{int(late.sum())} torch op(s) ending after the session's end (by up to"
                    f" {(int(end[late].max()) - session[1]) / 1e9:.6g} s; a damaged time?): counted up to it",
                )
            )
    if bad is None and copy is None:
        return table, found
    drop = bad if copy is None else copy if bad is None else bad | copy
    return table.filter(pa.array(~drop)), found


# tables no two of whose rows are equal: a GPU record or CUDA call (its own times and correlation),
# a thread's outermost torch op, a collective (the recorder's id)
_UNIQUE_ROWS = ("gpu", "backend", "collectives")


def _copies(table: pa.Table, time: str, increasing: bool | None = None) -> np.ndarray | None:
    """Rows equal in every column to an earlier row (None: no two rows share a ``time``).
    ``increasing``: whether the ``time`` column strictly increases, where a pass found it (None: a
    reduction here finds it).

    Only rows whose ``time`` value occurs more than once can be copies: one sort of that column finds
    them (a merge sort: the rows are nearly in time order, so it is a fraction of the sort of every
    column), and the sort of every column runs on those rows alone (none, in an intact trace).
    """
    t = table.column(time).to_numpy().astype(np.int64, copy=False)
    if increasing is None:
        increasing = not _any_less(t[1:], t[:-1], np.less_equal)
    if increasing:  # no time twice (no sort)
        return None
    s = t if not _any_less(t[1:], t[:-1]) else np.sort(t, kind="stable")  # most files: in time order
    twice = s[1:] == s[:-1]
    if not twice.any():
        return None
    copy = np.zeros(table.num_rows, bool)
    rows = np.flatnonzero(np.isin(t, s[1:][twice]))
    cols = [table.column(c).to_numpy().astype(np.int64, copy=False)[rows] for c in table.column_names]
    order = np.lexsort([rows, *reversed(cols)])
    equal = np.ones(max(len(rows) - 1, 0), bool)
    for v in cols:
        v = v[order]
        equal &= v[1:] == v[:-1]
    copy[rows[order[1:][equal]]] = True
    return copy
