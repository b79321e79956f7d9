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

Recorded in full windows only (``RLSCOPE_GPU_MEMORY=windows``, collectors/gpu_memory.py), each
recording window opens with what the allocator held (``MEMORY_LIVE`` and ``MEMORY_SEGMENT_LIVE``
rows, at one time: a *resync*). Every block or segment still open then is closed just before it
(freed, unseen, in the light window before) and the live ones open again, so the curves are right
at every resync and through each recording window, and held flat between (marked by
``recorded_share``). The operations' figures come from their calls wholly inside a recording window
(``recorded_calls``), scaled to all their calls; ``peak_bytes`` is the largest over those calls.

The process's peaks also draw on the allocator's own high-water marks (``MEMORY_PEAK`` and
``MEMORY_SEGMENT_PEAK`` rows, per device, as recording started and stopped): when the stop's mark
is above the start's, the run reached it, recorded or not (a peak between two recording windows),
and on one device it is the exact peak (``peak_source``: ``allocator``; ``recorded`` when the
curve's own peak stands). With several devices the curve sums them while the marks are per
device, so the marks are reported (``allocator``) but the peaks stay the curve's. A mark that did
not rise says only that the run stayed at or below the mark it started with. A job that resets
the allocator's peak counters (``torch.cuda.reset_peak_memory_stats``) during the run leaves a stop
mark that may be too low; the larger of the two figures is kept, so this only loses the gain.
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


def resync_times(c: dict[str, np.ndarray]) -> np.ndarray:
    """The sorted times at which a recording window opened with the allocator's live state."""
    live = (c["action"] == S.MEMORY_LIVE) | (c["action"] == S.MEMORY_SEGMENT_LIVE)
    return np.unique(c["ts_ns"][live])


def allocator_marks(c: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Per device (as a string key, for JSON), the allocator's high-water marks as recording
    stopped (``peak_bytes``, ``reserved_peak_bytes``) and whether each rose above the mark recording
    started with (``peak_in_run``, ``reserved_peak_in_run``). A device with no stop mark (a run that
    ended without stopping rlscope) is left out: its start mark alone says nothing of the run."""
    out: dict[str, dict[str, Any]] = {}
    for action, name in ((S.MEMORY_PEAK, "peak"), (S.MEMORY_SEGMENT_PEAK, "reserved_peak")):
        sel = c["action"] == action
        for dev in np.unique(c["device"][sel]):
            marks = c["bytes"][sel & (c["device"] == dev)]  # time order (_columns sorts)
            if len(marks) < 2:
                continue
            entry = out.setdefault(str(int(dev)), {})
            entry[f"{name}_bytes"] = int(marks[-1])
            entry[f"{name}_in_run"] = bool(marks[-1] > marks[0])
    return out


def _with_marks(peak: int, reserved_peak: int, marks: dict[str, dict[str, Any]]) -> tuple[int, int, str]:
    """(peak, reserved peak, peak source): the curve's, raised to one device's marks that the run
    reached (module docstring)."""
    if len(marks) != 1:
        return peak, reserved_peak, "recorded"
    (m,) = marks.values()
    source = "recorded"
    if m.get("peak_in_run") and m["peak_bytes"] > peak:
        peak, source = m["peak_bytes"], "allocator"
    if m.get("reserved_peak_in_run") and m["reserved_peak_bytes"] > reserved_peak:
        reserved_peak = m["reserved_peak_bytes"]
    return peak, reserved_peak, source


def pair_frees(c: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(alloc row indices, free time of each: int64 max when never freed) from time-sorted rows.

    LIVE rows count as allocations here (they hold memory until freed), and every block open at a
    resync is closed 1 ns before it: its free fell in the unrecorded window before, and a LIVE row
    opens it again if it was still held (the order keeps a resync from doubling the level)."""
    is_alloc = (c["action"] == S.MEMORY_ALLOC) | (c["action"] == S.MEMORY_LIVE)
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
    rows = order[allocs]
    syncs = resync_times(c)
    if len(syncs):
        i = np.searchsorted(syncs, c["ts_ns"][rows], side="right")
        later = i < len(syncs)
        closed = np.full(len(rows), never, np.int64)
        closed[later] = syncs[i[later]] - 1
        free_at = np.minimum(free_at, closed)
    return rows, free_at


def level_curve(c: dict[str, np.ndarray], alloc_rows: np.ndarray, free_at: np.ndarray):
    """(times, allocated bytes after each) of the allocated total, as a step function."""
    never = np.iinfo(np.int64).max
    freed = free_at != never
    t = np.concatenate([c["ts_ns"][alloc_rows], free_at[freed]])
    d = np.concatenate([c["bytes"][alloc_rows], -c["bytes"][alloc_rows][freed]])
    order = np.lexsort((-d, t))  # at equal times, allocations first: peaks are not hidden
    return t[order], np.cumsum(d[order])


def reserved_curve(c: dict[str, np.ndarray]):
    """(times, reserved bytes after each): segment reserves and releases, reset at each resync to
    the LIVE segments' total (the rows are time-sorted)."""
    a = c["action"]
    seg = (a == S.MEMORY_SEGMENT_ALLOC) | (a == S.MEMORY_SEGMENT_FREE) | (a == S.MEMORY_SEGMENT_LIVE)
    t, act, size = c["ts_ns"][seg], a[seg], c["bytes"][seg]
    d = np.where(act == S.MEMORY_SEGMENT_ALLOC, size, np.where(act == S.MEMORY_SEGMENT_FREE, -size, 0))
    live = act == S.MEMORY_SEGMENT_LIVE
    if live.any():
        raw = np.cumsum(d)
        jumps = 0
        for sync in np.unique(t[live]):  # one per recording window: a Python loop is cheap here
            k = int(np.searchsorted(t, sync, side="left"))
            before = (int(raw[k - 1]) if k else 0) + jumps
            need = int(size[live & (t == sync)].sum()) - before
            d[k] += need
            jumps += need
    return t, np.cumsum(d)


def _level_at(t: np.ndarray, level: np.ndarray, q: np.ndarray) -> np.ndarray:
    if not len(level):  # no allocation recorded (none in the detail kept): nothing allocated
        return np.zeros(len(q), np.int64)
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
    marks_only = (c["action"] == S.MEMORY_PEAK) | (c["action"] == S.MEMORY_SEGMENT_PEAK)
    if marks_only.all() and not c["bytes"].any():  # CUDA there, never used: no memory to show
        return None
    thread = np.where(c["thread"] < 0, tl.main_thread, c["thread"])
    alloc_rows, free_at = pair_frees(c)
    spans = recorded_spans(c, tl)
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

    # what the operations' figures count: the job's allocations (not the LIVE rows of a resync) and,
    # recorded in windows, only those of calls wholly inside a recording window
    job = c["action"][alloc_rows] == S.MEMORY_ALLOC
    inst_rec = np.ones(len(ids), bool)
    if spans is not None:
        inst_rec = inside_spans(spans, starts, ends)
        rec_of = np.zeros(len(tl.inst_name) + 1, bool)
        rec_of[ids] = inst_rec
        unannotated = op < 0
        job &= np.where(unannotated, True, rec_of[np.maximum(op, 0)])
    run_ns = max(tl.end_ns - tl.start_ns, 1)
    rec_ns = int((spans[1] - spans[0]).sum()) if spans is not None else run_ns

    def table(alloc_sel: np.ndarray, inst_sel: np.ndarray) -> dict[str, dict[str, Any]]:
        """Per operation, over the allocations and instances selected (a phase's, or all)."""
        out: dict[str, dict[str, Any]] = {}
        alloc_sel = alloc_sel & job
        for key in dict.fromkeys([*inst_op[inst_sel].tolist(), *op_names[alloc_sel].tolist()]):
            a = alloc_sel & (op_names == key)
            i = inst_sel & (inst_op == key)
            recorded = i & inst_rec
            # recorded in windows: the recorded calls' figures stand for all the calls
            if spans is None:
                scale = 1.0
            elif key == NO_OPERATION:
                scale = run_ns / max(rec_ns, 1)
            else:
                scale = i.sum() / recorded.sum() if recorded.any() else 0.0
            row = {
                "calls": int(i.sum()),
                "allocations": round(int(a.sum()) * scale),
                "allocated_bytes": round(int(size[a].sum()) * scale),
                "ephemeral_bytes": round(int(size[a & ephemeral].sum()) * scale),
                "persistent_bytes": round(int(size[a & ~ephemeral].sum()) * scale),
                "peak_bytes": int(inst_peak[recorded].max()) if recorded.any() else 0,
            }
            if spans is not None:
                row["recorded_calls"] = int(recorded.sum())
            out[str(key)] = row
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
    marks = allocator_marks(c)
    peak, reserved_peak, peak_source = _with_marks(peak, reserved_peak, marks)
    return {
        "pid": proc.pid,
        # recorded in windows: the share of the run the recording windows covered (1: all of it)
        "recorded_share": min(1.0, rec_ns / run_ns),
        "allocations": int(job.sum()),
        "peak_bytes": peak,
        "floor_bytes": floor,
        "cyclic_peak_bytes": cyclic,
        "reserved_peak_bytes": reserved_peak,
        "fragmentation": max(0.0, 1 - peak / reserved_peak) if reserved_peak > 0 else 0.0,
        "peak_source": peak_source,
        "allocator": marks,
        "operations": operations,
        "phases": phases,
        "curve": curve(t, level, rt, rlevel, start, end),
    }


def recorded_spans(c: dict[str, np.ndarray], tl: Timeline) -> tuple[np.ndarray, np.ndarray] | None:
    """(starts, ends) of the recording windows of memory recorded in windows, else None: each
    from its resync to the next switch to a light window (the session's end for the last)."""
    syncs = resync_times(c)
    if not len(syncs):
        return None
    w = tl.kind == S.WINDOW
    light = np.sort(tl.ts[w & (tl.id == S.WINDOW_LIGHT)])
    ends = np.full(len(syncs), max(tl.end_ns, int(syncs.max())), np.int64)
    if len(light):
        i = np.searchsorted(light, syncs, side="right")
        ends = np.where(i < len(light), light[np.minimum(i, len(light) - 1)], ends)
    return syncs, ends


def inside_spans(spans: tuple[np.ndarray, np.ndarray], start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether each interval [start, end] lies wholly inside one span (spans sorted, disjoint)."""
    lo, hi = spans
    j = np.searchsorted(lo, start, side="right") - 1
    ok = j >= 0
    jj = np.maximum(j, 0)
    return ok & (end <= hi[jj]) & (start >= lo[jj])


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
