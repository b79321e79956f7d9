"""The what-if's prediction checked against the fix: PPO on gymnasium's CartPole predicts the fused one.

    python benchmarks/whatif_check.py [--reps 5] [--timesteps 22528] [--num-envs 4] [--num-steps 128]
                                      [--update-epochs 4] [--device cuda] [--fix fused|torch|compiled]
                                      [--keep DIR] [--json F]

1. The bundled PPO (``workloads/ppo_cartpole.py --no-scopes``) on gymnasium's CartPole under
   ``rlscope run``: from its summary, the run's corrected wall ``W`` and the what-if's saving were
   ``simulation`` infinitely fast, ``S`` (rlscope/analysis/whatif.py).
2. The same PPO on the fix's simulator (``--sim fused``, or ``--fix``'s: ``torch`` is the one that
   runs vectorized on a CPU) under ``rlscope run``: its corrected ``simulation`` time ``F``, the cost of
   the simulator the fix puts in.
3. The prediction: the fixed run's wall is ``W - S + F``; as a ratio to the gymnasium run's, ``(W - S +
   F) / W``.
4. The measurement: both programs plain, interleaved ``--reps`` times (order alternating); the median
   process wall of each, and their ratio; beside it the ratio of their median CPU times (user +
   system), which a machine shared with other jobs stretches less than the walls.

Prints the predicted and measured ratios and the error (target: within ±15%). ``--keep DIR`` keeps both
traces (``DIR/gymnasium``, ``DIR/<fix>``) and their summaries (``DIR/<sim>.json``) for the reports.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "workloads" / "ppo_cartpole.py"


def _ppo(sim: str, args: argparse.Namespace) -> list[str]:
    return [
        str(PPO), "--no-scopes", "--quiet", "--sim", sim, "--device", args.device,
        "--total-timesteps", str(args.timesteps), "--eval-episodes", "0", "--num-envs", str(args.num_envs),
        "--num-steps", str(args.num_steps), "--update-epochs", str(args.update_epochs),
    ]  # fmt: skip


def _cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str], cpu: list[float] | None = None) -> float:
    """``cmd``'s wall; its CPU time (user + system, of the processes it waited for) appended to ``cpu``."""
    t0, c0 = time.perf_counter(), _cpu_of_children()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    if cpu is not None:
        cpu.append(_cpu_of_children() - c0)
    return time.perf_counter() - t0


def _profiled(sim: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / f"{sim}.json"
    run = [
        sys.executable,
        "-m",
        "rlscope.cli.main",
        "run",
        "--trace-dir",
        str(work / sim),
        "--json",
        str(out),
    ]
    _timed([*run, "--", sys.executable, *_ppo(sim, args)])
    return json.loads(out.read_text())


def _simulation(summary: dict[str, Any]) -> dict[str, Any]:
    ops = summary.get("operations") or {}
    return ops.get("simulation") or ops.get("simulation (auto)") or {}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--timesteps", type=int, default=22528)
    p.add_argument("--device", default="cuda")
    p.add_argument("--num-envs", type=int, default=4, help="more envs: a run more bound by its simulator")
    p.add_argument("--num-steps", type=int, default=128, help="steps per env per rollout")
    p.add_argument("--update-epochs", type=int, default=4, help="passes over each rollout per update")
    p.add_argument(
        "--fix", default="fused", choices=("fused", "torch", "compiled"), help="the fix's simulator"
    )
    p.add_argument("--keep", metavar="DIR", help="keep both traces and their summaries in DIR")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    fix = args.fix
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gym = _profiled("gymnasium", args, work)
        fixed = _profiled(fix, args, work)
    w = float(gym["wall_s"])
    target = ((gym.get("what_if") or {}).get("operations") or {}).get("simulation", {}).get("all", {})
    s_inf = float((target.get("saving_s") or {}).get("inf", 0.0))
    f = float(_simulation(fixed).get("total_s", 0.0))
    predicted = (w - s_inf + f) / w if w else float("nan")
    walls: dict[str, list[float]] = {"gymnasium": [], fix: []}
    cpus: dict[str, list[float]] = {"gymnasium": [], fix: []}
    for i in range(args.reps):
        order = ("gymnasium", fix) if i % 2 == 0 else (fix, "gymnasium")
        for sim in order:
            walls[sim].append(_timed([sys.executable, *_ppo(sim, args)], cpus[sim]))
    med = {k: statistics.median(v) for k, v in walls.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpus.items()}
    measured = med[fix] / med["gymnasium"]
    result = {
        "fix": fix,
        "gymnasium_corrected_wall_s": w,
        "simulation_s": float(_simulation(gym).get("total_s", 0.0)),
        "simulation_saving_inf_s": s_inf,
        "fix_simulation_s": f,
        "fix_corrected_wall_s": float(fixed["wall_s"]),
        "predicted_ratio": predicted,
        "plain_walls_s": walls,
        # on a machine shared with other jobs the walls stretch with their load; a one-threaded
        # program's CPU time much less so: its ratio is the same comparison, less of the neighbours in it
        "plain_cpu_s": cpus,
        "plain_cpu_median_s": cpu_med,
        "measured_cpu_ratio": cpu_med[fix] / cpu_med["gymnasium"],
        "plain_median_s": med,
        "measured_ratio": measured,
        "error": predicted / measured - 1.0,
        "predicted_fix_wall_s": predicted * med["gymnasium"],
    }
    print(json.dumps(result, indent=1))
    print(
        f"predicted {fix}/gymnasium {predicted:.3f}, measured {measured:.3f} (median of {args.reps} plain"
        f" pairs), error {result['error']:+.1%}; the {fix} run's wall: predicted"
        f" {result['predicted_fix_wall_s']:.2f} s, measured {med[fix]:.2f} s; CPU time {fix}/gymnasium"
        f" {result['measured_cpu_ratio']:.3f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
