"""In-run overhead measurement: windows with and without the expensive collectors.

The session alternates *full* windows (every collector on: scopes, simulator boundaries, backend
ops, GPU tracing) and *light* windows (scopes and simulator boundaries only), switching at scope
exits on the main thread (rlscope/session.py). RL loops repeat the same operations thousands of
times, so each operation has instances in both kinds of window, and the difference between them
*is* what the expensive collectors cost on this machine, this load and this loop -- no calibration
taken elsewhere has to carry over.

Per operation ``X`` (exclusive time per instance, instances wholly inside one window):

- each full window's median instance time over the mean of its light neighbours' medians, less
  one, is its *relative excess*; X's cost of being recorded is the median relative excess times
  the light reference of each of X's full-window instances, taken out of its full-window segments
  (a factor per row). Medians keep one-time costs from standing for every instance; pairing
  neighbours cancels drift over the run, and a relative excess follows the machine's speed. Windows
  of fewer than MIN_PAIR_INSTANCES instances (a cold call alone) neither pair nor serve as reference.
  X's categories keep the full-window proportions (only full windows see backend and CUDA time).
- an operation whose full-window segments hold no collector event keeps factor 1 (nothing to
  remove: avoids adding noise).
- an operation with fewer than MIN_PAIRS pairs but MIN_UNPAIRED whole instances in each kind of
  window compares its own full and light instances over the whole run ("unpaired"); one with
  fewer (a long update that always straddles a switch), and unannotated time, use the run's pooled
  cost per collector event (``cost_per_event_ns``: what the window-estimated operations lost over
  their collector events), times their own events; for an operation with one full-window instance
  and at least MIN_CAP_LIGHT light ones, never more than that instance's excess over its light
  median ("pooled, capped by its own instances": :func:`own_excess`).
- an instance directly after a switch that is slower than the same operation after the same
  predecessor without a switch (same kind of window) pays for the switch itself (work CUPTI leaves
  for the next CUDA calls): the median of that difference is removed from each such instance when
  it stands clear of its spread (:func:`switch_transient`).

Uncertainty: the spread of the paired excesses (MAD / sqrt(pairs)) times the full-window instances;
an unpaired estimate carries half of what it removed or its bootstrap spread over its windows,
whichever is larger (:func:`unpaired_rel_sigma`); a pooled one half of what it removed and the
pooled cost's own uncertainty, in quadrature. docs/overhead.md says why this mechanism.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline
from rlscope.blocks import blocks, take
from rlscope.overhead.correct import pieces as P
from rlscope.overhead.correct.row_factors import RowFactors
from rlscope.trace import schema as S

MIN_INSTANCES = 5  # per kind of window, for an operation's own estimate
MIN_PAIRS = 3  # full windows with a light neighbour, for an operation's own estimate
MIN_WINDOW_INSTANCES = 5  # per light window, for its median to count in light_spread
MAX_LIGHT_SAMPLES = 512  # windows of each kind kept per operation for rlscope validate (window_samples)
# per window, for its median to stand for the window in a pair: a window of one or two instances is
# as often as not one cold call (a first SAC update took 387 ms against 10 ms after), and as a light
# reference it made the next full window's cost 40x too large (H100, SB3 SAC train corrected -33%)
MIN_PAIR_INSTANCES = 3
MIN_UNPAIRED = 2  # whole instances per kind of window for an operation's unpaired estimate
# light instances for an operation's own full-window excess to cap its pooled removal (own_excess):
# the run starts light, so the first (cold) call is a light one, and a median of three outvotes it
MIN_CAP_LIGHT = 3
NOT_MEASURABLE = "collector cost not measurable"  # the start of the note of an operation left so
# per-operation methods in which the windows measured the collectors' cost (WindowEstimate.measured)
MEASURED_METHODS = ("windows", "unpaired", "pieces")
FALLBACK_REL_SIGMA = 0.5  # uncertainty of a removal made with the pooled per-event cost
BOOTSTRAP = 400  # resamples of an unpaired estimate's windows, for its uncertainty
UNANNOTATED_ID = -1


@dataclasses.dataclass
class WindowEstimate:
    """What the windows say about one process: per-row duration factors and the evidence."""

    # per timeline row: corrected / residual-corrected segment duration (a column, or its tables)
    factor: np.ndarray | RowFactors
    row_mode: np.ndarray  # per row: WINDOW_FULL or WINDOW_LIGHT
    per_op: dict[int, dict]  # operation name id (-1: unannotated) -> factor, method, counts, sigma
    cost_per_event_ns: float | None  # pooled in-run cost of one collector event (None: not measured)
    notes: list[str]
    inst_name: np.ndarray  # per instance (OP_BEGIN row order): name id
    inst_phase: np.ndarray  # per instance: phase name id (-1 none)
    inst_full: np.ndarray  # per instance: began in a full window
    light_only: dict[int, int]  # operation name id -> instances, for operations never in a full window
    switches: int = 0  # window switches in the run (the first WINDOW row opens it)
    # the OP_BEGIN rows (per instance, in its order) and the WINDOW rows (window_indices), the same
    # in each timeline of these rows
    begins: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    window_idx: np.ndarray | None = None
    # the corrected timeline's main-thread ns, all and in full windows (row_mode), where its
    # correction summed them (residual.correct_windows): full_windows.full_share's figures
    main_mode_ns: tuple[int, int] | None = None

    @property
    def measured(self) -> bool:
        """Whether the windows measured the collectors' cost on some operation of the run.

        Not so when no operation was seen often enough in both kinds of window: a short run whose
        switches cost so much that its windows grew to seconds (GPU tracing of the eager CartPole
        simulator in validate's twin regime on an H200: switches of 57-158 ms on the main thread,
        and in two runs of four the whole 2,000-step loop in one full window). The analysis then
        removes the calibrated per-event costs instead.
        """
        return any(e.get("method") in MEASURED_METHODS for e in self.per_op.values())


def window_indices(tl: Timeline) -> np.ndarray:
    """The WINDOW rows, in row order (found once per timeline; the same rows in each timeline of
    the same rows, as the corrected ones are)."""
    got = tl.memo.get("window_indices")
    if got is None:
        got = tl.memo["window_indices"] = np.flatnonzero(tl.kind == S.WINDOW)
    return got


def op_begins(tl: Timeline) -> np.ndarray:
    """The OP_BEGIN rows, in row order: among the scopes' begins the timeline keeps
    (Timeline.scope_begins), not a comparison over every row."""
    rows = tl.scope_begins()
    return rows[tl.kind[rows] == S.OP_BEGIN]


def window_rows(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(time, mode) of the window switches, in time order (found once per timeline)."""
    got = tl.memo.get("window_rows")
    if got is None:
        w = window_indices(tl)
        order = np.argsort(tl.ts[w], kind="stable")
        got = tl.memo["window_rows"] = (tl.ts[w][order], tl.id[w][order])
    return got


def row_window(tl: Timeline) -> np.ndarray:
    """Per row: how many window switches came at or before its start (0: before the first), i.e. the
    window it starts in, plus one. Looked up once per timeline: the correction asks it four times."""
    got = tl.memo.get("row_window")
    if got is None:
        # int16 (windows are few), a row each: made from the rows where it changes that toggled's
        # pass listed, else searched. A thread's rows are in time order, so each window's rows are a
        # run: the switches are searched among the rows (hundreds of searches), not every row among
        # the switches (millions)
        win_ts = window_rows(tl)[0]
        got = np.empty(len(tl.ts), np.int16 if len(win_ts) < _I16 else np.int32)
        fn = native.typed("windows_row_window", [got.dtype], native.N, native.I64, native.N, native.I64, None)
        changes = tl.memo.get("window_changes")  # the rows where it changes (toggled's pass)
        fill = native.typed(
            "windows_fill_runs", [got.dtype], native.N, native.I64, native.I64, native.N, None
        )
        if changes is not None and fill is not None:
            fill(len(changes[0]), changes[0], changes[1], len(got), got)
        elif fn is not None and tl.ts.dtype == win_ts.dtype == np.int64:  # in C, in one pass
            fn(len(got), tl.ts, len(win_ts), win_ts, got)
        else:
            steps = np.arange(len(win_ts) + 1, dtype=got.dtype)
            bounds = tl.thread_starts()
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
                ts = tl.ts[a:b]
                if (ts[1:] >= ts[:-1]).all():
                    at = np.searchsorted(ts, win_ts, side="left")  # each switch's first row at or after it
                    got[a:b] = np.repeat(steps, np.diff(at, prepend=0, append=b - a))
                else:
                    got[a:b] = np.searchsorted(win_ts, ts, side="right")
        tl.memo["row_window"] = got
    return got


_I16 = np.iinfo(np.int16).max  # row_window's values fit in int16 below this many switches


def window_changes(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(the rows where :func:`row_window`'s value changes: the first, then each whose value is not the
    row before's; their values), int64: what the estimate's C passes read each row's window from, a
    few per thread and switch, where a column of every row would be held beside their outputs (the
    analysis's peak of memory). Listed by toggled's pass, else made from row_window's column."""
    got = tl.memo.get("window_changes")
    if got is None:
        wi = row_window(tl)
        rows = np.flatnonzero(wi[1:] != wi[:-1]) + 1
        rows = np.concatenate([np.zeros(min(len(wi), 1), np.int64), rows]).astype(np.int64)
        got = tl.memo["window_changes"] = (rows, wi[rows].astype(np.int64))
    return got


def mode_table(win_mode: np.ndarray) -> np.ndarray:
    """The mode of each :func:`row_window` value: full before the first switch, then each switch's."""
    return np.concatenate([np.array([S.WINDOW_FULL], win_mode.dtype), win_mode])


def window_spans(events: Any, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, mode) of each window in a process's events table, in time order; each ends at
    the next WINDOW row, the last at ``end``."""
    sel = events.column("kind").to_numpy() == S.WINDOW
    ts, mode = events.column("ts_ns").to_numpy()[sel], events.column("id").to_numpy()[sel]
    order = np.argsort(ts, kind="stable")
    ts, mode = ts[order], mode[order]
    return ts, np.append(ts[1:], end), mode


def mode_at(win_ts: np.ndarray, win_mode: np.ndarray, t: np.ndarray, side: str = "right") -> np.ndarray:
    i = np.searchsorted(win_ts, t, side=side) - 1
    return np.where(i >= 0, win_mode[np.maximum(i, 0)], S.WINDOW_FULL)


def _live_from(tl: Timeline, win_ts: np.ndarray, coll: np.ndarray) -> np.ndarray:
    """Per window: when its collectors were first seen recording (the window's end if never).

    Switching a collector on takes effect with a delay (CUPTI re-instruments before its first
    record), and until the first record nothing was paid: that part of a full window is light.
    """
    live = np.full(len(win_ts) + 1, np.iinfo(np.int64).max, np.int64)
    wi = row_window(tl)
    lo = np.r_[np.iinfo(np.int64).min, win_ts].astype(np.int64)  # per window: its start
    types = (native.N, native.BOOL, None, native.I64, native.N, native.I64, native.I64, native.I64)
    fn = native.typed("windows_live_from", [wi.dtype], *types)
    if fn is not None:
        starts = tl.thread_starts()
        fn(len(coll), coll, wi, tl.ts, len(starts) - 1, starts, lo, live)
        return live
    rows = np.flatnonzero(coll)
    wi = wi[rows]  # 0: before the first window
    # a thread's rows are in time order, so are the starts below within a (thread, window): only
    # each one's first collector row can hold its earliest (a few of millions of torch ops)
    first = np.ones(len(rows), bool)
    first[1:] = (wi[1:] != wi[:-1]) | (tl.thread_idx[rows[1:]] != tl.thread_idx[rows[:-1]])
    rows, wi = rows[first], wi[first]
    # the cost of a recorded call starts before its row: from the thread's previous row on
    prev = np.maximum(rows - 1, 0)
    same = (rows > 0) & (tl.thread_idx[prev] == tl.thread_idx[rows])
    start = np.where(same, tl.ts[prev], tl.ts[rows])
    start = np.maximum(start, lo[wi])
    np.minimum.at(live, wi, start)
    return live


def _collectors_live(tl: Timeline, win_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`collector_rows`, :func:`_live_from` of them): in C in one pass over the rows, each row's
    window read from :func:`window_changes` (no column of row_window's), else one after the other."""
    on = toggled(tl)
    ok = tl.kind.dtype == np.int8 and tl.ts.dtype == np.int64
    types = (native.N, native.I8, None, *[native.N] * 6, native.N, native.I64, native.I64, native.I64)
    types += (native.N, native.I64, native.I64, native.BOOL, native.I64)
    fn = native.typed("windows_collector_live", [tl.id.dtype], *types) if ok else None
    if fn is None:
        coll = collector_rows(tl)
        return coll, _live_from(tl, win_ts, coll)
    coll = np.empty(len(tl.ts), bool)
    live = np.full(len(win_ts) + 1, np.iinfo(np.int64).max, np.int64)
    lo = np.r_[np.iinfo(np.int64).min, win_ts].astype(np.int64)  # per window: its start
    starts = tl.thread_starts().astype(np.int64)
    rows, ws = window_changes(tl)
    args = (on["backend"], on["gpu"], *_COLLECTOR_CODES, len(rows), rows, ws, tl.ts, len(starts) - 1, starts)
    fn(len(coll), tl.kind, tl.id, *args, lo, coll, live)
    return coll, live


def _effective_mode(win_ts: np.ndarray, win_mode: np.ndarray, live: np.ndarray, t: np.ndarray) -> np.ndarray:
    """FULL where a full window's collectors were live at ``t``, else LIGHT."""
    wi = np.searchsorted(win_ts, t, side="right")
    mode = mode_table(win_mode)[wi]
    return np.where((mode == S.WINDOW_FULL) & (t >= live[wi]), S.WINDOW_FULL, S.WINDOW_LIGHT)


def _placed(
    win_ts: np.ndarray, win_mode: np.ndarray, live: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per interval from ``start`` to ``end`` (an instance, a piece): (whether it lies wholly in one
    window, its :func:`_effective_mode`, its group: 2 x the window + 1 where full)."""
    types = (native.N, native.I64, native.I64, native.N, *[native.I64] * 3, native.N, native.N)
    fn = native.function("windows_place", *types, native.BOOL, native.I64, native.I64)
    if fn is None or not (start.dtype == end.dtype == win_ts.dtype == np.int64):
        win = np.searchsorted(win_ts, start, side="right")
        mode = _effective_mode(win_ts, win_mode, live, start)
        return win == np.searchsorted(win_ts, end, side="left"), mode, 2 * win + (mode == S.WINDOW_FULL)
    n = len(start)
    whole, mode, group = np.empty(n, bool), np.empty(n, np.int64), np.empty(n, np.int64)
    mode_of = mode_table(win_mode).astype(np.int64)  # per window
    fn(n, start, end, len(win_ts), win_ts, mode_of, live, S.WINDOW_FULL, S.WINDOW_LIGHT, whole, mode, group)
    return whole, mode, group


def collector_kinds(tl: Timeline) -> dict[str, np.ndarray]:
    """Per expensive collector, the rows that open one of its intervals (a torch op, a CUDA API call)."""
    backend_cat = (tl.kind == S.CAT_BEGIN) & (tl.id == categories.BACKEND)
    return {"backend": (tl.kind == S.BACKEND_BEGIN) | backend_cat, "gpu": tl.kind == S.API_BEGIN}


# the kinds and category windows.c's collector loops tell collector_kinds' rows by
_COLLECTOR_CODES = (S.BACKEND_BEGIN, S.CAT_BEGIN, categories.BACKEND, S.API_BEGIN)


def _collector_fn(name: str, tl: Timeline, *argtypes: Any) -> Any:
    """windows.c's collector loop ``name`` made for ``tl.id``'s type (and each of ``argtypes`` that
    is a column, for its own), or None where the numpy columns of collector_kinds are made."""
    if tl.kind.dtype != np.int8:
        return None
    dtypes = [tl.id.dtype, *(c.dtype for c in argtypes)]
    types = (native.N, native.I8, *(native.INTEGER.get(d) for d in dtypes))
    return native.typed(name, dtypes, *types, *[native.N] * 6, native.BOOL)


def toggled(tl: Timeline) -> dict[str, bool]:
    """Which collectors the windows switched: seen in full windows and never in light ones.

    A collector that cannot be switched (Kineto) records in both; its cost is then not measured
    by the windows and the calibrated per-event cost applies to it. In C, one pass over the rows
    without a column of each (windows.c), finding each row's window on the way (:func:`_flags_by_ts`);
    else from collector_kinds' columns.
    """
    got = tl.memo.get("toggled")
    if got is None:
        light_of = mode_table(window_rows(tl)[1]) == S.WINDOW_LIGHT  # per row_window value
        flags = np.zeros(5, bool)  # seen (backend, gpu), seen in a light window, any light row
        if _flags_by_ts(tl, light_of, flags):
            got = {
                k: bool(flags[4] and flags[i] and not flags[2 + i]) for i, k in enumerate(("backend", "gpu"))
            }
        else:
            light = take(mode_table(window_rows(tl)[1]), row_window(tl)) == S.WINDOW_LIGHT
            kinds = collector_kinds(tl)
            if not light.any():
                got = {k: False for k in kinds}
            else:
                got = {k: bool(rows.any() and not (rows & light).any()) for k, rows in kinds.items()}
        tl.memo["toggled"] = got
    return dict(got)


def _flags_by_ts(tl: Timeline, light_of: np.ndarray, flags: np.ndarray) -> bool:
    """toggled's ``flags`` in C in one pass over the rows, each row's window found on the way from its
    time and not kept: the rows where it changes (a few per thread and switch) are, and
    :func:`row_window` makes its column from them when the estimate asks. A column of every row is
    then not held through the per-event correction that follows, the analysis's peak of memory.
    False where no such loop is made for the columns' types (nothing done)."""
    win_ts = window_rows(tl)[0]
    if tl.kind.dtype != np.int8 or tl.ts.dtype != np.int64 or win_ts.dtype != np.int64:
        return False
    if len(win_ts) >= np.iinfo(np.int32).max:  # the loop's windows are int32
        return False
    types = (native.N, native.I8, None, native.I64, native.N, native.I64, native.BOOL, *[native.N] * 4)
    types += (native.BOOL, native.N, native.I64, native.I64)
    fn = native.typed("windows_collector_flags_ts", [tl.id.dtype], *types, restype=native.N)
    if fn is None:
        return False
    cap = min(len(tl.ts), _CHANGES)
    rows, ws = np.empty(cap, np.int64), np.empty(cap, np.int64)
    args = (len(tl.ts), tl.kind, tl.id, tl.ts, len(win_ts), win_ts, light_of, *_COLLECTOR_CODES, flags)
    m = fn(*args, cap, rows, ws)
    if m <= cap:  # else row_window searches again
        tl.memo["window_changes"] = (rows[:m].copy(), ws[:m].copy())
    return True


# the rows where the window changes that toggled's pass lists (threads and switches are few)
_CHANGES = 1 << 16


def collector_rows(tl: Timeline) -> np.ndarray:
    """Rows that open an interval of a collector the windows switched."""
    on = toggled(tl)
    out = np.zeros(len(tl.ts), bool)
    fn = _collector_fn("windows_collector_rows", tl)
    if fn is not None:
        fn(len(out), tl.kind, tl.id, on["backend"], on["gpu"], *_COLLECTOR_CODES, out)
        return out
    kinds = collector_kinds(tl)
    for k, switched in on.items():
        if switched:
            out |= kinds[k]
    return out


def estimate(
    tl: Timeline, raw: Timeline | None = None, min_instances: int = MIN_INSTANCES
) -> WindowEstimate | None:
    """The window estimate of a (residual-corrected) timeline, or None when it has no light windows.

    ``raw``: the same rows before correction. Which window a row or an instance is in is read
    there, on the clock the switches were made by; durations come from ``tl``. (Correction moves
    each thread by its own removed time, so another thread's rows drift against the main thread's
    window switches.)
    """
    ref = raw if raw is not None else tl
    win_ts, win_mode = window_rows(ref)
    if not ((win_mode == S.WINDOW_LIGHT).any() and (win_mode == S.WINDOW_FULL).any()):
        return None
    coll, live = _collectors_live(ref, win_ts)
    # full: in a full window, from its collectors' first record on (one threshold per window; a light
    # window's is past every time)
    from_ts = np.where(mode_table(win_mode) == S.WINDOW_FULL, live, np.iinfo(np.int64).max)
    main = _main_ranges(tl)
    # the full rows and the instances' sums: in C in one pass over the rows (_instance_pass), else
    # one after another. Each row's length (``dur``): a column where the numpy loops run, which then
    # takes the factors, else worked out from tl's segments in each C pass that reads it (None: no
    # column of every row at the analysis's peak of memory). The rows counted for an operation's
    # factor (_counted_rows): a column where the numpy loops run, worked out on the way in C from
    # ``full_row`` and the main thread's blocks
    counted = dur = None
    first = _instance_pass(tl, ref, from_ts, coll, main)
    if first is not None:
        full_row, row_mode, excl, events, held, inst_rows = first
    else:
        dur = tl.float_duration()
        full_row, row_mode = _full_rows(ref.ts, row_window(ref), from_ts)  # as _effective_mode
        counted = _counted_rows(tl, full_row) if native.unavailable() else None
        excl, events, held, inst_rows = _instance_sums(tl, dur, coll, full_row, main, counted)
    # each raw row's window is read no further here (full_windows.full_fraction finds it on the way
    # in C): a column of every row (where the numpy loops made it) not held through the factors
    del first
    ref.memo.pop("row_window", None)
    ref.memo.pop("window_changes", None)
    excl, events = excl[1:], events[1:]
    # and whether it lies wholly in one window
    begins = op_begins(ref)
    inst = tl.id[begins]
    b_ts, e_ts = ref.ts[begins], ref.inst_end[inst]
    whole, mode, group = _placed(win_ts, win_mode, live, b_ts, e_ts)
    name = tl.inst_name[inst]
    inst_phase = np.append(tl.inst_name, -1)[tl.phase[begins]]

    # work a switch left for the operation right after it: out first, so the windows compare the rest
    ok = whole & (tl.thread_of(begins) == tl.main_thread)
    win_idx = window_indices(ref)
    cut, transients = switch_transients(tl, begins, inst, name, ok, mode, excl, win_idx)
    # per operation name (and the unannotated main-thread time): events and time in full windows, of
    # one dense index of the names found among the instances counted (by instance + 1, ``held``)
    key_name = np.append(UNANNOTATED_ID, tl.inst_name)  # per instance + 1
    keys = np.unique(key_name[held])
    inst_key = np.searchsorted(keys, key_name)
    # with the rows whose instance keeps less than its exclusive time (all of it elsewhere)
    kept_inst = np.append(False, (cut > 0) & (excl > 0))
    keep_inst = np.ones(len(kept_inst))  # per instance + 1: the share of its time it keeps
    keep_inst[kept_inst] = 1.0 - cut[kept_inst[1:]] / excl[kept_inst[1:]]
    scaled = (kept_inst, keep_inst, cut, excl, inst_key, len(keys), inst_rows)
    full_time, full_events, kept_rows, kept = _counted_sums(tl, dur, coll, full_row, main, counted, *scaled)
    del scaled
    excl = excl - cut
    per_op: dict[int, dict] = {
        int(k): {"full_time_ns": float(t), "full_events": int(ev)}
        for k, t, ev in zip(keys.tolist(), full_time, full_events, strict=True)
    }

    # operations measured by their own windows: each full window against its light neighbours
    num = den = num_u = den_u = var = var_u = 0.0  # var: the removals' variances (ns^2)
    for key, e in per_op.items():
        if key == UNANNOTATED_ID:
            continue
        named = name == key
        mine = np.flatnonzero(whole & named)
        g_mine, m_mine, v_mine = group[mine], mode[mine], excl[inst[mine]]  # gathered once for all below
        e.update(light_n=int((m_mine == S.WINDOW_LIGHT).sum()), full_n=int((m_mine == S.WINDOW_FULL).sum()))
        wins = _windows(g_mine, m_mine, v_mine)  # once, for the four below
        e["light_window_ns"] = light_quantiles(*wins[:3])
        e["light_windows"] = window_samples(*wins[:3])
        e["full_windows"] = window_samples(*wins[:3], full=True)
        if e["full_events"] == 0:
            e.update(factor=1.0, method="no collector events", sigma_ns=0.0)
            continue
        full_inst = named & (mode == S.WINDOW_FULL)  # whole or not: what the removal covers
        full_events = float(events[inst[full_inst]].sum())
        full_g, full_med, ref = paired_windows(g_mine, m_mine, v_mine, wins)
        if len(full_g) >= MIN_PAIRS and e["light_n"] >= min_instances and e["full_n"] >= min_instances:
            removed, sigma = paired_excess(full_med, ref, full_g, group[full_inst], e["full_time_ns"])
            e.update(factor=1.0 - removed / e["full_time_ns"], method="windows", pairs=len(full_g))
            e["sigma_ns"] = sigma
            num += removed
            den += full_events
            var += sigma**2
        elif e["light_n"] >= MIN_UNPAIRED and e["full_n"] >= MIN_UNPAIRED:
            # too few windows to pair (an operation run once per rollout): its own instances, full
            # against light over the whole run (unpaired_excess)
            warm = warm_instances(mine, named, b_ts, m_mine == S.WINDOW_FULL)
            sel = mine[warm]
            removed, sigma = unpaired_excess(
                excl[inst[sel]], group[sel], mode[sel], int(full_inst.sum()), e["full_time_ns"]
            )
            e.update(
                factor=1.0 - removed / e["full_time_ns"] if e["full_time_ns"] > 0 else 1.0,
                method="unpaired",
                sigma_ns=sigma,
            )
            num_u += removed
            den_u += full_events
            var_u += sigma**2
        else:
            e["method"] = "pooled"
            e["own_excess_ns"] = own_excess(v_mine, m_mine == S.WINDOW_FULL, e["full_time_ns"])
    # the pooled cost per event: from the paired operations, else (a short run) the unpaired ones
    cost = max(num / den, 0.0) if den > 0 else max(num_u / den_u, 0.0) if den_u > 0 else None
    # its uncertainty per event: the estimates it pools are uncertain too, and a pooled cost near
    # zero from a drifting short run (SB3 PPO on an H100: 75-151 ns an event where 3,800 was due)
    # would otherwise report half of almost nothing
    cost_sigma = math.sqrt(var) / den if den > 0 else math.sqrt(var_u) / den_u if den_u > 0 else 0.0
    notes: list[str] = []
    pending = [k for k, e in per_op.items() if "factor" not in e and e["full_events"] > 0]
    # operations never seen in a full window: their categories and GPU work were never recorded
    inst_full = mode == S.WINDOW_FULL
    seen_full = set(np.unique(name[inst_full]).tolist()) | set(per_op)
    ids, counts = np.unique(name, return_counts=True)
    light_only = {k: c for k, c in zip(ids.tolist(), counts.tolist(), strict=True) if k not in seen_full}
    # the instances' columns read no further: let go before the pieces' and the factors' columns (the
    # analysis's peak of memory is at them)
    del inst, b_ts, e_ts, whole, mode, group, ok, excl, events, held, inst_rows, inst_key, kept_inst, cut
    clock = raw if raw is not None else tl  # (``ref`` is a light reference by now)
    # the pieces of the operations pending and their sums, then the collector rows (a column of every
    # row) let go: not alive beside the rest of the pieces' work and the factors'
    sums = _asked_pieces(tl, clock, dur, (kept_rows, kept), coll, full_row, pending)
    del coll
    by_pieces = piece_estimates(sums, win_ts, win_mode, live, pending, min_instances)
    del sums
    if counted is not None:  # (the factors read ``counted`` then, else ``full_row``)
        full_row = np.zeros(0, bool)
    overrides: list[PieceEstimate] = []  # whose rows' factors its pieces set
    rest_factor: dict[int, float] = {}  # per operation with pieces: the factor of its other rows
    for key, e in per_op.items():
        if "factor" in e:
            continue
        if key == UNANNOTATED_ID:
            e.update(light_n=0, full_n=0, method="pooled" if e["full_events"] else "no collector events")
        est = by_pieces.get(key)
        if e["full_events"] == 0:
            e.update(factor=1.0, method="no collector events", sigma_ns=0.0)
        elif est is not None and e["full_time_ns"] > 0:
            # its pieces where they can be compared; the rest of its full-window time (pieces too
            # rare, rows off the main thread) at the pooled cost per event
            rest_time = max(e["full_time_ns"] - est.time_ns, 0.0)
            rest_events = max(e["full_events"] - est.events, 0)
            rest = min(cost * rest_events, rest_time) if cost is not None else 0.0
            removed = est.removed_ns + rest
            rest_sigma = math.hypot(FALLBACK_REL_SIGMA * rest, cost_sigma * rest_events)
            e.update(
                factor=1.0 - removed / e["full_time_ns"],
                method="pieces",
                pieces=est.counts,
                sigma_ns=math.hypot(est.sigma_ns, rest_sigma),
            )
            rest_factor[key] = 1.0 - rest / rest_time if rest_time > 0 else 1.0
            overrides.append(est)
        elif cost is None or e["full_time_ns"] <= 0:
            e.update(factor=1.0, method="not corrected", sigma_ns=0.0)
            notes.append(f"{NOT_MEASURABLE}: no operation was seen in both kinds of window")
        else:
            pooled = cost * e["full_events"]
            removed = min(pooled, e["full_time_ns"])
            cap = e.get("own_excess_ns")
            sigma = math.hypot(FALLBACK_REL_SIGMA * removed, cost_sigma * e["full_events"])
            if cap is not None and cap < removed:  # its own instances say it lost less
                removed = cap
                e["method"] = "pooled, capped by its own instances"
                e["pooled_ns"] = pooled
                sigma = FALLBACK_REL_SIGMA * removed
            e.update(factor=1.0 - removed / e["full_time_ns"], sigma_ns=sigma)

    per_key = [rest_factor.get(int(k), per_op[int(k)]["factor"]) for k in keys.tolist()]
    # the factors: their tables where the C loops run (RowFactors: correct_windows works each row's
    # out as it reads it), else a column, in the durations' own memory where the numpy loops made them
    factor: np.ndarray | RowFactors | None = _factor_pass(
        tl, counted, full_row, main, keys, key_name, per_key, overrides, keep_inst
    )
    if factor is None:  # one after another
        out = dur if dur is not None else np.empty(len(tl.ts))
        del dur
        factor = _counted_factor(tl, counted, full_row, main, keys, key_name, per_key, out=out)
        for est in overrides:
            est.set_factors(factor, row_mode)
        factor[kept_rows] *= kept
        del out
    else:
        del dur
    for e in per_op.values():
        e["removed_ns"] = e["full_time_ns"] * (1.0 - e["factor"])
    for key, (cut, sigma) in transients.items():
        e = per_op.get(key)
        if e is not None:
            e["removed_ns"] += cut
            e["after_switch_removed_ns"] = cut
            e["sigma_ns"] = float(np.hypot(e["sigma_ns"], sigma))
    return WindowEstimate(
        light_only=light_only,
        switches=max(len(win_ts) - 1, 0),
        factor=factor,
        row_mode=row_mode,
        per_op=per_op,
        cost_per_event_ns=cost,
        notes=sorted(set(notes)),
        inst_name=name,
        inst_phase=inst_phase,
        inst_full=inst_full,
        begins=begins,
        window_idx=win_idx,
    )


def _full_rows(ts: np.ndarray, wi: np.ndarray, from_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per row: whether it is in a full window's measured part, ``ts`` at or after its window's
    ``from_ts``; its mode, WINDOW_FULL or WINDOW_LIGHT, one byte); ``wi``: :func:`row_window`."""
    full_row = np.empty(len(wi), bool)
    types = (native.N, native.I64, None, native.I64, native.BOOL, native.I8, native.N, native.N)
    fn = native.typed("windows_full_rows", [wi.dtype], *types)
    if fn is not None:
        row_mode = np.empty(len(wi), np.int8)
        fn(len(wi), ts, wi, from_ts, full_row, row_mode, S.WINDOW_FULL, S.WINDOW_LIGHT)
        return full_row, row_mode
    for r in blocks(len(wi)):  # a block at a time: no column of every row's threshold
        np.greater_equal(ts[r], from_ts[wi[r]], out=full_row[r])
    return full_row, _row_mode(full_row)


def _instance_pass(
    tl: Timeline, raw: Timeline, from_ts: np.ndarray, coll: np.ndarray, main: np.ndarray
) -> tuple[np.ndarray, ...] | None:
    """(full rows, row modes (:func:`_row_mode`), then :func:`_instance_sums`' four) in C in one pass
    over the rows: :func:`_full_rows` (on ``raw``'s ts, each row's window read from its
    :func:`window_changes`) and :func:`_instance_sums` over Timeline.float_duration at once, each
    column read once, each row's length worked out on the way (no column of them), ``raw``'s ts
    only in the windows where some rows are full and some not (from_ts within them). None where the
    numpy loops run or the columns are of other types: those three are then made one after another."""
    win_ts = window_rows(raw)[0]
    if any(c.dtype != np.int64 for c in (tl.ts, raw.ts, from_ts, win_ts)):
        return None
    types = (native.N, native.SEGMENTS, native.I64, native.N, native.I64, native.I64, native.N)
    types += (native.I64, native.I64, None, native.BOOL, native.N, native.I64, native.BOOL)
    types += (native.F64, native.I64, native.I64, native.BOOL)
    fn = native.typed("windows_instance_rows", [tl.op.dtype], *types)
    if fn is None:
        return None
    n, m = len(tl.ts), len(tl.inst_name) + 1
    full_row = np.empty(n, bool)
    excl, events, rows, held = np.zeros(m), np.zeros(m, np.intp), np.zeros(m, np.int64), np.zeros(m, bool)
    at, ws = window_changes(raw)
    fn(
        n, tl.segments(), raw.ts, len(at), at, ws, len(win_ts), win_ts, from_ts, tl.op, coll,
        len(main) // 2, main, full_row, excl, events, rows, held,
    )  # fmt: skip
    return full_row, _row_mode(full_row), excl, events, held, rows


def _row_mode(full_row: np.ndarray) -> np.ndarray:
    """Per row, WINDOW_FULL where ``full_row`` is set, else WINDOW_LIGHT, one byte: ``full_row``'s own
    bytes where the modes are 1 and 0 (as they are), no second column of every row."""
    if S.WINDOW_FULL == 1 and S.WINDOW_LIGHT == 0:
        return full_row.view(np.int8)
    return np.where(full_row, np.int8(S.WINDOW_FULL), np.int8(S.WINDOW_LIGHT))


def _instance_sums(
    tl: Timeline,
    dur: np.ndarray,
    coll: np.ndarray,
    full_row: np.ndarray,
    main: np.ndarray,
    counted: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Per instance + 1 (the rows outside every instance in an entry of their own): (exclusive time,
    collector events, whether counted rows are in it, its rows or None).

    Added in row order (np.add.at: one addition after another, as a count over every row at once
    makes them), a block of rows at a time where the numpy loops run (``counted``: the counted rows,
    :func:`_counted_rows`), else in C in one pass (``full_row``, ``main``: :func:`_main_ranges`), which
    also counts each instance's rows for :func:`_counted_sums`."""
    n = len(tl.inst_name) + 1
    excl, events, held = np.zeros(n), np.zeros(n, np.intp), np.zeros(n, bool)
    types = (native.N, None, native.F64, native.BOOL, native.BOOL, native.N, native.I64)
    fn = native.typed(
        "windows_instance_sums", [tl.op.dtype], *types, native.F64, native.I64, native.I64, native.BOOL
    )
    if fn is not None and counted is None:
        rows = np.zeros(n, np.int64)
        fn(len(dur), tl.op, dur, coll, full_row, len(main) // 2, main, excl, events, rows, held)
        return excl, events, held, rows
    if counted is None:
        counted = _counted_rows(tl, full_row)
    for r in blocks(len(dur)):
        i1 = tl.op[r].astype(np.intp) + 1
        np.add.at(excl, i1, dur[r])
        np.add.at(events, i1[coll[r]], 1)
        held[i1[counted[r]]] = True
    return excl, events, held, None


def _counted_sums(
    tl: Timeline,
    dur: np.ndarray | None,
    coll: np.ndarray,
    full_row: np.ndarray,
    main: np.ndarray,
    counted: np.ndarray | None,
    kept_inst: np.ndarray,
    keep_inst: np.ndarray,
    cut: np.ndarray,
    excl: np.ndarray,
    inst_key: np.ndarray,
    n_keys: int,
    inst_rows: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per key (``inst_key``: each instance + 1's): (time, collector events) of its counted rows,
    after the rows of the instances ``kept_inst`` (per instance + 1) are scaled in ``dur`` by what
    they keep, 1 - cut / excl (per instance; ``keep_inst``: that share per instance + 1, 1 where all);
    and those rows and that share, for the factors.

    ``dur``: each row's length (Timeline.float_duration), None where the C loops run: in C in one
    pass, each row's length worked out from tl's segments (the same bits: _instance_pass), the rows
    scaled listed into an array of their count (``inst_rows``: each instance + 1's rows, from
    :func:`_instance_sums`). Else summed in row order, np.add.at a block at a time (``counted``:
    :func:`_counted_rows`), the kept rows scaled in ``dur``."""
    full_time, full_events = np.zeros(n_keys), np.zeros(n_keys, np.intp)
    types = (native.N, None, native.SEGMENTS, native.BOOL, native.BOOL, native.N, native.I64, native.BOOL)
    types += (native.F64, native.I64, native.F64, native.I64, native.I64)
    fn = native.typed("windows_counted_sums", [tl.op.dtype], *types, restype=native.N)
    if dur is None and fn is not None and inst_rows is not None:
        kept_rows = np.empty(int(inst_rows[kept_inst].sum()), np.int64)
        args = (len(tl.ts), tl.op, tl.segments(), coll, full_row, len(main) // 2, main, kept_inst, keep_inst)
        fn(*args, inst_key, full_time, full_events, kept_rows)
        i = tl.op[kept_rows]
        return full_time, full_events, kept_rows, 1.0 - cut[i] / excl[i]
    if dur is None:
        dur = tl.float_duration()
    if counted is None:
        counted = _counted_rows(tl, full_row)
    kept_parts = [np.zeros(0, np.intp)]
    for r in blocks(len(dur)):
        kept_parts.append(np.flatnonzero(kept_inst[tl.op[r].astype(np.intp) + 1]) + r.start)
    kept_rows = np.concatenate(kept_parts)
    i = tl.op[kept_rows]
    kept = 1.0 - cut[i] / excl[i]  # what it keeps
    del i
    dur[kept_rows] *= kept
    for r in blocks(len(dur)):
        c = counted[r]
        key = inst_key[tl.op[r][c].astype(np.intp) + 1]
        np.add.at(full_time, key, dur[r][c])
        full_events += np.bincount(key[coll[r][c]], minlength=n_keys)
    return full_time, full_events, kept_rows, kept


def _main_ranges(tl: Timeline) -> np.ndarray:
    """The main thread's rows as [start, stop) pairs, flat (tl.on_threads' blocks): what windows.c
    reads where the numpy loops make a column of every row."""
    starts = tl.thread_starts()
    on = np.flatnonzero(np.isin(tl.thread_of(starts[:-1]), np.array([tl.main_thread])))
    return np.stack([starts[on], starts[on + 1]], axis=1).astype(np.int64).ravel()


def _counted_rows(tl: Timeline, full_row: np.ndarray) -> np.ndarray:
    """Per row: whether its time counts for its operation's (or the unannotated time's) factor: in
    a full window, and in an instance or on the main thread."""
    return full_row & ((tl.op >= 0) | tl.on_threads(np.array([tl.main_thread])))


def _counted_factor(
    tl: Timeline,
    counted: np.ndarray | None,
    full_row: np.ndarray,
    main: np.ndarray,
    keys: np.ndarray,
    key_name: np.ndarray,
    per_key: list[float],
    out: np.ndarray,
) -> np.ndarray:
    """Per row: its key's factor where counted (``counted``, else in C from ``full_row`` and ``main``
    as :func:`_counted_rows` makes it; ``key_name``: each instance's key, after the
    unannotated one's), else 1, written into ``out`` (a column of every row read no further: no
    new one beside it). Read per row through a table of the instances (a row outside every
    instance, -1, reads its last entry: the unannotated time's), not gathered for the counted rows."""
    if len(keys) == 0:
        out[:] = 1.0
        return out
    per_inst = np.array(per_key)[np.minimum(np.searchsorted(keys, key_name), len(keys) - 1)]
    types = (native.N, None, native.BOOL, native.N, native.I64, native.F64, native.F64)
    fn = native.typed("windows_counted_factor", [tl.op.dtype], *types)
    if counted is None and fn is not None:
        fn(len(out), tl.op, full_row, len(main) // 2, main, per_inst, out)
        return out
    if counted is None:
        counted = _counted_rows(tl, full_row)
    per_op = np.append(per_inst[1:], per_inst[0])
    for rows in blocks(len(out)):  # a block at a time (rlscope.blocks): no temporary of every row
        out[rows] = np.where(counted[rows], per_op[tl.op[rows]], 1.0)
    return out


def _factor_pass(
    tl: Timeline,
    counted: np.ndarray | None,
    full_row: np.ndarray,
    main: np.ndarray,
    keys: np.ndarray,
    key_name: np.ndarray,
    per_key: list[float],
    overrides: list[PieceEstimate],
    keep_inst: np.ndarray,
) -> RowFactors | None:
    """Per row, the estimate's factor: :func:`_counted_factor`, then each of ``overrides``'
    PieceEstimate.set_factors, then each row times what its instance keeps (``keep_inst``, per
    instance + 1: 1 where all), as the tables windows_factor_pass makes them from in one pass over
    the rows (RowFactors: no column of every row); None where the numpy loops run (``counted``) or no
    such loop is made for the columns' types: those three are then made one after another. The
    first of ``overrides`` takes the others' compared pieces and their factors (the estimates'
    compared pieces, of one Pieces) are merged in their order."""
    types = (native.N, None, native.BOOL, native.N, native.I64, native.F64, native.F64, native.N)
    types += (native.I64, native.I64, native.N, native.F64, native.F64)
    fn = native.typed("windows_factor_pass", [tl.op.dtype], *types)
    if counted is not None or fn is None or len(keys) == 0:
        return None
    per_inst = np.array(per_key)[np.minimum(np.searchsorted(keys, key_name), len(keys) - 1)]
    # the pieces of every estimate (one Pieces for all of them; an estimate's compared pieces are of
    # its own operation's classes, never another's): merged in their order
    compared, piece_factor, bounds, first = np.zeros(0, np.int64), np.zeros(0), np.zeros(1, np.int64), 0
    if overrides:
        compared = np.concatenate([est.compared for est in overrides]).astype(np.int64, copy=False)
        piece_factor = np.concatenate([est.factor for est in overrides])
        if len(overrides) > 1:
            order = np.argsort(compared, kind="stable")
            compared, piece_factor = compared[order], piece_factor[order]
        pc = overrides[0].pieces
        bounds, first = pc.bounds, pc.main.start
    counted_f = per_inst * keep_inst
    return RowFactors(tl.op, full_row, main, counted_f, keep_inst, compared, bounds, int(first), piece_factor)


@dataclasses.dataclass
class PieceEstimate:
    """What an operation's (or the unannotated time's) pieces say (:mod:`rlscope.overhead.correct.pieces`)."""

    removed_ns: float  # from the classes compared, over their full-window time
    sigma_ns: float
    time_ns: float  # full-window time of the classes compared
    events: int  # their collector events in full windows
    pieces: P.Pieces  # the main thread's pieces, the same for every operation's estimate (their rows)
    compared: np.ndarray  # the pieces (ascending) of its classes compared: a few of every piece
    factor: np.ndarray  # per piece of ``compared``: its class's factor
    counts: dict[str, int]  # classes by how they were compared

    def set_factors(self, factor: np.ndarray, row_mode: np.ndarray) -> None:
        """Set ``factor`` (per timeline row) of the full-window rows (``row_mode``) of the pieces
        compared, a group of pieces at a time (:meth:`Pieces.groups`): no column of their rows."""
        chosen = np.ascontiguousarray(self.compared, np.int64)
        types = (native.N, native.I64, native.I64, native.N, native.I8, native.N, native.F64, native.F64)
        fn = native.function("windows_set_piece_factors", *types)
        if fn is not None and row_mode.dtype == np.int8:
            pc = self.pieces
            fn(len(chosen), chosen, pc.bounds, pc.main.start, row_mode, S.WINDOW_FULL, self.factor, factor)
            return
        at = 0  # where the group's pieces are among ``compared``
        for group in self.pieces.groups(chosen):
            rows, piece = self.pieces.rows_of(group)
            on = row_mode[rows] == S.WINDOW_FULL
            factor[rows[on]] = self.factor[at + np.searchsorted(group, piece[on])]
            at += len(group)


def _piece_sums(
    pc: P.Pieces,
    chosen: np.ndarray,
    tl: Timeline,
    dur: np.ndarray | None,
    kept: tuple[np.ndarray, np.ndarray],
    coll: np.ndarray,
    full_row: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per piece of ``chosen`` (ascending), in its order: (time, time in full windows, collector
    events in full windows). Each piece's sums are over its own rows in their order: in C a piece
    after another, else a group of pieces at a time (all of a piece's rows in one group, as one pass
    over all the rows makes them). Entries of the pieces chosen only: a quarter of them in a PPO run.

    ``dur``: each row's length as :func:`_counted_sums` leaves it, or None where the C loops run:
    worked out there from tl's segments, times what its instance keeps at the rows ``kept`` lists
    (_counted_sums' kept rows, ascending, and that share), no column of every row."""
    n = len(chosen)
    ptime, pfull_time, pfull_events = np.zeros(n), np.zeros(n), np.zeros(n, np.intp)
    types = (native.N, native.I64, native.I64, native.N, native.SEGMENTS, native.N, native.I64, native.F64)
    types += (native.BOOL, native.BOOL, native.F64, native.F64, native.I64)
    fn = native.function("windows_chosen_piece_sums", *types)
    kept_rows, keeps = kept[0], np.ascontiguousarray(kept[1], np.float64)
    if dur is None and fn is not None and kept_rows.dtype == np.int64:
        chosen = np.ascontiguousarray(chosen, np.int64)
        args = (pc.bounds, pc.main.start, tl.segments(), len(kept_rows), kept_rows, keeps, coll, full_row)
        fn(n, chosen, *args, ptime, pfull_time, pfull_events)
        return ptime, pfull_time, pfull_events
    if dur is None:  # each row's length, as _counted_sums' numpy loops leave it
        dur = tl.float_duration()
        dur[kept_rows] *= keeps
    at = 0  # where the group's pieces are among ``chosen``
    for group in pc.groups(chosen):
        rows, pr = pc.rows_of(group)
        lo = int(group[0])
        pr -= lo
        m = int(group[-1]) + 1 - lo
        d, full = dur[rows], full_row[rows]
        mine = slice(at, at + len(group))
        ptime[mine] = np.bincount(pr, weights=d, minlength=m)[group - lo]
        pfull_time[mine] = np.bincount(pr, weights=np.where(full, d, 0.0), minlength=m)[group - lo]
        pfull_events[mine] = np.bincount(pr[coll[rows] & full], minlength=m)[group - lo]
        at += len(group)
    return ptime, pfull_time, pfull_events


def _asked_pieces(
    tl: Timeline,
    raw: Timeline,
    dur: np.ndarray | None,
    kept: tuple[np.ndarray, np.ndarray],
    coll: np.ndarray,
    full_row: np.ndarray,
    keys: list[int],
) -> tuple[P.Pieces, np.ndarray, np.ndarray, np.ndarray] | None:
    """(the main thread's pieces, the columns of those of the operations ``keys`` only; their
    :func:`_piece_sums`), what :func:`piece_estimates` compares; None where no key is asked or the
    main thread has no rows. The unannotated time's pieces are a quarter of them, a third of the
    main thread's rows, in a PPO run. ``dur``, ``kept``: each row's length as :func:`_piece_sums`
    reads them."""
    if not keys:
        return None
    pc = P.pieces(tl, raw, keys)
    if pc.main.stop == pc.main.start:
        return None
    return (pc, *_piece_sums(pc, pc.index, tl, dur, kept, coll, full_row))


def piece_estimates(
    asked_pieces: tuple[P.Pieces, np.ndarray, np.ndarray, np.ndarray] | None,
    win_ts: np.ndarray,
    win_mode: np.ndarray,
    live: np.ndarray,
    keys: list[int],
    min_instances: int = MIN_INSTANCES,
) -> dict[int, PieceEstimate]:
    """Per operation name in ``keys`` (-1: unannotated) with at least one class of main-thread pieces
    compared in both kinds of window: what they remove (docs/overhead.md, "Pieces"). ``asked_pieces``:
    their pieces and sums (:func:`_asked_pieces`).

    Each class is compared as an operation's instances are: its full windows' median over their
    light neighbours' (``windows``), else its full-window median over its light one across the run
    (``unpaired``, its first piece left out as a cold one).
    """
    if asked_pieces is None:
        return {}
    # the pieces' sums, places and classes, an entry each, read below by their positions among them
    pc, ptime, pfull_time, pfull_events = asked_pieces
    asked = pc.index
    start_ns = pc.start_ns
    whole, mode, group = _placed(win_ts, win_mode, live, start_ns, pc.end_ns)
    is_full = mode == S.WINDOW_FULL
    # each class's pieces in order, from one sort of the pieces asked (a radix sort of 16-bit ids
    # where they fit): a comparison over every piece per class was most of the loop below; a class
    # has one owner
    n_class = int(pc.klass.max(initial=-1)) + 1
    klass = pc.klass
    by_class = np.argsort(klass.astype(np.int16) if n_class < _I16 else klass, kind="stable")
    edges = np.r_[0, np.cumsum(np.bincount(klass, minlength=n_class))]
    class_owner = np.empty(n_class, pc.owner.dtype)
    class_owner[klass] = pc.owner
    out: dict[int, PieceEstimate] = {}
    cut = pc.rows_only()  # what the estimates keep of the pieces
    for key in keys:
        removed = var = time = 0.0
        events = 0
        counts = {"windows": 0, "unpaired": 0, "not compared": 0}
        piece_factor = np.ones(len(asked))  # per piece asked, then of those compared
        compared = np.zeros(len(asked), bool)
        for c in np.flatnonzero(class_owner == key).tolist():
            mine = by_class[edges[c] : edges[c + 1]]  # its pieces' positions among those asked, ascending
            c_full_time = float(pfull_time[mine].sum())
            if c_full_time <= 0 or not pfull_events[mine].any():
                continue
            sel = mine[whole[mine]]
            v, m, g = ptime[sel], mode[sel], group[sel]
            n_full, n_light = int(is_full[sel].sum()), int((~is_full[sel]).sum())
            full_g, full_med, refs = paired_windows(g, m, v)
            full_groups = group[mine[is_full[mine]]]
            if len(full_g) >= MIN_PAIRS and min(n_full, n_light) >= min_instances:
                got, sigma = paired_excess(full_med, refs, full_g, full_groups, c_full_time)
                counts["windows"] += 1
            elif min(n_full, n_light) >= min_instances:
                warm = warm_instances(sel, mine, start_ns, is_full[sel])  # (not a mask of every piece)
                got, sigma = unpaired_excess(v[warm], g[warm], m[warm], len(full_groups), c_full_time)
                counts["unpaired"] += 1
            else:
                counts["not compared"] += 1
                continue
            removed += got
            var += sigma**2
            time += c_full_time
            events += int(pfull_events[mine].sum())
            piece_factor[mine] = 1.0 - got / c_full_time
            compared[mine] = True
        if counts["windows"] + counts["unpaired"] == 0:
            continue
        out[key] = PieceEstimate(
            removed_ns=removed,
            sigma_ns=math.sqrt(var),
            time_ns=time,
            events=events,
            pieces=cut,
            compared=asked[compared],
            factor=piece_factor[compared],
            counts=counts,
        )
    return out


def paired_excess(
    full_med: np.ndarray, ref: np.ndarray, full_g: np.ndarray, full_groups: np.ndarray, cap: float
) -> tuple[float, float]:
    """(ns removed, its uncertainty) of instances compared window by window (:func:`paired_windows`'
    ``full_g``, ``full_med``, ``ref``); ``full_groups``: the window of each full-window instance;
    ``cap``: their time, never exceeded.

    The cost in proportion to the light neighbours' time, applied at each full window's own
    neighbours' time: when the machine's speed moves during the run, the collectors' cost moves
    with it (all CPU work slows alike), which one excess in ns would miss; per-instance outliers (a
    cold call) still get the typical instance's cost, not a share. The spread between windows is
    robust (MAD): one window holding a one-time cost is not noise.
    """
    rel = full_med / ref - 1.0
    r = max(float(np.median(rel)), 0.0)
    base = light_base(full_g, ref, full_groups)
    mad = 1.4826 * float(np.median(np.abs(rel - np.median(rel))))
    return min(r * base, cap), base * mad / np.sqrt(len(rel))


def unpaired_excess(
    v: np.ndarray, group: np.ndarray, mode: np.ndarray, n_full: int, cap: float
) -> tuple[float, float]:
    """(ns removed, its uncertainty) of instances compared full against light over the whole run:
    times ``v`` in windows ``group`` of kinds ``mode`` (the cold first one already left out,
    :func:`warm_instances`), for ``n_full`` full-window instances of total time ``cap``.

    Closer than the pooled cost per event, which is the other operations' (events differ 5x in
    cost between operations), but blind to drift: the uncertainty is half of what it removes or
    its bootstrap spread, the larger. The cold first call matters: with two calls a kind (SB3 PPO's
    four ``train`` calls, alternated), a light median of the cold and a warm call read the cost a
    third low (train +8-12% on an H100, +0-8% without it).
    """
    in_full = mode == S.WINDOW_FULL
    wins = window_medians(group, mode, v)
    light_med = float(np.median(v[~in_full]))
    r = max(float(np.median(v[in_full])) / light_med - 1.0, 0.0) if light_med > 0 else 0.0
    removed = min(r * light_med * n_full, cap)
    drift = unpaired_rel_sigma(*wins, v, in_full) * light_med * n_full
    return removed, max(FALLBACK_REL_SIGMA * removed, drift)


def own_excess(excl: np.ndarray, in_full: np.ndarray, full_time_ns: float) -> float | None:
    """What an operation's own whole full-window instances took beyond its light median, scaled to
    all its full-window time (straddling instances too); None with under MIN_CAP_LIGHT light or no
    full instances.

    Why: an operation too rare to be estimated on its own (PPO's ``compute_advantages``, once a
    rollout: one full-window call in a short run) takes the pooled cost per event of the others,
    and events differ in cost between operations. PPO-GPU's advantage loop is ~1,000 tiny launches
    whose CPU cost partly hides behind the GPU: the pooled cost removed 36% of its time on an H200
    (scale 0.5, three of three runs), where its own full call was ~5 ms over its light calls and
    the pooled cost said ~11. One full instance is too noisy to be the estimate, but it bounds it.
    """
    light = excl[~in_full]
    full = excl[in_full]
    if len(light) < MIN_CAP_LIGHT or len(full) == 0 or full.sum() <= 0:
        return None
    excess = max(float(full.sum()) - float(np.median(light)) * len(full), 0.0)
    return excess * max(full_time_ns, float(full.sum())) / float(full.sum())


def warm_instances(mine: np.ndarray, named: np.ndarray, b_ts: np.ndarray, full: np.ndarray) -> np.ndarray:
    """Mask over ``mine`` (an operation's whole instances; ``full``: which began in a full window)
    without the operation's first call, where that leaves an instance in each kind of window; all
    of them otherwise. ``named``: a mask of all the operation's instances, or their indices
    (ascending).

    Why: the first call of an operation is its cold one, in the timed run as in the profiled one,
    and it mostly runs light (a session starts light). Compared by medians of a few calls each, it
    stood for the light calls' typical time and hid the collectors' cost in the full ones."""
    every = np.flatnonzero(named) if named.dtype == bool else named
    keep = mine != every[np.argmin(b_ts[every])] if len(every) else np.ones(len(mine), bool)
    if (keep & full).any() and (keep & ~full).any():
        return keep
    return np.ones(len(mine), bool)


def unpaired_rel_sigma(
    med: np.ndarray, is_full: np.ndarray, count: np.ndarray, v: np.ndarray, in_full: np.ndarray
) -> float:
    """Uncertainty of an unpaired estimate's excess (full median over light median, less one), as
    a fraction of the light median: the standard deviation of that excess over bootstrap resamples
    of the operation's windows.

    Why: the unpaired estimate compares calls far apart, so the machine's speed moving between its
    windows moves it, and half of what it removed (the old uncertainty) said nothing of that. On an
    H100, SB3 PPO's four ``train`` calls (two light, two full) ran 0.80-1.17 s, and the corrected
    ``train`` read +8-12% against ±6% reported. Windows, not instances, are resampled: the calls in
    one window share its speed. A resample, not a spread: speeds come in two levels on the VM, and a
    median's error over a two-level mix is the gap between them, which a MAD can put at zero.
    ``med``/``is_full``/``count``: the operation's :func:`window_medians`; ``v``/``in_full``: its
    whole instances' times and kinds, the units where a kind has a single window."""
    full, light = med[is_full], med[~is_full]
    if min(len(full), len(light)) < 2:
        full, light = v[in_full], v[~in_full]
    if min(len(full), len(light)) < 2:
        return 0.0
    rng = np.random.default_rng(0)  # the same figure every analysis of the same trace
    f = np.median(full[rng.integers(0, len(full), (BOOTSTRAP, len(full)))], axis=1)
    lt = np.median(light[rng.integers(0, len(light), (BOOTSTRAP, len(light)))], axis=1)
    ok = lt > 0
    return float(np.std(f[ok] / lt[ok] - 1.0)) if ok.sum() > 1 else 0.0


def after_switch(
    tl: Timeline, begins: np.ndarray, window_idx: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per instance (``begins``: its OP_BEGIN rows): whether a window switch came directly before it on
    its thread (after the last operation that ended there), and that operation's name (-2: none).
    ``window_idx``: the WINDOW rows (:func:`window_indices`, kept by the raw timeline), else found
    here; the OP_END rows are read among the scopes' ends the timeline keeps."""
    win = window_indices(tl) if window_idx is None else window_idx
    if len(win):
        win = np.delete(win, np.argmin(tl.ts[win]))  # the first WINDOW row opens the run: not a switch
    ends = tl.scope_ends()
    ends = ends[tl.kind[ends] == S.OP_END]
    names = np.append(tl.inst_name, -2)
    # in C, one merge of the sorted rows: no search per begin, no gathers from columns of every row
    types = (native.N, native.I64, native.N, native.I64, native.N, native.I64, native.N, native.I64, None)
    fn = native.typed(
        "windows_after_switch",
        [tl.id.dtype],
        *types,
        native.N,
        native.I64,
        native.BOOL,
        native.I64,
        restype=native.N,
    )
    starts = tl.thread_starts()
    columns = (begins, ends, win, starts, names)
    if fn is not None and len(starts) > 1 and all(c.dtype == np.int64 for c in columns):
        after, pred = np.empty(len(begins), bool), np.empty(len(begins), np.int64)
        args = (len(ends), ends, len(win), win, len(starts) - 1, starts, tl.id, len(names) - 1, names)
        if fn(len(begins), np.ascontiguousarray(begins), *args, after, pred) == 0:
            return after, pred

    def last_before(rows: np.ndarray) -> np.ndarray:
        """Per begin: the last of ``rows`` (sorted) at or before it, -1 for none."""
        j = np.searchsorted(rows, begins, side="right") - 1
        return np.where(j >= 0, rows[np.maximum(j, 0)], -1) if len(rows) else np.full(len(begins), -1)

    last_end = last_before(ends)
    last_switch = last_before(win)
    start = starts[tl.thread_idx[begins]]  # each begin's thread's first row
    has_pred = last_end >= start
    after = (last_switch >= start) & (last_switch > np.where(has_pred, last_end, -1))
    ids = np.where(has_pred, tl.id[np.maximum(last_end, 0)], -1)  # row 0 may be no OP_END: index -1
    pred = names[ids]  # names[-1] is -2: no predecessor
    return after, pred


def switch_transients(
    tl: Timeline,
    begins: np.ndarray,
    inst: np.ndarray,
    name: np.ndarray,
    ok: np.ndarray,
    mode: np.ndarray,
    excl: np.ndarray,
    window_idx: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[int, tuple[float, float]]]:
    """(ns to take out of each instance's exclusive time, per operation name: ns removed and its
    standard error). Per instance (``begins``, ``inst``, ``name``, ``mode``: as in :func:`estimate`),
    ``ok``: wholly in one window, on the main thread; ``excl``: per instance id; ``window_idx``: as
    in :func:`after_switch`."""
    after, pred = after_switch(tl, begins, window_idx)
    cut = np.zeros(len(tl.inst_name))
    out: dict[int, tuple[float, float]] = {}
    for key in np.unique(name[ok & after]).tolist():
        ok_key = ok & (name == key)
        for m in (S.WINDOW_LIGHT, S.WINDOW_FULL):
            sel = np.flatnonzero(ok_key & (mode == m))
            hit, t, se = switch_transient(after[sel], pred[sel], excl[inst[sel]])
            if t <= 0:
                continue
            mine = inst[sel[hit]]
            cut[mine] = np.minimum(t, excl[mine])
            prev_cut, prev_se = out.get(key, (0.0, 0.0))
            out[key] = (prev_cut + float(cut[mine].sum()), float(np.hypot(prev_se, len(mine) * se)))
    return cut, out


def switch_transient(
    after: np.ndarray, pred: np.ndarray, value: np.ndarray
) -> tuple[np.ndarray, float, float]:
    """(instances corrected, transient ns each, its standard error) of one operation in one kind of window.

    Switching a collector can leave work for the next calls (CUPTI, detached or attached again,
    finishes on the process's next CUDA calls), which lands in the operation directly after the
    switch. Each such instance is compared with instances of the same operation, in the same kind
    of window, that followed the same operation without a switch: a cold first call after a long
    update is the loop's own and shows up in both, so it is not removed. The median of those
    differences is removed from each when it stands clear of their spread (> 2 standard errors).
    """
    hit = np.zeros(len(value), bool)
    diffs: list[float] = []
    for p in np.unique(pred[after]).tolist():
        ref = value[(pred == p) & ~after]
        mine = np.flatnonzero((pred == p) & after)
        if len(ref) < MIN_INSTANCES or len(mine) == 0:
            continue
        hit[mine] = True
        diffs.extend((value[mine] - float(np.median(ref))).tolist())
    if len(diffs) < MIN_PAIRS:
        return np.zeros_like(hit), 0.0, 0.0
    d = np.asarray(diffs)
    t = float(np.median(d))
    se = 1.4826 * float(np.median(np.abs(d - t))) / np.sqrt(len(d))
    if t <= 2 * se:
        return np.zeros_like(hit), 0.0, 0.0
    return hit, t, se


def window_medians(group: np.ndarray, mode: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per window, in time order: the median of ``value``, whether it is a full window, instances."""
    return _windows(group, mode, value)[:3]


def _windows(group: np.ndarray, mode: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`window_medians`, then each window's group (``np.unique(group)``, read off the same sort)."""
    if len(group) == 0:
        return np.zeros(0), np.zeros(0, bool), np.zeros(0, np.int64), group[:0]
    if (group[1:] >= group[:-1]).all():  # in time order already, as a class's pieces and mostly instances
        g, m, v = group, mode, value
    else:
        order = np.argsort(group, kind="stable")
        g, m, v = group[order], mode[order], value[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    count = np.diff(np.r_[starts, len(g)])
    return _group_medians(g, v, starts, count), m[starts] == S.WINDOW_FULL, count, g[starts]


def _group_medians(g: np.ndarray, v: np.ndarray, starts: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``np.median`` of each group's values (``g`` sorted, groups at ``starts``), with one sort for
    all of them: an operation's instances fill hundreds of windows, and a median call per window
    was a Python loop over them. The middle value, or the mean of the two middle ones, as np.median."""
    v = np.asarray(v, np.float64)
    if np.isnan(v).any():  # np.median's NaN rule: leave those to it
        return np.array([np.median(chunk) for chunk in np.split(v, starts[1:])])
    fn = native.function("windows_group_middles", native.N, native.I64, native.I64, native.F64, native.F64)
    if fn is None or starts.dtype != np.int64 or count.dtype != np.int64:
        s = v[np.lexsort((v, g))]
    else:  # in C, each group's two middle values of that sort only, in their places in a copy
        v = np.ascontiguousarray(v)
        s = v.copy()
        fn(len(starts), starts, count, v, s)
    lo, hi = starts + (count - 1) // 2, starts + count // 2
    return (s[lo] + s[hi]) / 2.0


def light_quantiles(med: np.ndarray, is_full: np.ndarray, count: np.ndarray) -> list[float] | None:
    """10th, 50th and 90th percentiles of one operation's per-light-window median time (ns), from
    its :func:`window_medians`.

    Light windows run the operation as the unprofiled program would, but for the always-on
    residuals, so their medians moving over the run is the machine's speed moving (other tenants,
    CPU frequency), not rlscope; the windows, pairing neighbours, do not feel it, a comparison with
    another process does (``rlscope validate`` sets these beside its timed runs'). Windows with fewer
    than ``MIN_WINDOW_INSTANCES`` instances are left out (their median is one instance's time).
    """
    light = med[~is_full & (count >= MIN_WINDOW_INSTANCES)]
    if len(light) < MIN_PAIRS:
        return None
    return [float(x) for x in np.percentile(light, [10, 50, 90])]


def window_samples(
    med: np.ndarray, is_full: np.ndarray, count: np.ndarray, full: bool = False
) -> list[list[float]] | None:
    """``[median ns, instances]`` of one operation's light (or full) windows of
    ``MIN_WINDOW_INSTANCES`` or more, from its :func:`window_medians`, at most ``MAX_LIGHT_SAMPLES``
    of them, evenly spaced over the run.

    ``rlscope validate`` splits them into the machine's speeds to compare with its timed runs at the
    same speed (overhead/validate/speed_match.py): the light windows give the levels, both kinds the run's mix
    of speeds (light windows alone over-sample a run's start, where the first window is light). The
    cap keeps an hour's run's JSON small.
    """
    keep = (is_full == full) & (count >= MIN_WINDOW_INSTANCES)
    med, count = med[keep], count[keep]
    if len(med) < MIN_PAIRS:
        return None
    if len(med) > MAX_LIGHT_SAMPLES:
        pick = np.linspace(0, len(med) - 1, MAX_LIGHT_SAMPLES).round().astype(np.int64)
        med, count = med[pick], count[pick]
    return [[float(m), float(n)] for m, n in zip(med, count, strict=True)]


def paired_windows(
    group: np.ndarray, mode: np.ndarray, value: np.ndarray, wins: tuple[np.ndarray, ...] | None = None
) -> tuple[np.ndarray, ...]:
    """Per full window with a light neighbour: its group, its median instance time, and the mean
    of the medians of the light windows on either side (its reference).

    Medians keep one-time costs (a first call that initializes CUDA) from standing for every
    instance; pairing each full window with the light windows beside it cancels slow drift over
    the run (buffers growing, clocks changing). ``group`` orders the windows in time. Windows of
    fewer than ``MIN_PAIR_INSTANCES`` instances neither pair nor serve as a reference (their median
    is one or two calls, often a cold one); a full window then pairs with the nearest light windows
    that have enough. ``wins``: the :func:`_windows` of these instances, when made already.
    """
    med, is_full, count, ids = _windows(group, mode, value) if wins is None else wins
    thick = count >= MIN_PAIR_INSTANCES
    # each window's nearest thick light window before and after it (-1 / len(med): none)
    light = ~is_full & thick
    at = np.arange(len(med))
    before = np.r_[-1, np.maximum.accumulate(np.where(light, at, -1))[:-1]] if len(med) else at
    after = np.r_[np.minimum.accumulate(np.where(light, at, len(med))[::-1])[::-1][1:], len(med)]
    full = np.flatnonzero(is_full & thick)
    b, a = before[full], after[full]
    has_b, has_a = b >= 0, a < len(med)
    med_b, med_a = med[np.maximum(b, 0)], med[np.minimum(a, len(med) - 1)]
    # the mean of the one or two references, as np.mean makes it
    ref = np.where(has_b & has_a, (med_b + med_a) / 2, np.where(has_b, med_b, med_a))
    ok = (has_b | has_a) & (ref > 0)
    return ids[full[ok]].astype(np.int64), med[full[ok]].astype(np.float64), ref[ok].astype(np.float64)


def light_base(full_g: np.ndarray, ref: np.ndarray, inst_groups: np.ndarray) -> float:
    """Σ over an operation's full-window instances of their window's light reference time (ns).

    Instances in a full window without a paired reference (no light neighbour, or only instances
    that straddle a switch) take the median reference.
    """
    if len(inst_groups) == 0 or len(ref) == 0:
        return 0.0
    gid, count = np.unique(inst_groups, return_counts=True)
    pos = np.searchsorted(full_g, gid).clip(0, len(full_g) - 1)
    found = full_g[pos] == gid
    per = np.where(found, ref[pos], float(np.median(ref)))
    return float((per * count).sum())


def nested_names(tl: Timeline, begins: np.ndarray | None = None) -> set[tuple[int, int]]:
    """(outer, inner) operation name pairs where an instance of inner ran inside one of outer.
    ``begins``: the OP_BEGIN rows (:func:`op_begins`, WindowEstimate.begins) where known. Each
    instance's parent is read at the row before its begin only, not by a comparison over every row."""
    if begins is None:
        begins = op_begins(tl)
    if len(begins) == 0:
        return set()
    names = np.append(tl.inst_name, -1)
    got = _nested_begins(tl, begins, names)
    if got is not None:
        before, parent_of, inner = got
    else:
        prev = np.maximum(begins - 1, 0)
        same_thread = (begins > 0) & (tl.thread_idx[begins] == tl.thread_idx[prev])
        before = np.where(same_thread, tl.op[prev], -1)
        parent_of = np.full(len(tl.inst_name) + 1, -1, np.int64)
        parent_of[tl.id[begins]] = before
        inner = names[tl.id[begins]]
    pairs: set[tuple[int, int]] = set()
    anc = before.copy()
    for _ in range(64):  # nesting depth
        live = anc >= 0
        if not live.any():
            break
        pairs |= set(zip(names[anc[live]].tolist(), inner[live].tolist(), strict=True))
        anc = np.where(live, parent_of[np.maximum(anc, 0)], -1)
    return pairs


def _nested_begins(
    tl: Timeline, begins: np.ndarray, names: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`nested_names`' (per begin, the instance open on its thread's row before it, -1 none;
    per instance + 1, that of its begin; per begin, its instance's name) in C in one pass over the
    begins (four gathers from columns of every row in numpy); None where the numpy loops run, the
    columns are of other types or an instance id falls outside its table (numpy's indexing raises)."""
    if tl.id.dtype != tl.op.dtype or names.dtype != np.int64:
        return None
    types = (native.N, native.I64, None, None, native.INTEGER.get(tl.thread_idx.dtype), native.N, native.I64)
    fn = native.typed(
        "windows_nested_begins",
        [tl.op.dtype, tl.thread_idx.dtype],
        *types,
        native.I64,
        native.I64,
        native.I64,
        restype=native.N,
    )
    if fn is None:
        return None
    n_inst = len(tl.inst_name)
    before, inner = np.empty(len(begins), np.int64), np.empty(len(begins), np.int64)
    parent_of = np.full(n_inst + 1, -1, np.int64)
    begins = np.ascontiguousarray(begins, np.int64)
    if fn(len(begins), begins, tl.op, tl.id, tl.thread_idx, n_inst, names, before, parent_of, inner) != 0:
        return None
    return before, parent_of, inner
