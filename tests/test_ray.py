"""Profiling a Ray job (rlscope.ray) and analyzing a trace in parallel (rlscope.analysis.parallel).

One local Ray instance (``num_cpus=2``, no dashboard, loopback only) for the module; skipped without Ray.
"""

from __future__ import annotations

import json
import os
import time

import pytest

ray = pytest.importorskip("ray", reason='Ray is not installed: pip install "rlscope[ray]"')

import rlscope  # noqa: E402
import rlscope.ray  # noqa: E402
from rlscope.analysis import analyze  # noqa: E402
from rlscope.trace.reader import clock_offset, load_trace  # noqa: E402


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@ray.remote(num_cpus=0)
class Sampler:
    def work(self, seconds: float) -> int:
        with rlscope.scope("sample"):
            _busy(seconds)
        return os.getpid()


@ray.remote(num_cpus=0)
def score(seconds: float) -> int:
    with rlscope.scope("score"):
        _busy(seconds)
    return os.getpid()


@pytest.fixture(scope="module")
def ray_trace(tmp_path_factory):
    trace = tmp_path_factory.mktemp("ray") / "trace"
    # the workers import this module (its actor and task) by name
    path = os.pathsep.join(filter(None, [os.path.dirname(__file__), os.environ.get("PYTHONPATH")]))
    init = {"num_cpus": 2, "include_dashboard": False, "_node_ip_address": "127.0.0.1"}
    init["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
    with rlscope.ray.profile(trace, init=init, flush_interval=0.2, finish_timeout_s=20):
        actors = [Sampler.options(name=f"sampler-{i}").remote() for i in range(3)]
        # the last sampler works three times as long: a straggler
        pids = ray.get([a.work.remote(0.3 if i == 2 else 0.1) for i, a in enumerate(actors)])
        task_pid = ray.get(score.remote(0.1))
        with rlscope.scope("learn"):
            _busy(0.05)
    ray.shutdown()
    return trace, pids, task_pid


def test_every_actor_trace_arrives_with_its_role(ray_trace):
    trace_dir, pids, task_pid = ray_trace
    trace = load_trace(trace_dir)
    by_pid = {p.pid: p for p in trace.processes}
    assert set(pids) | {task_pid, os.getpid()} <= set(by_pid)
    for pid in pids:
        meta = by_pid[pid].metadata
        assert meta["ray.role"] == "Sampler" and meta["ray.actor_name"].startswith("sampler-")
        assert by_pid[pid].complete, "the worker ended its session and shipped it"
    assert by_pid[task_pid].metadata["ray.role"] == "score"
    assert by_pid[os.getpid()].metadata["ray.role"] == "driver"
    assert not any(p.metadata.get("ray.role") == "Collector" for p in trace.processes)


def test_clock_offsets_are_stored_and_used(ray_trace):
    trace_dir, pids, _ = ray_trace
    trace = load_trace(trace_dir)
    driver = next(p for p in trace.processes if p.pid == os.getpid())
    for p in trace.processes:
        if p.pid in pids:
            m = p.metadata
            assert abs(int(m["clock.offset_ns"])) < 50_000_000  # one host: the same monotonic clock
            assert int(m["clock.uncertainty_ns"]) > 0 and "clock.drift_ns" in m
            # aligned through the driver's anchors, not the worker's own
            assert clock_offset(p) - clock_offset(driver) == int(m["clock.offset_ns"])
    summary = analyze(trace_dir).summary
    assert summary["clock_alignment"]["method"] == "ray round trips"
    assert summary["clock_alignment"]["processes_measured"] >= 4


def test_roles_spread_and_stragglers(ray_trace):
    trace_dir, pids, _ = ray_trace
    roles = analyze(trace_dir).summary["roles"]
    sampler = roles["Sampler"]
    assert sampler["workers"] == 3 and set(sampler["pids"]) == set(pids)
    assert sampler["operations"]["sample"]["calls"] == 3
    assert sampler["spread"]["max_s"] == pytest.approx(0.3, rel=0.3)
    assert [s["pid"] for s in sampler["stragglers"]] == [pids[2]]
    assert "learn" in roles["driver"]["operations"] and "score" in roles["score"]["operations"]


def test_parallel_analysis_equals_serial(ray_trace):
    trace_dir, _, _ = ray_trace
    serial = json.dumps(analyze(trace_dir).summary, sort_keys=True, default=str)
    local = json.dumps(analyze(trace_dir, workers=2).summary, sort_keys=True, default=str)
    assert local == serial
    on_ray = json.dumps(analyze(trace_dir, ray_address="local").summary, sort_keys=True, default=str)
    ray.shutdown()
    assert on_ray == serial
