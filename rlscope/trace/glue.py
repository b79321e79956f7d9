"""Join a process's detail stretches into one timeline, as if the run had been only them.

Between a ``DETAIL`` pause and the next resume (rlscope/trace/aggregate.py) the trace holds no
event rows, only aggregates. Every time column of the process's tables is mapped onto the joined
clock: a time after a gap moves back by the gaps before it, a time inside a gap goes to the gap's
start, and a row that lies wholly inside a gap (an NVML sample, a late record) is dropped. Each
figure the analysis computes from events then covers the detail kept, and the analysis adds the
rest of the run from the aggregates (rlscope/analysis/whole_run.py). Processes of one run share the
schedule's origin, so their gaps, and their joined clocks, are the same.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow as pa

from rlscope.blocks import blocks
from rlscope.trace import schema as S

_FEW_GAPS = 8  # up to this many gaps, times are mapped a gap at a time (Gaps._few)
_MAX_RUNS = 64  # kept runs joined from slices; more (rows dropped here and there) go through a filter
# the time columns of each table, and whether a row is an interval (start, end)
TIME_COLUMNS = {
    "events": ("ts_ns",),
    "gpu": ("start_ns", "end_ns"),
    "backend": ("start_ns", "end_ns"),
    "nvml": ("ts_ns",),
    "memory": ("ts_ns",),
    "collectives": ("ts_ns",),
    "stacks": ("ts_ns",),
}


@dataclasses.dataclass(frozen=True)
class Gaps:
    """The stretches without event detail, ``[start, end)`` on the process's own clock."""

    start: np.ndarray
    end: np.ndarray

    @property
    def total_ns(self) -> int:
        return int((self.end - self.start).sum())

    def __len__(self) -> int:
        return len(self.start)

    def to_json(self) -> str:
        return json.dumps([[int(a), int(b)] for a, b in zip(self.start, self.end, strict=True)])

    @classmethod
    def from_json(cls, text: str) -> Gaps:
        pairs = np.asarray(json.loads(text or "[]"), np.int64).reshape(-1, 2)
        return cls(pairs[:, 0].copy(), pairs[:, 1].copy())

    def map(self, t: np.ndarray) -> np.ndarray:
        """Times on the joined clock: back by the gaps before them; inside a gap, at its start."""
        t = np.asarray(t, np.int64)
        if not len(self):
            return t
        if self._few():
            return self._map_each(t)
        before = np.concatenate([[0], np.cumsum(self.end - self.start)])
        out = np.empty(len(t), np.int64)
        for rows in blocks(len(t)):  # millions of torch ops: the temporaries of a block stay in cache
            tb = t[rows]
            k = np.searchsorted(self.start, tb, "right")  # gaps starting at or before t
            g = np.maximum(k - 1, 0)  # the last of them
            inside = (k > 0) & (tb < self.end[g])
            out[rows] = np.where(inside, self.start[g] - before[g], tb - before[k])
        return out

    def strictly_inside(self, t: np.ndarray) -> np.ndarray:
        """Whether each time lies inside a gap, not at its start."""
        t = np.asarray(t, np.int64)
        out = np.zeros(len(t), bool)
        if not len(self):
            return out
        if self._few():
            for rows in blocks(len(t)):
                tb, ob = t[rows], out[rows]
                for a, b in zip(self.start.tolist(), self.end.tolist(), strict=True):
                    ob |= (tb > a) & (tb < b)
            return out
        for rows in blocks(len(t)):
            tb = t[rows]
            k = np.searchsorted(self.start, tb, "right") - 1
            kk = np.maximum(k, 0)
            out[rows] = (k >= 0) & (tb > self.start[kk]) & (tb < self.end[kk])
        return out

    def _few(self) -> bool:
        """Few gaps, in order and apart (as a schedule makes them): a pass per gap over the times
        costs less than a search of every time (a 5-min run's one gap: 3 M torch ops mapped in 5 ms,
        not 24 ms)."""
        return len(self) <= _FEW_GAPS and bool((self.start[1:] >= self.end[:-1]).all())

    def _map_each(self, t: np.ndarray) -> np.ndarray:
        """:meth:`map` a gap at a time: each moves the times after its start back by as much of it as
        lies before them (all of it after its end; inside it, back to its start)."""
        out = np.empty(len(t), np.int64)
        for rows in blocks(len(t)):
            tb, ob = t[rows], out[rows]
            ob[:] = tb
            for a, length in zip(self.start.tolist(), (self.end - self.start).tolist(), strict=True):
                ob -= np.clip(tb - a, 0, length)
        return out


def gaps_of(events: pa.Table, end_ns: int | None = None) -> Gaps:
    """The gaps the ``DETAIL`` rows of ``events`` mark; a pause never resumed lasts to ``end_ns``
    (default: the last row's time)."""
    kind = events.column("kind").to_numpy()
    rows = np.flatnonzero(kind == S.DETAIL)
    if not len(rows):
        return Gaps(np.zeros(0, np.int64), np.zeros(0, np.int64))
    ts = events.column("ts_ns").to_numpy()[rows].astype(np.int64)
    what = events.column("id").to_numpy()[rows]
    order = np.argsort(ts, kind="stable")
    ts, what = ts[order], what[order]
    last = int(events.column("ts_ns").to_numpy().max()) if end_ns is None else end_ns
    starts, ends = [], []
    open_at: int | None = None
    for t, w in zip(ts.tolist(), what.tolist(), strict=True):
        if w == S.DETAIL_PAUSE and open_at is None:
            open_at = t
        elif w == S.DETAIL_RESUME and open_at is not None:
            if t > open_at:
                starts.append(open_at)
                ends.append(t)
            open_at = None
    if open_at is not None and last > open_at:
        starts.append(open_at)
        ends.append(last)
    return Gaps(np.asarray(starts, np.int64), np.asarray(ends, np.int64))


def join(table: pa.Table, name: str, gaps: Gaps) -> pa.Table:
    """``table`` (one of TIME_COLUMNS) on the joined clock, rows wholly inside a gap dropped."""
    if not len(gaps) or table is None or not table.num_rows:
        return table
    columns = TIME_COLUMNS[name]
    times = [table.column(c).to_numpy().astype(np.int64, copy=False) for c in columns]
    mapped = [gaps.map(t) for t in times]
    drop = gaps.strictly_inside(times[0])
    if len(times) > 1:  # an interval inside one gap (both ends inside it, or ending at its start)
        drop &= mapped[0] == mapped[1]
    elif name == "events":  # the session's and the cuts' rows are kept, whatever their time
        drop &= ~np.isin(table.column("kind").to_numpy(), S.UNCUT_KINDS)
    out = table
    for c, m in zip(columns, mapped, strict=True):
        typ = out.schema.field(c).type
        column = pa.array(m.astype(S.numpy_dtype(typ), copy=False))
        out = out.set_column(out.schema.get_field_index(c), c, column)
    return _without(out, drop) if drop.any() else out


def _without(table: pa.Table, drop: np.ndarray) -> pa.Table:
    """``table`` less the ``drop`` rows. The rows a gap swallows are a few runs (each thread's rows
    are in time order): the kept runs are sliced without a copy and joined once, where Arrow's
    filter copied every column of millions of torch ops to leave out a few dozen rows."""
    edges = np.flatnonzero(np.diff(drop, prepend=True, append=True))  # kept runs: [edges[2i], edges[2i+1])
    if len(edges) > 2 * _MAX_RUNS:
        return table.filter(pa.array(~drop))
    runs = [table.slice(a, b - a) for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True)]
    if len(runs) <= 1:
        return runs[0] if runs else table.slice(0, 0)
    return pa.concat_tables(runs).combine_chunks()
