"""rlscope-analyze diff: two traces compared per operation and category."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rlscope
from rlscope.analysis.diff import diff_summaries
from tests.conftest import FakeClock, summary_of

S = 1e-9


def _trace(path, sim_ns: int, extra_op: bool = False):
    sess = rlscope.profile(path, backend=False, gpu=False)
    clock = FakeClock()
    sess.clock = clock
    with sess:
        with rlscope.scope("simulation"):
            clock.advance(10)
            with rlscope.simulator():
                clock.advance(sim_ns)
        if extra_op:
            with rlscope.scope("logging"):
                clock.advance(5)
    return path


def test_diff_per_operation_and_category(tmp_path):
    a = summary_of(_trace(tmp_path / "a", 100))
    b = summary_of(_trace(tmp_path / "b", 40, extra_op=True))
    d = diff_summaries(a, b)
    sim = d["operations"]["simulation"]
    assert sim["total"]["delta_s"] == pytest.approx(-60 * S)
    assert sim["total"]["ratio"] == pytest.approx(50 / 110)
    assert sim["categories"]["simulator"]["delta_s"] == pytest.approx(-60 * S)
    assert sim["categories"]["python"]["delta_s"] == pytest.approx(0.0)
    assert d["operations"]["logging"]["only_in"] == "b"
    assert d["wall"]["delta_s"] == pytest.approx(-55 * S)
    assert next(iter(d["operations"])) == "simulation"  # largest change first


def test_diff_cli_outputs_and_bad_input(tmp_path):
    _trace(tmp_path / "a", 100)
    _trace(tmp_path / "b", 40)
    out, page = tmp_path / "d.json", tmp_path / "d.html"
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", "diff", str(tmp_path / "a"), str(tmp_path / "b")]
    r = subprocess.run([*cmd, "--json", str(out), "--html", str(page)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "simulation" in r.stdout
    assert "[unannotated]" in r.stdout  # names are not read as rich markup
    assert json.loads(out.read_text())["schema"] == "rlscope.diff/1"
    assert "<script" in page.read_text() and "rlscope diff" in page.read_text()
    r = subprocess.run([*cmd[:-1], str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_diff_refuses_different_schema_versions(tmp_path):
    """Schema version 1 is the only one yet, so two versions meet only in analyses: refused in one line."""
    import dataclasses

    from rlscope.analysis import analyze
    from rlscope.analysis.diff import diff_results
    from rlscope.errors import RLScopeError

    a = analyze(_trace(tmp_path / "a", 100), intervals=False)
    b = analyze(_trace(tmp_path / "b", 40), intervals=False)
    older = dataclasses.replace(b, schema_versions=frozenset({"0"}))
    with pytest.raises(RLScopeError, match="different schema versions") as e:
        diff_results(a, older)
    assert "\n" not in str(e.value)
    assert diff_results(a, b)  # the same version: compared


def test_diff_of_a_trace_with_an_unknown_schema_version_is_one_line(tmp_path):
    import pyarrow as pa

    from rlscope.trace import schema as TS

    a = _trace(tmp_path / "a", 100)
    b = _trace(tmp_path / "b", 40)
    events = next(b.glob("process-*")) / TS.EVENTS_FILE
    table = pa.ipc.open_stream(str(events)).read_all()
    old = table.schema.with_metadata({**table.schema.metadata, b"rlscope.schema_version": b"0"})
    with pa.OSFile(str(events), "wb") as f, pa.ipc.new_stream(f, old) as w:
        w.write_table(table.cast(old))
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", "diff", str(a), str(b)], capture_output=True, text=True
    )
    assert r.returncode == 2 and "schema version 0" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- noise


def _noisy_trace(path, seed: int, n: int = 300, sim_ns: float = 100_000, once: bool = False):
    """A PPO-like loop on a fake clock: each call's length drawn around its mean (seeded noise).

    Returns the trace dir and the drawn lengths of each simulation call (ns)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sess = rlscope.profile(path, backend=False, gpu=False)
    clock = FakeClock()
    sess.clock = clock
    drawn = []
    with sess:
        for _ in range(n):
            with rlscope.scope("inference"):
                clock.advance(int(rng.normal(50_000, 10_000)))
            with rlscope.scope("simulation"):
                py, sim = int(rng.normal(5_000, 1_000)), int(rng.normal(sim_ns, 20_000))
                clock.advance(py)
                with rlscope.simulator():
                    clock.advance(sim)
                drawn.append(py + sim)
            clock.advance(int(rng.normal(2_000, 500)))  # between operations: unannotated
        if once:
            with rlscope.scope("save_checkpoint"):
                clock.advance(1_000_000)
    return path, drawn


def test_summary_noise_is_the_spread_of_the_calls(tmp_path):
    """The summary's noise of a total is the noise estimate of the lengths the fake clock was told."""
    from tests.test_noise import _reference

    trace, drawn = _noisy_trace(tmp_path / "a", seed=1)
    op = summary_of(trace)["operations"]["simulation"]
    assert op["calls"] == len(drawn)
    assert op["noise_s"]["total_s"] == pytest.approx(_reference(drawn) ** 0.5 * S, rel=1e-6)
    assert op["noise_s"]["exclusive_s"] == op["noise_s"]["total_s"]  # nothing nested inside
    assert set(op["noise_s"]["categories"]) == {"python", "simulator"}


def test_same_program_twice_shows_no_significant_change(tmp_path):
    for seed_a, seed_b in ((1, 2), (3, 4), (5, 6)):
        a = summary_of(_noisy_trace(tmp_path / f"a{seed_a}", seed_a)[0])
        b = summary_of(_noisy_trace(tmp_path / f"b{seed_b}", seed_b)[0])
        d = diff_summaries(a, b)
        for name, o in d["operations"].items():
            assert o["significant"] is False, (name, o["delta_s"], o["uncertainty_s"])
            assert o["delta_s"] != 0 and o["uncertainty_s"] > 0  # the runs did differ, within their noise
            assert not any(c["significant"] for c in o["categories"].values()), name
            assert o["per_call"]["significant"] is False
        assert d["wall"]["significant"] is False
        assert "gpu_bound" not in d  # CPU-only traces: no GPU rows
        assert "gpu_categories" not in d["operations"]["simulation"]


def test_a_real_slowdown_is_significant_and_named(tmp_path):
    from rlscope.viz.diff import diff_text

    a = summary_of(_noisy_trace(tmp_path / "a", 1)[0])
    b = summary_of(_noisy_trace(tmp_path / "b", 2, sim_ns=110_000)[0])  # the simulator 10% slower
    d = diff_summaries(a, b)
    sim, inf = d["operations"]["simulation"], d["operations"]["inference"]
    assert sim["significant"] is True and sim["delta_s"] > 3 * sim["uncertainty_s"]
    assert sim["categories"]["simulator"]["significant"] is True
    assert sim["categories"]["python"]["significant"] is False
    assert inf["significant"] is False
    assert next(iter(d["operations"])) == "simulation"
    text = diff_text(d, width=160)
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("simulation"))
    assert "slower" in row and "simulator +" in row
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("inference"))
    assert "within noise" in row
    assert "GPU-bound" not in text


def test_an_operation_run_once_cannot_be_judged(tmp_path):
    a = summary_of(_noisy_trace(tmp_path / "a", 1, n=20, once=True)[0])
    b = summary_of(_noisy_trace(tmp_path / "b", 2, n=20, once=True)[0])
    o = diff_summaries(a, b)["operations"]["save_checkpoint"]
    assert o["uncertainty_s"] is None and o["significant"] is None
    only_b = diff_summaries(summary_of(_noisy_trace(tmp_path / "c", 1, n=20)[0]), b)["operations"]
    assert only_b["save_checkpoint"]["only_in"] == "b" and only_b["save_checkpoint"]["significant"] is None


def test_diff_json_carries_the_change_its_uncertainty_and_significance(tmp_path):
    _noisy_trace(tmp_path / "a", 1, n=50)
    _noisy_trace(tmp_path / "b", 2, n=50, sim_ns=150_000)
    out, page = tmp_path / "d.json", tmp_path / "d.html"
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", "diff", str(tmp_path / "a"), str(tmp_path / "b")]
    r = subprocess.run([*cmd, "--json", str(out), "--html", str(page), "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ops = json.loads(out.read_text())["operations"]
    for o in ops.values():
        assert {"delta_s", "uncertainty_s", "significant"} <= set(o)
    assert ops["simulation"]["significant"] is True and ops["inference"]["significant"] is False
    html = page.read_text()
    assert "<tr class='sig'><td>simulation</td>" in html and "<tr class='noise'><td>inference</td>" in html
    assert "GPU-bound" not in html


def test_runs_of_different_lengths_are_judged_per_call(tmp_path):
    """A shorter run with a slower simulator: every total is smaller in B, but per call the simulator is
    10% slower, and that is the verdict; inference, as fast per call, stays within noise."""
    from rlscope.viz.diff import diff_text, judged_change

    a = summary_of(_noisy_trace(tmp_path / "a", 1, n=300)[0])
    b = summary_of(_noisy_trace(tmp_path / "b", 2, n=200, sim_ns=110_000)[0])
    d = diff_summaries(a, b)
    sim, inf = d["operations"]["simulation"], d["operations"]["inference"]
    assert sim["judged"] == inf["judged"] == "per_call"
    assert sim["delta_s"] < 0  # the total fell with the run's length
    assert judged_change(sim)["significant"] is True and judged_change(sim)["delta_s"] > 0
    assert judged_change(inf)["significant"] is False
    text = diff_text(d, width=160)
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("simulation"))
    assert "slower per call" in row
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("inference"))
    assert "within noise per call" in row
    same = diff_summaries(a, summary_of(_noisy_trace(tmp_path / "c", 3, n=300)[0]))
    assert same["operations"]["simulation"]["judged"] == "total"  # the same work: judged by totals
