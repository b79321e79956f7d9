"""A session's options, checked once: what ``rlscope.profile`` and ``rlscope run`` accept."""

from __future__ import annotations

import math
from typing import Any

from rlscope.collectors.gpu import GPU_MODES
from rlscope.errors import RLScopeError
from rlscope.trace.detail import DetailSchedule

GPU_OPTIONS = (False, None, "off", *GPU_MODES)


def session_options(
    *,
    flush_interval: float,
    backend: bool,
    gpu: str | bool | None,
    nvtx: bool,
    nvml_hz: float,
    windows: bool,
    window_s: float,
    full_share: float,
    auto_ops: bool,
    detail: str | DetailSchedule | None,
    stack_hz: float = 0.0,
) -> tuple[dict[str, Any], DetailSchedule]:
    """The options as the trace's metadata records them, and the detail schedule (with windows off,
    every event for the whole run). Raises RLScopeError on a value the session cannot run with."""
    if flush_interval <= 0:
        raise RLScopeError(f"flush_interval must be > 0, got {flush_interval}")
    if gpu not in GPU_OPTIONS:
        raise RLScopeError(f"gpu must be one of {', '.join(GPU_MODES)} or False, got {gpu!r}")
    if window_s <= 0:
        raise RLScopeError(f"window_s must be > 0, got {window_s}")
    if not 0 < full_share < 1:
        raise RLScopeError(f"full_share must be between 0 and 1, got {full_share}")
    if not (stack_hz >= 0 and math.isfinite(stack_hz)):
        raise RLScopeError(f"stack_hz must be >= 0 (0: no stack samples), got {stack_hz}")
    if nvml_hz < 0:
        raise RLScopeError(f"nvml_hz must be >= 0 (0: no NVML sampling), got {nvml_hz}")
    schedule = DetailSchedule.parse(detail if windows else "all")
    options = {
        "flush_interval": flush_interval,
        "backend": backend,
        "gpu": gpu,
        "nvtx": nvtx,
        "nvml_hz": nvml_hz,
        "windows": bool(windows),
        "window_s": window_s,
        "full_share": full_share,
        "auto_ops": bool(auto_ops),
        "detail": schedule.to_env(),
        "stack_hz": stack_hz,
    }
    return options, schedule
