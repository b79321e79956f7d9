"""JAX compilations counted: the summary's ``compile`` (collectors/jax_compile.py records them).

Each compilation's stages (tracing, lowering, XLA's compile) are intervals on the thread that ran them.
Their time is also the ``xla_compile`` category of the timeline (rlscope/analysis/timeline.py), so each
operation's category split says how much of it was compiling; this module adds what a split cannot:

- ``compilations``: the XLA compilations (backend stages: every executable built or loaded from jax's
  persistent cache, of which ``persistent_cache_hits`` were loaded);
- ``seconds``: the time threads spent compiling, nested stages counted once;
- ``stages``: the seconds of each stage, summed;
- ``functions``: the functions compiled most (XLA time), with their compilations.

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


@dataclass
class CompileCounts:
    """A process's (or a run's) compilations."""

    compilations: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    stages: collections.Counter[str] = field(default_factory=collections.Counter)  # stage -> seconds
    functions: collections.Counter[str] = field(default_factory=collections.Counter)  # name -> XLA seconds
    function_compilations: collections.Counter[str] = field(default_factory=collections.Counter)

    def add(self, other: CompileCounts) -> None:
        self.compilations += other.compilations
        self.cache_hits += other.cache_hits
        self.seconds += other.seconds
        self.stages.update(other.stages)
        self.functions.update(other.functions)
        self.function_compilations.update(other.function_compilations)


def counts(proc: ProcessTrace) -> CompileCounts | None:
    """The compilations of one process; None where it recorded none (it never imported jax)."""
    table = proc.compile
    if table is None or not table.num_rows or not proc.events.num_rows:
        return None
    c = {k: table.column(k).to_numpy().astype(np.int64, copy=False) for k in S.COMPILE_COLUMNS}
    start_ns = session_bounds(proc)[0]  # the session's start: before any detail gap, on both clocks
    mine = c["end_ns"] >= start_ns
    c = {k: v[mine] for k, v in c.items()}
    begin = np.maximum(c["start_ns"], start_ns)
    stage = c["stage"]
    out = CompileCounts()
    backend = stage == S.COMPILE_BACKEND
    out.compilations = int(backend.sum())
    out.cache_hits = int((stage == S.COMPILE_CACHE_HIT).sum())
    timed = stage != S.COMPILE_CACHE_HIT
    _, s, e = union_per_thread(c["thread"][timed], begin[timed], c["end_ns"][timed])
    out.seconds = float((e - s).sum()) / 1e9
    for code, label in S.COMPILE_STAGES.items():
        rows = stage == code
        if rows.any():
            out.stages[label] = float((c["end_ns"][rows] - begin[rows]).sum()) / 1e9
    for nid, dur in zip(c["name"][backend].tolist(), (c["end_ns"] - begin)[backend].tolist(), strict=True):
        name = name_of(proc.names, nid, "?")
        out.functions[name] += dur / 1e9
        out.function_compilations[name] += 1
    return out


def merged(parts: list[CompileCounts | None]) -> CompileCounts | None:
    """The run's compilations: every process's summed (None: no process recorded any)."""
    got = [p for p in parts if p is not None]
    if not got:
        return None
    out = CompileCounts()
    for p in got:
        out.add(p)
    return out


def summary(counts: CompileCounts | None) -> dict[str, Any] | None:
    """The summary's ``compile`` (None: nothing compiled)."""
    if counts is None or not (counts.compilations or counts.seconds):
        return None
    return {
        "compilations": counts.compilations,
        "seconds": counts.seconds,
        "persistent_cache_hits": counts.cache_hits,
        "stages": {label: counts.stages.get(label, 0.0) for label in S.COMPILE_STAGES.values()},
        "functions": [
            {"function": name, "compilations": counts.function_compilations[name], "seconds": s}
            for name, s in counts.functions.most_common(TOP)
        ],
    }
