"""The sentences every report says the same way: what rlscope's overhead correction did.

The terminal table, the HTML report and the diff call these, so a researcher reads one wording
everywhere. One sentence for everyone (:func:`correction_sentence`); the details behind it, for
``-v`` (:func:`correction_details`); ``--json`` holds every figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["correction_details", "correction_sentence", "removed_kind"]

# what each kind of removed time is, in words (summary "overhead"."removed_s" keys)
REMOVED_KINDS: dict[str, str] = {
    "collectors (windows)": "the backend and GPU collectors, measured in this run's windows",
    "scope": "recording operations and phases",
    "category": "recording simulator and other category changes",
    "backend": "recording torch ops",
    "cuda_api": "recording CUDA API calls",
    "none": "rlscope's own bookkeeping rows",
    "memory": "recording GPU memory allocations",
    "rlscope_periodic": "rlscope's periodic work on your thread (GPU trace rotation)",
    "writer": "the trace writer holding the GIL",
    "nvml": "the GPU utilization sampler holding the GIL",
}

EMBEDDED = (
    "embedded in the trace"  # rlscope.overhead.correct.calibration.EMBEDDED (viz never imports overhead)
)


def _s(x: float) -> str:
    """Seconds with as many digits as a reader needs."""
    if abs(x) >= 10:
        return f"{x:.1f} s"
    if abs(x) >= 0.1:
        return f"{x:.2f} s"
    if abs(x) >= 0.001:
        return f"{1e3 * x:.1f} ms"
    return f"{1e6 * x:.0f} µs"


def removed_kind(kind: str) -> str:
    return REMOVED_KINDS.get(kind, kind)


def detail_sentence(summary: Mapping[str, Any]) -> str:
    """What covers the whole run and what comes from the detail stretches ("" when every event of
    the run was kept)."""
    d = summary.get("detail") or {}
    if not d:
        return ""
    rows = d.get("stretch_rows")
    cap = f", at most {int(rows) / 1e3:g}k rows a stretch" if rows else ""
    schedule = f" ({d['schedule']}{cap})" if d.get("schedule") else ""
    left = float(d.get("left_out_s") or 0.0)
    budget = (
        f" The analysis's detail budget left out {_s(left)} of the detail the trace keeps"
        " (rlscope-analyze --detail-budget all analyzes it)."
        if left > 0
        else ""
    )
    return (
        f"Whole run: times, calls and wall; the split of Python time into backend and CUDA API, GPU work"
        f" and the timeline come from {_s(float(d.get('detail_s', 0.0)))} of detail{schedule}, applied to"
        f" the other {_s(float(d.get('summarized_s', 0.0)))}.{budget}"
    )


def correction_sentence(summary: Mapping[str, Any]) -> str:
    """One sentence: how much rlscope added to this run and that the figures have it removed (with the
    correction's uncertainty), or that the figures are raw and why."""
    over = summary.get("overhead") or {}
    cal = summary.get("calibration") or {}
    if summary.get("corrected_for_overhead") and not over:  # a summary without the correction's figures
        return "The figures above have rlscope's own overhead removed."
    if not summary.get("corrected_for_overhead"):
        why = str(cal.get("reason") or "").strip()
        return "The figures are raw: rlscope's own overhead is still in them" + (f" ({why})." if why else ".")
    sigma = float(over.get("uncertainty_s") or summary.get("uncertainty_s") or 0.0)
    pm = f", ±{_s(sigma)}" if sigma > 0 else ""
    procs = summary.get("processes") or []
    if len(procs) > 1:  # the run's wall is its longest process's (a launcher): say what all of them lost
        added = sum(float(v) for v in (over.get("removed_s") or {}).values())
        time_s = sum(float(p.get("wall_s") or 0.0) for p in procs) + added
        n = len(procs)
        if added <= 0:
            return f"rlscope added no measurable time to the {n} processes; the figures are as recorded."
        share = f" ({added / time_s:.0%} of their time)" if time_s > 0 else ""
        removed = f"the figures above have it removed{pm}"
        return f"rlscope added {_s(added)} to the {n} processes{share}; {removed}."
    raw, corrected = float(over.get("raw_wall_s", 0.0)), float(over.get("corrected_wall_s", 0.0))
    added = raw - corrected
    share = f" ({added / raw:.0%} of the run)" if raw > 0 else ""
    if added <= 0:
        return "rlscope added no measurable time to this run; the figures above are as recorded."
    return f"rlscope added {_s(added)}{share}; the figures above have it removed{pm}."


def _calibration_line(cal: Mapping[str, Any]) -> str:
    """Where the per-event costs came from; the date is the calibration's, not the trace's."""
    status = cal.get("status", "")
    if status != "applied":
        reason = f": {cal['reason']}" if cal.get("reason") else ""
        what = {
            "windows only": "no calibration matched: only what this run measured of itself was removed",
            "boundaries only": "no calibration matched: only what each boundary timed of itself was removed",
        }.get(status, f"no calibration applied ({status or 'none'})")
        return what + reason
    created = str(cal.get("created") or "").replace("T", " ")
    when = f" made {created}" if created else ""
    path = str(cal.get("path") or "")
    where = "stored in the trace when it was recorded" if path == EMBEDDED else path
    return (
        f"per-event costs from the calibration{when} ({where})"
        if where
        else f"per-event costs from the calibration{when}"
    )


def correction_details(summary: Mapping[str, Any]) -> list[str]:
    """The correction behind :func:`correction_sentence`, a line each (the terminal's ``-v`` footer)."""
    over = summary.get("overhead") or {}
    cal = summary.get("calibration") or {}
    if not summary.get("corrected_for_overhead") or not over:
        return [_calibration_line(cal)] if cal else []
    lines = [
        f"profiled run {_s(float(over['raw_wall_s']))},"
        f" estimated unprofiled {_s(float(over['corrected_wall_s']))}"
        f" (rlscope made it x{float(over.get('slowdown', 1.0)):.2f} slower)"
    ]
    for kind, s in (over.get("removed_s") or {}).items():
        if s > 0:
            lines.append(f"removed {_s(float(s))}: {removed_kind(kind)}")
    win = over.get("windows") or {}
    if win.get("switched"):
        lines.append(
            f"{' and '.join(win['switched'])} collectors were on in alternating windows"
            f" ({float(win.get('full_share', 0.0)):.0%} of the run); their cost was measured against the"
            " windows without them"
        )
    if float(over.get("not_removable_s") or 0.0) > 0:
        lines.append(
            f"{_s(float(over['not_removable_s']))} could not be removed (more than the time it was in)"
        )
    lines.append(_calibration_line(cal))
    return lines
