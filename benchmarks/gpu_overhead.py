"""GPU-side profiling overhead: PPO with a GPU policy profiled vs not, and per-event costs.

    python benchmarks/gpu_overhead.py [--timesteps 16384] [--reps 2] [--json FILE]

Variants run interleaved in one process (unprofiled, profiled with GPU tracing and backend-op
recording, profiled with GPU tracing only), each repeated; the ratio of median wall times is the
slowdown. Micro-benchmarks: scope enter+exit with and without NVTX, and the extra cost per CUDA
API call (one torch.add launch) under CUPTI activity tracing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch

import rlscope
from rlscope.workloads import ppo_cartpole


def per_call_ns(fn, n: int) -> float:
    fn(n // 10)  # warm-up
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        fn(n)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def micro(tmp: str) -> dict:
    x = torch.ones(16, device="cuda")

    def launches(n: int) -> None:
        for _ in range(n):
            torch.add(x, 1)

    def scopes(n: int) -> None:
        sc = rlscope.scope("s")
        for _ in range(n):
            with sc:
                pass

    out = {"torch_add_unprofiled_ns": per_call_ns(launches, 20000)}
    with rlscope.profile(f"{tmp}/m1", backend=False, gpu="cupti", nvml_hz=0):
        out["torch_add_cupti_ns"] = per_call_ns(launches, 20000)
        out["scope_with_nvtx_ns"] = per_call_ns(scopes, 100000)
    with rlscope.profile(f"{tmp}/m2", backend=True, gpu="cupti", nvml_hz=0):
        out["torch_add_cupti_backend_ns"] = per_call_ns(launches, 20000)
    with rlscope.profile(f"{tmp}/m3", backend=False, gpu="cupti", nvtx=False, nvml_hz=0):
        out["scope_without_nvtx_ns"] = per_call_ns(scopes, 100000)
    with rlscope.profile(f"{tmp}/m4", backend=False, gpu=False):
        out["scope_cpu_only_ns"] = per_call_ns(scopes, 100000)
    out["cupti_cost_per_cuda_api_call_ns"] = out["torch_add_cupti_ns"] - out["torch_add_unprofiled_ns"]
    out["backend_cost_per_torch_op_ns"] = out["torch_add_cupti_backend_ns"] - out["torch_add_cupti_ns"]
    return out


VARIANTS = {
    "unprofiled": None,
    "profiled (gpu + backend ops)": {"backend": True, "gpu": "cupti"},
    "profiled (gpu, no backend ops)": {"backend": False, "gpu": "cupti"},
}


def ppo(tmp: str, timesteps: int, reps: int) -> dict:
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    returns: dict[str, list] = {}
    ppo_cartpole.train(total_timesteps=2048, seed=0, device="cuda", eval_episodes=0)  # warm-up
    for rep in range(reps):
        for name, opts in VARIANTS.items():
            t0 = time.perf_counter()
            if opts is None:
                r = ppo_cartpole.train(total_timesteps=timesteps, seed=1, device="cuda", eval_episodes=0)
            else:
                with rlscope.profile(f"{tmp}/ppo-{rep}-{len(times[name])}-{opts['backend']}", **opts):
                    r = ppo_cartpole.train(total_timesteps=timesteps, seed=1, device="cuda", eval_episodes=0)
            times[name].append(time.perf_counter() - t0)
            returns.setdefault(name, r["episode_returns"][:50])
    base = statistics.median(times["unprofiled"])
    return {
        "timesteps": timesteps,
        "reps": reps,
        "wall_s": times,
        "slowdown": {k: statistics.median(v) / base for k, v in times.items()},
        "same_returns_as_unprofiled": {k: v == returns["unprofiled"] for k, v in returns.items()},
    }


def main() -> None:
    import faulthandler
    import sys

    faulthandler.dump_traceback_later(100, exit=True, file=sys.stderr)  # a hang shows where it is
    p = argparse.ArgumentParser()
    p.add_argument("--timesteps", type=int, default=16384)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"device": torch.cuda.get_device_name(), "micro": micro(tmp)}
        print(json.dumps(result, indent=1), flush=True)
        result["ppo"] = ppo(tmp, args.timesteps, args.reps)
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
