"""Per operation, what its CUDA API calls did: launches, waits for the device, device->host and pageable
copies, and how long the kernels they launched ran.

The advice rules (:mod:`rlscope.analysis.advice`) need this beyond the summary's category times: the
summary says an operation spent 0.4 s in ``cuda_api``, not whether that went to launching kernels or to
waiting for them. A runtime call and the driver calls nested in it count once, as the outermost call
(its time is theirs); a call *launched* a record when CUPTI's correlation id joins them, so launches and
copies are told apart by what they did, not by API names (which the cupti-python collector does not
record). Synchronizing calls are named ones (``SYNC_APIS``) and calls that launched a device->host copy
(``tensor.cpu()``, ``.item()``: torch copies, then waits).

Figures are raw and cover the calls GPU tracing saw (full windows only, when the collectors alternate):
the rules take ratios and per-call counts from here and seconds from the summary.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import numpy as np

from rlscope import categories
from rlscope.analysis import gpu
from rlscope.categories import UNANNOTATED

if TYPE_CHECKING:
    from rlscope.trace.reader import ProcessTrace

__all__ = ["SHORT_KERNEL_NS", "SYNC_APIS", "OpGpuCalls", "api_base_name", "merge", "process_gpu_calls"]

SHORT_KERNEL_NS = 5_000
"""A kernel shorter than this is "short": launching one costs the CPU about as long (cudaLaunchKernel takes
2-5 µs of CPU time on current drivers), so an operation made of them cannot keep the GPU busy."""

SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuMemcpyDtoH",
    }
)
"""CUDA API functions that block the calling thread until the device has caught up (without the ``_vNNNN``
suffix CUPTI's names carry)."""


@dataclasses.dataclass
class OpGpuCalls:
    """One operation's CUDA API calls and the GPU work they launched (raw; traced calls only)."""

    instances: int = 0  # operation instances that made at least one CUDA API call
    api_calls: int = 0  # outermost API calls
    api_s: float = 0.0
    launch_calls: int = 0  # calls that launched at least one kernel
    launch_s: float = 0.0
    sync_calls: int = 0  # calls that waited for the device (SYNC_APIS, or launched a device->host copy)
    sync_s: float = 0.0
    kernels: int = 0
    kernel_s: float = 0.0
    short_kernels: int = 0  # shorter than SHORT_KERNEL_NS
    short_kernel_s: float = 0.0
    dtoh_copies: int = 0
    dtoh_bytes: int = 0
    pageable_copies: int = 0  # host<->device copies from or to pageable host memory
    pageable_bytes: int = 0
    pageable_copy_s: float = 0.0  # their time on the GPU
    pageable_api_s: float = 0.0  # the time of the API calls that launched them
    sync_names: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # name -> [calls, s]

    def add(self, other: OpGpuCalls) -> None:
        for f in dataclasses.fields(self):
            if f.name != "sync_names":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for name, (n, s) in other.sync_names.items():
            mine = self.sync_names.setdefault(name, [0, 0.0])
            mine[0] += n
            mine[1] += s


GpuCalls = dict[str, OpGpuCalls]  # operation name -> its calls


_VERSION = re.compile(r"_v\d+$")


def api_base_name(name: str) -> str:
    """``cudaStreamSynchronize_v3020`` -> ``cudaStreamSynchronize`` (CUPTI names carry the API version)."""
    return _VERSION.sub("", name)


def _nesting(api: gpu.ApiCalls) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group of each call, its outermost call, the group's end): calls nested in another call on the same
    thread (a runtime call's driver calls) join the outermost one's group."""
    order = np.lexsort((-api.end, api.start, api.thread))
    t, s, e = api.thread[order], api.start[order], api.end[order]
    new_thread = np.ones(len(t), bool)
    new_thread[1:] = t[1:] != t[:-1]
    # running max of end within a thread (as gpu.union_per_thread): a call starting at or past it is outer
    offset = np.cumsum(new_thread) * (int(e.max()) - int(s.min()) + 1)
    reach = np.maximum.accumulate(e + offset) - offset
    new = new_thread.copy()
    new[1:] |= s[1:] >= reach[:-1]
    group_sorted = np.cumsum(new) - 1
    group = np.empty(len(t), np.int64)
    group[order] = group_sorted
    outer = order[new]
    last = np.append(np.flatnonzero(new)[1:] - 1, len(t) - 1)
    return group, outer, reach[last]


def process_gpu_calls(proc: ProcessTrace, joined: gpu.JoinedTimeline | None = None) -> GpuCalls:
    """Per operation name, the :class:`OpGpuCalls` of one process ({} without CUDA API records)."""
    tl, api, recs = joined if joined is not None else gpu.timeline_with_gpu(proc)
    if api is None or recs is None or len(api.start) == 0 or api.name is None:
        return {}
    group, outer, group_end = _nesting(api)
    ngroups = len(outer)
    dur_s = (group_end - api.start[outer]).astype(np.float64) / 1e9

    names = {int(i): proc.name(int(i)) for i in np.unique(np.concatenate([api.name, recs.name]))}
    base = {i: api_base_name(n) for i, n in names.items()}
    sync_named = np.array([base[int(i)] in SYNC_APIS for i in api.name], bool)
    g_sync_named = np.zeros(ngroups, bool)
    np.logical_or.at(g_sync_named, group, sync_named)
    # the name a group is listed under: the outermost call's, or a nested synchronizing call's when
    # the outermost is not one (a driver synchronize inside a runtime call of another name)
    g_name = api.name[outer].copy()
    inner_sync = sync_named & ~sync_named[outer][group]
    g_name[group[inner_sync]] = api.name[inner_sync]

    idx, found = gpu.launching_call(api, recs)
    rec_group = np.where(found, group[idx], -1)
    kernel = recs.category == categories.GPU_KERNEL
    copy = recs.category == categories.GPU_MEMCPY
    dtoh = copy & np.array([("DtoH" in names[int(i)]) for i in recs.name], bool)
    pageable = copy & np.array([("pageable" in names[int(i)].lower()) for i in recs.name], bool)

    def launched(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(ngroups, bool)
        out[rec_group[mask & found]] = True
        return out

    g_launch, g_dtoh, g_pageable = launched(kernel), launched(dtoh), launched(pageable)
    g_sync = g_sync_named | g_dtoh

    inst, _ = gpu.state_at(tl, api.thread[outer], api.start[outer])
    g_op = np.where(inst >= 0, np.append(tl.inst_name, -1)[inst], -1)
    op_names = {int(k): (UNANNOTATED if k < 0 else proc.name(int(k))) for k in np.unique(g_op)}

    out: GpuCalls = {}

    def entry(name_id: int) -> OpGpuCalls:
        return out.setdefault(op_names[name_id], OpGpuCalls())

    for k in op_names:
        sel = g_op == k
        e = entry(k)
        if k >= 0:
            e.instances += len(np.unique(inst[sel]))
        e.api_calls += int(sel.sum())
        e.api_s += float(dur_s[sel].sum())
        e.launch_calls += int((sel & g_launch).sum())
        e.launch_s += float(dur_s[sel & g_launch].sum())
        e.sync_calls += int((sel & g_sync).sum())
        e.sync_s += float(dur_s[sel & g_sync].sum())
        e.pageable_api_s += float(dur_s[sel & g_pageable].sum())
        for nid in np.unique(g_name[sel & g_sync]).tolist():
            m = sel & g_sync & (g_name == nid)
            got = e.sync_names.setdefault(base[nid], [0, 0.0])
            got[0] += int(m.sum())
            got[1] += float(dur_s[m].sum())

    rec_op = np.where(rec_group >= 0, g_op[np.maximum(rec_group, 0)], -1)
    rec_s = (recs.end - recs.start).astype(np.float64) / 1e9
    nbytes = recs.bytes if recs.bytes is not None else np.zeros(len(rec_s), np.int64)
    for k in np.unique(rec_op).tolist():
        if k not in op_names:
            op_names[k] = UNANNOTATED if k < 0 else proc.name(k)
        sel = rec_op == k
        e = entry(k)
        ks = sel & kernel
        short = ks & ((recs.end - recs.start) < SHORT_KERNEL_NS)
        e.kernels += int(ks.sum())
        e.kernel_s += float(rec_s[ks].sum())
        e.short_kernels += int(short.sum())
        e.short_kernel_s += float(rec_s[short].sum())
        e.dtoh_copies += int((sel & dtoh).sum())
        e.dtoh_bytes += int(nbytes[sel & dtoh].sum())
        e.pageable_copies += int((sel & pageable).sum())
        e.pageable_bytes += int(nbytes[sel & pageable].sum())
        e.pageable_copy_s += float(rec_s[sel & pageable].sum())
    return out


def merge(parts: list[GpuCalls]) -> GpuCalls:
    """The run's calls per operation from each process's (:func:`process_gpu_calls`), in trace order."""
    out: GpuCalls = {}
    for part in parts:
        for name, calls in part.items():
            out.setdefault(name, OpGpuCalls()).add(calls)
    return out
