"""``rlscope-analyze export``: a trace in the formats other tools open.

    rlscope-analyze export TRACE_DIR --chrome out.json[.gz] [--window START:END] [--csv DIR]

``--chrome``: Chrome trace format (Perfetto UI, chrome://tracing), PyTorch profiler conventions.
``--csv DIR``: the summary (operations x categories, phases) and the interval tables as CSV files.
Bad input raises :class:`rlscope.errors.RLScopeError` (the ``rlscope-analyze`` entry point prints one
line and exits 2).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from rlscope.cli.parser import Parser
from rlscope.errors import RLScopeError

__all__ = ["CSV_INTERVAL_FILES", "main", "summary_rows", "write_csv"]

# interval table -> CSV file name
CSV_INTERVAL_FILES = {
    "operations": "op_intervals.csv",
    "phases": "phase_intervals.csv",
    "cpu": "cpu_segments.csv",
    "gpu": "gpu_records.csv",
    "api": "cuda_api_calls.csv",
}
SUMMARY_FILES = ("operations.csv", "phases.csv")
_RESOURCES = ("cpu_only", "gpu_only", "cpu_gpu")


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


def summary_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Operations x categories: one row per operation (and unannotated time), seconds per category."""
    from rlscope.categories import CPU_CATEGORIES, GPU_CATEGORIES

    cpu_cats, gpu_cats = list(CPU_CATEGORIES.values()), list(GPU_CATEGORIES.values())
    header = [
        "operation",
        "calls",
        "total_s",
        "exclusive_s",
        "uncertainty_s",
        "raw_total_s",
        "corrected",
        *cpu_cats,
        *gpu_cats,
        *(f"{r}_s" for r in _RESOURCES),
    ]
    rows: list[list[Any]] = []
    corrected = bool(summary.get("corrected_for_overhead", False))
    raw_ops = summary.get("raw", {}).get("operations", {})
    for name, op in summary.get("operations", {}).items():
        cats, gcats, res = op.get("categories", {}), op.get("gpu_categories", {}), op.get("resources", {})
        rows.append(
            [
                name,
                op.get("calls", 0),
                op.get("total_s", 0.0),
                op.get("exclusive_s", 0.0),
                op.get("uncertainty_s", 0.0),
                raw_ops.get(name, {}).get("total_s", op.get("total_s", 0.0)),
                corrected,
                *(cats.get(c, 0.0) for c in cpu_cats),
                *(gcats.get(c, 0.0) for c in gpu_cats),
                *(res.get(r, 0.0) for r in _RESOURCES),
            ]
        )
    un = summary.get("unannotated_s", 0.0)
    ucats, ugpu = summary.get("unannotated_categories", {}), summary.get("unannotated_gpu_categories", {})
    rows.append(
        [
            "[unannotated]",
            0,
            un,
            un,
            "",
            summary.get("raw", {}).get("unannotated_s", un),
            corrected,
            *(ucats.get(c, 0.0) for c in cpu_cats),
            *(ugpu.get(c, 0.0) for c in gpu_cats),
            *("" for _ in _RESOURCES),
        ]
    )
    return header, rows


def _phase_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Per phase and operation: calls, total and exclusive seconds."""
    header = ["phase", "phase_wall_s", "operation", "calls", "total_s", "exclusive_s"]
    rows = []
    for ph, info in summary.get("phases", {}).items():
        for name, op in info.get("operations", {}).items():
            rows.append(
                [
                    ph,
                    info.get("wall_s", 0.0),
                    name,
                    op.get("calls", 0),
                    op.get("total_s", 0.0),
                    op.get("exclusive_s", 0.0),
                ]
            )
        rows.append(
            [
                ph,
                info.get("wall_s", 0.0),
                "[unannotated]",
                0,
                info.get("unannotated_s", 0.0),
                info.get("unannotated_s", 0.0),
            ]
        )
    return header, rows


def _write_rows(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def write_csv(out_dir: str | Path, summary: dict[str, Any], tables: dict[str, Any]) -> list[Path]:
    """The summary tables and the interval tables as CSV files in ``out_dir``; returns the paths."""
    import pyarrow.csv as pacsv

    d = Path(out_dir)
    written = []
    try:
        d.mkdir(parents=True, exist_ok=True)
        for fname, (header, rows) in zip(
            SUMMARY_FILES, (summary_rows(summary), _phase_rows(summary)), strict=True
        ):
            _write_rows(d / fname, header, rows)
            written.append(d / fname)
        for key, fname in CSV_INTERVAL_FILES.items():
            pacsv.write_csv(tables[key], str(d / fname))
            written.append(d / fname)
    except OSError as e:
        raise RLScopeError(f"{out_dir}: cannot write CSV: {e.strerror or e}") from None
    return written


def main(argv: list[str] | None = None) -> int:
    """Run the export; RLScopeError/TraceError propagate to the caller (one line, exit 2)."""
    from rlscope.analysis.intervals import intervals, parse_window
    from rlscope.trace.reader import load_trace

    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if not args.chrome and not args.csv:
        raise RLScopeError("export: nothing to write; give --chrome FILE and/or --csv DIR")
    window = parse_window(args.window) if args.window else None
    trace = load_trace(args.trace_dir)
    iv = intervals(trace, window)
    if args.chrome:
        from rlscope.viz.chrome import to_chrome, write_chrome

        write_chrome(to_chrome(iv), args.chrome)
    if args.csv:
        from rlscope.analysis.summary import summarize_trace

        # the same (corrected) figures as the table and --json, on the trace already loaded
        write_csv(args.csv, summarize_trace(trace, args.calibration, not args.raw), iv.tables())
    for w in trace.warnings:
        print(f"rlscope-analyze: warning: {w}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
