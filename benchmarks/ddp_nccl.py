"""Two-rank DDP PPO under ``rlscope run``: per-rank breakdown, NCCL time inside ``backprop`` checked
against CUDA events around each all-reduce, the spread across ranks, and the profiling slowdown.

    python benchmarks/ddp_nccl.py --out DIR [--nproc 2] [--total-steps 40000] [--reps 3] [--backend nccl]

1. Slowdown: ``torchrun --nproc-per-node N workloads/ppo_ddp.py`` unprofiled and under
   ``rlscope run``, interleaved, ``--reps`` times each; the ratio of the median walls.
2. Check: one more profiled run with ``--time-allreduce`` (the workload's comm hook: DDP's own
   all-reduce, timed by CUDA events that bracket the collective on a side stream). Per rank,
   rlscope's ``backprop`` NCCL time for the run (``ratio_run``: from torch's flight recorder, every
   collective; ``nccl_source`` says so) against the events of every hook call; passes when it is
   within 10% on every rank. Beside it, for the kernel trace: each NCCL kernel the full windows
   recorded is paired with the hook call that launched it (the last call before the kernel started,
   on the same clock), and their time compared with the events of the same calls
   (``ratio_recorded``), and the number of collectives rlscope recorded with the hook's calls.
3. The check run's analysis: per rank, each operation's time, categories, GPU time and NCCL
   kernels; the spread of the ranks' NCCL time per operation.

Every process runs with NVLink SHARP multicast off (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1). Writes ``DIR/ddp_nccl.json`` and prints
it. On a CPU machine ``--backend gloo`` runs the same steps (no NCCL kernels: the check says so).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PPO_DDP = ROOT / "workloads" / "ppo_ddp.py"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
TOLERANCE = 0.10


def _torchrun(args: argparse.Namespace, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc)]
    cmd += [str(PPO_DDP), "--total-steps", str(args.total_steps), "--seed", "1", "--quiet"]
    return [*cmd, "--backend", args.backend, "--eval-episodes", "0", *extra]


def _rlscope_run(trace: Path) -> list[str]:
    return [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--"]


def _timed(cmd: list[str], log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=os.environ, timeout=1800)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"ddp_nccl: {' '.join(cmd[:6])} ... failed ({r.returncode}); see {log}")
    return wall


def _nccl_kernels(proc: Any) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) ns of the NCCL kernels rlscope recorded in one process, by start."""
    from rlscope import categories
    from rlscope.analysis import nccl

    if proc.gpu is None or proc.gpu.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cat = proc.gpu.column("category").to_numpy()
    names = proc.gpu.column("name").to_numpy()
    keep = (cat == categories.GPU_KERNEL) & np.array([nccl.is_nccl(proc.name(int(n))) for n in names], bool)
    start, end = proc.gpu.column("start_ns").to_numpy()[keep], proc.gpu.column("end_ns").to_numpy()[keep]
    order = np.argsort(start)
    return start[order].astype(np.int64), end[order].astype(np.int64)


def _calls_in_full_windows(proc: Any, at: np.ndarray) -> int | None:
    """How many hook calls started while the process's window was full (GPU tracing on)."""
    from rlscope.trace import schema as S

    ev = proc.events
    if ev is None or not len(at):
        return None
    kind, ts, mode = (ev.column(c).to_numpy() for c in ("kind", "ts_ns", "id"))
    w = np.flatnonzero(kind == S.WINDOW)
    if not len(w):
        return None
    order = np.argsort(ts[w], kind="stable")
    win_ts, win_mode = ts[w][order], mode[w][order]
    i = np.searchsorted(win_ts, at, side="right") - 1
    return int(((i >= 0) & (win_mode[np.maximum(i, 0)] == S.WINDOW_FULL)).sum())


def _check_rank(proc: Any, timed: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """rlscope's NCCL time in ``backprop`` against the hook's events; the kernel trace's beside it."""
    at = np.asarray(timed.get("allreduce_at_ns", []), np.int64)
    ms = np.asarray(timed.get("allreduce_ms", []), np.float64)
    k_start, k_end = _nccl_kernels(proc)
    out: dict[str, Any] = {"hook_calls": len(at), "nccl_kernels_recorded": len(k_start)}
    out["hook_calls_in_full_windows"] = _calls_in_full_windows(proc, at)
    backprop = entry["operations"].get("backprop", {})
    out["rlscope_backprop_nccl_s"] = backprop.get("nccl_s")
    out["rlscope_nccl_s"] = entry.get("nccl_s")
    out["nccl_source"] = entry.get("nccl_source")
    out["rlscope_backprop_collectives"] = backprop.get("nccl_collectives")
    out["events_s_all_calls"] = float(ms.sum()) / 1e3
    if out["rlscope_backprop_nccl_s"] and out["events_s_all_calls"] > 0:
        # rlscope's figure for the run against every call's events: the verdict
        r = out["rlscope_backprop_nccl_s"] / out["events_s_all_calls"]
        out["ratio_run"] = r
        out["within_10pct"] = abs(r - 1.0) <= TOLERANCE
    if not len(k_start) or not len(at):
        out["verdict"] = "no NCCL kernels recorded (gloo, or GPU tracing off)"
        return out
    # the call that launched each kernel: the last one before it started (the hook's gate holds each
    # kernel >0.1 ms after its call, and one all-reduce runs per backward)
    call = np.searchsorted(at, k_start, side="right") - 1
    ok = call >= 0
    paired = np.unique(call[ok])
    events_s = float(ms[paired].sum()) / 1e3
    kernels_s = float((k_end - k_start)[ok].sum()) / 1e9
    out.update(
        paired_calls=len(paired),
        rlscope_recorded_nccl_kernels_s=kernels_s,
        events_s_same_calls=events_s,
        # the NCCL kernels the full windows traced against the events of the same calls
        ratio_recorded=kernels_s / events_s if events_s > 0 else None,
    )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--out", required=True, help="directory for traces, logs and ddp_nccl.json")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--total-steps", type=int, default=40_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    args = p.parse_args()
    os.environ.update(NO_MULTICAST)  # every process below inherits it
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    walls: dict[str, list[float]] = {"unprofiled": [], "profiled": []}
    for rep in range(args.reps):
        walls["unprofiled"].append(_timed(_torchrun(args), out / f"unprofiled{rep}.log"))
        trace = out / f"trace{rep}"
        walls["profiled"].append(_timed(_rlscope_run(trace) + _torchrun(args), out / f"profiled{rep}.log"))
        print(
            f"rep {rep}: unprofiled {walls['unprofiled'][-1]:.1f} s, profiled {walls['profiled'][-1]:.1f} s"
        )
    check_trace = out / "trace-check"
    check_json = out / "check"
    _timed(
        _rlscope_run(check_trace) + _torchrun(args, "--time-allreduce", "--json", str(check_json)),
        out / "check.log",
    )

    from rlscope.analysis import analyze
    from rlscope.analysis.roles import DDP_RANK
    from rlscope.trace.reader import load_trace

    summary = analyze(check_trace).summary
    trace = load_trace(check_trace)
    procs = {p.pid: p for p in trace.processes}
    ranks: dict[str, Any] = {}
    for entry in summary["processes"]:
        if entry.get("role") != DDP_RANK:
            continue
        proc = procs[entry["pid"]]
        rank = proc.metadata.get("rank", "?")
        timed_file = Path(f"{check_json}.rank{rank}")
        timed = json.loads(timed_file.read_text()) if timed_file.exists() else {}
        ranks[f"rank {rank}"] = {
            "pid": entry["pid"],
            "wall_s": entry["wall_s"],
            "gpu_bound_s": entry.get("gpu_bound_s"),
            "operations": {
                name: {
                    k: op.get(k)
                    for k in ("total_s", "calls", "categories", "gpu_categories", "nccl_s", "nccl_kernels")
                    if k in op
                }
                for name, op in entry["operations"].items()
            },
            "check": _check_rank(proc, timed, entry),
        }
    import torch

    role = summary.get("roles", {}).get(DDP_RANK, {})
    unprof = statistics.median(walls["unprofiled"]) if walls["unprofiled"] else None
    prof = statistics.median(walls["profiled"]) if walls["profiled"] else None
    checks = [r["check"].get("within_10pct") for r in ranks.values()]
    result = {
        "machine": {
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
            "torch": torch.__version__,
            "host": os.uname().nodename,
        },
        "command": " ".join(_rlscope_run(Path("TRACE")) + _torchrun(args)),
        "env": NO_MULTICAST,
        "walls_s": walls,
        "slowdown": prof / unprof if prof and unprof else None,
        "ranks": ranks,
        "spread": {
            "nccl": role.get("nccl"),
            "operations": role.get("operations"),
            "wall": role.get("spread"),
        },
        "warnings": summary.get("warnings", []),
        "windows": (summary.get("overhead") or {}).get("windows", {}).get("full_share"),
        "check_passed": bool(checks) and all(c is True for c in checks),
    }
    (out / "ddp_nccl.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
