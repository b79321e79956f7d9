"""PPO on CartPole-v1 with stable-baselines3: a plain training script with nothing of rlscope in it.

Profile it as it is::

    rlscope run -- python examples/sb3_ppo.py

rlscope finds the rollout and update phases, and inference, simulation and backprop inside them,
on its own (docs/automatic-operations.md). ``--device cuda`` puts the policy on the GPU.
"""

from __future__ import annotations

import argparse

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--timesteps", type=int, default=20_000)
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)  # a 64-64 MLP is fastest on one thread (rl-baselines3-zoo does the same)

    env = make_vec_env("CartPole-v1", n_envs=args.envs, seed=args.seed)
    model = PPO("MlpPolicy", env, device=args.device, seed=args.seed, verbose=0)
    model.learn(total_timesteps=args.timesteps)
    env.close()


if __name__ == "__main__":
    main()
