"""Where the GPU-tracing cost goes: per CUDA API call and per kernel, for each CUPTI configuration.

    python benchmarks/cupti_cost.py [--reps 3] [--json FILE] [--configs "all;all, switched off"]

Each configuration runs in its own process (one CUPTI subscriber per process; the activity kinds
are chosen when tracing starts, through ``RLSCOPE_CUPTI_KINDS``), interleaved over repetitions:

- ``launch``: a loop of ``torch.add`` on a tiny tensor, no synchronization: the CPU cost per API
  call (a launch is a runtime call and, under it, a driver call);
- ``sync``: ``torch.add`` then ``torch.cuda.synchronize()`` per iteration: what per-kernel
  instrumentation adds to a loop that waits for every kernel (RL inference often does);
- configurations: no tracing; kernel records only; kernel + runtime API; kernel + driver API;
  everything rlscope records (kernel, memcpy, memset, runtime, driver); everything but switched
  off (rlscope's light windows); everything with the query APIs' records kept (before they were
  skipped by default);
- and detached with CUDA initialized after CUPTI first attached: once detached before the
  initialization, once initialized while attached and detached after it. Every other configuration
  initializes CUDA first; a program under ``rlscope run`` initializes it in the middle of a session,
  whose CUPTI may be attached then (a full window, or a light one the window timer began that the
  main thread has not finished).

Reported: median ns per iteration and the extra over no tracing, and API records per launch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ALL = "kernel,memcpy,memset,runtime,driver"
CONFIGS = {
    "none": None,
    "kernel": "kernel",
    "kernel+runtime": "kernel,runtime",
    "kernel+driver": "kernel,driver",
    "all": ALL,  # the default: query APIs' records skipped (cupti_native.c, QUERY_APIS)
    "all, queries kept": ALL,  # RLSCOPE_CUPTI_QUERIES=1: every API record, as before
    "all, switched off": ALL,
    "all, detached off": ALL,  # RLSCOPE_CUPTI_DETACH=1
    "detached, then CUDA initialized": ALL,
    "CUDA initialized attached, detached": ALL,
}
# configurations whose process initializes CUDA inside the session, not before it
LATE_INIT = ("detached, then CUDA initialized", "CUDA initialized attached, detached")


def per_call_ns(fn: Any, n: int, reps: int = 3) -> float:
    """Fastest of ``reps`` timings of ``fn(n)`` per call, the GPU drained before and after each."""
    import torch

    fn(n // 10)  # warm-up
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn(n)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def child(config: str) -> dict:
    import numpy as np
    import torch

    import rlscope

    def init_cuda() -> Any:
        x = torch.ones(16, device="cuda")
        torch.add(x, 1)
        torch.cuda.synchronize()
        return x

    x = None if config in LATE_INIT else init_cuda()

    def launch(n: int) -> None:
        for _ in range(n):
            torch.add(x, 1)

    def sync(n: int) -> None:
        for _ in range(n):
            torch.add(x, 1)
            torch.cuda.synchronize()

    out: dict = {"config": config}
    with tempfile.TemporaryDirectory() as tmp:
        session = None
        if CONFIGS[config] is not None:
            session = rlscope.profile(tmp, backend=False, gpu="cupti", nvml_hz=0, windows=False).start()
            native = [c for c in session._collectors if hasattr(c, "set_enabled")]
            out["collector"] = [repr(c) for c in session._collectors]
            if config in LATE_INIT:
                if config.startswith("CUDA"):
                    x = init_cuda()
                for c in native:
                    c.set_enabled(False)
                if x is None:
                    x = init_cuda()
            elif config.endswith("off"):
                # what one off/on switch costs (a window boundary pair), then leave it off
                t0 = time.perf_counter_ns()
                for _ in range(10):
                    for c in native:
                        c.set_enabled(False)
                    torch.add(x, 1)
                    for c in native:
                        c.set_enabled(True)
                    torch.add(x, 1)
                torch.cuda.synchronize()
                out["switch_pair_us"] = (time.perf_counter_ns() - t0) / 10 / 1e3
                for c in native:
                    c.set_enabled(False)
        out["launch_ns"] = per_call_ns(launch, 20000, reps=5)
        out["sync_ns"] = per_call_ns(sync, 5000, reps=5)
        if session is not None:
            session.stop()
            trace = rlscope.load_trace(tmp)
            gpu = trace.processes[0].gpu
            if gpu is not None:
                cats = gpu.column("category").to_numpy()
                launches = (20000 // 10 + 5 * 20000) + (5000 // 10 + 5 * 5000)  # warm-up + 5 timings
                out["api_records_per_launch"] = float((cats == 3).sum()) / launches
                out["kernel_records_per_launch"] = float((cats == 4).sum()) / launches
                names = gpu.column("name").to_numpy()[cats == 3]
                ids, counts = np.unique(names, return_counts=True)
                top = sorted(zip(counts.tolist(), ids.tolist(), strict=True), reverse=True)[:8]
                out["api_per_launch_by_name"] = {trace.processes[0].name(i): c / launches for c, i in top}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument(
        "--configs", default=None, help="configurations separated by ';' (default: all); none is always run"
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    chosen = (
        list(CONFIGS) if not args.configs else ["none", *(c for c in args.configs.split(";") if c != "none")]
    )
    if unknown := [c for c in chosen if c not in CONFIGS]:
        p.error(f"--configs: unknown {unknown}; known: {'; '.join(CONFIGS)}")
    runs: dict[str, list[dict]] = {c: [] for c in chosen}
    for rep in range(args.reps):
        order = chosen[rep % len(chosen) :] + chosen[: rep % len(chosen)]
        for config in order:
            env = dict(os.environ)
            if CONFIGS[config]:
                env["RLSCOPE_CUPTI_KINDS"] = CONFIGS[config]
            env["RLSCOPE_CUPTI_DETACH"] = "1" if "detached" in config else "0"  # detached is the default
            env["RLSCOPE_CUPTI_QUERIES"] = "1" if "queries kept" in config else "0"
            proc = subprocess.run(
                [sys.executable, __file__, "--child", config], env=env, capture_output=True, text=True
            )
            if proc.returncode != 0:
                print(f"{config}: failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            runs[config].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    base = {k: statistics.median(r[k] for r in runs["none"]) for k in ("launch_ns", "sync_ns")}
    table = {}
    print(f"{'configuration':36} {'launch ns':>10} {'+ns':>7} {'sync ns':>9} {'+ns':>7} {'api rec':>8}")
    for config, rs in runs.items():
        if not rs:
            continue
        row = {k: statistics.median(r[k] for r in rs) for k in ("launch_ns", "sync_ns")}
        row["launch_extra_ns"] = row["launch_ns"] - base["launch_ns"]
        row["sync_extra_ns"] = row["sync_ns"] - base["sync_ns"]
        row["spread_launch_ns"] = [min(r["launch_ns"] for r in rs), max(r["launch_ns"] for r in rs)]
        row["api_records_per_launch"] = rs[0].get("api_records_per_launch")
        row["switch_pair_us"] = rs[0].get("switch_pair_us")
        row["api_per_launch_by_name"] = rs[0].get("api_per_launch_by_name")
        table[config] = row
        print(
            f"{config:36} {row['launch_ns']:10.0f} {row['launch_extra_ns']:7.0f} {row['sync_ns']:9.0f}"
            f" {row['sync_extra_ns']:7.0f} {row['api_records_per_launch'] or 0:8.2f}"
            + (f"  switch off+on {row['switch_pair_us']:.0f} us" if row["switch_pair_us"] else "")
        )
        if row["api_per_launch_by_name"]:
            by_name = ", ".join(f"{n} {c:.2f}" for n, c in row["api_per_launch_by_name"].items())
            print(f"    API records per launch: {by_name}")
    import torch

    result = {"device": torch.cuda.get_device_name(), "reps": args.reps, "table": table, "runs": runs}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
