"""Choosing and starting the GPU collectors; anything missing degrades to a CPU-only trace.

``gpu="auto"`` (default) traces GPU activity through rlscope's native CUPTI consumer (built on
first use; cheapest), else Kineto (torch.profiler) when torch is installed, else cupti-python, and
samples NVML. ``gpu="cupti"`` means native CUPTI, else cupti-python; ``gpu="kineto"`` forces
Kineto; ``gpu=False`` turns GPU collection off. Every part that cannot start prints one line saying what
was turned off and why; the user's job and the CPU trace go on.
"""

from __future__ import annotations

import ctypes
import importlib.util
from collections.abc import Sequence
from typing import Any

from rlscope import _imports
from rlscope.errors import RLScopeError, warn_once

GPU_MODES = ("auto", "cupti", "kineto")


def cuda_driver_present() -> bool:
    """Whether the CUDA driver library loads (no torch, no CUDA context)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def start_gpu_collectors(session: Any) -> list[Any]:
    """Start what the session's ``gpu`` option asks for; return the collectors that started."""
    mode = session.options.get("gpu", "auto")
    if mode in (False, None, "off"):
        return []
    if mode not in GPU_MODES:
        raise RLScopeError(f"gpu must be one of {', '.join(GPU_MODES)} or False, got {mode!r}")
    if not cuda_driver_present():
        warn_once("GPU tracing off: no CUDA driver (libcuda.so.1) on this machine; CPU-only trace")
        return []
    started: list[Any] = []
    from rlscope.collectors.cupti_gpu import CuptiCollector, CuptiUnavailable

    native_error = None
    if mode in ("auto", "cupti"):
        # rlscope's native consumer first: it is the cheapest per record (see cupti_native.c)
        from rlscope.collectors.cupti_native import NativeCuptiCollector

        try:
            started.append(NativeCuptiCollector(session).start())
        except CuptiUnavailable as e:
            native_error = e
            warn_once(f"native CUPTI consumer not used ({e}); falling back")
    if not started and mode == "auto" and importlib.util.find_spec("torch") is not None:
        mode = "kineto"
    if not started and mode == "kineto":
        from rlscope.collectors.kineto_gpu import KinetoCollector

        started.append(KinetoCollector(session, warn=warn_once).start())
    elif not started:
        try:
            started.append(CuptiCollector(session).start())
        except CuptiUnavailable as e:
            why = f"{native_error}; {e}" if native_error else str(e)
            warn_once(f"GPU tracing off: {why}; install rlscope[cupti] matching your CUDA runtime")
    hz = session.options.get("nvml_hz", 10.0)
    if hz:
        from rlscope.collectors.nvml import NvmlSampler, NvmlUnavailable

        try:
            started.append(NvmlSampler(session, hz).start())
        except NvmlUnavailable as e:
            warn_once(f"NVML sampling off: {e}")
    return started


def start_for(session: Any, started: Sequence[Any]) -> list[Any] | None:
    """The registry's factory (rlscope/collectors/registry.py): the GPU collectors, and NVTX ranges
    around every scope once torch is imported when the ``nvtx`` option asks for them."""
    collectors = start_gpu_collectors(session)
    # NVTX ranges are off by default: the analysis never reads them, Nsight cannot trace a process
    # rlscope's own CUPTI subscriber holds, and they cost each scope ~1.2 us (H200, a scope pair
    # timed with and without them), paid in light windows too, where the windows cannot see it
    if collectors and session.options.get("nvtx"):
        _imports.when_imported("torch", lambda torch: _start_nvtx(session, torch))
    return collectors or None


def _start_nvtx(session: Any, torch: Any) -> None:
    """Every scope also opens an NVTX range of its name, so Nsight Systems shows the operations."""
    from rlscope import annotate

    if annotate._active is session and torch.cuda.is_available():
        session.nvtx_push, session.nvtx_pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
        if session._lean is not None:
            session._lean.set_nvtx(session.nvtx_push, session.nvtx_pop)
