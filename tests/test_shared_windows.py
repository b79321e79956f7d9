"""The shared window grid of a distributed job: every process derives the same windows from the clock."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rlscope
from rlscope.runtime.windows import SharedWindows, shared_windows_wanted
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from tests.conftest import FakeClock

PAIR = 1_000_000  # ns


def test_next_change_is_where_the_mode_changes():
    """Brute force over fine steps: the mode is constant between next_change points, and every
    change of mode falls on one."""
    grid = SharedWindows(PAIR, 0.3)
    t, end = 0, 40 * PAIR
    times = np.arange(0, end, 997)
    modes = np.array([grid.mode_at(int(x)) for x in times])
    changes = set(times[1:][modes[1:] != modes[:-1]].tolist())
    points = []
    while t < end:
        t = grid.next_change(t)
        points.append(t)
    for c in changes:  # the first sampled time after each change lies within one step of a point
        assert any(0 <= c - p < 997 for p in points), c
    for a, b in itertools.pairwise(points):  # constant in between
        inner = times[(times >= a) & (times < b)]
        assert len({grid.mode_at(int(x)) for x in inner}) <= 1


@pytest.mark.parametrize("share", [0.3, 0.5])
def test_each_phase_of_a_period_is_full_with_probability_full_share(share):
    """A loop whose period equals the pair's length still finds its calls full ``share`` of the time."""
    grid = SharedWindows(PAIR, share)
    for phase in (0, PAIR // 3, PAIR - 1):
        full = [grid.mode_at(k * PAIR + phase) == S.WINDOW_FULL for k in range(4000)]
        assert abs(np.mean(full) - share) < 0.03


def test_two_processes_switch_at_the_same_times(tmp_path, monkeypatch):
    """Two sessions (two ranks) on one clock, starting at different times and with different loops,
    are in the same kind of window whenever both are past a scope exit."""
    monkeypatch.setenv("RLSCOPE_SHARED_WINDOWS", "1")
    monkeypatch.setattr("rlscope.runtime.windows.SHARED_PAIR_S", PAIR / 1e9)  # the grid's pair: 1 ms here
    assert shared_windows_wanted()
    traces = []
    for rank, (start, step) in enumerate([(0, 7_000), (333_333, 11_000)]):
        clock = FakeClock()
        clock.now = 10 * PAIR + start
        sess = rlscope.profile(tmp_path / f"rank{rank}", backend=False, gpu=False, window_s=PAIR / 2e9)
        sess.clock = clock

        class Toggler:
            def set_enabled(self, on: bool) -> None:
                pass

            def stop(self) -> None:
                pass

        with sess:
            sess.add_toggler(Toggler())
            while clock.now < 60 * PAIR:
                with rlscope.scope("step"):
                    clock.advance(step)
        traces.append(load_trace(str(tmp_path / f"rank{rank}")))
    grid = SharedWindows(PAIR, 0.5)
    for trace in traces:
        (proc,) = trace.processes
        ev = proc.events
        kind, ts, mode = (ev.column(c).to_numpy() for c in ("kind", "ts_ns", "id"))
        w = kind == S.WINDOW
        switches = list(zip(ts[w].tolist(), mode[w].tolist(), strict=True))[2:]  # past the cold start
        assert len(switches) > 20
        for t, m in switches:  # each switch takes the grid's mode, at most one loop step late
            assert m == grid.mode_at(t), t
            assert grid.mode_at(t - 12_000) != m or grid.next_change(t - 12_000) <= t


def test_only_distributed_ranks_share_by_default(monkeypatch):
    monkeypatch.delenv("RLSCOPE_SHARED_WINDOWS", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert not shared_windows_wanted()
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert shared_windows_wanted()
    monkeypatch.setenv("RLSCOPE_SHARED_WINDOWS", "0")
    assert not shared_windows_wanted()
