"""The vectorized analyzer against brute-force references on random inputs (hypothesis)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rlscope.analysis.breakdown import UNANNOTATED, breakdown_timeline
from rlscope.analysis.overlap import overlap_by_group, union_length
from rlscope.analysis.timeline import build_timeline
from rlscope.categories import CATEGORY_NAMES
from rlscope.trace import schema as S

intervals = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 60)), max_size=25)


def brute_overlap(a, b, n_groups):
    """Unit-step grid: for each group and time unit, is any A / any B interval open?"""
    out = np.zeros((3, n_groups))
    for g in range(n_groups):
        for t in range(61):
            in_a = any(gg == g and s <= t < e for gg, s, e in a)
            in_b = any(gg == g and s <= t < e for gg, s, e in b)
            if in_a and not in_b:
                out[0, g] += 1
            elif in_b and not in_a:
                out[1, g] += 1
            elif in_a and in_b:
                out[2, g] += 1
    return out


def _arrays(iv):
    if not iv:
        z = np.zeros(0, np.int64)
        return z, z, z
    g, s, e = (np.array(x, np.int64) for x in zip(*iv, strict=True))
    return g, s, e


@settings(max_examples=200, deadline=None)
@given(intervals, intervals)
def test_overlap_matches_brute_force(a, b):
    got = np.array(overlap_by_group(*_arrays(a), *_arrays(b), 4))
    np.testing.assert_allclose(got, brute_overlap(a, b, 4))


@settings(max_examples=100, deadline=None)
@given(intervals)
def test_union_length(a):
    flat = [(0, s, e) for _, s, e in a]
    assert union_length(*_arrays(flat)[1:]) == brute_overlap(flat, [], 1)[0, 0]


# --- random nested programs: the timeline/breakdown vs a stack-walking reference ------------

NAMES = ["a", "b", "c"]


@st.composite
def programs(draw):
    """A random well-nested sequence of scope/phase/category enters and exits on 1-2 threads."""
    rows = []
    ids = iter(range(10_000))
    t = 0
    for thread in draw(st.sampled_from([[1], [1, 2]])):
        t_thread = 0
        ops, cats, phases = [], [], []
        if thread == 1:
            rows.append((0, thread, S.SESSION_START, -1, -1, -1, 0))
        for _ in range(draw(st.integers(0, 30))):
            t_thread += draw(st.integers(0, 5))
            action = draw(st.sampled_from(["op", "end_op", "cat", "end_cat", "phase", "end_phase"]))
            if action == "op":
                i, n = next(ids), draw(st.integers(0, 2))
                rows.append((t_thread, thread, S.OP_BEGIN, i, ops[-1][0] if ops else -1, n, 0))
                ops.append((i, n))
            elif action == "end_op" and ops:
                i, n = ops.pop()
                rows.append((t_thread, thread, S.OP_END, i, ops[-1][0] if ops else -1, n, 0))
            elif action == "cat":
                c = draw(st.integers(1, 3))
                rows.append((t_thread, thread, S.CAT_BEGIN, c, cats[-1] if cats else 0, -1, 0))
                cats.append(c)
            elif action == "end_cat" and cats:
                c = cats.pop()
                rows.append((t_thread, thread, S.CAT_END, c, cats[-1] if cats else 0, -1, 0))
            elif action == "phase" and not phases:
                i = next(ids)
                rows.append((t_thread, thread, S.PHASE_BEGIN, i, -1, 0, 0))
                phases.append((i, 0))
            elif action == "end_phase" and phases:
                i, n = phases.pop()
                rows.append((t_thread, thread, S.PHASE_END, i, -1, n, 0))
        t = max(t, t_thread)
    rows.append((t + draw(st.integers(0, 5)), 1, S.SESSION_END, -1, -1, -1, 0))
    return rows


def reference(rows, names):
    """Walk each thread's events with explicit stacks; unit time steps."""
    end = max(r[0] for r in rows)
    excl = defaultdict(float)
    by_thread = defaultdict(list)
    for r in rows:
        by_thread[r[1]].append(r)
    for thread, evs in by_thread.items():
        ops, cats = [], []
        for k, r in enumerate(evs):
            ts, _, kind, i, _, n, _ = r
            if kind == S.OP_BEGIN:
                ops.append(n)
            elif kind == S.OP_END:
                ops.pop()
            elif kind == S.CAT_BEGIN:
                cats.append(i)
            elif kind == S.CAT_END:
                cats.pop()
            nxt = evs[k + 1][0] if k + 1 < len(evs) else end
            if nxt > ts and (ops or thread == 1):
                op = names[ops[-1]] if ops else UNANNOTATED
                excl[(op, CATEGORY_NAMES[cats[-1] if cats else 0])] += (nxt - ts) * 1e-9
    return dict(excl)


@settings(max_examples=150, deadline=None)
@given(programs())
def test_breakdown_matches_stack_walk(rows):
    table = pa.table(
        {c: np.array([r[k] for r in rows], dtype=t) for k, (c, t, _) in enumerate(S.EVENT_COLUMNS_DOC)}
    )
    tl = build_timeline(table)
    bd = breakdown_timeline(tl, NAMES)
    got = defaultdict(float)
    for r in bd.cpu_time.to_pylist():
        got[(r["operation"], r["category"])] += r["seconds"]
    ref = reference(rows, NAMES)
    assert set(got) == {k for k, v in ref.items() if v > 0}
    for k, v in ref.items():
        assert abs(got[k] - v) < 1e-12, k
