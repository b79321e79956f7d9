"""The speed of a validation run's main thread, sampled alike in every mode of ``rlscope validate``.

Why: on the machines measured each core runs at one of two speeds about 1.5x apart, for seconds at
a time, independently of the other cores (:mod:`rlscope.overhead.validate.speed_match`). Two
processes of one program then differ by 10-20% by the speeds their main threads drew, which is as
much as rlscope's whole cost: a plain comparison of separate runs measures the host as much as the
profiler. This probe measures the draw, so :func:`rlscope.overhead.validate.verdict.compare` can set
each run's times at one common speed.

How: a thread would sample another core, so a ``SIGALRM`` handler, which Python runs on the main
thread, times the reference loop that prices rlscope's own Python costs
(:func:`rlscope.overhead.correct.reference.spin`, ``LOOP`` iterations, ~60 us) in thread CPU time
(a wait for the core is not speed) every ``PERIOD_S``: 0.07% of the run, the same in every mode. A
run's level is the median of its samples inside the measured region.

Each sample first runs ``WARM`` iterations untimed, then times ``LOOP``. A short loop run right after
the program's own code measures the caches that code left as much as the core: 40 iterations took
15-19 us, against 6-8 us run a second time (SB3 PPO, CPU VM), and under a session, whose recording
keeps more of the interpreter warm, they read 2.6-6.2% faster than without one in the same process
(six experiments alternating the two, 300-450 samples a side; -4.2% on average). Set at that speed,
the profiled runs' times came out too long by about as much times the elasticity (SB3 PPO on the
CPU VM: the profiled runs' probe read 6% faster than the unprofiled runs', and the total +13.0%
against +0.5% unadjusted). Warmed, 400 iterations read 0.9%, 1.8% and 1.3% faster under a session
on the CPU VM (the last: 16 alternations of SB3 PPO's ``learn()``), and on an H100 under GPU tracing
0.6% faster (12 alternations); in the session's light and full windows alike within 1%.

The probe stays off where the program has a ``SIGALRM`` handler or an interval timer of its own, and
in twin runs (both runs take turns on one core: they share its speed by construction). A forked
child inherits the handler but not the timer, so it takes no samples.
"""

from __future__ import annotations

import signal
import statistics
import threading
import time
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from rlscope.overhead.correct.reference import spin

PERIOD_S = 0.1
WARM = 40  # iterations run untimed before each sample
LOOP = 400  # iterations timed per sample: ~60 us at 0.15 us an iteration


class SpeedProbe:
    """Samples (time, ns per loop iteration) on the main thread while started."""

    def __init__(self, clock: Any = time.perf_counter_ns, cpu_clock: Any = time.thread_time_ns) -> None:
        self.clock = clock
        self.cpu_clock = cpu_clock
        self.at: array = array("q")
        self.ns: array = array("q")
        self.running = False

    def _sample(self, signum: int, frame: Any) -> None:
        spin(WARM)  # untimed: the caches the program left are not the core's speed
        c0 = self.cpu_clock()
        spin(LOOP)
        self.ns.append(self.cpu_clock() - c0)
        self.at.append(self.clock())

    def start(self) -> bool:
        """Start sampling; False (and nothing changed) where the program's own signal use or a
        thread other than the main one rules the probe out."""
        if threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
            return False
        if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
            return False
        signal.signal(signal.SIGALRM, self._sample)
        signal.siginterrupt(signal.SIGALRM, False)  # a blocking call the signal lands in resumes
        signal.setitimer(signal.ITIMER_REAL, PERIOD_S, PERIOD_S)
        self.running = True
        return True

    def stop(self) -> None:
        """Stop the timer and give the signal back its default action (idempotent)."""
        if not self.running:
            return
        self.running = False
        signal.setitimer(signal.ITIMER_REAL, 0.0, 0.0)
        if signal.getsignal(signal.SIGALRM) == self._sample:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)

    def samples(self, regions: Iterable[tuple[int, int]] = ()) -> list[list[float]]:
        """[clock reading, ns per iteration] of each sample inside ``regions`` ((start, end) clock
        readings; none given: every sample)."""
        spans = list(regions)
        return [
            [at, ns / LOOP]
            for at, ns in zip(self.at, self.ns, strict=True)
            if not spans or _inside(at, spans)
        ]

    def level(self, regions: Iterable[tuple[int, int]] = ()) -> dict[str, float] | None:
        """The median ns per iteration of the samples inside ``regions`` (none given: every
        sample), with their count; None without samples."""
        return level(self.samples(regions))


def level(
    samples: Sequence[Sequence[float]], regions: Iterable[tuple[int, int]] | None = None
) -> dict[str, float] | None:
    """The median ns per iteration of ``samples`` ([clock reading, ns per iteration]) inside
    ``regions`` (None: all of them), with their count; None without any."""
    spans = None if regions is None else list(regions)
    picked = [ns for at, ns in samples if spans is None or _inside(at, spans)]
    if not picked:
        return None
    return {"ns_per_iteration": statistics.median(picked), "samples": len(picked)}


def _inside(at: float, spans: list[tuple[int, int]]) -> bool:
    return any(a <= at <= b for a, b in spans)
