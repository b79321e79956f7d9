"""benchmarks/light_state.py against a windowed run on a fake clock, whose instance times are known."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from tests.test_windows import OPS_PER_INFER, SIM, WORK, _run_fake

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _light_state():
    spec = importlib.util.spec_from_file_location("light_state", ROOT / "benchmarks" / "light_state.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fake_windows(windowed):
    """The windowed session on a fake clock, run with tests/test_windows.py's fake collector: its trace."""
    session, clock = windowed
    _run_fake(session, clock, 600)
    return session.trace_dir


def test_light_state_reads_the_light_level_and_compares_it_with_the_timed_runs(
    fake_windows, tmp_path, capsys
):
    """The fake collector costs every op in full windows and nothing in light ones: light instances
    of ``infer`` take exactly OPS_PER_INFER * WORK, at every index since the switch, and against
    timer blocks of that median the light state reads 1.000; ``sim`` is never recorded, so it is
    the same in both kinds of window. Timer blocks 10% faster read 1.111."""
    ls = _light_state()
    infer = OPS_PER_INFER * WORK
    rep = ls.analyze_rep(
        fake_windows, {"infer": [infer, infer, infer], "sim": [0, SIM * 0.9, 0]}, ["infer", "sim"]
    )
    i, s = rep["ops"]["infer"], rep["ops"]["sim"]
    assert i["light_median_ns"] == infer and i["light_mean_ns"] == infer and i["light_over_timed"] == 1.0
    assert i["full_median_ns"] > infer  # the collector's cost is in the full windows only
    assert all(v == infer for v in i["by_index"].values() if v is not None)
    assert i["by_index"]["0-1"] == infer and i["by_index"]["3-10"] == infer
    assert 100 < i["light_n"] < 500  # both kinds of window hold instances
    assert s["light_median_ns"] == s["full_median_ns"] == SIM
    assert s["light_over_timed"] == pytest.approx(1 / 0.9)
    assert rep["flushes"]["n"] == 0 and i["overlapping_flush"]["n"] == 0

    # the command line: a validate JSON with its kept trace beside it
    rows = [
        {"operation": "[total]", "share": 1.0},
        {"operation": "infer", "share": 0.6},
        {"operation": "sim", "share": 0.3},
    ]
    val = {"rows": rows, "timer_blocks": [{"infer": [infer] * 3, "sim": [SIM] * 3}]}
    (tmp_path / "val_fake.json").write_text(json.dumps(val))
    (tmp_path / "traces-fake").mkdir()
    fake_windows.rename(tmp_path / "traces-fake" / "rep-1")
    import sys

    argv = sys.argv
    sys.argv = ["light_state.py", str(tmp_path / "val_fake.json")]
    try:
        assert ls.main() == 0
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "infer: light/timed median over 1 repetitions 1.000 [1.000, 1.000]" in out
    assert "sim: light/timed median over 1 repetitions 1.000" in out


def test_light_state_says_what_is_missing(tmp_path, capsys):
    ls = _light_state()
    import sys

    argv = sys.argv
    try:
        sys.argv = ["light_state.py", str(tmp_path / "missing.json")]
        assert ls.main() == 2
        (tmp_path / "val_x.json").write_text(
            json.dumps({"rows": [{"operation": "[total]", "share": 1}], "timer_blocks": [{}]})
        )
        sys.argv = ["light_state.py", str(tmp_path / "val_x.json")]
        assert ls.main() == 2
    finally:
        sys.argv = argv
    err = capsys.readouterr().err
    assert "missing.json" in err and "no trace kept for repetition 1" in err and "no kept traces" in err
