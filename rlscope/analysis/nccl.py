"""NCCL kernels per operation and per process: the collectives (all-reduce in DDP's ``backprop``) on the GPU.

NCCL kernels are GPU kernel records whose function is named ``ncclKernel...`` or ``ncclDevKernel...``.
CUPTI records kernel names mangled (``_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs...``),
so a name is demangled first (:mod:`rlscope.analysis.demangle`, as the kernel tables do) and the
function's own name is matched: namespaces, a return type and template arguments do not hide it. Where
no demangler is at hand, the mangled name's leading identifier is matched. They are joined to operations
like every GPU record (:mod:`rlscope.analysis.kernels`: the operation open on the launching thread, or on
the thread that called ``backward()`` for the engine's threads), read off each process's kernel rows;
the figures name each kernel demangled. Each process entry of the summary with GPU
kernels gets ``nccl_s`` (its NCCL kernel time) and, per operation, ``nccl_s`` and ``nccl_kernels``
(name -> count, seconds); each role with several workers gets the spread of its workers' NCCL time per
operation (``nccl``). A trace without GPU kernels (CPU, gloo) gets nothing: no key, no zero. Times are
raw GPU time, as GPU time always is.

Where the process recorded its collectives from torch's flight recorder (``collectives.arrows``,
collectors/collectives.py), ``nccl_s`` is their GPU time instead: every collective of the run, in light
windows too, each given to the operation open on the thread that queued it (or that called
``backward()``, for the autograd engine's threads) when it was queued; per operation
``nccl_collectives`` names them (``nccl:all_reduce`` -> count, seconds) and ``nccl_kernels`` still lists
the kernels the full windows traced. Why: a collective's length is mostly the wait for the other ranks,
which differs between full and light windows, so kernel time scaled up from the full windows misreads
it; a process entry with NCCL time says which source it used (``nccl_source``: ``collectives`` or
``kernels``). Record ids missing between those written are collectives lost, and a warning says so.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np

from rlscope.analysis import gpu
from rlscope.analysis.demangle import demangle
from rlscope.analysis.kernels import UNANNOTATED, KernelRows
from rlscope.analysis.roles import _spread

NCCL_PREFIXES = ("ncclKernel", "ncclDevKernel")

__all__ = [
    "NCCL_PREFIXES",
    "Collectives",
    "add_to_summary",
    "collective_rows",
    "is_nccl",
    "nccl_by_operation",
]

# (operation, collective name) -> [count, ns], and how many record ids are missing
Collectives = tuple[dict[tuple[str, str], list[float]], int]


def _mangled_function_name(name: str) -> str:
    """The function's identifier in a mangled name (``_Z<len><id>...``, nested ``_ZN<len><ns>...<len><id>E``),
    read by length prefix, for names the C++ runtime could not demangle; "" where it does not parse.
    Why not a regex: an argument type such as ``24ncclDevKernelArgsStorage`` must not count."""
    i, last, nested = 2, "", False
    if name[i : i + 1] == "N":
        i, nested = i + 1, True
    while i < len(name):
        if name[i] == "L":  # internal linkage
            i += 1
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        if j == i:
            break
        n = int(name[i:j])
        last, i = name[j : j + n], j + n
        if not nested:
            break
    return last


def _function_name(demangled: str) -> str:
    """The function's own identifier in a demangled signature: ``void ns::f<int>(char*)`` -> ``f``."""
    depth, head = 0, []
    for ch in demangled:  # template arguments may hold parentheses and "::": drop them first
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            if ch == "(":
                break
            head.append(ch)
    return "".join(head).split()[-1].rsplit("::", 1)[-1] if "".join(head).split() else ""


@functools.lru_cache(maxsize=16384)
def is_nccl(kernel: str) -> bool:
    """Whether a kernel name (as recorded, mangled, or demangled) is one of NCCL's kernels."""
    name = demangle(kernel)
    if _function_name(name).startswith(NCCL_PREFIXES):
        return True
    return name.startswith("_Z") and _mangled_function_name(name).startswith(NCCL_PREFIXES)


def nccl_by_operation(rows: Iterable[tuple[str, str, str, int, float]]) -> dict[str, dict[str, Any]]:
    """``(operation, category, kernel name, count, ns)`` GPU rows of one process -> NCCL time per operation.

    Returns ``{operation: {"nccl_s": s, "nccl_kernels": {kernel: {"count": n, "total_s": s}}}}`` for the
    operations that launched at least one NCCL kernel, each kernel named demangled.
    """
    out: dict[str, dict[str, Any]] = {}
    for op, cat, name, count, ns in rows:
        if cat != "gpu_kernel" or not is_nccl(name):
            continue
        e = out.setdefault(op, {"nccl_s": 0.0, "nccl_kernels": {}})
        k = e["nccl_kernels"].setdefault(demangle(name), {"count": 0, "total_s": 0.0})
        k["count"] += int(count)
        k["total_s"] += ns / 1e9
        e["nccl_s"] += ns / 1e9
    return out


def collective_rows(proc: Any, joined: gpu.JoinedTimeline | None = None) -> Collectives | None:
    """One process's recorded collectives per (operation, name), or None where it recorded none."""
    table = getattr(proc, "collectives", None)
    if table is None or table.num_rows == 0:
        return None
    tl = (joined if joined is not None else gpu.timeline_with_gpu(proc))[0]
    ts = table.column("ts_ns").to_numpy().astype(np.int64)
    thread = table.column("thread").to_numpy().astype(np.int64)
    op, _ = gpu.state_at_launch(tl, thread, ts)
    op_name = np.append(tl.inst_name, -1).astype(np.int64)[op]
    names = table.column("name").to_numpy()
    dur = table.column("duration_ns").to_numpy().astype(np.float64)
    acc: dict[tuple[str, str], list[float]] = {}
    for on, n, d in zip(op_name.tolist(), names.tolist(), dur.tolist(), strict=True):
        e = acc.setdefault((UNANNOTATED if on < 0 else proc.name(on), proc.name(n)), [0, 0.0])
        e[0] += 1
        e[1] = -1.0 if d < 0 or e[1] < 0 else e[1] + d  # -1: no GPU time (gloo)
    rid = table.column("record_id").to_numpy().astype(np.int64)
    which = table.column("recorder").to_numpy() if "recorder" in table.column_names else np.zeros(len(rid))
    lost = 0
    for r in np.unique(which):  # each recorder numbers its entries 0, 1, ...: a gap is one lost
        ids = np.unique(rid[which == r])
        lost += int(ids[-1] - ids[0] + 1 - len(ids))
    return acc, lost


def _by_operation(rows: dict[tuple[str, str], list[float]]) -> dict[str, dict[str, Any]]:
    """``{operation: {"nccl_s", "nccl_collectives": {name: {"count", "total_s"}}}}`` of NCCL's collectives."""
    out: dict[str, dict[str, Any]] = {}
    for (op, name), (count, ns) in rows.items():
        if not name.startswith("nccl:") or ns < 0:
            continue
        e = out.setdefault(op, {"nccl_s": 0.0, "nccl_collectives": {}})
        e["nccl_collectives"][name] = {"count": int(count), "total_s": ns / 1e9}
        e["nccl_s"] += ns / 1e9
    return out


def _add_collectives(entries: list[dict[str, Any]], per_pid: dict[int, dict[str, Any]]) -> None:
    """Collective figures onto process entries: measured in every window, the same raw and corrected."""
    for entry in entries:
        got = per_pid.get(entry["pid"])
        if got is None:
            continue
        entry["nccl_source"] = "collectives"
        for op, e in entry["operations"].items():
            e.pop("nccl_recorded_s", None)
            e["nccl_s"] = got.get(op, {}).get("nccl_s", 0.0)
            if op in got:
                e["nccl_collectives"] = got[op]["nccl_collectives"]
        entry["nccl_s"] = sum(v["nccl_s"] for v in got.values())


def _add(
    entries: list[dict[str, Any]],
    per_pid: dict[int, tuple[dict[str, Any], bool]],
    recorded: dict[int, dict[str, Any]] | None = None,
) -> None:
    """NCCL figures onto process entries. ``recorded``: pid -> the raw process entry, for corrected
    entries: each operation's NCCL time is scaled to the run as its GPU kernel time was (GPU work is
    traced in full windows only; rlscope.analysis.breakdown scales it by the operation's instances),
    and the time recorded is kept beside it as ``nccl_recorded_s``."""
    for entry in entries:
        nccl, has_kernels = per_pid.get(entry["pid"], ({}, False))
        if not has_kernels:
            continue
        if nccl:
            entry["nccl_source"] = "kernels"
        raw_ops = (recorded or {}).get(entry["pid"], {}).get("operations", {})
        total = 0.0
        for op, e in entry["operations"].items():
            got = nccl.get(op, {}).get("nccl_s", 0.0)
            scale = 1.0
            if recorded is not None and got:
                was = raw_ops.get(op, {}).get("gpu_categories", {}).get("gpu_kernel", 0.0)
                now = e.get("gpu_categories", {}).get("gpu_kernel", 0.0)
                scale = now / was if was > 0 and now > 0 else 1.0
                e["nccl_recorded_s"] = got
            e["nccl_s"] = got * scale
            total += e["nccl_s"]
            if op in nccl:
                e["nccl_kernels"] = nccl[op]["nccl_kernels"]
        # NCCL kernels of no listed operation ([unannotated]) count for the process as recorded
        entry["nccl_s"] = total + sum(v["nccl_s"] for op, v in nccl.items() if op not in entry["operations"])


def _roles(figures: dict[str, Any]) -> None:
    """Per role with several workers and NCCL time: the spread of each operation's NCCL time."""
    procs = {p["pid"]: p for p in figures.get("processes") or []}
    for role in (figures.get("roles") or {}).values():
        members = [procs[pid] for pid in role.get("pids", []) if pid in procs]
        if len(members) < 2 or not all("nccl_s" in p for p in members):
            continue
        ops = dict.fromkeys(op for p in members for op, e in p["operations"].items() if e.get("nccl_s"))
        role["nccl"] = {
            op: _spread([p["operations"].get(op, {}).get("nccl_s", 0.0) for p in members]) for op in ops
        }


def add_to_summary(
    summary: dict[str, Any],
    kernel_rows: list[tuple[int, KernelRows]],
    collectives: list[tuple[int, Collectives | None]] | None = None,
) -> None:
    """Add the NCCL figures to the summary's process entries (corrected and raw) and roles, in place.

    ``kernel_rows``: (pid, :func:`rlscope.analysis.kernels.process_kernel_rows`) of each process;
    ``collectives``: (pid, :func:`collective_rows`) of each process, where it recorded them.
    """
    per_pid: dict[int, tuple[dict[str, Any], bool]] = {}
    for pid, acc in kernel_rows:
        rows = [(op, cat, name, int(c), ns) for (op, cat, name), (c, ns) in acc.items()]
        has_kernels = any(cat == "gpu_kernel" for _, cat, _, _, _ in rows)
        per_pid[pid] = (nccl_by_operation(rows), has_kernels)
    measured: dict[int, dict[str, Any]] = {}
    for pid, got in collectives or []:
        if got is None:
            continue
        ops = _by_operation(got[0])
        if ops:
            measured[pid] = ops
        if got[1]:
            summary.setdefault("warnings", []).append(
                f"process {pid}: {got[1]} collectives missing from torch's flight recorder (overwritten"
                " before rlscope read them); its NCCL time leaves them out"
            )
    if not measured and not any(has for _, has in per_pid.values()):
        return
    raw = summary.get("raw")
    if raw is not None:  # corrected figures on top: scaled to the run, the raw ones as recorded
        _add(raw.get("processes") or [], per_pid)
        _add_collectives(raw.get("processes") or [], measured)
        _roles(raw)
        recorded = {p["pid"]: p for p in raw.get("processes") or []}
        _add(summary.get("processes") or [], per_pid, recorded)
    else:
        _add(summary.get("processes") or [], per_pid)
    _add_collectives(summary.get("processes") or [], measured)
    _roles(summary)
