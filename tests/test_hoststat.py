"""rlscope.overhead.validate.hoststat: a run's cores' busy and stolen time from /proc/stat, and its use."""

from __future__ import annotations

import os

import pytest

from rlscope.overhead.validate import hoststat, runner

STAT = """cpu  900 0 300 5000 10 0 5 70 0 0
cpu0 100 0 50 2000 5 0 1 10 0 0
cpu1 200 5 60 1500 3 2 2 20 0 0
cpu2 600 0 190 1500 2 0 2 40 0 0
intr 12345
"""


def test_core_seconds_sums_the_named_cores(tmp_path, monkeypatch):
    f = tmp_path / "stat"
    f.write_text(STAT)
    monkeypatch.setattr(hoststat, "_STAT", f)
    hz = os.sysconf("SC_CLK_TCK")
    both = hoststat.core_seconds({0, 1})
    assert both == {"busy": pytest.approx((151 + 269) / hz), "steal": pytest.approx(30 / hz)}
    every = hoststat.core_seconds()  # the per-core lines only, never the "cpu" total line
    assert every["steal"] == pytest.approx(70 / hz)
    later = f.read_text().replace("cpu1 200 5 60 1500 3 2 2 20", "cpu1 300 5 60 1500 3 2 2 45")
    before = hoststat.core_seconds({1})
    f.write_text(later)
    d = hoststat.delta(before, hoststat.core_seconds({1}))
    assert d == {"busy": pytest.approx(100 / hz), "steal": pytest.approx(25 / hz)}


def test_missing_stat_gives_none(tmp_path, monkeypatch):
    monkeypatch.setattr(hoststat, "_STAT", tmp_path / "absent")
    assert hoststat.core_seconds() is None
    assert hoststat.delta(None, {"busy": 1.0, "steal": 0.0}) is None


def test_steal_share_is_stolen_core_seconds_per_second_of_the_run():
    run = runner.ChildRun("unprofiled", 0, 0, 2.0, host={"busy": 1.8, "steal": 0.1, "cores": 4})
    assert runner.steal_share(run) == pytest.approx(0.05)
    assert runner.steal_share(runner.ChildRun("unprofiled", 0, 0, 2.0)) is None
