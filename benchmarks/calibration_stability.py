"""Does ``rlscope calibrate`` give the same costs every time, under load?

    python benchmarks/calibration_stability.py [--runs 5] [--full] [--no-load] [--json FILE]

Runs ``rlscope calibrate --quick`` (``--full``: without --quick) ``--runs`` times, each writing its
own file, while another process keeps one core busy (a Python busy loop), the way an ordinary
desktop or a shared VM is loaded. Prints, per cost, the value of every run (``total``, or
``per_event`` / ``per_sample`` for background costs; ``refused`` where the calibration refused
it), min / max, the spread (max - min) / median, and whether all runs agree within +-20% of their
median with none negative or refused. A second table divides each cost by its ``ref_ns`` (ns per
iteration of a plain Python loop: for the costs of Python code the fastest of the calibration, at
which their ns are stored; for the others the median beside their rounds), which separates a
measurement that wanders from a machine that got slower. The machine is not pinned or quieted: a
user's is not.

Each cost's verdict is taken in the unit the analysis prices it in: the costs of rlscope's Python
code (``overhead.SPEED_PRICED_ENTRIES``: the scope and category boundaries' dispatch, the writer)
in reference-loop iterations, since the analysis converts them to ns at the profiled run's own
speed (``overhead.at_run_speed``); the native ones (backend, memory, CUDA API) in ns, the backend
as the analysis prices it: a run whose backend rounds ran in the host's slow regime re-priced at
the machine's fastest speed recorded by the batch's end (``calibration.at_machine_speed``). Why: a first
calibration on a machine whose host ran its slow speed throughout stores the slow speed's ns (the
CI probe of 2351473: scope 255-472 ns over five runs, 1.58-1.85 reference iterations), and no run
of its own can tell that speed from the machine's usual one.
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

from rlscope.overhead.calibrate.store import figure as value
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.overhead.correct.residual import SPEED_PRICED_ENTRIES

TOLERANCE = 0.20
BUSY = "while True:\n    pass\n"


def calibrate(out: Path, quick: bool) -> tuple[dict[str, Any], float, str]:
    """One ``rlscope calibrate`` run in its own process: (calibration, seconds, its stderr)."""
    cmd = [sys.executable, "-m", "rlscope.cli.main", "calibrate", "-q", "--out", str(out)]
    t0 = time.perf_counter()
    r = subprocess.run([*cmd, *(["--quick"] if quick else [])], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"rlscope calibrate failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(out.read_text()), time.perf_counter() - t0, r.stderr


def _stats(values: list[float | None]) -> dict[str, Any]:
    """min / max / median / spread / max deviation of the measured values, and the verdict."""
    measured = [v for v in values if v is not None]
    row: dict[str, Any] = {}
    if measured:
        mid = statistics.median(measured)
        row.update(min=min(measured), max=max(measured), median=mid)
        row["spread"] = (max(measured) - min(measured)) / abs(mid) if mid else float("inf")
        row["max_deviation"] = max(abs(v / mid - 1) for v in measured) if mid else float("inf")
    row["agree"] = (
        len(measured) == len(values)
        and all(v > 0 for v in measured)
        and row.get("max_deviation", float("inf")) <= TOLERANCE
    )
    return row


def table(cals: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cost: each run's value (None where refused) and stats; the same per ns of the reference
    loop timed beside it (``ref_ns``), which tells a cost that moved from a machine that did."""
    entries: list[str] = []
    for cal in cals:
        for e in [*cal["costs_ns"], *(r["entry"] for r in cal.get("refused", []))]:
            if e not in entries:
                entries.append(e)
    out: dict[str, dict[str, Any]] = {}
    for e in entries:
        values = [value(c["costs_ns"][e]) if e in c["costs_ns"] else None for c in cals]
        refs = [c["costs_ns"][e].get("ref_ns") if e in c["costs_ns"] else None for c in cals]
        per_ref = [v / r if v is not None and r else None for v, r in zip(values, refs, strict=True)]
        out[e] = {
            "values_ns": values,
            **_stats(values),
            "spreads": [c["costs_ns"][e]["spread"] if e in c["costs_ns"] else None for c in cals],
            "ref_ns": refs,
            "per_ref": {"values": per_ref, **_stats(per_ref)},
            "refused": [r["reason"] for c in cals for r in c.get("refused", []) if r["entry"] == e],
        }
        # the verdict in the unit the analysis prices the cost in (module docstring)
        out[e]["judged_in"] = "reference iterations" if e in SPEED_PRICED_ENTRIES else "ns"
        out[e]["verdict"] = out[e]["per_ref"]["agree"] if e in SPEED_PRICED_ENTRIES else out[e]["agree"]
    return out


def render(rows: dict[str, dict[str, Any]], runs: int, per_ref: bool = False) -> str:
    """The table; ``per_ref``: each cost in reference-loop iterations instead of ns."""

    def num(v: float | None) -> str:
        return "refused" if v is None else f"{v:.2f}" if per_ref else f"{v:,.0f}"

    head = ["cost", *(f"run {i + 1}" for i in range(runs)), "min", "max", "spread", "max dev", "agree ±20%"]
    lines = [head]
    for e, row in rows.items():
        r = row["per_ref"] if per_ref else row
        values = r["values"] if per_ref else r["values_ns"]
        lines.append(
            [
                e,
                *(num(v) for v in values),
                num(r.get("min")),
                num(r.get("max")),
                f"{r['spread']:.0%}" if "spread" in r else "-",
                f"{r['max_deviation']:.0%}" if "max_deviation" in r else "-",
                "yes" if r["agree"] else "NO",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = [
        " | ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    text.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--full", action="store_true", help="calibrate without --quick")
    p.add_argument("--no-load", action="store_true", help="no busy process beside the calibrations")
    p.add_argument("--json", metavar="FILE", help="write the table and every calibration here")
    p.add_argument("--keep", metavar="DIR", help="keep the calibration files in DIR")
    args = p.parse_args()
    busy = None if args.no_load else subprocess.Popen([sys.executable, "-c", BUSY])
    cals, seconds, refusals = [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="rlscope-cal-stability-") as tmp:
            where = Path(args.keep) if args.keep else Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            for i in range(args.runs):
                cal, s, err = calibrate(where / f"calibration-{i + 1}.json", quick=not args.full)
                cals.append(cal)
                seconds.append(s)
                refusals += [line for line in err.splitlines() if "refused" in line]
                print(f"run {i + 1}: {s:.1f} s", file=sys.stderr, flush=True)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    # the backend as the analysis prices it: at the machine's fastest speed once one run recorded it
    fastest = cal_mod.read_fastest_ref()
    priced = []
    for i, cal in enumerate(cals):
        repriced, notes = cal_mod.at_machine_speed(cal, fastest)
        priced.append(repriced)
        for note in notes:
            print(f"run {i + 1}: {note}")
    rows = table(priced)
    load = "no load" if args.no_load else "one core kept busy by another process"
    print(f"rlscope calibrate{'' if args.full else ' --quick'} x{args.runs}, {load} (ns per event)")
    print(render(rows, args.runs))
    print("\nthe same, in iterations of the reference Python loop timed beside each cost (ref_ns):")
    print(render(rows, args.runs, per_ref=True))
    refs = {e: ", ".join("-" if r is None else f"{r:.1f}" for r in row["ref_ns"]) for e, row in rows.items()}
    print("reference loop ns per iteration: " + "; ".join(f"{e} {r}" for e, r in refs.items()))
    print(f"seconds per calibration: {', '.join(f'{s:.1f}' for s in seconds)}")
    for line in refusals:
        print(line)
    print(
        "verdict, each cost in the unit the analysis prices it in: "
        + "; ".join(
            f"{e} {'agrees' if r['verdict'] else 'DOES NOT agree'} ({r['judged_in']})"
            for e, r in rows.items()
        )
    )
    ok = all(r["verdict"] for r in rows.values())
    print("all costs agree within ±20%, none negative or refused" if ok else "NOT all costs agree")
    if args.json:
        report = {"runs": args.runs, "quick": not args.full, "load": not args.no_load, "seconds": seconds}
        Path(args.json).write_text(
            json.dumps({**report, "costs": rows, "calibrations": cals}, indent=1) + "\n"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
