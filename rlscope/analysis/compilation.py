"""Compilations counted: the summary's ``compile`` (collectors/jax_compile.py and
collectors/torch_compile.py record them).

JAX's compilations are stages (tracing, lowering, XLA's compile), intervals on the thread that ran
them; torch.compile's are one interval each (a frame, a backward graph, compile work at run time),
with torch's split of it into stages as durations and, for a recompilation, the guard that failed.
Their time is also the ``compile`` category of the timeline (rlscope/analysis/timeline.py), so each
operation's category split says how much of it was compiling; this module adds what a split cannot:

- ``compilations``: XLA compilations (backend stages: every executable built or loaded from jax's
  persistent cache, of which ``persistent_cache_hits`` were loaded) and torch.compile's compiled
  frames and backward graphs; ``triton_kernels``: Triton kernels JIT-compiled (or loaded from
  Triton's disk cache) at a launch (collectors/triton_compile.py), inductor's inside its frames too;
- ``seconds``: the time threads spent compiling, nested stages counted once;
- ``stages``: the seconds of each stage, summed (the stages of the frameworks that compiled);
- ``functions``: the functions compiled most (JAX: XLA time; torch: their compilations' time; Triton:
  its kernels' time), with their compilations and, torch's, their recompilations;
- ``recompiles`` and ``recompile_reasons`` (when torch.compile compiled): the frames compiled again
  because a guard of every earlier compilation failed, and the guards that failed most.

They count the whole run, between detail stretches too (rlscope/trace/detail.py): the stages are few,
and the reader keeps every one. A stage counts from the session's start.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlscope.analysis.gpu import session_bounds, union_per_thread
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, name_of

TOP = 5  # functions listed
TRITON = "triton"  # the stage of Triton's JIT compilations


_TORCH_COMPILED = (S.COMPILE_TORCH_FRAME, S.COMPILE_TORCH_BACKWARD)  # torch's compilations, counted


@dataclass
class CompileCounts:
    """A process's (or a run's) compilations."""

    compilations: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    stages: collections.Counter[str] = field(default_factory=collections.Counter)  # stage -> seconds
    functions: collections.Counter[str] = field(default_factory=collections.Counter)  # name -> seconds
    function_compilations: collections.Counter[str] = field(default_factory=collections.Counter)
    jax: bool = False  # JAX compiled (its stages are listed)
    torch: bool = False  # torch.compile compiled (its stages and recompilations are listed)
    triton_kernels: int = 0  # Triton kernels compiled at a launch
    recompiles: int = 0
    function_recompiles: collections.Counter[str] = field(default_factory=collections.Counter)
    reasons: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)  # (fn, why)

    def add(self, other: CompileCounts) -> None:
        self.compilations += other.compilations
        self.cache_hits += other.cache_hits
        self.seconds += other.seconds
        self.stages.update(other.stages)
        self.functions.update(other.functions)
        self.function_compilations.update(other.function_compilations)
        self.jax |= other.jax
        self.torch |= other.torch
        self.triton_kernels += other.triton_kernels
        self.recompiles += other.recompiles
        self.function_recompiles.update(other.function_recompiles)
        self.reasons.update(other.reasons)


def counts(proc: ProcessTrace) -> CompileCounts | None:
    """The compilations of one process; None where it recorded none (it compiled nothing)."""
    table = proc.compile
    if table is None or not table.num_rows or not proc.events.num_rows:
        return None
    c = {k: table.column(k).to_numpy().astype(np.int64, copy=False) for k in S.COMPILE_COLUMNS}
    start_ns = session_bounds(proc)[0]  # the session's start: before any detail gap, on both clocks
    mine = c["end_ns"] >= start_ns
    c = {k: v[mine] for k, v in c.items()}
    begin = np.maximum(c["start_ns"], start_ns)
    stage = c["stage"]
    dur = (c["end_ns"] - begin) / 1e9
    out = CompileCounts()
    backend = stage == S.COMPILE_BACKEND
    torch_compiled = np.isin(stage, _TORCH_COMPILED)
    out.jax = bool(np.isin(stage, list(S.COMPILE_STAGES)).any())
    out.torch = bool(torch_compiled.any())
    triton = stage == S.COMPILE_TRITON
    out.compilations = int(backend.sum() + torch_compiled.sum())
    out.triton_kernels = int(triton.sum())
    out.cache_hits = int((stage == S.COMPILE_CACHE_HIT).sum())
    timed = ~np.isin(stage, S.COMPILE_UNTIMED)
    _, s, e = union_per_thread(c["thread"][timed], begin[timed], c["end_ns"][timed])
    out.seconds = float((e - s).sum()) / 1e9
    for code, label in {**S.COMPILE_STAGES, **S.TORCH_COMPILE_STAGES, S.COMPILE_TRITON: TRITON}.items():
        rows = stage == code
        if rows.any():
            out.stages[label] = float(dur[rows].sum())
    named = backend | torch_compiled | triton
    for nid, d in zip(c["name"][named].tolist(), dur[named].tolist(), strict=True):
        name = name_of(proc.names, nid, "?")
        out.functions[name] += d
        out.function_compilations[name] += 1
    recompiled = stage == S.COMPILE_TORCH_RECOMPILE
    if recompiled.any():  # a reason row has its frame's interval on its thread: the frame names it
        frames = stage == S.COMPILE_TORCH_FRAME
        thread, start, name = c["thread"], c["start_ns"], c["name"]
        fn = {
            (t, s): n
            for t, s, n in zip(
                thread[frames].tolist(), start[frames].tolist(), name[frames].tolist(), strict=True
            )
        }
        for t, s, nid in zip(
            thread[recompiled].tolist(), start[recompiled].tolist(), name[recompiled].tolist(), strict=True
        ):
            fn_name = name_of(proc.names, fn.get((t, s), -1), "?")
            out.recompiles += 1
            out.function_recompiles[fn_name] += 1
            out.reasons[(fn_name, name_of(proc.names, nid, "?"))] += 1
    return out


def summary(counts: CompileCounts | None) -> dict[str, Any] | None:
    """The summary's ``compile`` (None: nothing compiled)."""
    if counts is None or not (counts.compilations or counts.seconds):
        return None
    labels = [
        *(S.COMPILE_STAGES.values() if counts.jax or not (counts.torch or counts.triton_kernels) else ()),
        *(S.TORCH_COMPILE_STAGES.values() if counts.torch else ()),
        *((TRITON,) if counts.triton_kernels else ()),
    ]
    functions = []
    for name, s in counts.functions.most_common(TOP):
        entry: dict[str, Any] = {
            "function": name,
            "compilations": counts.function_compilations[name],
            "seconds": s,
        }
        if counts.torch:
            entry["recompiles"] = counts.function_recompiles[name]
        functions.append(entry)
    out: dict[str, Any] = {
        "compilations": counts.compilations,
        "seconds": counts.seconds,
        "persistent_cache_hits": counts.cache_hits,
        "stages": {label: counts.stages.get(label, 0.0) for label in labels},
        "functions": functions,
    }
    if counts.triton_kernels:
        out["triton_kernels"] = counts.triton_kernels
    if counts.torch:
        out["recompiles"] = counts.recompiles
        out["recompile_reasons"] = [
            {"function": fn, "reason": why, "count": n} for (fn, why), n in counts.reasons.most_common(TOP)
        ]
    return out
