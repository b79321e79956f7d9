"""PPO on CartPole-v1 written the way CleanRL's single-file ``ppo.py`` is: no rlscope in it.

    rlscope run -- python benchmarks/thirdparty/cleanrl_ppo.py [--total-timesteps N] [--timers FILE]

The shape that matters to a profiler, as in CleanRL: a ``gym.vector.SyncVectorEnv`` built directly from
a list of env factories, an ``Agent`` module with separate actor and critic MLPs, the rollout's action
sampling inside ``torch.no_grad()``, GAE, then epochs of minibatch updates ending in
``optimizer.step()``. ``--timers FILE`` writes plain ``perf_counter`` totals of the three regions a user
would time by hand (``envs.step``, the ``no_grad`` block that acts, and each minibatch from its forward
to the end of ``optimizer.step()``): the ground truth of benchmarks/cleanrl_accuracy.py.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=50_000)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="where the agent runs: cpu or cuda")
    p.add_argument("--timers", default=None, help="write the hand timers' totals (JSON) here")
    return p.parse_args(argv)


def make_env(seed: int):
    def thunk() -> gym.Env:
        env = gym.make("CartPole-v1")
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env.action_space.seed(seed)
        return env

    return thunk


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


class Timers:
    """Hand timers: total seconds and calls per region (a no-op unless asked for)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.total: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def add(self, name: str, t0: float) -> None:
        if self.on:
            self.total[name] += time.perf_counter() - t0
            self.calls[name] += 1


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    timers = Timers(args.timers is not None)
    envs = gym.vector.SyncVectorEnv([make_env(args.seed + i) for i in range(args.num_envs)])
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    device = torch.device(args.device)
    agent = Agent(obs_dim, int(envs.single_action_space.n)).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    n, e = args.num_steps, args.num_envs
    obs = torch.zeros((n, e, obs_dim), device=device)
    actions = torch.zeros((n, e), device=device)
    logprobs = torch.zeros((n, e), device=device)
    rewards = torch.zeros((n, e), device=device)
    dones = torch.zeros((n, e), device=device)
    values = torch.zeros((n, e), device=device)
    batch_size = n * e
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size

    start = time.perf_counter()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.tensor(next_obs, dtype=torch.float32, device=device)
    next_done = torch.zeros(e, device=device)
    returns_seen: list[float] = []
    for _iteration in range(num_iterations):
        for step in range(n):
            obs[step] = next_obs
            dones[step] = next_done
            t0 = time.perf_counter()
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            timers.add("inference", t0)
            actions[step] = action
            logprobs[step] = logprob
            a = action.cpu().numpy()
            t0 = time.perf_counter()
            next_obs, reward, terminations, truncations, infos = envs.step(a)
            timers.add("simulation", t0)
            done = np.logical_or(terminations, truncations)
            next_done = torch.tensor(done, dtype=torch.float32, device=device)
            rewards[step] = torch.tensor(reward, dtype=torch.float32, device=device).view(-1)
            next_obs = torch.tensor(next_obs, dtype=torch.float32, device=device)
            if "episode" in infos:
                done_r = zip(infos["episode"]["r"], infos["_episode"], strict=True)
                returns_seen += [float(r) for r, m in done_r if m]

        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(e, device=device)
            for t in reversed(range(n)):
                nextnonterminal = 1.0 - (next_done if t == n - 1 else dones[t + 1])
                nextvalues = next_value if t == n - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        b_obs = obs.reshape((-1, obs_dim))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_inds = np.arange(batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for begin in range(0, batch_size, minibatch_size):
                mb = b_inds[begin : begin + minibatch_size]
                t0 = time.perf_counter()
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions.long()[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                timers.add("backprop", t0)
    wall = time.perf_counter() - start
    mean = float(np.mean(returns_seen[-20:])) if returns_seen else 0.0
    print(
        f"cleanrl-style PPO: {num_iterations * batch_size} steps in {wall:.1f} s,"
        f" last-20 mean return {mean:.1f}"
    )
    if args.timers:
        with open(args.timers, "w") as f:
            json.dump({"wall_s": wall, "total_s": dict(timers.total), "calls": dict(timers.calls)}, f)
    envs.close()


if __name__ == "__main__":
    main()
