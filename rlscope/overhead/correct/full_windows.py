"""How far a process's full windows stand for its run: their share of it, and the scale of what only
they record.

Light windows record no backend ops, CUDA API calls or GPU work. So the corrected breakdown splits
an operation's time into categories as its full windows did, and scales its GPU work by its instances
over its full-window ones (:class:`GpuScale`), unless the full windows held too little of the run to
stand for it (:func:`thin_full_windows`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline
from rlscope.blocks import blocks
from rlscope.keys import factorize
from rlscope.overhead.correct.windows import WindowEstimate, mode_table, row_window, window_rows
from rlscope.trace import schema as S
from rlscope.trace.header import recorded_options
from rlscope.trace.reader import name_of

# the least share of its intended share of the run a process must spend with the expensive
# collectors on for its full windows' categories and GPU work to stand for the whole run
MIN_SHARE_OF_INTENDED = 0.2


@dataclasses.dataclass(frozen=True)
class GpuScale:
    """GPU tracing ran in full windows only: the factors that make its figures stand for every instance.

    Each (phase, operation)'s GPU time by its instances over its full-window instances; unattributed
    GPU work and the GPU-bound time by the run's time over the full windows' time.
    """

    run: float  # the run's time over the full windows' time
    per_op: dict[tuple[str, str], float]  # (phase, operation) -> instances over full-window instances

    def factor(self, phase: str, operation: str) -> float:
        """The factor of one (phase, operation) row of the GPU tables (unannotated: the run's)."""
        return self.run if operation == categories.UNANNOTATED else self.per_op.get((phase, operation), 1.0)


def gpu_scale(est: WindowEstimate, names: list[str], share: float) -> GpuScale:
    """The :class:`GpuScale` of a process whose full windows took ``share`` of its run
    (:func:`nominal_full_share`: GPU work is recorded whenever GPU tracing is on)."""
    per_op: dict[tuple[str, str], float] = {}
    for (ph, op), grp in _group_instances(est):
        n_full = int(est.inst_full[grp].sum())
        key = (name_of(names, ph, categories.NO_PHASE), name_of(names, op, categories.UNANNOTATED))
        per_op[key] = len(grp) / n_full if n_full else 1.0
    return GpuScale(run=1.0 / share if share > 0 else 1.0, per_op=per_op)


def _group_instances(est: WindowEstimate) -> Iterator[tuple[tuple[int, int], np.ndarray]]:
    """(phase name id, operation name id) -> instance indices."""
    key = est.inst_phase.astype(np.int64) * (2**31) + est.inst_name
    uniq, inv = factorize(key)
    order = np.argsort(inv, kind="stable")  # the instances of each key, in one pass
    bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
    for k, u in enumerate(uniq.tolist()):
        yield (u // 2**31, u % 2**31), order[bounds[k] : bounds[k + 1]]


def thin_full_windows(share: float, metadata: dict[str, str], switched: dict[str, bool]) -> str | None:
    """A note refusing to scale a process's backend and GPU figures from its full windows when they
    held almost none of its run (below MIN_SHARE_OF_INTENDED of the share asked for), else None.

    Why: scaled from a near-empty share, a few milliseconds of GPU work stood for seconds (a DDP
    rank's GPU time read 9.6 s, scaled from 1.1 s recorded, against 5.6 s of GPU-bound time).
    """
    try:
        intended = float(recorded_options(metadata).get("full_share", 0.5))
    except (ValueError, TypeError):
        intended = 0.5
    on = [k for k, v in switched.items() if v]
    if not on or share >= MIN_SHARE_OF_INTENDED * intended:
        return None
    return (
        f"{', '.join(on)} recorded during only {share:.1%} of this process's run ({intended:.0%} intended):"
        " its CPU categories and GPU work are shown as recorded, not scaled to the run"
    )


def nominal_full_share(tl: Timeline) -> float:
    """Share of the run between a switch to full and the next switch to light (1.0 without windows).

    Unlike :func:`full_share`, a full window counts whether or not its collectors found anything to
    record: start-up with no torch op nor CUDA call in it was traced as much as the loop was, and
    its (absent) GPU work was seen as well in full windows as the loop's.
    """
    win_ts, win_mode = window_rows(tl)
    total = tl.end_ns - tl.start_ns
    if len(win_ts) == 0 or total <= 0:
        return 1.0
    ts = np.clip(win_ts, tl.start_ns, tl.end_ns)
    length = np.diff(np.append(ts, tl.end_ns))
    first = np.clip(win_ts[0], tl.start_ns, tl.end_ns) - tl.start_ns  # before the first row: full
    return float(length[win_mode == S.WINDOW_FULL].sum() + first) / total


@dataclasses.dataclass(frozen=True)
class FullFraction:
    """Per row of a raw timeline, the share of its segment that ran in full windows, without a column of
    it: a row within one window has its window's (``at_mode[w]``, w: how many switches ``win_ts`` come
    at or before its start, as :func:`row_window`), a crossing row (ascending ``rows``) its ``values``.

    Why: nearly every row's share is its window's 0.0 or 1.0, and the breakdown's C pass works each
    out on its way (breakdown.c full_share), where a float per row was the run's highest memory.
    """

    n: int  # the timeline's rows
    win_ts: np.ndarray  # int64, ascending: the window switches
    at_mode: np.ndarray  # float64, len(win_ts) + 1: per window, 1.0 where full (before the first: full)
    rows: np.ndarray  # int64, ascending: the rows whose segment may end in another window
    values: np.ndarray  # float64: their shares

    def column(self, ts: np.ndarray) -> np.ndarray:
        """The share per row (``ts``: the timeline's row starts), for the loops that read a column."""
        out = self.at_mode[np.searchsorted(self.win_ts, ts, side="right")] if len(ts) else np.ones(0)
        out[self.rows] = self.values
        return out


def full_fraction(tl: Timeline) -> FullFraction:
    """Per row of ``tl`` (the raw timeline, on the clock the switches were made by): the share of
    its segment that ran in full windows, for the category split (:class:`FullFraction`).

    Not the estimate's ``row_mode``, one kind per row, with a full window counting only from its
    collectors' first record: that keeps a late switch-on out of the cost measured, but for the
    split it drops what a full window saw before its first torch op, and it gives a segment that
    spans several windows the kind of the one it began in. Start-up's imports (seconds of Python in
    a few segments, the recorder on in about half of them) then fell out, and start-up took the
    share of the few milliseconds of model construction after them: 80% backend, where a run
    with every window full read 0.03%.
    """
    win_ts, win_mode = window_rows(tl)
    win_ts = np.ascontiguousarray(win_ts, np.int64)
    if not len(win_ts):
        none = np.zeros(0, np.int64)
        return FullFraction(len(tl.ts), win_ts, np.ones(1), none, np.zeros(0))
    full = (win_mode == S.WINDOW_FULL).astype(np.float64)
    # time spent in full windows from the first switch to each switch (before the first: full)
    before = np.concatenate(([0.0], np.cumsum(np.diff(win_ts) * full[:-1])))
    at_mode = (mode_table(win_mode) == S.WINDOW_FULL).astype(np.float64)
    # a segment within one window ran all in its kind: its window's share gives exactly that (whole ns,
    # exact in a double), so the share is computed for the few segments that end in another window only
    rows, w_rows = _crossings_and_windows(tl, win_ts)
    start = tl.ts[rows]
    end = np.maximum(tl.seg_end_of(rows), start)
    i_start = w_rows.astype(np.int64) - 1
    i_end = np.searchsorted(win_ts, end, side="right") - 1

    def full_until(t: np.ndarray, i: np.ndarray) -> np.ndarray:
        k = np.maximum(i, 0)
        return np.where(i >= 0, before[k] + (t - win_ts[k]) * full[k], (t - win_ts[0]).astype(np.float64))

    span = (end - start).astype(np.float64)
    inside = (full_until(end, i_end) - full_until(start, i_start)) / np.where(span > 0, span, 1.0)
    values = np.where(span > 0, np.clip(inside, 0.0, 1.0), at_mode[w_rows]).astype(np.float64)
    return FullFraction(len(tl.ts), win_ts, np.ascontiguousarray(at_mode, np.float64), rows, values)


_CROSSINGS = 1 << 16  # the rows the passes below list in their first pass: windows and threads are few


def _crossings_and_windows(tl: Timeline, win_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`_crossing_rows`, their :func:`row_window`) in one C pass over the rows, each row's window
    found on the way (the estimate lets row_window's column go); a second where the crossing rows are
    more than it lists. Else over row_window's column."""
    types = (native.N, native.SEGMENTS, native.N, native.I64, native.N)
    fn = native.function("windows_full_fraction_rows", *types, native.I64, native.I64, restype=native.N)
    if fn is None or tl.ts.dtype != np.int64 or not tl.ts.flags.c_contiguous:
        wi = row_window(tl)
        rows = _crossing_rows(tl, wi)
        return rows, wi[rows].astype(np.int64)
    n = len(tl.ts)
    cap = min(n, _CROSSINGS)
    rows, w_rows = np.empty(cap, np.int64), np.empty(cap, np.int64)
    m = fn(n, tl.segments(), len(win_ts), win_ts, cap, rows, w_rows)
    if m > cap:  # more than listed: all of them, in a second pass
        rows, w_rows = np.empty(m, np.int64), np.empty(m, np.int64)
        m = fn(n, tl.segments(), len(win_ts), win_ts, m, rows, w_rows)
    return rows[:m], w_rows[:m]


def _crossing_rows(tl: Timeline, wi: np.ndarray) -> np.ndarray:
    """The rows whose segment may end in another window than it starts in (:func:`row_window`'s ``wi``):
    those that end elsewhere than at the next row's start, or before a row in another window. A
    block of rows at a time (rlscope.blocks)."""
    n = len(wi)
    if n == 0:
        return np.zeros(0, np.int64)
    found = []
    for rows in blocks(n - 1):
        nxt = slice(rows.start + 1, rows.stop + 1)
        cross = wi[rows] != wi[nxt]
        cross |= tl.seg_end[rows] != tl.ts[nxt]
        found.append(np.flatnonzero(cross) + rows.start)
    found.append(np.array([n - 1], np.int64))  # the last row ends at the end of the data
    return np.concatenate(found)


def full_share(est: WindowEstimate, tl: Timeline) -> float:
    """Share of the corrected main-thread time spent in full windows: sums of whole ns, exact in any
    order, so made in C in one pass, else a block of rows at a time in integers (no column of every
    row's length). Where ``tl``'s correction summed them on its way (WindowEstimate.main_mode_ns), read
    off that."""
    if est.main_mode_ns is not None:
        total, full = est.main_mode_ns
        return float(full) / float(total) if total > 0 else 1.0
    main = tl.main_rows()
    fn = native.function(
        "windows_full_share", native.N, native.N, native.SEGMENTS, native.I8, native.N, native.I64
    )
    row_mode = est.row_mode  # a row's mode at its index: the whole column, read at the main rows
    ok = tl.ts.dtype == np.int64 and row_mode.dtype == np.int8 and len(row_mode) == len(tl.ts)
    if fn is not None and ok and row_mode.flags.c_contiguous:
        sums = np.zeros(2, np.int64)
        fn(main.start, main.stop, tl.segments(), row_mode, S.WINDOW_FULL, sums)
        total, full = int(sums[0]), int(sums[1])
        return float(full) / float(total) if total > 0 else 1.0
    total = full = 0
    for r in blocks(main.stop - main.start):
        rows = slice(main.start + r.start, main.start + r.stop)
        dur = tl.seg_end[rows] - tl.ts[rows]
        total += int(dur.sum())
        full += int(dur[est.row_mode[rows] == S.WINDOW_FULL].sum())
    return float(full) / float(total) if total > 0 else 1.0
