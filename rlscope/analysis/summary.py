"""The JSON summary: the stable, documented shape ``rlscope-analyze --json`` writes.

Built from the breakdown tables only (which are small: one row per phase x operation x
category), so this module is plain Python over a few hundred rows.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rlscope.analysis.breakdown import UNANNOTATED, ProcessBreakdown
from rlscope.trace.reader import Trace

SUMMARY_SCHEMA = "rlscope.summary/1"


def _op_entry() -> dict[str, Any]:
    return {
        "total_s": 0.0,
        "exclusive_s": 0.0,
        "calls": 0,
        "categories": defaultdict(float),
        "resources": {"cpu_only": 0.0, "gpu_only": 0.0, "cpu_gpu": 0.0},
    }


def _fill_operations(
    ops_out: dict[str, dict[str, Any]], cpu_rows: list[dict[str, Any]], op_rows: list[dict[str, Any]]
) -> float:
    """Accumulate operation entries from table rows; returns the unannotated seconds seen."""
    unannotated = 0.0
    for r in cpu_rows:
        if r["operation"] == UNANNOTATED:
            unannotated += r["seconds"]
            continue
        e = ops_out.setdefault(r["operation"], _op_entry())
        e["exclusive_s"] += r["seconds"]
        e["categories"][r["category"]] += r["seconds"]
    for r in op_rows:
        e = ops_out.setdefault(r["operation"], _op_entry())
        e["total_s"] += r["inclusive_s"]
        e["calls"] += r["calls"]
        e["resources"]["cpu_only"] += r["cpu_only_s"]
        e["resources"]["gpu_only"] += r["gpu_only_s"]
        e["resources"]["cpu_gpu"] += r["cpu_gpu_s"]
    return unannotated


def _finish(ops: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Plain dicts, sorted by total time, categories sorted by code order."""
    out = {}
    for name, e in sorted(ops.items(), key=lambda kv: -kv[1]["total_s"]):
        e["categories"] = dict(sorted(e["categories"].items(), key=lambda kv: -kv[1]))
        out[name] = e
    return out


def summarize(trace: Trace, breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """The summary dict (see docs/trace-format.md, "Summary JSON")."""
    cpu_rows = [r for b in breakdowns for r in b.cpu_time.to_pylist()]
    op_rows = [r for b in breakdowns for r in b.ops.to_pylist()]

    operations: dict[str, dict[str, Any]] = {}
    unannotated = _fill_operations(operations, cpu_rows, op_rows)
    cats: dict[str, float] = defaultdict(float)
    unannotated_cats: dict[str, float] = defaultdict(float)
    for r in cpu_rows:
        cats[r["category"]] += r["seconds"]
        if r["operation"] == UNANNOTATED:
            unannotated_cats[r["category"]] += r["seconds"]

    phases: dict[str, Any] = {}
    for ph in dict.fromkeys(r["phase"] for r in cpu_rows + op_rows):
        ph_ops: dict[str, dict[str, Any]] = {}
        ph_unann = _fill_operations(
            ph_ops, [r for r in cpu_rows if r["phase"] == ph], [r for r in op_rows if r["phase"] == ph]
        )
        phases[ph] = {
            "wall_s": sum(b.phase_wall_s.get(ph, 0.0) for b in breakdowns),
            "unannotated_s": ph_unann,
            "operations": _finish(ph_ops),
        }

    procs = []
    starts, ends = [], []
    for b, p in zip(breakdowns, trace.processes, strict=True):
        procs.append(
            {"pid": b.pid, "host": b.host, "wall_s": b.wall_s, "events": b.events, "complete": b.complete}
        )
        if b.events == 0:
            continue
        anchor = int(p.metadata.get("clock_anchor_ns", "0") or 0)
        unix = int(p.metadata.get("clock_anchor_unix_ns", "0") or 0)
        starts.append(unix + (b.start_ns - anchor))
        ends.append(unix + (b.end_ns - anchor))
    wall = (max(ends) - min(starts)) / 1e9 if starts else 0.0
    return {
        "schema": SUMMARY_SCHEMA,
        "trace_dir": str(trace.path),
        "wall_s": wall,
        "unannotated_s": unannotated,
        "categories": dict(sorted(cats.items(), key=lambda kv: -kv[1])),
        "unannotated_categories": dict(unannotated_cats),
        "operations": _finish(operations),
        "phases": phases,
        "processes": procs,
        "warnings": trace.warnings,
    }
