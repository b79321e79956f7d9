"""Kernel-length distribution per operation: how long a co-scheduled job would wait behind this one.

Per operation (the one that launched the kernel, CUPTI correlation id, as everywhere in rlscope):
percentiles and a log-spaced histogram of kernel durations, and of the gaps between consecutive
kernels on each stream (a gap counts for the operation of the kernel after it); the *mean residual*
``E[d^2] / (2 E[d])`` (how long a kernel found running at a random instant still runs: the expected
wait of another job's kernel arriving then, when kernels cannot be preempted); and, for latency
targets, the kernels longer than the target (SliVER's question: which would need slicing).
Times are raw (not overhead-corrected); durations come from the GPU trace, which tracing barely moves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlscope import categories
from rlscope.analysis import gpu
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace

PERCENTILES = (50, 90, 99)
# histogram edges, microseconds: 4 per decade from 1 us to 1 s (first and last bins open-ended)
EDGES_US = tuple(float(x) for x in 10 ** np.arange(0, 6.01, 0.25))
LATENCY_TARGETS_US = (10.0, 100.0, 1000.0)
NO_OPERATION = "[unannotated]"


def process_kernels(proc: ProcessTrace, joined: Any = None) -> dict[str, np.ndarray] | None:
    """Kernel records of a process with their launching operation and phase names (None: no GPU data).

    Keys: ``operation``, ``phase`` (object arrays of names), ``start``, ``end``, ``stream``,
    ``device``, ``name`` and, when the trace has them, the launch resources (``threads``, ``blocks``,
    ``registers``, ``smem``). ``joined``: the process's :func:`rlscope.analysis.gpu.timeline_with_gpu`,
    when already built.
    """
    if proc.gpu is None or proc.gpu.num_rows == 0:
        return None
    tl, api, recs = joined if joined is not None else gpu.timeline_with_gpu(proc)
    if api is None:
        return None
    cat = proc.gpu.column("category").to_numpy()
    rows = np.flatnonzero(cat != categories.CUDA_API)  # the order gpu.split keeps its records in
    kernel = recs.category == categories.GPU_KERNEL
    op, phase = gpu.attribute(tl, api, recs)
    names = np.asarray([*proc.names, NO_OPERATION], dtype=object)
    op_name = np.where(op >= 0, np.append(tl.inst_name, -1)[op], -1)
    ph_name = np.where(phase >= 0, np.append(tl.inst_name, -1)[phase], -1)
    sel = rows[kernel]

    def col(c: str) -> np.ndarray:
        return proc.gpu.column(c).to_numpy()[sel].astype(np.int64)

    out = {
        "operation": names[op_name[kernel]],
        "phase": np.where(ph_name[kernel] >= 0, names[ph_name[kernel]], "[no phase]").astype(object),
        "start": recs.start[kernel],
        "end": recs.end[kernel],
        "name": recs.name[kernel],
        "stream": col("stream"),
        "device": col("device"),
    }
    if all(c in proc.gpu.column_names for c in S.GPU_KERNEL_COLUMNS):
        out["blocks"] = col("grid_x") * col("grid_y") * col("grid_z")
        out["threads"] = col("block_x") * col("block_y") * col("block_z")
        out["registers"] = col("registers")
        out["smem"] = col("static_smem") + col("dynamic_smem")
    return out


def stream_gaps(k: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(gap ns, index of the kernel after it) between consecutive kernels on each (device, stream)."""
    if len(k["start"]) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((k["start"], k["stream"], k["device"]))
    same = (k["stream"][order][1:] == k["stream"][order][:-1]) & (
        k["device"][order][1:] == k["device"][order][:-1]
    )
    gap = k["start"][order][1:] - k["end"][order][:-1]
    return np.maximum(gap[same], 0), order[1:][same]


def distribution(ns: np.ndarray) -> dict[str, Any]:
    """Count, mean, percentiles, max and the log histogram of durations given in ns (figures in us)."""
    us = np.asarray(ns, np.float64) / 1e3
    if len(us) == 0:
        return {"count": 0}
    counts, _ = np.histogram(np.clip(us, EDGES_US[0], EDGES_US[-1]), bins=np.asarray(EDGES_US))
    return {
        "count": len(us),
        "total_us": float(us.sum()),
        "mean_us": float(us.mean()),
        **{f"p{p}_us": float(np.percentile(us, p)) for p in PERCENTILES},
        "max_us": float(us.max()),
        "mean_residual_us": float((us**2).sum() / (2 * us.sum())) if us.sum() > 0 else 0.0,
        "histogram": [int(c) for c in counts],
    }


def slicing(ns: np.ndarray) -> list[dict[str, Any]]:
    """Per latency target: kernels longer than it, and their share of the GPU time."""
    us = np.asarray(ns, np.float64) / 1e3
    total = float(us.sum())
    out = []
    for target in LATENCY_TARGETS_US:
        over = us > target
        out.append(
            {
                "target_us": target,
                "kernels": int(over.sum()),
                "share_of_gpu_time": float(us[over].sum() / total) if total > 0 else 0.0,
            }
        )
    return out


def kernel_lengths(kernels: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """The distributions of every process's kernels, overall and per operation."""
    dur, gaps, gap_op, ops = [], [], [], []
    for k in kernels:
        dur.append(k["end"] - k["start"])
        ops.append(k["operation"])
        g, after = stream_gaps(k)
        gaps.append(g)
        gap_op.append(k["operation"][after])
    if not dur:
        return {}
    d, o = np.concatenate(dur), np.concatenate(ops)
    g, go = np.concatenate(gaps), np.concatenate(gap_op)
    per_op = {}
    for name in sorted(set(o.tolist()), key=lambda n: -float(d[o == n].sum())):
        per_op[str(name)] = {"kernels": distribution(d[o == name]), "gaps": distribution(g[go == name])}
    return {
        "edges_us": list(EDGES_US),
        "all": {"kernels": distribution(d), "gaps": distribution(g)},
        "slicing": slicing(d),
        "operations": per_op,
    }
