"""``rlscope validate``'s main-thread speed probe and the times set at one speed.

Separate processes of one program draw the host's speeds (up to ~1.5x apart), which moves a plain
comparison of unprofiled and profiled runs by as much as rlscope's whole cost. Tested here, on fake
clocks and synthetic runs (no real-clock timing): the probe's sampling and its level over the
measured regions (speed_probe.py), that it never takes SIGALRM from a program or a thread that
owns it, the elasticity fit and the per-run factors (speed_adjust.py), the verdict end to end
recovering a known error from runs at speeds 40% apart (verdict.py), and the child record's
``--no-speed-probe`` switch (child.py).
"""

from __future__ import annotations

import atexit
import json
import math
import signal
import statistics
import threading

import pytest
from conftest import FakeClock

import rlscope
from rlscope.overhead.validate.child import PROBE_ENV, ChildRecord
from rlscope.overhead.validate.options import Options
from rlscope.overhead.validate.speed_adjust import (
    MAX_ELASTICITY,
    MIN_NARROWING,
    MIN_RUNS,
    elasticity,
    factors,
    narrows,
)
from rlscope.overhead.validate.speed_probe import LOOP, PERIOD_S, WARM, SpeedProbe
from rlscope.overhead.validate.verdict import compare


class Ticks:
    """A fake clock returning the given readings in turn."""

    def __init__(self, *readings: int) -> None:
        self.readings = list(readings)

    def __call__(self) -> int:
        return self.readings.pop(0)


@pytest.fixture
def sigalrm_free():
    """SIGALRM at its default action and no interval timer during the test; what was there before
    is put back after it, and any timer a test left running is cleared."""
    old = signal.getsignal(signal.SIGALRM)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0, 0.0)
        signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)


# -- speed_probe.SpeedProbe --------------------------------------------------------------------


def test_a_sample_times_the_loop_only_after_an_untimed_warm_run(monkeypatch):
    """The first run after the program's code measures the caches it left (read faster under a
    session): each sample runs ``WARM`` iterations before its clock starts, then times ``LOOP``."""
    from rlscope.overhead.validate import speed_probe

    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(speed_probe, "spin", lambda n: seen.append(("spin", n)))

    def cpu_clock() -> int:
        seen.append(("clock", 0))
        return len(seen)

    probe = SpeedProbe(clock=lambda: 0, cpu_clock=cpu_clock)
    probe._sample(signal.SIGALRM, None)
    assert seen == [("spin", WARM), ("clock", 0), ("spin", LOOP), ("clock", 0)]
    assert list(probe.ns) == [2]  # between the two clock readings: the timed loop only


def test_samples_are_leveled_over_the_measured_regions_only():
    """Four samples at clock 100..400 of 10, 20, 30, 40 ns an iteration (CPU time over ``LOOP``
    iterations): a region keeps the samples at or inside its ends, several regions pool theirs."""
    cpu = Ticks(0, 10 * LOOP, 1000, 1000 + 20 * LOOP, 5000, 5000 + 30 * LOOP, 9000, 9000 + 40 * LOOP)
    probe = SpeedProbe(clock=Ticks(100, 200, 300, 400), cpu_clock=cpu)
    assert probe.level() is None  # no samples yet
    for _ in range(4):
        probe._sample(signal.SIGALRM, None)
    assert list(probe.at) == [100, 200, 300, 400]
    assert list(probe.ns) == [10 * LOOP, 20 * LOOP, 30 * LOOP, 40 * LOOP]
    assert probe.level() == {"ns_per_iteration": 25.0, "samples": 4}
    assert probe.level([(150, 350)]) == {"ns_per_iteration": 25.0, "samples": 2}
    assert probe.level([(100, 100), (300, 400)]) == {"ns_per_iteration": 30.0, "samples": 3}
    assert probe.level([(350, 1000)]) == {"ns_per_iteration": 40.0, "samples": 1}
    assert probe.level([(150, 199), (401, 500)]) is None  # no sample inside either region


def test_start_leaves_a_programs_own_alarm_handler_alone(sigalrm_free):
    def own(signum, frame):
        pass

    signal.signal(signal.SIGALRM, own)
    probe = SpeedProbe()
    assert probe.start() is False
    assert signal.getsignal(signal.SIGALRM) is own
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and not probe.running
    probe.stop()  # never started: nothing to give back
    assert signal.getsignal(signal.SIGALRM) is own


def test_start_leaves_a_running_interval_timer_alone(sigalrm_free):
    signal.setitimer(signal.ITIMER_REAL, 1000.0)  # far off: cleared by the fixture long before
    probe = SpeedProbe()
    assert probe.start() is False
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL)[1] == 0.0  # still the program's one-shot timer
    assert signal.getitimer(signal.ITIMER_REAL)[0] > 900.0


def test_start_refuses_off_the_main_thread(sigalrm_free):
    probe = SpeedProbe()
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(probe.start()))
    t.start()
    t.join()
    assert got == [False] and not probe.running
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_start_and_stop_install_then_give_back_the_signal(sigalrm_free):
    probe = SpeedProbe()
    try:
        assert probe.start() is True and probe.running
        assert signal.getsignal(signal.SIGALRM) == probe._sample
        value, interval = signal.getitimer(signal.ITIMER_REAL)
        assert value > 0.0 and interval == pytest.approx(PERIOD_S, abs=1e-3)
        assert SpeedProbe().start() is False  # a second probe finds the first one's handler
    finally:
        probe.stop()
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and not probe.running
    probe.stop()  # idempotent
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


# -- speed_adjust ------------------------------------------------------------------------------


def _side(k: float, b: float, speeds: list[float]) -> list[tuple[float, float]]:
    """(time, speed) pairs of runs whose time is exactly ``k * speed ** b``."""
    return [(k * s**b, s) for s in speeds]


def test_elasticity_is_the_within_side_slope():
    """Two sides at different levels (the profiled one 2x) and at different speeds: the pooled
    within-side slope is the true 0.8, where one line through all the runs would take the sides'
    difference for speed."""
    ref_speeds = [250.0, 270.0, 300.0, 320.0, 260.0]
    prof_speeds = [330.0, 350.0, 340.0, 380.0, 360.0]
    ref, prof = _side(1.0, 0.8, ref_speeds), _side(2.0, 0.8, prof_speeds)
    assert elasticity([ref, prof]) == pytest.approx(0.8, abs=1e-9)
    assert elasticity([ref]) == pytest.approx(0.8, abs=1e-9)
    # the same runs as one side: the 2x level reads as a far steeper slope (clipped)
    assert elasticity([ref + prof]) > 1.5
    # the level of a side does not matter, only its slope
    assert elasticity([_side(7.0, 0.8, ref_speeds), _side(0.1, 0.8, prof_speeds)]) == pytest.approx(0.8)


def test_elasticity_without_speed_variation_or_with_a_wrong_sign_is_clipped():
    flat = [[(1.0, 300.0), (1.2, 300.0), (0.9, 300.0)], [(2.0, 280.0), (2.5, 280.0)]]
    assert elasticity(flat) == 0.0
    assert elasticity([[(1.0, 300.0)], []]) == 0.0  # one run a side: no slope
    speeds = [250.0, 280.0, 310.0, 340.0, 370.0]
    assert elasticity([_side(1.0, -0.5, speeds), _side(1.1, -0.5, speeds)]) == 0.0
    assert elasticity([_side(1.0, 3.0, speeds), _side(1.1, 3.0, speeds)]) == MAX_ELASTICITY
    # non-positive times or speeds are left out of the fit, not failed on
    assert elasticity([[*_side(1.0, 0.5, speeds), (0.0, 300.0), (1.0, 0.0)]]) == pytest.approx(0.5)


def test_factors_need_a_speed_for_every_run_and_enough_runs():
    n = MIN_RUNS
    speeds = [300.0 + 10 * i for i in range(n)]
    times = [1.0] * n
    assert factors(speeds, speeds, times, times) is not None
    few = speeds[: n - 1]
    assert factors(few, speeds, times[: n - 1], times) is None
    assert factors(speeds, few, times, times[: n - 1]) is None
    missing = [*speeds[:-1], None]
    assert factors(missing, speeds, times, times) is None
    assert factors(speeds, missing, times, times) is None
    assert factors(speeds, [*speeds[:-1], 0.0], times, times) is None


def test_factors_set_every_run_at_the_median_speed():
    """Each run's time is its true time at its own speed (elasticity 0.7), the profiled side 3%
    above: after the factors every repetition reads +3%, where the raw pairs read +5% to +29%."""
    b, true_s = 0.7, 10.0
    ref_speed = [250.0, 300.0, 280.0, 260.0, 310.0, 270.0]
    prof_speed = [330.0, 320.0, 350.0, 300.0, 340.0, 345.0]
    center = statistics.median(ref_speed + prof_speed)
    ref = [true_s * (s / center) ** b for s in ref_speed]
    prof = [1.03 * true_s * (s / center) ** b for s in prof_speed]
    fr, fp, fit = factors(ref_speed, prof_speed, ref, prof)
    assert fit["elasticity"] == pytest.approx(b)
    assert fit["speed_ns"] == center
    assert fit["spread"] == pytest.approx(350 / 250 - 1)
    adjusted = [p * g / (r * f) - 1 for r, f, p, g in zip(ref, fr, prof, fp, strict=True)]
    assert adjusted == [pytest.approx(0.03)] * len(ref)
    assert all(t * f == pytest.approx(true_s) for t, f in zip(ref, fr, strict=True))
    unadjusted = statistics.median(p / r - 1 for r, p in zip(ref, prof, strict=True))
    assert unadjusted > 0.10


def test_factors_say_how_much_they_narrow_the_reference_runs_spread():
    """Reference times that follow their speeds exactly: setting them at one speed removes their
    whole spread (narrowing 1). Reference times that do not follow them at all, beside profiled
    runs whose times do: the pooled slope is positive, the reference spread grows, and the fit is
    not applied."""
    speeds = [250.0, 300.0, 280.0, 260.0, 310.0, 270.0]
    follow = [10.0 * s / 250 for s in speeds]
    _, _, fit = factors(speeds, speeds, follow, follow)
    assert fit["narrowing"] == pytest.approx(1.0)
    assert narrows(fit)
    flat = [10.0, 10.4, 9.7, 10.2, 9.9, 10.1]  # the reference: noise of its own, not the speeds'
    steep = [10.0 * (s / 250) ** 2 for s in speeds]  # the profiled runs: a slope of 2
    _, _, fit = factors(speeds, speeds, flat, steep)
    assert fit["elasticity"] > 0.5
    assert fit["narrowing"] < MIN_NARROWING and not narrows(fit)


# -- verdict.compare end to end ----------------------------------------------------------------

TRUE_TOTAL = 0.02  # what rlscope's correction really got wrong, per run, on the total
TRUE_OP = -0.01  # and on the one operation
# ns a probe iteration per repetition (higher: slower), 40% apart at most: the profiled runs
# mostly drew the slow speed
SPEEDS = {
    "unprofiled": [250.0, 340.0, 280.0, 310.0, 262.0, 330.0, 295.0],
    "timers": [255.0, 300.0, 345.0, 270.0, 335.0, 285.0, 320.0],
    "profiled": [300.0, 350.0, 290.0, 345.0, 330.0, 320.0, 310.0],
}
# a little of the runs' own noise, so the fit is not exact
NOISE = {
    "unprofiled": [1.003, 0.997, 1.002, 0.998, 1.0, 1.001, 0.999],
    "timers": [0.998, 1.002, 1.0, 1.001, 0.999, 1.003, 0.997],
    "profiled": [1.001, 0.999, 0.998, 1.002, 1.003, 0.997, 1.0],
}
TOTAL_S, STEP_S, SLOWEST = 10.0, 6.0, 250.0  # true times at the fastest speed (elasticity 1)


def _plain_result() -> dict:
    """A plain validation's result: seven repetitions of unprofiled, timed and profiled runs, each
    run's times moved by its main thread's speed (elasticity 1) and a little noise."""

    def at(mode: str, rep: int, true_s: float) -> float:
        return true_s * SPEEDS[mode][rep] / SLOWEST * NOISE[mode][rep]

    reps = range(len(SPEEDS["unprofiled"]))
    runs = []
    for mode in ("unprofiled", "timers", "profiled"):
        for i in reps:
            t = at(mode, i, TOTAL_S)
            runs.append(
                {"mode": mode, "rep": i + 1, "measured_s": t, "net_s": t, "speed_ns": SPEEDS[mode][i]}
            )
    timers = [{"step": {"inclusive_s": at("timers", i, STEP_S)}} for i in reps]
    profiled = []
    for i in reps:
        wall, step = (1 + TRUE_TOTAL) * at("profiled", i, TOTAL_S), (1 + TRUE_OP) * at("profiled", i, STEP_S)
        profiled.append(
            {
                "raw_wall_s": 1.3 * wall,
                "corrected_wall_s": wall,
                "corrected_for_overhead": True,
                "calibration": "test",
                "operations": {"step": {"raw_s": 1.2 * step, "corrected_s": step}},
                "overhead": {},
            }
        )
    return {"runs": runs, "timers": timers, "profiled": profiled}


def _rows(out: dict) -> dict[str, dict]:
    return {r["operation"]: r for r in out["rows"]}


def test_compare_sets_runs_at_one_speed_and_finds_the_true_error():
    opts = Options(command=["python", "job.py"])
    out = compare(_plain_result(), opts)
    rows = _rows(out)
    total, step = rows["[total]"], rows["step"]
    assert total["median_error"] == pytest.approx(TRUE_TOTAL, abs=0.005)
    assert step["median_error"] == pytest.approx(TRUE_OP, abs=0.005)
    for row in (total, step):
        adj = row["speed_adjusted"]
        assert adj is not None
        assert adj["elasticity"] == pytest.approx(1.0, abs=0.1)
        both = SPEEDS["unprofiled" if row is total else "timers"] + SPEEDS["profiled"]
        assert adj["speed_ns"] == statistics.median(both)
        assert adj["spread"] == pytest.approx(max(both) / min(both) - 1)
    assert total["speed_adjusted"]["spread"] == pytest.approx(0.4)  # 350 / 250
    # unadjusted, the profiled runs' slower draws read as rlscope's cost
    assert total["speed_adjusted"]["unadjusted_median_error"] > TRUE_TOTAL + 0.03
    assert abs(step["speed_adjusted"]["unadjusted_median_error"] - TRUE_OP) > 0.02
    v = out["verdict"]
    assert any(n.startswith("times set at one main-thread speed") for n in v["notes"])
    assert v["pass"], v["line"]


def test_compare_without_speeds_compares_the_raw_times():
    """The same runs with no probe (``speed_ns`` None on one run is enough): no adjustment, the
    raw error, no note, and the miss the host's speeds made."""
    result = _plain_result()
    result["runs"][0]["speed_ns"] = None  # an unprofiled run without a probe: the total unadjusted
    partial = compare(result, Options(command=["python"]))
    rows = _rows(partial)
    assert rows["[total]"]["speed_adjusted"] is None
    assert rows["step"]["speed_adjusted"] is not None  # its runs all have speeds
    # the note's speed figures are then the operation's runs', and it says so
    note = next(n for n in partial["verdict"]["notes"] if "one main-thread speed" in n)
    assert "(step's runs)" in note
    for r in result["runs"]:
        r["speed_ns"] = None
    out = compare(result, Options(command=["python"]))
    assert all(r["speed_adjusted"] is None for r in out["rows"])
    assert not any("one main-thread speed" in n for n in out["verdict"]["notes"])
    assert out["rows"][0]["median_error"] > TRUE_TOTAL + 0.03
    assert not out["verdict"]["pass"]


def test_a_row_whose_reference_times_do_not_follow_the_speeds_is_left_as_measured():
    """The step's timed runs drew speeds close together and their times do not follow them; the
    profiled runs' probe read faster (lower ns) and, by chance, their times follow it. The pooled
    slope would set the profiled times slower and add several points to the step's error; left as
    measured (it would not narrow the timed runs' spread), the step reads its true error, and the
    note names it."""
    result = _plain_result()
    timed_speeds = [128.0, 131.0, 126.0, 133.0, 129.0, 125.0, 130.0]
    prof_speeds = [119.0, 126.0, 121.0, 133.0, 123.0, 120.0, 130.0]
    for r in result["runs"]:
        if r["mode"] == "timers":
            r["speed_ns"] = timed_speeds[r["rep"] - 1]
        elif r["mode"] == "profiled":
            r["speed_ns"] = prof_speeds[r["rep"] - 1]
    own = [1.03, 0.97, 1.01, 0.98, 1.00, 0.99, 0.96]  # the timed runs' own noise
    timed = [STEP_S * x for x in own]
    prof = [(1 + TRUE_OP) * STEP_S * (s / 123.0) ** 1.5 for s in prof_speeds]
    for t, x in zip(result["timers"], timed, strict=True):
        t["step"]["inclusive_s"] = x
    for p, x in zip(result["profiled"], prof, strict=True):
        p["operations"]["step"]["corrected_s"] = x
    out = compare(result, Options(command=["python"]))
    step = _rows(out)["step"]
    assert step["speed_adjusted"] is None
    assert step["speed_left"]["narrowing"] < MIN_NARROWING
    assert step["median_error"] == pytest.approx(TRUE_OP, abs=0.02)
    fr, fp, fit = factors(timed_speeds, prof_speeds, timed, prof)
    would = statistics.median(c * g / (r * f) - 1 for r, f, c, g in zip(timed, fr, prof, fp, strict=True))
    assert fit["elasticity"] > 0.5 and would > TRUE_OP + 0.04  # what the fit would have read
    note = next(n for n in out["verdict"]["notes"] if "as measured" in n)
    assert note.endswith(": step") and "did not narrow" in note


def test_twin_runs_are_never_set_at_one_speed():
    """Twin runs take turns on one core: they share its speed, so even with speeds recorded the
    rows stay as measured."""
    result = {**_plain_result(), "twin": True}
    out = compare(result, Options(command=["python"]))
    assert out["rows"] and all(r["speed_adjusted"] is None for r in out["rows"])
    assert not any("one main-thread speed" in n for n in out["verdict"]["notes"])
    timed = sorted((r for r in result["runs"] if r["mode"] == "timers"), key=lambda r: r["rep"])
    walls = [p["corrected_wall_s"] for p in result["profiled"]]
    expected = statistics.median(w / r["net_s"] - 1 for w, r in zip(walls, timed, strict=True))
    assert out["rows"][0]["median_error"] == pytest.approx(expected)


# -- child.ChildRecord ---------------------------------------------------------------------------


def _written(record: ChildRecord) -> dict:
    record.write()
    with open(record.path) as f:
        return json.load(f)


def test_no_speed_probe_starts_nothing(monkeypatch, tmp_path, sigalrm_free):
    monkeypatch.setenv(PROBE_ENV, "0")
    record = ChildRecord(str(tmp_path / "record.json"), "off")
    try:
        record.start_probe()
        assert record.probe is None
        assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        data = _written(record)
        assert data["speed"] is None and data["mode"] == "off"
    finally:
        atexit.unregister(record.write)
    assert not (tmp_path / "record.json.tmp").exists()


def test_a_record_without_a_path_starts_no_probe(monkeypatch, sigalrm_free):
    monkeypatch.delenv(PROBE_ENV, raising=False)
    record = ChildRecord(None, "off")  # not a measured child: registers no writer either
    record.start_probe()
    assert record.probe is None
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_the_record_stops_its_probe_and_levels_it_over_the_regions(monkeypatch, tmp_path, sigalrm_free):
    """With the probe on: start_probe installs it, write() gives SIGALRM back and levels the
    samples inside the measured regions (here: one region made of the samples' own times, so
    which samples land in it does not hang on the real clock's pace)."""
    monkeypatch.delenv(PROBE_ENV, raising=False)
    record = ChildRecord(str(tmp_path / "record.json"), "off")
    try:
        record.start_probe()
        probe = record.probe
        assert probe is not None and signal.getsignal(signal.SIGALRM) == probe._sample
        probe._sample(signal.SIGALRM, None)
        probe._sample(signal.SIGALRM, None)
        record.regions.append((probe.at[-2], probe.at[-1]))
        data = _written(record)
    finally:
        atexit.unregister(record.write)
        if record.probe is not None:
            record.probe.stop()
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    speed = data["speed"]
    assert speed is not None and speed["samples"] >= 2
    assert math.isfinite(speed["ns_per_iteration"]) and speed["ns_per_iteration"] > 0
    assert len(data["speed_samples"]) == speed["samples"]


def test_the_record_keeps_each_sample_with_its_clock_reading(monkeypatch, tmp_path, sigalrm_free):
    """What window_speed.py splits by the trace's windows: [clock reading, ns per iteration] of each
    sample inside the measured regions, whose median is the run's level."""
    monkeypatch.delenv(PROBE_ENV, raising=False)
    record = ChildRecord(str(tmp_path / "record.json"), "profile")
    try:
        record.start_probe()
        probe = record.probe
        assert probe is not None
        for _ in range(3):
            probe._sample(signal.SIGALRM, None)
        record.regions.append((probe.at[-2], probe.at[-1]))  # the last two samples
        at, ns = list(probe.at), [x / LOOP for x in probe.ns]
        data = _written(record)
    finally:
        atexit.unregister(record.write)
        if record.probe is not None:
            record.probe.stop()
    assert data["speed_samples"] == [[at[1], ns[1]], [at[2], ns[2]]]
    assert data["speed"] == {"ns_per_iteration": statistics.median(ns[1:]), "samples": 2}


def test_a_profiled_runs_samples_are_split_by_its_windows(tmp_path):
    """A synthetic trace: the session opens with a full window at its start ``t0`` (every session
    does), then light windows from t0+1000 and t0+3000 ns, full ones from t0+2000 and t0+4000.
    Samples at 10 ns an iteration in the light windows and 7 in the full ones read back as those
    levels; a trace without light windows, or an unreadable one, leaves those None, not an error."""
    from rlscope.overhead.validate import window_speed
    from rlscope.trace import schema as S

    light, full = S.WINDOW_LIGHT, S.WINDOW_FULL
    clock = FakeClock()
    t0 = clock()

    def trace(name: str, windows: tuple[tuple[int, int], ...]):
        session = rlscope.profile(tmp_path / name, backend=False, gpu=False)
        session.clock = clock
        session.start()
        for t, mode in windows:
            session.events.append((t0 + t, session.main_tid, S.WINDOW, mode, -1, -1, 0))
        session.stop()
        return session.trace_dir

    windowed = trace("windowed", ((1000, light), (2000, full), (3000, light), (4000, full)))
    samples = [[t0 + t, ns] for t, ns in ((1500, 10.0), (2500, 7.0), (3200, 10.0), (3800, 10.0), (4500, 7.0))]
    got = window_speed.levels([*samples, [t0 + 500, 7.0]], windowed)
    assert got["light"] == {"ns_per_iteration": 10.0, "samples": 3}
    assert got["full"] == {"ns_per_iteration": 7.0, "samples": 3}  # t0+500: the opening full window
    spans = window_speed.window_spans(windowed, end=t0 + 6000)
    assert spans[light] == [(t0 + 1000, t0 + 2000), (t0 + 3000, t0 + 4000)]
    assert spans[full] == [(t0, t0 + 1000), (t0 + 2000, t0 + 3000), (t0 + 4000, t0 + 6000)]
    # no windows but the opening one: every sample in it
    assert window_speed.levels(samples, trace("plain", ())) == {
        "light": None,
        "full": {"ns_per_iteration": 10.0, "samples": 5},
    }
    assert window_speed.levels(samples, tmp_path / "missing") is None
