"""What the advice knows of the program: the RL library that runs it, and what its code already does.

A change is only worth saying in the words of the code the user has: stable-baselines3 takes a device
and optimizer arguments, a CleanRL-style script has its own optimizer line, TorchRL and RLlib have
configuration switches for compiling. And a change the code already makes is no advice at all, so a
rule that could suggest compiling or fusing asks first whether the trace shows it done.

Everything here is read from the summary: its stack samples (``stacks``: each operation's top source
lines and running functions, whose file paths name the packages the time runs in), its process roles
(RLlib's env runners and learners are Ray actors) and its phases (the library adapters' ``rollout`` and
``update``). A run without stack samples tells less: the library may be unknown, and whether the
optimizer is fused cannot be told.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "AUTO_LABEL",
    "COMPILED_MARKS",
    "LIBRARY_PATHS",
    "LIBRARY_PHASES",
    "RLLIB",
    "RLLIB_ROLE_MARKS",
    "SB3",
    "SCRIPT",
    "TORCHRL",
    "UNKNOWN",
    "compiled",
    "frames",
    "library",
    "optimizer_step",
    "sampled",
    "top_python_line",
]

SB3 = "stable-baselines3"
TORCHRL = "torchrl"
RLLIB = "rllib"
SCRIPT = "script"
"""The program's own training loop over PyTorch (CleanRL's single-file scripts and the like): no library
phases, so the optimizer, the policy call and the hyperparameters are lines of the user's file."""
UNKNOWN = ""
"""A library adapter's phases ran (stable-baselines3, TorchRL or RLlib) but nothing tells which."""

LIBRARY_PATHS = (("/stable_baselines3/", SB3), ("/torchrl/", TORCHRL), ("/ray/rllib/", RLLIB))
"""Path fragments of stack-sample files that name the library the time runs in."""

RLLIB_ROLE_MARKS = ("EnvRunner", "Learner")
"""Parts of Ray actor class names (process roles) of RLlib's new API stack."""

LIBRARY_PHASES = frozenset({"rollout", "update"})
"""The library adapters' automatic phases (rlscope/runtime/adapters/): a library runs the loop."""

COMPILED_MARKS = ("/torch/_dynamo/", "/torch/_inductor/", "torchinductor", "/_aot_autograd/")
"""Path fragments of frames that run compiled code (torch.compile's guards, wrappers, generated code):
the operation is compiled already."""

OPTIMIZER_IMPLS = (("_fused_", "fused"), ("_multi_tensor_", "foreach"), ("_single_tensor_", "for-loop"))
"""torch.optim's implementations by function-name prefix (``_single_tensor_adam``,
``_multi_tensor_adam``, ``_fused_adam``): which one a sampled optimizer step ran."""


AUTO_LABEL = " (auto)"
"""How summaries of older analyses labelled an automatic operation or phase (``update (auto)``); newer
ones key it by its name and flag it ``auto``."""


def _base(name: str) -> str:
    return name[: -len(AUTO_LABEL)] if name.endswith(AUTO_LABEL) else name


def _path(frame: Mapping[str, Any]) -> str:
    return str(frame.get("file", "")).replace("\\", "/")


def _stack_ops(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    return (summary.get("stacks") or {}).get("operations") or {}


def frames(summary: Mapping[str, Any], op: str | None = None) -> Iterator[Mapping[str, Any]]:
    """The sampled frames listed for an operation (``op``; an automatic one also under its base name)
    or for every operation: its top lines and its top running functions."""
    ops = _stack_ops(summary)
    if op is None:
        chosen = list(ops.values())
    else:
        chosen = [ops[n] for n in dict.fromkeys((op, _base(op))) if n in ops]
    for entry in chosen:
        yield from entry.get("top_lines") or []
        yield from entry.get("top_functions") or []


def library(summary: Mapping[str, Any]) -> str:
    """The RL library that runs the program: from the stack samples' files, else RLlib's actor roles,
    else :data:`UNKNOWN` when a library adapter's phases ran and :data:`SCRIPT` when none did."""
    for frame in frames(summary):
        path = _path(frame)
        for mark, lib in LIBRARY_PATHS:
            if mark in path:
                return lib
    for proc in summary.get("processes") or []:
        if any(m in str(proc.get("role", "")) for m in RLLIB_ROLE_MARKS):
            return RLLIB
    for name, phase in (summary.get("phases") or {}).items():
        automatic = name.endswith(AUTO_LABEL) or bool((phase or {}).get("auto"))
        if automatic and _base(name) in LIBRARY_PHASES:
            return UNKNOWN
    return SCRIPT


def sampled(summary: Mapping[str, Any], op: str) -> bool:
    """Whether the trace has stack samples of the operation (else code facts are unknown)."""
    return any(True for _ in frames(summary, op))


def compiled(summary: Mapping[str, Any], op: str) -> bool:
    """Whether the operation's sampled frames run compiled code (torch.compile already at work)."""
    return any(any(m in _path(f) for m in COMPILED_MARKS) for f in frames(summary, op))


def optimizer_step(summary: Mapping[str, Any], op: str) -> tuple[str, Mapping[str, Any]] | None:
    """(implementation, frame) of the torch.optim step among the operation's sampled frames, the most
    sampled first; None when no optimizer function is among them."""
    found = []
    for f in frames(summary, op):
        if "/torch/optim/" not in _path(f):
            continue
        fn = str(f.get("function", ""))
        impl = next((name for prefix, name in OPTIMIZER_IMPLS if fn.startswith(prefix)), None)
        if impl is not None:
            found.append((impl, f))
    return max(found, key=lambda kv: float(kv[1].get("share", 0.0)), default=None)


def top_python_line(summary: Mapping[str, Any], op: str) -> Mapping[str, Any] | None:
    """The program's line where most of the operation's Python samples were (None: no samples)."""
    ops = _stack_ops(summary)
    for name in dict.fromkeys((op, _base(op))):
        lines = (ops.get(name) or {}).get("top_python_lines") or []
        if lines:
            return lines[0]
    return None
