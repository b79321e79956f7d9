"""A suite's results against the committed baseline: PASS, IMPROVED or FAILED per figure.

    python -m benchmarks check results.json [--baseline benchmarks/baseline.json] [--machine h100]

The style of PyTorch's ``benchmarks/operator_benchmark``: one committed baseline
(``benchmarks/baseline.json``, keyed by machine: ``cpu-vm``, ``h100``, ``h200``), a fresh run of a
suite, and a verdict per figure within a tolerance. Each figure says which way is better:

- ``lower`` / ``higher`` (costs, slowdowns / throughputs): ``tolerance`` is relative. Worse than the
  baseline by more than it is FAILED, better by more than it is IMPROVED, else PASS.
- ``zero`` (a corrected error in percent, ideally 0): ``tolerance`` is in points of ``|value|``
  against ``|baseline|``; ``limit`` (the product's band, e.g. ±5% on a total) fails a figure beyond
  it whatever the baseline says.

A figure in the results with no baseline is NEW, a baseline figure the run did not produce is
MISSING, a baseline figure whose value is ``null`` is NOT MEASURED (a placeholder, never compared).
Only FAILED makes ``check`` exit non-zero: the others are information.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parent / "baseline.json"
TOLERANCE = {"lower": 0.25, "higher": 0.25, "zero": 3.0}  # relative, relative, points

PASS, IMPROVED, FAILED = "PASS", "IMPROVED", "FAILED"
NEW, MISSING, NOT_MEASURED = "NEW", "MISSING", "NOT MEASURED"


@dataclass(frozen=True)
class Verdict:
    """One figure's comparison, ready to print."""

    name: str
    status: str
    value: float | None
    baseline: float | None
    unit: str
    why: str


def judge(value: float, base: dict[str, Any]) -> tuple[str, str]:
    """(status, reason) of ``value`` against one baseline figure (``value`` not null)."""
    better = base.get("better", "lower")
    if better not in TOLERANCE:
        raise ValueError(f"unknown direction {better!r} (lower, higher or zero)")
    tol = float(base.get("tolerance", TOLERANCE[better]))
    ref = float(base["value"])
    if better == "zero":
        limit = base.get("limit")
        if limit is not None and abs(value) > float(limit):
            return FAILED, f"|{value:+.2f}| beyond the band ±{float(limit):g}"
        if abs(value) > abs(ref) + tol:
            return FAILED, f"|{value:+.2f}| over |{ref:+.2f}| + {tol:g}"
        if abs(value) < abs(ref) - tol:
            return IMPROVED, f"|{value:+.2f}| under |{ref:+.2f}| - {tol:g}"
        return PASS, f"within {tol:g} points of |{ref:+.2f}|"
    if ref == 0:
        raise ValueError("a lower/higher baseline of 0 has no relative tolerance: use 'zero'")
    ratio = value / ref
    worse = ratio > 1 + tol if better == "lower" else ratio < 1 - tol
    improved = ratio < 1 - tol if better == "lower" else ratio > 1 + tol
    text = f"{ratio:.2f}x the baseline (±{tol:.0%}, {better} is better)"
    return (FAILED if worse else IMPROVED if improved else PASS), text


def compare(results: dict[str, Any], baseline: dict[str, Any], machine: str | None = None) -> list[Verdict]:
    """Every figure of ``results`` and of the machine's baseline, judged (results order, then missing)."""
    machine = machine or results.get("machine")
    machines = baseline.get("machines", {})
    if machine not in machines:
        known = ", ".join(sorted(machines)) or "none"
        raise KeyError(f"no baseline for machine {machine!r} (known: {known})")
    base_figs: dict[str, dict[str, Any]] = machines[machine]["figures"]
    out: list[Verdict] = []
    for name, fig in results.get("figures", {}).items():
        value = fig["value"]
        unit = fig.get("unit", "")
        base = base_figs.get(name)
        if base is None:
            out.append(Verdict(name, NEW, value, None, unit, "no baseline figure"))
        elif base.get("value") is None:
            out.append(Verdict(name, NOT_MEASURED, value, None, unit, base.get("note", "not yet measured")))
        elif value is None:
            out.append(Verdict(name, MISSING, None, base["value"], unit, "the run gave no value"))
        else:
            status, why = judge(float(value), base)
            out.append(Verdict(name, status, value, base["value"], unit, why))
    suite = results.get("suite")
    for name, base in base_figs.items():
        if name in results.get("figures", {}):
            continue
        if suite is not None and suite not in base.get("suites", [suite]):
            continue  # a figure another suite measures
        status = NOT_MEASURED if base.get("value") is None else MISSING
        out.append(Verdict(name, status, None, base.get("value"), base.get("unit", ""), base.get("note", "")))
    return out


def render(verdicts: list[Verdict]) -> str:
    """A plain table (CI logs have no terminal) and a count line."""
    lines = [f"{'figure':<44} {'status':<12} {'value':>12} {'baseline':>12} {'unit':<8} why"]

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.4g}"

    for v in verdicts:
        lines.append(
            f"{v.name:<44} {v.status:<12} {num(v.value):>12} {num(v.baseline):>12} {v.unit:<8} {v.why}"
        )
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    lines.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return "\n".join(lines)


def load(path: str | Path) -> dict[str, Any]:
    """A results or baseline file; a clear error for a missing or malformed one."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise SystemExit(f"benchmarks: {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"benchmarks: {path}: not JSON ({e})") from None
