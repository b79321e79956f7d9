"""Real clock: busy-wait CPU loops of known length in nested scopes, and a fake simulator.

rlscope must recover each operation's exclusive time within 5%.
"""

from __future__ import annotations

import time

import pytest

import rlscope
from tests.conftest import real_clock, summary_of


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class FakeSimulator:
    """A gymnasium-like env whose step burns a known amount of CPU."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s

    @rlscope.simulator
    def step(self) -> None:
        busy_wait(self.step_s)


@real_clock()
def test_busy_wait_ground_truth(tmp_path):
    sim = FakeSimulator(0.020)
    iters = 5
    with rlscope.profile(tmp_path / "t", backend=False), rlscope.phase("training"):
        for _ in range(iters):
            with rlscope.scope("inference"):
                busy_wait(0.015)
            with rlscope.scope("simulation"):
                busy_wait(0.005)
                sim.step()
            with rlscope.scope("backprop"):
                busy_wait(0.010)
                with rlscope.scope("optimizer"):
                    busy_wait(0.025)
    s = summary_of(tmp_path / "t")
    ops = s["operations"]
    expect = {
        "inference": (0.015, {"python": 0.015}),
        "simulation": (0.025, {"python": 0.005, "simulator": 0.020}),
        "backprop": (0.010, {"python": 0.010}),
        "optimizer": (0.025, {"python": 0.025}),
    }
    for name, (excl, cats) in expect.items():
        assert ops[name]["exclusive_s"] == pytest.approx(excl * iters, rel=0.05), name
        assert ops[name]["calls"] == iters
        for cat, secs in cats.items():
            assert ops[name]["categories"][cat] == pytest.approx(secs * iters, rel=0.05), (name, cat)
    assert ops["backprop"]["total_s"] == pytest.approx(0.035 * iters, rel=0.05)
    total = sum(o["exclusive_s"] for o in ops.values()) + s["unannotated_s"]
    assert total == pytest.approx(s["wall_s"], rel=1e-9)
