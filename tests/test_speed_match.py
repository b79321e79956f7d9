"""rlscope.overhead.validate.speed_match: the timed reference scaled to the profiled run's mix of the
machine's speeds.

Ground truth by construction: samples drawn at known levels (1.0 ms fast, 1.5 ms slow) in known
shares, so the mix factor and the matched error are known numbers.
"""

from __future__ import annotations

import random
import sys

import pytest

from rlscope.overhead.validate import speed_match as sm

FAST, SLOW = 1.0e6, 1.5e6


def _samples(fast_share: float, n: int = 200, scale: float = 1.0, seed: int = 0) -> list[tuple[float, float]]:
    """``n`` windows or blocks of 50 instances, the first ``fast_share`` of them at the fast level,
    each level jittered by ±3%, everything times ``scale`` (a real cost of the light state)."""
    rng = random.Random(seed)
    k = round(n * fast_share)
    return [((FAST if i < k else SLOW) * scale * rng.uniform(0.97, 1.03), 50.0) for i in range(n)]


def test_split_finds_two_speeds_and_their_shares():
    s = sm.split(_samples(0.3))
    assert s is not None and s.slow is not None
    assert s.fast == pytest.approx(FAST, rel=0.02) and s.slow == pytest.approx(SLOW, rel=0.02)
    assert s.fast_share == pytest.approx(0.3)


def test_split_sees_one_speed_in_jitter_and_none_without_samples():
    one = sm.split(_samples(1.0))
    assert one is not None and one.slow is None and one.fast == pytest.approx(FAST, rel=0.02)
    assert sm.split([]) is None
    # a few slow windows (under SPLIT_MIN_SHARE of the instances) are not a second speed
    few = sm.split(_samples(0.95))
    assert few is not None and few.slow is None


def test_the_mix_factor_is_the_reference_at_the_profiled_runs_mix():
    """Timed runs 80% fast, the profiled run 30% fast, the same levels: per instance the timed
    runs averaged 0.8 + 0.2 * 1.5 = 1.1 fast levels, the profiled mix 0.3 + 0.7 * 1.5 = 1.35."""
    m = sm.mix_factor(sm.split(_samples(0.8)), sm.split(_samples(0.3, seed=1)))
    assert m == pytest.approx(1.35 / 1.1, rel=0.01)


def test_a_real_cost_of_the_light_state_is_not_read_as_a_speed():
    # the same mix, the light state 10% slower at both speeds: nothing to scale
    m = sm.mix_factor(sm.split(_samples(0.5)), sm.split(_samples(0.5, scale=1.1, seed=2)))
    assert m == pytest.approx(1.0, abs=0.02)
    # a one-speed profiled run 25% over the fast level is at neither level: not placed, not scaled
    assert sm.mix_factor(sm.split(_samples(0.5)), sm.split(_samples(1.0, scale=1.25))) == 1.0


def test_a_one_speed_side_is_placed_at_the_level_it_sits_at():
    # the timed runs all fast, the profiled run 30% fast: (0.3 + 0.7 * 1.5) / 1
    assert sm.mix_factor(sm.split(_samples(1.0)), sm.split(_samples(0.3))) == pytest.approx(1.35, rel=0.01)
    # the profiled run all slow, the timed runs half and half: 1.5 / 1.25
    assert sm.mix_factor(sm.split(_samples(0.5)), sm.split(_samples(0.0))) == pytest.approx(1.2, rel=0.01)
    # neither side shows two speeds: nothing to match
    assert sm.mix_factor(sm.split(_samples(1.0)), sm.split(_samples(0.0))) == 1.0
    assert sm.mix_factor(None, sm.split(_samples(0.3))) == 1.0


def test_validate_reports_operations_at_matched_speed():
    """`step`: the timed runs 80% fast (0.95 s inclusive), the profiled run 30% fast with no light
    cost, corrected to what its own mix took: 0.95 * 1.35 / 1.1. Plain, that reads +22.7%; at
    matched speed 0% (in the JSON), and the line gives the light state's own cost: 0%."""
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.verdict import compare

    opts = parse_args(["--", sys.executable, __file__])
    light = [[lv, n] for lv, n in _samples(0.3, seed=3)]
    timed = [[lv, n] for lv, n in _samples(0.8, seed=4)]
    corrected = 0.95 * 1.35 / 1.1
    prof = {
        "raw_wall_s": 1.5,
        "corrected_wall_s": 1.25,
        "corrected_for_overhead": True,
        "overhead": {"windows": {"operations": {"step": {"light_windows": light}}}},
        "operations": {"step": {"raw_s": 1.4, "corrected_s": corrected}},
    }
    result = {
        "runs": [{"mode": "unprofiled", "rep": r, "measured_s": 1.0} for r in (1, 2)],
        "profiled": [prof, prof],
        "timers": [{"step": {"inclusive_s": 0.95}}] * 2,
        "timer_blocks": [{}] * 2,
        "timer_block_samples": [{"step": timed}] * 2,
    }
    got = compare(result, opts)
    step = next(r for r in got["rows"] if r["operation"] == "step")
    assert step["median_error"] == pytest.approx(1.35 / 1.1 - 1, rel=1e-6)
    assert step["matched_median"] == pytest.approx(0.0, abs=0.01)
    assert step["light_level_median"] == pytest.approx(0.0, abs=0.02)  # no light-state cost
    matched = got["verdict"]["speed_matched"]
    assert not matched["over_tolerance"] and matched["light_level"]["step"] == pytest.approx(0.0, abs=0.02)
    notes = " ".join(got["verdict"]["notes"])
    assert "at the same machine speed" in notes and "step " in notes
    assert "(2 of 2)" in notes
    # without samples (an older trace, or one speed): no matched clause, the rows say 1x
    result["timer_block_samples"] = []
    plain = compare(result, opts)
    assert plain["verdict"]["speed_matched"] is None
    assert next(r for r in plain["rows"] if r["operation"] == "step")["speed_mix"] == [1.0, 1.0]


def test_the_analysis_keeps_each_light_windows_median_and_instances(windowed):
    """A windowed run on a fake clock (tests/test_windows.py's fake collector): light instances of
    ``infer`` take exactly OPS_PER_INFER * WORK, so every light window's median is that, and the
    windows' instances add up to the light instances counted."""
    from rlscope.analysis import analyze
    from tests.test_windows import OPS_PER_INFER, WORK, _run_fake

    session, clock = windowed
    _run_fake(session, clock, 600)
    ops = analyze(session.trace_dir, intervals=False).summary["overhead"]["windows"]["operations"]
    windows = ops["infer"]["light_windows"]
    assert len(ops["infer"]["full_windows"]) >= 3
    assert len(windows) >= 3 and all(m == OPS_PER_INFER * WORK for m, _ in windows)
    assert sum(n for _, n in windows) <= ops["infer"]["light_instances"]
    assert sm.split([(m, n) for m, n in windows]).slow is None  # one speed


def test_the_light_level_at_the_same_speed_is_the_light_states_own_cost():
    """The light state 10% slower at both speeds, whatever the two sides' mixes."""
    timed = sm.split(_samples(0.8))
    assert sm.level_ratio(timed, sm.split(_samples(0.3, scale=1.1, seed=5))) == pytest.approx(1.1, rel=0.02)
    # one-speed sides: at the level they sit at (within PLACE_TOLERANCE), else unknown
    assert sm.level_ratio(timed, sm.split(_samples(0.0, scale=1.05))) == pytest.approx(1.05, rel=0.02)
    assert sm.level_ratio(sm.split(_samples(1.0)), sm.split(_samples(0.3, scale=1.05))) == pytest.approx(
        1.05, rel=0.02
    )
    assert sm.level_ratio(sm.split(_samples(1.0)), sm.split(_samples(1.0, scale=1.04))) == pytest.approx(
        1.04, rel=0.02
    )
    assert sm.level_ratio(timed, sm.split(_samples(1.0, scale=1.25))) is None
    assert sm.level_ratio(None, timed) is None


def test_groups_too_far_apart_are_the_workloads_phases_not_speeds():
    """DQN on a 2-core CPU machine: exploring steps skip the network (5 us), learning ones run it
    (60 us): a 12x gap is no machine speed, so nothing is matched on it."""
    rng = random.Random(6)
    phases = [(5e3 * rng.uniform(0.97, 1.03), 50.0) for _ in range(30)]
    phases += [(60e3 * rng.uniform(0.97, 1.03), 50.0) for _ in range(70)]
    assert sm.split(phases) is None
    assert sm.mix_factor(sm.split(phases), sm.split(_samples(0.3))) == 1.0


def test_the_profiled_mix_counts_the_full_windows_too():
    """Light windows 60% fast (over-sampling the run's start), full windows 20% fast and 10%
    slower (the collectors' cost), as many instances each: the run's mix is 40% fast, at the light
    windows' levels."""
    light = _samples(0.6, seed=7)
    full = _samples(0.2, scale=1.1, seed=8)
    got = sm.profiled(light, full)
    assert got is not None and got.fast_share == pytest.approx(0.4)
    assert got.fast == pytest.approx(FAST, rel=0.02) and got.slow == pytest.approx(SLOW, rel=0.02)
    # full windows of one speed (or none) leave the light windows' mix
    assert sm.profiled(light, _samples(1.0, scale=1.1)).fast_share == pytest.approx(0.6)
    assert sm.profiled(light, []).fast_share == pytest.approx(0.6)
    assert sm.profiled([], full) is None


def test_the_same_speed_level_replaces_the_fast_end_in_the_drift_clause():
    from rlscope.overhead.validate.verdict import drift_text

    drift = {"operation": "step", "light_spread": [-0.3, 0.2], "timer_spread": None, "fast_error": 0.19}
    assert "at the fast end" in drift_text({**drift, "light_level": None})
    assert "at the fast end" not in drift_text({**drift, "light_level": 0.01})
