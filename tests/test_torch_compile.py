"""torch.compile: compilations recorded as the compile category and counted with their recompile reasons,
automatic operations in compiled code, and traces without torch's rows still analyzed.

The analysis test writes compile.arrows by hand on the fake clock. The real compilations use Dynamo's
``aot_eager`` backend and a backend that busy-waits a known time (no inductor: its C++ compile takes
seconds on a small machine) and check the recorded time against that wait and torch's own timer of the
same compilations in the same process (``compilation_time_metrics``), the recompilations against the
guards torch reports.
"""

from __future__ import annotations

import time

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.trace import schema as S
from tests.conftest import summary_of, write_stream

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")
S_NS = 1_000_000_000


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    dynamo.reset()  # compiled code of other tests would be cache hits here
    yield
    dynamo.reset()


def _frame_compile_s() -> float:
    from torch._dynamo.utils import compilation_time_metrics

    return sum(compilation_time_metrics.get("_compile.compile_inner", []))


def test_torch_rows_are_the_compile_category_and_counted(fake_session):
    """A frame's compilation is its interval; its stage rows and its recompile row are no time of the
    timeline; the reason row is its frame's, the backward graph's compile is the same function's."""
    sess, clock = fake_session
    t0 = clock.now = 10 * S_NS
    with sess, rlscope.scope("step"):  # names are written with the session's
        f, why = (
            rlscope.annotate.intern("f (policy.py:3)"),
            rlscope.annotate.intern("tensor 'x' size mismatch"),
        )
        clock.advance(2 * S_NS)
    main = sess.main_tid
    frame2 = (t0 + S_NS, t0 + S_NS + S_NS // 2)
    rows = [
        (t0, t0 + S_NS // 4, main, S.COMPILE_TORCH_FRAME, f),
        (t0 + S_NS // 4 - S_NS // 10, t0 + S_NS // 4, main, S.COMPILE_TORCH_AOT, f),
        (t0 + S_NS // 4 - S_NS // 4, t0 + S_NS // 4, main, S.COMPILE_TORCH_DYNAMO, f),  # torch's split
        (*frame2, main, S.COMPILE_TORCH_FRAME, f),
        (*frame2, main, S.COMPILE_TORCH_RECOMPILE, why),
        (t0 + S_NS + S_NS // 2, t0 + S_NS + 3 * S_NS // 4, main, S.COMPILE_TORCH_BACKWARD, f),
    ]
    write_stream(sess.process_dir / S.COMPILE_FILE, S.COMPILE_COLUMNS_DOC, rows)
    summary = summary_of(sess.trace_dir)
    assert summary["operations"]["step"]["categories"]["compile"] == pytest.approx(1.0, abs=1e-9)
    got = summary["compile"]
    assert (got["compilations"], got["recompiles"], got["seconds"]) == (3, 1, pytest.approx(1.0, abs=1e-9))
    assert got["stages"] == {
        "dynamo": pytest.approx(0.25, abs=1e-9),
        "aot_autograd": pytest.approx(0.1, abs=1e-9),
        "inductor": 0.0,
        "autotune": 0.0,
        "runtime": 0.0,
    }
    assert got["functions"] == [
        {
            "function": "f (policy.py:3)",
            "compilations": 3,
            "seconds": pytest.approx(1.0, abs=1e-9),
            "recompiles": 1,
        }
    ]
    assert got["recompile_reasons"] == [
        {"function": "f (policy.py:3)", "reason": "tensor 'x' size mismatch", "count": 1}
    ]


def test_the_innermost_of_a_torch_op_and_a_compilation_names_the_time(fake_session):
    """A compilation torch starts inside one of the program's ops (the backward graph compiled inside
    ``loss.backward()``) is compile time, not the op's; the torch ops a compilation runs itself stay
    backend time. Step of 10 s: op A [1, 5) holding a compilation [2, 4); a compilation [6, 9)
    holding op B [7, 8)."""
    sess, clock = fake_session
    t0 = clock.now = 10 * S_NS
    with sess, rlscope.scope("step"):
        clock.advance(10 * S_NS)
    main, name = sess.main_tid, rlscope.annotate.intern("aten::add")
    at = lambda s: t0 + s * S_NS  # noqa: E731
    write_stream(
        sess.process_dir / S.BACKEND_FILE,
        S.BACKEND_COLUMNS_DOC,
        [(at(1), at(5), main, name), (at(7), at(8), main, name)],
    )
    rows = [
        (at(2), at(4), main, S.COMPILE_TORCH_BACKWARD, -1),
        (at(6), at(9), main, S.COMPILE_TORCH_FRAME, -1),
    ]
    write_stream(sess.process_dir / S.COMPILE_FILE, S.COMPILE_COLUMNS_DOC, rows)
    cats = summary_of(sess.trace_dir)["operations"]["step"]["categories"]
    assert cats["compile"] == pytest.approx(2.0 + 2.0, abs=1e-9)  # [2, 4) and [6, 9) less B
    assert cats["backend"] == pytest.approx(2.0 + 1.0, abs=1e-9)  # A less its compilation, and B
    assert cats["python"] == pytest.approx(3.0, abs=1e-9)


def test_a_trace_of_jax_stages_alone_keeps_its_summary(fake_session):
    """A compile.arrows of JAX's stage codes only (as every trace before torch's rows) analyzes as it
    did: JAX's stages, no torch keys."""
    sess, clock = fake_session
    t0 = clock.now = 10 * S_NS
    with sess, rlscope.scope("step"):
        clock.advance(S_NS)
    rows = [(t0, t0 + S_NS // 2, sess.main_tid, S.COMPILE_BACKEND, -1)]
    write_stream(sess.process_dir / S.COMPILE_FILE, S.COMPILE_COLUMNS_DOC, rows)
    got = summary_of(sess.trace_dir)["compile"]
    assert set(got) == {"compilations", "seconds", "persistent_cache_hits", "stages", "functions"}
    assert list(got["stages"]) == ["trace", "lower", "backend_compile"]


BACKEND_S = 0.25  # each compilation's backend busy-waits this long


def test_recorded_compile_time_agrees_with_torchs_and_recompiles_say_why(tmp_path):
    """The recorded compile time of a function compiled on its first call, again for a new shape and a
    new dtype, against torch's own timer of the same compilations; each recompilation with its guard."""

    def scaled(x):
        return torch.tanh(x * 2.0).sum()

    def slow_backend(gm, example_inputs):
        """A backend that busy-waits a known time: each compilation lasts at least that, so the time
        outside the compile callbacks (a few ms, more on a loaded machine) is a small part of it."""
        end = time.perf_counter() + BACKEND_S
        while time.perf_counter() < end:
            pass
        return gm.forward

    compiled = torch.compile(scaled, backend=slow_backend, dynamic=False)
    before = _frame_compile_s()
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        with rlscope.scope("first"):
            compiled(torch.ones(4))
        with rlscope.scope("cached"):
            compiled(torch.ones(4))
        with rlscope.scope("new_shape"):
            compiled(torch.ones(8))
        with rlscope.scope("new_dtype"):
            compiled(torch.ones(8, dtype=torch.float64))
    torch_s = _frame_compile_s() - before
    summary = analyze(tmp_path / "t").summary
    got = summary["compile"]
    assert got["compilations"] == 3 and got["recompiles"] == 2
    # the callbacks run inside torch's timer of the frame: a little less, never more; each holds its
    # backend's busy-wait
    assert 3 * BACKEND_S <= got["seconds"] <= torch_s
    assert got["seconds"] >= 0.9 * torch_s
    assert sum(got["stages"].values()) == pytest.approx(got["seconds"], rel=1e-6)
    (fn,) = got["functions"]
    assert fn["function"].startswith("scaled (test_torch_compile.py:")
    assert (fn["compilations"], fn["recompiles"]) == (3, 2)
    reasons = {r["reason"] for r in got["recompile_reasons"]}
    assert any("size mismatch" in r for r in reasons), reasons
    assert any("dtype mismatch" in r for r in reasons), reasons
    ops = summary["operations"]
    assert ops["first"]["categories"]["compile"] > 0 and ops["new_dtype"]["categories"]["compile"] > 0
    assert "compile" not in ops["cached"]["categories"]


def _graph_breaks() -> int:
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def test_automatic_operations_in_compiled_code_and_no_graph_break_of_rlscopes(tmp_path):
    """A compiled policy's calls still open inference (under no_grad) and backprop (to the optimizer's
    step); a compiled update's graphs, run by AOT autograd with autograd off, are no inference; rlscope's
    hooks add no graph break and no compilation to either."""
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(policy.parameters(), lr=0.01)
    compiled_policy = torch.compile(policy, backend="aot_eager")

    def update(x, y):
        loss = ((compiled_policy(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    compiled_update = torch.compile(update, backend="aot_eager")

    def loop(step) -> tuple[int, int]:
        from torch._dynamo.utils import counters

        breaks, frames = _graph_breaks(), counters["stats"]["unique_graphs"]
        for _ in range(3):
            with torch.no_grad():
                compiled_policy(torch.ones(8, 4))
            step(torch.ones(8, 4), torch.zeros(8, 2))
        return _graph_breaks() - breaks, counters["stats"]["unique_graphs"] - frames

    plain = loop(compiled_update)  # without rlscope: torch's own graph breaks (backward, zero_grad)
    dynamo.reset()
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False, auto_ops=True):
        profiled = loop(compiled_update)
        eager_update = loop(update)
    assert profiled == plain
    assert eager_update[0] == 0
    ops = analyze(tmp_path / "t").summary["operations"]
    assert ops["inference"]["calls"] == 6 and ops["inference"]["auto"]
    assert ops["backprop"]["calls"] == 3 and ops["backprop"]["auto"]  # the eager update's
    assert (
        ops["backprop"]["categories"].get("compile", 0) > 0
    )  # the backward graph compiled at its first call


def test_a_compilation_between_the_detail_stretches_is_compile_time(tmp_path):
    """A function compiled after the first detail stretch has ended: the aggregates, which stand for
    the run between the stretches, count its compilation as compile time, not as the operation's
    Python, to the nanosecond of torch's compile callbacks; the operations around it keep none."""

    def scaled(x):
        return torch.tanh(x * 3.0).sum()

    def slow_backend(gm, example_inputs):
        end = time.perf_counter() + BACKEND_S
        while time.perf_counter() < end:
            pass
        return gm.forward

    def spin(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    compiled = torch.compile(scaled, backend=slow_backend, dynamic=False)
    trace = tmp_path / "t"
    with rlscope.profile(trace, backend=False, gpu=False, detail="0.05s,60s,0.05s", flush_interval=0.02):
        with rlscope.scope("warm"):
            spin(0.15)  # past the first stretch
        with rlscope.scope("first"):
            compiled(torch.ones(4))
        with rlscope.scope("after"):
            spin(0.05)
    summary = analyze(trace, correct=False).summary
    assert summary["detail"]["summarized_s"] > BACKEND_S
    ops = summary["operations"]
    assert ops["first"]["categories"]["compile"] == pytest.approx(summary["compile"]["seconds"], abs=1e-6)
    assert ops["first"]["categories"]["compile"] >= BACKEND_S
    assert "compile" not in ops["warm"]["categories"] and "compile" not in ops["after"]["categories"]
