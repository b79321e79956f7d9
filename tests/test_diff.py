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
    assert r.returncode == 2 and "different schema versions" in r.stderr and "Traceback" not in r.stderr
