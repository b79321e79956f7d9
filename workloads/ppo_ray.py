"""PPO on CartPole-v1 with Ray: rollout workers are Ray actors, the learner runs on the driver.

A readable single-file PPO (CleanRL style; the network, the env set-up and the update follow
``ppo_cartpole.py``). Each :class:`RolloutWorker` actor owns a gymnasium vector env and a copy of the
policy: it receives the latest weights, steps its envs ``num_steps`` times, computes its advantages
(GAE) and returns the batch. The driver concatenates the batches and runs the PPO update.

Every part is annotated with ``rlscope.scope``; each actor also times its ``rollout`` calls with a
plain ``time.perf_counter`` (``busy_s`` in the output), which the per-role breakdown of a profiled run
must match. ::

    python -m rlscope.workloads.ppo_ray --actors 4 --total-timesteps 200000
    python -m rlscope.workloads.ppo_ray --actors 4 --trace-dir /tmp/ppo-ray   # profiled (rlscope.ray)
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
import torch
from torch import nn

import rlscope
from rlscope.workloads.ppo_cartpole import SOLVED_RETURN, Agent, make_envs, running_mean_crossing


@ray.remote(num_cpus=0)  # 4 actors share the 2 cores of a small VM; Ray must not wait for free CPUs
class RolloutWorker:
    """Steps a vector env with the current policy; returns one batch with its advantages."""

    def __init__(self, num_envs: int, num_steps: int, seed: int, gamma: float, gae_lambda: float) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.envs = make_envs(num_envs)
        self.num_envs, self.num_steps = num_envs, num_steps
        self.gamma, self.gae_lambda = gamma, gae_lambda
        obs_dim = int(np.prod(self.envs.single_observation_space.shape))
        self.agent = Agent(obs_dim, int(self.envs.single_action_space.n))
        next_obs, _ = self.envs.reset(seed=seed)
        self.next_obs = torch.as_tensor(next_obs, dtype=torch.float32)
        self.next_done = torch.zeros(num_envs)
        self.running_return = np.zeros(num_envs)
        self.busy_s = 0.0  # plain timer of rollout(): what rlscope's per-worker total must match

    def rollout(self, weights: dict[str, torch.Tensor]) -> dict[str, Any]:
        t0 = time.perf_counter()
        with rlscope.scope("rollout"):
            out = self._rollout(weights)
        self.busy_s += time.perf_counter() - t0
        return out

    def _rollout(self, weights: dict[str, torch.Tensor]) -> dict[str, Any]:
        n, e = self.num_steps, self.num_envs
        with rlscope.scope("load_weights"):
            self.agent.load_state_dict(weights)
        obs = torch.zeros((n, e, self.next_obs.shape[1]))
        actions, logprobs, rewards, dones, values = (torch.zeros((n, e)) for _ in range(5))
        finished: list[float] = []
        for step in range(n):
            obs[step], dones[step] = self.next_obs, self.next_done
            with rlscope.scope("inference"), torch.no_grad():
                action, logprob, _, value = self.agent.get_action_and_value(self.next_obs)
            actions[step], logprobs[step], values[step] = action, logprob, value.flatten()
            with rlscope.scope("simulation"):
                next_obs, reward, term, trunc, infos = self.envs.step(action.numpy())
            done = np.logical_or(term, trunc)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            timeouts = np.flatnonzero(trunc & ~term)  # cut by the time limit: bootstrap, not terminal
            if timeouts.size:
                with rlscope.scope("inference"), torch.no_grad():
                    final = torch.as_tensor(np.stack(infos["final_obs"][timeouts])).float()
                    rewards[step, timeouts] += self.gamma * self.agent.get_value(final).flatten()
            self.next_obs = torch.as_tensor(next_obs, dtype=torch.float32)
            self.next_done = torch.as_tensor(done, dtype=torch.float32)
            self.running_return += reward
            for i in np.flatnonzero(done):
                finished.append(float(self.running_return[i]))
                self.running_return[i] = 0.0
        with rlscope.scope("compute_advantages"), torch.no_grad():
            next_value = self.agent.get_value(self.next_obs).flatten()
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(e)
            for t in reversed(range(n)):
                not_done = 1.0 - (self.next_done if t == n - 1 else dones[t + 1])
                next_v = next_value if t == n - 1 else values[t + 1]
                delta = rewards[t] + self.gamma * next_v * not_done - values[t]
                advantages[t] = last = delta + self.gamma * self.gae_lambda * not_done * last
        return {
            "obs": obs.reshape(n * e, -1),
            "actions": actions.reshape(-1),
            "logprobs": logprobs.reshape(-1),
            "advantages": advantages.reshape(-1),
            "returns": (advantages + values).reshape(-1),
            "values": values.reshape(-1),
            "episode_returns": finished,
        }

    def timers(self) -> dict[str, Any]:
        import os

        return {"pid": os.getpid(), "busy_s": self.busy_s}


def update(
    agent: Agent, optimizer: torch.optim.Optimizer, b: dict[str, torch.Tensor], rng: Any, cfg: dict
) -> None:
    """The PPO update on one batch (clipped policy and value losses, entropy bonus)."""
    size = len(b["actions"])
    mb = size // cfg["num_minibatches"]
    inds = np.arange(size)
    for _ in range(cfg["update_epochs"]):
        rng.shuffle(inds)
        for s in range(0, size, mb):
            i = inds[s : s + mb]
            with rlscope.scope("backprop"):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b["obs"][i], b["actions"].long()[i]
                )
                ratio = (newlogprob - b["logprobs"][i]).exp()
                adv = b["advantages"][i]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                clip = cfg["clip_coef"]
                pg_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
                newvalue = newvalue.view(-1)
                v_clipped = b["values"][i] + torch.clamp(newvalue - b["values"][i], -clip, clip)
                v_loss = (
                    0.5
                    * torch.max((newvalue - b["returns"][i]) ** 2, (v_clipped - b["returns"][i]) ** 2).mean()
                )
                loss = pg_loss - 0.01 * entropy.mean() + 0.5 * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()


def train(
    actors: int = 4,
    total_timesteps: int = 200_000,
    num_envs: int = 4,
    num_steps: int = 32,
    seed: int = 1,
    learning_rate: float = 1e-3,
) -> dict[str, Any]:
    """Train with ``actors`` rollout workers; returns the learning curve and each actor's plain timer."""
    cfg = {"num_minibatches": 4, "update_epochs": 4, "clip_coef": 0.2}
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    workers = [RolloutWorker.remote(num_envs, num_steps, seed + 1000 * k, 0.99, 0.95) for k in range(actors)]
    agent = Agent(4, 2)
    optimizer = torch.optim.Adam(agent.parameters(), lr=learning_rate, eps=1e-5)
    per_iter = actors * num_envs * num_steps
    iterations = max(1, total_timesteps // per_iter)
    returns: list[float] = []
    ends: list[int] = []
    start = time.perf_counter()
    with rlscope.phase("training"):
        for it in range(1, iterations + 1):
            optimizer.param_groups[0]["lr"] = (1.0 - (it - 1.0) / iterations) * learning_rate
            with rlscope.scope("broadcast_weights"):
                weights = ray.put({k: v.detach().clone() for k, v in agent.state_dict().items()})
            with rlscope.scope("wait_rollouts"):
                batches = ray.get([w.rollout.remote(weights) for w in workers])
            for bt in batches:
                returns += bt["episode_returns"]
                ends += [it * per_iter] * len(bt["episode_returns"])
            batch = {k: torch.cat([bt[k] for bt in batches]) for k in batches[0] if k != "episode_returns"}
            update(agent, optimizer, batch, rng, cfg)
    timers = ray.get([w.timers.remote() for w in workers])
    tail = returns[-20:]
    return {
        "global_step": iterations * per_iter,
        "wall_seconds": time.perf_counter() - start,
        "final_mean_return": float(np.mean(tail)) if tail else 0.0,
        "steps_to_475": running_mean_crossing(returns, ends, SOLVED_RETURN),
        "episodes": len(returns),
        "actors": timers,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--total-timesteps", type=int, default=200_000)
    p.add_argument("--num-envs", type=int, default=4, help="envs per actor")
    p.add_argument("--num-steps", type=int, default=32, help="steps per env per rollout")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--num-cpus", type=int, default=2, help="ray.init(num_cpus=...)")
    p.add_argument("--trace-dir", default=None, help="profile with rlscope.ray, writing the trace here")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    init = {"num_cpus": args.num_cpus, "include_dashboard": False}
    kwargs = {"actors": args.actors, "total_timesteps": args.total_timesteps, "seed": args.seed}
    kwargs |= {"num_envs": args.num_envs, "num_steps": args.num_steps}
    if args.trace_dir:
        with rlscope.ray.profile(args.trace_dir, init=init):
            out = train(**kwargs)
    else:
        ray.init(**init)
        out = train(**kwargs)
    ray.shutdown()
    print(json.dumps({k: v for k, v in out.items()}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
