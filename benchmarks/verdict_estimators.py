"""Which error estimate should `rlscope validate`'s verdict use when each process draws its speed?

The verdict is on the median, over repetitions, of each repetition's corrected/reference ratio
(paired by repetition). On the devices a process runs at one of two core speeds ~1.5x apart, drawn
independently of the process beside it (BENCHMARKS.md §9). An H200's PPO-GPU total read +5.3%
paired and +0.2% as the ratio of the two modes' medians, so the pairing looked like it only added
a second draw. This simulates both estimates where the truth is 0: n repetitions, each a reference
process and a profiled one with independent speed draws (slow with probability p), Gaussian jitter,
and optionally a drift that moves both processes of a repetition alike (the VM's slow hours).

    python benchmarks/verdict_estimators.py [--trials 4000] [--seed 1] [--json F]

Output per case: each estimate's 5th/95th percentile and how often it lands within the ±5% band.
Pure Python, no rlscope import: a statement about estimators, not about the profiler.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

SLOW = 1.5  # the devices' two speeds, ~1.5x apart
JITTER = 0.03  # a process's spread within its speed


def _process(rng: random.Random, p_slow: float) -> float:
    return (SLOW if rng.random() < p_slow else 1.0) * rng.gauss(1.0, JITTER)


def one_validation(rng: random.Random, n: int, p_slow: float, drift: float) -> tuple[float, float]:
    """(paired median error, medians' ratio error) of n repetitions whose true error is 0."""
    ref, cor = [], []
    for _ in range(n):
        d = 1.0 + rng.gauss(0.0, drift)  # shared by the repetition's two processes
        ref.append(d * _process(rng, p_slow))
        cor.append(d * _process(rng, p_slow))
    paired = statistics.median(c / r - 1 for c, r in zip(cor, ref, strict=True))
    return paired, statistics.median(cor) / statistics.median(ref) - 1


def summarize(errors: list[float], band: float = 0.05) -> dict[str, float]:
    xs = sorted(errors)
    return {
        "p5": xs[len(xs) // 20],
        "p95": xs[-(len(xs) // 20) - 1],
        "within_band": sum(abs(x) <= band for x in xs) / len(xs),
    }


def _text(name: str, s: dict[str, float]) -> str:
    return f"{name} [{s['p5']:+.3f}, {s['p95']:+.3f}] in ±5% {s['within_band']:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    for n in (4, 6, 10):
        for p_slow in (0.1, 0.3, 0.5):
            for drift in (0.0, 0.1):
                runs = [one_validation(rng, n, p_slow, drift) for _ in range(args.trials)]
                paired = summarize([a for a, _ in runs])
                ratio = summarize([b for _, b in runs])
                rows.append(
                    {"n": n, "p_slow": p_slow, "drift": drift, "paired": paired, "medians_ratio": ratio}
                )
                case = f"n={n:2d} p_slow={p_slow:.1f} drift={drift:.1f}"
                print(f"{case}  {_text('paired', paired)}  {_text('ratio', ratio)}")
    if args.json:
        with open(args.json, "w") as f:
            meta = {"trials": args.trials, "seed": args.seed, "slow": SLOW, "jitter": JITTER}
            json.dump({**meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
