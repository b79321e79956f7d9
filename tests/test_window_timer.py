"""Windows switch on their own schedule: a program without scopes still records backend ops and GPU
work in full windows, and figures are never scaled from a near-empty share of full windows.

Fake clock: the test calls the window timer's check (``Windows.switch_on_schedule``) where the
timer thread would (the thread itself runs only on the real clock), so every figure is exact.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import analyze
from rlscope.collectors import scope_native
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from tests.test_windows import COST, WORK, FakeCollector, _fake_op


def _unscoped_run(sess, clock, ops: int) -> FakeCollector:
    """``ops`` fake torch ops and no scope at all; the timer's check after each."""
    col = FakeCollector()
    sess.options["flush_interval"] = 1e6
    with sess:
        sess.add_toggler(col)  # joins: the run starts light
        for _ in range(ops):
            _fake_op(col, sess, clock.advance)
            sess.windows.switch_on_schedule(clock.now)
    return col


@pytest.mark.parametrize("recorder", ["native", "python"])
def test_a_program_without_scopes_records_backend_in_full_windows(tmp_path, monkeypatch, recorder):
    from tests.conftest import FakeClock

    monkeypatch.setenv(scope_native.ENV, "1" if recorder == "native" else "0")
    try:
        clock = FakeClock()
        sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, window_s=0.005)
        sess.clock = clock
        ops = 40_000  # 40-52 ms of fake work: about four pairs of 10 ms windows
        col = _unscoped_run(sess, clock, ops)
    finally:
        monkeypatch.delenv(scope_native.ENV)
        scope_native.install()
    assert col.switches >= 6
    ev = load_trace(sess.trace_dir).processes[0].events.to_pydict()
    windows = [
        (t, th) for t, k, th in zip(ev["ts_ns"], ev["kind"], ev["thread"], strict=True) if k == S.WINDOW
    ]
    assert len(windows) == col.switches + 1  # the opening row, then every switch the timer made
    s = analyze(sess.trace_dir).summary
    # no operation: the windows measure nothing, and nothing is removed; the time in full windows
    # holds COST per op as python, the rest is backend: the run's categories split as in full windows
    total = s["unannotated_s"]
    full_ops = (total * 1e9 - ops * WORK) / COST
    assert full_ops == pytest.approx(round(full_ops), abs=1e-3)  # the fake clock: exact counts
    n_full = round(full_ops)
    assert 0.2 * ops < n_full < 0.8 * ops
    backend = s["unannotated_categories"]["backend"]
    assert backend / total == pytest.approx(WORK / (WORK + COST), rel=1e-9)
    assert backend / total >= 0.75  # every op's own time is backend: only rlscope's cost is python


def test_the_timer_leaves_an_open_operation_whole(windowed):
    """Due while an operation is open on the main thread: no switch until it closes (at its exit)."""
    sess, clock = windowed
    col = FakeCollector()
    sess.options["flush_interval"] = 1e6
    with sess:
        sess.add_toggler(col)
        with rlscope.scope("update"):
            clock.advance(2 * sess.windows.timer_due_ns - clock.now)
            assert not sess.windows.switch_on_schedule(clock.now)
            assert col.switches == 1  # the join's switch to light only
        assert col.switches == 2  # the exit took the switch
        assert sess.windows.timer_due_ns > sess.window_due_ns  # a grace, for the main thread's exits
        clock.advance(sess.windows.timer_due_ns - clock.now - 1)
        assert not sess.windows.switch_on_schedule(clock.now)  # not yet past the grace
        clock.advance(1)
        assert sess.windows.switch_on_schedule(clock.now) and col.switches == 3


def test_the_timer_switches_from_its_own_thread_on_a_row_of_its_own(windowed):
    sess, clock = windowed
    col = FakeCollector()
    sess.options["flush_interval"] = 1e6
    with sess:
        sess.add_toggler(col)
        clock.advance(sess.windows.timer_due_ns - clock.now)
        done = []
        t = threading.Thread(target=lambda: done.append(sess.windows.switch_on_schedule(clock.now)))
        t.start()
        t.join()
        clock.advance(100)
    assert done == [True] and col.on
    ev = load_trace(sess.trace_dir).processes[0].events.to_pydict()
    rows = [(k, th) for k, th in zip(ev["kind"], ev["thread"], strict=True) if k == S.WINDOW]
    assert rows[-1][1] == t.native_id != sess.main_tid
    # and no rlscope-category rows off the main thread (the analysis reads those as the writer's)
    assert not [
        1 for k, th in zip(ev["kind"], ev["thread"], strict=True) if k == S.CAT_BEGIN and th == t.native_id
    ]


def test_figures_are_not_scaled_from_a_near_empty_share_of_full_windows(windowed):
    """Full windows held 1% of the run: categories are shown as recorded, with a note, not split
    as in those windows."""
    sess, clock = windowed
    col = FakeCollector()
    sess.options["flush_interval"] = 1e6
    with sess:
        sess.add_toggler(col)  # light
        sess.window_due_ns = 1 << 62  # held (the timer too): the test switches by hand

        def loop(n):
            for _ in range(n):
                with rlscope.scope("infer"):
                    _fake_op(col, sess, clock.advance)

        loop(990)
        sess.switch_window()  # full for 10 calls
        sess.window_due_ns = 1 << 62
        loop(10)
        sess.switch_window()
        sess.window_due_ns = 1 << 62
        loop(990)
    s = analyze(sess.trace_dir).summary
    notes = s["overhead"]["notes"]
    assert any("not scaled to the run" in n for n in notes), notes
    infer = s["operations"]["infer"]
    assert infer["total_s"] == pytest.approx(1990 * WORK * 1e-9, rel=1e-6)  # still corrected exactly
    # as recorded: backend only in the 10 full-window calls (split as in them, 3/4 would read backend)
    assert 0 < infer["categories"]["backend"] < 0.01 * infer["total_s"]


@pytest.mark.slow
def test_an_unmodified_matmul_loop_under_rlscope_run_is_backend(tmp_path):
    """An unmodified loop of ``a @ a`` under ``rlscope run`` reads backend, not ``[unannotated]
    python``: the windows switch without a scope. Shares, not times, but on the real clock: a loaded
    2-core machine read 85% against the 90% bound, so it is slow (the fake-clock test above holds
    the logic)."""
    pytest.importorskip("torch")
    prog = tmp_path / "loop.py"
    prog.write_text(
        "import time, torch\n"
        "a = torch.randn(256, 256)\n"
        "t = time.perf_counter()\n"
        "while time.perf_counter() - t < 1.5:\n"
        "    a @ a\n"
    )
    trace = tmp_path / "trace"
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze"]
    r = subprocess.run([*cmd, "--", sys.executable, str(prog)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    s = analyze(trace).summary
    wall, backend = s["wall_s"], s["unannotated_categories"].get("backend", 0.0)
    assert backend >= 0.9 * wall, (backend, wall)
    ev = load_trace(trace).processes[0].events.to_pydict()
    assert sum(1 for k in ev["kind"] if k == S.WINDOW) >= 4  # the windows alternated without a scope


def test_a_timer_switch_asks_collectors_for_their_off_main_thread_switch(windowed):
    """The timer switches through ``set_enabled_off_main`` where a collector has one (the native CUPTI
    consumer: no detach beside the job's CUDA calls); a scope exit on the main thread, ``set_enabled``."""
    sess, clock = windowed

    class Careful(FakeCollector):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, bool]] = []

        def set_enabled(self, on: bool) -> None:
            self.calls.append(("main", on))
            super().set_enabled(on)

        def set_enabled_off_main(self, on: bool) -> None:
            self.calls.append(("timer", on))
            super().set_enabled(on)

    col = Careful()
    sess.options["flush_interval"] = 1e6
    with sess:
        sess.add_toggler(col)  # the join's switch to light, on the main thread
        clock.advance(sess.windows.timer_due_ns - clock.now)
        assert sess.windows.switch_on_schedule(clock.now)  # the timer's: to full
        clock.advance(sess.window_due_ns - clock.now)
        with rlscope.scope("step"):
            clock.advance(1)
        # the scope exit took the due switch: to light, on the main thread
    assert col.calls[:3] == [("main", False), ("timer", True), ("main", False)]


def test_a_light_window_the_timer_began_is_finished_at_the_next_main_thread_exit(windowed):
    """CUPTI cannot be detached off the main thread: a light window the timer begins leaves it
    attached, and the very next scope exit on the main thread (due or not) detaches it, as rlscope's
    time; then the window's own schedule goes on."""
    sess, clock = windowed

    class Detaching(FakeCollector):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def set_enabled_off_main(self, on: bool) -> None:
            self.calls.append(f"timer {on}")
            super().set_enabled(on)

        def finish_off_main(self) -> None:
            self.calls.append("finish")

    col = Detaching()
    sess.options["flush_interval"] = 1e6
    with sess:
        sess.add_toggler(col)  # light, on the main thread
        clock.advance(sess.windows.timer_due_ns - clock.now)
        assert sess.windows.switch_on_schedule(clock.now)  # the timer: to full (nothing to finish)
        assert sess.window_due_ns > clock.now
        clock.advance(sess.windows.timer_due_ns - clock.now)
        assert sess.windows.switch_on_schedule(clock.now)  # the timer: to light, CUPTI left attached
        real_due = sess.windows._finish_due
        assert real_due is not None and real_due > clock.now and sess.window_due_ns == 0
        assert col.calls == ["timer True", "timer False"]
        with rlscope.scope("step"):
            clock.advance(1)
        assert col.calls == ["timer True", "timer False", "finish"]  # at that exit, not a switch
        assert sess.window_due_ns == real_due and sess.windows._finish_due is None
        with rlscope.scope("step"):
            clock.advance(1)
        assert col.calls[-1] == "finish"  # once
    ev = load_trace(sess.trace_dir).processes[0].events.to_pydict()
    windows = [m for k, m in zip(ev["kind"], ev["id"], strict=True) if k == S.WINDOW]
    assert windows.count(S.WINDOW_FULL) >= 2 and windows[-1] == S.WINDOW_LIGHT  # no extra switch
    main = sess.main_tid
    rows = zip(ev["kind"], ev["id"], ev["thread"], strict=True)
    marked = sum(1 for k, c, t in rows if k == S.CAT_BEGIN and c == C.PROFILER and t == main)
    assert marked == 2  # the main thread's one switch, and the detach: rlscope's own time


class _WaitingTurn:
    """A twin run's turns (overhead/validate/twin.py) whose one hand-over waits ``wait_ns`` on the
    fake clock for the partner; ``during`` runs ``at_ns`` into the wait (where the window timer may
    switch, on its own thread)."""

    def __init__(self, clock, due_ns: int, wait_ns: int, during=None, at_ns: int = 0) -> None:
        self.clock, self.due_ns, self.wait_ns, self.during, self.at_ns = clock, due_ns, wait_ns, during, at_ns

    def ready(self, now: int) -> bool:
        return True

    def hand_over(self, now: int) -> int:
        self.due_ns = 2**62  # one turn only
        self.clock.advance(self.at_ns)
        if self.during is not None:
            self.during()
        self.clock.advance(self.wait_ns - self.at_ns)
        return self.wait_ns

    def remove_points(self) -> None:
        pass

    def release(self) -> None:
        pass


@pytest.mark.parametrize("timer_switches", [False, True])
def test_a_window_keeps_its_share_of_the_jobs_time_across_a_twin_wait(tmp_path, monkeypatch, timer_switches):
    """A twin run waits for its partner at a scope exit (3 s here, a catch-up at the start of a
    run). A window begun before the wait ends as far into the job's time as without it; one the
    timer began during the wait holds its whole length of the job's time after it, not that plus
    the wait again (which ran a whole short loop in one full window)."""
    from rlscope.runtime import windows as windows_mod
    from tests.test_windows import _fake_clock_session

    monkeypatch.setattr(windows_mod, "WINDOW_RANDOM", False)
    sess, clock = _fake_clock_session(tmp_path / "t", window_s=0.1)  # windows of 100 ms
    col = FakeCollector()
    wait_ns = 3_000_000_000
    with sess:
        sess.add_toggler(col)  # the run starts light, due in 100 ms
        with rlscope.scope("step"):
            clock.advance(1_000_000)
        left = sess.window_due_ns - clock()
        during = (lambda: sess.windows.switch_on_schedule(clock())) if timer_switches else None
        sess.ticks.turn = _WaitingTurn(clock, clock() + 1, wait_ns, during, at_ns=1_000_000_000)
        sess.ticks.sync()
        clock.advance(2)
        with rlscope.scope("step"):  # its exit hands the turn over
            pass
        sess.ticks.turn = None
        if timer_switches:
            assert col.on  # the timer began a full window during the wait
            assert sess.window_due_ns - clock() == sess.windows.window_length_ns(S.WINDOW_FULL)
        else:
            assert not col.on
            assert sess.window_due_ns - clock() == left - 2
