"""One analysis of a trace, computed once, that every output renders.

:func:`analyze` walks the trace once: load it (:mod:`rlscope.trace.reader`), build each process's
per-thread timeline with its GPU work joined (:func:`rlscope.analysis.gpu.timeline_with_gpu`),
choose the correction (:mod:`~rlscope.analysis.correction`), correct and aggregate each timeline
(:mod:`~rlscope.analysis.breakdown`), summarize (:mod:`~rlscope.analysis.summary`), and cut the
same timelines into intervals and kernel tables (:mod:`~rlscope.analysis.intervals`,
:mod:`~rlscope.analysis.kernels`, :mod:`~rlscope.analysis.report`). The terminal table, JSON, CSV,
HTML, Chrome trace and diff are renderers of the :class:`AnalysisResult` it returns, so they cannot
disagree (pyinstrument's ``session -> processors -> renderers`` shape).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlscope.errors import TraceError

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
    intervals: Intervals  # the run's intervals, cut to ``window`` when one was given
    kernels: pa.Table  # rlscope.analysis.kernels.KERNEL_SCHEMA: GPU work per operation and kernel
    report: Mapping[str, Any]  # the HTML report's timeline and kernel data (rlscope.analysis.report)
    window: Window | None  # seconds since the run start, as asked (None: the default window)
    schema_versions: frozenset[str]  # trace schema versions of the processes (diff refuses a mix)

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


def analyze(
    trace_or_dir: Trace | str | Path,
    *,
    calibration: str | None = None,
    window: Window | None = None,
    correct: bool = True,
    progress: bool = False,
    workers: int | None = None,
    ray_address: str | None = None,
) -> AnalysisResult:
    """Analyze a trace (directory or loaded :class:`~rlscope.trace.reader.Trace`) once.

    ``calibration``: a calibration file instead of the one in the trace or the machine's cache;
    ``correct=False``: raw figures only; ``window``: (start, end) seconds since the run start for
    the timeline and the interval exports. ``progress``: a transient spinner on a terminal's stderr.
    ``workers`` / ``ray_address``: the per-process step in that many local processes, or in Ray tasks
    (:mod:`rlscope.analysis.parallel`); the result is the same as the serial one.
    Raises :class:`~rlscope.errors.TraceError` for a missing, empty or unreadable trace and
    :class:`~rlscope.errors.RLScopeError` for a window outside the run.
    """
    from rlscope.analysis import nccl
    from rlscope.analysis.correction import plan
    from rlscope.analysis.intervals import clip, intervals
    from rlscope.analysis.kernels import kernel_table
    from rlscope.analysis.parallel import run_steps
    from rlscope.analysis.report import report_from
    from rlscope.analysis.sharing import sharing_for_summary
    from rlscope.analysis.summary import summarize_run
    from rlscope.progress import spinner
    from rlscope.trace.reader import Trace, clock_offset, load_trace

    if isinstance(trace_or_dir, Trace):
        trace = trace_or_dir
    else:
        with spinner(f"loading {trace_or_dir}", enabled=progress):
            trace = load_trace(trace_or_dir)
    if trace.num_events == 0:
        raise TraceError(
            trace.path, "empty trace: no events recorded (the session ended before its first flush?)"
        )
    with spinner("analyzing", enabled=progress):
        # the one pass over each process's events: every step below reads these timelines
        correction = plan(trace, calibration, correct)
        steps = run_steps(trace, correction.costs, workers, ray_address)
        timelines = [s.joined for s in steps]
        summary = summarize_run(trace, [(s.raw, s.corrected) for s in steps], correction)
        # GPU memory, occupancy, kernel lengths and the co-location estimate (rlscope.analysis.sharing)
        summary["sharing"] = sharing_for_summary(trace, summary, timelines)
        nccl.add_to_summary(trace, summary, timelines)  # NCCL kernel time per operation and process
        summary["warnings"] = once_per_run(summary["warnings"])
        whole = intervals(trace, timelines=timelines)
        kernels = kernel_table(trace, timelines)
        gpu_pid = (summary.get("gpu") or {}).get("pid")
        shift = next(
            ((clock_offset(p) - whole.run_start_ns) / 1e9 for p in trace.processes if p.pid == gpu_pid), None
        )
        report = report_from(whole, kernels, window, shift, processes=summary["processes"])
    return AnalysisResult(
        trace_dir=str(trace.path),
        summary=summary,
        intervals=clip(whole, window),
        kernels=kernels,
        report=report,
        window=window,
        schema_versions=frozenset(p.metadata.get("rlscope.schema_version", "") for p in trace.processes),
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
