"""Automatic operations: accuracy against hand annotation, and what ``rlscope run`` costs an SB3 PPO.

    python benchmarks/auto_ops.py [--reps 3] [--device cpu|cuda] [--timesteps N] [--json F]
                                  [--part accuracy|cost|wrapper|both]

**accuracy**: the bundled PPO (workloads/ppo_cartpole.py) run twice per repetition, interleaved:

- *hand*: its own scopes, measured by ``rlscope validate``'s timers (``RLSCOPE_MODE=timers``: one clock
  read per boundary, the ground truth per operation; rlscope/overhead/validate/runner.py);
- *auto*: ``--no-scopes`` (no rlscope annotation at all) under ``rlscope run``, its automatic
  ``inference``, ``simulation`` and ``backprop`` from the corrected analysis.

Per operation: the median over repetitions of auto total / hand total (target: within ±10%).

**cost**: examples/sb3_ppo.py (stable-baselines3 PPO, unmodified) as a plain process, under
``rlscope run --no-analyze`` and under ``rlscope run --no-analyze --no-auto-ops``, interleaved; the
median process wall time of each and the ratios (target: ``rlscope run`` at most 1.2x).
``--device cuda`` puts both programs' policies on the GPU.

**wrapper** (``--part wrapper``, in this process): what the automatic operations' ``nn.Module.__call__``
wrapper costs a module call, which the correction does not remove. A CleanRL-shaped rollout step (actor
and critic, each a 64-64 MLP: 12 module calls, in ``torch.no_grad()``) timed with torch's own
``__call__`` and inside a session with automatic operations, inside a user's ``inference`` scope (so no
automatic operation opens: the wrapper alone, and the no_grad block's), interleaved ``--reps`` times;
the median difference per module call. Runs with ``--part both`` too.
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
OPS = ("inference", "simulation", "backprop")


def _run(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def _ppo(args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "rlscope.workloads.ppo_cartpole", "--total-timesteps", str(args.timesteps),
            "--device", args.device, "--eval-episodes", "0", "--quiet"]  # fmt: skip


def hand_timers(args: argparse.Namespace, work: Path, rep: int) -> dict[str, float]:
    """The hand-annotated operations' inclusive seconds, from validate's timers."""
    from rlscope.overhead.validate import runner
    from rlscope.runtime import BOOT_DIR, hooks

    record = work / f"timers-{rep}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if x)
    env[hooks.BOOT_ENV] = runner.BOOT  # the timers' child boot, as validate's children get it
    env[runner.MODE_ENV] = "timers"
    env[runner.RECORD_ENV] = str(record)
    _run([*_ppo(args), "--trace-dir", str(work / f"unused-{rep}")], env)
    timers = json.loads(record.read_text())["timers"]
    return {op: timers[op]["inclusive_ns"] / 1e9 for op in OPS if op in timers}


def auto_ops(args: argparse.Namespace, work: Path, rep: int) -> dict[str, float]:
    """The automatic operations' corrected inclusive seconds under ``rlscope run``."""
    from rlscope.analysis import analyze

    trace = work / f"auto-{rep}"
    _run([sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--",
          *_ppo(args), "--no-scopes"], dict(os.environ))  # fmt: skip
    summary = analyze(trace).summary
    ops, raw = summary["operations"], summary["raw"]["operations"]
    out = {op: ops[op]["total_s"] for op in OPS if op in ops}
    out.update({f"{op}_raw": raw[op]["total_s"] for op in OPS if op in raw})
    return out


def accuracy(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    ratios: dict[str, list[float]] = {op: [] for op in OPS}
    runs = []
    for rep in range(args.reps):
        order = [hand_timers, auto_ops] if rep % 2 == 0 else [auto_ops, hand_timers]
        got = {fn.__name__: fn(args, work, rep) for fn in order}
        runs.append(got)
        for op in OPS:
            h, a = got["hand_timers"].get(op), got["auto_ops"].get(op)
            if h and a:
                ratios[op].append(a / h)
        hand, auto = got["hand_timers"], got["auto_ops"]
        line = "  ".join(f"{op} hand {hand.get(op, 0):.3f}s auto {auto.get(op, 0):.3f}s" for op in OPS)
        print(f"rep {rep}: {line}", flush=True)
    summary = {op: statistics.median(r) for op, r in ratios.items() if r}
    for op, r in summary.items():
        verdict = "ok" if abs(r - 1) <= 0.10 else "OUT OF ±10%"
        print(f"{op}: auto / hand = {r:.3f} (median of {len(ratios[op])}) {verdict}")
    return {"ratio_auto_over_hand": summary, "ratios": ratios, "runs": runs}


def cost(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    script = [str(ROOT / "examples" / "sb3_ppo.py"), "--timesteps", str(args.sb3_timesteps),
              "--device", args.device]  # fmt: skip
    variants = {
        "plain": [sys.executable, *script],
        "rlscope_run": [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--trace-dir",
                        str(work / "sb3"), "--", sys.executable, *script],
        "rlscope_run_no_auto_ops": [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze",
                                    "--no-auto-ops", "--trace-dir", str(work / "sb3-noauto"), "--",
                                    sys.executable, *script],
    }  # fmt: skip
    walls: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for rep in range(args.reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            walls[name].append(_run(variants[name], dict(os.environ)))
        print(f"rep {rep}: " + "  ".join(f"{k} {v[-1]:.2f}s" for k, v in walls.items()), flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    out = {
        "median_wall_s": med,
        "walls_s": walls,
        "slowdown": med["rlscope_run"] / med["plain"],
        "slowdown_no_auto_ops": med["rlscope_run_no_auto_ops"] / med["plain"],
    }
    verdict = "ok" if out["slowdown"] <= 1.2 else "ABOVE 1.2x"
    print(f"sb3 PPO ({args.device}): rlscope run x{out['slowdown']:.3f} ({verdict}),"
          f" without automatic operations x{out['slowdown_no_auto_ops']:.3f}")  # fmt: skip
    return out


def wrapper(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch
    from torch import nn

    import rlscope

    torch.set_num_threads(1)

    def mlp(out: int) -> nn.Module:
        return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))

    actor, critic, obs = mlp(2), mlp(1), torch.randn(8, 4)
    module_calls = 12

    def step_us(n: int = 4000) -> float:
        def step() -> None:
            with torch.no_grad():
                actor(obs)
                critic(obs)

        for _ in range(300):
            step()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return (time.perf_counter() - t0) / n * 1e6

    times: dict[str, list[float]] = {"torch": [], "wrapped": []}
    for rep in range(max(args.reps, 5)):
        times["torch"].append(step_us())
        sess = rlscope.profile(work / f"wrapper-{rep}", auto_ops=True, backend=False, gpu=False)
        with sess, rlscope.scope("inference"):  # the user's: no automatic inference opens inside
            times["wrapped"].append(step_us())
    med = {k: statistics.median(v) for k, v in times.items()}
    per_call = (med["wrapped"] - med["torch"]) / module_calls
    print(f"module-call wrapper: {per_call:.3f} us a module call (step {med['torch']:.1f} us, wrapped"
          f" {med['wrapped']:.1f} us, {module_calls} module calls)")  # fmt: skip
    return {"step_us": times, "median_step_us": med, "per_module_call_us": per_call}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--timesteps", type=int, default=16_384, help="bundled PPO's steps per run")
    p.add_argument("--sb3-timesteps", type=int, default=8_192, help="SB3 PPO's steps per run")
    p.add_argument("--part", choices=["accuracy", "cost", "wrapper", "both"], default="both")
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args()
    result: dict[str, Any] = {"device": args.device, "reps": args.reps, "cpus": os.cpu_count(),
                              "load_avg_at_start": os.getloadavg()}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rlscope-auto-ops-") as tmp:
        work = Path(tmp)
        if args.part in ("accuracy", "both"):
            result["accuracy"] = accuracy(args, work)
        if args.part in ("cost", "both"):
            result["cost"] = cost(args, work)
        if args.part in ("wrapper", "both"):
            result["wrapper"] = wrapper(args, work)
    result["load_avg_at_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
