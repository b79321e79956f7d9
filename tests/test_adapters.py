"""Library adapters (rlscope/runtime/adapters/): the libraries' phases with the generic operations inside.

stable-baselines3 runs for real under ``rlscope run`` (the ``test`` extra installs it; skipped
without it). TorchRL and RLlib are heavy: their adapters' logic runs here on small stand-ins with
the same module paths and class names, on a fake clock; a real run of each is skipped unless the
library is installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest

import rlscope
from rlscope.analysis import analyze
from tests.conftest import FakeClock

torch = pytest.importorskip("torch")

FWD = 7_000
STEP_ENV = 11_000
LOSS = 4_000
OPT = 5_000
GLUE = 3_000


def _session(tmp_path):
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, windows=False, auto_ops=True)
    sess.clock = clock
    return sess, clock


def _summary(sess) -> dict:
    return analyze(sess.trace_dir, correct=False).summary


def _module(monkeypatch, name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
        if isinstance(v, type):
            v.__module__ = name
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


class ClockNet(torch.nn.Module):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.lin = torch.nn.Linear(2, 1)

    def forward(self, x):
        self.clock.advance(FWD)
        return self.lin(x)


def _sgd(params, clock):
    class ClockSGD(torch.optim.SGD):
        def step(self, closure=None):
            clock.advance(OPT)
            return super().step(closure)

    return ClockSGD(params, lr=0.01)


# -- TorchRL, on stand-ins ------------------------------------------------------------------------


def test_torchrl_adapter_on_stand_ins(tmp_path, monkeypatch):
    from rlscope.runtime.adapters import torchrl as adapter

    sess, clock = _session(tmp_path)

    class EnvBase:
        def step(self, td):
            clock.advance(STEP_ENV)
            return td

        def reset(self):
            clock.advance(STEP_ENV)

    class GymLikeEnv(EnvBase):
        def step_and_maybe_reset(self, td):
            return self.step(td), None  # nested: one simulation

    class DataCollectorBase:
        pass

    class SyncDataCollector(DataCollectorBase):
        def __init__(self, env, policy, frames):
            self.env, self.policy, self.frames = env, policy, frames

        def rollout(self):
            for _ in range(self.frames):
                with torch.no_grad():
                    self.policy(torch.ones(2))
                clock.advance(GLUE)
                self.env.step_and_maybe_reset(None)

    class LossModule(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            clock.advance(LOSS)
            return self.net(x).sum()

    _module(monkeypatch, "torchrl")
    _module(monkeypatch, "torchrl.envs.common", EnvBase=EnvBase)
    collectors = {"DataCollectorBase": DataCollectorBase, "SyncDataCollector": SyncDataCollector}
    _module(monkeypatch, "torchrl.collectors", **collectors)
    _module(monkeypatch, "torchrl.objectives.common", LossModule=LossModule)
    monkeypatch.setattr("rlscope.runtime.auto_ops._update_modules", ())
    adapter.apply(sys.modules["torchrl"])

    net = ClockNet(clock)
    loss_module, opt = LossModule(net), _sgd(net.parameters(), clock)
    collector = SyncDataCollector(GymLikeEnv(), net, frames=5)
    iters, updates = 3, 2
    with sess:
        for _ in range(iters):
            collector.rollout()
            clock.advance(GLUE)
            for _ in range(updates):
                loss = loss_module(torch.ones(2))
                loss.backward()
                opt.step()
                clock.advance(GLUE)
    phases = _summary(sess)["phases"]
    rollout, update = phases["rollout"], phases["update"]
    assert rollout["auto"] and update["auto"] and rollout["operations"]["inference"]["auto"]
    assert rollout["wall_s"] == pytest.approx(iters * 5 * (FWD + GLUE + STEP_ENV) * 1e-9, rel=1e-9)
    assert rollout["operations"]["inference"]["calls"] == iters * 5
    assert rollout["operations"]["simulation"]["calls"] == iters * 5
    assert rollout["operations"]["simulation"]["total_s"] == pytest.approx(
        iters * 5 * STEP_ENV * 1e-9, rel=1e-9
    )
    assert update["wall_s"] == pytest.approx(iters * updates * (LOSS + FWD + OPT) * 1e-9, rel=1e-9)
    assert update["operations"]["backprop"]["total_s"] == pytest.approx(update["wall_s"], rel=1e-9)


# -- RLlib, on stand-ins --------------------------------------------------------------------------


def test_rllib_adapter_on_stand_ins(tmp_path, monkeypatch):
    from rlscope.runtime.adapters import rllib as adapter

    sess, clock = _session(tmp_path)
    gym = pytest.importorskip("gymnasium")

    class ClockEnv(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,))
        action_space = gym.spaces.Discrete(2)

        def step(self, action):
            clock.advance(STEP_ENV)
            return self.observation_space.sample(), 1.0, False, False, {}

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

    class EnvRunner:
        def sample(self):
            raise NotImplementedError

    class SingleAgentEnvRunner(EnvRunner):
        def __init__(self, env, module):
            self.env, self.module = env, module

        def sample(self, num_timesteps=4):
            for _ in range(num_timesteps):
                with torch.no_grad():
                    self.module(torch.ones(2))
                self.env.step(0)
            return []

    class Learner:
        def __init__(self, module, clock):
            self.module, self.opt = module, _sgd(module.parameters(), clock)

        def update(self, batch=None):
            loss = self.module(torch.ones(2)).sum()
            clock.advance(LOSS)
            loss.backward()
            self.opt.step()

    _module(monkeypatch, "ray")
    rllib = _module(monkeypatch, "ray.rllib")
    _module(monkeypatch, "ray.rllib.env.env_runner", EnvRunner=EnvRunner)
    _module(monkeypatch, "ray.rllib.env.single_agent_env_runner", SingleAgentEnvRunner=SingleAgentEnvRunner)
    _module(monkeypatch, "ray.rllib.core.learner.learner", Learner=Learner)
    adapter.apply(rllib)

    net = ClockNet(clock)
    runner, learner = SingleAgentEnvRunner(rlscope.wrap_env(ClockEnv()), net), Learner(net, clock)
    with sess:
        for _ in range(3):
            runner.sample(num_timesteps=4)
            clock.advance(GLUE)
            learner.update()
            clock.advance(GLUE)
    phases = _summary(sess)["phases"]
    rollout, update = phases["rollout"], phases["update"]
    assert rollout["wall_s"] == pytest.approx(3 * 4 * (FWD + STEP_ENV) * 1e-9, rel=1e-9)
    assert rollout["operations"]["inference"]["total_s"] == pytest.approx(12 * FWD * 1e-9, rel=1e-9)
    sim = rollout["operations"]["simulation"]
    assert sim["total_s"] == pytest.approx(12 * STEP_ENV * 1e-9, rel=1e-9)
    assert update["operations"]["backprop"]["total_s"] == pytest.approx(3 * (FWD + LOSS + OPT) * 1e-9)


def test_a_user_phase_is_not_cut_into_the_library_phases(tmp_path, monkeypatch):
    from rlscope.runtime import auto_ops

    sess, clock = _session(tmp_path)

    class Algo:
        def collect_rollouts(self):
            clock.advance(GLUE)

    auto_ops.patch(Algo, "collect_rollouts", lambda fn: auto_ops.in_phase(auto_ops.ROLLOUT, fn))
    with sess:
        with rlscope.phase("training"):
            Algo().collect_rollouts()
        Algo().collect_rollouts()
    phases = _summary(sess)["phases"]
    assert phases["training"]["wall_s"] == pytest.approx(GLUE * 1e-9)
    assert phases["rollout"]["wall_s"] == pytest.approx(GLUE * 1e-9)


# -- stable-baselines3, for real under `rlscope run` ----------------------------------------------

SB3_SCRIPTS = {
    "PPO": """
        from stable_baselines3 import PPO
        from stable_baselines3.common.env_util import make_vec_env
        PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), n_steps=64, batch_size=64,
            n_epochs=2, seed=0).learn(256)
    """,
    "DQN": """
        from stable_baselines3 import DQN
        DQN("MlpPolicy", "CartPole-v1", learning_starts=32, train_freq=4, batch_size=16,
            exploration_fraction=0.1, seed=0).learn(256)
    """,
    "SAC": """
        from stable_baselines3 import SAC
        SAC("MlpPolicy", "Pendulum-v1", learning_starts=32, batch_size=16, seed=0,
            policy_kwargs={"net_arch": [16, 16]}).learn(96)
    """,
    "A2C": """
        from stable_baselines3 import A2C
        A2C("MlpPolicy", "CartPole-v1", n_steps=8, seed=0).learn(128)
    """,
    "TD3": """
        from stable_baselines3 import TD3
        TD3("MlpPolicy", "Pendulum-v1", learning_starts=32, batch_size=16, seed=0,
            policy_kwargs={"net_arch": [16, 16]}).learn(96)
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(SB3_SCRIPTS))
def test_sb3_unmodified_script_under_rlscope_run(algo, tmp_path):
    pytest.importorskip("stable_baselines3")
    script = tmp_path / "train.py"
    header = "import torch\ntorch.set_num_threads(1)\n"
    script.write_text(header + textwrap.dedent(SB3_SCRIPTS[algo]))
    trace = tmp_path / "trace"
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze",
         "--gpu", "off", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    s = analyze(trace, correct=False).summary
    ops = s["operations"]
    for name in ("inference", "simulation", "backprop"):
        assert ops[name]["calls"] > 0 and ops[name]["auto"], (name, sorted(ops))
    rollout, update = s["phases"]["rollout"], s["phases"]["update"]
    assert rollout["operations"]["simulation"]["calls"] > 0
    assert rollout["operations"]["inference"]["calls"] > 0
    assert "backprop" not in rollout["operations"]
    assert update["operations"]["backprop"]["total_s"] > 0.5 * update["wall_s"]
    assert "simulation" not in update["operations"]
    # and something to change, found in this trace (rlscope/analysis/advice/)
    assert s["advice"] and all(a["seconds_at_stake"] > 0 and a["change"] for a in s["advice"]), s["advice"]


# -- the real TorchRL and RLlib (skipped unless installed) ----------------------------------------


@pytest.mark.slow
def test_torchrl_for_real(tmp_path):
    pytest.importorskip("torchrl")
    import torchrl.collectors as collectors
    from tensordict.nn import TensorDictModule
    from torchrl.envs import GymEnv
    from torchrl.modules import QValueActor
    from torchrl.objectives import DQNLoss

    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, auto_ops=True)
    with sess:
        env = GymEnv("CartPole-v1")
        net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        actor = QValueActor(TensorDictModule(net, ["observation"], ["action_value"]), spec=env.action_spec)
        loss = DQNLoss(actor, action_space=env.action_spec)
        opt = torch.optim.Adam(loss.parameters())
        # SyncDataCollector up to TorchRL 0.13, Collector from 0.14
        sync = getattr(collectors, "SyncDataCollector", None) or collectors.Collector
        for batch in sync(env, actor, frames_per_batch=32, total_frames=96):
            value = loss(batch)["loss"]
            value.backward()
            opt.step()
            opt.zero_grad()
    phases = _summary(sess)["phases"]
    assert phases["rollout"]["operations"]["simulation"]["calls"] > 0
    assert phases["update"]["operations"]["backprop"]["calls"] > 0


@pytest.mark.slow
def test_rllib_for_real(tmp_path):
    pytest.importorskip("ray.rllib")
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import ray
        from ray.rllib.algorithms.ppo import PPOConfig
        ray.init(num_cpus=2, include_dashboard=False)
        config = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1).training(
            train_batch_size=256, minibatch_size=64, num_epochs=1)
        algo = config.build()
        algo.train()
        algo.stop()
        ray.shutdown()
        """)
    )
    trace = tmp_path / "trace"
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze",
         "--gpu", "off", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    phases = analyze(trace, correct=False).summary["phases"]
    assert phases["rollout"]["operations"]["simulation"]["calls"] > 0
    assert phases["update"]["operations"]["backprop"]["calls"] > 0
