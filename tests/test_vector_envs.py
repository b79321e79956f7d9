"""A vector env built directly (CleanRL's ``gym.vector.SyncVectorEnv([make_env, ...])``) is simulation as a
whole, once per vector step, its own batching included — on a fake clock, against the known times."""

from __future__ import annotations

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.collectors import gym as gym_collector
from rlscope.runtime.adapters.classes import subclasses
from tests.conftest import FakeClock
from tests.test_auto_ops import STEP_ENV, ClockEnv  # a sub-env step: STEP_ENV of the fake clock

gym = pytest.importorskip("gymnasium")

BATCH = 4_000  # the vector env's own work per call: stacking the sub-envs' observations
GLUE = 3_000  # the loop's own code between steps
ENVS = 4
STEPS = 25


@pytest.fixture
def patched_gymnasium(monkeypatch):
    """The class patch ``rlscope run`` applies, undone after the test (it is process-wide)."""
    for cls in subclasses(gym.vector.VectorEnv):
        for method in ("step", "reset"):
            if method in cls.__dict__:
                monkeypatch.setattr(cls, method, cls.__dict__[method])
    gym_collector.patch_vector_envs(gym)


def _clocked_batching(monkeypatch, clock: FakeClock) -> None:
    """The vector env's own work takes BATCH of the fake clock per step and reset."""
    import gymnasium.vector.sync_vector_env as sync

    real = sync.concatenate

    def concatenate(*args, **kwargs):
        clock.advance(BATCH)
        return real(*args, **kwargs)

    monkeypatch.setattr(sync, "concatenate", concatenate)


def _run(tmp_path, clock: FakeClock) -> dict:
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False, auto_ops=True)
    session.clock = clock
    with session:
        # sub-envs wrapped as gymnasium.make wraps them under rlscope run
        envs = gym.vector.SyncVectorEnv([lambda: rlscope.wrap_env(ClockEnv(clock)) for _ in range(ENVS)])
        envs.reset(seed=0)
        for _ in range(STEPS):
            clock.advance(GLUE)
            envs.step(envs.action_space.sample())
    return analyze(tmp_path / "t", correct=False).summary["operations"]


def test_a_vector_env_built_directly_is_one_simulation_per_vector_step(
    tmp_path, monkeypatch, patched_gymnasium
):
    clock = FakeClock()
    _clocked_batching(monkeypatch, clock)
    sim = _run(tmp_path, clock)["simulation"]
    assert sim["calls"] == STEPS + 1  # the reset and every vector step, not every sub-env's
    assert sim["total_s"] == pytest.approx((STEPS + 1) * (ENVS * STEP_ENV + BATCH) * 1e-9)


def test_vector_wrappers_and_make_vec_count_once(tmp_path, patched_gymnasium):
    clock = FakeClock()
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False, auto_ops=True)
    session.clock = clock
    with session:
        envs = gym.vector.SyncVectorEnv([lambda: rlscope.wrap_env(ClockEnv(clock)) for _ in range(ENVS)])
        envs = rlscope.wrap_env(gym.wrappers.vector.RecordEpisodeStatistics(envs))
        envs.reset(seed=0)
        for _ in range(STEPS):
            envs.step(envs.action_space.sample())
    sim = analyze(tmp_path / "t", correct=False).summary["operations"]["simulation"]
    assert sim["calls"] == STEPS + 1
    assert sim["total_s"] == pytest.approx((STEPS + 1) * ENVS * STEP_ENV * 1e-9)


def test_the_patch_changes_no_result(patched_gymnasium):
    def rollout() -> list:
        envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
        obs, _ = envs.reset(seed=3)
        out = [obs.tolist()]
        for t in range(50):
            obs, reward, term, trunc, _ = envs.step([t % 2, (t // 2) % 2])
            out.append((obs.tolist(), reward.tolist(), term.tolist(), trunc.tolist()))
        return out

    patched = rollout()
    for cls in subclasses(gym.vector.VectorEnv):
        for method in ("step", "reset"):
            fn = cls.__dict__.get(method)
            if getattr(fn, "_rlscope_auto", False):
                setattr(cls, method, fn.__wrapped__)
    assert rollout() == patched


class _OwnSimulator:
    """A simulator of one's own (a batch of envs on the GPU, say): no gymnasium, just step/reset."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.num_envs = clock, ENVS

    def reset(self, seed: int | None = None) -> tuple[list[float], dict]:
        self.clock.advance(BATCH)
        return [0.0] * ENVS, {}

    def step(self, actions: list[int]) -> tuple[list[float], list[float], list[bool], list[bool], dict]:
        self.clock.advance(BATCH)
        return [0.0] * ENVS, [1.0] * ENVS, [False] * ENVS, [False] * ENVS, {}


def test_wrap_env_takes_any_simulator_with_step_and_reset(tmp_path):
    """rlscope.wrap_env on an env that is not gymnasium's: its steps and reset are the simulation
    operation and simulator time, once per call, its other attributes pass through, results unchanged."""
    clock = FakeClock()
    session = rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False, auto_ops=True)
    session.clock = clock
    with session:
        envs = rlscope.wrap_env(_OwnSimulator(clock))
        assert rlscope.wrap_env(envs) is envs and envs.num_envs == ENVS
        assert envs.reset(seed=0) == ([0.0] * ENVS, {})
        for _ in range(STEPS):
            clock.advance(GLUE)
            assert envs.step([0] * ENVS)[1] == [1.0] * ENVS
    sim = analyze(tmp_path / "t", correct=False).summary["operations"]["simulation"]
    assert sim["calls"] == STEPS + 1 and sim["auto"]
    assert sim["total_s"] * 1e9 == pytest.approx((STEPS + 1) * BATCH)
    assert sim["categories"]["simulator"] * 1e9 == pytest.approx((STEPS + 1) * BATCH)


def test_wrap_env_refuses_what_is_no_env():
    with pytest.raises(TypeError, match="step\\(\\) and reset\\(\\)"):
        rlscope.wrap_env(object())
