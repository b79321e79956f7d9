"""``rlscope validate``: the plain-timer mode's arithmetic, RLSCOPE_MODE, and the command end to end."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest

import rlscope
from rlscope import annotate
from rlscope.errors import RLScopeError
from rlscope.overhead.validate import aggregate, child, cli, render, runner, verdict
from rlscope.overhead.validate.aggregate import TimerAggregate, corrected_timers
from rlscope.overhead.validate.child import ChildRecord, TimerSession

STEP_NS = 100  # what the fake clock moves at each read: the timers' own cost, in clock time


class SteppingClock:
    """A fake clock that costs ``STEP_NS`` per read, so the timers' cost is known exactly."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        t = self.now
        self.now += STEP_NS
        return t

    def advance(self, ns: int) -> None:
        self.now += ns


def _timer_session(clock=time.perf_counter_ns) -> tuple[TimerSession, TimerAggregate]:
    agg = TimerAggregate()
    return TimerSession(record=ChildRecord(None, "timers"), clock=clock, aggregate=agg), agg


def _totals(agg: TimerAggregate, costs: dict[str, float]) -> dict[str, dict]:
    return corrected_timers(agg.counters(list(annotate._names)), costs)


def test_timer_mode_exact_inclusive_exclusive():
    clock = SteppingClock()
    sess, agg = _timer_session(clock)
    with sess, rlscope.phase("training"), rlscope.scope("v.outer"):
        clock.advance(1000)
        for _ in range(3):
            with rlscope.scope("v.inner"):
                clock.advance(200)
        with rlscope.simulator():  # a category boundary pair inside outer
            clock.advance(50)
        with rlscope.scope("v.outer"):  # recursive: its time counts once, as in the analyzer
            clock.advance(300)
        clock.advance(10)
    assert annotate._active is None
    # every boundary read the clock once: a scope pair costs 2 steps, one of them inside the scope
    costs = {"pair": 2 * STEP_NS, "inside": STEP_NS, "category": 2 * STEP_NS}
    t = _totals(agg, costs)
    assert t["v.outer"]["calls"] == 2 and t["v.inner"]["calls"] == 3
    assert t["v.outer"]["inclusive_s"] * 1e9 == pytest.approx(1960, abs=1e-3)
    assert t["v.outer"]["exclusive_s"] * 1e9 == pytest.approx(1360, abs=1e-3)
    assert t["v.inner"]["inclusive_s"] * 1e9 == pytest.approx(600, abs=1e-3)
    assert t["v.inner"]["exclusive_s"] * 1e9 == pytest.approx(600, abs=1e-3)
    # uncorrected, the timers' own reads are in: outer's own inside step, 4 nested scope pairs, 1 category
    raw = t["v.outer"]["raw_inclusive_s"] * 1e9
    assert raw == pytest.approx(1960 + STEP_NS + 4 * 2 * STEP_NS + 2 * STEP_NS, abs=1e-3)


def _busy(ms: float) -> int:
    """Spin for ``ms``; returns the nanoseconds it really took (a preemption can stretch it)."""
    t0 = time.perf_counter_ns()
    end = t0 + int(ms * 1e6)
    while (t := time.perf_counter_ns()) < end:
        pass
    return t - t0


def _busy_workload(costs: dict[str, float]) -> tuple[dict[str, dict], dict[str, int]]:
    """Scopes around busy-waits under a timer session: (timer totals, busy ns spent per operation)."""
    spent = {"outer_self": 0, "inner": 0}
    sess, agg = _timer_session()
    with sess:
        with rlscope.scope("v.outer"):
            spent["outer_self"] += _busy(20)
            for _ in range(5):
                with rlscope.scope("v.inner"):
                    spent["inner"] += _busy(4)
            for _ in range(300):
                with rlscope.scope("v.tiny"):
                    pass
        _busy(5)  # outside any operation
    return _totals(agg, costs), spent


@pytest.mark.slow
def test_timer_mode_busy_waits(monkeypatch):
    """Real clock (so ``slow``), busy-waits, events folded in small chunks (ticks) along the way.

    The truth is each busy-wait's own length, measured inside it: on a loaded 2-core machine a
    preemption stretches a wait past its nominal length, and that time is in the operation too.
    What is left to the timers' error is the code between the waits (the loop of 300 empty scopes
    reads ~+0.25 ms on a 2-core CPU machine: the job's own code, not an error) and the scope
    boundaries. The costs are measured under the same short fold interval: every cost loop then
    holds a fold, whose pause measure_timer_costs takes off (left in, a fold read as a 2.8 us pair
    instead of 0.08 us and took ~0.8 ms off outer). The arithmetic is checked exactly on a
    stepping clock in test_timer_mode_exact_inclusive_exclusive.
    """
    monkeypatch.setattr(child, "_TICK_NS", 2_000_000)
    costs = child.measure_timer_costs(n=5_000, reps=5)
    assert 0 < costs["inside"] <= costs["pair"] < 50_000
    tol = 1e-3
    t, spent = _busy_workload(costs)
    assert t["v.inner"]["calls"] == 5 and t["v.tiny"]["calls"] == 300
    inner, outer_self = spent["inner"] / 1e9, spent["outer_self"] / 1e9
    errors = [
        t["v.outer"]["inclusive_s"] - (outer_self + inner),
        t["v.outer"]["exclusive_s"] - outer_self,
        t["v.inner"]["inclusive_s"] - inner,
        t["v.inner"]["exclusive_s"] - inner,
    ]
    assert all(abs(e) < tol for e in errors), errors
    assert t["v.tiny"]["inclusive_s"] < tol


def test_timer_costs_leave_out_folds(monkeypatch):
    """A fold (and a twin's hand-over) inside a cost loop is bookkeeping, paused like in a run.

    With a fold every millisecond each loop of 5,000 pairs holds several; with their pauses left
    in, the pair read 2.8 us on a 2-core CPU machine, 35x its ~0.08 us.
    """
    monkeypatch.setattr(child, "_TICK_NS", 1_000_000)
    folded = child.measure_timer_costs(n=5_000, reps=5)
    assert 0 < folded["inside"] <= folded["pair"] < 1_000
    agg = TimerAggregate()
    agg.pause(1, 500)
    agg.pause(2, 700)
    assert agg.paused_ns == 1_200 and agg._thread(1)[4] == 500


def test_profile_off_writes_no_trace(monkeypatch, tmp_path):
    """With validate's child hooks registered (child.install, as its boot does in a measured
    child), rlscope.profile returns the mode's session."""
    from rlscope.runtime import hooks

    monkeypatch.setattr(hooks, "_mode_session", None)
    monkeypatch.setattr(hooks, "_turns", None)
    child.install()
    monkeypatch.setenv("RLSCOPE_MODE", "off")
    with rlscope.profile(tmp_path / "t") as s:
        assert annotate._active is None  # scopes take their no-session path
        with rlscope.scope("v.a"):
            pass
    assert not (tmp_path / "t").exists()
    assert not s.active
    monkeypatch.setenv("RLSCOPE_MODE", "timers")
    with rlscope.profile(tmp_path / "t") as s:
        assert annotate._active is s and isinstance(s, TimerSession)
    assert annotate._active is None and not (tmp_path / "t").exists()


def test_mode_order_rotates():
    assert [runner.mode_order(r)[0] for r in range(3)] == ["unprofiled", "timers", "profiled"]


TINY = textwrap.dedent(
    """
    import sys, time
    import rlscope

    def busy(s):
        end = time.perf_counter() + s
        while time.perf_counter() < end:
            pass

    def loop(n):
        for _ in range(n):
            with rlscope.scope("step"):
                with rlscope.scope("work"):
                    busy(0.002)
                for _ in range(20):
                    with rlscope.scope("tiny"):
                        pass
                busy(0.001)

    if sys.argv[1:] == ["profile"]:
        with rlscope.profile("ignored-trace", backend=False), rlscope.phase("training"):
            loop(int(sys.argv[2]) if len(sys.argv) > 2 else 300)
    else:
        loop(150)
    print("TINY DONE")
    """
)


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlscope.cli.main", *args], capture_output=True, text=True, cwd=cwd
    )


@pytest.mark.parametrize("variant", ["profile", "whole"])
def test_validate_end_to_end(tmp_path, variant):
    script = tmp_path / "tiny.py"
    script.write_text(TINY)
    out = tmp_path / "v.json"
    args = ["profile"] if variant == "profile" else []
    r = _cli("validate", "--reps", "1", "--no-warmup", "--no-calibrate", "--json", str(out), "--", "python",
             str(script), *args, cwd=tmp_path)  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "TINY DONE" not in r.stdout  # the program's output is kept
    assert "[total]" in r.stdout and "step" in r.stdout and ("PASS" in r.stdout or "FAIL" in r.stdout)
    assert not (tmp_path / "ignored-trace").exists()  # the script's trace went to the validation's
    res = json.loads(out.read_text())
    assert set(res) >= {"command", "reps", "runs", "timers", "profiled", "rows", "verdict", "timer_costs_ns"}
    assert res["script_calls_profile"] is (variant == "profile")
    assert sorted(run["mode"] for run in res["runs"]) == ["profiled", "timers", "unprofiled"]
    rows = {row["operation"]: row for row in res["rows"]}
    assert set(rows) >= {"[total]", "step", "work"}
    nominal = 0.002 * (300 if args else 150)  # busy-waits last at least this; a loaded machine stretches them
    assert 0.97 * nominal <= rows["work"]["reference_s"][0] <= 3 * nominal
    for key in ("reference_s", "raw_s", "corrected_s", "error", "raw_slowdown"):
        assert len(rows["step"][key]) == 1
    assert res["verdict"]["pass"] is (r.returncode == 0)


@pytest.mark.parametrize(
    "args",
    [
        ["validate"],
        ["validate", "--reps", "0", "--", "python", "-c", "pass"],
        ["validate", "--tolerance", "abc", "--", "python", "-c", "pass"],
        ["validate", "--", "python", "/definitely/not/here.py"],
        ["validate", "--", "definitely-not-a-command-rlscope"],
    ],
)
def test_validate_bad_arguments(args):
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], r.stderr


def test_validate_failing_command(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import rlscope\nprint('about to fail')\nraise SystemExit(3)\n")
    r = _cli("validate", "--reps", "1", "--no-warmup", "--no-calibrate", "--", "python", str(script))
    assert r.returncode == 2
    error = next(line for line in r.stderr.splitlines() if line.startswith("rlscope: error:"))
    assert "unprofiled run" in error and "status 3" in error, r.stderr
    assert "about to fail" in r.stderr and "Traceback" not in r.stderr  # its output, kept for this


def test_help_lists_validate():
    r = _cli("--help")
    assert r.returncode == 0 and "validate" in r.stdout + r.stderr and "unprofiled" in r.stdout + r.stderr


def test_a_miss_within_the_machines_own_noise_is_called_inconclusive():
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.verdict import compare, noise_floor

    assert noise_floor([1.0, 1.2, 1.1]) == pytest.approx(0.1 / 1.1)
    assert noise_floor([1.0]) == 0.0
    opts = parse_args(["--", sys.executable, __file__])
    runs = [
        {"mode": "unprofiled", "rep": r, "measured_s": v} for r, v in enumerate((1.0, 1.4, 1.2, 1.3, 1.1), 1)
    ]
    prof = {"raw_wall_s": 1.5, "corrected_wall_s": 1.4, "corrected_for_overhead": True, "operations": {}}
    result = {"runs": runs, "profiled": [prof] * 5, "timers": [{}] * 5}
    verdict = compare(result, opts)["verdict"]
    assert not verdict["pass"] and verdict["status"] == "INCONCLUSIVE"
    assert any("vary by ±17%" in n for n in verdict["notes"])
    quiet = {**result, "runs": [{**r, "measured_s": 1.0} for r in runs]}
    assert compare(quiet, opts)["verdict"]["status"] == "FAIL"


def test_the_verdict_says_whether_a_miss_is_systematic_or_a_pass_is_confirmed():
    """Errors over five repetitions → a 90% interval of the median against the band: every
    repetition ~+20% is a systematic miss; ~0% with a little spread, a confirmed pass; ±15% around
    0, a pass not yet confirmed; four repetitions are too few to confirm anything."""
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.verdict import compare, judge, median_interval

    assert median_interval([0.3, 0.1, 0.5, 0.2, 0.4]) == [0.1, 0.5]  # five runs: [min, max] is 93.75%
    assert median_interval([0.1, 0.2, 0.3]) is None
    assert judge({"interval": [0.06, 0.09], "tolerance": 0.05}) == "systematic"
    assert judge({"interval": [-0.02, 0.03], "tolerance": 0.05}) == "confirmed"
    assert judge({"interval": [-0.02, 0.07], "tolerance": 0.05}) == "inconclusive"
    assert judge({"interval": None, "tolerance": 0.05}) == "inconclusive"

    opts = parse_args(["--", sys.executable, __file__])

    def result(corrected: list[float]) -> dict:
        runs = [{"mode": "unprofiled", "rep": r + 1, "measured_s": 1.0} for r in range(len(corrected))]
        prof = [
            {"raw_wall_s": 1.5, "corrected_wall_s": c, "corrected_for_overhead": True, "operations": {}}
            for c in corrected
        ]
        return {"runs": runs, "profiled": prof, "timers": [{}] * len(corrected)}

    v = compare(result([1.19, 1.21, 1.2, 1.22, 1.18]), opts)["verdict"]
    assert not v["pass"] and v["systematic"] == ["[total]"] and "[total] +18.0%..+22.0%" in v["line"]
    v = compare(result([1.0, 1.01, 0.99, 1.0, 1.0]), opts)["verdict"]
    assert v["pass"] and not v["not_confirmed"] and "every checked figure's 90% interval" in v["line"]
    v = compare(result([0.85, 1.15, 1.02, 0.98, 1.0]), opts)["verdict"]
    assert v["status"] == "INCONCLUSIVE" and v["not_confirmed"] == ["[total]"] and "[total]" in v["reason"]
    v = compare(result([1.0, 1.01, 0.99, 1.0]), opts)["verdict"]
    assert v["pass"] and v["not_confirmed"] == ["[total]"]  # four runs: no 90% interval of a median


def test_set_passes_session_options_and_refuses_unknown_keys(tmp_path: pathlib.Path) -> None:
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.runner import profile_overrides

    script = tmp_path / "x.py"
    script.write_text("")

    opts = parse_args(["--set", "full_share=0.3", "--set", "windows=false", "--", "python", str(script)])
    assert profile_overrides(opts) == {"full_share": 0.3, "windows": False}
    with pytest.raises(RLScopeError, match="KEY one of"):
        parse_args(["--set", "fullshare=0.3", "--", "python", str(script)])
    with pytest.raises(RLScopeError, match="KEY=VALUE"):
        parse_args(["--set", "full_share", "--", "python", str(script)])


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_cpus_pins_every_run_and_refuses_cpus_it_cannot_use(tmp_path: pathlib.Path) -> None:
    from rlscope.errors import RLScopeError
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.runner import run_child

    allowed = sorted(os.sched_getaffinity(0))
    opts = parse_args(["--cpus", str(allowed[0]), "--", "python", "-c", "pass"])
    assert opts.cpus == {allowed[0]}
    code, _, tail = run_child(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], dict(os.environ),
        False, opts.cpus,
    )  # fmt: skip
    assert code == 0 and tail == [str([allowed[0]])]
    assert os.sched_getaffinity(0) == set(allowed)  # the parent's own affinity is back
    if len(allowed) > 1:
        assert parse_args(["--cpus", f"{allowed[0]}-{allowed[1]}", "--", "python", "-c", "pass"]).cpus
    for bad in ("abc", f"{max(allowed) + 1000}", "3-x"):
        with pytest.raises(RLScopeError, match="--cpus"):
            parse_args(["--cpus", bad, "--", "python", "-c", "pass"])


def test_timed_runs_record_the_machines_speed_per_quarter_second():
    """Blocks of 250 ms: an operation of 1 ms for 9 blocks, then 2 ms for 3 (the machine slowed):
    the blocks' median times, at the 10th / 50th / 90th percentile, are 1 ms, 1 ms and 2 ms (to
    within the one clock read that lands inside each instance)."""
    clock = SteppingClock()
    sess, agg = _timer_session(clock)
    with sess:
        for ms, blocks in ((1_000_000, 9), (2_000_000, 3)):
            for _ in range(blocks * aggregate.BLOCK_NS // ms):
                with rlscope.scope("v.blk"):
                    clock.advance(ms - 2 * STEP_NS)  # a pair of reads: an instance spans ms exactly
    q = agg.block_quantiles(list(annotate._names))["v.blk"]
    ms1, ms2 = pytest.approx(1_000_000, abs=STEP_NS), pytest.approx(2_000_000, abs=STEP_NS)
    assert q == [ms1, ms1, ms2]


def test_the_verdict_sets_the_machines_speed_beside_a_miss():
    """The profiled runs' light windows of `step` ranged 1.0-1.5 ms, the timed runs' blocks 1.0-1.1
    ms: the machine slowed during the profiled run. Their fast ends agree (+0%), which says the
    light state costs `step` nothing; the miss is the machine's."""
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.verdict import compare, speed_rows

    opts = parse_args(["--", sys.executable, __file__])
    windows = {"windows": {"operations": {"step": {"light_window_ns": [1.0e6, 1.2e6, 1.5e6]}}}}
    prof = {
        "raw_wall_s": 1.6,
        "corrected_wall_s": 1.25,
        "corrected_for_overhead": True,
        "overhead": windows,
        "operations": {"step": {"raw_s": 1.5, "corrected_s": 1.2}},
    }
    result = {
        "runs": [{"mode": "unprofiled", "rep": r, "measured_s": 1.0} for r in (1, 2)],
        "profiled": [prof, prof],
        "timers": [{"step": {"inclusive_s": 0.95}}] * 2,
        "timer_blocks": [{"step": [1.0e6, 1.05e6, 1.1e6]}] * 2,
    }
    got = speed_rows(result, "step")
    assert got["light_spread"] == [pytest.approx(-1 / 6), pytest.approx(0.25)]
    assert got["timer_spread"] == [pytest.approx(1 / 1.05 - 1), pytest.approx(1.1 / 1.05 - 1)]
    assert got["fast_error"] == pytest.approx(0.0)
    v = compare(result, opts)["verdict"]
    assert not v["pass"] and v["speed_drift"]["operation"] == "step"
    notes = " ".join(v["notes"])
    assert "light windows -17%..+25%" in notes and "+0.0% from timed runs" in notes
    assert speed_rows({"profiled": [{}], "timer_blocks": []}, "step") == {
        "light_spread": None,
        "timer_spread": None,
        "fast_error": None,
    }


def test_timer_rows_with_measured_costs_take_them_off_where_they_were_paid():
    from rlscope.trace import schema as S

    pack = lambda pre, post: pre | (post << 32)  # noqa: E731
    a, b = annotate.intern("v.measured.a"), annotate.intern("v.measured.b")
    agg = TimerAggregate()
    agg.feed(
        [  # A over [0, 1000) with B over [100, 200) inside; each boundary measured (pre, post) ns
            (0, 1, S.OP_BEGIN, 1, -1, a, 0, pack(10, 20)),
            (100, 1, S.OP_BEGIN, 2, 1, b, 0, pack(5, 15)),
            (200, 1, S.OP_END, 2, 1, b, 0, pack(7, 9)),
            (1000, 1, S.OP_END, 1, -1, a, 0, pack(3, 4)),
        ]
    )
    ops = agg.counters(list(annotate._names))
    # B: its begin's post and its end's pre are inside it; A: everything after its begin's timestamp
    # and before its end's, B's four parts included
    assert ops["v.measured.b"]["inclusive_ns"] == 100 - 15 - 7
    assert ops["v.measured.a"]["inclusive_ns"] == 1000 - (20 + 5 + 15 + 7 + 9 + 3)
    assert ops["v.measured.a"]["exclusive_ns"] == 1000 - (20 + 5 + 15 + 7 + 9 + 3) - 78
    assert agg.measured_ns == 73 and agg.measured_boundaries == 4


def test_timer_runs_measure_their_boundaries_with_the_c_methods():
    from rlscope.collectors import scope_native

    if scope_native.available() != "native":
        pytest.skip("no C compiler or Python headers")
    sess, agg = _timer_session()
    with sess:
        for _ in range(1000):
            with rlscope.scope("v.measured.loop"):
                pass
    assert agg.measured_boundaries >= 1900  # all but a thread's first boundary or so
    costs = child.measure_timer_costs(n=2000, reps=3)
    assert 0 <= costs["inside"] <= costs["pair"] < 400  # the dispatch left after the measurements


class _FakeRunner:
    """validate's runner without processes: every unprofiled run measures 1 s, a profiled run's
    corrected wall is the next one _fake_validation was given (so its error is known), and timer
    runs record no operation, so only the total is checked."""

    def __init__(self, opts, work, log) -> None:
        self.whole = False
        self.calls = 0

    def trace_dir(self, rep: int) -> pathlib.Path:
        return pathlib.Path(f"rep-{rep + 1}")

    def run(self, mode: str, rep: int) -> runner.ChildRun:
        record = {"profile_calls": 1, "window_s": 1.0, "timers": {}, "blocks": {}}
        return runner.ChildRun(mode, rep, 0, 1.0, record=record)


def _fake_validation(monkeypatch, walls: list[float]) -> None:
    import rlscope.analysis

    pending = iter(walls)

    class Analyzed:
        def __init__(self) -> None:
            self.summary = {"trace_dir": "x", "wall": next(pending)}

    monkeypatch.setattr(runner, "_Runner", _FakeRunner)
    monkeypatch.setattr(runner, "measure_timer_costs", lambda: {"inside": 0.0, "pair": 0.0})
    monkeypatch.setattr(runner, "corrected_timers", lambda counters, costs: {})
    monkeypatch.setattr(rlscope.analysis, "analyze", lambda *a, **k: Analyzed())
    monkeypatch.setattr(
        runner,
        "profiled_figures",
        lambda s: {
            "raw_wall_s": s["wall"],
            "corrected_wall_s": s["wall"],
            "corrected_for_overhead": True,
            "calibration": "test",
            "overhead": {},
            "warnings": [],
            "operations": {},
        },
    )


def test_median_interval_against_exact_binomial_coverage() -> None:
    """Brute force over every k: the interval is [x(k), x(n+1-k)] for the largest k whose coverage
    1 - 2 P(Bin(n, 1/2) < k) reaches the level asked, and None when even [min, max] does not."""
    from itertools import product

    def coverage(n: int, k: int) -> float:  # enumerate every sign pattern of n draws around the median
        hits = sum(1 for signs in product((0, 1), repeat=n) if k <= sum(signs) <= n - k)
        return hits / 2**n

    for n in range(2, 13):
        xs = [float(i) for i in range(n)]
        for looks in (1, 3):
            want = 1 - 0.10 / looks
            ks = [k for k in range(1, n // 2 + 1) if coverage(n, k) >= want]
            got = verdict.median_interval(xs, looks)
            assert got == ([xs[max(ks) - 1], xs[n - max(ks)]] if ks else None), (n, looks)
    assert verdict.median_interval([0.1, 0.2, 0.3, 0.4]) is None  # 87.5% at best: too few for 90%
    # one run in the machine's slow speed moves the interval by one rank, not by its distance
    assert verdict.median_interval([0.0, 0.01, -0.01, 0.02, -0.02, 0.0, 0.01, -0.01, 0.0, 0.40]) == [
        -0.01,
        0.02,
    ]


def test_look_points_double_and_skip_counts_too_small_for_an_interval() -> None:
    assert runner.look_points(5, 5) == [5]
    assert runner.look_points(8, 20) == [8, 16, 20]
    assert runner.look_points(7, 40) == [7, 14, 28, 40]
    assert runner.look_points(6, 40) == [12, 24, 40]  # 4 looks ask 97.5%: six runs give 96.9%
    # 3 and 5 runs can give no 95% (or 96.7%) interval of a median: they are not looks
    assert runner.look_points(3, 10) == [6, 10]
    assert runner.look_points(5, 20) == [10, 20]
    assert runner.look_points(5, 10) == [10]
    for reps, most in ((3, 10), (5, 20), (8, 20), (6, 40), (4, 4)):
        points = runner.look_points(reps, most)
        assert points[-1] == most
        if len(points) > 1:  # every look can give an interval at the looks' shared level
            assert all(verdict.median_interval([0.0] * n, len(points)) is not None for n in points)


def test_max_reps_runs_until_every_interval_clears_its_band(monkeypatch) -> None:
    """Brute force: with --reps 5 --max-reps 20 validate looks at 10 and 20 repetitions (five cannot
    give a 95% interval of a median) and stops at the first whose 95% interval lies inside ±5%;
    here 10, and confirmed."""
    errors = [0.03, -0.04, 0.02, 0.0, 0.25, -0.01, 0.0, 0.01, 0.0, 0.01] + [0.0] * 10
    _fake_validation(monkeypatch, [1 + e for e in errors])
    opts = cli.parse_args(["--reps", "5", "--max-reps", "20", "--no-warmup", "--", "python", __file__])
    res = runner.validate(opts)
    assert verdict.median_interval(errors[:5], 2) is None  # five runs cannot give 95%
    lo, hi = verdict.median_interval(errors[:10], 2)
    assert lo >= -0.05 and hi <= 0.05
    assert res["reps"] == 10 and res["looks"] == 2 and res["min_reps"] == 5 and res["max_reps"] == 20
    assert len([r for r in res["runs"] if r["mode"] == "profiled"]) == 10
    assert res["verdict"]["pass"] and "every checked figure's 90% interval" in res["verdict"]["line"]


def test_max_reps_stops_at_its_limit_and_says_so(monkeypatch) -> None:
    """A machine whose runs swing by ±15% never settles: validate runs to --max-reps, no more, and
    says it is not settled."""
    _fake_validation(monkeypatch, [1.15, 0.85] * 10)
    opts = cli.parse_args(["--reps", "3", "--max-reps", "8", "--no-warmup", "--", "python", __file__])
    res = runner.validate(opts)
    assert res["reps"] == 8
    assert "not settled after 8 repetitions" in res["verdict"]["line"]


def test_without_max_reps_the_repetitions_are_exactly_reps(monkeypatch) -> None:
    _fake_validation(monkeypatch, [1.15, 0.85] * 10)
    opts = cli.parse_args(["--reps", "2", "--no-warmup", "--", "python", __file__])
    res = runner.validate(opts)
    assert res["reps"] == 2 and res["looks"] == 1
    with pytest.raises(RLScopeError, match="max-reps"):
        cli.parse_args(["--reps", "4", "--max-reps", "3", "--", "python", __file__])


class _Clock:
    """A fake time.perf_counter for validate: each run of the fake runner takes ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        return self.now


def _ten_second_repetitions(monkeypatch) -> _Clock:
    """A fake validation whose runs take 10/3 s each on a fake clock (10 s a repetition)."""
    import types

    clock = _Clock(10 / 3)
    _fake_validation(monkeypatch, [1.0] * 20)
    run = _FakeRunner.run

    def timed_run(self, mode, rep):
        clock.now += clock.step
        return run(self, mode, rep)

    monkeypatch.setattr(_FakeRunner, "run", timed_run)
    monkeypatch.setattr(runner, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    monkeypatch.setattr(cli, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    return clock


def test_time_limit_starts_no_repetition_that_would_end_past_it(monkeypatch) -> None:
    """Runs of 10/3 s (10 s a repetition), --time-limit 35: repetitions start at 0, 10 and 20 s; a
    fourth, starting at 30 s, would end at 40 s, so validate stops at three and says so."""
    _ten_second_repetitions(monkeypatch)
    argv = ["--reps", "5", "--time-limit", "35", "--no-warmup", "--", "python", __file__]
    res = runner.validate(cli.parse_args(argv))
    assert res["reps"] == 3 and res["stopped"] == "--time-limit 35 s after 3 repetitions"
    assert res["verdict"]["line"].endswith("[stopped early: --time-limit 35 s after 3 repetitions]")
    with pytest.raises(RLScopeError, match="time-limit"):
        cli.parse_args(["--time-limit", "0", "--", "python", __file__])


def test_a_first_calibration_counts_against_the_time_limit_and_is_quick(monkeypatch, tmp_path) -> None:
    """A machine with no calibration yet, --time-limit 35, repetitions of 10 s: the calibration (20 s
    here) is the quick one and counts, so one repetition runs (from 20 s; a second would end at 40 s).
    Without a limit the full calibration runs and the limit has nothing to say."""
    import rlscope.overhead.calibrate.cli as calibrate_cli

    clock = _ten_second_repetitions(monkeypatch)
    asked: list[bool] = []

    def calibrate(quiet: bool = False, quick: bool = False) -> None:
        asked.append(quick)
        clock.now += 20

    monkeypatch.setattr(calibrate_cli, "ensure_calibration", calibrate)
    out = tmp_path / "v.json"
    argv = ["--reps", "5", "--time-limit", "35", "--no-warmup", "--json", str(out), "--", "python", __file__]
    cli.main(argv)
    res = json.loads(out.read_text())
    assert asked == [True]
    assert res["reps"] == 1 and res["stopped"] == "--time-limit 35 s after 1 repetition"
    cli.main(["--reps", "2", "--no-warmup", "--json", str(out), "--", "python", __file__])
    assert asked == [True, False] and json.loads(out.read_text())["reps"] == 2


def test_sigterm_during_the_first_calibration_is_one_line_and_143(monkeypatch, capsys) -> None:
    import rlscope.overhead.calibrate.cli as calibrate_cli

    _fake_validation(monkeypatch, [1.0])

    def calibrate(quiet: bool = False, quick: bool = False) -> None:
        raise runner.Terminated

    monkeypatch.setattr(calibrate_cli, "ensure_calibration", calibrate)
    assert cli.main(["--reps", "2", "--no-warmup", "--", "python", __file__]) == 143
    assert "terminated (SIGTERM) before a repetition was done" in capsys.readouterr().err


def test_sigterm_mid_repetition_keeps_the_repetitions_done(monkeypatch, tmp_path, capsys) -> None:
    """`timeout` ends validate in its third repetition: the JSON holds the two done (none of the
    third's runs), the table is shown, and the exit status is 143, as a shell reports SIGTERM."""
    _fake_validation(monkeypatch, [1.02, 1.01, 1.0, 1.0, 1.0])
    run = _FakeRunner.run

    def cut_run(self, mode, rep):
        if rep == 2 and mode == runner.mode_order(2)[1]:
            raise runner.Terminated
        return run(self, mode, rep)

    monkeypatch.setattr(_FakeRunner, "run", cut_run)
    out = tmp_path / "v.json"
    code = cli.main(
        ["--reps", "5", "--no-warmup", "--no-calibrate", "--json", str(out), "--", "python", __file__]
    )
    assert code == 143
    res = json.loads(out.read_text())
    assert res["reps"] == 2 and res["signal"] == "SIGTERM" and len(res["profiled"]) == 2
    assert len(res["runs"]) == 2 * len(runner.mode_order(0)) and len(res["timers"]) == 2
    assert "stopped early: SIGTERM after 2 repetitions" in capsys.readouterr().out.replace("\n", "")


def test_sigterm_before_any_repetition_is_one_line_and_143(monkeypatch, capsys) -> None:
    _fake_validation(monkeypatch, [1.0])

    def cut_run(self, mode, rep):
        raise runner.Terminated

    monkeypatch.setattr(_FakeRunner, "run", cut_run)
    assert cli.main(["--reps", "2", "--no-warmup", "--no-calibrate", "--", "python", __file__]) == 143
    assert "terminated (SIGTERM) before a repetition was done" in capsys.readouterr().err


def test_sigterm_while_a_child_runs_ends_the_child(tmp_path) -> None:
    """SIGTERM sent to validate alone (not its process group): the program it runs must not be left
    running. The child sleeps 30 s; run_child returns within seconds, raising Terminated."""
    import signal
    import sys
    import threading
    import time

    previous = signal.signal(signal.SIGTERM, runner._on_sigterm)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    t0 = time.perf_counter()
    try:
        timer.start()
        with pytest.raises(runner.Terminated):
            runner.run_child([sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)
    assert time.perf_counter() - t0 < 10


def test_a_timer_fold_makes_no_garbage_collection() -> None:
    """Folding a second of events must not make the job collect: its rows are Python lists alive
    until the fold ends, and a collection meanwhile promoted them all, bringing the timed process a
    full collection (~85 ms in a torch process) the unprofiled one did not make."""
    import gc

    from rlscope.trace import schema as S

    sess, agg = _timer_session(SteppingClock())
    sess.events = [
        (2 * i + k, 1, (S.OP_BEGIN, S.OP_END)[k], i, -1, 0, 0) for i in range(20_000) for k in (0, 1)
    ]
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    old = gc.get_threshold()
    gc.set_threshold(50, 2, 2)  # a collection every 50 container allocations, were it on
    gc.callbacks.append(count)
    try:
        sess.drain()
        assert collections == [] and gc.isenabled()
        gc.disable()
        sess.events = [(0, 1, S.OP_BEGIN, 0, -1, 0, 0), (5, 1, S.OP_END, 0, -1, 0, 0)]
        sess.drain()
        assert not gc.isenabled()  # a job that turned it off keeps it off
    finally:
        gc.enable()
        gc.callbacks.remove(count)
        gc.set_threshold(*old)
    assert agg.counters(["x"])["x"]["calls"] == 20_001


def _fold(rows: list[tuple]) -> dict[str, dict]:
    agg = TimerAggregate()
    agg.feed(rows)
    return agg.counters(list(annotate._names))


def test_timer_rows_without_instance_ids_close_by_name_per_thread():
    """The C timer path writes no instance ids: the fold closes an end's innermost open operation of
    its name on its thread, and finds recursion by name; the figures equal those of rows with ids."""
    from rlscope.trace import schema as S

    a, b = annotate.intern("v.noid.a"), annotate.intern("v.noid.b")
    B, E = S.OP_BEGIN, S.OP_END
    with_ids = [  # thread 1: A [0, 1000) holding B [100, 300) and a recursive A [400, 500); thread 2: B
        (0, 1, B, 1, -1, a, 0),
        (50, 2, B, 9, -1, b, 0),
        (100, 1, B, 2, 1, b, 0),
        (300, 1, E, 2, 1, b, 0),
        (400, 1, B, 3, 1, a, S.FLAG_RECURSIVE),
        (500, 1, E, 3, 1, a, 0),
        (650, 2, E, 9, -1, b, 0),
        (700, 1, E, 7, -1, b, 0),  # an end whose begin came before the session: ignored
        (1000, 1, E, 1, -1, a, 0),
    ]
    no_ids = [(ts, th, k, -1, -1, nid, 0) for ts, th, k, _i, _p, nid, _f in with_ids]
    want, got = _fold(with_ids), _fold(no_ids)
    assert got["v.noid.a"] == want["v.noid.a"] and got["v.noid.b"] == want["v.noid.b"]
    assert got["v.noid.a"]["calls"] == 2 and got["v.noid.a"]["inclusive_calls"] == 1
    assert got["v.noid.a"]["inclusive_ns"] == 1000 and got["v.noid.b"]["inclusive_ns"] == 200 + 600


def test_timer_runs_take_the_c_timer_path(monkeypatch, tmp_path):
    """Under a timer session the C methods write one row per boundary (no ids), stamped with its
    cost, from every thread; a fold falls due at an exit and runs there; the session's own path
    is back once it stops."""
    import threading

    import numpy as np

    from rlscope.collectors import scope_native
    from rlscope.trace import schema as S

    if scope_native.available() != "native":
        pytest.skip("no C compiler or Python headers")
    # a fold 20 ms after the start: none in the first block (a thread's start and join took over
    # 1 ms on a loaded 2-core CPU machine, and a fold there drained the rows this test reads), one at the tick
    monkeypatch.setattr(child, "_TICK_NS", 20_000_000)
    sess, agg = _timer_session()
    rows = []
    with sess:
        with rlscope.phase("v.path.phase"), rlscope.scope("v.path.outer"):
            with rlscope.simulator(), rlscope.scope("v.path.outer"):
                pass
            t = threading.Thread(
                target=lambda: rlscope.scope("v.path.thread").__enter__().__exit__(None, None, None)
            )
            t.start()
            t.join()
        rows = np.frombuffer(sess.events.drain(), np.int64).reshape(-1, 8).tolist()
        agg.feed(rows)
        with rlscope.scope("v.path.tick"):
            _busy(25)  # past the next fold: it runs at this scope's exit, before the session stops
        assert agg.counters(list(annotate._names))["v.path.tick"]["calls"] == 1
    assert [r[2] for r in rows] == [
        S.PHASE_BEGIN, S.OP_BEGIN, S.CAT_BEGIN, S.OP_BEGIN, S.OP_END, S.CAT_END,
        S.OP_BEGIN, S.OP_END, S.OP_END, S.PHASE_END,
    ]  # fmt: skip
    assert all(r[4] == -1 and (r[3] == -1 or r[2] in (S.CAT_BEGIN, S.CAT_END)) for r in rows)
    assert all(r[7] > 0 for r in rows), "every boundary stamped its own cost"
    threads = {r[1] for r in rows}
    assert threading.get_native_id() in threads and len(threads) == 2
    t = _totals(agg, {"pair": 0.0, "inside": 0.0, "category": 0.0})
    assert t["v.path.outer"]["calls"] == 2 and t["v.path.thread"]["calls"] == 1
    # stopped: a profiled session's boundaries take their full path again (instance ids)
    with rlscope.profile(tmp_path / "after", gpu=False, backend=False) as s:
        with rlscope.scope("v.path.after"):
            pass
        ev = np.frombuffer(s.events.drain(), np.int64).reshape(-1, 8)
    assert any(r[2] == S.OP_BEGIN and r[3] >= 0 for r in ev)


def test_analyzer_warnings_that_differ_only_in_figures_are_one_line() -> None:
    few = "only {} window switches in this run: a"
    runs = [
        {"warnings": [few.format(5), "memory: 372,115 events"]},
        {"warnings": [few.format(4), "memory: 372,115 events"]},
        {"warnings": [few.format(5), "memory: 372,115 events"]},
        {"warnings": ["memory: 372,115 events", "a collector failed"]},
    ]
    assert render.distinct_warnings(runs) == [
        few.format(5) + " (3 of 4 runs)",
        "memory: 372,115 events",
        "a collector failed (1 of 4 runs)",
    ]
    assert render.distinct_warnings(runs[:1]) == runs[0]["warnings"]


def _stopped_validation(monkeypatch, tmp_path, name: str, walls: list[float], argv: list[str]) -> str:
    """One validation of the fake runner (walls: the profiled runs' corrected walls against 1 s
    unprofiled), written as --json would; returns the file."""
    _fake_validation(monkeypatch, walls)
    out = tmp_path / f"{name}.json"
    code = cli.main(["--no-warmup", "--no-calibrate", "--json", str(out), *argv, "--", "python", __file__])
    assert code in cli.EXIT_STATUS.values()
    return str(out)


def test_merge_pools_the_repetitions_of_validations_stopped_by_a_time_limit(monkeypatch, tmp_path, capsys):
    """Two calls of one command, 4 and 6 repetitions (the first stopped by --time-limit): merged,
    their 10 repetitions are one validation's, renumbered, every error kept, compared again with one
    more look for the decision to merge; the JSON says which files, and the line says it merged."""
    first = [1.02, 0.97, 1.04, 1.0]
    second = [1.01, 0.99, 1.0, 1.03, 0.98, 1.0]
    _ten_second_repetitions(monkeypatch)  # 10 s a repetition: --time-limit 45 stops at 4
    a = _stopped_validation(monkeypatch, tmp_path, "a", first, ["--reps", "6", "--time-limit", "45"])
    b = _stopped_validation(monkeypatch, tmp_path, "b", second, ["--reps", "6"])
    assert json.loads(pathlib.Path(a).read_text())["stopped"] == "--time-limit 45 s after 4 repetitions"
    capsys.readouterr()
    out = tmp_path / "merged.json"
    code = cli.main(["--merge", a, b, "--json", str(out)])
    res = json.loads(out.read_text())
    assert code == cli.EXIT_STATUS[res["verdict"]["status"]]
    assert res["reps"] == 10 and len(res["profiled"]) == len(res["timers"]) == 10
    for mode in ("unprofiled", "timers", "profiled"):
        assert sorted(r["rep"] for r in res["runs"] if r["mode"] == mode) == list(range(1, 11))
    total = res["rows"][0]
    assert total["error"] == pytest.approx([w - 1 for w in first + second])
    assert total["median_error"] == pytest.approx(0.0)
    assert res["looks"] == 1 + 1 + 1  # each call looked once; the merge is one look more
    assert total["interval"] == pytest.approx(verdict.median_interval(total["error"], 3))
    assert [m["reps"] for m in res["merged"]] == [4, 6] and res["merged"][0]["stopped"]
    assert "stopped" not in res
    line = res["verdict"]["line"]
    assert line.endswith("[merged: 10 repetitions from 2 files]") and "--max-reps allowed" not in line
    assert "merged: 10 repetitions" in capsys.readouterr().out.replace("\n", "")


def test_merge_refuses_what_is_not_one_validations_repetitions(monkeypatch, tmp_path):
    """Results of different commands or speed probes (the runs' speeds would not compare), a file
    that is not a result, a single file, or a program beside --merge: a one-line error (status 2
    from rlscope's main), nothing merged."""
    a = _stopped_validation(monkeypatch, tmp_path, "a", [1.0] * 3, ["--reps", "3"])
    other = json.loads(pathlib.Path(a).read_text())
    other["command"] = ["python", "other.py"]
    b = tmp_path / "other.json"
    b.write_text(json.dumps(other))
    not_json = tmp_path / "notes.txt"
    not_json.write_text("not a result\n")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**other, "schema": "rlscope.validate/0"}))
    older_probe = {k: v for k, v in json.loads(pathlib.Path(a).read_text()).items() if k != "speed_probe"}
    c = tmp_path / "older_probe.json"
    c.write_text(json.dumps(older_probe))
    cases = [
        (["--merge", a, str(b)], "not a validation of the same kind .*different command"),
        (["--merge", a, str(c)], "different speed_probe"),
        (["--merge", a, str(not_json)], "not a validate JSON file"),
        (["--merge", a, str(old)], "not a validate result of schema"),
        (["--merge", a, str(tmp_path / "missing.json")], "cannot read"),
        (["--merge", a], "two result files or more"),
        (["--merge", a, a, "--", "python", __file__], "runs nothing"),
    ]
    for argv, message in cases:
        with pytest.raises(RLScopeError, match=message):
            cli.main(argv)


def test_the_verdict_says_when_the_corrected_runs_spread_beyond_the_reference_runs():
    """Reference runs within 1% of each other and corrected totals ±10%: the note names the excess
    as the correction's own noise and a longer run as the remedy; alike spreads, or fewer than five
    runs, give no note."""
    from rlscope.overhead.validate.cli import parse_args
    from rlscope.overhead.validate.verdict import compare, correction_noise_note

    opts = parse_args(["--", sys.executable, __file__])
    walls = (1.0, 1.01, 0.99, 1.0, 1.005)
    runs = [{"mode": "unprofiled", "rep": r, "measured_s": v} for r, v in enumerate(walls, 1)]
    corrected = (1.0, 1.2, 0.85, 1.1, 0.9)
    prof = [
        {"raw_wall_s": 1.3 * c, "corrected_wall_s": c, "corrected_for_overhead": True, "operations": {}}
        for c in corrected
    ]
    result = {"runs": runs, "profiled": prof, "timers": [{}] * 5}
    notes = compare(result, opts)["verdict"]["notes"]
    note = next(n for n in notes if "correction's own noise" in n)
    assert "vary by 14.2%" in note and "against 0.7% for the unprofiled runs" in note
    assert "longer run" in note

    alike = {**result, "profiled": [{**p, "corrected_wall_s": w} for p, w in zip(prof, walls, strict=True)]}
    assert not any("own noise" in n for n in compare(alike, opts)["verdict"]["notes"])
    row = {"operation": "[total]", "reference_s": list(walls[:4]), "corrected_s": list(corrected[:4])}
    assert correction_noise_note([row], "unprofiled") is None
