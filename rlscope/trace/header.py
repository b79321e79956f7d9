"""What a process of a trace is known by without its events: its metadata, its parent, its clock.

Shared by the reader and by the run grouping (:mod:`rlscope.trace.runs`), which needs no loaded events.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.trace import schema as S


@dataclasses.dataclass
class ProcessHeader:
    """A process known by its metadata and load warnings: what the run-wide figures (roles, clock
    alignment, warnings) read of it, so a driver can merge per-process results without its events."""

    path: Path
    metadata: dict[str, str]
    warnings: list[str]

    @property
    def pid(self) -> int:
        return int(self.metadata.get("pid", "0") or 0)


def parent_pid(meta: dict[str, str]) -> int:
    """The pid of the profiled process that started this one (0: none known).

    ``run_parent`` (set under ``rlscope run``) before ``ppid``: a process whose parent exited before
    its session started (multiprocessing's resource tracker, a worker outliving its pool) reads
    ``ppid`` 1, its reparenting, but inherited its launcher's pid in its environment.
    """
    return int(meta.get("run_parent") or meta.get("ppid") or 0)


def command_line(meta: dict[str, str]) -> list[str]:
    """The process's whole command line as recorded (``orig_argv``: the interpreter's own arguments
    too, so a ``python -c`` program is told by its code), else its ``argv``; [] when unreadable."""
    for key in ("orig_argv", "argv"):
        try:
            argv = json.loads(meta.get(key) or "null")
        except (ValueError, TypeError):
            continue
        if isinstance(argv, list):
            return [str(a) for a in argv]
    return []


def is_forkserver_command(argv: list[str]) -> bool:
    """A command line of multiprocessing's forkserver (``python -c "from multiprocessing.forkserver
    import main; ..."``): SubprocVecEnv's default start method forks every worker from it. Its
    ``sys.argv`` is ``['-c']`` alone: the code is only in the whole command line."""
    return "-c" in argv and any("multiprocessing.forkserver" in a for a in argv)


def recorded_options(meta: dict[str, str]) -> dict[str, Any]:
    """The session options a process was profiled with (metadata ``options``, JSON); {} when absent or
    unreadable, so a damaged or older trace reads as the defaults."""
    try:
        opts = json.loads(meta.get("options") or "{}")
    except (ValueError, TypeError):
        return {}
    return opts if isinstance(opts, dict) else {}


def clock_offset(proc: ProcessHeader) -> int:
    """Add to a trace-clock ns to get the Unix-anchored clock all processes share (0: no anchors)."""
    meta = proc.metadata
    if "clock.offset_ns" in meta and "clock.driver_anchor_ns" in meta:  # a Ray worker (rlscope/ray.py):
        # its measured offset to the driver's clock, then the driver's own anchors
        driver = int(meta["clock.driver_anchor_unix_ns"]) - int(meta["clock.driver_anchor_ns"])
        return int(meta["clock.offset_ns"]) + driver
    anchor = int(meta.get("clock_anchor_ns", "0") or 0)
    unix = int(meta.get("clock_anchor_unix_ns", "0") or 0)
    return unix - anchor


def session_span(ts: np.ndarray, kind: np.ndarray) -> tuple[int, int]:
    """When a process's sessions begin and end (its first and last event without them).

    The run of a process: the timeline's ``start_ns``/``end_ns``, and what intervals recorded outside
    the events (CUDA API calls, torch ops) are clipped to, so that it is the same with or without them.
    """
    starts, ends = ts[kind == S.SESSION_START], ts[kind == S.SESSION_END]
    return int((starts if len(starts) else ts).min()), int((ends if len(ends) else ts).max())


def main_thread(ts: np.ndarray, kind: np.ndarray, thread: np.ndarray, start_ns: int) -> int:
    """The thread that started the process's (first) session at ``start_ns`` (session_span's),
    else the one of the first event: where unannotated time and the run's wall are counted."""
    opening = np.flatnonzero((kind == S.SESSION_START) & (ts == start_ns))
    return int(thread[opening[0] if len(opening) else 0])
