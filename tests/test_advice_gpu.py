"""Advice evidence from a real GPU trace: copies named with their host memory kind, device->host copies
and synchronizing calls counted per call, exactly as many as the loop made."""

from __future__ import annotations

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.analysis.gpu_calls import process_gpu_calls
from rlscope.trace.reader import load_trace

pytestmark = pytest.mark.gpu

CALLS = 200


def test_pageable_and_device_to_host_copies_counted_per_call(tmp_path, in_fresh_process):
    torch = pytest.importorskip("torch")
    if in_fresh_process():  # CUPTI to itself: after Kineto in the same process records lose their launch
        return
    pageable = torch.randn(1024, 4)
    pinned = torch.randn(1024, 4).pin_memory()
    pageable.to("cuda").sum().item()  # CUDA context and kernels loaded outside the trace
    with rlscope.profile(tmp_path / "t", windows=False, nvml_hz=0):
        for _ in range(CALLS):
            with rlscope.scope("inference"):
                x = pageable.to("cuda")  # one pageable host->device copy
                x.sum().item()  # one device->host copy, then a wait for it
            with rlscope.scope("pinned"):
                pinned.to("cuda", non_blocking=True).mul_(2)
            torch.cuda.synchronize()
    names = set(load_trace(tmp_path / "t").processes[0].names)
    assert "memcpy HtoD pageable" in names, sorted(n for n in names if "memcpy" in n)
    calls = process_gpu_calls(load_trace(tmp_path / "t").processes[0])
    inf, pin = calls["inference"], calls["pinned"]
    assert inf.instances == CALLS
    assert inf.dtoh_copies == CALLS
    # the .to() copy, and .item()'s when it reads into a pageable host scalar (torch's memcpy_and_sync)
    assert inf.pageable_copies in (CALLS, 2 * CALLS)
    assert inf.sync_calls >= CALLS  # the copy's call, and torch's stream synchronize when it makes one
    assert pin.pageable_copies == 0 and pin.dtoh_copies == 0
    advice = {(a["rule"], a["operation"]) for a in analyze(tmp_path / "t").advice}
    assert ("device_to_host_sync", "inference") in advice, advice
