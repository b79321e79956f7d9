"""A run that keeps detail in stretches: a bounded trace, and whole-run figures that still hold.

Busy-waits of known length stand for the operations; the schedule is scaled down to seconds so
the run crosses several cuts. The whole-run figures come from the aggregates between the
stretches and from the detail inside them (rlscope/analysis/whole_run.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope.analysis.result import analyze
from rlscope.errors import RLScopeError
from rlscope.trace import glue
from rlscope.trace import schema as S
from rlscope.trace.detail import DetailSchedule
from rlscope.trace.glue import Gaps

STEPS = 300
# a corrected figure between stretches takes the detail's correction per call: within 5% of the truth
SUMMARIZED_CORRECTION = 0.95
INFER_S, SIM_S = 0.001, 0.002


def _spin(seconds: float) -> tuple[float, float]:
    """Busy-wait ``seconds``; (what it took, more when preempted or stalled; the thread's CPU time in
    it, which leaves out both)."""
    start, cpu = time.perf_counter(), time.thread_time()
    while (now := time.perf_counter()) < start + seconds:
        pass
    return now - start, time.thread_time() - cpu


def _run(trace: Path, detail: str) -> tuple[float, dict[str, tuple[float, float, float]]]:
    """The run's wall, and per operation (the thread's CPU time in its busy-waits, their time timed
    inside its scope, the scope timed around): what the scope held lies between the second and the
    third, whatever the machine's load (a preempted thread's time goes to whatever it was in when
    preempted); corrected, it is the held time less the writer's stalls, which the thread spent
    waiting for the GIL, not running: no less than its CPU time."""
    inside = {"inference": 0.0, "simulation": 0.0}
    cpu, around = dict(inside), dict(inside)
    t0 = time.perf_counter()
    with rlscope.profile(trace, detail=detail, gpu=False, flush_interval=0.1), rlscope.phase("training"):
        for _ in range(STEPS):
            with rlscope.scope("step"):
                # timed around each scope: what it held, whatever the load (a preempted busy-wait
                # lasts longer than asked), plus its own boundaries' cost, under a microsecond
                a = time.perf_counter()
                with rlscope.scope("inference"):
                    held, ran = _spin(INFER_S)
                    inside["inference"] += held
                    cpu["inference"] += ran
                b = time.perf_counter()
                with rlscope.scope("simulation"):
                    held, ran = _spin(SIM_S)
                    inside["simulation"] += held
                    cpu["simulation"] += ran
                c = time.perf_counter()
                around["inference"] += b - a
                around["simulation"] += c - b
    return time.perf_counter() - t0, {k: (cpu[k], inside[k], around[k]) for k in inside}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, float, dict[str, float]]]:
    out = {}
    for spec in ("all", "0.2s,0.3s,0.1s", "60it,120it,30it"):
        trace = tmp_path_factory.mktemp("detail") / "trace"
        out[spec] = (trace, *_run(trace, spec))
    return out


def _events(trace: Path) -> pa.Table:
    (proc,) = sorted(trace.glob("process-*"))
    return pa.ipc.open_stream(proc / S.EVENTS_FILE).read_all()


def test_events_are_kept_only_in_the_stretches(runs: dict) -> None:
    full = _events(runs["all"][0]).num_rows
    cut = _events(runs["0.2s,0.3s,0.1s"][0])
    assert cut.num_rows < 0.6 * full
    kind = cut.column("kind").to_numpy()
    assert (kind == S.DETAIL).sum() >= 4  # pauses and resumes
    assert (kind == S.SESSION_END).sum() == 1


def test_an_iteration_schedule_keeps_those_iterations(runs: dict) -> None:
    ev = _events(runs["60it,120it,30it"][0])
    kind, flags = ev.column("kind").to_numpy(), ev.column("flags").to_numpy()
    name = ev.column("name").to_numpy()
    (proc,) = sorted(runs["60it,120it,30it"][0].glob("process-*"))
    names = pa.ipc.open_stream(proc / S.NAMES_FILE).read_all().column("name").to_pylist()
    steps = (kind == S.OP_END) & (name == names.index("step")) & ((flags & S.FLAG_SUMMARIZED) == 0)
    assert steps.sum() == 60 + 30 + 30  # iterations 0-59, 120-149 and 240-269 of the 300


def test_whole_run_figures_match_the_known_work(runs: dict) -> None:
    for spec, (trace, wall, truth) in runs.items():
        summary = analyze(trace, workers=1).summary
        ops = summary["operations"]
        assert ops["inference"]["calls"] == STEPS, spec
        assert ops["simulation"]["calls"] == STEPS, spec
        assert ops["step"]["calls"] == STEPS, spec
        # raw, an operation held what its timers saw (less its scopes' own cost, under a microsecond
        # a call); corrected, less that and the writer's stalls, never less than the thread ran in it
        # (between stretches the correction is the detail's per call, within 5%: docs/long-runs.md)
        raw = summary["raw"]["operations"]
        floor = 0.99 if spec == "all" else SUMMARIZED_CORRECTION
        for name, (ran, inside, around) in truth.items():
            assert 0.99 * inside <= raw[name]["total_s"] <= 1.01 * around, (spec, name)
            assert floor * ran <= ops[name]["total_s"] <= 1.01 * around, (spec, name)
        # the session's time is all accounted for, and no longer than the run around it
        excl = sum(op["exclusive_s"] for op in ops.values()) + summary["unannotated_s"]
        assert excl == pytest.approx(summary["wall_s"], rel=0.02), spec
        assert summary["raw"]["wall_s"] <= wall, spec
        if spec == "all":
            assert "detail" not in summary
        else:
            d = summary["detail"]
            assert d["schedule"] == DetailSchedule.parse(spec).to_env()
            assert d["summarized_s"] > 0.2
            # the wall is the detail's and what the summarized time adds: its seconds, less what the
            # main thread lost to rlscope there
            assert d["detail_s"] + d["summarized_wall_s"] == pytest.approx(summary["wall_s"], abs=1e-6)
            # what it takes off is at most what the busy-waits lost to anything but running (the
            # writer's stalls among it), and the scopes' own boundaries' cost (a few us a call)
            stalled = sum(inside - ran for ran, inside, _ in truth.values())
            taken = d["summarized_s"] - d["summarized_wall_s"]
            assert 0 <= taken <= stalled + 3 * STEPS * 10e-6, spec


def test_gaps_map_times_onto_the_joined_clock() -> None:
    gaps = Gaps(np.array([10, 30]), np.array([20, 35]))
    t = np.array([0, 10, 15, 20, 25, 30, 34, 35, 40])
    assert gaps.map(t).tolist() == [0, 10, 10, 10, 15, 20, 20, 20, 25]
    assert gaps.strictly_inside(t).tolist() == [False, False, True, False, False, False, True, False, False]
    assert gaps.total_ns == 15
    assert Gaps.from_json(gaps.to_json()).map(t).tolist() == gaps.map(t).tolist()


@pytest.mark.parametrize("n_gaps", [1, 3, 8, 9, 20])
def test_few_or_many_gaps_map_every_time_alike(n_gaps: int) -> None:
    rng = np.random.default_rng(n_gaps)
    edges = np.sort(rng.choice(1000, 2 * n_gaps, replace=False)).astype(np.int64)
    gaps = Gaps(edges[0::2], edges[1::2])
    t = rng.integers(-10, 1010, 2000)
    moved = [sum(min(max(x - a, 0), b - a) for a, b in zip(gaps.start, gaps.end, strict=True)) for x in t]
    assert gaps.map(t).tolist() == (t - np.array(moved)).tolist()
    inside = [any(a < x < b for a, b in zip(gaps.start, gaps.end, strict=True)) for x in t]
    assert gaps.strictly_inside(t).tolist() == inside


@pytest.mark.parametrize("seed", range(6))
def test_rows_a_gap_swallows_leave_the_table_as_a_filter_would(seed: int) -> None:
    rng = np.random.default_rng(seed)
    table = pa.table({"start_ns": np.arange(300), "name": rng.integers(0, 9, 300).astype(np.int32)})
    # none, runs (what a gap swallows: the few sliced), everything, and scattered rows (filtered)
    drops = [np.zeros(300, bool), np.ones(300, bool), rng.random(300) < 0.5]
    runs = np.zeros(300, bool)
    for a in rng.integers(0, 300, 3):
        runs[a : a + rng.integers(1, 40)] = True
    for drop in [*drops, runs, ~runs]:
        out = glue._without(table, drop)
        assert out.equals(table.filter(pa.array(~drop)))
        assert all(c.num_chunks <= 1 for c in out.columns)


@pytest.mark.parametrize(
    ("spec", "inside", "outside"),
    [
        ("60s,600s,10s", [0, 59.9, 600, 609.9, 1200], [60, 599.9, 610, 1199]),
        ("30s", [0, 29], [30, 1e4]),
        ("all", [0, 1e6], []),
        ("200it,5000it,50it", [0, 199e-9, 5000e-9, 5049e-9], [200e-9, 4999e-9, 5050e-9]),
    ],
)
def test_schedule(spec: str, inside: list[float], outside: list[float]) -> None:
    sch = DetailSchedule.parse(spec)
    for t in inside:
        assert sch.in_detail(int(t * 1e9)), t
    for t in outside:
        assert not sch.in_detail(int(t * 1e9)), t
    # next_change lands where in_detail flips
    t = 0
    for _ in range(5):
        nxt = sch.next_change(t)
        if nxt >= 2**62:
            break
        assert sch.in_detail(nxt) != sch.in_detail(nxt - 1)
        t = nxt


@pytest.mark.parametrize(
    "spec", ["60s,600s,10s", "1ms,1000h,1ms", "90m,2h,1.5s", "0.25s", "all", "200it,5000it,50it"]
)
def test_a_schedule_passes_to_the_run_s_processes_unchanged(spec: str) -> None:
    """``rlscope run`` hands its schedule to each process as text (RLSCOPE options): read back, it is
    the same schedule, whatever its parts' sizes."""
    sch = DetailSchedule.parse(spec)
    assert DetailSchedule.parse(sch.to_env()) == sch


@pytest.mark.parametrize("seed", range(5))
def test_any_schedule_in_ns_passes_unchanged(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        first, length = (int(v) for v in rng.integers(0, 10**13, 2))
        sch = DetailSchedule(first, length + 1 + int(rng.integers(0, 10**13)), length)
        assert DetailSchedule.parse(sch.to_env()) == sch


@pytest.mark.parametrize("bad", ["x", "10s,5s", "1s,2q,3s", "", "10s,100it,5it", "2.5it"])
def test_bad_schedules_are_one_clear_error(bad: str) -> None:
    with pytest.raises(RLScopeError, match="detail schedule"):
        DetailSchedule.parse(bad)


def test_a_long_run_s_spread_ids_are_not_taken_for_damage() -> None:
    """Kept in stretches, a run's rows are a sample of its scopes: ids count hours of them."""
    from rlscope.trace.validate import validate_events

    def table(detail: bool) -> pa.Table:
        rows = [(0, 1, S.SESSION_START, -1, -1, -1, 0)]
        if detail:
            rows.append((10**9, 1, S.DETAIL, S.DETAIL_PAUSE, -1, -1, 0))
            rows.append((3600 * 10**9, 1, S.DETAIL, S.DETAIL_RESUME, -1, -1, 0))
        base = 10**9 if not detail else 3600 * 10**9
        for k in range(100):  # an hour's scopes later: ids in the tens of millions
            ident = 5 if k == 0 else 20_000_000 + k
            rows.append((base + 2 * k + 1, 1, S.OP_BEGIN, ident, -1, 0, 0))
            rows.append((base + 2 * k + 2, 1, S.OP_END, ident, -1, 0, 0))
        rows.append((base + 1000, 1, S.SESSION_END, -1, -1, -1, 0))
        cols = list(zip(*rows, strict=True))
        schema = S.events_schema({})
        return pa.table([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)

    _, findings = validate_events(table(detail=True), "p")
    assert not [f for f in findings if "damaged id" in f.warning]
    _, findings = validate_events(table(detail=False), "p")
    assert [f for f in findings if "damaged id" in f.warning]


def test_the_report_marks_where_the_timeline_joins_stretches(runs: dict) -> None:
    result = analyze(runs["0.2s,0.3s,0.1s"][0], workers=1)
    cuts = result.report["cuts"]
    assert cuts and all(c["skipped_s"] > 0 for c in cuts)
    assert sum(c["skipped_s"] for c in cuts) == pytest.approx(
        result.summary["detail"]["summarized_s"], rel=1e-6
    )
    # on the recorded clock: the raw wall, less the time between the stretches
    joined = result.summary["raw"]["wall_s"] - result.summary["detail"]["summarized_s"]
    assert all(0 < c["at_s"] <= joined + 1e-6 for c in cuts), (cuts, joined)
    assert [c["at_s"] for c in cuts] == sorted(c["at_s"] for c in cuts)
    assert "cuts" not in analyze(runs["all"][0], workers=1).report


def test_a_cut_recording_s_last_gap_starts_where_its_events_end_on_its_own_clock() -> None:
    """Events cut by a failed write after a detail stretch: the aggregates' time after them is one
    more gap, from the events' end on the process's clock (the gaps' clock), not the joined one."""
    from rlscope.trace.reader import _after_cut

    meta: dict = {}
    gaps = _after_cut((0, 100), Gaps(np.array([10]), np.array([30])), 200, True, meta)
    assert gaps is not None
    assert gaps.start.tolist() == [10, 100] and gaps.end.tolist() == [30, 200]
    assert Gaps.from_json(meta["detail.gaps"]).total_ns == 120
    assert _after_cut((0, 100), None, 90, True, {}) is None  # the aggregates end with the events
    assert _after_cut((0, 100), None, 200, False, {}) is None  # not cut: no gap after the end


def test_a_stretch_that_fills_ends_early_and_the_whole_run_still_adds_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first stretch longer than the run, but limited to 400 rows (detail.STRETCH_ROWS): the
    writer pauses at the flush that fills it, and the aggregates carry the rest of the run."""
    from rlscope.trace import detail

    monkeypatch.setattr(detail, "STRETCH_ROWS", 400)
    trace = tmp_path / "trace"
    wall, truth = _run(trace, "60s")
    ev = _events(trace)
    kind = ev.column("kind").to_numpy()
    assert ev.num_rows < 400 + 400  # the limit, and at most a flush of rows past it
    assert (kind == S.DETAIL).sum() == 2  # paused when full, resumed at the session's end
    summary = analyze(trace, workers=1).summary
    ops = summary["operations"]
    raw = summary["raw"]["operations"]
    for name, (ran, inside, around) in truth.items():
        assert ops[name]["calls"] == STEPS, name
        assert 0.99 * inside <= raw[name]["total_s"] <= 1.01 * around, name
        assert SUMMARIZED_CORRECTION * ran <= ops[name]["total_s"] <= 1.01 * around, name
    assert summary["detail"]["summarized_s"] > 0.5 * wall
    assert summary["raw"]["wall_s"] <= wall
