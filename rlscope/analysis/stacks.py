"""Stack samples put where their thread was: each operation's and ``[unannotated]``'s time by source line.

A sample (collectors/stacks.py) is a thread's Python stack at one instant. The timeline says which
operation (the innermost open one, or none: ``[unannotated]``) and which CPU category that thread
was in then; the sample counts there. Per operation the summary lists the lines its samples ran,
two ways:

- **where** (``top_lines``): the innermost frame in the program's own code, i.e. not in the standard
  library or an installed package, which is the line to change (a slow ``env.step`` shows as the
  program's line that called it, not as a line inside gymnasium); a stack with no such frame counts
  at its innermost frame;
- **running** (``top_functions``): the innermost frame, whatever its file: what the time is spent in.

``top_python_lines`` are the ``where`` lines of the samples taken in the ``python`` category: the
operation's Python time by line. Shares are of the operation's samples (of its Python samples);
the samples are taken in full windows only, at random times relative to the program's loop, so the
shares estimate the shares of time.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlscope import categories
from rlscope.analysis.timeline import Timeline
from rlscope.trace import schema as S
from rlscope.trace.header import recorded_options
from rlscope.trace.reader import name_of

TOP = 5  # lines listed per operation
# a file in one of these is library code: the standard library, installed packages, generated code
LIBRARY_MARKS = ("/site-packages/", "/dist-packages/", "/lib/python3", "\\lib\\python3", "<")

Line = tuple[str, int, str]  # file, line, function


def is_library(file: str, roots: tuple[str, ...] = ()) -> bool:
    """Whether ``file`` is not the program's own code: generated (``<frozen ...>``), under one of the
    interpreter's library folders the trace recorded (``roots``), or on a path that marks one."""
    return (
        file.startswith("<")
        or (bool(roots) and file.startswith(roots))
        or any(m in file for m in LIBRARY_MARKS)
    )


@dataclass
class OpSamples:
    """One operation's samples: counts per line, both ways, and in the python category."""

    samples: int = 0
    python: int = 0
    where: collections.Counter[Line] = field(default_factory=collections.Counter)
    running: collections.Counter[Line] = field(default_factory=collections.Counter)
    python_where: collections.Counter[Line] = field(default_factory=collections.Counter)

    def add(self, other: OpSamples) -> None:
        self.samples += other.samples
        self.python += other.python
        self.where.update(other.where)
        self.running.update(other.running)
        self.python_where.update(other.python_where)


@dataclass
class StackCounts:
    """A process's (or a run's) samples by operation."""

    samples: int = 0
    hz: float = 0.0
    ops: dict[str, OpSamples] = field(default_factory=dict)

    def add(self, other: StackCounts) -> None:
        self.samples += other.samples
        self.hz = max(self.hz, other.hz)
        for op, counts in other.ops.items():
            self.ops.setdefault(op, OpSamples()).add(counts)


def _stack_lines(
    frames: Any, names: list[str], own: tuple[str, ...], roots: tuple[str, ...] = ()
) -> dict[int, tuple[Line, Line]]:
    """Per stack id: its ``where`` line and its ``running`` line, rlscope's own frames (``own``:
    its source folders) skipped: they wrap the program's calls (scopes, automatic operations)."""
    sid = frames.column("stack").to_numpy()
    depth = frames.column("depth").to_numpy()
    order = np.lexsort((depth, sid))  # each stack's frames together, innermost first
    sid, file = sid[order], frames.column("file").to_numpy()[order]
    if not len(sid):
        return {}
    # per file id (a few hundred files among thousands of frames): whether it is rlscope's own and
    # whether it is library code, worked out once, then read at each frame
    files = np.unique(file)
    file_names = [name_of(names, int(f)) for f in files.tolist()]
    at = np.searchsorted(files, file)
    own_frame = np.array([bool(own) and n.startswith(own) for n in file_names], bool)[at]
    library = np.array([is_library(n, roots) for n in file_names], bool)[at]
    first = np.flatnonzero(np.append(True, sid[1:] != sid[:-1]))  # each stack's innermost frame
    ends = np.append(first[1:], len(sid))

    def first_of(mask: np.ndarray, otherwise: np.ndarray) -> np.ndarray:
        """Per stack: its first frame (innermost first) that ``mask`` selects, else ``otherwise``'s."""
        rows = np.flatnonzero(mask)
        pos = np.searchsorted(rows, first)
        found = rows[np.minimum(pos, max(len(rows) - 1, 0))] if len(rows) else ends
        return np.where((pos < len(rows)) & (found < ends), found, otherwise)

    running = first_of(~own_frame, first)  # rlscope's own frames skipped
    where = first_of(~own_frame & ~library, running)
    function, line = frames.column("function").to_numpy()[order], frames.column("line").to_numpy()[order]
    picked = np.unique(np.concatenate([running, where]))
    lines: dict[int, Line] = {
        r: (name_of(names, f), ln, name_of(names, fu))
        for r, f, ln, fu in zip(
            picked.tolist(),
            file[picked].tolist(),
            line[picked].tolist(),
            function[picked].tolist(),
            strict=True,
        )
    }
    return {
        s: (lines[w], lines[r])
        for s, w, r in zip(sid[first].tolist(), where.tolist(), running.tolist(), strict=True)
    }


def recorded_dirs(proc: Any, key: str) -> tuple[str, ...]:
    """Folders frames.arrows' metadata names under ``key``: rlscope's own source folders, or the
    interpreter's library folders, where the process was recorded."""
    try:
        dirs = json.loads(proc.metadata.get(key, "[]"))
    except (ValueError, TypeError, AttributeError):
        return ()
    return tuple(d for d in dirs if isinstance(d, str) and d) if isinstance(dirs, list) else ()


def sample_rows(tl: Timeline, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Per sample, the timeline row its thread was in at its time (-1: none, before its first row or a
    thread without rows). Rows are grouped by thread and sorted by time within a thread."""
    rows = np.full(len(ts), -1, np.int64)
    if not len(tl.ts):
        return rows
    starts = tl.thread_starts()  # each thread's block of rows, found without a pass over them
    for lo, hi in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        if lo == hi:
            continue
        mine = np.flatnonzero(thread == tl.thread_of(lo))
        if not len(mine):
            continue
        at = np.searchsorted(tl.ts[lo:hi], ts[mine], side="right") - 1
        rows[mine] = np.where(at >= 0, lo + at, -1)
    return rows


def attribute(proc: Any, tl: Timeline, names: list[str]) -> StackCounts | None:
    """A process's samples by the operation and category their thread was in; None without samples."""
    samples, frames = getattr(proc, "stacks", None), getattr(proc, "frames", None)
    if samples is None or frames is None or not samples.num_rows:
        return None
    ts = samples.column("ts_ns").to_numpy().astype(np.int64, copy=False)
    thread = samples.column("thread").to_numpy().astype(np.int64, copy=False)
    stack = samples.column("stack").to_numpy()
    keep = (ts >= tl.start_ns) & (ts <= tl.end_ns)
    ts, thread, stack = ts[keep], thread[keep], stack[keep]
    rows = sample_rows(tl, thread, ts)
    inst = np.where(rows >= 0, tl.op[np.maximum(rows, 0)], -1)
    name_ids = np.where(inst >= 0, tl.inst_name[np.maximum(inst, 0)], -1)
    python = np.where(rows >= 0, tl.cat[np.maximum(rows, 0)], categories.PYTHON) == categories.PYTHON
    own = recorded_dirs(proc, S.OWN_DIRS_METADATA_KEY)
    lines = _stack_lines(frames, names, own, recorded_dirs(proc, S.LIBRARY_DIRS_METADATA_KEY))
    unknown: tuple[Line, Line] = (("?", 0, "?"), ("?", 0, "?"))
    out = StackCounts(samples=len(ts), hz=_hz(proc))
    keys = np.stack([name_ids, stack.astype(np.int64), python.astype(np.int64)], axis=1)
    uniq, counts = np.unique(keys, axis=0, return_counts=True) if len(keys) else (keys, np.zeros(0, int))
    for (nid, sid, py), k in zip(uniq.tolist(), counts.tolist(), strict=True):
        op = name_of(names, nid, categories.UNANNOTATED)
        o = out.ops.setdefault(op, OpSamples())
        where, running = lines.get(sid, unknown)
        o.samples += k
        o.where[where] += k
        o.running[running] += k
        if py:
            o.python += k
            o.python_where[where] += k
    return out


def _hz(proc: Any) -> float:
    try:
        return float(recorded_options(proc.metadata).get("stack_hz", 0) or 0)
    except (ValueError, TypeError):
        return 0.0


def _named(counter: collections.Counter[Line], total: int) -> float:
    """The share of ``total`` samples whose line is known (a function in a file)."""
    return sum(k for (f, _, _), k in counter.items() if f not in ("?", "")) / total if total else 0.0


def _top(counter: collections.Counter[Line], total: int) -> list[dict[str, Any]]:
    return [
        {"file": f, "line": ln, "function": fn, "samples": k, "share": k / total if total else 0.0}
        for (f, ln, fn), k in counter.most_common(TOP)
    ]


def summary(counts: StackCounts | None) -> dict[str, Any] | None:
    """The summary's ``stacks``: per operation its samples and its top lines (None: no samples)."""
    if counts is None or not counts.samples:
        return None
    ops = {}
    for op, o in sorted(counts.ops.items(), key=lambda kv: -kv[1].samples):
        ops[op] = {
            "samples": o.samples,
            "python_samples": o.python,
            "named_share": _named(o.where, o.samples),
            "python_named_share": _named(o.python_where, o.python),
            "top_lines": _top(o.where, o.samples),
            "top_functions": _top(o.running, o.samples),
            "top_python_lines": _top(o.python_where, o.python),
        }
    return {"hz": counts.hz, "samples": counts.samples, "operations": ops}
