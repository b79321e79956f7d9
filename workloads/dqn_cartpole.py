"""DQN on CartPole-v1, annotated with rlscope.

One readable file in the style of CleanRL's ``dqn.py``, the off-policy counterpart of
``ppo_cartpole``: its profile has a replay buffer and a target network where PPO has rollouts and
advantages. The rlscope-specific lines are ``rlscope.wrap_env`` (env step/reset count as
``simulator`` time), one phase (``training``) and five operations (``inference``: epsilon-greedy
action selection with its forward pass; ``simulation``: ``env.step``; ``replay_buffer``: adding
transitions and sampling a batch; ``backprop``: loss, backward and optimizer step;
``target_update``). With no profiling session active those are no-ops, and with one active they
change no result: a seeded CPU run gives the same episode returns profiled or not.

Run it::

    python -m rlscope.workloads.dqn_cartpole --total-timesteps 50000 --seed 1
    python -m rlscope.workloads.dqn_cartpole --trace-dir /tmp/dqn-trace   # profiled

Hyperparameters are CleanRL's for CartPole (Q-network 120-84 ReLU, Adam 2.5e-4, MSE TD loss,
gamma 0.99, batch 128, buffer 10k, hard target update every 500 steps, epsilon 1 -> 0.05 over half
the run) with a 50k-step budget instead of 500k and two changes for it, measured on this file (CPU,
50k steps, mean of the last 20 training episodes, epsilon-greedy at 0.05):

- learning starts after 5k steps instead of 10k and the network trains every 4 steps instead of
  every 10 (11k gradient steps instead of 4k): seeds 1-5 end at 240-302, against 101-349 (seeds
  1-5) with CleanRL's values at the same budget. Training every step (from step 1k) is 5x slower
  and ends lower (170, seed 1).
- a learning rate of 1e-3 or epsilon decaying over 20% of the run instead of 50% were no better
  (169-389 and 178-344 on seeds 1-4).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import rlscope

ENV_ID = "CartPole-v1"
RUNNING_WINDOW = 20  # episodes in the running mean that defines final_mean_return
LOG_EVERY_STEPS = 1_000  # global steps between calls of train()'s ``log``


class QNetwork(nn.Module):
    """CleanRL's MLP: observation -> 120 -> 84 -> one Q-value per action (ReLU)."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(obs_dim, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, n_actions),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


class ReplayBuffer:
    """Fixed-size ring buffer of transitions in numpy arrays.

    Written out here rather than taken from stable-baselines3 (as CleanRL does) so that the workload
    needs nothing beyond torch and gymnasium, and so that sampling draws from a seeded generator.
    """

    def __init__(self, capacity: int, obs_dim: int) -> None:
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.dones = np.zeros(capacity, dtype=np.float32)
        self.pos = 0
        self.size = 0

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
    ) -> None:
        """Store one transition per env (leading axis = envs), overwriting the oldest when full."""
        for i in range(len(actions)):
            self.obs[self.pos] = obs[i]
            self.next_obs[self.pos] = next_obs[i]
            self.actions[self.pos] = actions[i]
            self.rewards[self.pos] = rewards[i]
            self.dones[self.pos] = dones[i]
            self.pos = (self.pos + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(
        self, batch_size: int, rng: np.random.Generator, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Uniform sample with replacement: (obs, actions, rewards, next_obs, dones) on ``device``."""
        idx = rng.integers(0, self.size, size=batch_size)
        return (
            torch.as_tensor(self.obs[idx], device=device),
            torch.as_tensor(self.actions[idx], device=device),
            torch.as_tensor(self.rewards[idx], device=device),
            torch.as_tensor(self.next_obs[idx], device=device),
            torch.as_tensor(self.dones[idx], device=device),
        )


def resolve_device(device: str) -> torch.device:
    """``auto`` means CUDA when available, else CPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    return torch.device(device)


def make_envs(num_envs: int) -> gym.vector.VectorEnv:
    """Synchronous vector env with SAME_STEP autoreset (as in ``ppo_cartpole``): a step that ends an
    episode returns the next episode's first observation and puts the last one in
    ``infos["final_obs"]``, so no no-op "reset" transition ever reaches the replay buffer."""
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(ENV_ID) for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    return rlscope.wrap_env(envs)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int) -> float:
    """Epsilon decays linearly from ``start_e`` to ``end_e`` over ``duration`` steps, then stays."""
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def td_update(
    q_network: nn.Module,
    target_network: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: tuple[torch.Tensor, ...],
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One gradient step on a sampled ``(obs, actions, rewards, next_obs, dones)`` batch toward the
    target network's TD targets; returns (loss, the Q-values of the taken actions). Its own function
    so that a benchmark timing one DQN iteration can run exactly this update."""
    b_obs, b_actions, b_rewards, b_next_obs, b_dones = batch
    with torch.no_grad():
        target_max, _ = target_network(b_next_obs).max(dim=1)
        td_target = b_rewards + gamma * target_max * (1 - b_dones)
    old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
    loss = F.mse_loss(td_target, old_val)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, old_val


def train(
    total_timesteps: int = 50_000,
    seed: int = 1,
    device: str = "auto",
    num_envs: int = 1,
    learning_rate: float = 2.5e-4,
    buffer_size: int = 10_000,
    gamma: float = 0.99,
    tau: float = 1.0,
    target_network_frequency: int = 500,
    batch_size: int = 128,
    start_e: float = 1.0,
    end_e: float = 0.05,
    exploration_fraction: float = 0.5,
    learning_starts: int = 5_000,
    train_frequency: int = 4,
    time_limit_s: float | None = None,
    log: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train DQN on CartPole-v1 and return its learning curve.

    Steps count like CleanRL's loop iterations: ``learning_starts``, ``train_frequency`` and
    ``target_network_frequency`` are in vector-env steps, ``total_timesteps`` in env transitions
    (``num_envs`` per vector step). Returns ``episode_returns`` / ``episode_end_steps`` (one entry
    per finished training episode, in order), ``global_step``, ``final_mean_return`` (mean of the
    last 20 episodes), ``updates`` (gradient steps), ``target_updates``, ``seconds`` (wall time of
    the training loop), ``device`` and ``seed``. ``log``, if given, receives a dict of statistics
    every 1000 global steps.
    """
    dev = resolve_device(device)
    num_iterations = max(1, total_timesteps // num_envs)

    # Determinism on CPU: every random draw comes from these seeds (torch: network init; the numpy
    # generator: epsilon coin flips and replay sampling; action space: random actions; env reset:
    # the simulators). Nothing here reads the global `random`/`np.random` state, but they are
    # seeded too so that code added to the loop stays deterministic.
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    prev_threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(1)  # a 120-84 MLP on a batch of 128 is faster single-threaded

    envs = make_envs(num_envs)
    try:
        envs.single_action_space.seed(seed)
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        n_actions = int(envs.single_action_space.n)
        q_network = QNetwork(obs_dim, n_actions).to(dev)
        optimizer = torch.optim.Adam(q_network.parameters(), lr=learning_rate)
        target_network = QNetwork(obs_dim, n_actions).to(dev)
        target_network.load_state_dict(q_network.state_dict())
        rb = ReplayBuffer(buffer_size, obs_dim)

        episode_returns: list[float] = []
        episode_end_steps: list[int] = []
        running_return = np.zeros(num_envs)
        updates = 0
        target_updates = 0
        loss = torch.zeros(())
        q_mean = torch.zeros(())
        epsilon = start_e

        global_step = 0
        start = time.perf_counter()
        with rlscope.phase("training"):
            obs, _ = envs.reset(seed=seed)
            for step in range(num_iterations):
                if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
                    break  # `rlscope demo` trains for a wall-clock budget rather than a step count
                global_step += num_envs

                with rlscope.scope("inference"):
                    epsilon = linear_schedule(
                        start_e, end_e, max(1, int(exploration_fraction * num_iterations)), step
                    )
                    if rng.random() < epsilon:
                        actions = np.array([envs.single_action_space.sample() for _ in range(num_envs)])
                    else:
                        with torch.no_grad():
                            q_values = q_network(torch.as_tensor(obs, dtype=torch.float32, device=dev))
                            actions = torch.argmax(q_values, dim=1).cpu().numpy()

                with rlscope.scope("simulation"):
                    next_obs, rewards, terminations, truncations, infos = envs.step(actions)

                # The stored next state of an episode that just ended is its last observation, not
                # the first one of the next episode that the autoreset returned; only termination
                # counts as done, so a time-limit cut is bootstrapped like CleanRL does.
                real_next_obs = next_obs.copy()
                ended = np.flatnonzero(np.logical_or(terminations, truncations))
                for i in ended:
                    real_next_obs[i] = infos["final_obs"][i]
                with rlscope.scope("replay_buffer"):
                    rb.add(obs, real_next_obs, actions, rewards, terminations)
                obs = next_obs

                running_return += rewards
                for i in ended:
                    episode_returns.append(float(running_return[i]))
                    episode_end_steps.append(global_step)
                    running_return[i] = 0.0

                if step >= learning_starts:
                    if step % train_frequency == 0:
                        with rlscope.scope("replay_buffer"):
                            b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(batch_size, rng, dev)
                        with rlscope.scope("backprop"):
                            batch = (b_obs, b_actions, b_rewards, b_next_obs, b_dones)
                            loss, old_val = td_update(q_network, target_network, optimizer, batch, gamma)
                        q_mean = old_val.detach().mean()
                        updates += 1

                    if step % target_network_frequency == 0:
                        with rlscope.scope("target_update"), torch.no_grad():
                            for target_param, q_param in zip(
                                target_network.parameters(), q_network.parameters(), strict=True
                            ):
                                target_param.copy_(tau * q_param + (1.0 - tau) * target_param)
                        target_updates += 1

                if log is not None and global_step % LOG_EVERY_STEPS < num_envs:
                    recent = episode_returns[-RUNNING_WINDOW:]
                    log(
                        {
                            "global_step": global_step,
                            "mean_return": float(np.mean(recent)) if recent else float("nan"),
                            "episodes": len(episode_returns),
                            "epsilon": epsilon,
                            "updates": updates,
                            "td_loss": loss.item(),
                            "q_values": q_mean.item(),
                            "sps": int(global_step / (time.perf_counter() - start)),
                        }
                    )
        train_seconds = time.perf_counter() - start
    finally:
        envs.close()
        torch.set_num_threads(prev_threads)

    recent = episode_returns[-RUNNING_WINDOW:]
    return {
        "episode_returns": episode_returns,
        "episode_end_steps": episode_end_steps,
        "global_step": global_step,
        "final_mean_return": float(np.mean(recent)) if recent else float("nan"),
        "updates": updates,
        "target_updates": target_updates,
        "seconds": train_seconds,
        "device": str(dev),
        "seed": seed,
    }


def _print_log(stats: dict[str, Any]) -> None:
    if stats["global_step"] % (5 * LOG_EVERY_STEPS) < LOG_EVERY_STEPS:
        print(
            f"step {stats['global_step']:>8}  mean return (last {RUNNING_WINDOW}) {stats['mean_return']:7.1f}"
            f"  epsilon {stats['epsilon']:.3f}  td loss {stats['td_loss']:.4f}  sps {stats['sps']}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command line: train (optionally under ``rlscope.profile``), print a summary, dump JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--total-timesteps", type=int, default=50_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--learning-starts", type=int, default=None, help="vector steps before training")
    p.add_argument("--train-frequency", type=int, default=None, help="vector steps between updates")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--buffer-size", type=int, default=None)
    p.add_argument("--time-limit-s", type=float, default=None, help="stop training after this long")
    p.add_argument("--trace-dir", default=None, help="profile with rlscope, writing the trace here")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result dict as JSON")
    p.add_argument("--quiet", action="store_true", help="no periodic log")
    args = p.parse_args(argv)

    kwargs: dict[str, Any] = {
        "total_timesteps": args.total_timesteps,
        "seed": args.seed,
        "device": args.device,
        "num_envs": args.num_envs,
        "time_limit_s": args.time_limit_s,
        "log": None if args.quiet else _print_log,
    }
    # Options left unset keep train()'s defaults, so they are written down in one place only.
    for name in ("learning_starts", "train_frequency", "batch_size", "buffer_size"):
        if getattr(args, name) is not None:
            kwargs[name] = getattr(args, name)
    if args.trace_dir:
        with rlscope.profile(args.trace_dir):
            result = train(**kwargs)
    else:
        result = train(**kwargs)

    print(
        f"seed {args.seed}: {result['global_step']} steps, {result['updates']} updates in "
        f"{result['seconds']:.1f}s, final mean return {result['final_mean_return']:.1f} "
        f"({len(result['episode_returns'])} episodes)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
