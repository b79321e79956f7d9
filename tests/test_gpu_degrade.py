"""GPU collection degrades, never fails: each failure simulated on a CPU machine."""

from __future__ import annotations

import sys
import types

import pytest

import rlscope
from rlscope.collectors import gpu as gpu_mod
from rlscope.errors import RLScopeError
from tests.conftest import summary_of


def _run(tmp_path, **options):
    with rlscope.profile(tmp_path / "t", backend=False, **options), rlscope.scope("work"):
        pass
    return summary_of(tmp_path / "t")


def _one_line_warnings(err: str) -> list[str]:
    lines = [ln for ln in err.splitlines() if ln.startswith("rlscope: warning:")]
    assert "Traceback" not in err
    return lines


def test_no_cuda_driver(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpu_mod, "cuda_driver_present", lambda: False)
    s = _run(tmp_path)
    assert "work" in s["operations"]
    (w,) = _one_line_warnings(capsys.readouterr().err)
    assert "no CUDA driver" in w


def _no_native(monkeypatch):
    from rlscope.collectors import cupti_native
    from rlscope.collectors.cupti_gpu import CuptiUnavailable

    def refuse():
        raise CuptiUnavailable("no C compiler (simulated)")

    monkeypatch.setattr(cupti_native, "build", refuse)


def test_cupti_python_missing(tmp_path, capsys, monkeypatch):
    _no_native(monkeypatch)
    monkeypatch.setattr(gpu_mod, "cuda_driver_present", lambda: True)
    monkeypatch.setitem(sys.modules, "cupti", None)  # import fails
    monkeypatch.setitem(sys.modules, "pynvml", None)
    s = _run(tmp_path, gpu="cupti")
    assert "work" in s["operations"] and s["gpu_bound_s"] == 0
    warnings = _one_line_warnings(capsys.readouterr().err)
    assert any(
        w.startswith("rlscope: warning: GPU tracing off:") and "cupti-python not usable" in w
        for w in warnings
    )
    assert any("NVML sampling off: nvidia-ml-py is not installed" in w for w in warnings)


def test_cupti_refused(tmp_path, capsys, monkeypatch):
    class Refused(Exception):
        pass

    def enable(kind):
        raise Refused("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")

    fake = types.SimpleNamespace(
        ActivityKind=types.SimpleNamespace(CONCURRENT_KERNEL=10, MEMCPY=1, MEMSET=2, RUNTIME=5, DRIVER=4),
        activity_register_callbacks=lambda req, done: None,
        activity_enable=enable,
        activity_disable=lambda kind: None,
    )
    pkg = types.ModuleType("cupti")
    pkg.cupti = fake
    _no_native(monkeypatch)
    monkeypatch.setattr(gpu_mod, "cuda_driver_present", lambda: True)
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    s = _run(tmp_path, gpu="cupti")
    assert "work" in s["operations"]
    warnings = _one_line_warnings(capsys.readouterr().err)
    assert any("CUPTI refused" in w and "INSUFFICIENT_PRIVILEGES" in w for w in warnings)


def test_kineto_with_cpu_only_torch(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(gpu_mod, "cuda_driver_present", lambda: True)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    s = _run(tmp_path)  # gpu="auto" picks Kineto when torch is installed
    assert "work" in s["operations"]
    warnings = _one_line_warnings(capsys.readouterr().err)
    assert any("GPU tracing off: torch sees no CUDA device" in w for w in warnings)


def test_nvml_without_driver(tmp_path, capsys, monkeypatch):
    class NVMLError(Exception):
        pass

    def init():
        raise NVMLError("Driver Not Loaded")

    fake = types.SimpleNamespace(nvmlInit=init)
    monkeypatch.setattr(gpu_mod, "cuda_driver_present", lambda: True)
    monkeypatch.setitem(sys.modules, "cupti", None)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    _run(tmp_path, gpu="cupti")
    warnings = _one_line_warnings(capsys.readouterr().err)
    assert any("NVML sampling off: NVML not available (Driver Not Loaded)" in w for w in warnings)


def test_gpu_off_and_bad_mode(tmp_path, capsys):
    _run(tmp_path, gpu=False)
    assert _one_line_warnings(capsys.readouterr().err) == []
    with pytest.raises(RLScopeError, match="gpu must be one of"):
        rlscope.profile(tmp_path / "x", gpu="bogus")
    assert rlscope.session.active_session() is None


def test_native_cupti_consumer_builds_and_refuses_cleanly(tmp_path, monkeypatch):
    """Where CUPTI headers exist the C consumer compiles; with no GPU its start is a clean refusal."""
    from rlscope.collectors import cupti_native
    from rlscope.collectors.cupti_gpu import CuptiUnavailable

    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    try:
        so = cupti_native.build()
    except CuptiUnavailable as e:
        pytest.skip(f"no CUPTI toolchain here: {e}")
    assert so.exists() and so.parent == tmp_path / "cache" / "build"
    lib = __import__("ctypes").CDLL(str(so))
    lib.rl_row_size.restype = __import__("ctypes").c_size_t
    assert lib.rl_row_size() == cupti_native.ROW.itemsize
    if not gpu_mod.cuda_driver_present():
        sess = rlscope.profile(tmp_path / "t", backend=False, gpu=False)
        with sess, pytest.raises(CuptiUnavailable, match="CUPTI"):
            cupti_native.NativeCuptiCollector(sess).start()
