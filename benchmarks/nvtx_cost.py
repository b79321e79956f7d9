"""What an NVTX range and an rlscope scope cost per pair, with CUPTI never attached, attached and detached.

    python benchmarks/nvtx_cost.py [--pairs 200000] [--json FILE]

rlscope pushes an NVTX range per scope when it traces the GPU (``nvtx=True``), so Nsight users see
the operations. The analysis never reads them, and their cost is a residual the windows cannot
see (it is paid in light windows too). This times, in one process on the GPU:

- ``torch.cuda.nvtx.range_push`` / ``range_pop`` pairs: before CUPTI was ever attached, while an
  rlscope session with GPU tracing is on (no windows: CUPTI attached throughout), after it stopped
  (CUPTI detached, as in a light window);
- empty ``rlscope.scope`` pairs in sessions with GPU tracing and windows, with and without NVTX
  ranges, and without GPU tracing; repeated in turn, medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch

import rlscope


def nvtx_pair_ns(pairs: int) -> float:
    push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    t0 = time.perf_counter_ns()
    for _ in range(pairs):
        push("x")
        pop()
    return (time.perf_counter_ns() - t0) / pairs


def scope_pair_ns(pairs: int, **options: object) -> float:
    with tempfile.TemporaryDirectory() as d, rlscope.profile(d, backend=False, nvml_hz=0, **options):
        t0 = time.perf_counter_ns()
        for _ in range(pairs):
            with rlscope.scope("x"):
                pass
        return (time.perf_counter_ns() - t0) / pairs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    torch.zeros(1, device="cuda")
    out: dict[str, object] = {"nvtx_never_attached_ns": nvtx_pair_ns(args.pairs)}
    traced = {"gpu": "cupti", "backend": False, "nvml_hz": 0, "windows": False}
    with tempfile.TemporaryDirectory() as d, rlscope.profile(d, **traced):
        out["nvtx_attached_ns"] = nvtx_pair_ns(args.pairs)
    out["nvtx_after_detach_ns"] = nvtx_pair_ns(args.pairs)
    configs = {
        "scope_gpu_nvtx": {"gpu": "cupti", "nvtx": True},
        "scope_gpu_no_nvtx": {"gpu": "cupti", "nvtx": False},
        "scope_no_gpu": {"gpu": False},
    }
    rounds: dict[str, list[float]] = {k: [] for k in configs}
    for _ in range(args.rounds):
        for k, opts in configs.items():
            rounds[k].append(scope_pair_ns(args.pairs // 4, **opts))
    out.update({f"{k}_ns": statistics.median(v) for k, v in rounds.items()})
    out["rounds"] = rounds
    for k, v in out.items():
        if k != "rounds":
            print(f"{k:28} {v:8.0f} ns per pair")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
