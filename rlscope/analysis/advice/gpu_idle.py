"""The GPU idles under a small policy: acting costs more in Python and CUDA API calls than the GPU works.

The question RL users ask first (stable-baselines3 #849, #2012: PPO with an MLP policy on a GPU):
an MLP policy's forward pass is a few tiny kernels, and each step pays a Python call and a launch per
kernel, so the GPU waits on the CPU and the CPU pays for talking to the GPU.
"""

from __future__ import annotations

from rlscope.analysis.advice.base import Facts, Finding, count, pct, secs, words_of

__all__ = ["CPU_DRIVE_SHARE", "GPU_BUSY_LOW", "KERNEL_SHARE_SMALL", "POLICY_WORDS", "gpu_idle_small_policy"]

GPU_BUSY_LOW = 0.30
"""GPU-bound share of the run (time with any kernel or copy running) below which the GPU mostly waits:
a GPU worth its place in RL training is busy well over half of the run."""

KERNEL_SHARE_SMALL = 0.25
"""The acting operation's kernel time below this share of its own time: the policy is too small to
occupy the GPU (its kernels are a sliver of each call)."""

CPU_DRIVE_SHARE = 0.50
"""Python and CUDA API time above this share of the acting operation's CPU time: the call is the cost
of driving the GPU, not of computing the policy."""

POLICY_WORDS = frozenset({"inference", "policy", "predict", "act", "action", "actor"})
"""Words of an operation name that mark it as acting with the policy (rlscope's automatic ``inference``,
user scopes such as ``select_action`` or ``policy_forward``)."""


def gpu_idle_small_policy(facts: Facts) -> list[Finding]:
    """Per acting operation with GPU work, when the GPU idles and the call is Python and CUDA API time.

    Time at stake: the operation's CUDA API time, which acting on the CPU removes (its kernels' own time
    moves to the CPU, and for a small policy that is the sliver the evidence shows).
    """
    gpu = facts.summary.get("gpu") or {}
    wall = facts.wall_s
    busy = gpu.get("gpu_bound_fraction")
    if busy is None and wall > 0:
        busy = float(facts.summary.get("gpu_bound_s", 0.0)) / wall
    if not busy and not facts.summary.get("gpu_categories"):
        return []  # no GPU data: nothing to say about the GPU
    if busy is None or busy >= GPU_BUSY_LOW:
        return []
    out = []
    for name, op in facts.operations():
        if not words_of(name) & POLICY_WORDS:
            continue
        kernel_s = facts.gpu_s(op, "gpu_kernel")
        total = float(op.get("total_s", 0.0))
        excl = float(op.get("exclusive_s", 0.0))
        py, api = facts.cpu_s(op, "python"), facts.cpu_s(op, "cuda_api")
        if kernel_s <= 0 or total <= 0 or excl <= 0 or api <= 0:
            continue
        if kernel_s >= KERNEL_SHARE_SMALL * total or (py + api) < CPU_DRIVE_SHARE * excl:
            continue
        calls = int(op.get("calls", 0))
        evidence = (
            f"GPU busy {pct(busy, 1.0)} of the run; {name} took {secs(total)} over {count(calls)} calls"
            f" ({secs(total / max(calls, 1))} each), {pct(py + api, excl)} of its CPU time in Python"
            f" ({secs(py)}) and CUDA API calls ({secs(api)}), its kernels {secs(kernel_s)}"
            f" ({pct(kernel_s, total)} of its time)"
        )
        change = (
            "act on the CPU: keep a CPU copy of the policy for rollouts (SB3: device='cpu'), or step more"
            " envs per forward pass (n_envs / num_envs) so each launch carries more work"
        )
        out.append(Finding("gpu_idle_small_policy", name, evidence, api, change))
    return out
