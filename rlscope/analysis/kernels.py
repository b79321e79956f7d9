"""Per-operation kernel tables: which kernels (and copies, memsets) each operation launched.

Pure functions: a loaded :class:`~rlscope.trace.reader.Trace` in, an Arrow table out. GPU records are
joined to operations exactly as the breakdown does (:func:`rlscope.analysis.gpu.split`,
:func:`~rlscope.analysis.timeline.build_timeline` with CUDA API time, :func:`rlscope.analysis.gpu.attribute`):
a record belongs to the operation innermost on the launching thread when its CUDA API call started.
Records with no launch seen go to ``[unannotated]``. Times are raw (not overhead-corrected). Kernel
names are demangled (:mod:`rlscope.analysis.demangle`); ``mangled`` keeps each as the trace recorded it.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis import gpu
from rlscope.analysis.demangle import demangle
from rlscope.categories import UNANNOTATED
from rlscope.keys import factorize
from rlscope.trace.reader import ProcessTrace, Trace

__all__ = ["KERNEL_SCHEMA", "KernelRows", "kernel_table", "kernel_table_from", "process_kernel_rows"]

KERNEL_SCHEMA = pa.schema(
    [
        ("operation", pa.string()),
        ("category", pa.string()),  # gpu_kernel, gpu_memcpy, gpu_memset
        ("kernel", pa.string()),  # kernel name (demangled), or the copy/memset kind
        ("mangled", pa.string()),  # the name as recorded in the trace
        ("count", pa.int64()),
        ("total_s", pa.float64()),
        ("mean_s", pa.float64()),
        ("share", pa.float64()),  # of the operation's GPU time (all categories), 0..1
    ]
)


KernelRows = dict[tuple[str, str, str], list[float]]  # (operation, category, kernel) -> [count, ns]


def process_kernel_rows(proc: ProcessTrace, joined: gpu.JoinedTimeline | None = None) -> KernelRows:
    """(operation, category, kernel) -> [count, ns] of one process (empty without GPU work)."""
    acc: KernelRows = defaultdict(lambda: [0, 0.0])
    tl, api, recs = joined if joined is not None else gpu.timeline_with_gpu(proc)
    if api is None or len(recs.start) == 0:
        return dict(acc)
    op, _ = gpu.attribute(tl, api, recs)
    op_name = np.append(tl.inst_name, -1).astype(np.int64)[op]  # -1: unattributed
    # one integer key per (operation name, category, kernel name); few distinct keys in practice
    ncat = max(categories.CATEGORY_NAMES) + 1
    kname = recs.name.astype(np.int64)
    width = int(max(kname.max(initial=0), 0)) + 2
    key = ((op_name + 1) * ncat + recs.category) * width + (kname + 1)
    uniq, inv = factorize(key)
    counts = np.bincount(inv, minlength=len(uniq))
    total = np.bincount(inv, weights=(recs.end - recs.start).astype(np.float64), minlength=len(uniq))
    for k, c, t in zip(uniq.tolist(), counts.tolist(), total.tolist(), strict=True):
        kn = k % width - 1
        cat = (k // width) % ncat
        on = k // width // ncat - 1
        entry = acc[
            (
                UNANNOTATED if on < 0 else proc.name(on),
                categories.CATEGORY_NAMES.get(cat, str(cat)),
                proc.name(kn) if kn >= 0 else "<unnamed>",
            )
        ]
        entry[0] += c
        entry[1] += t
    return dict(acc)


def kernel_table(trace: Trace, timelines: list[gpu.JoinedTimeline] | None = None) -> pa.Table:
    """GPU work per (operation, category, kernel) over the whole run, all processes merged.

    ``timelines``: each process's joined timeline, when the caller already built them.
    """
    return kernel_table_from(
        [
            process_kernel_rows(p, timelines[i] if timelines is not None else None)
            for i, p in enumerate(trace.processes)
        ]
    )


def kernel_table_from(per_process: list[KernelRows]) -> pa.Table:
    """The kernel table from each process's rows (:func:`process_kernel_rows`), in trace order.

    Sorted by operation (most GPU time first), then by total time within the operation.
    """
    acc: KernelRows = defaultdict(lambda: [0, 0.0])
    for rows in per_process:
        for key, (count, ns) in rows.items():
            entry = acc[key]
            entry[0] += count
            entry[1] += ns
    if not acc:
        return KERNEL_SCHEMA.empty_table()
    op_total: dict[str, float] = defaultdict(float)
    for (op, _, _), (_, ns) in acc.items():
        op_total[op] += ns
    rows = sorted(acc.items(), key=lambda kv: (-op_total[kv[0][0]], kv[0][0], -kv[1][1], kv[0][1], kv[0][2]))
    cols: dict[str, list] = {f.name: [] for f in KERNEL_SCHEMA}
    for (op, cat, kern), (count, ns) in rows:
        cols["operation"].append(op)
        cols["category"].append(cat)
        cols["kernel"].append(demangle(kern))
        cols["mangled"].append(kern)
        cols["count"].append(int(count))
        cols["total_s"].append(ns / 1e9)
        cols["mean_s"].append(ns / 1e9 / count if count else 0.0)
        cols["share"].append(ns / op_total[op] if op_total[op] > 0 else 0.0)
    return pa.table(cols, schema=KERNEL_SCHEMA)
