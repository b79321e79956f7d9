"""The breakdown's C loops (rlscope/analysis/native/breakdown.c) against their numpy versions.

Each function runs twice on the same random timeline, once with ``RLSCOPE_NATIVE_ANALYSIS=0`` (the
numpy loops) and once with the C ones, and the two must give the same bits: every figure rlscope
prints comes from these sums.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rlscope import categories
from rlscope.analysis import breakdown, gpu, native, noise
from rlscope.analysis.timeline import Timeline
from rlscope.overhead.correct.full_windows import FullFraction
from rlscope.trace import schema as S
from tests.timelines import stretched

NCAT = len(categories.CATEGORY_NAMES)
MAIN = 100  # the main thread's id; the others are 101, 102, ...


@pytest.fixture
def both(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[Any, Any]]:
    """Runs a function with the numpy loops, then with the C ones: (numpy's result, C's)."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")

    def run(f: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        monkeypatch.setenv(native.ENV, "0")
        ref = f(*args, **kwargs)
        monkeypatch.setenv(native.ENV, "1")
        return ref, f(*args, **kwargs)

    return run


def timeline(
    rng: np.random.Generator,
    rows: int = 2000,
    threads: int = 3,
    ops: int = 40,
    phases: int = 3,
    main: bool = True,
    ids: type = np.int32,
    unit: int = 0,
    cat_type: type = np.int8,
    run: int = 0,
    op_cats: tuple[int, ...] = (),
) -> Timeline:
    """A random timeline of ``threads`` threads (the first the main one, unless ``main`` is False),
    ``ops`` operation and ``phases`` phase instances over ``rows`` rows: zero and negative durations,
    rows outside every operation and phase, categories of every code; ``unit``: the ns a row's time is
    a multiple of (0: a random one per thread); ``ids``, ``cat_type``: the id and category columns'
    types; ``run``: the mean length of the runs of rows of one operation and phase instance (0: a row's
    are drawn on their own, nearly every row a run), as a trace's torch ops make them; ``op_cats``: the
    categories of the rows inside an operation (none: every category), as a torch trace's are a few."""
    thread = np.sort(rng.integers(0, threads, rows)) + MAIN + (0 if main else 1)
    ts = np.empty(rows, np.int64)
    for t in np.unique(thread):  # each thread's rows in time order, some of them of no time
        mine = thread == t
        ts[mine] = 10**9 + np.cumsum(rng.integers(0, 3, int(mine.sum())) * (unit or rng.integers(1, 10**6)))
    seg_end = np.append(ts[1:], ts[-1:] + 5) if rows else ts.copy()
    last = np.flatnonzero(np.append(thread[1:] != thread[:-1], rows > 0))
    seg_end[last] = ts[last] + rng.integers(-2, 10**5, len(last))  # a thread's last row: any length
    op = rng.integers(-1, ops, rows)
    phase = rng.integers(-1, phases, rows)
    phase[phase >= 0] += ops  # phase instances after the operations'
    if run and rows:  # runs that go on across a thread's end too: the runs split there
        first_of_run = np.flatnonzero(np.append(True, rng.random(rows - 1) < 1 / run))
        length = np.diff(first_of_run, append=rows)
        op, phase = np.repeat(op[first_of_run], length), np.repeat(phase[first_of_run], length)
    n_inst = ops + phases
    inst_name = rng.integers(-1, 6, n_inst)  # a few names, some unknown (-1)
    kind = np.full(rows, S.CAT_BEGIN, np.int8)
    ident = np.full(rows, -1, np.int64)
    name = np.full(rows, -1, np.int64)
    first = np.unique(op[op >= 0], return_index=True)[1]
    kind[first], ident[first], name[first] = S.OP_BEGIN, op[first], inst_name[op[first]]
    thread_idx = np.cumsum(np.append(True, thread[1:] != thread[:-1])) - 1 if rows else np.zeros(0)
    cat = rng.integers(0, NCAT, rows)
    if op_cats:
        cat[op >= 0] = rng.choice(op_cats, int((op >= 0).sum()))
    return Timeline.with_seg_end(
        seg_end, ts=ts, threads=thread[np.unique(thread_idx, return_index=True)[1]].astype(np.int32),
        kind=kind, id=ident.astype(ids),
        name=name.astype(np.int32), flags=np.zeros(rows, np.int8), op=op.astype(ids),
        cat=cat.astype(cat_type), phase=phase.astype(ids), main_thread=MAIN,
        start_ns=int(ts.min(initial=0)), end_ns=int(seg_end.max(initial=0)), inst_name=inst_name,
        inst_end=np.full(n_inst, int(seg_end.max(initial=0)), np.int64),
        thread_idx=thread_idx.astype(np.int16),
    )  # fmt: skip


CASES = {
    "random": {},
    "many instances": {"rows": 20_000, "ops": 3000, "threads": 5},
    "above one block of rows": {"rows": 70_000, "ops": 500, "threads": 2},
    "one thread": {"threads": 1},
    "no main thread": {"main": False},
    "one row": {"rows": 1, "threads": 1},
    "empty": {"rows": 0, "threads": 1},
    "no operations": {"ops": 0},
    "no operations nor main thread": {"ops": 0, "main": False},
    "runs of rows": {"rows": 20_000, "ops": 300, "threads": 5, "run": 12},
    "runs of rows, one thread, no main": {"rows": 5000, "threads": 1, "main": False, "run": 30},
    "rows of a ns or two": {"unit": 1, "rows": 5000, "ops": 400},
    "wide ids": {"ids": np.int64},  # the numpy loops, as the C reads int32 ids
    "wide categories": {"cat_type": np.int16},  # the numpy loops, as the C reads one-byte categories
    # the operations' rows of three categories (a torch trace's): the C's instance sums of those alone
    "few categories in operations": {"rows": 5000, "ops": 200, "run": 12, "op_cats": (0, 2, 7)},
    "one category in operations": {"rows": 3000, "ops": 100, "op_cats": (9,)},
}


def by_category(c: breakdown.CountedSums) -> bytes:
    """The instances' sums of ``c`` a column per category (those of no column in ``c``: none), as
    numpy's loops make them."""
    out = np.zeros((len(c.inst_cat), NCAT))
    held = c.inst_col >= 0
    out[:, held] = c.inst_cat[:, c.inst_col[held]]
    return out.tobytes()


def counted(tl: Timeline) -> tuple[bytes, bool, bytes]:
    c = breakdown._counted_sums(tl, breakdown.row_groups(tl))
    return c.sums.tobytes(), c.off_main, by_category(c)


@pytest.mark.parametrize("case", list(CASES))
def test_counted_sums(both, case: str) -> None:
    tl = timeline(np.random.default_rng(len(case)), **CASES[case])
    ref, got = both(counted, tl)
    assert ref == got


def test_instance_sums_of_the_operations_categories_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C passes sum an instance's time in a column per category the operations' rows hold (the
    grouping found them), numpy's loops in one per category; where the rows hold another (retimed
    rows of other categories than the grouping's), a column per category."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    monkeypatch.setenv(native.ENV, "1")
    rng = np.random.default_rng(8)
    tl = timeline(rng, **CASES["few categories in operations"])
    groups = breakdown.row_groups(tl)
    assert groups.op_cat_bits == 1 << 0 | 1 << 2 | 1 << 7
    want = [0, -1, 1, -1, -1, -1, -1, 2, -1, -1]
    for c in (
        breakdown._counted_sums(tl, groups),
        *breakdown._counted_pair(tl, retimed(rng, tl), groups, None),
    ):
        assert c.inst_cat.shape == (len(tl.inst_name), 3) and c.inst_col.tolist() == want
    other = dataclasses.replace(tl, cat=(tl.cat + 1) % NCAT)
    for c in (breakdown._counted_sums(other, groups), *breakdown._counted_pair(other, other, groups, None)):
        assert c.inst_cat.shape == (len(tl.inst_name), NCAT) and c.inst_col.tolist() == list(range(NCAT))
    monkeypatch.setenv(native.ENV, "0")
    assert by_category(breakdown._counted_sums(other, breakdown.row_groups(other))) == by_category(c)


def test_counted_sums_where_no_row_has_time(both) -> None:
    tl = stretched(timeline(np.random.default_rng(1)), -(2**40))  # every segment 0 ns long
    assert not (tl.seg_end - tl.ts).any()
    ref, got = both(counted, tl)
    assert ref == got and not np.frombuffer(got[0]).any()


ROW_GROUP_CASES = [*CASES, "every row a run", "int32 thread index", "many pairs", "with GPU work"]


@pytest.mark.parametrize("case", ROW_GROUP_CASES)
def test_row_groups(both, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """The runs of one (operation, phase, thread), their pairs and the begins' and GPU records': the C
    passes' numbering (its pairs' table grown from one pair where many) and numpy's give the same
    bits, checked against the rows too; a run a row (more than the C's first guess of places) and an
    int32 thread index too."""
    rng = np.random.default_rng(len(case) + 7)
    tl = timeline(rng, **CASES.get(case, {"rows": 3000, "phases": 0}))
    recs = None
    if case == "every row a run":
        tl.op[:] = np.arange(len(tl.op)) % 2
    if case == "int32 thread index":
        tl.thread_idx = tl.thread_idx.astype(np.int32)
    if case == "many pairs":  # hundreds of (phase, operation) names: the table grows from its first size
        tl = timeline(rng, rows=6000, ops=1500, phases=40, run=3)
        tl.inst_name[:] = rng.integers(-1, 400, len(tl.inst_name))
        tl.name[tl.kind == S.OP_BEGIN] = tl.inst_name[tl.op[tl.kind == S.OP_BEGIN]]
        monkeypatch.setattr(breakdown, "PAIR_SLOTS", 2)
    if case == "with GPU work":
        recs = gpu_records(rng, tl)
    ref, got = both(breakdown.row_groups, tl, recs)
    fields = ("runs", "run_pair", "row_pair", "begins", "b_pair", "g_op", "g_pair", "pair_ph", "pair_op")
    for f in fields:
        a, b = getattr(ref, f), getattr(got, f)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f
    key = list(zip(tl.op.tolist(), tl.phase.tolist(), tl.thread_idx.tolist(), strict=True))
    assert got.runs.tolist() == [i for i in range(len(key)) if i == 0 or key[i] != key[i - 1]]
    assert got.begins.tolist() == np.flatnonzero(tl.kind == S.OP_BEGIN).tolist()
    inst_name = np.append(tl.inst_name, -1)
    pairs = list(zip(got.pair_ph.tolist(), got.pair_op.tolist(), strict=True))
    assert pairs == sorted(set(pairs))  # each pair once, in (phase, operation) order
    for r, p in zip(got.runs.tolist(), got.run_pair.tolist(), strict=True):
        op_name, ph_name = int(inst_name[tl.op[r]]), int(inst_name[tl.phase[r]])
        counted = op_name >= 0 or tl.thread[r] == MAIN
        assert p == (pairs.index((ph_name, op_name)) if counted else -1)
    b_pairs = [pairs[p] for p in got.b_pair.tolist()]
    assert b_pairs == list(
        zip(inst_name[tl.phase[got.begins]].tolist(), tl.name[got.begins].tolist(), strict=True)
    )
    if recs is not None:
        g_pairs = [pairs[p] for p in got.g_pair.tolist()]
        assert g_pairs == list(zip(inst_name[recs[2]].tolist(), inst_name[recs[1]].tolist(), strict=True))
    if native.library() is not None:  # the C passes ran (but for the wide ids the C reads as int32)
        numbered = breakdown._numbered_c(tl, inst_name, np.zeros(0), np.zeros(0))
        assert (numbered is not None) == (case != "wide ids")
        if numbered is not None:  # the runs and begins hold few unused places: a run per scope row at most
            bound = len(tl.scope_begins()) + len(tl.scope_ends()) + len(tl.threads) + 1
            for a in numbered[:2]:
                assert len(a if a.base is None else a.base) <= max(len(a), bound)
            assert numbered[2].base is None
        # the categories of the rows in named operations (the C's one-byte categories: found in its pass)
        in_named = inst_name[tl.op] >= 0
        bits = sum(1 << int(c) for c in np.unique(tl.cat[in_named]))
        assert got.op_cat_bits == (bits if numbered is not None and tl.cat.dtype == np.int8 else -1)
        assert ref.op_cat_bits == -1  # numpy's: not known


def full_window_sums(tl: Timeline, full: np.ndarray) -> bytes:
    """The time in full windows per key of :func:`breakdown._split_like_full_windows`: made in the C
    pass of the counted sums, or by numpy's own loop."""
    groups = breakdown.row_groups(tl)
    counted = breakdown._counted_sums(tl, groups, full)
    held = counted.sums.transpose(0, 2, 1).reshape(-1, NCAT).sum(axis=1) > 0
    return breakdown._full_by_key(tl, groups, full, counted, held).tobytes()


@pytest.mark.parametrize("case", list(CASES))
def test_full_window_sums(both, case: str) -> None:
    rng = np.random.default_rng(len(case))
    tl = timeline(rng, **CASES[case])
    full = rng.random(len(tl.ts))  # fractions of a ns: the sums depend on the order of the additions
    full[rng.random(len(full)) < 0.3] = 0.0
    ref, got = both(full_window_sums, tl, full)
    assert ref == got


def retimed(rng: np.random.Generator, tl: Timeline, off_main_idle: bool = False) -> Timeline:
    """``tl``'s rows retimed as a correction retimes them (its other columns shared): each segment
    shortened by a random cost, some to no time, the threads moved back; ``off_main_idle``: no row off the
    main thread keeps any time."""
    n = len(tl.ts)
    extra = -rng.integers(0, 3, n) * rng.integers(0, 1000, n)
    if off_main_idle:
        off = tl.thread != MAIN
        extra[off] = -(tl.seg_end - tl.ts)[off]
    return stretched(tl, extra, shift=-int(rng.integers(0, 50)))


def shares(rng: np.random.Generator, tl: Timeline, windows: int = 40) -> FullFraction:
    """Random shares in full windows of ``tl``'s rows: ``windows`` switches at random times over its span
    (some before its first row, after its last, at a row's start; threads overlap, so each starts
    inside a window), a random kind each, and random crossing rows (each thread's last among them) of
    random fractions (of a ns: the sums depend on the order of the additions)."""
    n = len(tl.ts)
    lo, hi = (int(tl.ts.min()), int(tl.ts.max())) if n else (0, 1)
    win_ts = np.sort(rng.integers(lo - 100, hi + 100, windows))
    if n and windows:
        win_ts[rng.integers(0, windows)] = tl.ts[rng.integers(0, n)]  # a switch at a row's start
        win_ts = np.sort(win_ts)
    at_mode = rng.choice([0.0, 1.0], windows + 1)
    picked = rng.random(n) < 0.05
    picked[tl.thread_last()[tl.thread_last() >= 0] if n else []] = True
    rows = np.flatnonzero(picked).astype(np.int64)
    values = rng.random(len(rows))
    values[rng.random(len(rows)) < 0.2] = 1.0
    return FullFraction(n, win_ts.astype(np.int64), at_mode, rows, values)


def counted_pair(tl: Timeline, fixed: Timeline, full: FullFraction | None) -> list[Any]:
    """The two timelines' counted sums as the breakdown of a corrected run makes them, serialized; and
    the corrected one's time in full windows per key (:func:`full_window_sums`)."""
    groups = breakdown.row_groups(tl)
    raw, corrected = breakdown._counted_pair(tl, fixed, groups, full)
    out: list[Any] = []
    for c in (raw, corrected):
        out += [c.sums.tobytes(), c.off_main, by_category(c), c.op_cats.tobytes()]
    if full is not None:
        held = corrected.sums.transpose(0, 2, 1).reshape(-1, NCAT).sum(axis=1) > 0
        column = full.column(tl.ts)
        out.append(breakdown._full_by_key(fixed, groups, column, corrected, held).tobytes())
    return out


WINDOWS = {"no windows": 0, "one window": 1, "every row its window": -1}


@pytest.mark.parametrize("case", [*CASES, "without full windows", "idle off the main thread", *WINDOWS])
def test_counted_pair(both, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """One C pass over a timeline and its retimed rows gives the bits of the numpy loops and of a
    pass over each; the time in full windows the corrected one's, as its own pass adds it, each row's
    share worked out on the way (its window's, or a crossing row's): rows in many windows, threads
    starting inside one, no windows, one, crossing rows at the threads' ends."""
    rng = np.random.default_rng(len(case) + 3)
    tl = timeline(rng, **CASES.get(case, {"rows": 5000, "run": 12}))
    fixed = retimed(rng, tl, off_main_idle=case == "idle off the main thread")
    windows = WINDOWS.get(case, 40)
    full = (
        None if case == "without full windows" else shares(rng, tl, windows if windows >= 0 else len(tl.ts))
    )
    ref, got = both(counted_pair, tl, fixed, full)
    assert ref == got
    monkeypatch.setenv(native.ENV, "1")
    groups = breakdown.row_groups(tl)
    column = None if full is None else full.column(tl.ts)
    apart = [breakdown._counted_sums(tl, groups), breakdown._counted_sums(fixed, groups, column)]
    each = [(c.sums.tobytes(), c.off_main, by_category(c), c.op_cats.tobytes()) for c in apart]
    assert got[:8] == [*each[0], *each[1]]
    if full is not None:  # the shares worked out in the pass: the sums of the pass given their column
        together = breakdown._counted_pair(tl, fixed, groups, full)[1]
        c_loops = case not in ("wide ids", "wide categories")  # numpy's loops sum none in their pass
        assert (together.full is not None) == c_loops == (apart[1].full is not None)
        assert not c_loops or together.full.tobytes() == apart[1].full.tobytes()
    if case == "idle off the main thread" and len(tl.ts):
        assert got[1] and not got[5]  # the raw rows off the main thread count, the corrected ones none


def test_full_fraction_column() -> None:
    """A FullFraction's column: its window's kind per row (the switches at or before its start), the
    crossing rows' values over it."""
    full = FullFraction(
        6, np.array([10, 20], np.int64), np.array([1.0, 0.0, 1.0]), np.array([2, 5]), np.array([0.25, 0.5])
    )
    ts = np.array([5, 10, 12, 19, 20, 30], np.int64)
    assert full.column(ts).tolist() == [1.0, 0.0, 0.25, 0.0, 1.0, 0.5]
    none = FullFraction(2, np.zeros(0, np.int64), np.ones(1), np.zeros(0, np.int64), np.zeros(0))
    assert none.column(np.array([3, 4], np.int64)).tolist() == [1.0, 1.0]
    assert len(none.column(np.zeros(0, np.int64))) == 0


def test_counted_pair_runs_the_c_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C pass runs for the columns a correction makes (the categories shared); where the retimed
    timeline holds other categories, a pass each (its own categories read)."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    monkeypatch.setenv(native.ENV, "1")
    rng = np.random.default_rng(4)
    tl = timeline(rng, rows=3000)
    fixed, full = retimed(rng, tl), shares(rng, tl)
    column = full.column(tl.ts)
    calls: list[str] = []
    single = breakdown._counted_sums
    monkeypatch.setattr(breakdown, "_counted_sums", lambda *a: calls.append("one") or single(*a))
    groups = breakdown.row_groups(tl)
    together = breakdown._counted_pair(tl, fixed, groups, full)
    assert calls == [] and together[1].full is not None
    other = dataclasses.replace(fixed, cat=(fixed.cat + 1) % NCAT)
    raw, corrected = breakdown._counted_pair(tl, other, groups, full)
    assert calls == ["one", "one"]
    assert corrected.sums.tobytes() == single(other, groups, column).sums.tobytes()
    assert raw.sums.tobytes() == together[0].sums.tobytes() != corrected.sums.tobytes()
    # the retimed rows on other threads (one): their segments end at other rows, read in their own pass
    one = np.zeros_like(fixed.thread_idx)
    moved = dataclasses.replace(
        fixed, thread_idx=one, threads=fixed.threads[:1], thread_end=fixed.thread_end[-1:]
    )
    calls.clear()
    raw, corrected = breakdown._counted_pair(tl, moved, groups, full)
    assert calls == ["one", "one"]
    assert (
        corrected.sums.tobytes() == single(moved, groups, column).sums.tobytes() != together[1].sums.tobytes()
    )


@pytest.mark.parametrize("case", list(CASES))
def test_begins(both, case: str) -> None:
    """Each OP_BEGIN row's instance, time and inclusive time (0: recursive) by the C loop over the
    begins and by numpy's gathers: the same types and bits."""
    rng = np.random.default_rng(len(case) + 11)
    tl = timeline(rng, **CASES[case])
    tl.flags[:] = rng.integers(0, 4, len(tl.flags))  # the recursive flag on some rows, other bits too
    tl.inst_end[:] = rng.integers(10**9, 2 * 10**9, len(tl.inst_end))
    begins = breakdown.row_groups(tl).begins
    ref, got = both(breakdown._begins, tl, begins)
    for a, b in zip(ref, got, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    b_inst, b_ts, b_incl = got
    recursive = (tl.flags[begins] & S.FLAG_RECURSIVE) != 0
    assert b_inst.tolist() == tl.id[begins].tolist() and b_ts.tolist() == tl.ts[begins].tolist()
    assert b_incl.tolist() == np.where(recursive, 0, tl.inst_end[tl.id[begins]] - tl.ts[begins]).tolist()


NOISE_ROW_CASES = ["random", "an instance begun twice", "instances from the end", "wide ids", "no begins"]


@pytest.mark.parametrize("case", NOISE_ROW_CASES)
def test_noise_rows(both, case: str) -> None:
    """The noise's rows from the begins (their instances, pairs, times, inclusive times) and the
    instances' sums: the C pass that spreads the begins over their instances and reads the sums'
    columns, and numpy's scatters and gathers; an instance begun twice (the last begin's), instances
    counted from the end (numpy's negative index), int64 ids; one outside the instances raises."""
    rng = np.random.default_rng(len(case) + 21)
    tl = timeline(
        rng, rows=4000, ops=80, run=6, op_cats=(0, 2, 7), ids=np.int64 if case == "wide ids" else np.int32
    )
    n_inst, m = len(tl.inst_name), 0 if case == "no begins" else 60
    b_inst = rng.permutation(n_inst)[:m]
    if case == "an instance begun twice":
        b_inst[1::3] = b_inst[0]
    if case == "instances from the end":
        b_inst[::2] -= n_inst
    b_inst = b_inst.astype(tl.id.dtype)
    b_ts, b_incl = rng.integers(0, 10**9, m), rng.integers(0, 10**7, m)
    n_pairs = len(breakdown.row_groups(tl).pair_ph)  # numbered alike by both (test_row_groups)
    b_pair = rng.integers(0, max(n_pairs, 1), m)

    def rows(b_inst: np.ndarray) -> Any:
        counted = breakdown._counted_sums(tl, breakdown.row_groups(tl))
        return breakdown._noise(tl, counted, b_inst, b_ts, b_pair, b_incl, n_pairs, None, None)

    ref, got = both(rows, b_inst)
    assert ref == got
    if m:
        outside = b_inst.copy()
        outside[-1] = n_inst
        with pytest.raises(IndexError):
            both(rows, outside)


def test_the_c_loops_take_the_usual_columns(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timelines above, of the types the analysis makes, run the C loops (the tests compare the
    two paths); wider ids or categories run numpy's."""
    monkeypatch.setenv(native.ENV, "1")
    for kwargs, c_loops in (({}, True), (CASES["wide ids"], False), (CASES["wide categories"], False)):
        tl = timeline(np.random.default_rng(2), **kwargs)
        counted = breakdown._counted_sums(tl, breakdown.row_groups(tl), np.ones(len(tl.ts)))
        assert (counted.full is not None) == c_loops


def gpu_records(
    rng: np.random.Generator, tl: Timeline, n: int = 300
) -> tuple[gpu.GpuRecords, np.ndarray, np.ndarray]:
    """Random GPU work over ``tl``'s span, each record launched by one of its instances (or none)."""
    start = np.sort(rng.integers(tl.start_ns, tl.end_ns + 1, n))
    end = start + rng.integers(0, 10**6, n)
    category = rng.choice([categories.GPU_KERNEL, categories.GPU_MEMCPY, categories.GPU_MEMSET], n)
    records = gpu.GpuRecords(
        category=category, start=start, end=end, correlation=np.arange(n), name=np.zeros(n)
    )
    n_inst = len(tl.inst_name)
    return records, rng.integers(-1, max(n_inst, 1), n) if n_inst else np.full(n, -1), np.full(n, -1)


def tables(tl: Timeline, with_gpu: bool = False) -> list[bytes]:
    """A breakdown's tables, serialized; ``with_gpu``: with random GPU work (the overlap sweep)."""
    recs = gpu_records(np.random.default_rng(5), tl) if with_gpu and len(tl.ts) else None
    b = breakdown.breakdown_timeline(tl, [f"n{i}" for i in range(6)], pid=1, gpu_records=recs)
    return [repr(t.to_pydict()).encode() for t in (b.cpu_time, b.ops, b.gpu_time, b.noise)] + [
        repr(b.phase_wall_s).encode()
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_breakdown_tables(both, case: str) -> None:
    tl = timeline(np.random.default_rng(len(case) + 7), **CASES[case])
    ref, got = both(tables, tl)
    assert ref == got


@pytest.mark.parametrize("case", list(CASES))
def test_breakdown_tables_with_gpu_work(both, case: str) -> None:
    tl = timeline(np.random.default_rng(len(case) + 11), **CASES[case])
    ref, got = both(tables, tl, with_gpu=True)
    assert ref == got


def merged(tl: Timeline, pairs: np.ndarray) -> tuple[list[bytes], bytes]:
    """The sweep's CPU segments of the pairs flagged, and the threads of each pair."""
    groups = breakdown.row_groups(tl)
    group = np.arange(len(pairs)) * 3 + 1  # any number per pair
    segments = breakdown._merged_segments(tl, groups, pairs, group)
    return [a.tobytes() for a in segments], breakdown._threads_per_pair(tl, groups).tobytes()


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c].get("rows", 1)])
def test_merged_segments(both, case: str) -> None:
    tl = timeline(np.random.default_rng(len(case) + 3), **CASES[case])
    n_pairs = len(breakdown.row_groups(tl).pair_ph)
    for pairs in (np.ones(n_pairs, bool), np.random.default_rng(0).random(n_pairs) < 0.5):
        ref, got = both(merged, tl, pairs)
        assert ref == got


def test_merged_segments_split_at_a_thread_s_end(both) -> None:
    """A thread's first row that begins where the thread before ends, in the same pair, is a segment of
    its own: segments join on one thread only."""
    tl = timeline(np.random.default_rng(4), rows=400, threads=2, run=10)
    first = int(tl.thread_starts()[1])
    ts, seg_end = tl.ts.copy(), tl.seg_end.copy()
    seg_end[first - 1] = ts[first - 1] + 7
    shift = seg_end[first - 1] - ts[first]
    ts[first:] += shift
    seg_end[first:] += shift
    tl = tl.retimed(ts, seg_end)
    tl.op[first - 1 : first + 1], tl.phase[first - 1 : first + 1] = 0, -1
    tl.inst_name[0] = 1
    pairs = np.ones(len(breakdown.row_groups(tl).pair_ph), bool)
    ref, got = both(merged, tl, pairs)
    assert ref == got
    assert tl.ts[first] in np.frombuffer(got[0][1], np.int64)


def test_a_thread_s_last_row_ends_at_the_thread_s_end(both) -> None:
    """A thread's last row's segment ends at its thread's end, not where the next thread's first row
    starts: each thread's rows at one time, the next thread's later, and only the second thread's last
    row of any time (the pairs, threads and segments count it alone)."""
    tl = timeline(np.random.default_rng(6), rows=300, threads=3, run=10)
    starts, last = tl.thread_starts(), tl.thread_last()
    ts = np.repeat(10**9 + 1000 * np.arange(len(last), dtype=np.int64), np.diff(starts))
    seg_end = ts.copy()
    seg_end[last[1]] += 5
    tl = tl.retimed(ts, seg_end)
    pairs = np.ones(len(breakdown.row_groups(tl).pair_ph), bool)
    ref, got = both(merged, tl, pairs)
    assert ref == got
    assert np.frombuffer(got[1], np.int64).sum() == 1 and len(got[0][0]) == 8  # one pair, one segment
    ref, got = both(counted, tl)
    assert ref == got and np.frombuffer(got[0]).sum() == 5


def test_times_not_in_one_block_run_numpy_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeline whose times are not one block of int64 (the C loops read them as one) runs numpy's
    loops, with the same sums."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    monkeypatch.setenv(native.ENV, "1")
    tl = timeline(np.random.default_rng(3))
    strided = tl.retimed(np.repeat(tl.ts, 2)[::2], thread_end=tl.thread_end)
    assert not strided.ts.flags.c_contiguous
    groups = breakdown.row_groups(tl)
    assert breakdown._row_loop(strided, "breakdown_counted_sums") is None
    assert breakdown._counted_sums(strided, groups, np.ones(len(tl.ts))).full is None  # numpy's
    assert counted(strided) == counted(tl)
    a, b = breakdown._counted_pair(tl, strided, groups, None)
    c, d = breakdown._counted_pair(tl, tl, groups, None)
    assert (a.sums.tobytes(), b.sums.tobytes()) == (c.sums.tobytes(), d.sums.tobytes())


NOISE_CASES = {
    "random": {},
    "large groups, in blocks": {"n": 30_000, "groups": 4},
    "many small groups": {"n": 3000, "groups": 1000},
    "one column": {"columns": 1},
    "one-time instances": {"one_time": 0.2},
    "every instance one-time": {"one_time": 1.0},
    "a group of one before large ones": {"n": 3000, "groups": 8, "single": 1, "left_out": 0.0},
    "one instance": {"n": 1},
    "none": {"n": 0},
    "every instance left out": {"left_out": 1.0},
}


def noise_sums(
    seed: int,
    n: int = 2000,
    groups: int = 6,
    columns: int = 5,
    one_time: float = 0.0,
    left_out: float = 0.1,
    single: int = 0,
    in_order: bool = False,
) -> list[bytes]:
    """variance_and_one_time of random instances: values with fractions of a ns (sums that depend on
    the order of the additions), zeros, ties in time, instances left out (group -1); the first
    ``single`` groups of one instance each; ``in_order``: the kept instances in time order (the left
    out ones at any time), as instances numbered as they begin are (no sort: C's counting)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(single, groups, n)
    group[:single] = np.arange(single)
    group[rng.random(n) < left_out] = -1
    when = rng.integers(0, n // 2 + 1, n)
    if in_order:
        when.sort()
        when[group < 0] = rng.integers(0, n // 2 + 1, int((group < 0).sum()))
    values = rng.random((n, columns)) * 10.0 ** rng.integers(0, 9, (n, columns))
    values[rng.random((n, columns)) < 0.2] = 0.0
    once = rng.random(n) < one_time if one_time else None
    return [a.tobytes() for a in noise.variance_and_one_time(group, when, values, groups, once)]


@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize("case", list(NOISE_CASES))
def test_noise_sums(both, case: str, in_order: bool) -> None:
    ref, got = both(noise_sums, len(case), **NOISE_CASES[case], in_order=in_order)
    assert ref == got


def test_noise_split_by_counting_where_in_time_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C pass splits the instances where the kept ones come in time order (ties too), and hands
    them to numpy's sort where one comes before the one before it."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    monkeypatch.setenv(native.ENV, "1")
    group = np.array([0, -1, 1, 0, 1, 1, 0, 0], np.int64)
    when = np.array([1, 0, 2, 2, 3, 5, 5, 9], np.int64)
    total, n, in_spread, order = noise._spread_c(group, when, 2, None)
    assert total.tolist() == [4, 3] and n.tolist() == [3.0, 2.0]
    assert in_spread.tolist() == [False, False, False, True, True, True, True, True]
    assert order.tolist() == [3, 6, 7, 4, 5]
    once = np.array([0, 0, 0, 1, 0, 0, 1, 0], bool)  # group 0 left with one: all of it in the spread
    total, n, in_spread, order = noise._spread_c(group, when, 2, once)
    assert n.tolist() == [4.0, 2.0] and order.tolist() == [0, 3, 6, 7, 4, 5]
    when[4] = 1
    assert noise._spread_c(group, when, 2, None) is None
