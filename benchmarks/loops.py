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
