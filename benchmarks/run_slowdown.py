"""`rlscope run`'s slowdown on a whole program, and its corrected wall against the unprofiled one.

    python benchmarks/run_slowdown.py [--reps 5] [--detail SPEC] [--json F] -- python train.py ARGS...

Two variants of the same command, each run in its own process, interleaved (the order alternating
per repetition) after one untimed run of each (native builds, caches, CUDA's first start-up):

- ``plain``: the program as it is;
- ``rlscope``: ``rlscope run --no-analyze [--detail SPEC]`` around it (the analysis is timed apart).

The slowdown is the ratio of the two processes' walls (median over repetitions, with their
spread), and of the training times the program prints (``N steps in T s``) where it prints one:
its own loop, without the start-up (imports, CUDA's initialization) that a short run is mostly made
of and a long one is not. The correction is checked against the plain runs: each profiled trace's
corrected wall (``rlscope-analyze --json``) against the median plain wall less the interpreter's
start-up and finalization (which no session sees; ``--loads`` names what the program loads, whose
teardown is part of it), as a percentage error. The program must do the same work in
every run (a fixed number of steps, not a time limit).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the training time a program prints ("8192 steps in 10.8 s"): its own loop, without the start-up
# (imports, CUDA's initialization) that every run pays alike
TRAIN_TIME = re.compile(r"steps in ([0-9.]+) ?s")


def _run(cmd: list[str]) -> tuple[float, float | None]:
    """The process's wall, and the training time it printed (None: none printed)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"run_slowdown: {' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    found = TRAIN_TIME.findall(done.stdout)
    return wall, float(found[-1]) if found else None


def _wall(cmd: list[str]) -> float:
    return _run(cmd)[0]


def _outside_s(python: str, loads: str) -> float:
    """What a plain process spends outside the span a session sees (median of 5): the interpreter's
    start before ``sitecustomize`` and its finalization after ``atexit``, with ``loads`` (the
    program's imports, e.g. ``import torch``) done in between, so that the teardown of what they
    loaded is counted; the time ``loads`` itself takes is inside the session and not counted."""
    code = "import sys, time; t = time.perf_counter(); exec(sys.argv[1]); print(time.perf_counter() - t)"

    def once() -> float:
        t0 = time.perf_counter()
        done = subprocess.run([python, "-c", code, loads], capture_output=True, text=True, check=True)
        return time.perf_counter() - t0 - float(done.stdout.split()[-1])

    return statistics.median(once() for _ in range(5))


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--detail", default=None, help="rlscope run --detail SPEC (default: rlscope's)")
    p.add_argument("--json", default=None)
    p.add_argument(
        "--loads",
        default="pass",
        help="Python code that loads what the program loads (e.g. 'import torch'): the plain process's"
        " start-up and finalization with it loaded are outside the session (default: none)",
    )
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
    train: dict[str, list[float]] = {"plain": [], "rlscope": []}
    traces: list[Path] = []
    for rep in range(args.reps):
        trace = work / f"rep-{rep}"
        for variant in ("plain", "rlscope") if rep % 2 == 0 else ("rlscope", "plain"):
            wall, trained = _run(command if variant == "plain" else profiled(trace))
            (plain if variant == "plain" else prof).append(wall)
            if variant == "rlscope":
                traces.append(trace)
            if trained is not None:
                train[variant].append(trained)
            said = f", training {trained:.2f} s" if trained is not None else ""
            say(f"repetition {rep + 1}/{args.reps} {variant}: {wall:.2f} s{said}")
    startup = _outside_s(command[0], args.loads) if command[0].startswith("python") else 0.0
    truth = statistics.median(plain) - startup
    corrected, analyze_s = [], []
    for trace in traces:
        out = trace.with_suffix(".json")
        t0 = time.perf_counter()
        subprocess.run(["rlscope-analyze", str(trace), "--json", str(out), "-q"], check=True)
        analyze_s.append(time.perf_counter() - t0)
        corrected.append(float(json.loads(out.read_text())["wall_s"]))
    ratios = [b / a for a, b in zip(plain, prof, strict=True)]
    trained = len(train["plain"]) == len(train["rlscope"]) == args.reps
    train_ratios = [b / a for a, b in zip(train["plain"], train["rlscope"], strict=True)] if trained else []
    errors = [100 * (c - truth) / truth for c in corrected]
    result = {
        "command": command,
        "detail": args.detail,
        "reps": args.reps,
        "plain_s": plain,
        "rlscope_s": prof,
        "slowdown_median": statistics.median(ratios),
        "slowdown_spread": [min(ratios), max(ratios)],
        "train_plain_s": train["plain"],
        "train_rlscope_s": train["rlscope"],
        "train_slowdown_median": statistics.median(train_ratios) if train_ratios else None,
        "train_slowdown_spread": [min(train_ratios), max(train_ratios)] if train_ratios else None,
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
    if train_ratios:
        print(
            f"the program's own training time: slowdown {statistics.median(train_ratios):.3f}x"
            f" ({_spread(train_ratios)})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
