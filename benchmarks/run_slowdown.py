"""`rlscope run`'s slowdown on a whole program, and its corrected wall against the unprofiled one.

    python benchmarks/run_slowdown.py [--reps 5] [--detail SPEC] [--json F] [--time-limit S]
                                      [--variant NAME='OPTIONS' ...] -- CMD...

Variants of the same command, each run in its own process, interleaved (the order rotating per
repetition) after one untimed run of each (native builds, caches, CUDA's first start-up):

- ``plain``: the program as it is;
- ``rlscope``: ``rlscope run --no-analyze [--detail SPEC]`` around it (the analysis is timed apart,
  after each repetition);
- or, with ``--variant``, one profiled variant per option, each with its own ``rlscope run``
  options (``--variant gpu_off='--gpu off' --variant default=''``): an ablation whose variants meet
  the same minutes of a host's drift, each compared with the same plain runs. The result's top-level
  figures are the first variant's; ``variants`` holds every one's.

The slowdown is the ratio of the two processes' walls (median over repetitions, with their
spread), and of the training times the program prints (``N steps in T s``) where it prints one:
its own loop, without the start-up (imports, CUDA's initialization) that a short run is mostly made
of and a long one is not. The correction is checked against the plain runs: each profiled trace's
corrected wall (``rlscope-analyze --json``) against its pair's plain span, as a percentage error
(median over pairs: the pairs are adjacent in time, so a host whose speed drifts over minutes moves
both alike), and its raw wall the same way: a raw span shorter than the plain one says the two spans
differ in more than rlscope's cost. A Python program's plain span is timed where a session's is: from its
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
import shlex
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


def _variants(given: list[str], parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """``NAME=OPTIONS`` pairs as each variant's ``rlscope run`` options; none given: ``rlscope``."""
    if not given:
        return {"rlscope": []}
    out: dict[str, list[str]] = {}
    for text in given:
        name, sep, options = text.partition("=")
        if not sep or not name or name == "plain" or name in out:
            parser.error(f"--variant {text!r}: give NAME=OPTIONS, each NAME once and not 'plain'")
        out[name] = shlex.split(options)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--detail", default=None, help="rlscope run --detail SPEC (default: rlscope's)")
    p.add_argument("--json", default=None, help="the result, written again after every repetition")
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no repetition that would end past this many seconds of the benchmark (by the longest"
        " so far); the repetitions done are the result",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=OPTIONS",
        help="a profiled variant with these rlscope run options (repeatable; default: one, 'rlscope')",
    )
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the program to run after --")
    variants = _variants(args.variant, p)
    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rlscope-slowdown-"))
    detail = ["--detail", args.detail] if args.detail else []

    def profiled(options: list[str], trace: Path) -> list[str]:
        return [
            "rlscope",
            "run",
            "--no-analyze",
            *detail,
            *options,
            "--trace-dir",
            str(trace),
            "--",
            *command,
        ]

    def say(text: str) -> None:
        print(f"run_slowdown: {text}", file=sys.stderr, flush=True)

    probe = _probe_env(work)
    warm = [_plain_span(command, probe)[0]] + [
        _run(profiled(o, work / f"warm-{n}"))[0] for n, o in variants.items()
    ]
    say(
        "untimed runs: "
        + ", ".join(f"{n} {w:.1f} s" for n, w in zip(["plain", *variants], warm, strict=True))
    )
    runs = Runs(args.reps, list(variants))
    longest = 0.0
    names = ["plain", *variants]
    for rep in range(args.reps):
        if args.time_limit and rep and time.perf_counter() - t_start + longest > args.time_limit:
            say(f"stopping after {rep} of {args.reps} repetitions: --time-limit {args.time_limit:g} s")
            break
        t_rep = time.perf_counter()
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            if name == "plain":
                wall, trained, span = _plain_span(command, probe)
                runs.spans.append(span)
            else:
                wall, trained = _run(profiled(variants[name], work / f"rep-{rep}-{name}"))
            runs.add(name, wall, trained)
            said = f", training {trained:.2f} s" if trained is not None else ""
            say(f"repetition {rep + 1}/{args.reps} {name}: {wall:.2f} s{said}")
        for name in variants:  # between repetitions, untimed: a cut run keeps the corrected walls it has
            v = runs.variants[name]
            v.analyze(work / f"rep-{rep}-{name}")
            say(
                f"repetition {rep + 1}/{args.reps} {name}: plain span {runs.spans[-1]:.2f} s, profiled raw"
                f" {v.raw[-1]:.2f} s, corrected {v.corrected[-1]:.2f} s ({runs.errors(name)[-1]:+.1f}%)"
            )
        longest = max(longest, time.perf_counter() - t_rep)
        if args.json:
            Path(args.json).write_text(json.dumps(runs.result(command, args.detail), indent=1))
    result = runs.result(command, args.detail)
    for name, r in result["variants"].items():
        v = runs.variants[name]
        print(
            f"plain {statistics.median(runs.plain):.2f} s ({_spread(runs.plain)}), {name}"
            f" {statistics.median(v.walls):.2f} s ({_spread(v.walls)}): slowdown"
            f" {r['slowdown_median']:.3f}x ({_spread(runs.ratios(name))}); corrected wall error"
            f" {r['corrected_error_pct_median']:+.1f}% ({_spread(runs.errors(name))}), raw"
            f" {r['raw_error_pct_median']:+.1f}% ({_spread(runs.errors(name, 'raw'))}); analysis"
            f" {statistics.median(v.analyze_s):.1f} s"
        )
        if r["train_slowdown_median"] is not None:
            print(
                f"{name}: the program's own training time: slowdown {r['train_slowdown_median']:.3f}x"
                f" ({_spread(runs.train_ratios(name))})"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


class Variant:
    """One profiled variant's runs: walls, printed training times, each trace's raw and corrected
    wall and how long its analysis took."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.train: list[float] = []
        self.raw: list[float] = []
        self.corrected: list[float] = []
        self.analyze_s: list[float] = []

    def analyze(self, trace: Path) -> None:
        """The trace's corrected wall (``rlscope-analyze --json``) and how long the analysis took."""
        out = trace.with_suffix(".json")
        t0 = time.perf_counter()
        subprocess.run(["rlscope-analyze", str(trace), "--json", str(out), "-q"], check=True)
        self.analyze_s.append(time.perf_counter() - t0)
        summary = json.loads(out.read_text())
        self.corrected.append(float(summary["wall_s"]))
        self.raw.append(float(summary["overhead"]["raw_wall_s"]))


class Runs:
    """The repetitions measured so far: the plain runs' walls, spans and printed training times, and
    each profiled variant's (:class:`Variant`); ``result`` at any point (``complete``: every
    repetition asked for)."""

    def __init__(self, reps: int, variants: list[str]) -> None:
        self.reps = reps
        self.spans: list[float] = []
        self.plain: list[float] = []
        self.train_plain: list[float] = []
        self.variants = {name: Variant() for name in variants}

    def add(self, name: str, wall: float, trained: float | None) -> None:
        if name == "plain":
            self.plain.append(wall)
            if trained is not None:
                self.train_plain.append(trained)
            return
        v = self.variants[name]
        v.walls.append(wall)
        if trained is not None:
            v.train.append(trained)

    def _done(self, name: str) -> int:
        """Repetitions complete for ``name``: its run, its analysis and the plain run of the same one."""
        v = self.variants[name]
        return min(len(self.plain), len(v.walls), len(v.corrected))

    def ratios(self, name: str) -> list[float]:
        n = self._done(name)
        return [b / a for a, b in zip(self.plain[:n], self.variants[name].walls[:n], strict=True)]

    def train_ratios(self, name: str) -> list[float]:
        """Training time over the plain run's, per repetition; none unless every run printed one."""
        v, n = self.variants[name], self._done(name)
        if len(self.train_plain) != len(self.plain) or len(v.train) != len(v.walls):
            return []
        return [b / a for a, b in zip(self.train_plain[:n], v.train[:n], strict=True)]

    def errors(self, name: str, walls: str = "corrected") -> list[float]:
        """Each corrected wall (``walls="raw"``: each raw one) against its repetition's plain span, in %.

        The raw one says what the spans hold before any correction: a session's raw span is its
        program's time and rlscope's cost, so one shorter than the plain span means the two spans
        differ in more than the cost (start-up moved out of the session, the host), and the
        corrected error of that pair is not the correction's alone."""
        n = self._done(name)
        v = self.variants[name]
        got = v.corrected if walls == "corrected" else v.raw
        return [100 * (c - s) / s for c, s in zip(got[:n], self.spans[:n], strict=True)]

    def _figures(self, name: str) -> dict[str, Any]:
        v, n = self.variants[name], self._done(name)
        ratios, train, errors = self.ratios(name), self.train_ratios(name), self.errors(name)
        raw_errors = self.errors(name, "raw")
        return {
            "rlscope_s": v.walls[:n],
            "slowdown_median": statistics.median(ratios),
            "slowdown_spread": [min(ratios), max(ratios)],
            "train_rlscope_s": v.train[:n],
            "train_slowdown_median": statistics.median(train) if train else None,
            "train_slowdown_spread": [min(train), max(train)] if train else None,
            "raw_wall_s": v.raw[:n],
            "corrected_wall_s": v.corrected[:n],
            "corrected_error_pct_median": statistics.median(errors),
            "corrected_error_pct_spread": [min(errors), max(errors)],
            "raw_error_pct_median": statistics.median(raw_errors),
            "raw_error_pct_spread": [min(raw_errors), max(raw_errors)],
            "analyze_s": v.analyze_s[:n],
        }

    def result(self, command: list[str], detail: str | None) -> dict[str, Any]:
        first = next(iter(self.variants))
        n = self._done(first)
        figures = {name: self._figures(name) for name in self.variants}
        return {
            "command": command,
            "detail": detail,
            "reps": self.reps,
            "pairs": n,
            "complete": n == self.reps,
            "plain_s": self.plain[:n],
            "train_plain_s": self.train_plain[:n],
            "plain_span_s": self.spans[:n],
            **figures[first],
            "variants": figures,
        }


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
