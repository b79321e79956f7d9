"""Core rotation (rlscope/rotate.py, validate's --rotate): the windows cover every core, a child and
its threads really move through them, and bad arguments get one line."""

from __future__ import annotations

import os
import sys

import pytest

from rlscope import rotate
from rlscope.errors import RLScopeError

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
    from rlscope.validate import run_child

    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: nothing to move through")
    cycle = rotate.windows(allowed, 1, seed=0)
    code, _, tail = run_child([sys.executable, "-c", _CHILD], dict(os.environ), False, None, cycle, 0.02)
    assert code == 0, tail
    main_sets, other_sets, widest = (int(x) for x in tail[-1].split())
    assert main_sets >= 2 and other_sets >= 2  # both threads were moved, more than once
    assert widest == 1  # and never allowed more than the window
    assert os.sched_getaffinity(0) == set(allowed)  # the parent's own affinity is back


def test_rotation_stops_with_the_child_and_counts_its_hops() -> None:
    import subprocess

    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    mover = rotate.Rotation(proc.pid, rotate.windows(allowed, 1, 0), 0.02).start()
    proc.wait()
    mover.stop()  # the child's threads are gone: each hop after that is a no-op, not an error
    assert 5 <= mover.hops <= 30


def test_rotate_arguments_are_checked() -> None:
    from rlscope.validate import parse_args

    n = len(os.sched_getaffinity(0))
    with pytest.raises(RLScopeError, match="--rotate"):
        parse_args(["--rotate", str(n), "--", "python", "-c", "pass"])  # nothing left to move to
    with pytest.raises(RLScopeError, match="--rotate-every"):
        parse_args(["--rotate", "1", "--rotate-every", "0", "--", "python", "-c", "pass"])
    if n > 1:
        opts = parse_args(["--rotate", "1", "--rotate-every", "20", "--", "python", "-c", "pass"])
        assert opts.rotate == 1 and opts.rotate_period_s == pytest.approx(0.02)
