"""The project's own validation workloads as scripts, for ``rlscope validate -- python THIS NAME``.

    python benchmarks/validation_workloads.py {ppo_cpu,ppo_gpu,dqn,sim_eager,scopes} [--scale 1.0]
                                              [--device auto|cpu|cuda]

Each warms up (imports, CUDA context, allocator) outside ``rlscope.profile``, then runs the
workload inside it, so ``rlscope validate``'s modes (unprofiled, plain timers, profiled) time the
same region. Sizes: about 2-5 s each on a 2-core CPU machine (``--scale`` multiplies them).

- ``ppo_cpu`` / ``ppo_gpu``: the bundled PPO (CartPole), policy on the CPU / the GPU;
- ``dqn``: the bundled DQN on the CPU;
- ``sim_eager``: the simulator benchmark's eager torch CartPole at N = 16 with a linear policy in
  three scopes a step: launch-bound on a GPU;
- ``scopes``: scope-heavy pure Python, three scopes per ~10 us iteration.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import rlscope


def ppo(device: str, steps: int) -> Callable[[], Any]:
    from rlscope.workloads import ppo_cartpole

    def run() -> Any:
        return ppo_cartpole.train(total_timesteps=steps, seed=1, device=device, eval_episodes=0)

    return run


def dqn(steps: int) -> Callable[[], Any]:
    from rlscope.workloads import dqn_cartpole

    def run() -> Any:
        return dqn_cartpole.train(total_timesteps=steps, seed=1, device="cpu", learning_starts=steps // 10)

    return run


def sim_eager(device: str, steps: int, num_envs: int = 16) -> Callable[[], Any]:
    """The simulator benchmark's eager torch backend at small N with a torch policy: launch-bound."""
    import torch

    from rlscope.workloads import cartpole as cp

    env = cp.make_vec("torch", num_envs, device=device)
    weight = torch.tensor([[0.0, 0.1], [0.0, 0.5], [0.0, 2.0], [0.0, 1.0]], device=device)

    def run() -> Any:
        obs, _ = env.reset(seed=0)
        total = torch.zeros((), device=device)
        for _ in range(steps):
            with rlscope.scope("policy"):
                action = (obs @ weight).argmax(dim=-1)
            with rlscope.scope("step"):
                obs, reward, _, _, _ = env.step(action)
            with rlscope.scope("stats"):
                total += reward.sum()
        return float(total)

    return run


def scopes(iterations: int) -> Callable[[], Any]:
    """Scope-heavy pure Python: three scopes per ~10 us iteration (~300k scopes/s unprofiled)."""

    def run() -> Any:
        table: dict[int, int] = {}
        acc = 0
        for i in range(iterations):
            with rlscope.scope("iteration"):
                with rlscope.scope("compute"):
                    for j in range(40):
                        acc = (acc * 31 + j) & 0xFFFFFF
                with rlscope.scope("bookkeeping"):
                    table[i & 255] = acc
                    acc ^= len(table)
        return acc

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=["ppo_cpu", "ppo_gpu", "dqn", "sim_eager", "scopes"])
    p.add_argument("--scale", type=float, default=1.0, help="multiply the workload's size")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="sim_eager's device")
    args = p.parse_args()
    import torch

    cuda = torch.cuda.is_available() and args.device != "cpu"
    dev = "cuda" if cuda else "cpu"

    def make(scale: float) -> Callable[[], Any]:
        n = lambda k: max(int(k * scale), 1)  # noqa: E731
        return {
            "ppo_cpu": lambda: ppo("cpu", n(4096)),
            "ppo_gpu": lambda: ppo("cuda", n(4096)),
            "dqn": lambda: dqn(n(6000)),
            "sim_eager": lambda: sim_eager(dev, n(4000)),
            "scopes": lambda: scopes(n(200_000)),
        }[args.workload]()

    gpu = "auto" if args.workload == "ppo_gpu" or (cuda and args.workload == "sim_eager") else False
    # warm-up outside the measured region: a short run of the same workload (CUDA context, cuBLAS
    # handles, allocator, first-call initialization), as any user's first iterations would do
    make(min(args.scale, 0.1))()
    run = make(args.scale)
    with rlscope.profile("rlscope-trace-" + args.workload, gpu=gpu):
        run()


if __name__ == "__main__":
    main()
