"""Launch-bound operations: many tiny kernels, and launching them costs the CPU more than they run.

pytorch/rl#4216 is the pattern: ~7,500 CUDA launches per update against 14.7 ms of kernels. Each eager
PyTorch op is at least one launch of a few µs of CPU time; when the kernels run for less than that, the
GPU waits for the CPU and only fewer, larger launches help.
"""

from __future__ import annotations

from rlscope.analysis.advice import program
from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs
from rlscope.analysis.advice.changes import CPU_DEVICE, join
from rlscope.analysis.gpu_calls import SHORT_KERNEL_NS

__all__ = ["LAUNCH_TO_KERNEL_RATIO", "MIN_KERNELS", "SHORT_KERNEL_SHARE", "launch_bound"]

MIN_KERNELS = 100
"""Traced kernels an operation needs before its kernel lengths say anything (a handful of launches is
not a launch-bound loop)."""

SHORT_KERNEL_SHARE = 0.50
"""Share of the operation's kernels shorter than ``SHORT_KERNEL_NS`` above which it is made of tiny
kernels: most of its launches cost the CPU as much as the GPU work they start (cleared by the share
margin, :data:`~rlscope.analysis.advice.base.SHARE_MARGIN`)."""

LAUNCH_TO_KERNEL_RATIO = 2.0
"""Launch calls' CPU time at least this many times the kernels' GPU time: the GPU cannot be the
bottleneck, since the CPU needs twice as long to hand it the work (cleared by the ratio margin,
:data:`~rlscope.analysis.advice.base.RATIO_MARGIN`: 2.2x)."""


def launch_bound(facts: Facts) -> list[Finding]:
    """Per operation whose traced kernels are mostly short and whose launches cost far more than they run.

    Time at stake: the operation's launch time over the run minus its kernel time: what fusing the
    launches (one graph replay, a few compiled kernels) removes at least, the kernels' own time kept.
    """
    out = []
    for name, op in facts.operations():
        c = facts.calls(name)
        if c is None or c.kernels < MIN_KERNELS or c.kernel_s <= 0 or c.launch_s <= 0:
            continue
        if not clears(c.short_kernels / c.kernels, SHORT_KERNEL_SHARE):
            continue
        if not clears(c.launch_s / c.kernel_s, LAUNCH_TO_KERNEL_RATIO, ratio=True):
            continue
        launch_run = facts.api_run_s(name, op, c.launch_s)
        kernel_run = facts.gpu_s(op, "gpu_kernel") or c.kernel_s
        per_call = c.kernels / c.instances if c.instances else 0.0
        evidence = (
            f"{name}: {count(c.short_kernels)} of its {count(c.kernels)} traced kernels"
            f" ({pct(c.short_kernels, c.kernels)}) ran under {SHORT_KERNEL_NS / 1000:g} µs"
            f" (mean {secs(c.kernel_s / c.kernels)}), {count(per_call)} launches a call; launching took"
            f" {secs(c.launch_s)} of CPU time against {secs(c.kernel_s)} of kernel time"
            f" ({c.launch_s / c.kernel_s:.1f}x)"
        )
        change = _change(facts, name)
        out.append(Finding("launch_bound", name, evidence, max(launch_run - kernel_run, 0.0), change))
    return out


def _change(facts: Facts, name: str) -> str:
    """Fewer launches in the library's words: stable-baselines3 has no switch to compile or graph its
    steps, so a small network there runs on the CPU; compiled code already is not told to compile."""
    more_work = "hyperparameters: give each launch more work (larger batches, more envs per call)"
    if facts.library == program.SB3:
        return join([f"a network this small runs faster on the CPU: {CPU_DEVICE[program.SB3]}", more_work])
    if program.compiled(facts.summary, name):
        fuse = (
            "replay the compiled step as CUDA graphs (torch.compile(..., mode='reduce-overhead')) or"
            " capture it in one (torch.cuda.graph)"
        )
    else:
        fuse = (
            "fuse the launches: torch.compile the module or step (mode='reduce-overhead' also replays CUDA"
            " graphs), or capture the step in a CUDA graph (torch.cuda.graph)"
        )
    return join([fuse, more_work])
