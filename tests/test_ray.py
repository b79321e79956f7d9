"""Profiling a Ray job (rlscope.ray) and analyzing a trace in parallel (rlscope.analysis.parallel).

One local Ray instance (``num_cpus=2``, no dashboard, loopback only) for the module, and one under
``rlscope run`` (a script that calls ``ray.init`` itself); skipped without Ray.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

ray = pytest.importorskip("ray", reason='Ray is not installed: pip install "rlscope[ray]"')

import rlscope  # noqa: E402
import rlscope.ray  # noqa: E402
from rlscope.analysis import analyze  # noqa: E402
from rlscope.trace.reader import clock_offset, load_trace  # noqa: E402
from tests.test_parallel import assert_same_outputs, write_trace  # noqa: E402


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


def test_parallel_analysis_equals_serial(ray_trace, tmp_path):
    """Every output (summary, JSON, CSV, HTML, table, report, kernel and interval tables) is serial's."""
    trace_dir, _, _ = ray_trace
    serial = analyze(trace_dir)
    assert_same_outputs(serial, analyze(trace_dir, workers=2), tmp_path)
    assert_same_outputs(serial, analyze(trace_dir, ray_address="local"), tmp_path)
    # many processes with GPU work, one without events and one unreadable (tests/test_parallel.py)
    synthetic = write_trace(tmp_path / "synthetic")
    assert_same_outputs(analyze(synthetic), analyze(synthetic, ray_address="local"), tmp_path)
    ray.shutdown()


# A program that starts Ray itself, with a worker hook and an env var of its own (rlscope's hook must
# be merged with them), and prints its results: under `rlscope run` they must be the same.
RUN_SCRIPT = textwrap.dedent(
    """
    import os
    import time

    import ray
    import rlscope

    def user_hook():
        os.environ["USER_HOOK_RAN"] = "yes"

    @ray.remote(num_cpus=0)
    class Sampler:
        def work(self, seconds):
            with rlscope.scope("sample"):
                end = time.perf_counter() + seconds
                while time.perf_counter() < end:
                    pass
            return os.getpid(), os.environ.get("USER_HOOK_RAN"), os.environ.get("MINE")

    @ray.remote(num_cpus=0)
    def score():
        with rlscope.scope("score"):
            time.sleep(0.05)
        return os.getpid()

    env = {"worker_process_setup_hook": user_hook, "env_vars": {"MINE": "kept"}}
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", runtime_env=env)
    actors = [Sampler.remote() for _ in range(3)]
    out = ray.get([a.work.remote(0.05) for a in actors])
    print("ACTORS", " ".join(str(pid) for pid, _, _ in out))
    print("TASK", ray.get(score.remote()))
    print("HOOK", {hook for _, hook, _ in out}, "ENV", {mine for _, _, mine in out})
    ray.shutdown()
    """
)


def test_rlscope_run_profiles_the_ray_workers_of_a_program(tmp_path):
    script, trace_dir = tmp_path / "job.py", tmp_path / "trace"
    script.write_text(RUN_SCRIPT)
    run = [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--gpu", "off", "--no-backend"]
    r = subprocess.run(
        [*run, "--flush-interval", "0.2", "--trace-dir", str(trace_dir), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line[:4] in ("ACTO", "TASK", "HOOK"))
    assert lines["HOOK"] == "{'yes'} ENV {'kept'}", "the program's own hook and env vars still apply"
    actor_pids = [int(x) for x in lines["ACTORS"].split()]
    task_pid = int(lines["TASK"])

    trace = load_trace(trace_dir)
    by_pid = {p.pid: p for p in trace.processes}
    assert set(actor_pids) | {task_pid} <= set(by_pid), "every actor's and the task's trace arrived"
    for pid in actor_pids:
        assert by_pid[pid].metadata["ray.role"] == "Sampler" and by_pid[pid].complete
    assert by_pid[task_pid].metadata["ray.role"] == "score"
    roles = [p.metadata.get("ray.role") for p in trace.processes]
    # the program itself is the driver; Ray's daemons (raylet, agents, log monitor) are not profiled
    assert sorted(roles, key=str) == sorted(["driver", "Sampler", "Sampler", "Sampler", "score"], key=str)
    summary = analyze(trace_dir).summary
    assert summary["roles"]["Sampler"]["workers"] == 3
    assert summary["roles"]["Sampler"]["operations"]["sample"]["calls"] == 3
    assert next(iter(summary["roles"])) == "driver"


def test_runtime_env_merges_the_jobs_own_hook():
    options = {"flush_interval": 0.5}
    plain = rlscope.ray.runtime_env(options, {"env_vars": {"A": "1"}})
    assert plain["worker_process_setup_hook"] == rlscope.ray.HOOK and plain["env_vars"]["A"] == "1"
    by_path = rlscope.ray.runtime_env(options, {"worker_process_setup_hook": "mypkg.setup"})
    assert by_path["worker_process_setup_hook"] == rlscope.ray.HOOK
    assert json.loads(by_path["env_vars"][rlscope.ray.ENV])["user_hook"] == "mypkg.setup"
    calls = []
    by_callable = rlscope.ray.runtime_env(options, {"worker_process_setup_hook": lambda: calls.append(1)})
    assert callable(by_callable["worker_process_setup_hook"])
    by_callable["worker_process_setup_hook"]()  # no rlscope settings in this process: only the job's hook
    assert calls == [1]
    assert rlscope.ray.runtime_env(options, plain) == plain  # already hooked: unchanged


SELF_PROFILED = textwrap.dedent(
    """
    import os, sys
    import ray
    import rlscope
    import rlscope.ray

    @ray.remote(num_cpus=0)
    class Worker:
        def work(self):
            with rlscope.scope("work"):
                sum(range(100_000))
            return os.getpid()

    init = dict(num_cpus=1, include_dashboard=False, _node_ip_address="127.0.0.1")
    with rlscope.ray.profile(sys.argv[1], init=init):
        print("ACTOR", ray.get(Worker.remote().work.remote()))
    ray.shutdown()
    """
)


def test_a_program_using_rlscope_ray_profile_runs_under_rlscope_run(tmp_path):
    """The run already follows Ray: rlscope.ray.profile starts Ray, says where the trace goes, and the
    actor's trace arrives in the run's directory (no second driver session, no error)."""
    script, trace_dir, own = tmp_path / "job.py", tmp_path / "trace", tmp_path / "own"
    script.write_text(SELF_PROFILED)
    run = [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--gpu", "off", "--no-backend"]
    r = subprocess.run(
        [*run, "--trace-dir", str(trace_dir), "--", sys.executable, str(script), str(own)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("rlscope run already profiles this program and its Ray workers") == 1, r.stderr
    actor = int(next(line.split()[1] for line in r.stdout.splitlines() if line.startswith("ACTOR")))
    assert not own.exists()
    by_pid = {p.pid: p for p in load_trace(trace_dir).processes}
    assert by_pid[actor].metadata["ray.role"] == "Worker"
    assert sorted(p.metadata.get("ray.role", "") for p in by_pid.values()) == ["Worker", "driver"]
