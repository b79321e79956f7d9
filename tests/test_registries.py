"""The collector and backend registries: a collector is one module and one row; every row resolves.

The no-op collector below is the whole of what adding a collector takes: its class (here, in this
module) and one registry row. The session starts it, the windows switch it, the session stops it,
and the trace it leaves analyzes as any other.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.collectors import protocol, registry
from rlscope.overhead.calibrate.store import PLAUSIBLE_NS
from rlscope.runtime import backends
from rlscope.trace import schema as S


class NoopCollector:
    """Records nothing; remembers what the session asked of it."""

    calls: ClassVar[list[str]] = []

    def __init__(self, session: object) -> None:
        self.session = session

    def start(self) -> NoopCollector:
        self.calls.append("start")
        return self

    def set_enabled(self, on: bool) -> None:
        self.calls.append("on" if on else "off")

    def stop(self) -> None:
        self.calls.append("stop")


def noop_factory(session: object, started: object) -> NoopCollector:
    return NoopCollector(session).start()


@pytest.fixture
def noop_row(monkeypatch):
    """The registry with the no-op collector's row added last."""
    row = registry.CollectorRow("noop", f"{__name__}:noop_factory")
    monkeypatch.setattr(registry, "COLLECTORS", (*registry.COLLECTORS, row))
    monkeypatch.setattr(NoopCollector, "calls", [])
    return row


def test_a_collector_is_one_class_and_one_registry_row(fake_session, noop_row):
    sess, clock = fake_session
    with sess:
        noop = next(c for c in sess._collectors if isinstance(c, NoopCollector))
        assert isinstance(noop, protocol.Collector) and isinstance(noop, protocol.Toggler)
        assert noop in sess.windows.togglers
        for _ in range(1000):  # 1 s of scopes: windows of 0.1 s on average switch it both ways
            with rlscope.scope("step"):
                clock.advance(1_000_000)
    calls = NoopCollector.calls
    assert calls[0] == "start" and calls[-1] == "stop" and calls.count("stop") == 1
    assert calls[1] == "off"  # the run starts in a light window
    assert "on" in calls  # and the windows switched it on again
    summary = analyze(sess.trace_dir).summary
    assert summary["operations"]["step"]["calls"] == 1000


def test_a_collector_that_fails_to_start_warns_in_its_factory_and_the_rest_run(fake_session, monkeypatch):
    """A factory returns None where it has nothing to record: the session goes on without it."""
    sess, clock = fake_session
    row = registry.CollectorRow("none", f"{__name__}:none_factory")
    monkeypatch.setattr(registry, "COLLECTORS", (row, *registry.COLLECTORS))
    with sess, rlscope.scope("step"):
        clock.advance(1000)
    assert analyze(sess.trace_dir).summary["operations"]["step"]["calls"] == 1


def none_factory(session: object, started: object) -> None:
    return None


@pytest.mark.parametrize("row", registry.COLLECTORS, ids=lambda r: r.name.replace("gpu", "device"))
def test_every_collector_row_names_a_factory_and_calibrated_costs(row):
    assert callable(row.load())
    assert set(row.costs) <= set(PLAUSIBLE_NS), "a cost `rlscope calibrate` does not measure"
    assert not row.backend or backends.by_name(row.backend) is not None


@pytest.mark.parametrize("backend", backends.BACKENDS, ids=lambda b: b.name)
def test_every_backend_names_its_collector_rows_and_hooks(backend):
    names = {r.name: r for r in registry.COLLECTORS}
    for name in backend.rows():
        assert names[name].backend == backend.name
    assert {r.name for r in registry.COLLECTORS if r.backend == backend.name} == set(backend.rows())
    if backend.auto_ops_install:
        assert callable(backends.load(backend.auto_ops_install))
        assert callable(backends.load(backend.auto_ops_uninstall))


def test_the_registry_starts_rows_in_order_and_passes_what_started_before(fake_session, monkeypatch):
    """The engine rows start only where an earlier row records (torch's autograd calls: only with
    torch ops or the GPU recorded): a factory sees the collectors started before it."""
    sess, _ = fake_session
    seen: list[tuple[str, int]] = []

    def factory(name: str):
        def make(session: object, started: tuple) -> NoopCollector:
            seen.append((name, len(started)))
            return NoopCollector(session)

        return make

    monkeypatch.setattr(registry.CollectorRow, "load", lambda self: factory(self.name))
    rows = (registry.CollectorRow("a", "x:a"), registry.CollectorRow("b", "x:b"))
    started = registry.start_collectors(sess, rows)
    assert seen == [("a", 0), ("b", 1)] and len(started) == 2


def test_the_window_rows_mark_the_noop_collectors_switches(fake_session, noop_row):
    """Each switch of a toggler is a WINDOW row of the trace, in the order the collector saw it."""
    sess, clock = fake_session
    with sess:
        for _ in range(1000):
            with rlscope.scope("step"):
                clock.advance(1_000_000)
    trace = rlscope.load_trace(str(sess.trace_dir))
    ev = trace.processes[0].events
    kinds = ev.column("kind").to_numpy()
    modes = ev.column("id").to_numpy()[kinds == S.WINDOW].tolist()
    switched = [c == "on" for c in NoopCollector.calls if c in ("on", "off")]
    assert [bool(m) for m in modes[1:]] == switched  # the first row: the session's start, full
