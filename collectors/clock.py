"""Mapping another clock (CUPTI's, Kineto's Unix time) onto the events' clock, perf_counter_ns."""

from __future__ import annotations

import time
from collections.abc import Callable


def clock_offset(read_other: Callable[[], int], tries: int = 5) -> int:
    """other - perf_counter_ns, from the reading bracketed most tightly by two perf_counter reads."""
    best: tuple[int, int] | None = None
    for _ in range(tries):
        a = time.perf_counter_ns()
        other = read_other()
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, other - (a + b) // 2)
    assert best is not None
    return best[1]
