"""DDP under rlscope run: a trace per torchrun rank with its rank, per-rank figures, NCCL per operation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import analyze, nccl
from rlscope.analysis.roles import DDP_RANK, TORCHRUN_AGENT
from rlscope.annotate import intern
from rlscope.trace import schema as S
from tests.conftest import summary_of, write_stream

PPO_DDP = Path(__file__).resolve().parent.parent / "workloads" / "ppo_ddp.py"
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
# the same kernel as CUPTI records it (NCCL 2.19+), and an older NCCL's kernel as recorded
NCCL_MANGLED = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"
NCCL_OLD_MANGLED = "_Z38ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevComm"


def _profile_torchrun(trace: Path, *args: str, gpu: str = "off") -> subprocess.CompletedProcess:
    """``rlscope run -- python -m torch.distributed.run --nproc-per-node 2 ppo_ddp.py ...``"""
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze"]
    cmd += ["--gpu", gpu, "--", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--standalone", str(PPO_DDP), "--total-steps", "1024", "--num-steps", "64"]
    cmd += ["--eval-episodes", "0", "--quiet", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _ranks(summary: dict) -> dict[str, dict]:
    return {p["label"]: p for p in summary["processes"] if p.get("role") == DDP_RANK}


@pytest.mark.slow
def test_torchrun_gloo_every_rank_profiled_with_its_rank(tmp_path):
    pytest.importorskip("gymnasium")
    trace = tmp_path / "trace"
    r = _profile_torchrun(trace, "--backend", "gloo")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "rank 0/2" in r.stdout and "rank 1/2" in r.stdout  # the job's own output is untouched

    from rlscope.trace.reader import load_trace

    metas = [p.metadata for p in load_trace(trace).processes]
    ranks = sorted(m["rank"] for m in metas if m.get("world_size"))
    assert ranks == ["0", "1"]
    assert all(m["world_size"] == "2" for m in metas if m.get("world_size"))
    assert sorted(m["local_rank"] for m in metas if m.get("world_size")) == ["0", "1"]

    s = analyze(trace).summary
    per_rank = _ranks(s)
    assert sorted(per_rank) == ["rank 0", "rank 1"]
    for p in per_rank.values():
        assert p["operations"]["backprop"]["calls"] > 0
        assert p["operations"]["backprop"]["total_s"] > 0
        assert "nccl_s" not in p  # a CPU trace: no NCCL figure at all
    agent = [p for p in s["processes"] if p.get("role") == TORCHRUN_AGENT]
    assert len(agent) == 1 and agent[0]["label"] == TORCHRUN_AGENT  # torchrun's agent, labelled
    assert {m["ppid"] for m in metas if m.get("world_size")} == {str(agent[0]["pid"])}
    role = s["roles"][DDP_RANK]
    assert role["workers"] == 2 and "backprop" in role["operations"]
    assert role["spread"]["max_s"] >= role["spread"]["median_s"] > 0


def test_nccl_kernels_per_operation_from_a_synthetic_gpu_table(fake_session):
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        with rlscope.scope("backprop"):
            clock.advance(100)
        with rlscope.scope("inference"):
            clock.advance(100)
        nccl_name, gemm_name = intern(NCCL_MANGLED), intern("ampere_sgemm_32x32")
    tid = sess.thread_states()[0].thread
    rows = [
        # category, start, end, correlation, thread, device, stream, name, bytes
        (C.CUDA_API, t0 + 10, t0 + 20, 1, tid, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 30, t0 + 60, 1, -1, 0, 7, gemm_name, 0),  # backprop's gemm: 30 ns
        (C.CUDA_API, t0 + 40, t0 + 50, 2, tid, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 60, t0 + 260, 2, -1, 0, 9, nccl_name, 0),  # all-reduce: 200 ns, runs on
        (C.CUDA_API, t0 + 70, t0 + 80, 3, tid, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 90, t0 + 140, 3, -1, 0, 9, nccl_name, 0),  # a second one: 50 ns
        (C.CUDA_API, t0 + 110, t0 + 120, 4, tid, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 300, t0 + 310, 4, -1, 0, 7, gemm_name, 0),  # inference: no NCCL
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    (p,) = summary_of(sess.trace_dir)["processes"]
    assert p["nccl_s"] == pytest.approx(250e-9)
    assert p["operations"]["backprop"]["nccl_s"] == pytest.approx(250e-9)
    assert p["operations"]["backprop"]["nccl_kernels"] == {
        NCCL_KERNEL: {"count": 2, "total_s": pytest.approx(250e-9)}
    }
    assert p["operations"]["inference"]["nccl_s"] == 0.0
    assert "nccl_kernels" not in p["operations"]["inference"]

    # the table and the report show it per rank (two copies of the process, labelled as ranks)
    import io

    from rich.console import Console

    from rlscope.viz import html, terminal

    procs = [{**p, "pid": i, "role": DDP_RANK, "label": f"rank {i}"} for i in (0, 1)]
    summary = {"processes": procs, "roles": {DDP_RANK: {}}}
    buf = io.StringIO()
    console = Console(file=buf, width=200)
    console.print(terminal._fitted_process_table(summary, console))
    assert "rank 1 pid 1" in buf.getvalue() and "backprop 0.000" in buf.getvalue()  # 250 ns, 3 decimals
    report = html._processes_section(summary)
    assert "rank 1 — Process 1" in report and "<th>NCCL s</th>" in report


@pytest.mark.parametrize(
    "name",
    [
        NCCL_MANGLED,
        NCCL_KERNEL,
        NCCL_OLD_MANGLED,
        "ncclKernel_AllReduce_RING_LL_Sum_float",  # Kineto's and older CUPTI's plain names
        "void ncclKernel<1>(ncclWorkElem)",  # a template, with its return type
        "_ZN4nccl13ncclDevKernelEv",  # nested in a namespace
        "_ZL39ncclDevKernel_AllReduce_Sum_f32_RING_LLv",  # internal linkage
    ],
)
def test_nccl_kernels_recognised_whatever_the_mangling(name):
    assert nccl.is_nccl(name)
    if name.startswith("_Z"):  # without a demangler too: the mangled function name is read
        assert nccl._mangled_function_name(name).startswith(nccl.NCCL_PREFIXES)


@pytest.mark.parametrize(
    "name",
    [
        "ampere_sgemm_32x32",
        "_Z10add_kernelPfS_S_i",
        "_Z3foo24ncclDevKernelArgsStorageILm4096EE",  # NCCL's type among the arguments only
        "void at::native::vectorized_elementwise_kernel<4, ncclKernelish>(int)",  # in a template argument
        "_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi",
    ],
)
def test_other_kernels_are_not_nccl(name):
    assert not nccl.is_nccl(name)
    assert not nccl._mangled_function_name(name).startswith(nccl.NCCL_PREFIXES)


def test_nccl_rows_and_cpu_traces_degrade_to_nothing(fake_session):
    got = nccl.nccl_by_operation(
        [
            ("backprop", "gpu_kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 3, 600.0),
            ("backprop", "gpu_kernel", NCCL_MANGLED, 2, 50.0),
            ("backprop", "gpu_kernel", "volta_sgemm", 1, 100.0),
            ("backprop", "gpu_memcpy", "ncclKernel_not_a_kernel", 1, 100.0),
        ]
    )
    assert got == {
        "backprop": {
            "nccl_s": pytest.approx(650e-9),
            "nccl_kernels": {
                "ncclKernel_AllReduce_RING_LL_Sum_float": {"count": 3, "total_s": pytest.approx(600e-9)},
                NCCL_KERNEL: {"count": 2, "total_s": pytest.approx(50e-9)},  # named demangled
            },
        }
    }
    sess, clock = fake_session
    with sess, rlscope.scope("backprop"):
        clock.advance(100)
    (p,) = summary_of(sess.trace_dir)["processes"]
    assert "nccl_s" not in p and "nccl_s" not in p["operations"]["backprop"]


def _cuda_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


@pytest.mark.gpu
@pytest.mark.skipif(_cuda_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_torchrun_nccl_kernels_attributed_to_backprop(tmp_path):
    pytest.importorskip("gymnasium")
    trace = tmp_path / "trace"
    # eight rollouts: GPU tracing runs in full windows only, and the backward calls must meet some
    r = _profile_torchrun(trace, "--backend", "nccl", "--total-steps", "8192", gpu="auto")
    assert r.returncode == 0, r.stderr[-3000:]
    s = analyze(trace).summary
    per_rank = _ranks(s)
    assert sorted(per_rank) == ["rank 0", "rank 1"]
    for p in per_rank.values():
        backprop = p["operations"]["backprop"]
        assert backprop["nccl_s"] > 0 and backprop["nccl_kernels"]
        assert all(nccl.is_nccl(k) for k in backprop["nccl_kernels"])
        # every all-reduce of the run, from torch's flight recorder, not scaled from full windows
        assert p["nccl_source"] == "collectives"
        assert backprop["nccl_collectives"]["nccl:all_reduce"]["count"] > 0
        assert p["gpu_bound_s"] > 0
        # DDP all-reduces in backward only: the rollout's operations launch no collective
        assert p["operations"]["inference"].get("nccl_s", 0.0) == 0.0
    assert s["roles"][DDP_RANK]["nccl"]["backprop"]["median_s"] > 0


def test_corrected_nccl_time_is_scaled_to_the_run_like_the_operations_gpu_time():
    """GPU tracing runs in full windows only: an operation whose GPU kernel time was scaled 2x to the
    run (half its instances traced) has its NCCL time scaled 2x too; the recorded time stays beside."""
    rows = {
        (100, "backprop", "gpu_kernel", NCCL_MANGLED): (4, 400.0),
        (100, "backprop", "gpu_kernel", "g"): (4, 600.0),
    }
    kernel_rows = [(100, {(op, cat, k): [c, ns] for (_, op, cat, k), (c, ns) in rows.items()})]

    def proc(gpu_kernel_s: float) -> dict:
        return {"pid": 100, "operations": {"backprop": {"gpu_categories": {"gpu_kernel": gpu_kernel_s}}}}

    summary = {"processes": [proc(2000e-9)], "raw": {"processes": [proc(1000e-9)]}}
    nccl.add_to_summary(summary, kernel_rows)
    (p,), (raw,) = summary["processes"], summary["raw"]["processes"]
    assert raw["operations"]["backprop"]["nccl_s"] == pytest.approx(400e-9) == raw["nccl_s"]
    assert p["operations"]["backprop"]["nccl_s"] == pytest.approx(800e-9) == p["nccl_s"]
    assert p["operations"]["backprop"]["nccl_recorded_s"] == pytest.approx(400e-9)
    assert p["operations"]["backprop"]["nccl_kernels"] == {
        NCCL_KERNEL: {"count": 4, "total_s": pytest.approx(400e-9)}
    }
