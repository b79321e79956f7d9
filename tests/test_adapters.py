"""Library adapters (rlscope/runtime/adapters/): the libraries' phases with the generic operations inside.

stable-baselines3 runs for real under ``rlscope run`` (the ``test`` extra installs it; skipped
without it). TorchRL, RLlib and PufferLib are heavy: their adapters' logic runs here on small
stand-ins with the same module paths and class names, on a fake clock; a real run of TorchRL and
RLlib is skipped unless the library is installed (the ``torchrl`` and ``rllib`` extras).
"""

from __future__ import annotations

import json
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


GAE = 6_000


def _phases_consistent(phases: dict) -> None:
    """No phase holds more than its own time: every operation's exclusive time within its total,
    and the operations' exclusive times with the unannotated within the phase's wall."""
    for name, ph in phases.items():
        ops = ph["operations"].values()
        assert sum(o["exclusive_s"] for o in ops) + ph["unannotated_s"] <= ph["wall_s"] * (1 + 1e-9), name
        for o in ops:
            assert o["exclusive_s"] <= o["total_s"] * (1 + 1e-9) and o["total_s"] <= ph["wall_s"] * (1 + 1e-9)


def _loss_module_class(clock: FakeClock) -> type:
    class LossModule(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            clock.advance(LOSS)
            return self.net(x).sum()

    return LossModule


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

    LossModule = _loss_module_class(clock)
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


@pytest.mark.parametrize("gae_in_no_grad", [False, True], ids=["gae-grad-on", "gae-in-no-grad"])
def test_torchrl_gae_with_autograd_on_is_inference_in_the_update(tmp_path, monkeypatch, gae_in_no_grad):
    """TorchRL's value estimators turn autograd off inside their forward, not around the call, and
    TorchRL's PPO tutorial calls GAE with autograd on: its call must not open ``backprop`` before the
    loss module opens the update phase (the backprop would begin outside any phase, and the phase
    would hold part of an operation begun before it)."""
    from rlscope.runtime.adapters import torchrl as adapter

    sess, clock = _session(tmp_path)
    LossModule = _loss_module_class(clock)

    class ValueEstimatorBase(torch.nn.Module):
        """As TorchRL's: ``forward`` under ``torch.set_grad_enabled(self.differentiable)``."""

        def __init__(self, value_network, differentiable=False):
            super().__init__()
            self.value_network, self.differentiable = value_network, differentiable

        def forward(self, x):
            with torch.set_grad_enabled(self.differentiable):
                clock.advance(GAE)
                return self.value_network(x)

    class GAEStandIn(ValueEstimatorBase):
        pass

    _module(monkeypatch, "torchrl")
    _module(monkeypatch, "torchrl.objectives.common", LossModule=LossModule)
    _module(monkeypatch, "torchrl.objectives.value.advantages", ValueEstimatorBase=ValueEstimatorBase)
    monkeypatch.setattr("rlscope.runtime.auto_ops._update_modules", ())
    monkeypatch.setattr("rlscope.runtime.auto_ops._grad_set_inside", ())
    adapter.apply(sys.modules["torchrl"])

    net = ClockNet(clock)
    loss_module, gae, opt = LossModule(net), GAEStandIn(net), _sgd(net.parameters(), clock)
    iters, epochs, minibatches = 3, 2, 2
    with sess:
        for _ in range(iters):
            clock.advance(GLUE)  # the collector's batch
            for _ in range(epochs):
                if gae_in_no_grad:
                    with torch.no_grad():
                        gae(torch.ones(2))
                else:
                    gae(torch.ones(2))
                clock.advance(GLUE)  # the replay buffer's extend
                for _ in range(minibatches):
                    loss = loss_module(torch.ones(2))
                    loss.backward()
                    opt.step()
    s = _summary(sess)
    update = s["phases"]["update"]
    _phases_consistent(s["phases"])
    backprops = iters * epochs * minibatches
    assert s["operations"]["backprop"]["calls"] == backprops
    assert update["operations"]["backprop"]["calls"] == backprops
    assert update["operations"]["backprop"]["total_s"] == pytest.approx(backprops * (LOSS + FWD + OPT) * 1e-9)
    inference = update["operations"]["inference"]
    assert inference["calls"] == s["operations"]["inference"]["calls"] == iters * epochs
    assert inference["total_s"] == pytest.approx(iters * epochs * (GAE + FWD) * 1e-9)
    # the update phase runs from each GAE to the epoch's first optimizer step, then from each loss
    per_epoch = GAE + FWD + GLUE + minibatches * (LOSS + FWD + OPT)
    assert update["wall_s"] == pytest.approx(iters * epochs * per_epoch * 1e-9)


def test_torchrl_update_phase_opens_around_a_backprop_begun_before_it(tmp_path, monkeypatch):
    """A grad-enabled forward before the loss module's call (a value network's, outside any estimator)
    opens ``backprop`` outside the phase; the loss module's call ends it and opens the phase around a
    backprop of its own, so the phase never holds part of an operation begun before it."""
    from rlscope.runtime.adapters import torchrl as adapter

    sess, clock = _session(tmp_path)
    LossModule = _loss_module_class(clock)
    _module(monkeypatch, "torchrl")
    _module(monkeypatch, "torchrl.objectives.common", LossModule=LossModule)
    monkeypatch.setattr("rlscope.runtime.auto_ops._update_modules", ())
    adapter.apply(sys.modules["torchrl"])

    value_net, net = ClockNet(clock), ClockNet(clock)
    loss_module, opt = LossModule(net), _sgd(net.parameters(), clock)
    with sess:
        for _ in range(3):
            value_net(torch.ones(2))  # autograd on: opens backprop, outside any phase
            clock.advance(GLUE)
            loss = loss_module(torch.ones(2))
            loss.backward()
            opt.step()
    s = _summary(sess)
    _phases_consistent(s["phases"])
    backprop = s["phases"]["update"]["operations"]["backprop"]
    assert backprop["calls"] == 3
    assert backprop["total_s"] == pytest.approx(3 * (LOSS + FWD + OPT) * 1e-9)
    before = s["phases"]["[no phase]"]["operations"]["backprop"]
    assert before["total_s"] == pytest.approx(3 * (FWD + GLUE) * 1e-9)


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


# -- PufferLib, on a stand-in ---------------------------------------------------------------------


def test_pufferlib_vector_backends_on_a_stand_in(tmp_path, monkeypatch):
    """A ``pufferlib.vector`` backend's ``step`` (a ``send`` and a ``recv``) is one simulation, its
    sub-envs' steps inside it counting in it; a clean_pufferl-style loop's ``send`` and ``recv`` are
    one each."""
    from rlscope.runtime.adapters import pufferlib as adapter

    sess, clock = _session(tmp_path)

    class SubEnv:
        def step(self, action):
            clock.advance(STEP_ENV)

        def reset(self):
            pass

    def vector_step(vecenv, actions):  # pufferlib.vector.step, every backend's ``step``
        vecenv.send(actions)
        return vecenv.recv()

    class Serial:
        step = vector_step

        def __init__(self, n):
            self.envs = [rlscope.wrap_env(SubEnv()) for _ in range(n)]

        def async_reset(self, seed=42):
            clock.advance(GLUE)

        def send(self, actions):
            for env in self.envs:
                env.step(0)

        def recv(self):
            clock.advance(GLUE)

    vector = _module(monkeypatch, "pufferlib.vector", Serial=Serial)
    adapter.apply(vector)
    envs, steps = Serial(4), 5
    with sess:
        envs.async_reset()
        for _ in range(steps):
            envs.step(None)
        for _ in range(steps):
            envs.recv()
            clock.advance(GLUE)  # the policy
            envs.send(None)
    sim = _summary(sess)["operations"]["simulation"]
    assert sim["calls"] == 1 + steps + 2 * steps
    assert sim["total_s"] == pytest.approx((GLUE + 2 * steps * (4 * STEP_ENV + GLUE)) * 1e-9)


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
@pytest.mark.parametrize("gae_in_no_grad", [False, True], ids=["gae-grad-on", "gae-in-no-grad"])
def test_torchrl_ppo_with_gae_for_real(tmp_path, gae_in_no_grad):
    """TorchRL's PPO tutorial: a collector, GAE called with autograd on (or in ``torch.no_grad()``),
    ClipPPOLoss over minibatches of a replay buffer. Every backprop is in the update phase, GAE is
    inference there, and no phase holds more than its own time."""
    pytest.importorskip("torchrl")
    import torchrl.collectors as collectors
    from tensordict.nn import TensorDictModule
    from torchrl.data.replay_buffers import ReplayBuffer
    from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
    from torchrl.data.replay_buffers.storages import LazyTensorStorage
    from torchrl.envs import GymEnv
    from torchrl.modules import ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    frames, total, minibatch, epochs = 64, 128, 32, 2
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, auto_ops=True)
    with sess:
        env = GymEnv("CartPole-v1")
        actor = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        policy = ProbabilisticActor(
            TensorDictModule(actor, ["observation"], ["logits"]), spec=env.action_spec, in_keys=["logits"],
            distribution_class=torch.distributions.OneHotCategorical, return_log_prob=True,
        )  # fmt: skip
        critic = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        value = ValueOperator(critic, in_keys=["observation"])
        advantage = GAE(gamma=0.99, lmbda=0.95, value_network=value, average_gae=True)
        loss_module = ClipPPOLoss(policy, value)
        opt = torch.optim.Adam(loss_module.parameters())
        buffer = ReplayBuffer(storage=LazyTensorStorage(frames), sampler=SamplerWithoutReplacement())
        sync = getattr(collectors, "SyncDataCollector", None) or collectors.Collector
        for batch in sync(env, policy, frames_per_batch=frames, total_frames=total):
            for _ in range(epochs):
                if gae_in_no_grad:
                    with torch.no_grad():
                        advantage(batch)
                else:
                    advantage(batch)
                buffer.extend(batch.reshape(-1))
                for _ in range(frames // minibatch):
                    out = loss_module(buffer.sample(minibatch))
                    (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()
                    opt.step()
                    opt.zero_grad()
    s = _summary(sess)
    _phases_consistent(s["phases"])
    rollout, update = s["phases"]["rollout"]["operations"], s["phases"]["update"]["operations"]
    backprops = total // frames * epochs * frames // minibatch
    assert s["operations"]["backprop"]["calls"] == update["backprop"]["calls"] == backprops
    assert update["inference"]["calls"] == total // frames * epochs  # each GAE
    assert rollout["inference"]["calls"] == rollout["simulation"]["calls"] == total
    assert "backprop" not in rollout and "simulation" not in update


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
        algo = config.build_algo() if hasattr(config, "build_algo") else config.build()
        for _ in range(3):
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
    # an adapter that fails to apply says so and steps aside ("could not instrument")
    assert "Traceback" not in r.stderr and "could not instrument" not in r.stderr, r.stderr[-3000:]
    # the summary's phases are the driver's (its Learner's update); the env runner's rollout is in
    # its own process's trace
    driver = analyze(trace, correct=False).summary
    _phases_consistent(driver["phases"])
    update = driver["phases"]["update"]["operations"]
    assert update["backprop"]["calls"] == driver["operations"]["backprop"]["calls"] > 0
    runners = [
        d for d in trace.glob("process-*")
        if json.loads((d / "ray.json").read_text() if (d / "ray.json").exists() else "{}").get("ray.role")
        == "SingleAgentEnvRunner"
    ]  # fmt: skip
    assert len(runners) == 1, sorted(p.name for p in trace.iterdir())
    runner = analyze(runners[0], correct=False).summary["phases"]
    _phases_consistent(runner)
    rollout = runner["rollout"]["operations"]
    # one policy forward a vector step (a step after each episode's end resets that env), and the
    # first reset; at least the first iteration's (a loaded machine may cut the worker's last ones)
    assert rollout["simulation"]["calls"] == rollout["inference"]["calls"] + 1 >= 256
