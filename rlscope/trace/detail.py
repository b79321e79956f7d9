"""When a run keeps full event detail, and when it keeps aggregates only.

A training run lasts hours; its events do not fit a trace or an analyzer's memory, and their
detail is the same loop over and over. So detail (every event row, backend ops, GPU work) is kept
in *detail stretches*: the first ``first`` of the run (warm-up and the loop settling, the whole of a
short run), then ``length`` every ``every``. Aggregates cover the whole run
(rlscope/trace/aggregate.py). The stretches are laid on the run's clock from one origin that every
process of a run shares (``ORIGIN_ENV``, set by ``rlscope run``), so all processes keep detail at the
same moments and their detail joins into one timeline (rlscope/trace/glue.py).
"""

from __future__ import annotations

import dataclasses
import os
import re

from rlscope.errors import RLScopeError

ORIGIN_ENV = "RLSCOPE_RUN_START_NS"  # perf_counter_ns at the run's start (one clock per host)
DEFAULT_SPEC = "60s,600s,10s"
NEVER = 2**62

_UNIT_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "min": 60 * 10**9, "h": 3600 * 10**9}


def _duration_ns(text: str, spec: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|m|min|h)?\s*", text)
    if m is None:
        raise RLScopeError(
            f"bad detail schedule {spec!r}: {text.strip()!r} is not a duration (e.g. 60s, 10m, 1h)"
        )
    return int(float(m.group(1)) * _UNIT_NS[m.group(2) or "s"])


@dataclasses.dataclass(frozen=True)
class DetailSchedule:
    """Detail for the first ``first_ns``, then for ``length_ns`` at every multiple of ``every_ns``
    (none when ``every_ns`` is 0), in ns since the origin."""

    first_ns: int
    every_ns: int = 0
    length_ns: int = 0

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
        first = _duration_ns(parts[0], text)
        if len(parts) == 1:
            return cls(first)
        every, length = _duration_ns(parts[1], text), _duration_ns(parts[2], text)
        if every and length >= every:
            return cls(NEVER)  # samples that touch each other: detail throughout
        return cls(first, every, length if every else 0)

    @property
    def whole_run(self) -> bool:
        return self.first_ns >= NEVER

    def describe(self) -> str:
        if self.whole_run:
            return "detail for the whole run"
        first = f"detail for the first {self.first_ns / 1e9:g} s"
        if not self.every_ns:
            return first
        return f"{first}, then {self.length_ns / 1e9:g} s every {self.every_ns / 1e9:g} s"

    def in_detail(self, t: int) -> bool:
        """Whether ``t`` (ns since the origin) lies in a detail stretch."""
        if t < self.first_ns:
            return True
        return bool(self.every_ns) and t % self.every_ns < self.length_ns

    def next_change(self, t: int) -> int:
        """The first time after ``t`` at which ``in_detail`` changes (NEVER: none)."""
        if t < self.first_ns:
            return self.first_ns if not self.in_detail_after_first() else self._sample_end(self.first_ns)
        if not self.every_ns:
            return NEVER
        start = t - t % self.every_ns
        if t - start < self.length_ns:
            return start + self.length_ns
        return start + self.every_ns

    def in_detail_after_first(self) -> bool:
        return bool(self.every_ns) and self.first_ns % self.every_ns < self.length_ns

    def _sample_end(self, t: int) -> int:
        return t - t % self.every_ns + self.length_ns

    def to_env(self) -> str:
        if self.whole_run:
            return "all"
        return f"{self.first_ns / 1e9:g}s,{self.every_ns / 1e9:g}s,{self.length_ns / 1e9:g}s"


def origin_ns(session_start_ns: int) -> int:
    """The run's origin: the ``rlscope run`` that started this process, else this session's start."""
    raw = os.environ.get(ORIGIN_ENV, "")
    try:
        origin = int(raw)
    except ValueError:
        return session_start_ns
    return origin if 0 < origin <= session_start_ns else session_start_ns
