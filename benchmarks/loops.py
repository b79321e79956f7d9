"""Loops the in-process benchmarks time, one iteration per call, in rlscope scopes.

- :func:`launch_step`: `tests/test_gpu_windows.py`'s launch-bound step: a ~200 us kernel, 20
  ``torch.add`` launches and a synchronize (scope ``step``), then 100 us of CPU work (``cpu``);
- :func:`sim_eager_step`: one step of `validation_workloads.py`'s eager CartPole (16 envs, a linear
  policy): ``policy``, ``step``, ``stats``, ~50 small launches and no synchronize;
- :func:`ppo_step`: the bundled PPO's iteration, an update every UPDATE_EVERY;
- :func:`dqn_step`: the bundled DQN's iteration once it learns, an update every DQN_TRAIN_EVERY;
- :func:`sb3_ppo_step` / :func:`sb3_sac_step`: stable-baselines3's PPO and SAC (bench extras), one
  ``learn`` call a step, annotated as `benchmarks/thirdparty/` annotates them: code the project did
  not write, in blocks a lockstep twin can pair.

On ``cpu`` the same code runs without the kernel and the synchronize, to check a benchmark's wiring.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def launch_step(device: str) -> Callable[[], None]:
    import torch

    import rlscope

    cuda = device == "cuda"
    cycles = 0
    if cuda:  # torch.cuda._sleep counts cycles: find how many make ~200 us on this GPU
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(1_000_000)
        b.record()
        torch.cuda.synchronize()
        cycles = int(200e-6 / (a.elapsed_time(b) / 1e3 / 1_000_000))
    x = torch.ones(64, device=device)

    def busy(s: float) -> None:
        end = time.perf_counter() + s
        while time.perf_counter() < end:
            pass

    def step() -> None:
        with rlscope.scope("step"):
            if cuda:
                torch.cuda._sleep(cycles)
            for _ in range(20):
                torch.add(x, 1)
            if cuda:
                torch.cuda.synchronize()
        with rlscope.scope("cpu"):
            busy(100e-6)

    return step


def sim_eager_step(device: str) -> Callable[[], None]:
    import torch

    import rlscope
    from rlscope.workloads import cartpole as cp

    env = cp.make_vec("torch", 16, device=device)
    weight = torch.tensor([[0.0, 0.1], [0.0, 0.5], [0.0, 2.0], [0.0, 1.0]], device=device)
    state = {"obs": env.reset(seed=0)[0], "total": torch.zeros((), device=device)}

    def step() -> None:
        with rlscope.scope("policy"):
            action = (state["obs"] @ weight).argmax(dim=-1)
        with rlscope.scope("step"):
            out = env.step(action)
            state["obs"] = out[0]
        with rlscope.scope("stats"):
            state["total"] += out[1].sum()

    return step


UPDATE_EVERY = 128  # iterations between two backprop calls (PPO's 128 steps per rollout)


def ppo_parts(device: str) -> tuple[Any, Any, Any, Any]:
    """(device, 4 CartPole envs, agent, optimizer) of the bundled PPO, seeded; one torch thread on the
    CPU, as the bundled PPO runs (a 64-64 MLP is faster on one)."""
    import torch

    from rlscope.workloads import ppo_cartpole as ppo

    dev = ppo.resolve_device(device)
    torch.manual_seed(1)
    if dev.type == "cpu":
        torch.set_num_threads(1)
    agent = ppo.Agent(4, 2).to(dev)
    return dev, ppo.make_envs(4), agent, torch.optim.Adam(agent.parameters(), lr=1e-4, eps=1e-5)


def ppo_update(agent: Any, opt: Any, obs: list[Any], actions: list[Any]) -> None:
    """One one-minibatch PPO-like update on the collected observations and actions (in ``backprop``)."""
    import torch

    import rlscope

    with rlscope.scope("backprop"):
        x, a = torch.cat(obs), torch.cat(actions)
        _, logprob, entropy, value = agent.get_action_and_value(x, a)
        loss = -logprob.mean() - 0.01 * entropy.mean() + 0.5 * value.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        opt.step()


def ppo_rollout(device: str) -> tuple[Callable[[list, list], None], Any, Any, Any]:
    """The bundled PPO's rollout step, apart from its update: (collect, agent, optimizer, device).
    ``collect(obs_b, act_b)`` runs ``inference`` and a ``simulation`` step of 4 CartPole envs and
    appends the observation and action the update trains on."""
    import torch

    import rlscope

    dev, envs, agent, opt = ppo_parts(device)
    obs_np, _ = envs.reset(seed=1)
    state = {"obs": torch.as_tensor(obs_np, dtype=torch.float32, device=dev)}

    def collect(obs_b: list, act_b: list) -> None:
        with rlscope.scope("inference"), torch.no_grad():
            action, _, _, _ = agent.get_action_and_value(state["obs"])
        obs_b.append(state["obs"])
        act_b.append(action)
        with rlscope.scope("simulation"):
            obs_np, _, _, _, _ = envs.step(action.cpu().numpy())
            state["obs"] = torch.as_tensor(obs_np, dtype=torch.float32, device=dev)

    return collect, agent, opt, dev


def ppo_step(device: str) -> Callable[[], None]:
    """One iteration of the bundled PPO's loop (`benchmarks/light_cost.py`'s): a rollout step
    (:func:`ppo_rollout`) and a one-minibatch ``backprop`` every UPDATE_EVERY iterations. Blocks of
    a multiple of UPDATE_EVERY iterations do the same work."""
    collect, agent, opt, _ = ppo_rollout(device)
    state: dict[str, Any] = {"i": 0, "obs_b": [], "act_b": []}

    def step() -> None:
        collect(state["obs_b"], state["act_b"])
        state["i"] += 1
        if state["i"] % UPDATE_EVERY == 0:
            ppo_update(agent, opt, state["obs_b"], state["act_b"])
            state["obs_b"], state["act_b"] = [], []

    return step


DQN_TRAIN_EVERY = 4  # the bundled DQN's train_frequency: a sample and a backprop every 4 iterations


def dqn_step(device: str) -> Callable[[], None]:
    """One iteration of the bundled DQN's loop (`workloads/dqn_cartpole.py`) past ``learning_starts``:
    ``inference`` (greedy, epsilon 0.05), a ``simulation`` step of one CartPole env through
    ``rlscope.wrap_env``, ``replay_buffer`` add, and every DQN_TRAIN_EVERY iterations a
    ``replay_buffer`` sample of 128 and a ``backprop``, as the DQN row of the matrix runs. Blocks of
    a multiple of DQN_TRAIN_EVERY iterations do the same work. Seeded; one torch thread on the CPU."""
    import numpy as np
    import torch

    import rlscope
    from rlscope.workloads import dqn_cartpole as dqn

    dev = dqn.resolve_device(device)
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    if dev.type == "cpu":
        torch.set_num_threads(1)
    envs = dqn.make_envs(1)
    envs.single_action_space.seed(1)
    q, target = dqn.QNetwork(4, 2).to(dev), dqn.QNetwork(4, 2).to(dev)
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=2.5e-4)
    rb = dqn.ReplayBuffer(10_000, 4)
    obs, _ = envs.reset(seed=1)
    for _ in range(256):  # something to sample from
        nxt, r, term, _, _ = envs.step(np.array([envs.single_action_space.sample()]))
        rb.add(obs, nxt, np.zeros(1, np.int64), r, term)
        obs = nxt
    state = {"obs": obs, "i": 0}

    def step() -> None:
        with rlscope.scope("inference"):
            if rng.random() < 0.05:
                actions = np.array([envs.single_action_space.sample()])
            else:
                with torch.no_grad():
                    qv = q(torch.as_tensor(state["obs"], dtype=torch.float32, device=dev))
                    actions = torch.argmax(qv, dim=1).cpu().numpy()
        with rlscope.scope("simulation"):
            nxt, rewards, term, trunc, infos = envs.step(actions)
        real_next = nxt.copy()
        for i in np.flatnonzero(np.logical_or(term, trunc)):
            real_next[i] = infos["final_obs"][i]
        with rlscope.scope("replay_buffer"):
            rb.add(state["obs"], real_next, actions, rewards, term)
        state["obs"] = nxt
        state["i"] += 1
        if state["i"] % DQN_TRAIN_EVERY == 0:
            with rlscope.scope("replay_buffer"):
                batch = rb.sample(128, rng, dev)
            with rlscope.scope("backprop"):
                dqn.td_update(q, target, opt, batch, 0.99)

    return step


SB3_PPO_STEPS = 32  # per env and rollout: 128 samples, 2 minibatches of 64, 10 epochs (20 gradient steps)
SB3_SAC_STEPS = 16  # env steps (and gradient steps) per SAC learn call
SB3_WARM = {"sb3_ppo": 4, "sb3_sac": 10}  # learn calls before timing: SAC learns after 100 steps


def _thirdparty(name: str) -> Any:
    """benchmarks/thirdparty/NAME.py (its ``annotate``: the scopes a user would add)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thirdparty", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"thirdparty_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sb3_ppo_step(device: str) -> Callable[[], None]:
    """One PPO iteration of stable-baselines3 on CartPole-v1 (4 envs, as the matrix row runs it): a
    ``learn`` call of one rollout of SB3_PPO_STEPS per env (``collect_rollouts``, ``inference``,
    ``env_step``) and its update (``train``), with the matrix row's ratio of gradient steps to env
    steps (10 epochs of 64-sample minibatches per 4 x n_steps samples). Seeded; one torch thread."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    import rlscope

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=4, seed=1, wrapper_class=rlscope.wrap_env)
    model = PPO("MlpPolicy", env, n_steps=SB3_PPO_STEPS, batch_size=64, seed=1, device=device, verbose=0)
    model.set_logger(Logger(None, []))  # no output: SB3 would make an empty /tmp/SB3-<time> a call
    _thirdparty("sb3_ppo").annotate(model)
    per_call = 4 * SB3_PPO_STEPS

    def step() -> None:
        model.learn(total_timesteps=per_call, reset_num_timesteps=False)

    return step


def sb3_sac_step(device: str) -> Callable[[], None]:
    """SB3_SAC_STEPS steps of stable-baselines3's SAC on Pendulum-v1 (one env, SB3's defaults): a
    ``learn`` call of that many env steps, each a ``collect_rollouts`` and a ``train`` gradient step
    once past SAC's 100 learning-start steps (the warm-up, SB3_WARM, passes them). Seeded."""
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    import rlscope

    torch.set_num_threads(1)
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=1, wrapper_class=rlscope.wrap_env)
    model = SAC("MlpPolicy", env, seed=1, device=device, verbose=0)
    model.set_logger(Logger(None, []))  # no output: SB3 would make an empty /tmp/SB3-<time> a call
    _thirdparty("sb3_sac").annotate(model)

    def step() -> None:
        model.learn(total_timesteps=SB3_SAC_STEPS, reset_num_timesteps=False)

    return step
