"""Calibration that cannot lie: a cost is stored only when its rounds agree, is positive and is
plausible; a refused cost is said in one line and left out; the costs a trace was recorded with
travel inside it and give the same corrected figures wherever it is analyzed."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

import rlscope
from rlscope import calibrate as C
from rlscope import calibration as cal_mod
from rlscope.analysis import analyze
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


def _stable(values: list[float], k: int = 5, budget_s: float = 20.0) -> C.Stable:
    it = _rounds(values)
    return C.until_stable(lambda: next(it), "total", k, budget_s, clock=FakeClock())


def test_a_stable_sequence_is_accepted_after_k_rounds():
    st = _stable([1000, 1050, 980, 1010, 995, 3000])
    assert len(st.rounds) == 5  # stops as soon as the last k agree
    assert st.value == 1000
    assert st.spread == pytest.approx(70 / 1000)
    assert st.median("inside") == 500
    assert C.refusal("scope", st) is None


def test_a_disturbed_round_is_outlived():
    """One round hit by a load spike: the rule waits until the last k agree again."""
    st = _stable([1000, 2600, 1000, 1020, 990, 1000, 1010, 1005] + [1000] * 20)
    assert st.stable and st.value == pytest.approx(1005, abs=10)
    assert all(v < 1100 for v in st.last)
    assert C.refusal("scope", st) is None


def test_a_cost_that_keeps_varying_by_half_is_refused_in_one_line():
    st = _stable([1000, 1500], budget_s=12.0)
    assert not st.stable and len(st.rounds) == 12  # ran until the budget was spent
    why = C.refusal("scope", st)
    assert why is not None and "\n" not in why
    assert why.startswith("scope: refused: unstable")
    assert st.spread > 0.2 and f"spread {st.spread:.0%}" in why
    assert "1,000 ns" in why and "1,500 ns" in why  # the numbers, not just a verdict


def test_a_negative_cost_is_refused():
    st = _stable([-26046, -26100, -25990])
    why = C.refusal("backend", st)
    assert why is not None and why.startswith("backend: refused: negative cost -26,046 ns")


def test_an_implausible_cost_is_refused():
    too_big = C.refusal("scope", _stable([30_000, 30_100, 29_900]))
    assert (
        too_big is not None and "implausible 30,000 ns" in too_big and "outside 50 ns..20,000 ns" in too_big
    )
    too_small = C.refusal("scope", _stable([20, 20, 20]))
    assert too_small is not None and "implausible" in too_small


def test_stability_needs_at_least_two_rounds():
    with pytest.raises(ValueError):
        C.until_stable(lambda: {"total": 1.0}, "total", 1, 1.0)


def _fake_measurement(values: list[float], cost: dict[str, float]):
    def measure(*args, **kwargs):
        return _stable(values, k=3, budget_s=6.0), cost

    return measure


@pytest.fixture
def refused_scope(monkeypatch):
    """A calibration whose scope cost never settles (the rest is fine), and the lines it warned."""
    monkeypatch.setattr(C, "measure_scope", _fake_measurement([900, 1800], {}))
    monkeypatch.setattr(
        C, "measure_category", _fake_measurement([400] * 3, {"inside": 200, "outside": 200, "total": 400})
    )
    monkeypatch.setattr(C, "measure_writer", _fake_measurement([250] * 3, {"per_event": 250}))
    monkeypatch.setattr(
        C,
        "measure_backend",
        _fake_measurement([-900, -950, -920], {"inside": 0, "outside": 0, "total": -920}),
    )
    warned: list[str] = []
    cal = C.run_calibration(gpu=False, log=lambda m: None, warn=warned.append)
    return cal, warned


def test_refused_costs_are_not_stored_and_are_said(refused_scope):
    cal, warned = refused_scope
    assert set(cal["costs_ns"]) == {"category", "writer"}
    assert cal["costs_ns"]["category"]["spread"] == 0.0
    assert {r["entry"] for r in cal["refused"]} >= {"scope"}
    reasons = {r["entry"]: r["reason"] for r in cal["refused"]}
    assert reasons["scope"].startswith("scope: refused: unstable")
    if "backend" in reasons:  # torch is installed: its negative cost is refused too
        assert "negative" in reasons["backend"]
    assert warned == [r["reason"] for r in cal["refused"]]  # one line each, none silent
    json.dumps(cal, allow_nan=False)  # strict JSON: no NaN or infinity from a round that measured nothing


def test_the_analyzer_notes_a_refused_cost_as_not_calibrated(refused_scope, tmp_path):
    cal, _ = refused_scope
    path = cal_mod.save(cal)
    assert cal_mod.load(path)["costs_ns"].keys() == cal["costs_ns"].keys()
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        for _ in range(50):
            with rlscope.scope("op"), rlscope.simulator():
                pass
    s = analyze(rlscope.load_trace(str(tmp_path / "t"))).summary
    assert s["corrected_for_overhead"]
    assert any("scope not calibrated" in n for n in s["overhead"]["notes"]), s["overhead"]["notes"]
    assert s["overhead"]["costs_used"].get("category") == "category"
    assert next(r["entry"] for r in s["calibration"]["refused"]) == "scope"
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


@pytest.fixture
def embedding_session(monkeypatch):
    """Sessions put ``for_trace_metadata()`` in their metadata, as rlscope.session is to do."""
    original = Session._metadata

    def with_calibration(self, start_ns: int) -> dict[str, str]:
        meta = original(self, start_ns)
        embedded = cal_mod.for_trace_metadata(meta)
        return {**meta, cal_mod.METADATA_KEY: embedded} if embedded else meta

    monkeypatch.setattr(Session, "_metadata", with_calibration)


def _record(session, clock, iters: int = 5) -> None:
    """Scopes with a known injected cost per boundary (as tests/test_overhead.py's Injector)."""
    session.options["flush_interval"] = 1e6
    with session:
        for _ in range(iters):
            clock.advance(SCOPE_OUT // 2)
            with rlscope.scope("op"):
                clock.advance(SCOPE_IN // 2 + 1000 + SCOPE_IN // 2)
            clock.advance(SCOPE_OUT // 2)


def test_a_calibration_round_trips_through_trace_metadata(
    embedding_session, fake_session, monkeypatch, tmp_path
):
    session, clock = fake_session
    cal_mod.save(_calibration(SCOPE_IN, SCOPE_OUT))
    _record(session, clock)
    trace = rlscope.load_trace(str(session.trace_dir))
    embedded = cal_mod.from_trace_metadata(trace.processes[0].metadata)
    assert embedded is not None and embedded["costs_ns"]["scope"]["inside"] == SCOPE_IN
    here = analyze(trace).summary
    assert here["calibration"]["source"] == "trace"
    assert here["operations"]["op"]["total_s"] == pytest.approx(5 * 1000e-9, abs=1e-12)

    # elsewhere: an empty cache, then a cache holding other costs for the same key
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(tmp_path / "empty"))
    elsewhere = analyze(rlscope.load_trace(str(session.trace_dir))).summary
    assert elsewhere["corrected_for_overhead"]
    assert elsewhere["operations"] == here["operations"] and elsewhere["wall_s"] == here["wall_s"]
    cal_mod.save(_calibration(0.0, 0.0))
    recalibrated = analyze(rlscope.load_trace(str(session.trace_dir))).summary
    assert recalibrated["operations"] == here["operations"]


def test_an_explicit_calibration_file_wins_over_the_embedded_one(embedding_session, fake_session, tmp_path):
    session, clock = fake_session
    cal_mod.save(_calibration(SCOPE_IN, SCOPE_OUT))
    _record(session, clock)
    zero = cal_mod.save(_calibration(0.0, 0.0), tmp_path / "zero.json")
    s = analyze(rlscope.load_trace(str(session.trace_dir)), calibration=str(zero)).summary
    assert s["calibration"]["source"] == "file" and s["calibration"]["path"] == str(zero)
    assert s["operations"]["op"]["total_s"] == pytest.approx(5 * (1000 + SCOPE_IN) * 1e-9, abs=1e-12)


def test_no_calibration_to_embed_and_bad_embedded_ones_are_ignored(tmp_path):
    meta = {**Session(tmp_path / "t")._metadata(0)}
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
