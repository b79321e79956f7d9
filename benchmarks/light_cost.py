"""What each collector costs in its "light" (switched-off) state, one collector at a time.

    python benchmarks/light_cost.py [--reps 3] [--iterations 3000] [--device auto|cpu|cuda]
                                    [--configs a,b,...] [--json FILE]

The alternating windows (docs/overhead.md) measure what the expensive collectors cost by switching
them off in every other window; whatever rlscope costs while they are *off* is invisible to them.
On the H100 a light-window ``inference`` call of PPO-GPU took 1.59 ms against 1.13 ms unprofiled
(BENCHMARKS.md §9), so the light state has a cost of its own. This benchmark splits it: the same
small PPO-like loop (the bundled PPO's agent and CartPole envs: one ``inference`` call, one
``simulation`` step per iteration, a one-minibatch ``backprop`` every 128 iterations) runs

- ``unprofiled``: no session;
- ``scopes``: a session with scopes and simulator boundaries only (the base of every config below:
  no collector, the writer thread idle until the end);
- ``nvtx``: scopes that also open NVTX ranges (GPU only);
- ``backend-off``: the native backend recorder attached, switched off;
- ``cupti-off``: rlscope's CUPTI consumer attached, its activity kinds switched off (GPU only; the
  light state before CUPTI was detached in light windows);
- ``memory``: the GPU memory recorder (GPU only) as a session without windows records it (every event):
  the native allocator tracker where it builds, else torch's allocator history; never drained
  until the end (its recording alone);
- ``memory-history``: the same with torch's allocator history (``RLSCOPE_GPU_MEMORY=history``);
- ``memory-flushed`` / ``memory-history-flushed``: the same drained every second (the writer's
  default), so the drain's cost on the job's thread shows too;
- ``writer``: the writer thread flushing every second (the default);
- ``light``: the default profile with every switchable collector off: what a light window costs;
- ``full``: the default profile with every collector on: what a full window costs;
- ``cupti-detached``: CUPTI detached while off (``cuptiFinalize``; the default in light windows);
- ``light-attached``: ``light`` with CUPTI attached while off (``RLSCOPE_CUPTI_DETACH=0``);
- ``light-nomem``: ``light`` without the memory recorder;
- ``light-history``: ``light`` with the memory recorder on torch's allocator history;

each in its own process, interleaved (the order rotates every repetition), ``--reps`` times. Per
config it prints the median ``inference`` call and the mean iteration (median [min-max] over the
repetitions, and their spread), then the cost: the config minus ``unprofiled`` and minus
``scopes``, paired by repetition. GPU configs are skipped without CUDA.
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
from pathlib import Path
from typing import Any

from loops import UPDATE_EVERY, ppo_parts, ppo_update  # this script's directory

import rlscope

NO_FLUSH = 1e6  # a flush interval that never fires: the writer drains once, at the end
SCOPES_ONLY = {"backend": False, "gpu": False, "nvtx": False, "nvml_hz": 0, "windows": False}
NO_MEMORY = {"RLSCOPE_GPU_MEMORY": "0"}  # one collector at a time
HISTORY = {"RLSCOPE_GPU_MEMORY": "history"}  # the memory recorder on torch's allocator history
CONFIGS: dict[str, dict[str, Any]] = {
    "unprofiled": {},
    "scopes": {"session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH}, "env": NO_MEMORY},
    "nvtx": {
        "session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH},
        "nvtx": True,
        "gpu": True,
        "env": NO_MEMORY,
    },
    "backend-off": {
        "session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH, "backend": True},
        "off": True,
        "env": NO_MEMORY,
    },
    "cupti-off": {
        "session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH, "gpu": "cupti"},
        "off": True,
        "gpu": True,
        "env": {"RLSCOPE_CUPTI_DETACH": "0", **NO_MEMORY},
    },
    "memory": {"session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH}, "memory": True, "gpu": True},
    "memory-history": {
        "session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH},
        "memory": True,
        "gpu": True,
        "env": HISTORY,
    },
    "memory-flushed": {"session": {**SCOPES_ONLY, "flush_interval": 1.0}, "memory": True, "gpu": True},
    "memory-history-flushed": {
        "session": {**SCOPES_ONLY, "flush_interval": 1.0},
        "memory": True,
        "gpu": True,
        "env": HISTORY,
    },
    "writer": {"session": {**SCOPES_ONLY, "flush_interval": 1.0}, "env": NO_MEMORY},
    "light": {"session": {"windows": False}, "off": True},
    "full": {"session": {"windows": False}},
    # CUPTI detached (cuptiFinalize) while off, the default, instead of attached with its kinds disabled
    "cupti-detached": {
        "session": {**SCOPES_ONLY, "flush_interval": NO_FLUSH, "gpu": "cupti"},
        "off": True,
        "gpu": True,
        "env": {"RLSCOPE_CUPTI_DETACH": "1", **NO_MEMORY},
    },
    "light-attached": {"session": {"windows": False}, "off": True, "env": {"RLSCOPE_CUPTI_DETACH": "0"}},
    "light-nomem": {"session": {"windows": False}, "off": True, "env": NO_MEMORY},
    "light-history": {"session": {"windows": False}, "off": True, "env": HISTORY},
}


def workload(device: str) -> Any:
    """(run(iterations) -> ns per inference call, the device): the PPO-like loop, built once."""
    import torch

    dev, envs, agent, opt = ppo_parts(device)

    def run(iterations: int) -> list[int]:
        calls: list[int] = []
        obs_np, _ = envs.reset(seed=1)
        obs = torch.as_tensor(obs_np, dtype=torch.float32, device=dev)
        batch_obs, batch_act = [], []
        for i in range(iterations):
            t0 = time.perf_counter_ns()
            with rlscope.scope("inference"), torch.no_grad():
                action, _, _, _ = agent.get_action_and_value(obs)
            calls.append(time.perf_counter_ns() - t0)
            batch_obs.append(obs)
            batch_act.append(action)
            with rlscope.scope("simulation"):
                obs_np, _, _, _, _ = envs.step(action.cpu().numpy())
                obs = torch.as_tensor(obs_np, dtype=torch.float32, device=dev)
            if (i + 1) % UPDATE_EVERY == 0:
                ppo_update(agent, opt, batch_obs, batch_act)
                batch_obs, batch_act = [], []
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return calls

    return run, dev


def _switchable(session: Any) -> list[Any]:
    return [c for c in session._collectors if hasattr(c, "set_enabled")]


def child(config: str, iterations: int, device: str, out: str) -> None:
    """One timed run of ``config`` in this process; writes its figures to ``out`` (JSON)."""
    spec = CONFIGS[config]
    os.environ.update(spec.get("env", {}))
    import torch

    run, dev = workload(device)
    run(max(iterations // 10, UPDATE_EVERY))  # warm-up outside the session: CUDA context, caches
    session = None
    with tempfile.TemporaryDirectory(prefix="rlscope-light-cost-") as tmp:
        if "session" in spec:
            session = rlscope.profile(Path(tmp) / "trace", **spec["session"]).start()
            if spec.get("nvtx"):
                session._start_nvtx(torch)
            if spec.get("memory"):
                from rlscope.collectors.gpu_memory import MemoryRecorder

                mem = MemoryRecorder(session)  # started directly: its switch is the gpu option
                mem._begin(torch)
                session._collectors.append(mem)
            for col in _switchable(session) if spec.get("off") else []:
                col.set_enabled(False)
        t0 = time.perf_counter_ns()
        calls = run(iterations)
        wall = time.perf_counter_ns() - t0
        collectors = [] if session is None else [repr(c) for c in session._collectors]
        if session is not None:
            session.stop()
    figures = {
        "config": config,
        "device": dev.type,
        "inference_median_ns": statistics.median(calls),
        "inference_mean_ns": statistics.fmean(calls),
        "iteration_mean_ns": wall / iterations,
        "collectors": collectors,
    }
    Path(out).write_text(json.dumps(figures))


def _spread(values: list[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid else float("inf")


def _fmt(values: list[float]) -> str:
    """median [min-max] in us."""
    return f"{statistics.median(values) / 1e3:8.1f} [{min(values) / 1e3:.1f}-{max(values) / 1e3:.1f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=3000, help="loop iterations per run")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset")
    ap.add_argument("--json", metavar="FILE", help="write every run's figures here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.iterations, args.device, args.out)
        return 0
    import torch

    cuda = torch.cuda.is_available() and args.device != "cpu"
    wanted = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    skipped = [c for c in wanted if CONFIGS[c].get("gpu") and not cuda]
    configs = [c for c in wanted if c not in skipped]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="rlscope-light-cost-") as tmp:
        for rep in range(args.reps):
            order = configs[rep % len(configs) :] + configs[: rep % len(configs)]
            for config in order:
                out = str(Path(tmp) / f"{config}-{rep}.json")
                cmd = [sys.executable, __file__, "--child", config, "--iterations", str(args.iterations)]
                cmd += ["--device", args.device, "--out", out]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise SystemExit(f"{config} failed ({r.returncode}): {r.stderr.strip()[-1500:]}")
                runs[config].append(json.loads(Path(out).read_text()))
                fig = runs[config][-1]
                print(
                    f"rep {rep + 1} {config}: inference {fig['inference_median_ns'] / 1e3:.1f} us,"
                    f" iteration {fig['iteration_mean_ns'] / 1e3:.1f} us",
                    file=sys.stderr,
                    flush=True,
                )
                if args.json:  # kept after every run: a pass cut off by its time limit keeps what ran
                    report = {"args": vars(args), "skipped": skipped, "runs": runs}
                    Path(args.json).write_text(json.dumps(report, indent=1))
    _print(runs, args, skipped)
    return 0


def _paired(runs: dict[str, list[dict[str, Any]]], config: str, base: str, field: str) -> list[float]:
    """The config's figure minus the base's, per repetition."""
    return [r[field] - b[field] for r, b in zip(runs[config], runs[base], strict=True)]


def _print(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace, skipped: list[str]) -> None:
    device = next(iter(runs.values()))[0]["device"]
    print(
        f"light-state cost per collector ({device}, {args.iterations} iterations per run, {args.reps} reps,"
        " each config in its own process, interleaved); us, median [min-max] over the reps"
    )
    print(
        f"{'config':<12} {'inference call':>22} {'spread':>7} {'iteration':>22} {'spread':>7}"
        f" {'call - unprofiled':>24} {'call - scopes':>24} {'fastest - fastest':>18}"
    )
    for config, rs in runs.items():
        calls = [r["inference_median_ns"] for r in rs]
        iters = [r["iteration_mean_ns"] for r in rs]
        line = f"{config:<12} {_fmt(calls):>22} {_spread(calls):>7.0%}"
        line += f" {_fmt(iters):>22} {_spread(iters):>7.0%}"
        for base in ("unprofiled", "scopes"):
            ok = base in runs and config != base
            line += f" {_fmt(_paired(runs, config, base, 'inference_median_ns')) if ok else '-':>24}"
        if "unprofiled" in runs and config != "unprofiled":
            fastest = min(calls) - min(r["inference_median_ns"] for r in runs["unprofiled"])
            line += f" {fastest / 1e3:>18.1f}"
        print(line)
    print(
        "call - X: the config's median inference call minus X's in the same repetition;"
        " fastest - fastest: the config's fastest repetition minus the unprofiled one's"
    )
    if skipped:
        print(f"skipped without CUDA: {', '.join(skipped)}")


if __name__ == "__main__":
    raise SystemExit(main())
