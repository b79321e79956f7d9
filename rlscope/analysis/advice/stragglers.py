"""Workers that lag: vector-env or pool workers, Ray actors, DDP ranks busier than their role's median.

Workers of a role usually meet at a barrier (a lock-step vector env's step, a gradient all-reduce, a
``ray.get`` of all rollouts), so the others wait for the slowest: the straggler's time above the median
is lost by every worker that waits. The spread comes from :mod:`rlscope.analysis.roles`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlscope.analysis.advice.base import Facts, Finding, clears, secs
from rlscope.analysis.roles import DDP_RANK, ENV_WORKER, FORKSERVER, LAUNCHER_ROLES, STRAGGLER_RATIO

__all__ = ["WORKER_ROLES", "role_stragglers", "worker_stragglers"]

WORKER_ROLES = frozenset({"child", ENV_WORKER})
"""Roles of processes started by the job itself (multiprocessing Pool workers, SubprocVecEnv and
AsyncVectorEnv workers): the vector-env / worker rule; every other non-launcher role (Ray actors and
tasks, DDP ranks) gets the role rule."""


def _lagging_operation(role: Mapping[str, Any]) -> tuple[str, float, float]:
    """(operation, max, median) of the operation whose slowest worker is furthest above the median."""
    ops = role.get("operations") or {}
    best = max(ops.items(), key=lambda kv: kv[1].get("max_s", 0.0) - kv[1].get("median_s", 0.0), default=None)
    if best is None:
        return "", 0.0, 0.0
    return best[0], float(best[1].get("max_s", 0.0)), float(best[1].get("median_s", 0.0))


def _findings(facts: Facts, rule: str, wanted: Any) -> list[Finding]:
    procs = {p["pid"]: p for p in facts.summary.get("processes") or []}
    out = []
    for role_name, role in (facts.summary.get("roles") or {}).items():
        stragglers = role.get("stragglers") or []  # busiest first, from STRAGGLER_RATIO on (roles.py)
        if role_name in LAUNCHER_ROLES or not wanted(role_name) or not stragglers:
            continue
        if not clears(float(stragglers[0]["ratio"]), STRAGGLER_RATIO, ratio=True):
            continue  # the worst is within the margin of the line: a worker like the others, give or take
        median = float(role["spread"]["median_s"])
        worst = stragglers[0]
        p = procs.get(worst["pid"], {})
        where = f"{p.get('label') or role_name} pid {worst['pid']}"
        where += f" on {p['node']}" if p.get("node") else ""
        op, op_max, op_median = _lagging_operation(role)
        evidence = (
            f"{role_name}: {len(stragglers)} of {role['workers']} workers busy over {STRAGGLER_RATIO:g}x the"
            f" median {secs(median)}; {where} {secs(worst['busy_s'])} ({worst['ratio']:.2f}x)"
        )
        if op:
            evidence += f"; the widest gap in {op}: slowest {secs(op_max)}, median {secs(op_median)}"
        if rule == "worker_stragglers":
            change = (
                "balance the envs across workers (long resets or episodes on one worker, a worker sharing"
                " its core with another): a lock-step vector env waits for its slowest worker every step,"
                " an asynchronous one that returns the envs that are ready (EnvPool's async mode) does not"
            )
        elif role_name == DDP_RANK:
            change = (
                f"every all-reduce waits for {where}: look at its input pipeline and host (data loading,"
                " a GPU or cores shared with another job), and give each rank the same batch size"
            )
        else:
            change = (
                f"whatever waits on all {role_name} workers waits for {where}: check its node's load, give"
                " it fewer envs, or collect asynchronously (ray.wait on the rollouts that are ready)"
            )
        stake = float(worst["busy_s"]) - median
        out.append(Finding(rule, op, evidence, stake, change))
    return out


def worker_stragglers(facts: Facts) -> list[Finding]:
    """Per worker role (vector-env and pool workers) with a straggler.

    Time at stake: the slowest worker's busy time above the role's median, which the others wait out.
    """
    return _findings(facts, "worker_stragglers", lambda r: r in WORKER_ROLES)


def role_stragglers(facts: Facts) -> list[Finding]:
    """Per Ray or DDP role with a straggler.

    Time at stake: the slowest worker's busy time above the role's median, which the others wait out.
    """
    return _findings(facts, "role_stragglers", lambda r: r not in WORKER_ROLES and r != FORKSERVER)
