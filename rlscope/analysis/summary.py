"""The JSON summary: the stable, documented shape ``rlscope-analyze --json`` writes.

Built from the breakdown tables only (which are small: one row per phase x operation x
category), so this module is plain Python over a few hundred rows.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from rlscope.analysis import roles
from rlscope.analysis.breakdown import EXCLUSIVE, TOTAL, UNANNOTATED, ProcessBreakdown
from rlscope.categories import CPU_CATEGORIES, WAITING
from rlscope.overhead.correct import CorrectionPlan
from rlscope.trace.header import recorded_options
from rlscope.trace.reader import TraceHeader, clock_offset

SUMMARY_SCHEMA = "rlscope.summary/1"
_WAITING = CPU_CATEGORIES[WAITING]  # time outside operations in it is ``waiting_s``, not ``unannotated_s``


def _op_entry() -> dict[str, Any]:
    return {
        "total_s": 0.0,
        "exclusive_s": 0.0,
        "calls": 0,
        "categories": defaultdict(float),
        "gpu_categories": defaultdict(float),
        "resources": {"cpu_only": 0.0, "gpu_only": 0.0, "cpu_gpu": 0.0},
        # measure -> [instances, variance s^2, one-time s]; _finish turns it into noise_s and one_time_s
        "noise": defaultdict(lambda: [0, 0.0, 0.0]),
    }


# fewer instances than this in a trace: no spread to estimate a sum's noise from (reported as None)
MIN_NOISE_INSTANCES = 2


def _noise_s(instances: int, variance: float) -> float | None:
    return math.sqrt(variance) if instances >= MIN_NOISE_INSTANCES else None


def _by_measure(values: dict[str, Any], gpu_names: set[str], default: Any) -> dict[str, Any]:
    """A per-measure figure in the summary's shape: the total, the exclusive time, then the CPU and
    the GPU categories (``default``: a total or exclusive figure with no row)."""
    return {
        "total_s": values.get(TOTAL, default),
        "exclusive_s": values.get(EXCLUSIVE, default),
        "categories": {m: v for m, v in values.items() if m not in (TOTAL, EXCLUSIVE) and m not in gpu_names},
        "gpu_categories": {m: v for m, v in values.items() if m in gpu_names},
    }


def _noise_entry(acc: dict[str, list], gpu_names: set[str]) -> dict[str, Any]:
    """One standard deviation of each sum from its instances' spread (rlscope.analysis.noise)."""
    return _by_measure({m: _noise_s(n, v) for m, (n, v, _) in acc.items()}, gpu_names, None)


def _one_time_entry(acc: dict[str, list], gpu_names: set[str]) -> dict[str, Any]:
    """The warm-up in each sum: what the operation's first call (and any that compiled) took beyond a
    typical call (rlscope.analysis.noise.one_time_excess); categories with none are left out."""
    once = {m: v[2] for m, v in acc.items() if v[2] > 0 or m in (TOTAL, EXCLUSIVE)}
    return _by_measure(once, gpu_names, 0.0)


def _fill_noise(ops_out: dict[str, dict[str, Any]], noise_rows: list[dict[str, Any]]) -> None:
    """Add each row's instances, variance and one-time seconds to its operation's."""
    for r in noise_rows:
        acc = ops_out.setdefault(r["operation"], _op_entry())["noise"][r["measure"]]
        acc[0] += r["instances"]
        acc[1] += r["variance_s2"]
        acc[2] += r["one_time_s"]


def _fill_operations(
    ops_out: dict[str, dict[str, Any]],
    cpu_rows: list[dict[str, Any]],
    op_rows: list[dict[str, Any]],
    gpu_rows: list[dict[str, Any]],
    noise_rows: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> tuple[float, float]:
    """Accumulate operation entries from table rows; returns the unannotated and the waiting seconds
    seen (time outside operations, apart from and in the ``waiting`` category)."""
    unannotated = waiting = 0.0
    _fill_noise(ops_out, list(noise_rows))
    for r in cpu_rows:
        if r["operation"] == UNANNOTATED:
            if r["category"] == _WAITING:
                waiting += r["seconds"]
            else:
                unannotated += r["seconds"]
            continue
        e = ops_out.setdefault(r["operation"], _op_entry())
        e["exclusive_s"] += r["seconds"]
        e["categories"][r["category"]] += r["seconds"]
    for r in gpu_rows:
        if r["operation"] != UNANNOTATED:
            e = ops_out.setdefault(r["operation"], _op_entry())
            e["gpu_categories"][r["category"]] += r["seconds"]
    for r in op_rows:
        e = ops_out.setdefault(r["operation"], _op_entry())
        e["total_s"] += r["inclusive_s"]
        e["calls"] += r["calls"]
        e["resources"]["cpu_only"] += r["cpu_only_s"]
        e["resources"]["gpu_only"] += r["gpu_only_s"]
        e["resources"]["cpu_gpu"] += r["cpu_gpu_s"]
    return unannotated, waiting


def _waiting(seconds: float) -> dict[str, float]:
    """``waiting_s``, where there was any: a process blocked for its next command or task outside
    operations (rlscope/runtime/waits.py), its own row beside ``unannotated_s``."""
    return {"waiting_s": seconds} if seconds > 0 else {}


def _finish(ops: dict[str, dict[str, Any]], automatic: dict[str, bool]) -> dict[str, dict[str, Any]]:
    """Plain dicts, sorted by total time, categories sorted by code order; ``auto``: every instance
    of the operation was automatic (rlscope/runtime/auto_ops.py, ``automatic``). Keyed by name: a
    user's ``backprop`` and the automatic one are one entry (rlscope/trace/auto_names.py)."""
    out = {}
    for name, e in sorted(ops.items(), key=lambda kv: -kv[1]["total_s"]):
        e["auto"] = automatic.get(name, False)
        e["categories"] = dict(sorted(e["categories"].items(), key=lambda kv: -kv[1]))
        e["gpu_categories"] = dict(sorted(e["gpu_categories"].items(), key=lambda kv: -kv[1]))
        gpu_names = set(e["gpu_categories"])
        e["one_time_s"] = _one_time_entry(e["noise"], gpu_names)
        e["noise_s"] = _noise_entry(e.pop("noise"), gpu_names)
        out[name] = e
    return out


def _automatic(breakdowns: list[ProcessBreakdown]) -> dict[str, bool]:
    """Per operation and phase name: whether every instance of it in the run was automatic, in every
    process that used the name (one user's scope of it anywhere makes it not)."""
    out: dict[str, bool] = {}
    for b in breakdowns:
        for name, auto in b.automatic.items():
            out[name] = out.get(name, True) and auto
    return out


def _gpu_section(breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """GPU-bound time and NVML's utilization next to the kernel trace's (the process with most GPU work)."""
    with_gpu = [b for b in breakdowns if b.gpu.get("gpu_bound_s", 0.0) > 0 or b.gpu.get("nvml_samples", 0)]
    if not with_gpu:
        return {}
    best = max(with_gpu, key=lambda b: b.gpu.get("gpu_bound_s", 0.0))
    return {"pid": best.pid, **best.gpu}


def _by_total(d: dict[str, float]) -> dict[str, float]:
    return dict(sorted(d.items(), key=lambda kv: -kv[1]))


def _process_entry(b: ProcessBreakdown, cpu_rows: list, op_rows: list, gpu_rows: list) -> dict[str, Any]:
    """One process's own figures: its operations, categories and GPU time (the run's are summed)."""
    operations: dict[str, dict[str, Any]] = {}
    unannotated, waiting = _fill_operations(operations, cpu_rows, op_rows, gpu_rows, b.noise.to_pylist())
    cats: dict[str, float] = defaultdict(float)
    for r in cpu_rows:
        cats[r["category"]] += r["seconds"]
    gpu_cats: dict[str, float] = defaultdict(float)
    for r in gpu_rows:
        gpu_cats[r["category"]] += r["seconds"]
    return {
        "pid": b.pid,
        "host": b.host,
        "wall_s": b.wall_s,
        "events": b.events,
        "complete": b.complete,
        "unannotated_s": unannotated,
        **_waiting(waiting),
        "categories": _by_total(cats),
        "gpu_categories": _by_total(gpu_cats),
        "gpu_bound_s": b.gpu.get("gpu_bound_s", 0.0),
        "operations": _finish(operations, b.automatic),
        **({"detail": dict(b.detail)} if b.detail else {}),
    }


def _figures(trace: TraceHeader, breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """Every figure of the summary, from one set of breakdowns (raw or corrected).

    The headline figures (operations, categories, phases, GPU) are the headline processes' (the run's
    critical process: :func:`rlscope.analysis.roles.headline`), every process's own are in
    ``processes`` and ``roles``: a worker's idle wait for its next task is its own, not the run's, and
    summed over workers it made rows of several times the run.
    """
    per_proc = [(b.cpu_time.to_pylist(), b.ops.to_pylist(), b.gpu_time.to_pylist()) for b in breakdowns]
    procs = [_process_entry(b, *rows) for b, rows in zip(breakdowns, per_proc, strict=True)]
    roles.label_processes(trace, procs)  # role, node, clock offset of each process
    head, why = roles.headline(procs)
    every = breakdowns
    breakdowns = [every[i] for i in head]
    cpu_rows = [r for i in head for r in per_proc[i][0]]
    op_rows = [r for i in head for r in per_proc[i][1]]
    gpu_rows = [r for i in head for r in per_proc[i][2]]
    noise_rows = [r for b in breakdowns for r in b.noise.to_pylist()]

    operations: dict[str, dict[str, Any]] = {}
    unannotated, waiting = _fill_operations(operations, cpu_rows, op_rows, gpu_rows, noise_rows)
    automatic = _automatic(breakdowns)
    gpu_cats: dict[str, float] = defaultdict(float)
    unattributed_gpu: dict[str, float] = defaultdict(float)
    for r in gpu_rows:
        gpu_cats[r["category"]] += r["seconds"]
        if r["operation"] == UNANNOTATED:
            unattributed_gpu[r["category"]] += r["seconds"]
    cats: dict[str, float] = defaultdict(float)
    unannotated_cats: dict[str, float] = defaultdict(float)
    for r in cpu_rows:
        cats[r["category"]] += r["seconds"]
        if r["operation"] == UNANNOTATED and r["category"] != _WAITING:
            unannotated_cats[r["category"]] += r["seconds"]

    phases: dict[str, Any] = {}
    for ph in dict.fromkeys(r["phase"] for r in cpu_rows + op_rows + gpu_rows):
        ph_ops: dict[str, dict[str, Any]] = {}
        ph_unann, ph_waiting = _fill_operations(
            ph_ops,
            [r for r in cpu_rows if r["phase"] == ph],
            [r for r in op_rows if r["phase"] == ph],
            [r for r in gpu_rows if r["phase"] == ph],
            [r for r in noise_rows if r["phase"] == ph],
        )
        phases[ph] = {
            "wall_s": sum(b.phase_wall_s.get(ph, 0.0) for b in breakdowns),
            "unannotated_s": ph_unann,
            **_waiting(ph_waiting),
            "auto": automatic.get(ph, False),
            "operations": _finish(ph_ops, automatic),
        }

    starts, ends = [], []
    for b, p in zip(every, trace.processes, strict=True):
        if b.events == 0:
            continue
        starts.append(b.start_ns + clock_offset(p))
        # a run with detail stretches ends later than its joined detail does (rlscope.analysis.whole_run)
        added = b.detail.get("summarized_wall_s", b.detail.get("summarized_s", 0.0))
        ends.append(b.end_ns + clock_offset(p) + int(added * 1e9))
    wall = (max(ends) - min(starts)) / 1e9 if starts else 0.0
    return {
        "wall_s": wall,
        "unannotated_s": unannotated,
        **_waiting(waiting),
        "wall_noise_s": _wall_noise(breakdowns),
        "categories": _by_total(cats),
        "unannotated_categories": dict(unannotated_cats),
        "operations": _finish(operations, automatic),
        "gpu_categories": _by_total(gpu_cats),
        "unannotated_gpu_categories": dict(unattributed_gpu),
        "gpu_bound_s": sum(b.gpu.get("gpu_bound_s", 0.0) for b in breakdowns),
        "gpu": _gpu_section(breakdowns),
        "phases": phases,
        "headline": {"pids": [procs[i]["pid"] for i in head], "why": why},
        "processes": procs,
        "roles": roles.roles_of(procs),  # per role: breakdown, spread across workers, stragglers
    }


def _wall_noise(breakdowns: list[ProcessBreakdown]) -> float | None:
    """The wall's noise as far as repeated work tells it: per process, its operations' exclusive
    variances added; the largest process's. None without instances to tell."""
    best: float | None = None
    for b in breakdowns:
        rows = [r for r in b.noise.to_pylist() if r["measure"] == EXCLUSIVE]
        if sum(r["instances"] for r in rows) >= MIN_NOISE_INSTANCES:
            sd = math.sqrt(sum(r["variance_s2"] for r in rows))
            best = sd if best is None else max(best, sd)
    return best


def summarize(
    trace: TraceHeader,
    breakdowns: list[ProcessBreakdown],
    raw: list[ProcessBreakdown] | None = None,
    calibration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary dict (see docs/trace-format.md, "Summary JSON").

    ``breakdowns`` are corrected for overhead when ``raw`` (the uncorrected ones) is given; the
    top-level figures are then the corrected ones, and ``raw`` / ``corrected`` hold both sets.
    ``calibration``: which calibration was used, or why none was (``status``).
    """
    figures = _figures(trace, breakdowns)
    raw_figures = _figures(trace, raw) if raw is not None else figures
    out: dict[str, Any] = {"schema": SUMMARY_SCHEMA, "trace_dir": str(trace.path), **figures}
    out["corrected_for_overhead"] = raw is not None
    out["raw"] = raw_figures
    out["corrected"] = figures
    out["calibration"] = calibration or {"status": "not requested"}
    out["overhead"] = _overhead_section(breakdowns, raw_figures["wall_s"], figures["wall_s"]) if raw else {}
    win_ops = out["overhead"].get("windows", {}).get("operations", {})
    for name, e in out["operations"].items():
        e["uncertainty_s"] = win_ops.get(name, {}).get("uncertainty_s", 0.0)
    out["uncertainty_s"] = out["overhead"].get("uncertainty_s", 0.0)
    out["clock_alignment"] = roles.clock_alignment(trace)
    out["warnings"] = list(trace.warnings) + _unlaunched_warnings(raw if raw is not None else breakdowns)
    out["hint"] = no_operations_hint(trace) if not out["operations"] else ""
    detail = _detail_section(trace, breakdowns)
    if detail:  # only a run with detail stretches has one (every figure of the others is measured)
        out["detail"] = detail
    return out


def _detail_section(trace: TraceHeader, breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """Which figures cover the whole run and which come from the detail stretches (empty: the whole
    run was kept in detail, every figure is measured on all of it)."""

    parts = [b.detail for b in breakdowns if b.detail]
    if not parts:
        return {}
    schedule = ""
    for p in trace.processes:
        schedule = recorded_options(p.metadata).get("detail", "") or schedule
    from rlscope.trace.detail import STRETCH_ROWS

    return {
        "schedule": schedule,
        # a stretch also ends once it holds this many rows of its process (rlscope/trace/detail.py)
        "stretch_rows": STRETCH_ROWS if schedule and schedule != "all" else None,
        "detail_s": max(d["detail_s"] for d in parts),
        "summarized_s": max(d["summarized_s"] for d in parts),
        # what that time adds to the wall: less what the main thread lost to rlscope there (corrected)
        "summarized_wall_s": max(d.get("summarized_wall_s", d["summarized_s"]) for d in parts),
        # detail kept in the trace that the analysis's budget left out (rlscope/trace/budget.py)
        "left_out_s": max(d.get("left_out_s", 0.0) for d in parts),
        "whole_run": ["wall", "operation and phase times", "calls", "simulator time"],
        "from_detail": parts[0]["from_detail"],
    }


def _auto_ops_on(trace: TraceHeader) -> bool:
    """Whether any process recorded with automatic operations on (its session's options)."""
    return any(recorded_options(p.metadata).get("auto_ops") for p in trace.processes)


def no_operations_hint(trace: TraceHeader) -> str:
    """One line for a run with no operation at all: how to get some (the renderers print it)."""
    scope = 'wrap the loop\'s parts in `with rlscope.scope("inference"):` (and "simulation", "backprop")'
    if _auto_ops_on(trace):
        return (
            "no operations recorded: none of gymnasium/stable-baselines3 env steps, torch module calls"
            f" or optimizer steps ran; {scope} to attribute the time"
        )
    return (
        f"no operations recorded: {scope}, or profile with `rlscope run -- python train.py`, which finds"
        " simulation, inference and backprop in PyTorch code on its own"
    )


UNLAUNCHED_WARN_SHARE = 0.01  # a kernel or two in flight at the session's start is normal


def _unlaunched_warnings(breakdowns: list[ProcessBreakdown]) -> list[str]:
    """One line per process whose GPU work lost its launching API calls (breakdown.unlaunched)."""
    out = []
    for b in breakdowns:
        n, lost, total = (
            b.gpu.get(k, 0) for k in ("records_without_launch", "gpu_s_without_launch", "gpu_s_recorded")
        )
        if n and total > 0 and lost / total > UNLAUNCHED_WARN_SHARE:
            out.append(
                f"process {b.pid}: {n} GPU records ({100 * lost / total:.1f}% of recorded GPU time) have no"
                " launching CUDA API call in the trace and count as unannotated (another CUPTI client in"
                " the process, e.g. torch.profiler run before rlscope, can break the correlation)"
            )
    return out


def _overhead_section(breakdowns: list[ProcessBreakdown], raw_wall: float, wall: float) -> dict[str, Any]:
    """What the correction removed, summed over processes."""
    removed: dict[str, float] = defaultdict(float)
    notes: list[str] = []
    not_removable = 0.0
    for b in breakdowns:
        for k, v in b.overhead.get("removed_s", {}).items():
            removed[k] += v
        not_removable += b.overhead.get("not_removable_s", 0.0)
        notes += [n for n in b.overhead.get("notes", []) if n not in notes]
    windows = _windows_section(breakdowns)
    stall = _writer_stall_section(breakdowns)
    return {
        "windows": windows,
        "writer_stall": stall,
        # the windows' and the writer's stall share's, in quadrature
        "uncertainty_s": math.hypot(windows.get("uncertainty_s", 0.0), stall.get("uncertainty_s", 0.0)),
        "raw_wall_s": raw_wall,
        "corrected_wall_s": wall,
        "slowdown": raw_wall / wall if wall > 0 else 1.0,
        "removed_s": dict(sorted(removed.items(), key=lambda kv: -kv[1])),
        "not_removable_s": not_removable,
        "background_share": max((b.overhead.get("background_share", 0.0) for b in breakdowns), default=0.0),
        "costs_used": breakdowns[0].overhead.get("costs_used", {}) if breakdowns else {},
        "reference_loop_ns": _reference_loop_ns(breakdowns),
        "notes": notes,
    }


def _reference_loop_ns(breakdowns: list[ProcessBreakdown]) -> float | None:
    """The run's Python speed: the median over processes of the reference loop's ns an iteration each
    session timed (rlscope.overhead.correct.residual.run_reference_ns); None where none was timed."""
    ns = sorted(b.overhead["reference_loop_ns"] for b in breakdowns if b.overhead.get("reference_loop_ns"))
    if not ns:
        return None
    mid = len(ns) // 2  # statistics.median's, without importing statistics (and fractions) for it
    return ns[mid] if len(ns) % 2 else (ns[mid - 1] + ns[mid]) / 2


def _writer_stall_section(breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """The share of the writer's flush CPU time removed as the job's stall (analysis/flush_stall.py),
    weighted by each process's flush time over its compared instances; {} without marked flushes."""
    parts = [b.overhead.get("writer_stall") for b in breakdowns if b.overhead.get("writer_stall")]
    if not parts:
        return {}
    weight = sum(p["bound_ns"] for p in parts)
    share = sum(p["share"] * p["bound_ns"] for p in parts) / weight if weight > 0 else parts[0]["share"]
    sigma = max(p["sigma"] for p in parts)
    return {
        "share": share,
        "sigma": sigma,
        "method": "measured" if all(p["method"] == "measured" for p in parts) else "assumed",
        "overlapped_instances": sum(p["overlapped"] for p in parts),
        # what the share's uncertainty means for the wall: its sigma times the main threads' bound
        "uncertainty_s": math.hypot(*(p["sigma"] * p["main_bound_ns"] / 1e9 for p in parts)),
    }


def _windows_section(breakdowns: list[ProcessBreakdown]) -> dict[str, Any]:
    """The window evidence of every process, uncertainties added in quadrature across processes."""
    infos = [b.overhead.get("windows") for b in breakdowns if b.overhead.get("windows")]
    if not infos:
        return {}
    ops: dict[str, dict[str, Any]] = {}
    for info in infos:
        for name, e in info["operations"].items():
            o = ops.setdefault(name, {**e, "uncertainty_s": 0.0, "exclusive_uncertainty_s": 0.0})
            for k in ("uncertainty_s", "exclusive_uncertainty_s"):
                o[k] = (o[k] ** 2 + e[k] ** 2) ** 0.5
            q = e.get("light_window_ns")
            if q is not None and o.get("light_window_ns") is not q:  # the widest
                lo, mid, hi = o.get("light_window_ns") or q
                o["light_window_ns"] = [min(lo, q[0]), mid, max(hi, q[2])]
            for key in ("light_windows", "full_windows"):  # every process's windows
                w = e.get(key)
                if w is not None and o.get(key) is not w:
                    o[key] = (o.get(key) or []) + w
    return {
        "switched": sorted({k for i in infos for k in i["switched"]}),
        # the least of the processes that ran operations (else of those whose collectors recorded
        # anything): a torchrun agent, with no operation and hardly a torch op, has almost no full
        # window in effect, and says nothing of the ranks' share
        "full_share": min(i["full_share"] for i in _sharing_processes(infos)),
        "cost_per_event_ns": infos[0]["cost_per_event_ns"],
        "uncertainty_s": sum(i["uncertainty_s"] ** 2 for i in infos) ** 0.5,
        "operations": ops,
    }


def summarize_run(
    trace: TraceHeader,
    pairs: list[tuple[ProcessBreakdown, ProcessBreakdown | None]],
    correction: CorrectionPlan,
) -> dict[str, Any]:
    """The summary of every process's (raw, corrected) breakdowns under ``correction``.

    Corrected figures on top when the plan corrected (raw ones beside them), else raw ones; the
    plan's warnings, then what the correction could not remove.
    """
    raw = [r for r, _ in pairs]
    if correction.corrected:
        out = summarize(trace, [c for _, c in pairs], raw=raw, calibration=correction.info)
    else:
        out = summarize(trace, raw, calibration=correction.info)
    out["warnings"] += correction.warnings
    if correction.corrected:
        out["warnings"] += [f"overhead correction: {n}" for n in out["overhead"].get("notes", [])]
    return out


def _sharing_processes(infos: list[dict]) -> list[dict]:
    """The processes whose full-window share speaks for the run (see the summary's ``full_share``)."""
    with_ops = [i for i in infos if i["switched"] and set(i.get("operations") or {}) - {UNANNOTATED}]
    return with_ops or [i for i in infos if i["switched"]] or infos
