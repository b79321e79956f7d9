"""When a run keeps full event detail, and when it keeps aggregates only.

A training run lasts hours; its events do not fit a trace or an analyzer's memory, and their
detail is the same loop over and over. So detail (every event row, backend ops, GPU work) is kept
in *detail stretches*: the first ``first`` of the run (warm-up and the loop settling, the whole of a
short run), then ``length`` every ``every``. Aggregates cover the whole run
(rlscope/trace/aggregate.py).

A schedule counts either time or *iterations*: calls of the outermost operation on the main thread
(``200it,5000it,50it``: the first 200 iterations, then 50 every 5,000), which suits a loop whose
speed changes over the run. Time stretches are laid on the run's clock from one origin that every
process of a run shares (``ORIGIN_ENV``, set by ``rlscope run``), so all processes keep detail at the
same moments and their detail joins into one timeline (rlscope/trace/glue.py); iterations are each
process's own.

A stretch also ends once it holds ``STRETCH_ROWS`` rows of the process (events and the collectors'
rows: torch ops, GPU work): a fast loop writes 100 k rows a second with torch ops recorded, and a
minute of it is 6 M rows, more than the analysis holds by default (rlscope/trace/budget.py). The
writer cuts such a stretch at the flush that fills it (rlscope/trace/aggregate.py), and the next one
starts on schedule.
"""

from __future__ import annotations

import dataclasses
import os
import re
from decimal import Decimal
from typing import TYPE_CHECKING

from rlscope.errors import RLScopeError

if TYPE_CHECKING:
    import numpy as np

ORIGIN_ENV = "RLSCOPE_RUN_START_NS"  # perf_counter_ns at the run's start (one clock per host)
DEFAULT_SPEC = "60s,600s,10s"
NEVER = 2**62
# the rows a detail stretch holds: it ends at the flush that passes them, so a flush's rows more
# (a second of a fast loop, 100 k) still fit the analysis's auto budget (rlscope/trace/budget.py)
STRETCH_ROWS = 900_000
TIME, ITERATIONS = "ns", "it"  # a schedule's unit

_UNIT_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "min": 60 * 10**9, "h": 3600 * 10**9}


def _duration_ns(text: str, spec: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|m|min|h)?\s*", text)
    if m is None:
        raise RLScopeError(
            f"bad detail schedule {spec!r}: {text.strip()!r} is not a duration (e.g. 60s, 10m, 1h)"
            " or a number of iterations (e.g. 200it)"
        )
    # exact decimal arithmetic: a float's product may land a ns below the value written (0.123456789s)
    return int(Decimal(m.group(1)) * _UNIT_NS[m.group(2) or "s"])


def _seconds(ns: int) -> str:
    """``ns`` as a duration the parser reads back exactly: ``60s``, ``1.5s``, ``0.001s``."""
    return f"{ns // 10**9}.{ns % 10**9:09d}".rstrip("0").rstrip(".") + "s"


def _amount(text: str, spec: str) -> tuple[int, str]:
    """(value, unit) of one part: ns of a duration, or a count of iterations (``200it``)."""
    m = re.fullmatch(r"\s*(\d+)\s*it\s*", text)
    if m is not None:
        return int(m.group(1)), ITERATIONS
    return _duration_ns(text, spec), TIME


@dataclasses.dataclass(frozen=True)
class DetailSchedule:
    """Detail for the first ``first``, then for ``length`` at every multiple of ``every`` (none when
    ``every`` is 0): ns since the origin, or iterations (``unit``)."""

    first: int
    every: int = 0
    length: int = 0
    unit: str = TIME

    @classmethod
    def parse(cls, spec: str | DetailSchedule | None) -> DetailSchedule:
        """``all`` (detail for the whole run), ``FIRST`` or ``FIRST,EVERY,LENGTH`` (``60s,600s,10s``)."""
        if isinstance(spec, DetailSchedule):
            return spec
        text = DEFAULT_SPEC if spec is None else str(spec).strip()
        if text == "all":
            return cls(NEVER)
        parts = text.split(",")
        if len(parts) not in (1, 3):
            raise RLScopeError(f"bad detail schedule {text!r}: give 'all', FIRST or FIRST,EVERY,LENGTH")
        amounts = [_amount(part, text) for part in parts]
        units = {unit for _, unit in amounts}
        if len(units) > 1:
            raise RLScopeError(
                f"bad detail schedule {text!r}: give every part in time, or every one in iterations"
            )
        (unit,) = units
        first = amounts[0][0]
        if len(parts) == 1:
            return cls(first, unit=unit)
        every, length = amounts[1][0], amounts[2][0]
        if every and length >= every:
            return cls(NEVER)  # samples that touch each other: detail throughout
        return cls(first, every, length if every else 0, unit)

    @property
    def whole_run(self) -> bool:
        return self.first >= NEVER

    @property
    def iterations(self) -> bool:
        return self.unit == ITERATIONS

    def in_detail(self, t: int) -> bool:
        """Whether ``t`` (ns since the origin, or the iteration's index) lies in a detail stretch."""
        if t < self.first:
            return True
        return bool(self.every) and t % self.every < self.length

    def in_detail_each(self, t: np.ndarray) -> np.ndarray:
        """:meth:`in_detail` of every entry of ``t`` (an integer array) at once."""
        out = t < self.first
        if self.every:
            out |= (t >= 0) & (t % self.every < self.length)
        return out

    def next_change(self, t: int) -> int:
        """The first position after ``t`` at which ``in_detail`` changes (NEVER: none)."""
        if t < self.first:
            return self.first if not self.in_detail_after_first() else self._sample_end(self.first)
        if not self.every:
            return NEVER
        start = t - t % self.every
        if t - start < self.length:
            return start + self.length
        return start + self.every

    def in_detail_after_first(self) -> bool:
        return bool(self.every) and self.first % self.every < self.length

    def _sample_end(self, t: int) -> int:
        return t - t % self.every + self.length

    def to_env(self) -> str:
        """The schedule as ``--detail`` takes it, exactly: each part in seconds with up to 9 decimals,
        as a float's shortest form may be an exponent (``3.6e+06``) the parser does not take."""
        if self.whole_run:
            return "all"
        if self.iterations:
            return f"{self.first}it,{self.every}it,{self.length}it"
        return ",".join(_seconds(ns) for ns in (self.first, self.every, self.length))


def origin_ns(session_start_ns: int) -> int:
    """The schedule's origin on the events' clock: ``ORIGIN_ENV`` (the start of the ``rlscope run``
    this process belongs to) when it is set and not after ``session_start_ns``, else
    ``session_start_ns``."""
    raw = os.environ.get(ORIGIN_ENV, "")
    try:
        origin = int(raw)
    except ValueError:
        return session_start_ns
    return origin if 0 < origin <= session_start_ns else session_start_ns
