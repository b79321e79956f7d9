"""The automatic operations' module-call wrapper: its cost, removed from the operations that paid it.

Under automatic operations every ``nn.Module`` call runs rlscope's wrapper (rlscope/runtime/auto_ops.py),
about 1.7 us a call in an RL loop on a 2-core VM (0.85 in a tight loop of empty modules): a dozen
calls a step make a small policy's inference read 10-20% long. The windows cannot see it (it is
paid in light windows too), so it is priced per call: ``rlscope calibrate``'s ``module_call``
entry (or :data:`DEFAULT`), at the run's speed.

The trace counts the calls per thread and operation over the whole run (``module_calls.arrows``,
collectors/module_calls.py): each outermost call's count goes to the innermost operation open as it
ends. Each instance of the operation on that thread loses the mean calls per instance (calls over
instances, from the aggregates, which count every instance of the run) times the cost, spread over
its own segments in proportion to their length, those where the interpreter ran (not inside a
torch op or a CUDA call) first. Per instance rather than in proportion to the operation's time: an
instance in a full window is longer by the collectors' cost, not by more module calls, and the
windows' comparison that follows expects the same cost removed from both kinds. Calls made with no
operation open are left in (the automatic operations open one at every outermost call).
"""

from __future__ import annotations

import numpy as np

from rlscope import categories
from rlscope.analysis.timeline import Timeline
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace

ENTRY = "module_call"
# the cost per module call where the calibration has none: measured by `rlscope calibrate` on the
# 2-core CPU VM (1,680-1,770 ns at a reference loop of 107-108 ns, five calibrations, 2026-11-29),
# priced at the run's speed as the calibrated figure is (residual.at_run_speed)
DEFAULT = {"inside": 1700.0, "ref_ns": 108.0}
# where the wrapper does not run: inside a torch op, a CUDA call, rlscope's own work, a compilation
_NOT_PYTHON = (categories.BACKEND, categories.CUDA_API, categories.PROFILER, categories.COMPILE)


def calls_per_instance(proc: ProcessTrace, tl: Timeline | None = None) -> dict[tuple[int, str], float]:
    """(thread, operation name) -> the mean module calls per instance over the run; empty without
    counts. Instances come from the aggregates where the trace has them (the whole run, detail or
    not), else from the timeline's operation begins (a trace without aggregates is all detail)."""
    table = proc.module_calls
    if table is None or table.num_rows == 0:
        return {}
    names = proc.names
    calls: dict[tuple[int, str], int] = {}
    for tid, nid, n in zip(
        table.column("thread").to_pylist(),
        table.column("operation").to_pylist(),
        table.column("calls").to_pylist(),
        strict=True,
    ):
        if 0 <= nid < len(names):
            key = (int(tid), names[nid])
            calls[key] = calls.get(key, 0) + int(n)
    instances: dict[tuple[int, str], int] = {}
    agg = proc.aggregates
    if agg is not None and agg.num_rows:
        rows = agg.filter(
            np.asarray(agg.column("category").to_numpy() == S.AGGREGATE_CALLS)
            & np.asarray(agg.column("operation").to_numpy() >= 0)
        )
        for tid, nid, n in zip(
            rows.column("thread").to_pylist(),
            rows.column("operation").to_pylist(),
            rows.column("calls").to_pylist(),
            strict=True,
        ):
            if nid < len(names):
                key = (int(tid), names[nid])
                instances[key] = instances.get(key, 0) + int(n)
    elif tl is not None:
        begins = np.flatnonzero(tl.kind == S.OP_BEGIN)
        for tid, nid in zip(tl.thread[begins].tolist(), tl.name[begins].tolist(), strict=True):
            if 0 <= nid < len(names):
                key = (int(tid), names[nid])
                instances[key] = instances.get(key, 0) + 1
    return {k: n / instances[k] for k, n in calls.items() if instances.get(k, 0) > 0}


def planned(proc: ProcessTrace, tl: Timeline, per_call_ns: float) -> np.ndarray:
    """Per timeline row: the wrapper's cost to remove from its segment (ns); empty where no row has
    any (a run without automatic operations: no column of zeros to add)."""
    none = np.zeros(0)
    if per_call_ns <= 0 or len(tl.ts) == 0:
        return none
    mean = calls_per_instance(proc, tl)
    if not mean:
        return none
    names = proc.names
    op = tl.op
    has_op = op >= 0
    inst = np.where(has_op, op, 0)
    name_id = np.where(has_op, tl.inst_name[inst], -1)
    per_instance = np.zeros(len(tl.ts))
    for (tid, name), m in mean.items():
        ids = [i for i, n in enumerate(names) if n == name]
        rows = has_op & (tl.thread == tid) & np.isin(name_id, ids)
        per_instance[rows] = m * per_call_ns
    rows = per_instance > 0
    if not rows.any():
        return none
    dur = tl.float_duration()
    python = dur * ~np.isin(tl.cat, _NOT_PYTHON)
    n_inst = int(inst.max()) + 1
    python_sum = np.bincount(inst[rows], weights=python[rows], minlength=n_inst)
    all_sum = np.bincount(inst[rows], weights=dur[rows], minlength=n_inst)
    # an instance's own segments where the interpreter ran, else all of them
    weight = np.where(python_sum[inst] > 0, python, dur)
    total = np.where(python_sum[inst] > 0, python_sum[inst], all_sum[inst])
    share = np.divide(weight, total, out=np.zeros(len(tl.ts)), where=total > 0)
    out = np.zeros(len(tl.ts))
    out[rows] = share[rows] * per_instance[rows]
    return out


def summary_cut(proc: ProcessTrace, per_call_ns: float) -> np.ndarray:
    """Per aggregates row: the wrapper's cost (ns) in the time between the detail stretches: each
    summarized instance's mean calls times the cost, spread over its operation's summary-mode time
    rows on that thread in proportion to their time (the interpreter's categories first)."""
    agg = proc.aggregates
    if agg is None or not agg.num_rows:
        return np.zeros(0)
    out = np.zeros(agg.num_rows)
    mean = calls_per_instance(proc) if per_call_ns > 0 else {}
    if not mean:
        return out
    names = proc.names
    c = {
        k: agg.column(k).to_numpy().astype(np.int64)
        for k in ("mode", "thread", "operation", "category", "calls")
    }
    t = agg.column("time_ns").to_numpy().astype(np.float64)
    summary = c["mode"] == S.MODE_SUMMARY
    is_call = c["category"] == S.AGGREGATE_CALLS
    for (tid, name), m in mean.items():
        ids = [i for i, n in enumerate(names) if n == name]
        mine = summary & (c["thread"] == tid) & np.isin(c["operation"], ids)
        cost = float(c["calls"][mine & is_call].sum()) * m * per_call_ns
        time_rows = mine & ~is_call
        python = time_rows & ~np.isin(c["category"], _NOT_PYTHON)
        use = python if t[python].sum() > 0 else time_rows
        total = float(t[use].sum())
        if cost > 0 and total > 0:
            out[use] = t[use] / total * cost
    return out
