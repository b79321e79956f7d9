"""NVML sampler: GPU utilization, memory used, SM clock and power, on a background thread.

NVML's ``utilization.gpu`` is the share of its own sample period (1/6 s to 1 s) during which *any*
kernel ran; the analyzer puts it next to the GPU-bound time measured from the kernel trace, which
is what shows how much nvidia-smi-style utilization overstates GPU use.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from rlscope.trace import schema as S


class NvmlUnavailable(RuntimeError):
    """nvidia-ml-py is missing, or NVML has no driver / no GPU to talk to."""


class NvmlSampler:
    def __init__(self, session: Any, hz: float = 10.0) -> None:
        if hz <= 0:
            raise ValueError(f"NVML sampling rate must be > 0 Hz, got {hz}")
        self.session = session
        self.period = 1.0 / hz
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> NvmlSampler:
        try:
            import pynvml
        except ImportError:
            raise NvmlUnavailable("nvidia-ml-py is not installed") from None
        try:
            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as e:  # pynvml.NVMLError: no driver, no library
            raise NvmlUnavailable(f"NVML not available ({e})") from None
        if not self._handles:
            raise NvmlUnavailable("NVML sees no GPU")
        self._nvml = pynvml
        self.rows = self.session.writer.add_stream(S.NVML_FILE, S.columns_schema(S.NVML_COLUMNS_DOC))
        self._thread = threading.Thread(target=self._run, name="rlscope-nvml", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        nv = self._nvml
        for i, h in enumerate(self._handles):
            ts = time.perf_counter_ns()
            try:
                u = nv.nvmlDeviceGetUtilizationRates(h)
                mem = nv.nvmlDeviceGetMemoryInfo(h).used
                clock = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
                power = nv.nvmlDeviceGetPowerUsage(h)
            except Exception:  # a query this GPU does not support: skip the sample, keep sampling
                continue
            self.rows.append((ts, i, u.gpu, u.memory, mem, clock, power))

    def _run(self) -> None:
        next_t = time.perf_counter()
        while not self._stop.is_set():
            self._sample()
            next_t += self.period
            self._stop.wait(max(0.0, next_t - time.perf_counter()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()

    def __repr__(self) -> str:
        return f"NvmlSampler({1 / self.period:g} Hz)"
