"""Shared fixtures: a fake clock for exact tests, a windowed session on it, the ``gpu`` marker's skip, and
the audit of the trace checks' C pass."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import rlscope
from rlscope.analysis import analyze


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items):
        try:
            import torch

            has_cuda = torch.cuda.is_available()
        except ImportError:
            has_cuda = False
        if not has_cuda:
            skip = pytest.mark.skip(reason="needs a CUDA GPU")
            for item in items:
                if "gpu" in item.keywords:
                    item.add_marker(skip)


@pytest.fixture
def in_fresh_process(request: pytest.FixtureRequest) -> Callable[[], bool]:
    """``if in_fresh_process(): return`` runs the test again in a process of its own and passes
    with it. For GPU tests that need CUPTI to themselves: once Kineto (torch.profiler) has used
    CUPTI in a process, a second CUPTI client there gets no records (cupti-python, before CUDA
    13.3), or kernels whose launching API call is missing (rlscope's native consumer, seen on the
    H100 and H200), so the full suite's order would decide the result."""

    def run() -> bool:
        if os.environ.get("RLSCOPE_TEST_CHILD"):
            return False
        test = f"{request.node.path}::{request.node.name}"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
        env = {**os.environ, "RLSCOPE_TEST_CHILD": "1"}
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        return True

    return run


class FakeClock:
    """A clock that only moves when told to: analysis results become exact."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def fake_session(tmp_path):
    """A session (not started) whose clock is a FakeClock; backend recording and GPU tracing off (a test
    writes its own GPU records; a real GPU collector would add its own)."""
    clock = FakeClock()
    session = rlscope.profile(tmp_path / "trace", backend=False, gpu=False)
    session.clock = clock
    return session, clock


def write_stream(path, columns_doc, rows, extra: dict[str, str] | None = None) -> None:
    """Write a collector file (gpu.arrows, nvml.arrows) by hand: rows are tuples in column order;
    ``extra``: schema metadata, as the collector writes it."""
    import pyarrow as pa

    from rlscope.trace import schema as S

    schema = S.columns_schema(columns_doc, extra=extra)
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in columns_doc]
    table = pa.table(
        {c: pa.array(v, type=f.type) for (c, _, _), v, f in zip(columns_doc, cols, schema, strict=True)},
        schema=schema,
    )
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(table)


def summary_of(trace_dir) -> dict:
    """The raw summary of a trace (exact tests compare raw figures with what the fake clock did)."""
    return dict(analyze(trace_dir, correct=False).summary)


@pytest.fixture(autouse=True)
def _warnings_not_yet_said(monkeypatch):
    """Each test starts a new "run" for rlscope.errors.warn_once (once per run, remembered in the env)."""
    monkeypatch.delenv("RLSCOPE_WARNED", raising=False)


@pytest.fixture(autouse=True)
def _no_calibration(monkeypatch, tmp_path_factory):
    """Every test starts with an empty calibration directory: figures are raw unless a test calibrates."""
    monkeypatch.setenv("RLSCOPE_CALIBRATION_DIR", str(tmp_path_factory.mktemp("calibration")))


@pytest.fixture(scope="session")
def quick_calibration(tmp_path_factory):
    """A small real calibration of this machine (a few seconds), saved in its own directory."""
    from rlscope.overhead.calibrate import run_calibration

    directory = tmp_path_factory.mktemp("quick-calibration")
    # session-scoped: made before the per-test empty directory is set; the machine's speed record
    # (rlscope.overhead.correct.calibration.machine_fastest_ref) goes here, not to the user's cache
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLSCOPE_CALIBRATION_DIR", str(directory))
        cal = run_calibration(rounds=3, scale=0.2, gpu=False, log=lambda m: None)
    return cal, directory


@pytest.fixture
def windowed(tmp_path: Path) -> tuple[Any, FakeClock]:
    """A session of short alternating windows (50 us) on a fake clock, not started: (session, clock).
    tests/test_windows.py's fake collector then makes every instance's time known exactly."""
    clock = FakeClock()
    session = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, window_s=50e-6)
    session.clock = clock
    return session, clock


@pytest.fixture
def validation_audited(monkeypatch):
    """Every events table validate_events checks (rlscope/trace/validate.py) also goes through its
    numpy checks: the C pass (rlscope/trace/native) may confirm a table intact only where they find
    nothing and change nothing, and it must confirm every table they find nothing in (a column of
    another type than the writer's aside: the C pass leaves those to them)."""
    import pyarrow as pa

    from rlscope.trace import native, validate

    real = native.check
    wrong: list[str] = []
    missed: list[str] = []

    def check(columns, kind_ok, category_ok, complete):
        verdict = real(columns, kind_ok, category_ok, complete)
        if verdict is not None:
            own = {k: v.copy() for k, v in columns.items()}  # the checks repair in place
            t = validate._Table(pa.table(own), "audit", own)
            validate._check(t, complete)
            clean = not t.changed and not t.findings
            if verdict == "intact" and not clean:
                wrong.append(f"{len(own['ts_ns'])} rows, complete={complete}: {t.findings}")
            elif verdict != "intact" and clean:
                missed.append(f"{len(own['ts_ns'])} rows, complete={complete}: {verdict}")
        return verdict

    monkeypatch.setattr(native, "check", check)
    yield
    assert not wrong, f"the C pass confirmed tables the numpy checks change: {wrong[:5]}"
    assert not missed, f"the C pass left intact tables to the numpy checks: {missed[:5]}"
