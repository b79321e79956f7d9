"""GPU memory, occupancy and share-check on a real GPU (``pytest -m gpu``; skipped without CUDA)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.trace import schema as S

pytestmark = pytest.mark.gpu
MIB8 = 8 << 20  # a multiple of the allocator's 2 MiB rounding: the block is exactly this size


def test_device_limits_match_torch():
    import torch

    from rlscope.collectors.device_limits import query_devices

    d = query_devices()[0]
    props = torch.cuda.get_device_properties(0)
    assert d["sm_count"] == props.multi_processor_count
    assert d["max_threads_per_sm"] == props.max_threads_per_multi_processor
    assert d["regs_per_sm"] == props.regs_per_multiprocessor
    assert d["warp_size"] == props.warp_size
    assert d["total_memory"] == props.total_memory


@pytest.mark.parametrize("source", ["native", "torch-history"])
def test_scope_that_frees_is_ephemeral_one_that_keeps_is_persistent(tmp_path, monkeypatch, source):
    import pyarrow as pa
    import torch

    from rlscope.collectors import gpu_memory

    if source == "native":
        try:
            gpu_memory.load_native(torch)
        except gpu_memory.NativeMemoryUnavailable as e:
            pytest.skip(str(e))
    else:
        monkeypatch.setenv("RLSCOPE_GPU_MEMORY", "history")
    torch.cuda.init()
    torch.empty(1, device="cuda")  # context and allocator up before the session
    kept = []
    with rlscope.profile(tmp_path / "t", windows=False):
        with rlscope.scope("ephemeral"):
            time.sleep(0.005)  # margins: the allocator stamps entries with an approximate clock
            x = torch.empty(MIB8, dtype=torch.uint8, device="cuda")
            del x
            time.sleep(0.005)
        with rlscope.scope("persistent"):
            time.sleep(0.005)
            kept.append(torch.empty(MIB8, dtype=torch.uint8, device="cuda"))
            time.sleep(0.005)
    ops = analyze(tmp_path / "t", correct=False).summary["sharing"]["memory"]["operations"]
    assert (ops["ephemeral"]["ephemeral_bytes"], ops["ephemeral"]["persistent_bytes"]) == (MIB8, 0)
    assert ops["ephemeral"]["peak_bytes"] == MIB8
    assert (ops["persistent"]["ephemeral_bytes"], ops["persistent"]["persistent_bytes"]) == (0, MIB8)
    (path,) = (tmp_path / "t").rglob(S.MEMORY_FILE)
    with pa.OSFile(str(path)) as f:
        table = pa.ipc.open_stream(f).read_all()
    assert table.schema.metadata[b"rlscope.collector"].decode() == source
    if source == "native":  # stamped with the allocating thread
        assert set(table["thread"].to_pylist()) - {-1} == {threading.get_native_id()}


def test_native_memory_stamps_fall_inside_their_calls(tmp_path):
    """The native tracker keeps torch's approximate clock and converts it at each drain: every
    allocation's stamp must lie within the call that made it, on the events' clock (to 2 us),
    across several drains and half a second of the clocks' drift."""
    import numpy as np
    import pyarrow as pa
    import torch

    from rlscope.collectors import gpu_memory

    try:
        gpu_memory.load_native(torch)
    except gpu_memory.NativeMemoryUnavailable as e:
        pytest.skip(str(e))
    torch.cuda.init()
    torch.empty(1, device="cuda")
    calls = []
    with rlscope.profile(tmp_path / "t", windows=False, flush_interval=0.1):
        for i in range(100):
            t0 = time.perf_counter_ns()
            x = torch.empty(MIB8 + (i + 1) * (2 << 20), dtype=torch.uint8, device="cuda")
            t1 = time.perf_counter_ns()
            calls.append((t0, t1, x.untyped_storage().nbytes()))
            del x
            time.sleep(0.005)
    (path,) = (tmp_path / "t").rglob(S.MEMORY_FILE)
    with pa.OSFile(str(path)) as f:
        t = pa.ipc.open_stream(f).read_all().to_pydict()
    allocs = {
        size: ts
        for ts, action, size in zip(t["ts_ns"], t["action"], t["bytes"], strict=True)
        if action == S.MEMORY_ALLOC
    }
    off = np.array(
        [
            allocs[size] - t0 if allocs[size] < t0 else max(0, allocs[size] - t1)
            for t0, t1, size in calls
            if size in allocs
        ]
    )
    assert len(off) == len(calls), f"{len(off)} of {len(calls)} allocations recorded"
    assert np.abs(off).max() <= 2_000, f"stamps outside their calls by up to {np.abs(off).max()} ns"


def test_memory_recorded_when_cuda_starts_inside_the_session(tmp_path):
    """The usual `rlscope run` case: torch imported and CUDA initialized after the session starts."""
    import subprocess

    prog = (
        "import sys, rlscope\n"
        "with rlscope.profile(sys.argv[1], windows=False):\n"
        "    import torch\n"
        "    with rlscope.scope('alloc'):\n"
        "        x = torch.empty(8 << 20, dtype=torch.uint8, device='cuda')\n"
        "        del x\n"
    )
    r = subprocess.run([sys.executable, "-c", prog, str(tmp_path / "t")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ops = analyze(tmp_path / "t", correct=False).summary["sharing"]["memory"]["operations"]
    assert ops["alloc"]["ephemeral_bytes"] == MIB8, (ops, r.stderr[-2000:])


def test_backward_allocations_on_autograd_threads_go_to_the_callers_operation(tmp_path):
    """On CUDA, backward runs on autograd's device thread; its allocations are backprop's."""
    import torch

    torch.cuda.init()
    net = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1)).cuda()
    x = torch.randn(4096, 512, device="cuda")
    before = torch.cuda.memory_allocated()  # the allocator's state at the start: unannotated
    with rlscope.profile(tmp_path / "t", windows=False):
        with rlscope.scope("forward"):
            loss = net(x).square().mean()
        with rlscope.scope("backprop"):
            loss.backward()
            torch.cuda.synchronize()
    ops = analyze(tmp_path / "t", correct=False).summary["sharing"]["memory"]["operations"]
    # the gradients of the weights (persistent) and the activations' gradients (ephemeral)
    weights = sum(p.numel() * 4 for p in net.parameters())
    assert ops["backprop"]["persistent_bytes"] >= weights
    assert ops["backprop"]["ephemeral_bytes"] >= 4096 * 2048 * 4
    assert ops["[unannotated]"]["allocated_bytes"] <= before  # nothing allocated inside fell outside


def _gpu_rows(trace_dir) -> list[dict]:
    """The GPU file's rows (category, times, correlation, thread, name id), for a failure message."""
    import pyarrow as pa

    out = []
    for path in trace_dir.rglob(S.GPU_FILE):
        with pa.OSFile(str(path)) as f:
            t = pa.ipc.open_stream(f).read_all()
        cols = ["category", "start_ns", "end_ns", "correlation", "thread", "name"]
        out += t.select(cols).to_pylist()
    return out


def test_kernel_occupancy_matches_the_driver(tmp_path, in_fresh_process):
    cupy = pytest.importorskip("cupy")
    if in_fresh_process():  # after Kineto in the same process its kernel lost its launch (H100, H200)
        return
    from rlscope.analysis.occupancy import DeviceLimits, theoretical_occupancy
    from rlscope.collectors.device_limits import query_devices

    src = r"""
    extern "C" __global__ void shuffle(float* x) {
        extern __shared__ float s[];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        s[threadIdx.x] = x[i];
        __syncthreads();
        x[i] = s[(threadIdx.x + 1) % blockDim.x] * 2.0f;
    }
    """
    kern = cupy.RawKernel(src, "shuffle")
    threads, blocks, smem = 256, 264, 40 * 1024
    x = cupy.random.rand(threads * blocks, dtype=cupy.float32)
    kern((1,), (threads,), (x,), shared_mem=smem)  # compile and load outside the trace
    cupy.cuda.Device().synchronize()
    with rlscope.profile(tmp_path / "t", windows=False), rlscope.scope("launch"):
        kern((blocks,), (threads,), (x,), shared_mem=smem)
        cupy.cuda.Device().synchronize()
    occ = analyze(tmp_path / "t", correct=False).summary["sharing"]["occupancy"]
    # the kernel attributed to its launching scope (the GPU rows are the evidence if it fails)
    assert "launch" in occ.get("operations", {}), (occ, _gpu_rows(tmp_path / "t"))
    k = next(k for k in occ["operations"]["launch"]["kernels"] if k["kernel"] == "shuffle")
    regs = kern.attributes["num_regs"]
    assert (k["threads"], k["blocks"], k["smem"]) == (threads, blocks, smem)
    # CUPTI reports the registers allocated per thread: the function's count rounded up to 8 (seen on
    # the H100: 16 for num_regs 12), the same per-warp allocation of 256 the calculator rounds to
    assert k["registers"] == -(-regs // 8) * 8
    driver = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kern.kernel.ptr, threads, smem)
    limits = DeviceLimits.from_dict(query_devices()[0])
    assert theoretical_occupancy(threads, regs, smem, limits).blocks_per_sm == driver
    assert k["blocks_per_sm"] == driver
    assert k["limiter"] == "shared_memory"  # 40 KB + 1 KB reserved: 5 blocks of 228 KB


def test_share_check_two_copies(tmp_path):
    from rlscope.cli import share_check

    prog = (
        "import torch, time\n"
        "a = torch.randn(512, 512, device='cuda')\n"
        "t = time.perf_counter()\n"
        "while time.perf_counter() - t < 2:\n"
        "    (a @ a).sum().item()\n"
    )
    script = tmp_path / "prog.py"
    script.write_text(prog)
    res = share_check.check([sys.executable, str(script)], (2,), None, tmp_path, 120, mps=False)
    ks = [r["k"] for r in res["runs"]]
    assert ks == [1, 2]
    # the context switch's cost was probed on this GPU
    probe = res["context_switch_probe"]
    assert probe is not None and probe["context_switch_us"] >= 0, probe
    assert probe["alone_iteration_us"] > probe["kernel_us"] > 0
    for r in res["runs"]:
        assert r["exit_codes"] == [0] * r["k"]
        assert r["measured_slowdown"] > 0.5
        assert r.get("measured_memory_bytes", 1) > 0
    print(share_check.check_text(res))


def test_memory_recorded_in_windows_counts_every_call(tmp_path, monkeypatch):
    """RLSCOPE_GPU_MEMORY=windows: the history is on in full windows only. Each ``step`` allocates
    and frees exactly 8 MiB, each ``keep`` keeps 8 MiB: scaled from the recorded calls, the figures
    are exact for all calls, and the trace holds the live state of each recording window."""
    import pyarrow as pa
    import torch

    monkeypatch.setenv("RLSCOPE_GPU_MEMORY", "windows")
    torch.cuda.init()
    torch.empty(1, device="cuda")
    kept = []
    with rlscope.profile(tmp_path / "t", window_s=0.01):
        for i in range(200):
            with rlscope.scope("step"):
                x = torch.empty(MIB8, dtype=torch.uint8, device="cuda")
                x.fill_(1)
                del x
                time.sleep(0.0005)
            if i % 20 == 0:
                with rlscope.scope("keep"):
                    kept.append(torch.empty(MIB8, dtype=torch.uint8, device="cuda"))
    mem = analyze(tmp_path / "t", correct=False).summary["sharing"]["memory"]
    step, proc = mem["operations"]["step"], mem["processes"][0]
    assert 0 < step["recorded_calls"] < step["calls"] == 200
    assert step["ephemeral_bytes"] == step["allocated_bytes"] == 200 * MIB8
    assert step["peak_bytes"] == MIB8 and 0 < proc["recorded_share"] < 1
    (path,) = (tmp_path / "t").rglob(S.MEMORY_FILE)
    with pa.OSFile(str(path)) as f:
        table = pa.ipc.open_stream(f).read_all()
    assert table.schema.metadata[b"rlscope.collector"].decode() == "torch-windows"
    assert S.MEMORY_LIVE in set(table["action"].to_pylist())


def test_peak_between_recording_windows_comes_from_the_allocator(tmp_path, monkeypatch):
    """RLSCOPE_GPU_MEMORY=windows: a 64 MiB block allocated and freed in a light window is never
    recorded, yet the process's peak is exactly the allocator's own high-water mark over the run
    (ground truth: torch.cuda.max_memory_allocated after a reset before the session)."""
    import torch

    monkeypatch.setenv("RLSCOPE_GPU_MEMORY", "windows")
    torch.cuda.init()
    base = torch.empty(MIB8, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    spiked = False
    with rlscope.profile(tmp_path / "t", window_s=0.01):
        sess = rlscope.annotate._active
        for _ in range(400):
            with rlscope.scope("step"):
                x = torch.empty(MIB8 // 8, dtype=torch.uint8, device="cuda")
                time.sleep(0.0005)
                del x
            if not spiked and sess.windows.mode == S.WINDOW_LIGHT:
                with rlscope.scope("spike"):
                    y = torch.empty(8 * MIB8, dtype=torch.uint8, device="cuda")
                    del y
                spiked = True
    truth = torch.cuda.max_memory_allocated()
    assert spiked
    proc = analyze(tmp_path / "t", correct=False).summary["sharing"]["memory"]["processes"][0]
    assert 0 < proc["recorded_share"] < 1
    assert proc["peak_source"] == "allocator"
    assert proc["peak_bytes"] == truth >= base.numel() + 8 * MIB8
    assert proc["reserved_peak_bytes"] == torch.cuda.max_memory_reserved()


def test_every_event_recorded_matches_the_allocators_peak(tmp_path):
    """Without windows (the native tracker, every event): the recorded curve's own peak is the
    allocator's high-water mark over the run, to the byte."""
    import torch

    torch.cuda.init()
    keep = torch.empty(MIB8, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    with rlscope.profile(tmp_path / "t", windows=False):
        for i in range(20):
            with rlscope.scope("step"):
                xs = [torch.empty((i + 1) * 4096, dtype=torch.uint8, device="cuda") for _ in range(3)]
                del xs
    truth = torch.cuda.max_memory_allocated()
    proc = analyze(tmp_path / "t", correct=False).summary["sharing"]["memory"]["processes"][0]
    assert proc["peak_bytes"] == truth > keep.numel()
    assert proc["peak_source"] == "recorded"
    assert proc["allocator"]["0"]["peak_bytes"] == truth
