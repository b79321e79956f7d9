"""Overhead correction: exact on synthetic traces, safe without a matching calibration, and close
to the unprofiled run on a real (small) workload."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope import categories
from rlscope.analysis import analyze
from rlscope.analysis.timeline import build_timeline
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.overhead.correct import residual as overhead
from rlscope.overhead.correct.residual import _flush_stall, correct_timeline, costs_for
from rlscope.trace import schema as S

SCOPE_IN, SCOPE_OUT = 300, 500  # ns, even: the halves are exact
CAT_IN, CAT_OUT = 200, 100


def _calibration(**costs) -> dict:
    return {
        "schema": cal_mod.SCHEMA,
        "created": "test",
        "key": cal_mod.current_key(),
        "costs_ns": costs,
    }


def _save(cal: dict) -> None:
    cal_mod.save(cal)


class Injector:
    """Advance a fake clock around each boundary as rlscope's own code would cost."""

    def __init__(self, clock) -> None:
        self.clock = clock

    def scope(self, name: str, body):
        c = self.clock
        c.advance(SCOPE_OUT // 2)  # before the begin timestamp: the enclosing side pays
        with rlscope.scope(name):
            c.advance(SCOPE_IN // 2)
            body()
            c.advance(SCOPE_IN // 2)
        c.advance(SCOPE_OUT // 2)

    def simulator(self, ns: int) -> None:
        c = self.clock
        c.advance(CAT_OUT // 2)
        with rlscope.simulator():
            c.advance(CAT_IN // 2 + ns + CAT_IN // 2)
        c.advance(CAT_OUT // 2)


def test_correction_is_exact_on_injected_overhead(fake_session):
    sess, clock = fake_session
    sess.options["flush_interval"] = 1e6
    inj = Injector(clock)
    iters = 7
    with sess:
        for _ in range(iters):

            def inner():
                clock.advance(1000)
                inj.simulator(2000)

            def outer():
                clock.advance(400)
                inj.scope("inner", inner)

            inj.scope("outer", outer)
            clock.advance(50)  # unannotated glue
    _save(
        _calibration(
            scope={"inside": SCOPE_IN, "outside": SCOPE_OUT, "total": SCOPE_IN + SCOPE_OUT},
            category={"inside": CAT_IN, "outside": CAT_OUT, "total": CAT_IN + CAT_OUT},
        )
    )
    s = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    assert s["corrected_for_overhead"] and s["calibration"]["status"] == "applied"
    ops, raw_ops = s["operations"], s["raw"]["operations"]
    # true times: inner 1000 + simulator 2000; outer 400 + inner; glue 50 per iteration
    assert ops["inner"]["total_s"] == pytest.approx(iters * 3000e-9, abs=1e-12)
    assert ops["inner"]["categories"]["simulator"] == pytest.approx(iters * 2000e-9, abs=1e-12)
    assert ops["inner"]["categories"]["python"] == pytest.approx(iters * 1000e-9, abs=1e-12)
    assert ops["outer"]["total_s"] == pytest.approx(iters * 3400e-9, abs=1e-12)
    assert ops["outer"]["exclusive_s"] == pytest.approx(iters * 400e-9, abs=1e-12)
    assert s["wall_s"] == pytest.approx(iters * 3450e-9, abs=1e-12)
    assert s["unannotated_s"] == pytest.approx(iters * 50e-9, abs=1e-12)
    # the raw figures keep the overhead, and the JSON says what was removed
    injected = iters * (2 * (SCOPE_IN + SCOPE_OUT) + CAT_IN + CAT_OUT)
    assert s["raw"]["wall_s"] == pytest.approx(iters * 3450e-9 + injected * 1e-9, abs=1e-12)
    assert raw_ops["inner"]["total_s"] > ops["inner"]["total_s"]
    assert s["overhead"]["removed_s"]["scope"] == pytest.approx(iters * 2 * (SCOPE_IN + SCOPE_OUT) * 1e-9)
    assert s["overhead"]["not_removable_s"] == 0
    json.dumps(s)  # the whole summary stays JSON


def _events_table(rows: list[tuple], cost: list[int] | None = None) -> pa.Table:
    """A process's events table from rows of the event columns (and a cost column, if given)."""
    cols = list(zip(*rows, strict=True))
    if cost is not None:
        cols.append(cost)
    schema = S.events_schema({}, cost=cost is not None)
    return pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, cols, strict=True)}, schema=schema)


def test_writer_flush_stall_is_removed_where_it_happened():
    rows = [  # main thread 1: one operation over [0, 10000); writer thread 2 flushes over [2000, 4000)
        (0, 1, S.SESSION_START, -1, -1, -1, 0),
        (0, 1, S.OP_BEGIN, 0, -1, 0, 0),
        (2000, 2, S.CAT_BEGIN, 7, 0, -1, 0),
        (4000, 2, S.CAT_END, 7, 0, -1, 0),
        (10000, 1, S.OP_END, 0, -1, 0, 0),
        (10000, 1, S.SESSION_END, -1, -1, -1, 0),
    ]
    tl = build_timeline(_events_table(rows))
    stall = _flush_stall(tl, per_event_ns=500.0)  # 2 rows recorded before the flush: 1000 ns
    main = tl.thread == 1
    assert stall[main].sum() == pytest.approx(1000.0)
    op_row = np.flatnonzero(main & (tl.kind == S.OP_BEGIN))[0]
    assert stall[op_row] == pytest.approx(1000.0)
    # a flush that measured its own CPU time (the native buffer's end row): that, not the per-row cost
    tl = build_timeline(_events_table(rows, cost=[0, 0, 0, 1500, 0, 0]))
    for per_event in (0.0, 500.0):
        assert _flush_stall(tl, per_event_ns=per_event)[tl.thread == 1].sum() == pytest.approx(1500.0)


def test_a_sessions_flushes_measure_their_own_cpu_time(tmp_path):
    """With the native event buffer, each marked flush's end row carries its CPU time (ns)."""
    from rlscope.collectors import scope_native
    from rlscope.overhead.correct.residual import flush_intervals

    if scope_native.available() != "native":
        pytest.skip("no C compiler or Python headers: the Python queue measures nothing")
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0, flush_interval=0.05):
        for _ in range(20):
            for _ in range(2000):
                with rlscope.scope("op"):
                    pass
            time.sleep(0.02)
    tl = build_timeline(rlscope.load_trace(str(tmp_path / "t")).processes[0].events)
    start, end, converted, cpu = flush_intervals(tl)
    assert len(start) >= 5 and (cpu > 0).all()
    assert (cpu <= (end - start) + 1_000_000).all()  # CPU time within the flush's wall time (+1 ms tick)
    busy = converted > 1000
    assert busy.any() and np.median(cpu[busy] / converted[busy]) < 5_000  # ns a row: plausible


def _small_trace(tmp_path):
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        for _ in range(100):
            with rlscope.scope("op"):
                pass
    return rlscope.load_trace(str(tmp_path / "t"))


def _assert_raw(s: dict, fragment: str) -> None:
    """No usable calibration and no light windows: raw figures, or (the C scope methods, which time
    themselves) only the boundaries' own measurements removed; a warning says why either way."""
    assert any(fragment in w for w in s["warnings"]), s["warnings"]
    if s["calibration"]["status"] == "boundaries only":
        assert s["corrected_for_overhead"]
        assert any("only what the scope and category boundaries measured" in w for w in s["warnings"])
        got, raw = s["operations"]["op"]["total_s"], s["raw"]["operations"]["op"]["total_s"]
        assert 0 <= got < raw  # the empty scope's own boundary time, measured, is out
        return
    assert not s["corrected_for_overhead"]
    assert s["operations"] == s["raw"]["operations"]
    assert s["calibration"]["status"] in ("none", "off")
    assert any("figures are uncorrected" in w for w in s["warnings"]), s["warnings"]


def test_a_trace_without_calibration_or_windows_removes_what_its_boundaries_measured():
    """The plan without a calibration: windows when some process has light windows, else the
    boundaries' own measurements when every process's boundaries timed themselves (the C methods
    from ABI 5: ``scopes`` native-5), else raw; never any of them when raw figures were asked for."""
    from rlscope.overhead.correct.plan import plan, self_timed

    assert self_timed({"scopes": "native-5"}) and self_timed({"scopes": "native-12"})
    assert not any(self_timed({"scopes": v}) for v in ("native-4", "python", "native-x", ""))
    meta = {"host": "nowhere", "scopes": "native-5"}
    assert plan([meta], [True]).info["status"] == "windows only"
    got = plan([meta, meta], [False, False])
    assert got.info["status"] == "boundaries only" and all(c is not None for c in got.costs)
    assert "no overhead calibration" in got.warnings[0]
    assert plan([meta, {**meta, "scopes": "python"}], [False, False]).info["status"] == "none"
    assert plan([{**meta, "scopes": "native-4"}], [False]).warnings[0].startswith("figures are uncorrected")
    assert plan([meta], [False], correct=False).info["status"] == "off"


def test_missing_calibration_warns_and_reports_raw(tmp_path):
    _assert_raw(analyze(_small_trace(tmp_path)).summary, "no overhead calibration")


def test_stale_calibration_warns_and_reports_raw(tmp_path):
    cal = _calibration(scope={"inside": 1.0, "outside": 1.0})
    cal["key"] = {**cal["key"], "torch": "1.0.0"}
    _save(cal)
    _assert_raw(analyze(_small_trace(tmp_path)).summary, "stale")


def test_foreign_calibration_file_warns_and_reports_raw(tmp_path):
    cal = _calibration(scope={"inside": 1.0, "outside": 1.0})
    cal["key"] = {**cal["key"], "host": "another-machine", "cpu": "other"}
    path = cal_mod.save(cal, tmp_path / "foreign.json")
    _assert_raw(analyze(_small_trace(tmp_path), calibration=str(path)).summary, "another machine")


@pytest.mark.parametrize(
    "content", ["{not json", '{"schema": "other"}', '{"schema": "rlscope.overhead.correct.calibration/1"}']
)
def test_corrupt_calibration_warns_and_reports_raw(tmp_path, content):
    trace = _small_trace(tmp_path)
    cal_mod.path_for(cal_mod.trace_key(trace.processes[0].metadata)).parent.mkdir(parents=True, exist_ok=True)
    cal_mod.path_for(cal_mod.trace_key(trace.processes[0].metadata)).write_text(content)
    _assert_raw(analyze(trace).summary, "calibration")


def test_cli_with_foreign_calibration_is_one_warning_and_exit_0(tmp_path):
    trace = _small_trace(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", str(trace.path), "--calibration", str(bad)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0
    assert "Traceback" not in r.stderr
    assert str(bad) in r.stderr  # one warning naming the file, raw or boundaries-only figures


def test_calibrate_cli_writes_a_loadable_file(tmp_path):
    out = tmp_path / "cal.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlscope.cli.main",
            "calibrate",
            "--quick",
            "--no-gpu",
            "-q",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    cal = cal_mod.load(out)
    assert cal["key"] == cal_mod.current_key()
    refused = {x["entry"]: x["reason"] for x in cal["refused"]}
    writer_in_run = cal["key"]["scopes"].startswith("native")  # flushes time themselves (native buffer)
    assert ("writer" in cal["skipped"]) == writer_in_run
    kinds = ("scope", "category", "backend") if writer_in_run else ("scope", "category", "writer", "backend")
    for kind in kinds:  # stored, or refused and said on stderr
        assert (kind in cal["costs_ns"]) != (kind in refused)
        assert kind not in refused or refused[kind] in r.stderr
    for kind, c in cal["costs_ns"].items():
        assert c.get("total", c.get("per_event", c.get("per_sample", 0))) > 0 and c["spread"] <= 0.2, kind
    assert "cuda_api.native" in cal["skipped"]


def test_demo_reports_corrected_figures(tmp_path, quick_calibration, monkeypatch):
    cal, directory = quick_calibration
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(directory))
    cal_mod.save(cal)
    out = tmp_path / "demo.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlscope.cli.main",
            "demo",
            "--seconds",
            "2",
            "--device",
            "cpu",
            "--trace-dir",
            str(tmp_path / "trace"),
            "--html",
            str(tmp_path / "r.html"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(out.read_text())
    assert s["corrected_for_overhead"] and s["calibration"]["status"] == "applied"
    assert s["wall_s"] < s["raw"]["wall_s"]
    assert "corrected for rlscope's overhead" in r.stdout
    assert "raw" in s and "corrected" in s


def test_gpu_trace_correction_keeps_the_session_end(fake_session):
    """CUDA API calls after the session's end (CUPTI's teardown) are not part of the run, raw or corrected."""
    sess, clock = fake_session
    sess.options["flush_interval"] = 1e6
    with sess:
        t0 = clock.now
        with rlscope.scope("launch"):
            clock.advance(10_000)
        clock.advance(1_000)
    end = clock.now
    th = sess.thread_state().thread
    rows = [  # category, start, end, correlation, thread, device, stream, name, bytes
        (3, t0 + 2_000, t0 + 4_000, 1, th, -1, -1, 0, 0),
        (4, t0 + 5_000, t0 + 9_000, 1, -1, 0, 7, 0, 0),
        (3, end + 1_000, end + 2_000_000, 2, th, -1, -1, 0, 0),  # after the session ended
    ]
    schema = S.columns_schema(S.GPU_COLUMNS_DOC, "native")
    cols = list(zip(*rows, strict=True))
    table = pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, cols, strict=True)}, schema=schema)
    with pa.OSFile(str(sess.process_dir / S.GPU_FILE), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(table)
    _save(
        _calibration(
            scope={"inside": 0.0, "outside": 0.0}, **{"cuda_api.native": {"inside": 500.0, "outside": 0.0}}
        )
    )
    s = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    assert s["corrected_for_overhead"]
    assert s["raw"]["wall_s"] == pytest.approx(11_000e-9)
    assert s["wall_s"] == pytest.approx(10_500e-9)  # one API call inside the run, 500 ns each
    assert s["operations"]["launch"]["total_s"] == pytest.approx(9_500e-9)
    assert s["operations"]["launch"]["categories"]["cuda_api"] == pytest.approx(1_500e-9)
    assert s["gpu_bound_s"] == pytest.approx(4_000e-9)


def test_measured_boundary_costs_are_removed_where_they_were_paid():
    # one operation, its two boundaries measured: enter 100 ns before / 300 after its timestamp,
    # exit 200 before / 400 after; a calibration that finds 60 ns inside and 40 outside beyond that
    pack = lambda pre, post: pre | (post << 32)  # noqa: E731
    rows = [  # (ts, thread, kind, id, parent, name, flags, cost)
        (0, 1, S.SESSION_START, -1, -1, -1, 0, 0),
        (1000, 1, S.OP_BEGIN, 0, -1, 0, 0, pack(100, 300)),
        (11000, 1, S.OP_END, 0, -1, 0, 0, pack(200, 400)),
        (20000, 1, S.SESSION_END, -1, -1, -1, 0, 0),
    ]
    schema = S.events_schema({}, cost=True)
    cols = list(zip(*rows, strict=True))
    table = pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, cols, strict=True)}, schema=schema)
    tl = build_timeline(table)
    scope = {"inside": 560.0, "outside": 540.0, "measured_inside": 500.0, "measured_outside": 500.0}
    cal = {"costs_ns": {"scope": scope}}
    costs = costs_for(cal, {})
    fix = correct_timeline(tl, costs)
    dur = fix.timeline.duration
    # before the op: its enter's pre (100) and half the outside dispatch (20); inside: the enter's
    # post (300) + the exit's pre (200) + the inside dispatch (60); after: the exit's post + 20
    assert list(dur) == [1000 - 120, 10000 - 560, 9000 - 420, 0]
    assert fix.removed_s["scope"] == pytest.approx(1100e-9)
    # without the calibration's figure around the measurement, the calibrated costs apply
    plain = correct_timeline(tl, costs_for({"costs_ns": {"scope": {"inside": 560.0, "outside": 540.0}}}, {}))
    assert list(plain.timeline.duration) == [1000 - 270, 10000 - 560, 9000 - 270, 0]
    # a scope cost the calibration refused (or no calibration, windows only): what the boundaries
    # measured is still removed, the dispatch around it is not, and the note says so
    refused = costs_for({"costs_ns": {}}, {})
    assert any("boundaries that measured their own cost" in n for n in refused.notes)
    for costs in (refused, overhead.EventCosts.measured_only()):
        assert list(correct_timeline(tl, costs).timeline.duration) == [900, 9500, 8600, 0]


def _write_memory(sess, rows, collector: str = "native") -> None:
    """memory.arrows by hand: (ts, thread, device, action, addr, bytes, stream) per event."""
    schema = S.columns_schema(S.MEMORY_COLUMNS_DOC, collector)
    cols = list(zip(*rows, strict=True))
    table = pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, cols, strict=True)}, schema=schema)
    with pa.OSFile(str(sess.process_dir / S.MEMORY_FILE), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(table)


MEM_NS = 250  # the recorder's injected cost per allocator event


def test_memory_recorder_cost_is_removed_where_events_were_recorded(fake_session):
    """Each allocator event costs MEM_NS on the fake clock where it happens: in `backprop` (on the
    main thread and on autograd's device thread, which the main thread waits for), in `act`, and in
    unannotated glue. The corrected figures are the times without those costs, exactly."""
    sess, clock = fake_session
    sess.options["flush_interval"] = 1e6
    th = sess.thread_state().thread
    autograd = th + 1
    events = []  # (ts, thread, device, action, addr, bytes, stream)

    def alloc_free(thread: int, addr: int) -> None:
        for action in (S.MEMORY_ALLOC, S.MEMORY_FREE):
            clock.advance(100)
            events.append((clock.now, thread, 0, action, addr, 512, 7))
            clock.advance(MEM_NS)

    iters = 5
    with sess:
        for i in range(iters):
            with rlscope.scope("act"):
                clock.advance(1_000)
                alloc_free(th, 1000 + i)  # 2 events, 200 ns of its own work
            with rlscope.scope("backprop"):
                clock.advance(2_000)
                for k in range(3):  # the backward pass's allocations, on another thread
                    alloc_free(autograd, 2000 + k)
            alloc_free(th, 3000 + i)  # unannotated
    _write_memory(sess, events)
    _save(_calibration(scope={"inside": 0.0, "outside": 0.0}, memory={"per_event": float(MEM_NS)}))
    s = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    ops, raw = s["operations"], s["raw"]["operations"]
    assert raw["act"]["total_s"] == pytest.approx(iters * (1_200 + 2 * MEM_NS) * 1e-9)
    assert ops["act"]["total_s"] == pytest.approx(iters * 1_200e-9, abs=1e-12)
    assert ops["backprop"]["total_s"] == pytest.approx(iters * 2_600e-9, abs=1e-12)
    assert s["unannotated_s"] == pytest.approx(iters * 200e-9, abs=1e-12)
    assert s["overhead"]["removed_s"]["memory"] == pytest.approx(iters * 10 * MEM_NS * 1e-9)
    assert s["overhead"]["costs_used"]["memory"] == "memory"


@pytest.mark.parametrize("case", ["uncalibrated", "refused", "history"])
def test_memory_events_without_a_calibrated_cost_are_kept_and_said(fake_session, case):
    """A memory cost the calibration lacks leaves the events' time in, and the note says why: not
    measured (calibrate with a GPU), refused (the calibration's own reason), or torch's history."""
    sess, clock = fake_session
    sess.options["flush_interval"] = 1e6
    th = sess.thread_state().thread
    with sess, rlscope.scope("act"):
        clock.advance(1_000)
        ts = clock.now
        clock.advance(1_000)
    source = "native" if case != "history" else "torch-history"
    _write_memory(sess, [(ts, th, 0, S.MEMORY_ALLOC, 1, 512, 7)], source)
    memory = {"memory": {"per_event": 500.0}} if case == "history" else {}
    cal = _calibration(scope={"inside": 0.0, "outside": 0.0}, **memory)
    why = "unstable, the median 82 ns is known to +-31% (90%) > 20% after 40.2 s"
    if case == "refused":
        cal["refused"] = [{"entry": "memory", "reason": f"memory: refused: {why}"}]
    _save(cal)
    s = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    assert s["operations"]["act"]["total_s"] == pytest.approx(2_000e-9)
    assert "memory" not in s["overhead"]["removed_s"]
    said = " ".join(s["overhead"]["notes"])
    expected = {
        "uncalibrated": "memory not calibrated on this machine (`rlscope calibrate` with a GPU)",
        "refused": f"memory cost refused by the calibration ({why}): the cost of 1 recorded",
        "history": "allocator history",
    }[case]
    assert expected in said
    assert case != "refused" or "memory not calibrated" not in said


def test_a_cuda_call_inside_rlscopes_own_work_stays_rlscopes():
    """A twin run's synchronize at a turn (overhead/validate/twin.py) is a CUDA call inside the profiler
    category: its time is rlscope's (removed), not the job's CUDA API time; one outside stays CUDA."""
    rows = [  # main thread 1: an operation over [0, 10000); rlscope's work over [2000, 6000)
        (0, 1, S.SESSION_START, -1, -1, -1, 0),
        (0, 1, S.OP_BEGIN, 0, -1, 0, 0),
        (2000, 1, S.CAT_BEGIN, 7, 0, -1, 0),
        (6000, 1, S.CAT_END, 7, 0, -1, 0),
        (10000, 1, S.OP_END, 0, -1, 0, 0),
        (10000, 1, S.SESSION_END, -1, -1, -1, 0),
    ]
    api = (np.array([1, 1]), np.array([3000, 7000]), np.array([5000, 8000]))  # one inside, one outside
    tl = build_timeline(_events_table(rows), api=api)
    seg = np.diff(np.append(tl.ts, tl.ts[-1]))
    by_cat = {c: int(seg[(tl.cat == c) & (tl.thread == 1)].sum()) for c in np.unique(tl.cat)}
    assert by_cat[categories.PROFILER] == 4000  # [2000, 6000), its CUDA call included
    assert by_cat[categories.CUDA_API] == 1000  # [7000, 8000)


def test_python_costs_are_priced_at_the_runs_own_speed(fake_session, monkeypatch):
    """A calibration taken while the host ran Python at half the run's speed stored its boundary
    costs at that speed (``ref_ns`` 200 against the run's 100): priced at the run's speed, the
    injected overhead is removed exactly again; the native classes would not be scaled."""
    from rlscope.overhead.correct import reference

    monkeypatch.setattr(reference, "session_sample_ps", lambda: 100_000)  # the run: 100 ns an iteration
    sess, clock = fake_session
    sess.options["flush_interval"] = 1e6
    inj = Injector(clock)
    iters = 5
    with sess:
        for _ in range(iters):
            inj.scope("outer", lambda: inj.simulator(2000))
            clock.advance(50)
    slow = 2  # the calibration's machine speed: twice as slow, every Python cost twice as high
    _save(
        _calibration(
            scope={"inside": SCOPE_IN * slow, "outside": SCOPE_OUT * slow, "total": 0, "ref_ns": 200.0},
            category={"inside": CAT_IN * slow, "outside": CAT_OUT * slow, "total": 0, "ref_ns": 200.0},
            writer={"per_event": 0.0, "ref_ns": 200.0},
        )
    )
    s = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    ops = s["operations"]
    assert ops["outer"]["total_s"] == pytest.approx(iters * 2000e-9, abs=1e-12)
    assert ops["outer"]["categories"]["simulator"] == pytest.approx(iters * 2000e-9, abs=1e-12)
    assert s["wall_s"] == pytest.approx(iters * 2050e-9, abs=1e-12)
    assert any("priced at this run's speed" in n and "x0.50" in n for n in s["overhead"]["notes"])


def test_run_speed_is_the_mean_of_the_undisturbed_samples():
    rows = [
        (10, 1, S.SESSION_START, -1, 120_000, -1, 0),
        (20, 1, S.WINDOW, S.WINDOW_LIGHT, 100_000, -1, 0),
        (30, 1, S.OP_BEGIN, 0, 999_000, 0, 0),  # an operation's parent: not a sample
        (40, 1, S.WINDOW, S.WINDOW_FULL, 400_000, -1, 0),  # disturbed: over 2.5x the fastest
        (50, 1, S.WINDOW, S.WINDOW_LIGHT, -1, -1, 0),  # not timed
        (60, 1, S.SESSION_END, -1, 110_000, -1, 0),
    ]
    assert overhead.run_reference_ns(_events_table(rows)) == pytest.approx(110.0)
    old = [(10, 1, S.SESSION_START, -1, -1, -1, 0), (60, 1, S.SESSION_END, -1, -1, -1, 0)]
    assert overhead.run_reference_ns(_events_table(old)) is None


def test_speed_scale_leaves_native_costs_and_unknown_references_alone():
    costs = costs_for(
        _calibration(
            scope={
                "inside": 100,
                "outside": 50,
                "total": 150,
                "measured_inside": 60,
                "measured_outside": 50,
                "ref_ns": 100.0,
            },
            backend={"inside": 0, "outside": 700, "total": 700, "ref_ns": 100.0},
            category={"inside": 80, "outside": 40, "total": 120},  # an older file: no ref_ns
            writer={"per_event": 30.0, "ref_ns": 150.0},
        ),
        {},
    )
    fast = overhead.at_run_speed(costs, 300.0)
    assert fast.inside[S.CostClass.SCOPE] == 300 and fast.outside[S.CostClass.SCOPE] == 150
    assert fast.dispatch_inside[S.CostClass.SCOPE] == pytest.approx(120)  # (100 - 60) x 3
    assert fast.outside[S.CostClass.BACKEND] == 700  # native: as calibrated
    assert fast.inside[S.CostClass.CATEGORY] == 80  # no reference: as calibrated
    assert fast.writer_per_event == pytest.approx(60)  # 300 / 150
    capped = overhead.at_run_speed(costs, 10_000.0)
    assert capped.inside[S.CostClass.SCOPE] == 100 * overhead.MAX_SPEED_SCALE
    assert overhead.at_run_speed(costs, None) is costs


def test_a_session_times_the_reference_loop_at_start_switches_and_end(tmp_path):
    """Real clock: the samples lie near the loop timed here (the same code, overhead/correct/reference.py)."""
    from rlscope.overhead.correct import reference

    with rlscope.profile(tmp_path / "t", backend=False) as sess:
        sess.windows.togglers = [type("Toggle", (), {"set_enabled": lambda self, on: None})()]
        for _ in range(3):
            sess.switch_window()
    ev = rlscope.load_trace(str(tmp_path / "t")).processes[0].events
    kind, parent = ev.column("kind").to_numpy(), ev.column("parent").to_numpy()
    timed = np.isin(kind, (S.SESSION_START, S.SESSION_END)) | ((kind == S.WINDOW) & (parent != -1))
    assert timed.sum() == 5 and (parent[timed] > 0).all()
    here = reference.reference_ns()
    run = overhead.run_reference_ns(ev)
    assert here / 3 < run < here * 3
