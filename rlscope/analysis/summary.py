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
        "gpu_categories": defaultdict(float),
        "resources": {"cpu_only": 0.0, "gpu_only": 0.0, "cpu_gpu": 0.0},
    }


def _fill_operations(
    ops_out: dict[str, dict[str, Any]],
    cpu_rows: list[dict[str, Any]],
    op_rows: list[dict[str, Any]],
    gpu_rows: list[dict[str, Any]],
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
    for r in gpu_rows:
        if r["operation"] != UNANNOTATED:
            e = ops_out.setdefault(r["operation"], _op_entry())
            e["gpu_categories"][r["category"]] += r["seconds"]
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
        e["gpu_categories"] = dict(sorted(e["gpu_categories"].items(), key=lambda kv: -kv[1]))
        out[name] = e
    return out


def _gpu_section(breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """GPU-bound time and NVML's utilization next to the kernel trace's (the process with most GPU work)."""
    with_gpu = [b for b in breakdowns if b.gpu.get("gpu_bound_s", 0.0) > 0 or b.gpu.get("nvml_samples", 0)]
    if not with_gpu:
        return {}
    best = max(with_gpu, key=lambda b: b.gpu.get("gpu_bound_s", 0.0))
    return {"pid": best.pid, **best.gpu}


def summarize(trace: Trace, breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """The summary dict (see docs/trace-format.md, "Summary JSON")."""
    cpu_rows = [r for b in breakdowns for r in b.cpu_time.to_pylist()]
    op_rows = [r for b in breakdowns for r in b.ops.to_pylist()]
    gpu_rows = [r for b in breakdowns for r in b.gpu_time.to_pylist()]

    operations: dict[str, dict[str, Any]] = {}
    unannotated = _fill_operations(operations, cpu_rows, op_rows, gpu_rows)
    gpu_cats: dict[str, float] = defaultdict(float)
    unattributed_gpu: dict[str, float] = defaultdict(float)
    for r in gpu_rows:
        gpu_cats[r["category"]] += r["seconds"]
        if r["operation"] == UNANNOTATED:
            unattributed_gpu[r["category"]] += r["seconds"]
    cats: dict[str, float] = defaultdict(float)
    unannotated_cats: dict[str, float] = defaultdict(float)
    for r in cpu_rows:
        cats[r["category"]] += r["seconds"]
        if r["operation"] == UNANNOTATED:
            unannotated_cats[r["category"]] += r["seconds"]

    phases: dict[str, Any] = {}
    for ph in dict.fromkeys(r["phase"] for r in cpu_rows + op_rows + gpu_rows):
        ph_ops: dict[str, dict[str, Any]] = {}
        ph_unann = _fill_operations(
            ph_ops,
            [r for r in cpu_rows if r["phase"] == ph],
            [r for r in op_rows if r["phase"] == ph],
            [r for r in gpu_rows if r["phase"] == ph],
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
        "gpu_categories": dict(sorted(gpu_cats.items(), key=lambda kv: -kv[1])),
        "unannotated_gpu_categories": dict(unattributed_gpu),
        "gpu_bound_s": sum(b.gpu.get("gpu_bound_s", 0.0) for b in breakdowns),
        "gpu": _gpu_section(breakdowns),
        "phases": phases,
        "processes": procs,
        "warnings": trace.warnings,
    }
