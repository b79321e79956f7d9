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

    Time at stake: what replaying the operation's GPU work as CUDA graphs removes. Each eager op costs
    the CPU its dispatch (the torch op's own time, ``backend``) and its launch calls (``cuda_api``,
    the launching calls' share); a replay is one call for all of them, and the operation then waits
    for its kernels instead, so their time is kept. The Python around the ops is not counted (a graph
    replay of a compiled step removes some of it, and adds a replay's own cost per call). Nor is the
    warm-up of the first call (modules loading at a kernel's first launch, a library's handles made):
    every run pays it once, replayed or not (:meth:`Facts.steady_cpu_s`).
    ``benchmarks/compiled_gpu_check.py`` checks the number against ``mode="reduce-overhead"``.
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
        api = facts.cpu_s(op, "cuda_api")
        steady_api = facts.steady_cpu_s(op, "cuda_api") / api if api > 0 else 1.0
        launch_run = facts.api_run_s(name, op, c.launch_s) * steady_api
        dispatch_run = facts.steady_cpu_s(op, "backend")
        kernel_run = facts.gpu_s(op, "gpu_kernel") or c.kernel_s
        per_call = c.kernels / c.instances if c.instances else 0.0
        evidence = (
            f"{name}: {count(c.short_kernels)} of its {count(c.kernels)} traced kernels"
            f" ({pct(c.short_kernels, c.kernels)}) ran under {SHORT_KERNEL_NS / 1000:g} µs"
            f" (mean {secs(c.kernel_s / c.kernels)}), {count(per_call)} launches a call; launching took"
            f" {secs(c.launch_s)} of CPU time against {secs(c.kernel_s)} of kernel time"
            f" ({c.launch_s / c.kernel_s:.1f}x)"
        )
        if dispatch_run > 0:
            evidence += f"; its torch ops took {secs(dispatch_run)} of CPU time besides, dispatching them"
        change = _change(facts, name)
        stake = max(dispatch_run + launch_run - kernel_run, 0.0)
        out.append(Finding("launch_bound", name, evidence, stake, change))
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
            "replay the step as CUDA graphs: torch.compile(..., mode='reduce-overhead') or a capture"
            " (torch.cuda.graph); the default mode fuses kernels but keeps a launch and its dispatch each"
        )
    return join([fuse, more_work])
