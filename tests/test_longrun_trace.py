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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from longrun_trace import make_trace

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
        assert corrected["operations"][op]["exclusive_s"] == pytest.approx(t["exclusive_s"], rel=0.01)
        assert corrected["operations"][op]["calls"] == t["calls"]
    by_pid = {p["pid"]: p for p in summary["raw"]["processes"]}
    for p in truth["processes"]:
        got = {op: e["exclusive_s"] for op, e in by_pid[p["pid"]]["operations"].items()}
        want = {op: ns / 1e9 for op, ns in p["exclusive_ns"].items()}
        assert got == pytest.approx(want, rel=1e-9)
    assert {p["role"] for p in summary["processes"]} == {"main", "env worker"}  # the workers step envs


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
