"""Run-to-run comparison: two analyses (e.g. before/after swapping the simulator backend) per
operation and category. Pure: two results (or their summaries) in, a diff dict out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlscope.errors import RLScopeError

if TYPE_CHECKING:
    from rlscope.analysis.result import AnalysisResult

DIFF_SCHEMA = "rlscope.diff/1"


def _pair(a: float, b: float) -> dict[str, float | None]:
    return {"a": a, "b": b, "delta_s": b - a, "ratio": (b / a) if a else None}


def _cats(a: dict[str, float], b: dict[str, float]) -> dict[str, dict[str, float | None]]:
    return {c: _pair(a.get(c, 0.0), b.get(c, 0.0)) for c in sorted(set(a) | set(b))}


def diff_summaries(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per operation: total and exclusive time in A and B, the difference (B - A), and per category."""
    ops: dict[str, Any] = {}
    names = list(dict.fromkeys([*a["operations"], *b["operations"]]))
    empty = {"total_s": 0.0, "exclusive_s": 0.0, "calls": 0, "categories": {}, "gpu_categories": {}}
    for name in names:
        oa, ob = a["operations"].get(name, empty), b["operations"].get(name, empty)
        ops[name] = {
            "total": _pair(oa["total_s"], ob["total_s"]),
            "exclusive": _pair(oa["exclusive_s"], ob["exclusive_s"]),
            "calls": {"a": oa.get("calls", 0), "b": ob.get("calls", 0)},
            "categories": _cats(oa.get("categories", {}), ob.get("categories", {})),
            "gpu_categories": _cats(oa.get("gpu_categories", {}), ob.get("gpu_categories", {})),
            "only_in": "a" if name not in b["operations"] else "b" if name not in a["operations"] else None,
        }
    order = sorted(ops, key=lambda n: -abs(ops[n]["total"]["delta_s"]))
    return {
        "schema": DIFF_SCHEMA,
        "a": a["trace_dir"],
        "b": b["trace_dir"],
        "wall": _pair(a["wall_s"], b["wall_s"]),
        "unannotated": _pair(a["unannotated_s"], b["unannotated_s"]),
        "gpu_bound": _pair(a.get("gpu_bound_s", 0.0), b.get("gpu_bound_s", 0.0)),
        "categories": _cats(a.get("categories", {}), b.get("categories", {})),
        "operations": {n: ops[n] for n in order},
    }


def diff_results(a: AnalysisResult, b: AnalysisResult) -> dict[str, Any]:
    """The diff of two analyses (B - A); traces of different schema versions are refused."""
    if a.schema_versions != b.schema_versions:
        raise RLScopeError(
            f"traces have different schema versions ({a.trace_dir}: {sorted(a.schema_versions)}, "
            f"{b.trace_dir}: {sorted(b.schema_versions)}); analyze each with the rlscope that wrote it"
        )
    return diff_summaries(a.summary, b.summary)
