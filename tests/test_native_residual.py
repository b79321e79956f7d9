"""The residual correction's C loops (rlscope/analysis/native/residual.c) give the numpy loops' bits.

Each function runs twice on the same inputs, with the C loops and with ``RLSCOPE_NATIVE_ANALYSIS=0``,
on random timelines (several threads, writer threads' flushes, measured boundaries, segments too
short for their cost, GPU launches to move) and on edge cases (one row, one thread, every row
rlscope's own work, no measured costs, ids too wide or columns strided for the C loops).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import RowValues, Timeline
from rlscope.overhead.correct import flush_stall, full_windows, module_calls, residual, sums, windows
from rlscope.overhead.correct.row_factors import RowFactors
from rlscope.trace import schema as S
from tests.timelines import stretched

pytestmark = pytest.mark.skipif(native.library() is None, reason="no C loops here")

KINDS = np.array(
    [
        *(S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.CAT_END, S.PHASE_BEGIN, S.PHASE_END),
        *(S.API_BEGIN, S.API_END, S.BACKEND_BEGIN, S.BACKEND_END, S.COMPILE_BEGIN, S.COMPILE_END),
    ]
)
CATS = np.array(
    [categories.PYTHON, categories.BACKEND, categories.CUDA_API, categories.SIMULATOR, categories.PROFILER]
)


def _timeline(
    rng: np.random.Generator, threads: int = 3, rows: int = 500, n_inst: int = 40, measured: bool = True
) -> Timeline:
    """Rows grouped by thread (thread 100 the main one; the others with flush marks among their rows),
    random kinds, categories and forced closes; segments from 0 to 5 us, end to end; ``cost`` at
    some rows."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ts", "end", "thread", "kind", "id", "cat", "op")}
    t0 = 10**18
    for k in range(threads):
        n = rows if k == 0 else max(rows // 5, 1)
        t = np.cumsum(rng.integers(0, 5_000, n + 1)) + t0 + int(rng.integers(0, 1000))
        kind = rng.choice(KINDS, n)
        ident = rng.integers(0, n_inst, n)
        cat_row = (kind == S.CAT_BEGIN) | (kind == S.CAT_END)
        ident[cat_row] = rng.choice(
            [categories.BACKEND, categories.PROFILER, categories.SIMULATOR], cat_row.sum()
        )
        parts["ts"].append(t[:-1])
        parts["end"].append(t[1:])
        parts["thread"].append(np.full(n, 100 + k))
        parts["kind"].append(kind)
        parts["id"].append(ident)
        parts["cat"].append(rng.choice(CATS, n))
        parts["op"].append(rng.integers(-1, n_inst, n))
    p = {k: np.concatenate(v) for k, v in parts.items()}
    n = len(p["ts"])
    flags = np.where(rng.random(n) < 0.03, S.FLAG_FORCED_CLOSE, 0).astype(np.int8)
    cost = None
    if measured:
        at = np.flatnonzero(rng.random(n) < 0.3)
        pre, post = rng.integers(0, 400, len(at)), rng.integers(0, 400, len(at))
        values = np.where(rng.random(len(at)) < 0.2, 0, pre | (post << 32)).astype(np.int64)
        cost = RowValues(values, at.astype(np.int64))
    return Timeline.with_seg_end(
        p["end"], ts=p["ts"], threads=np.arange(100, int(p["thread"].max()) + 1).astype(np.int32),
        kind=p["kind"].astype(np.int8),
        id=p["id"].astype(np.int32), name=np.full(n, -1, np.int32), flags=flags,
        op=p["op"].astype(np.int32), cat=p["cat"].astype(np.int8), phase=np.full(n, -1, np.int32),
        main_thread=100, start_ns=int(p["ts"].min()) - 10, end_ns=int(p["end"].max()) + 10,
        inst_name=rng.integers(-1, 3, n_inst), inst_end=np.zeros(n_inst, np.int64),
        thread_idx=(p["thread"] - 100).astype(np.int16), cost=cost,
    )  # fmt: skip


def _costs(rng: np.random.Generator, scale: float = 1.0) -> residual.EventCosts:
    """Costs of every class; ``scale`` large: many segments too short for theirs."""
    costs = residual.EventCosts.zero()
    costs.inside[1:] = rng.uniform(0, 700, 4) * scale
    costs.outside[1:] = rng.uniform(0, 700, 4) * scale
    costs.inside[S.CostClass.BACKEND] = 0.0  # a class that pays nothing: its rows skipped
    for c in (S.CostClass.SCOPE, S.CostClass.CATEGORY):
        costs.dispatch_inside[c], costs.dispatch_outside[c] = rng.uniform(0, 100, 2)
    costs.nvml_per_sample = 20_000.0
    costs.memory_per_event = 150.0
    costs.writer_per_event = 50.0
    return costs


def _both(monkeypatch: pytest.MonkeyPatch, f: Callable[[], Any]) -> tuple[Any, Any]:
    """(numpy's, C's) results of ``f``."""
    monkeypatch.setenv(native.ENV, "0")
    want = f()
    monkeypatch.setenv(native.ENV, "1")
    return want, f()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return a == b


def _same_correction(a: residual.Correction, b: residual.Correction) -> bool:
    ta, tb = a.timeline, b.timeline
    cols = all(_same(getattr(ta, k), getattr(tb, k)) for k in ("ts", "seg_end", "thread_end", "inst_end"))
    ratios = (a.ratio is None and b.ratio is None) or _same(a.ratio, b.ratio)
    removed = a.removed_s.keys() == b.removed_s.keys() and all(
        _same(a.removed_s[k], b.removed_s[k]) for k in a.removed_s
    )
    rest = (ta.end_ns, a.background_share, a.clamped_s, a.writer_stall)
    return (
        cols
        and ratios
        and removed
        and _same(rest, (tb.end_ns, b.background_share, b.clamped_s, b.writer_stall))
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_correct_timeline_gives_numpys_bits(seed, scale, monkeypatch):
    rng = np.random.default_rng(seed)
    tl = _timeline(rng)
    costs = _costs(rng, scale)
    memory = np.sort(rng.integers(int(tl.ts[0]), int(tl.seg_end[-1]), 50))
    mods = rng.uniform(0, 300, len(tl.ts)) * (rng.random(len(tl.ts)) < 0.5)
    want, got = _both(monkeypatch, lambda: residual.correct_timeline(tl, costs, 40, memory, mods))
    assert _same_correction(want, got)
    assert want.removed_s and want.ratio is not None
    if scale > 1:  # segments too short for their cost: _place moved the excess
        assert want.clamped_s > 0


def _plan(tl: Timeline, *args: Any) -> tuple[residual._Plan, np.ndarray]:
    """_planned_native's figures from _planned's columns and numpy's own passes, and the plan's column."""
    dur, planned, removal, profiler, per_class = residual._planned(tl, *args)
    left = dur - removal
    excl = tl.instance_time(tl.main_rows(), len(tl.inst_name))
    regular = not (np.isnan(left) | np.signbit(left)).any()
    plan = residual._Plan(left, planned.sum(), removal, profiler, per_class, excl, bool(regular))
    plan.removal_sum, plan.prof_rows = removal.sum(), np.flatnonzero(profiler)
    if args[-2] is None and args[-1] is None:  # no column summed off the periodic work: its rows only
        plan.profiler = None
    return plan, planned


def _same_plan(a: residual._Plan, b: residual._Plan) -> bool:
    """The same plan, a removal kept at some rows only compared at those rows."""
    if a.removal_rows is None and b.removal_rows is not None:
        a = dataclasses.replace(a, removal=a.removal[b.removal_rows], removal_rows=b.removal_rows)
    if b.removal_rows is None and a.removal_rows is not None:
        b = dataclasses.replace(b, removal=b.removal[a.removal_rows], removal_rows=a.removal_rows)
    return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))


@pytest.mark.parametrize("seed", range(4))
def test_the_planned_removal_gives_numpys_bits(seed, monkeypatch):
    """_planned's columns themselves, the excess moved to the neighbours included, and the time left
    per segment, the main thread's time per instance and whether np.minimum(0, left) is 0 everywhere."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=4)
    costs = _costs(rng, 20.0)
    last = residual.thread_last(tl)
    on_writer = tl.on_threads(np.array([103]))
    mem, mods = rng.uniform(0, 50, len(tl.ts)), rng.uniform(0, 50, len(tl.ts))
    want, planned = _plan(tl, costs, last, on_writer, mem, mods)
    got = residual._planned_native(tl, costs, last, on_writer, mem, mods)
    assert _same_plan(want, got)
    dur = tl.float_duration()
    assert (planned > dur).any() and want.profiler.any() and not want.profiler[on_writer].any()
    assert not _same(want.removal, np.minimum(planned, dur))  # something moved
    assert want.excl.any() and want.regular


@pytest.mark.parametrize("where", ["planned", "moved"])
def test_a_plan_with_time_left_below_zero_or_nan_is_not_regular(where, monkeypatch):
    """Where a segment's time left is NaN or below +0 (a NaN cost; an excess moved, rounded past the
    segment), the plan says so: the flushes' stall is then worked out over every row."""
    rng = np.random.default_rng(11)
    tl = _timeline(rng, threads=2)
    costs = _costs(rng, 20.0)
    last, on_writer = residual.thread_last(tl), np.zeros(len(tl.ts), bool)
    if where == "planned":
        costs.inside[S.CostClass.CATEGORY] = np.nan
    else:  # each excess moved leaves its neighbour 1 ns below nothing
        real = residual._move_excess

        def below(over, excess, dur, last, removal, left=None, at=None):
            moved = real(over, excess, dur, last, removal, left, at)
            left[moved] = -1.0
            return moved

        monkeypatch.setattr(residual, "_move_excess", below)
    got = residual._planned_native(tl, costs, last, on_writer, None, None)
    assert not got.regular
    if where == "planned":
        assert _same_plan(_plan(tl, costs, last, on_writer, None, None)[0], got)


def _flushed_timeline(seed: int) -> Timeline:
    """A timeline whose writer threads' flushes meet the main thread's operation instances."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=3, rows=20_000, n_inst=300)
    tl.op[: len(tl.op) // 2] = np.repeat(rng.integers(-1, 300, 1000), len(tl.op) // 2000)[: len(tl.op) // 2]
    tl.kind[np.unique(tl.op[tl.op >= 0], return_index=True)[1]] = S.OP_BEGIN  # one begin per instance
    tl.id[tl.kind == S.OP_BEGIN] = tl.op[tl.kind == S.OP_BEGIN]
    return tl


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", ["regular", "one below zero", "writer rows"])
def test_the_stall_at_the_flushed_rows_is_that_of_every_row(seed, case):
    """_stall_taken at the rows that meet a flush (a regular plan, no column of the stall) takes what the
    columns of every row take, to the bit: the time left, the stall column's sum, the share and its
    evidence; where a row's time left is below zero (not regular) the sparse pass would not, and is not
    taken."""
    tl = _flushed_timeline(seed)
    rng = np.random.default_rng(seed)
    n = len(tl.ts)
    left = tl.float_duration() * rng.uniform(0, 1, n)
    on_writer = tl.on_threads(np.array([102])) if case == "writer rows" else np.zeros(n, bool)
    rows, _ = residual._flush_stall_rows(tl, 50.0)
    assert len(rows) > 10
    off = np.setdiff1d(np.arange(n), rows)
    if case == "one below zero":
        left[off[len(off) // 2]] = -3.0
    excl = tl.instance_time(tl.main_rows(), len(tl.inst_name))
    results = []
    for e in (None, excl):
        got_left, bound = left.copy(), np.zeros(n) if e is None else None
        info, writer_s = residual._stall_taken(tl, got_left, bound, on_writer, 50.0, e)
        results.append((got_left, info, writer_s))
    (want_left, want_info, want_s), (got_left, got_info, got_s) = results
    assert want_info is not None and want_s > 0
    same = _same(want_left, got_left) and _same(want_s, got_s)
    same = same and _same(tuple(want_info.values()), tuple(got_info.values()))
    assert same == (case != "one below zero")


def test_a_break_in_the_c_loop_is_seen(monkeypatch):
    """The comparison fails where the C loop's figures differ: a planned removal off by one ulp."""
    rng = np.random.default_rng(0)
    tl = _timeline(rng)
    costs = _costs(rng)
    last, on_writer = residual.thread_last(tl), np.zeros(len(tl.ts), bool)
    got = residual._planned_native(tl, costs, last, on_writer, None, None)
    assert _same_plan(_plan(tl, costs, last, on_writer, None, None)[0], got)
    got.removal[np.flatnonzero(got.removal)[0]] *= 1 + 2**-52
    assert not _same_plan(_plan(tl, costs, last, on_writer, None, None)[0], got)


@pytest.mark.parametrize(
    "case",
    [
        "one row", "one thread", "all rlscope", "no measured costs", "costs at every row",
        "measured costs off", "no dispatch", "no costs", "no main thread", "wide ids", "strided costs",
    ],
)  # fmt: skip
def test_edge_cases_give_numpys_bits(case, monkeypatch):
    rng = np.random.default_rng(7)
    threads = 1 if case in ("one row", "one thread") else 3
    tl = _timeline(rng, threads, rows=1 if case == "one row" else 300, measured=case != "no measured costs")
    costs = residual.EventCosts.zero() if case == "no costs" else _costs(rng, 5.0)
    if case == "all rlscope":
        tl.cat[:] = categories.PROFILER
    if case == "no main thread":
        tl.main_thread = 999
    if case == "wide ids":  # the C loops read int32 ids: the numpy ones run
        tl.id = tl.id.astype(np.int64)
    if case == "costs at every row":  # RowValues without rows: a value per row
        tl.cost = RowValues(tl.cost.at(np.arange(len(tl.ts))))
    if case == "measured costs off":
        monkeypatch.setenv(residual.MEASURED_ENV, "0")
    if case == "no dispatch":  # the calibration says nothing of it: measured costs are not used
        costs.dispatch_inside[:] = np.nan
    mods = rng.uniform(0, 300, len(tl.ts))
    if case == "strided costs":  # columns the C loops cannot read as they are: the numpy ones run
        mods = rng.uniform(0, 300, 2 * len(tl.ts))[::2]
    want, got = _both(monkeypatch, lambda: residual.correct_timeline(tl, costs, 10, None, mods))
    assert _same_correction(want, got)
    factor = rng.uniform(0.5, 1.0, len(tl.ts))
    if case == "strided costs":
        factor = factor.astype(np.float32)
    want, got = _both(monkeypatch, lambda: residual.correct_windows(tl, factor.copy()))
    assert _same_correction(want, got)


def test_an_empty_timeline_is_left_as_it_is(monkeypatch):
    tl = _timeline(np.random.default_rng(0), threads=1, rows=1)
    empty = tl.retimed(
        tl.ts[:0], tl.seg_end[:0], **{k: getattr(tl, k)[:0] for k in ("kind", "id", "thread_idx")}
    )
    want, got = _both(monkeypatch, lambda: residual.correct_timeline(empty, residual.EventCosts.zero()))
    assert len(got.timeline.ts) == 0 and _same(want.ratio, got.ratio)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("keep_ratio", [True, False])
def test_correct_windows_and_rebuild_give_numpys_bits(seed, keep_ratio, monkeypatch):
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=4, rows=3000)
    factor = rng.uniform(0.3, 1.0, len(tl.ts))
    factor[rng.random(len(tl.ts)) < 0.1] = 1.0
    want, got = _both(monkeypatch, lambda: residual.correct_windows(tl, factor.copy(), keep_ratio))
    assert _same_correction(want, got)
    # durations with fractions of a ns: the rounding (half to even) and the running sum's order
    new_dur = tl.float_duration() * rng.uniform(0, 1, len(tl.ts))
    new_dur[::7] = 0.5
    want, got = _both(monkeypatch, lambda: residual.rebuild(tl, new_dur))
    assert all(_same(getattr(want, k), getattr(got, k)) for k in ("ts", "seg_end", "thread_end", "inst_end"))


@pytest.mark.parametrize("main", [100, 102, 999])
def test_the_instances_ends_are_numpys_with_ids_from_the_end_or_out_of_range(main, monkeypatch):
    """rebuild's instance ends, written in its C passes (the main thread's first): numpy's
    ``inst_end[id[ends]] = ts[ends]`` with ids repeated across threads and ids below 0 (read from the
    end); an id past the instances raises IndexError on both."""
    rng = np.random.default_rng(main)
    tl = _timeline(rng, threads=4, rows=3000)
    tl.main_thread = main
    ends = tl.scope_ends()
    tl.id[ends[::5]] = -rng.integers(1, len(tl.inst_end) + 1, len(ends[::5]))
    new_dur = tl.float_duration() * rng.uniform(0, 1, len(tl.ts))
    want, got = _both(monkeypatch, lambda: residual.rebuild(tl, new_dur))
    assert _same(want.inst_end, got.inst_end) and _same(want.ts, got.ts)
    assert len(np.unique(tl.id[ends])) < len(ends) and (want.inst_end != want.end_ns).any()
    tl.id[ends[len(ends) // 2]] = len(tl.inst_end)
    for on in ("0", "1"):
        monkeypatch.setenv(native.ENV, on)
        with pytest.raises(IndexError):
            residual.rebuild(tl, new_dur)


def test_rebuild_rounds_half_to_even_as_numpy_does(monkeypatch):
    """Times at and around halves of a ns, before the session's start (negative) and after it, and
    far from it: the C loop's rounding is np.rint's."""
    rng = np.random.default_rng(5)
    tl = _timeline(rng, threads=2, rows=4000)
    tl.start_ns = int(tl.ts[0]) + 5_000_000  # the first rows start before it
    near = np.array([0.5, 1.5, 2.5, 0.49999999999999994, 0.5000000000000001, 1e15 + 0.5, 3.0, 0.25, 0.75])
    new_dur = np.resize(near, len(tl.ts)) * rng.choice([1.0, -1.0, 2.0], len(tl.ts))
    new_dur[-100:] = 2.0**53
    want, got = _both(monkeypatch, lambda: residual.rebuild(tl, new_dur))
    assert all(_same(getattr(want, k), getattr(got, k)) for k in ("ts", "seg_end", "thread_end", "inst_end"))


@pytest.mark.parametrize("seed", range(4))
def test_remap_gives_numpys_times(seed, monkeypatch):
    """GPU launches moved onto the corrected clock: on every thread, on a thread without rows (the main
    thread's map), before a thread's first row, at rows' own times, in time order and not."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=3, rows=5000)
    fix = residual.correct_windows(tl, rng.uniform(0.3, 1.0, len(tl.ts)))
    m = 3000
    thread = rng.choice([100, 101, 102, 555], m)
    t = rng.integers(int(tl.ts.min()) - 10_000, int(tl.seg_end.max()) + 10_000, m)
    t[::5] = tl.ts[rng.integers(0, len(tl.ts), len(t[::5]))]
    t[: m // 2] = np.sort(t[: m // 2])  # in time order, as launches mostly come
    want, got = _both(monkeypatch, lambda: fix.remap(tl, thread, t))
    assert _same(want, got) and not _same(want, t)
    one = np.full(m, 101)
    want, got = _both(monkeypatch, lambda: fix.remap(tl, one, np.sort(t)))
    assert _same(want, got)
    tl.main_thread = 102  # a main thread after the others: unknown threads take its map
    want, got = _both(monkeypatch, lambda: fix.remap(tl, thread, t))
    assert _same(want, got)


def test_the_sums_off_the_periodic_work_give_numpys_bits(monkeypatch):
    """numpy's sums of the masked columns, on both paths."""
    rng = np.random.default_rng(3)
    for n in (0, 1, 200, 5000):
        profiler = rng.random(n) < 0.3
        dur, mem, mods = rng.uniform(0, 1e4, n), rng.uniform(0, 1e3, n), rng.uniform(0, 1e3, n)
        for mask in (profiler, np.zeros(n, bool), np.ones(n, bool)):
            for cols in ((mem, mods), (None, None), (None, mods)):
                want = (
                    np.where(mask, dur, 0.0).sum(),
                    *(float(c[~mask].sum()) if c is not None else 0.0 for c in cols),
                )
                rows = np.flatnonzero(mask)
                for env in ("0", "1"):
                    monkeypatch.setenv(native.ENV, env)
                    scratch = rng.uniform(0, 1, n)
                    got = residual._sums_off(n, mask, rows, dur[rows], *cols, scratch=scratch)
                    assert _same(tuple(map(float, want)), tuple(map(float, got)))


@pytest.mark.parametrize("seed", range(4))
def test_the_flush_stall_measure_gives_numpys_figures(seed, monkeypatch):
    """flush_stall.measure's sums per instance (exclusive time, flush time over it) in one pass:
    the same share and evidence, to the bit."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=2, rows=20_000, n_inst=300)
    tl.op[: len(tl.op) // 2] = np.repeat(rng.integers(-1, 300, 1000), len(tl.op) // 2000)[: len(tl.op) // 2]
    tl.kind[np.unique(tl.op[tl.op >= 0], return_index=True)[1]] = S.OP_BEGIN  # one begin per instance
    tl.id[tl.kind == S.OP_BEGIN] = tl.op[tl.kind == S.OP_BEGIN]
    bound = np.where(rng.random(len(tl.ts)) < 0.05, rng.uniform(0, 3000, len(tl.ts)), 0.0)
    want, got = _both(monkeypatch, lambda: flush_stall.measure(tl, bound))
    assert want.bound_ns > 0 and _same(tuple(want.as_dict().values()), tuple(got.as_dict().values()))


def _stall_share_by_masks(tl: Timeline, bound: np.ndarray) -> flush_stall.StallShare:
    """flush_stall.measure's share worked out as it was first written: a mask of the instances per
    (operation, window kind), the window kinds searched among the switches."""
    main = tl.main_rows()
    excl = tl.instance_time(main, len(tl.inst_name))
    op, main_bound = tl.op[main], bound[main]
    hit = np.flatnonzero((main_bound != 0) & (op >= 0))
    over = np.bincount(op[hit], weights=main_bound[hit], minlength=len(tl.inst_name))
    begins = np.flatnonzero(tl.kind[main] == S.OP_BEGIN) + main.start
    inst = tl.id[begins]
    name = tl.inst_name[inst]
    win_ts, win_mode = windows.window_rows(tl)
    mode = windows.mode_at(win_ts, win_mode, tl.ts[begins]) if len(win_ts) else np.zeros(len(begins), int)
    e, b = excl[inst], over[inst]
    bound_sum = excess = var = 0.0
    used = 0
    for key in np.unique(np.stack([name, mode]), axis=1).T:
        g = (name == key[0]) & (mode == key[1])
        clear = g & (b == 0)
        if clear.sum() < flush_stall.MIN_CLEAR:
            continue
        med = float(np.median(e[clear]))
        hit = g & (b > flush_stall.MIN_BOUND_SHARE * med)
        if not hit.any():
            continue
        mad = 1.4826 * float(np.median(np.abs(e[clear] - med)))
        bound_sum += float(b[hit].sum())
        excess += float((e[hit] - med).sum())
        var += int(hit.sum()) * mad**2
        used += int(hit.sum())
    main_bound_ns = float(bound[main].sum())
    if bound_sum > 0 and float(np.sqrt(var)) / bound_sum <= flush_stall.MAX_SIGMA:
        share = min(max(excess / bound_sum, 0.0), 1.0)
        sigma = float(np.sqrt(var)) / bound_sum
        return flush_stall.StallShare(share, sigma, "measured", used, bound_sum, excess, main_bound_ns)
    return flush_stall.StallShare(0.5, 0.5, "assumed", used, bound_sum, excess, main_bound_ns)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("switches", [0, 1, 9])
@pytest.mark.parametrize("row_window", [False, True])
def test_the_flush_stall_share_per_operation_and_window_kind_is_that_of_its_masks(
    seed, switches, row_window, monkeypatch
):
    """flush_stall.measure groups the instances by (operation, window kind) with one sort, the kinds
    read off the rows' windows where the timeline has them: the share and evidence of a mask per
    group, to the bit (both loops), windows or none."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=2, rows=20_000, n_inst=600)
    tl.op[:] = -1
    main = tl.main_rows()
    tl.op[main] = np.repeat(np.arange(600), -(-(main.stop - main.start) // 600))[: main.stop - main.start]
    tl.kind[tl.kind == S.OP_BEGIN] = S.OP_END
    firsts = np.unique(tl.op[main], return_index=True)[1] + main.start
    tl.kind[firsts], tl.id[firsts] = S.OP_BEGIN, tl.op[firsts]
    tl.inst_name = rng.integers(0, 4, 600)
    if switches:
        at = np.sort(rng.choice(np.arange(main.start + 1, main.stop), switches, replace=False))
        tl.kind[at], tl.id[at] = S.WINDOW, rng.integers(0, 2, switches)
    bound = np.where(rng.random(len(tl.ts)) < 0.03, rng.uniform(0, 3000, len(tl.ts)), 0.0)
    bound[firsts[rng.random(len(firsts)) < 0.5]] = 0.0
    want = _stall_share_by_masks(tl, bound)
    if row_window:
        windows.row_window(tl)
    assert want.overlapped > 0 and ("row_window" in tl.memo) == row_window
    for native_on in ("0", "1"):
        monkeypatch.setenv(native.ENV, native_on)
        got = flush_stall.measure(tl, bound)
        assert _same(tuple(want.as_dict().values()), tuple(got.as_dict().values()))


def test_flush_marks_are_the_writer_threads_category_rows():
    tl = _timeline(np.random.default_rng(4), threads=4)
    cat_row = (tl.kind == S.CAT_BEGIN) | (tl.kind == S.CAT_END)
    want = np.flatnonzero(cat_row & (tl.id == categories.PROFILER) & (tl.thread != tl.main_thread))
    assert len(want) and np.array_equal(residual._flush_marks(tl), want)
    tl.main_thread = 999  # no main thread: every thread's marks
    assert np.array_equal(residual._flush_marks(tl), np.flatnonzero(cat_row & (tl.id == categories.PROFILER)))


@pytest.mark.parametrize("seed", range(6))
def test_module_calls_planned_gives_numpys_bits(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=3, rows=70_000 if seed == 0 else 2000)  # seed 0: several blocks a thread
    names = ["inference", "backprop", "other"]
    mean = {(100, "inference"): 3.0, (101, "backprop"): 1.5, (102, "inference"): 0.0, (100, "nowhere"): 2.0}
    if seed == 5:  # one thread only
        mean = {(101, "backprop"): 2.0}
    monkeypatch.setattr(module_calls, "calls_per_instance", lambda proc, tl: mean)
    proc = SimpleNamespace(names=names)
    want, got = _both(monkeypatch, lambda: module_calls.planned(proc, tl, 700.0))
    assert want.any() and _same(want, got)


def test_module_calls_planned_without_costed_rows_is_empty_on_both(monkeypatch):
    tl = _timeline(np.random.default_rng(0))
    monkeypatch.setattr(module_calls, "calls_per_instance", lambda proc, tl: {(100, "nowhere"): 2.0})
    proc = SimpleNamespace(names=["inference"])
    want, got = _both(monkeypatch, lambda: module_calls.planned(proc, tl, 700.0))
    assert len(want) == 0 and len(got) == 0


@pytest.mark.parametrize("threads,rows", [(1, 1), (1, 500), (4, 500), (60, 5)])
def test_thread_last_is_every_change_of_thread(threads, rows):
    """The threads' last rows, marked from their starts: those of a comparison of every row with the next."""
    tl = _timeline(np.random.default_rng(threads), threads=threads, rows=rows)
    want = np.ones(len(tl.ts), bool)
    want[:-1] = tl.thread_idx[1:] != tl.thread_idx[:-1]
    assert np.array_equal(residual.thread_last(tl), want)
    rows = np.arange(len(tl.ts))
    assert np.array_equal(residual._LastRows(tl)[rows], want)  # read at rows, no column
    assert np.array_equal(residual._LastRows(tl)[rows[::-3]], want[::-3])


@pytest.mark.parametrize("threads,rows", [(1, 1), (1, 500), (4, 500), (60, 5)])
@pytest.mark.parametrize("gaps", [False, True])
def test_the_threads_first_rows_follow_their_last_rows(threads, rows, gaps):
    """rebuild's first row of each thread, read off the thread starts: the row after each thread's
    last row (and row 0), also where thread indices skip some (threads without rows)."""
    tl = _timeline(np.random.default_rng(threads), threads=threads, rows=rows)
    if gaps:
        tl.thread_idx = (tl.thread_idx * 3 + 1).astype(np.int16)
    last = residual.thread_last(tl)
    want = np.append(0, np.flatnonzero(last[:-1]) + 1)
    got = residual._thread_firsts(tl)
    assert got.dtype == np.int64 and np.array_equal(got, want)


@pytest.mark.parametrize("main", [100, 101, 102, 103, 999])
@pytest.mark.parametrize("ties", [False, True])
def test_rebuild_gives_numpys_bits_wherever_the_main_thread_is(main, ties, monkeypatch):
    """The main thread's rows first, in the middle, last or absent (its rows rebuilt first, the sums
    the other threads' starts need read on the way), its first rows at one time or not."""
    rng = np.random.default_rng(main)
    tl = dataclasses.replace(_timeline(rng, threads=4, rows=2000), main_thread=main)
    if ties:  # each thread's first rows at its first time: the main thread's start is read after them
        first = np.flatnonzero(np.append(True, tl.thread[1:] != tl.thread[:-1]))
        for a in first.tolist():
            tl.ts[a + 1 : a + 4] = tl.ts[a]
            tl.seg_end[a : a + 3] = tl.ts[a]
    new_dur = tl.float_duration() * rng.uniform(0, 1, len(tl.ts)) + 0.25
    want, got = _both(monkeypatch, lambda: residual.rebuild(tl, new_dur))
    assert all(_same(getattr(want, k), getattr(got, k)) for k in ("ts", "seg_end", "thread_end", "inst_end"))
    assert want.end_ns == got.end_ns


@pytest.mark.parametrize("cap", [0, 1, 3, 1 << 16])
def test_the_rows_over_their_plan_past_the_list_are_found_again(cap, monkeypatch):
    """residual_planned lists the first rows whose plan does not fit, and the periodic work's; where
    there are more, numpy finds them all: the same removal and rows either way."""
    monkeypatch.setattr(residual, "_OVER_ROWS", cap)
    rng = np.random.default_rng(cap)
    tl = _timeline(rng, threads=3)
    costs = _costs(rng, 20.0)
    last, on_writer = residual.thread_last(tl), tl.on_threads(np.array([102]))  # a writer's rows
    want, planned = _plan(tl, costs, last, on_writer, None, None)
    got = residual._planned_native(tl, costs, last, on_writer, None, None)
    assert _same_plan(want, got)
    assert (~(planned <= tl.float_duration())).sum() > 3  # more rows over their plan than the lists hold
    assert len(got.prof_rows) > 3  # and more of the periodic work's


@pytest.mark.parametrize("threads", [1, 3])
def test_remap_without_rows_of_the_main_thread_leaves_unknown_threads_as_they_are(threads, monkeypatch):
    """A main thread that recorded nothing on the timeline: a thread with rows moves with its own map,
    one without rows has no map to move with and stays, on both paths, without an error."""
    rng = np.random.default_rng(threads)
    tl = _timeline(rng, threads=threads, rows=2000)
    fix = residual.correct_windows(tl, rng.uniform(0.3, 1.0, len(tl.ts)))
    tl.main_thread = 999
    m = 500
    thread = rng.choice([*range(100, 100 + threads), 555, 999], m)
    t = np.sort(rng.integers(int(tl.ts.min()) - 10_000, int(tl.seg_end.max()) + 10_000, m))
    want, got = _both(monkeypatch, lambda: fix.remap(tl, thread, t))
    assert _same(want, got)
    unknown = ~np.isin(thread, tl.thread)
    assert unknown.any() and np.array_equal(got[unknown], t[unknown])
    known = ~unknown & (t > tl.ts[0])
    assert known.any() and not np.array_equal(got[known], t[known])


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_the_rows_each_flush_converts_are_numpys(threads, monkeypatch):
    """flush_intervals' recorded rows counted between the flushes' starts on each thread, in one
    pass over the kinds: numpy's counts, flushes before a thread's first row and after its last
    included."""
    rng = np.random.default_rng(threads)
    tl = _timeline(rng, threads=threads, rows=3000)
    tl.kind[rng.random(len(tl.kind)) < 0.05] = -3  # bytes outside the kinds: read from the end
    want, got = _both(monkeypatch, lambda: residual.flush_intervals(tl))
    assert _same(want, got)
    if threads > 1:
        assert len(want[0]) > 3 and want[2].sum() > 0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rlscope_rows", [False, True])
def test_the_module_calls_spread_row_by_row_give_the_columns_bits(seed, rlscope_rows, monkeypatch):
    """correct_timeline with the module calls' cost worked out row by row in residual_planned's pass
    (a module_calls.Spread) gives what numpy gives with its column, the periodic work's rows among
    them or not; Spread.any is the column's."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=4, rows=3000)
    if not rlscope_rows:
        tl.cat[tl.cat == categories.PROFILER] = categories.PYTHON
    costs = _costs(rng, 3.0)
    names = ["inference", "backprop", "other"]
    mean = {(100, "inference"): 3.0, (102, "backprop"): 1.5, (103, "inference"): 0.5, (100, "nowhere"): 2.0}
    if seed == 3:  # the main thread's calls only
        mean = {(100, "other"): 2.0}
    monkeypatch.setattr(module_calls, "calls_per_instance", lambda proc, tl: mean)
    proc = SimpleNamespace(names=names)
    spread = module_calls.spread(proc, tl, 700.0)
    column = module_calls.planned(proc, tl, 700.0)
    assert isinstance(spread, module_calls.Spread) and column.any() and spread.any()
    assert _same(spread.column(tl), column)
    monkeypatch.setenv(native.ENV, "0")
    want = residual.correct_timeline(tl, costs, 5, None, column)
    monkeypatch.setenv(native.ENV, "1")
    got = residual.correct_timeline(tl, costs, 5, None, spread)
    assert _same_correction(want, got) and "module_call" in got.removed_s
    assert _same_correction(want, residual.correct_timeline(tl, costs, 5, None, column))
    tl.id = tl.id.astype(np.int64)  # the numpy loops, with the spread made a column
    assert _same_correction(want, residual.correct_timeline(tl, costs, 5, None, spread))


@pytest.mark.parametrize("seed", range(3))
def test_the_module_calls_cost_tables_are_those_of_each_names_instances(seed):
    """module_calls._costed_blocks' table per thread: each instance whose name is among the thread's
    costed names takes its cost (names that repeat, ids below 0 or past the names: none), a last 0."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=4, rows=3000, n_inst=500)
    names = ["inference", "backprop", "inference", "other", "nowhere"]
    tl.inst_name = rng.integers(-1, len(names) + 2, len(tl.inst_name))
    mean = {(100, "inference"): 3.0, (100, "other"): 0.25, (102, "backprop"): 1.5, (103, "absent"): 2.0}
    got = {int(tl.thread[s.start]): table for s, table in module_calls._costed_blocks(names, tl, mean, 700.0)}
    assert sorted(got) == [100, 102, 103]
    for tid in got:
        want = np.zeros(len(tl.inst_name) + 1)
        for (t, name), m in mean.items():
            if t == tid:
                ids = [i for i, n in enumerate(names) if n == name]
                want[:-1][np.isin(tl.inst_name, ids)] = m * 700.0
        assert _same(got[tid], want)
    assert got[100].any() and not got[103].any()


def test_a_spread_without_cost_is_none():
    tl = _timeline(np.random.default_rng(1))
    total = np.zeros(len(tl.inst_name) + 1)
    spread = module_calls.Spread([(0, 10, total.copy())], np.zeros(len(total), bool), total)
    assert not spread.any() and not spread.column(tl).any()


@pytest.mark.parametrize("main", [100, 102, 103, 999])
@pytest.mark.parametrize("keep_ratio", [True, False])
def test_correct_windows_scales_in_the_rebuilds_pass_as_numpy_does(main, keep_ratio, monkeypatch):
    """correct_windows' new durations worked out in the rebuild's own pass (the lengths times the
    factors, the time gone, the ratios), its factors' memory taking the new starts: numpy's bits,
    with the main thread first, in the middle, last or absent (the sums before it from the factors).
    Segments of seconds: the running sums are large enough that their rounding shows in the times."""
    rng = np.random.default_rng(main)
    tl = dataclasses.replace(_timeline(rng, threads=4, rows=2000), main_thread=main)
    t0 = tl.start_ns
    tl = tl.retimed(t0 + (tl.ts - t0) * 1_000_003, t0 + (tl.seg_end - t0) * 1_000_003)
    tl.end_ns = t0 + (tl.end_ns - t0) * 1_000_003
    factor = rng.uniform(0.2, 1.0, len(tl.ts))
    factor[rng.random(len(tl.ts)) < 0.2] = 1.0
    factor[::97] = 0.0
    want, got = _both(monkeypatch, lambda: residual.correct_windows(tl, factor.copy(), keep_ratio))
    assert _same_correction(want, got) and got.removed_s
    assert (got.ratio is not None) == keep_ratio


def test_a_removal_that_is_its_plan_but_for_the_sign_of_zero_is_numpys(monkeypatch):
    """A plan of -0 in a segment of no length: np.minimum gives +0, which the plan's own column does not
    hold; residual_planned lists those rows with the ones over their plan, and the removal is numpy's."""
    rng = np.random.default_rng(9)
    tl = _timeline(rng, threads=2, rows=400, measured=False)
    tl.kind[:] = S.COMPILE_BEGIN  # rows that pay nothing
    tl.kind[::4] = S.OP_BEGIN  # each pays -0 after its timestamp, in a segment of no length
    none = np.zeros(len(tl.ts), np.int64)
    none[::4] = -(1 << 62)
    tl = stretched(tl, none)
    assert (tl.seg_end[::4] == tl.ts[::4]).all()
    costs = residual.EventCosts.zero()
    costs.inside[S.CostClass.SCOPE], costs.outside[S.CostClass.SCOPE] = -0.0, 300.0
    last, on_writer = residual.thread_last(tl), np.zeros(len(tl.ts), bool)
    want, planned = _plan(tl, costs, last, on_writer, None, None)
    assert np.signbit(planned[::4]).any() and not np.signbit(want.removal[::4]).any()
    assert _same_plan(want, residual._planned_native(tl, costs, last, on_writer, None, None))
    want, got = _both(monkeypatch, lambda: residual.correct_timeline(tl, costs, 0, None, None))
    assert _same_correction(want, got)


@pytest.mark.parametrize("main", [100, 102, 999])
def test_correct_windows_over_the_columns_it_reads_gives_the_same_bits(main, monkeypatch):
    """correct_windows with ``consume``: the residual-corrected timeline's own ts and seg_end take the
    new times (each row's read first): the same timeline, time gone and ratios as into new columns,
    on both paths (numpy's leaves the columns as they are)."""
    rng = np.random.default_rng(main)
    tl = dataclasses.replace(_timeline(rng, threads=4, rows=3000), main_thread=main)
    factor = rng.uniform(0.2, 1.0, len(tl.ts))
    want = residual.correct_windows(tl, factor.copy())
    for env in ("0", "1"):
        monkeypatch.setenv(native.ENV, env)
        mine = tl.retimed(tl.ts.copy(), tl.seg_end.copy())
        got = residual.correct_windows(mine, factor.copy(), consume=True)
        assert _same_correction(want, got)
        assert np.shares_memory(got.timeline.ts, mine.ts) == (env == "1")


@pytest.mark.parametrize("main", [100, 102, 103, 999])
@pytest.mark.parametrize("consume", [False, True])
def test_correct_windows_sums_the_main_threads_time_by_window_as_full_share_does(main, consume, monkeypatch):
    """correct_windows given the rows' kinds of window: the rebuild's pass sums the corrected main
    thread's lengths, all and in full windows (residual_rebuild with its modes), as full_share's own pass over
    the corrected rows does (C and numpy's), the timeline the same bits as without them; the main
    thread first, in the middle, last or absent (a share of 1)."""
    rng = np.random.default_rng(main)
    tl = dataclasses.replace(_timeline(rng, threads=4, rows=2000), main_thread=main)
    factor = rng.uniform(0.2, 1.0, len(tl.ts))
    factor[::97] = 0.0
    row_mode = rng.choice([S.WINDOW_FULL, S.WINDOW_LIGHT], len(tl.ts)).astype(np.int8)
    want = residual.correct_windows(tl, factor.copy())
    mine = tl.retimed(tl.ts.copy(), tl.seg_end.copy())
    got = residual.correct_windows(mine, factor.copy(), consume=consume, row_mode=row_mode)
    assert _same_correction(want, got)
    est = SimpleNamespace(row_mode=row_mode, main_mode_ns=None)
    shares = []
    for env in ("0", "1"):  # full_share's pass over the rows: numpy's, then C's
        monkeypatch.setenv(native.ENV, env)
        shares.append(full_windows.full_share(est, got.timeline))
    main_rows = got.timeline.main_rows()
    dur = got.timeline.seg_end[main_rows] - got.timeline.ts[main_rows]
    full = int(dur[row_mode[main_rows] == S.WINDOW_FULL].sum())
    # no main thread: no pass of its rows to sum on, full_share's own (over none)
    assert got.main_mode_ns == ((int(dur.sum()), full) if main != 999 else None)
    est.main_mode_ns = got.main_mode_ns
    assert _same(full_windows.full_share(est, got.timeline), shares[0]) and _same(shares[0], shares[1])
    assert (shares[0] == 1.0) == (main == 999)
    monkeypatch.setenv(native.ENV, "0")  # numpy's correct_windows sums nothing: full_share's pass
    assert residual.correct_windows(tl, factor.copy(), row_mode=row_mode).main_mode_ns is None


def test_correct_windows_sums_nothing_without_an_int8_column_of_every_row(monkeypatch):
    """Kinds of window not of every row, or not int8: the rebuild's plain pass, nothing summed."""
    rng = np.random.default_rng(4)
    tl = _timeline(rng, threads=2, rows=300)
    factor = rng.uniform(0.2, 1.0, len(tl.ts))
    for row_mode in (np.zeros(len(tl.ts) - 1, np.int8), np.zeros(len(tl.ts), np.int16)):
        got = residual.correct_windows(tl, factor.copy(), row_mode=row_mode)
        assert got.main_mode_ns is None and _same_correction(residual.correct_windows(tl, factor.copy()), got)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("rlscope_rows", [False, True])
def test_the_module_costs_kept_are_summed_as_they_come_as_numpy_sums_them(seed, rlscope_rows, monkeypatch):
    """residual_planned's sums, taken as the pass works the values out: the module calls' costs off the
    periodic work (no column of them) and the plan's, and the removal's from the plan's leaves, are
    numpy's sums of the columns where those sums are not used."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=4, rows=3000)
    if not rlscope_rows:
        tl.cat[tl.cat == categories.PROFILER] = categories.PYTHON
    monkeypatch.setattr(
        module_calls, "calls_per_instance", lambda proc, tl: {(100, "inference"): 3.0, (102, "backprop"): 1.5}
    )
    spread = module_calls.spread(SimpleNamespace(names=["inference", "backprop"]), tl, 700.0)
    last, on_writer = residual.thread_last(tl), tl.on_threads(np.array([103]))
    args = (tl, _costs(rng, 20.0), last, on_writer, None, spread)
    streamed = residual._planned_native(*args)
    monkeypatch.setattr(residual, "streams_agree", lambda: False)
    written = residual._planned_native(*args)
    assert streamed.kept_sum is not None and streamed.kept_sum > 0
    assert streamed.removal_sum != streamed.planned_sum  # moved: the leaves summed again
    assert _same(streamed.kept_sum, written.kept_sum) and _same_plan(streamed, written)
    column = spread.column(tl)
    profiler = (tl.cat == categories.PROFILER) & ~on_writer
    assert _same(streamed.kept_sum, float(column[~profiler].sum()))


@pytest.mark.parametrize("main", [100, 102, 999])
def test_rebuild_in_place_writes_the_starts_over_the_durations_with_the_same_bits(main, monkeypatch):
    """rebuild's new starts written over the new durations (each row's read first) are those written
    to a column of their own."""
    rng = np.random.default_rng(main)
    tl = _timeline(rng, threads=4, rows=3000)
    tl.main_thread = main
    new_dur = tl.float_duration() * rng.uniform(0, 1, len(tl.ts))
    new_dur[::7] = 0.5
    want = residual.rebuild(tl, new_dur.copy())
    own = new_dur.copy()
    got = residual.rebuild(tl, own, in_place=True)
    assert np.shares_memory(got.ts, own)
    assert all(
        _same(getattr(want, k), getattr(got, k))
        for k in ("ts", "seg_end", "thread_end", "inst_end", "end_ns")
    )
    monkeypatch.setenv(native.ENV, "0")  # the numpy loops write a column of their own
    kept = new_dur.copy()
    got = residual.rebuild(tl, kept, in_place=True)
    assert not np.shares_memory(got.ts, kept) and _same(kept, new_dur) and _same(want.ts, got.ts)


@pytest.mark.parametrize("keep_ratio", [True, False])
def test_a_correction_whose_time_left_is_not_regular_gives_numpys_bits(keep_ratio, monkeypatch):
    """A plan not regular (a segment's time left NaN or below +0, from an excess moved past it): the C
    loops' correction takes the flushes' stall over every row, in the plan's memory, and gives numpy's
    figures."""
    rng = np.random.default_rng(5)
    tl = _flushed_timeline(1)
    costs = _costs(rng, 3.0)
    real = residual._planned_native

    def irregular(*args: Any) -> residual._Plan | None:
        plan = real(*args)
        return None if plan is None else dataclasses.replace(plan, regular=False)

    monkeypatch.setattr(residual, "_planned_native", irregular)
    want, got = _both(monkeypatch, lambda: residual.correct_timeline(tl, costs, 0, keep_ratio=keep_ratio))
    assert _same_correction(want, got) and want.writer_stall is not None


@pytest.mark.parametrize("table", ["written", "one kind", "two runs", "every byte", "none", "to 255"])
def test_the_kinds_counted_between_edges_are_numpys_for_any_table(table):
    """residual_count_kinds: the rows of each stretch whose kind (as a byte) the table marks, counted by
    comparison where the marked bytes are one run, by lookup otherwise: numpy's counts."""
    rng = np.random.default_rng(len(table))
    kind = np.where(rng.random(5000) < 0.5, rng.integers(0, 12, 5000), rng.integers(-128, 128, 5000))
    kind = kind.astype(np.int8)
    marked = {
        "written": slice(0, 12), "one kind": slice(3, 4), "two runs": np.r_[0:5, 7:12],
        "every byte": slice(None), "none": slice(0, 0), "to 255": slice(250, 256),
    }  # fmt: skip
    marks = np.zeros(256, bool)
    marks[marked[table]] = True
    fn = native.function(
        "residual_count_kinds", native.N, native.N, native.I64, native.I8, native.BOOL, native.I64
    )
    a = 17
    edges = np.unique(np.r_[a, rng.integers(a, 5000, 40), 5000]).astype(np.int64)
    got = np.empty(len(edges), np.int64)
    fn(a, len(edges), edges, kind, marks, got)
    hit = marks[kind.view(np.uint8)]
    want = [np.count_nonzero(hit[p:q]) for p, q in zip([a, *edges[:-1]], edges, strict=True)]
    assert got.tolist() == want
    assert sum(want) > 0 or table == "none"


def _without_column(tl: Timeline) -> Timeline:
    """``tl`` with no column of its segments' ends kept: only each thread's end (Timeline.thread_end)."""
    out = tl.retimed(tl.ts, thread_end=tl.thread_end)
    assert "seg_end" not in out.memo
    return out


@pytest.mark.parametrize("main", [100, 102, 999])
def test_the_c_loops_read_no_column_of_segment_ends(main, monkeypatch):
    """The residual correction's C loops read the segments' ends off the starts and each thread's end
    (Timeline.segments): correct_timeline (the memory events', the module calls' and the flushes'
    costs among them), correct_windows over its own columns and remap make no column of them, and the
    rebuilt timelines keep none; the same bits as numpy's over the column."""
    rng = np.random.default_rng(main)
    tl = dataclasses.replace(_timeline(rng, threads=4, rows=3000), main_thread=main)
    costs = _costs(rng, 3.0)
    memory = np.sort(rng.integers(int(tl.ts[0]), int(tl.seg_end[-1]), 50))
    mean = {(100, "inference"): 3.0, (102, "backprop"): 1.5}
    monkeypatch.setattr(module_calls, "calls_per_instance", lambda proc, tl: mean)
    proc = SimpleNamespace(names=["inference", "backprop"])
    factor = rng.uniform(0.2, 1.0, len(tl.ts))
    thread = rng.choice([100, 101, 102, 555], 500)
    t = np.sort(rng.integers(int(tl.ts.min()) - 10_000, int(tl.seg_end.max()) + 10_000, 500))

    bound = np.where(rng.random(len(tl.ts)) < 0.05, rng.uniform(0, 3000, len(tl.ts)), 0.0)

    def run(tl: Timeline) -> tuple[residual.Correction, np.ndarray, tuple[Any, ...]]:
        fix = residual.correct_timeline(tl, costs, 40, memory, module_calls.spread(proc, tl, 700.0))
        return fix, fix.remap(tl, thread, t), tuple(flush_stall.measure(tl, bound).as_dict().values())

    def windows(fix: residual.Correction) -> residual.Correction:
        return residual.correct_windows(fix.timeline, factor.copy(), consume=True)

    def no_column(self: Timeline) -> np.ndarray:
        raise AssertionError("a column of the segments' ends made")

    monkeypatch.setenv(native.ENV, "0")
    want = run(tl)
    monkeypatch.setenv(native.ENV, "1")
    with monkeypatch.context() as m:
        m.setattr(Timeline, "_seg_end_column", no_column)
        got = run(_without_column(tl))
        assert "seg_end" not in got[0].timeline.memo
    assert _same_correction(want[0], got[0]) and _same(want[1], got[1]) and _same(want[2], got[2])
    assert (want[0].writer_stall is not None) == (main != 999) and "module_call" in got[0].removed_s
    monkeypatch.setenv(native.ENV, "0")
    want_w = windows(want[0])
    monkeypatch.setenv(native.ENV, "1")
    with monkeypatch.context() as m:
        m.setattr(Timeline, "_seg_end_column", no_column)
        got_w = windows(got[0])
        assert "seg_end" not in got_w.timeline.memo
    assert _same_correction(want_w, got_w)


@pytest.mark.parametrize("empty", ["middle", "last", "every other"])
def test_threads_without_rows_end_where_numpys_column_says(empty, monkeypatch):
    """Thread indices without rows (Timeline.thread_last: the row before): the rebuilt threads' ends
    are read at those rows as numpy's column of ends has them."""
    rng = np.random.default_rng(len(empty))
    tl = _timeline(rng, threads=4, rows=1000)
    idx = tl.thread_idx.astype(np.int64)
    # thread idx -> its index among ``slots``, whose other entries have no rows
    slots = {"middle": [0, 1, 3, 4], "last": [0, 1, 2, 3], "every other": [0, 2, 4, 6]}[empty]
    n_slots = max(slots) + 2 if empty == "last" else max(slots) + 1
    threads = np.arange(900, 900 + n_slots).astype(np.int32)
    threads[slots] = tl.threads
    idx = np.asarray(slots)[idx].astype(np.int16)
    fields = {k: getattr(tl, k) for k in ("kind", "id", "name", "flags", "op", "cat", "phase", "cost")}
    tl = Timeline.with_seg_end(
        tl.seg_end.copy(), ts=tl.ts.copy(), threads=threads, thread_idx=idx, main_thread=100,
        start_ns=tl.start_ns, end_ns=tl.end_ns, inst_name=tl.inst_name, inst_end=tl.inst_end, **fields,
    )  # fmt: skip
    assert len(np.unique(tl.thread_last())) < len(tl.thread_last()) or empty == "last"
    new_dur = tl.float_duration() * rng.uniform(0, 1, len(tl.ts))
    want, got = _both(monkeypatch, lambda: residual.rebuild(_without_column(tl), new_dur))
    assert all(_same(getattr(want, k), getattr(got, k)) for k in ("ts", "seg_end", "thread_end", "inst_end"))
    factor = rng.uniform(0.2, 1.0, len(tl.ts))
    want, got = _both(monkeypatch, lambda: residual.correct_windows(_without_column(tl), factor.copy()))
    assert _same_correction(want, got)
    assert _same(want.timeline.thread_end, want.timeline.seg_end[want.timeline.thread_last()])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("room", ["kept", "past the room"])
def test_a_plan_without_its_column_keeps_numpys_removal_near_the_rows_over_it(seed, room, monkeypatch):
    """residual_planned without a column of the plans (no column summed off the periodic work): the
    removal kept at the rows near those over their plan is numpy's there, its sum numpy's sum of the
    column; where the kept rows do not fit their room the pass runs again with the column."""
    rng = np.random.default_rng(seed)
    tl = _timeline(rng, threads=3, rows=40_000, measured=False)
    costs = _costs(rng, 0.03)
    last, on_writer = residual.thread_last(tl), tl.on_threads(np.array([102]))
    if room != "kept":
        monkeypatch.setattr(residual, "_saved_room", lambda n: 3)
    want, planned = _plan(tl, costs, last, on_writer, None, None)
    got = residual._planned_native(tl, costs, last, on_writer, None, None)
    over = ~(planned <= tl.float_duration())
    assert 0 < over.sum() < len(tl.ts) // 200  # a few rows over their plan
    if room != "kept":
        assert got.removal_rows is None  # the pass run again, with the column
    elif native.unavailable() is None:
        assert got.removal_rows is not None and len(got.removal_rows) < len(tl.ts) * 3 // 4
        assert np.isin(np.flatnonzero(over), got.removal_rows).all()
    assert _same_plan(want, got)
    assert _same(want.removal_sum, got.removal_sum) and want.removal_sum != want.planned_sum


def test_the_changed_sum_over_the_kept_rows_is_numpys_or_refused():
    """residual_changed_sum_saved: np.sum of a column from its leaves' sums, the leaves holding changed
    rows summed again from the rows kept; refused (ok 0) where such a leaf is not kept whole."""
    if native.unavailable() is not None:
        pytest.skip("no C compiler")
    fn, pairwise = residual._changed_saved_loop(), sums._pairwise()
    rng = np.random.default_rng(3)
    for n in (1, 7, 128, 129, 1000, 100_003):
        column = rng.normal(0, 1e6, n) * 10.0 ** rng.integers(-6, 6, n)
        leaves = np.empty(n // 64 + 2)
        pairwise(n, column, 2048, leaves)
        changed = np.sort(rng.integers(0, n, max(1, n // 5000)))  # a row perhaps twice
        near = np.unique(np.clip(changed[:, None] + np.arange(-136, 137), 0, n - 1))
        new = column.copy()
        new[changed] = rng.normal(0, 1e3, len(changed))
        ok = np.zeros(1, np.int64)
        got = fn(n, len(near), near, new[near].copy(), leaves, len(changed), changed, ok)
        assert ok[0] == 1 and _same(got, new.sum())
        # a leaf not kept whole: refused
        short = near[near != changed[0] - 1] if changed[0] > 0 else near[near != changed[0] + 1]
        if len(short) < len(near) and n > 1:
            fn(n, len(short), short, new[short].copy(), leaves, len(changed), changed, ok)
            assert ok[0] == 0


def _row_factors(rng: np.random.Generator, tl: Timeline) -> RowFactors:
    """Random factor tables over ``tl``'s rows: per instance + 1 (some keeping all), full rows, the main
    thread's blocks and compared pieces among its rows (none where it has no rows)."""
    n, m = len(tl.ts), len(tl.inst_name) + 1
    main = windows._main_ranges(tl)
    counted, rest = rng.uniform(0.2, 1.0, m), np.where(rng.random(m) < 0.5, 1.0, rng.uniform(0.5, 1.0, m))
    compared, bounds, first = np.zeros(0, np.int64), np.zeros(1, np.int64), 0
    if len(main):
        first, rows = int(main[0]), int(main[1] - main[0])
        bounds = np.unique(np.r_[0, rng.integers(0, rows + 1, max(rows // 6, 1)), rows]).astype(np.int64)
        compared = np.flatnonzero(rng.random(len(bounds) - 1) < 0.4).astype(np.int64)
    op = tl.op.astype(np.int32)
    full_row = rng.random(n) < 0.6
    return RowFactors(op, full_row, main, counted, rest, compared, bounds, first, rng.random(len(compared)))


@pytest.mark.parametrize("main", [100, 102, 103, 999])
@pytest.mark.parametrize("keep_ratio", [True, False])
@pytest.mark.parametrize("rows", [2000, 150, 40, 1])
def test_correct_windows_from_the_factors_tables_gives_their_columns_bits(
    main, keep_ratio, rows, monkeypatch
):
    """correct_windows given the estimate's factor tables (RowFactors): each row's factor worked out in
    the rebuild's pass and the time gone summed there leaf by leaf of numpy's tree (the main thread's
    rows first: leaves cut by its first and last rows wait in slots), the same bits as from the column
    of factors on both paths; the main thread first, in the middle, last or absent, and rows of
    fewer than a leaf."""
    rng = np.random.default_rng(main + rows)
    tl = dataclasses.replace(_timeline(rng, threads=4, rows=rows), main_thread=main)
    rf = _row_factors(rng, tl)
    column = rf.column()
    assert column.min() < 1.0 and (len(rf.compared) > 0 or main == 999 or rows < 100)
    want, from_column = _both(monkeypatch, lambda: residual.correct_windows(tl, column.copy(), keep_ratio))
    assert _same_correction(want, from_column)
    row_mode = rng.choice([S.WINDOW_FULL, S.WINDOW_LIGHT], len(tl.ts)).astype(np.int8)
    with_modes = residual.correct_windows(tl, column.copy(), keep_ratio, row_mode=row_mode)
    mine = tl.retimed(tl.ts.copy(), tl.seg_end.copy())
    got = residual.correct_windows(mine, rf, keep_ratio, consume=True, row_mode=row_mode)
    assert _same_correction(want, got) and got.removed_s and np.shares_memory(got.timeline.ts, mine.ts)
    assert got.main_mode_ns == with_modes.main_mode_ns
    # an op column not of int32: the column made
    wide = dataclasses.replace(rf, op=rf.op.astype(np.int64))
    assert _same_correction(want, residual.correct_windows(tl, wide, keep_ratio))
