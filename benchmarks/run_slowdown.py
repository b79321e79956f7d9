"""`rlscope run`'s slowdown on a whole program, and its corrected wall against the unprofiled one.

    python benchmarks/run_slowdown.py [--reps 5] [--detail SPEC] [--json F] -- python train.py ARGS...

Two variants of the same command, each run in its own process, interleaved (the order alternating
per repetition) after one untimed run of each (native builds, caches, CUDA's first start-up):

- ``plain``: the program as it is;
- ``rlscope``: ``rlscope run --no-analyze [--detail SPEC]`` around it (the analysis is timed apart).

The slowdown is the ratio of the two processes' walls (median over repetitions, with their
spread). The correction is checked against the plain runs: each profiled trace's corrected wall
(``rlscope-analyze --json``) against the median plain wall less the interpreter's start-up (which
no session sees), as a percentage error. The program must do the same work in every run (a fixed
number of steps, not a time limit).
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


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"run_slowdown: {' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall


def _startup_s(python: str) -> float:
    """The interpreter's start and exit alone (median of 5): outside any session."""
    return statistics.median(_wall([python, "-c", "pass"]) for _ in range(5))


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--detail", default=None, help="rlscope run --detail SPEC (default: rlscope's)")
    p.add_argument("--json", default=None)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the program to run after --")
    work = Path(tempfile.mkdtemp(prefix="rlscope-slowdown-"))
    detail = ["--detail", args.detail] if args.detail else []

    def profiled(trace: Path) -> list[str]:
        return ["rlscope", "run", "--no-analyze", *detail, "--trace-dir", str(trace), "--", *command]

    def say(text: str) -> None:
        print(f"run_slowdown: {text}", file=sys.stderr, flush=True)

    say(f"untimed runs: plain {_wall(command):.1f} s, rlscope {_wall(profiled(work / 'warm')):.1f} s")
    plain: list[float] = []
    prof: list[float] = []
    traces: list[Path] = []
    for rep in range(args.reps):
        trace = work / f"rep-{rep}"
        for variant in ("plain", "rlscope") if rep % 2 == 0 else ("rlscope", "plain"):
            if variant == "plain":
                plain.append(_wall(command))
            else:
                prof.append(_wall(profiled(trace)))
                traces.append(trace)
            took = (plain if variant == "plain" else prof)[-1]
            say(f"repetition {rep + 1}/{args.reps} {variant}: {took:.2f} s")
    startup = _startup_s(command[0]) if command[0].startswith("python") else 0.0
    truth = statistics.median(plain) - startup
    corrected, analyze_s = [], []
    for trace in traces:
        out = trace.with_suffix(".json")
        t0 = time.perf_counter()
        subprocess.run(["rlscope-analyze", str(trace), "--json", str(out), "-q"], check=True)
        analyze_s.append(time.perf_counter() - t0)
        corrected.append(float(json.loads(out.read_text())["wall_s"]))
    ratios = [b / a for a, b in zip(plain, prof, strict=True)]
    errors = [100 * (c - truth) / truth for c in corrected]
    result = {
        "command": command,
        "detail": args.detail,
        "reps": args.reps,
        "plain_s": plain,
        "rlscope_s": prof,
        "slowdown_median": statistics.median(ratios),
        "slowdown_spread": [min(ratios), max(ratios)],
        "startup_s": startup,
        "corrected_wall_s": corrected,
        "corrected_error_pct_median": statistics.median(errors),
        "corrected_error_pct_spread": [min(errors), max(errors)],
        "analyze_s": analyze_s,
    }
    print(
        f"plain {statistics.median(plain):.2f} s ({_spread(plain)}), rlscope run"
        f" {statistics.median(prof):.2f} s ({_spread(prof)}): slowdown {result['slowdown_median']:.3f}x"
        f" ({_spread(ratios)}); corrected wall error {result['corrected_error_pct_median']:+.1f}%"
        f" ({min(errors):+.1f}..{max(errors):+.1f}); analysis {statistics.median(analyze_s):.1f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
