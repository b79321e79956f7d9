"""The C scope methods (collectors/scope_native.c) record exactly what annotate.py's Python ones do."""

from __future__ import annotations

import resource
import shutil
import threading
import warnings

import numpy as np
import pytest

import rlscope
from rlscope import annotate, categories
from rlscope.collectors import scope_native
from rlscope.trace import schema as S
from tests.conftest import FakeClock

pytestmark = pytest.mark.skipif(
    scope_native.available() != "native", reason="no C compiler or Python headers"
)


@pytest.fixture
def recorder(monkeypatch):
    """Run a test body under one recorder, then put the default back."""

    def use(which: str) -> None:
        """``python``, ``native`` (the full C path) or ``lean`` (the C lean path)."""
        monkeypatch.setenv(scope_native.ENV, "0" if which == "python" else "1")
        monkeypatch.setenv(scope_native.LEAN_ENV, "1" if which == "lean" else "0")

    yield use
    monkeypatch.delenv(scope_native.ENV, raising=False)
    monkeypatch.delenv(scope_native.LEAN_ENV, raising=False)
    scope_native.install()


def _scenario(session, clock) -> None:
    """Everything the hot path and its fallbacks handle: nesting, recursion, phases, categories,
    an exception, a scope closed around an open one, stray exits, a decorator, another thread."""
    a, b = rlscope.scope("a"), rlscope.scope("b")

    @rlscope.scope("decorated")
    def f(x: int) -> int:
        clock.advance(3)
        return x + 1

    session.start()
    try:
        with rlscope.phase("training"):
            for i in range(3):
                with a:
                    clock.advance(10)
                    with b:
                        clock.advance(5)
                        with rlscope.simulator():
                            clock.advance(7)
                        with a:  # recursive
                            clock.advance(2)
                    assert f(i) == i + 1
        with pytest.raises(ValueError), a:
            clock.advance(4)
            raise ValueError("the user's error propagates")
        a.__enter__()
        b.__enter__()
        clock.advance(6)
        a.__exit__(None, None, None)  # closes b too, flagged
        b.__exit__(None, None, None)  # nothing open: nothing written
        annotate._SIMULATOR.__exit__(None, None, None)  # no category open: nothing written

        def worker() -> None:
            with a:
                clock.advance(1)

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        with a:  # a collector's category, from Python, inside a scope
            annotate.category_enter(session, categories.PROFILER)
            clock.advance(2)
            annotate.category_exit(session, categories.PROFILER)

        def leaves_open() -> None:
            b.__enter__()
            clock.advance(1)

        t = threading.Thread(target=leaves_open)
        t.start()
        t.join()
        # left open at the stop, closed there and flagged: a phase, two scopes, two categories
        rlscope.phase("evaluation").__enter__()
        a.__enter__()
        annotate._SIMULATOR.__enter__()
        b.__enter__()
        annotate.category_enter(session, categories.BACKEND)
        clock.advance(3)
    finally:
        session.stop()


def _events(trace_dir) -> list[tuple]:
    ev = rlscope.load_trace(str(trace_dir)).processes[0].events
    columns = ("ts_ns", "thread", "kind", "id", "parent", "name", "flags")
    rows = list(zip(*(ev.column(c).to_pylist() for c in columns), strict=True))
    threads: dict[int, int] = {}
    out = []
    for r in rows:
        if r[2] in (S.WINDOW,):
            continue
        if r[2] in (S.SESSION_START, S.SESSION_END):  # parent: the speed sample, which differs per run
            r = (*r[:4], -1, *r[5:])
        out.append((r[0], threads.setdefault(r[1], len(threads)), *r[2:]))  # thread ids differ per run
    return out


def test_native_and_python_scopes_write_the_same_events(tmp_path, recorder):
    got = {}
    for which in ("python", "native", "lean"):
        recorder(which)
        clock = FakeClock()
        session = rlscope.profile(tmp_path / which, backend=False, gpu=False, nvml_hz=0)
        session.clock = clock
        _scenario(session, clock)
        assert session.scope_recorder == ("python" if which == "python" else "native")
        assert scope_native.scope_recorder() == session.scope_recorder
        got[which] = _events(session.trace_dir)
        scopes = rlscope.load_trace(str(session.trace_dir)).processes[0].metadata["scopes"]
        assert scopes == {"python": "python", "native": "native-full-6", "lean": "native-6"}[which]
    assert len(got["native"]) > 40
    assert got["native"] == got["python"]
    assert got["lean"] == got["python"]
    kinds = {r[2] for r in got["native"]}
    assert {S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.CAT_END, S.PHASE_BEGIN, S.PHASE_END} <= kinds
    assert any(r[6] == S.FLAG_RECURSIVE for r in got["native"])
    assert any(r[6] == S.FLAG_FORCED_CLOSE for r in got["native"])


def test_the_three_paths_switch_windows_and_alternate_long_operations_alike(tmp_path, recorder):
    """Windows and long operations read the session's due times and threshold at every exit: the
    full C path from the session's dictionary, the lean one from C globals its setters keep
    current. The same fake run on each writes the same rows, window switches included."""
    from tests.test_windows import _run_fake

    got = {}
    for which in ("python", "native", "lean"):
        recorder(which)
        clock = FakeClock()
        session = rlscope.profile(tmp_path / which, backend=False, gpu=False, window_s=50e-6)
        session.clock = clock
        col = _run_fake(session, clock, 300, long_every=50)
        assert col.switches > 20, which  # the windows really alternated
        ev = rlscope.load_trace(str(session.trace_dir)).processes[0].events
        columns = ("ts_ns", "kind", "id", "parent", "name", "flags")
        rows = zip(*(ev.column(c).to_pylist() for c in columns), strict=True)
        # the parent of window rows and of the rows of sessions: the speed sample
        # (correct/reference.py), which differs
        timed = (S.WINDOW, S.SESSION_START, S.SESSION_END)
        got[which] = [(*r[:3], -1, *r[4:]) if r[1] in timed else r for r in rows]
    assert sum(r[1] == S.WINDOW for r in got["python"]) > 20
    assert got["native"] == got["python"]
    assert got["lean"] == got["python"]


def test_the_lean_path_reuses_the_state_of_threads_that_ended(tmp_path, recorder):
    """Threads started one after another keep one per-thread struct between them, not one each;
    a thread that ended with a scope open keeps its struct until the stop closes that scope."""
    recorder("lean")
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0).start()
    try:
        with rlscope.scope("main"):
            pass
        mod = scope_native.load()

        def worker() -> None:
            with rlscope.scope("work"):
                pass

        for _ in range(3):  # warm: whatever this process's other threads hold
            t = threading.Thread(target=worker)
            t.start()
            t.join()
        before = mod.lean_structs()
        for _ in range(30):
            t = threading.Thread(target=worker)
            t.start()
            t.join()
        assert mod.lean_structs() <= before + 1
        left_open = threading.Thread(target=rlscope.scope("orphan").__enter__)
        left_open.start()
        left_open.join()
        for _ in range(5):  # must not take the ended thread's struct: its scope is still open
            t = threading.Thread(target=worker)
            t.start()
            t.join()
    finally:
        session.stop()
    ev = rlscope.load_trace(str(tmp_path / "t")).processes[0]
    kind, name, flags = (ev.events.column(c).to_numpy() for c in ("kind", "name", "flags"))
    orphan = np.array([ev.name(int(n)) == "orphan" for n in name])
    assert (orphan & (kind == S.OP_BEGIN)).sum() == 1
    assert ((orphan & (kind == S.OP_END)) & (flags == S.FLAG_FORCED_CLOSE)).sum() == 1
    work = np.array([ev.name(int(n)) == "work" for n in name])
    assert (work & (kind == S.OP_BEGIN)).sum() == (work & (kind == S.OP_END) & (flags == 0)).sum() == 38


def test_native_scopes_take_their_no_session_path_and_the_timers(tmp_path, recorder):
    recorder("native")
    assert scope_native.install() == "native"
    with rlscope.scope("x") as sc, rlscope.simulator():
        assert sc is rlscope.scope("x") and annotate._active is None
    from rlscope.overhead.validate import aggregate, child

    agg = aggregate.TimerAggregate()
    ts = child.TimerSession(
        record=child.ChildRecord(None, "timers"), aggregate=agg, clock=FakeClock()
    ).start()
    try:
        with rlscope.scope("timed"):
            ts.clock.advance(100)
    finally:
        ts.stop()
    assert agg.ops[rlscope.scope("timed").name_id][5] == 1  # one call, recorded through the C path


def test_event_buffer_rows_round_trip():
    buf = scope_native.event_buffer()
    rows = [(i, 7, S.OP_BEGIN, i, -1, 3, 0) for i in range(10_000)]
    for r in rows:
        buf.append(r)
    assert len(buf) == len(rows)
    buf.append((1, 2, 3, 4, 5, 6, 7, (40 << 32) | 30))  # a row with its measured cost (pre 30, post 40)
    table = np.frombuffer(buf.drain(), np.int64).reshape(-1, 8)  # the events' columns, then the cost
    assert len(buf) == 0 and table.tolist() == [[*r, 0] for r in rows] + [
        [1, 2, 3, 4, 5, 6, 7, (40 << 32) | 30]
    ]
    assert [int(x) for x in S.unpack_cost(table[-1, 7])] == [30, 40]
    with pytest.raises(TypeError):
        buf.append((1, 2))


def test_no_compiler_keeps_the_python_methods_with_one_warning(monkeypatch, tmp_path, recorder):
    recorder("native")
    scope_native.uninstall()
    monkeypatch.setattr(scope_native, "_module", None)
    monkeypatch.setattr(scope_native, "_failed", None)
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert scope_native.install() == "python"
        assert scope_native.install() == "python"  # asked once per process
    assert [str(w.message) for w in caught] == [
        "rlscope: scopes use the Python recorder (slower): no C compiler (cc)"
    ]
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0).start()
    with rlscope.scope("still recorded"):
        pass
    session.stop()
    assert session.scope_recorder == "python"
    ev = rlscope.load_trace(str(session.trace_dir)).processes[0]
    assert ev.metadata["scopes"] == "python"


def test_an_unwritable_cache_keeps_the_python_methods(monkeypatch, tmp_path, recorder):
    recorder("native")
    scope_native.uninstall()
    monkeypatch.setattr(scope_native, "_module", None)
    monkeypatch.setattr(scope_native, "_failed", None)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(blocker))  # build/ under a file: mkdir fails
    with pytest.warns(UserWarning, match="cannot build the native scope recorder"):
        assert scope_native.install() == "python"
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0).start()
    session.stop()
    assert session.scope_recorder == "python"


def test_event_buffer_drains_into_a_kept_array_in_parts():
    buf = scope_native.event_buffer()
    rows = [(i, 7, S.OP_END, i, -1, 3, 0) for i in range(10)]
    for r in rows:
        buf.append(r)
    out = np.zeros((4, 8), np.int64)
    assert buf.drain_into(out) == 4 and out.tolist() == [[*r, 0] for r in rows[:4]]
    assert len(buf) == 6  # the rest waits for the next drain, in order
    big = np.zeros((16, 8), np.int64)
    assert buf.drain_into(big) == 6 and big[:6].tolist() == [[*r, 0] for r in rows[4:]]
    assert len(buf) == 0 and buf.drain_into(big) == 0


def test_reserve_ahead_keeps_the_rows_and_only_grows():
    buf = scope_native.event_buffer()
    rows = [(i, 7, S.OP_BEGIN, i, -1, 3, 0) for i in range(5000)]  # past the first growth (4,096)
    for r in rows:
        buf.append(r)
    assert buf.reserve_ahead(100_000) and buf.capacity() == 100_000
    assert not buf.reserve_ahead(50_000) and buf.capacity() == 100_000  # never shrinks
    buf.append(rows[0])
    table = np.frombuffer(buf.drain(), np.int64).reshape(-1, 8)
    assert table.tolist() == [[*r, 0] for r in [*rows, rows[0]]]


@pytest.mark.skipif(not hasattr(resource, "RUSAGE_THREAD"), reason="per-thread page faults: Linux")
def test_a_fresh_sessions_scopes_take_no_page_faults_on_the_jobs_thread(tmp_path):
    # 10,000 scope pairs are 20,000 rows, 1.1 MB: growing the buffer from the appends faulted about
    # 270 fresh pages on this thread; the writer touches them beforehand, off the GIL
    from rlscope.trace.writer import AHEAD_MIN_ROWS

    work = rlscope.scope("work")
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False) as s:
        assert s.events.capacity() >= AHEAD_MIN_ROWS
        f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(10_000):
            with work:
                pass
        faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - f0
    assert faults < 40, faults
    proc = rlscope.load_trace(str(tmp_path / "t")).processes[0]
    begins = proc.events.column("name").to_numpy()[proc.events.column("kind").to_numpy() == S.OP_BEGIN]
    assert sum(proc.name(int(n)) == "work" for n in begins) == 10_000  # every row reached the trace


def test_boundaries_measure_their_own_cost(tmp_path):
    # every scope and category boundary on the common path writes what it cost into its row; a
    # phase (the Python methods) and rows rlscope writes itself measure nothing
    work = rlscope.scope("work")
    opts = {"backend": False, "gpu": False, "windows": False, "nvml_hz": 0}
    with rlscope.profile(tmp_path / "t", **opts), rlscope.phase("training"):
        for _ in range(2000):
            with work, rlscope.simulator():
                pass
    ev = rlscope.load_trace(str(tmp_path / "t")).processes[0].events
    kind, cost = ev.column("kind").to_numpy(), ev.column(S.EVENT_COST_COLUMN[0]).to_numpy()
    boundaries = np.isin(kind, (S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.CAT_END)) & (
        ev.column("thread").to_numpy() == threading.get_native_id()
    )
    assert (cost[boundaries] > 0).mean() > 0.95
    pre, post = S.unpack_cost(cost[boundaries & (cost > 0)])
    assert (pre + post).max() < 10_000_000 and np.median(pre + post) < 20_000  # ns: plausible
    assert (cost[np.isin(kind, (S.PHASE_BEGIN, S.PHASE_END, S.SESSION_START, S.SESSION_END))] == 0).all()
