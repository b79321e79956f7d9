"""The analysis's detail budget: past it, a process's detail is analyzed up to one instant of the
run and its aggregates stand for the rest, and the whole-run figures do not move.

The ground truth is the same trace analyzed without a budget: every raw whole-run figure (each
operation's time and calls, the wall, the unannotated time) must come out the same from the cut
detail plus the aggregates, and the corrected ones within a percent (the left-out part is corrected
as the detail was, not event by event). Busy-waits of known length stand for the operations.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope.analysis.result import analyze
from rlscope.analysis.roles import over_processes
from rlscope.errors import RLScopeError
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.trace import budget
from rlscope.trace import schema as S
from rlscope.trace.budget import AUTO, DetailRows, choose_drops
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
def traces(tmp_path_factory: pytest.TempPathFactory, quick_calibration: tuple) -> dict[str, Path]:
    """The runs, recorded with this machine's calibration (embedded in each trace), as on a calibrated
    machine: never whatever the user's cache holds, which would decide the warnings checked below."""
    out = {}
    cal, directory = quick_calibration
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLSCOPE_CALIBRATION_DIR", str(directory))
        cal_mod.save(cal)
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
            # a call over one of the schedule's resumes has its time before it from the aggregates
            # (rlscope/analysis/whole_run.py), which count a row handed over after a flush from the
            # flush on: exact on a fake clock (test_a_call_over_a_resume_or_a_gap_keeps_its_whole_time)
            assert b["operations"][name]["total_s"] == pytest.approx(
                a["operations"][name]["total_s"], rel=0.005
            )
        assert b["operations"][name]["exclusive_s"] == pytest.approx(
            a["operations"][name]["exclusive_s"], abs=tol
        )
        assert whole["operations"][name]["calls"] == cut["operations"][name]["calls"] == STEPS
        # corrected, the left-out part keeps what the detail's correction kept, here of a third of a
        # second of detail (a noisier estimate than the whole run's): within the ±5% of corrected totals
        assert cut["operations"][name]["total_s"] == pytest.approx(
            whole["operations"][name]["total_s"], rel=0.05
        ), name
    for name, spin in (("inference", 0.001), ("simulation", 0.002)):  # at least the busy-waits held
        assert cut["operations"][name]["total_s"] >= 0.95 * STEPS * spin, name
    assert b["categories"]["simulator"] == pytest.approx(a["categories"]["simulator"], abs=tol)
    assert cut["wall_s"] == pytest.approx(whole["wall_s"], rel=0.05)


def test_the_cut_lies_on_a_flush_and_the_reader_joins_it_like_a_detail_cut(traces: dict) -> None:
    (proc_dir,) = sorted(traces["all"].glob("process-*"))
    detail = budget.detail_rows(proc_dir)
    assert detail is not None and detail.total > 2 * BUDGET
    assert len(detail.stretches) == 1  # kept whole: one stretch
    ((start, end),) = choose_drops([detail], [0], BUDGET)[0]
    assert end is None and start - 1 in detail.times.tolist()  # just after a flush, to the end
    assert detail.rows[detail.times.tolist().index(start - 1)] <= BUDGET
    proc = load_process(proc_dir, drops=[(start, end)])
    assert proc.events.num_rows <= BUDGET + 20  # and the rows put at the cut
    ts = proc.events.column("ts_ns").to_numpy()
    kind = proc.events.column("kind").to_numpy()
    assert (kind == S.SESSION_END).sum() == 1
    assert proc.gaps is not None and len(proc.gaps) == 1
    meta = json.loads(proc.metadata["detail.budget"])
    assert meta["drops"] == [[start, None]] and meta["rows_left_out"]["events"] > 0
    assert ts.max() <= start  # on the joined clock the detail ends at the cut
    modes = proc.aggregates.column("mode").to_numpy()
    assert (modes == S.MODE_LEFT_OUT).any()
    assert proc.warnings == [], proc.warnings


@pytest.mark.parametrize("spec", ["all", "0.3s,0.5s,0.2s"])
def test_the_survey_counts_the_detail_rows_as_its_light_load_reads_the_events(
    traces: dict, spec: str
) -> None:
    from rlscope.analysis.parallel import survey

    (proc_dir,) = sorted(traces[spec].glob("process-*"))
    expected = budget.detail_rows(proc_dir)
    info = survey(str(proc_dir))
    assert expected is not None and not isinstance(info, Exception) and info.detail is not None
    got = info.detail
    for field in ("times", "rows", "stretches"):
        assert np.array_equal(getattr(got, field), getattr(expected, field)), field
    assert got.total == expected.total and got.total > BUDGET
    assert len(got.stretches) == (1 if spec == "all" else len(expected.stretches)) and len(got.stretches)
    assert survey(str(proc_dir), detail_rows=False).detail is None


def test_whole_later_stretches_are_left_out_and_joined(traces: dict) -> None:
    (proc_dir,) = sorted(traces["0.3s,0.5s,0.2s"].glob("process-*"))
    detail = budget.detail_rows(proc_dir)
    assert detail is not None and len(detail.stretches) >= 2
    later = [(int(a), None) for a, _ in detail.stretches[1:]]
    proc = load_process(proc_dir, drops=later[:1])  # the first later stretch, to the next one
    assert proc.warnings == [], proc.warnings
    assert json.loads(proc.metadata["detail.budget"])["detail_left_out_s"] > 0.1


def _keeps_the_whole_run(trace: Path) -> None:
    """The budget leaves detail of ``trace`` out, and its wall and unannotated time stay."""
    whole, cut = _both(trace)
    assert cut["detail"]["left_out_s"] > 0
    assert cut["raw"]["wall_s"] == pytest.approx(whole["raw"]["wall_s"], abs=1e-6)
    assert cut["raw"]["unannotated_s"] == pytest.approx(whole["raw"]["unannotated_s"], abs=5e-4)


def test_a_flush_while_the_session_stops_counts_nothing_past_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's end is timed before it stops its collectors and samples the machine's speed,
    and its end row is handed over after: a flush in between must not count that stop in the
    aggregates, which stand for the run's end where the budget cuts it (the detail ends at the end
    row's time)."""
    from rlscope import annotate
    from rlscope.overhead.correct import reference

    sample = reference.session_sample_ps

    def slow_sample() -> int:  # the stop takes 30 ms, and the writer flushes meanwhile
        session = annotate._active
        if session is not None and session._stopping:
            _spin(0.03)
            flush = threading.Thread(target=session._writer.flush, kwargs={"mark": True})
            flush.start()
            flush.join()
        return sample()

    monkeypatch.setattr(reference, "session_sample_ps", slow_sample)
    trace = tmp_path / "trace"
    with rlscope.profile(trace, detail="all", gpu=False, flush_interval=0.05):
        for _ in range(3 * BUDGET // 2):  # two rows a step: three budgets' worth
            with rlscope.scope("inference"):
                _spin(0.0003)
            _spin(0.0001)
    _keeps_the_whole_run(trace)


def test_a_process_that_starts_after_the_run_s_origin_loses_no_time_before_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that starts late in a run (a spawned worker) has the schedule's cuts from the
    run's origin, before its session started: the stretches there are not its own (no drop starts
    there), and its whole-run wall is the same with and without a budget."""
    from rlscope.trace import detail

    # the run began 2.7 s ago: its stretches at 0, 0.6, 1.2, 1.8 and 2.4 s passed before this profile
    monkeypatch.setenv(detail.ORIGIN_ENV, str(time.perf_counter_ns() - 2_700_000_000))
    trace = tmp_path / "trace"
    with rlscope.profile(trace, detail="0.3s,0.6s,0.15s", gpu=False, flush_interval=0.05):
        end = time.perf_counter() + 1.3  # to 4 s: its own stretches at 3 and 3.6 s, each past the
        while time.perf_counter() < end:  # budget even on a tenth of a core (100 k rows a second)
            with rlscope.scope("inference"):
                _spin(0.00002)
    _keeps_the_whole_run(trace)


def _starved_run(trace: Path, quiet: tuple[int, int]) -> None:
    """A process's trace written with a fake clock: 2.7 s of 1 ms steps (0.6 ms of them in an
    operation) under ``0.3s,0.6s,0.15s``, flushed every 50 ms but not between the ``quiet`` ms."""
    from rlscope.runtime.metadata import process_metadata
    from rlscope.trace.detail import DetailSchedule
    from rlscope.trace.writer import TraceWriter

    ms, main, origin = 1_000_000, 7, 10_000_000
    now = [origin]
    spec = "0.3s,0.6s,0.15s"
    writer = TraceWriter(
        trace / "process-1",
        process_metadata({"detail": spec}, origin, origin, 0),
        ["inference"],
        flush_interval=3600.0,
        clock=lambda: now[0],
        detail=DetailSchedule.parse(spec),
        origin_ns=origin,
        main_thread=main,
    )
    writer.events.append((origin, main, S.SESSION_START, -1, -1, -1, 0))
    for step in range(1, 2701):
        t = origin + (step - 1) * ms + 1
        writer.events.append((t, main, S.OP_BEGIN, step, -1, 0, 0))
        writer.events.append((t + 6 * ms // 10, main, S.OP_END, step, -1, 0, 0))
        if step % 50 == 0 and not quiet[0] < step < quiet[1]:
            now[0] = origin + step * ms
            writer.flush()
    writer.events.append((now[0], main, S.SESSION_END, -1, -1, -1, 0))
    writer.close()


@pytest.mark.parametrize(
    "quiet",
    [
        (1300, 1850),  # over the end of the left-out stretch at 1.2 s and the start of the kept one at 1.8 s
        (1900, 2450),  # over the end of the kept stretch at 1.8 s and the start of the left-out one at 2.4 s
    ],
)
def test_a_process_starved_of_its_flushes_over_a_gap_keeps_every_whole_run_figure(
    tmp_path: Path, quiet: tuple[int, int]
) -> None:
    """One flush's aggregates hold the end of a stretch and the start of the next when the process
    did not flush for the whole gap between them: no drop splits them."""
    trace = tmp_path / "trace"
    _starved_run(trace, quiet)
    _keeps_the_whole_run(trace)
    whole, cut = _both(trace)
    a, b = whole["raw"]["operations"]["inference"], cut["raw"]["operations"]["inference"]
    assert b["calls"] == a["calls"] == 2700
    assert b["exclusive_s"] == pytest.approx(a["exclusive_s"], abs=1e-6)


def _straddled_run(trace: Path) -> None:
    """A process's trace written with a fake clock under ``0.3s,0.6s,0.15s`` (stretches from 0, 0.6,
    1.2, 1.8 and 2.4 s): 2,700 steps of 0.6 ms, each over a whole millisecond, so one step is open
    at every pause and every resume, and one epoch from 249.699 ms to 700.301 ms around steps 250 to
    700, open over the gap from 0.3 to 0.6 s; flushed every 50 steps."""
    from rlscope.runtime.metadata import process_metadata
    from rlscope.trace.detail import DetailSchedule
    from rlscope.trace.writer import TraceWriter

    ms, main, origin = 1_000_000, 7, 10_000_000
    now = [origin]
    spec = "0.3s,0.6s,0.15s"
    writer = TraceWriter(
        trace / "process-1",
        process_metadata({"detail": spec}, origin, origin, 0),
        ["step", "epoch"],
        flush_interval=3600.0,
        clock=lambda: now[0],
        detail=DetailSchedule.parse(spec),
        origin_ns=origin,
        main_thread=main,
    )
    writer.events.append((origin, main, S.SESSION_START, -1, -1, -1, 0))
    ids = iter(range(1, 10_000))
    epoch = -1
    for step in range(1, 2701):
        t = origin + step * ms - 3 * ms // 10
        if step == 250:
            epoch = next(ids)
            writer.events.append((t - 1000, main, S.OP_BEGIN, epoch, -1, 1, 0))
        parent = epoch if 250 <= step <= 700 else -1
        inst = next(ids)
        writer.events.append((t, main, S.OP_BEGIN, inst, parent, 0, 0))
        writer.events.append((t + 6 * ms // 10, main, S.OP_END, inst, parent, 0, 0))
        if step == 700:
            writer.events.append((t + 6 * ms // 10 + 1000, main, S.OP_END, epoch, -1, 1, 0))
        if step % 50 == 0:
            now[0] = origin + step * ms + 4 * ms // 10
            writer.flush()
    writer.events.append((now[0], main, S.SESSION_END, -1, -1, -1, 0))
    writer.close()


@pytest.mark.parametrize("rows", [None, 1500, 1200])
def test_a_call_over_a_resume_or_a_gap_keeps_its_whole_time(tmp_path: Path, rows: int | None) -> None:
    """A call that began between two stretches and ended in the later one has its begin row at the
    resume, and one open over a gap spans it on the joined clock: the detail holds neither's time
    before the resume, the aggregates do. Every call's time is known here: each of the 2,700 steps
    takes 0.6 ms and the epoch 450.602 ms, with the whole detail and cut by a budget (1500 rows: the
    stretches from 0.6 and 1.8 s left out, to the next ones; 1200: from 0.6 to 1.8 s and from 2.4 s
    to the end), which keeps the detail begun at other resumes."""
    trace = tmp_path / "trace"
    _straddled_run(trace)
    summary = analyze(trace, workers=1, detail_budget=rows).summary
    assert (summary.get("detail", {}).get("left_out_s", 0.0) > 0) == (rows is not None)
    ops = summary["raw"]["operations"]
    assert ops["step"]["calls"] == 2700 and ops["epoch"]["calls"] == 1
    assert ops["step"]["total_s"] == pytest.approx(2700 * 0.0006, abs=1e-9)
    assert ops["epoch"]["total_s"] == pytest.approx(0.450602, abs=1e-9)
    assert ops["epoch"]["exclusive_s"] == pytest.approx(0.450602 - 451 * 0.0006, abs=1e-9)


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


def _detail(times: list[int], rows: list[int], stretches: list[tuple[int, int]]) -> DetailRows:
    return DetailRows(
        np.asarray(times, np.int64), np.asarray(rows, np.int64), rows[-1], np.asarray(stretches)
    )


def test_every_process_is_cut_at_one_instant_of_the_run() -> None:
    # a learner that reaches the budget at t=30 and a worker (clock 1000 ns ahead) that never does
    learner = _detail([10, 20, 30, 40, 50], [100, 400, 900, 1500, 2000], [(0, 60)])
    worker = _detail([1005, 1015, 1025, 1035, 1045, 1055], [10, 20, 30, 40, 50, 60], [(1000, 1060)])
    drops = choose_drops([learner, worker, None], [0, -1000, 0], 1000)
    assert drops[0] == [(31, None)]  # after its last flush within the budget
    assert drops[1] == [(1026, None)]  # after its last flush at or before the run's instant 30
    assert drops[2] == []  # no aggregates: kept whole
    assert choose_drops([learner, worker], [0, -1000], None) == [[], []]
    assert choose_drops([learner, worker], [0, -1000], 5000) == [[], []]


def test_half_the_budget_goes_to_whole_later_stretches_spread_over_the_run() -> None:
    # a first stretch [0, 100) of 1000 rows, then 9 stretches of 100 rows each, every 100 ns
    times = list(range(10, 1001, 10))
    stretches = [(0, 100)] + [(100 * k, 100 * k + 20) for k in range(1, 10)]
    per = [100 if t <= 100 else (50 if (t % 100) in (10, 20) else 0) for t in times]
    det = _detail(times, np.cumsum(per).tolist(), stretches)
    assert det.first_rows == 1000 and det.total == 1900
    (drops,) = choose_drops([det], [0], 1000)
    # 500 rows for the later ones: 5 of 100, evenly spaced; 500 for the first stretch: up to t=50
    assert drops[0] == (51, 100)
    kept = [a for a, _ in stretches[1:] if not any(d[0] <= a < (d[1] or 10**9) for d in drops)]
    assert kept == [100, 300, 500, 700, 900]
    # auto: the budget is the first stretch (at least FLOOR_ROWS): everything fits that floor here
    assert choose_drops([det], [0], AUTO) == [[]]


@pytest.mark.parametrize(
    ("text", "rows"),
    [("2M", 2_000_000), ("500k", 500_000), ("1.5m", 1_500_000), ("all", None), ("auto", AUTO), (None, AUTO)],
)
def test_budget_parse(text: str | None, rows: int | str | None) -> None:
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


def test_a_cut_table_keeps_the_rows_outside_the_drops() -> None:
    from rlscope.trace.drops import Before, Drops

    batch = pa.record_batch({"start_ns": pa.array([1, 5, 9, 12, 20, 31], pa.int64())})
    keep = Before(Drops([(10, 20), (30, None)]), "start_ns")
    assert keep(batch).column(0).to_pylist() == [1, 5, 9, 20]
    assert keep.rows == 2


def _write_stream(path: Path, batches: list[pa.RecordBatch]) -> None:
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)


def _meta_schema(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.replace_schema_metadata({"rlscope.schema_version": str(S.SCHEMA_VERSION)})


@pytest.mark.parametrize(
    "drops",
    [[(300, None)], [(100, 200), (300, None)], [(0, None)], [(300, 350)], [(250, 320), (320, None)]],
)
def test_a_dropped_tail_is_left_out_unread_as_the_cut_leaves_it_out(tmp_path: Path, drops: list) -> None:
    """The torch-op batches at a stream's end whose every row starts inside a drop are not decoded;
    the rows kept and the rows counted left out are those of the batch-by-batch cut."""
    from rlscope.trace import reader
    from rlscope.trace.drops import Before, Drops

    rng = np.random.default_rng(7)
    batches = []
    for lo in (0, 90, 190, 240, 310, 330, 390):  # overlapping, out of order at the edges, one empty
        start = np.sort(rng.integers(lo, lo + 60, 0 if lo == 390 else 50))
        table = {"start_ns": start, "end_ns": start + 5, "thread": np.ones(len(start), np.int64)}
        table["name"] = np.zeros(len(start), np.int64)
        batches.append(_meta_schema(pa.record_batch({k: pa.array(v, pa.int64()) for k, v in table.items()})))
    path = tmp_path / "backend.arrows"
    _write_stream(path, batches)
    columns = ["start_ns", "end_ns", "thread", "name"]
    whole = Before(Drops(drops), "start_ns")
    expected, _, warned = reader._read_stream(path, columns, rows=whole)
    cut = Before(Drops(drops), "start_ns")
    got, _, warnings = reader._read_stream(path, columns, rows=cut, before=cut)
    assert got.equals(expected) and warnings == warned == []
    assert cut.rows == whole.rows


def test_a_dropped_tail_of_a_stream_cut_short_is_read_whole(tmp_path: Path) -> None:
    """A stream that does not read to its end by its time column is read batch by batch: its
    truncation is said as without a budget."""
    from rlscope.trace import reader
    from rlscope.trace.drops import Before, Drops

    batches = [
        _meta_schema(pa.record_batch({"start_ns": pa.array(np.arange(a, a + 40), pa.int64())}))
        for a in (0, 100, 200)
    ]
    path = tmp_path / "backend.arrows"
    _write_stream(path, batches)
    path.write_bytes(path.read_bytes()[:-60])
    assert reader._dropped_tail(path, Before(Drops([(50, None)]), "start_ns")) is None
    cut = Before(Drops([(50, None)]), "start_ns")
    got, _, warnings = reader._read_stream(path, ["start_ns"], rows=cut, before=cut)
    assert got.column(0).to_pylist() == list(range(40)) and cut.rows == 40
    assert any("truncated or corrupt after 2 complete batch(es)" in w for w in warnings)


@pytest.mark.parametrize("seed", range(6))
def test_detail_rows_counts_each_row_at_the_flush_it_falls_before(seed: int) -> None:
    """A batch's rows counted per flush by comparisons with the flushes it spans are the rows
    searched one by one, at the flush times themselves too, over any number of flushes."""
    rng = np.random.default_rng(seed)
    flush = np.sort(rng.choice(1000, 12, replace=False)).astype(np.int64)
    got = np.zeros(len(flush) + 1, np.int64)
    expected = np.zeros(len(flush) + 1, np.int64)
    for _ in range(40):
        lo = int(rng.integers(0, 1100))
        width = int(rng.choice([0, 3, 40, 200, 1200]))
        ts = rng.integers(lo, lo + width + 1, int(rng.integers(0, 30)))
        ts = np.concatenate([ts, rng.choice(flush, 3)]) if rng.random() < 0.5 else ts  # rows at a flush
        budget._count_per_flush(got, flush, ts.astype(np.int64))
        if len(ts):
            expected += np.bincount(np.searchsorted(flush, ts, "left"), minlength=len(expected))
    assert np.array_equal(got, expected)


_TWO_PROCESSES = """
import multiprocessing as mp
import time

import rlscope


def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


def worker(n):
    for _ in range(n):
        with rlscope.scope("simulation"):
            spin(0.002)
        spin(0.0005)


if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=worker, args=(700,))
    p.start()
    for _ in range(500):
        with rlscope.scope("inference"):
            spin(0.002)
        with rlscope.scope("backprop"):
            spin(0.001)
    p.join()
"""


def test_a_learner_and_a_worker_cut_at_one_instant_keep_every_whole_run_figure(tmp_path: Path) -> None:
    """Two processes of one ``rlscope run`` (stretches laid from the run's origin): under a budget
    both lose detail, each at its own flushes, and the run's raw figures do not move."""
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text(_TWO_PROCESSES)
    trace = tmp_path / "trace"
    run = [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--detail", "0.3s,0.6s,0.15s"]
    run += ["--flush-interval", "0.05", "--trace-dir", str(trace), "--", sys.executable, str(script)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    details = [budget.detail_rows(p) for p in sorted(trace.glob("process-*"))]
    assert len(details) == 2 and all(d is not None for d in details)
    drops = choose_drops(details, [0, 0], 300)
    assert all(drops), drops  # both processes lose detail
    whole = analyze(trace, workers=1, detail_budget=None).summary["raw"]
    cut = analyze(trace, workers=1, detail_budget=300).summary
    try:
        assert cut["detail"]["left_out_s"] > 0
        raw = cut["raw"]
        assert raw["wall_s"] == pytest.approx(whole["wall_s"], abs=1e-6)
        # every process's own figures (the headline is the learner's: the worker's are in its role)
        got, want = over_processes(raw), over_processes(whole)
        assert got["unannotated_s"] == pytest.approx(want["unannotated_s"], abs=5e-4)
        for name, n in (("simulation", 700), ("inference", 500), ("backprop", 500)):
            g, w = got["operations"][name], want["operations"][name]
            assert g["calls"] == w["calls"] == n
            assert g["exclusive_s"] == pytest.approx(w["exclusive_s"], abs=5e-4)
    except AssertionError as e:  # a run of real processes: what it did is kept to explain it
        raise AssertionError(f"{e}\n{_explained(trace, whole, cut['raw'], drops)}") from None


def _explained(trace: Path, whole: dict, cut: dict, drops: list) -> str:
    """Each process's raw figures without and with the budget, its drops and its flushes around
    them, and where the trace is kept (copied out of the test's temporary folder)."""
    import shutil
    import tempfile

    kept = Path(tempfile.gettempdir()) / "rlscope-detail-budget" / f"trace-{time.time_ns()}"
    shutil.copytree(trace, kept)
    lines = [f"trace kept in {kept}"]
    for proc_dir, w, c, own in zip(
        sorted(trace.glob("process-*")), whole["processes"], cut["processes"], drops, strict=True
    ):
        detail = budget.detail_rows(proc_dir)
        assert detail is not None
        start = int(detail.stretches[0, 0])
        near = [
            int(t) - start for t in detail.times if any(abs(int(t) - x) < 1e8 for d in own for x in d if x)
        ]
        lines.append(
            f"{proc_dir.name}: drops {[(a - start, b and b - start) for a, b in own]} ns from {start},"
        )
        lines.append(
            f"  flushes within 0.1 s of them {near}, stretches {(detail.stretches - start).tolist()}"
        )
        for key in ("wall_s", "unannotated_s"):
            lines.append(f"  {key} {w[key]:.6f} -> {c[key]:.6f}")
        for name, op in w["operations"].items():
            lines.append(
                f"  {name} exclusive {op['exclusive_s']:.6f} -> {c['operations'][name]['exclusive_s']:.6f}"
            )
        lines.append(f"  detail {c.get('detail')}")
    return "\n".join(lines)


def test_a_drop_never_splits_a_flush_s_aggregates() -> None:
    # a first stretch [0, 100) and four later ones of 100 rows, a flush every 10 ns in each and one
    # in each gap, but for the gaps before 200 and 400: the process did not flush from 90 to 210 nor
    # from 290 to 410, so one flush's aggregates hold the end of a stretch and the start of the next
    times = [t for t in range(10, 901, 10) if (t % 200) // 100 == 0 or t % 200 == 150]
    times = [t for t in times if not 90 < t < 210 and not 290 < t < 410]
    rows = np.cumsum([10 if (t - 1) % 200 < 100 else 0 for t in times]).tolist()
    stretches = [(0, 100), (200, 300), (400, 500), (600, 700), (800, 900)]
    det = _detail(times, rows, stretches)
    # without the late flushes: the stretches at 200 and 600 left out, those at 400 and 800 kept
    assert choose_drops(
        [_detail(list(range(10, 901, 10)), list(range(10, 901, 10)), stretches)], [0], 400
    ) == [[(200, 400), (600, 800)]]
    # the first drop starts after the flush at 90, and ends at the kept stretch a flush in its gap
    # precedes (800): the one at 400 is left out with the stretch before it
    assert choose_drops([det], [0], 400) == [[(91, 800)]]
