"""Profiling slowdown of the bundled PPO workload: unprofiled vs profiled, interleaved, one process.

    python benchmarks/ppo_overhead.py [--device cpu|cuda] [--timesteps 20480] [--reps 2]

Variants: unprofiled; profiled with backend-op recording; profiled without it (scopes and the
simulator wrapper only). GPU tracing follows the device (Kineto on cuda, off on cpu). Reports the
median wall time of each, the slowdown over unprofiled, and whether the learning curve was
identical (profiling must not change the job's results).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import rlscope
from rlscope.workloads import ppo_cartpole


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--timesteps", type=int, default=20480)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    gpu = "auto" if args.device == "cuda" else False
    variants = {
        "unprofiled": None,
        "profiled, backend ops recorded": {"backend": True, "gpu": gpu},
        "profiled, scopes + simulator only": {"backend": False, "gpu": gpu},
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    returns: dict[str, list[float]] = {}
    kw = {"total_timesteps": args.timesteps, "seed": 1, "device": args.device, "eval_episodes": 0}
    ppo_cartpole.train(**{**kw, "total_timesteps": 1024})  # warm-up (imports, allocator)
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for i, (name, opts) in enumerate(variants.items()):
                t0 = time.perf_counter()
                if opts is None:
                    r = ppo_cartpole.train(**kw)
                else:
                    with rlscope.profile(f"{tmp}/{rep}-{i}", **opts):
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
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
