"""GPU memory, occupancy, kernel lengths and the co-location estimate on synthetic traces (no GPU)."""

from __future__ import annotations

import json
import os
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import sharing
from rlscope.analysis.occupancy import DeviceLimits, theoretical_occupancy
from rlscope.collectors import gpu_memory
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace

H100 = DeviceLimits()  # 2048 threads, 32 blocks, 64K regs, 228 KB smem, 1 KB reserved per block
DEVICES = {
    "host_cpus": 16,
    "devices": [{"index": 0, "name": "NVIDIA H100", "total_memory": 80 << 30, "sm_count": 132}],
}


def write_with_meta(path, columns_doc, rows, meta=None) -> None:
    schema = S.columns_schema(columns_doc, "native", {S.DEVICES_METADATA_KEY: json.dumps(meta or DEVICES)})
    cols = list(zip(*rows, strict=True))
    table = pa.table(
        {f.name: pa.array(v, type=f.type) for f, v in zip(schema, cols, strict=True)}, schema=schema
    )
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(table)


# -- occupancy: hand-computed with the calculator's rules (cuda_occupancy.h), H100 (sm_90) --------
@pytest.mark.parametrize(
    ("threads", "regs", "smem", "blocks", "occ", "limiter"),
    [
        (256, 32, 0, 8, 1.0, "warps+registers"),  # 8 warps/block: 64/8 warps; 16 warps/partition
        (256, 64, 0, 4, 0.5, "registers"),  # 2048 regs/warp: 8 warps per 16K-register partition
        (1024, 0, 0, 2, 1.0, "warps"),  # 32 warps/block
        (128, 255, 0, 2, 0.125, "registers"),  # 8192 regs/warp (rounded up to 256): 2 warps/partition
        (128, 32, 48 * 1024, 4, 0.25, "shared_memory"),  # 49152 + 1024 reserved: 233472 // 50176 = 4
        (32, 16, 0, 32, 0.5, "blocks"),  # 1 warp/block, 32 blocks/SM at most
        (96, 40, 0, 16, 0.75, "registers"),  # 1280 regs/warp: 12 warps/partition x 4 = 48, // 3 warps
    ],
)
def test_occupancy_calculator_hand_values(threads, regs, smem, blocks, occ, limiter):
    o = theoretical_occupancy(threads, regs, smem, H100)
    assert o.blocks_per_sm == blocks
    assert o.occupancy == pytest.approx(occ)
    assert o.limiter == limiter


def test_occupancy_register_hardware_check():
    # 1024 threads x 255 regs: 8192 regs/warp x 32 warps > 65536 registers per block: cannot launch
    assert theoretical_occupancy(1024, 255, 0, H100).blocks_per_sm == 0


# -- a synthetic run: two operations, their kernels and allocations --------------------------------
def _synthetic(fake_session, with_resources=True, with_memory=True, mem_thread=-1, lost=()):
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        with rlscope.scope("a"):
            clock.advance(100_000)
        with rlscope.phase("training"), rlscope.scope("b"):
            clock.advance(100_000)
        clock.advance(100_000)
    thread = sess.thread_states()[0].thread
    # (api start, kernel start, duration, stream, threads, grid, regs, smem)
    kernels = [
        (t0 + 1_000, t0 + 2_000, 1_000, 7, 256, 1000, 64, 0),
        (t0 + 2_000, t0 + 5_000, 2_000, 7, 256, 1000, 64, 0),
        (t0 + 3_000, t0 + 9_000, 3_000, 7, 256, 1000, 64, 0),
        (t0 + 4_000, t0 + 20_000, 10_000, 7, 256, 1000, 64, 0),
        (t0 + 101_000, t0 + 102_000, 500, 8, 32, 1, 16, 0),
        (t0 + 102_000, t0 + 104_000, 700, 8, 32, 1, 16, 0),
    ]
    rows = []
    for i, (api, ks, d, stream, thr, grid, regs, smem) in enumerate(kernels):
        extra = (0,) * 9
        rows.append((C.CUDA_API, api, api + 500, i + 1, thread, -1, -1, 0, 0, *extra))
        res = (grid, 1, 1, thr, 1, 1, regs, smem, 0)
        corr = 1000 + i if i in lost else i + 1  # lost: its launching call's id is not in the trace
        rows.append((C.GPU_KERNEL, ks, ks + d, corr, -1, 0, stream, 0, 0, *res))
    doc = S.GPU_COLUMNS_DOC + (S.GPU_KERNEL_COLUMNS_DOC if with_resources else [])
    if not with_resources:
        rows = [r[: len(S.GPU_COLUMNS_DOC)] for r in rows]
    write_with_meta(sess.process_dir / S.GPU_FILE, doc, rows)
    if with_memory:
        M = S.MEMORY_ALLOC, S.MEMORY_FREE
        mem = [
            (t0 + 5, -1, 0, S.MEMORY_SEGMENT_ALLOC, 0, 2 << 20, 0),
            (t0 + 10_000, -1, 0, M[0], 1, 100, 0),  # a: freed inside a -> ephemeral
            (t0 + 20_000, -1, 0, M[1], 1, 100, 0),
            (t0 + 30_000, -1, 0, M[0], 2, 50, 0),  # a: kept -> persistent
            (t0 + 110_000, -1, 0, M[0], 3, 200, 0),  # b: freed after b -> persistent for b
            (t0 + 120_000, -1, 0, M[0], 1, 30, 0),  # b: address reused, freed inside b
            (t0 + 150_000, -1, 0, M[1], 1, 30, 0),
            (t0 + 250_000, -1, 0, M[1], 3, 200, 0),
            (t0 + 260_000, -1, 0, M[0], 4, 10, 0),  # in no operation
            (t0 + 270_000, -1, 0, M[1], 99, 64, 0),  # free of a block never seen: ignored
        ]
        mem = [(r[0], mem_thread if r[1] == -1 else r[1], *r[2:]) for r in mem]
        write_with_meta(sess.process_dir / S.MEMORY_FILE, S.MEMORY_COLUMNS_DOC, mem)
    return sess, kernels


def test_memory_attribution_exact(fake_session):
    sess, _ = _synthetic(fake_session)
    sec = sharing.sharing_section(load_trace(sess.trace_dir))
    mem = sec["memory"]
    ops = mem["operations"]
    assert ops["a"] == {
        "calls": 1,
        "allocations": 2,
        "allocated_bytes": 150,
        "ephemeral_bytes": 100,
        "persistent_bytes": 50,
        "peak_bytes": 100,
    }
    assert ops["b"] == {
        "calls": 1,
        "allocations": 2,
        "allocated_bytes": 230,
        "ephemeral_bytes": 30,
        "persistent_bytes": 200,
        "peak_bytes": 230,  # from 50 at its start to 280
    }
    assert ops["[unannotated]"]["persistent_bytes"] == 10
    p = mem["processes"][0]
    assert p["peak_bytes"] == 280
    assert p["floor_bytes"] == 50  # least over the second half (after b's buffer is freed)
    assert p["cyclic_peak_bytes"] == 250
    assert p["reserved_peak_bytes"] == 2 << 20
    assert p["fragmentation"] == pytest.approx(1 - 280 / (2 << 20))
    assert mem["phases"]["[no phase]"]["operations"]["a"]["ephemeral_bytes"] == 100
    assert mem["phases"]["training"]["operations"] == {"b": ops["b"]}
    assert max(mem["curve"]["allocated_max"]) == 280


def test_memory_on_a_thread_without_operations_goes_to_the_main_thread(fake_session, tmp_path):
    """The native tracker stamps the allocating thread: autograd's device threads open no operation,
    so their allocations belong to the main thread's, exactly as thread -1 rows (history) do."""
    ref = sharing.sharing_section(load_trace(_synthetic(fake_session)[0].trace_dir))["memory"]
    sess, _ = _synthetic(fake_session, mem_thread=4_242_424)
    got = sharing.sharing_section(load_trace(sess.trace_dir))["memory"]
    assert got["operations"] == ref["operations"] and got["phases"] == ref["phases"]


def test_native_memory_drain_into_batches(monkeypatch):
    """The native tracker's queue becomes record batches of MEMORY_COLUMNS; events stamped before
    the session started (a previous session in this process) are dropped; a drop count warns."""
    import collections
    import ctypes

    queued = [  # ts, tid, device, action, addr, bytes, stream
        (50, 7, 0, S.MEMORY_ALLOC, 1, 8, 0),
        (150, 7, 0, S.MEMORY_ALLOC, 2, 512, 3),
        (160, 9, 1, S.MEMORY_FREE, 2, 512, 3),
    ]

    class FakeLib:
        enabled = 1

        def mn_pending(self):
            return len(queued)

        def mn_drops(self):
            return 5

        def mn_enable(self, on):
            self.enabled = on

        def mn_drain(self, *args):
            *ptrs, n = args
            for j, ptr in enumerate(ptrs):
                col = np.ctypeslib.as_array(ptr, shape=(n,))
                col[:] = [r[j] for r in queued[:n]]
            k = len(queued)
            queued.clear()
            return ctypes.c_size_t(k).value

    from types import SimpleNamespace

    cuda = SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: 1,
        max_memory_allocated=lambda dev: 4096,
        max_memory_reserved=lambda dev: 8192,
    )
    rec = gpu_memory.MemoryRecorder(session=SimpleNamespace(clock=lambda: 999))
    rec.torch, rec._t0, rec._drops0 = SimpleNamespace(cuda=cuda), 100, 2
    rec.native = rec._lib = FakeLib()
    rec._schema = S.columns_schema(S.MEMORY_COLUMNS_DOC, "native")
    rec.rows = collections.deque()
    warned = []
    monkeypatch.setattr(gpu_memory, "warn_once", warned.append)
    lib = rec.native
    rec.flush()
    rec.flush()  # nothing queued: no batch
    (batch,) = rec.rows
    assert batch.schema == rec._schema
    assert batch.to_pydict() == {
        "ts_ns": [150, 160],
        "thread": [7, 9],
        "device": [0, 1],
        "action": [S.MEMORY_ALLOC, S.MEMORY_FREE],
        "addr": [2, 2],
        "bytes": [512, 512],
        "stream": [3, 3],
    }
    rec.stop()
    assert lib.enabled == 0 and rec.native is None
    assert warned == ["the native memory tracker dropped 3 allocator event(s) (queue full)"]
    # the allocator's high-water marks as recording stopped, a batch like the drained events
    assert rec.rows[-1].to_pydict() == {
        "ts_ns": [999, 999],
        "thread": [-1, -1],
        "device": [0, 0],
        "action": [S.MEMORY_PEAK, S.MEMORY_SEGMENT_PEAK],
        "addr": [-1, -1],
        "bytes": [4096, 8192],
        "stream": [0, 0],
    }


def test_native_memory_attaches_at_cuda_init(monkeypatch):
    """Attached at torch's import the tracker would reach no device (the allocator's per-device state
    comes with CUDA's lazy init), and initializing CUDA there would change the job: it is queued."""
    import collections

    queued, started = [], []

    class Lib:
        def mn_drops(self):
            return 0

        def mn_now(self):
            return 123

        def mn_start(self):
            started.append(True)
            return 0

        def mn_pending(self):
            return 0

    class Cuda:
        memory = None

        @staticmethod
        def is_available():
            return True

        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def _lazy_call(fn):
            queued.append(fn)

        @staticmethod
        def device_count():
            return 1

        @staticmethod
        def max_memory_allocated(dev):
            raise AssertionError("counters read before CUDA's init")

        max_memory_reserved = max_memory_allocated

    class Torch:
        cuda = Cuda

    class Writer:
        def add_stream(self, name, schema):
            return collections.deque()

        def before_flush(self, hook):
            pass

    class Session:
        writer = Writer()

        def __init__(self):
            self.options = {"gpu": "auto"}

        def clock(self):
            return 77

    sess = Session()
    monkeypatch.setattr(rlscope.annotate, "_active", sess)
    monkeypatch.setattr(gpu_memory, "load_native", lambda torch: Lib())
    monkeypatch.setattr("rlscope.collectors.device_limits.devices_metadata", lambda: {})
    monkeypatch.setattr(rlscope.annotate, "category_enter", lambda *a: None)
    monkeypatch.setattr(rlscope.annotate, "category_exit", lambda *a: None)
    rec = gpu_memory.MemoryRecorder(sess)
    rec._begin(Torch())
    assert not rec.failed and queued and not started and rec.native is None
    # the start's high-water marks: 0 before CUDA's init (nothing allocated), one batch
    (marks,) = rec.rows
    assert marks.column("bytes").to_pylist() == [0, 0]
    assert marks.column("action").to_pylist() == [S.MEMORY_PEAK, S.MEMORY_SEGMENT_PEAK]
    rec.flush()  # before CUDA's init: nothing to drain, and never torch's history
    queued[0]()  # CUDA initializes
    assert started == [True] and rec.native is not None and rec._t0 == 123
    rec.flush()
    assert not rec.failed


def test_native_memory_needs_cuda_headers(monkeypatch):
    monkeypatch.setattr(gpu_memory, "cuda_include_dirs", lambda: [])
    monkeypatch.setattr(gpu_memory, "_native", None)
    with pytest.raises(gpu_memory.NativeMemoryUnavailable, match="no CUDA headers"):
        gpu_memory.load_native(None)


def test_kernel_lengths_match_numpy(fake_session):
    sess, kernels = _synthetic(fake_session)
    kl = sharing.sharing_section(load_trace(sess.trace_dir))["kernel_lengths"]
    a = np.array([k[2] for k in kernels[:4]]) / 1e3
    got = kl["operations"]["a"]["kernels"]
    for p in (50, 90, 99):
        assert got[f"p{p}_us"] == pytest.approx(np.percentile(a, p))
    assert got["max_us"] == pytest.approx(10.0)
    assert got["mean_residual_us"] == pytest.approx((a**2).sum() / (2 * a.sum()))
    assert sum(got["histogram"]) == 4
    # gaps on stream 7: 5000-3000, 9000-7000, 20000-12000 ns; on stream 8: 104000-102500
    gaps = kl["operations"]["a"]["gaps"]
    assert gaps["count"] == 3
    assert gaps["p50_us"] == pytest.approx(np.percentile([2.0, 2.0, 8.0], 50))
    assert kl["operations"]["b"]["gaps"]["max_us"] == pytest.approx(1.5)
    over_10us = next(s for s in kl["slicing"] if s["target_us"] == 10.0)
    assert over_10us["kernels"] == 0  # 10 us is not longer than 10 us


def test_occupancy_table_and_low_fill(fake_session):
    sess, _ = _synthetic(fake_session)
    occ = sharing.sharing_section(load_trace(sess.trace_dir))["occupancy"]
    a = occ["operations"]["a"]["kernels"][0]
    assert (a["occupancy"], a["limiter"], a["blocks_per_sm"]) == (0.5, "registers", 4)
    assert a["fill"] == pytest.approx(528 * 8 / (132 * 64))  # 4 blocks x 132 SMs resident of 1000
    b = occ["operations"]["b"]["kernels"][0]
    assert (b["occupancy"], b["limiter"]) == (0.5, "blocks")
    assert occ["operations"]["b"]["low_fill_share"] == 1.0
    assert occ["low_fill_share"] == pytest.approx(1.2 / 17.2)


def test_old_trace_without_resources_or_memory_degrades(fake_session):
    sess, _ = _synthetic(fake_session, with_resources=False, with_memory=False)
    trace = load_trace(sess.trace_dir)
    assert "grid_x" not in trace.processes[0].gpu.column_names
    sec = sharing.sharing_section(trace)
    assert list(sec["occupancy"]) == ["note"]
    assert list(sec["memory"]) == ["note"]
    assert sec["kernel_lengths"]["operations"]["a"]["kernels"]["count"] == 4


def test_cpu_only_trace_is_one_note(fake_session):
    sess, clock = fake_session
    with sess, rlscope.scope("x"):
        clock.advance(1000)
    s = dict(rlscope.analysis.analyze(sess.trace_dir, correct=False).summary)
    assert s["sharing"] == {"note": sharing.NO_GPU_NOTE}
    from rlscope.viz.sharing import sharing_html

    assert sharing_html(s, {}).count("<p") == 1


def test_estimate_model_numbers():
    m = {
        "gpu_busy_fraction": 0.05,
        "busy_periods_per_s": 1000.0,
        "busy_period_residual_us": 20.0,
        "host_cpus": 16,
        "cpu_cores_per_copy": 1.0,
        "per_copy_bytes": 1 << 30,
        "context_bytes": 500 << 20,
        "floor_bytes": 100 << 20,
        "cyclic_peak_bytes": 300 << 20,
        "device_memory_bytes": 80 << 30,
    }
    m["busy_period_mean_us"] = 50.0  # f = 1000/s x 50 us
    p2 = sharing.predict(m, 2)
    # one other copy busy 5% of the time, 20 us residual, 1000 busy periods per second: +0.1%
    assert p2["slowdown_by"]["gpu_time_slicing"] == pytest.approx(1 + 1000 * 0.05 * 20e-6, rel=2e-4)
    assert p2["memory_bytes"] == 2 << 30
    assert p2["memory_shared_allocator_bytes"] == 2 * (600 << 20) + (200 << 20)
    p32 = sharing.predict(m, 32)
    assert p32["slowdown_by"]["cpu"] == pytest.approx(2.0)
    assert p32["binds"] == "cpu"
    est = sharing.estimate(m)
    assert est["k_max_memory"] == 80
    assert est["k_fit"] == 20  # 20 copies x 1 core / 16 CPUs = 1.25
    assert est["binds"] == "cpu"


def test_memory_entries_to_rows_and_initial_state():
    snap = {
        "device_traces": [
            [
                {"action": "segment_alloc", "addr": 4096, "size": 2 << 20, "stream": 0, "time_us": 1_000_000},
                {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1_000_001},
                {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0, "time_us": 1_000_003},
                {"action": "free_requested", "addr": 4096, "size": 512, "stream": 0, "time_us": 1_000_002},
            ]
        ],
        "segments": [
            {
                "device": 0,
                "address": 8192,
                "total_size": 1024,
                "stream": 0,
                "blocks": [{"size": 512, "state": "active_allocated"}, {"size": 512, "state": "inactive"}],
            }
        ],
    }
    now_unix, now_trace = 1_000_010_000, 10_000  # unix ns 1.00001 s <-> trace 10 us
    rows = gpu_memory.entries_to_rows(snap, now_unix, now_trace)
    assert [r[3] for r in rows] == [S.MEMORY_SEGMENT_ALLOC, S.MEMORY_ALLOC, S.MEMORY_FREE]
    assert [r[0] for r in rows] == [0, 1000, 2000]
    init = gpu_memory.initial_rows(snap, 5)
    assert init == [
        (5, -1, 0, S.MEMORY_SEGMENT_ALLOC, 8192, 1024, 0),
        (5, -1, 0, S.MEMORY_ALLOC, 8192, 512, 0),
    ]


def test_memory_recorder_swallows_errors_with_one_warning(capsys):
    class BrokenMemory:
        def _snapshot(self):
            raise RuntimeError("allocator gone")

        def _record_memory_history(self, **kw):
            pass

    class FakeTorch:
        class cuda:
            memory = BrokenMemory()

    rec = gpu_memory.MemoryRecorder(session=None)
    rec.torch = FakeTorch()
    rec.flush()
    rec.flush()
    rec.stop()
    err = capsys.readouterr().err
    assert err.count("rlscope: warning: GPU memory recording off") == 1


def test_share_cli_and_share_check_on_cpu(fake_session, tmp_path, capsys):
    import sys

    from rlscope.cli import share_check
    from rlscope.cli.analyze import main as analyze_main

    sess, _ = _synthetic(fake_session)
    assert analyze_main(["share", str(sess.trace_dir), "-k", "1,2", "--json", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert "copies with each at most 25% slower" in out
    assert [t["k"] for t in json.loads((tmp_path / "e.json").read_text())["table"]] == [1, 2]
    # copies of a trivial program, the estimate from the synthetic trace (no NVML here: times only)
    res = share_check.check([sys.executable, "-c", "pass"], (2,), str(sess.trace_dir), tmp_path, 60, False)
    assert [r["k"] for r in res["runs"]] == [1, 2] and res["runs"][1]["exit_codes"] == [0, 0]
    assert res["basis"] == "wall"  # no scopes in the program: whole-process times, and it says so
    assert "share-check (time-sharing" in share_check.check_text(res)
    assert "start-up included" in share_check.check_text(res)


def test_share_check_times_the_scoped_loop_not_start_up(tmp_path):
    """Each copy's loop is its first scope entry to its last exit, read from its own trace."""
    import sys

    from rlscope.cli import share_check

    prog = "import time, rlscope\nfor _ in range(4):\n    with rlscope.scope('a'):\n        time.sleep(.05)"
    res = share_check.check([sys.executable, "-c", prog], (2,), None, tmp_path, 120, False)
    assert res["basis"] == "loop"
    for r in res["runs"]:
        assert r["exit_codes"] == [0] * r["k"]
        for loop, wall in zip(r["loop_s"], r["wall_s"], strict=True):
            assert 0.2 <= loop < wall  # four 50 ms sleeps inside; the interpreter's start-up outside
    assert res["runs"][1]["measured_slowdown"] == pytest.approx(
        res["runs"][1]["mean_loop_s"] / res["runs"][0]["mean_loop_s"]
    )
    assert "start-up left out" in share_check.check_text(res)


def test_share_on_a_cpu_trace_is_one_line_error(fake_session, capsys):
    from rlscope.cli.analyze import main as analyze_main

    sess, clock = fake_session
    with sess, rlscope.scope("x"):
        clock.advance(1000)
    assert analyze_main(["share", str(sess.trace_dir)]) == 2
    assert sharing.NO_GPU_NOTE in capsys.readouterr().err


def test_share_check_counts_each_copys_cpu_time(tmp_path):
    """A copy's CPU seconds (all threads, its traced child too) against a known busy-wait and a sleep."""
    import sys

    from rlscope.cli import share_check

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4:\n    pass"
    runs = share_check.run_copies([sys.executable, "-c", spin], 2, dict(os.environ), 60)
    assert runs["exit_codes"] == [0, 0]
    for cpu, wall in zip(runs["cpu_s"], runs["wall_s"], strict=True):
        assert 0.4 <= cpu <= wall + 0.05
    # under a scopes-only rlscope run the copy is a grandchild: its CPU time still counts
    nap = "import time\ntime.sleep(0.4)"
    traced = share_check.run_copies([sys.executable, "-c", spin], 1, dict(os.environ), 60, tmp_path / "c")
    assert traced["cpu_s"][0] >= 0.4
    slept = share_check.run_copies([sys.executable, "-c", nap], 1, dict(os.environ), 60)
    assert slept["cpu_s"][0] < 0.3 and slept["wall_s"][0] >= 0.4


def test_gpu_work_without_its_launch_is_flagged(fake_session):
    """Kernels whose launching API call is missing count as unannotated, and the summary says so."""
    from rlscope.analysis import analyze

    sess, _ = _synthetic(fake_session, lost=(3,))  # the 10 us kernel of 17.2 us in all
    s = analyze(sess.trace_dir, correct=False).summary
    (w,) = [w for w in s["warnings"] if "no launching CUDA API call" in w]
    assert "1 GPU records (58.1% of recorded GPU time)" in w
    assert s["gpu"]["records_without_launch"] == 1
    assert s["gpu"]["gpu_s_without_launch"] == pytest.approx(10e-6)
    assert s["unannotated_gpu_categories"]["gpu_kernel"] == pytest.approx(10e-6)


def test_gpu_work_with_every_launch_is_not_flagged(fake_session):
    from rlscope.analysis import analyze

    sess, _ = _synthetic(fake_session)
    s = analyze(sess.trace_dir, correct=False).summary
    assert not [w for w in s["warnings"] if "no launching CUDA API call" in w]
    assert s["gpu"]["records_without_launch"] == 0


def test_switch_probability_from_the_idle_gaps():
    """A busy period needs a context switch when another copy ran during its idle gap, or holds the GPU."""
    m = {"busy_periods_per_s": 1000.0, "idle_gap_quantiles_us": [100.0, 1900.0]}
    assert sharing.switch_probability(m, 1) == 0.0
    # 3 others at 1000/s each: min(1, 3 x 1000 x g), averaged over the two gaps
    assert sharing.switch_probability(m, 4) == pytest.approx((0.3 + 1.0) / 2)
    assert sharing.switch_probability(m, 2, rate=500.0) == pytest.approx((0.05 + 0.95) / 2)
    # the GPU busy with the others half the time: those periods switch surely
    assert sharing.switch_probability(m, 2, rate=500.0, busy=0.5) == pytest.approx(0.5 + 0.5 * 0.5)
    # inputs from before the gaps were kept: the mean gap, 1 / n
    assert sharing.switch_probability({"busy_periods_per_s": 1000.0}, 2) == pytest.approx(1.0)


def _simulate_closed_loop(k: int, n: float, b: float, c: float, periods: int, seed: int = 0) -> float:
    """Brute force for time_slicing: k copies, each thinking Z = 1/n - b (exponential) then asking one
    FIFO server for b (exponential), plus a context switch c when the server last ran another copy.
    Returns a copy's mean cycle over its cycle alone (1/n)."""
    rng = np.random.default_rng(seed)
    z = 1 / n - b
    ready = rng.exponential(z, k)  # when each copy next asks for the GPU
    free, last = 0.0, -1
    ended, cycles, done = np.zeros(k), np.zeros(k), np.zeros(k, int)
    for _ in range(periods * k):
        i = int(np.argmin(ready))  # FIFO: the earliest request is served first
        switch = c if last not in (-1, i) else 0.0
        free = max(ready[i], free) + switch + rng.exponential(b)
        last = i
        cycles[i] += free - ended[i]
        ended[i] = free
        done[i] += 1
        ready[i] = free + rng.exponential(z)
    return float((cycles / done).mean() * n)


@pytest.mark.parametrize(
    "n,k,c_us,rel",
    [
        (2000.0, 2, 0.0, 0.03),
        (2000.0, 2, 125.0, 0.03),
        (2000.0, 4, 125.0, 0.03),
        (2000.0, 8, 40.0, 0.03),
        (10000.0, 2, 40.0, 0.03),
        # near saturation (the GPU switching most of the time) the analysis falls short of it
        (10000.0, 4, 125.0, 0.2),
    ],
)
def test_time_slicing_against_a_brute_force_queue(n, k, c_us, rel):
    """The mean value analysis against a simulated closed queue with real context switches."""
    b = 2e-6
    gaps = -(1 / n - b) * np.log(1 - sharing.GAP_QUANTILES) * 1e6  # exponential think times
    m = {
        "busy_periods_per_s": n,
        "busy_period_mean_us": b * 1e6,
        "busy_period_residual_us": b * 1e6,  # exponential B: E[B^2] / 2E[B] = E[B]
        "idle_gap_quantiles_us": gaps.tolist(),
    }
    sim = _simulate_closed_loop(k, n, b, c_us / 1e6, periods=20_000)
    assert sharing.time_slicing(m, k, c_us) == pytest.approx(sim, rel=rel)
    assert sharing.time_slicing(m, 1, c_us) == 1.0


def test_context_switches_are_named_as_left_out(fake_session):
    sess, _ = _synthetic(fake_session)
    m = sharing.sharing_section(load_trace(sess.trace_dir))["estimate"]["inputs"]
    assert m["notes"].count(sharing.NO_SWITCH_NOTE) == 1
    assert sharing.estimate(m, (1, 2))["inputs"]["notes"].count(sharing.NO_SWITCH_NOTE) == 1


def test_gpu_rates_are_over_the_loop_and_scale_to_its_speed(fake_session):
    """Rates count the loop (first entry to last exit), not start-up; at_speed moves them to the
    unprofiled loop's speed: the same GPU work per operation entry, the CPU gaps shrunk alike."""
    sess, _ = _synthetic(fake_session)
    m = sharing.sharing_section(load_trace(sess.trace_dir))["estimate"]["inputs"]
    loop_s = 200e-6  # a's entry to b's exit; the session runs 100 us longer
    assert m["traced_s"] == pytest.approx(loop_s)
    assert m["operations_per_s"] == pytest.approx(2 / loop_s)
    # six kernels, none touching: six busy periods
    assert m["busy_periods_per_s"] == pytest.approx(6 / loop_s)
    assert sharing.PROFILED_RATES_NOTE in m["notes"]
    fast = sharing.at_speed(m, 2 * m["operations_per_s"])
    assert fast["busy_periods_per_s"] == pytest.approx(2 * m["busy_periods_per_s"])
    assert fast["gpu_busy_fraction"] == pytest.approx(2 * m["gpu_busy_fraction"])
    assert fast["idle_gap_quantiles_us"] == pytest.approx([g / 2 for g in m["idle_gap_quantiles_us"]])
    assert fast["busy_period_mean_us"] == m["busy_period_mean_us"]  # the GPU's own time is the same
    assert sharing.PROFILED_RATES_NOTE not in fast["notes"]
    assert any(n.startswith(sharing.SCALED_NOTE) and n.endswith("x2.00") for n in fast["notes"])


def _memory_in_windows(fake_session, marks=lambda t0, end: []):
    """Four calls of ``step``, two in full windows, recorded in windows (each opening with the
    allocator's live state); a light window frees two blocks unseen and allocates one. ``marks``:
    high-water rows to add. Returns (memory section, marks, t0, end)."""
    sess, clock = fake_session
    toggle = type("Toggle", (), {"set_enabled": lambda self, on: None})()
    marks_at = {}
    with sess:
        sess.windows.togglers = [toggle]
        t0 = clock.now
        sess.switch_window()  # light
        for call in range(4):
            if call in (1, 3):
                clock.advance(1_000)
                sess.switch_window()  # full
                marks_at[f"sync{call}"] = clock.now + 500
            clock.advance(1_000)
            marks_at[f"start{call}"] = clock.now
            with rlscope.scope("step"):
                clock.advance(2_000)
            if call in (1, 3) and call < 3:
                clock.advance(1_000)
                sess.switch_window()  # light
        clock.advance(1_000)
    end = clock.now
    s1, s3, c1, c3 = marks_at["sync1"], marks_at["sync3"], marks_at["start1"], marks_at["start3"]
    L, SL = S.MEMORY_LIVE, S.MEMORY_SEGMENT_LIVE
    A, F = S.MEMORY_ALLOC, S.MEMORY_FREE
    mem = [
        (s1, -1, 0, SL, 0, 1 << 20, 0),
        (s1, -1, 0, L, 10, 100, 0),  # held since before
        (c1 + 500, -1, 0, A, 20, 200, 0),  # step: freed inside -> ephemeral
        (c1 + 1_000, -1, 0, F, 20, 200, 0),
        (c1 + 1_500, -1, 0, A, 30, 300, 0),  # step: kept -> persistent (freed unseen, later)
        (s3, -1, 0, SL, 0, 1 << 20, 0),  # the same segment: reserved stays 1 MiB
        (s3, -1, 0, L, 40, 50, 0),  # allocated in the light window; 10 and 30 freed there
        (c3 + 500, -1, 0, A, 50, 500, 0),
        (c3 + 1_500, -1, 0, F, 50, 500, 0),
    ]
    mem += marks(t0, end)
    write_with_meta(sess.process_dir / S.MEMORY_FILE, S.MEMORY_COLUMNS_DOC, mem)
    return sharing.sharing_section(load_trace(sess.trace_dir))["memory"], marks_at, t0, end


def test_memory_recorded_in_windows_resyncs_and_scales_to_all_calls(fake_session):
    """RLSCOPE_GPU_MEMORY=windows: every figure of :func:`_memory_in_windows` worked out by hand."""
    m, marks, t0, end = _memory_in_windows(fake_session)
    p = m["processes"][0]
    step = m["operations"]["step"]
    # recorded calls 1 and 3: 200 + 300 + 500 bytes in 3 allocations, for 4 calls: doubled
    assert step == {
        "calls": 4,
        "allocations": 6,
        "allocated_bytes": 2_000,
        "ephemeral_bytes": 1_400,
        "persistent_bytes": 600,
        "peak_bytes": 500,  # call 3: 50 -> 550
        "recorded_calls": 2,
    }
    # without the resync, blocks 10 and 30 would still count: 100 + 300 + 50 + 500 = 950
    assert p["peak_bytes"] == 550 and p["reserved_peak_bytes"] == 1 << 20
    assert p["allocations"] == 3  # the job's own, not the LIVE rows
    s1, s3 = marks["sync1"], marks["sync3"]
    spans = (marks["start1"] + 3_000 - s1) + (end - s3)  # to the switch to light, and to the end
    assert p["recorded_share"] == pytest.approx(spans / (end - t0), rel=1e-6)
    assert p["peak_source"] == "recorded" and p["allocator"] == {}  # a trace without marks


# the allocator's high-water marks (allocated, reserved) per device: at the start, at the stop
MARK_CASES = {
    "rose": {0: ((150, 1 << 20), (900, 2 << 20))},  # a light window reached 900 unseen
    "stayed": {0: ((2_000, 4 << 20), (2_000, 4 << 20))},  # the run stayed below its start's mark
    "two_devices": {0: ((150, 1 << 20), (900, 2 << 20)), 1: ((0, 0), (300, 2 << 20))},
    "no_stop": {0: ((150, 1 << 20), None)},  # the run never stopped rlscope
    "reset": {0: ((100, 1 << 20), (400, 1 << 20))},  # the job reset the counters: a mark too low
}


@pytest.mark.parametrize("case", list(MARK_CASES))
def test_process_peak_takes_the_allocators_mark_the_run_reached(fake_session, case):
    """On one device, a stop mark above the start's is the run's exact peak, even one no recording
    window saw (the curve's own peak is 550); any other mark leaves the curve's peak."""
    P, SP = S.MEMORY_PEAK, S.MEMORY_SEGMENT_PEAK

    def marks(t0, end):
        rows = []
        for dev, (start, stop) in MARK_CASES[case].items():
            for ts, pair in ((t0, start), (end, stop)):
                if pair is not None:
                    rows += [(ts, -1, dev, P, -1, pair[0], 0), (ts, -1, dev, SP, -1, pair[1], 0)]
        return rows

    p = _memory_in_windows(fake_session, marks)[0]["processes"][0]
    got = (p["peak_bytes"], p["reserved_peak_bytes"], p["peak_source"])
    expect = {
        "rose": (900, 2 << 20, "allocator"),
        "stayed": (550, 1 << 20, "recorded"),
        "two_devices": (550, 1 << 20, "recorded"),  # the curve sums devices, the marks do not
        "no_stop": (550, 1 << 20, "recorded"),
        "reset": (550, 1 << 20, "recorded"),
    }[case]
    assert got == expect
    assert p["fragmentation"] == pytest.approx(1 - expect[0] / expect[1])
    devices = {k: v for k, v in MARK_CASES[case].items() if v[1] is not None}
    assert p["allocator"] == {
        str(dev): {
            "peak_bytes": stop[0],
            "peak_in_run": stop[0] > start[0],
            "reserved_peak_bytes": stop[1],
            "reserved_peak_in_run": stop[1] > start[1],
        }
        for dev, (start, stop) in devices.items()
    }


def test_memory_marks_of_an_unused_gpu_are_no_memory(fake_session):
    """CUDA available, torch imported, nothing allocated: the zero marks alone are no GPU memory
    (the trace reads as a CPU-only one)."""
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        clock.advance(1_000)
    rows = [(t0 + d, -1, 0, a, -1, 0, 0) for d in (0, 1_000) for a in (S.MEMORY_PEAK, S.MEMORY_SEGMENT_PEAK)]
    write_with_meta(sess.process_dir / S.MEMORY_FILE, S.MEMORY_COLUMNS_DOC, rows)
    assert sharing.sharing_section(load_trace(sess.trace_dir)) == {"note": sharing.NO_GPU_NOTE}


def test_memory_windows_switch_the_history_and_write_live_rows():
    """The windows mode's switch with a stand-in torch: opening a window turns the history on, then
    takes the live state (LIVE rows, at a time after the history is on); closing takes the
    window's entries, then turns the history off (which clears it). A failure warns once and
    stops recording, never the job."""
    from types import SimpleNamespace

    calls = []

    class Memory:
        def _record_memory_history(self, enabled=None, **kw):
            calls.append(("history", enabled))

        def _snapshot(self):
            calls.append(("snapshot",))
            seg = {"device": 0, "address": 4096, "total_size": 1024, "stream": 0}
            seg["blocks"] = [{"size": 256, "state": "active_allocated"}, {"size": 768, "state": "inactive"}]
            trace = [{"action": "alloc", "addr": 4352, "size": 512, "stream": 0, "time_us": 0}]
            return {"segments": [seg], "device_traces": [trace]}

    fake_torch = SimpleNamespace(cuda=SimpleNamespace(memory=Memory(), is_initialized=lambda: True))
    rec = gpu_memory.MemoryRecorder(session=SimpleNamespace(clock=lambda: 777))
    rec.torch, rec.windowed, rec.rows = fake_torch, True, []
    window = gpu_memory.MemoryWindows(rec)
    window.set_enabled(True)
    assert calls == [("history", "all"), ("snapshot",)]
    assert rec.rows == [
        (777, -1, 0, S.MEMORY_SEGMENT_LIVE, 4096, 1024, 0),
        (777, -1, 0, S.MEMORY_LIVE, 4096, 256, 0),
    ]
    window.set_enabled(True)  # already on: nothing
    assert len(calls) == 2
    window.set_enabled(False)
    assert calls[2:] == [("snapshot",), ("history", None)]
    assert rec.rows[-1][3] == S.MEMORY_ALLOC and rec.rows[-1][4:6] == (4352, 512)
    rec.flush()  # drained at the switches, never by the writer
    assert len(calls) == 4
    fake_torch.cuda.is_initialized = lambda: False  # before CUDA starts: nothing, and CUDA left alone
    window.set_enabled(True)
    assert len(calls) == 4 and not rec.recording


class _Early:
    """A collector that starts on torch's import, with torch already imported: it joins the windows
    while the session's collectors start (as collectors/gpu_memory.py does)."""

    seen: ClassVar[list[bool]] = []

    def set_enabled(self, on: bool) -> None:
        self.seen.append(on)


def _early_factory(session, started):
    session.add_toggler(_Early())
    assert _Early.seen == []  # not switched before the windows start


def test_a_toggler_that_joins_before_the_windows_start_waits_for_them(tmp_path, monkeypatch):
    """A toggler that joins while the session's collectors start waits for the windows to start,
    with the others."""
    from rlscope.collectors import registry

    row = registry.CollectorRow("early", f"{__name__}:_early_factory")
    monkeypatch.setattr(registry, "COLLECTORS", (*registry.COLLECTORS, row))
    monkeypatch.setattr(_Early, "seen", [])
    sess = rlscope.profile(tmp_path / "t", backend=False, gpu=False)
    with sess:
        assert any(isinstance(t, _Early) for t in sess.windows.togglers)
        assert _Early.seen == [False]  # the run starts in a light window


def test_a_memory_curve_without_allocations_is_flat_not_an_error() -> None:
    """Every allocation of a process can fall between detail stretches (docs/long-runs.md): its
    memory rows then hold only the allocator's marks, and the curve is zero, not an IndexError."""
    from rlscope.analysis import memory

    empty = np.zeros(0, np.int64)
    out = memory.curve(empty, empty, empty, empty, 0, 1_000)
    assert len(out["t_s"]) == memory.CURVE_POINTS
    for key in ("allocated_min", "allocated_max", "reserved"):
        assert out[key] == [0] * memory.CURVE_POINTS
