"""What every advice rule reads and returns: the run's facts in, findings out, and the words both share.

A rule is a pure function ``(Facts) -> list[Finding]``. :class:`Facts` wraps the summary
(:mod:`rlscope.analysis.summary`, corrected figures when a correction applied) and the per-operation
CUDA API evidence (:mod:`rlscope.analysis.gpu_calls`, raw, traced calls only). Rules take seconds from the
summary (whole run, corrected) and ratios or per-call counts from the evidence, and say which is which.

A share or ratio a rule compares with its line must clear the line by a margin (:func:`clears`): repeated
runs of one command move an operation's shares by a point or two, and a finding that comes and goes with
them is noise, not advice.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.analysis.advice import program
from rlscope.analysis.roles import headline_wall_s
from rlscope.categories import UNANNOTATED

if TYPE_CHECKING:
    from rlscope.analysis.gpu_calls import GpuCalls, OpGpuCalls

__all__ = [
    "MAX_NOISE_BAND",
    "NOISE_Z",
    "RATIO_MARGIN",
    "SHARE_MARGIN",
    "Facts",
    "Finding",
    "clears",
    "count",
    "pct",
    "secs",
    "words_of",
]

SHARE_MARGIN = 0.05
"""Points of share (0.05: five) by which a share must clear a rule's line, whichever side the rule wants
it on. Three runs of one CleanRL command put its inference's Python share at 49%, 51% and 50.4%: a line
at 50% with no band gave a finding, none, and a finding. Five points is over twice that spread."""

RATIO_MARGIN = 0.10
"""Relative margin (10%) by which a ratio (launch to kernel time, a worker's busy time to the median)
must clear its line: the same run-to-run spread, on a quantity with no fixed scale."""

NOISE_Z = 1.0
"""Standard deviations of a share's own noise (the summary's ``noise_s``: how much the sum behind it
would move between runs, from its instances' spread) that widen the band when they exceed
``SHARE_MARGIN``: a short run with few, uneven calls needs a wider band. One, not two: the noise of a
sum includes the machine's drift over the run, which moves both sides of a share together and mostly
cancels in it."""

MAX_NOISE_BAND = 0.10
"""The widest band a share's own noise can set (ten points). A noise figure past it comes from one
instance far from the others, typically an operation's first call paying a warm-up (allocations, lazy
initialization) that every run of the program repeats, so it says little of how runs differ, and a band
that wide would silence a 54% update in a short run."""


DEFAULT_REFERENCE_NS = 114.0
"""ns an iteration of rlscope's reference loop (rlscope/overhead/correct/reference.py) assumed where a
trace timed none and has no calibration: a calibrated machine's usual speed (an H200 host's)."""


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
    # further operations the finding speaks for (one change for several): rules it supersedes stay
    # silent on them too; not part of the summary's advice entry
    covers: tuple[str, ...] = dataclasses.field(default=(), compare=False)
    # the CPU categories of ``operation`` (or "gpu") whose time is at stake: the what-if caps the stake
    # at what making them infinitely fast saves the run (rlscope/analysis/whatif.py); () : not capped
    parts: tuple[str, ...] = dataclasses.field(default=(), compare=False)
    # the findings this one superseded (rule, operation, seconds at stake): the summary lists them
    # under ``hides``, so a change the run does not lead with (compiling, where acting on the CPU wins)
    # still has its number
    hides: tuple[tuple[str, str, float], ...] = dataclasses.field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("covers", "parts", "hides")}
        if self.hides:
            out["hides"] = [{"rule": r, "operation": o, "seconds_at_stake": s} for r, o, s in self.hides]
        return out


@dataclasses.dataclass(frozen=True)
class Facts:
    """The run as the rules see it."""

    summary: Mapping[str, Any]
    gpu_calls: GpuCalls

    @functools.cached_property
    def library(self) -> str:
        """The RL library running the program (:func:`rlscope.analysis.advice.program.library`): the
        changes are said in its words."""
        return program.library(self.summary)

    @property
    def wall_s(self) -> float:
        return float(self.summary.get("wall_s", 0.0))

    @property
    def process_time_s(self) -> float:
        """What the headline operations' times add up to: the run's wall with one headline process,
        their walls summed with several (rlscope.analysis.roles.headline_wall_s)."""
        return headline_wall_s(dict(self.summary))

    def operations(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The run's operations (not the unannotated time), longest first."""
        ops = self.summary.get("operations") or {}
        return [(n, o) for n, o in ops.items() if n != UNANNOTATED]

    def operations_named(self, words: frozenset[str], min_calls: int) -> list[tuple[str, Mapping[str, Any]]]:
        """The operations whose names hold one of ``words`` (:func:`words_of`), with own time and at least
        ``min_calls`` calls: the ones a rule about acting or updating looks at."""

        def counts(o: Mapping[str, Any]) -> bool:
            return float(o.get("exclusive_s", 0.0)) > 0 and int(o.get("calls", 0)) >= min_calls

        return [(n, o) for n, o in self.operations() if words_of(n) & words and counts(o)]

    def cpu_s(self, op: Mapping[str, Any], category: str) -> float:
        return float((op.get("categories") or {}).get(category, 0.0))

    def steady_cpu_s(self, op: Mapping[str, Any], category: str) -> float:
        """A CPU category's time less its warm-up (the summary's ``one_time_s``: what the first call,
        and any that compiled, took beyond a typical call), which a change to the per-call work does
        not remove."""
        warm = ((op.get("one_time_s") or {}).get("categories") or {}).get(category, 0.0)
        return max(self.cpu_s(op, category) - float(warm), 0.0)

    @property
    def reference_loop_ns(self) -> float:
        """The run's Python speed: ns an iteration of rlscope's reference loop (the summary's
        ``overhead.reference_loop_ns``), else the calibration's, else ``DEFAULT_REFERENCE_NS``. Costs
        measured elsewhere in reference loops are priced at the run's speed with it."""
        run = (self.summary.get("overhead") or {}).get("reference_loop_ns")
        if run:
            return float(run)
        costs = (self.summary.get("calibration") or {}).get("costs_ns") or {}
        return float((costs.get("scope") or {}).get("ref_ns") or DEFAULT_REFERENCE_NS)

    def gpu_s(self, op: Mapping[str, Any], category: str) -> float:
        return float((op.get("gpu_categories") or {}).get(category, 0.0))

    def noise_s(self, op: Mapping[str, Any], measure: str) -> float:
        """One standard deviation of an operation's sum (``total_s``, ``exclusive_s`` or a CPU category)
        between runs, from the summary's ``noise_s``; 0 when the trace cannot tell."""
        noise = op.get("noise_s") or {}
        sd = (
            noise.get(measure)
            if measure in ("total_s", "exclusive_s")
            else (noise.get("categories") or {}).get(measure)
        )
        return float(sd or 0.0)

    def processes(self) -> list[Mapping[str, Any]]:
        """The summary's per-process entries (one with a single process)."""
        return list(self.summary.get("processes") or [])

    def has_backend(self) -> bool:
        """Whether the trace records torch ops (the backend recorder): without it their time is Python's."""
        return float((self.summary.get("categories") or {}).get("backend", 0.0)) > 0

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


def clears(value: float, line: float, above: bool = True, sd: float = 0.0, ratio: bool = False) -> bool:
    """Whether ``value`` lies beyond ``line`` on the side the rule wants (``above`` or below) by the
    margin: ``SHARE_MARGIN`` points of share, or ``NOISE_Z`` times its own noise ``sd`` (up to
    ``MAX_NOISE_BAND``) when that is wider; with ``ratio``, ``RATIO_MARGIN`` of the line. Inside the
    band the rule says nothing, so runs that differ by their usual noise give the same findings."""
    band = RATIO_MARGIN * line if ratio else SHARE_MARGIN
    band = max(band, min(NOISE_Z * sd, MAX_NOISE_BAND))
    return value >= line + band if above else value <= line - band


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
