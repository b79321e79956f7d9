"""Per-phase, per-operation time breakdown by CPU category and resource overlap.

Pure functions: a loaded :class:`~rlscope.trace.reader.Trace` in, Arrow tables and a summary
dict out. Exclusive time goes to the innermost open operation; inclusive time counts every
instance that has no same-named ancestor (so recursion is not counted twice). Time on the
session's main thread inside no operation is ``unannotated``; on other threads, only time inside
operations counts (an idle helper thread is not work).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis import gpu, native, noise
from rlscope.analysis.overlap import merge_adjacent, overlap_by_group
from rlscope.analysis.timeline import Timeline, contiguous
from rlscope.blocks import BLOCK_ROWS, blocks
from rlscope.overhead.correct import EventCosts, FullFraction, GpuScale, correct_process
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, Trace, name_of

UNANNOTATED, NO_PHASE = categories.UNANNOTATED, categories.NO_PHASE
NCAT = len(categories.CATEGORY_NAMES)
# categories every window records, each instance's own: taken as recorded, not split like the full windows
_AS_RECORDED = [categories.COMPILE, categories.WAITING]

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
GPU_TIME_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("phase", pa.string()),
        ("operation", pa.string()),
        ("category", pa.string()),
        ("count", pa.int64()),
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
# The noise of each summed figure (rlscope.analysis.noise): per (phase, operation) and measure --
# "total" (inclusive), "exclusive", or a category name -- the instances and the variance of the sum
# (s^2). Operations only: unannotated time has no repeated instances to tell its noise from.
NOISE_SCHEMA = pa.schema(
    [
        ("pid", pa.int64()),
        ("phase", pa.string()),
        ("operation", pa.string()),
        ("measure", pa.string()),
        ("instances", pa.int64()),
        ("variance_s2", pa.float64()),
        # what its one-time instances (the first, those that compiled) took beyond the others
        # (rlscope.analysis.noise.one_time_excess): warm-up every run pays once
        ("one_time_s", pa.float64()),
    ]
)
TOTAL, EXCLUSIVE = "total", "exclusive"


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
    gpu_time: pa.Table  # GPU_TIME_SCHEMA: GPU time launched by each (phase, operation), by category
    gpu: dict  # GPU-bound time and the NVML comparison (rlscope.analysis.gpu.nvml_comparison)
    overhead: dict = dataclasses.field(default_factory=dict)  # what correction removed (corrected only)
    noise: pa.Table = dataclasses.field(default_factory=NOISE_SCHEMA.empty_table)  # NOISE_SCHEMA
    # a run with detail stretches: the whole run's and the detail's seconds (rlscope.analysis.whole_run)
    detail: dict = dataclasses.field(default_factory=dict)
    # each operation and phase name: whether every instance was automatic (ProcessTrace.automatic)
    automatic: dict[str, bool] = dataclasses.field(default_factory=dict)


def analyze_process(proc: ProcessTrace, costs: EventCosts | None = None) -> ProcessBreakdown:
    """The raw breakdown of one process (``costs`` None), or the one corrected for ``costs``."""
    raw, corrected = analyze_process_pair(proc, costs)
    return raw if corrected is None else corrected


def unlaunched(records: gpu.GpuRecords, found: np.ndarray) -> dict[str, float]:
    """GPU records whose launching CUDA API call is not in the trace: they count as unannotated.

    A kernel still running from before the session is one; many, or much GPU time, mean the
    correlation between API calls and GPU work broke (another CUPTI client in the process, such as
    torch.profiler run before rlscope, was seen to do this), and the summary warns.
    """
    lost = ~found  # found: gpu.launching_call's second result
    return {
        "records_without_launch": int(lost.sum()),
        "gpu_s_without_launch": float((records.end - records.start)[lost].sum()) / 1e9,
        "gpu_s_recorded": float((records.end - records.start).sum()) / 1e9,
    }


def _as_is(bd: ProcessBreakdown, costs: EventCosts | None) -> ProcessBreakdown:
    return bd


def analyze_process_pair(
    proc: ProcessTrace,
    costs: EventCosts | None,
    joined: gpu.JoinedTimeline | None = None,
    finish: Callable[[ProcessBreakdown, EventCosts | None], ProcessBreakdown] = _as_is,
) -> tuple[ProcessBreakdown, ProcessBreakdown | None]:
    """(raw, corrected) breakdowns of one process from one timeline; corrected is None without costs.

    The corrected one runs the same aggregation over the timeline with rlscope's overhead removed
    (:func:`rlscope.overhead.correct.correct_process`: the residual per-event costs and what the
    windows measured); GPU work keeps its durations and moves with its launch. Where the full windows
    stand for the run, categories are split and GPU figures scaled as they recorded them.
    ``joined``: the process's timeline with GPU work (:func:`rlscope.analysis.gpu.timeline_with_gpu`),
    when the caller already built it. ``finish``: applied to each breakdown with the costs it was
    corrected for (None: raw), e.g. to add the time between detail stretches (analysis/whole_run.py).
    """
    tl, api, records = joined if joined is not None else gpu.timeline_with_gpu(proc)
    host = proc.metadata.get("host", "")
    gpu_records = launch = None
    if api is not None:
        launch = gpu.launching_call(api, records)  # once: attribution, the check and the correction
        op, phase = gpu.attribute(tl, api, records, launch)
        gpu_records = (records, op, phase)
    fix = fixed_groups = moved = None
    counted_raw = counted = None
    split = False  # whether the corrected categories are split as in the full windows
    if costs is not None:
        launches = None if launch is None else gpu.launch_points(tl, api, records, launch)
        fix = correct_process(proc, tl, costs, launches)  # the correction, in one call
        if gpu_records is not None and fix.gpu_shift_ns is not None:
            recs, op, phase = gpu_records
            shift = fix.gpu_shift_ns
            moved = (dataclasses.replace(recs, start=recs.start - shift, end=recs.end - shift), op, phase)
    # the corrected timeline's rows are the raw one's, retimed: one grouping serves both, made after
    # the correction so that it is not held through the correction's highest memory
    groups = row_groups(tl, gpu_records)
    if fix is not None:
        split = fix.full_fraction is not None
        if groups.fits(fix.timeline, moved):
            # the raw breakdown's sums, the corrected one's and its category split's (with the time in
            # full windows), in one pass over the rows
            fixed_groups = groups
            counted_raw, counted = _counted_pair(tl, fix.timeline, groups, fix.full_fraction)
        else:
            fixed_groups = row_groups(fix.timeline, moved)
            full = None if fix.full_fraction is None else fix.full_fraction.column(tl.ts)
            counted = _counted_sums(fix.timeline, fixed_groups, full)
        if counted.full is not None:
            # the split's sums made in the pass: the rows' fractions (a float per row) are read no more,
            # and the breakdowns below run without them
            fix.full_fraction = None
    raw = breakdown_timeline(
        tl, proc.names, proc.pid, host, proc.complete, gpu_records, nvml=proc.nvml, groups=groups,
        counted=counted_raw,
    )  # fmt: skip
    raw.automatic = proc.automatic
    if launch is not None:
        raw.gpu.update(unlaunched(records, launch[1]))
    raw_whole = finish(raw, None)
    if fix is None or fixed_groups is None or counted is None:  # no costs: no correction
        return raw_whole, None
    corrected = breakdown_timeline(
        fix.timeline, proc.names, proc.pid, host, proc.complete, moved, None, fixed_groups, counted
    )
    corrected.automatic = proc.automatic
    # NVML compares two raw measurements of the same clock: keep that comparison from the raw run
    corrected.gpu = {**raw.gpu, **{k: corrected.gpu[k] for k in ("gpu_bound_s", "gpu_bound_fraction")}}
    if split:
        # the rows' shares as a column only where the pass summed none (numpy's loops)
        full = None if fix.full_fraction is None else fix.full_fraction.column(tl.ts)
        _split_like_full_windows(corrected, full, proc.names, fix.timeline, proc.pid, fixed_groups, counted)
    if fix.gpu_scale is not None:
        _scale_gpu_to_run(corrected, fix.gpu_scale)
    if fix.scaled_from_full_windows is not None:
        corrected.gpu["scaled_from_full_windows"] = fix.scaled_from_full_windows
    corrected.overhead = fix.overhead
    return raw_whole, finish(corrected, fix.costs)


def _name(names: list[str], i: int, none: str = UNANNOTATED) -> str:
    return name_of(names, i, none)


def _scale_gpu_to_run(b: ProcessBreakdown, scale: GpuScale) -> None:
    """GPU tracing ran in full windows only: its figures scaled to stand for every instance (``scale``)."""
    g = b.gpu_time.to_pydict()
    f = [scale.factor(p, o) for p, o in zip(g["phase"], g["operation"], strict=True)]
    g["seconds"] = [s * k for s, k in zip(g["seconds"], f, strict=True)]
    g["count"] = [round(c * k) for c, k in zip(g["count"], f, strict=True)]
    b.gpu_time = pa.table(g, schema=GPU_TIME_SCHEMA)
    o = b.ops.to_pydict()
    for i, (p, op) in enumerate(zip(o["phase"], o["operation"], strict=True)):
        k = scale.factor(p, op)
        cpu = o["cpu_only_s"][i] + o["cpu_gpu_s"][i]
        o["cpu_gpu_s"][i] = min(o["cpu_gpu_s"][i] * k, cpu)
        o["gpu_only_s"][i] *= k
        o["cpu_only_s"][i] = cpu - o["cpu_gpu_s"][i]
    b.ops = pa.table(o, schema=OPS_SCHEMA)
    if "gpu_bound_s" in b.gpu:
        b.gpu["gpu_bound_s"] *= scale.run
    if "gpu_bound_fraction" in b.gpu and b.wall_s > 0:
        b.gpu["gpu_bound_fraction"] = b.gpu["gpu_bound_s"] / b.wall_s


def _split_like_full_windows(
    b: ProcessBreakdown,
    full: np.ndarray | None,
    names: list[str],
    tl: Timeline,
    pid: int,
    groups: RowGroups,
    counted: CountedSums,
) -> None:
    """Categories per (phase, operation): the corrected total split as in the full windows (``full``:
    the share of each row of ``tl`` that ran in one, None where ``counted`` holds their sums;
    ``groups``: :func:`row_groups` of its rows, ``counted``: the breakdown's :func:`_counted_sums` of
    them).

    Light windows record no backend ops or CUDA API calls, so their time reads as ``python``;
    only the full windows see the split, and it stands for the operation's whole time. Compile time
    (every window records it, and a few instances hold all of it: a first call) and waiting (every
    window records it, and it is no part of the work the split describes) stay as recorded.
    """
    # one key per (phase, operation) pair then the main thread: pairs are numbered in (phase,
    # operation) order, so the keys sort like the (phase, operation, main) rows they stand for; each
    # key's time per category is the breakdown's own (counted rows have time: a key with rows has some)
    by_key = counted.sums.transpose(0, 2, 1).reshape(-1, NCAT)
    held = by_key.sum(axis=1) > 0
    ukey = np.flatnonzero(held)
    pair = ukey // 2
    uniq = np.stack([groups.pair_ph[pair], groups.pair_op[pair], ukey % 2], axis=1)
    cat_all = by_key[held]
    cat_full = _full_by_key(tl, groups, full, counted, held)
    out: dict[str, list] = {c: [] for c in CPU_TIME_SCHEMA.names}
    as_recorded = cat_all[:, _AS_RECORDED].copy()
    cat_all[:, _AS_RECORDED] = cat_full[:, _AS_RECORDED] = 0.0
    for k, (p, o, m) in enumerate(uniq.tolist()):
        # never in a full window: the light windows' (python) time as it is
        shares = cat_full[k] if cat_full[k].sum() > 0 else cat_all[k]
        seconds = cat_all[k].sum() * (shares / shares.sum()) if shares.sum() > 0 else np.zeros(NCAT)
        seconds[_AS_RECORDED] = as_recorded[k]
        for c in np.flatnonzero(seconds):
            out["pid"].append(pid)
            out["phase"].append(_name(names, p, NO_PHASE))
            out["operation"].append(_name(names, o))
            out["category"].append(categories.CATEGORY_NAMES[int(c)])
            out["main_thread"].append(bool(m))
            out["seconds"].append(seconds[c] / 1e9)
    b.cpu_time = pa.table(out, schema=CPU_TIME_SCHEMA)


def _full_by_key(
    tl: Timeline, groups: RowGroups, full: np.ndarray | None, counted: CountedSums, held: np.ndarray
) -> np.ndarray:
    """(keys held, NCAT): :func:`_full_window_sums` of the keys ``held`` selects (as
    :func:`_split_like_full_windows`'s), or the same sums ``counted`` made in its pass."""
    if counted.full is not None:
        return counted.full.transpose(0, 2, 1).reshape(-1, NCAT)[held]
    assert full is not None, "the rows' fractions in full windows, where the pass summed none"
    rank, size = np.cumsum(held) - 1, int(held.sum()) * NCAT
    return _full_window_sums(tl, groups, full, rank, size).reshape(-1, NCAT)


def _full_window_sums(
    tl: Timeline, groups: RowGroups, full: np.ndarray, rank: np.ndarray, size: int
) -> np.ndarray:
    """Per (key, category) (``rank``: each key's index, ``size`` of them by NCAT; keys as
    :func:`_split_like_full_windows`'s), the time of the counted rows that ran in full
    windows: added in row order (a row's share is a fraction of a ns, and such sums depend on the
    order), a block of rows at a time (np.add.at: one addition after another, as one count over all
    the rows makes them). The C loop of :func:`_counted_sums` makes the same sums in its pass."""
    out = np.zeros(size)
    main_rows = tl.main_rows()
    for r in blocks(len(tl.ts)):
        ts, end = tl.ts[r], tl.seg_end[r]
        rows, main = _counted_block(tl, groups, r, main_rows)
        key = groups.row_pair[r][rows].astype(np.int64) * 2
        key += main
        cell = rank[key] * NCAT
        cell += tl.cat[r][rows]
        np.add.at(out, cell, (end[rows] - ts[rows]).astype(np.float64) * full[r][rows])
    return out


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
    start, end, (group, _) = merge_adjacent(start, end, group, thread)
    return group, start, end


@dataclasses.dataclass
class RowGroups:
    """The (phase, operation) pair of every row that can hold counted time, of every operation
    instance and of every GPU record: what a breakdown groups by, apart from the durations.

    Why: the corrected timeline keeps the raw one's rows (only their times change), so the raw and
    the corrected breakdown share this grouping instead of rebuilding it over millions of rows.
    """

    op: np.ndarray  # the timeline's columns it was made from (identity: :meth:`fits`)
    phase: np.ndarray
    inst_name: np.ndarray
    threads: np.ndarray
    main_thread: int
    rec_op: np.ndarray | None  # the GPU records' launching instances it was made with (None: no records)
    runs: np.ndarray  # the first row of each run of rows that share their pair (int64, ascending)
    run_pair: np.ndarray  # per run: its pair index (int32), -1 for rows that hold no counted time
    begins: np.ndarray  # the OP_BEGIN rows
    b_pair: np.ndarray
    g_op: np.ndarray  # each GPU record's operation name id, and its pair
    g_pair: np.ndarray
    pair_ph: np.ndarray  # each pair's phase and operation name ids, sorted by (phase, operation)
    pair_op: np.ndarray
    # the categories of the rows inside named operations, a bit each (bit 63: one of 63 or more, or
    # below 0), or -1 where not known (numpy's loops): those of an instance's counted time
    op_cat_bits: int = -1

    def fits(self, tl: Timeline, gpu_records: tuple[gpu.GpuRecords, np.ndarray, np.ndarray] | None) -> bool:
        """Whether ``tl`` and ``gpu_records`` are those this grouping was made from, retimed."""
        return (
            rec_op_inst(gpu_records) is self.rec_op
            and tl.op is self.op
            and tl.phase is self.phase
            and tl.inst_name is self.inst_name
            and tl.threads is self.threads
            and tl.main_thread == self.main_thread
        )

    @functools.cached_property
    def row_pair(self) -> np.ndarray:
        """Per row: its pair index (int32; -1: no counted time), the runs' pairs spread over their rows.
        Made on first use, by the numpy loops only: the C loops read the runs, and a column of the
        timeline's length held from the raw breakdown through the correction was at the analysis's
        highest memory."""
        return np.repeat(self.run_pair, np.diff(self.runs, append=len(self.op)))


def row_groups(
    tl: Timeline, gpu_records: tuple[gpu.GpuRecords, np.ndarray, np.ndarray] | None = None
) -> RowGroups:
    """One dense index over the (phase, operation) pairs of ``tl``'s rows, instances and GPU work."""
    inst_name = np.append(tl.inst_name, -1)  # index -1 (no instance) reads this last -1
    if gpu_records is not None:
        _, rec_op, rec_phase = gpu_records
        g_op, g_ph = inst_name[rec_op], inst_name[rec_phase]
    else:
        g_op, g_ph = np.zeros(0, np.int64), np.zeros(0, np.int64)
    numbered = _numbered_c(tl, inst_name, g_ph, g_op)
    runs, run_pair, begins, b_pair, g_pair, pair_ph, pair_op, op_cat_bits = (
        numbered if numbered is not None else (*_numbered(tl, inst_name, g_ph, g_op), -1)
    )
    return RowGroups(
        op=tl.op,
        phase=tl.phase,
        inst_name=tl.inst_name,
        threads=tl.threads,
        main_thread=tl.main_thread,
        rec_op=rec_op_inst(gpu_records),
        runs=runs,
        run_pair=run_pair,
        begins=begins,
        b_pair=b_pair,
        g_op=g_op,
        g_pair=g_pair,
        pair_ph=pair_ph,
        pair_op=pair_op,
        op_cat_bits=op_cat_bits,
    )


# runs, run_pair, begins, b_pair, g_pair, pair_ph, pair_op: RowGroups' fields of those names
Numbered = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# Numbered, then RowGroups' op_cat_bits
NumberedBits = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]


def _numbered(tl: Timeline, inst_name: np.ndarray, g_ph: np.ndarray, g_op: np.ndarray) -> Numbered:
    """:class:`RowGroups`' runs, begins and pairs in numpy (``inst_name``: the instances' names, -1
    appended; ``g_ph``, ``g_op``: the GPU records' phase and operation names).

    Consecutive rows of one thread, operation instance and phase instance share their pair (a
    process's torch ops are a dozen rows an instance): each run is looked up once; the runs that can
    hold counted time are those inside an operation or on the main thread."""
    new_run = np.ones(len(tl.op), bool)
    np.not_equal(tl.op[1:], tl.op[:-1], out=new_run[1:])
    new_run[1:] |= tl.phase[1:] != tl.phase[:-1]
    new_run[1:] |= tl.thread_idx[1:] != tl.thread_idx[:-1]
    runs = np.flatnonzero(new_run)
    op_name = inst_name[tl.op[runs]]
    cand = np.flatnonzero((op_name >= 0) | (tl.thread_of(runs) == tl.main_thread))
    op_c, ph_c = op_name[cand], inst_name[tl.phase[runs[cand]]]
    scope_begins = tl.scope_begins()  # the operations' and phases' begins, found once per set of rows
    begins = scope_begins[tl.kind[scope_begins] == S.OP_BEGIN]
    b_name = tl.name[begins].astype(np.int64)
    ph_u, ph_i = _dense(np.concatenate([ph_c, inst_name[tl.phase[begins]], g_ph]))
    all_op = np.concatenate([op_c, b_name, g_op])
    width = int(all_op.max(initial=0)) + 2  # above every op id + 1: keys sort by (phase, operation)
    pair_key, pair_i = _dense(ph_i * width + all_op + 1)
    n_c, n_b = len(cand), len(begins)
    run_pair = np.full(len(runs), -1, np.int32)
    run_pair[cand] = pair_i[:n_c]
    b_pair, g_pair = pair_i[n_c : n_c + n_b], pair_i[n_c + n_b :]
    return runs, run_pair, begins, b_pair, g_pair, ph_u[pair_key // width], pair_key % width - 1


PAIR_SLOTS = 4096  # the pairs' hash table's first size (_numbered_c): a few dozen pairs in a trace


def _numbered_c(
    tl: Timeline, inst_name: np.ndarray, g_ph: np.ndarray, g_op: np.ndarray
) -> NumberedBits | None:
    """:func:`_numbered` in one C pass over the rows and one over the scope begins (breakdown.c): each
    run's and begin's pair looked up in a hash table of the pairs as it is met, the few pairs sorted
    and renumbered after, where numpy gathers each run's and begin's names and numbers the pairs from
    arrays of all of them; and :class:`RowGroups`' ``op_cat_bits``, found in the pass over the rows
    (-1 for categories of another type than the C reads). None where numpy's loops run (no C loops,
    or columns of other types)."""
    index_type = native.INTEGER.get(tl.thread_idx.dtype)
    if index_type is None:
        return None
    table = native.I32, native.N, native.I64, native.I64, native.I64  # slots, their count, the pairs
    args = native.N, None, None, index_type, native.N, native.I64, native.I64, native.I32, native.N, *table
    args += native.I8, native.N, native.I64  # the categories (with whether read), their bits
    runs_fn = native.typed("breakdown_run_pairs", [tl.op.dtype, tl.thread_idx.dtype], *args, restype=native.N)
    args = native.N, native.I64, native.I8, native.N, native.I32, None, native.I64, native.I64, native.I64
    args += table
    begins_fn = native.typed("breakdown_begin_pairs", [tl.phase.dtype], *args, restype=native.N)
    args = native.N, native.I64, native.I64, native.I64, *table
    gpu_fn = native.function("breakdown_pair_numbers", *args, restype=native.N)
    renumber = native.function("breakdown_renumber_pairs", native.N, native.I32, native.I32)
    if runs_fn is None or begins_fn is None or gpu_fn is None or renumber is None:
        return None
    scope_begins = tl.scope_begins()  # the operations' and phases' begins, found once per set of rows
    columns = (tl.op, tl.phase, tl.thread_idx, tl.kind, tl.name, scope_begins)
    typed = tl.phase.dtype == tl.op.dtype and tl.kind.dtype == np.int8 and tl.name.dtype == np.int32
    if not typed or inst_name.dtype != np.int64 or scope_begins.dtype != np.int64 or not contiguous(*columns):
        return None
    main_rows = tl.main_rows()  # the main thread's rows: one thread index's block
    main_idx = int(tl.thread_idx[main_rows.start]) if main_rows.stop > main_rows.start else -1
    g_ph, g_op = np.ascontiguousarray(g_ph, np.int64), np.ascontiguousarray(g_op, np.int64)
    n, m = len(tl.op), len(scope_begins)
    with_cats = tl.cat.dtype == np.int8 and tl.cat.flags.c_contiguous
    cat, op_cats = tl.cat if with_cats else np.zeros(0, np.int8), np.zeros(1, np.int64)
    # a run begins at row 0, at a thread's first row, and where an operation or a phase begins or ends:
    # runs elsewhere (columns that change at other rows) are counted and the pass asked again
    size, n_slots = m + len(tl.scope_ends()) + len(tl.threads) + 1, PAIR_SLOTS
    while True:
        slots, state = np.full(n_slots, -1, np.int32), np.zeros(1, np.int64)
        ph_tab, op_tab = np.empty(n_slots // 2, np.int64), np.empty(n_slots // 2, np.int64)
        hashed = slots, n_slots, ph_tab, op_tab, state
        runs, run_pair = np.empty(size, np.int64), np.empty(size, np.int32)
        count = runs_fn(
            n, tl.op, tl.phase, tl.thread_idx, main_idx, inst_name, runs, run_pair, size, *hashed,
            cat, int(with_cats), op_cats,
        )  # fmt: skip
        if count > size:
            size = count
            continue
        begins, b_pair, g_pair = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(len(g_ph), np.int64)
        n_b = -1  # the table full with the runs' pairs: no begins looked up
        if count >= 0:
            b_args = tl.kind, S.OP_BEGIN, tl.name, tl.phase, inst_name, begins, b_pair
            n_b = begins_fn(m, scope_begins, *b_args, *hashed)
        if n_b >= 0 and gpu_fn(len(g_ph), g_ph, g_op, g_pair, *hashed) == 0:
            break
        n_slots *= 4  # more pairs than the table holds: again with a larger one
    n_pairs = int(state[0])
    order = np.lexsort((op_tab[:n_pairs], ph_tab[:n_pairs]))  # the pairs in (phase, operation) order
    rank = np.empty(n_pairs, np.int32)
    rank[order] = np.arange(n_pairs, dtype=np.int32)
    renumber(count, run_pair, rank)
    b_pair, g_pair = rank[b_pair[:n_b]].astype(np.int64), rank[g_pair].astype(np.int64)
    # the begins copied out of the places made for them (a scope begin each; the operations' are about
    # half): the groups are held through both breakdowns, the unused places not
    runs, run_pair, begins = runs[:count], run_pair[:count], begins[:n_b].copy()
    bits = int(op_cats[0]) if with_cats else -1
    return runs, run_pair, begins, b_pair, g_pair, ph_tab[order], op_tab[order], bits


@dataclasses.dataclass
class CountedSums:
    """What a breakdown sums over its counted rows: those of positive duration inside an operation or
    on the main thread (``RowGroups.row_pair`` >= 0). Indexed by the grouping's pairs.

    Why one pass a block of rows at a time: gathered whole, each counted row's pair, category,
    duration and instance were a dozen arrays of the timeline's length (millions of torch-op rows)
    alive at once, the analysis's highest memory and most of the breakdown's time. Every figure is a
    sum of whole nanoseconds, exact in any order below 2**53 ns (104 days), so block sums add up to
    the bits one pass over every row gives.
    """

    sums: np.ndarray  # (pairs, NCAT, 2): exclusive ns per (pair, category, main thread?)
    off_main: bool  # whether a counted row is off the main thread
    # (instances, columns): exclusive ns per operation instance and category, category c's in column
    # inst_col[c] (-1: no column, no time). The C pass makes columns of the categories the operations'
    # rows hold alone (RowGroups.op_cat_bits: a few of NCAT), numpy's loops one per category
    inst_cat: np.ndarray
    inst_col: np.ndarray
    # per category: whether a counted row inside an operation holds it (read off the operations'
    # pairs in ``sums``, the same rows as ``inst_cat``'s, which is the instances' length)
    op_cats: np.ndarray
    # like ``sums``, of the rows' time in full windows (the fractions _counted_sums was given), added
    # in row order; None where it was given none or the numpy loops ran (_full_window_sums makes it)
    full: np.ndarray | None = None

    @property
    def present(self) -> np.ndarray:
        """Per pair: whether a counted row holds it (each holds time)."""
        return self.sums.sum(axis=(1, 2)) > 0


def _row_loop(tl: Timeline, name: str, *argtypes: Any, restype: Any = None) -> Callable[..., Any] | None:
    """The C loop ``name`` over ``tl``'s rows (rlscope/analysis/native/breakdown.c), taking
    :func:`_row_args` then ``argtypes``; None where numpy's loop runs: no library, or times not in
    the one block of int64 the C reads (:func:`_segments_read`)."""
    if not _segments_read(tl):
        return None
    args = native.SEGMENTS, native.N, native.I64, native.I32
    return native.function(name, *args, *argtypes, restype=restype)


def _segments_read(tl: Timeline) -> bool:
    """Whether the C loops can read ``tl``'s segments (``Timeline.segments``): its times one block of
    int64. Why: they read each segment's end off the next row's time, where a column of the ends
    would be 8 bytes a row more to make, hold and read."""
    return tl.ts.dtype == np.int64 and contiguous(tl.ts)


def _row_args(tl: Timeline, groups: RowGroups) -> tuple[native.Segments, int, np.ndarray, np.ndarray]:
    """What every C loop over the counted rows reads: the rows' segments, and the runs of rows that
    share a pair with each run's pair (:class:`RowGroups`)."""
    return tl.segments(), len(groups.runs), groups.runs, groups.run_pair


def _counted_block(
    tl: Timeline, groups: RowGroups, r: slice, main_rows: slice, d: np.ndarray | None = None
) -> tuple[np.ndarray | slice, np.ndarray | int]:
    """The counted rows of block ``r`` (:class:`CountedSums`), as indices into the block or, where every
    row counts (a block of torch-op rows: nearly all), the whole block, read as it is; and whether each
    is on the main thread: 1 for a block inside ``main_rows`` (the main thread's rows are one run).
    ``d``: the block's durations, where the caller has them."""
    counted = _counted_mask(tl, groups, r, d)
    rows: np.ndarray | slice = slice(None) if counted.all() else np.flatnonzero(counted)
    if main_rows.start <= r.start and r.stop <= main_rows.stop:
        return rows, 1
    return rows, tl.thread_of(r)[rows] == tl.main_thread


def _counted_mask(tl: Timeline, groups: RowGroups, r: slice, d: np.ndarray | None = None) -> np.ndarray:
    """Which rows of block ``r`` count (:class:`CountedSums`: positive duration, in a pair); ``d``: the
    block's durations, where the caller has them."""
    positive = d > 0 if d is not None else tl.seg_end[r] > tl.ts[r]
    return positive & (groups.row_pair[r] >= 0)


def _counted_in(tl: Timeline, groups: RowGroups, r: slice) -> np.ndarray:
    """The counted rows of block ``r`` as indices into the block."""
    return np.flatnonzero(_counted_mask(tl, groups, r))


# each category's column among an instance's, and their count: one per category
EVERY_CATEGORY = (np.arange(NCAT, dtype=np.int64), NCAT)


def _inst_columns(groups: RowGroups) -> tuple[np.ndarray, int]:
    """(each category's column among an instance's in :class:`CountedSums`' ``inst_cat``, -1 for none;
    how many): the categories of ``groups.op_cat_bits`` in order, or :data:`EVERY_CATEGORY` where they
    are not known. Why: an instance's time is of a few categories (a torch trace's: three of ten),
    and the instances' sums (two timelines' at once) were the breakdown's highest memory."""
    bits = groups.op_cat_bits
    if bits < 0 or bits >> NCAT:
        return EVERY_CATEGORY
    held = (bits >> np.arange(NCAT)) & 1 > 0
    col = np.full(NCAT, -1, np.int64)
    col[held] = np.arange(int(held.sum()))
    return col, int(held.sum())


def _counted_sums(
    tl: Timeline,
    groups: RowGroups,
    full: np.ndarray | None = None,
    columns: tuple[np.ndarray, int] | None = None,
) -> CountedSums:
    """The :class:`CountedSums` of ``tl``'s rows, grouped by ``groups``: in one C pass over the rows
    (breakdown.c), with their time in full windows where ``full`` gives each row's share in them, an
    instance's time in ``columns`` (:func:`_inst_columns`' by default); else a block of rows at a time
    in numpy, without, a column per category."""
    n_pairs, n_inst = len(groups.pair_ph), len(tl.inst_name)
    is_op = groups.pair_op >= 0
    main_rows = tl.main_rows()
    args = native.I8, native.I32, native.N, native.N, native.BOOL, native.N, native.F64, native.N, native.I64
    args += native.F64, native.N, native.F64, native.F64
    narrow = tl.cat.dtype == np.int8 and tl.op.dtype == np.int32  # the C's types (nearly always)
    fn = _row_loop(tl, "breakdown_counted_sums", *args, restype=native.N) if narrow else None
    if fn is not None:
        col, width = columns if columns is not None else _inst_columns(groups)
        sums, inst_cat = np.zeros(n_pairs * NCAT * 2), np.zeros((n_inst, width))
        with_full = full is not None
        in_full = np.zeros(len(sums) if with_full else 0)  # without: an empty one, never read
        main_lo, main_hi = main_rows.start, main_rows.stop
        off_main = fn(
            *_row_args(tl, groups), tl.cat, tl.op, main_lo, main_hi, is_op, NCAT, sums, width, col, inst_cat,
            with_full, full if with_full else in_full, in_full,
        )  # fmt: skip
        if off_main < 0:  # an operation's row of a category the grouping did not see: a column each
            return _counted_sums(tl, groups, full, EVERY_CATEGORY)
        counted = _counted(sums, bool(off_main), inst_cat, col, is_op)
        counted.full = in_full.reshape(counted.sums.shape) if with_full else None
        return counted
    sums, inst_cat = np.zeros(n_pairs * NCAT * 2), np.zeros(n_inst * NCAT)
    off_main = False
    block_d = np.empty(BLOCK_ROWS)  # a block's durations, as the weights of the counts below
    for r in blocks(len(tl.ts)):
        d = np.subtract(tl.seg_end[r], tl.ts[r], out=block_d[: r.stop - r.start], casting="unsafe")
        rows, main = _counted_block(tl, groups, r, main_rows, d)
        code, d, cat = groups.row_pair[r][rows].astype(np.int64), d[rows], tl.cat[r][rows]  # the pair
        if not isinstance(main, int):
            off_main = off_main or not main.all()
        op = is_op[code]
        code *= NCAT  # made the cell of (pair, category, main thread?) in place: no temporary per step
        code += cat
        code *= 2
        code += main
        sums += np.bincount(code, weights=d, minlength=len(sums))
        inst, cat = tl.op[r][rows][op], cat[op]
        if len(inst):  # a block's instances are few and near each other: a count over their range
            cell = inst * NCAT
            cell += cat
            lo = int(cell.min())
            cell -= lo
            part = np.bincount(cell, weights=d[op])
            inst_cat[lo : lo + len(part)] += part
    return _counted(sums, off_main, inst_cat.reshape(n_inst, NCAT), EVERY_CATEGORY[0], is_op)


def _counted_pair(
    tl: Timeline,
    fixed: Timeline,
    groups: RowGroups,
    full: FullFraction | None,
    columns: tuple[np.ndarray, int] | None = None,
) -> tuple[CountedSums, CountedSums]:
    """The :func:`_counted_sums` of ``tl`` and of ``fixed``, its rows retimed (``groups`` fits both),
    the second's with its time in full windows where ``full`` gives each row's share in them (of
    ``tl``'s rows: the C works each out on its way, numpy's loops read its column); an
    instance's time in ``columns`` (:func:`_inst_columns`' by default).

    Why one pass: the two read the same pairs, categories and instances of the same rows, apart from
    the times; in one C pass over the rows (breakdown.c) each is read once, each timeline's sums added
    in the order its own pass adds them. Else (numpy's loops, or columns of other types) a pass each."""
    n_pairs, n_inst = len(groups.pair_ph), len(tl.inst_name)
    args = native.I8, native.I32, native.N, native.N, native.BOOL, native.N, native.F64, native.N, native.I64
    args += native.F64, native.SEGMENTS, native.F64, native.F64, native.N, native.N, native.I64, native.F64
    args += native.N, native.I64, native.F64, native.F64
    narrow = tl.cat.dtype == np.int8 and tl.op.dtype == np.int32  # the C's types (nearly always)
    shared = fixed.cat is tl.cat and fixed.op is tl.op  # the columns read once for both
    # the same rows on the same threads (the C reads the threads' last rows off ``tl``'s segments)
    same_rows = np.array_equal(fixed.thread_last(), tl.thread_last())
    ours = narrow and shared and same_rows and _segments_read(fixed)
    fn = _row_loop(tl, "breakdown_counted_pair", *args, restype=native.N) if ours else None
    if fn is None:
        return _counted_sums(tl, groups), _counted_sums(
            fixed, groups, None if full is None else full.column(tl.ts)
        )
    is_op = groups.pair_op >= 0
    main_rows = tl.main_rows()
    col, width = columns if columns is not None else _inst_columns(groups)
    sums, inst_cat = np.zeros(n_pairs * NCAT * 2), np.zeros((n_inst, width))
    sums_b, inst_cat_b = np.zeros(n_pairs * NCAT * 2), np.zeros((n_inst, width))
    with_full = full is not None
    in_full = np.zeros(len(sums) if with_full else 0)  # without: an empty one, never read
    none_i, none_f = np.zeros(0, np.int64), np.ones(1)  # without: no switches, no crossing rows
    win_ts, at_mode = (full.win_ts, full.at_mode) if with_full else (none_i, none_f)
    rows, values = (full.rows, full.values) if with_full else (none_i, none_f)
    off_main = fn(
        *_row_args(tl, groups), tl.cat, tl.op, main_rows.start, main_rows.stop, is_op, NCAT, sums, width, col,
        inst_cat, fixed.segments(), sums_b, inst_cat_b, with_full, len(win_ts), win_ts, at_mode, len(rows),
        rows, values, in_full,
    )  # fmt: skip
    if off_main < 0:  # an operation's row of a category the grouping did not see: a column each
        return _counted_pair(tl, fixed, groups, full, EVERY_CATEGORY)
    counted_b = _counted(sums_b, bool(off_main & 2), inst_cat_b, col, is_op)
    counted_b.full = in_full.reshape(counted_b.sums.shape) if with_full else None
    return _counted(sums, bool(off_main & 1), inst_cat, col, is_op), counted_b


def _counted(
    sums: np.ndarray, off_main: bool, inst_cat: np.ndarray, inst_col: np.ndarray, is_op: np.ndarray
) -> CountedSums:
    """The :class:`CountedSums` of the flat sums (``inst_cat``: (instances, columns), category c's in
    column ``inst_col[c]``; ``is_op``: per pair, whether an operation's)."""
    by_pair = sums.reshape(len(is_op), NCAT, 2)
    op_cats = by_pair[is_op].sum(axis=(0, 2)) > 0
    return CountedSums(by_pair, off_main, inst_cat, inst_col, op_cats)


def _counted_rows(tl: Timeline, groups: RowGroups, pairs: np.ndarray) -> np.ndarray:
    """The counted rows whose pair ``pairs`` (a flag per pair) selects, in row order."""
    chosen = np.append(pairs, False)  # a row outside every pair (-1) reads the appended False
    out = [np.zeros(0, np.int64)]
    for r in blocks(len(tl.ts)):
        out.append(np.flatnonzero((tl.seg_end[r] > tl.ts[r]) & chosen[groups.row_pair[r]]) + r.start)
    return np.concatenate(out)


def _merged_segments(
    tl: Timeline, groups: RowGroups, pairs: np.ndarray, group: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, start, end) of the counted rows whose pair ``pairs`` selects (``group``: each pair's),
    those of one thread and group that touch joined (:func:`_merge_adjacent`): the sweep's CPU
    segments. In one C pass over the rows, gathering none (breakdown.c), else in numpy."""
    args = native.I64, native.N, native.BOOL, native.I64, native.I64, native.I64, native.I64, native.N
    fn = _row_loop(tl, "breakdown_merged_segments", *args, restype=native.N)
    if fn is None:
        rows = _counted_rows(tl, groups, pairs)
        return _merge_adjacent(
            group[groups.row_pair[rows]], tl.ts[rows], tl.seg_end[rows], tl.thread_idx[rows]
        )
    starts = tl.thread_starts()
    size = len(tl.ts) // 8 + 1  # joined, a stretch of an operation is a few segments at most
    while True:
        out = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64)
        count = fn(*_row_args(tl, groups), starts, len(starts), pairs, group, *out, size)
        if count <= size:
            return out[0][:count], out[1][:count], out[2][:count]
        size = count


def _threads_per_pair(tl: Timeline, groups: RowGroups) -> np.ndarray:
    """Per pair: the threads its counted rows are on."""
    fn = _row_loop(tl, "breakdown_threads_per_pair", native.I64, native.N, native.N, native.I64, native.U8)
    if fn is not None:
        starts, n_pairs = tl.thread_starts(), len(groups.pair_ph)
        out = np.zeros(n_pairs, np.int64)
        fn(*_row_args(tl, groups), starts, len(starts), n_pairs, out, np.zeros(n_pairs, np.uint8))
        return out
    seen = np.zeros((len(groups.pair_ph), int(tl.thread_idx[-1]) + 1), bool)
    for r in blocks(len(tl.ts)):
        rows = _counted_in(tl, groups, r)
        seen[groups.row_pair[r][rows], tl.thread_idx[r][rows]] = True
    return seen.sum(axis=1)


def breakdown_timeline(
    tl: Timeline,
    names: list[str],
    pid: int = 0,
    host: str = "",
    complete: bool = True,
    gpu_records: tuple[gpu.GpuRecords, np.ndarray, np.ndarray] | None = None,
    nvml: pa.Table | None = None,
    groups: RowGroups | None = None,
    counted: CountedSums | None = None,
) -> ProcessBreakdown:
    """Aggregate a process timeline into the breakdown tables (see module docstring); ``groups``:
    :func:`row_groups` of these rows, when the caller has it (ignored unless it fits them), and
    ``counted``: their :func:`_counted_sums` by those groups."""

    def name_of(i: int, none: str) -> str:
        return _name(names, i, none)

    if groups is None or not groups.fits(tl, gpu_records):
        groups, counted = row_groups(tl, gpu_records), None
    if counted is None:
        counted = _counted_sums(tl, groups)
    begins, b_pair, g_op, g_pair = groups.begins, groups.b_pair, groups.g_op, groups.g_pair
    pair_ph, pair_op = groups.pair_ph, groups.pair_op
    # only the pairs that hold time, instances or GPU work here (as many as a grouping of these rows)
    present = counted.present
    present[b_pair] = present[g_pair] = True
    remap = np.arange(len(present))
    if not present.all():
        remap = np.cumsum(present) - 1
        b_pair, g_pair = remap[b_pair], remap[g_pair]
        pair_ph, pair_op = pair_ph[present], pair_op[present]
    n_pairs = len(pair_ph)

    # operation instances: calls and inclusive time (phase = the phase open at its begin)
    b_inst, b_ts, b_incl = _begins(tl, begins)

    # GPU work, attributed to the (phase, operation) whose instance launched it
    recs = gpu_records[0] if gpu_records is not None else None

    sums = counted.sums[present]  # exclusive time per (pair, category, main thread?)
    nz_p, nz_c, nz_m = np.nonzero(sums)
    cpu_time = pa.table(
        {
            "pid": np.full(len(nz_p), pid, np.int64),
            "phase": [name_of(int(pair_ph[i]), NO_PHASE) for i in nz_p],
            "operation": [name_of(int(pair_op[i]), UNANNOTATED) for i in nz_p],
            "category": [categories.CATEGORY_NAMES[int(c)] for c in nz_c],
            "main_thread": nz_m.astype(bool),
            "seconds": sums[nz_p, nz_c, nz_m] / 1e9,
        },
        schema=CPU_TIME_SCHEMA,
    )

    # resource overlap: each operation's exclusive CPU time vs the GPU work attributed to it (no
    # GPU collector yet, so all CPU-only). On one thread an operation's segments never overlap and
    # the union is the sum; operations seen on several threads go through the sweep.
    cpu_only = sums.sum(axis=(1, 2))
    gpu_only, both = np.zeros(n_pairs), np.zeros(n_pairs)
    if recs is not None:
        # GPU work present: the sweep for every operation, CPU segments vs the GPU work it launched
        g, st, en = _merged_segments(tl, groups, groups.pair_op >= 0, remap)
        launched = g_op >= 0
        cpu_only, gpu_only, both = overlap_by_group(
            g, st, en, g_pair[launched], recs.start[launched], recs.end[launched], n_pairs
        )
    elif counted.off_main:
        multi_all = _threads_per_pair(tl, groups) > 1
        multi = multi_all[present]
        if multi.any():
            g, st, en = _merged_segments(tl, groups, multi_all, remap)
            empty = np.zeros(0, np.int64)
            swept, _, _ = overlap_by_group(g, st, en, empty, empty, empty, n_pairs)
            cpu_only = np.where(multi, swept, cpu_only)
    is_op = pair_op >= 0
    ops = pa.table(
        {
            "pid": np.full(int(is_op.sum()), pid, np.int64),
            "phase": [name_of(int(p), NO_PHASE) for p in pair_ph[is_op]],
            "operation": [name_of(int(o), UNANNOTATED) for o in pair_op[is_op]],
            "calls": np.bincount(b_pair, minlength=n_pairs)[is_op].astype(np.int64),
            "inclusive_s": np.bincount(b_pair, weights=b_incl, minlength=n_pairs)[is_op] / 1e9,
            "cpu_only_s": cpu_only[is_op] / 1e9,
            "gpu_only_s": gpu_only[is_op] / 1e9,
            "cpu_gpu_s": both[is_op] / 1e9,
        },
        schema=OPS_SCHEMA,
    )

    gpu_cats = len(categories.CATEGORY_NAMES)
    if recs is not None and len(recs.start):
        gkey = g_pair * gpu_cats + recs.category
        g_sum = np.bincount(gkey, weights=recs.end - recs.start, minlength=n_pairs * gpu_cats)
        g_cnt = np.bincount(gkey, minlength=n_pairs * gpu_cats)
        nzg = np.flatnonzero(g_cnt)
        busy_s, busy_e = gpu.busy_intervals(recs.start, recs.end)
    else:
        g_sum = g_cnt = nzg = np.zeros(0, np.int64)
        busy_s = busy_e = np.zeros(0, np.int64)
    gpu_time = pa.table(
        {
            "pid": np.full(len(nzg), pid, np.int64),
            "phase": [name_of(int(pair_ph[k // gpu_cats]), NO_PHASE) for k in nzg],
            "operation": [name_of(int(pair_op[k // gpu_cats]), UNANNOTATED) for k in nzg],
            "category": [categories.CATEGORY_NAMES[int(k % gpu_cats)] for k in nzg],
            "count": g_cnt[nzg].astype(np.int64),
            "seconds": g_sum[nzg] / 1e9 if len(nzg) else np.zeros(0),
        },
        schema=GPU_TIME_SCHEMA,
    )
    gpu_info = gpu.nvml_comparison(nvml, busy_s, busy_e, tl.end_ns - tl.start_ns)

    noise_rows = _noise(tl, counted, b_inst, b_ts, b_pair, b_incl, n_pairs, recs, rec_op_inst(gpu_records))
    noise_rows = {
        "pid": np.full(len(noise_rows[0]), pid, np.int64),
        "phase": [name_of(int(pair_ph[i]), NO_PHASE) for i in noise_rows[0]],
        "operation": [name_of(int(pair_op[i]), UNANNOTATED) for i in noise_rows[0]],
        "measure": noise_rows[1],
        "instances": noise_rows[2],
        "variance_s2": noise_rows[3],
        "one_time_s": noise_rows[4],
    }

    main_by_pair = sums[:, :, 1].sum(axis=1)
    phase_wall: dict[str, float] = {}
    for p in np.flatnonzero(main_by_pair):
        ph = name_of(int(pair_ph[p]), NO_PHASE)
        phase_wall[ph] = phase_wall.get(ph, 0.0) + float(main_by_pair[p]) / 1e9
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
        gpu_time=gpu_time,
        gpu=gpu_info,
        noise=pa.table(noise_rows, schema=NOISE_SCHEMA),
    )


def _begins(tl: Timeline, begins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instance, time, inclusive time: 0 for a recursive one) of each of the OP_BEGIN rows ``begins``:
    in one C loop over them (breakdown.c), each begin's columns read together where numpy gathers from
    one column of every row at a time."""
    ids = tl.id.dtype
    args = native.N, native.I64, None, native.I64, native.I8, native.N, native.I64, native.N, None
    args += native.I64, native.I64
    fn = native.typed("breakdown_begins", [ids], *args)
    ours = tl.ts.dtype == tl.inst_end.dtype == np.int64 and tl.flags.dtype == np.int8
    if fn is not None and ours and begins.dtype == np.int64 and contiguous(tl.id, tl.ts, tl.flags, begins):
        m = len(begins)
        b_inst, b_ts, b_incl = np.empty(m, ids), np.empty(m, np.int64), np.empty(m, np.int64)
        columns = tl.id, tl.ts, tl.flags, S.FLAG_RECURSIVE, tl.inst_end, len(tl.inst_end)
        fn(m, begins, *columns, b_inst, b_ts, b_incl)
        return b_inst, b_ts, b_incl
    b_inst, b_ts = tl.id[begins], tl.ts[begins]
    return b_inst, b_ts, np.where(tl.flags[begins] & S.FLAG_RECURSIVE, 0, tl.inst_end[b_inst] - b_ts)


def rec_op_inst(gpu_records: tuple[gpu.GpuRecords, np.ndarray, np.ndarray] | None) -> np.ndarray | None:
    """The operation instance that launched each GPU record (-1: none), or None without GPU records."""
    return None if gpu_records is None else gpu_records[1]


def _noise(
    tl: Timeline,
    counted: CountedSums,
    b_inst: np.ndarray,
    b_ts: np.ndarray,
    b_pair: np.ndarray,
    b_incl: np.ndarray,
    n_pairs: int,
    recs: gpu.GpuRecords | None,
    rec_inst: np.ndarray | None,
) -> tuple[list[int], list[str], list[int], list[float], list[float]]:
    """(pair, measure, instances, variance s^2, one-time s) rows: the noise of each summed figure of a
    pair, and its one-time part (warm-up, rlscope.analysis.noise.one_time_excess).

    Per operation instance: its inclusive time, its exclusive time and that by category (CPU
    segments while it was innermost: ``counted``, GPU work it launched); the instances of a (phase,
    operation) pair give each sum's variance. Unannotated time has no instances (its one long stretch
    before the loop is no sample of a repeated cost): no rows. ``b_*``: per OP_BEGIN row, its
    instance, time, pair and inclusive time.
    """
    n_inst = len(tl.inst_name)
    inst_pair = np.full(n_inst, -1, np.int64)
    inst_ts = np.zeros(n_inst, np.int64)
    per_cat = counted.op_cats
    cats = np.flatnonzero(per_cat)  # the categories present, sorted
    gpu_cats = np.zeros(0, np.int64)
    if recs is not None and rec_inst is not None:
        launched = rec_inst >= 0
        gpu_cats = np.unique(recs.category[launched])
    measures = [TOTAL, EXCLUSIVE]
    n_cpu = len(cats)
    x = np.zeros((n_inst, 2 + n_cpu + len(gpu_cats)))
    column = np.zeros(len(per_cat), np.int64)  # each category's column among them
    column[cats] = np.arange(len(cats))
    at = counted.inst_col[cats]  # their columns among an instance's (each category held has one)
    by_begin = b_pair, b_ts, b_incl
    args = native.N, None, native.I64, native.I64, native.I64, native.N, native.N, native.F64, native.N
    args += native.I64, native.N, native.F64, native.I64, native.I64
    fn = native.typed("breakdown_instance_columns", [b_inst.dtype], *args, restype=native.N)
    ours = all(a.dtype == np.int64 for a in by_begin) and contiguous(b_inst, *by_begin)
    if fn is None or not ours or fn(
        len(b_inst), b_inst, *by_begin, n_inst, counted.inst_cat.shape[1], counted.inst_cat, n_cpu, at,
        x.shape[1], x, inst_pair, inst_ts,
    ) < 0:  # fmt: skip
        inst_pair[b_inst] = b_pair
        inst_ts[b_inst] = b_ts
        x[b_inst, 0] = b_incl
        x[:, 2 : 2 + n_cpu] = counted.inst_cat[:, at]
        x[:, 1] = x[:, 2 : 2 + n_cpu].sum(axis=1)
    measures += [categories.CATEGORY_NAMES[int(c)] for c in cats.tolist()]
    for j, c in enumerate(gpu_cats.tolist()):
        sel = (rec_inst >= 0) & (recs.category == c)  # type: ignore[operator,union-attr]
        d = (recs.end[sel] - recs.start[sel]).astype(np.float64)  # type: ignore[union-attr]
        x[:, 2 + n_cpu + j] = np.bincount(rec_inst[sel], weights=d, minlength=n_inst)[:n_inst]  # type: ignore[index]
        measures.append(categories.CATEGORY_NAMES[int(c)])
    compiled = x[:, 2 + column[categories.COMPILE]] > 0 if per_cat[categories.COMPILE] else None
    count, var, once = noise.variance_and_one_time(inst_pair, inst_ts, x, n_pairs, one_time=compiled)
    # every pair with instances: its total and exclusive rows, and the categories it has time in
    nonzero = native.function(
        "breakdown_group_nonzero", native.N, native.N, native.I64, native.F64, native.BOOL
    )
    if nonzero is not None:
        has = np.zeros((n_pairs, x.shape[1]), bool)
        nonzero(n_inst, x.shape[1], inst_pair, x, has)
    else:
        begun = inst_pair >= 0
        has = np.stack(
            [
                np.bincount(inst_pair[begun], weights=x[begun, c] != 0, minlength=n_pairs) > 0
                for c in range(x.shape[1])
            ],
            axis=1,
        )
    has[:, :2] = True
    rows: tuple[list[int], list[str], list[int], list[float], list[float]] = ([], [], [], [], [])
    for p, c in zip(*np.nonzero(has & (count[:, None] > 0)), strict=True):
        rows[0].append(int(p))
        rows[1].append(measures[c])
        rows[2].append(int(count[p]))
        rows[3].append(float(var[p, c]) / 1e18)
        rows[4].append(float(once[p, c]) / 1e9)
    return rows


def analyze(trace: Trace) -> list[ProcessBreakdown]:
    """Breakdown tables for every process of a trace."""
    return [analyze_process(p) for p in trace.processes]
