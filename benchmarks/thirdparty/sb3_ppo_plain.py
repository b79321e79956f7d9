"""Stable-Baselines3 PPO on CartPole-v1 as a user writes it: no rlscope in it, for ``rlscope run``.

    rlscope run -- python benchmarks/thirdparty/sb3_ppo_plain.py [--seconds 1800 | --timesteps N]
                                                                 [--device cpu|cuda]

A workload rlscope's authors did not write (``pip install -e ".[bench]"``): SB3's defaults (4 envs x
2048 steps per rollout, 10 epochs of 64-sample minibatches), trained for ``--seconds`` (a callback
stops ``learn`` then) so that a long run's trace size and analysis can be measured, or for exactly
``--timesteps`` steps (the same work in every run: a slowdown is the ratio of their times).
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=60.0, help="train this long (default 60)")
    p.add_argument("--timesteps", type=int, default=None, help="train exactly this many steps instead")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Deadline(BaseCallback):
        """Stops training once ``seconds`` have passed (checked at every env step)."""

        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.end = time.perf_counter() + seconds

        def _on_step(self) -> bool:
            return time.perf_counter() < self.end

    torch.set_num_threads(args.torch_threads)
    env = make_vec_env("CartPole-v1", n_envs=4, seed=args.seed)
    model = PPO("MlpPolicy", env, seed=args.seed, device=args.device, verbose=0)
    t0 = time.perf_counter()
    if args.timesteps is not None:
        model.learn(total_timesteps=args.timesteps)
    else:
        model.learn(total_timesteps=10**10, callback=Deadline(args.seconds))
    print(f"sb3 PPO CartPole-v1: {model.num_timesteps} steps in {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
