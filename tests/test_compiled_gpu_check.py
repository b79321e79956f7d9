"""benchmarks/compiled_gpu_check.py's comparison of the compile advice with a compiled run's gain."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import compiled_gpu_check as check  # noqa: E402


def test_the_prediction_is_the_stakes_share_of_the_steady_time_applied_to_the_plain_runs():
    """The profiled run is twice as slow as the plain ones (another speed of the host): the stake's share
    of the operation's steady time (its total less its warm-up) carries over, its seconds do not."""
    eager = {
        "launch_bound": [{"operation": "inference", "seconds_at_stake": 1.2}],
        "operations": {"inference": {"total_s": 2.5, "one_time_s": 0.5}, "backprop": {"total_s": 1.0}},
    }
    plain = {
        "eager": [{"inference": 0.10, "backprop": 0.05}, {"inference": 0.12, "backprop": 0.05}],
        "reduce-overhead": [{"inference": 0.05, "backprop": 0.04}, {"inference": 0.06, "backprop": 0.05}],
    }
    steady = {
        "eager": {"inference": 0.11, "backprop": 0.05},
        "reduce-overhead": {"inference": 0.055, "backprop": 0.045},
    }
    g = check._gains(eager, steady, plain, iterations=10)["reduce-overhead"]
    inf = g["inference"]
    assert inf["predicted_share"] == pytest.approx(1.2 / 2.0)
    assert inf["predicted_s"] == pytest.approx(0.6 * 0.11)
    assert inf["measured_s"] == pytest.approx(0.055) and inf["measured_share"] == pytest.approx(0.5)
    assert inf["measured_range_s"] == pytest.approx([0.05, 0.06])
    assert inf["predicted_over_measured"] == pytest.approx(0.066 / 0.055)
    assert inf["predicted_at_profile_speed_s"] == pytest.approx(0.12)
    assert g["backprop"]["predicted_s"] == 0.0  # no finding: nothing predicted
    assert g["total"]["predicted_over_measured"] == pytest.approx(0.066 / 0.06)


def test_plain_runs_without_operation_timers_are_compared_by_phase():
    eager = {
        "launch_bound": [{"operation": "backprop", "seconds_at_stake": 0.5}],
        "operations": {"backprop": {"total_s": 1.0}},
    }
    plain = {
        "eager": [{"rollout": 0.2, "update": 0.1}],
        "reduce-overhead": [{"rollout": 0.1, "update": 0.06}],
    }
    steady = {"eager": {"rollout": 0.2, "update": 0.1}, "reduce-overhead": {"rollout": 0.1, "update": 0.06}}
    b = check._gains(eager, steady, plain, iterations=4)["reduce-overhead"]["backprop"]
    assert b["timer"] == "update" and b["predicted_s"] == pytest.approx(0.05)
    assert b["measured_s"] == pytest.approx(0.04)
