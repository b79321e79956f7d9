"""Nesting depth from parent links (analysis/intervals._depth) against a walk up the links, for ids
used as they are (compact) and ids spread wide, and bounded on a cycle no valid trace has; the
instances whose links they are (intervals._instances), by its C loop and by numpy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlscope import categories
from rlscope.analysis import intervals, native
from rlscope.analysis.intervals import _depth
from rlscope.analysis.overlap import merge_adjacent
from rlscope.trace import schema as S
from tests.test_native_breakdown import timeline
from tests.timelines import stretched


def _walk(ident: np.ndarray, parent: np.ndarray) -> list[int]:
    up = dict(zip(ident.tolist(), parent.tolist(), strict=True))
    out = []
    for p in parent.tolist():
        d = 0
        while p >= 0:
            d += 1
            p = up.get(p, -1)
        out.append(d)
    return out


def _forest(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ident = rng.permutation(n).astype(np.int64)
    parent = np.full(n, -1, np.int64)
    for k in range(1, n):  # each instance's parent one begun before it, or none
        if rng.random() < 0.8:
            parent[k] = ident[rng.integers(0, k)]
    return ident, parent


@pytest.mark.parametrize("spread", [1, 10**9])
@pytest.mark.parametrize("seed", range(5))
def test_depth_is_the_walk_up_the_parent_links(seed, spread):
    ident, parent = _forest(np.random.default_rng(seed), 300)
    ident, parent = ident * spread, np.where(parent >= 0, parent * spread, -1)
    parent[0] = 7 * spread + 12_345  # a parent that is no instance here: one link, then none
    assert _depth(ident, parent).tolist() == _walk(ident, parent)


def test_a_cycle_ends_with_a_bounded_depth():
    ident = np.arange(1000, dtype=np.int64)
    parent = np.roll(ident, 1)  # every instance its own ancestor
    depth = _depth(ident, parent)
    assert len(depth) == 1000 and (depth > 0).all()


@pytest.mark.parametrize("order", ["parents first", "any order", "an id twice", "a negative id"])
@pytest.mark.parametrize("seed", range(3))
def test_depth_in_one_pass_where_parents_come_first(monkeypatch, seed, order):
    """Compact ids whose parents come before them (the begins in row order) take the one C pass; in
    any other order, an id twice or a negative one, numpy's pointer jumping: both the walk's depths."""
    ident, parent = _forest(np.random.default_rng(seed), 400)
    parent[3] = 450  # a parent that is no instance here, above every id (still compact ones): one link
    if order == "any order":
        perm = np.random.default_rng(seed).permutation(len(ident))
        ident, parent = ident[perm], parent[perm]
    if order == "an id twice":
        ident[7] = ident[8]
    if order == "a negative id":
        ident[9] = -3
    top = int(max(ident.max(), parent.max(), 0)) + 1
    one_pass = intervals._depth_in_order(ident, parent, top)
    if native.library() is not None:
        assert (one_pass is not None) == (order == "parents first")
    got = {}
    for wanted in ("0", "1"):
        monkeypatch.setenv(native.ENV, wanted)
        got[wanted] = _depth(ident, parent).tolist()
    assert got["0"] == got["1"]
    if order in ("parents first", "any order"):  # ids no trace has: the two paths agree, on anything
        assert got["1"] == _walk(ident, parent)


INSTANCE_CASES = {
    "random": {"rows": 3000, "run": 5},
    "one thread": {"rows": 2000, "threads": 1, "run": 3},
    "wide ids": {"rows": 2000, "ids": np.int64},
    "int32 thread index": {"rows": 2000},  # a process of more threads than int16 holds: numpy's
    "an instance a row": {"rows": 500, "ops": 400, "phases": 50},
    "one row": {"rows": 1, "threads": 1},
    "empty": {"rows": 0, "threads": 1},
}


@pytest.mark.parametrize("case", list(INSTANCE_CASES))
@pytest.mark.parametrize("begin_kind", [S.OP_BEGIN, S.PHASE_BEGIN])
def test_instances_c_loop_and_numpy_agree(monkeypatch, case, begin_kind):
    """The operations' and phases' instances (intervals._instances) read in one C loop over their
    begins and by numpy's gathers: the same columns, types and bits; checked against a walk too."""
    tl = timeline(np.random.default_rng(len(case)), **INSTANCE_CASES[case])
    if case == "int32 thread index":
        tl = dataclasses.replace(tl, thread_idx=tl.thread_idx.astype(np.int32))
    # each phase instance's first row begins it, where no operation begins
    first = np.unique(tl.phase, return_index=True)[1]
    first = first[(tl.phase[first] >= 0) & (tl.kind[first] != S.OP_BEGIN)]
    tl.kind[first], tl.id[first] = S.PHASE_BEGIN, tl.phase[first]
    tl.name[first] = tl.inst_name[tl.phase[first]]
    p = intervals._Proc(None, tl, None, np.zeros(0, np.int64), np.zeros(0, np.int64))  # type: ignore[arg-type]
    got = {}
    for wanted in ("0", "1"):
        monkeypatch.setenv(native.ENV, wanted)
        tl.memo.clear()
        got[wanted] = intervals._instances(p, begin_kind)
    if native.library() is not None:
        ran = intervals._instances_c(tl, tl.scope_begins(), begin_kind, tl.op) is not None
        assert ran or case == "wide ids" if case != "int32 thread index" else not ran
    ref, c = got["0"], got["1"]
    assert list(ref) == list(c)
    for k in ref:
        assert ref[k].dtype == c[k].dtype and ref[k].tobytes() == c[k].tobytes(), k
    rows = np.flatnonzero(tl.kind == begin_kind)
    state = tl.op if begin_kind == S.OP_BEGIN else tl.phase
    parent = [int(state[r - 1]) if r > 0 and tl.thread[r - 1] == tl.thread[r] else -1 for r in rows.tolist()]
    assert c["parent"].tolist() == parent and c["start"].tolist() == tl.ts[rows].tolist()
    assert c["end"].tolist() == tl.inst_end[tl.id[rows]].tolist()
    assert c["thread"].tolist() == tl.thread[rows].tolist()


@pytest.mark.parametrize("case", list(INSTANCE_CASES))
def test_cpu_segments_read_off_the_times(case):
    """The CPU table's segments (intervals._cpu_segments) read their ends off the rows' times, no
    column of every row's made: the same as joined from that column, a thread's last row (of any
    length, some of none or below) ending at its thread's end."""
    tl = timeline(np.random.default_rng(len(case) + 40), **INSTANCE_CASES[case])
    for timeline_ in (tl, stretched(tl, -1)):
        timeline_.memo.pop("seg_end", None)
        got = intervals._cpu_segments(timeline_)
        assert "seg_end" not in timeline_.memo
        ts, seg_end = timeline_.ts, timeline_.seg_end
        keep = np.flatnonzero((timeline_.cat != categories.PYTHON) & (seg_end > ts))
        start, end, (th, cat) = merge_adjacent(
            ts[keep], seg_end[keep], timeline_.thread_idx[keep], timeline_.cat[keep]
        )
        want = (timeline_.threads[th], cat, start, end)
        assert all(a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(got, want, strict=True))
