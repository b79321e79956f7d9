"""The GPU idles under a small policy: acting (and learning) costs more in Python and CUDA API calls than
the GPU works.

The question RL users ask first (stable-baselines3 #849, #2012: PPO with an MLP policy on a GPU, about
2% GPU busy): an MLP policy's forward pass is a few tiny kernels, and each step pays a Python call and a
launch per kernel, so the GPU waits on the CPU and the CPU pays for talking to the GPU. The update of
such a policy is the same tiny kernels, launched by the backward pass and the optimizer; when it is too,
the whole algorithm belongs on the CPU (stable-baselines3 warns as much for PPO with an MlpPolicy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs, words_of
from rlscope.analysis.advice.changes import CPU_ACTING, CPU_DEVICE, MORE_ENVS, join

__all__ = [
    "CPU_DRIVE_SHARE",
    "GPU_BUSY_LOW",
    "KERNEL_SHARE_SMALL",
    "POLICY_WORDS",
    "UPDATE_WORDS",
    "gpu_idle_small_policy",
]

GPU_BUSY_LOW = 0.30
"""GPU-bound share of the run (time with any kernel or copy running) below which the GPU mostly waits:
a GPU worth its place in RL training is busy well over half of the run."""

KERNEL_SHARE_SMALL = 0.25
"""The acting operation's kernel time below this share of its own time: the policy is too small to
occupy the GPU (its kernels are a sliver of each call)."""

CPU_DRIVE_SHARE = 0.50
"""Python, torch-op dispatch and CUDA API time above this share of the operation's CPU time: the call is
the cost of driving the GPU, not of computing the policy (or of stepping a simulator)."""

POLICY_WORDS = frozenset({"inference", "policy", "predict", "act", "action", "actor"})
"""Words of an operation name that mark it as acting with the policy (rlscope's automatic ``inference``,
user scopes such as ``select_action`` or ``policy_forward``)."""

UPDATE_WORDS = frozenset({"backprop", "update", "train", "learn", "learner", "optimize", "loss", "sgd"})
"""Words of an operation name that mark the learner update (rlscope's automatic ``backprop``, the
stable-baselines3 adapter's ``update``, user scopes such as ``train_step``)."""


def _small_on_gpu(facts: Facts, op: Mapping[str, Any]) -> bool:
    """Whether the operation's kernels are a sliver of its time and its CPU time drives them."""
    kernel_s = facts.gpu_s(op, "gpu_kernel")
    total = float(op.get("total_s", 0.0))
    excl = float(op.get("exclusive_s", 0.0))
    drive = sum(facts.cpu_s(op, c) for c in ("python", "cuda_api", "backend"))
    if kernel_s <= 0 or total <= 0 or excl <= 0 or facts.cpu_s(op, "cuda_api") <= 0:
        return False
    return clears(kernel_s / total, KERNEL_SHARE_SMALL, above=False) and clears(drive / excl, CPU_DRIVE_SHARE)


def _clause(facts: Facts, name: str, op: Mapping[str, Any]) -> str:
    total = float(op.get("total_s", 0.0))
    excl = float(op.get("exclusive_s", 0.0))
    kernel_s = facts.gpu_s(op, "gpu_kernel")
    py, api, backend = (facts.cpu_s(op, c) for c in ("python", "cuda_api", "backend"))
    calls = int(op.get("calls", 0))
    torch_ops = f", torch ops ({secs(backend)})" if backend > 0 else ""
    return (
        f"{name} took {secs(total)} over {count(calls)} calls ({secs(total / max(calls, 1))} each),"
        f" {pct(py + api + backend, excl)} of its CPU time in Python ({secs(py)}){torch_ops} and CUDA API"
        f" calls ({secs(api)}), its kernels {secs(kernel_s)} ({pct(kernel_s, total)} of its time)"
    )


def gpu_idle_small_policy(facts: Facts) -> list[Finding]:
    """When the GPU idles under acting or learning operations made of tiny kernels that the CPU drives.

    One finding for the run: acting and learning on the CPU is one change (stable-baselines3: one
    ``device``), so it speaks for every such operation (``covers``) and supersedes the launch and Python
    rules on them. Time at stake: those operations' CUDA API time, which running them on the CPU
    removes (their kernels' own time moves to the CPU, and for a small network that is the sliver the
    evidence shows).
    """
    gpu = facts.summary.get("gpu") or {}
    wall = facts.wall_s
    busy = gpu.get("gpu_bound_fraction")
    if busy is None and wall > 0:
        busy = float(facts.summary.get("gpu_bound_s", 0.0)) / wall
    if not busy and not facts.summary.get("gpu_categories"):
        return []  # no GPU data: nothing to say about the GPU
    if busy is None or not clears(float(busy), GPU_BUSY_LOW, above=False):
        return []
    words = POLICY_WORDS | UPDATE_WORDS
    small = [(n, op) for n, op in facts.operations() if words_of(n) & words and _small_on_gpu(facts, op)]
    small.sort(key=lambda kv: -facts.cpu_s(kv[1], "cuda_api"))
    if not small:
        return []
    small.sort(key=lambda kv: not words_of(kv[0]) & POLICY_WORDS)  # acting first, then learning
    acting = [n for n, _ in small if words_of(n) & POLICY_WORDS]
    learning = [n for n, _ in small if not words_of(n) & POLICY_WORDS]
    lib = facts.library
    if learning:
        change = f"act and learn on the CPU: {CPU_DEVICE[lib]}"
    else:
        change = join([CPU_ACTING[lib], f"or {MORE_ENVS[lib]}" if CPU_ACTING[lib] else MORE_ENVS[lib]])
    evidence = f"GPU busy {pct(busy, 1.0)} of the run; " + "; ".join(_clause(facts, n, op) for n, op in small)
    stake = sum(facts.cpu_s(op, "cuda_api") for _, op in small)
    first = (acting or learning)[0]
    covers = tuple(n for n, _ in small if n != first)
    return [Finding("gpu_idle_small_policy", first, evidence, stake, change, covers)]
