"""The long-run benchmark's generator (benchmarks/longrun_trace.py) against the analysis, exactly.

A short run on a scaled-down detail schedule crosses several cuts: the trace the writer's own path
makes must read back as a trace a session writes (no findings), and the analysis's whole-run
figures must be the generator's truth: raw exactly, corrected within the boundaries' costs. Nothing
here is timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlscope.analysis import analyze
from rlscope.analysis.roles import over_processes
from rlscope.trace import schema as S
from rlscope.trace.check import check_trace
from rlscope.trace.detail import DetailSchedule

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from longrun_trace import (
    BACKEND_COST_NS,
    BACKPROP,
    INFERENCE,
    OPS_PER_BACKPROP,
    OPS_PER_INFERENCE,
    RUN_START_NS,
    make_trace,
)

# every events table checked is also checked by the numpy checks (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("validation_audited")

SECONDS = 40
DETAIL = "3s,10s,2s"  # the first 3 s, then 2 s every 10 s


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    trace = tmp_path_factory.mktemp("longrun") / "trace"
    truth = make_trace(trace, SECONDS / 3600, workers=2, seed=3, jobs=1, detail=DETAIL)
    return trace, truth


def test_the_trace_is_one_a_session_writes(made: tuple[Path, dict]) -> None:
    trace, truth = made
    assert sorted(p.name for p in trace.glob("process-*")) == [
        f"process-{p['pid']}" for p in truth["processes"]
    ]
    assert [f for f in check_trace(trace) if f.level in ("error", "warning")] == []
    events = pa.ipc.open_stream(trace / "process-41000" / S.EVENTS_FILE).read_all()
    kind = events.column("kind").to_numpy()
    assert (kind == S.DETAIL).sum() >= 6  # pauses and resumes at the cuts
    assert truth["rows_kept"] < truth["rows_made"] / 2


def test_the_analysis_finds_the_time_the_generator_made(made: tuple[Path, dict]) -> None:
    trace, truth = made
    summary = analyze(trace, workers=1).summary
    assert summary["detail"]["summarized_s"] > summary["detail"]["detail_s"]
    raw, corrected = (
        over_processes(summary["raw"]),
        over_processes(summary),
    )  # the generator's: every process's
    for op, t in truth["operations"].items():
        assert raw["operations"][op]["exclusive_s"] == pytest.approx(t["exclusive_s"], rel=1e-9)
        assert corrected["operations"][op]["exclusive_s"] == pytest.approx(t["work_s"], rel=0.01)
        assert corrected["operations"][op]["calls"] == t["calls"]
    by_pid = {p["pid"]: p for p in summary["raw"]["processes"]}
    for p in truth["processes"]:
        got = {op: e["exclusive_s"] for op, e in by_pid[p["pid"]]["operations"].items()}
        want = {op: ns / 1e9 for op, ns in p["exclusive_ns"].items()}
        assert got == pytest.approx(want, rel=1e-9)
    assert {p["role"] for p in summary["processes"]} == {"main", "env worker"}  # the workers step envs
    # the learner's full windows are live (its torch ops recorded in them): every operation was sampled
    assert not [w for w in summary["warnings"] if "ran only in light windows" in w]


def test_torch_ops_are_recorded_inside_the_learner_s_calls_in_full_windows_of_detail_stretches(
    made: tuple[Path, dict],
) -> None:
    """The backend recorder's rows: the learner's alone, each inside an inference or backprop call
    that began in a full window of a detail stretch, each such call holding its number of them; the
    truth's work is the recorded time less their cost."""
    trace, truth = made
    learner = trace / "process-41000"
    ops = pa.ipc.open_stream(learner / S.BACKEND_FILE).read_all()
    assert not (trace / "process-41001" / S.BACKEND_FILE).exists()
    ev = pa.ipc.open_stream(learner / S.EVENTS_FILE).read_all().to_pydict()
    begin, calls = {}, []
    windows = [(t, i) for t, k, i in zip(ev["ts_ns"], ev["kind"], ev["id"], strict=True) if k == S.WINDOW]
    for t, k, i, n in zip(ev["ts_ns"], ev["kind"], ev["id"], ev["name"], strict=True):
        if k == S.OP_BEGIN and n in (INFERENCE, BACKPROP):
            begin[i] = t
        elif k == S.OP_END and i in begin:
            calls.append((begin.pop(i), t, n))
    calls.sort()
    starts = np.array([c[0] for c in calls])
    o_start, o_end = ops.column("start_ns").to_numpy(), ops.column("end_ns").to_numpy()
    at = np.searchsorted(starts, o_start, "right") - 1
    assert (at >= 0).all() and (o_end <= np.array([c[1] for c in calls])[at]).all()
    per_call = np.bincount(at, minlength=len(calls))
    win_t = np.array([t for t, _ in windows])
    sched = DetailSchedule.parse(DETAIL)
    for (b, _, name), n in zip(calls, per_call.tolist(), strict=True):
        mode = windows[int(np.searchsorted(win_t, b, "right")) - 1][1]
        recorded = mode == S.WINDOW_FULL and sched.in_detail(b - RUN_START_NS)
        if n:  # a call the recorder ran in holds all its ops
            assert recorded and n == (OPS_PER_INFERENCE if name == INFERENCE else OPS_PER_BACKPROP)
    cost = BACKEND_COST_NS * len(o_start) / 1e9
    ops_truth = truth["operations"]
    made_cost = sum(ops_truth[op]["exclusive_s"] - ops_truth[op]["work_s"] for op in ops_truth)
    assert made_cost == pytest.approx(cost, rel=1e-9) and cost > 0


def test_the_same_seed_makes_the_same_trace(made: tuple[Path, dict], tmp_path: Path) -> None:
    trace, truth = made
    again = make_trace(tmp_path / "again", SECONDS / 3600, workers=2, seed=3, jobs=2, detail=DETAIL)
    assert again["processes"] == truth["processes"]
    for name in (S.EVENTS_FILE, S.AGGREGATES_FILE):
        a = pa.ipc.open_stream(trace / "process-41001" / name).read_all()
        b = pa.ipc.open_stream(tmp_path / "again" / "process-41001" / name).read_all()
        assert a.equals(b)
    ts = pa.ipc.open_stream(trace / "process-41000" / S.EVENTS_FILE).read_all().column("ts_ns").to_numpy()
    assert np.all(np.diff(ts) >= 0)
