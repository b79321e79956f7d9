"""Ground truth on a real GPU (marked ``gpu``; skipped without CUDA, run on the device machine).

Kernels of known duration (``torch.cuda._sleep``, timed independently with CUDA events), CPU
busy-waits of known length, and a copy of known size, in scopes; rlscope must recover each
operation's GPU time within 3% and CPU time within 5%, including a kernel that finishes after
its scope has closed.
"""

from __future__ import annotations

import os
import time

import pytest

import rlscope
from rlscope.trace.reader import load_trace
from tests.conftest import summary_of

pytestmark = pytest.mark.gpu


def _cupti_or_skip():
    pytest.importorskip("cupti", reason="cupti-python (rlscope[cupti]) not installed")


def _sleep_cycles_for(torch, seconds: float) -> int:
    """Cycles for torch.cuda._sleep to spin ~seconds, measured with CUDA events."""
    torch.cuda._sleep(1000)  # warm-up: the first launch loads the kernel and would skew the rate
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 1_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    per_cycle = start.elapsed_time(end) / 1e3 / cycles
    return int(seconds / per_cycle)


def test_kineto_cycles_stream_records(tmp_path):
    """With a short cycle, Kineto rotates during the run and every cycle's kernels reach the trace."""
    torch = pytest.importorskip("torch")
    cycles = _sleep_cycles_for(torch, 0.005)
    sess = rlscope.profile(tmp_path / "t", backend=False, gpu="kineto", nvml_hz=0)
    timed = 0.0
    with sess:
        sess.set_ticker(sess.ticks._ticker, int(0.02e9))  # rotate every 20 ms instead of 10 s
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with rlscope.scope("step"):
                a.record()
                torch.cuda._sleep(cycles)
                b.record()
                torch.cuda.synchronize()
            timed += a.elapsed_time(b) / 1e3
    gpu = load_trace(tmp_path / "t").processes[0].gpu
    sleeps = [r for r in gpu.to_pylist() if r["category"] == 4]
    assert len(sleeps) >= 18  # a kernel in flight at a rotation may be missed, no more
    s = summary_of(tmp_path / "t")
    recorded = s["operations"]["step"]["gpu_categories"]["gpu_kernel"]
    assert recorded / len(sleeps) == pytest.approx(timed / 20, rel=0.03)  # each kernel's time is right
    assert s["categories"].get("rlscope", 0) > 0  # the rotations show as rlscope's own time


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("backend", ["kineto", "cupti"])
def test_gpu_ground_truth(tmp_path, backend, in_fresh_process):
    torch = pytest.importorskip("torch")
    if backend == "cupti":
        _cupti_or_skip()
        if in_fresh_process():
            return
    torch.cuda.init()
    cycles = _sleep_cycles_for(torch, 0.005)
    n_copy = 64 * 1024 * 1024
    src = torch.empty(n_copy // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty(n_copy // 4, dtype=torch.float32, pin_memory=True)
    dst.copy_(src)  # warm-up: the first copy into fresh pinned memory pays one-time driver costs
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
    # windows off: this checks the GPU collector against known kernels; a run this short would put
    # some scopes in light windows, whose GPU work is scaled from the full ones (tests/test_gpu_windows.py)
    with rlscope.profile(tmp_path / "t", backend=False, gpu=backend, nvml_hz=20, windows=False):
        with rlscope.scope("gpu_sleep"):
            ev[0].record()
            for _ in range(10):
                torch.cuda._sleep(cycles)
            ev[1].record()
            torch.cuda.synchronize()
        with rlscope.scope("cpu_busy"):
            busy_wait(0.05)
        with rlscope.scope("async_launch"):  # the scope closes long before its kernel ends
            ev[2].record()
            torch.cuda._sleep(cycles * 4)
            ev[3].record()
        with rlscope.scope("wait"):
            torch.cuda.synchronize()
        with rlscope.scope("copy"):
            ev[4].record()
            dst.copy_(src, non_blocking=True)
            ev[5].record()
            torch.cuda.synchronize()
    sleep_s = ev[0].elapsed_time(ev[1]) / 1e3
    async_s = ev[2].elapsed_time(ev[3]) / 1e3
    copy_s = ev[4].elapsed_time(ev[5]) / 1e3
    s = summary_of(tmp_path / "t")
    ops = s["operations"]
    assert ops["gpu_sleep"]["gpu_categories"]["gpu_kernel"] == pytest.approx(sleep_s, rel=0.03)
    assert ops["async_launch"]["gpu_categories"]["gpu_kernel"] == pytest.approx(async_s, rel=0.03)
    assert "gpu_kernel" not in ops["wait"]["gpu_categories"]
    assert ops["async_launch"]["total_s"] < 0.5 * async_s  # the CPU side was short
    assert ops["cpu_busy"]["exclusive_s"] == pytest.approx(0.05, rel=0.05)
    assert ops["copy"]["gpu_categories"]["gpu_memcpy"] == pytest.approx(copy_s, rel=0.10)
    gpu = load_trace(tmp_path / "t").processes[0].gpu
    copies = [r for r in gpu.to_pylist() if r["category"] == 5]
    assert len(copies) == 1
    if backend == "cupti":  # Kineto's events do not carry the byte count
        assert copies[0]["bytes"] == n_copy
    # CUDA API time shows up as its own CPU category, inside the operations that made the calls
    assert ops["gpu_sleep"]["categories"].get("cuda_api", 0) > 0
    assert s["gpu_bound_s"] >= sleep_s + async_s
    assert s["gpu"]["nvml_samples"] > 0


@pytest.mark.parametrize("backend", ["kineto", "cupti"])
def test_kernels_from_other_libraries_are_seen(tmp_path, backend, in_fresh_process):
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    if backend == "cupti":
        _cupti_or_skip()
        if in_fresh_process():
            return
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)

    x = torch.zeros(4096, device="cuda")
    add_one[(4,)](x, 4096, BLOCK=1024)  # compile outside the session
    torch.cuda.synchronize()
    # windows off: one scope, and a session starts in a light window (no GPU tracing)
    with (
        rlscope.profile(tmp_path / "t", backend=False, gpu=backend, windows=False),
        rlscope.scope("triton_op"),
    ):
        add_one[(4,)](x, 4096, BLOCK=1024)
        torch.cuda.synchronize()
    s = summary_of(tmp_path / "t")
    assert s["operations"]["triton_op"]["gpu_categories"]["gpu_kernel"] > 0
    assert float(x[0]) == 2.0


@pytest.mark.parametrize("queries", ["skipped", "kept"])
def test_query_api_records_are_skipped_and_every_kernel_keeps_its_launch(tmp_path, queries, in_fresh_process):
    """The native consumer skips the API records of pure queries (cudaGetDevice, ...): fewer records
    per launch, and still every kernel joined to the call that launched it, in its operation."""
    torch = pytest.importorskip("torch")
    from rlscope.collectors.cupti_native import NativeCuptiCollector

    if in_fresh_process():
        return
    os.environ["RLSCOPE_CUPTI_QUERIES"] = "1" if queries == "kept" else "0"
    x = torch.ones(16, device="cuda")
    torch.add(x, 1)
    torch.cuda.synchronize()
    sess = rlscope.profile(tmp_path / "t", backend=False, gpu="cupti", windows=False)
    with sess, rlscope.scope("adds"):
        for _ in range(200):
            torch.add(x, 1)
        torch.cuda.synchronize()
    if not any(isinstance(c, NativeCuptiCollector) for c in sess._collectors):
        pytest.skip("the native CUPTI consumer could not be built here")
    proc = load_trace(tmp_path / "t").processes[0]
    rows = proc.gpu.to_pylist()
    api = [proc.name(r["name"]) for r in rows if r["category"] == 3]
    skipped = int(proc.gpu.schema.metadata[b"rlscope.cupti_skipped_apis"])
    assert any(n.startswith("cudaLaunchKernel") for n in api), sorted(set(api))[:20]
    if queries == "kept":
        assert skipped == 0
    elif skipped:  # this CUPTI can skip per API (CUDA 12.6+): no query records at all
        queried = ("cudaGetDevice_", "cudaGetLastError_", "cuCtxGetCurrent")
        assert not [n for n in api if n.startswith(queried)]
    print(f"{queries}: {len(api) / 200:.2f} API records per launch, {skipped} API ids skipped")
    s = summary_of(tmp_path / "t")
    assert s["gpu"].get("records_without_launch", 0) == 0
    assert s["operations"]["adds"]["gpu_categories"]["gpu_kernel"] > 0
    assert sum(1 for r in rows if r["category"] == 4) >= 200
