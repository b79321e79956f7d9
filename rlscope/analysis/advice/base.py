"""What every advice rule reads and returns: the run's facts in, findings out, and the words both share.

A rule is a pure function ``(Facts) -> list[Finding]``. :class:`Facts` wraps the summary
(:mod:`rlscope.analysis.summary`, corrected figures when a correction applied) and the per-operation
CUDA API evidence (:mod:`rlscope.analysis.gpu_calls`, raw, traced calls only). Rules take seconds from the
summary (whole run, corrected) and ratios or per-call counts from the evidence, and say which is which.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.categories import UNANNOTATED

if TYPE_CHECKING:
    from rlscope.analysis.gpu_calls import GpuCalls, OpGpuCalls

__all__ = ["Facts", "Finding", "count", "pct", "secs", "words_of"]


@dataclasses.dataclass(frozen=True)
class Finding:
    """One piece of advice: the change, the evidence from this trace, and the seconds it could win back.

    ``seconds_at_stake``: the time the change can remove at most, by the rule's own measure (each rule's
    docstring says which time that is); findings of different rules may count the same seconds.
    """

    rule: str
    operation: str  # the operation (or, for stragglers, the one that lags most); "" for the whole run
    evidence: str
    seconds_at_stake: float
    change: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Facts:
    """The run as the rules see it."""

    summary: Mapping[str, Any]
    gpu_calls: GpuCalls

    @property
    def wall_s(self) -> float:
        return float(self.summary.get("wall_s", 0.0))

    @property
    def process_time_s(self) -> float:
        """The run's wall with one process; the processes' walls summed with several (operation times
        are then CPU-thread seconds, which can add up to more than the run's wall)."""
        procs = self.summary.get("processes") or []
        if len(procs) > 1:
            return float(sum(p.get("wall_s", 0.0) for p in procs))
        return self.wall_s

    def operations(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The run's operations (not the unannotated time), longest first."""
        ops = self.summary.get("operations") or {}
        return [(n, o) for n, o in ops.items() if n != UNANNOTATED]

    def cpu_s(self, op: Mapping[str, Any], category: str) -> float:
        return float((op.get("categories") or {}).get(category, 0.0))

    def gpu_s(self, op: Mapping[str, Any], category: str) -> float:
        return float((op.get("gpu_categories") or {}).get(category, 0.0))

    def calls(self, name: str) -> OpGpuCalls | None:
        return self.gpu_calls.get(name)

    def api_run_s(self, name: str, op: Mapping[str, Any], traced_s: float) -> float:
        """Seconds of the run spent in the API calls that took ``traced_s`` of the traced ones: their
        share of the traced API time times the summary's ``cuda_api`` time (whole run, corrected)."""
        c = self.calls(name)
        summary_api = self.cpu_s(op, "cuda_api")
        if c is None or c.api_s <= 0 or summary_api <= 0:
            return traced_s
        return summary_api * min(traced_s / c.api_s, 1.0)


def secs(s: float) -> str:
    """A duration as people read it: 1.23 s, 45.6 ms, 7.8 µs, 120 ns (a unit from where the value
    rounds to 1.0 of it, so a sum a hair under 1 µs reads 1.0 µs, not 1000 ns)."""
    a = abs(s) / 0.9995
    if a >= 1.0:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    if a >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole > 0 else "-"


def count(n: float) -> str:
    return f"{round(n):,}"


def words_of(name: str) -> set[str]:
    """The lower-case words of an operation name (``select_action`` -> {"select", "action"})."""
    return {w for w in re.split(r"[^a-z0-9]+", name.lower()) if w}
