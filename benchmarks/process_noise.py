"""How far apart unprofiled runs of one program are, free to move between cores or pinned to a few.

    python benchmarks/process_noise.py --cpus 2-5 -- python benchmarks/validation_workloads.py ppo_gpu

`rlscope validate` compares separate processes, so the spread between runs of the *same* program
bounds what it can resolve (BENCHMARKS.md §9: ±9-22% on the devices against a ±5% target). This
runs the program unprofiled (``RLSCOPE_MODE=off``, timed from ``rlscope.profile`` start to stop,
as validate times it) ``--runs`` times per placement, the placements interleaved, and prints each
placement's runs, half-range / median (validate's noise floor) and coefficient of variation.

``--rotate W`` or ``W/MS`` (repeatable) adds a placement that moves each run through every core, W
at a time, a hop every MS (default 50) milliseconds (benchmarks/rotate.py): whether averaging over
the cores' slow turns narrows the spread.

``--busy CPUS`` adds, for each pinned placement, the same placement with a neighbour process
spinning on CPUS (other cores) throughout the run: whether other busy cores slow the program
(shared turbo budget, memory bandwidth, a hypervisor's scheduling), which a profiled run's own
extra threads would do to the job the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import rotate

from rlscope.overhead.validate import runner as validate_runner
from rlscope.overhead.validate.cli import _parse_cpus
from rlscope.overhead.validate.options import Options
from rlscope.overhead.validate.runner import _Runner
from rlscope.overhead.validate.verdict import noise_floor


def _spin(cpus: frozenset[int]) -> subprocess.Popen:
    """One process spinning a pure-Python loop on each of ``cpus`` (killed by the caller)."""
    code = "import os, multiprocessing as m\n"
    code += "def s(c):\n    os.sched_setaffinity(0, {c})\n    while True: pass\n"
    code += f"ps = [m.Process(target=s, args=(c,)) for c in {sorted(cpus)!r}]\n"
    code += "[p.start() for p in ps]\n[p.join() for p in ps]\n"
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def run_rotated(runner: _Runner, rep: int, spec: str) -> Any:
    """One unprofiled run moved through every core (``spec``: W or W/MS): the child is started on
    the first window and a :class:`rotate.Rotation` moves it until it ends."""
    w, _, ms = spec.partition("/")
    cycle = rotate.windows(sorted(os.sched_getaffinity(0)), int(w), seed=rep)
    movers = []
    plain = validate_runner._start

    def start(command: list[str], env: dict[str, str], verbose: bool) -> subprocess.Popen:
        with validate_runner._pinned(cycle[0]):
            proc = plain(command, env, verbose)
        movers.append(rotate.Rotation(proc.pid, cycle, float(ms or 50) / 1000).start())
        return proc

    validate_runner._start = start
    try:
        return runner.run("unprofiled", rep)
    finally:
        validate_runner._start = plain
        for m in movers:
            m.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=6, help="runs per placement")
    p.add_argument("--cpus", action="append", default=[], help="a placement: CPUs to pin to (repeatable)")
    p.add_argument("--rotate", action="append", default=[], help="a placement: W CPUs moved (W/MS: hop MS)")
    p.add_argument("--busy", default=None, help="CPUs a neighbour spins on, beside each pinned placement")
    p.add_argument("--json", default=None)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command")
    placements: dict[str, Any] = {"any core": None, **{f"cpus {c}": _parse_cpus(c) for c in args.cpus}}
    placements.update({f"rotate {w}": w for w in args.rotate})  # W or W/MS
    busy = _parse_cpus(args.busy) if args.busy else None
    if busy:
        placements.update({f"cpus {c} + busy {args.busy}": _parse_cpus(c) for c in args.cpus})
    times: dict[str, list[float]] = {k: [] for k in placements}
    with tempfile.TemporaryDirectory(prefix="rlscope-noise-") as tmp:
        for rep in range(args.runs):
            names = list(placements)
            names = names[rep % len(names) :] + names[: rep % len(names)]  # rotate: no placement always first
            for name in names:
                work = Path(tmp) / f"{name.replace(' ', '_').replace('/', '-')}-{rep}"
                work.mkdir()
                where = placements[name]
                moved = isinstance(where, str)
                runner = _Runner(Options(command, cpus=None if moved else where), work, lambda _m: None)
                spinner = _spin(busy) if busy and "+ busy" in name else None
                try:
                    run = run_rotated(runner, rep, where) if moved else runner.run("unprofiled", rep)
                finally:
                    if spinner is not None:  # its spinning children too: they share its session
                        os.killpg(spinner.pid, signal.SIGKILL)
                        spinner.wait()
                times[name].append(run.measured_s or 0.0)
                print(f"run {rep + 1}: {name:14} {times[name][-1]:.3f} s", flush=True)
    out = {}
    for name, ts in times.items():
        cv = statistics.stdev(ts) / statistics.mean(ts) if len(ts) > 1 else 0.0
        out[name] = {"runs_s": ts, "median_s": statistics.median(ts), "half_range": noise_floor(ts), "cv": cv}
        print(
            f"{name:14} median {out[name]['median_s']:.3f} s  [{min(ts):.3f}-{max(ts):.3f}]"
            f"  half-range {100 * out[name]['half_range']:.1f}%  cv {100 * cv:.1f}%"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "placements": out}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
