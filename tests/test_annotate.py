"""Annotation semantics with a fake clock: exclusive/inclusive attribution must be exact."""

from __future__ import annotations

import threading

import pytest

import rlscope
from rlscope import annotate
from rlscope.errors import RLScopeError
from tests.conftest import summary_of

S = 1e-9  # seconds per fake-clock ns


def test_nested_exclusive_inclusive_exact(fake_session):
    sess, clock = fake_session
    with sess:
        clock.advance(5)  # unannotated, no phase
        with rlscope.phase("training"):
            with rlscope.scope("outer"):
                clock.advance(10)
                with rlscope.scope("inner"):
                    clock.advance(20)
                    with rlscope.simulator():
                        clock.advance(30)
                    clock.advance(1)
                clock.advance(4)
            clock.advance(7)  # in training, unannotated
    s = summary_of(sess.trace_dir)
    ops = s["operations"]
    assert ops["outer"]["exclusive_s"] == pytest.approx(14 * S)
    assert ops["outer"]["total_s"] == pytest.approx(65 * S)
    assert ops["inner"]["exclusive_s"] == pytest.approx(51 * S)
    assert ops["inner"]["categories"] == pytest.approx({"simulator": 30 * S, "python": 21 * S})
    assert ops["inner"]["calls"] == 1
    assert s["unannotated_s"] == pytest.approx(12 * S)
    assert s["wall_s"] == pytest.approx(77 * S)
    total = sum(o["exclusive_s"] for o in ops.values()) + s["unannotated_s"]
    assert total == pytest.approx(s["wall_s"])
    training = s["phases"]["training"]
    assert training["wall_s"] == pytest.approx(72 * S)
    assert training["unannotated_s"] == pytest.approx(7 * S)
    assert s["phases"]["[no phase]"]["wall_s"] == pytest.approx(5 * S)
    assert ops["inner"]["resources"] == pytest.approx({"cpu_only": 51 * S, "gpu_only": 0.0, "cpu_gpu": 0.0})


def test_recursion_not_double_counted(fake_session):
    sess, clock = fake_session
    with sess, rlscope.scope("f"):
        clock.advance(10)
        with rlscope.scope("f"):
            clock.advance(10)
    ops = summary_of(sess.trace_dir)["operations"]
    assert ops["f"]["total_s"] == pytest.approx(20 * S)
    assert ops["f"]["exclusive_s"] == pytest.approx(20 * S)
    assert ops["f"]["calls"] == 2


def test_exception_propagates_and_scope_closes(fake_session):
    sess, clock = fake_session

    class Boom(Exception):
        pass

    with sess:
        with pytest.raises(Boom), rlscope.scope("fails"):
            clock.advance(3)
            raise Boom
        clock.advance(2)
        assert sess.thread_state().ops == []
    s = summary_of(sess.trace_dir)
    assert s["operations"]["fails"]["total_s"] == pytest.approx(3 * S)
    assert s["unannotated_s"] == pytest.approx(2 * S)


def test_decorator_forms(fake_session):
    sess, clock = fake_session

    @rlscope.scope("named")
    def f(x):
        clock.advance(4)
        return x + 1

    @rlscope.scope
    def g():
        clock.advance(6)

    @rlscope.simulator
    def sim():
        clock.advance(8)

    with sess:
        assert f(1) == 2
        g()
        with rlscope.scope("sim_op"):
            sim()
    ops = summary_of(sess.trace_dir)["operations"]
    assert ops["named"]["exclusive_s"] == pytest.approx(4 * S)
    assert ops["test_decorator_forms.<locals>.g"]["exclusive_s"] == pytest.approx(6 * S)
    assert ops["sim_op"]["categories"] == pytest.approx({"simulator": 8 * S})


def test_scopes_from_other_threads_are_recorded(fake_session):
    sess, clock = fake_session

    def worker():
        with rlscope.scope("worker_op"):
            clock.advance(50)

    with sess, rlscope.scope("main_op"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    s = summary_of(sess.trace_dir)
    assert s["operations"]["worker_op"]["exclusive_s"] == pytest.approx(50 * S)
    # the main thread was inside main_op the whole time the worker ran
    assert s["operations"]["main_op"]["exclusive_s"] == pytest.approx(50 * S)


def test_open_scopes_closed_at_stop_and_flagged(fake_session):
    sess, clock = fake_session
    sess.start()
    rlscope.phase("training").__enter__()
    rlscope.scope("never_closed").__enter__()
    clock.advance(9)
    sess.stop()
    s = summary_of(sess.trace_dir)
    assert s["operations"]["never_closed"]["total_s"] == pytest.approx(9 * S)
    findings = rlscope.check_trace(str(sess.trace_dir))
    assert any("closed by rlscope" in f.message for f in findings)


def test_noop_without_session_and_double_start(tmp_path):
    assert annotate._active is None
    with rlscope.scope("x"), rlscope.phase("p"), rlscope.simulator():
        pass
    with rlscope.profile(tmp_path / "a", backend=False), pytest.raises(RLScopeError):
        rlscope.profile(tmp_path / "b").start()
    assert annotate._active is None


def test_bad_names():
    with pytest.raises(TypeError):
        rlscope.scope("")
    with pytest.raises(TypeError):
        rlscope.phase(3)  # type: ignore[arg-type]


def test_public_api_is_small():
    assert set(rlscope.__all__) == {
        "Session",
        "__version__",
        "check_trace",
        "load_trace",
        "phase",
        "profile",
        "scope",
        "simulator",
        "waiting",
        "wrap_env",
    }


def test_backend_recording_leaves_torch_compile_working(tmp_path):
    torch = pytest.importorskip("torch")

    def f(x):
        return torch.sin(x) * 2 + 1

    compiled = torch.compile(f, backend="eager")
    x = torch.linspace(0, 1, 16)
    with rlscope.profile(tmp_path / "t", gpu=False), rlscope.scope("compiled_call"):
        y = compiled(x)
    assert torch.allclose(y, f(x))
    assert "compiled_call" in summary_of(tmp_path / "t")["operations"]
