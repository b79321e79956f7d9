"""The what-if's C loops (rlscope/analysis/native/whatif.c) against their numpy versions, bit for bit.

Each function of rlscope/analysis/whatif.py that calls one is run with the C loops and with
``RLSCOPE_NATIVE_ANALYSIS=0`` on random inputs and edge cases; the results must be the same arrays
(dtype, shape, bytes). Each case also says whether the C loop must have answered or handed back to
numpy (input it does not take: times out of order, points that fall inside runs), so a C loop that
wrongly gives up fails too.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rlscope.analysis import native, whatif
from tests.test_whatif import _inputs, _learner, _process, _worker


def _flat(x: Any) -> Any:
    """A result as plain values: arrays by dtype, shape and bytes, dataclasses field by field."""
    if isinstance(x, np.ndarray):
        return (str(x.dtype), x.shape, x.tobytes())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [(f.name, _flat(getattr(x, f.name))) for f in dataclasses.fields(x)]
    if isinstance(x, (list, tuple)):
        return [_flat(v) for v in x]
    if isinstance(x, dict):
        return {k: _flat(v) for k, v in x.items()}
    return x


@pytest.fixture
def both(monkeypatch) -> Callable[..., Any]:
    """``both(c_answers, f, *args)``: ``f(*args)`` with the C loops and with numpy's, checked the same,
    and the first C call's answer checked: a count (>= 0) where ``c_answers``, else -1 (numpy's turn)."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    answers: list[tuple[str, int]] = []
    real = native.function

    def spy(name: str, *argtypes: Any, restype: Any = None) -> Callable[..., Any] | None:
        fn = real(name, *argtypes, restype=restype)
        if fn is None or not name.startswith("whatif_"):  # the other areas' loops answer nothing here
            return fn

        def call(*args: Any) -> Any:
            got = fn(*args)
            answers.append((name, int(got)))
            return got

        return call

    monkeypatch.setattr(native, "function", spy)

    def run(c_answers: bool | None, f: Callable[..., Any], *args: Any) -> Any:
        answers.clear()
        monkeypatch.setenv(native.ENV, "1")
        got = f(*args)
        called = list(answers)
        monkeypatch.setenv(native.ENV, "0")
        want = f(*args)
        monkeypatch.setenv(native.ENV, "1")
        assert not answers[len(called) :], "numpy's path called C"
        assert _flat(got) == _flat(want)
        if c_answers is not None:
            assert called, "no C loop was called"
            assert (called[0][1] >= 0) == c_answers, called  # the function's own (numpy's may call others)
        return got

    return run


def _runs(rng: np.random.Generator, n: int, n_keys: int, dup: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """n runs' starts (sorted, some equal: runs of no time) and keys (int32)."""
    step = rng.integers(0, 50, n)
    step[rng.random(n) < dup] = 0
    t = np.cumsum(step).astype(np.int64) + 1000
    return t, rng.integers(0, n_keys, n).astype(np.int32)


# --------------------------------------------------------------------------- _main_runs


def _timeline(rng: np.random.Generator, n: int, n_inst: int, pad: int = 3) -> Any:
    """A timeline's columns as _main_runs reads them: rows of one instance (-1: none) and category in
    stretches, times sorted; ``pad`` rows of other threads on each side of the main thread's."""
    stretch = rng.integers(1, 6, n)
    op = np.repeat(rng.integers(-1, n_inst, n), stretch)[:n].astype(np.int32)
    cat = np.repeat(rng.integers(0, 4, n), rng.integers(1, 4, n))[:n].astype(np.int8)
    ts = np.cumsum(rng.integers(0, 9, n)).astype(np.int64) + 10**12
    wrap = np.concatenate
    tl = types.SimpleNamespace(
        op=wrap([np.zeros(pad, np.int32), op, np.zeros(pad, np.int32)]),
        cat=wrap([np.zeros(pad, np.int8), cat, np.zeros(pad, np.int8)]),
        ts=wrap([np.zeros(pad, np.int64), ts, np.zeros(pad, np.int64)]),
    )
    return tl, slice(pad, pad + n)


def _tables(rng: np.random.Generator, tl: Any, main: slice, inst_name: np.ndarray) -> tuple:
    """(inst_code, key_of, idle) as process_inputs makes them for ``tl``'s main rows: every code of
    theirs keyed, and keys idle at random."""
    inst_code = (inst_name + 1) * 16
    present = np.zeros((int(inst_name.max()) + 2) * 16, bool)
    present[inst_code[tl.op[main]] + tl.cat[main]] = True
    key_of = np.cumsum(present, dtype=np.int32)
    return inst_code, key_of, rng.random(int(key_of[-1]) + 1) < 0.5


@pytest.mark.parametrize(("n", "n_inst"), [(1, 1), (2, 1), (7, 3), (5000, 40), (200_000, 3000)])
@pytest.mark.parametrize("is_parent", [False, True])
def test_main_runs(both, n: int, n_inst: int, is_parent: bool) -> None:
    rng = np.random.default_rng(n + is_parent)
    tl, main = _timeline(rng, n, n_inst)
    inst_name = np.append(rng.integers(-1, 5, n_inst), -1).astype(np.int64)
    inst_code, key_of, idle = _tables(rng, tl, main, inst_name)
    ts = tl.ts[main]
    for span in ((int(ts[0]), int(ts[-1]) + 5), (int(ts[0]) - 3, int(ts[n // 2]))):  # end inside: clamped
        for flags in (idle, np.zeros_like(idle), None):
            args = tl, main, span, inst_code, key_of, is_parent, flags
            run_t, run_key, run_inst, inst_t, flips, working = both(True, whatif._main_runs, *args)
            assert run_t[0] == inst_t[0] == span[0] and run_t.max() <= span[1]
            assert working == bool(run_inst.max() >= 0)
            if flags is None:
                assert flips is None
            else:  # the flips of the runs' keys, as _flips finds them
                assert flips.tolist() == both(True, whatif._flips, run_t, run_key, flags).tolist()
            codes = np.flatnonzero(np.diff(key_of, prepend=0))
            assert np.isin(codes[run_key - 1] // 16 - 1, inst_name).all()


def test_main_runs_of_one_instance_and_of_none(both) -> None:
    tl = types.SimpleNamespace(
        op=np.full(9, -1, np.int32), cat=np.zeros(9, np.int8), ts=np.arange(9, dtype=np.int64)
    )
    key_of = np.cumsum(
        np.eye(1, 6 * 16, 0, dtype=bool)[0] | np.eye(1, 6 * 16, 80, dtype=bool)[0], dtype=np.int32
    )
    for inst_name in (np.array([-1], np.int64), np.array([4, -1], np.int64)):
        for is_parent in (False, True):
            args = tl, slice(0, 9), (0, 20), (inst_name + 1) * 16, key_of, is_parent, np.ones(3, bool)
            got = both(True, whatif._main_runs, *args)
            assert [len(a) for a in got[:5]] == [1, 1, 1, 1, 0] and got[5] is False
    tl.op[:] = 0
    tl.cat[4:] = 2
    inst_code = np.array([80, 0], np.int64)
    key_of = np.cumsum(np.isin(np.arange(96), [80, 82]), dtype=np.int32)
    got = both(True, whatif._main_runs, tl, slice(2, 9), (2, 20), inst_code, key_of, True, None)
    assert got[0].tolist() == [2, 4] and got[1].tolist() == [1, 2] and got[3].tolist() == [2] and got[5]


def test_main_runs_working_is_a_run_begun_in_an_instance(both) -> None:
    """A run begun outside every instance is not working though an instance of no name (its code the
    same) continues it; a parent's runs begin at every instance."""
    tl = types.SimpleNamespace(
        op=np.array([-1, -1, 0, 0], np.int32), cat=np.zeros(4, np.int8), ts=np.arange(4, dtype=np.int64)
    )
    key_of = np.cumsum(np.arange(32) == 0, dtype=np.int32)
    for is_parent in (False, True):
        got = both(True, whatif._main_runs, tl, slice(0, 4), (0, 9), np.zeros(2, np.int64), key_of, is_parent)
        assert got[5] is is_parent and len(got[0]) == 1 + is_parent


def test_main_runs_of_wide_instance_ids_are_numpys(both) -> None:
    rng = np.random.default_rng(3)
    tl, main = _timeline(rng, 100, 5)
    tl.op = tl.op.astype(np.int64)  # instance ids past int32's: the numpy loops alone
    inst_code, key_of, _ = _tables(rng, tl, main, np.array([1, 2, 3, 4, 5, -1]))
    with pytest.raises(AssertionError, match="no C loop"):
        both(True, whatif._main_runs, tl, main, (0, 10**13), inst_code, key_of, False, None)
    with pytest.raises(AssertionError, match="no C loop"):
        both(True, whatif._main_codes, tl, main, inst_code, len(key_of))


def test_main_runs_of_a_key_outside_the_idle_table_are_numpys(both) -> None:
    rng = np.random.default_rng(4)
    tl, main = _timeline(rng, 300, 6)
    inst_code, key_of, idle = _tables(rng, tl, main, np.append(np.arange(6), -1))
    with pytest.raises(IndexError):  # handed to numpy, whose index says so
        both(False, whatif._main_runs, tl, main, (0, 10**13), inst_code, key_of, False, idle[:1])


def _one_pass_and_passes(monkeypatch, tl, main, span, inst_code, key_of, idle, rec_t, worker) -> tuple:
    """(_main_pass's result with the C loops, what _main_thread and _stretches make of the same with
    numpy's): what process_inputs keeps of a process that is no parent and makes no waiting calls."""
    given = np.unique(np.concatenate([np.array([span[0]], np.int64), rec_t]))
    got = whatif._main_pass(tl, main, span, inst_code, key_of, idle, given, worker)
    monkeypatch.setenv(native.ENV, "0")
    none = np.zeros(0, np.int64)
    drawn, (run_t, run_key, _), nodes, _, working = whatif._main_thread(
        tl, main, span, inst_code, key_of, False, idle, (none, none, none), rec_t, worker
    )
    want = drawn, whatif._stretches(run_t, run_key, span[1], nodes), working
    monkeypatch.setenv(native.ENV, "1")
    return got, want


@pytest.mark.parametrize(("n", "n_inst"), [(1, 1), (2, 1), (7, 3), (5000, 40), (100_000, 3000)])
@pytest.mark.parametrize("worker", [False, True])
def test_main_pass(monkeypatch, n: int, n_inst: int, worker: bool) -> None:
    """The drawn path and the stretches from the rows in one pass, as the passes make them: nodes on
    rows' times, inside runs, before the start and past the end, none; every key idle, none, some."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    rng = np.random.default_rng(n + 10 * worker)
    tl, main = _timeline(rng, n, n_inst)
    tl.op[main.start] = -1  # the first run outside every instance: working from a later one's
    inst_name = np.append(rng.integers(-1, 5, n_inst), -1).astype(np.int64)
    inst_code, key_of, idle = _tables(rng, tl, main, inst_name)
    ts = tl.ts[main]
    lo, hi = int(ts[0]) - 3, int(ts[-1]) + 5
    on_rows = rng.choice(ts, min(n, 40))
    inside = rng.integers(lo - 5, hi + 10, 40)
    for span in ((lo, hi), (lo, int(ts[n // 2]) + 1)):  # the end past the rows, or among them
        for rec_t in (np.zeros(0, np.int64), np.sort(np.concatenate([on_rows, inside]))):
            for flags in (idle, np.zeros_like(idle), np.ones_like(idle)):
                args = tl, main, span, inst_code, key_of, flags, rec_t, worker
                got, want = _one_pass_and_passes(monkeypatch, *args)
                assert got is not None
                assert _flat(got) == _flat(want)


def test_main_pass_every_key_in_every_stretch(monkeypatch) -> None:
    """Each node stretch holds time of every key: its entries fill the places made for them (a key each
    per stretch, where there are few nodes), and the pass keeps what the passes make."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    n = 600
    ts = np.arange(n, dtype=np.int64) * 10 + 10**12
    tl = types.SimpleNamespace(op=np.zeros(n, np.int32), cat=(np.arange(n) % 4).astype(np.int8), ts=ts)
    main = slice(0, n)
    inst_code, key_of, idle = _tables(np.random.default_rng(5), tl, main, np.array([0, -1], np.int64))
    rec_t = ts[[200, 400]] + 5
    got, want = _one_pass_and_passes(monkeypatch, tl, main, (int(ts[0]), int(ts[-1]) + 5), inst_code, key_of,
                                     idle, rec_t, False)  # fmt: skip
    assert got is not None and _flat(got) == _flat(want)
    assert len(got[1][3]) == 3 * 4  # three stretches, four keys each


def _small_main_pass_case(seed: int) -> tuple:
    """A 300-row main thread of 6 instances, its tables and a span over its rows, one node at the
    span's start: (tl, main, span, inst_code, key_of, idle, nodes); skips where no C loops run."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    rng = np.random.default_rng(seed)
    tl, main = _timeline(rng, 300, 6)
    inst_code, key_of, idle = _tables(rng, tl, main, np.append(np.arange(6), -1))
    ts = tl.ts[main]
    span = (int(ts[0]), int(ts[-1]) + 5)
    return tl, main, span, inst_code, key_of, idle, np.array([span[0]], np.int64)


def test_main_pass_hands_back_what_it_does_not_take(monkeypatch) -> None:
    """Times out of order, or a stretch of 2**53 ns: _main_thread's passes run."""
    tl, main, span, inst_code, key_of, idle, nodes = _small_main_pass_case(9)
    assert whatif._main_pass(tl, main, span, inst_code, key_of, idle, nodes, False) is not None
    back = tl.ts.copy()
    back[main.start + 100] = back[main.start + 99] - 1
    tl.ts = back
    assert whatif._main_pass(tl, main, span, inst_code, key_of, idle, nodes, False) is None
    tl.ts = np.where(np.arange(len(back)) >= main.start + 100, back + 2**53, back)
    tl.ts[main.start + 100] = tl.ts[main.start + 101]
    far = (span[0], int(tl.ts[main][-1]) + 5)
    assert whatif._main_pass(tl, main, far, inst_code, key_of, idle, nodes, False) is None
    tl.ts = back  # out of order after the end: rows the pass only checks
    at_end = (span[0], int(back[main.start + 99]))
    assert whatif._main_pass(tl, main, at_end, inst_code, key_of, idle, nodes, False) is None
    tl.ts = back.copy()
    tl.ts[main.start + 100] = tl.ts[main.start + 99]
    assert whatif._main_pass(tl, main, at_end, inst_code, key_of, idle, nodes, False) is not None


def test_main_pass_hands_back_a_category_it_does_not_key(monkeypatch) -> None:
    """A category outside [0, 16) (a code the pass's per-category sums do not hold), or two categories
    of one instance sharing a key (sums per category would not be sums per key): the passes run, and
    the rows before it are no reason to."""
    tl, main, span, inst_code, key_of, idle, nodes = _small_main_pass_case(11)
    key_of = np.append(key_of, np.arange(16, dtype=np.int32) + key_of[-1])  # codes past the last: keyed
    assert whatif._main_pass(tl, main, span, inst_code, key_of, idle, nodes, False) is not None
    for row in (0, 150, 299):
        wide = tl.cat.copy()
        wide[main.start + row] = 16
        tl2 = types.SimpleNamespace(op=tl.op, ts=tl.ts, cat=wide)
        assert whatif._main_pass(tl2, main, span, inst_code, key_of, idle, nodes, False) is None
    op = int(tl.op[main.start + 150])
    base = int(inst_code[op])
    joined = key_of.copy()
    joined[base : base + 16] = joined[base + int(tl.cat[main.start + 150])]
    rows = (tl.op[main] == op) & (tl.cat[main] != tl.cat[main.start + 150])
    assert rows.any()  # the instance has rows of another category: two of its categories share a key
    assert whatif._main_pass(tl, main, span, inst_code, joined, idle, nodes, False) is None


@pytest.mark.parametrize("n", [2, 50, 20_000])
@pytest.mark.parametrize("worker", [False, True])
def test_main_pass_of_rows_at_one_time(monkeypatch, n: int, worker: bool) -> None:
    """Rows mostly at the time of the row before (stretches of no time: an instance's first row at the
    start of the drawn stretch the one before opened, which then goes on into it), the end among them
    with instances and categories changing after it, nodes on the rows' times: as the passes make it."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    rng = np.random.default_rng(n + worker)
    tl, main = _timeline(rng, n, 5)
    tl.op[main.start] = -1
    ts = np.cumsum(rng.random(n) < 0.2).astype(np.int64) + 10**12
    tl.ts[main] = ts
    inst_code, key_of, idle = _tables(rng, tl, main, np.append(rng.integers(-1, 3, 5), -1))
    rec_t = np.unique(rng.choice(ts, min(n, 30)))
    spans = [(int(ts[0]), int(ts[-1]) + 2), (int(ts[0]) - 1, int(ts[0]) + 1)]
    if ts[n // 2] > ts[0]:
        spans.append((int(ts[0]), int(ts[n // 2])))
    for span in spans:
        for flags in (idle, np.zeros_like(idle), np.ones_like(idle)):
            got, want = _one_pass_and_passes(
                monkeypatch, tl, main, span, inst_code, key_of, flags, rec_t, worker
            )
            assert got is not None
            assert _flat(got) == _flat(want)


@pytest.mark.parametrize(
    ("op", "cat", "working"),
    [
        ([-1, -1, 0, 0], [0, 0, 0, 0], False),  # an instance of no name continues the run begun outside
        ([-1, -1, 0, 0, 0], [0, 0, 0, 1, 1], True),  # ... and a run begins in it: at its second category
        ([-1, 0, 0, 0, 0], [0, 0, 0, 0, 0], False),  # in it from its first row, every row at end
        ([0, 0, 0], [1, 1, 1], True),  # the first run, begun in an instance
        ([0], [1], True),
        ([-1, 0, 1], [0, 0, 0], False),  # instances of no name, one run
    ],
)
def test_main_pass_working_is_a_run_begun_in_an_instance(monkeypatch, op, cat, working: bool) -> None:
    """Working is a run begun in an instance, as the passes find it: an instance of no name (its codes
    those outside every instance) continuing a run begun outside is none; at end or not."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    n = len(op)
    tl = types.SimpleNamespace(
        op=np.array(op, np.int32), cat=np.array(cat, np.int8), ts=np.arange(n, dtype=np.int64) * 10
    )
    inst_code = np.zeros(3, np.int64)
    key_of = np.cumsum(np.arange(32) < 2, dtype=np.int32)
    idle = np.zeros(3, bool)
    for end in (n * 10, 15):
        got, want = _one_pass_and_passes(
            monkeypatch, tl, slice(0, n), (0, end), inst_code, key_of, idle, np.zeros(0, np.int64), False
        )
        assert got is not None and _flat(got) == _flat(want)
        assert got[2] is working


def _by_code_and_by_key(rng, tl, main, span, n_inst, rec_t, worker, waits: bool) -> tuple:
    """(_main_pass_by_code's codes and what _by_key makes of what it keeps, _main_codes' codes and
    _main_pass's by key, whether the process records its waits and has python time outside operations:
    the idle keys of another set, handed back): names some of them unannotated, and with ``waits`` a
    row outside every operation waiting."""
    from rlscope.categories import CATEGORY_NAMES, PYTHON, UNANNOTATED, WAITING

    names = [UNANNOTATED if rng.random() < 0.3 else f"op{i}" for i in range(6)]
    proc = types.SimpleNamespace(name=lambda i: names[i])
    inst_name = np.append(rng.integers(-1, 6, n_inst), -1).astype(np.int64)
    outside = np.flatnonzero(inst_name[tl.op[main]] < 0)
    if waits and len(outside):
        tl.cat[main.start + outside[len(outside) // 2]] = WAITING
    inst_code = (inst_name + 1) * 16
    size = (int(inst_name.max()) + 2) * 16
    given = np.unique(np.concatenate([np.array([span[0]], np.int64), rec_t]))
    by_code = whatif._main_pass_by_code(proc, tl, main, span, inst_code, size, given, worker)
    present = whatif._main_codes(tl, main, inst_code, size)
    key_of = np.cumsum(present, dtype=np.int32)
    ops = [UNANNOTATED if c // 16 == 0 else names[c // 16 - 1] for c in np.flatnonzero(present)]
    cats = [c % 16 for c in np.flatnonzero(present)]
    keys = [("", "")] + [(o, CATEGORY_NAMES[c]) for o, c in zip(ops, cats, strict=True)]
    idle_key = whatif._idle_keys(keys)
    out = [c for o, c in zip(ops, cats, strict=True) if o == UNANNOTATED]
    other_set = WAITING in out and PYTHON in out
    got = by_code[1], whatif._by_key(*by_code, key_of, idle_key)
    return (
        got,
        (present, whatif._main_pass(tl, main, span, inst_code, key_of, idle_key, given, worker)),
        other_set,
    )


@pytest.mark.parametrize(("n", "n_inst"), [(1, 1), (2, 1), (7, 3), (5000, 40), (100_000, 3000)])
@pytest.mark.parametrize("worker", [False, True])
def test_main_pass_by_code(n: int, n_inst: int, worker: bool) -> None:
    """The pass keyed by code, then numbered, keeps what the pass by key keeps and reads the codes
    _main_codes reads; a process that records its waits, with python time outside operations, is
    handed back (its idle keys differ from the pass's)."""
    if native.library() is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    handed_back = 0
    for waits in (False, True):
        rng = np.random.default_rng(n + 10 * worker)
        tl, main = _timeline(rng, n, n_inst)
        ts = tl.ts[main]
        span = int(ts[0]) - 3, int(ts[-1]) + 5
        rec_t = np.sort(rng.integers(span[0] - 5, span[1] + 10, 40))
        (present, got), (want_present, want), other_set = _by_code_and_by_key(
            rng, tl, main, span, n_inst, rec_t, worker, waits
        )
        assert present.tolist() == want_present.tolist()
        assert (got is None) == other_set
        handed_back += other_set
        if got is not None:
            assert _flat(got) == _flat(want)
    assert handed_back or n < 5000  # the large ones have python time outside operations


def _renumbered(keys: np.ndarray, to_key: np.ndarray) -> np.ndarray:
    out = keys.copy()
    whatif._renumber(out, to_key)
    return out


@pytest.mark.parametrize("n", [0, 1, 7, 100_000])
def test_renumber(both, n: int) -> None:
    rng = np.random.default_rng(n)
    to_key = np.cumsum(rng.random(300) < 0.5, dtype=np.int32)
    keys = rng.integers(-300, 300, n).astype(np.int32)  # below 0: from the end, as numpy reads them
    got = both(True if n else None, _renumbered, keys, to_key)
    assert got.tolist() == to_key[keys].tolist()


@pytest.mark.parametrize("bad", [-301, 300])
def test_renumber_of_a_key_outside_the_table_raises(monkeypatch, bad: int) -> None:
    keys = np.array([3, bad, 5], np.int32)
    for env in ("1", "0"):
        monkeypatch.setenv(native.ENV, env)
        with pytest.raises(IndexError):
            whatif._renumber(keys.copy(), np.arange(300, dtype=np.int32))


# --------------------------------------------------------------------------- codes and idle flips


@pytest.mark.parametrize(("n", "n_inst"), [(0, 1), (1, 1), (7, 3), (5000, 40), (200_000, 3000)])
def test_main_codes(both, n: int, n_inst: int) -> None:
    rng = np.random.default_rng(n)
    tl, main = _timeline(rng, n, n_inst) if n else _timeline(rng, 1, n_inst)
    main = main if n else slice(main.start, main.start)
    inst_name = np.append(rng.integers(-1, 5, n_inst), -1).astype(np.int64)
    inst_code = (inst_name + 1) * 16
    size = (int(inst_name.max()) + 2) * 16
    got = both(True, whatif._main_codes, tl, main, inst_code, size)
    codes = inst_code[tl.op[main]] + tl.cat[main]
    assert np.flatnonzero(got).tolist() == np.unique(codes).tolist()


def test_main_codes_outside_the_table_are_numpys(both) -> None:
    rng = np.random.default_rng(5)
    tl, main = _timeline(rng, 50, 4)
    inst_code = np.array([16, 32, 48, 64, 0], np.int64)
    with pytest.raises(IndexError):  # numpy's index says so
        both(False, whatif._main_codes, tl, main, inst_code, 40)


@pytest.mark.parametrize("n", [0, 1, 2, 9, 100_000])
def test_flips(both, n: int) -> None:
    rng = np.random.default_rng(n)
    t, key = _runs(rng, n, 7)
    for idle in (rng.random(7) < 0.5, np.zeros(7, bool), np.ones(7, bool)):
        got = both(True, whatif._flips, t, key, idle)
        assert len(got) <= max(n - 1, 0)
    if n:
        key[n // 2] = -1  # read from the table's end by numpy's index: not by C
        both(False, whatif._flips, t, key, np.zeros(7, bool))


# --------------------------------------------------------------------------- the drawn path


@pytest.mark.parametrize(
    ("n", "n_keys", "n_inst", "n_cuts"),
    [
        (1, 1, 0, 0),
        (2, 3, 1, 0),
        (12, 3, 4, 2),
        (3000, 5, 900, 400),
        (100_000, 12, 20_000, 30_000),
        (5000, 300, 50, 3),
    ],
)
@pytest.mark.parametrize("on_runs", [True, False])
@pytest.mark.parametrize("base", [0, 1_700_000_000 * 10**9])  # times since the epoch: above 2**53
def test_drawn(both, n: int, n_keys: int, n_inst: int, n_cuts: int, on_runs: bool, base: int) -> None:
    """Each stretch between points as its largest key, ties to the smallest, none to 0: points on runs'
    starts (numpy's whole runs) or anywhere (numpy cuts the runs)."""
    rng = np.random.default_rng(n * 7 + n_keys + on_runs)
    t, key = _runs(rng, n, n_keys)
    t += base
    for end in {int(t[-1]) + 11, max(int(t[-1]), int(t[0]) + 1)}:
        times = t if on_runs else np.arange(int(t[0]) - 5, end + 5)
        inst_t = np.sort(np.concatenate([[t[0]], rng.choice(times, n_inst)]))
        cuts = np.sort(rng.choice(times, n_cuts))  # the ones at or before t[0], at or after end: left out
        s, k = both(True, whatif._drawn, t, key, inst_t, cuts, end)
        assert s[0] == t[0] and (np.diff(s) > 0).all() and (k[1:] != k[:-1]).all()


def test_drawn_ties_go_to_the_smallest_key(both) -> None:
    t = np.array([0, 10, 20, 30, 35, 40, 40, 50], np.int64)
    key = np.array([3, 2, 1, 1, 1, 2, 0, 4], np.int32)
    none = np.zeros(0, np.int64)
    s, k = both(True, whatif._drawn, t, key, np.array([0, 30, 40], np.int64), none, 50)
    # stretch 0-30: keys 3, 2, 1 at 10 ns each; 30-40: 1; 40-50: 2 (no time), 0 (10 ns)
    assert s.tolist() == [0, 40] and k.tolist() == [1, 0]
    s, k = both(True, whatif._drawn, t, key, np.array([0], np.int64), none, 50)
    assert k.tolist() == [1]
    s, k = both(True, whatif._drawn, t, key, np.array([0, 15], np.int64), np.array([15, 25], np.int64), 50)
    # 0-15: 3 (10), 2 (5); 15-25: 2 (5), 1 (5); 25-50: 1 (15), 0 (10)
    assert s.tolist() == [0, 15] and k.tolist() == [3, 1]


def test_drawn_out_of_order_or_of_a_stretch_past_2_53_ns_is_numpys(both) -> None:
    rng = np.random.default_rng(5)
    t, key = np.arange(0, 5000, 10, dtype=np.int64), rng.integers(0, 4, 500).astype(np.int32)
    points, none = np.array([0, 1001, 2000], np.int64), np.zeros(0, np.int64)
    both(False, whatif._drawn, t, key, points[::-1].copy(), none, 5003)  # the points
    both(False, whatif._drawn, t, key, none, points[::-1].copy(), 5003)
    shuffled = t.copy()
    shuffled[[200, 300]] = shuffled[[300, 200]]  # the runs
    both(False, whatif._drawn, shuffled, key, points, none, 5003)
    both(False, whatif._drawn, t, key, points, none, 4000)  # runs after the end
    both(False, whatif._drawn, t[:1], key[:1], points[:1], none, 0)  # an end at the start
    long = np.array([0, 2**53 + 10], np.int64)  # sums no longer shown exact in any order
    both(False, whatif._drawn, long, key[:2], points[:1], none, 2**53 + 20)
    both(True, whatif._drawn, long, key[:2], np.array([0, 2**52], np.int64), none, 2**53 + 20)


# --------------------------------------------------------------------------- the replay's stretches


@pytest.mark.parametrize(
    ("n", "n_nodes", "n_keys"),
    [
        (1, 0, 1),
        (7, 0, 3),
        (7, 3, 3),
        (50_000, 0, 6),
        (50_000, 20_000, 6),
        (20_000, 300, 2000),
        (300, 9, 40),
        (3000, 1000, 40),
        (3000, 9000, 5),
    ],
)
@pytest.mark.parametrize("on_runs", [True, False])
@pytest.mark.parametrize("base", [0, 1_700_000_000 * 10**9])
def test_stretches(both, n: int, n_nodes: int, n_keys: int, on_runs: bool, base: int) -> None:
    """Each stretch's time per key: nodes on runs' starts (numpy's whole runs) or anywhere (numpy's
    runs and nodes' parts), time in elastic intervals as waiting."""
    rng = np.random.default_rng(n + n_nodes + n_keys + on_runs)
    t, key = _runs(rng, n, n_keys)
    t += base
    end = int(t[-1]) + 3
    times = t if on_runs else np.arange(int(t[0]) - 3, end + 3)
    nodes = np.unique(np.concatenate([[t[0]], rng.choice(times, n_nodes)]))
    edges = np.sort(rng.choice(np.arange(int(t[0]) - 5, end + 10), 8, replace=False))
    for elastic in (None, np.stack([edges[0:2:2], edges[1:2:2]]), np.stack([edges[0::2], edges[1::2]])):
        _, off, ent_key, ns = both(True, whatif._stretches, t, key, end, nodes, elastic)
        assert off[-1] == len(ent_key) == len(ns) and (ns > 0).all()
        assert int(ns.sum()) == end - int(t[0])


def test_stretches_of_runs_of_no_time_keep_no_key(both) -> None:
    t = np.array([5, 5, 5, 5], np.int64)
    _, off, ent_key, _ = both(True, whatif._stretches, t, np.array([1, 2, 1, 3], np.int32), 5, t[:1])
    assert ent_key.tolist() == [] and off.tolist() == [0, 0]


def test_stretches_out_of_order_or_past_2_53_ns_are_numpys(both) -> None:
    t, key = np.arange(0, 100, 10, dtype=np.int64), np.arange(10, dtype=np.int32) % 3
    nodes = np.array([0, 15, 50], np.int64)
    shuffled = t.copy()
    shuffled[[3, 6]] = shuffled[[6, 3]]
    for at in (nodes, shuffled[:1]):  # the runs (points in runs, one stretch of whole runs)
        both(False, whatif._stretches, shuffled, key, 100, at)
    both(False, whatif._stretches, t, key, 80, nodes)  # runs after the end
    both(False, whatif._stretches, t, key, 100, nodes, np.array([[40, 10], [45, 20]], np.int64))  # intervals
    long = np.array([0, 2**53 + 10], np.int64)  # sums no longer shown exact in any order
    for at in (np.array([0, 5], np.int64), long[:1]):
        both(False, whatif._stretches, long, key[:2], 2**53 + 20, at)
    both(True, whatif._stretches, long, key[:2], 2**53 + 20, np.array([0, 2**52], np.int64))


# --------------------------------------------------------------------------- the path's intervals


@pytest.mark.parametrize(("n", "n_int"), [(0, 1), (1, 1), (1, 3), (40, 0), (40, 1), (40, 6), (100_000, 2000)])
def test_clip(both, n: int, n_int: int) -> None:
    rng = np.random.default_rng(n * 3 + n_int)
    ds = np.cumsum(rng.integers(1, 20, n)).astype(np.int64)
    dk = rng.integers(0, 5, n).astype(np.int32)
    end = int(ds[-1]) + 9 if n else 100
    edges = np.unique(rng.integers(-5, end + 15, 2 * n_int))
    edges = edges[: len(edges) // 2 * 2]
    lo, hi = edges[0::2].astype(np.int64), edges[1::2].astype(np.int64)
    for shown in (np.ones(5, bool), rng.random(5) < 0.6):
        s, e, k = both(True, whatif._clip, (ds, dk), end, lo, hi, shown)
        assert (e > s).all() and shown[k].all()


def test_clip_joins_touching_runs_of_one_key(both) -> None:
    ds = np.array([0, 10, 20, 30, 40], np.int64)
    dk = np.array([1, 1, 2, 1, 1], np.int32)
    shown = np.array([True, True, False])
    lo, hi = np.array([5, 35], np.int64), np.array([35, 60], np.int64)
    s, e, k = both(True, whatif._clip, (ds, dk), 50, lo, hi, shown)
    assert list(zip(s.tolist(), e.tolist(), k.tolist(), strict=True)) == [(5, 20, 1), (30, 50, 1)]


def test_clip_of_runs_out_of_order_is_numpys(both) -> None:
    ds = np.array([0, 10, 5, 30], np.int64)
    dk = np.zeros(4, np.int32)
    both(
        False, whatif._clip, (ds, dk), 50, np.array([0], np.int64), np.array([50], np.int64), np.ones(1, bool)
    )
    both(
        False,
        whatif._clip,
        (ds[:2], dk[:2]),
        5,
        np.array([0], np.int64),
        np.array([50], np.int64),
        np.ones(1, bool),
    )


def _drawn_and_intervals(rng: np.random.Generator, n: int, n_int: int, touching: bool) -> tuple:
    """A drawn path (runs of no time among them, keys repeated: pieces to join) and sorted disjoint
    intervals (``touching``: some end where the next begins), as _clip takes them."""
    ds = np.cumsum(rng.integers(0, 20, n) * (rng.random(n) < 0.8)).astype(np.int64)
    dk = rng.integers(0, 4, n).astype(np.int32)
    end = int(ds[-1]) + 9 if n else 100
    edges = np.unique(rng.integers(-5, end + 15, 2 * n_int))
    edges = edges[: len(edges) // 2 * 2]
    lo, hi = edges[0::2].astype(np.int64), edges[1::2].astype(np.int64)
    if touching and len(lo) > 1:
        lo[1:] = np.where(rng.random(len(lo) - 1) < 0.5, hi[:-1], lo[1:])
    return (ds, dk), end, lo, hi


def _windows(rng: np.random.Generator, end: int) -> list[tuple[int, int]]:
    """Windows before, after and around everything, of no width, and at random."""
    w = [(-50, -10), (end + 10, end + 50), (-50, end + 50), (0, 0), (end // 2, end // 2)]
    return w + [tuple(sorted(rng.integers(-5, end + 10, 2).tolist())) for _ in range(20)]


def _part_picks(part: whatif._PathPart, k: int, windows: list[tuple[int, int]]) -> list:
    """A part's k longest, then its intervals in each window, a fresh copy of it read each time (those
    of a part its longest pass has checked and of one it has not)."""
    fresh = dataclasses.replace(part)
    out = [part.longest(k)]
    for lo, hi in windows:
        out += [part.overlapping(lo, hi), dataclasses.replace(fresh).overlapping(lo, hi)]
    return out


_PARTS = [(0, 1, False), (1, 1, False), (1, 3, False), (40, 0, False), (40, 1, False), (40, 6, True)]


@pytest.mark.parametrize(
    ("n", "n_int", "touching"),
    [*_PARTS, (3000, 200, True), (100_000, 2000, False), (100_000, 1, False), (20_000, 300, True)],
)
def test_path_part_longest_and_overlapping(both, n: int, n_int: int, touching: bool) -> None:
    """A main thread's k longest intervals and those in a window, read from its drawn path in C without
    writing the others, as numpy picks them of _clip's intervals."""
    rng = np.random.default_rng(n * 7 + n_int + touching)
    drawn, end, lo, hi = _drawn_and_intervals(rng, n, n_int, touching)
    windows = _windows(rng, end)
    for shown in (np.ones(4, bool), rng.random(4) < 0.6, np.zeros(4, bool)):
        part = whatif._PathPart(0, 0, clip=(drawn, end, lo, hi, shown))
        for k in (1, 12, n + 5):
            got = both(True, _part_picks, part, k, windows)
            s, e, key = whatif._clip(drawn, end, lo, hi, shown)
            pick = np.argsort(s - e, kind="stable")[:k]
            assert _flat(got[0]) == _flat((pick, s[pick], e[pick], key[pick]))
            for (w_lo, w_hi), checked, fresh in zip(windows, got[1::2], got[2::2], strict=True):
                kept = (e > w_lo) & (s < w_hi)
                assert _flat(checked) == _flat(fresh) == _flat((s[kept], e[kept], key[kept]))


def test_path_part_of_runs_out_of_order_or_keys_outside_shown_is_numpys(both) -> None:
    """Runs out of order (inside an interval or outside every one), a key outside shown: numpy's."""
    shown, lo, hi = np.ones(2, bool), np.array([0, 30], np.int64), np.array([20, 60], np.int64)
    for ds, dk in (
        (np.array([0, 10, 5, 30], np.int64), np.zeros(4, np.int32)),
        (np.array([0, 10, 25, 22, 30], np.int64), np.zeros(5, np.int32)),
        (np.array([0, 10, 25, 40], np.int64), np.array([0, 0, 0, 1], np.int32)),
    ):
        part = whatif._PathPart(0, 0, clip=((ds, dk), 70, lo, hi, shown[: 2 - (dk.max() > 0)]))
        if dk.max() > 0:  # key 1 of a table of one: numpy's index raises, as does its path
            with pytest.raises(IndexError):
                both(False, _part_picks, part, 3, [(0, 100)])
            with pytest.raises(IndexError):  # C's, handing back, though the window reads no such run
                dataclasses.replace(part).overlapping(0, 5)
            continue
        both(False, whatif._PathPart.longest, part, 3)
        both(False, whatif._PathPart.overlapping, dataclasses.replace(part), 0, 100)


def _old_path_picks(intervals: whatif.PathIntervals, k: int, window: tuple[int, int], most: int) -> tuple:
    """The longest intervals and a window's as the path's intervals written whole were read."""
    cols = [p.columns() for p in intervals.parts]
    chain = np.concatenate([np.full(len(c[0]), p.chain) for c, p in zip(cols, intervals.parts, strict=True)])
    lane = np.concatenate([np.full(len(c[0]), p.lane) for c, p in zip(cols, intervals.parts, strict=True)])
    start, end, key = (np.concatenate([c[i] for c in cols]) for i in range(3))

    def rows(idx):
        return [
            {
                "pid": intervals.pids[int(chain[i])],
                "lane": "gpu" if lane[i] else "main",
                "operation": intervals.keys[int(chain[i])][int(key[i])][0],
                "category": intervals.keys[int(chain[i])][int(key[i])][1],
                "start_s": float(start[i]) / 1e9,
                "end_s": float(end[i]) / 1e9,
            }
            for i in idx
        ]

    longest = whatif._first_sorted(start - end, k)
    kept = np.flatnonzero((end > window[0]) & (start < window[1]))
    kept = kept[np.argsort(start[kept], kind="stable")]
    return rows(sorted(longest.tolist(), key=lambda i: int(start[i]))), rows(kept[:most].tolist()), len(kept)


@pytest.mark.parametrize("seed", range(6))
def test_path_intervals_as_written_whole(both, seed: int) -> None:
    """The path's longest intervals and a window's, read part by part, as the intervals written whole
    (every part's end to end) give them: ties in length and in start across parts and within a GPU
    part go to the first in path order."""
    rng = np.random.default_rng(seed)
    parts = []
    for c in range(3):
        drawn, end, lo, hi = _drawn_and_intervals(rng, 2000 * seed + 5, 30, seed % 2 == 1)
        parts.append(whatif._PathPart(c, 0, clip=(drawn, end, lo, hi, rng.random(4) < 0.8)))
        g = np.sort(rng.integers(0, end, 50)).astype(np.int64)
        dur = rng.integers(0, 4, 50).astype(np.int64) * 5
        parts.append(whatif._PathPart(c, 1, cols=(g, g + dur, rng.integers(0, 4, 50).astype(np.int32))))
    keys = [[(f"op{c}", f"cat{k}") for k in range(4)] for c in range(3)]
    intervals = whatif.PathIntervals(parts, [10, 11, 12], keys)
    for window in _windows(rng, 40 * seed + 100)[:8]:
        for k, most in ((12, 5), (1, 10**6), (500, 40)):
            want = _old_path_picks(intervals, k, window, most)
            got = both(True, lambda: (intervals.longest(k), *intervals.overlapping(*window, most)))  # noqa: B023
            assert _flat(list(got)) == _flat(list(want))


# --------------------------------------------------------------------------- the longest segments


@pytest.mark.parametrize("spread", [0, 1, 3, 10**12])
@pytest.mark.parametrize("n", [0, 1, 5, 12, 13, 5000, 200_000])
def test_first_sorted(both, spread: int, n: int) -> None:
    """The k smallest values' indices, equal ones in index order: ties, fewer values than k, in order,
    in reverse order."""
    values = np.random.default_rng(n + spread).integers(-spread, spread + 1, n)
    for v in (values, np.sort(values), np.sort(values)[::-1].copy()):
        for k in (1, 12):
            got = both(True, whatif._first_sorted, v, k)
            assert got.tolist() == np.argsort(v, kind="stable")[:k].tolist()


# --------------------------------------------------------------------------- end to end


def test_a_learner_with_gpu_work_and_workers(both, tmp_path, monkeypatch) -> None:
    """process_inputs and what_if on a trace with GPU work, syncs, a parent and its workers."""
    trace = tmp_path / "trace"
    _process(trace, monkeypatch, 100, 1, 0, _learner)
    _process(trace, monkeypatch, 101, 100, 2, _worker(16, 40))
    _process(trace, monkeypatch, 102, 100, 2, _worker(17, 60))
    inputs = both(None, lambda: _inputs(trace))
    both(None, whatif.what_if, *inputs)
