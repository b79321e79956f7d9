"""Re-analyze kept validation traces with other per-window statistics, against the same truth.

    python benchmarks/window_estimators.py VALIDATE.json [VALIDATE.json ...] [--variants median,mean]

``rlscope validate --trace-dir D --json F`` keeps each profiled run's trace in ``D/rep-N`` and the
unprofiled and timer runs' figures in ``F`` (``benchmarks/trust_pass.sh KEEP_TRACES=1`` brings
``val_NAME.json`` back with the traces beside it in ``traces-NAME/``). This script analyzes every
kept trace once per variant of the windows estimator (overhead/correct/windows.py: each window's instances are
summarized by one statistic, then full windows are compared with their light neighbours) and
prints each variant's corrected error, total and per operation, against the same references, so
variants are compared on identical runs (no process-to-process noise between them).

Variants: ``median`` (what ships), ``mean`` (each window's mean: a collector cost that lands on
a few instances per window, a buffer flush or a slow first call after a switch, counts in full),
``trim10`` (10% trimmed mean).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlscope.overhead.correct import windows


def _trimmed(x: np.ndarray, cut: float = 0.1) -> float:
    x = np.sort(x)
    k = int(len(x) * cut)
    return float(np.mean(x[k : len(x) - k])) if len(x) > 2 * k else float(np.mean(x))


STATS: dict[str, Callable[[np.ndarray], float]] = {
    "median": lambda x: float(np.median(x)),
    "mean": lambda x: float(np.mean(x)),
    "trim10": _trimmed,
}


def _with_stat(stat: Callable[[np.ndarray], float]):
    """windows.window_medians with another per-window statistic."""

    def window_stat(group: np.ndarray, mode: np.ndarray, value: np.ndarray):
        if len(group) == 0:
            return np.zeros(0), np.zeros(0, bool), np.zeros(0, np.int64)
        order = np.argsort(group, kind="stable")
        g, m, v = group[order], mode[order], value[order]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        med = np.array([stat(chunk) for chunk in np.split(v, starts[1:])])
        return med, m[starts] == windows.S.WINDOW_FULL, np.diff(np.r_[starts, len(g)])

    return window_stat


def figures(trace: Path, variant: str) -> dict[str, float]:
    """Corrected wall and per-operation inclusive seconds of one trace under one variant."""
    from rlscope.analysis import analyze

    original = windows.window_medians
    windows.window_medians = _with_stat(STATS[variant])
    try:
        s = analyze(trace, intervals=False).summary
    finally:
        windows.window_medians = original
    out = {"[total]": s["wall_s"]}
    out.update({op: e["total_s"] for op, e in s["operations"].items()})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=Path, help="rlscope validate --json files")
    p.add_argument("--variants", default=",".join(STATS))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    variants = args.variants.split(",")
    report: dict[str, dict] = {}
    for path in args.results:
        res = json.loads(path.read_text())
        checked = {r["operation"]: r for r in res["rows"]}  # the total and every operation shown
        errs: dict[str, dict[str, list[float]]] = {v: {k: [] for k in checked} for v in variants}
        for rep, prof in enumerate(res["profiled"]):
            trace = Path(prof["trace_dir"])
            if not trace.exists():  # brought back from the device: benchmarks/trust_pass.sh KEEP_TRACES=1
                trace = path.parent / f"traces-{path.stem.removeprefix('val_')}" / trace.name
            if not trace.exists():
                print(f"{path.name}: {trace} missing", file=sys.stderr)
                continue
            for v in variants:
                got = figures(trace, v)
                for k, row in checked.items():
                    ref = row["reference_s"][rep]
                    if ref > 0 and k in got:
                        errs[v][k].append(got[k] / ref - 1)
        report[path.stem] = errs
        print(f"== {path.stem}")
        print(f"{'figure':<22}" + "".join(f"{v:>26}" for v in variants))
        for k in checked:
            cells = []
            for v in variants:
                e = errs[v][k]
                cells.append(
                    f"{statistics.median(e):+.1%} [{min(e):+.1%},{max(e):+.1%}]".rjust(26) if e else " " * 26
                )
            print(f"{k:<22}" + "".join(cells))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
