"""Per-phase, per-operation time breakdown by CPU category and resource overlap.

Pure functions: a loaded :class:`~rlscope.trace.reader.Trace` in, Arrow tables and a summary
dict out. Exclusive time goes to the innermost open operation; inclusive time counts every
instance that has no same-named ancestor (so recursion is not counted twice). Time on the
session's main thread inside no operation is ``unannotated``; on other threads, only time inside
operations counts (an idle helper thread is not work).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis.overlap import overlap_by_group
from rlscope.analysis.timeline import Timeline, build_timeline
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, Trace

UNANNOTATED = "[unannotated]"
NO_PHASE = "[no phase]"
NCAT = len(categories.CATEGORY_NAMES)

CPU_TIME_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("phase", pa.string()),
        ("operation", pa.string()),
        ("category", pa.string()),
        ("main_thread", pa.bool_()),
        ("seconds", pa.float64()),
    ]
)
OPS_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("phase", pa.string()),
        ("operation", pa.string()),
        ("calls", pa.int64()),
        ("inclusive_s", pa.float64()),
        ("cpu_only_s", pa.float64()),
        ("gpu_only_s", pa.float64()),
        ("cpu_gpu_s", pa.float64()),
    ]
)


@dataclasses.dataclass
class ProcessBreakdown:
    """Analysis tables of one process."""

    pid: int
    host: str
    start_ns: int
    end_ns: int
    wall_s: float
    events: int
    complete: bool
    cpu_time: pa.Table  # CPU_TIME_SCHEMA: exclusive seconds per (phase, operation, category, main thread)
    ops: pa.Table  # OPS_SCHEMA: calls, inclusive time and resource overlap per (phase, operation)
    phase_wall_s: dict[str, float]  # main-thread wall time per phase


def analyze_process(proc: ProcessTrace) -> ProcessBreakdown:
    tl = build_timeline(proc.events)
    return breakdown_timeline(tl, proc.names, proc.pid, proc.metadata.get("host", ""), proc.complete)


def _dense(values: np.ndarray, identity: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique values, index of each value into them) for small ints >= -1.

    A lookup table instead of np.unique: name ids are small, and this is O(n) with no sort
    (np.unique's sort was most of the analyzer's time on large traces).
    """
    if len(values) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if identity is not None and identity < 4096:
        # few distinct names: index by the value itself (+1 for -1), skipping the remap pass
        return np.arange(-1, identity), values + 1
    shifted = values + 1
    present = np.zeros(int(shifted.max()) + 1, bool)
    present[shifted] = True
    uniq = np.flatnonzero(present) - 1
    remap = np.cumsum(present) - 1
    return uniq, remap[shifted]


def _merge_adjacent(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, thread: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Join consecutive segments of one group on one thread that touch (fewer endpoints to sort)."""
    if len(group) == 0:
        return group, start, end
    new = np.ones(len(group), bool)
    new[1:] = (group[1:] != group[:-1]) | (thread[1:] != thread[:-1]) | (start[1:] != end[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(group) - 1)
    return group[first], start[first], end[last]


def breakdown_timeline(
    tl: Timeline, names: list[str], pid: int = 0, host: str = "", complete: bool = True
) -> ProcessBreakdown:
    """Aggregate a process timeline into the breakdown tables (see module docstring)."""

    def name_of(i: int, none: str) -> str:
        if i < 0:
            return none
        return names[i] if i < len(names) else f"<unknown name {i}>"

    dur = tl.duration
    main = tl.thread == tl.main_thread
    in_session = tl.ts >= tl.start_ns
    inst_name = np.append(tl.inst_name, -1)  # index -1 (no instance) reads this last -1
    op_name = inst_name[tl.op]
    ph_name = inst_name[tl.phase]
    keep = (dur > 0) & in_session & ((op_name >= 0) | main)

    # group key over (phase name, operation name, category, main thread)
    ph_u, ph_i = _dense(ph_name[keep])
    op_u, op_i = _dense(op_name[keep], identity=len(names))
    cat = tl.cat[keep]
    m = main[keep].astype(np.int64)
    key = ((ph_i * len(op_u) + op_i) * NCAT + cat) * 2 + m
    size = max(len(ph_u) * len(op_u) * NCAT * 2, 1)
    sums = np.bincount(key, weights=dur[keep], minlength=size)
    nz = np.flatnonzero(sums)
    k_m, rest = nz % 2, nz // 2
    k_cat, rest = rest % NCAT, rest // NCAT
    k_op, k_ph = rest % len(op_u) if len(op_u) else rest, rest // max(len(op_u), 1)
    cpu_time = pa.table(
        {
            "pid": np.full(len(nz), pid, np.int64),
            "phase": [name_of(int(ph_u[i]), NO_PHASE) for i in k_ph],
            "operation": [name_of(int(op_u[i]), UNANNOTATED) for i in k_op],
            "category": [categories.CATEGORY_NAMES[int(c)] for c in k_cat],
            "main_thread": k_m.astype(bool),
            "seconds": sums[nz] / 1e9,
        },
        schema=CPU_TIME_SCHEMA,
    )

    # per operation instance: calls and inclusive time (phase = the phase open at its begin)
    begins = np.flatnonzero(tl.kind == S.OP_BEGIN)
    b_inst = tl.id[begins]
    b_name = tl.name[begins].astype(np.int64)
    b_phase = ph_name[begins]
    b_incl = np.where(tl.flags[begins] & S.FLAG_RECURSIVE, 0, tl.inst_end[b_inst] - tl.ts[begins])

    # resource overlap: the operation's exclusive CPU segments vs the GPU work attributed to it
    # (no GPU collector yet: GPU families are empty and everything is CPU-only)
    seg = keep & (op_name >= 0)
    pair_ph_u, pair_ph_i = _dense(np.concatenate([b_phase, ph_name[seg]]))
    pair_op = np.concatenate([b_name, op_name[seg]])
    width = int(pair_op.max(initial=0)) + 2
    pair_key, pair_i = _dense(pair_ph_i * width + pair_op + 1)
    pairs = np.stack([pair_ph_u[pair_key // width], pair_key % width - 1], axis=1)
    n_pairs = len(pairs)
    calls = np.bincount(pair_i[: len(begins)], minlength=n_pairs)
    incl = np.bincount(pair_i[: len(begins)], weights=b_incl, minlength=n_pairs)
    seg_group = pair_i[len(begins) :]
    if (tl.thread[seg] == tl.main_thread).all():
        # one thread: an operation's exclusive segments never overlap, so their union is their sum
        cpu_only = np.bincount(seg_group, weights=dur[seg], minlength=n_pairs).astype(np.float64)
        gpu_only, both = np.zeros(n_pairs), np.zeros(n_pairs)
    else:
        g, s, e = _merge_adjacent(seg_group, tl.ts[seg], tl.seg_end[seg], tl.thread[seg])
        empty = np.zeros(0, np.int64)
        cpu_only, gpu_only, both = overlap_by_group(g, s, e, empty, empty, empty, n_pairs)
    ops = pa.table(
        {
            "pid": np.full(n_pairs, pid, np.int64),
            "phase": [name_of(int(p), NO_PHASE) for p in pairs[:, 0]] if n_pairs else [],
            "operation": [name_of(int(o), UNANNOTATED) for o in pairs[:, 1]] if n_pairs else [],
            "calls": calls.astype(np.int64),
            "inclusive_s": incl / 1e9,
            "cpu_only_s": cpu_only / 1e9,
            "gpu_only_s": gpu_only / 1e9,
            "cpu_gpu_s": both / 1e9,
        },
        schema=OPS_SCHEMA,
    )

    mk = keep & main
    ph_main_u, ph_main_i = _dense(ph_name[mk])
    ph_wall = np.bincount(ph_main_i, weights=dur[mk], minlength=len(ph_main_u))
    phase_wall = {name_of(int(p), NO_PHASE): float(w) / 1e9 for p, w in zip(ph_main_u, ph_wall, strict=True)}
    return ProcessBreakdown(
        pid=pid,
        host=host,
        start_ns=tl.start_ns,
        end_ns=tl.end_ns,
        wall_s=(tl.end_ns - tl.start_ns) / 1e9,
        events=len(tl.ts),
        complete=complete,
        cpu_time=cpu_time,
        ops=ops,
        phase_wall_s=phase_wall,
    )


def analyze(trace: Trace) -> list[ProcessBreakdown]:
    """Breakdown tables for every process of a trace."""
    return [analyze_process(p) for p in trace.processes]
