"""Chrome trace event format (chrome://tracing, Perfetto UI) from the analyzer's interval tables.

Follows the PyTorch profiler's conventions so tools and habits built for its traces carry over:
complete events (``"ph": "X"``, ``ts``/``dur`` in microseconds) with ``cat`` ``user_annotation``
(operations and phases), ``cpu_op`` (backend time: named per torch op when the native recorder
took it, else one ``backend`` box per stretch), ``cuda_runtime`` (CUDA API calls), ``kernel``,
``gpu_memcpy``, ``gpu_memset`` (GPU work, one process track per GPU and one thread track per stream),
and ``ac2g`` flow events from each CUDA API call to the GPU work it launched (id = correlation id).

A CPU RL loop runs hundreds of thousands of torch ops of a microsecond or two (an 11 s PPO: 1.1 M
events, 124 MB), which viewers load slowly or not at all. So backend ops shorter than ``min_op_ns``
(:data:`MIN_OP_US` by default in ``rlscope-analyze export``; 0 keeps all) are folded into the
innermost operation that encloses them: its ``args`` count them, their time and their commonest
names (``folded_cpu_ops``, ``folded_cpu_op_us``, ``folded_cpu_op_names``), and ``otherData`` says how
many were folded. Their time stays in the operation's box; the longer ops keep their own boxes.

Viz only: :func:`render` takes an :class:`rlscope.analysis.AnalysisResult` (:func:`to_chrome` its
:class:`~rlscope.analysis.intervals.Intervals`, or their ``tables()`` dict); nothing here reads a trace.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlscope.analysis.demangle import demangle
from rlscope.errors import RLScopeError

if TYPE_CHECKING:
    from rlscope.analysis.result import AnalysisResult

__all__ = [
    "CPU_CATEGORY_CAT",
    "GPU_CATEGORY_CAT",
    "MIN_OP_US",
    "fold_short_ops",
    "render",
    "to_chrome",
    "write",
    "write_chrome",
]

# CPU category segment -> Chrome "cat". cuda_api segments are left out: the CUDA API calls
# themselves are exported (cuda_runtime) and cover the same time.
CPU_CATEGORY_CAT = {
    "backend": "cpu_op",
    "simulator": "simulator",
    "rlscope": "rlscope",
    "compile": "compile",
}
GPU_CATEGORY_CAT = {"gpu_kernel": "kernel", "gpu_memcpy": "gpu_memcpy", "gpu_memset": "gpu_memset"}
_GPU_SORT_BASE = 1_000_000  # GPU tracks after the CPU processes in the viewer
_FLOW_PROCESS_SHIFT = 32  # flow ids of the 2nd, 3rd... process: correlation + (index << 32)
MIN_OP_US = 10.0  # backend ops shorter than this are folded into their operation (export's default)
_TOP_FOLDED_NAMES = 5


def _us(ns: int) -> float:
    return ns / 1000


def _rows(table: Any) -> list[dict[str, Any]]:
    return table.to_pylist() if table is not None else []


def _gpu_pids(gpu_rows: list[dict], cpu_pids: set[int]) -> dict[tuple[int, int], int]:
    """Numeric pid of each (process, device) GPU track: the device index when that is unambiguous."""
    keys = sorted({(r["pid"], r["device"]) for r in gpu_rows})
    single = len({k[0] for k in keys}) <= 1
    taken = set(cpu_pids)
    out: dict[tuple[int, int], int] = {}
    nxt = max([*cpu_pids, *(k[1] for k in keys), 0]) + 1
    for key in keys:
        dev = key[1]
        if single and dev >= 0 and dev not in taken:
            out[key] = dev
        else:
            while nxt in taken:
                nxt += 1
            out[key] = nxt
        taken.add(out[key])
    return out


def _innermost(ops: Any, pid: np.ndarray, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Row of ``ops`` (the operations table) of the innermost operation open at ``t`` on each
    (pid, thread), -1 for none. One thread's operations of one depth are disjoint, so per depth a
    binary search finds the one that may hold ``t``; a deeper one that does wins."""
    out = np.full(len(t), -1, np.int64)
    if ops is None or ops.num_rows == 0 or len(t) == 0:
        return out
    o = {
        k: ops.column(k).to_numpy().astype(np.int64) for k in ("pid", "thread", "start_ns", "end_ns", "depth")
    }
    for p, th in {(int(a), int(b)) for a, b in zip(pid.tolist(), thread.tolist(), strict=True)}:
        want = np.flatnonzero((pid == p) & (thread == th))
        mine = (o["pid"] == p) & (o["thread"] == th)
        for d in np.unique(o["depth"][mine]):
            rows = np.flatnonzero(mine & (o["depth"] == d))
            rows = rows[np.argsort(o["start_ns"][rows], kind="stable")]
            i = np.searchsorted(o["start_ns"][rows], t[want], side="right") - 1
            ok = i >= 0
            ok[ok] = o["end_ns"][rows[i[ok]]] > t[want][ok]
            out[want[ok]] = rows[i[ok]]
    return out


def fold_short_ops(
    backend: Any, ops: Any, min_op_ns: int
) -> tuple[Any, dict[int, dict[str, Any]], dict[str, int]]:
    """(the backend ops to draw, operation row -> what was folded into it, totals).

    Backend ops shorter than ``min_op_ns`` are folded into the innermost operation open at their
    start (module docstring); those outside every operation are only counted. Totals: ``n`` folded,
    ``outside_n`` and ``outside_ns`` of them in no operation.
    """
    totals = {"n": 0, "outside_n": 0, "outside_ns": 0}
    if backend is None or backend.num_rows == 0 or min_op_ns <= 0:
        return backend, {}, totals
    start = backend.column("start_ns").to_numpy().astype(np.int64)
    short = backend.column("end_ns").to_numpy().astype(np.int64) - start < min_op_ns
    if not short.any():
        return backend, {}, totals
    import pyarrow as pa

    folded = np.flatnonzero(short)
    pid = backend.column("pid").to_numpy().astype(np.int64)[folded]
    thread = backend.column("thread").to_numpy().astype(np.int64)[folded]
    parent = _innermost(ops, pid, thread, start[folded])
    dur = backend.column("end_ns").to_numpy().astype(np.int64)[folded] - start[folded]
    names = backend.column("name").take(pa.array(folded)).to_pylist()
    into: dict[int, dict[str, Any]] = {}
    for row, ns, name in zip(parent.tolist(), dur.tolist(), names, strict=True):
        if row < 0:
            totals["outside_n"] += 1
            totals["outside_ns"] += ns
            continue
        f = into.setdefault(row, {"n": 0, "ns": 0, "names": Counter()})
        f["n"] += 1
        f["ns"] += ns
        f["names"][name] += 1
    totals["n"] = int(short.sum())
    return backend.filter(pa.array(~short)), into, totals


def to_chrome(
    tables: Any, main_threads: Mapping[int, int] | None = None, min_op_ns: int = 0
) -> dict[str, Any]:
    """A Chrome trace (``{"traceEvents": [...]}``) of the interval tables; times relative to the run start.

    ``min_op_ns``: backend ops shorter than this are folded into their operation (module docstring);
    0 keeps every one.
    """
    if hasattr(tables, "tables"):
        main_threads = tables.main_threads if main_threads is None else main_threads
        meta: dict[str, Any] = {"run_start_unix_ns": tables.run_start_ns}
        if tables.window_ns is not None:
            meta["window_s"] = [tables.window_ns[0] / 1e9, tables.window_ns[1] / 1e9]
        tables = tables.tables()
    else:
        meta = {}
    main_threads = dict(main_threads or {})
    backend, folded_into, folded = fold_short_ops(tables.get("backend"), tables.get("operations"), min_op_ns)
    ops, phases = _rows(tables.get("operations")), _rows(tables.get("phases"))
    cpu, gpu_rows, api = _rows(tables.get("cpu")), _rows(tables.get("gpu")), _rows(tables.get("api"))
    torch_ops = _rows(backend)
    native = {r["pid"] for r in torch_ops}  # processes whose backend time is named per op

    events: list[dict[str, Any]] = []
    threads: set[tuple[int, int]] = set()

    def complete(name: str, cat: str, pid: int, tid: int, start: int, end: int, args: dict) -> None:
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": _us(start),
                "dur": _us(max(end - start, 0)),  # never negative: a viewer draws those wrongly
                "args": args,
            }
        )

    for r in phases:
        complete(
            r["name"], "user_annotation", r["pid"], r["thread"], r["start_ns"], r["end_ns"], {"phase": True}
        )
        threads.add((r["pid"], r["thread"]))
    for row, r in enumerate(ops):
        args = {"depth": r["depth"], "instance": r["id"]}
        if r["phase"]:
            args["phase"] = r["phase"]
        if row in folded_into:
            f = folded_into[row]
            args["folded_cpu_ops"] = f["n"]
            args["folded_cpu_op_us"] = round(_us(f["ns"]), 3)
            args["folded_cpu_op_names"] = dict(f["names"].most_common(_TOP_FOLDED_NAMES))
        complete(r["name"], "user_annotation", r["pid"], r["thread"], r["start_ns"], r["end_ns"], args)
        threads.add((r["pid"], r["thread"]))
    for r in cpu:
        cat = CPU_CATEGORY_CAT.get(r["category"])
        if cat is None or (r["category"] == "backend" and r["pid"] in native):
            continue
        complete(r["category"], cat, r["pid"], r["thread"], r["start_ns"], r["end_ns"], {})
        threads.add((r["pid"], r["thread"]))
    for r in torch_ops:
        complete(r["name"], "cpu_op", r["pid"], r["thread"], r["start_ns"], r["end_ns"], {})
        threads.add((r["pid"], r["thread"]))
    for r in api:
        args = {"correlation": r["correlation"]}
        complete(r["name"], "cuda_runtime", r["pid"], r["thread"], r["start_ns"], r["end_ns"], args)
        threads.add((r["pid"], r["thread"]))

    cpu_pids = {p for p, _ in threads} | set(main_threads)
    gpu_pid = _gpu_pids(gpu_rows, cpu_pids)
    streams: set[tuple[int, int, int]] = set()  # (numeric pid, stream, device)
    first_record: dict[tuple[int, int], tuple[int, int, int]] = {}  # (pid, corr) -> track and start
    for r in gpu_rows:
        g = gpu_pid[(r["pid"], r["device"])]
        args = {"device": r["device"], "stream": r["stream"], "correlation": r["correlation"]}
        if r["bytes"]:
            args["bytes"] = r["bytes"]
        # kernels by their readable name, as PyTorch's traces show them; the mangled one goes in args
        name = demangle(r["name"])
        if name != r["name"]:
            args["mangled"] = r["name"]
        cat = GPU_CATEGORY_CAT.get(r["category"], r["category"])
        complete(name, cat, g, r["stream"], r["start_ns"], r["end_ns"], args)
        streams.add((g, r["stream"], r["device"]))
        key = (r["pid"], r["correlation"])
        if key not in first_record or r["start_ns"] < first_record[key][2]:
            first_record[key] = (g, r["stream"], r["start_ns"])

    # flows: launch (API call) -> the GPU work it launched, as PyTorch's "ac2g"
    process_index = {p: i for i, p in enumerate(sorted(cpu_pids))}
    for r in api:
        target = first_record.get((r["pid"], r["correlation"]))
        if target is None:
            continue
        fid = r["correlation"] + (process_index[r["pid"]] << _FLOW_PROCESS_SHIFT)
        base = {"cat": "ac2g", "name": "ac2g", "id": fid}
        events.append({"ph": "s", **base, "pid": r["pid"], "tid": r["thread"], "ts": _us(r["start_ns"])})
        events.append(
            {"ph": "f", "bp": "e", **base, "pid": target[0], "tid": target[1], "ts": _us(target[2])}
        )

    # enclosing events first at equal start: viewers nest by order
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0)))
    return {
        "traceEvents": _metadata(cpu_pids, threads, main_threads, gpu_pid, streams) + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "rlscope",
            # the timeline as recorded: rlscope-analyze --json / the table hold the corrected totals
            "corrected_for_overhead": False,
            # backend ops shorter than this many microseconds are folded into their operations
            "folded_cpu_ops": folded["n"],
            "folded_cpu_ops_below_us": _us(min_op_ns),
            # ... of which in no operation: counted here only
            "folded_cpu_ops_outside_operations": folded["outside_n"],
            "folded_cpu_ops_outside_operations_us": round(_us(folded["outside_ns"]), 3),
            **meta,
        },
    }


def _metadata(
    cpu_pids: set[int],
    threads: set[tuple[int, int]],
    main_threads: Mapping[int, int],
    gpu_pid: Mapping[tuple[int, int], int],
    streams: set[tuple[int, int, int]],
) -> list[dict[str, Any]]:
    """process_name / thread_name / sort-index "M" events naming every track."""
    out: list[dict[str, Any]] = []

    def m(name: str, pid: int, tid: int, args: dict) -> None:
        out.append({"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args})

    for i, pid in enumerate(sorted(cpu_pids)):
        m("process_name", pid, 0, {"name": f"process {pid}"})
        m("process_sort_index", pid, 0, {"sort_index": i})
    for pid, tid in sorted(threads | {(p, t) for p, t in main_threads.items()}):
        label = f"main thread {tid}" if main_threads.get(pid) == tid else f"thread {tid}"
        m("thread_name", pid, tid, {"name": label})
        m("thread_sort_index", pid, tid, {"sort_index": 0 if main_threads.get(pid) == tid else 1})
    single = len({k[0] for k in gpu_pid}) <= 1
    for (pid, dev), g in sorted(gpu_pid.items()):
        m("process_name", g, 0, {"name": f"GPU {dev}" if single else f"GPU {dev} (process {pid})"})
        m("process_sort_index", g, 0, {"sort_index": _GPU_SORT_BASE + g})
    for g, stream, _dev in sorted(streams):
        m("thread_name", g, stream, {"name": f"stream {stream}"})
        m("thread_sort_index", g, stream, {"sort_index": stream})
    return out


def write_chrome(obj: Mapping[str, Any], path: str | Path) -> None:
    """Write a Chrome trace as JSON, gzip-compressed when ``path`` ends with ``.gz`` (Perfetto opens both)."""
    data = json.dumps(obj, separators=(",", ":")).encode()
    try:
        if str(path).endswith(".gz"):
            with gzip.open(path, "wb") as f:
                f.write(data)
        else:
            Path(path).write_bytes(data)
    except OSError as e:
        raise RLScopeError(f"{path}: cannot write: {e.strerror or e}") from None


def render(result: AnalysisResult, min_op_ns: int = 0) -> dict[str, Any]:
    """The Chrome trace of an analysis: its intervals (the window's, when one was asked for)."""
    return to_chrome(result.interval_tables(), min_op_ns=min_op_ns)


def write(result: AnalysisResult, path: str | Path, min_op_ns: int = 0) -> None:
    write_chrome(render(result, min_op_ns), path)
