"""Loops the in-process benchmarks time, one iteration per call, in rlscope scopes.

- :func:`launch_step`: `tests/test_gpu_windows.py`'s launch-bound step: a ~200 us kernel, 20
  ``torch.add`` launches and a synchronize (scope ``step``), then 100 us of CPU work (``cpu``);
- :func:`sim_eager_step`: one step of `validation_workloads.py`'s eager CartPole (16 envs, a linear
  policy): ``policy``, ``step``, ``stats``, ~50 small launches and no synchronize.

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


def ppo_step(device: str) -> Callable[[], None]:
    """One iteration of the bundled PPO's loop (`benchmarks/light_cost.py`'s): ``inference`` and a
    ``simulation`` step of 4 CartPole envs, and a one-minibatch ``backprop`` every UPDATE_EVERY
    iterations. Blocks of a multiple of UPDATE_EVERY iterations do the same work."""
    import torch

    import rlscope

    dev, envs, agent, opt = ppo_parts(device)
    obs_np, _ = envs.reset(seed=1)
    obs = torch.as_tensor(obs_np, dtype=torch.float32, device=dev)
    state = {"obs": obs, "i": 0, "obs_b": [], "act_b": []}

    def step() -> None:
        with rlscope.scope("inference"), torch.no_grad():
            action, _, _, _ = agent.get_action_and_value(state["obs"])
        state["obs_b"].append(state["obs"])
        state["act_b"].append(action)
        with rlscope.scope("simulation"):
            obs_np, _, _, _, _ = envs.step(action.cpu().numpy())
            state["obs"] = torch.as_tensor(obs_np, dtype=torch.float32, device=dev)
        state["i"] += 1
        if state["i"] % UPDATE_EVERY == 0:
            ppo_update(agent, opt, state["obs_b"], state["act_b"])
            state["obs_b"], state["act_b"] = [], []

    return step
