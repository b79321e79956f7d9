"""The timeline's C loops (rlscope/analysis/native/timeline.c) against their numpy versions, bit for
bit, each path switched with RLSCOPE_NATIVE_ANALYSIS: the merge of the events with the recorded
intervals and the timeline built from random traces (nested operations, phases and categories on
several threads, intervals of up to three sources touching, tied and overlapping, instance ids
spread wide), the states' forward fills, the thread index, the marks inside intervals, the values
kept at rows, the rows of kinds, the segment ends, the instances' times, the torch ops' intervals and
the state at GPU launches; with the edge cases (no rows, one row, one thread, out of order, ids
beyond int32, columns not in one block) that send a call to numpy's loops."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis import timeline as T
from rlscope.trace import schema as S
from tests.timelines import stretched


@pytest.fixture(autouse=True)
def _library():
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")


def _both(monkeypatch, fn, *args):
    """``fn(*args)`` with the C loops, then with numpy's."""
    got = fn(*args)
    monkeypatch.setenv(native.ENV, "0")
    want = fn(*args)
    monkeypatch.delenv(native.ENV)
    return got, want


def _same(a, b) -> None:
    """Equal to the bit, with the same types: arrays, RowValues, dicts and tuples of them."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            if f.compare:
                _same(getattr(a, f.name), getattr(b, f.name))
    else:
        assert a == b


# -- random traces --------------------------------------------------------------------------------


def _thread_events(rng, thread: int, n: int, t0: int, next_id: list[int]) -> list[tuple]:
    """``n`` rows of one thread: operations and phases nested (each end closes the innermost, its
    parent then current), categories entered and left, times rising with ties."""
    rows, ops, cats = [], [], []
    t = t0
    for _ in range(n):
        t += int(rng.choice([0, 1, 2, 5, 30]))
        r = rng.random()
        if r < 0.3 or not ops:
            parent = ops[-1] if ops else -1
            ident = next_id[0]
            next_id[0] += 1
            kind = S.OP_BEGIN if rng.random() < 0.8 else S.PHASE_BEGIN
            ops.append(ident)
            rows.append((t, thread, kind, ident, parent, int(rng.integers(0, 50)), 0, 0))
        elif r < 0.55:
            ident = ops.pop()
            rows.append((t, thread, S.OP_END, ident, ops[-1] if ops else -1, 3, int(rng.integers(0, 3)), 7))
        elif r < 0.75:
            cat = int(rng.choice([categories.SIMULATOR, categories.PROFILER, categories.BACKEND]))
            rows.append((t, thread, S.CAT_BEGIN, cat, cats[-1] if cats else -1, -1, 0, 0))
            cats.append(cat)
        elif r < 0.9 and cats:
            cat = cats.pop()
            rows.append((t, thread, S.CAT_END, cat, cats[-1] if cats else -1, -1, 0, 0))
        else:
            rows.append((t, thread, S.WINDOW, int(rng.integers(0, 2)), -1, -1, 0, 0))
    return rows


def _events(rng, threads: list[int], n: int, spread: int = 1, shuffle: bool = True) -> pa.Table:
    """A process's events: a session on the first thread around rows of every thread."""
    next_id = [0]
    rows = [(0, threads[0], S.SESSION_START, -1, -1, -1, 0, 0)]
    for k, thread in enumerate(threads):
        rows += _thread_events(rng, thread, n if k == 0 else max(n // 4, 1), 1 + k, next_id)
    end = max(r[0] for r in rows) + 10
    rows.append((end, threads[0], S.SESSION_END, -1, -1, -1, 0, 0))
    if shuffle:  # the threads' rows interleaved, each thread's in order
        rows.sort(key=lambda r: (r[0], rng.random()))
    cols = [np.array(c) for c in zip(*rows, strict=True)]
    for c in (3, 4):  # instance ids spread wide: the timeline renumbers them
        scoped = np.isin(cols[2], [S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END]) & (cols[c] >= 0)
        cols[c] = np.where(scoped, cols[c] * spread, cols[c])
    schema = S.events_schema({}, cost=True)
    return pa.table([pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def _intervals(
    rng, threads: list[int], n: int, span: int, named: bool, overlap: bool = False, order: bool = True
) -> tuple:
    """(thread, start, end[, name]) of ``n`` intervals, disjoint per thread (touching, some empty,
    some tied with the events' times) unless ``overlap``; in (thread, start) order unless not ``order``."""
    thread = np.sort(rng.choice(np.asarray(threads, np.int64), n))
    start = np.empty(n, np.int64)
    end = np.empty(n, np.int64)
    for t in np.unique(thread).tolist():
        k = np.flatnonzero(thread == t)
        cuts = np.sort(rng.integers(0, span, 2 * len(k)))
        start[k], end[k] = cuts[0::2], cuts[1::2]
        if overlap and len(k) > 1:
            end[k[0]] = span
    if not order:
        p = rng.permutation(n)
        thread, start, end = thread[p], start[p], end[p]
    if not named:
        return thread, start, end
    return thread, start, end, rng.integers(0, 30, n).astype(np.int32)


def _columns(events: pa.Table) -> dict[str, np.ndarray]:
    return {c: events.column(c).to_numpy() for c in events.column_names}


# -- the merge --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_merge_is_numpy_s(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    threads = [5, 3, 9][: 1 + seed % 3]
    ev = _events(rng, threads, 300)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    sources = [
        (S.API_BEGIN, S.API_END, *_intervals(rng, [*threads, 7], 40, span, False), None),
        (S.BACKEND_BEGIN, S.BACKEND_END, *_intervals(rng, threads, 400, span, True, order=seed % 2 == 1)),
        (S.COMPILE_BEGIN, S.COMPILE_END, *_intervals(rng, [threads[0]], 5, span, False), None),
    ][: 1 + seed % 3]
    col = _columns(ev)
    fill = T._merged_native(col, np.lexsort((col["ts_ns"], col["thread"])), sources, np.iinfo(np.int64).min)
    if seed % 2:  # in (thread, start) order: the C merge takes them as they are
        assert fill is not None
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources)
    _same(got, want)
    # the times no earlier than one among them: ordered as given, written clamped
    ts_min = int(np.median(col["ts_ns"]))
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources, ts_min)
    _same(got, want)
    assert got[0]["ts_ns"].min() == ts_min
    # with what the timeline reads off the rows next, made in the merge's pass
    end_ns = span - 3 + 6 * (seed % 2)  # before the last rows' times, or after
    thread = got[0]["thread"]  # the rows' threads, merged without end_ns
    for kinds in (T._CHANGES, T._CHANGES_ANY):
        got, want = _both(monkeypatch, T._with_interval_rows, col, sources, ts_min, end_ns, kinds)
        _same(got, want)
        out = got[0]
        starts = T._thread_starts(thread)
        # each thread index's thread, in place of the column
        assert "thread" not in out and out["threads"].tobytes() == thread[starts].tobytes()
        # the same written as a table in the merge's pass or read off the column it writes
        order = np.lexsort((col["ts_ns"], col["thread"]))
        table = T._merged_native(col, order, sources, ts_min, end_ns, kinds)
        if table is not None:
            _same(table, T._merged_native(col, order, sources, ts_min, end_ns, kinds, None, False, True))
        assert "seg_end" not in out  # a segment ends where the next row on its thread starts
        assert out["thread_idx"].tolist() == T._thread_index(len(out["ts_ns"]), starts).tolist()
        assert out["kind_rows"].tolist() == np.flatnonzero(kinds[out["kind"].view(np.uint8)]).tolist()


def test_merge_takes_sources_out_of_thread_order_sorted(monkeypatch):
    """A source whose threads are out of order (each thread's intervals in order, disjoint) is sorted
    before the C merge takes it: the merge sees it and hands it back."""
    rng = np.random.default_rng(2)
    col = _columns(_events(rng, [3, 5, 9], 60))
    span = int(col["ts_ns"].max()) + 5
    thread, start, end, name = _intervals(rng, [3, 5, 9], 40, span, True)
    back = np.argsort(-thread, kind="stable")  # threads descending, each one's intervals in time order
    sources = [(S.BACKEND_BEGIN, S.BACKEND_END, thread[back], start[back], end[back], name[back])]
    ev = np.lexsort((col["ts_ns"], col["thread"]))
    assert T._merged_native(col, ev, sources, np.iinfo(np.int64).min) is None
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources, None, span, T._CHANGES)
    _same(got, want)
    ordered = [(S.BACKEND_BEGIN, S.BACKEND_END, thread, start, end, name)]
    _same(got, T._with_interval_rows(col, ordered, None, span, T._CHANGES))


@pytest.mark.parametrize("threads", [3, 32_766, 32_767, 40_000])
def test_merge_thread_index_past_int16(monkeypatch, threads):
    """The thread index the merge writes: int16 below 32,767 threads, else _thread_index's."""
    rng = np.random.default_rng(threads)
    tid = np.arange(threads, dtype=np.int64) * 3 + 1
    n = threads
    col = {
        "ts_ns": rng.integers(0, 100, n).astype(np.int64),
        "thread": tid,
        "kind": np.full(n, S.WINDOW, np.int8),
        "id": np.zeros(n, np.int64),
        "parent": np.full(n, -1, np.int64),
        "name": np.full(n, -1, np.int32),
        "flags": np.zeros(n, np.int8),
    }
    k = np.arange(0, threads, 7)
    sources = [(S.API_BEGIN, S.API_END, tid[k], np.full(len(k), 10), np.full(len(k), 20), None)]
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources, None, 200, T._CHANGES)
    _same(got, want)
    assert got[0]["thread_idx"].dtype == (np.int16 if threads < 32_767 else np.int32)
    assert int(got[0]["thread_idx"][-1]) == threads - 1
    assert got[0]["threads"].tolist() == tid.tolist()  # each thread index's, past int16 too


def test_ties_go_to_the_events_then_the_sources_in_order(monkeypatch):
    col = _columns(_events(np.random.default_rng(0), [1], 1, shuffle=False))
    col["ts_ns"] = np.full(len(col["ts_ns"]), 10)
    one = (np.array([1]), np.array([10]), np.array([10]))
    sources = [
        (S.API_BEGIN, S.API_END, *one, None),
        (S.BACKEND_BEGIN, S.BACKEND_END, *one, np.array([4], np.int32)),
    ]
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources)
    _same(got, want)
    kinds = got[0]["kind"].tolist()
    assert kinds[-4:] == [S.API_BEGIN, S.API_END, S.BACKEND_BEGIN, S.BACKEND_END]


@pytest.mark.parametrize("case", ["overlap", "wide ids", "wide threads", "int64 names", "one row"])
def test_merge_edge_cases(monkeypatch, case):
    rng = np.random.default_rng(1)
    threads = [2, 4]
    col = _columns(_events(rng, threads, 50))
    span = int(col["ts_ns"].max()) + 5
    src = _intervals(rng, threads, 30, span, True, overlap=case == "overlap")
    if case == "wide ids":
        col["id"] = col["id"] + 2**40
    if case == "wide threads":
        col["thread"] = col["thread"] + 2**40
        src = (src[0] + 2**40, *src[1:])
    if case == "int64 names":
        src = (*src[:3], src[3].astype(np.int64))
    if case == "one row":
        col = {k: v[:1].copy() for k, v in col.items()}
        src = tuple(c[:1] for c in src)
    sources = [(S.BACKEND_BEGIN, S.BACKEND_END, *src)]
    ev = np.lexsort((col["ts_ns"], col["thread"]))
    taken = T._merged_native(col, ev, sources, np.iinfo(np.int64).min) is not None
    assert taken == (case == "one row")  # the others run numpy's merge
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources)
    _same(got, want)
    got, want = _both(monkeypatch, T._with_interval_rows, col, sources, int(col["ts_ns"][0]))
    _same(got, want)


@pytest.mark.parametrize("at", [0, 1, 2])
@pytest.mark.parametrize("native_loops", [True, False])
def test_merge_with_a_source_of_no_intervals(monkeypatch, at, native_loops):
    """A source of no intervals adds no rows, wherever it is among the sources, on both paths."""
    if not native_loops:
        monkeypatch.setenv(native.ENV, "0")
    rng = np.random.default_rng(3)
    col = _columns(_events(rng, [2, 4], 50))
    span = int(col["ts_ns"].max()) + 5
    sources = [(S.BACKEND_BEGIN, S.BACKEND_END, *_intervals(rng, [2, 4], 30, span, True))]
    if at == 2:
        sources.append((S.COMPILE_BEGIN, S.COMPILE_END, *_intervals(rng, [4], 3, span, False), None))
    none = np.zeros(0, np.int64)
    with_empty = [*sources[:at], (S.API_BEGIN, S.API_END, none, none, none, None), *sources[at:]]
    if at == 0:
        with_empty, sources = with_empty[:1], []
    got = T._with_interval_rows(col, with_empty, int(col["ts_ns"][0]))
    want = T._with_interval_rows(col, sources, int(col["ts_ns"][0]))
    _same(got, want)
    assert len(got[0]["ts_ns"]) == len(col["ts_ns"]) + 2 * sum(len(s[2]) for s in sources)


@pytest.mark.parametrize("seed", range(6))
def test_sorted_by_thread_is_numpy_s(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    n = [0, 1, 2, 100, 70_000, 200_000][seed]
    thread = np.sort(rng.integers(0, 3, n))
    start = rng.integers(0, 1000, n)
    for t in range(3):  # sorted within each thread but for one row of the last case
        k = thread == t
        start[k] = np.sort(start[k])
    if seed == 5:
        start[n // 2 + 1] = start[n // 2] - 1 if thread[n // 2 + 1] == thread[n // 2] else start[n // 2 + 1]
        thread[150_000], thread[150_001] = 2, 1
    got, want = _both(monkeypatch, T._sorted_by_thread, thread, start)
    assert got == want
    assert got == (seed < 5)


# -- the whole timeline -----------------------------------------------------------------------------


def _timeline(events, api, backend, compiles):
    return T.build_timeline(events, api=api, backend=backend, compiles=compiles)


@pytest.mark.parametrize("seed", range(10))
def test_timeline_is_numpy_s(monkeypatch, seed):
    rng = np.random.default_rng(100 + seed)
    threads = [11, 12, 13][: 1 + seed % 3]
    ev = _events(rng, threads, 400, spread=10**6 if seed % 4 == 1 else 1)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    api = _intervals(rng, threads, 30, span, False) if seed % 2 else None
    backend = _intervals(rng, threads, 300, span, True) if seed % 3 else None
    compiles = _intervals(rng, threads[:1], 4, span, False) if seed % 5 == 2 else None
    got, want = _both(monkeypatch, _timeline, ev, api, backend, compiles)
    _same(got, want)


@pytest.mark.parametrize("native_loops", ["1", "0"])
@pytest.mark.parametrize("seed", range(6))
def test_thread_table_read_at_each_row_is_its_thread(monkeypatch, seed, native_loops):
    """The timeline keeps one OS thread id per thread index, no column of every row's: read at each
    row's index (thread_of, on_threads, main_rows) it is the thread the merge wrote for the row, or
    without added intervals the events' threads grouped in the order they first come."""
    monkeypatch.setenv(native.ENV, native_loops)
    rng = np.random.default_rng(300 + seed)
    threads = [[21, 7, 15], [5], [9, 30]][seed % 3]
    ev = _events(rng, threads, 300)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    added = seed % 2 == 1
    merged_threads = []
    merge = T._with_interval_rows

    def spy(*args):  # the rows' threads as a column: the same rows merged without end_ns
        merged_threads.append(merge(*args[:3])[0]["thread"])
        return merge(*args)

    monkeypatch.setattr(T, "_with_interval_rows", spy)
    backend = _intervals(rng, threads, 200, span, True) if added else None
    tl = T.build_timeline(ev, backend=backend)
    if added:
        want = T.narrow_ids(merged_threads[-1])
    else:
        thread = ev.column("thread").to_numpy()
        first = {t: k for k, t in reversed(list(enumerate(thread.tolist())))}
        want = T.narrow_ids(thread[np.argsort([first[t] for t in thread.tolist()], kind="stable")])
    assert tl.threads.dtype == want.dtype and len(tl.threads) == len(np.unique(want))
    assert tl.thread_of(slice(None)).tobytes() == want.tobytes()
    rows = rng.integers(0, len(want), 50)
    assert tl.thread_of(rows).tolist() == want[rows].tolist()
    assert [int(tl.thread_of(int(r))) for r in rows[:5]] == want[rows[:5]].tolist()
    assert tl.on_threads(np.array(threads[:1])).tolist() == (want == threads[0]).tolist()
    main = tl.main_rows()
    assert (want[main] == tl.main_thread).all() and (want == tl.main_thread).sum() == main.stop - main.start


def _with_rows(events: pa.Table, rows: list[tuple]) -> pa.Table:
    """``events`` with ``rows`` (ts, thread, kind, id, parent, name, flags, cost) added, in time order."""
    cols = [
        np.concatenate([events.column(k).to_numpy(), [r[c] for r in rows]])
        for c, k in enumerate(events.column_names)
    ]
    order = np.argsort(cols[0], kind="stable")
    return pa.table(
        [pa.array(c[order], type=f.type) for c, f in zip(cols, events.schema, strict=True)],
        schema=events.schema,
    )


def _spy_states(monkeypatch) -> list:
    """The MergedStates each merge of the build is asked for, as it left them."""
    seen = []
    merged = T._merged_native

    def spy(*args):
        got = merged(*args)
        if len(args) > 6 and args[6] is not None:
            seen.append(args[6])
        return got

    monkeypatch.setattr(T, "_merged_native", spy)
    return seen


@pytest.mark.parametrize(
    "sources", ["api", "backend", "compile", "api backend", "api compile", "backend compile", "all"]
)
@pytest.mark.parametrize("case", ["random", "one thread", "no main thread", "profiler", "spread ids"])
@pytest.mark.parametrize("recorded", [False, True])
def test_states_written_in_the_merge_are_the_fills(monkeypatch, sources, case, recorded):
    """The operation, category and phase after each row that the C merge writes in its pass (with the
    categories marked inside the added intervals but where both compilations and torch ops are added)
    are those numpy's fills and marks make, on random traces: several threads or one, the session on
    a thread other than the one the intervals are on, rlscope's own category inside the intervals
    (it stays rlscope's), instance ids spread wide (renumbered before the merge). ``recorded``: the
    torch ops as the recorder writes them (BackendOps, some overlapping), clipped and cut in the
    merge's pass, whose runs of them on a thread are written by clip_run."""
    rng = np.random.default_rng(len(sources) + 7 * len(case) + 100 * recorded)
    threads = [1] if case == "one thread" else [3, 1, 2]
    ev = _events(rng, threads, 300, spread=10**6 if case == "spread ids" else 1)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    on = threads[1:] if case == "no main thread" else threads
    if case == "profiler":  # rlscope's own work across many intervals
        rows = [(t, th, S.CAT_BEGIN, categories.PROFILER, -1, -1, 0, 0) for th in on for t in (5, 50)]
        rows += [(t, th, S.CAT_END, categories.PROFILER, -1, -1, 0, 0) for th in on for t in (40, 90)]
        ev = _with_rows(ev, rows)
    args = {
        "api": _intervals(rng, on, 30, span, False) if "api" in sources or sources == "all" else None,
        "backend": _intervals(rng, on, 300, span, True, overlap=recorded)
        if "backend" in sources or sources == "all"
        else None,
        "compiles": _intervals(rng, on[:1], 4, span, False)
        if "compile" in sources or sources == "all"
        else None,
    }
    if recorded and args["backend"] is not None:
        ops = args["backend"]
        args["backend"] = T.backend_ops(_backend_table(*ops), 3, span - 7)
    seen = _spy_states(monkeypatch)
    got = T.build_timeline(ev, **args)
    assert len(seen) == 1 and seen[0].op is not None  # written in the merge
    monkeypatch.setenv(native.ENV, "0")
    want = T.build_timeline(ev, **args)
    _same(got, want)
    assert got.cat.dtype == np.int8 and got.op.dtype == got.phase.dtype == np.int32


@pytest.mark.parametrize("case", ["wide category", "parent never begun", "one event", "empty intervals"])
def test_states_in_the_merge_edge_cases(monkeypatch, case):
    """A category code beyond int8 (the merge leaves the states to numpy's fills, int32), a state that
    is an instance with no rows of its own (the instance tables sized to hold it), a single event, and
    added intervals all clipped away: the same timeline on both paths."""
    rng = np.random.default_rng(5)
    ev = _events(rng, [1, 2], 200)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    backend = _intervals(rng, [1, 2], 100, span, True)
    if case == "wide category":
        ev = _with_rows(ev, [(3, 1, S.CAT_BEGIN, 300, -1, -1, 0, 0), (9, 1, S.CAT_END, 300, -1, -1, 0, 0)])
    if case == "parent never begun":  # a phase's end leaves an instance no row begins or ends current
        ev = _with_rows(
            ev, [(4, 2, S.PHASE_BEGIN, 900, -1, 1, 0, 0), (6, 2, S.PHASE_END, 900, 1000, 1, 0, 0)]
        )
    if case == "one event":
        ev = ev.slice(0, 1)
    seen = _spy_states(monkeypatch)
    if case == "empty intervals":
        ops = T.backend_ops(_backend_table(backend[0], backend[1], backend[1], backend[3]), 0, span)
        got = T.build_timeline(ev, backend=ops)
    else:
        got = T.build_timeline(ev, backend=backend)
    assert len(seen) == 1 and (seen[0].op is None) == (case == "wide category")
    monkeypatch.setenv(native.ENV, "0")
    want = (
        T.build_timeline(ev, backend=ops)
        if case == "empty intervals"
        else T.build_timeline(ev, backend=backend)
    )
    _same(got, want)
    if case == "wide category":
        assert got.cat.dtype == np.int32 and 300 in got.cat
    if case == "parent never begun":
        assert len(got.inst_name) == 1001 and (got.phase == 1000).any()


@pytest.mark.parametrize("case", ["random", "empty", "one", "begins only", "ends only"])
def test_scope_rows_are_numpy_s(monkeypatch, case):
    """The scopes' begins and ends read off the events' rows, on both paths: their merged rows, ids,
    names and times (clamped), each in order."""
    rng = np.random.default_rng(3)
    n_ev = 500
    events = {
        "kind": rng.choice(np.array([S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END], np.int8), n_ev),
        "name": rng.integers(-1, 40, n_ev).astype(np.int32),
        "ts_ns": rng.integers(0, 1000, n_ev),
    }
    if case == "begins only":
        events["kind"][:] = S.OP_BEGIN
    if case == "ends only":
        events["kind"][:] = S.PHASE_END
    ident = rng.integers(-1, 10**6, n_ev)
    n = {"empty": 0, "one": 1}.get(case, 300)
    at = np.sort(rng.choice(n_ev, n, replace=False))
    scoped = np.sort(rng.choice(10 * n_ev, n, replace=False))
    got, want = _both(monkeypatch, T._scope_rows, scoped, at, events, ident, 500)
    _same(got, want)
    opens = np.isin(events["kind"][at], [S.OP_BEGIN, S.PHASE_BEGIN])
    assert got[0].tolist() == scoped[opens].tolist() and got[3].tolist() == scoped[~opens].tolist()
    assert got[6].tolist() == np.maximum(events["ts_ns"][at[~opens]], 500).tolist()


@pytest.mark.parametrize(
    "case", ["interleaved", "ties", "one thread", "empty", "one row", "times fall", "many threads", "at most"]
)
def test_events_order_is_lexsort_s(monkeypatch, case):
    """The events' (thread, time) order by a counting sort where each thread's times never fall: the
    order np.lexsort makes (ties kept in the rows' order), threads in ascending order whatever order
    they come in; a thread whose times fall, or more threads than the C sort keeps, sorted by numpy."""
    rng = np.random.default_rng(8)
    n = {"empty": 0, "one row": 1}.get(case, 2000)
    n_threads = {"one thread": 1, "many threads": 65, "at most": 64}.get(case, 5)
    thread = rng.choice(rng.permutation(10**6)[:n_threads].astype(np.int64) - 5, n)
    if case == "many threads":
        thread[:65] = np.arange(65) * 7  # every one of them present
    ts = np.sort(rng.integers(0, 300 if case == "ties" else 10**6, n))
    if case == "times fall":
        ts[n // 2] = ts[n // 2 - 1] - 1 if thread[n // 2] == thread[n // 2 - 1] else -1
        ts[thread == thread[n // 2]] = ts[thread == thread[n // 2]][::-1].copy()
    col = {"thread": thread, "ts_ns": ts}
    got, want = _both(monkeypatch, T._events_order, col)
    _same(got, want)
    assert got[0].tolist() == np.lexsort((ts, thread)).tolist()
    fn = native.function(
        "timeline_events_order", native.N, native.I64, native.I64, native.I64, restype=native.N
    )
    sorted_by_c = fn(n, thread, ts, np.empty(n, np.int64)) == 0
    assert sorted_by_c == (case not in ("times fall", "many threads"))


@pytest.mark.parametrize("case", ["compact", "spread", "spread parents", "none scoped", "empty", "negative"])
def test_compact_instances_is_dense_instances_s(case):
    """The C pass says the ids are compact exactly where :func:`_dense_instances` keeps them as they are."""
    rng = np.random.default_rng(2)
    n = 0 if case == "empty" else 3000
    kinds = [S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END, S.CAT_BEGIN, S.WINDOW]
    kind = rng.choice(np.array(kinds[4:] if case == "none scoped" else kinds, np.int8), n)
    ident = rng.integers(-1, 2000, n)
    parent = rng.integers(-1, 2000, n)
    if case == "spread":
        ident[kind == S.OP_BEGIN] *= 10**6
    if case == "spread parents":
        parent[np.flatnonzero(kind == S.PHASE_END)[:1]] = 10**9
    if case == "negative":
        ident[:], parent[:] = -7, -9
    ident[kind == S.CAT_BEGIN] = 10**9  # rows that are no instance's: not read
    rows = np.flatnonzero(np.isin(kind, kinds[:4]))
    compact = T._dense_instances(ident, rows, parent[rows])[1] is None
    assert T._compact_instances(kind, ident, parent) == compact
    assert compact == (case not in ("spread", "spread parents"))


# -- the states, the thread index, the marks inside intervals, the values kept at rows ------------


def _first(rng, n: int, threads: int) -> np.ndarray:
    first = np.zeros(n, bool)
    if n:
        first[0] = True
        first[rng.choice(n, min(threads - 1, n), replace=False)] = True
    return first


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize(
    "case", ["random", "empty", "one row", "one thread", "no changes", "every row", "row 0 no first"]
)
def test_state_after_is_numpy_s(monkeypatch, dtype, case):
    rng = np.random.default_rng(7)
    n = {"empty": 0, "one row": 1}.get(case, 5000)
    first = _first(rng, n, 1 if case == "one thread" else 40)
    if case == "row 0 no first":  # rows before any mark hold the default
        first[0] = False
    k = {"no changes": 0, "every row": n}.get(case, n // 7)
    rows = np.sort(rng.choice(n, k, replace=False)) if n else np.zeros(0, np.int64)
    info = np.iinfo(dtype)
    values = rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), len(rows)).astype(dtype)
    starts = np.flatnonzero(first)
    got, want = _both(monkeypatch, T._state_after, rows, values, n, starts, -1)
    _same(got, want)


@pytest.mark.parametrize("threads", [1, 2, 300, 40_000])
def test_thread_index_is_numpy_s(monkeypatch, threads):
    first = _first(np.random.default_rng(threads), 100_000, threads)
    got, want = _both(monkeypatch, T._thread_index, len(first), np.flatnonzero(first))
    _same(got, want)
    assert got.dtype == (np.int16 if threads < 2**15 else np.int32)


@pytest.mark.parametrize("threads", [0, 1, 2, 300, 1024, 1025, 5000])
@pytest.mark.parametrize("n", [0, 1, 7, 100_000])
def test_thread_starts_are_every_change_of_thread(threads, n):
    """The searched blocks' starts: those of a comparison of every row with the next, on blocks of
    any length (one row up), thread ids in no order, past the count where the comparison takes over."""
    rng = np.random.default_rng(threads + n)
    first = _first(rng, n, threads) if threads else np.zeros(n, bool)
    if n:
        first[0] = True
    ids = rng.permutation(max(int(first.sum()), 1)).astype(np.int32) * 7 - 100
    thread = ids[np.cumsum(first) - 1] if n else np.zeros(0, np.int32)
    want = np.flatnonzero(np.append(True, thread[1:] != thread[:-1])) if n else np.zeros(0, np.int64)
    got = T._thread_starts(thread)
    _same(got, want.astype(np.int64))


def _marked_numpy(kind, cat, begin, end, code):
    np.putmask(cat, (T._inside(kind, begin, end) == 1) & (cat != categories.PROFILER), code)


@pytest.mark.parametrize("case", ["alternating", "random", "empty", "one row", "wrapping"])
def test_mark_inside_is_numpy_s(case):
    rng = np.random.default_rng(3)
    n = {"empty": 0, "one row": 1}.get(case, 10_000)
    kinds = np.array([S.BACKEND_BEGIN, S.BACKEND_END, S.OP_BEGIN, S.CAT_END], np.int8)
    kind = kinds[rng.integers(0, 4, n)]
    if case == "alternating":  # begin, end along the rows, as the merge lays them out
        ends = np.flatnonzero(np.isin(kind, kinds[:2]))
        kind[ends] = np.where(np.arange(len(ends)) % 2, S.BACKEND_END, S.BACKEND_BEGIN)
    if case == "wrapping":  # the int8 count passes 127 and comes round to 1
        kind[:] = S.BACKEND_BEGIN
    cat = rng.choice(np.array([categories.PYTHON, categories.PROFILER, categories.SIMULATOR], np.int8), n)
    if case == "wrapping":
        cat[:] = categories.PYTHON
    got, want = cat.copy(), cat.copy()
    assert T._mark_inside(kind, got, S.BACKEND_BEGIN, S.BACKEND_END, categories.BACKEND)
    _marked_numpy(kind, want, S.BACKEND_BEGIN, S.BACKEND_END, categories.BACKEND)
    _same(got, want)
    if case == "wrapping":
        assert np.flatnonzero(got == categories.BACKEND).tolist() == list(range(0, n, 256))


@pytest.mark.parametrize(
    "case",
    [
        "ordered",
        "repeated",
        "unordered",
        "every row",
        "none kept",
        "no rows",
        "few, far apart",
        "past the last kept",
    ],
)
def test_values_at_is_numpy_s(monkeypatch, case):
    rng = np.random.default_rng(5)
    at_rows = np.sort(rng.choice(10_000, 0 if case == "none kept" else 3000, replace=False))
    kept = T.RowValues(rng.integers(-(2**40), 2**40, len(at_rows)), at_rows)
    rows = np.sort(rng.integers(0, 10_001, 0 if case == "no rows" else 2000))
    if case == "repeated":
        rows = np.repeat(rows, 3)
    if case == "unordered":
        rows = rng.permutation(rows)
    if case == "every row":
        rows = at_rows.copy()
    if case == "few, far apart":  # the search moves in long steps
        rows = np.sort(rng.choice(10_001, 7, replace=False))
    if case == "past the last kept":
        rows = np.arange(9_990, 10_020)
    got, want = _both(monkeypatch, kept.at, rows)
    _same(got, want)


@pytest.mark.parametrize("n", [0, 1, 2, 1000, 100_000])
@pytest.mark.parametrize("which", ["changes", "any", "none"])
def test_rows_of_kinds_is_numpy_s(monkeypatch, n, which):
    rng = np.random.default_rng(n)
    kind = rng.integers(-128, 128, n).astype(np.int8)  # every byte, the negative ones read from the end
    table = {"changes": T._CHANGES, "any": T._CHANGES_ANY, "none": np.zeros(256, bool)}[which]
    got, want = _both(monkeypatch, T._rows_of_kinds, kind, table)
    _same(got, want)


@pytest.mark.parametrize("n", [1, 2, 3, 1000])
@pytest.mark.parametrize("threads", [1, 2, 50])
def test_thread_end_is_the_last_rows_end(n, threads):
    """Each thread's end: at its last row, the later of the data's end and the row's time."""
    rng = np.random.default_rng(n * threads)
    first = _first(rng, n, threads)
    ts = np.sort(rng.integers(0, 1000, n))
    last = np.append(np.flatnonzero(first)[1:], n) - 1
    for end_ns in (-1, 500, 2000):  # the end before, among and after the rows' times
        got = T._thread_end(ts, np.flatnonzero(first), end_ns)
        assert got.dtype == np.int64
        assert got.tolist() == [max(int(ts[i]), end_ns) for i in last]


@pytest.mark.parametrize("seed", range(4))
def test_instance_time_is_numpy_s(monkeypatch, seed):
    rng = np.random.default_rng(200 + seed)
    ev = _events(rng, [21, 22], 600)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    tl = T.build_timeline(ev, backend=_intervals(rng, [21, 22], 200, span, True))
    n_inst = len(tl.inst_name)
    starts = tl.thread_starts()
    cases = [(tl.main_rows(), n_inst), (slice(0, 0), n_inst), (slice(3, 4), n_inst)]
    cases += [(slice(int(starts[k]), int(starts[k + 1])), n_inst) for k in range(len(starts) - 1)]
    main = tl.main_rows()
    cases += [(slice(5, 300), n_inst), (main, int(tl.op[main].max()))]  # the last: an instance beyond
    # segments shortened, as a timeline rebuilt on corrected times has them
    cut = stretched(tl, -rng.integers(0, 2, len(tl.ts)))
    for timeline in (tl, cut):
        for rows, n in cases:
            got, want = _both(monkeypatch, timeline.instance_time, rows, n)
            _same(got, want)


def _backend_table(thread, start, end, name) -> pa.Table:
    return pa.table(
        {
            "start_ns": pa.array(start, pa.int64()),
            "end_ns": pa.array(end, pa.int64()),
            "thread": pa.array(thread, pa.int64()),
            "name": pa.array(name, pa.int32()),
        }
    )


@pytest.mark.parametrize(
    "case",
    [
        "ordered",
        "overlapping",
        "unordered",
        "unordered in a thread",
        "clipped into order",
        "empty",
        "one",
        "all empty",
    ],
)
def test_merge_clips_backend_ops_as_backend_intervals(monkeypatch, case):
    """The torch ops as recorded, clipped to the session and cut in the C merge's pass: the rows and the
    timeline that backend_intervals' own pass then the merge make, on both paths; ops out of order go
    to numpy's clip (which sorts them), then to the merge."""
    rng = np.random.default_rng(9)
    n = {"empty": 0, "one": 1}.get(case, 3000)
    thread = np.sort(rng.integers(1, 4, n))
    start = np.empty(n, np.int64)
    for t in (1, 2, 3):  # each thread's ops in time order, some before or after the session
        k = thread == t
        start[k] = np.sort(rng.integers(-100, 9_000, int(k.sum())))
    end = start + rng.integers(0, 40 if case == "overlapping" else 3, n)
    end[rng.random(n) < 0.01] += 2000  # ending late: past the next ones
    end[-1:] += 5000  # past the session
    if case == "unordered":
        p = rng.permutation(n)
        thread, start, end = thread[p], start[p], end[p]
    if case == "unordered in a thread":
        k = np.flatnonzero((thread == 2) & (start > 0))[:2]
        start[k] = start[k[::-1]]
    if case == "clipped into order":  # out of order before the session's start only
        k = np.flatnonzero(start < 0)
        start[k] = start[k][::-1]
    if case == "all empty":
        end = start.copy()
    ops = T.backend_ops(_backend_table(thread, start, end, rng.integers(0, 9, n)), 0, 9_500)
    events = _events(rng, [1, 2, 3], 1000)
    col = _columns(events)
    api = (S.API_BEGIN, S.API_END, *_intervals(rng, [1, 3], 30, 9_000, False), None)
    as_recorded = (S.BACKEND_BEGIN, S.BACKEND_END, ops.thread, ops.start, ops.end, ops.name, (0, 9_500))
    clipped = (S.BACKEND_BEGIN, S.BACKEND_END, *ops.intervals())
    ev = np.lexsort((col["ts_ns"], col["thread"]))
    taken = T._merged_native(col, ev, [as_recorded], np.iinfo(np.int64).min) is not None
    assert taken == (case not in ("unordered", "unordered in a thread"))
    for sources, want_sources in (([as_recorded], [clipped]), ([api, as_recorded], [api, clipped])):
        for args in ((), (10, 9_600, T._CHANGES)):  # as they are; clamped, with what the timeline reads
            got, want = _both(monkeypatch, T._with_interval_rows, col, sources, *args)
            _same(got, want)
            _same(got, T._with_interval_rows(col, want_sources, *args))
    got, want = _both(monkeypatch, _timeline, events, api[2:5], ops, None)
    _same(got, want)
    _same(got, _timeline(events, api[2:5], ops.intervals(), None))
    assert T.backend_intervals(_backend_table(thread, start, end, ops.name), 0, 9_500)[2].tobytes() == (
        clipped[4].tobytes()
    )


def test_scope_rows_found_in_the_build_are_those_of_the_kinds():
    rng = np.random.default_rng(11)
    ev = _events(rng, [1, 2], 500)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    tl = T.build_timeline(ev, backend=_intervals(rng, [1, 2], 100, span, True))
    begins = np.flatnonzero(np.isin(tl.kind, [S.OP_BEGIN, S.PHASE_BEGIN]))
    ends = np.flatnonzero(np.isin(tl.kind, [S.OP_END, S.PHASE_END]))
    _same((tl.scope_begins(), tl.scope_ends()), (begins, ends))
    again = dataclasses.replace(tl)  # a new memo: found from the rows
    assert not again.memo
    _same((again.scope_begins(), again.scope_ends()), (begins, ends))


@pytest.mark.parametrize("seed", range(6))
def test_state_at_is_numpy_s(monkeypatch, seed):
    from rlscope.analysis import gpu

    rng = np.random.default_rng(300 + seed)
    threads = [40, 30, 50][: 1 + seed % 3]
    ev = _events(rng, threads, 500)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    api = _intervals(rng, threads, 50, span, False) if seed % 2 else None  # else threads as they come
    tl = T.build_timeline(ev, api=api)
    n = 2000
    q_thread = rng.choice(np.array([*threads, 35, 99], np.int64), n)  # some on no thread of the timeline
    q_ts = rng.integers(-5, span + 10, n)
    q_ts[:50] = tl.ts[rng.integers(0, len(tl.ts), 50)]  # at rows' times: the last row at it counts
    got, want = _both(monkeypatch, gpu.state_at, tl, q_thread, q_ts)
    _same(got, want)
    assert (got[0] >= 0).any()
    one = (q_thread[:1], q_ts[:1])
    _same(*_both(monkeypatch, gpu.state_at, tl, *one))
    _same(*_both(monkeypatch, gpu.state_at, tl, q_thread[:0], q_ts[:0]))


@pytest.mark.parametrize("native_loops", ["1", "0"])
@pytest.mark.parametrize("seed", range(4))
def test_state_at_is_the_last_row_at_or_before_on_the_thread(monkeypatch, seed, native_loops):
    """Against a walk over the rows, whichever order the timeline's thread blocks are in (as the
    events came, where no recorded intervals were merged in, or ascending)."""
    from rlscope.analysis import gpu

    monkeypatch.setenv(native.ENV, native_loops)
    rng = np.random.default_rng(700 + seed)
    threads = [40, 30, 50]
    ev = _events(rng, threads, 400)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    api = _intervals(rng, threads, 40, span, False) if seed % 2 else None
    tl = T.build_timeline(ev, api=api)
    q_thread = rng.choice(np.array([*threads, 35], np.int64), 300)
    q_ts = rng.integers(-5, span + 10, 300)
    op, phase = gpu.state_at(tl, q_thread, q_ts)
    for k in range(len(q_ts)):
        rows = np.flatnonzero((tl.thread == q_thread[k]) & (tl.ts <= q_ts[k]))
        want = (int(tl.op[rows[-1]]), int(tl.phase[rows[-1]])) if len(rows) else (-1, -1)
        assert (int(op[k]), int(phase[k])) == want, k
    assert (op >= 0).sum() > 50


def test_state_at_out_of_order_runs_numpy_s(monkeypatch):
    from rlscope.analysis import gpu

    rng = np.random.default_rng(4)
    ev = _events(rng, [40, 30], 300)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    tl = T.build_timeline(ev, api=_intervals(rng, [40, 30], 20, span, False))
    late = dataclasses.replace(tl, ts=tl.ts[::-1].copy())  # rows out of time order: the C search is not taken
    q = (np.full(100, 40, np.int64), rng.integers(0, span, 100))
    assert gpu._state_at_native(late, *q) is None and gpu._state_at_native(tl, *q) is not None
    _same(*_both(monkeypatch, gpu.state_at, late, *q))


def test_columns_not_in_one_block_run_numpy_s(monkeypatch):
    from rlscope.analysis import gpu

    rng = np.random.default_rng(12)
    ev = _events(rng, [1, 2], 300)
    span = int(ev.column("ts_ns").to_numpy().max()) + 5
    tl = T.build_timeline(ev, api=_intervals(rng, [1, 2], 30, span, False))
    strided = dataclasses.replace(tl, ts=np.repeat(tl.ts, 2)[::2])  # the same times, every other value
    assert not strided.ts.flags.c_contiguous
    q = (np.full(50, 1, np.int64), rng.integers(0, span, 50))
    assert gpu._state_at_native(strided, *q) is None
    _same(*_both(monkeypatch, gpu.state_at, strided, *q))
    _same(gpu.state_at(strided, *q), gpu.state_at(tl, *q))
    rows = strided.main_rows()
    _same(*_both(monkeypatch, strided.instance_time, rows, len(tl.inst_name)))


def test_a_timelines_segment_ends_come_from_its_threads_ends():
    """A segment ends where the next row on its thread starts, a thread's last at the thread's end:
    the column made from ``thread_end``, and the ends at rows (a slice, indices, a mask), are those of
    the column a timeline was made with, with threads of no rows among them (the first, the last,
    several); a column of other ends is refused."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        n_threads = int(rng.integers(1, 5))
        sizes = rng.integers(0, 6, n_threads)
        sizes[0] += sizes.sum() == 0
        n = int(sizes.sum())
        thread_idx = np.repeat(np.arange(n_threads), sizes).astype(np.int16)
        ts = np.concatenate([np.sort(rng.integers(0, 100, k)) for k in sizes]).astype(np.int64)
        seg_end = np.append(ts[1:], 0)
        last = np.cumsum(sizes)[sizes > 0] - 1
        seg_end[last] = ts[last] + rng.integers(0, 9, len(last))
        z = np.zeros(n, np.int32)
        made = T.Timeline.with_seg_end(
            seg_end, ts=ts, threads=np.arange(n_threads).astype(np.int32), kind=np.zeros(n, np.int8),
            id=z, name=z, flags=np.zeros(n, np.int8), op=z, cat=np.zeros(n, np.int8), phase=z,
            main_thread=0, start_ns=0, end_ns=200, inst_name=np.zeros(0, np.int64),
            inst_end=np.zeros(0, np.int64), thread_idx=thread_idx,
        )  # fmt: skip
        tl = made.retimed(ts.copy(), thread_end=made.thread_end)  # no column: made from the ends
        assert "seg_end" not in tl.memo
        for _ in range(5):
            a = int(rng.integers(0, n + 1))
            b = int(rng.integers(a, n + 1))
            assert np.array_equal(tl.seg_end_of(slice(a, b)), seg_end[a:b])
            rows = rng.integers(0, n, int(rng.integers(0, 6)))
            assert np.array_equal(tl.seg_end_of(rows), seg_end[rows])
            mask = rng.random(n) < 0.5
            assert np.array_equal(tl.seg_end_of(mask), seg_end[mask])
        assert np.array_equal(tl.seg_end, seg_end)
        if n > 1 and sizes.max() > 1:
            gap = seg_end.copy()
            k = int(np.flatnonzero(np.isin(np.arange(n), last, invert=True))[0])
            gap[k] += 1
            with pytest.raises(ValueError, match="next row on its thread"):
                made.retimed(ts, gap)
