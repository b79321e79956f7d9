"""The per-process half of :func:`rlscope.analysis.analyze`: here, in a local process pool, or in Ray tasks.

Two top-level functions take one process each and return small, picklable results:

1. :func:`survey` reads a process's metadata and three event columns (session bounds, window
   modes). The driver needs them from every process before it can choose the correction (every
   process must match one calibration) and place the run on one time axis (the run's start, the
   timeline window).
2. :func:`process_piece` loads the whole process, builds its timeline with GPU work joined, and
   returns a :class:`ProcessPiece`: its raw and corrected breakdowns, kernel rows, CUDA API evidence,
   sharing inputs, its share of the report's timeline and, when asked, its interval tables. That is
   everything the run's figures are merged from and nothing per event, so the timeline is dropped
   before the next process is loaded.

A worker is given a process's directory and reads its files itself; the driver reads no event table
but the survey's columns. So memory is bounded by the largest process, not by the trace, whether
the steps run here (``workers`` None or 1), in ``workers`` local processes (``fork``: they start at
once, with the analysis modules imported) or as Ray tasks (``ray_address``; the nodes must see the
trace directory at the same path, as every node of a one-machine cluster does). The driver merges the
results in trace order, so a parallel analysis equals the serial one.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

# imported here, not in the functions: forked pool workers then start with them loaded
from rlscope.analysis import (
    compilation,
    device_scopes,
    gpu,
    intervals,
    nccl,
    report,
    sharing,
    startup,
    whatif,
    whole_run,
)
from rlscope.analysis import stacks as stack_samples
from rlscope.analysis.breakdown import analyze_process_pair
from rlscope.analysis.gpu_calls import process_gpu_calls
from rlscope.analysis.kernels import process_kernel_rows
from rlscope.errors import RAY_INSTALL_HINT, RLScopeError, TraceError
from rlscope.overhead.correct import has_light_windows
from rlscope.trace import budget
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, load_process

__all__ = ["PieceRequest", "ProcessInfo", "ProcessPiece", "Runner", "process_piece", "survey"]

Source = ProcessTrace | str  # a loaded process, or its directory (the worker loads it)


@dataclasses.dataclass(frozen=True)
class ProcessInfo:
    """What the driver learns of a process before handing it out (:func:`survey`)."""

    metadata: dict[str, str]
    events: int
    light_windows: bool  # it switched its expensive collectors off for part of the run
    span: tuple[int, int] | None  # session start and end on its own clock; None without events
    # its flushes, detail rows and stretches (the detail budget's choice); None for a loaded process
    detail: budget.DetailRows | None = None


@dataclasses.dataclass(frozen=True)
class PieceRequest:
    """What every :func:`process_piece` needs to know of the run, decided from the surveys."""

    run_start_ns: int  # the run start on the aligned clock
    run_end_ns: int  # its end, ns since the run start
    timeline_window_ns: tuple[int, int] | None  # None: the default window of a one-process run
    intervals: bool  # send the interval tables (exports), not only the timeline's part
    intervals_window_ns: tuple[int, int] | None  # clip those tables to it
    max_intervals: int  # the timeline's cap
    what_if: Any = None  # rlscope.analysis.whatif.Request: keep what-if inputs (None: not asked)


@dataclasses.dataclass
class ProcessPiece:
    """One process's results: what :func:`rlscope.analysis.analyze` merges for the whole run."""

    warnings: list[str]  # met while loading it
    raw: Any  # rlscope.analysis.breakdown.ProcessBreakdown
    corrected: Any  # ProcessBreakdown | None (no correction)
    kernel_rows: Any  # rlscope.analysis.kernels.KernelRows (also NCCL time)
    sharing: Any  # rlscope.analysis.sharing.SharingPart | str (its failure) | None (no GPU data)
    timeline: Any  # rlscope.analysis.report.TimelinePart | None (no events)
    intervals: Any  # rlscope.analysis.intervals.ProcessIntervals | None (not asked, or no events)
    gpu_calls: Any = None  # rlscope.analysis.gpu_calls.GpuCalls: per operation, its CUDA API calls (advice)
    collectives: Any = None  # rlscope.analysis.nccl.Collectives | None: torch.distributed's collectives
    stacks: Any = None  # rlscope.analysis.stacks.StackCounts | None: its stack samples by operation and line
    compile: Any = None  # rlscope.analysis.compilation.CompileCounts | None: its JAX compilations
    device_scopes: Any = None  # rlscope.analysis.device_scopes.DeviceScopes | None: GPU time by named scope
    what_if: Any = None  # rlscope.analysis.whatif.ProcessInputs | None: what the what-if replays


def _load(source: Source, **options: Any) -> ProcessTrace:
    """``source`` loaded (:func:`~rlscope.trace.reader.load_process` with ``options``)."""
    if isinstance(source, ProcessTrace):
        return source
    path = Path(source)
    if not path.is_dir():  # listed by the driver: a Ray node that does not see its filesystem
        raise RLScopeError(
            f"{path}: not found on {socket.gethostname()}, where a worker of this analysis runs;"
            " with --ray the trace must be on a filesystem every node sees at the same path"
        )
    return load_process(path, **options)


def survey(source: Source, detail_rows: bool = True) -> ProcessInfo | TraceError:
    """Metadata, event count, window modes and the bounds of the sessions of one process; the error of an
    unreadable one is returned (the driver skips that process, as ``load_trace`` does).
    ``detail_rows``: count its detail rows per flush (the detail budget's choice; not needed when the
    budget keeps every row)."""
    count = None  # the events' rows counted as the light load reads them (the same columns, decoded once)
    if detail_rows and not isinstance(source, ProcessTrace) and Path(source).is_dir():
        count = budget.DetailCount.of(Path(source))
    try:
        proc = _load(source, light=True) if count is None else _load(source, light=True, observe=count.events)
    except TraceError as e:
        return e
    span = gpu.session_bounds(proc) if proc.events.num_rows else None
    detail = count.rows() if count is not None else None
    return ProcessInfo(proc.metadata, proc.events.num_rows, has_light_windows(proc), span, detail)


def process_piece(
    source: Source, costs: Any, request: PieceRequest, drops: list[budget.Drop] | None = None
) -> ProcessPiece:
    """Load one process, analyze it under the run's ``costs`` and ``request``, and keep only its results;
    ``drops``: the detail the budget leaves out (rlscope/trace/budget.py; a directory only)."""
    proc = _load(source, drops=drops)
    if proc.events.num_rows:  # the program's own start-up is the startup phase's (rlscope.analysis.startup)
        proc = dataclasses.replace(proc, events=startup.extended(proc.events, proc.names))
    joined = gpu.timeline_with_gpu(proc)
    # the torch ops are the timeline's rows now, and nothing else reads their table: let go, it is the
    # largest one (millions of rows), and the analysis's peak memory comes after this. So is the events'
    # measured cost (schema.EVENT_COST_COLUMN): the timeline keeps it at the rows that have one; the
    # events' other columns are read on (the whole run's calls, the run's speed, the windows)
    events = proc.events
    cost = S.EVENT_COST_COLUMN[0]
    events = events.drop_columns([cost]) if cost in events.column_names else events
    proc = dataclasses.replace(proc, backend=None, events=events)
    # and its memory given back now where Arrow has an allocator of its own (mimalloc): it keeps what is
    # freed until it next allocates, by then past the analysis's peak, and the analysis's arrays come
    # from another heap. On the system allocator (rlscope/cli/heap.py, pool workers) the freed buffers
    # are on that heap already and serve the arrays next: trimmed, they would be faulted in anew
    pool = pa.default_memory_pool()
    if pool.backend_name != "system":
        pool.release_unused()
    raw, corrected = analyze_process_pair(proc, costs, joined, finish=whole_run.finisher(proc))
    timeline = part = None
    if proc.events.num_rows:
        # the phases choose a one-process run's default timeline window (rlscope.analysis.report)
        kinds = intervals.INTERVAL_KINDS if request.intervals else ("operations", "phases", "gpu")
        part = intervals.process_intervals(proc, joined, request.run_start_ns, kinds)
        timeline = report.timeline_part(
            part, request.timeline_window_ns, request.run_end_ns, request.max_intervals
        )
        win = request.intervals_window_ns
        if win is not None:
            part.tables = {k: intervals.clip_table(t, win) for k, t in part.tables.items()}
    return ProcessPiece(
        warnings=proc.warnings,
        raw=raw,
        corrected=corrected,
        kernel_rows=process_kernel_rows(proc, joined),
        sharing=sharing.process_part_or_error(proc, joined),
        timeline=timeline,
        intervals=part if request.intervals else None,
        gpu_calls=process_gpu_calls(proc, joined),
        collectives=nccl.collective_rows(proc, joined),
        stacks=stack_samples.attribute(proc, joined[0], proc.names),
        compile=compilation.counts(proc),
        device_scopes=device_scopes.attribute(proc, joined),
        what_if=None
        if request.what_if is None
        else whatif.process_inputs(proc, joined, request.run_start_ns, request.what_if),
    )


class Runner:
    """Calls a top-level function once per argument tuple: here, in local worker processes, or as Ray
    tasks; results in the order of the arguments. A context manager (the pool lives inside it)."""

    def __init__(self, workers: int | None = None, ray_address: str | None = None) -> None:
        self.workers = workers if workers is not None and workers > 1 else 1
        self.ray_address = ray_address
        self._pool: Any = None

    @property
    def parallel(self) -> bool:
        return self.ray_address is not None or self.workers > 1

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def map(self, fn: Callable[..., Any], args: list[tuple]) -> list[Any]:
        if self.ray_address is not None:
            ray = _ray(self.ray_address)
            task = ray.remote(fn)
            return ray.get([task.remote(*a) for a in args])
        if self.workers <= 1 or len(args) <= 1:
            return [fn(*a) for a in args]
        if self._pool is None:
            import concurrent.futures
            import multiprocessing

            ctx = multiprocessing.get_context("fork")
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=ctx, initializer=_worker_start
            )
        return [f.result() for f in [self._pool.submit(fn, *a) for a in args]]


def _worker_start() -> None:
    """A pool worker allocates Arrow buffers with the system allocator: with Arrow's default (mimalloc),
    forked workers spent about twice the kernel time (page faults) on the same work."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _ray(address: str) -> Any:
    """The ``ray`` module, connected to ``address`` ("auto", "local" or host:port) unless it already is."""
    try:
        import ray
    except ImportError:
        raise RLScopeError(RAY_INSTALL_HINT) from None
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False)
    return ray
