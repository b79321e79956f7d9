"""Everything the HTML report needs beyond the summary: a timeline window and per-operation kernel tables.

Pure functions: a loaded :class:`~rlscope.trace.reader.Trace` in, a dict of plain values and numpy
arrays out; :mod:`rlscope.viz.html` only draws it (it never reads the trace itself).

Default timeline window (``window=None``): one whole iteration of the outermost repeating phase,
when the run has phases that repeat (the library adapters' ``rollout`` and ``update``, a user's
phases): the phase with the fewest instances, at least two (ties go to the larger total time), from
its median instance's start to the next instance's start, so the window holds a rollout and an update
(at most ``DEFAULT_MAX_ITERATION_S``). Otherwise a few representative iterations of operations: the
outermost repeating operation (the fewest instances among operations seen at least 3 times; ties go to the
larger total time) is taken as "the iteration": in an RL loop that is the per-update step (e.g.
``compute_advantages`` in PPO), so the window shows a whole rollout and update. The window
starts at the instance whose start is the median start of that operation, and lasts
``DEFAULT_ITERATIONS`` median periods between its consecutive starts, at most ``DEFAULT_MAX_WINDOW_S``
(0.5 s when there is a single instance), shifted left if needed so it fits in the run, and never
longer than the run. Without operations the window is the first ``DEFAULT_MAX_WINDOW_S`` of the run.

The timeline is capped at ``max_intervals`` drawn intervals (operations + GPU records): when the
window holds more, only those starting earliest are kept, and ``timeline["capped"]`` says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope.analysis.intervals import (
    GPU_SCHEMA,
    Intervals,
    ProcessIntervals,
    clip_table,
    intervals,
    window_ns,
)
from rlscope.analysis.kernels import kernel_table
from rlscope.analysis.roles import label_processes, role_order, worker_label
from rlscope.keys import compute
from rlscope.trace.reader import Trace, clock_offset

__all__ = [
    "DEFAULT_ITERATIONS",
    "DEFAULT_MAX_ITERATION_S",
    "DEFAULT_MAX_WINDOW_S",
    "MAX_INTERVALS",
    "TimelinePart",
    "default_window",
    "empty_report",
    "report_data",
    "report_dict",
    "report_from",
    "timeline_data",
    "timeline_from",
    "timeline_part",
    "window_choice",
    "window_rows",
]

DEFAULT_ITERATIONS = 3
DEFAULT_MAX_WINDOW_S = 0.5
DEFAULT_MAX_ITERATION_S = 30.0  # a phase's iteration longer than this shows its first 30 s
MAX_INTERVALS = 20_000


def default_window(ops: pa.Table, run_end_ns: int, phases: pa.Table | None = None) -> tuple[int, int]:
    """(start, end) ns since the run start of the default window (see module docstring)."""
    iteration = _phase_iteration(phases, run_end_ns)
    if iteration is not None:
        return iteration
    max_ns = round(DEFAULT_MAX_WINDOW_S * 1e9)
    if ops.num_rows == 0 or run_end_ns <= 0:
        return 0, max(1, min(run_end_ns, max_ns))
    start = ops.column("start_ns").to_numpy()
    dur = ops.column("end_ns").to_numpy() - start
    uniq, inv, counts = _name_groups(ops.column("name"))
    totals = np.bincount(inv.reshape(-1), weights=dur.astype(np.float64), minlength=len(uniq))
    repeating = [i for i in range(len(uniq)) if counts[i] >= 3] or list(range(len(uniq)))
    best = min(repeating, key=lambda i: (counts[i], -totals[i]))
    starts = np.sort(start[inv.reshape(-1) == best])
    first = int(starts[(len(starts) - 1) // 2])  # an actual instance start at the median
    if len(starts) > 1:
        period = float(np.median(np.diff(starts)))
        length = min(max_ns, max(1, round(DEFAULT_ITERATIONS * period)))
    else:
        length = max_ns
    length = min(length, run_end_ns)
    first = max(0, min(first, run_end_ns - length))
    return first, first + length


def _phase_iteration(phases: pa.Table | None, run_end_ns: int) -> tuple[int, int] | None:
    """One iteration of the outermost repeating phase (module docstring); None: no phase repeats.

    Why not the operations' few iterations: in an unmodified stable-baselines3 run the outermost
    repeating operation is ``backprop``, one minibatch, and three of them drew 5 ms of a 1.5 s
    rollout-and-update loop; the phases are the loop."""
    if phases is None or phases.num_rows == 0 or run_end_ns <= 0:
        return None
    start = phases.column("start_ns").to_numpy()
    dur = phases.column("end_ns").to_numpy() - start
    uniq, inv, counts = _name_groups(phases.column("name"))
    totals = np.bincount(inv, weights=dur.astype(np.float64), minlength=len(uniq))
    repeating = [i for i in range(len(uniq)) if counts[i] >= 2]
    if not repeating:
        return None
    best = min(repeating, key=lambda i: (counts[i], -totals[i]))
    starts = np.sort(start[inv == best])
    k = min((len(starts) - 1) // 2, len(starts) - 2)  # a median instance with one after it
    first, length = int(starts[k]), int(starts[k + 1] - starts[k])
    length = max(1, min(length, round(DEFAULT_MAX_ITERATION_S * 1e9), run_end_ns))
    first = max(0, min(first, run_end_ns - length))
    return first, first + length


def _name_groups(names: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted unique names, each row's index into them, counts): ``np.unique(..., return_inverse=True,
    return_counts=True)`` of the column, through Arrow's dictionary encoding (a sort of a million
    Python strings took a quarter of an analysis; the few distinct names are sorted instead)."""
    enc = compute("dictionary_encode", names).combine_chunks()
    dictionary = np.asarray(enc.dictionary.to_pylist(), dtype=object)
    order = np.argsort(dictionary, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    inv = rank[enc.indices.to_numpy(zero_copy_only=False)]
    return dictionary[order], inv, np.bincount(inv, minlength=len(order))


def window_rows(
    ops: pa.Table, gpu: pa.Table, window_ns: tuple[int, int], keep: int | None = None
) -> tuple[pa.Table, pa.Table, int]:
    """(operations, GPU records) in the window, times clipped to it, and how many there were.

    ``keep``: at most that many, the earliest-starting (ties broken anyhow), in table order. Each
    process's ``max_intervals + 1`` earliest hold every interval the run's cap keeps and its cut-off
    (:func:`timeline_part`), so a process need not send more.
    """
    ops, gpu = clip_table(ops, window_ns), clip_table(gpu, window_ns)
    total = ops.num_rows + gpu.num_rows
    if keep is not None and total > keep:
        starts = np.concatenate([_starts(ops), _starts(gpu)])
        chosen = np.zeros(total, bool)
        chosen[np.argpartition(starts, keep - 1)[:keep]] = True
        n_ops = ops.num_rows
        # Arrow's filter, called without importing pyarrow.compute (Table.filter does)
        ops = compute("filter", ops, pa.array(chosen[:n_ops]))
        gpu = compute("filter", gpu, pa.array(chosen[n_ops:]))
    return ops, gpu, total


def _starts(table: pa.Table) -> np.ndarray:
    return table.column("start_ns").to_numpy().astype(np.int64)


def _process_rows(
    spans: dict[int, tuple[int, int]], w0: int, w1: int, names: dict[int, str]
) -> dict[str, Any]:
    """One bar per process: its session, so a process with no operations in the window still shows."""
    out: dict[str, list] = {"row": [], "start_s": [], "end_s": []}
    for pid, (s, e) in sorted(spans.items()):
        if s < w1 and e > w0:
            out["row"].append(names[pid])
            out["start_s"].append(max(s, w0) / 1e9)
            out["end_s"].append(min(e, w1) / 1e9)
    return out


def _workers(pids: set[int], processes: list[dict[str, Any]] | None) -> dict[int, tuple[str, str]]:
    """pid -> (role, row name), in timeline order: by role (launcher first, roles.role_order), then pid.

    ``processes``: labelled process entries (the summary's); a pid without one is named "pid N".
    """
    entries = {int(p["pid"]): p for p in processes or [] if "role" in p}
    order = role_order([entries[pid] for pid in sorted(entries)])

    def key(pid: int) -> tuple[int, int]:
        return (order.index(entries[pid]["role"]) if pid in entries else len(order), pid)

    return {
        pid: (entries[pid]["role"], worker_label(entries[pid])) if pid in entries else ("", f"pid {pid}")
        for pid in sorted(pids, key=key)
    }


def _role_groups(rows: list[str], role_of_row: dict[str, str]) -> list[dict[str, Any]]:
    """Consecutive rows of one role: ``{"role", "first", "last"}`` (row indices), for the renderer's bands."""
    groups: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        if groups and groups[-1]["role"] == role_of_row[row]:
            groups[-1]["last"] = i
        else:
            groups.append({"role": role_of_row[row], "first": i, "last": i})
    return groups


def timeline_data(
    iv: Intervals,
    window_ns: tuple[int, int],
    max_intervals: int = MAX_INTERVALS,
    processes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Rows and bars of the timeline in ``window_ns`` (ns since the run start), capped.

    ``ops``: one bar per operation instance on its (process, thread) row, ``depth`` for nesting;
    ``gpu``: one bar per kernel/copy/memset on its (process, device, stream) row. Times in seconds
    since the run start. One process: rows "pid N thread T (main)" and "pid N GPU D stream S".
    Several: one row per worker, named by :func:`rlscope.analysis.roles.worker_label` from
    ``processes`` (the summary's labelled entries), holding its session bar and its main thread's
    operations, with its other threads and GPU streams right below; workers ordered and grouped by
    role, launcher first (``groups``: each role's first and last row, for the renderer to band).
    """
    ops, gpus, total = window_rows(iv.operations, iv.gpu, window_ns)
    return _timeline(ops, gpus, total, iv.spans, iv.main_threads, window_ns, max_intervals, processes)


@dataclasses.dataclass
class TimelinePart:
    """One process's share of the timeline, computed where its events are (a worker)."""

    pid: int
    main_thread: int
    span: tuple[int, int]  # its session, ns since the run start
    window_ns: tuple[int, int]  # the timeline's window
    ops: pa.Table  # its operations in the window, clipped: the earliest max_intervals + 1 at most
    gpu: pa.Table  # its GPU records likewise
    total: int  # how many of its intervals the window holds


def timeline_part(
    iv: ProcessIntervals,
    window_ns: tuple[int, int] | None,
    run_end_ns: int,
    max_intervals: int = MAX_INTERVALS,
) -> TimelinePart:
    """One process's :class:`TimelinePart`; ``window_ns`` None: the default window, chosen from this
    process's operations (a run with one process)."""
    ops = iv.tables["operations"]
    gpu = iv.tables.get("gpu", GPU_SCHEMA.empty_table())
    win = window_ns if window_ns is not None else default_window(ops, run_end_ns, iv.tables.get("phases"))
    ops, gpu, total = window_rows(ops, gpu, win, keep=max_intervals + 1)
    return TimelinePart(iv.pid, iv.main_thread, iv.span, win, ops, gpu, total)


def timeline_from(
    parts: list[TimelinePart],
    max_intervals: int = MAX_INTERVALS,
    processes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """:func:`timeline_data` from the processes' parts (trace order), with the same result."""
    ops = pa.concat_tables([p.ops for p in parts]).combine_chunks()
    gpu = pa.concat_tables([p.gpu for p in parts]).combine_chunks()
    spans = {p.pid: p.span for p in parts}
    main_threads = {p.pid: p.main_thread for p in parts}
    total = sum(p.total for p in parts)
    return _timeline(ops, gpu, total, spans, main_threads, parts[0].window_ns, max_intervals, processes)


def _timeline(
    ops: pa.Table,
    gpus: pa.Table,
    total: int,
    spans: dict[int, tuple[int, int]],
    main_threads: dict[int, int],
    window_ns: tuple[int, int],
    max_intervals: int,
    processes: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """The timeline from the intervals in the window (clipped; ``total`` of them in the run)."""
    w0, w1 = window_ns
    o_s, o_e = _starts(ops), ops.column("end_ns").to_numpy().astype(np.int64)
    g_s, g_e = _starts(gpus), gpus.column("end_ns").to_numpy().astype(np.int64)
    capped = total > max_intervals
    shown_until_ns = w1
    if capped:
        # keep the earliest-starting intervals: a contiguous stretch reads better than a sample
        starts = np.concatenate([o_s, g_s])
        kth = np.partition(starts, max_intervals)[max_intervals]
        shown_until_ns = int(kth)
        ok, gk = o_s < kth, g_s < kth
        ops, o_s, o_e = compute("filter", ops, pa.array(ok)), o_s[ok], o_e[ok]
        gpus, g_s, g_e = compute("filter", gpus, pa.array(gk)), g_s[gk], g_e[gk]

    o_pid = ops.column("pid").to_numpy()
    o_thread = ops.column("thread").to_numpy()
    thread_keys = sorted(
        {(int(p), int(t)) for p, t in zip(o_pid.tolist(), o_thread.tolist(), strict=True)},
        key=lambda k: (k[1] != main_threads.get(k[0]), k[1]),
    )
    g_pid = gpus.column("pid").to_numpy()
    g_dev = gpus.column("device").to_numpy()
    g_stream = gpus.column("stream").to_numpy()
    stream_keys = sorted(
        {
            (int(p), int(d), int(s))
            for p, d, s in zip(g_pid.tolist(), g_dev.tolist(), g_stream.tolist(), strict=True)
        }
    )
    multi = len(spans) > 1
    workers = _workers({*spans, *(k[0] for k in thread_keys), *(k[0] for k in stream_keys)}, processes)
    if multi:  # the main thread shares its worker's row (over its session bar)
        names = {pid: name for pid, (_, name) in workers.items()}
        row_label = {
            k: names[k[0]] if main_threads.get(k[0]) == k[1] else f"{names[k[0]]} · thread {k[1]}"
            for k in thread_keys
        }
        stream_label = {k: f"{names[k[0]]} · GPU {k[1]} stream {k[2]}" for k in stream_keys}
        procs = _process_rows(spans, w0, w1, names)
    else:
        row_label = {
            k: f"pid {k[0]} thread {k[1]}" + (" (main)" if main_threads.get(k[0]) == k[1] else "")
            for k in thread_keys
        }
        stream_label = {k: f"pid {k[0]} GPU {k[1]} stream {k[2]}" for k in stream_keys}
        procs = {"row": [], "start_s": [], "end_s": []}
    role_of_row: dict[str, str] = {}
    for pid, (role, _) in workers.items():
        own = [r for r in procs["row"] if r == workers[pid][1]]
        own += [row_label[k] for k in thread_keys if k[0] == pid]
        own += [stream_label[k] for k in stream_keys if k[0] == pid]
        role_of_row.update(dict.fromkeys(own, role))
    rows = list(role_of_row)
    return {
        "window_s": (w0 / 1e9, w1 / 1e9),
        "rows": rows,
        "groups": _role_groups(rows, role_of_row) if multi else [],
        "processes": procs,
        "ops": {
            "row": [
                row_label[(int(p), int(t))] for p, t in zip(o_pid.tolist(), o_thread.tolist(), strict=True)
            ],
            "name": ops.column("name").to_pylist(),
            "start_s": o_s / 1e9,
            "end_s": o_e / 1e9,
            "depth": ops.column("depth").to_numpy().astype(np.int64),
        },
        "gpu": {
            "row": [
                stream_label[(int(p), int(d), int(s))]
                for p, d, s in zip(g_pid.tolist(), g_dev.tolist(), g_stream.tolist(), strict=True)
            ],
            "name": gpus.column("name").to_pylist(),
            "category": gpus.column("category").to_pylist(),
            "start_s": g_s / 1e9,
            "end_s": g_e / 1e9,
        },
        "total_intervals": total,
        "drawn_intervals": len(o_s) + len(g_s),
        "capped": capped,
        "shown_until_s": shown_until_ns / 1e9,
        "max_intervals": max_intervals,
    }


def _nvml_shift_s(trace: Trace, iv: Intervals, pid: int | None) -> float | None:
    """Seconds to add to a process's trace-clock seconds (NVML sample times) to get run-relative time."""
    for proc in trace.processes:
        if proc.pid == pid:
            return (clock_offset(proc) - iv.run_start_ns) / 1e9
    return None


def window_choice(
    window: tuple[float | None, float | None] | None, run_end_ns: int, processes: int
) -> tuple[tuple[int, int] | None, str]:
    """The timeline window (ns since the run start) and why it was chosen; None: the default window of
    a run with one process, chosen from its operations (:func:`default_window`).

    With several processes the default is the whole run, so every process is in it (the timeline cap
    still bounds what is drawn). A window that misses the run is an error.
    """
    if window is not None:
        # same validation and rounding as intervals(trace, window)
        return window_ns(window, run_end_ns) or (0, run_end_ns), "user"
    if processes > 1:
        return (0, max(1, run_end_ns)), "all processes"
    return None, "default"


def report_from(
    iv: Intervals,
    kernels: pa.Table,
    window: tuple[float | None, float | None] | None = None,
    nvml_shift_s: float | None = None,
    max_intervals: int = MAX_INTERVALS,
    processes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report data from the whole run's intervals and kernel table (see :func:`report_data`).

    Window: :func:`window_choice`. ``processes``: the summary's labelled process entries, which name
    and group the timeline's rows.
    """
    win, chosen = window_choice(window, iv.run_end_ns, len(iv.spans))
    if win is None:
        win = default_window(iv.operations, iv.run_end_ns, iv.phases)
    timeline = timeline_data(iv, win, max_intervals, processes)
    return report_dict(iv.run_end_ns, chosen, timeline, kernels, nvml_shift_s)


def report_dict(
    run_end_ns: int,
    chosen: str,
    timeline: dict[str, Any],
    kernels: pa.Table,
    nvml_shift_s: float | None,
    cuts: list[dict[str, float]] | None = None,
) -> dict[str, Any]:
    out = {
        "run_s": run_end_ns / 1e9,
        "window_choice": chosen,
        "timeline": timeline,
        "kernels": kernels.to_pylist(),
        "nvml_shift_s": nvml_shift_s,
    }
    if cuts:  # a run kept in detail stretches: where the timeline joins them (detail_cuts)
        out["cuts"] = cuts
    return out


def detail_cuts(headers: list[Any], run_start_ns: int) -> list[dict[str, float]]:
    """Where the timeline of a run kept in detail stretches joins two of them, in seconds since the
    run start on the joined clock, and how long the run went on between them (rlscope/trace/glue.py).
    The processes of a run share their cuts; the first process that has any gives them."""
    from rlscope.trace.glue import Gaps
    from rlscope.trace.header import clock_offset

    for h in headers:
        text = h.metadata.get("detail.gaps")
        if not text:
            continue
        gaps = Gaps.from_json(text)
        joined = gaps.map(gaps.start)
        at = (joined + clock_offset(h) - run_start_ns) / 1e9
        return [
            {"at_s": float(a), "skipped_s": float(b - s) / 1e9}
            for a, s, b in zip(at, gaps.start, gaps.end, strict=True)
        ]
    return []


def report_data(
    trace: Trace,
    window: tuple[float | None, float | None] | None = None,
    max_intervals: int = MAX_INTERVALS,
    summary: dict | None = None,
) -> dict[str, Any]:
    """Data for :func:`rlscope.viz.html.render_html` beyond the summary.

    ``window``: (start, end) seconds since the run start (either may be None), or None for the
    default window (module docstring). Raises :class:`~rlscope.errors.RLScopeError` when the window
    misses the run. ``summary``, when given, only tells which process's NVML samples the summary's
    GPU section holds (to put them on the run's time axis). :func:`rlscope.analysis.analyze` builds
    the same data from the timelines it already has.
    """
    if not any(p.events.num_rows for p in trace.processes):
        return empty_report()
    iv = intervals(trace)  # the whole run once: the default window is chosen from it
    gpu_pid = ((summary or {}).get("gpu") or {}).get("pid")
    processes: list[dict[str, Any]] = [{"pid": p.pid} for p in trace.processes]
    label_processes(trace, processes)  # role, node, rank: as the summary labels them
    shift = _nvml_shift_s(trace, iv, gpu_pid)
    return report_from(iv, kernel_table(trace), window, shift, max_intervals, processes)


def empty_report() -> dict[str, Any]:
    """Nothing to draw; the report still renders (its sections say so) rather than failing."""
    return {"run_s": 0.0, "window_choice": "none", "timeline": None, "kernels": [], "nvml_shift_s": None}
