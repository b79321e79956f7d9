"""rlscope run on unmodified CleanRL-style PPO: its operations against hand timers, its source lines.

    python benchmarks/cleanrl_accuracy.py [--reps 5] [--timesteps 20000] [--device cpu|cuda] [--json F]

benchmarks/thirdparty/cleanrl_ppo.py (a ``SyncVectorEnv`` built directly, nothing of rlscope in it) is
run twice per repetition, the order alternating:

- *timers*: plain, with its own ``perf_counter`` timers around ``envs.step``, the ``no_grad`` block that
  acts, and each minibatch from its forward to the end of ``optimizer.step()`` (the ground truth);
- *rlscope*: under ``rlscope run`` (automatic operations, stack samples), its corrected figures.

Per operation: the median over repetitions of rlscope's total / the timers' total, with the range
(target: within ±10%); the same work in both (fixed timesteps), so totals compare directly. From the
rlscope runs: the share of ``[unannotated]`` and of each operation's Python time whose stack samples
name a source line (target: at least 80%), and the wall time against the plain run's.
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

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "thirdparty" / "cleanrl_ppo.py"
OPS = ("simulation", "inference", "backprop")


def _run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def _op(summary: dict[str, Any], name: str) -> dict[str, Any]:
    """An operation's entry, whether the summary keys automatic ones by their plain name or labelled."""
    ops = summary.get("operations") or {}
    return ops.get(name) or ops.get(f"{name} (auto)") or {}


def _stack_share(summary: dict[str, Any], name: str, python: bool) -> float | None:
    """The share of ``name``'s samples (its Python samples) that name a function and line of a file."""
    ops = (summary.get("stacks") or {}).get("operations") or {}
    o = ops.get(name) or ops.get(f"{name} (auto)")
    if not o:
        return None
    if python and not o.get("python_samples"):
        return None
    return float(o.get("python_named_share" if python else "named_share", 0.0))


def one_rep(work: Path, i: int, args: argparse.Namespace, profiled_first: bool) -> dict[str, Any]:
    base = [sys.executable, str(SCRIPT), "--total-timesteps", str(args.timesteps), "--device", args.device]
    timers, out = work / f"timers-{i}.json", work / f"summary-{i}.json"
    plain = [*base, "--timers", str(timers)]
    trace = work / f"trace-{i}"
    profiled = [
        sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--json", str(out),
        "--", *base,
    ]  # fmt: skip
    walls = {}
    for name, cmd in (
        (("rlscope", profiled), ("plain", plain))
        if profiled_first
        else (
            ("plain", plain),
            ("rlscope", profiled),
        )
    ):
        walls[name] = _run(cmd)
    t = json.loads(timers.read_text())
    s = json.loads(out.read_text())
    rep: dict[str, Any] = {"wall_ratio": walls["rlscope"] / walls["plain"], "ops": {}}
    for op in OPS:
        truth = float(t["total_s"].get(op, 0.0))
        got = float(_op(s, op).get("total_s", 0.0))
        rep["ops"][op] = {"timer_s": truth, "rlscope_s": got, "ratio": got / truth if truth else None}
    rep["named"] = {"[unannotated]": _stack_share(s, "[unannotated]", python=False)}
    for op in OPS:
        rep["named"][f"{op} python"] = _stack_share(s, op, python=True)
    return rep


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--timesteps", type=int, default=20_000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    reps = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.reps):
            reps.append(one_rep(Path(tmp), i, args, profiled_first=i % 2 == 0))
            print(json.dumps(reps[-1]), flush=True)
    result: dict[str, Any] = {"reps": reps, "ops": {}, "named": {}}
    for op in OPS:
        ratios = [r["ops"][op]["ratio"] for r in reps if r["ops"][op]["ratio"] is not None]
        result["ops"][op] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    for key in reps[0]["named"]:
        vals = [r["named"][key] for r in reps if r["named"][key] is not None]
        result["named"][key] = min(vals) if vals else None
    walls = [r["wall_ratio"] for r in reps]
    result["wall_ratio"] = {"median": statistics.median(walls), "min": min(walls), "max": max(walls)}
    for op, r in result["ops"].items():
        print(f"{op:<11} rlscope/timers median {r['median']:.3f} (range {r['min']:.3f}-{r['max']:.3f})")
    for key, v in result["named"].items():
        print(f"named lines, {key:<22} least {v:.0%}" if v is not None else f"named lines, {key}: no samples")
    w = result["wall_ratio"]
    print(f"rlscope run wall / plain: median {w['median']:.2f} (range {w['min']:.2f}-{w['max']:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
