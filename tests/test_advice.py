"""Advice rules on synthetic traces: each fires where the trace shows its problem, with the evidence and the
seconds at stake the fake clock put there, and stays silent on a trace that lacks it.

Traces are built on a fake clock; CUDA API calls, the GPU work they launch and torch ops are written by
hand (as tests/test_gpu_analysis.py does), so every figure the advice quotes is known exactly.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import analyze
from rlscope.analysis.advice import MIN_STAKE_SHARE, Facts, advise
from rlscope.analysis.advice.base import DEFAULT_REFERENCE_NS
from rlscope.analysis.advice.launch import REPLAY_REFERENCE_LOOPS, launch_bound
from rlscope.analysis.gpu_calls import process_gpu_calls
from rlscope.annotate import intern
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from tests.conftest import FakeClock, write_stream

NS = 1e-9
STEPS = 20


class Run:
    """A profiled run on a fake clock whose GPU calls and torch ops are written by hand."""

    def __init__(self, path) -> None:
        self.clock = FakeClock()
        self.session = rlscope.profile(path, backend=False, gpu=False, windows=False)
        self.session.clock = self.clock
        self.path = path
        self.gpu: list[tuple] = []
        self.backend: list[tuple] = []
        self.corr = 0
        self.thread = threading.get_native_id()

    def python(self, ns: int) -> None:
        self.clock.advance(ns)

    def api(self, name: str, ns: int, record: tuple | None = None, nested: str | None = None) -> None:
        """A CUDA API call of ``ns`` on this thread; ``record``: (category, name, ns, bytes) of the GPU work
        it launched, starting as the call returns; ``nested``: a driver call inside it."""
        self.corr += 1
        t = self.clock.now
        self.gpu.append((C.CUDA_API, t, t + ns, self.corr, self.thread, -1, -1, intern(name), 0))
        if nested:
            self.corr += 1
            row = (C.CUDA_API, t + 1, t + ns - 1, self.corr, self.thread, -1, -1, intern(nested), 0)
            self.gpu.append(row)
        if record:
            cat, rname, rns, nbytes = record
            self.gpu.append((cat, t + ns, t + ns + rns, self.corr, -1, 0, 7, intern(rname), nbytes))
        self.clock.advance(ns)

    def torch_op(self, ns: int) -> None:
        t = self.clock.now
        self.backend.append((t, t + ns, self.thread, intern("aten::addmm")))
        self.clock.advance(ns)

    def __enter__(self) -> Run:
        self.session.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.session.__exit__(*exc)
        if self.gpu:
            write_stream(self.session.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, self.gpu)
        if self.backend:
            write_stream(self.session.process_dir / S.BACKEND_FILE, S.BACKEND_COLUMNS_DOC, self.backend)


def kernel(ns: int, name: str = "gemv") -> tuple:
    return (C.GPU_KERNEL, name, ns, 0)


def copy(kind: str, ns: int, nbytes: int) -> tuple:
    return (C.GPU_MEMCPY, kind, ns, nbytes)


def run(tmp_path, step: Callable[[Run, int], None], steps: int = STEPS) -> dict:
    with Run(tmp_path / "trace") as r:
        for i in range(steps):
            step(r, i)
    return dict(analyze(tmp_path / "trace", correct=False).summary)


def found(summary: dict, rule: str) -> list[dict]:
    return [a for a in summary["advice"] if a["rule"] == rule]


def simulate(r: Run, ns: int) -> None:
    with rlscope.scope("simulation"), rlscope.simulator():
        r.python(ns)


# --------------------------------------------------------------------------- GPU idle, small policy


def test_gpu_idle_small_policy_fires_on_tiny_kernels_driven_by_python_and_launches(tmp_path):
    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(300)
            r.api("cudaLaunchKernel_v7000", 500, kernel(50))
            r.python(200)
        simulate(r, 10_000)

    s = run(tmp_path, step)
    [a] = found(s, "gpu_idle_small_policy")
    assert a["operation"] == "inference"
    assert a["seconds_at_stake"] == pytest.approx(STEPS * 500 * NS)  # the CUDA API time
    assert a["evidence"] == (
        "GPU busy 0% of the run; inference took 20.0 µs over 20 calls (1.0 µs each), 100% of its CPU"
        " time in Python (10.0 µs) and CUDA API calls (10.0 µs), its kernels 1.0 µs (5% of its time)"
    )
    assert "CPU" in a["change"] and "envs" in a["change"]


def test_gpu_idle_silent_when_the_gpu_is_busy(tmp_path):
    """The same small policy, with a learner that keeps the GPU busy: acting on the GPU costs nothing."""

    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(300)
            r.api("cudaLaunchKernel_v7000", 500, kernel(50))
            r.python(200)
        with rlscope.scope("backprop"):
            r.api("cudaLaunchKernel_v7000", 500, kernel(8_000, "sgemm"))
        simulate(r, 10_000)

    s = run(tmp_path, step)
    assert s["gpu"]["gpu_bound_fraction"] > 0.30
    assert found(s, "gpu_idle_small_policy") == []


def test_gpu_idle_silent_on_cpu_traces(tmp_path):
    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(1000)
        simulate(r, 1000)

    assert found(run(tmp_path, step), "gpu_idle_small_policy") == []


# --------------------------------------------------------------------------- simulation-bound


def test_simulation_bound_fires_when_a_cpu_simulator_takes_most_of_the_run(tmp_path):
    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(2000)
        with rlscope.scope("simulation"):
            r.python(1000)
            with rlscope.simulator():
                r.python(5000)

    s = run(tmp_path, step)
    [a] = found(s, "simulation_bound")
    assert a["operation"] == "simulation"
    assert a["seconds_at_stake"] == pytest.approx(STEPS * 5000 * NS)  # the simulator's time
    assert a["evidence"] == (
        "simulation took 120.0 µs (75% of the run) over 20 calls (6.0 µs each), 83% of its own time in"
        " simulator code on the CPU (100.0 µs)"
    )
    assert "bench-sim" in a["change"] and "AsyncVectorEnv" in a["change"]


def test_simulation_bound_silent_on_a_small_simulator_share(tmp_path):
    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(9000)
        simulate(r, 1000)

    assert found(run(tmp_path, step), "simulation_bound") == []


def test_simulation_bound_silent_on_a_gpu_simulator(tmp_path):
    def step(r: Run, i: int) -> None:
        with rlscope.scope("simulation"), rlscope.simulator():
            r.python(4000)
            r.api("cudaLaunchKernel_v7000", 500, kernel(2000, "cartpole_step"))
        with rlscope.scope("inference"):
            r.python(1000)

    assert found(run(tmp_path, step), "simulation_bound") == []


# --------------------------------------------------------------------------- launch-bound


def _launches(kernel_ns: int, launch_ns: int = 3000, launches: int = 10) -> Callable[[Run, int], None]:
    def step(r: Run, i: int) -> None:
        with rlscope.scope("backprop"):
            r.python(1000)
            for _ in range(launches):
                r.api("cudaLaunchKernel_v7000", launch_ns, kernel(kernel_ns, "elementwise"))
        simulate(r, 2000)

    return step


# a replayed call's own cost in the synthetic (uncorrected) traces: no reference loop timed, the default
TRAINING_REPLAY_NS = REPLAY_REFERENCE_LOOPS["training step"] * DEFAULT_REFERENCE_NS
STEP_REPLAY_NS = REPLAY_REFERENCE_LOOPS["step"] * DEFAULT_REFERENCE_NS


def test_launch_bound_fires_on_many_short_kernels_behind_slow_launches(tmp_path):
    s = run(tmp_path, _launches(1000, 12_000, 100))
    # a small network on the GPU (idle most of the run) leads; launch_bound's finding is kept under it
    [lead] = found(s, "gpu_idle_small_policy")
    [h] = [h for h in lead["hides"] if h["rule"] == "launch_bound"]
    calls = process_gpu_calls(load_trace(tmp_path / "trace").processes[0])
    [f] = launch_bound(Facts(s, calls))
    a = {"operation": f.operation, "seconds_at_stake": f.seconds_at_stake, "evidence": f.evidence}
    a["change"] = f.change
    assert h["seconds_at_stake"] == a["seconds_at_stake"]
    assert a["operation"] == "backprop"
    # each call's CPU time (1 µs of Python, 100 launches of 12 µs) goes, its kernels' time stays, and
    # a replay of a training step costs its own (the name says it runs a backward pass)
    per_call = 1000 + 100 * 12_000 - 100 * 1000 - TRAINING_REPLAY_NS
    assert a["seconds_at_stake"] == pytest.approx(STEPS * per_call * NS)
    assert a["evidence"] == (
        "backprop: 2,000 of its 2,000 traced kernels (100%) ran under 5 µs (mean 1.0 µs), 100 launches a"
        " call; launching took 24.0 ms of CPU time against 2.0 ms of kernel time (12.0x); a replay would"
        " cost about 820.2 µs a call, 20 calls"
    )
    assert "torch.compile" in a["change"] and "CUDA graph" in a["change"]


def test_launch_bound_silent_where_a_replay_costs_more_than_the_call(tmp_path):
    """Ten launches of 3 µs a call against a training step's replay of ~0.8 ms: graphs would not pay."""
    assert found(run(tmp_path, _launches(1000)), "launch_bound") == []


def _dispatching(first_extra_ns: int = 0, first_api_extra_ns: int = 0) -> Callable[[Run, int], None]:
    """An inference step of 100 torch ops, each 4 µs of its own dispatch around a 3 µs launch of a
    1 µs kernel; the first step's ops ``first_extra_ns`` longer in dispatch, ``first_api_extra_ns`` in
    their launch."""

    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(1000)
            for _ in range(100):
                t = r.clock.now
                r.python(4000 + (first_extra_ns if i == 0 else 0))  # the op's dispatch, before its launch
                extra = first_api_extra_ns if i == 0 else 0
                r.api("cudaLaunchKernel_v7000", 3000 + extra, kernel(1000, "elementwise"))
                r.backend.append((t, r.clock.now, r.thread, intern("aten::add")))
        simulate(r, 2000)

    return step


# per call: the Python, the ops' dispatch and launches go; the kernels stay; a step's replay is paid
DISPATCHING_STAKE_NS = STEPS * (1000 + 100 * (4000 + 3000) - 100 * 1000 - STEP_REPLAY_NS)


def test_launch_bound_counts_the_torch_ops_dispatch_a_graph_replay_skips(tmp_path):
    """Each launch inside a torch op of 4 µs of its own: a graph replay removes the dispatch as well as
    the launch call, and the kernels' time stays."""
    s = run(tmp_path, _dispatching())
    # a small policy on the GPU (the GPU is idle most of the run) leads; launch_bound's number is kept
    [lead] = found(s, "gpu_idle_small_policy")
    [a] = [h for h in lead["hides"] if h["rule"] == "launch_bound"]
    assert a["seconds_at_stake"] == pytest.approx(DISPATCHING_STAKE_NS * NS)
    calls = process_gpu_calls(load_trace(tmp_path / "trace").processes[0])
    [f] = launch_bound(Facts(s, calls))
    assert "; its torch ops took 8.0 ms of CPU time besides, dispatching them;" in f.evidence
    assert f.evidence.endswith("; a replay would cost about 82.7 µs a call, 20 calls")
    # the what-if caps it (advice.on_the_critical_path) by the CPU categories it counts
    assert f.parts == ("python", "backend", "cuda_api")


def test_launch_bound_leaves_out_the_first_calls_warm_up(tmp_path):
    """The first step's ops pay 50 µs each of warm-up in their dispatch and 20 µs in their launch call
    (a kernel's module loading): a replay does not remove what every run pays once, so the stake is
    the steady steps' alone, as if the first were like the others."""
    s = run(tmp_path, _dispatching(50_000, 20_000))
    op = s["operations"]["inference"]
    assert op["one_time_s"]["categories"]["backend"] == pytest.approx(100 * 50_000 * NS)
    assert op["one_time_s"]["categories"]["cuda_api"] == pytest.approx(100 * 20_000 * NS)
    [lead] = found(s, "gpu_idle_small_policy")
    [a] = [h for h in lead["hides"] if h["rule"] == "launch_bound"]
    assert a["seconds_at_stake"] == pytest.approx(DISPATCHING_STAKE_NS * NS)


def test_launch_bound_prices_a_replay_at_the_runs_speed():
    """A run whose reference loop took twice the default: a replay costs it twice as long."""
    slow = Facts({"overhead": {"reference_loop_ns": 2 * DEFAULT_REFERENCE_NS}}, {})
    assert slow.reference_loop_ns == 2 * DEFAULT_REFERENCE_NS
    assert Facts({}, {}).reference_loop_ns == DEFAULT_REFERENCE_NS


def test_launch_bound_silent_on_long_kernels(tmp_path):
    assert found(run(tmp_path, _launches(20_000)), "launch_bound") == []


def test_launch_bound_silent_when_short_kernels_keep_up_with_their_launches(tmp_path):
    """Short kernels, but each runs longer than launching it costs: the GPU is the bottleneck."""
    assert found(run(tmp_path, _launches(4000)), "launch_bound") == []


# --------------------------------------------------------------------------- device->host syncs


def _syncing(copies_per_step: Callable[[int], int]) -> Callable[[Run, int], None]:
    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(500)
            r.api("cudaLaunchKernel_v7000", 1000, kernel(2000))
            for _ in range(copies_per_step(i)):
                r.api("cudaMemcpyAsync_v3020", 1500, copy("memcpy DtoH", 100, 16))
            r.api("cudaStreamSynchronize_v3020", 2500, nested="cuStreamSynchronize")
        simulate(r, 10_000)

    return step


def test_device_to_host_sync_fires_on_a_copy_every_call(tmp_path):
    s = run(tmp_path, _syncing(lambda i: 1))
    [a] = found(s, "device_to_host_sync")
    assert a["operation"] == "inference"
    # the copy's call and the synchronize (its nested driver call counted once), every step
    assert a["seconds_at_stake"] == pytest.approx(STEPS * (1500 + 2500) * NS)
    assert a["evidence"] == (
        "inference: 1.0 device->host copies and 2.0 synchronizing calls per call over 20 traced calls"
        " (cudaStreamSynchronize 20x 50.0 µs, cudaMemcpyAsync 20x 30.0 µs); the host waited 80.0 µs in"
        " them over the run"
    )
    assert "GPU simulator" in a["change"]


def test_device_to_host_sync_suggests_merging_several_copies_a_call(tmp_path):
    s = run(tmp_path, _syncing(lambda i: 3))
    [a] = found(s, "device_to_host_sync")
    assert a["seconds_at_stake"] == pytest.approx(STEPS * (3 * 1500 + 2500) * NS)
    assert a["change"].startswith("3 copies a call: fetch what the step needs in one copy")


def test_device_to_host_sync_silent_when_not_every_call_copies(tmp_path):
    s = run(tmp_path, _syncing(lambda i: i % 2))
    assert found(s, "device_to_host_sync") == []


def test_gpu_calls_count_a_nested_driver_call_once(tmp_path):
    with Run(tmp_path / "trace") as r:
        _syncing(lambda i: 1)(r, 0)
    calls = process_gpu_calls(load_trace(tmp_path / "trace").processes[0])["inference"]
    assert calls.instances == 1
    assert calls.api_calls == 3  # launch, copy, synchronize (with its driver call inside)
    assert calls.api_s == pytest.approx((1000 + 1500 + 2500) * NS)
    assert calls.launch_calls == 1 and calls.launch_s == pytest.approx(1000 * NS)
    assert calls.sync_calls == 2 and calls.sync_s == pytest.approx((1500 + 2500) * NS)
    assert calls.dtoh_copies == 1 and calls.dtoh_bytes == 16
    assert calls.kernels == 1 and calls.short_kernels == 1 and calls.kernel_s == pytest.approx(2000 * NS)
    assert calls.sync_names == {
        "cudaMemcpyAsync": [1, pytest.approx(1500 * NS)],
        "cudaStreamSynchronize": [1, pytest.approx(2500 * NS)],
    }


# --------------------------------------------------------------------------- pageable copies


def _copies(kind: str) -> Callable[[Run, int], None]:
    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(500)
            r.api("cudaMemcpyAsync_v3020", 3000, copy(kind, 500, 4096))
        simulate(r, 5000)

    return step


def test_pageable_copies_fire_on_copies_from_pageable_memory(tmp_path):
    s = run(tmp_path, _copies("memcpy HtoD pageable"))
    [a] = found(s, "pageable_copies")
    assert a["operation"] == "inference"
    assert a["seconds_at_stake"] == pytest.approx(STEPS * 3000 * NS)
    assert a["evidence"] == (
        "inference: 20 traced copies between pageable host memory and the GPU (80.0 KiB, 1.0 a call,"
        " 10.0 µs on the GPU); the calls that made them took 60.0 µs traced, 60.0 µs over the run"
    )
    assert "pin_memory=True" in a["change"]


def test_pageable_copies_also_read_kinetos_names(tmp_path):
    s = run(tmp_path, _copies("Memcpy HtoD (Pageable -> Device)"))
    assert [a["operation"] for a in found(s, "pageable_copies")] == ["inference"]


def test_pageable_copies_silent_on_pinned_copies(tmp_path):
    assert found(run(tmp_path, _copies("memcpy HtoD")), "pageable_copies") == []


# --------------------------------------------------------------------------- stragglers

MS = 1_000_000


def _process(trace, monkeypatch, pid: int, ppid: int, ops: dict[str, int], env=None) -> None:
    """One process's session on a fake clock (pid and parent pid faked): each operation once."""
    with monkeypatch.context() as m:
        m.setattr(os, "getpid", lambda: pid)
        m.setattr(os, "getppid", lambda: ppid)
        for k, v in (env or {}).items():
            m.setenv(k, v)
        sess = rlscope.profile(trace, backend=False, gpu=False, windows=False)
        sess.clock = clock = FakeClock()
        with sess:
            for name, ns in ops.items():
                with rlscope.scope(name):
                    clock.advance(ns)


def _workers(tmp_path, monkeypatch, busy_ms: list[int]) -> dict:
    trace = tmp_path / "trace"
    _process(trace, monkeypatch, 10, 1, {"learn": 1 * MS})
    for i, ms in enumerate(busy_ms):
        _process(trace, monkeypatch, 11 + i, 10, {"simulation": ms * MS, "reset": 1 * MS})
    return dict(analyze(trace, correct=False).summary)


def test_worker_stragglers_fire_on_a_lagging_vector_env_worker(tmp_path, monkeypatch):
    s = _workers(tmp_path, monkeypatch, [20, 20, 45])
    [a] = found(s, "worker_stragglers")
    # busy: 21, 21, 46 ms; median 21 ms; the straggler's 25 ms above it are what the others wait out
    assert a["seconds_at_stake"] == pytest.approx(25e-3)
    assert a["operation"] == "simulation"
    host = s["processes"][0]["node"]
    assert a["evidence"] == (
        "env worker: 1 of 3 workers busy over 1.25x the median 21.0 ms;"
        f" env worker pid 13 on {host} 46.0 ms (2.19x);"
        " the widest gap in simulation: slowest 45.0 ms, median 20.0 ms"
    )
    assert "vector env" in a["change"]
    assert found(s, "role_stragglers") == []


def test_worker_stragglers_silent_on_balanced_workers(tmp_path, monkeypatch):
    s = _workers(tmp_path, monkeypatch, [20, 20, 22])
    assert found(s, "worker_stragglers") == [] and found(s, "role_stragglers") == []


def _ranks(tmp_path, monkeypatch, busy_ms: list[int]) -> dict:
    trace = tmp_path / "trace"
    for rank, ms in enumerate(busy_ms):
        env = {"WORLD_SIZE": str(len(busy_ms)), "RANK": str(rank), "LOCAL_RANK": str(rank)}
        _process(trace, monkeypatch, 21 + rank, 20, {"backprop": ms * MS}, env=env)
    _process(trace, monkeypatch, 20, 1, {})  # the torchrun agent
    return dict(analyze(trace, correct=False).summary)


def test_role_stragglers_fire_on_a_slow_ddp_rank(tmp_path, monkeypatch):
    s = _ranks(tmp_path, monkeypatch, [10, 10, 10, 30])
    [a] = found(s, "role_stragglers")
    assert a["operation"] == "backprop"
    assert a["seconds_at_stake"] == pytest.approx(20e-3)
    assert "ddp rank: 1 of 4 workers busy over 1.25x the median 10.0 ms; rank 3 pid 24" in a["evidence"]
    assert "30.0 ms (3.00x)" in a["evidence"]
    assert a["change"].startswith("every all-reduce waits for rank 3 pid 24")


def test_role_stragglers_silent_on_even_ranks(tmp_path, monkeypatch):
    assert found(_ranks(tmp_path, monkeypatch, [10, 11, 10, 12]), "role_stragglers") == []


# --------------------------------------------------------------------------- Python-dominated update / acting


def _torch_step(op: str, torch_ns: int, backend: bool = True) -> Callable[[Run, int], None]:
    def step(r: Run, i: int) -> None:
        with rlscope.scope(op):
            r.python(1000 - torch_ns)
            if backend:
                r.torch_op(torch_ns)
            else:
                r.python(torch_ns)
        simulate(r, 3000)

    return step


@pytest.mark.parametrize("op, rule", [("backprop", "python_backprop"), ("inference", "python_inference")])
def test_python_dominated_fires_when_python_outweighs_torch_ops(tmp_path, op, rule):
    s = run(tmp_path, _torch_step(op, 300))
    [a] = found(s, rule)
    assert a["operation"] == op
    assert a["seconds_at_stake"] == pytest.approx(STEPS * 700 * NS)
    assert a["evidence"] == (
        f"{op} took 20.0 µs over 20 calls (1.0 µs each); 70% of its own time is Python (14.0 µs),"
        " 30% torch ops"
    )


@pytest.mark.parametrize("op, rule", [("backprop", "python_backprop"), ("inference", "python_inference")])
def test_python_dominated_silent_when_torch_ops_dominate(tmp_path, op, rule):
    assert found(run(tmp_path, _torch_step(op, 700)), rule) == []


def test_python_dominated_silent_without_the_backend_recorder(tmp_path):
    """Without torch-op records Python time includes the ops: no Python share to trust."""
    s = run(tmp_path, _torch_step("backprop", 300, backend=False))
    assert s["operations"]["backprop"]["categories"] == pytest.approx({"python": STEPS * 1000 * NS})
    assert found(s, "python_backprop") == []


# --------------------------------------------------------------------------- ranking, floor, JSON shape


def _op(total: float, **cats: float) -> dict:
    return {"total_s": total, "exclusive_s": total, "calls": 100, "categories": cats, "gpu_categories": {}}


def test_advice_ranked_by_time_at_stake_with_the_documented_shape():
    summary = {
        "wall_s": 10.0,
        "categories": {"backend": 1.0},
        "operations": {
            "backprop": _op(2.0, python=1.5, backend=0.5),
            "simulation": _op(6.0, simulator=5.0, python=1.0),
            "inference": _op(2.0, python=1.8, backend=0.2),
        },
    }
    advice = advise(summary)
    assert [(a["rule"], a["seconds_at_stake"]) for a in advice] == [
        ("simulation_bound", 5.0),
        ("python_inference", 1.8),
        ("python_backprop", 1.5),
    ]
    assert all(set(a) == {"rule", "operation", "evidence", "seconds_at_stake", "change"} for a in advice)


def test_findings_under_the_floor_are_left_out():
    wall = 100.0
    small = MIN_STAKE_SHARE * wall * 0.9
    summary = {
        "wall_s": wall,
        "categories": {"backend": 1.0},
        "operations": {"backprop": _op(small / 0.6, python=small, backend=small / 0.6 - small)},
    }
    assert advise(summary) == []
    summary["wall_s"] = wall / 2
    assert [a["rule"] for a in advise(summary)] == ["python_backprop"]


def test_a_small_gpu_policy_is_one_finding_not_three(tmp_path):
    """Tiny kernels behind slow launches and Python in acting: gpu_idle_small_policy says it once."""

    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(2000)
            r.torch_op(200)
            for _ in range(10):
                r.api("cudaLaunchKernel_v7000", 3000, kernel(500))
        simulate(r, 20_000)

    s = run(tmp_path, step)
    rules = {a["rule"] for a in s["advice"] if a["operation"] == "inference"}
    assert rules == {"gpu_idle_small_policy"}


# --------------------------------------------------------------------------- renderings


def _many_findings() -> dict:
    ops = {f"update_{i}": _op(1.0 + i / 10, python=0.9 + i / 10, backend=0.1) for i in range(7)}
    summary = {"wall_s": 20.0, "categories": {"backend": 1.0}, "operations": ops}
    summary["advice"] = advise(summary)
    return summary


def test_terminal_footer_shows_the_top_findings_one_line_each():
    from rlscope.viz.advice import FOOTER_FINDINGS, footer_lines

    summary = _many_findings()
    lines = footer_lines(summary)
    assert lines[0] == "advice, most time at stake first (2 more in --json / --html):"
    assert len(lines) == 1 + FOOTER_FINDINGS
    top = summary["advice"][0]
    assert top["operation"] == "update_6" and top["seconds_at_stake"] == pytest.approx(1.5)
    assert (
        lines[1]
        == f"1. update_6: {top['change']} — 1.50 s at stake (8% of the run). Evidence: {top['evidence']}"
    )
    assert footer_lines({"advice": []}) == []


def test_table_and_html_show_the_advice(tmp_path):
    from rlscope.viz import html, terminal

    def step(r: Run, i: int) -> None:
        with rlscope.scope("inference"):
            r.python(2000)
        with rlscope.scope("simulation"), rlscope.simulator():
            r.python(6000)

    with Run(tmp_path / "trace") as r:
        for i in range(STEPS):
            step(r, i)
    result = analyze(tmp_path / "trace", correct=False)
    [a] = result.advice
    text = terminal.text(result, width=400)
    assert f"1. simulation: {a['change']} — 120.0 µs at stake (75% of the run)." in text
    page = html.render(result)
    assert page.index("<h2>Advice</h2>") < page.index("<h2>Time by operation and category</h2>")
    assert "[simulation_bound · simulation]" in page
    assert json.loads(json.dumps(result.summary))["advice"] == [a]


def test_html_says_when_there_is_no_advice():
    from rlscope.viz.advice import NO_ADVICE, html_section

    assert NO_ADVICE in html_section({"advice": []})


@pytest.mark.parametrize(
    "seconds, shown",
    [
        (1.5, "1.50 s"),
        (0.0999, "99.9 ms"),
        (200 * 999.9999e-9 / 200, "1.0 µs"),
        (5e-7, "500 ns"),
        (0.99949e-3, "999.5 µs"),
    ],
)
def test_durations_read_in_the_unit_they_round_to(seconds, shown):
    from rlscope.analysis.advice.base import secs

    assert secs(seconds) == shown
