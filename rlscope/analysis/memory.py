"""GPU memory per operation and per process, from the allocator events in ``memory.arrows``.

Attribution: an allocation belongs to the operation innermost on the allocating thread when it was
made (:func:`rlscope.analysis.gpu.state_at`). Rows with thread -1 (torch's allocator history has no
thread id) go to the main thread, and so do allocations on a thread with no operation open at the
time (autograd's device threads, a data loader's): the main thread's operation is what asked for
them. Per operation (summed over its calls):

- ``allocated_bytes``: bytes it allocated;
- ``ephemeral_bytes``: of those, freed before the end of the operation instance that allocated them;
- ``persistent_bytes``: still live at the end of that instance (weights, optimizer state, buffers
  handed to the next operation);
- ``peak_bytes``: the most the allocated total rose above its level at an instance's start, while
  the instance was open (nested operations' allocations included), the largest over its calls.

Per process: the allocated curve (all devices together), its ``floor`` (the least allocated over the
second half of the run: what stays between iterations once warmed up), its ``cyclic_peak`` (the most
over the same half), the overall ``peak``, the reserved (``cudaMalloc``'d) peak and the share of
reserved memory not allocated at the allocated peak (``fragmentation``).

A free whose allocation was never seen (made before recording, or an entry lost between two drains)
is ignored; an address allocated twice without a free between counts as freed at the second.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlscope.analysis import gpu
from rlscope.analysis.timeline import Timeline
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace

CURVE_POINTS = 400
NO_OPERATION = "[unannotated]"
NO_PHASE = "[no phase]"


def _columns(table: Any) -> dict[str, np.ndarray]:
    c = {k: table.column(k).to_numpy().astype(np.int64) for k in S.MEMORY_COLUMNS}
    order = np.argsort(c["ts_ns"], kind="stable")
    return {k: v[order] for k, v in c.items()}


def pair_frees(c: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(alloc row indices, free time of each: int64 max when never freed) from time-sorted rows."""
    is_alloc = c["action"] == S.MEMORY_ALLOC
    is_free = c["action"] == S.MEMORY_FREE
    rows = np.flatnonzero(is_alloc | is_free)
    # group by (device, addr), time order within (the sort is stable: alloc before free at equal ts)
    order = rows[np.lexsort((rows, c["addr"][rows], c["device"][rows]))]
    same = (c["addr"][order][1:] == c["addr"][order][:-1]) & (
        c["device"][order][1:] == c["device"][order][:-1]
    )
    allocs = np.flatnonzero(is_alloc[order])
    never = np.iinfo(np.int64).max
    free_at = np.full(len(allocs), never, np.int64)
    has_next = allocs < len(order) - 1
    nxt = np.minimum(allocs + 1, len(order) - 1)
    ok = has_next & np.append(same, False)[allocs]
    free_at[ok] = c["ts_ns"][order[nxt[ok]]]  # the next event at that address: its free (or a re-alloc)
    return order[allocs], free_at


def level_curve(c: dict[str, np.ndarray], alloc_rows: np.ndarray, free_at: np.ndarray):
    """(times, allocated bytes after each) of the allocated total, as a step function."""
    never = np.iinfo(np.int64).max
    freed = free_at != never
    t = np.concatenate([c["ts_ns"][alloc_rows], free_at[freed]])
    d = np.concatenate([c["bytes"][alloc_rows], -c["bytes"][alloc_rows][freed]])
    order = np.lexsort((-d, t))  # at equal times, allocations first: peaks are not hidden
    return t[order], np.cumsum(d[order])


def reserved_curve(c: dict[str, np.ndarray]):
    seg = (c["action"] == S.MEMORY_SEGMENT_ALLOC) | (c["action"] == S.MEMORY_SEGMENT_FREE)
    sign = np.where(c["action"][seg] == S.MEMORY_SEGMENT_ALLOC, 1, -1)
    return c["ts_ns"][seg], np.cumsum(sign * c["bytes"][seg])


def _level_at(t: np.ndarray, level: np.ndarray, q: np.ndarray) -> np.ndarray:
    i = np.searchsorted(t, q, side="right") - 1
    return np.where(i >= 0, level[np.maximum(i, 0)], 0)


def _range_max(t: np.ndarray, level: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Max of the step function over [start, end] for each of several (disjoint or not) ranges."""
    out = _level_at(t, level, start)
    lo = np.searchsorted(t, start, side="right")
    hi = np.searchsorted(t, end, side="right")
    if len(start) == 0:
        return out
    # reduceat over (lo, hi) pairs: each even position reduces level[lo:hi] (any order, overlaps ok)
    idx = np.empty(2 * len(lo), np.int64)
    idx[0::2], idx[1::2] = lo, hi
    inside = np.maximum.reduceat(np.append(level, 0), idx)[0::2]
    return np.where(hi > lo, np.maximum(out, inside), out)


def instance_bounds(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instance ids, start, end) of the operation instances of a timeline."""
    begin = tl.kind == S.OP_BEGIN
    ids = tl.id[begin]
    return ids, tl.ts[begin], tl.inst_end[ids]


def process_memory(proc: ProcessTrace, tl: Timeline) -> dict[str, Any] | None:
    """The memory figures of one process (module docstring); None without allocator events."""
    if proc.memory is None or proc.memory.num_rows == 0:
        return None
    c = _columns(proc.memory)
    thread = np.where(c["thread"] < 0, tl.main_thread, c["thread"])
    alloc_rows, free_at = pair_frees(c)
    op, phase = gpu.state_at(tl, thread[alloc_rows], c["ts_ns"][alloc_rows])
    other = (op < 0) & (thread[alloc_rows] != tl.main_thread)  # no operation open on its own thread
    if other.any():
        main = np.full(int(other.sum()), tl.main_thread, np.int64)
        op[other], phase[other] = gpu.state_at(tl, main, c["ts_ns"][alloc_rows][other])
    inst_end = np.append(tl.inst_end, np.iinfo(np.int64).max)
    size = c["bytes"][alloc_rows]
    ephemeral = (op >= 0) & (free_at <= inst_end[op])
    names = [*proc.names, NO_OPERATION]
    name_id = np.append(tl.inst_name, -1)
    op_names = np.asarray(names, dtype=object)[name_id[op]]
    ph_names = np.where(phase >= 0, np.asarray(names, dtype=object)[name_id[phase]], NO_PHASE)

    t, level = level_curve(c, alloc_rows, free_at)
    ids, starts, ends = instance_bounds(tl)
    inst_peak = (
        _range_max(t, level, starts, ends) - _level_at(t, level, starts) if len(t) else np.zeros(len(ids))
    )
    inst_op = np.asarray(names, dtype=object)[name_id[ids]]
    inst_phase_id = np.full(len(tl.inst_name) + 1, -1, np.int64)
    begin = tl.kind == S.OP_BEGIN
    inst_phase_id[tl.id[begin]] = tl.phase[begin]
    inst_ph = np.where(
        inst_phase_id[ids] >= 0, np.asarray(names, dtype=object)[name_id[inst_phase_id[ids]]], NO_PHASE
    )

    def table(alloc_sel: np.ndarray, inst_sel: np.ndarray) -> dict[str, dict[str, Any]]:
        """Per operation, over the allocations and instances selected (a phase's, or all)."""
        out: dict[str, dict[str, Any]] = {}
        for key in dict.fromkeys([*inst_op[inst_sel].tolist(), *op_names[alloc_sel].tolist()]):
            a = alloc_sel & (op_names == key)
            i = inst_sel & (inst_op == key)
            out[str(key)] = {
                "calls": int(i.sum()),
                "allocations": int(a.sum()),
                "allocated_bytes": int(size[a].sum()),
                "ephemeral_bytes": int(size[a & ephemeral].sum()),
                "persistent_bytes": int(size[a & ~ephemeral].sum()),
                "peak_bytes": int(inst_peak[i].max()) if i.any() else 0,
            }
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["allocated_bytes"]))

    operations = table(np.ones(len(op_names), bool), np.ones(len(inst_op), bool))
    phases: dict[str, Any] = {}
    for ph in dict.fromkeys([*ph_names.tolist(), *inst_ph.tolist()]):
        phases[str(ph)] = {"operations": table(ph_names == ph, inst_ph == ph)}

    start, end = tl.start_ns, max(tl.end_ns, int(t.max()) if len(t) else tl.end_ns)
    half = start + (end - start) // 2
    second = t >= half
    rt, rlevel = reserved_curve(c)
    peak = int(level.max()) if len(level) else 0
    at_half = int(_level_at(t, level, np.array([half]))[0]) if len(t) else 0
    floor = min(at_half, int(level[second].min())) if second.any() else at_half
    cyclic = max(at_half, int(level[second].max())) if second.any() else at_half
    reserved_peak = int(rlevel.max()) if len(rlevel) else 0
    return {
        "pid": proc.pid,
        "allocations": len(alloc_rows),
        "peak_bytes": peak,
        "floor_bytes": floor,
        "cyclic_peak_bytes": cyclic,
        "reserved_peak_bytes": reserved_peak,
        "fragmentation": 1 - peak / reserved_peak if reserved_peak > 0 else 0.0,
        "operations": operations,
        "phases": phases,
        "curve": curve(t, level, rt, rlevel, start, end),
    }


def curve(t, level, rt, rlevel, start: int, end: int, points: int = CURVE_POINTS) -> dict[str, list]:
    """The allocated (min and max per bin, so peaks and floors stay visible) and reserved curves."""
    edges = np.linspace(start, max(end, start + 1), points + 1)
    mids = edges[:-1]
    lo = _level_at(t, level, mids).astype(np.float64)
    hi = lo.copy()
    if len(t):
        b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, points - 1)
        np.maximum.at(hi, b, level)
        np.minimum.at(lo, b, level)
    reserved = _level_at(rt, rlevel, edges[1:]) if len(rt) else np.zeros(points)
    reserved = np.maximum(reserved, 0)
    return {
        "t_s": [float(x - start) / 1e9 for x in mids],
        "allocated_min": [int(x) for x in lo],
        "allocated_max": [int(x) for x in hi],
        "reserved": [int(x) for x in reserved],
    }


def memory_section(per_process: list[dict[str, Any]]) -> dict[str, Any]:
    """The memory figures of every process with allocator events; the one with the largest peak first."""
    if not per_process:
        return {"note": "no GPU memory events in this trace (recorded with torch on a CUDA GPU)"}
    procs = sorted(per_process, key=lambda p: -p["peak_bytes"])
    return {"processes": procs, **{k: procs[0][k] for k in ("operations", "phases", "curve")}}
