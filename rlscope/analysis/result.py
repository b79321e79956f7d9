"""One analysis of a trace, computed once, that every output renders.

:func:`analyze` walks the trace once, one process at a time (:mod:`~rlscope.analysis.parallel`: here,
in a process pool or in Ray tasks): a survey of each process (metadata, session bounds) chooses the
correction (:func:`~rlscope.overhead.correct.plan_correction`) and the run's time axis; then each
process is loaded (:mod:`rlscope.trace.reader`), its per-thread timeline built with its GPU work joined
(:func:`rlscope.analysis.gpu.timeline_with_gpu`), corrected in one call
(:func:`~rlscope.overhead.correct.correct_process`), aggregated (:mod:`~rlscope.analysis.breakdown`)
and cut into its kernel rows, its share of the report's timeline and, when asked, its interval tables
(:mod:`~rlscope.analysis.kernels`, :mod:`~rlscope.analysis.report`, :mod:`~rlscope.analysis.intervals`).
Those per-process pieces are merged in trace order into the summary (:mod:`~rlscope.analysis.summary`)
and the rest; the advice rules (:mod:`~rlscope.analysis.advice`) read the finished summary last. The terminal
table, JSON, CSV, HTML, Chrome trace and diff are renderers of the :class:`AnalysisResult` it
returns, so they cannot disagree (pyinstrument's ``session -> processors -> renderers`` shape).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlscope.errors import RLScopeError, TraceError
from rlscope.trace.budget import AUTO, Budget

if TYPE_CHECKING:
    import pyarrow as pa

    from rlscope.analysis.intervals import Intervals
    from rlscope.trace.reader import Trace

__all__ = ["AnalysisResult", "analyze"]

Window = tuple[float | None, float | None]


@dataclasses.dataclass(frozen=True)
class AnalysisResult:
    """Everything rlscope reports about one trace. Renderers read it; nothing changes it.

    ``summary`` is the documented summary (docs/trace-format.md, "Summary JSON"): corrected
    figures at the top level when a correction applied, both sets under ``raw`` and ``corrected``,
    and per-process figures under ``processes``.
    """

    trace_dir: str
    summary: Mapping[str, Any]
    intervals: Intervals | None  # the run's intervals, cut to ``window``; None unless asked for
    kernels: pa.Table  # rlscope.analysis.kernels.KERNEL_SCHEMA: GPU work per operation and kernel
    report: Mapping[str, Any]  # the HTML report's timeline and kernel data (rlscope.analysis.report)
    window: Window | None  # seconds since the run start, as asked (None: the default window)
    schema_versions: frozenset[str]  # trace schema versions of the processes (diff refuses a mix)

    def interval_tables(self) -> Intervals:
        """``intervals``, which the exports need; an error when the analysis left them out."""
        if self.intervals is None:
            raise RLScopeError("no interval tables in this analysis (analyze(intervals=True) keeps them)")
        return self.intervals

    @property
    def corrected_for_overhead(self) -> bool:
        return bool(self.summary.get("corrected_for_overhead"))

    @property
    def raw(self) -> Mapping[str, Any]:
        """The uncorrected figures (the same as the top level when no correction applied)."""
        return self.summary["raw"]

    @property
    def corrected(self) -> Mapping[str, Any]:
        return self.summary["corrected"]

    @property
    def operations(self) -> Mapping[str, Any]:
        return self.summary["operations"]

    @property
    def phases(self) -> Mapping[str, Any]:
        return self.summary["phases"]

    @property
    def processes(self) -> list[Mapping[str, Any]]:
        return self.summary["processes"]

    @property
    def warnings(self) -> list[str]:
        return self.summary["warnings"]

    @property
    def advice(self) -> list[Mapping[str, Any]]:
        """Ranked findings: rule, operation, evidence, seconds_at_stake, change (rlscope.analysis.advice)."""
        return self.summary.get("advice", [])


def analyze(
    trace_or_dir: Trace | str | Path,
    *,
    calibration: str | None = None,
    window: Window | None = None,
    correct: bool = True,
    progress: bool = False,
    workers: int | None = None,
    ray_address: str | None = None,
    intervals: bool = True,
    detail_budget: Budget = AUTO,
    what_if: bool = True,
) -> AnalysisResult:
    """Analyze a trace (directory or loaded :class:`~rlscope.trace.reader.Trace`) once.

    ``calibration``: a calibration file instead of the one in the trace or the machine's cache;
    ``correct=False``: raw figures only; ``window``: (start, end) seconds since the run start for
    the timeline and the interval exports. ``progress``: a transient spinner on a terminal's stderr.
    ``workers`` / ``ray_address``: the processes in that many local worker processes, or in Ray tasks
    (:mod:`rlscope.analysis.parallel`); the result is the same as the serial one.
    ``intervals=False``: no interval tables (``result.intervals`` None): only the exports (Chrome
    trace, CSV intervals) need them, and the whole run's are about as large as its events.
    ``detail_budget``: how much of each process's detail the analysis holds (rows, ``"auto"``: its
    first stretch, None: all of it); the aggregates stand for the rest (rlscope/trace/budget.py). A
    loaded ``Trace`` is analyzed whole. ``what_if=False``: no ``what_if`` in the summary (the replay of
    the run with operations, categories and roles made faster: rlscope.analysis.whatif).
    Raises :class:`~rlscope.errors.TraceError` for a missing, empty or unreadable trace and
    :class:`~rlscope.errors.RLScopeError` for a window outside the run.
    """
    from rlscope.progress import spinner

    with spinner(f"analyzing {getattr(trace_or_dir, 'path', trace_or_dir)}", enabled=progress):
        return _analyze(
            trace_or_dir,
            calibration,
            window,
            correct,
            workers,
            ray_address,
            intervals,
            detail_budget,
            what_if,
        )


def _analyze(
    trace_or_dir: Trace | str | Path,
    calibration: str | None,
    window: Window | None,
    correct: bool,
    workers: int | None,
    ray_address: str | None,
    want_intervals: bool,
    detail_budget: Budget,
    want_what_if: bool = True,
) -> AnalysisResult:
    from rlscope.analysis import compilation, device_scopes, gpu_calls, nccl, stacks, whatif
    from rlscope.analysis.advice import advise
    from rlscope.analysis.intervals import intervals_from, run_span, window_ns
    from rlscope.analysis.kernels import kernel_table_from
    from rlscope.analysis.parallel import PieceRequest, Runner, process_piece, survey
    from rlscope.analysis.parts import summed
    from rlscope.analysis.report import MAX_INTERVALS, detail_cuts, report_dict, timeline_from, window_choice
    from rlscope.analysis.sharing import sharing_for_summary
    from rlscope.analysis.summary import summarize_run
    from rlscope.overhead.correct import plan_correction
    from rlscope.trace.budget import choose_drops
    from rlscope.trace.reader import (
        ProcessHeader,
        Trace,
        TraceHeader,
        clock_offset,
        process_dirs,
        skipped_warnings,
    )
    from rlscope.trace.runs import runs_warning

    with Runner(workers, ray_address) as runner:
        errors: list[TraceError] = []
        if isinstance(trace_or_dir, Trace):
            path, loaded = trace_or_dir.path, trace_or_dir.processes
            infos = [survey(p) for p in loaded]
            # workers re-read a process from its directory rather than receive it pickled
            sources: list[Any] = [str(p.path) if runner.parallel and p.path.is_dir() else p for p in loaded]
            dirs = [p.path for p in loaded]
        else:
            path, listed, single = process_dirs(trace_or_dir)
            # detail rows counted for the budget's choice only (every row kept: nothing to choose)
            surveyed = runner.map(survey, [(str(d), detail_budget is not None) for d in listed])
            errors = [s for s in surveyed if isinstance(s, TraceError)]
            if errors and (single or len(errors) == len(listed)):
                raise errors[0]
            kept = [(d, s) for d, s in zip(listed, surveyed, strict=True) if not isinstance(s, TraceError)]
            dirs, infos = [d for d, _ in kept], [s for _, s in kept]
            sources, loaded = [str(d) for d in dirs], []
        if sum(i.events for i in infos) == 0:
            raise TraceError(
                path, "empty trace: no events recorded (the session ended before its first flush?)"
            )
        headers = [ProcessHeader(d, i.metadata, []) for d, i in zip(dirs, infos, strict=True)]
        # a directory profiled into twice (rlscope.trace.runs); a loaded Trace said it when it was read
        earlier = None if loaded else runs_warning(headers, [i.span for i in infos])
        correction = plan_correction(
            [i.metadata for i in infos], [i.light_windows for i in infos], calibration, correct
        )
        spans = [(h, *i.span) for h, i in zip(headers, infos, strict=True) if i.span is not None]
        run_start, run_end = run_span(spans)
        timeline_ns, chosen = window_choice(window, run_end, len(spans))  # a missed window fails here
        request = PieceRequest(
            run_start_ns=run_start,
            run_end_ns=run_end,
            timeline_window_ns=timeline_ns,
            intervals=want_intervals,
            intervals_window_ns=window_ns(window, run_end),
            max_intervals=MAX_INTERVALS,
            what_if=whatif.request([i.metadata for i in infos]) if want_what_if else None,
        )
        drops = choose_drops([i.detail for i in infos], [clock_offset(h) for h in headers], detail_budget)
        pieces = runner.map(
            process_piece,
            [(s, c, request, d) for s, c, d in zip(sources, correction.costs, drops, strict=True)],
        )
    for i, (h, piece) in enumerate(zip(headers, pieces, strict=True)):
        h.warnings = loaded[i].warnings if loaded else piece.warnings
    headers[0].warnings += skipped_warnings(errors)  # as load_trace says them
    if earlier:
        headers[0].warnings.append(earlier)
    trace = TraceHeader(path, headers)
    summary = summarize_run(trace, [(p.raw, p.corrected) for p in pieces], correction)
    # GPU memory, occupancy, kernel lengths and the co-location estimate (rlscope.analysis.sharing)
    summary["sharing"] = sharing_for_summary([p.sharing for p in pieces], summary)
    # NCCL kernel time per operation and process
    nccl.add_to_summary(
        summary,
        [(h.pid, p.kernel_rows) for h, p in zip(headers, pieces, strict=True)],
        [(h.pid, p.collectives) for h, p in zip(headers, pieces, strict=True)],
    )
    # Python stack samples by operation and source line (rlscope.analysis.stacks), when taken
    sampled = summed([p.stacks for p in pieces], stacks.StackCounts)
    if sampled is not None:
        summary["stacks"] = stacks.summary(sampled)
    # JAX compilations (rlscope.analysis.compilation), when the program compiled any
    compiled = compilation.summary(summed([p.compile for p in pieces], compilation.CompileCounts))
    if compiled is not None:
        summary["compile"] = compiled
    # GPU time by jax.named_scope inside jitted code (rlscope.analysis.device_scopes), when recorded
    scoped = device_scopes.summary(summed([p.device_scopes for p in pieces], device_scopes.DeviceScopes))
    if scoped is not None:
        summary["device_scopes"] = scoped
    # the run replayed with each top operation, category and role made faster (rlscope.analysis.whatif)
    made = whatif.what_if(
        [p.what_if for p in pieces],
        [e["role"] for e in summary["processes"]],
        summary["wall_s"],
        factors=whatif.corrections(summary) if summary.get("corrected_for_overhead") else None,
    )
    critical = None
    if made is not None:
        summary["what_if"], critical = made
    summary["warnings"] = once_per_run(summary["warnings"])
    # ranked findings (rlscope.analysis.advice): last, since the rules read the finished summary
    summary["advice"] = advise(summary, gpu_calls.merge([p.gpu_calls or {} for p in pieces]))
    kernels = kernel_table_from([p.kernel_rows for p in pieces])
    gpu_pid = (summary.get("gpu") or {}).get("pid")
    shift = next(((clock_offset(h) - run_start) / 1e9 for h in headers if h.pid == gpu_pid), None)
    parts = [p.timeline for p in pieces if p.timeline is not None]
    timeline = timeline_from(parts, MAX_INTERVALS, summary["processes"])
    whole = None
    if want_intervals:
        whole = intervals_from([p.intervals for p in pieces if p.intervals is not None], run_start, run_end)
        whole = dataclasses.replace(whole, window_ns=request.intervals_window_ns)
    report = report_dict(run_end, chosen, timeline, kernels, shift, detail_cuts(headers, run_start))
    if critical is not None and timeline is not None:  # the critical path in the timeline's window
        report["critical_path"] = whatif.in_window(critical, timeline["window_s"])
    return AnalysisResult(
        trace_dir=str(path),
        summary=summary,
        intervals=whole,
        kernels=kernels,
        report=report,
        window=window,
        schema_versions=frozenset(i.metadata.get("rlscope.schema_version", "") for i in infos),
    )


_PROCESS_DIR = re.compile(r"^(?P<pre>.*?)process-(?P<pid>\d+)(?P<post>.*)$", re.DOTALL)


def once_per_run(warnings: list[str]) -> list[str]:
    """Each warning once: the same problem in several processes becomes one line naming them."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for w in dict.fromkeys(warnings):
        m = _PROCESS_DIR.match(w)
        key = f"{m['pre']}process-*{m['post']}" if m else w
        groups.setdefault(key, []).append((m["pid"] if m else "", w))
    out = []
    for key, members in groups.items():
        if len(members) == 1:
            out.append(members[0][1])
            continue
        pids = [pid for pid, _ in members]
        shown = ", ".join(pids[:8]) + (", ..." if len(pids) > 8 else "")
        out.append(f"{key} ({len(pids)} processes: {shown})")
    return out
