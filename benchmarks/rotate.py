"""Core rotation: a child process's threads moved through every allowed core, a few at a time
(benchmarks/process_noise.py's ``--rotate`` placements).

Why: on the cloud machines measured (BENCHMARKS.md §9, fifteenth session) each core has its own
slow speed, 1.3-1.5x, taken by the host for seconds at a time and independent of the other cores.
A process pinned to a few cores (or left where the scheduler keeps it) draws those cores' luck, so
two runs of one program differ by up to 1.5x and validate compares the draws. Moving the process
through every core, ``width`` at a time, makes its speed the average of many cores' states, as
Stabilizer (Curtsinger and Berger, ASPLOS 2013) re-randomizes memory layout during a run so that a
run's time becomes a sum of many independent draws.

Measured (BENCHMARKS.md §9, twenty-first session), it did not narrow the spread of unprofiled runs
on an H200 or an H100 and made them slower (medians +9% to +25% over unpinned runs), so ``rlscope
validate`` does not move its runs: this stays a benchmark, for the next machine whose noise may be
of the kind it averages.

Linux only (``sched_setaffinity`` on thread ids); elsewhere :func:`supported` is false.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Sequence

PERIOD_S = 0.05  # one hop of the window by default; a thread stays on a core for about width hops


def supported() -> bool:
    return hasattr(os, "sched_setaffinity") and os.path.isdir("/proc/self/task")


def windows(cores: Sequence[int], width: int, seed: int) -> list[frozenset[int]]:
    """The cycle of core sets: a random order of ``cores``, a window of ``width`` sliding one core
    a hop (so a thread on a core that stays in the window is not moved)."""
    order = list(cores)
    random.Random(seed).shuffle(order)
    n = len(order)
    return [frozenset(order[(k + i) % n] for i in range(width)) for k in range(n)]


def _threads(pid: int) -> list[int]:
    """Thread ids of ``pid`` and of its descendants (best effort: /proc/TID/children may be absent)."""
    out: list[int] = []
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        out += tids
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                pass
    return out


class Rotation:
    """Moves ``pid``'s threads (and its children's) to the next window every ``period_s`` until
    :meth:`stop`. ``hops`` counts the windows applied."""

    def __init__(self, pid: int, cycle: list[frozenset[int]], period_s: float = PERIOD_S) -> None:
        """``cycle`` from :func:`windows`; the process started on ``cycle[0]`` (its first hop is to
        ``cycle[1]``)."""
        self.pid = pid
        self.cycle = cycle
        self.period_s = period_s
        self.hops = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlscope-rotate", daemon=True)

    def start(self) -> Rotation:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        k = 1
        while not self._stop.wait(self.period_s):
            cores = self.cycle[k % len(self.cycle)]
            for tid in _threads(self.pid):
                with contextlib.suppress(OSError):  # the thread ended meanwhile
                    os.sched_setaffinity(tid, cores)
            self.hops += 1
            k += 1
