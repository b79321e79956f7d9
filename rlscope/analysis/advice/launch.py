"""Launch-bound operations: many tiny kernels, and launching them costs the CPU more than they run.

pytorch/rl#4216 is the pattern: ~7,500 CUDA launches per update against 14.7 ms of kernels. Each eager
PyTorch op is at least one launch of a few µs of CPU time; when the kernels run for less than that, the
GPU waits for the CPU and only fewer, larger launches help.
"""

from __future__ import annotations

from rlscope.analysis.advice import program
from rlscope.analysis.advice.base import Facts, Finding, clears, count, pct, secs, words_of
from rlscope.analysis.advice.changes import CPU_DEVICE, join
from rlscope.analysis.advice.gpu_idle import UPDATE_WORDS
from rlscope.analysis.gpu_calls import SHORT_KERNEL_NS
from rlscope.categories import CATEGORY_NAMES, COMPILE

__all__ = [
    "BACKWARD_WORDS",
    "LAUNCH_TO_KERNEL_RATIO",
    "MIN_KERNELS",
    "REPLAY_REFERENCE_LOOPS",
    "SHORT_KERNEL_SHARE",
    "launch_bound",
]

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


REPLAY_REFERENCE_LOOPS = {"step": 725.0, "training step": 7195.0}
"""What one call of a step compiled with ``mode="reduce-overhead"`` costs the CPU once its graphs
replay (guards, the inputs copied into the graphs' buffers, CUDA graph trees' bookkeeping, the launch;
with a backward pass, its graph too and autograd's engine), in iterations of rlscope's reference loop,
so that it is priced at the run's own speed (:attr:`Facts.reference_loop_ns`). Measured on the bundled
PPO's policy and a training step of it by ``benchmarks/compiled_gpu_check.py`` (part 3; BENCHMARKS.md
§12): 100 µs and 990 µs a call at a reference loop of 138 ns."""

BACKWARD_WORDS = UPDATE_WORDS
"""Operation names whose calls run a backward pass (a training step replays a forward and a backward
graph): the update's words of :mod:`rlscope.analysis.advice.gpu_idle`."""


def launch_bound(facts: Facts) -> list[Finding]:
    """Per operation whose traced kernels are mostly short and whose launches cost far more than they run.

    Time at stake: what compiling the operation's step and replaying it as CUDA graphs
    (``mode="reduce-overhead"``) removes. Each eager call costs the CPU its Python, its torch ops'
    dispatch (``backend``) and its launch calls (``cuda_api``); a compiled step traces the Python away
    and replays the launches as graphs, so all of that goes, and each call costs a replay instead
    (:data:`REPLAY_REFERENCE_LOOPS`, at the run's speed) and waits for its kernels (their time is kept).
    Not counted: the warm-up of the first call (modules loading at a kernel's first launch, a library's
    handles made), which every run pays once, replayed or not (:meth:`Facts.steady_cpu_s`), and
    compiling, which the report shows apart. ``benchmarks/compiled_gpu_check.py`` checks the number
    against ``mode="reduce-overhead"``.
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
        cpu_cats = [cat for cat in (op.get("categories") or {}) if cat != CATEGORY_NAMES[COMPILE]]
        cpu_run = sum(facts.steady_cpu_s(op, cat) for cat in cpu_cats)
        kernel_run = facts.gpu_s(op, "gpu_kernel") or c.kernel_s
        calls = int(op.get("calls", 0))
        replay = _replay_s(facts, name)
        per_call = c.kernels / c.instances if c.instances else 0.0
        evidence = (
            f"{name}: {count(c.short_kernels)} of its {count(c.kernels)} traced kernels"
            f" ({pct(c.short_kernels, c.kernels)}) ran under {SHORT_KERNEL_NS / 1000:g} µs"
            f" (mean {secs(c.kernel_s / c.kernels)}), {count(per_call)} launches a call; launching took"
            f" {secs(c.launch_s)} of CPU time against {secs(c.kernel_s)} of kernel time"
            f" ({c.launch_s / c.kernel_s:.1f}x)"
        )
        dispatch_run = facts.cpu_s(op, "backend")
        if dispatch_run > 0:
            evidence += f"; its torch ops took {secs(dispatch_run)} of CPU time besides, dispatching them"
        evidence += f"; a replay would cost about {secs(replay)} a call, {count(calls)} calls"
        change = _change(facts, name)
        stake = max(cpu_run - kernel_run - calls * replay, 0.0)
        # capped by the what-if: CPU time the step overlapped with other work does not shorten the run
        parts = tuple(cat for cat in ("python", "backend", "cuda_api") if cat in cpu_cats)
        out.append(Finding("launch_bound", name, evidence, stake, change, parts=parts))
    return out


def _replay_s(facts: Facts, name: str) -> float:
    """Seconds of CPU one replayed call of ``name`` would cost at the run's speed: a training step's
    where the name says it runs a backward pass, a step's otherwise."""
    kind = "training step" if words_of(name) & BACKWARD_WORDS else "step"
    return REPLAY_REFERENCE_LOOPS[kind] * facts.reference_loop_ns * 1e-9


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
