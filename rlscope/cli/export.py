"""``rlscope-analyze export``: a trace in the formats other tools open.

    rlscope-analyze export TRACE_DIR --chrome out.json[.gz] [--window START:END] [--csv DIR]

``--chrome``: Chrome trace format (Perfetto UI, chrome://tracing), PyTorch profiler conventions.
``--csv DIR``: the summary (operations x categories, phases) and the interval tables as CSV files,
with the same figures as the table and ``--json`` (corrected for overhead unless ``--raw``).
Bad input raises :class:`rlscope.errors.RLScopeError` (the ``rlscope-analyze`` entry point prints one
line and exits 2).
"""

from __future__ import annotations

import argparse
import sys

from rlscope.cli.parser import Parser
from rlscope.errors import RLScopeError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="rlscope-analyze export",
        description="Export a trace: Chrome trace format (Perfetto, chrome://tracing) and CSV tables.",
    )
    p.add_argument(
        "trace_dir", metavar="TRACE_DIR", help="trace directory written by rlscope.profile / rlscope run"
    )
    p.add_argument("--chrome", metavar="FILE", help="write a Chrome trace (.json, or .json.gz compressed)")
    p.add_argument(
        "--window",
        metavar="START:END",
        help="only intervals overlapping this window, clipped (seconds since the run start; either side"
        " may be empty)",
    )
    p.add_argument("--csv", metavar="DIR", help="write the summary and interval tables as CSV files here")
    p.add_argument("--calibration", metavar="FILE", help="overhead calibration to use (as rlscope-analyze)")
    p.add_argument("--raw", action="store_true", help="CSV summary without overhead correction")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the export; RLScopeError/TraceError propagate to the caller (one line, exit 2)."""
    from rlscope.analysis import analyze
    from rlscope.analysis.intervals import parse_window

    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if not args.chrome and not args.csv:
        raise RLScopeError("export: nothing to write; give --chrome FILE and/or --csv DIR")
    window = parse_window(args.window) if args.window else None
    # one analysis: the CSV holds the same (corrected) figures as the table and --json
    result = analyze(args.trace_dir, calibration=args.calibration, window=window, correct=not args.raw)
    if args.chrome:
        from rlscope.viz import chrome

        chrome.write(result, args.chrome)
    if args.csv:
        from rlscope.viz import data_files

        data_files.write_csv(result, args.csv)
    for w in result.warnings:
        print(f"rlscope-analyze: warning: {w}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
