"""Kernel resources and theoretical occupancy: how many of a kernel's blocks fit an SM, and why not more.

From the kernel records' launch configuration (grid, block, registers per thread, static and dynamic
shared memory; ``gpu.arrows``' optional columns) and the device limits recorded at session start
(``rlscope.devices`` metadata, collectors/device_limits.py).

Why a formula and not the driver: ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` needs the kernel's
``CUfunction``, which a trace does not have (and the analysis may run on a machine without a GPU). So
:func:`theoretical_occupancy` implements the rules of NVIDIA's occupancy calculator
(``cuda_occupancy.h``, the header-only calculator shipped with CUDA) for Volta and later, default
shared-memory carveout (the driver picks the largest one a launch needs) and no cluster launch:

- warps: ``floor(max_warps_per_sm / ceil(threads / warp_size))`` blocks;
- registers: a warp takes ``ceil(regs * warp_size, 256)`` registers, allocated in each of the SM's 4
  sub-partitions: ``floor(floor(regs_per_sm / 4 / regs_per_warp) * 4 / warps_per_block)`` blocks
  (none if ``regs_per_warp * ceil(warps, 4)`` exceeds the per-block register limit);
- shared memory: a block takes ``ceil(static + dynamic + reserved_per_block, 128)`` bytes:
  ``floor(smem_per_sm / that)`` blocks;
- the SM's maximum resident blocks.

The smallest of the four is the number of resident blocks; every resource reaching it is a limiter.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from rlscope.trace import schema as S

REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256 (sm_30 and later)
MAX_REGS_PER_THREAD = 255
LOW_FILL = 0.25  # "fills < 25% of the GPU's thread slots"
LIMITERS = ("warps", "registers", "shared_memory", "blocks")


@dataclasses.dataclass(frozen=True)
class DeviceLimits:
    """What bounds resident blocks on one SM (H100 SXM values as defaults)."""

    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    smem_per_sm: int = 233472  # 228 KB
    reserved_smem_per_block: int = 1024
    warp_size: int = 32
    sm_count: int = 132
    cc_major: int = 9
    cc_minor: int = 0

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def sub_partitions(self) -> int:
        return 2 if (self.cc_major, self.cc_minor) == (6, 0) else 4

    @property
    def smem_granularity(self) -> int:
        return 128 if self.cc_major >= 8 else 256

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceLimits:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: int(v) for k, v in d.items() if k in names})


@dataclasses.dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_block: int
    occupancy: float  # active warps / max warps per SM, 0..1
    limiters: tuple[str, ...]  # resources at the minimum (LIMITERS order)
    block_limits: dict[str, int]

    @property
    def limiter(self) -> str:
        return "+".join(self.limiters) if self.limiters else "none"


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(
    threads_per_block: int, regs_per_thread: int, smem_per_block: int, limits: DeviceLimits
) -> Occupancy:
    """Resident blocks per SM and occupancy by the occupancy calculator's rules (module docstring).

    ``smem_per_block``: static plus dynamic shared memory (the driver's reserved part is added here).
    """
    warps = max(1, -(-threads_per_block // limits.warp_size))
    big = 1 << 30
    by_warps = limits.max_warps_per_sm // warps if threads_per_block <= 1024 else 0
    if regs_per_thread <= 0:
        by_regs = big
    else:
        regs_per_warp = _round_up(regs_per_thread * limits.warp_size, REG_ALLOC_UNIT)
        assumed = regs_per_warp * _round_up(warps, limits.sub_partitions)
        if regs_per_thread > MAX_REGS_PER_THREAD or assumed > limits.regs_per_block:
            by_regs = 0
        else:
            per_partition = (limits.regs_per_sm // limits.sub_partitions) // regs_per_warp
            by_regs = per_partition * limits.sub_partitions // warps
    smem = _round_up(smem_per_block + limits.reserved_smem_per_block, limits.smem_granularity)
    by_smem = limits.smem_per_sm // smem if smem > 0 else big
    block_limits = {
        "warps": by_warps,
        "registers": by_regs,
        "shared_memory": by_smem,
        "blocks": limits.max_blocks_per_sm,
    }
    blocks = min(block_limits.values())
    limiters = tuple(k for k in LIMITERS if block_limits[k] == blocks)
    occ = blocks * warps / limits.max_warps_per_sm if limits.max_warps_per_sm else 0.0
    return Occupancy(blocks, warps, min(occ, 1.0), limiters, block_limits)


def device_limits(metadata: dict[str, str]) -> dict[int, DeviceLimits]:
    """Per device index, the limits recorded in a process's trace metadata ({} when not recorded)."""
    raw = metadata.get(S.DEVICES_METADATA_KEY)
    if not raw:
        return {}
    try:
        devices = json.loads(raw).get("devices", [])
    except (ValueError, AttributeError):
        return {}
    return {int(d.get("index", i)): DeviceLimits.from_dict(d) for i, d in enumerate(devices)}


def has_kernel_resources(gpu_table: Any) -> bool:
    return gpu_table is not None and all(c in gpu_table.column_names for c in S.GPU_KERNEL_COLUMNS)


def kernel_occupancy(
    kernels: dict[str, np.ndarray], limits: dict[int, DeviceLimits]
) -> dict[str, np.ndarray]:
    """Per kernel record: occupancy, blocks per SM, limiter and fill of the GPU's thread slots.

    ``kernels``: arrays ``device, threads, registers, smem, blocks`` (grid size in blocks). Fill is
    ``min(grid blocks, resident blocks per SM x SMs) x warps per block / (SMs x max warps per SM)``:
    the share of the whole GPU's warp slots the launch can occupy. One calculator call per distinct
    configuration (few in practice).
    """
    n = len(kernels["threads"])
    occ = np.zeros(n)
    per_sm = np.zeros(n, np.int64)
    fill = np.zeros(n)
    limiter = np.full(n, "unknown", dtype=object)
    key = np.stack(
        [kernels["device"], kernels["threads"], kernels["registers"], kernels["smem"]], axis=1
    ).astype(np.int64)
    if n == 0:
        return {"occupancy": occ, "blocks_per_sm": per_sm, "limiter": limiter, "fill": fill}
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    for i, (dev, threads, regs, smem) in enumerate(uniq.tolist()):
        lim = limits.get(int(dev))
        if lim is None or threads <= 0:
            continue
        o = theoretical_occupancy(int(threads), int(regs), int(smem), lim)
        rows = inv == i
        occ[rows] = o.occupancy
        per_sm[rows] = o.blocks_per_sm
        limiter[rows] = o.limiter
        resident = np.minimum(kernels["blocks"][rows], o.blocks_per_sm * lim.sm_count)
        fill[rows] = resident * o.warps_per_block / (lim.sm_count * lim.max_warps_per_sm)
    return {"occupancy": occ, "blocks_per_sm": per_sm, "limiter": limiter, "fill": fill}


TOP_KERNELS = 10


def occupancy_section(procs: list[tuple[dict[str, np.ndarray], dict[int, DeviceLimits], list[str]]]) -> dict:
    """Per operation: its kernels by GPU time with occupancy and limiter, and the share of its kernel
    time in launches that fill < 25% of the GPU's warp slots. ``procs``: (kernels of
    :func:`rlscope.analysis.kernel_lengths.process_kernels`, device limits, names) per process.
    ``{"note": ...}`` when the trace lacks launch resources or device limits.
    """
    groups: dict[tuple, list[float]] = {}
    info: dict[tuple, dict[str, Any]] = {}
    total_by_limiter: dict[str, float] = {}
    low, total = 0.0, 0.0
    device: dict[str, Any] = {}
    for k, limits, names in procs:
        if "threads" not in k or not limits or len(k["start"]) == 0:
            continue
        device = device or dataclasses.asdict(next(iter(limits.values())))
        occ = kernel_occupancy(k, limits)
        dur = (k["end"] - k["start"]).astype(np.float64) / 1e9
        total += float(dur.sum())
        low += float(dur[occ["fill"] < LOW_FILL].sum())
        for lim in set(occ["limiter"].tolist()):
            total_by_limiter[lim] = total_by_limiter.get(lim, 0.0) + float(dur[occ["limiter"] == lim].sum())
        for i in range(len(dur)):
            key = (
                str(k["operation"][i]),
                names[k["name"][i]] if 0 <= k["name"][i] < len(names) else "<kernel>",
                int(k["threads"][i]),
                int(k["blocks"][i]),
                int(k["registers"][i]),
                int(k["smem"][i]),
            )
            g = groups.setdefault(key, [0, 0.0, 0.0])
            g[0] += 1
            g[1] += dur[i]
            g[2] += dur[i] if occ["fill"][i] < LOW_FILL else 0.0
            if key not in info:
                info[key] = {
                    "occupancy": float(occ["occupancy"][i]),
                    "blocks_per_sm": int(occ["blocks_per_sm"][i]),
                    "limiter": str(occ["limiter"][i]),
                    "fill": float(occ["fill"][i]),
                }
    if total == 0:
        return {"note": "no kernel launch resources in this trace (recorded by the native CUPTI collector)"}
    ops: dict[str, dict[str, Any]] = {}
    for key, (count, secs, low_s) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        op, kname, threads, blocks, regs, smem = key
        e = ops.setdefault(op, {"gpu_time_s": 0.0, "low_fill_s": 0.0, "kernels": []})
        e["gpu_time_s"] += secs
        e["low_fill_s"] += low_s
        if len(e["kernels"]) < TOP_KERNELS:
            e["kernels"].append(
                {
                    "kernel": kname,
                    "count": count,
                    "total_s": secs,
                    "threads": threads,
                    "blocks": blocks,
                    "registers": regs,
                    "smem": smem,
                    **info[key],
                }
            )
    for e in ops.values():
        e["low_fill_share"] = e.pop("low_fill_s") / e["gpu_time_s"] if e["gpu_time_s"] > 0 else 0.0
    return {
        "device": device,
        "low_fill_threshold": LOW_FILL,
        "low_fill_share": low / total,
        "time_by_limiter_s": dict(sorted(total_by_limiter.items(), key=lambda kv: -kv[1])),
        "operations": dict(sorted(ops.items(), key=lambda kv: -kv[1]["gpu_time_s"])),
    }
