"""Real clock: busy-wait CPU loops in nested scopes, and a fake simulator.

rlscope must recover each operation's exclusive time and each category's within 5% of the time the
program itself measured inside the scope. The truth is measured, not nominal: on a loaded machine a
preemption stretches a busy-wait, and that time is in the operation too. Marked ``slow`` (real
clock): ``python -m pytest -m slow`` runs it.
"""

from __future__ import annotations

import time

import pytest

import rlscope
from tests.conftest import summary_of


def busy_wait(seconds: float) -> float:
    """Spin for ``seconds``; returns the seconds it really took."""
    t0 = time.perf_counter()
    end = t0 + seconds
    while (t := time.perf_counter()) < end:
        pass
    return t - t0


class FakeSimulator:
    """A gymnasium-like env whose step burns a known amount of CPU."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.spent = 0.0

    @rlscope.simulator
    def step(self) -> None:
        self.spent += busy_wait(self.step_s)


@pytest.mark.slow
def test_busy_wait_ground_truth(tmp_path):
    sim = FakeSimulator(0.020)
    iters = 5
    spent = dict.fromkeys(("inference", "simulation", "backprop", "optimizer"), 0.0)
    with rlscope.profile(tmp_path / "t", backend=False), rlscope.phase("training"):
        for _ in range(iters):
            with rlscope.scope("inference"):
                spent["inference"] += busy_wait(0.015)
            with rlscope.scope("simulation"):
                spent["simulation"] += busy_wait(0.005)
                sim.step()
            with rlscope.scope("backprop"):
                spent["backprop"] += busy_wait(0.010)
                with rlscope.scope("optimizer"):
                    spent["optimizer"] += busy_wait(0.025)
    s = summary_of(tmp_path / "t")
    ops = s["operations"]
    expect = {  # exclusive seconds, and per category
        "inference": (spent["inference"], {"python": spent["inference"]}),
        "simulation": (
            spent["simulation"] + sim.spent,
            {"python": spent["simulation"], "simulator": sim.spent},
        ),
        "backprop": (spent["backprop"], {"python": spent["backprop"]}),
        "optimizer": (spent["optimizer"], {"python": spent["optimizer"]}),
    }
    for name, (excl, cats) in expect.items():
        assert ops[name]["exclusive_s"] == pytest.approx(excl, rel=0.05), name
        assert ops[name]["calls"] == iters
        for cat, secs in cats.items():
            assert ops[name]["categories"][cat] == pytest.approx(secs, rel=0.05), (name, cat)
    assert ops["backprop"]["total_s"] == pytest.approx(spent["backprop"] + spent["optimizer"], rel=0.05)
    total = sum(o["exclusive_s"] for o in ops.values()) + s["unannotated_s"]
    assert total == pytest.approx(s["wall_s"], rel=1e-9)
