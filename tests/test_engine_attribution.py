"""GPU work launched from autograd's engine threads belongs to the operation that called ``backward()``.

The synthetic trace is modelled on a real CUDA backward (PPO's update under DDP): the forward's
kernels are launched from the thread with the ``backprop`` scope; ``loss.backward()`` hands the
graph to the engine's device thread, which launches every backward kernel and, through DDP's
reducer hooks, the NCCL all-reduce (mangled, as CUPTI records it), while the caller waits; the
optimizer's kernels come from the caller again. CUPTI names a thread the session never saw
``-2 - its id`` (collectors/cupti_native.py), as the engine's thread is named here.
"""

from __future__ import annotations

import threading

import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import analyze, kernels
from rlscope.collectors.autograd_calls import AutogradCalls
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from tests.conftest import summary_of, write_stream

S_ = 1e-9
ENGINE_THREAD = -2 - 4242  # an engine device thread, as CUPTI names a thread unknown to the session
NCCL = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"


def _backward_advancing(clock, ns: int) -> None:
    """A real ``backward()`` through torch's engine entry whose graph takes ``ns`` of the fake clock."""
    torch = pytest.importorskip("torch")

    class Takes(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            clock.advance(ns)
            return grad * 2

    x = torch.ones(3, requires_grad=True)
    Takes.apply(x).sum().backward()


def _trace(sess, clock, *, engine_rows: bool = True):
    """backprop (forward, backward on the engine thread, optimizer step), then inference.

    Returns the GPU rows' ground truth: ns of kernels per (operation, what)."""
    pytest.importorskip("torch")
    with sess:
        calls = AutogradCalls(sess).start() if engine_rows else None
        t0 = clock.now
        with rlscope.scope("backprop"):
            clock.advance(100)  # forward: launches at t0+10, +20, +30
            _backward_advancing(clock, 400)  # the engine call: t0+100 .. t0+500
            clock.advance(100)  # optimizer step: launches at t0+520, +540
        with rlscope.scope("inference"):
            clock.advance(100)  # launch at t0+610
        clock.advance(100)  # no operation: a launch at t0+720 from a loader thread
        if calls is not None:
            calls.stop()
    main = sess.thread_states()[0].thread
    loader = -2 - 5151
    launches = [  # (thread, launch time, kernel start, kernel length, name)
        (main, 10, 40, 10, "fwd_gemm"),
        (main, 20, 50, 10, "fwd_gemm"),
        (main, 30, 60, 10, "fwd_relu"),
        (ENGINE_THREAD, 150, 160, 20, "bwd_gemm"),  # backward: twice the forward's GPU work
        (ENGINE_THREAD, 200, 210, 20, "bwd_gemm"),
        (ENGINE_THREAD, 250, 260, 20, "bwd_relu"),
        (ENGINE_THREAD, 400, 410, 50, NCCL),  # DDP's reducer hook: the bucket's all-reduce
        (main, 520, 530, 10, "adam"),
        (main, 540, 550, 10, "adam"),
        (main, 610, 620, 10, "fwd_gemm"),  # inference
        (loader, 720, 730, 5, "copy_kernel"),  # a thread with no operation, no engine call: unannotated
    ]
    rows = []
    for corr, (thread, at, start, length, name) in enumerate(launches, start=1):
        rows.append((C.CUDA_API, t0 + at, t0 + at + 5, corr, thread, -1, -1, 0, 0))
        rows.append(
            (C.GPU_KERNEL, t0 + start, t0 + start + length, corr, -1, 0, 7, rlscope.annotate.intern(name), 0)
        )
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    return t0


def test_the_engine_call_is_marked_on_the_calling_thread(fake_session):
    sess, clock = fake_session
    t0 = _trace(sess, clock)
    ev = load_trace(sess.trace_dir).processes[0].events.to_pydict()
    rows = [
        (ts - t0, th, k, i)
        for ts, th, k, i in zip(ev["ts_ns"], ev["thread"], ev["kind"], ev["id"], strict=True)
    ]
    marks = [r for r in rows if r[2] in (S.ENGINE_BEGIN, S.ENGINE_END)]
    main = threading.get_native_id()
    assert marks == [(100, main, S.ENGINE_BEGIN, 0), (500, main, S.ENGINE_END, 0)]


def test_backward_gpu_work_from_the_engine_thread_goes_to_backprop(fake_session):
    sess, clock = fake_session
    _trace(sess, clock)
    s = summary_of(sess.trace_dir)
    backprop = s["operations"]["backprop"]
    # forward 30 + backward 60 + all-reduce 50 + optimizer 20: all of it backprop's
    assert backprop["gpu_categories"] == pytest.approx({"gpu_kernel": 160 * S_})
    assert s["operations"]["inference"]["gpu_categories"] == pytest.approx({"gpu_kernel": 10 * S_})
    assert s["unannotated_gpu_categories"] == pytest.approx({"gpu_kernel": 5 * S_})  # the loader's only
    (p,) = s["processes"]
    assert p["operations"]["backprop"]["nccl_s"] == pytest.approx(50 * S_)
    table = kernels.kernel_table(load_trace(sess.trace_dir)).to_pylist()
    got = {(r["operation"], r["kernel"]): r["total_s"] for r in table}
    assert got[("backprop", "bwd_gemm")] == pytest.approx(40 * S_)
    assert got[("backprop", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")] == (
        pytest.approx(50 * S_)
    )
    assert got[("[unannotated]", "copy_kernel")] == pytest.approx(5 * S_)
    # the corrected figures attribute it the same way
    corrected = analyze(sess.trace_dir).summary
    assert corrected["operations"]["backprop"]["gpu_categories"]["gpu_kernel"] == pytest.approx(160 * S_)


def test_without_the_engine_marks_backward_gpu_work_is_unannotated(fake_session):
    """What traces without the marks read (and every trace read before them): backward's kernels
    and the all-reduce, 110 of backprop's 160 ns of GPU work here, fall to ``[unannotated]``."""
    sess, clock = fake_session
    _trace(sess, clock, engine_rows=False)
    s = summary_of(sess.trace_dir)
    assert s["operations"]["backprop"]["gpu_categories"] == pytest.approx({"gpu_kernel": 50 * S_})
    assert s["unannotated_gpu_categories"] == pytest.approx({"gpu_kernel": (110 + 5) * S_})


def test_an_operation_open_on_the_launching_thread_keeps_its_work(fake_session):
    """A thread with its own open operation launching during another thread's engine call keeps it."""
    sess, clock = fake_session
    pytest.importorskip("torch")
    other: dict = {}
    started, release = threading.Event(), threading.Event()

    def worker():
        with rlscope.scope("worker_op"):
            other["thread"] = threading.get_native_id()
            started.set()
            release.wait(10)

    with sess:
        calls = AutogradCalls(sess).start()
        th = threading.Thread(target=worker)
        th.start()
        started.wait(10)
        t0 = clock.now
        with rlscope.scope("backprop"):
            _backward_advancing(clock, 400)  # t0 .. t0+400
        release.set()
        th.join()
        calls.stop()
    rows = [
        (C.CUDA_API, t0 + 100, t0 + 105, 1, other["thread"], -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 110, t0 + 130, 1, -1, 0, 7, 0, 0),
        (C.CUDA_API, t0 + 200, t0 + 205, 2, ENGINE_THREAD, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 210, t0 + 250, 2, -1, 0, 7, 0, 0),
        (C.CUDA_API, t0 + 450, t0 + 455, 3, ENGINE_THREAD, -1, -1, 0, 0),  # after the call: none
        (C.GPU_KERNEL, t0 + 460, t0 + 470, 3, -1, 0, 7, 0, 0),
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    s = summary_of(sess.trace_dir)
    assert s["operations"]["worker_op"]["gpu_categories"] == pytest.approx({"gpu_kernel": 20 * S_})
    assert s["operations"]["backprop"]["gpu_categories"] == pytest.approx({"gpu_kernel": 40 * S_})
    assert s["unannotated_gpu_categories"] == pytest.approx({"gpu_kernel": 10 * S_})
