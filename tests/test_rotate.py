"""Core rotation (benchmarks/rotate.py, process_noise.py's --rotate placements): the windows cover
every core, and a child and its threads really move through them."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
import rotate  # benchmarks/rotate.py

pytestmark = pytest.mark.skipif(not rotate.supported(), reason="no thread affinity through /proc")


def test_windows_slide_one_core_a_hop_and_cover_every_core() -> None:
    cores = [0, 1, 2, 3, 4, 5, 6, 7]
    cycle = rotate.windows(cores, 3, seed=5)
    assert len(cycle) == len(cores)
    assert all(len(w) == 3 for w in cycle)
    for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
        assert len(a & b) == 2  # one core leaves, one comes: threads on the others stay
    for c in cores:  # each core in exactly `width` windows: every core weighs the same
        assert sum(c in w for w in cycle) == 3
    assert rotate.windows(cores, 3, seed=5) == cycle and rotate.windows(cores, 3, seed=6) != cycle


# the child records, for 0.8 s, the cores its main thread and a second thread were allowed
_CHILD = """
import os, threading, time
seen = {"main": set(), "other": set()}
def watch(key):
    t = time.time()
    while time.time() - t < 0.8:
        seen[key].add(frozenset(os.sched_getaffinity(0)))
        time.sleep(0.005)
th = threading.Thread(target=watch, args=("other",)); th.start(); watch("main"); th.join()
print(len(seen["main"]), len(seen["other"]), max(len(s) for s in seen["main"] | seen["other"]))
"""


def test_a_child_and_its_threads_move_through_the_windows() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: nothing to move through")
    cycle = rotate.windows(allowed, 1, seed=0)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cycle[0])  # the child starts on the first window, as process_noise starts it
    try:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    finally:
        os.sched_setaffinity(0, before)
    mover = rotate.Rotation(proc.pid, cycle, 0.02).start()
    out, _ = proc.communicate(timeout=60)
    mover.stop()
    assert proc.returncode == 0, out
    main_sets, other_sets, widest = (int(x) for x in out.split())
    assert main_sets >= 2 and other_sets >= 2  # both threads were moved, more than once
    assert widest == 1  # and never allowed more than the window
    assert os.sched_getaffinity(0) == set(allowed)  # the parent's own affinity is back


def test_rotation_stops_with_the_child_and_counts_its_hops() -> None:
    import time

    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    mover = rotate.Rotation(proc.pid, rotate.windows(allowed, 1, 0), 0.02).start()
    proc.wait()
    mover.stop()  # the child's threads are gone: each hop after that is a no-op, not an error
    elapsed = time.perf_counter() - t0
    assert 5 <= mover.hops <= elapsed / 0.02 + 1  # one hop a period at most, however slow the start
