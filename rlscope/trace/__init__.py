"""The Arrow trace directory: the contract between collection and analysis."""

from __future__ import annotations

import shutil
from pathlib import Path

from rlscope.trace.schema import PROCESS_PREFIX


def clear_trace_dir(path: str | Path) -> None:
    """Remove the process directories of an earlier trace in ``path`` (and nothing else).

    A new run into an old directory would otherwise be analyzed together with the old one.
    """
    p = Path(path)
    if not p.is_dir():
        return
    for child in p.iterdir():
        # ".process-*": one that a process killed while it started left unfinished (trace/writer.py)
        if child.is_dir() and child.name.removeprefix(".").startswith(PROCESS_PREFIX):
            shutil.rmtree(child)
