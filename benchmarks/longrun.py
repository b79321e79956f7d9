"""Long runs: the trace's size, and the analysis's time, memory and accuracy, by the run's length.

    python benchmarks/longrun.py [--lengths 10m,30m,2h,8h] [--workers 8] [--keep DIR] [--json FILE]

For each length, a learner and ``workers`` env workers under the default detail schedule
(benchmarks/longrun_trace.py, through the trace writer's own path), then ``rlscope-analyze TRACE
--json`` in a process of its own: its wall seconds and peak RSS (``wait4``'s ``ru_maxrss``, that
process alone). Reported: the trace's MB (and per hour per process), the analysis's seconds and
peak RSS, the peak's growth from the shortest run (a bounded trace should be analyzed in bounded
memory) and the seconds per hour of run. Checked: each operation's whole-run exclusive seconds,
raw and corrected, summed over the processes and per process, against the time the generator
made, within ``TOLERANCE_PCT`` (accuracy, so asserted: the script exits 1 beyond it, after writing
its JSON); times and memory are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlscope.analysis.roles import over_processes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from longrun_trace import make_trace

TOLERANCE_PCT = 1.0
LENGTHS = "10m,30m,2h,8h"


def hours_of(label: str) -> float:
    """``10m`` / ``2h`` as hours."""
    unit = {"m": 1 / 60, "h": 1.0}[label[-1]]
    return float(label[:-1]) * unit


def measured(cmd: list[str]) -> tuple[int, float, float]:
    """(exit status, wall seconds, peak RSS MB) of ``cmd`` run alone in its own process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, wall, usage.ru_maxrss / 1024


def errors_pct(summary: dict[str, Any], truth: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The analysis's whole-run exclusive seconds against the truth, in % of the truth: per figure set
    (``raw`` against the time as recorded, ``corrected`` against it less the recorder's cost), per
    operation summed over the processes (``<op>``) and per process (``<op> pid N``)."""
    out: dict[str, dict[str, float]] = {}
    for level, made in (("raw", "exclusive"), ("corrected", "work")):
        figures = summary.get(level) or summary["raw"]
        summed = over_processes(figures)["operations"]  # the headline is the learner's alone
        errs = out[level] = {}
        for op, t in truth["operations"].items():
            got = summed.get(op, {}).get("exclusive_s", 0.0)
            errs[op] = 100 * (got / t[f"{made}_s"] - 1)
        procs = {p["pid"]: p for p in figures["processes"]}
        for p in truth["processes"]:
            for op, ns in p[f"{made}_ns"].items():
                got = procs.get(p["pid"], {}).get("operations", {}).get(op, {}).get("exclusive_s", 0.0)
                errs[f"{op} pid {p['pid']}"] = 100 * (got / (ns / 1e9) - 1)
    return out


def calls_off(summary: dict[str, Any], truth: dict[str, Any]) -> dict[str, int]:
    """Per operation, the analysis's whole-run calls less the truth's (0: every call counted)."""
    summed = over_processes(summary)["operations"]
    return {op: summed.get(op, {}).get("calls", 0) - t["calls"] for op, t in truth["operations"].items()}


def one_length(label: str, workers: int, work: Path, jobs: int | None) -> dict[str, Any]:
    """Make the run's trace, analyze it, measure and check."""
    trace = work / f"trace-{label}"
    hours = hours_of(label)
    truth = make_trace(trace, hours, workers, jobs=jobs)
    sizes: dict[str, int] = {}
    for f in trace.glob("process-*/*"):
        sizes[f.name] = sizes.get(f.name, 0) + f.stat().st_size
    total = sum(f.stat().st_size for f in trace.rglob("*") if f.is_file())
    out = work / f"summary-{label}.json"
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", str(trace), "-q", "--json", str(out)]
    status, wall, rss = measured(cmd)
    if status != 0:
        raise SystemExit(f"longrun: rlscope-analyze failed on the {label} trace (exit {status})")
    summary = json.loads(out.read_text())
    errors = errors_pct(summary, truth)
    processes = workers + 1
    return {
        "label": label,
        "hours": hours,
        "processes": processes,
        "make_s": truth["make_s"],
        "rows_made": truth["rows_made"],
        "rows_kept": truth["rows_kept"],
        "trace_mb": total / 1e6,
        "files_mb": {k: v / 1e6 for k, v in sorted(sizes.items())},
        "mb_per_hour_process": total / 1e6 / hours / processes,
        "analyze_s": wall,
        "peak_rss_mb": rss,
        "errors_pct": errors,
        "max_error_pct": max((v for e in errors.values() for v in e.values()), key=abs),
        "calls_off": calls_off(summary, truth),
        "detail_s": (summary.get("detail") or {}).get("detail_s"),
        "warnings": summary.get("warnings", []),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default=LENGTHS, help=f"runs to make, e.g. 10m,2h (default {LENGTHS})")
    p.add_argument("--workers", type=int, default=8, help="env-worker processes (default 8)")
    p.add_argument("--jobs", type=int, default=None, help="processes the generator writes at once")
    p.add_argument("--keep", type=Path, default=None, help="keep the traces and summaries here")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="rlscope-longrun-"))
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    try:
        for label in args.lengths.split(","):
            r = one_length(label, args.workers, work, args.jobs)
            runs.append(r)
            print(
                f"{label:>4}: trace {r['trace_mb']:6.1f} MB ({r['mb_per_hour_process']:.2f} MB/h/process),"
                f" made in {r['make_s']:.0f} s; analyze {r['analyze_s']:5.1f} s, peak RSS"
                f" {r['peak_rss_mb']:5.0f} MB; worst error {r['max_error_pct']:+.3f}%; calls off"
                f" {r['calls_off']}",
                flush=True,
            )
            if args.keep is None:
                shutil.rmtree(work / f"trace-{label}", ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    first, last = runs[0], runs[-1]
    result = {
        "workers": args.workers,
        "runs": runs,
        # flat memory: the longest run's peak over the shortest's (1.0: the trace's length costs nothing)
        "rss_growth_x": last["peak_rss_mb"] / first["peak_rss_mb"],
        # linear time: seconds of analysis per hour of run, the longest run's and the shortest's
        "analyze_s_per_hour": {r["label"]: r["analyze_s"] / r["hours"] for r in (first, last)},
        "tolerance_pct": TOLERANCE_PCT,
    }
    print(
        f"peak RSS {last['label']} / {first['label']}: {result['rss_growth_x']:.2f}x; analysis s per hour of"
        f" run: {', '.join(f'{k} {v:.1f}' for k, v in result['analyze_s_per_hour'].items())}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    wrong = [
        f"{r['label']}: {level} {k} {v:+.3f}%"
        for r in runs
        for level, errs in r["errors_pct"].items()
        for k, v in errs.items()
        if abs(v) > TOLERANCE_PCT
    ]
    wrong += [f"{r['label']}: {op} calls {d:+d}" for r in runs for op, d in r["calls_off"].items() if d]
    if wrong:
        print(f"longrun: beyond ±{TOLERANCE_PCT}% of the truth: " + "; ".join(wrong[:10]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
