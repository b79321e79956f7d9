"""The GPUs' occupancy limits and the host's CPU count, recorded in the trace at session start.

Read through the CUDA driver (``cuDeviceGetAttribute`` over ctypes: no torch, no CUDA context), so
that the occupancy and co-location figures (rlscope/analysis/occupancy.py, sharing.py) can be
computed later on a machine without a GPU. Any failure gives the host part alone: profiling goes on.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any

from rlscope.trace import schema as S

# CUdevice_attribute values (cuda.h)
ATTRIBUTES = {
    "max_threads_per_block": 1,
    "max_smem_per_block": 8,
    "warp_size": 10,
    "regs_per_block": 12,
    "sm_count": 16,
    "max_threads_per_sm": 39,
    "cc_major": 75,
    "cc_minor": 76,
    "smem_per_sm": 81,
    "regs_per_sm": 82,
    "max_smem_per_block_optin": 97,
    "max_blocks_per_sm": 106,
    "reserved_smem_per_block": 111,
}


def host_cpus() -> int:
    """CPUs this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def query_devices() -> list[dict[str, Any]]:
    """Each visible GPU's limits (name, total memory, the ATTRIBUTES); [] without a driver."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    if cuda.cuInit(0) != 0:
        return []
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    out = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            continue
        info: dict[str, Any] = {"index": ordinal}
        name = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(name, 256, dev) == 0:
            info["name"] = name.value.decode(errors="replace")
        total = ctypes.c_size_t(0)
        if cuda.cuDeviceTotalMem_v2(ctypes.byref(total), dev) == 0:
            info["total_memory"] = int(total.value)
        for key, attr in ATTRIBUTES.items():
            value = ctypes.c_int(0)
            if cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, dev) == 0:
                info[key] = int(value.value)
        out.append(info)
    return out


def devices_metadata() -> dict[str, str]:
    """``{rlscope.devices: JSON}`` for a collector file's schema metadata; never raises."""
    try:
        devices = query_devices()
    except Exception:  # a driver oddity must not stop GPU tracing
        devices = []
    return {S.DEVICES_METADATA_KEY: json.dumps({"host_cpus": host_cpus(), "devices": devices})}
