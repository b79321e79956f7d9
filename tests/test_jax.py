"""JAX programs: compilations recorded as the compile category and counted, the bundled JAX PPO.

The exact tests run on the fake clock and report stages through jax's own monitoring API, as jax
does when it compiles (collectors/jax_compile.py); the analysis tests write compile.arrows by hand
and need no jax. Real compilations check the count (distinct shapes, a cached call) and the time
against ``jax.jit(f).lower(x).compile()`` timed around it in the same process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import rlscope
from rlscope import annotate, categories
from rlscope.analysis import analyze
from rlscope.analysis.timeline import compile_intervals
from rlscope.trace import schema as S
from rlscope.trace.glue import Gaps
from tests.conftest import summary_of, write_stream

S_NS = 1_000_000_000
TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND = "/jax/core/compile/backend_compile_duration"


def stage(jax, event: str, seconds: float, function: str) -> None:
    """A compile stage of ``seconds`` that ends now, reported as jax reports one."""
    jax.monitoring.record_event_duration_secs(event, seconds, fun_name=function)


def test_compile_stages_are_their_operations_compile_time(fake_session):
    jax = pytest.importorskip("jax")
    sess, clock = fake_session
    with sess, rlscope.phase("training"):
        with rlscope.scope("update"):
            clock.advance(S_NS)
            stage(jax, TRACE, 0.25, "update")  # 0.75 s .. 1.0 s of the update
            clock.advance(S_NS // 10)
            stage(jax, LOWER, 0.1, "jit(update)")
            clock.advance(S_NS // 2)
            stage(jax, BACKEND, 0.5, "jit(update)")  # 1.1 s .. 1.6 s
            clock.advance(S_NS // 2)
        for _ in range(3):  # cached calls: no stage reported
            with rlscope.scope("update"):
                clock.advance(S_NS // 10)
    summary = summary_of(sess.trace_dir)
    update = summary["operations"]["update"]
    assert update["calls"] == 4
    assert update["total_s"] == pytest.approx(2.4, abs=1e-9)
    assert update["categories"]["compile"] == pytest.approx(0.85, abs=1e-9)
    assert update["categories"]["python"] == pytest.approx(1.55, abs=1e-9)
    assert summary["compile"] == {
        "compilations": 1,
        "seconds": pytest.approx(0.85, abs=1e-9),
        "persistent_cache_hits": 0,
        "stages": {
            "trace": pytest.approx(0.25, abs=1e-9),
            "lower": pytest.approx(0.1, abs=1e-9),
            "backend_compile": pytest.approx(0.5, abs=1e-9),
        },
        "functions": [
            {"function": "jit(update)", "compilations": 1, "seconds": pytest.approx(0.5, abs=1e-9)}
        ],
    }


def test_a_stage_reported_after_the_session_is_not_recorded(fake_session):
    jax = pytest.importorskip("jax")
    sess, clock = fake_session
    with sess, rlscope.scope("step"):
        clock.advance(S_NS)
    stage(jax, BACKEND, 0.5, "jit(late)")
    assert "compile" not in summary_of(sess.trace_dir)


class Toggler:
    """A collector the windows switch (torch's op recorder, CUPTI): on in full windows only."""

    on = False  # the run starts light

    def start(self) -> Toggler:
        return self

    def set_enabled(self, on: bool) -> None:
        self.on = on

    def stop(self) -> None:
        pass


@pytest.mark.parametrize("window", ["light", "full"])
def test_compile_time_stays_as_recorded_in_either_window(fake_session, window):
    """The corrected breakdown splits an operation's time as its full windows did (they alone see
    backend and CUDA time); compile time is recorded in every window and held by a few instances, so
    it stays as recorded: neither lost from a first call in a light window, nor spread from one call in
    a full window over every instance."""
    jax = pytest.importorskip("jax")
    sess, clock = fake_session
    col = Toggler()
    compiled = False
    with sess:
        sess.add_toggler(col)
        for _ in range(2000):
            with rlscope.scope("step"):
                clock.advance(S_NS // 2000)
                if col.on:  # backend time, recorded only in full windows
                    annotate.category_enter(sess, categories.BACKEND)
                    clock.advance(S_NS // 2000)
                    annotate.category_exit(sess, categories.BACKEND)
                else:
                    clock.advance(S_NS // 2000)
                if not compiled and col.on == (window == "full"):
                    clock.advance(S_NS // 4)
                    stage(jax, BACKEND, 0.25, "jit(step)")
                    compiled = True
    events = rlscope.load_trace(str(sess.trace_dir)).processes[0].events
    modes = events.column("id").to_numpy()[events.column("kind").to_numpy() == S.WINDOW]
    assert set(modes.tolist()) == {S.WINDOW_LIGHT, S.WINDOW_FULL}  # the windows switched
    for summary in (summary_of(sess.trace_dir), dict(analyze(sess.trace_dir).summary)):
        step = summary["operations"]["step"]
        assert step["categories"]["compile"] == pytest.approx(0.25, abs=1e-9)
        assert step["categories"]["backend"] > 0
        assert step["exclusive_s"] == pytest.approx(step["total_s"], rel=1e-6)  # nothing counted twice


def test_nested_stages_count_once_and_a_cache_hit_is_counted(fake_session):
    """A jitted function compiled while another is traced nests its stages in the trace's: the
    thread compiled once over that time. Stages before the session start count from it."""
    sess, clock = fake_session
    t0 = clock.now = 10 * S_NS  # the session's start
    with sess, rlscope.scope("step"):
        clock.advance(2 * S_NS)
    main = sess.main_tid
    rows = [
        (t0 - S_NS // 2, t0 + S_NS // 2, main, S.COMPILE_TRACE, -1),  # began before the session
        (t0 + S_NS // 10, t0 + S_NS // 5, main, S.COMPILE_BACKEND, -1),  # inside the trace
        (t0 + S_NS, t0 + S_NS + S_NS // 4, main, S.COMPILE_BACKEND, -1),
        (t0 + S_NS + S_NS // 4, t0 + S_NS + S_NS // 4, main, S.COMPILE_CACHE_HIT, -1),
    ]
    write_stream(sess.process_dir / S.COMPILE_FILE, S.COMPILE_COLUMNS_DOC, rows)
    summary = summary_of(sess.trace_dir)
    assert summary["operations"]["step"]["categories"]["compile"] == pytest.approx(0.75, abs=1e-9)
    got = summary["compile"]
    assert (got["compilations"], got["persistent_cache_hits"]) == (2, 1)
    assert got["seconds"] == pytest.approx(0.75, abs=1e-9)
    assert got["stages"]["trace"] == pytest.approx(0.5, abs=1e-9)
    assert got["stages"]["backend_compile"] == pytest.approx(0.35, abs=1e-9)
    assert got["functions"] == [
        {"function": "?", "compilations": 2, "seconds": pytest.approx(0.35, abs=1e-9)}
    ]


def test_compile_intervals_follow_the_detail_stretches():
    """Stages are read on the process's own clock: joined as every table is, a stage between two
    stretches leaves nothing and one across a cut keeps its part in the detail."""
    import pyarrow as pa

    rows = {
        "start_ns": [100, 350, 600, 700],
        "end_ns": [200, 450, 650, 700],
        "thread": [7, 7, 7, 7],
        "stage": [S.COMPILE_BACKEND, S.COMPILE_TRACE, S.COMPILE_LOWER, S.COMPILE_CACHE_HIT],
        "name": [-1, -1, -1, -1],
    }
    table = pa.table(
        {k: pa.array(v, S.columns_schema(S.COMPILE_COLUMNS_DOC).field(k).type) for k, v in rows.items()}
    )
    gaps = Gaps(np.array([300, 500]), np.array([400, 690]))  # the second stage straddles the first cut
    thread, start, end = compile_intervals(table, 0, 10_000, gaps)
    assert thread.tolist() == [7, 7]
    assert list(zip(start.tolist(), end.tolist(), strict=True)) == [(100, 200), (300, 350)]


def test_compilations_count_exactly_and_a_cached_call_adds_none(tmp_path):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def double_sine(x):
        return jnp.sin(x) * 2

    f = jax.jit(double_sine)
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        with rlscope.scope("new_shapes"):
            for n in (3, 4, 5):
                f(np.ones(n, np.float32)).block_until_ready()
        with rlscope.scope("cached"):
            f(np.ones(4, np.float32)).block_until_ready()
    summary = summary_of(tmp_path / "t")
    assert summary["compile"]["compilations"] == 3
    assert summary["compile"]["functions"][0]["function"] == "jit(double_sine)"
    assert summary["compile"]["functions"][0]["compilations"] == 3
    assert summary["operations"]["new_shapes"]["categories"]["compile"] > 0
    assert "compile" not in summary["operations"]["cached"]["categories"]


def test_recorded_compile_time_agrees_with_lower_compile_timed_around_it(tmp_path):
    """The time recorded for each compilation against ``jax.jit(g).lower(x).compile()`` timed around
    it: the stages leave out only jax's Python between them (a few percent)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def layers(x):
        for _ in range(30):
            x = jnp.tanh(x @ x.T) + jnp.sin(x)
        return x.sum()

    jax.jit(layers).lower(np.ones((2, 2), np.float32)).compile()  # jax's first compilation sets it up
    measured = {}
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        for i, n in enumerate((5, 6, 7, 8)):
            x = np.ones((n, n), np.float32)
            with rlscope.scope(f"compile{i}"):
                t0 = time.perf_counter_ns()
                jax.jit(layers).lower(x).compile()
                measured[f"compile{i}"] = (time.perf_counter_ns() - t0) / 1e9
    summary = summary_of(tmp_path / "t")
    assert summary["compile"]["compilations"] == 4
    ratios = [summary["operations"][k]["categories"]["compile"] / s for k, s in measured.items()]
    assert all(0.9 <= r <= 1.02 for r in ratios), ratios
    assert 0.9 <= summary["compile"]["seconds"] / sum(measured.values()) <= 1.02


SCRIPT = """
import numpy as np
import jax
import jax.numpy as jnp
import rlscope

def step(x):
    return jnp.tanh(x) * 2

f = jax.jit(step)
with rlscope.phase("training"):
    for n in (3, 4, 3, 4):
        with rlscope.scope("update"):
            f(np.ones(n, np.float32)).block_until_ready()
"""


def test_rlscope_run_on_a_jax_program(tmp_path):
    pytest.importorskip("jax")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    trace = tmp_path / "trace"
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--"]
    r = subprocess.run([*cmd, sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = dict(analyze(trace).summary)
    assert summary["operations"]["update"]["calls"] == 4
    assert summary["operations"]["update"]["categories"]["compile"] > 0
    assert "training" in summary["phases"]
    assert summary["compile"]["compilations"] == 2
    assert summary["compile"]["functions"][0] == {
        "function": "jit(step)",
        "compilations": 2,
        "seconds": pytest.approx(summary["compile"]["stages"]["backend_compile"]),
    }


def test_a_program_without_jax_records_no_compilations(tmp_path):
    code = (
        "import sys, rlscope\n"
        f"with rlscope.profile({str(tmp_path / 't')!r}, backend=False, gpu=False):\n"
        "    with rlscope.scope('step'): pass\n"
        "assert 'jax' not in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not list((tmp_path / "t").glob(f"process-*/{S.COMPILE_FILE}"))


# --------------------------------------------------------------------------- the bundled JAX PPO


def test_bundled_cartpole_steps_as_gymnasiums():
    """From the same states, the same actions give gymnasium's CartPole-v1 next states and ends."""
    jax = pytest.importorskip("jax")
    import gymnasium as gym

    from rlscope.workloads import jax_ppo

    env = gym.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    states = rng.uniform([-2.5, -2, -0.25, -2], [2.5, 2, 0.25, 2], size=(300, 4)).astype(np.float32)
    actions = rng.integers(0, 2, size=300)
    dynamics = jax.jit(jax.vmap(jax_ppo.cartpole_dynamics))
    ours, ended = (np.asarray(a) for a in dynamics(states, actions))
    for s, a, nxt, end in zip(states, actions, ours, ended, strict=True):
        env.state, env.steps_beyond_terminated = s.astype(np.float64), None
        theirs, reward, terminated, _, _ = env.step(int(a))
        assert reward == 1.0
        np.testing.assert_allclose(nxt, theirs, rtol=1e-5, atol=1e-5)
        assert bool(end) == terminated


def test_bundled_cartpole_truncates_at_500_and_resets():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from rlscope.workloads import jax_ppo

    _, step, _ = jax_ppo.bundled_env()
    key = jax.random.PRNGKey(0)
    upright = jax_ppo.CartPoleState(jnp.zeros(4, jnp.float32), jnp.int32(498), jnp.float32(498.0))
    state, s = step(key, upright, jnp.int32(1))
    assert not bool(s.done) and int(state.t) == 499
    state, s = step(key, state, jnp.int32(0))
    assert bool(s.done) and bool(s.truncated) and float(s.episode_return) == 500.0
    assert int(state.t) == 0 and float(state.ret) == 0.0  # the next episode began
    assert np.all(np.abs(np.asarray(state.obs)) <= 0.05)


@pytest.mark.slow
def test_jax_ppo_learns_cartpole_under_rlscope_run(tmp_path):
    """The bundled JAX PPO under ``rlscope run``: it learns (on a 2-core CPU, seeds 1-3: a mean return
    of 307-364 after 60k steps, its learning rate annealed over them; the bar leaves room for XLA's
    numerics elsewhere) and the summary holds its phase, its operations and their compile time."""
    pytest.importorskip("jax")
    trace, out = tmp_path / "trace", tmp_path / "result.json"
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--"]
    workload = ["-m", "rlscope.workloads.jax_ppo", "--total-timesteps", "60000", "--seconds", "300"]
    r = subprocess.run(
        [*cmd, sys.executable, *workload, "--quiet", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["final_mean_return"] >= 150, result["curve"][-5:]
    summary = dict(analyze(trace).summary)
    assert summary["operations"]["init"]["calls"] == 1
    assert summary["operations"]["update"]["calls"] == result["updates"]
    assert summary["operations"]["update"]["categories"]["compile"] > 0
    assert "training" in summary["phases"]
    compiled = {f["function"]: f["compilations"] for f in summary["compile"]["functions"]}
    assert compiled["jit(update)"] == 1 and compiled["jit(init)"] == 1
