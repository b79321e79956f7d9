"""The workloads of the sharing measurements (BENCHMARKS.md, "6. Sharing"), policy on cuda.

    python benchmarks/sharing_workloads.py {ppo,dqn,ppo_big,python} [--steps N] [--width 2048]
        [--device cuda|cpu]

``ppo``: the bundled PPO CartPole (two 64-wide hidden layers); ``dqn``: the bundled DQN;
``ppo_big``: the same PPO with every 64-wide layer made ``--width`` wide (a larger policy: more
persistent memory, longer kernels). A fixed number of environment steps, so k copies do the same work.
``--device cpu`` runs the same loop with no GPU at all: k such copies contend for the host alone.
``python``: a fixed amount of pure-Python work in scopes (no torch), how k interpreters slow each
other down on this host (shared caches, clock boost).
"""

from __future__ import annotations

import argparse

import torch


def _widen(module, width: int) -> None:
    """Make the module's 64-wide hidden layers ``width`` wide (its Agent builds them at init)."""

    class Wide:
        def __getattr__(self, name):
            return getattr(torch.nn, name)

        @staticmethod
        def Linear(i, o, *a, **k):
            return torch.nn.Linear(width if i == 64 else i, width if o == 64 else o, *a, **k)

    module.nn = Wide()


def _python_loop(steps: int) -> None:
    import rlscope

    for _ in range(steps):
        with rlscope.scope("step"):
            x = 0
            for i in range(20_000):  # ~1 ms of bytecode, and a dict the size of a small replay index
                x = (x * 31 + i) % 1_000_003
            {i: x for i in range(2_000)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["ppo", "dqn", "ppo_big", "python"])
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args()
    if args.workload == "python":
        _python_loop(args.steps or 300)
        return
    if args.workload == "dqn":
        from rlscope.workloads import dqn_cartpole

        dqn_cartpole.train(total_timesteps=args.steps or 4_000, device=args.device, learning_starts=500)
        return
    from rlscope.workloads import ppo_cartpole

    if args.workload == "ppo_big":
        _widen(ppo_cartpole, args.width)
    ppo_cartpole.train(total_timesteps=args.steps or 3_072, device=args.device, eval_episodes=2)


if __name__ == "__main__":
    main()
