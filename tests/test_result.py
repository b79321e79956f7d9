"""One analysis, every output: analyze() computes once, and the table, JSON and CSV agree on it.

Also: analyze() gives the figures the step-by-step functions give, a multi-process run shows its
processes in the JSON, the table and the HTML, and bad traces are one-line errors.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

import rlscope
from rlscope.analysis import AnalysisResult, analyze
from rlscope.analysis.breakdown import analyze as breakdown_all
from rlscope.analysis.intervals import intervals
from rlscope.analysis.kernels import kernel_table
from rlscope.analysis.result import once_per_run
from rlscope.analysis.roles import worker_label
from rlscope.analysis.summary import summarize
from rlscope.cli import analyze as cli
from rlscope.cli import export
from rlscope.errors import TraceError
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.trace.reader import load_trace
from rlscope.viz import html, terminal
from tests.test_viz import _row

MS = 1_000_000  # ns
SCOPE_IN, SCOPE_OUT = 2 * MS, 4 * MS  # injected per-scope cost, large enough to show in a 3-decimal table


def _header(text: str) -> list[str]:
    return _row(text, "operation")


@pytest.fixture
def corrected_trace(fake_session) -> Path:
    """Two operations with a known scope cost injected around each boundary, and its calibration."""
    sess, clock = fake_session
    sess.options["flush_interval"] = 1e6

    def scope(name: str, ns: int) -> None:
        clock.advance(SCOPE_OUT // 2)
        with rlscope.scope(name):
            clock.advance(SCOPE_IN // 2 + ns + SCOPE_IN // 2)
        clock.advance(SCOPE_OUT // 2)

    with sess:
        for _ in range(5):
            scope("simulation", 30 * MS)
            scope("backprop", 17 * MS)
            clock.advance(3 * MS)
    cost = {"inside": SCOPE_IN, "outside": SCOPE_OUT, "total": SCOPE_IN + SCOPE_OUT}
    cal_mod.save(
        {
            "schema": cal_mod.SCHEMA,
            "created": "test",
            "key": cal_mod.current_key(),
            "costs_ns": {"scope": cost},
        }
    )
    return sess.trace_dir


def test_csv_json_and_table_give_identical_corrected_figures(corrected_trace, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # every column of the table fits
    out_json, out_csv = tmp_path / "s.json", tmp_path / "csv"
    assert cli.main([str(corrected_trace), "--json", str(out_json)]) == 0
    table = capsys.readouterr().out
    assert export.main([str(corrected_trace), "--csv", str(out_csv)]) == 0

    summary = json.loads(out_json.read_text())
    assert summary["corrected_for_overhead"] and summary["calibration"]["status"] == "applied"
    with (out_csv / "operations.csv").open(newline="") as f:
        rows = {r["operation"]: r for r in csv.DictReader(f)}
    assert "corrected for rlscope's overhead" in table
    header = _header(table)
    for name, op in summary["operations"].items():
        # the correction changed this figure, and every output shows the corrected one
        assert op["total_s"] < summary["raw"]["operations"][name]["total_s"]
        row = rows[name]
        assert row["corrected"] == "True"
        assert float(row["total_s"]) == op["total_s"]
        assert float(row["exclusive_s"]) == op["exclusive_s"]
        assert float(row["raw_total_s"]) == summary["raw"]["operations"][name]["total_s"]
        assert int(row["calls"]) == op["calls"]
        cells = dict(zip(header, _row(table, name), strict=True))
        assert cells["total s"] == f"{op['total_s']:.3f}"
        assert cells["excl s"] == f"{op['exclusive_s']:.3f}"
        assert cells["raw s"] == f"{summary['raw']['operations'][name]['total_s']:.3f}"
        assert cells["calls"] == str(op["calls"])
    assert float(rows["[unannotated]"]["total_s"]) == summary["unannotated_s"]
    assert _row(table, "[unannotated]")[1] == f"{summary['unannotated_s']:.3f}"
    # the true (injected-cost-free) times: 5 x 30 ms and 5 x 17 ms
    assert summary["operations"]["simulation"]["total_s"] == pytest.approx(0.150, abs=1e-9)
    assert summary["operations"]["backprop"]["total_s"] == pytest.approx(0.085, abs=1e-9)
    with (out_csv / "phases.csv").open(newline="") as f:
        assert {r["corrected"] for r in csv.DictReader(f)} == {"True"}


def test_raw_export_says_so(corrected_trace, tmp_path):
    assert export.main([str(corrected_trace), "--csv", str(tmp_path), "--raw"]) == 0
    with (tmp_path / "operations.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["corrected"] for r in rows} == {"False"}
    raw = analyze(corrected_trace, correct=False).summary
    assert {r["operation"]: float(r["total_s"]) for r in rows if r["operation"] in raw["operations"]} == {
        n: o["total_s"] for n, o in raw["operations"].items()
    }


def test_analyze_matches_the_step_by_step_functions(corrected_trace):
    trace = load_trace(corrected_trace)
    result = analyze(trace)
    assert isinstance(result, AnalysisResult)
    assert result.summary == analyze(trace).summary  # computed the same way twice, the same figures
    raw = analyze(trace, correct=False).summary
    before = summarize(trace, breakdown_all(trace))  # the figures as computed before analyze()
    for key in ("wall_s", "unannotated_s", "operations", "categories", "phases", "processes"):
        assert raw[key] == before[key], key
    for name, table in intervals(trace).tables().items():
        assert result.intervals.tables()[name].equals(table), name
    assert result.kernels.equals(kernel_table(trace))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.summary = {}  # type: ignore[misc]


def test_window_cuts_the_intervals_and_the_timeline(corrected_trace):
    result = analyze(corrected_trace, window=(0.01, 0.05))
    assert result.intervals.window_ns == (10 * MS, 50 * MS)
    assert result.report["window_choice"] == "user"
    ends = result.intervals.operations.column("end_ns").to_pylist()
    assert ends and max(ends) <= 50 * MS


def test_bad_traces_are_one_line_errors(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        analyze(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="empty directory"):
        analyze(tmp_path / "empty")


WORKER = """
import sys
import rlscope
sys.path.insert(0, {root!r})
from tests.conftest import FakeClock

clock = FakeClock()
sess = rlscope.profile(sys.argv[1], backend=False, gpu=False)
sess.clock = clock
with sess:
    for _ in range(3):
        with rlscope.scope(sys.argv[2]):
            clock.advance(int(sys.argv[3]))
        clock.advance(1000)
"""


@pytest.fixture
def two_process_trace(tmp_path) -> Path:
    """Two processes (one session each) in one trace: a learner (3 x 20 ms) and an actor (3 x 5 ms)."""
    root = str(Path(__file__).resolve().parent.parent)
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(root=root))
    trace = tmp_path / "trace"
    for op, ns in (("learner", 20 * MS), ("actor", 5 * MS)):
        subprocess.run([sys.executable, str(script), str(trace), op, str(ns)], check=True)
    return trace


def test_multi_process_breakdown_in_json_table_and_html(two_process_trace, tmp_path, monkeypatch):
    result = analyze(two_process_trace)
    procs = result.processes
    assert len(procs) == 2
    by_op = {next(iter(p["operations"])): p for p in procs}
    assert set(by_op) == {"learner", "actor"}
    learner, actor = by_op["learner"], by_op["actor"]
    assert learner["operations"]["learner"]["total_s"] == pytest.approx(0.060, abs=1e-9)
    assert learner["operations"]["learner"]["calls"] == 3
    assert actor["operations"]["actor"]["exclusive_s"] == pytest.approx(0.015, abs=1e-9)
    assert learner["categories"] == {"python": pytest.approx(0.060 + 3e-6, abs=1e-9)}  # + 3 x 1000 ns glue
    assert "gpu_categories" in learner and "gpu_bound_s" in learner
    # the run's operations are the sum of the processes'
    assert result.operations["learner"]["total_s"] == learner["operations"]["learner"]["total_s"]

    monkeypatch.setenv("COLUMNS", "200")
    text = terminal.text(result, width=200)
    assert "per process" in text and "whole run: 2 process(es)" in text
    for p, op in ((learner, "learner"), (actor, "actor")):
        cells = _row(text, f"pid {p['pid']}@{p['host']}", endswith=True)  # after the role
        assert cells[1] == f"{p['wall_s']:.3f}" and op in cells[-1]

    page = html.render(result)
    assert "<h2>Processes</h2>" in page
    for p in procs:
        assert f"<h3 id='process-{p['pid']}'>" in page
    timeline = result.report["timeline"]
    assert result.report["window_choice"] == "all processes"
    for p in procs:  # one row per process, named by its role: its session bar and main thread's operations
        row = worker_label(p)
        assert row in timeline["rows"] and row in timeline["processes"]["row"]
        assert row in timeline["ops"]["row"]
    assert set(timeline["ops"]["name"]) == {"learner", "actor"}
    assert "No operations or GPU work in this window" not in page


def test_a_warning_shared_by_processes_prints_once():
    got = once_per_run(
        [
            "/t/process-1: no events (the process ended before its first flush)",
            "/t/process-2: no events (the process ended before its first flush)",
            "/t/process-3/gpu.arrows: truncated",
            "residual per-event costs not removed",
            "residual per-event costs not removed",
        ]
    )
    assert got == [
        "/t/process-*: no events (the process ended before its first flush) (2 processes: 1, 2)",
        "/t/process-3/gpu.arrows: truncated",
        "residual per-event costs not removed",
    ]
