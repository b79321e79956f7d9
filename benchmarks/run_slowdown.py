"""`rlscope run`'s slowdown on a whole program, and its corrected wall against the unprofiled one.

    python benchmarks/run_slowdown.py [--reps 5] [--detail SPEC] [--json F] [--time-limit S] -- CMD...

Two variants of the same command, each run in its own process, interleaved (the order alternating
per repetition) after one untimed run of each (native builds, caches, CUDA's first start-up):

- ``plain``: the program as it is;
- ``rlscope``: ``rlscope run --no-analyze [--detail SPEC]`` around it (the analysis is timed apart,
  after each pair).

The slowdown is the ratio of the two processes' walls (median over repetitions, with their
spread), and of the training times the program prints (``N steps in T s``) where it prints one:
its own loop, without the start-up (imports, CUDA's initialization) that a short run is mostly made
of and a long one is not. The correction is checked against the plain runs: each profiled trace's
corrected wall (``rlscope-analyze --json``) against its pair's plain span, as a percentage error
(median over pairs: the pairs are adjacent in time, so a host whose speed drifts over minutes moves
both alike). A Python program's plain span is timed where a session's is: from its
``sitecustomize`` to its last ``atexit`` call (a probe on the plain run's PYTHONPATH that does
nothing else), so that the interpreter's start-up and finalization, and whatever the program does
after ``atexit`` (CUDA's teardown), are outside both; another program's span is its process wall.
The program must do the same work in every run (a fixed number of steps, not a time limit).
``--json`` is written after every pair and ``--time-limit`` starts no pair that would not end in
time, so a benchmark cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
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


# the plain run's span probe: the span a session would see (its sitecustomize to its last atexit
# call; atexit calls run last-registered first, and this one registers as early as a session does),
# written where RLSCOPE_SLOWDOWN_SPAN says; the variable is dropped so that the program's own child
# processes do not write it too
PROBE = """import atexit, os, time
_t0 = time.perf_counter()
_out = os.environ.pop("RLSCOPE_SLOWDOWN_SPAN", None)


def _span():
    with open(_out, "w") as f:
        f.write(repr(time.perf_counter() - _t0))


if _out:
    atexit.register(_span)
"""


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float | None]:
    """The process's wall, and the training time it printed (None: none printed)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"run_slowdown: {' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    found = TRAIN_TIME.findall(done.stdout)
    return wall, float(found[-1]) if found else None


def _probe_env(work: Path) -> tuple[dict[str, str], Path]:
    """The plain runs' environment with the span probe first on PYTHONPATH, and where it writes."""
    probe = work / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(PROBE)
    out = work / "span"
    path = os.pathsep.join(p for p in (str(probe), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "RLSCOPE_SLOWDOWN_SPAN": str(out)}, out


def _plain_span(cmd: list[str], probe: tuple[dict[str, str], Path]) -> tuple[float, float | None, float]:
    """A plain run: its wall, its printed training time, and its span as a session would see it (the
    wall where the program is not Python); ``probe`` from :func:`_probe_env`."""
    if not Path(cmd[0]).name.startswith("python"):
        wall, trained = _run(cmd)
        return wall, trained, wall
    env, out = probe
    out.unlink(missing_ok=True)
    wall, trained = _run(cmd, env)
    if not out.is_file():
        raise SystemExit(f"run_slowdown: {' '.join(cmd)} left no span: it ran without sitecustomize?")
    return wall, trained, float(out.read_text())


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--detail", default=None, help="rlscope run --detail SPEC (default: rlscope's)")
    p.add_argument("--json", default=None, help="the result, written again after every pair")
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no pair that would end past this many seconds of the benchmark (by the longest pair"
        " so far); the pairs done are the result",
    )
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the program to run after --")
    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rlscope-slowdown-"))
    detail = ["--detail", args.detail] if args.detail else []

    def profiled(trace: Path) -> list[str]:
        return ["rlscope", "run", "--no-analyze", *detail, "--trace-dir", str(trace), "--", *command]

    def say(text: str) -> None:
        print(f"run_slowdown: {text}", file=sys.stderr, flush=True)

    probe = _probe_env(work)
    warm = _plain_span(command, probe)[0], _run(profiled(work / "warm"))[0]
    say(f"untimed runs: plain {warm[0]:.1f} s, rlscope {warm[1]:.1f} s")
    runs = Runs(args.reps)
    longest = 0.0
    for rep in range(args.reps):
        if args.time_limit and rep and time.perf_counter() - t_start + longest > args.time_limit:
            say(f"stopping after {rep} of {args.reps} pairs: --time-limit {args.time_limit:g} s")
            break
        t_pair = time.perf_counter()
        trace = work / f"rep-{rep}"
        for variant in ("plain", "rlscope") if rep % 2 == 0 else ("rlscope", "plain"):
            if variant == "plain":
                wall, trained, span = _plain_span(command, probe)
                runs.spans.append(span)
            else:
                wall, trained = _run(profiled(trace))
            runs.add(variant, wall, trained)
            said = f", training {trained:.2f} s" if trained is not None else ""
            say(f"repetition {rep + 1}/{args.reps} {variant}: {wall:.2f} s{said}")
        runs.analyze(trace)  # between pairs, untimed: a cut run keeps the corrected walls it has
        say(
            f"repetition {rep + 1}/{args.reps}: plain span {runs.spans[-1]:.2f} s, profiled raw"
            f" {runs.raw[-1]:.2f} s, corrected {runs.corrected[-1]:.2f} s ({runs.errors()[-1]:+.1f}%)"
        )
        longest = max(longest, time.perf_counter() - t_pair)
        if args.json:
            Path(args.json).write_text(json.dumps(runs.result(command, args.detail), indent=1))
    result = runs.result(command, args.detail)
    print(
        f"plain {statistics.median(runs.plain):.2f} s ({_spread(runs.plain)}), rlscope run"
        f" {statistics.median(runs.prof):.2f} s ({_spread(runs.prof)}): slowdown"
        f" {result['slowdown_median']:.3f}x ({_spread(runs.ratios())}); corrected wall error"
        f" {result['corrected_error_pct_median']:+.1f}% ({_spread(runs.errors())}); analysis"
        f" {statistics.median(runs.analyze_s):.1f} s"
    )
    if result["train_slowdown_median"] is not None:
        print(
            f"the program's own training time: slowdown {result['train_slowdown_median']:.3f}x"
            f" ({_spread(runs.train_ratios())})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


class Runs:
    """The pairs measured so far: walls, the plain runs' spans, the training times the program printed,
    each profiled trace's raw and corrected wall and analysis time; ``result`` at any point
    (``complete``: every pair asked for)."""

    def __init__(self, reps: int) -> None:
        self.reps = reps
        self.spans: list[float] = []
        self.raw: list[float] = []
        self.plain: list[float] = []
        self.prof: list[float] = []
        self.train: dict[str, list[float]] = {"plain": [], "rlscope": []}
        self.corrected: list[float] = []
        self.analyze_s: list[float] = []

    def add(self, variant: str, wall: float, trained: float | None) -> None:
        (self.plain if variant == "plain" else self.prof).append(wall)
        if trained is not None:
            self.train[variant].append(trained)

    def analyze(self, trace: Path) -> None:
        """The trace's corrected wall (``rlscope-analyze --json``) and how long the analysis took."""
        out = trace.with_suffix(".json")
        t0 = time.perf_counter()
        subprocess.run(["rlscope-analyze", str(trace), "--json", str(out), "-q"], check=True)
        self.analyze_s.append(time.perf_counter() - t0)
        summary = json.loads(out.read_text())
        self.corrected.append(float(summary["wall_s"]))
        self.raw.append(float(summary["overhead"]["raw_wall_s"]))

    def ratios(self) -> list[float]:
        return [b / a for a, b in zip(self.plain, self.prof, strict=True)]

    def train_ratios(self) -> list[float]:
        t = self.train
        if not len(t["plain"]) == len(t["rlscope"]) == len(self.plain):
            return []
        return [b / a for a, b in zip(t["plain"], t["rlscope"], strict=True)]

    def errors(self) -> list[float]:
        """Each corrected wall against its pair's plain span, in %."""
        return [100 * (c - s) / s for c, s in zip(self.corrected, self.spans, strict=True)]

    def result(self, command: list[str], detail: str | None) -> dict[str, Any]:
        ratios, train, errors = self.ratios(), self.train_ratios(), self.errors()
        return {
            "command": command,
            "detail": detail,
            "reps": self.reps,
            "pairs": len(ratios),
            "complete": len(ratios) == self.reps,
            "plain_s": self.plain,
            "rlscope_s": self.prof,
            "slowdown_median": statistics.median(ratios),
            "slowdown_spread": [min(ratios), max(ratios)],
            "train_plain_s": self.train["plain"],
            "train_rlscope_s": self.train["rlscope"],
            "train_slowdown_median": statistics.median(train) if train else None,
            "train_slowdown_spread": [min(train), max(train)] if train else None,
            "plain_span_s": self.spans,
            "raw_wall_s": self.raw,
            "corrected_wall_s": self.corrected,
            "corrected_error_pct_median": statistics.median(errors),
            "corrected_error_pct_spread": [min(errors), max(errors)],
            "analyze_s": self.analyze_s,
        }


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
