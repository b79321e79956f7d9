"""The what-if's prediction checked against the fix: PPO on gymnasium's CartPole predicts the fused one.

    python benchmarks/whatif_check.py [--reps 5] [--timesteps 22528] [--num-envs 4] [--device cuda]
                                      [--json F]

1. The bundled PPO (``workloads/ppo_cartpole.py --no-scopes``) on gymnasium's CartPole under
   ``rlscope run``: from its summary, the run's corrected wall ``W`` and the what-if's saving were
   ``simulation`` infinitely fast, ``S`` (rlscope/analysis/whatif.py).
2. The same PPO on the fused GPU simulator (``--sim fused``) under ``rlscope run``: its corrected
   ``simulation`` time ``F``, the cost of the simulator the fix puts in.
3. The prediction: the fused run's wall is ``W - S + F``; as a ratio to the gymnasium run's, ``(W - S +
   F) / W``.
4. The measurement: both programs plain, interleaved ``--reps`` times (order alternating); the median
   process wall of each, and their ratio.

Prints the predicted and measured ratios and the error (target: within ±15%).
"""

from __future__ import annotations

import argparse
import json
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
    ]  # fmt: skip


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
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
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        gym = _profiled("gymnasium", args, Path(tmp))
        fused = _profiled("fused", args, Path(tmp))
    w = float(gym["wall_s"])
    target = ((gym.get("what_if") or {}).get("operations") or {}).get("simulation", {}).get("all", {})
    s_inf = float((target.get("saving_s") or {}).get("inf", 0.0))
    f = float(_simulation(fused).get("total_s", 0.0))
    predicted = (w - s_inf + f) / w if w else float("nan")
    walls: dict[str, list[float]] = {"gymnasium": [], "fused": []}
    for i in range(args.reps):
        order = ("gymnasium", "fused") if i % 2 == 0 else ("fused", "gymnasium")
        for sim in order:
            walls[sim].append(_timed([sys.executable, *_ppo(sim, args)]))
    med = {k: statistics.median(v) for k, v in walls.items()}
    measured = med["fused"] / med["gymnasium"]
    result = {
        "gymnasium_corrected_wall_s": w,
        "simulation_s": float(_simulation(gym).get("total_s", 0.0)),
        "simulation_saving_inf_s": s_inf,
        "fused_simulation_s": f,
        "fused_corrected_wall_s": float(fused["wall_s"]),
        "predicted_ratio": predicted,
        "plain_walls_s": walls,
        "plain_median_s": med,
        "measured_ratio": measured,
        "error": predicted / measured - 1.0,
        "predicted_fused_wall_s": predicted * med["gymnasium"],
    }
    print(json.dumps(result, indent=1))
    print(
        f"predicted fused/gymnasium {predicted:.3f}, measured {measured:.3f} (median of {args.reps} plain"
        f" pairs), error {result['error']:+.1%}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
