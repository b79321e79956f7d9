"""The benchmark runner: one command per suite, and a checker against the committed baseline.

    python -m benchmarks run --suite ci|cpu|gpu [--out results.json] [--only STEP,...] [--machine M]
    python -m benchmarks check results.json [--baseline benchmarks/baseline.json] [--machine M]
    python -m benchmarks list

``run`` executes the suite's steps (benchmarks/suites.py) one after the other, writing the results
file after every step, so a run cut by a time limit keeps what it measured; it prints each step's
figures and, where the baseline has this machine, the comparison. Its exit status is 0 unless a step
raised an error (a skipped step is not one). ``check`` compares a results file with the baseline
(benchmarks/compare.py) and exits 1 when a figure FAILED.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import compare, suites


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=suites.ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def run_suite(suite: str, out: Path, only: list[str] | None, machine: str, keep: Path | None) -> int:
    """Run the steps, write ``out`` after each; 1 when a step raised an error."""
    steps = [s for s in suites.SUITES[suite] if not only or s in only]
    results: dict[str, Any] = {
        "suite": suite,
        "machine": machine,
        "commit": _commit(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "figures": {},
        "steps": {},
    }
    failed = False
    out.write_text(json.dumps(results, indent=1) + "\n")  # there from the start, even if stopped early
    with tempfile.TemporaryDirectory(prefix="rlscope-bench-") as tmp:
        work = keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ctx = suites.Context(suite=suite, machine=machine, work=work, log=lambda m: print(m, flush=True))
        for name in steps:
            print(f"== {name}", flush=True)
            t0 = time.perf_counter()
            try:
                figures = suites.STEPS[name](ctx)
                status, note = "ok", ""
            except suites.Skip as e:
                figures, status, note = {}, "skipped", str(e)
            except Exception as e:  # one step's failure is recorded; the suite goes on
                figures, status, note = {}, "error", f"{type(e).__name__}: {e}"
                failed = True
            seconds = round(time.perf_counter() - t0, 1)
            results["steps"][name] = {"status": status, "seconds": seconds, "note": note}
            results["figures"].update(figures)
            for fname, f in figures.items():
                print(f"   {fname:<44} {f['value']!s:>12} {f['unit']}", flush=True)
            print(f"   {status} in {seconds:.0f} s{': ' + note if note else ''}", flush=True)
            out.write_text(json.dumps(results, indent=1) + "\n")
    baseline = compare.load(compare.BASELINE)
    if machine in baseline.get("machines", {}):
        print(compare.render(compare.compare(results, baseline, machine)))
    else:
        print(f"no baseline for machine {machine!r}: nothing compared")
    print(f"results: {out}")
    return 1 if failed else 0


def _on_sigterm(signum: int, frame: object) -> None:
    """A time limit's SIGTERM stops the running step (and its process group) like Ctrl-C."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a suite")
    r.add_argument("--suite", required=True, choices=sorted(suites.SUITES))
    r.add_argument(
        "--out", type=Path, default=Path("results.json"), help="results file (default results.json)"
    )
    r.add_argument("--only", default=None, metavar="STEP,...", help="run only these steps of the suite")
    r.add_argument(
        "--machine", default=None, help="baseline key (default: h100 / h200 by the GPU, else cpu-vm)"
    )
    r.add_argument(
        "--keep", type=Path, default=None, metavar="DIR", help="keep the steps' files (logs, JSON) here"
    )
    c = sub.add_parser("check", help="compare a results file with the baseline")
    c.add_argument("results", type=Path)
    c.add_argument("--baseline", type=Path, default=compare.BASELINE)
    c.add_argument("--machine", default=None, help="baseline key (default: the results file's)")
    sub.add_parser("list", help="the suites and their steps")
    args = p.parse_args(argv)
    if args.command == "list":
        for suite, steps in suites.SUITES.items():
            print(f"{suite}: {', '.join(steps)}")
        return 0
    if args.command == "run":
        only = args.only.split(",") if args.only else None
        unknown = sorted(set(only or []) - set(suites.SUITES[args.suite]))
        if unknown:
            p.error(f"--only: not steps of the {args.suite} suite: {', '.join(unknown)}")
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return run_suite(args.suite, args.out, only, args.machine or suites.detect_machine(), args.keep)
        except KeyboardInterrupt:
            print(f"benchmarks: stopped; the steps done so far are in {args.out}", file=sys.stderr)
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous)
    try:
        verdicts = compare.compare(compare.load(args.results), compare.load(args.baseline), args.machine)
    except (KeyError, ValueError) as e:
        print(f"benchmarks: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    print(compare.render(verdicts))
    return 1 if any(v.status == compare.FAILED for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
