"""GPU analysis on synthetic traces (no GPU needed): attribution, cuda_api category, overlap, NVML."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlscope
from rlscope import categories as C
from rlscope.analysis import gpu
from rlscope.trace import schema as S
from tests.conftest import summary_of, write_stream

S_ = 1e-9


def test_kernel_after_scope_closed_counts_for_its_launcher(fake_session):
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        with rlscope.scope("launch"):
            clock.advance(100)  # API call at t0+10 .. t0+30 inside this scope
        with rlscope.scope("other"):
            clock.advance(100)
    st = sess.thread_states()[0]
    rows = [
        # category, start, end, correlation, thread, device, stream, name, bytes
        (C.CUDA_API, t0 + 10, t0 + 30, 7, st.thread, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 40, t0 + 160, 7, -1, 0, 7, 0, 0),  # runs on into "other"
        (C.CUDA_API, t0 + 120, t0 + 125, 8, st.thread, -1, -1, 0, 0),
        (C.GPU_MEMCPY, t0 + 150, t0 + 170, 8, -1, 0, 7, 0, 64),
        (C.GPU_KERNEL, t0 + 500, t0 + 510, 99, -1, 0, 7, 0, 0),  # no API record: unattributed
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    s = summary_of(sess.trace_dir)
    launch, other = s["operations"]["launch"], s["operations"]["other"]
    assert launch["gpu_categories"] == pytest.approx({"gpu_kernel": 120 * S_})
    assert other["gpu_categories"] == pytest.approx({"gpu_memcpy": 20 * S_})
    assert launch["categories"] == pytest.approx({"python": 80 * S_, "cuda_api": 20 * S_})
    assert other["categories"] == pytest.approx({"python": 95 * S_, "cuda_api": 5 * S_})
    # launch: CPU 100 ns (0..100), its kernel 40..160 -> both 60, gpu-only 60, cpu-only 40
    assert launch["resources"] == pytest.approx(
        {"cpu_only": 40 * S_, "gpu_only": 60 * S_, "cpu_gpu": 60 * S_}
    )
    assert other["resources"] == pytest.approx({"cpu_only": 80 * S_, "gpu_only": 0.0, "cpu_gpu": 20 * S_})
    assert s["unannotated_gpu_categories"] == pytest.approx({"gpu_kernel": 10 * S_})
    assert s["gpu_bound_s"] == pytest.approx((130 + 10) * S_)
    total = sum(o["exclusive_s"] for o in s["operations"].values()) + s["unannotated_s"]
    assert total == pytest.approx(s["wall_s"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(0, 50)), max_size=20))
def test_union_per_thread_matches_brute_force(iv):
    iv = [(t, min(a, b), max(a, b)) for t, a, b in iv]
    arr = [np.array([x[k] for x in iv], np.int64) for k in range(3)]
    t, s, e = gpu.union_per_thread(*arr)
    for thread in range(3):
        want = {u for tt, a, b in iv if tt == thread for u in range(a, b)}
        got = {u for tt, a, b in zip(t, s, e, strict=True) if tt == thread for u in range(a, b)}
        assert got == want
    # disjoint, non-touching per thread
    for thread in range(3):
        sel = t == thread
        assert (s[sel][1:] > e[sel][:-1]).all()


def test_covered_and_nvml_comparison():
    s, e = np.array([0, 100, 300]), np.array([50, 200, 310])
    np.testing.assert_allclose(
        gpu.covered(s, e, np.array([0, 25, 50, 150, 250, 1000])), [0, 25, 50, 100, 150, 160]
    )
    ts = np.arange(0, 500, 100, dtype=np.int64)
    nvml = pa.table(
        {"ts_ns": ts, "device": np.zeros(5, np.int16), "util_gpu": np.array([0, 50, 100, 0, 10], np.int8)}
    )
    out = gpu.nvml_comparison(nvml, s, e, 500)
    assert out["gpu_bound_s"] == pytest.approx(160e-9)
    assert out["gpu_bound_fraction"] == pytest.approx(160 / 500)
    # windows [0,100) 50 busy, [100,200) 100, [200,300) 0, [300,400) 10
    assert out["trace_busy_in_windows"] == pytest.approx([0.5, 1.0, 0.0, 0.1])
    assert out["trace_any_activity_fraction"] == pytest.approx(0.75)
    assert out["nvml_util_mean"] == pytest.approx((50 + 100 + 0 + 10) / 400)


def test_a_graph_replays_kernels_count_for_the_operation_that_replayed_it(fake_session):
    """CUPTI gives every kernel of a CUDA graph the correlation id of the graph's launch
    (cudaGraphLaunch, and cuGraphLaunch inside it): many kernels join one API call, and count for the
    operation open when it ran, though they run after it closed. A replay after CUPTI was detached
    and attached again (a new epoch: collectors/cupti_native.c's EPOCH_CORR) reuses CUPTI's raw ids
    and joins its own launch, not the first epoch's."""
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        with rlscope.scope("inference"):
            clock.advance(100)  # the replay's launch at t0+10 .. t0+30
        with rlscope.scope("other"):
            clock.advance(100)  # the kernels run here; a second replay (epoch 2) at t0+150
    th = sess.thread_states()[0].thread
    epoch1, epoch2 = 5 + (1 << 40), 5 + (2 << 40)
    rows = [
        # category, start, end, correlation, thread, device, stream, name, bytes
        (C.CUDA_API, t0 + 10, t0 + 30, epoch1, th, -1, -1, 0, 0),  # cudaGraphLaunch
        (C.CUDA_API, t0 + 12, t0 + 28, epoch1, th, -1, -1, 0, 0),  # cuGraphLaunch inside it
        *((C.GPU_KERNEL, t0 + 110 + 10 * k, t0 + 118 + 10 * k, epoch1, -1, 0, 7, 0, 0) for k in range(3)),
        (C.CUDA_API, t0 + 150, t0 + 160, epoch2, th, -1, -1, 0, 0),
        *((C.GPU_KERNEL, t0 + 170 + 5 * k, t0 + 174 + 5 * k, epoch2, -1, 0, 7, 0, 0) for k in range(2)),
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    s = summary_of(sess.trace_dir)
    assert s["operations"]["inference"]["gpu_categories"] == pytest.approx({"gpu_kernel": 3 * 8 * S_})
    assert s["operations"]["other"]["gpu_categories"] == pytest.approx({"gpu_kernel": 2 * 4 * S_})
    assert not s.get("unannotated_gpu_categories")
    assert not any("launching CUDA API call" in w for w in s.get("warnings") or [])
