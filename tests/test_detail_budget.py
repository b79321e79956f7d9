"""The analysis's detail budget: past it, a process's detail is analyzed up to one instant of the
run and its aggregates stand for the rest, and the whole-run figures do not move.

The ground truth is the same trace analyzed without a budget: every raw whole-run figure (each
operation's time and calls, the wall, the unannotated time) must come out the same from the cut
detail plus the aggregates, and the corrected ones within a percent (the left-out part is corrected
as the detail was, not event by event). Busy-waits of known length stand for the operations.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope.analysis.result import analyze
from rlscope.errors import RLScopeError
from rlscope.trace import budget
from rlscope.trace import schema as S
from rlscope.trace.budget import FlushRows, choose_cuts
from rlscope.trace.reader import load_process

STEPS = 400
BUDGET = 1000  # rows: the run writes several times more


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@rlscope.simulator
def _simulate() -> None:
    _spin(0.002)


def _run(trace: Path, detail: str) -> None:
    with rlscope.profile(trace, detail=detail, gpu=False, flush_interval=0.05), rlscope.phase("training"):
        for _ in range(STEPS):
            with rlscope.scope("step"):
                with rlscope.scope("inference"):
                    _spin(0.001)
                with rlscope.scope("simulation"):
                    _simulate()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for spec in ("all", "0.3s,0.5s,0.2s"):
        out[spec] = tmp_path_factory.mktemp("budget") / "trace"
        _run(out[spec], spec)
    return out


def _both(trace: Path) -> tuple[dict, dict]:
    whole = analyze(trace, workers=1, detail_budget=None).summary
    cut = analyze(trace, workers=1, detail_budget=BUDGET).summary
    return whole, cut


@pytest.mark.parametrize("spec", ["all", "0.3s,0.5s,0.2s"])
def test_a_cut_analysis_gives_the_whole_analysis_s_figures(traces: dict, spec: str) -> None:
    whole, cut = _both(traces[spec])
    assert cut["detail"]["left_out_s"] > 0.3
    assert cut["detail"]["detail_s"] < 0.5 * whole["raw"]["wall_s"]
    # the trace reads clean (the correction may say its windows saw little of the shorter detail)
    assert all(w.startswith("overhead correction") for w in cut["warnings"]), cut["warnings"]
    a, b = whole["raw"], cut["raw"]
    # equal but for a row the program timed before the cut's flush and handed over after it, which
    # the aggregates count from the flush on (rlscope/trace/aggregate.py): under a millisecond
    tol = 5e-4
    assert b["wall_s"] == pytest.approx(a["wall_s"], abs=1e-6)
    assert b["unannotated_s"] == pytest.approx(a["unannotated_s"], abs=tol)
    for name in ("step", "inference", "simulation"):
        assert b["operations"][name]["calls"] == a["operations"][name]["calls"] == STEPS, name
        if spec == "all":
            assert b["operations"][name]["total_s"] == pytest.approx(
                a["operations"][name]["total_s"], abs=tol
            )
        else:
            # inclusive time across the schedule's own cuts misses, for a call that began between two
            # stretches, its part before the resume (a known gap); cut later, fewer such calls
            assert a["operations"][name]["total_s"] - tol <= b["operations"][name]["total_s"]
            assert b["operations"][name]["total_s"] == pytest.approx(
                a["operations"][name]["total_s"], rel=0.005
            )
        assert b["operations"][name]["exclusive_s"] == pytest.approx(
            a["operations"][name]["exclusive_s"], abs=tol
        )
        assert whole["operations"][name]["calls"] == cut["operations"][name]["calls"] == STEPS
        # corrected, the left-out part keeps what the (shorter, noisier) detail's correction kept
        assert cut["operations"][name]["total_s"] == pytest.approx(
            whole["operations"][name]["total_s"], rel=0.03
        ), name
    for name, spin in (("inference", 0.001), ("simulation", 0.002)):  # at least the busy-waits held
        assert cut["operations"][name]["total_s"] >= 0.97 * STEPS * spin, name
    assert b["categories"]["simulator"] == pytest.approx(a["categories"]["simulator"], abs=tol)
    assert cut["wall_s"] == pytest.approx(whole["wall_s"], rel=0.03)


def test_the_cut_lies_on_a_flush_and_the_reader_joins_it_like_a_detail_cut(traces: dict) -> None:
    (proc_dir,) = sorted(traces["all"].glob("process-*"))
    flushes = budget.flush_rows(proc_dir)
    assert flushes is not None and flushes.total > 2 * BUDGET
    (cut,) = choose_cuts([flushes], [0], BUDGET)
    assert cut in flushes.times.tolist()
    assert flushes.rows[flushes.times.tolist().index(cut)] <= BUDGET
    proc = load_process(proc_dir, cut_ns=cut)
    assert proc.events.num_rows <= BUDGET + 20  # the rows put at the cut
    ts = proc.events.column("ts_ns").to_numpy()
    kind = proc.events.column("kind").to_numpy()
    assert (kind == S.SESSION_END).sum() == 1
    assert proc.gaps is not None and len(proc.gaps) == 1
    meta = json.loads(proc.metadata["detail.budget"])
    assert meta["cut_ns"] == cut and meta["rows_left_out"]["events"] > 0
    # on the joined clock the detail ends at the cut; what follows it is one gap to the session's end
    assert ts.max() <= cut
    modes = proc.aggregates.column("mode").to_numpy()
    assert (modes == S.MODE_LEFT_OUT).any()
    assert proc.warnings == [], proc.warnings


def test_a_budget_the_trace_fits_changes_nothing(traces: dict) -> None:
    whole = analyze(traces["all"], workers=1, detail_budget=None).summary
    fits = analyze(traces["all"], workers=1, detail_budget=10_000_000).summary
    assert "detail" not in fits
    assert json.dumps(fits["raw"], sort_keys=True) == json.dumps(whole["raw"], sort_keys=True)


def test_the_report_says_what_the_budget_left_out(traces: dict) -> None:
    from rlscope.viz.words import detail_sentence

    _, cut = _both(traces["0.3s,0.5s,0.2s"])
    line = detail_sentence(cut)
    assert "detail budget left out" in line and "--detail-budget all" in line


def _flushes(times: list[int], rows: list[int], total: int) -> FlushRows:
    return FlushRows(np.asarray(times, np.int64), np.asarray(rows, np.int64), total)


def test_every_process_is_cut_at_one_instant_of_the_run() -> None:
    # a learner that reaches the budget at t=30 and a worker (clock 1000 ns ahead) that never does
    learner = _flushes([10, 20, 30, 40, 50], [100, 400, 900, 1500, 2000], 2000)
    worker = _flushes([1005, 1015, 1025, 1035, 1045, 1055], [10, 20, 30, 40, 50, 60], 60)
    cuts = choose_cuts([learner, worker, None], [0, -1000, 0], 1000)
    assert cuts[0] == 30  # its last flush within the budget
    assert cuts[1] == 1025  # its last flush at or before the run's instant 30
    assert cuts[2] is None  # no aggregates: kept whole
    assert choose_cuts([learner, worker], [0, -1000], None) == [None, None]
    assert choose_cuts([learner, worker], [0, -1000], 5000) == [None, None]
    # the worker's detail ended before the instant: nothing of it to leave out
    done = _flushes([1001, 1002], [30, 60], 60)
    assert choose_cuts([learner, done], [0, -1000], 1000) == [30, None]


@pytest.mark.parametrize(
    ("text", "rows"), [("2M", 2_000_000), ("500k", 500_000), ("1.5m", 1_500_000), ("all", None)]
)
def test_budget_parse(text: str, rows: int | None) -> None:
    assert budget.parse(text) == rows


@pytest.mark.parametrize("bad", ["", "lots", "-5", "10", "2G"])
def test_a_bad_budget_is_one_clear_error(bad: str) -> None:
    with pytest.raises(RLScopeError, match="bad detail budget"):
        budget.parse(bad)


def test_the_cli_takes_the_budget(traces: dict, capsys: pytest.CaptureFixture) -> None:
    from rlscope.cli.analyze import main

    assert main([str(traces["all"]), "-q", "--detail-budget", "1k"]) == 0
    with pytest.raises(SystemExit) as e:
        main([str(traces["all"]), "-q", "--detail-budget", "lots"])
    assert e.value.code == 2
    assert "bad detail budget" in capsys.readouterr().err


def test_a_cut_table_keeps_the_rows_up_to_the_cut() -> None:
    batch = pa.record_batch({"start_ns": pa.array([1, 5, 9, 12], pa.int64())})
    keep = budget.Before(9, "start_ns")
    assert keep(batch).column(0).to_pylist() == [1, 5, 9]
    assert keep.rows == 1
