"""Calibration that cannot lie: a cost is stored only when its rounds agree, is positive and is
plausible; a refused cost is said in one line and left out; the costs a trace was recorded with
travel inside it and give the same corrected figures wherever it is analyzed."""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
from collections.abc import Iterator

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.collectors import scope_native
from rlscope.overhead.calibrate import measure, module_calls, run, store, workloads
from rlscope.overhead.calibrate import rounds as cal_rounds
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.session import Session


class FakeClock:
    """One second per round: the budget is counted in rounds, not in this machine's speed."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def _rounds(values: list[float]) -> Iterator[dict[str, float]]:
    for v in itertools.cycle(values):
        yield {"total": v, "inside": v / 2}


def _stable(values: list[float], k: int = 5, budget_s: float = 20.0) -> cal_rounds.Stable:
    it = _rounds(values)
    return cal_rounds.until_stable(lambda: next(it), "total", k, budget_s, clock=FakeClock())


def test_a_stable_sequence_is_accepted_after_k_rounds():
    st = _stable([1000, 1050, 980, 1010, 995, 3000])
    assert len(st.rounds) == 5  # stops as soon as the last k agree
    assert st.value == 1000
    assert st.spread == pytest.approx(70 / 1000)
    assert st.median("inside") == 500
    assert store.refusal("scope", st) is None


def test_a_disturbed_round_is_outlived():
    """One round hit by a load spike: the rule waits until the last k agree again."""
    st = _stable([1000, 2600, 1000, 1020, 990, 1000, 1010, 1005] + [1000] * 20)
    assert st.stable and st.value == pytest.approx(1005, abs=10)
    assert all(v < 1100 for v in st.last)
    assert store.refusal("scope", st) is None


def test_a_cold_first_round_at_the_budgets_end_is_slid_past():
    """A quick calibration's scope cost read 354 ns, then 279, 270, 273 as its 5 s budget ran out at
    k = 4 rounds: refused, where the window needed one more round. The budget now ends the rounds
    only once the window could slide past SLIDE_ROUNDS early ones."""
    st = _stable([354.0, 279.0, 270.0, 273.0] + [272.0] * 20, k=4, budget_s=3.0)
    assert st.stable and len(st.rounds) == 5 and store.refusal("scope", st) is None
    assert st.cost == pytest.approx(272.5)
    fast, every, _ = cal_rounds._until_stable_at_speed(
        iter([{"total": v, "ref": 100.0} for v in [354.0, 279.0, 270.0, 273.0] + [272.0] * 9]).__next__,
        "total",
        4,
        3.0,
        clock=FakeClock(),
    )
    assert fast is not None and fast.stable and len(every) == 5


def test_a_cost_that_keeps_varying_by_half_is_refused_in_one_line():
    st = _stable([1000, 1500], budget_s=12.0)
    assert not st.stable and len(st.rounds) == 12  # ran until the budget was spent
    why = store.refusal("scope", st)
    assert why is not None and "\n" not in why
    assert why.startswith("scope: refused: unstable")
    assert st.spread > 0.2 and f"spread {st.spread:.0%}" in why
    assert "1,000 ns" in why and "1,500 ns" in why  # the numbers, not just a verdict


def test_a_negative_cost_is_refused():
    st = _stable([-26046, -26100, -25990])
    why = store.refusal("backend", st)
    assert why is not None and why.startswith("backend: refused: negative cost -26,046 ns")


def test_an_implausible_cost_is_refused():
    too_big = store.refusal("scope", _stable([30_000, 30_100, 29_900]))
    assert (
        too_big is not None and "implausible 30,000 ns" in too_big and "outside 50 ns..20,000 ns" in too_big
    )
    too_small = store.refusal("scope", _stable([20, 20, 20]))
    assert too_small is not None and "implausible" in too_small


def test_stability_needs_at_least_two_rounds():
    with pytest.raises(ValueError):
        cal_rounds.until_stable(lambda: {"total": 1.0}, "total", 1, 1.0)


# -- the machine's speed moves; the judged figure does not ---------------------------------------


def _regime_rounds(per_ref: list[float], refs: list[float]) -> Iterator[dict[str, float]]:
    """Rounds of a cost of Python code: ``per_ref`` ns per ns of the reference loop, timed on a
    machine whose speed (``refs``: the reference loop's ns per iteration) switches regime."""
    for v, ref in itertools.cycle(zip(per_ref, refs, strict=True)):
        yield {"total": v * ref, "inside": v * ref / 2, "ref": ref, "per_ref": v}


def test_a_cost_judged_per_reference_outlives_the_machine_switching_speed():
    """The host switching between a fast (115 ns) and a slow (200 ns) regime moves the cost in ns
    by 74%; per ns of the reference loop it is steady, so it is accepted, stored in ns."""
    it = _regime_rounds([9.0, 9.2, 8.9, 9.1], [115, 200, 200, 115])
    st = cal_rounds.until_stable(lambda: next(it), "per_ref", 4, 20.0, clock=FakeClock(), cost_field="total")
    assert st.stable and len(st.rounds) == 4
    assert st.value == pytest.approx(9.05)
    assert st.cost == pytest.approx(statistics.median([9.0 * 115, 9.2 * 200, 8.9 * 200, 9.1 * 115]))
    assert store.refusal("scope", st) is None
    in_ns = cal_rounds.until_stable(lambda: next(it), "total", 4, 20.0, clock=FakeClock())
    assert not in_ns.stable  # the same rounds judged in ns: refused for the machine's doing


@pytest.mark.parametrize("key", ["native-6", "native-full-6", "python"])
def test_a_boundary_on_the_c_methods_is_judged_in_ns(monkeypatch, key):
    """A C scope pair costs the same ns whatever the interpreter's speed (its clock reads and
    stores): on a 2-core CPU machine 143-157 ns at reference loops of 109-140 ns. Judged per
    reference ns, those rounds move 30% and a calibration stored what its fastest loop made of
    them; judged in ns they agree, and the ns are stored as measured. The Python methods are
    Python code: judged per reference ns."""
    from rlscope.collectors import scope_native

    monkeypatch.setattr(scope_native, "calibration_key", lambda: key)
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    refs = itertools.cycle([110.0, 110.0, 140.0, 140.0, 125.0, 125.0])  # before and after each round
    monkeypatch.setattr(cal_rounds, "_reference", lambda: next(refs))
    totals = itertools.cycle([150.0, 148.0, 153.0, 151.0])
    st = cal_rounds._until_stable_boundary(lambda: {"total": next(totals)}, "total", cal_rounds.QUICK)
    if key == "python":
        assert st.field == "per_ref" and st.cost_field == "total"
        return
    assert st.field == "total" and st.stable and len(st.rounds) == cal_rounds.QUICK.k
    assert st.cost == pytest.approx(150.5)
    assert all("ref" in r for r in st.rounds)  # still timed: kept in the file and the speed record


def _boundary_rounds(
    monkeypatch, refs: list[float], totals: list[float], record: float | None, clock=None
) -> cal_rounds.Stable:
    """_until_stable_boundary on the C methods over rounds whose reference loop runs at ``refs`` (one
    figure per round, before and after alike) and whose boundary costs ``totals`` ns."""
    from rlscope.collectors import scope_native

    monkeypatch.setattr(scope_native, "calibration_key", lambda: "native-6")
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: record)
    ref_it = itertools.cycle([x for r in refs for x in (r, r)])
    monkeypatch.setattr(cal_rounds, "_reference", lambda: next(ref_it))
    total_it = itertools.cycle(totals)
    if clock is not None:  # one second a round: QUICK's 5 s budget is 5 rounds
        return cal_rounds._until_stable_boundary(
            lambda: {"total": next(total_it)}, "total", cal_rounds.QUICK, clock
        )
    plan = dataclasses.replace(
        cal_rounds.QUICK, budget_s=60.0
    )  # the rounds are instant: ends when stable, or at 500
    return cal_rounds._until_stable_boundary(lambda: {"total": next(total_it)}, "total", plan)


def test_a_boundary_round_in_the_slow_regime_does_not_count(monkeypatch):
    """A 2-core CPU machine's slow regime (reference loop 180 ns against 108) moves a C boundary
    too (186-231 ns against ~150): those rounds are left out, and the cost is judged and stored
    from the fast ones."""
    refs = [108.0, 180.0, 110.0, 182.0, 109.0, 112.0, 181.0, 108.0]
    totals = [150.0, 200.0, 148.0, 231.0, 152.0, 151.0, 195.0, 149.0]
    st = _boundary_rounds(monkeypatch, refs, totals, record=None)
    assert st.field == "total" and st.stable and len(st.rounds) == cal_rounds.QUICK.k
    assert all(r["ref"] < 120 for r in st.rounds)
    assert st.cost == pytest.approx(statistics.median([150.0, 148.0, 152.0, 151.0]))  # the first four fast


def test_a_boundary_held_in_the_slow_regime_falls_back_to_the_reference(monkeypatch):
    """Every round slow against the machine's record (108 ns): no fast round to judge in ns, so the
    cost is judged per reference ns, and run_calibration stores it at the fastest speed."""
    st = _boundary_rounds(monkeypatch, [180.0], [200.0], record=108.0)
    assert st.field == "per_ref" and st.cost_field == "total"
    assert st.value == pytest.approx(200.0 / 180.0)


def test_a_boundary_waits_for_the_fast_speed_before_falling_back(monkeypatch):
    """Eight seconds of the slow regime (reference 180 ns, the pair 220-404 ns), then the fast one:
    with a 5 s budget the calibration would have fallen back; it waits up to SLOW_WAIT budgets for k
    fast rounds and judges those in ns."""
    refs = [180.0] * 8 + [108.0] * 8
    totals = [255.0, 404.0, 389.0, 220.0, 300.0, 250.0, 380.0, 230.0] + [150.0, 148.0, 152.0, 151.0] * 2
    st = _boundary_rounds(monkeypatch, refs, totals, record=108.0, clock=FakeClock())
    assert st.field == "total" and st.stable and all(r["ref"] == 108.0 for r in st.rounds)
    assert (
        st.cost == pytest.approx(150.5) and st.elapsed_s <= cal_rounds.SLOW_WAIT * cal_rounds.QUICK.budget_s
    )


def test_a_boundary_measured_slow_before_the_fast_speed_was_known_is_measured_again(monkeypatch):
    """The scope pair is a calibration's first measurement: on a machine without a speed record,
    one held slow throughout (reference 199 ns) judged itself at that speed and stored 201 ns. Once
    the later costs have shown the fast speed (108 ns) it is measured again, told the fast speed;
    the category, measured at it, is kept."""
    from rlscope.collectors import scope_native

    monkeypatch.setattr(scope_native, "calibration_key", lambda: "native-6")
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    slow = cal_rounds.Stable("total", 2, [{"total": 201.0, "ref": 199.0}] * 2)
    fast = cal_rounds.Stable("total", 2, [{"total": 145.0, "ref": 110.0}] * 2)
    calls = []

    def measure_scope(plan, traces, options, known_fastest=None):
        calls.append(known_fastest)
        return cal_rounds.Stable("total", 2, [{"total": 150.0, "ref": 109.0}] * 2), {"total": 150.0}

    monkeypatch.setattr(measure, "measure_scope", measure_scope)
    boundaries = {"scope": (slow, {"total": 201.0}), "category": (fast, {"total": 145.0})}
    logged = []
    measure._measure_boundaries_again(
        boundaries, cal_rounds.QUICK, None, [199.0, 110.0, 108.0], logged.append
    )
    assert calls == [108.0] and boundaries["scope"][1]["total"] == 150.0
    assert boundaries["category"][0] is fast and len(logged) == 1 and "again" in logged[0]


def test_backend_rounds_in_a_slow_stretch_do_not_count(monkeypatch):
    """The backend's rho held steady when the host slowed down, its ns did not (a calibration whose
    rounds all ran at a 243-259 ns reference loop stored 1,138 ns against 641-749 at 142-159): the
    rounds run slow are left out, the calibration waits for fast ones and judges those."""
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    refs = [250.0] * 4 + [150.0] * 4
    rounds = iter(
        {"rho": 0.30 if r > 200 else 0.25, "total": 1100.0 if r > 200 else 700.0, "ref": r} for r in refs
    )
    fast, every, _ = cal_rounds._until_stable_at_speed(
        lambda: next(rounds), "rho", 4, 5.0, known_fastest=148.0, clock=FakeClock(), cost_field="total"
    )
    assert fast is not None and len(every) == 8 and all(r["ref"] == 150.0 for r in fast.rounds)
    assert fast.value == 0.25 and fast.cost == 700.0
    slow = iter([{"rho": 0.3, "total": 1100.0, "ref": 250.0}] * 40)
    fast, every, elapsed = cal_rounds._until_stable_at_speed(
        lambda: next(slow), "rho", 4, 5.0, known_fastest=148.0, clock=FakeClock(), cost_field="total"
    )
    # waited three budgets, then gave up: all rounds kept
    assert fast is None and elapsed >= cal_rounds.SLOW_WAIT * 5.0


def test_waiting_for_the_fast_speed_ends_when_the_reference_loop_is_back_or_the_wait_is_over(monkeypatch):
    readings = iter([284.0, 280.0, 112.0, 284.0])
    monkeypatch.setattr(cal_rounds, "_reference", lambda: next(readings))
    slept: list[float] = []
    assert cal_rounds._wait_for_speed(109.0, 30.0, clock=FakeClock(), sleep=slept.append) == 112.0
    assert len(slept) == 2  # back within SLOW_REGIME of 109 ns at the third reading
    monkeypatch.setattr(cal_rounds, "_reference", lambda: 284.0)
    slept.clear()
    assert cal_rounds._wait_for_speed(109.0, 5.0, clock=FakeClock(), sleep=slept.append) == 284.0
    assert len(slept) == 4  # a FakeClock second per reading: gives up after the 5 s asked


def _negative_then(total: float, negatives: int, calls: list):
    """A scope measurement that reads -53 ns (a 2-core CPU machine in a 2.5x slow stretch)
    ``negatives`` times, then ``total``."""

    def measure_scope(plan, traces, options, known_fastest=None):
        calls.append(known_fastest)
        if len(calls) <= negatives:
            return cal_rounds.Stable("total", 2, [{"total": -53.0, "ref": 284.0}] * 2), {"total": -53.0}
        return cal_rounds.Stable("total", 2, [{"total": total, "ref": 112.0}] * 2), {"total": total}

    return measure_scope


def test_a_boundary_refused_in_a_slow_stretch_is_measured_again_once_the_speed_is_back(monkeypatch):
    """The scope pair measured -53 ns with the reference loop at 284 ns, against the machine's 109:
    measured again at once (slow), still negative; so the calibration waits for the fast speed and
    measures it once more, and keeps that figure. The category, fine, is left alone."""
    from rlscope.collectors import scope_native

    monkeypatch.setattr(scope_native, "calibration_key", lambda: "native-6")
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: 109.0)
    waited: list[float] = []
    monkeypatch.setattr(
        cal_rounds, "_wait_for_speed", lambda fastest, wait_s: waited.append(fastest) or 112.0
    )
    calls: list = []
    monkeypatch.setattr(measure, "measure_scope", _negative_then(148.0, 1, calls))
    fine = cal_rounds.Stable("total", 2, [{"total": 145.0, "ref": 110.0}] * 2)
    boundaries = {
        "scope": (cal_rounds.Stable("total", 2, [{"total": -53.0, "ref": 284.0}] * 2), {"total": -53.0}),
        "category": (fine, {"total": 145.0}),
    }
    logged: list[str] = []
    measure._measure_boundaries_again(boundaries, cal_rounds.QUICK, None, [284.0], logged.append)
    assert calls == [109.0, 109.0] and waited == [109.0]
    assert boundaries["scope"][1]["total"] == 148.0 and store.refusal("scope", boundaries["scope"][0]) is None
    assert boundaries["category"][0] is fine
    assert "again" in logged[0] and logged[1].startswith("scope: refused: negative cost -53 ns")
    assert "measured again, the reference loop now at 112 ns" in logged[1]


def test_a_boundary_refused_again_after_the_wait_stays_refused(monkeypatch):
    """Still negative after the wait: the refusal stands, said once, and nothing is stored."""
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    monkeypatch.setattr(cal_rounds, "_wait_for_speed", lambda fastest, wait_s: 284.0)
    calls: list = []
    monkeypatch.setattr(measure, "measure_scope", _negative_then(148.0, 10, calls))
    monkeypatch.setattr(measure, "measure_category", _fake_measurement([145] * 3, {"total": 145.0}))
    monkeypatch.setattr(measure, "measure_writer", _fake_measurement([250] * 3, {"per_event": 250}))
    monkeypatch.setattr(measure, "measure_backend", _fake_measurement([700] * 3, {"total": 700}))
    warned: list[str] = []
    cal = run.run_calibration(gpu=False, log=lambda m: None, warn=warned.append)
    assert "scope" not in cal["costs_ns"] and cal["costs_ns"]["category"]["total"] == 145.0
    assert [r["entry"] for r in cal["refused"]] == ["scope"] and len(warned) == 1
    assert warned[0].startswith("scope: refused: negative cost -53 ns")
    assert len(calls) == 2  # the first measurement, and once more after the wait (no faster speed was seen)


def test_a_cost_that_moves_on_its_own_is_still_refused_and_says_both_figures():
    it = _regime_rounds([9.0, 14.0, 6.0, 11.0], [115, 115, 115, 115])
    st = cal_rounds.until_stable(lambda: next(it), "per_ref", 4, 6.0, clock=FakeClock(), cost_field="total")
    why = store.refusal("scope", st)
    assert why is not None and why.startswith("scope: refused: unstable") and "\n" not in why
    assert "1,035 ns" in why  # the cost in ns (9.0 * 115) ...
    assert "judged ns per ns of the reference loop: " in why and "14" in why  # ... and what was judged


def test_a_negative_cost_judged_per_reference_is_refused_in_ns():
    it = _regime_rounds([-5.0, -5.1, -4.9], [200, 200, 200])
    st = cal_rounds.until_stable(lambda: next(it), "per_ref", 3, 6.0, clock=FakeClock(), cost_field="total")
    why = store.refusal("category", st)
    assert why is not None and why.startswith("category: refused: negative cost -1,000 ns")


def test_a_cost_per_reference_is_stored_at_the_fastest_speed_seen():
    it = _regime_rounds([9.0, 9.0, 9.0], [115, 200, 200])
    st = cal_rounds.until_stable(lambda: next(it), "per_ref", 3, 6.0, clock=FakeClock(), cost_field="total")
    cost = store.at_speed({"inside": st.median("inside"), "total": st.cost}, st, 110.0)
    assert cost["total"] == pytest.approx(990.0) and cost["inside"] == pytest.approx(495.0)
    assert cost["per_ref"] == 9.0 and cost["ref_ns"] == 110.0 and cost["measured_ns"] == 1800.0


def test_relative_cost_cancels_the_speed_of_each_quad_and_drops_a_preempted_one():
    """Quads (on, off, off, on) of a unit that takes 1000 ns and 10% more recorded, each quad at
    its own machine speed; one quad's first timing preempted for 50 us."""
    speeds = [1.0, 1.7, 1.2, 1.0, 1.5, 1.7, 1.1, 1.3]
    quads = [[1100 * f, 1000 * f, 1000 * f, 1100 * f] for f in speeds]
    assert workloads.relative_cost(quads) == pytest.approx(0.10)
    quads[3][0] += 50_000
    assert workloads.relative_cost(quads) == pytest.approx(0.10)
    assert workloads.interquartile_mean([1, 2, 3, 4, 100, 0, 2.5, 3.5]) == pytest.approx(2.75)


def test_the_calibration_stores_costs_of_python_code_at_its_fastest_reference(monkeypatch):
    def per_ref_measurement(per_ref: list[float], refs: list[float], cost_of):
        def measure(*args, **kwargs):
            it = _regime_rounds(per_ref, refs)
            st = cal_rounds.until_stable(
                lambda: next(it), "per_ref", 3, 6.0, clock=FakeClock(), cost_field="total"
            )
            return st, cost_of(st)

        return measure

    split = lambda st: {"inside": st.median("inside"), "outside": st.cost / 2, "total": st.cost}  # noqa: E731
    monkeypatch.setattr(measure, "measure_scope", per_ref_measurement([9.0] * 3, [200, 200, 190], split))
    monkeypatch.setattr(measure, "measure_category", per_ref_measurement([8.0] * 3, [120, 200, 200], split))
    monkeypatch.setattr(measure, "measure_writer", _fake_measurement([250] * 3, {"per_event": 250}))
    monkeypatch.setattr(measure, "measure_backend", _fake_measurement([700] * 3, {"total": 700}))
    # the Python scope methods: the writer is calibrated (the native buffer's flushes time themselves)
    monkeypatch.setattr(scope_native, "calibration_key", lambda: "python")
    cal = run.run_calibration(gpu=False, log=lambda m: None, warn=lambda m: None)
    costs = cal["costs_ns"]
    assert costs["scope"]["total"] == pytest.approx(9.0 * 120) and costs["scope"]["ref_ns"] == 120
    assert costs["scope"]["measured_ns"] == 1800 and costs["scope"]["per_ref"] == 9.0
    assert costs["category"]["total"] == pytest.approx(8.0 * 120)
    assert costs["writer"]["per_event"] == 250  # judged in ns: as measured
    assert cal["refused"] == []


def test_the_machines_fastest_reference_is_kept_across_calibrations(tmp_path, monkeypatch):
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(tmp_path))
    assert cal_mod.machine_fastest_ref(120.0) == (120.0, None)  # none yet: this one's, recorded
    assert cal_mod.machine_fastest_ref(200.0) == (120.0, 120.0)  # held slow: the record's
    assert cal_mod.machine_fastest_ref(105.0) == (105.0, 120.0)  # faster: the record follows
    assert cal_mod.machine_fastest_ref(300.0) == (300.0, None)  # 105 < 0.4 x 300: not this machine
    assert cal_mod.machine_fastest_ref(150.0) == (150.0, 300.0)  # the untrusted record was replaced
    cal_mod.speed_record_path().write_text("not json")
    assert cal_mod.machine_fastest_ref(130.0) == (130.0, None)  # a corrupt record: ignored, rewritten
    assert cal_mod.machine_fastest_ref(140.0) == (130.0, 130.0)


def test_a_calibration_held_slow_throughout_stores_its_costs_at_the_machines_speed(tmp_path, monkeypatch):
    """Two calibrations of the same machine, the second in its slow regime throughout (the
    reference loop at 200 ns, against 110 in the first): the same costs, stored at 110."""
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(tmp_path))

    def per_ref_measurement(refs: list[float]):
        def measure(*args, **kwargs):
            it = _regime_rounds([9.0] * 3, refs)
            st = cal_rounds.until_stable(
                lambda: next(it), "per_ref", 3, 6.0, clock=FakeClock(), cost_field="total"
            )
            return st, {"total": st.cost}

        return measure

    monkeypatch.setattr(measure, "measure_writer", _fake_measurement([250] * 3, {"per_event": 250}))
    monkeypatch.setattr(measure, "measure_backend", _fake_measurement([700] * 3, {"total": 700}))
    logged: list[str] = []
    totals = []
    for refs in ([110, 190, 200], [200, 195, 205]):
        monkeypatch.setattr(measure, "measure_scope", per_ref_measurement(refs))
        monkeypatch.setattr(measure, "measure_category", per_ref_measurement(refs))
        cal = run.run_calibration(gpu=False, log=logged.append, warn=lambda m: None)
        totals.append(cal["costs_ns"]["scope"]["total"])
    assert totals == [pytest.approx(9.0 * 110)] * 2
    assert cal["reference_ns"] == {"run_fastest": 195.0, "machine_record": 110.0, "used": 110.0}
    assert any("this machine's record is 110 ns" in m for m in logged)


def _fake_measurement(values: list[float], cost: dict[str, float]):
    def measure(*args, **kwargs):
        return _stable(values, k=3, budget_s=6.0), cost

    return measure


@pytest.fixture(autouse=True)
def _module_call_faked(monkeypatch):
    """The module-call wrapper's measurement faked (tests/test_module_calls.py prices it): the tests
    here fake the other measurements, and a real one would add its rounds' speeds to theirs."""
    cost = {"inside": 900.0, "outside": 0.0, "total": 900.0}
    monkeypatch.setattr(module_calls, "measure_module_call", _fake_measurement([900] * 3, cost))


@pytest.fixture
def refused_scope(monkeypatch):
    """A calibration whose scope cost never settles (the rest is fine), and the lines it warned."""
    monkeypatch.setattr(measure, "measure_scope", _fake_measurement([900, 1800], {}))
    monkeypatch.setattr(
        measure,
        "measure_category",
        _fake_measurement([400] * 3, {"inside": 200, "outside": 200, "total": 400}),
    )
    monkeypatch.setattr(measure, "measure_writer", _fake_measurement([250] * 3, {"per_event": 250}))
    monkeypatch.setattr(
        measure,
        "measure_backend",
        _fake_measurement([-900, -950, -920], {"inside": 0, "outside": 0, "total": -920}),
    )
    warned: list[str] = []
    cal = run.run_calibration(gpu=False, log=lambda m: None, warn=warned.append)
    return cal, warned


def test_refused_costs_are_not_stored_and_are_said(refused_scope):
    cal, warned = refused_scope
    native = scope_native.calibration_key().startswith("native")  # the writer measured in the run
    assert set(cal["costs_ns"]) == (
        {"category", "module_call"} if native else {"category", "module_call", "writer"}
    )
    assert ("writer" in cal["skipped"]) == native
    assert cal["costs_ns"]["category"]["spread"] == 0.0
    assert {r["entry"] for r in cal["refused"]} >= {"scope"}
    reasons = {r["entry"]: r["reason"] for r in cal["refused"]}
    assert reasons["scope"].startswith("scope: refused: unstable")
    if "backend" in reasons:  # torch is installed: its negative cost is refused too
        assert "negative" in reasons["backend"]
    assert warned == [r["reason"] for r in cal["refused"]]  # one line each, none silent
    json.dumps(cal, allow_nan=False)  # strict JSON: no NaN or infinity from a round that measured nothing


def test_the_analyzer_notes_a_refused_cost_with_the_reason(refused_scope, tmp_path):
    cal, _ = refused_scope
    path = cal_mod.save(cal)
    assert cal_mod.load(path)["costs_ns"].keys() == cal["costs_ns"].keys()
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        for _ in range(50):
            with rlscope.scope("op"), rlscope.simulator():
                pass
    s = analyze(rlscope.load_trace(str(tmp_path / "t"))).summary
    assert s["corrected_for_overhead"]
    # the note gives the calibration's own reason, not "not calibrated" (it was calibrated)
    notes = s["overhead"]["notes"]
    assert any(n.startswith("scope cost refused by the calibration (unstable") for n in notes), notes
    assert not any("scope not calibrated" in n for n in notes), notes
    assert s["overhead"]["costs_used"].get("category") == "category"
    assert "scope" in {r["entry"] for r in s["calibration"]["refused"]}
    assert s["calibration"]["source"] == "trace"  # the session embedded the calibration it found


# -- the calibration travels inside the trace --------------------------------------------------

SCOPE_IN, SCOPE_OUT = 300, 500


def _calibration(scope_in: float, scope_out: float) -> dict:
    return {
        "schema": cal_mod.SCHEMA,
        "created": "test",
        "key": cal_mod.current_key(),
        "costs_ns": {"scope": {"inside": scope_in, "outside": scope_out, "total": scope_in + scope_out}},
        "refused": [],
    }


def _record(sess, clock, iters: int = 5) -> None:
    """Scopes with a known injected cost per boundary (as tests/test_overhead.py's Injector)."""
    sess.options["flush_interval"] = 1e6
    with sess:
        for _ in range(iters):
            clock.advance(SCOPE_OUT // 2)
            with rlscope.scope("op"):
                clock.advance(SCOPE_IN // 2 + 1000 + SCOPE_IN // 2)
            clock.advance(SCOPE_OUT // 2)


def test_a_calibration_round_trips_through_trace_metadata(fake_session, monkeypatch, tmp_path):
    sess, clock = fake_session
    cal_mod.save(_calibration(SCOPE_IN, SCOPE_OUT))
    _record(sess, clock)
    trace = rlscope.load_trace(str(sess.trace_dir))
    embedded = cal_mod.from_trace_metadata(trace.processes[0].metadata)
    assert embedded is not None and embedded["costs_ns"]["scope"]["inside"] == SCOPE_IN
    here = analyze(trace).summary
    assert here["calibration"]["source"] == "trace"
    assert here["operations"]["op"]["total_s"] == pytest.approx(5 * 1000e-9, abs=1e-12)

    # elsewhere: an empty cache, then a cache holding other costs for the same key
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(tmp_path / "empty"))
    elsewhere = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    assert elsewhere["corrected_for_overhead"]
    assert elsewhere["operations"] == here["operations"] and elsewhere["wall_s"] == here["wall_s"]
    cal_mod.save(_calibration(0.0, 0.0))
    recalibrated = analyze(rlscope.load_trace(str(sess.trace_dir))).summary
    assert recalibrated["operations"] == here["operations"]


def test_an_explicit_calibration_file_wins_over_the_embedded_one(fake_session, tmp_path):
    sess, clock = fake_session
    cal_mod.save(_calibration(SCOPE_IN, SCOPE_OUT))
    _record(sess, clock)
    zero = cal_mod.save(_calibration(0.0, 0.0), tmp_path / "zero.json")
    s = analyze(rlscope.load_trace(str(sess.trace_dir)), calibration=str(zero)).summary
    assert s["calibration"]["source"] == "file" and s["calibration"]["path"] == str(zero)
    assert s["operations"]["op"]["total_s"] == pytest.approx(5 * (1000 + SCOPE_IN) * 1e-9, abs=1e-12)


def test_no_calibration_to_embed_and_bad_embedded_ones_are_ignored(tmp_path):
    from rlscope.runtime.metadata import process_metadata

    meta = process_metadata(Session(tmp_path / "t").options, 0, 0, 0)
    assert cal_mod.for_trace_metadata(meta) is None  # the cache is empty
    assert cal_mod.from_trace_metadata(meta) is None
    assert cal_mod.from_trace_metadata({**meta, "calibration": "{not json"}) is None
    foreign = _calibration(1.0, 1.0)
    foreign["key"] = {**foreign["key"], "host": "elsewhere"}
    assert cal_mod.from_trace_metadata({**meta, "calibration": json.dumps(foreign)}) is None
    cal_mod.save(_calibration(1.0, 2.0))
    text = cal_mod.for_trace_metadata(meta)
    assert text is not None and "\n" not in text
    assert cal_mod.from_trace_metadata({**meta, "calibration": text})["costs_ns"]["scope"]["outside"] == 2.0


def test_a_round_whose_reference_moved_is_run_again(monkeypatch):
    refs = iter([100.0, 150.0, 100.0, 101.0])  # the machine changed speed during the first try
    monkeypatch.setattr(cal_rounds, "_reference", lambda: next(refs))
    tries = []

    def one() -> dict[str, float]:
        tries.append(1)
        return {"total": 300.0 if len(tries) == 1 else 201.0}

    r = cal_rounds._with_reference(one, "total")()
    assert len(tries) == 2 and r["ref"] == pytest.approx(100.5)
    assert r["per_ref"] == pytest.approx(201.0 / 100.5)


def test_median_rule_counts_every_round_and_refuses_a_wide_one():
    from rlscope.overhead.calibrate.rounds import Stable, until_stable
    from rlscope.overhead.calibrate.store import refusal

    values = iter([93.0, 89.0, 151.0, 116.0, 98.0, 104.0, 300.0, 20.0])
    st = until_stable(lambda: {"per_event": next(values)}, "per_event", 6, 0.0, rule="median")
    # six rounds: median 101, deviations 8, 12, 50, 15, 3, 3 -> MAD 10 (10% of it); the median's
    # 90% interval 1.645 * 1.2533 * 1.4826 * 0.099 / sqrt(6) = +-12.4%: stable, kept
    assert len(st.rounds) == 6 and st.stable
    assert st.cost == pytest.approx(101.0) and st.spread == pytest.approx(0.099, abs=1e-3)
    assert st.median_error == pytest.approx(0.124, abs=1e-3)
    assert refusal("memory", st) is None
    wide = Stable(
        "per_event", 6, [{"per_event": v} for v in (50.0, 150.0, 90.0, 200.0, 60.0, 120.0)], rule="median"
    )
    # median 105, MAD 45 (43%): the median known to +-53%, refused
    why = refusal("memory", wide)
    assert why is not None and "+-53%" in why and "of 6 rounds" in why
    assert "median absolute deviation 43%" in why


def test_median_rule_keeps_a_per_process_spread_once_its_median_is_known():
    """An H200's memory calibration (2026-11-26): nine children 57-162 ns, MAD 21% of the median
    109 ns. Each process draws its own cost, so the rounds' spread stays; the median is what the
    analyzer removes, and with more rounds it is known well enough (refusing it removed 0 ns)."""
    from rlscope.overhead.calibrate.rounds import Stable
    from rlscope.overhead.calibrate.store import refusal

    nine = [73.5, 129.8, 87.3, 114.3, 77.9, 109.4, 161.8, 132.4, 56.9]
    st = Stable("per_event", 6, [{"per_event": v} for v in nine], rule="median")
    assert st.spread == pytest.approx(0.21, abs=0.005)
    assert st.median_error == pytest.approx(0.214, abs=0.002) and not st.stable  # 9 rounds: +-21%
    thirteen = [*nine, 101.0, 118.0, 92.0, 125.0]  # the same spread, four more children
    st = Stable("per_event", 6, [{"per_event": v} for v in thirteen], rule="median")
    assert st.stable and refusal("memory", st) is None
    assert st.cost == pytest.approx(109.4)


def _backend_at(ref: float, cost: float) -> tuple[cal_rounds.Stable, dict[str, float]]:
    it = iter([{"total": cost, "ref": ref}] * 3)
    return cal_rounds.until_stable(lambda: next(it), "total", 3, 6.0, clock=FakeClock()), {"total": cost}


def test_a_backend_cost_measured_slow_throughout_is_measured_again_at_the_fast_speed(monkeypatch):
    """The backend's rounds all ran slow (reference 250 ns, the fastest seen 150): measured again
    after waiting for the fast speed, and the fast measurement is stored; measured slow again, the
    faster of the two is stored as measured and the log says so. One measured fast is kept as it is."""
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    waited: list[float] = []

    def wait(fastest: float, s: float) -> float:
        waited.append(fastest)
        return 152.0

    logged: list[str] = []
    slow, fast = _backend_at(250.0, 1035.0), _backend_at(152.0, 700.0)
    got = measure._measure_backend_again(slow, lambda f: fast, [150.0, 155.0], logged.append, wait=wait)
    assert got is fast and waited == [150.0]
    assert "measured again" in logged[0] and "250 ns" in logged[0]
    slower = _backend_at(260.0, 1100.0)
    logged.clear()
    got = measure._measure_backend_again(slower, lambda f: slow, [150.0], logged.append, wait=wait)
    assert got is slow and "stored as measured, at the slower speed" in logged[-1]
    never = lambda f: pytest.fail("measured again")  # noqa: E731
    assert measure._measure_backend_again(fast, never, [150.0], logged.append, wait=wait) is fast


def test_the_backends_rho_is_judged_on_its_median_at_the_fast_speed(monkeypatch):
    """Four fast rounds of a 2-core CPU machine's refused backend calibration (rho 0.0987, 0.0796, 0.0875,
    0.0918: 21% apart): k in a row within 20% refuses them; their median is known to +-8%, kept.
    A slow round (reference 250 ns against 150) does not count either way."""
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    rhos = [0.0987, 0.0796, 0.0875, 0.0918]
    rounds = [{"rho": r, "total": r * 8000, "ref": 150.0} for r in rhos]
    rounds.insert(2, {"rho": 0.2, "total": 1600.0, "ref": 250.0})
    # the last-k rule gets SLIDE_ROUNDS more rounds (the same four again) and still refuses
    again = [{"rho": r, "total": r * 8000, "ref": 150.0} for r in rhos[: cal_rounds.SLIDE_ROUNDS]]
    for rule, kept, extra in (("last_k", False, again), ("median", True, [])):
        it = iter(rounds + extra)
        fast, seen, _ = cal_rounds._until_stable_at_speed(
            lambda it=it: next(it), "rho", 4, 4.0, clock=FakeClock(), cost_field="total", rule=rule
        )
        assert fast is not None and len(seen) == 5 + len(extra) and len(fast.rounds) == 4 + len(extra)
        assert (store.refusal("backend", fast) is None) is kept
    assert fast.cost == pytest.approx(statistics.median(rhos) * 8000)


def test_a_backend_measured_within_the_fast_band_but_slower_is_stored_at_the_fastest_speed(monkeypatch):
    """A calibration on a 2-core CPU machine whose backend rounds all ran with the reference loop at
    188 ns, inside the 1.3x band of its own boundary rounds' 148 ns, so they counted as fast and
    stored 962 ns against 693-718 for four others. Scaled by the reference to the fastest speed the
    calibration saw, it reads 757 ns, with the figures it came from; a backend measured at that
    speed is stored as measured."""
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    monkeypatch.setattr(cal_mod, "machine_fastest_ref", lambda run: (run, None))
    st, _ = _backend_at(188.0, 962.0)
    got = store.backend_at_speed(
        {"total": 962.0, "inside": 400.0, "outside": 562.0, "calls_per_loop": 90}, st, 148.0
    )
    assert got["total"] == pytest.approx(962.0 * 148 / 188) and got["inside"] == pytest.approx(
        400 * 148 / 188
    )
    assert got["measured_ns"] == 962.0 and got["measured_ref_ns"] == 188.0 and got["ref_ns"] == 148.0
    assert got["calls_per_loop"] == 90
    fast_st, _ = _backend_at(145.0, 700.0)
    assert store.backend_at_speed({"total": 700.0}, fast_st, 148.0) == {"total": 700.0}

    def boundary(*args, **kwargs):
        return _backend_at(148.0, 260.0)

    monkeypatch.setattr(measure, "measure_scope", boundary)
    monkeypatch.setattr(measure, "measure_category", boundary)
    monkeypatch.setattr(measure, "measure_backend", lambda *a, **k: _backend_at(188.0, 962.0))
    monkeypatch.setattr(measure, "_measure_boundaries_again", lambda *a, **k: None)
    cal = run.run_calibration(gpu=False, log=lambda m: None, warn=lambda m: None)
    backend = cal["costs_ns"]["backend"]
    assert backend["total"] == pytest.approx(962.0 * 148 / 188, rel=1e-3) and backend["measured_ns"] == 962.0
    assert cal["costs_ns"]["scope"]["total"] == 260.0  # judged in ns at the fast speed: as measured


def test_the_gpu_model_is_read_from_the_drivers_files(tmp_path):
    assert cal_mod.gpu_model(tmp_path / "none") == ""
    for bus, model in (("0000:18:00.0", "NVIDIA H100 80GB HBM3"), ("0000:2a:00.0", "NVIDIA H100 80GB HBM3")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(f"Model: \t\t {model}\nIRQ:   \t\t 35\n")
    assert cal_mod.gpu_model(tmp_path) == "NVIDIA H100 80GB HBM3"
    (tmp_path / "0000:3b:00.0").mkdir()
    (tmp_path / "0000:3b:00.0" / "information").write_text("Model: \t\t NVIDIA H200\n")
    assert cal_mod.gpu_model(tmp_path) == "NVIDIA H100 80GB HBM3+NVIDIA H200"


def _metadata(key: dict[str, str]) -> dict[str, str]:
    """Trace metadata as a session writes it, for a calibration key."""
    meta = {f: v for f, v in key.items() if f != "rlscope"}
    meta["rlscope.version"] = key["rlscope"]
    return meta


def test_a_calibration_taken_with_another_gpu_is_not_used():
    """Two device machines with one host name and CPU model: the H200's calibration must not
    correct the H100's trace (it did, until the GPU joined the key)."""
    key = {**cal_mod.current_key(), "gpu": "NVIDIA H200"}
    cal_mod.save({"schema": cal_mod.SCHEMA, "created": "test", "key": key, "costs_ns": {"scope": {"x": 1.0}}})
    found, why = cal_mod.find(_metadata({**key, "gpu": "NVIDIA H100 80GB HBM3"}))
    assert found is None and "gpu 'NVIDIA H200' vs 'NVIDIA H100 80GB HBM3'" in why
    found, why = cal_mod.find(_metadata(key))
    assert found is not None and why is None


def test_a_trace_and_a_calibration_from_before_the_gpu_field_still_match():
    key = {f: v for f, v in cal_mod.current_key().items() if f != "gpu"}
    cal_mod.save({"schema": cal_mod.SCHEMA, "created": "test", "key": key, "costs_ns": {"scope": {"x": 1.0}}})
    found, why = cal_mod.find(_metadata(key))
    assert found is not None, why
    # a trace of today (it records its GPU, '' on a machine without one) does not take it
    found, why = cal_mod.find(_metadata({**key, "gpu": ""}))
    assert found is None and "gpu" in why


def _with_slow_backend() -> dict:
    """A calibration whose backend rounds ran at a 300 ns reference loop (the host's slow regime)."""
    cal = _calibration(SCOPE_IN, SCOPE_OUT)
    cal["costs_ns"]["backend"] = {"inside": 0.0, "outside": 1_200.0, "total": 1_200.0, "ref_ns": 300.0}
    return cal


def test_a_backend_calibrated_in_the_slow_regime_is_priced_at_the_machines_fastest():
    cal = _with_slow_backend()
    priced, notes = cal_mod.at_machine_speed(cal, 150.0)
    assert priced["costs_ns"]["backend"] == {
        "inside": 0.0,
        "outside": 600.0,
        "total": 600.0,
        "ref_ns": 150.0,
        "regime_ref_ns": 300.0,
        "regime_ns": 1_200.0,
    }
    assert priced["costs_ns"]["scope"] == cal["costs_ns"]["scope"]  # priced at the run's speed instead
    assert len(notes) == 1 and "2.00x slower" in notes[0] and "1200 -> 600 ns" in notes[0]
    assert cal["costs_ns"]["backend"]["total"] == 1_200.0  # the calibration given is left as it was
    # within SLOW_REGIME (300 / 240 = 1.25), no record, or a record not trusted (100 < 0.4 x 300)
    for fastest in (240.0, None, 100.0):
        assert cal_mod.at_machine_speed(cal, fastest) == (cal, [])


def test_the_analysis_prices_a_slow_backend_at_the_speed_recorded_as_the_session_started(
    fake_session, monkeypatch, tmp_path
):
    """The machine's speed record travels with the embedded calibration: analyzed with an empty
    cache the backend is still priced at it; a trace without one uses the cache's record."""
    sess, clock = fake_session
    cal_mod.save(_with_slow_backend())
    assert cal_mod.machine_fastest_ref(150.0) == (150.0, None)  # a later calibration ran fast
    _record(sess, clock)
    trace = rlscope.load_trace(str(sess.trace_dir))
    meta = trace.processes[0].metadata
    assert cal_mod.from_trace_metadata(meta)[cal_mod.MACHINE_FASTEST] == 150.0
    here = analyze(trace).summary["calibration"]
    assert here["costs_ns"]["backend"]["total"] == 600.0 and len(here["repriced"]) == 1
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(tmp_path / "empty"))
    elsewhere = analyze(rlscope.load_trace(str(sess.trace_dir))).summary["calibration"]
    assert elsewhere["costs_ns"]["backend"]["total"] == 600.0
    # a calibration named by the user, and no record anywhere: as calibrated
    named = cal_mod.save(_with_slow_backend(), tmp_path / "named.json")
    s = analyze(rlscope.load_trace(str(sess.trace_dir)), calibration=str(named)).summary["calibration"]
    assert s["costs_ns"]["backend"]["total"] == 1_200.0 and "repriced" not in s


def test_a_boundary_judged_on_a_plateau_above_its_fastest_round_is_measured_again(monkeypatch):
    """A category pair judged stable at 317-364 ns after a first round of 228, on a fast host (its
    reference loop never moved): measured once more, and the lower of the two stable figures kept.
    A figure within 20% of its fastest round, or a second measurement that is no lower, stays."""
    from rlscope.collectors import scope_native

    monkeypatch.setattr(scope_native, "calibration_key", lambda: "native-6")
    monkeypatch.setattr(cal_mod, "read_fastest_ref", lambda: None)
    rounds = [{"total": t, "ref": 150.0} for t in (227.6, 358.6, 341.6, 364.4, 317.0)]
    plateau = cal_rounds.Stable("total", 4, rounds, cost_field="total")
    steady = cal_rounds.Stable("total", 4, [{"total": t, "ref": 150.0} for t in (250.0, 245.0, 252.0, 248.0)])
    assert cal_rounds._above_its_fastest(plateau) and not cal_rounds._above_its_fastest(steady)
    second = {"cost": 249.0}
    calls = []

    def measure_category(plan, traces, known_fastest=None):
        calls.append(known_fastest)
        t = second["cost"]
        return cal_rounds.Stable("total", 4, [{"total": t, "ref": 149.0}] * 4), {"total": t}

    monkeypatch.setattr(measure, "measure_category", measure_category)
    boundaries = {"scope": (steady, {"total": 249.0}), "category": (plateau, {"total": 350.0})}
    logged = []
    measure._measure_boundaries_again(boundaries, cal_rounds.QUICK, None, [150.0, 149.0], logged.append)
    assert calls == [149.0] and boundaries["category"][1]["total"] == 249.0
    assert boundaries["scope"][0] is steady and len(logged) == 1 and "measured again" in logged[0]
    second["cost"] = 400.0  # measured again higher: the first stands
    boundaries["category"] = (plateau, {"total": 350.0})
    measure._measure_boundaries_again(boundaries, cal_rounds.QUICK, None, [150.0, 149.0], logged.append)
    assert boundaries["category"][1]["total"] == 350.0 and len(calls) == 2


def test_a_boundary_held_slow_throughout_is_judged_on_the_median_of_its_rounds(monkeypatch):
    """The host slow for a C boundary's whole measurement (reference 265 ns against a 154 ns
    record), its figure per reference ns moving round to round so that no four in a row agree
    within 20%: judged on the median of every round, which many rounds pin down, not refused."""
    wobble = [1.24, 1.69, 1.38, 1.70, 1.25, 1.48, 1.66, 1.30]
    totals = [w * 265.0 for w in wobble]
    st = _boundary_rounds(monkeypatch, [265.0], totals, record=154.0, clock=FakeClock())
    assert st.field == "per_ref" and st.rule == "median" and len(st.rounds) >= cal_rounds.QUICK.k
    assert st.stable and store.refusal("scope", st) is None
    n = len(st.rounds)
    assert st.value == pytest.approx(statistics.median((wobble * 3)[:n]))
    last_k = cal_rounds.Stable("per_ref", cal_rounds.QUICK.k, st.rounds, cost_field="total")
    assert not last_k.stable  # the rule it replaces refused these rounds
