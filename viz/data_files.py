"""JSON and CSV: the outputs other programs read, rendered from one :class:`~rlscope.analysis.AnalysisResult`.

The JSON is the summary as documented (docs/trace-format.md, "Summary JSON"). The CSV files hold the
same figures: ``operations.csv`` and ``phases.csv`` (corrected when the JSON is, and they say so in
their ``corrected`` column) and the interval tables of the run (or of the window asked for).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlscope.categories import UNANNOTATED
from rlscope.errors import RLScopeError

if TYPE_CHECKING:
    from rlscope.analysis.result import AnalysisResult

__all__ = ["CSV_INTERVAL_FILES", "SUMMARY_FILES", "summary_rows", "to_json", "write_csv", "write_json"]

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
        "auto",  # every instance was automatic (the operation's key is its name either way)
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
                bool(op.get("auto", False)),
                *(cats.get(c, 0.0) for c in cpu_cats),
                *(gcats.get(c, 0.0) for c in gpu_cats),
                *(res.get(r, 0.0) for r in _RESOURCES),
            ]
        )
    un = summary.get("unannotated_s", 0.0)
    ucats, ugpu = summary.get("unannotated_categories", {}), summary.get("unannotated_gpu_categories", {})
    rows.append(
        [
            UNANNOTATED,
            0,
            un,
            un,
            "",
            summary.get("raw", {}).get("unannotated_s", un),
            corrected,
            False,
            *(ucats.get(c, 0.0) for c in cpu_cats),
            *(ugpu.get(c, 0.0) for c in gpu_cats),
            *("" for _ in _RESOURCES),
        ]
    )
    return header, rows


def _phase_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Per phase and operation: calls, total and exclusive seconds."""
    header = ["phase", "phase_wall_s", "operation", "calls", "total_s", "exclusive_s", "corrected"]
    corrected = bool(summary.get("corrected_for_overhead", False))
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
                    corrected,
                ]
            )
        rows.append(
            [
                ph,
                info.get("wall_s", 0.0),
                UNANNOTATED,
                0,
                info.get("unannotated_s", 0.0),
                info.get("unannotated_s", 0.0),
                corrected,
            ]
        )
    return header, rows


def _write_rows(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def write_csv(result: AnalysisResult, out_dir: str | Path) -> list[Path]:
    """The summary tables and the interval tables as CSV files in ``out_dir``; returns the paths."""
    import pyarrow.csv as pacsv

    summary, tables = result.summary, result.interval_tables().tables()

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


def to_json(result: AnalysisResult) -> str:
    """The summary JSON (shape: docs/trace-format.md)."""
    return json.dumps(result.summary, indent=2)


def write_json(result: AnalysisResult, path: str | Path) -> None:
    try:
        Path(path).write_text(to_json(result) + "\n")
    except OSError as e:
        raise RLScopeError(f"{path}: cannot write: {e.strerror or e}") from None
