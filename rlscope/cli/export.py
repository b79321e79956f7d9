"""``rlscope-analyze export``: a trace in the formats other tools open.

    rlscope-analyze export TRACE_DIR --chrome [FILE] [--all-ops] [--window START:END] [--csv DIR]

``--chrome``: Chrome trace format (Perfetto UI, chrome://tracing), PyTorch profiler conventions;
gzip-compressed unless FILE ends with ``.json`` (default FILE: ``<trace name>.json.gz`` here).
Backend ops shorter than ``--min-op-us`` are folded into their operation (:mod:`rlscope.viz.chrome`)
so that a long CPU run stays small enough to open; ``--all-ops`` keeps every one. What was written
(events, size, window) is printed; slow steps show a progress line on a terminal.
``--csv DIR``: the summary (operations x categories, phases) and the interval tables as CSV files,
with the same figures as the table and ``--json`` (corrected for overhead unless ``--raw``).
Bad input raises :class:`rlscope.errors.RLScopeError` (the ``rlscope-analyze`` entry point prints one
line and exits 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rlscope.cli import options
from rlscope.cli.parser import Parser
from rlscope.errors import RLScopeError

__all__ = ["chrome_path", "main"]

_DEFAULT = "<trace name>.json.gz"


def _parser() -> argparse.ArgumentParser:
    from rlscope.viz.chrome import MIN_OP_US

    p = Parser(
        prog="rlscope-analyze export",
        description="Export a trace: Chrome trace format (Perfetto, chrome://tracing) and CSV tables.",
    )
    p.add_argument(
        "trace_dir", metavar="TRACE_DIR", help="trace directory written by rlscope.profile / rlscope run"
    )
    p.add_argument(
        "--chrome",
        metavar="FILE",
        nargs="?",
        const=_DEFAULT,
        help="write a Chrome trace for ui.perfetto.dev or chrome://tracing: gzip-compressed unless FILE"
        " ends with .json (default FILE: the trace directory's name + .json.gz, here)",
    )
    p.add_argument(
        "--min-op-us",
        type=float,
        default=MIN_OP_US,
        metavar="US",
        help=f"fold backend ops shorter than US microseconds into their operation (default {MIN_OP_US:g})",
    )
    p.add_argument("--all-ops", action="store_true", help="keep every backend op (same as --min-op-us 0)")
    p.add_argument(
        "--window",
        metavar="START:END",
        help="only intervals overlapping this window, clipped (seconds since the run start; either side"
        " may be empty)",
    )
    p.add_argument("--csv", metavar="DIR", help="write the summary and interval tables as CSV files here")
    p.add_argument("--calibration", metavar="FILE", help="overhead calibration to use (as rlscope-analyze)")
    p.add_argument("--raw", action="store_true", help="CSV summary without overhead correction")
    options.detail_budget(p)
    return p


def chrome_path(arg: str, trace_dir: str) -> Path:
    """The Chrome trace's file: ``arg``, or for ``--chrome`` alone the trace's name + .json.gz here."""
    if arg == _DEFAULT:
        return Path(f"{Path(os.path.abspath(trace_dir)).name or 'trace'}.json.gz")
    return Path(arg)


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _wrote_line(path: Path, obj: dict[str, Any], run_s: float) -> str:
    """What a person needs to open the file: where, how many events, how big, which window."""
    events = obj["traceEvents"]
    n = sum(1 for e in events if e.get("ph") != "M")
    other = obj.get("otherData") or {}
    w0, w1 = other.get("window_s") or (0.0, run_s)
    kind = "gzip JSON" if str(path).endswith(".gz") else "JSON"
    folded = int(other.get("folded_cpu_ops", 0))
    fold = (
        f"; {folded:,} backend ops shorter than {other['folded_cpu_ops_below_us']:g} µs folded into"
        " their operations (--all-ops keeps them)"
        if folded
        else ""
    )
    return (
        f"wrote {path}: {n:,} events, {_size(path.stat().st_size)} {kind}, window {w0:.3f}–{w1:.3f} s"
        f"{fold}; open it at https://ui.perfetto.dev or chrome://tracing"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the export; RLScopeError/TraceError propagate to the caller (one line, exit 2)."""
    from rlscope.analysis import analyze
    from rlscope.analysis.intervals import parse_window
    from rlscope.progress import spinner

    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if not args.chrome and not args.csv:
        raise RLScopeError("export: nothing to write; give --chrome [FILE] and/or --csv DIR")
    if not args.min_op_us >= 0:  # also NaN
        raise RLScopeError(f"export: --min-op-us {args.min_op_us:g}: expected 0 or more microseconds")
    window = parse_window(args.window) if args.window else None
    # one analysis: the CSV holds the same (corrected) figures as the table and --json
    result = analyze(
        args.trace_dir,
        calibration=args.calibration,
        window=window,
        correct=not args.raw,
        progress=True,
        detail_budget=args.detail_budget,
    )
    if args.chrome:
        from rlscope.viz import chrome

        path = chrome_path(args.chrome, args.trace_dir)
        min_op_ns = 0 if args.all_ops else round(args.min_op_us * 1000)
        with spinner("building the Chrome trace"):
            obj = chrome.render(result, min_op_ns)
        with spinner(f"writing {path}"):
            chrome.write_chrome(obj, path)
        print(_wrote_line(path, obj, result.interval_tables().run_end_ns / 1e9))
    if args.csv:
        from rlscope.viz import data_files

        with spinner(f"writing CSV files to {args.csv}"):
            data_files.write_csv(result, args.csv)
        print(f"wrote CSV files to {args.csv}")
    for w in result.warnings:
        print(f"rlscope-analyze: warning: {w}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
