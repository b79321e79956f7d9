"""The reference Python loop: how fast this machine runs Python code at the moment.

Why a module of its own: a shared host runs Python 1.4-1.9x slower for seconds to minutes at a
time, and the costs of rlscope's own Python code (the dispatch around the scope
and category boundaries, the writer's conversions) move with it. ``rlscope calibrate`` judges those
costs per ns of this loop, and a profiled session times the same loop at its start, at every window
switch and at its end, so the analysis prices them at the speed the run itself had
(:func:`rlscope.overhead.correct.residual.at_run_speed`), not at whatever speed the calibration happened to
see. One module, so that both time exactly the same code.
"""

from __future__ import annotations

import time

# a session's samples: few iterations (~0.15 ms on a 2-core cloud VM), paid at every window switch
SESSION_ITERATIONS = 500
SESSION_TIMINGS = 2
# the events' ``parent`` column holds a sample in picoseconds per iteration (an integer column)
PS_PER_NS = 1000


def work(state: list[int]) -> None:
    """A little Python between events (~0.3 us): a loop never runs the profiler's code back to back."""
    state[0] = (state[0] * 1103515245 + 12345) & 0x7FFFFFFF


def spin(n: int) -> None:
    """Plain Python, no events: the job that background threads stall through the GIL."""
    state = [1]
    for _ in range(n):
        work(state)


def reference_ns(n: int = 2000, timings: int = 3) -> float:
    """The thread's CPU ns per iteration of :func:`spin`, the least of ``timings`` timings of ``n``
    iterations: CPU time leaves out a wait for the core, and the least timing the rest of the
    disturbances (the calibration's figure, ``ref_ns`` beside each cost)."""
    best = None
    for _ in range(timings):
        c0 = time.thread_time_ns()
        spin(n)
        dt = time.thread_time_ns() - c0
        best = dt if best is None else min(best, dt)
    return float(best or 0) / n


def session_sample_ps() -> int:
    """A session's sample, in ps per iteration (the events' integer ``parent`` column; -1: none)."""
    try:
        ns = reference_ns(SESSION_ITERATIONS, SESSION_TIMINGS)
    except Exception:  # never break the user's job
        return -1
    return int(ns * PS_PER_NS) if ns > 0 else -1
