"""Stable-Baselines3 PPO on CartPole-v1, profiled with rlscope the way a user would: without editing SB3.

    python benchmarks/thirdparty/sb3_ppo.py [--timesteps 32768] [--n-steps 2048] [--device cpu|cuda]
                                            [--trace-dir D]
    rlscope validate -- python benchmarks/thirdparty/sb3_ppo.py

A workload rlscope's authors did not write (``pip install -e ".[bench]"``). The annotations wrap the
model's own methods on the instance, which SB3 calls through ``self``: ``collect_rollouts`` and
``train`` (the two halves of ``learn``), the policy's forward pass inside the rollout
(``inference``) and the vectorized env's ``step`` (``env_step``); ``rlscope.wrap_env`` marks the
gymnasium envs' step/reset as simulator time. SB3's defaults otherwise (4 envs x 2048 steps per
rollout, 10 epochs of 64-sample minibatches); the default run trains for about 15 s on a 2-core VM.
On CPU torch runs one thread (``--torch-threads``): a 64-64 MLP is faster so, and on a shared machine
intra-op threads spin-waiting for a busy core made the run length vary 5x.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import rlscope


def annotate(model: Any) -> None:
    """Scopes around SB3's methods, set on the instances (SB3 itself is not modified)."""
    model.collect_rollouts = rlscope.scope("collect_rollouts")(model.collect_rollouts)
    model.train = rlscope.scope("train")(model.train)
    # on-policy rollouts call ``self.policy(obs)``: nn.Module.__call__ looks ``forward`` up on the instance
    model.policy.forward = rlscope.scope("inference")(model.policy.forward)
    env = model.get_env()
    env.step = rlscope.scope("env_step")(env.step)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--timesteps", type=int, default=32_768, help="environment steps (default 32768)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument(
        "--n-steps",
        type=int,
        default=2048,
        help="steps per env per rollout (SB3's default 2048; fewer gives a short run several rollouts)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--trace-dir", default="sb3-ppo-trace")
    args = p.parse_args(argv)

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(args.torch_threads)
    env = make_vec_env("CartPole-v1", n_envs=4, seed=args.seed, wrapper_class=rlscope.wrap_env)
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, seed=args.seed, device=args.device, verbose=0)
    model.set_logger(Logger(None, []))  # no output: SB3 would make an empty /tmp/SB3-<time> a run
    annotate(model)
    t0 = time.perf_counter()
    gpu = "auto" if args.device == "cuda" else False
    with rlscope.profile(args.trace_dir, gpu=gpu), rlscope.phase("training"):
        model.learn(total_timesteps=args.timesteps)
    episodes = [e["r"] for e in model.ep_info_buffer]
    mean = sum(episodes) / len(episodes) if episodes else float("nan")
    print(
        f"sb3 PPO CartPole-v1: {model.num_timesteps} steps in {time.perf_counter() - t0:.1f} s,"
        f" mean return of the last {len(episodes)} episodes {mean:.1f}"
    )


if __name__ == "__main__":
    main()
