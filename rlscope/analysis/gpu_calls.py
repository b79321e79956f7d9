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
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from rlscope import categories
from rlscope.analysis import gpu
from rlscope.categories import UNANNOTATED
from rlscope.keys import factorize

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
    # running max of end within a thread (as spans.union_per_thread): a call starting at or past it is outer
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


def _dense(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct ids, index of each into them) of small non-negative-or--1 ids (name ids), without a sort:
    a trace has few names and many records."""
    if len(ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    present = np.bincount(ids + 1) > 0
    uniq = np.flatnonzero(present) - 1
    index = np.cumsum(present) - 1
    return uniq, index[ids + 1]


def _flag(ids: np.ndarray, test: Callable[[int], bool]) -> np.ndarray:
    """``test`` of each name id, asked once per distinct id."""
    uniq, index = _dense(ids)
    return np.array([test(int(u)) for u in uniq], bool)[index] if len(ids) else np.zeros(0, bool)


def process_gpu_calls(proc: ProcessTrace, joined: gpu.JoinedTimeline | None = None) -> GpuCalls:
    """Per operation name, the :class:`OpGpuCalls` of one process ({} without CUDA API records)."""
    tl, api, recs = joined if joined is not None else gpu.timeline_with_gpu(proc)
    if api is None or recs is None or len(api.start) == 0 or api.name is None:
        return {}
    group, outer, group_end = _nesting(api)
    ngroups = len(outer)
    dur_s = (group_end - api.start[outer]).astype(np.float64) / 1e9

    def base(i: int) -> str:
        return api_base_name(proc.name(i))

    sync_named = _flag(api.name, lambda i: base(i) in SYNC_APIS)
    g_sync_named = np.bincount(group, weights=sync_named, minlength=ngroups) > 0
    # the name a group is listed under: the outermost call's, or a nested synchronizing call's when
    # the outermost is not one (a driver synchronize inside a runtime call of another name)
    g_name = api.name[outer].copy()
    inner_sync = sync_named & ~sync_named[outer][group]
    g_name[group[inner_sync]] = api.name[inner_sync]

    idx, found = gpu.launching_call(api, recs)
    rec_group = np.where(found, group[idx], -1)
    kernel = recs.category == categories.GPU_KERNEL
    copy = recs.category == categories.GPU_MEMCPY
    dtoh = copy & _flag(recs.name, lambda i: "DtoH" in proc.name(i))
    pageable = copy & _flag(recs.name, lambda i: "pageable" in proc.name(i).lower())

    def launched(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(ngroups, bool)
        out[rec_group[mask & found]] = True
        return out

    g_launch, g_pageable = launched(kernel), launched(pageable)
    g_sync = g_sync_named | launched(dtoh)

    # each group's operation (innermost on its thread as the outermost call started), as a dense index
    inst, _ = gpu.state_at(tl, api.thread[outer], api.start[outer])
    g_op_name = np.where(inst >= 0, np.append(tl.inst_name, -1)[inst], -1)
    rec_op_name = np.where(rec_group >= 0, g_op_name[np.maximum(rec_group, 0)], -1)
    op_ids, dense = _dense(np.concatenate([g_op_name, rec_op_name]))
    g_op, rec_op = dense[:ngroups], dense[ngroups:]
    n = len(op_ids)

    def per_op(index: np.ndarray, mask: np.ndarray, weights: np.ndarray | None = None) -> list[float]:
        w = mask.astype(np.float64) if weights is None else np.where(mask, weights, 0.0)
        return np.bincount(index, weights=w, minlength=n).tolist()

    everything = np.ones(ngroups, bool)
    api_calls, api_s = per_op(g_op, everything), per_op(g_op, everything, dur_s)
    launch_calls, launch_s = per_op(g_op, g_launch), per_op(g_op, g_launch, dur_s)
    sync_calls, sync_s = per_op(g_op, g_sync), per_op(g_op, g_sync, dur_s)
    pageable_api_s = per_op(g_op, g_pageable, dur_s)
    # instances that made a call, counted per operation (an instance has one operation)
    seen = np.zeros(len(tl.inst_name), bool)
    seen[inst[inst >= 0]] = True
    seen_op = np.searchsorted(op_ids, tl.inst_name[seen])  # op_ids is sorted and holds every one
    instances = np.bincount(seen_op, minlength=n).tolist()

    rec_ns = (recs.end - recs.start).astype(np.float64)
    rec_s = rec_ns / 1e9
    nbytes = (recs.bytes if recs.bytes is not None else np.zeros(len(rec_s), np.int64)).astype(np.float64)
    short = kernel & (rec_ns < SHORT_KERNEL_NS)
    kernels, kernel_s = per_op(rec_op, kernel), per_op(rec_op, kernel, rec_s)
    short_kernels, short_kernel_s = per_op(rec_op, short), per_op(rec_op, short, rec_s)
    dtoh_copies, dtoh_bytes = per_op(rec_op, dtoh), per_op(rec_op, dtoh, nbytes)
    pageable_copies, pageable_bytes = per_op(rec_op, pageable), per_op(rec_op, pageable, nbytes)
    pageable_copy_s = per_op(rec_op, pageable, rec_s)

    out: GpuCalls = {}
    for k, name_id in enumerate(op_ids.tolist()):
        out[UNANNOTATED if name_id < 0 else proc.name(name_id)] = OpGpuCalls(
            instances=int(instances[k]) if name_id >= 0 else 0,
            api_calls=int(api_calls[k]),
            api_s=api_s[k],
            launch_calls=int(launch_calls[k]),
            launch_s=launch_s[k],
            sync_calls=int(sync_calls[k]),
            sync_s=sync_s[k],
            kernels=int(kernels[k]),
            kernel_s=kernel_s[k],
            short_kernels=int(short_kernels[k]),
            short_kernel_s=short_kernel_s[k],
            dtoh_copies=int(dtoh_copies[k]),
            dtoh_bytes=int(dtoh_bytes[k]),
            pageable_copies=int(pageable_copies[k]),
            pageable_bytes=int(pageable_bytes[k]),
            pageable_copy_s=pageable_copy_s[k],
            pageable_api_s=pageable_api_s[k],
        )
    # the synchronizing calls by name, per operation (few distinct pairs)
    sel = np.flatnonzero(g_sync)
    width = int(g_name.max()) + 2
    pair, index = factorize(g_op[sel] * width + (g_name[sel] + 1))
    calls = np.bincount(index.reshape(-1), minlength=len(pair))
    secs = np.bincount(index.reshape(-1), weights=dur_s[sel], minlength=len(pair))
    for key, c, t in zip(pair.tolist(), calls.tolist(), secs.tolist(), strict=True):
        k, nid = divmod(key, width)
        name = UNANNOTATED if op_ids[k] < 0 else proc.name(int(op_ids[k]))
        got = out[name].sync_names.setdefault(base(nid - 1), [0, 0.0])  # names differing in version add up
        got[0] += c
        got[1] += t
    return out


def merge(parts: list[GpuCalls]) -> GpuCalls:
    """The run's calls per operation from each process's (:func:`process_gpu_calls`), in trace order."""
    out: GpuCalls = {}
    for part in parts:
        for name, calls in part.items():
            out.setdefault(name, OpGpuCalls()).add(calls)
    return out
