"""Run-to-run comparison: two analyses (e.g. before/after swapping the simulator backend) per
operation and category, each change beside its noise. Pure: two results (or their summaries) in, a
diff dict out.

A change's uncertainty is one standard deviation of B - A: the noise of each trace's figure (from the
spread of the operation's instances, ``noise_s`` in the summary, rlscope.analysis.noise) and the
overhead correction's own uncertainty (``uncertainty_s``), added in quadrature. A change is
``significant`` when it exceeds :data:`SIGNIFICANCE_Z` uncertainties; ``None`` (cannot tell) when an
operation ran fewer than two times in a trace, so it has no spread to judge by. The noise is that of
repeated instances in one run: a difference between machines or between the machine's state in two
runs is not in it (two runs on the same quiet machine are what it is for).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rlscope.errors import RLScopeError

if TYPE_CHECKING:
    from rlscope.analysis.result import AnalysisResult

DIFF_SCHEMA = "rlscope.diff/1"
# Three standard deviations: a diff compares every operation and category at once, so a looser bar
# would flag one of them in most comparisons of a program with itself.
SIGNIFICANCE_Z = 3.0
RESOLUTION_S = 1e-9  # below the clock's resolution a difference is rounding, whatever its noise
# an operation whose calls differ by more than this share between the runs is judged per call: two runs
# of different lengths (79,360 and 53,760 steps) differ in every total, and their totals' noise hid
# backprop going from 3.16 to 4.97 ms a call
LENGTH_SHARE = 0.05

_NO_OP: dict[str, Any] = {
    "total_s": 0.0,
    "exclusive_s": 0.0,
    "calls": 0,
    "categories": {},
    "gpu_categories": {},
    "uncertainty_s": 0.0,
    "noise_s": {"total_s": 0.0, "exclusive_s": 0.0, "categories": {}, "gpu_categories": {}},
}


def _change(a: float, b: float, sd_a: float | None, sd_b: float | None) -> dict[str, Any]:
    """A, B, B - A, B / A, the uncertainty of B - A (None: unknown) and whether it is significant."""
    delta = b - a
    unc = None if sd_a is None or sd_b is None else math.hypot(sd_a, sd_b)
    significant = None if unc is None else abs(delta) > max(SIGNIFICANCE_Z * unc, RESOLUTION_S)
    return {
        "a": a,
        "b": b,
        "delta_s": delta,
        "ratio": (b / a) if a else None,
        "uncertainty_s": unc,
        "significant": significant,
    }


def _sd(*parts: float | None) -> float | None:
    """Independent standard deviations added in quadrature; None when any is unknown."""
    return None if any(p is None for p in parts) else math.hypot(*parts)  # type: ignore[arg-type]


def _op_change(oa: dict[str, Any], ob: dict[str, Any], gpu: bool) -> dict[str, Any]:
    na, nb = oa.get("noise_s") or {}, ob.get("noise_s") or {}
    ca, cb = oa.get("uncertainty_s") or 0.0, ob.get("uncertainty_s") or 0.0

    def side(noise: dict[str, Any], op: dict[str, Any], key: str, sub: str | None = None) -> float | None:
        """One trace's noise of a figure: 0 where the figure has no time in an operation that ran
        several times (every instance had none), None where it ran once (no spread)."""
        sd = (noise.get(key) or {}).get(sub) if sub else noise.get(key)
        if sd is not None:
            return sd
        return 0.0 if op.get("calls", 0) == 0 or noise.get("total_s") is not None else None

    def cats(key: str) -> dict[str, Any]:
        names = sorted(set(oa.get(key) or {}) | set(ob.get(key) or {}))
        return {
            c: _change(
                (oa.get(key) or {}).get(c, 0.0),
                (ob.get(key) or {}).get(c, 0.0),
                _sd(side(na, oa, key, c), ca),
                _sd(side(nb, ob, key, c), cb),
            )
            for c in names
        }

    sd_a, sd_b = _sd(side(na, oa, "total_s"), ca), _sd(side(nb, ob, "total_s"), cb)
    total = _change(oa["total_s"], ob["total_s"], sd_a, sd_b)
    calls_a, calls_b = int(oa.get("calls", 0)), int(ob.get("calls", 0))
    out: dict[str, Any] = {
        "delta_s": total["delta_s"],
        "uncertainty_s": total["uncertainty_s"],
        "significant": total["significant"],
        "total": total,
        "exclusive": _change(
            oa["exclusive_s"],
            ob["exclusive_s"],
            _sd(side(na, oa, "exclusive_s"), ca),
            _sd(side(nb, ob, "exclusive_s"), cb),
        ),
        "calls": {"a": calls_a, "b": calls_b},
        "categories": cats("categories"),
        "only_in": None,
    }
    out["judged"] = "total"
    if calls_a and calls_b:  # per call: a run that made more calls is not slower per call
        sa = None if sd_a is None else sd_a / calls_a
        sb = None if sd_b is None else sd_b / calls_b
        out["per_call"] = _change(oa["total_s"] / calls_a, ob["total_s"] / calls_b, sa, sb)
        if abs(calls_b - calls_a) > LENGTH_SHARE * max(calls_a, calls_b):  # the runs did different work
            out["judged"] = "per_call"
    if gpu:
        out["gpu_categories"] = cats("gpu_categories")
    return out


def _has_gpu(s: dict[str, Any]) -> bool:
    return bool(s.get("gpu_bound_s") or s.get("gpu_categories") or s.get("gpu"))


def diff_summaries(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per operation: total, exclusive and per-call time in A and B, the change (B - A) with its
    uncertainty and significance, and per category. GPU figures only where a trace has GPU data."""
    gpu = _has_gpu(a) or _has_gpu(b)
    ops: dict[str, Any] = {}
    for name in dict.fromkeys([*a["operations"], *b["operations"]]):
        oa, ob = a["operations"].get(name, _NO_OP), b["operations"].get(name, _NO_OP)
        ops[name] = _op_change(oa, ob, gpu)
        ops[name]["only_in"] = (
            "a" if name not in b["operations"] else "b" if name not in a["operations"] else None
        )
    order = sorted(ops, key=lambda n: -abs(ops[n]["delta_s"]))
    out = {
        "schema": DIFF_SCHEMA,
        "a": a["trace_dir"],
        "b": b["trace_dir"],
        "significance_z": SIGNIFICANCE_Z,
        "wall": _change(
            a["wall_s"],
            b["wall_s"],
            _sd(a.get("wall_noise_s"), a.get("uncertainty_s") or 0.0),
            _sd(b.get("wall_noise_s"), b.get("uncertainty_s") or 0.0),
        ),
        # unannotated time has no repeated instances to tell its noise from
        "unannotated": _change(a["unannotated_s"], b["unannotated_s"], None, None),
        "categories": {
            c: _change(a.get("categories", {}).get(c, 0.0), b.get("categories", {}).get(c, 0.0), None, None)
            for c in sorted(set(a.get("categories", {})) | set(b.get("categories", {})))
        },
        "operations": {n: ops[n] for n in order},
    }
    if gpu:
        out["gpu_bound"] = _change(a.get("gpu_bound_s", 0.0), b.get("gpu_bound_s", 0.0), None, None)
    return out


def diff_results(a: AnalysisResult, b: AnalysisResult) -> dict[str, Any]:
    """The diff of two analyses (B - A); traces of different schema versions are refused."""
    if a.schema_versions != b.schema_versions:
        raise RLScopeError(
            f"traces have different schema versions ({a.trace_dir}: {sorted(a.schema_versions)}, "
            f"{b.trace_dir}: {sorted(b.schema_versions)}); analyze each with the rlscope that wrote it"
        )
    return diff_summaries(a.summary, b.summary)
