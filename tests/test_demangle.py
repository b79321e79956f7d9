"""Kernel names are demangled in the reports (C++ runtime's demangler), and kept mangled in the trace."""

from __future__ import annotations

import json
import threading

import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import demangle as D
from rlscope.annotate import intern
from rlscope.trace import schema as S
from tests.conftest import FakeClock, write_stream

FILL = (
    "_ZN2at6native29vectorized_elementwise_kernel"
    "ILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"
)
FILL_READABLE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,"
    " at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)
ADD = "_Z10add_kernelPfS_S_i"
ADD_READABLE = "add_kernel(float*, float*, float*, int)"


def test_real_torch_and_cuda_kernel_names():
    if D._runtime() is None:
        pytest.skip("no C++ runtime with __cxa_demangle on this machine")
    assert D.demangle(FILL) == FILL_READABLE
    assert D.demangle(ADD) == ADD_READABLE


@pytest.mark.parametrize("name", ["sgemm", "Memcpy HtoD", "relu<float>", "_Znot-a-name", ""])
def test_other_names_unchanged(name):
    assert D.demangle(name) == name


def test_without_a_cxx_runtime_names_stay_as_recorded(monkeypatch):
    monkeypatch.setattr(D, "_runtime", lambda: None)
    D.demangle.cache_clear()
    try:
        assert D.demangle(ADD) == ADD
    finally:
        D.demangle.cache_clear()


@pytest.fixture
def mangled_trace(tmp_path):
    """One operation, 'step', launching the torch fill kernel and add_kernel once each."""
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False)
    sess.clock = clock
    with sess:
        t0 = clock.now
        launch, fill, add = intern("cudaLaunchKernel"), intern(FILL), intern(ADD)
        with rlscope.scope("step"):
            clock.advance(1000)
        clock.advance(100)
    th = threading.get_native_id()
    rows = [
        (C.CUDA_API, t0 + 100, t0 + 110, 1, th, -1, -1, launch, 0),
        (C.GPU_KERNEL, t0 + 120, t0 + 300, 1, -1, 0, 7, fill, 0),
        (C.CUDA_API, t0 + 400, t0 + 410, 2, th, -1, -1, launch, 0),
        (C.GPU_KERNEL, t0 + 420, t0 + 500, 2, -1, 0, 7, add, 0),
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    return sess.trace_dir


def test_reports_show_demangled_names_and_the_trace_keeps_mangled(mangled_trace, tmp_path):
    if D._runtime() is None:
        pytest.skip("no C++ runtime with __cxa_demangle on this machine")
    from rlscope.analysis.kernels import kernel_table
    from rlscope.analysis.result import analyze
    from rlscope.trace.reader import load_trace
    from rlscope.viz import chrome, html

    trace = load_trace(mangled_trace)
    assert {FILL, ADD} <= set(trace.processes[0].names)  # the trace as recorded
    rows = {r["kernel"]: r for r in kernel_table(trace).to_pylist()}
    assert rows[FILL_READABLE]["mangled"] == FILL and rows[ADD_READABLE]["mangled"] == ADD

    result = analyze(mangled_trace)
    page = html.render(result)
    assert f"title='{ADD}'>{ADD_READABLE}</td>" in page  # readable, the mangled name on hover
    assert "add_kernel(float*, float*, float*, int)" in page

    events = json.loads(json.dumps(chrome.render(result)))["traceEvents"]
    kernels = {e["name"]: e["args"] for e in events if e.get("cat") == "kernel"}
    assert kernels[ADD_READABLE]["mangled"] == ADD and kernels[FILL_READABLE]["mangled"] == FILL
