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

import dataclasses

import numpy as np

from rlscope import categories
from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline, kinds_among
from rlscope.blocks import blocks
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace

ENTRY = "module_call"
# the cost per module call where the calibration has none: measured by `rlscope calibrate` on the
# 2-core CPU VM (1,680-1,770 ns at a reference loop of 107-108 ns, five calibrations, 2026-11-29),
# priced at the run's speed as the calibrated figure is (residual.at_run_speed)
DEFAULT = {"inside": 1700.0, "ref_ns": 108.0}
# where the wrapper does not run: inside a torch op, a CUDA call, rlscope's own work, a compilation
_NOT_PYTHON = (categories.BACKEND, categories.CUDA_API, categories.PROFILER, categories.COMPILE)
# the same as a table of every byte of a category (a negative one from the end), for the C loops
NOT_PYTHON_BYTES = np.zeros(256, bool)
NOT_PYTHON_BYTES[list(_NOT_PYTHON)] = True
# the C loops' arguments over one thread's rows: first row, end, op, the segments (Timeline.segments),
# cat, NOT_PYTHON_BYTES
_ROWS = (native.N, native.N, native.I32, native.SEGMENTS, native.I8, native.BOOL)
_TABLE = (native.F64, native.N)  # a thread's cost per instance (module_calls._costed_blocks), its length


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
        # numpy's mask, not Table.filter: that imports pyarrow.compute (~35 ms of an analysis's start)
        op = agg.column("operation").to_numpy()
        rows = (agg.column("category").to_numpy() == S.AGGREGATE_CALLS) & (op >= 0)
        for tid, nid, n in zip(
            agg.column("thread").to_numpy()[rows].tolist(),
            op[rows].tolist(),
            agg.column("calls").to_numpy()[rows].tolist(),
            strict=True,
        ):
            if nid < len(names):
                key = (int(tid), names[nid])
                instances[key] = instances.get(key, 0) + int(n)
    elif tl is not None:
        begins = tl.scope_begins()  # the operations' begins among the scopes' (found with the timeline)
        begins = begins[tl.kind[begins] == S.OP_BEGIN]
        for tid, nid in zip(tl.thread_of(begins).tolist(), tl.name[begins].tolist(), strict=True):
            if 0 <= nid < len(names):
                key = (int(tid), names[nid])
                instances[key] = instances.get(key, 0) + 1
    return {k: n / instances[k] for k, n in calls.items() if instances.get(k, 0) > 0}


@dataclasses.dataclass
class Spread:
    """The wrapper's cost per row as what spreads it, :func:`planned`'s second pass not yet made: the
    rows of each costed thread, [a, b), with its cost per instance (a last entry, 0, for the rows
    outside every instance), and per instance (the same last entry) whether the interpreter ran in
    it and the time its cost is spread over. The residual correction reads each row's cost as it
    goes over the rows (residual.c's residual_planned): no column of every row."""

    threads: list[tuple[int, int, np.ndarray]]
    has_python: np.ndarray
    total: np.ndarray

    def any(self) -> bool:
        """Whether a row's cost is not 0 (``column(tl).any()``): a costed instance with time to spread
        its cost over has a row with some of that time, and a cost above 0."""
        return bool((self.total > 0).any())

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first rows, ends, cost tables one after another): the threads as the C loops read them."""
        first = np.array([t[0] for t in self.threads], np.int64)
        end = np.array([t[1] for t in self.threads], np.int64)
        return first, end, np.concatenate([t[2] for t in self.threads])

    def column(self, tl: Timeline) -> np.ndarray:
        """Per timeline row: its cost (:func:`planned`'s second pass)."""
        spread = native.function(
            "residual_module_spread", *_ROWS, native.BOOL, native.F64, *_TABLE, native.F64
        )
        # every row of the costed threads is written: zeros only between them (no pass of zeros first)
        out = np.empty(len(tl.ts))
        end = 0
        for a, b, table in self.threads:
            out[end:a] = 0.0
            args = (tl.op, tl.segments(), tl.cat, NOT_PYTHON_BYTES)
            spread(a, b, *args, self.has_python, self.total, table, len(table), out)
            end = b
        out[end:] = 0.0
        return out


def planned(proc: ProcessTrace, tl: Timeline, per_call_ns: float) -> np.ndarray:
    """Per timeline row: the wrapper's cost to remove from its segment (ns); empty where no row has
    any (a run without automatic operations: no column of zeros to add).

    Two passes over the rows of the threads that made calls: the first sums each costed instance's
    segments, the second spreads its cost over them. The C loops (residual.c) take a thread's rows
    in one pass each; numpy's take a block at a time (:func:`_costed_blocks`): on a long detail
    stretch the costed rows are millions, and a column of their length per step was most of the
    correction's peak memory. The sums are of whole ns, exact in any order: summed a block at a
    time, or a run of rows at a time, they are those of one pass over the rows."""
    out = spread(proc, tl, per_call_ns)
    return out.column(tl) if isinstance(out, Spread) else out


def spread(proc: ProcessTrace, tl: Timeline, per_call_ns: float) -> Spread | np.ndarray:
    """:func:`planned`'s first pass, and what spreads the cost over the rows (:class:`Spread`) where
    the C loops run; else (numpy's loops) its column, as :func:`planned` gives it."""
    none = np.zeros(0)
    if per_call_ns <= 0 or len(tl.ts) == 0:
        return none
    mean = calls_per_instance(proc, tl)
    if not mean:
        return none
    spans = _costed_blocks(proc.names, tl, mean, per_call_ns)
    sums = native.function("residual_module_sums", *_ROWS, *_TABLE, native.F64, native.F64, restype=native.N)
    spreads = native.function("residual_module_spread", *_ROWS, native.BOOL, native.F64, *_TABLE, native.F64)
    if (
        sums is None
        or spreads is None
        or tl.op.dtype != np.int32
        or tl.cat.dtype != np.int8
        or tl.ts.dtype != np.int64
    ):
        return _spread(tl, spans)
    # the C loops: each of a thread's rows at once, in one pass (residual.c)
    threads = _thread_spans(spans)
    n_inst = len(tl.inst_name)
    # per instance, and a last entry that op -1 reads (its cost is 0: never summed)
    python_sum, all_sum = np.zeros(n_inst + 1), np.zeros(n_inst + 1)
    costed = 0
    segs = tl.segments()
    for a, b, table in threads:
        costed += sums(a, b, tl.op, segs, tl.cat, NOT_PYTHON_BYTES, table, len(table), python_sum, all_sum)
    if costed == 0:
        return none
    return Spread(threads, *_totals(python_sum[:-1], all_sum[:-1]))


def _spread(tl: Timeline, spans: list[tuple[slice, np.ndarray]]) -> np.ndarray:
    """:func:`planned`'s two passes with numpy, over the blocks ``spans`` (:func:`_costed_blocks`)."""
    n_inst = len(tl.inst_name)
    python_sum, all_sum = np.zeros(n_inst), np.zeros(n_inst)
    costed = 0
    for rows, table in spans:
        inst, dur, python = _costed_rows(tl, rows, table)
        if len(inst) == 0:
            continue
        costed += len(inst)
        lo, hi = int(inst.min()), int(inst.max()) + 1
        python_sum[lo:hi] += np.bincount(inst - lo, weights=dur * python, minlength=hi - lo)
        all_sum[lo:hi] += np.bincount(inst - lo, weights=dur, minlength=hi - lo)
    if costed == 0:
        return np.zeros(0)
    has_python, total = _totals(python_sum, all_sum)
    out = np.zeros(len(tl.ts))
    for rows, table in spans:  # every row of the block: a row's own figures, no gather of the costed
        op, dur = tl.op[rows].astype(np.intp), tl.float_duration(rows)  # indices as numpy reads them
        weight = dur * (~kinds_among(tl.cat[rows], _NOT_PYTHON) | ~has_python[op])
        t = total[op]
        np.divide(weight, t, out=weight, where=t > 0)
        weight[~(t > 0)] = 0.0
        np.multiply(weight, table[op], out=weight)
        out[rows] = weight
    return out


def _totals(python_sum: np.ndarray, all_sum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(has_python, total) per instance, then a last entry for the rows outside every instance (op -1):
    the time an instance's cost is spread over, its own segments where the interpreter ran, else all
    of them; for the last entry none (as an instance without a cost: its rows' weights are then 0
    times 0)."""
    has_python = np.append(python_sum > 0, False)
    total = np.append(np.where(has_python[:-1], python_sum, all_sum), 0.0)
    return has_python, total


def _thread_spans(spans: list[tuple[slice, np.ndarray]]) -> list[tuple[int, int, np.ndarray]]:
    """The blocks ``spans`` (:func:`_costed_blocks`) joined per thread: (first row, end, cost table)."""
    out: list[tuple[int, int, np.ndarray]] = []
    for rows, table in spans:
        if out and out[-1][1] == rows.start and out[-1][2] is table:
            out[-1] = (out[-1][0], rows.stop, table)
        else:
            out.append((rows.start, rows.stop, table))
    return out


def _costed_blocks(
    names: list[str], tl: Timeline, mean: dict[tuple[int, str], float], per_call_ns: float
) -> list[tuple[slice, np.ndarray]]:
    """The blocks of rows (rlscope.blocks) of each thread that made module calls, each with its
    thread's cost per instance (ns; ``mean``'s calls times ``per_call_ns``, a last 0 for rows outside
    every instance)."""
    ids: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        ids.setdefault(n, []).append(i)
    # per thread, each name id's cost (a last 0 for instances without a name), then read per instance
    by_name: dict[int, np.ndarray] = {}
    for (tid, name), m in mean.items():
        cost = by_name.get(tid)
        if cost is None:
            cost = by_name[tid] = np.zeros(len(names) + 1)
        cost[ids.get(name, [])] = m * per_call_ns
    inst_name = tl.inst_name
    named = (inst_name >= 0) & (inst_name < len(names))
    at = np.where(named, inst_name, len(names))
    by_thread: dict[int, np.ndarray] = {}  # thread -> instance index -> cost
    for tid, cost in by_name.items():
        by_thread[tid] = np.append(cost[at], 0.0)
    out = []
    starts = tl.thread_starts()
    for k in range(len(starts) - 1):
        a, b = int(starts[k]), int(starts[k + 1])
        table = by_thread.get(int(tl.thread_of(a))) if b > a else None
        if table is not None:
            out += [(slice(a + r.start, a + r.stop), table) for r in blocks(b - a)]
    return out


def _costed_rows(tl: Timeline, rows: slice, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of the rows of ``rows`` inside a costed instance (``table``: cost per instance): (instance,
    segment length in ns, whether the interpreter ran in it), worked out over the whole block, in
    the CPU's cache, then kept at the costed rows."""
    op = tl.op[rows].astype(np.intp)  # indices as numpy reads them: converted once
    mine = table[op] > 0  # op -1 reads the last entry, 0
    python = ~kinds_among(tl.cat[rows], _NOT_PYTHON)  # a comparison per category
    return op[mine], tl.float_duration(rows)[mine], python[mine]


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
