"""The window estimate's C loops (rlscope/analysis/native/windows.c) give the bits of their numpy loops.

Each function of rlscope/overhead/correct/windows.py and pieces.py that calls C is run on the same
inputs with the C loops and with ``RLSCOPE_NATIVE_ANALYSIS=0``: random timelines of fractional
durations (where the order of the additions shows in the bits), several blocks of rows long, and
the edge cases (no rows, one row, every row outside the instances, no main thread, the main thread
in two blocks); then the whole estimate of fake-clock runs whose switches leave work behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rlscope
from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline, build_timeline
from rlscope.blocks import BLOCK_ROWS
from rlscope.overhead.correct import pieces as P
from rlscope.overhead.correct import windows as W
from rlscope.trace import schema as S
from tests.timelines import stretched

# kinds of rows at random: anchors of pieces, collector rows, windows, and kinds of neither (a negative byte)
KINDS = np.array(
    [
        *(S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.CAT_END, S.BACKEND_BEGIN, S.BACKEND_END, S.API_BEGIN),
        *(S.API_END, S.ENGINE_BEGIN, S.PHASE_BEGIN, S.WINDOW, -3, 100),
    ],
    np.int8,
)


@pytest.fixture(autouse=True)
def c_loops(monkeypatch):
    """The C loops on (skipped where they cannot be had)."""
    monkeypatch.setenv(native.ENV, "1")
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")


def both(monkeypatch, run: Callable[[], Any]) -> tuple[Any, Any]:
    """``run()`` with the C loops, then with the numpy ones."""
    monkeypatch.setenv(native.ENV, "1")
    c = run()
    monkeypatch.setenv(native.ENV, "0")
    try:
        return c, run()
    finally:
        monkeypatch.setenv(native.ENV, "1")


def same(a: Any, b: Any) -> bool:
    """Equal to the bit: arrays of one dtype and the same bytes, tuples of them, or equal values."""
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return bool(a == b) if not isinstance(a, float) else np.float64(a).tobytes() == np.float64(b).tobytes()


def timeline(
    rng: np.random.Generator,
    sizes: list[int],
    threads: list[int],
    main_thread: int,
    n_inst: int = 40,
    op_dtype: Any = np.int32,
    id_dtype: Any = np.int32,
) -> Timeline:
    """A timeline of random rows: ``sizes`` rows on each of ``threads`` (one block each, in time order
    within it), of random kinds, instances (-1 none: about one row in five) and window switches."""
    n = sum(sizes)
    ts = np.concatenate([1000 + np.cumsum(rng.integers(0, 40, k)) for k in sizes]).astype(np.int64)
    seg_end = np.concatenate(
        [np.append(t[1:], t[-1] + 7) if len(t) else t for t in np.split(ts, np.cumsum(sizes)[:-1])]
    ).astype(np.int64)
    kind = rng.choice(KINDS, n)
    ids = rng.integers(-1, n_inst, n)
    cat = np.isin(kind, [S.CAT_BEGIN, S.CAT_END])
    ids[cat] = rng.choice([categories.BACKEND, categories.CUDA_API, 0, 1, 5], cat.sum())
    win = kind == S.WINDOW
    ids[win] = rng.choice([S.WINDOW_FULL, S.WINDOW_LIGHT], win.sum())
    op = np.where(rng.random(n) < 0.2, -1, rng.integers(0, n_inst, n))
    # each thread's first and last rows outside the instances: whether they are the main thread's
    # decides whether they count (the passes walk the main thread's rows a block at a time)
    ends = np.cumsum(sizes)
    op[np.r_[ends - np.asarray(sizes), ends - 1][np.r_[sizes, sizes] > 0]] = -1
    return Timeline.with_seg_end(
        seg_end,
        ts=ts,
        threads=np.asarray(threads).astype(np.int32),
        kind=kind,
        id=ids.astype(id_dtype),
        name=np.zeros(n, np.int32),
        flags=np.zeros(n, np.int8),
        op=op.astype(op_dtype),
        cat=np.zeros(n, np.int8),
        phase=np.full(n, -1, np.int32),
        main_thread=main_thread,
        start_ns=int(ts.min(initial=0)),
        end_ns=int(seg_end.max(initial=0)),
        inst_name=rng.integers(-1, 6, n_inst).astype(np.int64),
        inst_end=np.full(n_inst, int(seg_end.max(initial=0)), np.int64),
        thread_idx=np.repeat(np.arange(len(sizes)), sizes).astype(np.int16),
    )


# (rows per thread, threads, main thread): several blocks of rows; the edge cases
CASES = [
    ([BLOCK_ROWS + 5000, 30_000, 7000], [7, 3, 9], 7),
    ([20_000, 6000, 20_000], [7, 3, 7], 7),  # the main thread in two blocks
    ([3000, 2000], [3, 9], 7),  # no main thread
    ([3000, 4000, 2000, 3000], [3, 7, 9, 7], 7),  # the main thread after another, in two blocks
    ([5000], [7], 7),  # one thread
    ([1], [7], 7),  # one row
    ([0], [7], 7),  # no rows
]


def rows_of(rng: np.random.Generator, tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fractional durations, collector rows, full-window rows) at random."""
    n = len(tl.ts)
    return rng.exponential(1000.0, n) / 3.0, rng.random(n) < 0.4, rng.random(n) < 0.6


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op_dtype", [np.int32, np.int64])
def test_instance_and_counted_sums(monkeypatch, case, op_dtype):
    rng = np.random.default_rng(case)
    tl = timeline(rng, *CASES[case], op_dtype=op_dtype)
    dur, coll, full_row = rows_of(rng, tl)
    if case == 4:
        tl.op[:] = -1  # every row outside the instances
    main = W._main_ranges(tl)
    c, n = both(monkeypatch, lambda: W._instance_sums(tl, dur, coll, full_row, main, None))
    assert same(c[:3], n[:3]) and n[3] is None and c[3] is not None
    excl, _, held, rows = c
    excl = excl[1:]
    # a cut on about half the instances, up to their time (and one with none left)
    cut = np.where(rng.random(len(excl)) < 0.5, excl * rng.random(len(excl)), 0.0)
    cut[: min(3, len(cut))] = excl[: min(3, len(cut))]
    kept_inst = np.append(False, (cut > 0) & (excl > 0))
    key_name = np.append(W.UNANNOTATED_ID, tl.inst_name)
    keys = np.unique(key_name[held])
    inst_key = np.searchsorted(keys, key_name)
    keep_inst = np.ones(len(kept_inst))
    keep_inst[kept_inst] = 1.0 - cut[kept_inst[1:]] / excl[kept_inst[1:]]

    def counted_sums() -> tuple:
        # no column of lengths: the C pass works them out from tl's segments, numpy's makes them
        args = (kept_inst, keep_inst, cut, excl, inst_key, len(keys), rows)
        return W._counted_sums(tl, None, coll, full_row, main, None, *args)

    c, n = both(monkeypatch, counted_sums)
    assert same(c[:2], n[:2]) and same(c[2], n[2]) and same(c[3], n[3])
    assert np.array_equal(c[2], n[2])
    if len(tl.ts) > 1000 and case != 4:
        assert len(c[2]) > 0 and c[0].sum() > 0  # rows were scaled and counted


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op_dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("int32_windows", [False, True])
def test_instance_pass(monkeypatch, case, op_dtype, int32_windows):
    """The estimate's first pass (durations, full rows and the instances' sums at once) against
    float_duration, _full_rows and _instance_sums of the numpy loops, on a raw clock of its own."""
    if int32_windows:
        monkeypatch.setattr(W, "_I16", 2)
    rng = np.random.default_rng(40 + case)
    tl = timeline(rng, *CASES[case], n_inst=300 if op_dtype == np.int16 else 40, op_dtype=op_dtype)
    if case == 4:
        tl.op[:] = -1  # every row outside the instances
    # durations of whole ns that are not the raw ones: a corrected clock, late by up to 3 ns a row
    fixed = stretched(tl, rng.integers(0, 4, len(tl.ts)))
    win_ts = W.window_rows(tl)[0]
    wi = W.row_window(tl)
    # per window a threshold: within it (collectors live late), before it, past every time, and at
    # and beside its own switch and the next one (the pass reads no raw times where a window's rows
    # are all full or none is)
    lo = np.r_[tl.ts.min(initial=0) - 1, win_ts]
    hi = np.r_[win_ts, lo[-1] + 1000]
    from_ts = lo + rng.integers(-5, 80, len(lo))
    edges = np.stack([lo - 1, lo, lo + 1, hi - 1, hi, hi + 1])
    pick = rng.random(len(lo)) < 0.4
    from_ts[pick] = edges[rng.integers(0, 6, len(lo)), np.arange(len(lo))][pick]
    from_ts[rng.random(len(lo)) < 0.2] = np.iinfo(np.int64).max
    coll = rng.random(len(tl.ts)) < 0.4
    main = W._main_ranges(tl)
    got = W._instance_pass(fixed, tl, from_ts, coll, main)
    assert got is not None
    monkeypatch.setenv(native.ENV, "0")
    dur = fixed.float_duration()
    full_row, row_mode = W._full_rows(tl.ts, wi, from_ts)
    excl, events, held, _ = W._instance_sums(fixed, dur, coll, full_row, main, None)
    monkeypatch.setenv(native.ENV, "1")
    # the rows per instance + 1, as _instance_sums' C loop counts them
    _, _, _, rows = W._instance_sums(fixed, dur, coll, full_row, main, None)
    assert same(got, (full_row, row_mode, excl, events, held, rows))
    if len(tl.ts) > 1000 and case != 4:
        assert full_row.any() and not full_row.all() and held[1:].any() and events[1:].any()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_counted_factor(monkeypatch, case):
    rng = np.random.default_rng(10 + case)
    tl = timeline(rng, *CASES[case])
    _, _, full_row = rows_of(rng, tl)
    main = W._main_ranges(tl)
    key_name = np.append(W.UNANNOTATED_ID, tl.inst_name)
    for keys in (np.unique(key_name), np.unique(key_name)[1::2], np.zeros(0, np.int64)):
        per_key = rng.random(len(keys)).tolist()

        def run(keys: np.ndarray = keys, per_key: list = per_key) -> np.ndarray:
            out = np.full(len(tl.ts), np.nan)
            return W._counted_factor(tl, None, full_row, main, keys, key_name, per_key, out)

        c, n = both(monkeypatch, run)
        assert same(c, n)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("int32_windows", [False, True])
def test_live_from_and_full_rows(monkeypatch, case, int32_windows):
    if int32_windows:  # row_window's int32 column, made here with a few switches
        monkeypatch.setattr(W, "_I16", 2)
    rng = np.random.default_rng(20 + case)
    tl = timeline(rng, *CASES[case])
    coll = rng.random(len(tl.ts)) < 0.3
    win_ts, win_mode = W.window_rows(tl)
    wi = W.row_window(tl)
    assert wi.dtype == (np.int32 if int32_windows and len(win_ts) >= 2 else np.int16)
    c, n = both(monkeypatch, lambda: W._live_from(tl, win_ts, coll))
    assert same(c, n)
    if len(win_ts) and case == 0:
        assert (c < np.iinfo(np.int64).max).sum() > 10  # windows with collectors seen
    from_ts = np.where(W.mode_table(win_mode) == S.WINDOW_FULL, c, np.iinfo(np.int64).max)
    c, n = both(monkeypatch, lambda: W._full_rows(tl.ts, wi, from_ts))
    assert same(c, n)


@pytest.mark.parametrize("case", range(len(CASES) - 1))  # pieces need a main thread's row
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("little_room", [False, True])
def test_pieces_their_sums_and_factors(monkeypatch, case, id_dtype, little_room):
    """The pieces (with room for them at first, or a second pass) and their sums and factors, as the
    numpy loops make them."""
    if little_room:
        monkeypatch.setattr(P, "_ROWS_PER_PIECE", 10**9)
    rng = np.random.default_rng(30 + case)
    tl = timeline(rng, *CASES[case], op_dtype=id_dtype, id_dtype=id_dtype)
    raw = stretched(tl, rng.integers(0, 3, len(tl.ts)), shift=-3)
    c, n = both(monkeypatch, lambda: P.pieces(tl, raw))
    assert all(same(getattr(c, f.name), getattr(n, f.name)) for f in dataclasses.fields(P.Pieces))
    if c.main.stop == c.main.start:
        return
    # the columns of some owners' pieces only: those of every piece at theirs, the classes numbered
    # among them in the same order
    for owners in ([-1], [int(c.owner[-1]), 2, 77], list(range(-1, 6)), []):
        some = both(monkeypatch, lambda owners=owners: P.pieces(tl, raw, owners))
        for got in some:
            assert all(
                same(getattr(got, f.name), getattr(some[1], f.name)) for f in dataclasses.fields(P.Pieces)
            )
            assert same(got.index, P.of_owners(c.owner, owners)) and same(got.bounds, c.bounds)
            for f in ("owner", "start_ns", "end_ns"):
                assert same(getattr(got, f), getattr(c, f)[got.index])
            assert same(
                got.klass, np.unique(c.klass[got.index], return_inverse=True)[1].astype(got.klass.dtype)
            )
        if len(tl.ts) > 1000 and owners == [-1]:
            assert 0 < len(some[0].index) < len(c.index)
    assert len(c.owner) > 1 or len(tl.ts) < 10
    _, coll, full_row = rows_of(rng, tl)
    npc = len(c.owner)
    for chosen in (np.arange(npc), np.flatnonzero(rng.random(npc) < 0.3), np.zeros(0, np.int64)):
        # the rows whose instance keeps a share of its time (ascending), among the pieces' and not
        kept_rows = np.flatnonzero(rng.random(len(tl.ts)) < 0.1).astype(np.int64)
        kept = (kept_rows, rng.random(len(kept_rows)))

        def piece_sums(chosen: np.ndarray = chosen, kept: tuple = kept) -> tuple:
            return W._piece_sums(c, chosen, tl, None, kept, coll, full_row)

        got = both(monkeypatch, piece_sums)
        assert same(*got)
        if len(chosen) > 10:
            assert got[0][0].sum() > 0
        compared = np.flatnonzero(rng.random(npc) < 0.5)
        est = W.PieceEstimate(0.0, 0.0, 0.0, 0, c, compared, rng.random(len(compared)), {})
        row_mode = np.where(full_row, np.int8(S.WINDOW_FULL), np.int8(S.WINDOW_LIGHT))
        before = rng.random(len(tl.ts))
        # the pieces' rows alone (what piece_estimates hands its estimates) set the same factors
        slim = dataclasses.replace(est, pieces=c.rows_only())
        assert len(slim.pieces) == npc and len(slim.pieces.owner) == 0
        for e in (est, slim):
            want = before.copy()
            e.set_factors(want, row_mode)
            assert same(want, set_factors_reference(c, est, before, row_mode))

        def set_factors(
            est: W.PieceEstimate = est, before: np.ndarray = before, row_mode: np.ndarray = row_mode
        ) -> np.ndarray:
            factor = before.copy()
            est.set_factors(factor, row_mode)
            return factor

        assert same(*both(monkeypatch, set_factors))


def set_factors_reference(
    pc: P.Pieces, est: W.PieceEstimate, before: np.ndarray, row_mode: np.ndarray
) -> np.ndarray:
    """PieceEstimate.set_factors by a column of every row's piece (Pieces.row)."""
    out = before.copy()
    piece = pc.row
    on = (piece >= 0) & (row_mode == S.WINDOW_FULL)
    compared, factor = np.zeros(len(pc), bool), np.zeros(len(pc))
    compared[est.compared], factor[est.compared] = True, est.factor
    on[on] = compared[piece[on]]
    out[on] = factor[piece[on]]
    return out


def chained(rng: np.random.Generator, tl: Timeline) -> Timeline:
    """``tl`` with every other thread moved to start a few ns after the last row of the one before
    starts (in its window, as a rule): that row's segment, the thread's last, ends at random where
    the next thread starts (no crossing there) or a ns before or after it (a crossing). The threads
    left in place overlap others: their segments span the others' switches."""
    ts, end = tl.ts.copy(), tl.thread_end.copy()
    starts, last = tl.thread_starts(), tl.thread_last()
    for k in range(1, len(last), 2):
        a, b = starts[k], starts[k + 1]
        if a < b and starts[k - 1] < a:
            ts[a:b] += ts[last[k - 1]] + 3 - ts[a]
            end[k - 1] = ts[a] + rng.integers(-1, 2)
    return tl.retimed(ts, thread_end=end)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("cap", [2, 1 << 16])
@pytest.mark.parametrize("int32_windows", [False, True])
def test_full_fraction_rows(monkeypatch, case, cap, int32_windows):
    """full_fraction's crossing rows and their windows, each row's window found in C on the way,
    against numpy's over row_window's column: threads ending where the next one starts or not, window
    changes along each thread, more crossings than the first pass lists; then full_fraction, whose
    column is at_mode of row_window, the crossing rows' shares over it."""
    from rlscope.overhead.correct import full_windows

    if int32_windows:  # row_window's int32 column on the numpy path
        monkeypatch.setattr(W, "_I16", 2)
    monkeypatch.setattr(full_windows, "_CROSSINGS", cap)
    rng = np.random.default_rng(130 + case)
    tl = chained(rng, timeline(rng, *CASES[case]))
    win_ts = W.window_rows(tl)[0]

    def run() -> tuple:
        tl.memo.pop("row_window", None)
        return full_windows._crossings_and_windows(tl, win_ts)

    c, n = both(monkeypatch, run)
    assert np.array_equal(c[0], n[0]) and np.array_equal(c[1], n[1])
    assert c[0].dtype == np.int64 and c[1].dtype == np.int64
    if len(tl.ts):
        assert c[0][-1] == len(tl.ts) - 1
        wi = W.row_window(tl)
        assert np.array_equal(c[1], wi[c[0]])
    if case == 0:
        assert len(c[0]) > min(cap, 5000) and len(np.unique(c[1])) > 10  # many crossings and windows

    def fraction() -> tuple:
        tl.memo.pop("row_window", None)
        f = full_windows.full_fraction(tl)
        return f.column(tl.ts), f.rows, f.values, f.at_mode, f.win_ts

    c, n = both(monkeypatch, fraction)
    assert all(same(a, b) for a, b in zip(c, n, strict=True))
    col, rows, values, at_mode = c[:4]
    assert np.all(np.diff(rows) > 0) and len(at_mode) == len(c[4]) + 1
    if len(tl.ts):
        wi = W.row_window(tl)
        others = np.ones(len(tl.ts), bool)
        others[rows] = False
        assert same(col[others], at_mode[wi][others]) and same(col[rows], values)
    if case == 0:
        assert ((values > 0) & (values < 1)).any()  # segments across a switch


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("id_dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("thread_dtype", [np.int16, np.int32, np.int64])
def test_nested_names(monkeypatch, case, id_dtype, thread_dtype):
    """The (outer, inner) name pairs from the begins' rows and the rows before them, and those rows'
    columns against numpy's gathers: begins on a thread's first row, of instance id -1 (numpy reads
    the last entry), nested a few deep; every begin, a few, one; an id past the instances raises on
    both paths."""
    rng = np.random.default_rng(140 + case)
    tl = timeline(rng, *CASES[case], op_dtype=id_dtype, id_dtype=id_dtype)
    tl = dataclasses.replace(tl, thread_idx=tl.thread_idx.astype(thread_dtype))
    tl.kind[tl.thread_starts()[:-1]] = S.OP_BEGIN  # begins on each thread's first row
    tl.memo.clear()
    begins = W.op_begins(tl)
    names = np.append(tl.inst_name, -1)
    for b in (begins, begins[::5], begins[:1]):
        c, n = both(monkeypatch, lambda b=b: W.nested_names(tl, b))
        assert c == n
        got = W._nested_begins(tl, b, names)
        if len(b) == 0:
            continue
        assert got is not None  # the C loop ran
        prev = np.maximum(b - 1, 0)
        before = np.where((b > 0) & (tl.thread[b] == tl.thread[prev]), tl.op[prev], -1)
        parent_of = np.full(len(tl.inst_name) + 1, -1, np.int64)
        parent_of[tl.id[b]] = before
        assert np.array_equal(got[0], before) and same(got[1], parent_of) and same(got[2], names[tl.id[b]])
    if case == 0:
        assert len(W.nested_names(tl, begins)) > 20 and (tl.id[begins] == -1).any()
        tl.id[begins[3]] = len(tl.inst_name) + 2
        for native_on in ("1", "0"):
            monkeypatch.setenv(native.ENV, native_on)
            with pytest.raises(IndexError):
                W.nested_names(tl, begins)


def test_estimate_lets_row_window_go(tmp_path):
    """toggled finds each raw row's window on the way and keeps no column of them (the rows where it
    changes); the estimate makes the column from those, reads it in its first pass and keeps none."""
    from tests.test_windows import AfterSwitchCost

    tl = _run(tmp_path, 1000, AfterSwitchCost(0))
    raw = dataclasses.replace(tl)
    W.toggled(raw)
    assert "row_window" not in raw.memo and "window_changes" in raw.memo
    assert W.estimate(dataclasses.replace(tl), raw=raw) is not None
    assert "row_window" not in raw.memo


@pytest.mark.parametrize("little_room", [False, True])
def test_piece_bounds_edge_cases(monkeypatch, little_room):
    """The first row always begins a piece, a full-only category's row never; with room for the
    pieces, and for fewer (a second pass)."""
    if little_room:
        monkeypatch.setattr(P, "_ROWS_PER_PIECE", 10**9)
    kind = np.array([S.CAT_BEGIN, S.CAT_BEGIN, S.CAT_END, -1, S.WINDOW, 50] * 5, np.int8)
    ids = np.array([categories.BACKEND, categories.CUDA_API, 0, 0, 1, 2] * 5, np.int32)
    c, n = both(monkeypatch, lambda: P._piece_bounds(kind, ids))
    # each repeat's CAT_END and WINDOW rows, then the row count
    assert same(c, n) and c.tolist() == [0, *sorted(6 * k + j for k in range(5) for j in (2, 4)), 30]
    for k in (kind[:1], kind[1:2]):
        c, n = both(monkeypatch, lambda k=k: P._piece_bounds(k, ids[: len(k)]))
        assert same(c, n) and c.tolist() == [0, 1]


def _run(tmp_path, iters: int, col: Any) -> Timeline:
    """A fake-clock run of infer, sim and an update every 16 iterations, under ``col``."""
    from tests.test_windows import OPS_PER_INFER, SIM, _fake_clock_session, _fake_op

    sess, clock = _fake_clock_session(tmp_path / "t", 200e-6)
    with sess:
        sess.add_toggler(col)
        for i in range(iters):
            with rlscope.scope("infer"):
                clock.advance(col.take())
                for _ in range(OPS_PER_INFER):
                    _fake_op(col, sess, clock.advance)
            with rlscope.scope("sim"):
                clock.advance(col.take())
                clock.advance(SIM + i % 7)
            if i % 16 == 15:
                with rlscope.scope("update"):
                    clock.advance(col.take())
                    clock.advance(30_000 + 13 * (i % 5))
            clock.advance(100)
    return build_timeline(rlscope.load_trace(str(tmp_path / "t")).processes[0].events)


@pytest.mark.parametrize("penalty", [0, 20_000])
def test_the_whole_estimate_is_the_same(monkeypatch, tmp_path, penalty):
    """The estimate of a run (with work each switch leaves for the next operation: instances cut
    and their rows scaled) has the same bits either way."""
    from tests.test_windows import AfterSwitchCost

    tl = _run(tmp_path, 3000, AfterSwitchCost(penalty))
    # a corrected timeline whose durations are not whole ns: rows moved by fractions of the raw ones
    fixed = stretched(tl, (np.arange(len(tl.ts)) % 3 == 0).astype(np.int64))

    def run() -> W.WindowEstimate:
        return W.estimate(dataclasses.replace(fixed), raw=dataclasses.replace(tl))

    c, n = both(monkeypatch, run)
    # C's factors as their tables (RowFactors), numpy's as a column: the same column from them
    assert (
        isinstance(n.factor, np.ndarray)
        and same(c.factor.column(), n.factor)
        and same(c.row_mode, n.row_mode)
    )
    assert repr(c.per_op) == repr(n.per_op) and same(c.cost_per_event_ns, n.cost_per_event_ns)
    assert same(c.inst_full, n.inst_full) and c.notes == n.notes and c.light_only == n.light_only
    assert c.cost_per_event_ns is not None
    if penalty:
        assert any("after_switch_removed_ns" in e for e in c.per_op.values())


@pytest.mark.parametrize("sizes", [[1], [2, 1, 17, 16, 3], [500, 2000, 33, 1], [0], [40_000]])
def test_group_medians(monkeypatch, sizes):
    """Medians of windows of every size (a sort's small and large paths), with ties, -0.0 beside 0.0
    (the stable order decides which is the median), and infinities."""
    rng = np.random.default_rng(sum(sizes))
    n = sum(sizes)
    v = np.round(rng.exponential(50.0, n)) / 4.0  # many ties
    v[rng.random(n) < 0.05] = 0.0
    v[rng.random(n) < 0.05] = -0.0
    v[rng.random(n) < 0.01] = np.inf
    g = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if n else np.zeros(0, np.int64)
    count = np.diff(np.r_[starts, n]).astype(np.int64)
    c, n_ = both(monkeypatch, lambda: W._group_medians(g, v, starts, count))
    assert same(c, n_)
    mode = rng.choice([S.WINDOW_FULL, S.WINDOW_LIGHT], n)
    group = rng.integers(0, 40, n)  # in no order: window_medians sorts them
    assert same(*both(monkeypatch, lambda: W.window_medians(group, mode, v)))
    for grp in (group, np.sort(group)):  # and in order already (no sort): as the sort makes them

        def by_sort(grp: np.ndarray = grp) -> tuple:
            order = np.argsort(grp, kind="stable")
            g, m, x = grp[order], mode[order], v[order]
            at = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if n else np.zeros(0, np.int64)
            size = np.diff(np.r_[at, n]).astype(np.int64)
            return W._group_medians(g, x, at, size), m[at] == S.WINDOW_FULL, size, g[at]

        if n:
            assert same(W._windows(grp, mode, v), by_sort())


def test_group_medians_of_signed_zeros(monkeypatch):
    """Windows of mostly zeros of both signs: which one is the median is the sort's order of ties."""
    rng = np.random.default_rng(7)
    count = rng.integers(1, 60, 400)
    n = int(count.sum())
    v = rng.choice([0.0, -0.0, -0.0, 1.0], n)
    starts = (np.cumsum(count) - count).astype(np.int64)
    g = np.repeat(np.arange(len(count)), count)
    c, n_ = both(monkeypatch, lambda: W._group_medians(g, v, starts, count.astype(np.int64)))
    assert same(c, n_) and np.signbit(c).any() and not np.signbit(c).all()


@pytest.mark.parametrize("n_win", [0, 1, 2, 50])
@pytest.mark.parametrize("in_order", [False, True])
def test_placed(monkeypatch, n_win, in_order):
    """Instances and pieces placed among the switches: at them, between them, before and after all,
    in windows whose collectors went live late or never; in time order (as pieces come, the C
    loop's last answer reused) or not."""
    rng = np.random.default_rng(n_win)
    win_ts = np.sort(rng.integers(0, 1000, n_win)).astype(np.int64)
    win_ts[1::7] = win_ts[::7][: len(win_ts[1::7])]  # switches at one time
    win_mode = rng.choice([S.WINDOW_FULL, S.WINDOW_LIGHT], n_win).astype(np.int32)
    live = np.r_[0, win_ts] + rng.integers(0, 30, n_win + 1)
    live[rng.random(n_win + 1) < 0.2] = np.iinfo(np.int64).max
    start = np.concatenate([rng.integers(-10, 1010, 3000), win_ts, live[live < 2000]]).astype(np.int64)
    end = start + rng.integers(0, 60, len(start))
    end[: len(win_ts)] = win_ts
    if in_order:
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    c, n = both(monkeypatch, lambda: W._placed(win_ts, win_mode, live, start, end))
    assert same(c, n)
    assert (c[0].any() and (~c[0]).any()) or n_win == 0


@pytest.mark.parametrize("n", [0, 1, 2, 5000, 300_000])
@pytest.mark.parametrize("first_slots", [2, P._FIRST_SLOTS])
def test_classes(monkeypatch, n, first_slots):
    """Ranks of (owner, signature, next signature) triples: few distinct ones among many, of values
    negative, near the int64 limits and far apart (the hashed path of factorize_rows); from a hash
    table too small for them (grown on the way) as from the first one."""
    monkeypatch.setattr(P, "_FIRST_SLOTS", first_slots)
    rng = np.random.default_rng(n)
    values = np.array([-1, 0, 3, -(2**40), 2**62, -(2**63), 2**63 - 1, 5 << 32, (6 << 32) + 7], np.int64)
    owner, sig = rng.choice(values[:4], n), rng.choice(values, n)
    after = np.r_[sig[1:], -1][:n]
    c, n_ = both(monkeypatch, lambda: P._classes(owner, sig, after))
    assert same(c, n_)
    if n > 1000:
        assert c.max() == 4 * 9 * 9 - 1  # every triple seen


@pytest.mark.parametrize("n", [3000, 20_000])
def test_classes_of_many_distinct_triples(monkeypatch, n):
    """More distinct triples than the first hash table holds (each piece its own, or nearly): it grows
    to the largest, never filled."""
    rng = np.random.default_rng(n)
    owner = rng.integers(-1, 50, n)
    sig = rng.integers(0, n, n) << 32
    after = np.r_[sig[1:], -1]
    c, n_ = both(monkeypatch, lambda: P._classes(owner, sig, after))
    assert same(c, n_) and c.max() + 1 > P._FIRST_SLOTS // 2


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("int32_windows", [False, True])
def test_row_window(monkeypatch, case, int32_windows):
    """Each row's window: threads in time order, and one whose rows are not (searched row by row)."""
    if int32_windows:
        monkeypatch.setattr(W, "_I16", 2)
    rng = np.random.default_rng(60 + case)
    tl = timeline(rng, *CASES[case])

    def run(tl: Timeline = tl) -> np.ndarray:
        tl.memo.pop("row_window", None)
        return W.row_window(tl)

    assert same(*both(monkeypatch, run))
    if len(tl.ts) > 1:
        shuffled = dataclasses.replace(tl, ts=tl.ts.copy())
        shuffled.ts[: len(tl.ts) // 2] = rng.permutation(shuffled.ts[: len(tl.ts) // 2])
        c, n = both(monkeypatch, lambda: run(shuffled))
        assert same(c, n)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("id_dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("int32_windows", [False, True])
@pytest.mark.parametrize("few_switches", [False, True])
def test_toggled_and_collector_rows(monkeypatch, case, id_dtype, int32_windows, few_switches):
    """Which collectors the windows switched, and their rows: random kinds, and each collector kept
    out of the light windows in turn (toggled), or out of the trace; a switch every dozen rows (the
    C's blocks of rows cross them), or every few thousand (its blocks lie in one window)."""
    if int32_windows:
        monkeypatch.setattr(W, "_I16", 2)
    rng = np.random.default_rng(70 + case)
    tl = timeline(rng, *CASES[case], id_dtype=id_dtype)
    if few_switches:
        switch = np.flatnonzero(tl.kind == S.WINDOW)
        tl.kind[np.setdiff1d(switch, switch[::300])] = S.OP_BEGIN
    light = W.take(W.mode_table(W.window_rows(tl)[1]), W.row_window(tl)) == S.WINDOW_LIGHT
    backend = (tl.kind == S.BACKEND_BEGIN) | ((tl.kind == S.CAT_BEGIN) & (tl.id == categories.BACKEND))
    variants = {
        "random": tl.kind,
        "no backend in light": np.where(light & backend, np.int8(S.OP_BEGIN), tl.kind),
        "no GPU in light": np.where(light & (tl.kind == S.API_BEGIN), np.int8(S.OP_BEGIN), tl.kind),
        "neither in light": np.where(
            light & (backend | (tl.kind == S.API_BEGIN)), np.int8(S.OP_END), tl.kind
        ),
        "no GPU": np.where(tl.kind == S.API_BEGIN, np.int8(S.OP_BEGIN), tl.kind),
    }
    if light.any():  # one backend row in a light window, amid the longest run of one window's rows
        wi = W.row_window(tl)
        starts = np.flatnonzero(np.diff(wi, prepend=-1, append=-1))
        run = max(range(len(starts) - 1), key=lambda i: (starts[i + 1] - starts[i]) * light[starts[i]])
        one = variants["no backend in light"].copy()
        one[(starts[run] + starts[run + 1]) // 2] = S.BACKEND_BEGIN
        variants["one backend row in light"] = one
    seen = set()
    for kind in variants.values():
        t = dataclasses.replace(tl, kind=kind.astype(np.int8))

        def run(t: Timeline = t) -> tuple:
            t.memo.pop("toggled", None)
            return tuple(W.toggled(t).items()), W.collector_rows(t)

        c, n = both(monkeypatch, run)
        assert c[0] == n[0] and same(c[1], n[1])
        seen.add(c[0])
    if case == 0:
        assert len(seen) >= 3  # switched and not, each collector


@pytest.mark.parametrize("case", range(len(CASES)))
def test_full_share(monkeypatch, case):
    """The share of the main thread's time in full rows: in C, as the numpy loops' integer sums."""
    from types import SimpleNamespace

    from rlscope.overhead.correct.full_windows import full_share

    rng = np.random.default_rng(80 + case)
    tl = timeline(rng, *CASES[case])
    modes = rng.choice(np.array([S.WINDOW_FULL, S.WINDOW_LIGHT], np.int8), len(tl.ts))
    est = SimpleNamespace(row_mode=modes, main_mode_ns=None)  # not summed by a correction: full_share's pass
    c, n = both(monkeypatch, lambda: full_share(est, tl))
    assert same(c, n)
    if case == 0:
        assert 0.3 < c < 0.7


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("id_dtype", [np.int16, np.int64])
@pytest.mark.parametrize("int32_windows", [False, True])
@pytest.mark.parametrize("few_switches", [False, True])
def test_collectors_live(monkeypatch, case, id_dtype, int32_windows, few_switches):
    """The collector rows and each window's first collector time in one pass, as collector_rows and
    _live_from make them: random kinds (blocks of rows of no collector row among them, the last one
    short), a collector switched or not, switches every dozen rows or every few thousand."""
    if int32_windows:
        monkeypatch.setattr(W, "_I16", 2)
    rng = np.random.default_rng(90 + case)
    tl = timeline(rng, *CASES[case], id_dtype=id_dtype)
    if few_switches:
        switch = np.flatnonzero(tl.kind == S.WINDOW)
        tl.kind[np.setdiff1d(switch, switch[::300])] = S.OP_BEGIN
    # runs of rows of no collector: whole blocks of the C loop without one
    quiet = (np.arange(len(tl.ts)) // 500) % 3 == 1
    tl.kind[quiet & np.isin(tl.kind, [S.BACKEND_BEGIN, S.API_BEGIN, S.CAT_BEGIN])] = S.OP_END
    win_ts = W.window_rows(tl)[0]
    for on in (
        {"backend": True, "gpu": True},
        {"backend": False, "gpu": True},
        {"backend": True, "gpu": False},
    ):
        tl.memo["toggled"] = on
        c, n = both(monkeypatch, lambda: W._collectors_live(tl, win_ts))
        assert same(c, n)
        if case == 0:
            assert c[0].any() and (c[1] < np.iinfo(np.int64).max).sum() > 10


def test_collectors_live_of_a_thread_begun_in_the_window_another_ended_in(monkeypatch):
    """A thread's first collector row in the window of the previous thread's last one starts a run of
    its own: its time counts for the window (here the earliest)."""
    rng = np.random.default_rng(5)
    tl = timeline(rng, [50, 20], [7, 3], 7)
    tl.ts[:50], tl.ts[50:] = np.arange(100, 200, 2), np.arange(150, 170)
    tl.kind[:] = S.OP_END
    tl.kind[0], tl.id[0] = S.WINDOW, S.WINDOW_FULL  # one window from the first row on
    tl.kind[[45, 50]] = S.API_BEGIN  # thread 7's late collector row, then thread 3's first row
    tl.memo["toggled"] = {"backend": False, "gpu": True}
    win_ts = W.window_rows(tl)[0]
    c, n = both(monkeypatch, lambda: W._collectors_live(tl, win_ts))
    assert same(c, n) and c[1].tolist() == [np.iinfo(np.int64).max, 150]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op_dtype", [np.int16, np.int32, np.int64])
def test_factor_pass(monkeypatch, case, op_dtype):
    """The factors in one pass (counted rows' factors, pieces' factors over them, instances kept in
    part) against _counted_factor, PieceEstimate.set_factors and the kept rows' product of the numpy
    loops: with the pieces of two estimates, of one, of none."""
    rng = np.random.default_rng(100 + case)
    tl = timeline(rng, *CASES[case], op_dtype=op_dtype, id_dtype=op_dtype)
    raw = stretched(tl, rng.integers(0, 3, len(tl.ts)), shift=-3)
    _, _, full_row = rows_of(rng, tl)
    row_mode = np.where(full_row, np.int8(S.WINDOW_FULL), np.int8(S.WINDOW_LIGHT))
    main = W._main_ranges(tl)
    key_name = np.append(W.UNANNOTATED_ID, tl.inst_name)
    keys = np.unique(key_name)
    per_key = rng.random(len(keys)).tolist()
    n_inst = len(tl.inst_name)
    kept_inst = np.append(False, rng.random(n_inst) < 0.3)
    keep_inst = np.where(kept_inst, rng.random(n_inst + 1), 1.0)
    pc = P.pieces(tl, raw)
    npc = len(pc.owner)
    side = rng.random(npc) < 0.5  # two estimates' pieces: disjoint
    ests = [
        W.PieceEstimate(0.0, 0.0, 0.0, 0, pc, mine, rng.random(len(mine)), {})
        for mine in (np.flatnonzero((rng.random(npc) < 0.6) & s) for s in (side, ~side))
    ]
    first = np.ones(npc)  # the first estimate's factor per piece
    first[ests[0].compared] = ests[0].factor
    for chosen in (ests, ests[:1], []):

        def run(chosen: list = chosen) -> np.ndarray:
            # each run its own copies of the estimates' columns (a pass that wrote into them would show)
            overrides = [
                dataclasses.replace(e, compared=e.compared.copy(), factor=e.factor.copy()) for e in chosen
            ]
            got = W._factor_pass(tl, None, full_row, main, keys, key_name, per_key, overrides, keep_inst)
            if got is not None:  # the tables, and the column of factors they make
                return got.column()
            out = np.full(len(tl.ts), np.nan)
            out = W._counted_factor(tl, None, full_row, main, keys, key_name, per_key, out)
            for est in overrides:
                est.set_factors(out, row_mode)
            rows = np.flatnonzero(kept_inst[tl.op.astype(np.intp) + 1])
            out[rows] *= keep_inst[tl.op[rows].astype(np.intp) + 1]
            return out

        c, n = both(monkeypatch, run)
        assert same(c, n)
        if case == 0 and chosen:
            assert (c == first[pc.row]).sum() > 100  # pieces' factors set


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("id_dtype", [np.int16, np.int32, np.int64])
def test_after_switch(monkeypatch, case, id_dtype):
    """Whether a switch came directly before each instance on its thread, and the operation before
    it: begins in row order (merged in C), in another order (searched again), and a few; ends of
    instances of no name (-1) and of none (the trace's -1 id)."""
    rng = np.random.default_rng(110 + case)
    tl = timeline(rng, *CASES[case], id_dtype=id_dtype)
    begins = W.op_begins(tl)
    for b in (begins, rng.permutation(begins), begins[::7], begins[:1]):
        c, n = both(monkeypatch, lambda b=b: W.after_switch(tl, b))
        assert same(c, n)
    c = W.after_switch(tl, begins)
    if case == 0:
        assert c[0].any() and not c[0].all() and (c[1] == -2).any() and (c[1] >= 0).any()


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("id_dtype", [np.int16, np.int64])
@pytest.mark.parametrize("int32_windows", [False, True])
@pytest.mark.parametrize("few_switches", [False, True])
@pytest.mark.parametrize("few_changes", [False, True])
def test_toggled_without_row_window(monkeypatch, case, id_dtype, int32_windows, few_switches, few_changes):
    """toggled on a timeline without its row_window: the flags in one pass, each row's window found on
    the way and not kept, and row_window's column then made from the rows where it changes (or
    searched again where they are more than the pass lists), as the flags' pass over the column and
    numpy's make them (blocks of rows in one window and across switches, a short last one), with
    each collector kept out of the light windows in turn."""
    if few_changes:
        monkeypatch.setattr(W, "_CHANGES", 3)
    if int32_windows:
        monkeypatch.setattr(W, "_I16", 2)
    rng = np.random.default_rng(120 + case)
    tl = timeline(rng, *CASES[case], id_dtype=id_dtype)
    if few_switches:
        switch = np.flatnonzero(tl.kind == S.WINDOW)
        tl.kind[np.setdiff1d(switch, switch[::300])] = S.OP_BEGIN
    light = W.take(W.mode_table(W.window_rows(tl)[1]), W.row_window(tl)) == S.WINDOW_LIGHT
    kinds = {
        "random": tl.kind,
        "no GPU in light": np.where(light & (tl.kind == S.API_BEGIN), np.int8(S.OP_BEGIN), tl.kind),
        "no backend": np.where(np.isin(tl.kind, [S.BACKEND_BEGIN, S.CAT_BEGIN]), np.int8(S.OP_END), tl.kind),
    }
    for kind in kinds.values():

        def run(kind: np.ndarray = kind, with_column: bool = False) -> tuple:
            t = dataclasses.replace(tl, kind=kind.astype(np.int8))
            if with_column:
                W.row_window(t)
            flags = tuple(W.toggled(t).items())
            kept = "row_window" in t.memo
            return flags, kept, W.row_window(t)

        c, n = both(monkeypatch, run)
        assert c[0] == n[0] and not c[1] and n[1] and same(c[2], n[2])  # (numpy's flags read the column)
        assert c[2].dtype == (np.int32 if int32_windows and len(W.window_rows(tl)[0]) >= 2 else np.int16)
        assert run(with_column=True)[0] == c[0]  # the C flags' pass over the column
        listed = dataclasses.replace(tl, kind=kind.astype(np.int8))
        W.toggled(listed)  # the rows where the window changes, as listed by the flags' pass
        searched = dataclasses.replace(tl)
        W.row_window(searched)  # and as found along row_window's column
        n_changes = len(W.window_changes(searched)[0])
        assert ("window_changes" in listed.memo) == (n_changes <= (3 if few_changes else W._CHANGES))
        if "window_changes" in listed.memo:
            assert same(listed.memo["window_changes"], W.window_changes(searched))


def test_collectors_live_of_a_thread_begun_at_a_blocks_last_row(monkeypatch):
    """A thread's first row, the last of a block of rows otherwise another thread's, is its only
    collector row: its own start counts for the window, not the other thread's row before it."""
    tl = timeline(np.random.default_rng(6), [127, 73], [7, 3], 7)
    tl.ts[:127], tl.ts[127:] = np.arange(100, 354, 2), np.arange(150, 223)
    tl.kind[:] = S.OP_END
    tl.kind[0], tl.id[0] = S.WINDOW, S.WINDOW_FULL  # one window from the first row on
    tl.kind[127] = S.API_BEGIN
    tl.memo["toggled"] = {"backend": False, "gpu": True}
    c, n = both(monkeypatch, lambda: W._collectors_live(tl, W.window_rows(tl)[0]))
    assert same(c, n) and c[1].tolist() == [np.iinfo(np.int64).max, 150]


def test_collectors_live_of_a_window_begun_at_a_blocks_last_row(monkeypatch):
    """A window that begins at the last row of a block of rows, a collector row: it is the first of
    its window's run, not one of the block's first window's."""
    tl = timeline(np.random.default_rng(7), [128, 2], [7, 3], 7)
    tl.ts[:128], tl.ts[128:] = np.arange(100, 356, 2), [100, 226]  # 226: row 63's time
    tl.kind[:] = S.OP_END
    tl.kind[128:], tl.id[128:] = S.WINDOW, S.WINDOW_FULL  # the switches, on the other thread
    tl.kind[[5, 63]] = S.API_BEGIN
    tl.memo["toggled"] = {"backend": False, "gpu": True}
    c, n = both(monkeypatch, lambda: W._collectors_live(tl, W.window_rows(tl)[0]))
    assert same(c, n) and c[1].tolist() == [np.iinfo(np.int64).max, 108, 226]
