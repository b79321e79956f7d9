"""Can this job share its GPU, and with how many copies of itself? The summary's ``sharing`` figures.

Gathers the GPU memory per operation (:mod:`~rlscope.analysis.memory`), kernel resources and
occupancy (:mod:`~rlscope.analysis.occupancy`) and the kernel-length distribution
(:mod:`~rlscope.analysis.kernel_lengths`), and from them estimates what k copies of the job on one
GPU would need and how much each would slow down (:func:`predict`; the model is docs/sharing.md).
``rlscope-analyze share`` prints the estimate; ``rlscope share-check`` measures it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from rlscope.analysis import gpu
from rlscope.analysis.kernel_lengths import kernel_lengths, process_kernels
from rlscope.analysis.memory import memory_section, process_memory
from rlscope.analysis.occupancy import device_limits, occupancy_section
from rlscope.overhead.correct import window_spans
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, Trace

NO_GPU_NOTE = "no GPU data in this trace (CPU-only run, or GPU tracing off): no sharing figures"
DEFAULT_CONTEXT_BYTES = 512 << 20  # a CUDA context with torch's kernels loaded, when NVML did not see it
K_VALUES = (1, 2, 4, 8, 16)
MAX_SLOWDOWN = 1.25  # "fits": each copy at most 25% slower than alone
GAP_QUANTILES = (np.arange(50) + 0.5) / 50  # the idle gaps' distribution, in 50 equal-mass points


def full_windows(proc: ProcessTrace, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the stretches with GPU tracing on (the full windows; the whole run without)."""
    ts, ends, mode = window_spans(proc.events, end)
    if not (mode == S.WINDOW_LIGHT).any():
        return np.array([start]), np.array([end])
    full = mode == S.WINDOW_FULL
    return np.clip(ts[full], start, end), np.clip(ends[full], start, end)


def _overlap(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray) -> tuple[float, np.ndarray]:
    """Total length of the sorted disjoint intervals (s, e) inside the windows (ws, we), and the
    intervals that lie wholly inside one."""
    from rlscope.analysis.gpu import covered

    inside = float((covered(s, e, we) - covered(s, e, ws)).sum())
    i = np.searchsorted(ws, s, side="right") - 1
    whole = (i >= 0) & (e <= we[np.maximum(i, 0)])
    return inside, whole


def loop_bounds(proc: ProcessTrace, start: int, end: int) -> tuple[int, int, np.ndarray]:
    """(first operation entry, last operation exit, entry times) of a process: its loop. Start-up
    (imports, CUDA's context) is in the session but not in the loop, and has almost no GPU work:
    rates over the session would dilute the loop's. Without operations, the session."""
    ev = proc.events
    kind, ts = ev.column("kind").to_numpy(), ev.column("ts_ns").to_numpy()
    begins, ends = ts[kind == S.OP_BEGIN], ts[kind == S.OP_END]
    if len(begins) == 0 or len(ends) == 0 or ends.max() <= begins.min():
        return start, end, begins
    return max(int(begins.min()), start), min(int(ends.max()), end), begins


def gpu_model(proc: ProcessTrace) -> dict[str, Any] | None:
    """GPU-bound fraction, busy periods and the idle gaps between them of one process, over its loop
    where GPU tracing was on, and the operation entries per second there (share-check scales the
    rates to the unprofiled loop with it)."""
    if proc.gpu is None or proc.gpu.num_rows == 0:
        return None
    start, end = gpu.session_bounds(proc)
    _, recs = gpu.split(proc.gpu, start, end)
    if len(recs.start) == 0:
        return None
    lo, hi, entries = loop_bounds(proc, start, end)
    s, e = gpu.busy_intervals(np.clip(recs.start, lo, hi), np.clip(recs.end, lo, hi))
    keep = e > s
    s, e = s[keep], e[keep]
    ws, we = full_windows(proc, start, end)
    ws, we = np.clip(ws, lo, hi), np.clip(we, lo, hi)
    ws, we = ws[we > ws], we[we > ws]
    traced = float((we - ws).sum())
    busy, whole = _overlap(s, e, ws, we)
    b = (e - s)[whole].astype(np.float64)
    # idle gaps before each busy period (from the previous one's end, same window): how long another
    # copy has to take the GPU over, and so how often a period needs a context switch (predict)
    w = np.flatnonzero(whole)
    nxt = w[1:][np.diff(w) == 1]
    same = np.searchsorted(ws, s[nxt], side="right") == np.searchsorted(ws, s[nxt - 1], side="right")
    gaps = (s[nxt] - e[nxt - 1])[same].astype(np.float64) / 1e3
    i = np.searchsorted(ws, entries, side="right") - 1
    in_windows = int(((i >= 0) & (entries < we[np.maximum(i, 0)])).sum()) if len(ws) else 0
    return {
        "traced_s": traced / 1e9,
        "gpu_busy_fraction": busy / traced if traced > 0 else 0.0,
        "busy_periods_per_s": len(b) / traced * 1e9 if traced > 0 else 0.0,
        "busy_period_mean_us": float(b.mean()) / 1e3 if len(b) else 0.0,
        "busy_period_residual_us": float((b**2).sum() / (2 * b.sum())) / 1e3 if b.sum() > 0 else 0.0,
        "idle_gap_quantiles_us": np.quantile(gaps, GAP_QUANTILES).tolist() if len(gaps) else [],
        "operations_per_s": in_windows / traced * 1e9 if traced > 0 else 0.0,
    }


PROFILED_RATES_NOTE = (
    "GPU rates as in the profiled run, whose CPU side tracing slows: the GPU terms are a lower bound"
    " (share-check scales them to the program's own speed)"
)
SCALED_NOTE = "GPU rates scaled to the loop run alone, unprofiled:"


def at_speed(m: dict[str, Any], operations_per_s: float) -> dict[str, Any]:
    """The inputs with the job's rates at another speed: the same work per operation entry (busy
    periods and their GPU time), its CPU gaps shrunk or stretched alike. share-check gives the
    unprofiled loop's entries per second: the profiled run's CPU side is slower, its GPU the same."""
    if not m.get("operations_per_s") or operations_per_s <= 0:
        return m
    x = operations_per_s / m["operations_per_s"]
    notes = [n for n in m.get("notes", []) if n != PROFILED_RATES_NOTE and not n.startswith(SCALED_NOTE)]
    return {
        **m,
        "notes": [*notes, f"{SCALED_NOTE} x{x * m.get('speed_vs_profiled', 1.0):.2f}"],
        "gpu_busy_fraction": m["gpu_busy_fraction"] * x,
        "busy_periods_per_s": m["busy_periods_per_s"] * x,
        "idle_gap_quantiles_us": [g / x for g in m.get("idle_gap_quantiles_us", [])],
        "operations_per_s": operations_per_s,
        "speed_vs_profiled": x * m.get("speed_vs_profiled", 1.0),
    }


def _nvml_process_bytes(proc: ProcessTrace) -> int:
    """Device memory the process added as NVML saw it (max - min of used memory); 0 without samples."""
    if proc.nvml is None or proc.nvml.num_rows < 2:
        return 0
    used = proc.nvml.column("mem_used").to_numpy()
    return int(used.max() - used.min())


@dataclasses.dataclass
class SharingPart:
    """One process's inputs to the sharing figures, computed where its events are (a worker), merged by
    :func:`sharing_from`. A figure that failed is None here and a message in ``failed``."""

    pid: int
    devices: str  # the process's device limits and host CPUs (metadata, JSON)
    nvml_bytes: int  # device memory NVML saw it add
    names: list[str]  # kernel names by id, for the occupancy table
    memory: dict[str, Any] | None  # rlscope.analysis.memory.process_memory
    kernels: dict[str, np.ndarray] | None  # its kernel records (process_kernels), None when none
    model: dict[str, Any] | None  # gpu_model
    failed: list[str]


def _attempt(failed: list[str], what: str, fn: Any, *args: Any) -> Any:
    """One figure; its failure is a note in its place (the others stay), and a summary warning."""
    try:
        return fn(*args)
    except Exception as e:
        failed.append(f"sharing figures: {what} failed: {type(e).__name__}: {e}")
        return None


def process_part(proc: ProcessTrace, joined: Any = None) -> SharingPart | None:
    """What one process adds to the sharing figures; None without GPU work or memory events."""
    has_gpu = proc.gpu is not None and proc.gpu.num_rows > 0
    has_memory = proc.memory is not None and proc.memory.num_rows > 0
    if not (has_gpu or has_memory):
        return None
    joined = joined if joined is not None else gpu.timeline_with_gpu(proc)
    failed: list[str] = []
    mem = _attempt(failed, "memory", process_memory, proc, joined[0]) if has_memory else None
    k = _attempt(failed, "kernels", process_kernels, proc, joined)
    return SharingPart(
        pid=proc.pid,
        devices=proc.metadata.get(S.DEVICES_METADATA_KEY, "{}") or "{}",
        nvml_bytes=_nvml_process_bytes(proc),
        names=proc.names,
        memory=mem,
        kernels=k if k is not None and len(k["start"]) else None,
        model=_attempt(failed, "GPU time", gpu_model, proc),
        failed=failed,
    )


def estimate_inputs(
    parts: list[SharingPart], memory: dict[str, Any], summary: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The figures :func:`predict` needs, from the process with the most GPU work."""
    models = {p.pid: p.model for p in parts if p.model is not None}
    if not models:
        return None
    pid = max(models, key=lambda p: models[p]["gpu_busy_fraction"])
    part = next(p for p in parts if p.pid == pid)
    meta = json.loads(part.devices)
    devices = meta.get("devices") or [{}]
    mem = next((m for m in memory.get("processes", []) if m["pid"] == pid), None)
    notes = []
    nvml_bytes = part.nvml_bytes
    reserved = mem["reserved_peak_bytes"] if mem else 0
    if nvml_bytes > reserved:
        per_copy = nvml_bytes
        context = nvml_bytes - reserved
    else:
        context = DEFAULT_CONTEXT_BYTES
        per_copy = reserved + context
        notes.append(f"no NVML memory samples: CUDA context assumed {DEFAULT_CONTEXT_BYTES >> 20} MiB")
    if mem is None:
        notes.append("no GPU memory events: memory estimate from NVML alone")
    if models[pid].get("operations_per_s"):
        notes.append(PROFILED_RATES_NOTE)
    cpu_cores = 1.0
    if summary and summary.get("wall_s"):
        cpu = sum(v for k, v in (summary.get("categories") or {}).items() if not k.startswith("gpu"))
        cpu_cores = max(cpu / summary["wall_s"], 0.05)
    return {
        "pid": pid,
        "device": devices[0].get("name", ""),
        "device_memory_bytes": int(devices[0].get("total_memory", 0)),
        "host_cpus": int(meta.get("host_cpus", 0) or 0),
        "cpu_cores_per_copy": cpu_cores,
        "per_copy_bytes": int(per_copy),
        "context_bytes": int(context),
        "floor_bytes": mem["floor_bytes"] if mem else 0,
        "cyclic_peak_bytes": mem["cyclic_peak_bytes"] if mem else 0,
        **models[pid],
        "notes": notes,
    }


def switch_probability(m: dict[str, Any], k: int, rate: float | None = None, busy: float = 0.0) -> float:
    """Chance that one of a copy's busy periods follows another copy's on the GPU (a context switch).

    If the GPU is busy with the others when the period arrives (probability ``busy``, their share of
    the GPU) it surely does. If the GPU is idle, it does when another copy ran during the period's
    idle gap g: the k - 1 others start periods at ``rate`` each (alone: n), so with probability
    min(1, (k - 1) rate g), averaged over the copy's own gaps (short gaps inside a step's burst rarely
    lose the GPU, long ones do). Linear, not Poisson's 1 - exp(-.): the copies' periods are regular,
    and a brute-force queue (tests) agrees better with it.
    """
    n = m["busy_periods_per_s"]
    rate = n if rate is None else rate
    if k <= 1 or n <= 0:
        return 0.0
    gaps = m.get("idle_gap_quantiles_us") or [1e6 / n]  # older inputs: the mean gap
    idle = float(np.mean(np.minimum(1.0, (k - 1) * rate * np.asarray(gaps, np.float64) / 1e6)))
    busy = min(max(busy, 0.0), 1.0)
    return busy + (1 - busy) * idle


def time_slicing(m: dict[str, Any], k: int, switch_us: float) -> float:
    """Slowdown of each of k copies taking turns on one GPU (time-slicing between their contexts).

    Each copy is a closed loop: it thinks (CPU) for Z = 1/n - b between busy periods of mean b, and
    a period arriving when another context last ran first pays a context switch of ``switch_us``.
    The GPU is one server with service S = B + switch: mean value analysis for k customers, with the
    non-exponential residual of the job in service (Reiser's approximation: an arriving period waits
    the residual E[S^2]/2E[S] of the one in service and the whole S of each queued one).
    """
    n = m["busy_periods_per_s"]
    if n <= 0 or k <= 1:
        return 1.0
    slow, others = 1.0, 0.0
    for _ in range(200):  # p depends on the others' rate and load, both on the slowdown: fixed point
        nxt, load = _mva(m, k, switch_probability(m, k, n / slow, others), switch_us)
        if abs(nxt - slow) < 1e-6 * slow:
            break
        slow, others = 0.5 * (slow + nxt), 0.5 * (others + load)
    return nxt


def _mva(m: dict[str, Any], k: int, p: float, switch_us: float) -> tuple[float, float]:
    """(each copy's cycle over its cycle alone, the GPU's utilization an arriving period finds) for
    k copies that switch context with probability p (:func:`time_slicing`)."""
    n = m["busy_periods_per_s"]
    b = m["busy_period_mean_us"] / 1e6
    b2 = 2 * b * m["busy_period_residual_us"] / 1e6  # E[B^2]
    c = max(switch_us, 0.0) / 1e6
    s = b + p * c
    if s <= 0:
        return 1.0, 0.0
    residual = (b2 + 2 * p * c * b + p * c * c) / (2 * s)
    z = max(1 / n - b, 0.0)
    queue = busy = resp = seen = 0.0
    for j in range(1, k + 1):
        seen = busy  # arrival theorem: a copy finds the GPU as k - 1 copies keep it
        resp = s * (1 + queue - busy) + busy * residual
        x = j / (z + resp)
        queue, busy = x * resp, min(x * s, 1.0)
    return (z + resp) * n, seen


def predict(m: dict[str, Any], k: int) -> dict[str, Any]:
    """What k copies of the job on one GPU would need and how slow each would be (docs/sharing.md).

    Memory: plain processes each keep their CUDA context and the caching allocator's reserved
    peak, so k copies need k x per-copy (peaks aligned: nothing is shared). With one allocator
    shared (Salus-style) it would be k x (context + floor) + the largest ephemeral peak.
    GPU time: demand k x f of the GPU (f: GPU-busy fraction alone); below saturation each copy's
    busy periods queue behind the others' and pay a context switch when another context ran last
    (:func:`time_slicing`; the switch's cost ``context_switch_us`` is measured by share-check's probe,
    0 when unknown). CPU: k x cores per copy over the host's CPUs.
    """
    f = m["gpu_busy_fraction"]
    capacity = k * f
    cpus = m.get("host_cpus") or 0
    cpu = k * m["cpu_cores_per_copy"] / cpus if cpus else 0.0
    slicing = time_slicing(m, k, m.get("context_switch_us") or 0.0)
    slow = {"gpu_time_slicing": slicing, "gpu_capacity": capacity, "cpu": cpu}
    slowdown = max(1.0, *slow.values())
    memory = k * m["per_copy_bytes"]
    shared = k * (m["context_bytes"] + m["floor_bytes"]) + max(m["cyclic_peak_bytes"] - m["floor_bytes"], 0)
    total = m["device_memory_bytes"]
    fits_memory = memory <= total if total else True
    binds = "memory" if not fits_memory else max(slow, key=lambda r: slow[r]) if slowdown > 1.0 else "none"
    return {
        "k": k,
        "memory_bytes": int(memory),
        "memory_shared_allocator_bytes": int(shared),
        "fits_memory": bool(fits_memory),
        "slowdown": float(slowdown),
        "slowdown_by": {r: float(v) for r, v in slow.items()},
        "binds": binds,
        "throughput": float(k / slowdown),
    }


NO_SWITCH_NOTE = (
    "GPU context switches between the copies' processes are not in the estimate: on the H100 they made"
    " PPO and DQN copies 1.4-2.7x slower at k = 4 where GPU time alone predicts ~1.0 (docs/sharing.md);"
    " share-check measures their cost, MPS avoids them"
)


def estimate(m: dict[str, Any] | None, k_values: tuple[int, ...] = K_VALUES) -> dict[str, Any]:
    """The estimate's table for ``k_values`` and how many copies fit."""
    if m is None:
        return {"note": NO_GPU_NOTE}
    m = {**m, "notes": [n for n in m.get("notes", []) if n != NO_SWITCH_NOTE] + [NO_SWITCH_NOTE]}
    table = [predict(m, k) for k in k_values]
    total = m["device_memory_bytes"]
    k_memory = int(total // m["per_copy_bytes"]) if total and m["per_copy_bytes"] else None
    k_fit = 1
    for k in range(1, (k_memory or 64) + 1):
        if predict(m, k)["slowdown"] <= MAX_SLOWDOWN and predict(m, k)["fits_memory"]:
            k_fit = k
        else:
            break
    nxt = predict(m, k_fit + 1)
    return {
        "inputs": m,
        "k_max_memory": k_memory,
        "k_gpu_saturated": (1 / m["gpu_busy_fraction"]) if m["gpu_busy_fraction"] > 0 else None,
        "max_slowdown": MAX_SLOWDOWN,
        "k_fit": k_fit,
        "binds": nxt["binds"] if nxt["binds"] != "none" else "none",
        "table": table,
    }


def sharing_section(
    trace: Trace, summary: dict[str, Any] | None = None, timelines: list[Any] | None = None
) -> dict[str, Any]:
    """The ``sharing`` figures (docs/trace-format.md); ``{"note": ...}`` for a CPU-only trace."""
    parts = [
        process_part(p, timelines[i] if timelines is not None else None)
        for i, p in enumerate(trace.processes)
    ]
    return sharing_from([p for p in parts if p is not None], summary)


def sharing_from(parts: list[SharingPart], summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``sharing`` figures from each process's part (:func:`process_part`), in trace order."""
    failed = [f for p in parts for f in p.failed]
    mem = [p.memory for p in parts if p.memory is not None]
    with_kernels = [p for p in parts if p.kernels is not None]
    kernels = [p.kernels for p in with_kernels]
    procs_occ = [
        (p.kernels, device_limits({S.DEVICES_METADATA_KEY: p.devices}), p.names) for p in with_kernels
    ]
    if not kernels and not mem and not failed:
        return {"note": NO_GPU_NOTE}
    none = {"note": "no kernels in this trace"}
    memory = _attempt(failed, "memory", memory_section, mem) or {"note": "memory figures failed"}
    out = {
        "memory": memory,
        "occupancy": (_attempt(failed, "occupancy", occupancy_section, procs_occ) if procs_occ else none)
        or {"note": "occupancy figures failed"},
        "kernel_lengths": (_attempt(failed, "kernel lengths", kernel_lengths, kernels) if kernels else none)
        or {"note": "kernel-length figures failed"},
        "estimate": _attempt(failed, "estimate", lambda: estimate(estimate_inputs(parts, memory, summary)))
        or {"note": "the estimate failed"},
    }
    if failed and summary is not None:
        summary.setdefault("warnings", []).extend(failed)
    return out


def process_part_or_error(proc: ProcessTrace, joined: Any = None) -> SharingPart | str | None:
    """:func:`process_part`, or its failure as a message (:func:`sharing_for_summary` reports it)."""
    try:
        return process_part(proc, joined)
    except Exception as e:  # the rest of the summary must not be lost to these figures
        return f"{type(e).__name__}: {e}"


def sharing_for_summary(parts: list[SharingPart | str | None], summary: dict[str, Any]) -> dict:
    """:func:`sharing_from` for the summary: a failure here or in a process's part (a message in
    ``parts``) is a warning and a note, never an error."""
    errors = [p for p in parts if isinstance(p, str)]
    if not errors:
        try:
            return sharing_from([p for p in parts if isinstance(p, SharingPart)], summary)
        except Exception as e:
            errors = [f"{type(e).__name__}: {e}"]
    summary.setdefault("warnings", []).append(f"sharing figures failed: {errors[0]}")
    return {"note": f"sharing figures failed: {errors[0]}"}
