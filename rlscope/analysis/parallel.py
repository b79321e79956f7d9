"""The per-process step of :func:`rlscope.analysis.analyze`, serially or in parallel.

Each process's timeline (with its GPU work joined) and its raw and corrected breakdowns depend on that
process alone and on the correction plan chosen for the trace, so they are computed by one top-level,
picklable function, :func:`process_step`: in this process, in a local process pool
(``concurrent.futures.ProcessPoolExecutor``, each worker loading its own process directory), or in
Ray tasks (``ray_address``; each task gets the loaded process through Ray's object store, so the
cluster's nodes need not see the trace directory). The steps come back in trace order and the rest of
``analyze`` merges them exactly as in a serial run, so the result is the same.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from rlscope.errors import RLScopeError
from rlscope.trace.reader import ProcessTrace, Trace

__all__ = ["ProcessStep", "process_step", "run_steps"]


@dataclasses.dataclass
class ProcessStep:
    """One process's joined timeline and its (raw, corrected) breakdowns."""

    joined: Any  # rlscope.analysis.gpu.JoinedTimeline
    raw: Any  # rlscope.analysis.breakdown.ProcessBreakdown
    corrected: Any  # ProcessBreakdown | None (no correction)


def process_step(proc: ProcessTrace | str | os.PathLike[str], costs: Any) -> ProcessStep:
    """Timeline and breakdowns of one process (a loaded one, or its directory, loaded here)."""
    from rlscope.analysis import gpu
    from rlscope.analysis.breakdown import analyze_process_pair
    from rlscope.trace.reader import load_process

    if not isinstance(proc, ProcessTrace):
        proc = load_process(Path(proc))
    joined = gpu.timeline_with_gpu(proc)
    raw, corrected = analyze_process_pair(proc, costs, joined)
    return ProcessStep(joined, raw, corrected)


def _on_disk(proc: ProcessTrace) -> bool:
    """A worker may re-read it: the process was loaded from a directory that is still there."""
    return proc.path.is_dir()


def run_steps(
    trace: Trace, costs: list[Any], workers: int | None = None, ray_address: str | None = None
) -> list[ProcessStep]:
    """:func:`process_step` for every process of ``trace``, in trace order.

    ``workers`` > 1: that many local worker processes; ``ray_address``: Ray tasks on that cluster
    ("auto", "local" or host:port; a running ``ray.init`` is reused).
    """
    procs = trace.processes
    if ray_address is not None:
        return _run_on_ray(procs, costs, ray_address)
    if workers is None or workers <= 1 or len(procs) <= 1:
        return [process_step(p, c) for p, c in zip(procs, costs, strict=True)]
    import concurrent.futures
    import multiprocessing

    # fork: the workers start at once, with rlscope and pyarrow already imported
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(procs)), mp_context=ctx) as ex:
        futures = [
            ex.submit(process_step, str(p.path) if _on_disk(p) else p, c)
            for p, c in zip(procs, costs, strict=True)
        ]
        return [f.result() for f in futures]


def _run_on_ray(procs: list[ProcessTrace], costs: list[Any], address: str) -> list[ProcessStep]:
    try:
        import ray
    except ImportError:
        from rlscope.ray import INSTALL_HINT

        raise RLScopeError(INSTALL_HINT) from None
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False)
    step = ray.remote(process_step)
    return ray.get([step.remote(p, c) for p, c in zip(procs, costs, strict=True)])
