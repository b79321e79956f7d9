"""GPU-side per-event profiling costs (the PPO slowdown is benchmarks/ppo_overhead.py --device cuda).

    python benchmarks/gpu_overhead.py [--gpu kineto|cupti] [--json FILE]

Scope enter+exit with and without NVTX, and the extra cost per CUDA API call (one torch.add
launch) under Kineto and under cupti-python activity tracing, with and without backend-op recording.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

import rlscope


def per_call_ns(fn, n: int, reps: int = 3) -> float:
    """Fastest of ``reps`` timings of ``fn(n)`` per call, the GPU drained before and after each."""
    fn(n // 10)  # warm-up
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn(n)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def micro(tmp: str, gpu: str) -> dict:
    x = torch.ones(16, device="cuda")

    def launches(n: int) -> None:
        for _ in range(n):
            torch.add(x, 1)

    def scopes(n: int) -> None:
        sc = rlscope.scope("s")
        for _ in range(n):
            with sc:
                pass

    out = {"backend": gpu, "torch_add_unprofiled_ns": per_call_ns(launches, 20000)}
    # one GPU backend per process: a second CUPTI client in a process gets no records
    with rlscope.profile(f"{tmp}/a", backend=False, gpu=gpu, nvml_hz=0):
        out["torch_add_traced_ns"] = per_call_ns(launches, 5000)
        out["scope_with_nvtx_ns"] = per_call_ns(scopes, 100000)
    with rlscope.profile(f"{tmp}/b", backend=True, gpu=gpu, nvml_hz=0):
        out["torch_add_traced_backend_ns"] = per_call_ns(launches, 5000)
    with rlscope.profile(f"{tmp}/c", backend=False, gpu=gpu, nvtx=False, nvml_hz=0):
        out["scope_without_nvtx_ns"] = per_call_ns(scopes, 100000)
    with rlscope.profile(f"{tmp}/d", backend=False, gpu=False):
        out["scope_cpu_only_ns"] = per_call_ns(scopes, 100000)
    out["cost_per_cuda_api_call_ns"] = out["torch_add_traced_ns"] - out["torch_add_unprofiled_ns"]
    out["backend_cost_per_torch_op_ns"] = out["torch_add_traced_backend_ns"] - out["torch_add_traced_ns"]
    return out


def main() -> None:
    import faulthandler
    import sys

    faulthandler.dump_traceback_later(100, exit=True, file=sys.stderr)  # a hang shows where it is
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--gpu", default="kineto", choices=["kineto", "cupti"], help="GPU tracing backend")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"device": torch.cuda.get_device_name(), "micro": micro(tmp, args.gpu)}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
