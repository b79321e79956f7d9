"""The share of a flush's CPU time that stalled the job: measured on its own operations, exact on
synthetic traces where the main thread is known to slow by that share while a flush runs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rlscope import categories
from rlscope.analysis.timeline import build_timeline
from rlscope.overhead.correct import flush_stall
from rlscope.overhead.correct.residual import EventCosts, _flush_stall, correct_timeline
from rlscope.trace import schema as S

WORK, GLUE = 10_000, 100  # ns of work per instance, unannotated ns between instances


def _finish(t: float, remaining: float, flushes: list[tuple[int, int]], share: float) -> float:
    """When ``remaining`` ns of work started at ``t`` end, the thread running at 1 - share inside flushes."""
    for fs, fe in flushes:
        if remaining <= 0 or t >= fe:
            continue
        if t < fs:  # before this flush: full speed until it starts
            if fs - t >= remaining:
                return t + remaining
            remaining -= fs - t
            t = fs
        rate = 1.0 - share
        room = (fe - t) * rate
        if room >= remaining:
            return t + remaining / rate
        remaining -= room
        t = fe
    return t + remaining


def _trace(
    share: float,
    n: int = 400,
    flushes=((600_000, 700_000), (2_500_000, 2_560_000)),
    cpu=None,
    slow_from=None,
    extra=(),
    windows=(),
):
    """Main thread 1: ``n`` instances of op 0, WORK ns each (1.2x from ``slow_from`` ns on); writer
    thread 2 flushes over ``flushes``, each measuring ``cpu`` ns of its own CPU time (its wall by
    default), while the main thread runs at 1 - ``share``; ``windows``: (ns, kind) window switches
    on the main thread. Returns (timeline, true wall of the run without the stall)."""
    rows = [(0, 1, S.SESSION_START, -1, -1, -1, 0, 0)]
    t = 0.0
    truth = 0.0
    for i in range(n):
        begin = t
        work = WORK * 1.2 if slow_from is not None and t >= slow_from else WORK
        truth += work + GLUE
        t = _finish(t, work, list(flushes), share)
        rows += [(round(begin), 1, S.OP_BEGIN, i, -1, 0, 0, 0), (round(t), 1, S.OP_END, i, -1, 0, 0, 0)]
        t = _finish(t, GLUE, list(flushes), share)
    for k, (fs, fe) in enumerate(flushes):
        took = (fe - fs) if cpu is None else cpu[k]
        rows += [(fs, 2, S.CAT_BEGIN, categories.PROFILER, 0, -1, 0, 0)]
        rows += [(fe, 2, S.CAT_END, categories.PROFILER, 0, -1, 0, took)]
    rows += [(ts, 1, S.WINDOW, kind, -1, -1, 0, 0) for ts, kind in windows]
    rows.append((round(t), 1, S.SESSION_END, -1, -1, -1, 0, 0))
    rows += list(extra)  # other threads' rows
    schema = S.events_schema({}, cost=True)
    cols = list(zip(*rows, strict=True))
    table = pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, cols, strict=True)}, schema=schema)
    return build_timeline(table), truth


@pytest.mark.parametrize("share", [0.0, 0.25, 0.6, 1.0])
def test_the_share_that_stalled_the_main_thread_is_measured(share):
    tl, _ = _trace(share)
    got = flush_stall.measure(tl, _flush_stall(tl, 0.0))
    assert got.method == "measured"
    assert got.share == pytest.approx(share, abs=0.01)
    # a 100 us flush overlaps ~10 instances of 10 us, or (the thread stopped) the one it stopped in
    assert got.overlapped >= (2 if share == 1.0 else 5)
    assert got.sigma < 0.01  # every clear instance is alike here


def test_the_correction_removes_the_measured_share_of_the_flushes():
    """Removing each flush's whole CPU time (the bound) took 75% too much here: the main thread ran on
    at three quarters of its speed. With the measured share the corrected wall is the true one."""
    tl, truth = _trace(0.25)
    fix = correct_timeline(tl, EventCosts.zero())
    wall = fix.timeline.end_ns - fix.timeline.start_ns
    assert wall == pytest.approx(truth, rel=2e-3)
    assert fix.writer_stall["method"] == "measured"
    assert fix.writer_stall["share"] == pytest.approx(0.25, abs=0.01)
    main = tl.thread == tl.main_thread
    assert fix.writer_stall["main_bound_ns"] == pytest.approx(_flush_stall(tl, 0.0)[main].sum())
    # what is reported removed is the job's stall: the writer's own thread is not counted
    assert fix.removed_s["writer"] == pytest.approx(0.25 * fix.writer_stall["main_bound_ns"] / 1e9, rel=1e-3)


def test_a_flush_that_measured_more_than_it_stalled_is_not_removed_whole():
    """A flush whose CPU time ran beside the job (CUPTI's buffers drained in C): share 0, whatever
    it measured."""
    tl, _ = _trace(0.0, cpu=[90_000, 50_000])
    got = flush_stall.measure(tl, _flush_stall(tl, 0.0))
    assert got.method == "measured" and got.share == pytest.approx(0.0, abs=0.01)


def test_too_few_clear_instances_assume_half_with_the_whole_range_as_uncertainty():
    tl, _ = _trace(0.5, n=4, flushes=((0, 60_000),))  # every instance inside the flush: none clear
    got = flush_stall.measure(tl, _flush_stall(tl, 0.0))
    assert got.method == "assumed"
    assert (got.share, got.sigma) == (flush_stall.ASSUMED, 0.5)


def test_instances_are_compared_within_their_window_kind():
    """Full-window instances are slower for their own reason (the collectors): a flush in a full
    window must not count that as stall. Per kind of window the share stays exact; pooled over both
    kinds (no windows known) each flush is read against the other kind's instances too."""
    switches = ((0, S.WINDOW_LIGHT), (1_500_000, S.WINDOW_FULL))
    tl, _ = _trace(0.3, n=600, slow_from=1_500_000, windows=switches)
    assert flush_stall.measure(tl, _flush_stall(tl, 0.0)).share == pytest.approx(0.3, abs=0.01)
    pooled, _ = _trace(0.3, n=600, slow_from=1_500_000)
    assert abs(flush_stall.measure(pooled, _flush_stall(pooled, 0.0)).share - 0.3) > 0.05


def test_a_job_thread_whose_instance_id_is_the_rlscope_category_is_not_the_writer():
    """Thread 3 runs an operation instance numbered 7, the ``rlscope`` category's number, over the
    first flush. Only category rows mark a flush: thread 3 is the job's, and its stall is removed."""
    inst = 7  # categories.PROFILER
    extra = [(550_000, 3, S.OP_BEGIN, inst, -1, 0, 0, 0), (750_000, 3, S.OP_END, inst, -1, 0, 0, 0)]
    tl, _ = _trace(0.25, extra=extra)
    assert inst == categories.PROFILER
    fix = correct_timeline(tl, EventCosts.zero())
    bound = _flush_stall(tl, 0.0)
    job = bound[tl.thread == 3].sum()
    assert job > 0
    main = fix.writer_stall["main_bound_ns"]
    assert fix.removed_s["writer"] == pytest.approx(fix.writer_stall["share"] * (main + job) / 1e9, rel=1e-3)
