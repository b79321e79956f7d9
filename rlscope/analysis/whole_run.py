"""The whole run from its aggregates, and its detail from the detail stretches.

A long run keeps event detail in stretches only (rlscope/trace/detail.py); the breakdown of those
stretches (:mod:`rlscope.analysis.breakdown`, on the joined clock of rlscope/trace/glue.py) is
exact and corrected as any short run's. This module adds the time between the stretches, which the
trace holds as aggregates (rlscope/trace/aggregate.py): per phase and operation, its exclusive time
by the categories recorded there (python, simulator), its calls and inclusive time, less what
rlscope's boundaries measured they cost there. What only detail records is carried over from the
stretches, and the summary says so: the split of an operation's Python time into python, backend
and CUDA API (collectors off between the stretches), its GPU work (per call), and its overlap of
CPU and GPU (per second).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis.breakdown import (
    CPU_TIME_SCHEMA,
    GPU_TIME_SCHEMA,
    OPS_SCHEMA,
    ProcessBreakdown,
)
from rlscope.overhead.correct import ASSUMED_STALL_SHARE, EventCosts, module_calls_between_stretches
from rlscope.trace import schema as S
from rlscope.trace.header import main_thread, session_span
from rlscope.trace.reader import ProcessTrace, name_of

UNANNOTATED, NO_PHASE = categories.UNANNOTATED, categories.NO_PHASE
# the categories the detail splits a summarized operation's Python time into
_SPLIT = ("python", "backend", "cuda_api")


@dataclasses.dataclass
class Summarized:
    """The time between the detail stretches, per (phase, operation) of one process."""

    cpu: dict[tuple[str, str, str, bool], float]  # (phase, op, category, main thread) -> s
    calls: dict[tuple[str, str], int]
    # s: of the calls that ended between the stretches, and of those that ended in the detail, the
    # time outside it that the detail does not hold (_outside_detail)
    inclusive: dict[tuple[str, str], float]
    removed: dict[tuple[str, str], float]  # s removed per (phase, operation) (corrected only)
    # instances the detail counted that ended between the stretches (their end row written at the
    # resume, FLAG_SUMMARIZED): the aggregates count those calls and their inclusive time, so the
    # detail's (calls, inclusive seconds) are taken back
    cut_calls: dict[str, tuple[int, float]]
    removed_s: float  # what the boundaries cost there (corrected only)
    seconds: float  # the process's time between the stretches
    removed_main_s: float = 0.0  # of removed_s, the main thread's: the wall the program would not take
    left_out_s: float = 0.0  # of seconds, the detail kept in the trace that the detail budget left out


def summarized(
    proc: ProcessTrace,
    costs: EventCosts | None,
    stall_share: float = ASSUMED_STALL_SHARE,
    kept: dict[tuple[str, str, bool], float] | None = None,
) -> Summarized | None:
    """The process's summary-mode aggregates as named figures, corrected with ``costs`` (raw: None).

    Corrected, the main thread's time also loses the stall of the writer's flushes between the
    stretches: their CPU time (each flush measures its own, schema.FLUSH_CPU_MAX) times
    ``stall_share``, the share of it that stalled the job as the detail measured it
    (rlscope/overhead/correct/flush_stall.py), spread over the main thread's time there.

    Time the analysis's detail budget left out (``MODE_LEFT_OUT``, rlscope/trace/budget.py) ran with
    the collectors on, as the detail did: corrected, it keeps what the detail's correction kept of
    the same (phase, operation, main thread?), ``kept`` (corrected over raw seconds).
    """
    agg = proc.aggregates
    if agg is None or proc.gaps is None or not agg.num_rows:
        return None
    c = {k: agg.column(k).to_numpy().astype(np.int64) for k in agg.column_names}
    left_out = c["mode"] == S.MODE_LEFT_OUT
    summary = (c["mode"] == S.MODE_SUMMARY) | left_out
    if not summary.any():
        return None
    cpu_left: dict[tuple[str, str, str, bool], float] = {}
    removed_main = 0.0
    kept = kept or {}
    kept_all = kept.get(("", "", True), 1.0)
    main = _main_thread(proc)
    names = proc.names
    per_boundary = costs.scope_dispatch_ns() if costs is not None else 0.0
    # the automatic operations' module-call wrapper per summary row (overhead/correct/module_calls.py)
    modules = module_calls_between_stretches(proc, costs) if costs is not None else np.zeros(len(left_out))
    cpu: dict[tuple[str, str, str, bool], float] = {}
    calls: dict[tuple[str, str], int] = {}
    inclusive: dict[tuple[str, str], float] = {}
    removed = 0.0
    removed_by_op: dict[tuple[str, str], float] = {}
    rows = np.flatnonzero(summary)
    for i in rows.tolist():
        phase = name_of(names, int(c["phase"][i]), NO_PHASE)
        op = name_of(names, int(c["operation"][i]), UNANNOTATED)
        cat = int(c["category"][i])
        if cat == S.AGGREGATE_CALLS:
            if c["operation"][i] >= 0:
                calls[(phase, op)] = calls.get((phase, op), 0) + int(c["calls"][i])
                inclusive[(phase, op)] = inclusive.get((phase, op), 0.0) + c["time_ns"][i] / 1e9
            continue
        on_main = int(c["thread"][i]) == main
        if not on_main and c["operation"][i] < 0:
            continue  # off the main thread only operations are work (breakdown's rule)
        t = float(c["time_ns"][i])
        if costs is not None:
            if left_out[i]:
                # rlscope's own time goes, as the detail's correction takes it out; the rest keeps
                # what that correction kept of the operation
                share = 0.0 if cat == categories.PROFILER else kept.get((phase, op, on_main), kept_all)
                cut = t * (1.0 - share)
            else:
                paid = float(c["cost_ns"][i]) + per_boundary * float(c["boundaries"][i]) + modules[i]
                cut = min(t, paid)
            t -= cut
            removed += cut
            removed_main += cut if on_main else 0.0
            removed_by_op[(phase, op)] = removed_by_op.get((phase, op), 0.0) + cut / 1e9
        name = categories.CPU_CATEGORIES.get(cat, "python")
        key = (phase, op, name, on_main)
        into = cpu_left if left_out[i] else cpu
        if t > 0:
            into[key] = into.get(key, 0.0) + t / 1e9
    if costs is not None:
        flushes = summary & ~left_out & (c["thread"] != main) & (c["category"] == categories.PROFILER)
        stall = float(c["cost_ns"][flushes].sum()) * stall_share / 1e9
        main_keys = [k for k in cpu if k[3]]
        main_s = sum(cpu[k] for k in main_keys)
        if stall > 0 and main_s > 0:
            stall = min(stall, main_s)
            for k in main_keys:
                part = stall * cpu[k] / main_s
                cpu[k] -= part
                removed_by_op[k[:2]] = removed_by_op.get(k[:2], 0.0) + part
            removed += stall * 1e9
            removed_main += stall * 1e9
    for key, t in cpu_left.items():  # after the stall, which the detail's correction took out of these
        cpu[key] = cpu.get(key, 0.0) + t
    ends = _ends(proc)
    for (phase, op), s in _outside_detail(proc, ends, c).items():
        inclusive[(phase, op)] = inclusive.get((phase, op), 0.0) + s
    cut_calls = _cut_calls(proc, ends)
    return Summarized(
        cpu,
        calls,
        inclusive,
        removed_by_op,
        cut_calls,
        removed / 1e9,
        proc.gaps.total_ns / 1e9,
        removed_main / 1e9,
        _left_out_s(proc),
    )


def _left_out_s(proc: ProcessTrace) -> float:
    """The detail the analysis's budget left out of ``proc`` (rlscope/trace/budget.py), in seconds."""
    try:
        return float(json.loads(proc.metadata.get("detail.budget") or "{}").get("detail_left_out_s", 0.0))
    except (ValueError, TypeError, AttributeError):
        return 0.0


class _Ends(NamedTuple):
    """A process's operation end rows, each with its instance's begin row (found once for the two
    uses below: a long trace holds millions)."""

    ts: np.ndarray
    name: np.ndarray
    summarized: np.ndarray  # written at a resume: the call ended between the stretches
    found: np.ndarray  # its begin row is there (a recursive one, whose time counts nowhere, is not)
    begun: np.ndarray  # that row's time
    begun_summarized: np.ndarray  # that row was written at a resume: the call began between them


def _ends(proc: ProcessTrace) -> _Ends:
    ev = proc.events
    kind, flags = ev.column("kind").to_numpy(), ev.column("flags").to_numpy()
    ident, ts = ev.column("id").to_numpy(), ev.column("ts_ns").to_numpy().astype(np.int64)
    ends = np.flatnonzero(kind == S.OP_END)
    begins = np.flatnonzero((kind == S.OP_BEGIN) & ((flags & S.FLAG_RECURSIVE) == 0))
    order = np.argsort(ident[begins], kind="stable")
    b_ids, b_ts, b_flags = ident[begins][order], ts[begins][order], flags[begins][order]
    at = np.minimum(np.searchsorted(b_ids, ident[ends]), max(len(b_ids) - 1, 0))
    found = (b_ids[at] == ident[ends]) if len(b_ids) else np.zeros(len(ends), bool)
    begun = np.where(found, b_ts[at] if len(b_ids) else 0, 0)
    begun_flags = np.where(found, b_flags[at] if len(b_ids) else 0, 0)
    return _Ends(
        ts[ends],
        ev.column("name").to_numpy().astype(np.int64)[ends],
        (flags[ends] & S.FLAG_SUMMARIZED) != 0,
        found,
        begun,
        (begun_flags & S.FLAG_SUMMARIZED) != 0,
    )


def _outside_detail(
    proc: ProcessTrace, ends: _Ends, c: dict[str, np.ndarray]
) -> dict[tuple[str, str], float]:
    """Per (phase, operation), the time its calls that ended in the detail spent outside it.

    The joined clock holds a call that began before a resume (its begin row written there,
    FLAG_SUMMARIZED) from the resume on, and one open over a gap without the gap: its inclusive time
    there lacks its part between the stretches, which no summary row holds either (the aggregates
    count a call where it ends). The aggregates' detail-mode calls rows hold each of those calls
    whole (the writer knows every begin): what they hold over the detail's inclusive time of the
    same calls is that part. Only operations with such a call get it, so a run without any keeps
    its figures; the phase is that of the operation's calls rows with the most calls.
    """
    # each gap's place on the joined clock: its start less the gaps before it
    gaps = proc.gaps
    length = gaps.end - gaps.start if gaps is not None else np.zeros(0, np.int64)
    at = gaps.start - (np.cumsum(length) - length) if gaps is not None else length
    over_gap = np.searchsorted(at, ends.ts, "right") > np.searchsorted(at, ends.begun, "right")
    real = ends.found & ~ends.summarized & (ends.name >= 0)
    outside = real & (ends.begun_summarized | over_gap)
    if not outside.any():
        return {}
    wanted = {name_of(proc.names, int(n), UNANNOTATED) for n in np.unique(ends.name[outside]).tolist()}
    detail_ns: dict[str, int] = {}
    held = np.maximum(ends.ts - ends.begun, 0)
    per_id = np.bincount(ends.name[real], weights=held[real])
    for n in np.flatnonzero(per_id).tolist():
        name = name_of(proc.names, n, UNANNOTATED)
        if name in wanted:
            detail_ns[name] = detail_ns.get(name, 0) + round(per_id[n])
    whole_ns: dict[str, int] = {}
    phase_calls: dict[tuple[str, str], int] = {}
    in_detail = (c["mode"] != S.MODE_SUMMARY) & (c["mode"] != S.MODE_LEFT_OUT)
    calls_rows = in_detail & (c["category"] == S.AGGREGATE_CALLS) & (c["operation"] >= 0)
    for i in np.flatnonzero(calls_rows).tolist():
        name = name_of(proc.names, int(c["operation"][i]), UNANNOTATED)
        if name in wanted:
            whole_ns[name] = whole_ns.get(name, 0) + int(c["time_ns"][i])
            key = (name_of(proc.names, int(c["phase"][i]), NO_PHASE), name)
            phase_calls[key] = phase_calls.get(key, 0) + int(c["calls"][i])
    out: dict[tuple[str, str], float] = {}
    for name in sorted(wanted):
        mine = [k for k in phase_calls if k[1] == name]
        extra = whole_ns.get(name, 0) - detail_ns.get(name, 0)
        if mine and extra > 0:
            out[max(mine, key=lambda k: phase_calls[k])] = extra / 1e9
    return out


def _cut_calls(proc: ProcessTrace, ends: _Ends) -> dict[str, tuple[int, float]]:
    """Per operation, the instances the detail saw begin that ended between the stretches (their end
    row written at a resume, FLAG_SUMMARIZED), and their inclusive seconds in the detail: the
    aggregates count those calls, with their whole inclusive time, where they ended."""
    held = np.where(ends.found, ends.ts - ends.begun, 0)[ends.summarized]
    out: dict[str, tuple[int, float]] = {}
    for n, h in zip(ends.name[ends.summarized].tolist(), held.tolist(), strict=True):
        name = name_of(proc.names, int(n), UNANNOTATED)
        calls, seconds = out.get(name, (0, 0.0))
        out[name] = (calls + 1, seconds + max(h, 0) / 1e9)
    return out


def _main_thread(proc: ProcessTrace) -> int:
    """The process's main thread, as its timeline takes it (rlscope.trace.header.main_thread)."""
    ev = proc.events
    if not ev.num_rows:
        return -1
    ts, kind = ev.column("ts_ns").to_numpy(), ev.column("kind").to_numpy()
    return main_thread(ts, kind, ev.column("thread").to_numpy(), session_span(ts, kind)[0])


def finisher(proc: ProcessTrace) -> Callable[[ProcessBreakdown, EventCosts | None], ProcessBreakdown]:
    """What the per-process analysis applies to its raw and corrected breakdowns of ``proc``."""

    raw_cpu: list[pa.Table] = []  # the raw detail's CPU time: what a corrected breakdown kept of it

    def finish(bd: ProcessBreakdown, costs: EventCosts | None) -> ProcessBreakdown:
        share = (bd.overhead.get("writer_stall") or {}).get("share", ASSUMED_STALL_SHARE)
        if costs is None:
            raw_cpu[:] = [bd.cpu_time]
        kept = _kept(raw_cpu[0], bd.cpu_time) if costs is not None and raw_cpu else None
        return extend(bd, summarized(proc, costs, float(share), kept))

    return finish


def _kept(raw: pa.Table, corrected: pa.Table) -> dict[tuple[str, str, bool], float]:
    """Corrected over raw seconds of the detail, per (phase, operation, main thread?); under
    ("", "", True), the whole process's."""

    def sums(t: pa.Table) -> dict[tuple[str, str, bool], float]:
        d = t.to_pydict()
        out: dict[tuple[str, str, bool], float] = {}
        for ph, op, main, sec in zip(d["phase"], d["operation"], d["main_thread"], d["seconds"], strict=True):
            out[(ph, op, main)] = out.get((ph, op, main), 0.0) + sec
        return out

    before, after = sums(raw), sums(corrected)
    out = {k: min(max(after.get(k, 0.0) / v, 0.0), 1.0) for k, v in before.items() if v > 0}
    total = sum(before.values())
    out[("", "", True)] = min(max(sum(after.values()) / total, 0.0), 1.0) if total > 0 else 1.0
    return out


def extend(bd: ProcessBreakdown, extra: Summarized | None) -> ProcessBreakdown:
    """``bd`` (the detail stretches' breakdown) with the time between them added; ``bd`` when none."""
    if extra is None:
        return bd
    detail_s = bd.wall_s
    cpu = _extend_cpu(bd.cpu_time, extra, bd.pid)
    detail_calls = _by_op(bd.ops, "calls")
    ops = _extend_ops(bd.ops, extra, bd.pid)
    whole_calls = _by_op(ops, "calls")
    gpu_time = _scale_gpu(bd.gpu_time, detail_calls, whole_calls)
    phase_wall = dict(bd.phase_wall_s)
    for (phase, _op, _cat, on_main), s in extra.cpu.items():
        if on_main:
            phase_wall[phase] = phase_wall.get(phase, 0.0) + s
    wall = detail_s + extra.seconds - extra.removed_main_s
    gpu_info = dict(bd.gpu)
    if "gpu_bound_s" in gpu_info and detail_s > 0:
        gpu_info["gpu_bound_s"] = gpu_info["gpu_bound_s"] * wall / detail_s
    out = dataclasses.replace(
        bd, wall_s=wall, cpu_time=cpu, ops=ops, phase_wall_s=phase_wall, gpu_time=gpu_time, gpu=gpu_info
    )
    out.detail = {
        "whole_run_s": wall,
        "detail_s": detail_s,
        "summarized_s": extra.seconds,
        "summarized_removed_s": extra.removed_s,
        # the wall it adds: less what the main thread lost to rlscope there (corrected only)
        "summarized_wall_s": extra.seconds - extra.removed_main_s,
        "left_out_s": extra.left_out_s,
        "from_detail": ["categories within python time", "GPU work", "CPU/GPU overlap", "timeline"],
    }
    return out


def _extend_cpu(table: pa.Table, extra: Summarized, pid: int) -> pa.Table:
    """CPU time with the summarized seconds added; their python time split like the detail's."""
    d = table.to_pydict()
    split: dict[tuple[str, str, bool], dict[str, float]] = {}
    rows: dict[tuple[str, str, str, bool], float] = {}
    for ph, op, cat, main, s in zip(
        d["phase"], d["operation"], d["category"], d["main_thread"], d["seconds"], strict=True
    ):
        rows[(ph, op, cat, main)] = rows.get((ph, op, cat, main), 0.0) + s
        if cat in _SPLIT:
            shares = split.setdefault((ph, op, main), {})
            shares[cat] = shares.get(cat, 0.0) + s
    for (ph, op, cat, main), s in extra.cpu.items():
        shares = split.get((ph, op, main)) if cat == "python" else None
        total = sum(shares.values()) if shares else 0.0
        if shares and total > 0:
            for c, v in shares.items():
                rows[(ph, op, c, main)] = rows.get((ph, op, c, main), 0.0) + s * v / total
        else:
            rows[(ph, op, cat, main)] = rows.get((ph, op, cat, main), 0.0) + s
    keys = list(rows)
    return pa.table(
        {
            "pid": [pid] * len(keys),
            "phase": [k[0] for k in keys],
            "operation": [k[1] for k in keys],
            "category": [k[2] for k in keys],
            "main_thread": [k[3] for k in keys],
            "seconds": [rows[k] for k in keys],
        },
        schema=CPU_TIME_SCHEMA,
    )


def _by_op(ops: pa.Table, column: str) -> dict[tuple[str, str], float]:
    d = ops.to_pydict()
    return {(p, o): v for p, o, v in zip(d["phase"], d["operation"], d[column], strict=True)}


def _extend_ops(ops: pa.Table, extra: Summarized, pid: int) -> pa.Table:
    """Calls and inclusive time with the summarized ones added; the overlap split like the detail's."""
    d = ops.to_pydict()
    rows = {
        (p, o): {k: d[k][i] for k in OPS_SCHEMA.names if k not in ("pid", "phase", "operation")}
        for i, (p, o) in enumerate(zip(d["phase"], d["operation"], strict=True))
    }
    for key in set(extra.calls) | set(extra.inclusive):
        # the operation's own boundaries' cost out of its inclusive time (its children's stays)
        add_incl = max(extra.inclusive.get(key, 0.0) - extra.removed.get(key, 0.0), 0.0)
        row = rows.setdefault(
            key, {"calls": 0, "inclusive_s": 0.0, "cpu_only_s": 0.0, "gpu_only_s": 0.0, "cpu_gpu_s": 0.0}
        )
        before = row["inclusive_s"]
        row["calls"] += extra.calls.get(key, 0)
        row["inclusive_s"] = before + add_incl
        parts = ("cpu_only_s", "gpu_only_s", "cpu_gpu_s")
        if before > 0:
            for k in parts:
                row[k] *= row["inclusive_s"] / before
        else:
            row["cpu_only_s"] = row["inclusive_s"]
    for op, (n, held) in extra.cut_calls.items():  # counted by the aggregates: from the busiest row
        mine = [k for k in rows if k[1] == op]
        if mine:
            top = max(mine, key=lambda k: rows[k]["calls"])
            row = rows[top]
            row["calls"] = max(row["calls"] - n, 0)
            before = row["inclusive_s"]
            row["inclusive_s"] = max(before - held, 0.0)
            if before > 0:
                for k in ("cpu_only_s", "gpu_only_s", "cpu_gpu_s"):
                    row[k] *= row["inclusive_s"] / before
    keys = list(rows)
    return pa.table(
        {
            "pid": [pid] * len(keys),
            "phase": [k[0] for k in keys],
            "operation": [k[1] for k in keys],
            **{c: [rows[k][c] for k in keys] for c in OPS_SCHEMA.names[3:]},
        },
        schema=OPS_SCHEMA,
    )


def _scale_gpu(table: pa.Table, detail_calls: dict, whole_calls: dict) -> pa.Table:
    """GPU work per operation, carried over per call from the detail to the whole run."""
    if not table.num_rows:
        return table
    d = table.to_pydict()
    scale = [
        (whole_calls.get((p, o), 0) / detail_calls[(p, o)]) if detail_calls.get((p, o)) else 1.0
        for p, o in zip(d["phase"], d["operation"], strict=True)
    ]
    d["count"] = [round(c * f) for c, f in zip(d["count"], scale, strict=True)]
    d["seconds"] = [s * f for s, f in zip(d["seconds"], scale, strict=True)]
    return pa.table(d, schema=GPU_TIME_SCHEMA)
