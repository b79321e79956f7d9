"""The writer's fold (rlscope/trace/aggregate.py) against a plain per-event reference.

Synthetic event streams of nested operations, categories, phases, window switches and two
threads are folded in random flush-sized pieces; the summed aggregates must equal what a Python
loop over the events computes, exactly, and the kept events must nest (every end has its begin)
across the detail cuts.
"""

from __future__ import annotations

import collections
import itertools
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlscope import categories
from rlscope.trace import schema as S
from rlscope.trace.aggregate import Aggregator
from rlscope.trace.detail import DetailSchedule

MAIN, OTHER = 100, 200
NAMES = {"train": 0, "rollout": 1, "inference": 2, "simulation": 3, "backprop": 4, "worker_op": 5}


def _stream(seed: int, n_iter: int = 60) -> list[tuple[int, ...]]:
    """Rows (ts, thread, kind, id, parent, name, flags, cost) of a PPO-like loop on two threads."""
    rng = random.Random(seed)
    rows: list[tuple[int, ...]] = []
    ids = iter(range(1, 10**6))
    t = {MAIN: 1_000, OTHER: 1_500}

    def at(th: int, step: int) -> int:
        t[th] += rng.randint(1, step)
        return t[th]

    def cost() -> int:
        return rng.randint(0, 50) | rng.randint(0, 50) << 32

    rows.append((at(MAIN, 10), MAIN, S.SESSION_START, 0, -1, -1, 0, 0))
    rows.append((at(MAIN, 10), MAIN, S.WINDOW, S.WINDOW_LIGHT, -1, -1, 0, 0))
    phase = next(ids)
    rows.append((at(MAIN, 10), MAIN, S.PHASE_BEGIN, phase, -1, NAMES["train"], 0, 0))
    other_open: list[int] = []
    for _ in range(n_iter):
        top = next(ids)
        rows.append((at(MAIN, 300), MAIN, S.OP_BEGIN, top, -1, NAMES["rollout"], 0, cost()))
        for _ in range(rng.randint(1, 4)):
            inf = next(ids)
            rows.append((at(MAIN, 300), MAIN, S.OP_BEGIN, inf, top, NAMES["inference"], 0, cost()))
            if rng.random() < 0.3:  # recursive
                rec = next(ids)
                rows.append(
                    (at(MAIN, 100), MAIN, S.OP_BEGIN, rec, inf, NAMES["inference"], S.FLAG_RECURSIVE, 0)
                )
                rows.append((at(MAIN, 100), MAIN, S.OP_END, rec, inf, NAMES["inference"], 0, 0))
            rows.append((at(MAIN, 300), MAIN, S.OP_END, inf, top, NAMES["inference"], 0, cost()))
            sim = next(ids)
            rows.append((at(MAIN, 100), MAIN, S.OP_BEGIN, sim, top, NAMES["simulation"], 0, cost()))
            rows.append(
                (at(MAIN, 100), MAIN, S.CAT_BEGIN, categories.SIMULATOR, categories.PYTHON, -1, 0, cost())
            )
            rows.append(
                (at(MAIN, 900), MAIN, S.CAT_END, categories.SIMULATOR, categories.PYTHON, -1, 0, cost())
            )
            rows.append((at(MAIN, 100), MAIN, S.OP_END, sim, top, NAMES["simulation"], 0, cost()))
        rows.append((at(MAIN, 300), MAIN, S.OP_END, top, -1, NAMES["rollout"], 0, cost()))
        if rng.random() < 0.3:
            mode = rng.choice([S.WINDOW_LIGHT, S.WINDOW_FULL])
            rows.append((at(MAIN, 50), MAIN, S.WINDOW, mode, -1, -1, 0, 0))
        # the other thread: ops that may stay open across many main-thread iterations
        if other_open and rng.random() < 0.5:
            i = other_open.pop()
            rows.append((at(OTHER, 2000), OTHER, S.OP_END, i, other_open[-1] if other_open else -1, 5, 0, 0))
        elif rng.random() < 0.5:
            i = next(ids)
            parent = other_open[-1] if other_open else -1
            rows.append((at(OTHER, 2000), OTHER, S.OP_BEGIN, i, parent, NAMES["worker_op"], 0, 0))
            other_open.append(i)
    while other_open:
        i = other_open.pop()
        rows.append((at(OTHER, 200), OTHER, S.OP_END, i, other_open[-1] if other_open else -1, 5, 0, 0))
    rows.append((at(MAIN, 10), MAIN, S.PHASE_END, phase, -1, NAMES["train"], 0, 0))
    rows.append((max(t.values()) + 5, MAIN, S.SESSION_END, 0, -1, -1, 0, 0))
    # append order: interleave the threads by time, as the shared buffer does
    return sorted(rows, key=lambda r: r[0])


def _reference(
    rows: list[tuple[int, ...]],
    agg: Aggregator,
    stamps: list[int] | None = None,
    compiles: list[tuple[int, int, int]] | None = None,
) -> tuple[dict, dict]:
    """Exclusive time and calls per key, one event at a time (the fold's definitions). ``stamps``:
    the folds' times, where each fold's aggregates end and a segment's mode is taken again;
    ``compiles``: (thread, start, end) of compilations, whose python and simulator time is compile."""
    compiles = compiles or []

    def compiling(th: int, t: int) -> bool:
        return any(c_th == th and s <= t < e for c_th, s, e in compiles)

    window = []  # (ts, mode) of window rows
    for r in rows:
        if r[2] == S.WINDOW:
            window.append((r[0], r[3]))

    def mode_at(ts: int) -> int:
        if not agg.in_detail(np.array([ts]))[0]:
            return S.MODE_SUMMARY
        m = S.WINDOW_LIGHT
        for wt, wm in window:
            if wt <= ts:
                m = wm
        return m

    cuts = [c for c in agg._cuts(rows[-1][0])]
    end = rows[-1][0]  # the last fold's time: each thread's last state lasts to it
    time: dict = collections.defaultdict(int)
    calls: dict = collections.defaultdict(lambda: [0, 0])
    by_thread = collections.defaultdict(list)
    for r in rows:
        by_thread[r[1]].append(r)
    for th, rs in by_thread.items():
        ops: list[tuple[int, int, int, int]] = []  # id, name, begin, flags
        cats = [categories.PYTHON]
        phases: list[tuple[int, int]] = []
        for a, b in zip(rs, [*rs[1:], (end,)], strict=True):
            kind = a[2]
            if kind == S.OP_BEGIN:
                ops.append((a[3], a[5], a[0], a[6]))
            elif kind == S.OP_END:
                _, name, begin, flags = ops.pop()
                key = (th, mode_at(a[0]), phases[-1][1] if phases else -1, name)
                calls[key][0] += 1
                calls[key][1] += 0 if flags & S.FLAG_RECURSIVE else a[0] - begin
            elif kind == S.CAT_BEGIN:
                cats.append(a[3])
            elif kind == S.CAT_END:
                cats.pop()
            elif kind == S.PHASE_BEGIN:
                phases.append((a[3], a[5]))
            elif kind == S.PHASE_END:
                phases.pop()
            bounds = [x for c_th, s, e in compiles if c_th == th for x in (s, e)]
            splits = sorted(set(cuts) | set(stamps or []) | set(bounds))
            points = [a[0]] + [c for c in splits if a[0] < c < b[0]] + [b[0]]
            for lo, hi in itertools.pairwise(points):
                cat = cats[-1]
                if cat in (categories.PYTHON, categories.SIMULATOR) and compiling(th, lo):
                    cat = categories.COMPILE
                key = (th, mode_at(lo), phases[-1][1] if phases else -1, ops[-1][1] if ops else -1, cat)
                time[key] += hi - lo
    # off the main thread, only operations' time (and the writer's own) is kept
    kept = {k: v for k, v in time.items() if v and (k[0] == MAIN or k[3] >= 0 or k[4] == categories.PROFILER)}
    return kept, {k: tuple(v) for k, v in calls.items()}


def _fold_all(
    rows: list[tuple[int, ...]],
    agg: Aggregator,
    seed: int,
    compiles: list[tuple[int, int, int]] | None = None,
    after: list[tuple[int, int, int]] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int]]]:
    """``rows`` folded in random flush-sized pieces; each of ``compiles`` (thread, start, end) told
    to the aggregator as its collector does, by the fold whose time reaches its start, its end; each
    of ``after`` told once it ended (Triton's listener), and returned when it lay within one fold
    (what a fold took before it was told stays as counted)."""
    rng = random.Random(seed)
    arr = np.array(rows, np.int64)
    events, aggs = [], []
    began: set[int] = set()
    ended: set[int] = set()
    told: list[tuple[int, int, int]] = []
    last = -(2**62)
    i = 0
    while i < len(arr):
        j = min(len(arr), i + rng.randint(1, 40))
        now = int(arr[j - 1, 0])
        for k, (th, start, end) in enumerate(compiles or []):
            if start <= now and k not in began:
                began.add(k)
                agg.compile_began(th, start)
            if end <= now and k not in ended:
                ended.add(k)
                agg.compile_ended(th, end)
        for th, start, end in after or []:
            if last < start and end <= now:
                agg.compiled(th, start, end)
                told.append((th, start, end))
        out = agg.fold(arr[i:j], now)
        last = now
        events.append(out.events)
        aggs.append(out.aggregates)
        i = j
    return np.concatenate(events), np.concatenate(aggs), told


def _sums(aggs: np.ndarray) -> tuple[dict, dict]:
    time: dict = collections.defaultdict(int)
    calls: dict = collections.defaultdict(lambda: [0, 0])
    for _ts, th, mode, phase, op, cat, t, n, _b, _c in aggs.tolist():
        if cat == S.AGGREGATE_CALLS:
            calls[(th, mode, phase, op)][0] += n
            calls[(th, mode, phase, op)][1] += t
        else:
            time[(th, mode, phase, op, cat)] += t
    return {k: v for k, v in time.items() if v}, {k: tuple(v) for k, v in calls.items()}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("spec", ["all", "0.00002s,0.00005s,0.00002s", "0.00003s"])
def test_fold_matches_the_reference(seed: int, spec: str) -> None:
    rows = _stream(seed)
    # schedule units are seconds on the events' clock; these streams span ~0.1 ms of fake time
    agg = Aggregator(DetailSchedule.parse(spec), origin_ns=1_000, main_thread=MAIN, width=8)
    events, aggs, _ = _fold_all(rows, agg, seed)
    ref = Aggregator(DetailSchedule.parse(spec), origin_ns=1_000, main_thread=MAIN, width=8)
    want_time, want_calls = _reference(rows, ref)
    got_time, got_calls = _sums(aggs)
    assert got_time == want_time
    assert got_calls == want_calls
    # the whole session's time on the main thread is accounted for
    main = sum(v for k, v in got_time.items() if k[0] == MAIN)
    assert main == rows[-1][0] - rows[0][0]
    _assert_nested(events)
    if spec == "all":
        assert len(events) == len(rows)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spec", ["all", "0.00002s,0.00005s,0.00002s"])
def test_compilations_are_compile_time_in_the_aggregates(seed: int, spec: str) -> None:
    """Compilations on the main thread (one across many folds, short ones inside a fold) and on the
    other: their python and simulator time is compile, exactly as the per-event reference says,
    and the main thread's time still adds up to the session's."""
    rows = _stream(seed)
    t0, t1 = rows[0][0], rows[-1][0]
    span = t1 - t0
    rng = random.Random(seed)
    compiles = [
        (MAIN, t0 + span // 10, t0 + span // 3),  # across many folds
        (MAIN, t0 + span // 2, t0 + span // 2 + rng.randint(50, 400)),
        (OTHER, t0 + span // 4, t0 + 3 * span // 5),
    ]
    # told once ended: nested in a compilation, and short ones a few ns apart (within one segment)
    x = t0 + 2 * span // 3
    after = [(MAIN, t0 + span // 5, t0 + span // 5 + 40)]
    after += [(MAIN, x + 9 * k, x + 9 * k + 5) for k in range(30)]
    agg = Aggregator(DetailSchedule.parse(spec), origin_ns=1_000, main_thread=MAIN, width=8)
    _, aggs, told = _fold_all(rows, agg, seed, compiles, after)
    assert len(told) > 20
    ref = Aggregator(DetailSchedule.parse(spec), origin_ns=1_000, main_thread=MAIN, width=8)
    want_time, want_calls = _reference(rows, ref, compiles=compiles + told)
    got_time, got_calls = _sums(aggs)
    assert got_time == want_time
    assert got_calls == want_calls
    assert sum(v for k, v in got_time.items() if k[4] == categories.COMPILE) > span // 5
    assert sum(v for k, v in got_time.items() if k[0] == MAIN) == t1 - t0


@pytest.mark.parametrize("seed", range(3))
def test_a_compilation_begun_after_a_stretch_ended_is_time_between_the_stretches(seed: int) -> None:
    """An operation begun inside a detail stretch whose compilation begins after the stretch ended
    (torch.compile's first call): the compilation is compile time between the stretches, where the
    per-event reference puts it, not detail time, which the analysis takes from the timeline."""
    spec = "0.00002s,0.00005s,0.00002s"  # a stretch from 20 to 40 µs after the origin, the next at 50
    o = 1_000
    op = 2
    rows = [
        (o + 1_000, MAIN, S.SESSION_START, 0, -1, -1, 0, 0),
        (o + 1_010, MAIN, S.WINDOW, S.WINDOW_LIGHT, -1, -1, 0, 0),
        (o + 25_000, MAIN, S.OP_BEGIN, op, -1, NAMES["rollout"], 0, 0),
        (o + 60_000, MAIN, S.OP_END, op, -1, NAMES["rollout"], 0, 0),
        (o + 100_000, MAIN, S.SESSION_END, 0, -1, -1, 0, 0),
    ]
    compiles = [(MAIN, o + 45_000, o + 55_000)]
    agg = Aggregator(DetailSchedule.parse(spec), origin_ns=o, main_thread=MAIN, width=8)
    _, aggs, _ = _fold_all(rows, agg, seed, compiles)
    ref = Aggregator(DetailSchedule.parse(spec), origin_ns=o, main_thread=MAIN, width=8)
    want_time, _ = _reference(rows, ref, compiles=compiles)
    got_time, _ = _sums(aggs)
    assert got_time == want_time
    compile_by_mode = {k[1]: v for k, v in got_time.items() if k[4] == categories.COMPILE}
    assert sum(compile_by_mode.values()) == 10_000 and compile_by_mode[S.MODE_SUMMARY] > 0


def _assert_nested(events: np.ndarray) -> None:
    """Every end in the kept events closes the innermost open scope of its thread."""
    stacks: dict = collections.defaultdict(list)
    for ts, th, kind, ident, _parent, _name, _flags, _cost in events.tolist():
        if kind in (S.OP_BEGIN, S.PHASE_BEGIN):
            stacks[(th, kind)].append(ident)
        elif kind in (S.OP_END, S.PHASE_END):
            begin = S.OP_BEGIN if kind == S.OP_END else S.PHASE_BEGIN
            assert stacks[(th, begin)] and stacks[(th, begin)][-1] == ident, (ts, th, kind, ident)
            stacks[(th, begin)].pop()
    assert not any(stacks.values())


def test_detail_rows_are_bounded_by_the_schedule() -> None:
    rows = _stream(1, n_iter=400)
    agg = Aggregator(DetailSchedule.parse("0.00002s,0.0001s,0.00001s"), 1_000, MAIN, 8)
    events, _, _ = _fold_all(rows, agg, 1)
    assert len(events) < len(rows) / 3
    kinds = events[:, 2]
    pauses, resumes = (kinds == S.DETAIL) & (events[:, 3] == 0), (kinds == S.DETAIL) & (events[:, 3] == 1)
    assert pauses.sum() >= 2
    assert resumes.sum() == pauses.sum()  # the session's end resumes the last pause
    assert (kinds == S.SESSION_END).sum() == 1


@pytest.mark.parametrize("seed", range(2, 8))
def test_an_iteration_schedule_cuts_at_the_outermost_operation_s_ends(seed: int) -> None:
    rows = _stream(seed, n_iter=60)
    agg = Aggregator(DetailSchedule.parse("10it,25it,5it"), 0, MAIN, 8)
    events, aggs, _ = _fold_all(rows, agg, seed)
    _assert_nested(events)
    ref = Aggregator(DetailSchedule.parse("10it,25it,5it"), 0, MAIN, 8)
    ref._ends = np.array([r[0] for r in rows if r[2] == S.OP_END and r[1] == MAIN and r[4] == -1])
    want_time, want_calls = _reference(rows, ref, sorted(set(aggs[:, 0].tolist())))
    got_time, got_calls = _sums(aggs)
    assert got_time == want_time
    assert got_calls == want_calls
    # the kept top-level iterations: the first 10, then 5 of every 25 (iterations 25-29, 50-54)
    kept = events[(events[:, 2] == S.OP_END) & (events[:, 1] == MAIN) & (events[:, 4] == -1)]
    real = kept[(kept[:, 6] & S.FLAG_SUMMARIZED) == 0]
    assert len(real) == 10 + 5 + 5


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("spec", ["0.001s", "0.00002s,0.00005s,0.00002s", "30it,60it,20it"])
def test_a_stretch_ends_at_the_flush_that_fills_it(seed: int, spec: str) -> None:
    """A stretch past its rows (``stretch_rows``) pauses at the flush that filled it and resumes on
    schedule; the aggregates still account for the whole session, and the detail kept nests."""
    rows = _stream(seed, n_iter=120)
    agg = Aggregator(DetailSchedule.parse(spec), origin_ns=1_000, main_thread=MAIN, width=8, stretch_rows=150)
    events, aggs, _ = _fold_all(rows, agg, seed)
    _assert_nested(events)
    kinds = events[:, 2]
    pauses = events[(kinds == S.DETAIL) & (events[:, 3] == S.DETAIL_PAUSE), 0]
    resumes = events[(kinds == S.DETAIL) & (events[:, 3] == S.DETAIL_RESUME), 0]
    assert len(pauses) >= 1 and len(resumes) == len(pauses)  # the session's end resumes the last
    # no stretch holds much more than the limit: one flush's rows past it at most (40 rows a fold)
    edges = np.sort(np.concatenate([pauses, resumes]))
    kept = events[~np.isin(kinds, S.UNCUT_KINDS) & ((events[:, 6] & S.FLAG_SUMMARIZED) == 0)]
    starts = np.concatenate([[rows[0][0]], resumes])
    for a in starts:
        b = edges[edges > a].min(initial=2**62)
        assert ((kept[:, 0] >= a) & (kept[:, 0] < b)).sum() <= 150 + 40
    # the whole session's time on the main thread is accounted for, and the time after a fill is
    # summary until the stretch's resume
    got_time, _ = _sums(aggs)
    assert sum(v for k, v in got_time.items() if k[0] == MAIN) == rows[-1][0] - rows[0][0]
    assert any(k[1] == S.MODE_SUMMARY for k in got_time)
    if spec == "0.001s":  # one stretch, longer than the stream: it ends only by filling
        assert len(pauses) == 1
        detail_main = sum(v for k, v in got_time.items() if k[0] == MAIN and k[1] != S.MODE_SUMMARY)
        assert detail_main == pauses[0] - rows[0][0]


def test_a_whole_run_schedule_has_no_limit() -> None:
    rows = _stream(0, n_iter=120)
    agg = Aggregator(DetailSchedule.parse("all"), origin_ns=1_000, main_thread=MAIN, width=8, stretch_rows=50)
    events, _, _ = _fold_all(rows, agg, 0)
    assert len(events) == len(rows)


def test_a_flush_between_the_session_s_end_and_its_end_row_counts_nothing_past_the_end() -> None:
    """The session times its end, stops its collectors, then hands its end row (and the ends of
    what it closes, timed at its end) over: a flush in between ends the aggregates at that end,
    where the detail ends, not at the flush's time."""
    rows = _stream(4, n_iter=40)
    *body, end_row = rows
    end = end_row[0]
    agg = Aggregator(DetailSchedule.parse("all"), origin_ns=1_000, main_thread=MAIN, width=8)
    arr = np.array(body, np.int64)
    first = agg.fold(arr[: len(arr) // 2], int(arr[len(arr) // 2 - 1, 0]))
    agg.session_ends(end)
    late = agg.fold(arr[len(arr) // 2 :], end + 50_000)  # the stop took 50 µs, and a flush came
    last = agg.fold(np.array([end_row], np.int64), end + 60_000)
    aggs = np.concatenate([first.aggregates, late.aggregates, last.aggregates])
    assert aggs[:, 0].max() == end
    got_time, got_calls = _sums(aggs)
    assert sum(v for k, v in got_time.items() if k[0] == MAIN) == end - rows[0][0]
    want_time, want_calls = _reference(rows, agg, sorted(set(aggs[:, 0].tolist())))
    assert got_time == want_time
    assert got_calls == want_calls


def test_a_flush_s_aggregates_end_where_its_drain_took_the_rows(tmp_path: Path) -> None:
    """A flush's aggregates end at the time it read just before draining the rows: a row the job
    appended by then is in the drain, one appended later is timed after that end (the native buffer
    times and appends a row at once), so every change is counted where it happened."""
    from rlscope.trace.writer import TraceWriter

    now = [4_000]
    writer: TraceWriter | None = None

    def clock() -> int:  # the job ends its operation (at 3000) as the flush reads the clock (4000)
        if writer is not None and now[0] == 4_000:
            writer.events.append((3_000, MAIN, S.OP_END, 1, -1, 0, 0))
        return now[0]

    writer = TraceWriter(
        tmp_path / "process-1", {}, ["inference"], flush_interval=3600.0, clock=clock, main_thread=MAIN
    )
    writer.events.append((1_000, MAIN, S.SESSION_START, -1, -1, -1, 0))
    writer.events.append((2_000, MAIN, S.OP_BEGIN, 1, -1, 0, 0))
    writer.flush()
    now[0] = 5_000
    writer.events.append((5_000, MAIN, S.SESSION_END, -1, -1, -1, 0))
    writer.close()
    aggs = pa.ipc.open_stream(pa.memory_map(str(tmp_path / "process-1" / S.AGGREGATES_FILE))).read_all()
    got_time, got_calls = _sums(np.column_stack([aggs.column(c).to_numpy() for c in S.AGGREGATE_COLUMNS]))
    assert sum(v for k, v in got_time.items() if k[3] == 0) == 1_000  # the operation's [2000, 3000]
    assert sum(v for k, v in got_time.items() if k[3] == -1) == 3_000
    assert sum(n for n, _ in got_calls.values()) == 1
