"""Profiling slowdown of the bundled PPO: rlscope's default profile beside torch.profiler, one process.

    python benchmarks/ppo_overhead.py [--device cpu|cuda] [--timesteps 20480] [--reps 2] [--json FILE]

Variants, interleaved (the order rotating per repetition), each timed from start to a trace on disk:

- ``unprofiled``;
- ``rlscope_default``: ``rlscope.profile(dir)`` with its defaults (scopes, simulator time, backend
  ops; GPU tracing, memory and the windows on a GPU), stopped (its files written);
- ``rlscope_no_backend``: the same without backend-op recording (``backend=False``);
- ``torch_profiler``: ``torch.profiler.profile`` with its defaults for the device (CPU activity; CUDA
  too on ``cuda``), then ``export_chrome_trace``, the closest thing to a trace on disk it gives.

Reports each variant's median wall time, its slowdown over unprofiled, and whether the episode
returns were identical to the unprofiled run's (profiling must not change the job's results).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import rlscope
from rlscope.workloads import ppo_cartpole


@contextmanager
def torch_profiler(trace: str, device: str):  # type: ignore[no-untyped-def]
    """torch.profiler as its documentation starts it, the trace exported at the end."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        yield
    prof.export_chrome_trace(trace)


def variants(device: str) -> dict[str, Callable[[str], AbstractContextManager[Any]] | None]:
    """Each variant's context manager, given a fresh trace path."""
    gpu = "auto" if device == "cuda" else False
    return {
        "unprofiled": None,
        "rlscope_default": lambda d: rlscope.profile(d),
        "rlscope_no_backend": lambda d: rlscope.profile(d, backend=False, gpu=gpu),
        "torch_profiler": lambda d: torch_profiler(d + ".json", device),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--timesteps", type=int, default=20480)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    kinds = variants(args.device)
    times: dict[str, list[float]] = {k: [] for k in kinds}
    returns: dict[str, list[float]] = {}
    kw = {"total_timesteps": args.timesteps, "seed": 1, "device": args.device, "eval_episodes": 0}
    ppo_cartpole.train(**{**kw, "total_timesteps": 1024})  # warm-up (imports, allocator)
    names = list(kinds)
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                make = kinds[name]
                t0 = time.perf_counter()
                if make is None:
                    r = ppo_cartpole.train(**kw)
                else:
                    with make(f"{tmp}/{rep}-{name}"):
                        r = ppo_cartpole.train(**kw)
                times[name].append(time.perf_counter() - t0)
                returns.setdefault(name, r["episode_returns"])
    base = statistics.median(times["unprofiled"])
    result = {
        "device": args.device,
        "timesteps": args.timesteps,
        "wall_s": times,
        "slowdown": {k: round(statistics.median(v) / base, 3) for k, v in times.items()},
        "identical_returns": {k: v == returns["unprofiled"] for k, v in returns.items()},
    }
    print(
        json.dumps({k: result[k] for k in ("device", "timesteps", "slowdown", "identical_returns")}, indent=1)
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
