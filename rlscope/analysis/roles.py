"""Process roles, their spread across workers, the workers that lag, and how well clocks were aligned.

A process's role is what it does in the job: the Ray actor class or task function
(``ray.role`` in its metadata, rlscope/ray.py), ``driver`` for a Ray driver, ``ddp rank`` for a
torch.distributed rank, ``forkserver`` for multiprocessing's forkserver, else ``main`` for the process
that started the others, ``env worker`` for a child that stepped environments (a vector env's worker)
and ``child`` for the rest. Per role the summary gives the operation
breakdown summed over its workers, the spread of each worker's busy time (time inside any operation,
its waits left out: median, p95, max), the spread of its waits for the next command or task
(``waiting``, where any were recorded: rlscope/runtime/waits.py) and the *stragglers*, workers busy
more than ``STRAGGLER_RATIO`` times the role's median. Built from the summary's per-process entries
only.

Roles are listed launcher first (``driver``, ``torchrun agent``, ``main``: the process that started
the others), then by name; the report's timeline
(:mod:`rlscope.analysis.report`) groups its rows in that order and names each process by
:func:`worker_label` (role or rank, actor name, node, pid).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlscope.categories import CPU_CATEGORIES, WAITING
from rlscope.trace.header import command_line, is_forkserver_command
from rlscope.trace.reader import Trace, parent_pid

ENV_WORKER = "env worker"  # a child that stepped environments (SubprocVecEnv, AsyncVectorEnv workers)
FORKSERVER = "forkserver"  # multiprocessing's forkserver: it forks the workers, nothing else
SIMULATION = "simulation"  # the operation an env worker's steps are (automatic or the user's)
STRAGGLER_RATIO = 1.25  # a worker busier than this times its role's median lags
DDP_RANK = "ddp rank"  # a torch.distributed rank (WORLD_SIZE in its environment), labelled "rank N"
TORCHRUN_AGENT = "torchrun agent"  # the process that started DDP ranks
LAUNCHER_ROLES = ("driver", TORCHRUN_AGENT, "main")  # listed first: they started the others
_WAITING = CPU_CATEGORIES[WAITING]  # blocked for the next command: not busy

__all__ = [
    "DDP_RANK",
    "ENV_WORKER",
    "FORKSERVER",
    "LAUNCHER_ROLES",
    "STRAGGLER_RATIO",
    "TORCHRUN_AGENT",
    "clock_alignment",
    "headline",
    "headline_wall_s",
    "label_processes",
    "over_processes",
    "process_role",
    "process_roles",
    "refined_role",
    "role_order",
    "roles_of",
    "worker_label",
]


def process_role(meta: dict[str, str], pids: set[int]) -> str:
    if meta.get("ray.role"):
        return meta["ray.role"]
    if meta.get("world_size"):  # a torch.distributed rank (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE)
        return DDP_RANK
    if _is_forkserver(meta):
        return FORKSERVER
    return "child" if parent_pid(meta) in pids else "main"


def process_roles(metas: list[dict[str, str]], pids: list[int]) -> list[str]:
    """Each process's role from its metadata (:func:`process_role`; ``pids[i]`` is ``metas[i]``'s
    process). The forkserver's workers are forked from it and so carry its command line: one whose
    parent is a forkserver is a child."""
    known = set(pids)
    roles = [process_role(m, known) for m in metas]
    servers = {pid for pid, r in zip(pids, roles, strict=True) if r == FORKSERVER}
    return [
        "child" if r == FORKSERVER and parent_pid(m) in servers else r
        for m, r in zip(metas, roles, strict=True)
    ]


def _is_forkserver(meta: dict[str, str]) -> bool:
    """multiprocessing's forkserver, by its recorded command line: it forks the workers of SubprocVecEnv
    and Pool under that start method and does nothing else."""
    return is_forkserver_command(command_line(meta))


def _clock(meta: dict[str, str]) -> dict[str, Any] | None:
    if "clock.offset_ns" not in meta:
        return None
    ns = {k: float(meta.get(f"clock.{k}_ns", 0) or 0) for k in ("offset", "uncertainty", "drift")}
    end_unc = float(meta.get("clock.uncertainty_end_ns", 0) or 0)
    return {
        "offset_s": ns["offset"] / 1e9,
        "uncertainty_s": max(ns["uncertainty"], end_unc) / 1e9,
        "drift_s": ns["drift"] / 1e9,
    }


def _spread(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {
        "median_s": float(np.median(a)),
        "p95_s": float(np.percentile(a, 95)),
        "max_s": float(a.max()),
        "min_s": float(a.min()),
    }


def _busy(entry: dict[str, Any]) -> float:
    """A process's time inside any operation (exclusive times add up to it), less any wait for its next
    command an operation held (a program's own ``rlscope.waiting()`` inside a scope): waits are not work."""
    ops = entry["operations"].values()
    return float(sum(e["exclusive_s"] - (e.get("categories") or {}).get(_WAITING, 0.0) for e in ops))


def role_order(entries: list[dict[str, Any]]) -> list[str]:
    """The roles of labelled process entries: launcher roles first, then by name (stable across runs)."""
    seen = {p["role"] for p in entries}
    rest = sorted(seen - set(LAUNCHER_ROLES), key=lambda r: (r.lower(), r))
    return [r for r in LAUNCHER_ROLES if r in seen] + rest


def worker_label(entry: dict[str, Any]) -> str:
    """One process as reports name it: "RolloutWorker · 1a2b3c4d · pid 812", "rank 0 · host · pid 9"."""
    who = str(entry.get("label") or entry.get("role") or "process")
    if entry.get("actor_name"):
        who += f" {entry['actor_name']}"
    node = entry.get("node") or entry.get("host")
    return " · ".join([who, *([str(node)] if node else []), f"pid {entry['pid']}"])


def _roles(processes: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {r: [] for r in role_order(processes)}
    for p in processes:
        groups[p["role"]].append(p)
    out: dict[str, Any] = {}
    for role, members in groups.items():
        busy = {p["pid"]: _busy(p) for p in members}
        spread = _spread(list(busy.values()))
        med = spread["median_s"]
        stragglers = []
        if len(members) > 1 and med > 0:
            stragglers = [
                {"pid": pid, "busy_s": s, "ratio": s / med}
                for pid, s in sorted(busy.items(), key=lambda kv: -kv[1])
                if s > STRAGGLER_RATIO * med
            ]
        ops: dict[str, dict[str, Any]] = {}
        for name in dict.fromkeys(n for p in members for n in p["operations"]):
            per = [p["operations"].get(name, {}).get("total_s", 0.0) for p in members]
            excl = [p["operations"].get(name, {}).get("exclusive_s", 0.0) for p in members]
            calls = [p["operations"].get(name, {}).get("calls", 0) for p in members]
            ops[name] = {"total_s": sum(per), "exclusive_s": sum(excl), "calls": sum(calls), **_spread(per)}
        out[role] = {
            "workers": len(members),
            "pids": [p["pid"] for p in members],
            "busy_s": {str(pid): s for pid, s in busy.items()},
            "spread": spread,
            "stragglers": stragglers,
            "operations": dict(sorted(ops.items(), key=lambda kv: -kv[1]["total_s"])),
        }
        waits = [float(p.get("waiting_s", 0.0)) for p in members]
        if any(waits):  # the workers' waits for their next command, shaped like an operation's row
            out[role]["waiting"] = {"total_s": sum(waits), **_spread(waits)}
    return out


def _label(meta: dict[str, str], role: str) -> dict[str, Any]:
    label: dict[str, Any] = {
        "role": role,
        "node": meta.get("ray.node_id", "")[:8] or meta.get("host", ""),
    }
    if meta.get("ray.actor_name"):
        label["actor_name"] = meta["ray.actor_name"]
    if meta.get("world_size"):
        label["label"] = f"rank {meta.get('rank', '?')}"
    clock = _clock(meta)
    if clock is not None:
        label["clock"] = clock
    threads = _threads(meta)
    if threads:
        label["threads"] = threads
    return label


def _threads(meta: dict[str, str]) -> dict[str, int]:
    """torch's intra-op threads (at the session's end, else its start) and the cores the process could
    use, as the trace recorded them (rlscope/runtime/metadata.py): the thread advice's facts."""
    out = {}
    for key, field in (
        ("torch.intra_op_threads.end", "torch_intra_op"),
        ("torch.intra_op_threads.start", "torch_intra_op"),
        ("cpu.usable", "usable_cores"),
    ):
        try:
            value = int(meta.get(key, "") or 0)
        except ValueError:
            continue
        if value > 0:
            out.setdefault(field, value)
    return out


def label_processes(trace: Trace, entries: list[dict[str, Any]]) -> None:
    """Add each process's role, node (and actor name, clock offset) to its summary entry."""
    roles = process_roles([p.metadata for p in trace.processes], [p.pid for p in trace.processes])
    for entry, proc, role in zip(entries, trace.processes, roles, strict=True):
        entry.update(_label(proc.metadata, role))
    # the launcher of DDP ranks (torchrun's agent), when it is no rank itself
    launchers = {parent_pid(p.metadata) for p in trace.processes if p.metadata.get("world_size")}
    for entry in entries:
        role = refined_role(
            entry["role"], entry["pid"] in launchers, SIMULATION in (entry.get("operations") or {})
        )
        if role == TORCHRUN_AGENT:
            entry["label"] = role
        entry["role"] = role


def refined_role(role: str, launches_ranks: bool, stepped_envs: bool) -> str:
    """A process's role once what it did is known (the summary's and the live view's): the parent of
    DDP ranks that is no rank itself is torchrun's agent; a child that stepped environments (ran
    ``simulation``) is a vector env's worker."""
    if launches_ranks and role in ("main", "child"):
        return TORCHRUN_AGENT
    if stepped_envs and role == "child":
        return ENV_WORKER
    return role


def headline(entries: list[dict[str, Any]]) -> tuple[list[int], str]:
    """Which labelled processes the run's headline figures are, and why (indices into ``entries``).

    The run's critical process: the one the run's wall time waits on. A torch.distributed job: rank 0
    (the ranks do the same work; each is in the role table). Else the launcher (``driver``, ``main``)
    when it ran any operation: the learner of a vector-env or Ray job, whose env workers (their steps,
    and their idle waits for the next) are in their own role's table. Else (a launcher that only
    waits) the busiest process. One process: itself.
    """
    if len(entries) <= 1:
        return list(range(len(entries))), "the only process"
    ranks = [i for i, p in enumerate(entries) if p["role"] == DDP_RANK]
    if ranks:
        first = min(ranks, key=lambda i: (_rank(entries[i]), entries[i]["pid"]))
        return [first], f"rank {_rank(entries[first])} of {len(ranks)} ranks (each rank in the role table)"
    for role in LAUNCHER_ROLES:
        busy = [i for i, p in enumerate(entries) if p["role"] == role and _busy(p) > 0]
        if busy:
            top = max(busy, key=lambda i: _busy(entries[i]))
            return [top], f"the {role} process (the others in their roles' tables)"
    top = max(range(len(entries)), key=lambda i: _busy(entries[i]))
    return [top], f"the busiest process, a {entries[top]['role']} (the launcher ran no operation)"


def over_processes(figures: dict[str, Any]) -> dict[str, Any]:
    """Every process's own figures summed (a summary, or its ``raw``/``corrected``): per operation its
    ``calls``, ``exclusive_s`` and ``total_s``, ``unannotated_s`` and ``waiting_s``; the CPU time of the
    whole job, where the headline figures are its critical process's (:func:`headline`)."""
    ops: dict[str, dict[str, float]] = {}
    unannotated = waiting = 0.0
    for p in figures.get("processes") or []:
        unannotated += float(p.get("unannotated_s", 0.0))
        waiting += float(p.get("waiting_s", 0.0))
        for name, o in (p.get("operations") or {}).items():
            acc = ops.setdefault(name, {"calls": 0, "exclusive_s": 0.0, "total_s": 0.0})
            acc["calls"] += int(o.get("calls", 0))
            acc["exclusive_s"] += float(o.get("exclusive_s", 0.0))
            acc["total_s"] += float(o.get("total_s", 0.0))
    return {"operations": ops, "unannotated_s": unannotated, "waiting_s": waiting}


def headline_wall_s(summary: dict[str, Any]) -> float:
    """What the headline figures add up to: the run's wall with one headline process, the headline
    processes' walls summed with several (a summary without ``headline``: every process's)."""
    procs = summary.get("processes") or []
    pids = set((summary.get("headline") or {}).get("pids") or [p.get("pid") for p in procs])
    head = [p for p in procs if p.get("pid") in pids]
    if len(head) > 1:
        return float(sum(float(p.get("wall_s", 0.0)) for p in head))
    return float(summary.get("wall_s", 0.0))


def _rank(entry: dict[str, Any]) -> int:
    label = str(entry.get("label") or "")
    try:
        return int(label.removeprefix("rank ")) if label.startswith("rank ") else 1 << 30
    except ValueError:
        return 1 << 30


def roles_of(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``roles`` section from labelled process entries."""
    return _roles(entries)


def clock_alignment(trace: Trace) -> dict[str, Any]:
    """How processes were put on one timeline, and how uncertain that is (the worst process's)."""
    clocks = [c for c in (_clock(p.metadata) for p in trace.processes) if c is not None]
    nodes = {p.metadata.get("ray.node_id") or p.metadata.get("host", "") for p in trace.processes}
    return {
        "method": "ray round trips" if clocks else "unix clock anchors",
        "processes_measured": len(clocks),
        "nodes": len(nodes),
        "uncertainty_s": max((c["uncertainty_s"] for c in clocks), default=0.0),
        "max_abs_offset_s": max((abs(c["offset_s"]) for c in clocks), default=0.0),
        "max_abs_drift_s": max((abs(c["drift_s"]) for c in clocks), default=0.0),
    }
