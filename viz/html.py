"""Self-contained HTML report of an analyzer summary (``rlscope.summary/1``) with plotly.

The file embeds plotly.js once (``include_plotlyjs=True`` on the first chart) so it opens offline and
can be attached to a bug report or copied off a cluster. A section with no data says so, so a reader
can tell "nothing happened" from "the report is broken"; a CPU-only report folds the four GPU
sections into one line that says what a GPU run would add (:data:`CPU_ONLY_TEXT`).

Sections: the first screen (cards of the figures the run has, the top operations, the advice; the
overhead correction's details folded: :mod:`rlscope.viz.first_screen`); time by operation and
category; resource overlap; GPU utilization over time (NVML next to the kernel trace); timeline of
a window (one row per process when there are several, grouped by role; :mod:`rlscope.viz.timeline`);
kernels by operation; phases; roles (per role: breakdown, spread across workers, lagging workers) and one
section per process when there are several; sharing; warnings. :func:`render`
takes an :class:`rlscope.analysis.AnalysisResult`; the timeline and kernel tables are its
``report`` (:mod:`rlscope.analysis.report`): this module never reads a trace.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rlscope.categories import CPU_CATEGORIES, WAITING, WAITING_ROW
from rlscope.errors import RLScopeError
from rlscope.text import html_text
from rlscope.viz.colors import CATEGORY_COLORS, OTHER_COLOR, RESOURCE_COLORS, category_color, operation_color
from rlscope.viz.compile import html_line as compile_line
from rlscope.viz.compile import html_section as compile_section
from rlscope.viz.device_scopes import html_section as device_scopes_section
from rlscope.viz.first_screen import FIRST_SCREEN_CSS, first_screen
from rlscope.viz.sharing import sharing_html
from rlscope.viz.stacks import html_section as stacks_section
from rlscope.viz.terminal import (
    AUTO_NOTE,
    GPU_CATEGORY_ORDER,
    RESOURCE_KEYS,
    RESOURCE_LABELS,
    UNANNOTATED,
    any_automatic,
    check_schema,
    cpu_categories,
    gpu_categories,
    has_gpu_time,
    operation_label,
    run_line,
    sorted_operations,
)
from rlscope.viz.timeline import timeline_section
from rlscope.viz.whatif_html import html_section as whatif_section

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from rlscope.analysis.result import AnalysisResult

__all__ = [
    "CATEGORY_COLORS",
    "CPU_ONLY_TEXT",
    "GPU_SECTION_TITLES",
    "NO_GPU_TEXT",
    "NO_NVML_TEXT",
    "RAW_NOTE",
    "SECTION_TITLES",
    "page",
    "render",
    "render_html",
    "write",
    "write_html",
]

# Colours come from the names (rlscope.viz.colors): the same in every chart, report and run.
_UNANNOTATED_COLOR = operation_color(UNANNOTATED)
_WAITING = CPU_CATEGORIES[WAITING]  # the [waiting] row's category
NO_GPU_TEXT = "no GPU activity recorded"
NO_NVML_TEXT = "No NVML utilization samples recorded"
# a CPU-only report folds the four GPU sections into this line
CPU_ONLY_TEXT = (
    f"CPU only: {NO_GPU_TEXT} (no CUDA GPU, or GPU tracing off). On a GPU, rlscope adds four sections"
    " here: resource overlap (each operation's CPU-only, GPU-only and overlapped time), GPU"
    " utilization over time (NVML beside the kernel trace), the kernels each operation launched, and"
    " sharing (GPU memory, kernel occupancy and lengths, how many copies of the job fit one GPU)."
)
RAW_NOTE = "The figures are raw: rlscope's own overhead is still in them"
SECTION_TITLES = (
    "Time by operation and category",
    "Resource overlap",
    "GPU utilization over time",
    "Timeline",
    "Kernels by operation",
    "Phases",
    "Warnings",
)
# the sections a CPU-only report folds into one line (CPU_ONLY_TEXT)
GPU_SECTION_TITLES = ("Resource overlap", "GPU utilization over time", "Kernels by operation", "Sharing")
TOP_KERNELS = 10
# fullData.name rather than the name itself, so a "%{" in an operation name is not a placeholder.
_HOVER = "%{y}<br>%{fullData.name}: %{x:.3f} s<extra></extra>"

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.sub { color: #666; font-family: ui-monospace, monospace; font-size: 0.9em; }
.headline { font-size: 1.1em; }
.headline b { font-variant-numeric: tabular-nums; }
.empty { color: #777; font-style: italic; }
.note { color: #666; font-size: 0.9em; }
.warnings li { color: #8a6d00; }
.cards { display: flex; gap: 1em; flex-wrap: wrap; margin: 1em 0; }
.card { border: 1px solid #e3e3e3; border-radius: 6px; padding: 0.6em 1em; min-width: 10em; }
.card .v { font-size: 1.5em; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .k { color: #666; font-size: 0.85em; }
table.kernels { border-collapse: collapse; font-size: 0.9em; margin-bottom: 1em; width: 100%; }
table.kernels th, table.kernels td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; }
table.kernels th:first-child, table.kernels td:first-child { text-align: left; word-break: break-all; }
h3 { font-size: 1em; margin-bottom: 0.3em; }
"""


def _label(name: str) -> str:
    """Names as plotly labels: plotly.js interprets a little HTML, so escape to show names literally."""
    return html_text(name, quote=False)


def _fig_html(
    fig: go.Figure, state: dict[str, bool], post_script: str | None = None, div_id: str | None = None
) -> str:
    """One chart as a div; plotly.js goes inline with the first chart only, so the page has it once.
    ``post_script`` runs once the chart is drawn (``{plot_id}`` is its div's id, ``div_id`` if given)."""
    import plotly.io as pio

    include = not state.get("plotlyjs_included", False)
    state["plotlyjs_included"] = True
    return pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=include,
        config={"displaylogo": False},
        post_script=post_script,
        div_id=div_id,
    )


def _bar_layout(fig: go.Figure, n_rows: int, xtitle: str) -> None:
    fig.update_layout(
        barmode="stack",
        height=max(220, 60 + 32 * n_rows),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title=xtitle,
        yaxis={"autorange": "reversed", "automargin": True},  # largest first, at the top
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        template="plotly_white",
    )


def _has_gpu_data(summary: Mapping[str, Any]) -> bool:
    return (
        bool(summary.get("gpu")) or float(summary.get("gpu_bound_s", 0.0) or 0.0) > 0 or has_gpu_time(summary)
    )


def _gpu_util_section(
    summary: Mapping[str, Any], report: Mapping[str, Any] | None, state: dict[str, bool]
) -> str:
    import numpy as np
    import plotly.graph_objects as go

    g = summary.get("gpu") or {}
    t = g.get("sample_t_s") or []
    if not t or not g.get("nvml_util"):
        gpu = "GPU activity was recorded" if _has_gpu_data(summary) else NO_GPU_TEXT
        return f"<p class='empty'>{NO_NVML_TEXT} ({gpu}), so there is no utilization over time to show.</p>"
    shift = (report or {}).get("nvml_shift_s")
    if shift is None:
        x, xtitle = np.asarray(t, float) - float(t[0]), "seconds since the first NVML sample"
    else:
        x, xtitle = np.asarray(t, float) + float(shift), "seconds since the run start"
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=100.0 * np.asarray(g["nvml_util"], float),
            name="NVML utilization (any kernel in the period)",
            mode="lines",
            line={"color": OTHER_COLOR, "shape": "hv"},
            hovertemplate="%{x:.3f} s: %{y:.0f}%<extra>NVML</extra>",
        )
    )
    busy = g.get("trace_busy_in_windows") or []
    if busy:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=100.0 * np.asarray(busy, float),
                name="GPU-bound share (kernel trace)",
                mode="lines",
                line={"color": CATEGORY_COLORS["gpu_kernel"], "shape": "hv"},
                hovertemplate="%{x:.3f} s: %{y:.1f}%<extra>kernel trace</extra>",
            )
        )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title=xtitle,
        yaxis={"title": "% of sample period", "range": [0, 105]},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        template="plotly_white",
    )
    mean_nvml = 100.0 * float(g.get("nvml_util_mean", 0.0))
    mean_busy = 100.0 * float(g.get("trace_busy_fraction_in_windows", 0.0))
    note = (
        "<p class='note'>NVML counts a sample period as busy if any kernel ran in it "
        f"(mean {mean_nvml:.0f}%); "
        f"the kernel trace says how much of each period a kernel or copy was actually running "
        f"(mean {mean_busy:.0f}%). Process {html_text(str(g.get('pid', '?')))}, first GPU.</p>"
    )
    return note + _fig_html(fig, state)


def _kernel_cell(row: Mapping[str, Any]) -> str:
    """The kernel's demangled name; the name as recorded (mangled) shows on hover."""
    name, mangled = str(row["kernel"]), str(row.get("mangled") or row["kernel"])
    title = f" title='{html_text(mangled)}'" if mangled != name else ""
    return f"<td{title}>{html_text(name)}</td>"


def _kernel_section(summary: Mapping[str, Any], report: Mapping[str, Any] | None) -> str:
    if report is None or "kernels" not in report:
        return "<p class='empty'>No kernel tables: this report was rendered from a summary alone.</p>"
    rows = report["kernels"]
    if not rows:
        return f"<p class='empty'>No kernels or copies recorded ({NO_GPU_TEXT}).</p>"
    by_op: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_op.setdefault(str(r["operation"]), []).append(r)
    out = [
        "<p class='note'>GPU work attributed to the operation that launched it (whole run), "
        f"top {TOP_KERNELS} per operation by total time; share is of that operation's GPU time.</p>"
    ]
    for op, krows in by_op.items():
        total = sum(float(r["total_s"]) for r in krows)
        count = sum(int(r["count"]) for r in krows)
        out.append(
            f"<h3>{html_text(op)} <span class='note'>{count:,} record(s), {total:.6f} s GPU time, "
            f"{len(krows)} distinct</span></h3>"
        )
        body = "".join(
            "<tr>"
            f"{_kernel_cell(r)}<td>{html_text(str(r['category']))}</td>"
            f"<td>{int(r['count']):,}</td><td>{1e3 * float(r['total_s']):.3f}</td>"
            f"<td>{1e6 * float(r['mean_s']):.1f}</td><td>{100.0 * float(r['share']):.1f}%</td>"
            "</tr>"
            for r in krows[:TOP_KERNELS]
        )
        more = (
            f"<p class='note'>… and {len(krows) - TOP_KERNELS} more.</p>" if len(krows) > TOP_KERNELS else ""
        )
        out.append(
            "<table class='kernels'><thead><tr><th>kernel</th><th>category</th><th>count</th>"
            "<th>total ms</th><th>mean µs</th><th>share</th></tr></thead>"
            f"<tbody>{body}</tbody></table>{more}"
        )
    return "\n".join(out)


def _category_section(summary: Mapping[str, Any], state: dict[str, bool]) -> str:
    import plotly.graph_objects as go

    ops = sorted_operations(summary.get("operations") or {})
    unann = float(summary.get("unannotated_s", 0.0))
    rows: list[tuple[str, Mapping[str, float]]] = [
        (operation_label(n, op), op.get("categories") or {}) for n, op in ops
    ]
    if unann > 0 or summary.get("unannotated_categories"):
        rows.append((UNANNOTATED, summary.get("unannotated_categories") or {}))
    if summary.get("waiting_s"):  # blocked for the next command: its own bar, not [unannotated]'s
        rows.append((WAITING_ROW, {_WAITING: float(summary["waiting_s"])}))
    cats = cpu_categories(summary) + gpu_categories(summary)
    if not rows or not cats:
        return "<p class='empty'>No categorized time recorded.</p>"

    labels = [_label(name) for name, _ in rows]
    fig = go.Figure()
    for cat in cats:
        xs = [float(c.get(cat, 0.0)) for _, c in rows]
        if not any(xs):
            continue
        fig.add_trace(
            go.Bar(
                name=_label(cat),  # a newer analyzer's category is a name from the trace
                y=labels,
                x=xs,
                orientation="h",
                marker_color=category_color(cat),
                hovertemplate=_HOVER,
            )
        )
    _bar_layout(fig, len(rows), "seconds")
    note = (
        "<p class='note'>CPU categories are exclusive CPU time; GPU categories are GPU time attributed "
        "to the operation that launched it, which may overlap CPU time in wall-clock terms.</p>"
        if gpu_categories(summary)
        else ""
    )
    if any_automatic(summary):
        note += f"<p class='note'>{html_text(AUTO_NOTE)}</p>"
    return _fig_html(fig, state) + note


def _resource_section(summary: Mapping[str, Any], state: dict[str, bool]) -> str:
    import plotly.graph_objects as go

    if not has_gpu_time(summary):
        return f"<p class='empty'>{NO_GPU_TEXT}.</p>"
    ops = sorted_operations(summary.get("operations") or {})
    if not ops:
        return "<p class='empty'>GPU time recorded, but no operations to break it down by.</p>"
    labels = [_label(operation_label(name, op)) for name, op in ops]
    fig = go.Figure()
    for key in RESOURCE_KEYS:
        fig.add_trace(
            go.Bar(
                name=RESOURCE_LABELS[key],
                y=labels,
                orientation="h",
                x=[float((op.get("resources") or {}).get(key, 0.0)) for _, op in ops],
                marker_color=RESOURCE_COLORS[key],
                hovertemplate=_HOVER,
            )
        )
    _bar_layout(fig, len(ops), "seconds (wall clock)")
    return _fig_html(fig, state)


def _phase_section(summary: Mapping[str, Any], state: dict[str, bool]) -> str:
    import plotly.graph_objects as go

    phases = summary.get("phases") or {}
    if not phases:
        return "<p class='empty'>No phases recorded.</p>"
    if len(phases) == 1:
        (name,) = phases
        return f"<p class='empty'>One phase ({html_text(name)}): the charts above cover it.</p>"

    ordered = sorted(phases.items(), key=lambda kv: (-float(kv[1].get("wall_s", 0.0)), kv[0]))
    labels = [_label(operation_label(name, phase)) for name, phase in ordered]
    # operations in order of whole-run total time, then the others of each phase
    op_names = [n for n, _ in sorted_operations(summary.get("operations") or {})]
    for _, phase in ordered:
        op_names.extend(n for n in sorted(phase.get("operations") or {}) if n not in op_names)

    fig = go.Figure()
    for op_name in op_names:
        xs = [
            float(((p.get("operations") or {}).get(op_name) or {}).get("exclusive_s", 0.0))
            for _, p in ordered
        ]
        if not any(xs):
            continue
        fig.add_trace(
            go.Bar(
                name=_label(op_name),
                y=labels,
                x=xs,
                orientation="h",
                marker_color=operation_color(op_name),
                hovertemplate=_HOVER,
            )
        )
    fig.add_trace(
        go.Bar(
            name=UNANNOTATED,
            y=labels,
            orientation="h",
            marker_color=_UNANNOTATED_COLOR,
            x=[float(p.get("unannotated_s", 0.0)) for _, p in ordered],
            hovertemplate=_HOVER,
        )
    )
    _bar_layout(fig, len(ordered), "exclusive seconds")
    return _fig_html(fig, state)


def _roles_section(summary: Mapping[str, Any]) -> str:
    """Per role (several processes): its workers' busy time spread, the lagging ones, its operations."""
    from rlscope.analysis.roles import STRAGGLER_RATIO, worker_label

    processes = summary.get("processes") or []
    roles = summary.get("roles") or {}
    if len(processes) < 2 or not roles:
        return ""
    label = {p.get("pid"): worker_label(p) for p in processes if "role" in p}
    waits = any(r.get("waiting") for r in roles.values())
    out = [
        "<h2>Roles</h2>",
        "<p class='note'>Processes grouped by role (Ray actor class or task, DDP rank, launcher). Busy: a"
        f" worker's time inside operations; lagging: busier than {STRAGGLER_RATIO:g}× its role's median."
        + (f" {html_text(WAITING_ROW)}: blocked for the next command or task, not work." if waits else "")
        + "</p>",
        "<table class='kernels'><tr><th>role</th><th>workers</th><th>busy median s</th><th>p95 s</th>"
        + (f"<th>max s</th><th>{html_text(WAITING_ROW)} median s</th>" if waits else "<th>max s</th>")
        + "<th>lagging (× median)</th></tr>",
    ]
    for role, r in roles.items():
        spread = r.get("spread") or {}
        lag = ", ".join(
            f"<a href='#process-{html_text(str(s['pid']))}'>"
            f"{html_text(label.get(s['pid'], str(s['pid'])))}</a> {float(s['ratio']):.2f}×"
            for s in r.get("stragglers") or []
        )
        out.append(
            f"<tr><td>{html_text(role)}</td><td>{int(r.get('workers', 0))}</td>"
            + "".join(f"<td>{float(spread.get(k, 0.0)):.3f}</td>" for k in ("median_s", "p95_s", "max_s"))
            + (f"<td>{_waiting_median(r)}</td>" if waits else "")
            + f"<td>{lag or '-'}</td></tr>"
        )
    out.append("</table>")
    for role, r in roles.items():
        ops = dict(r.get("operations") or {})
        if r.get("waiting"):  # a row like an operation's, after them: the workers' waits
            ops[WAITING_ROW] = {**r["waiting"], "exclusive_s": r["waiting"]["total_s"], "calls": "-"}
        out.append(f"<h3>{html_text(role)}: {int(r.get('workers', 0))} worker(s)</h3>")
        if not ops:
            out.append("<p class='empty'>No operations in this role.</p>")
            continue
        head = (
            "<tr><th>operation</th><th>total s (all workers)</th><th>exclusive s</th><th>calls</th>"
            "<th>per worker: median s</th><th>p95 s</th><th>max s</th></tr>"
        )
        body = "".join(
            f"<tr><td>{html_text(name)}</td><td>{float(op.get('total_s', 0.0)):.3f}</td>"
            f"<td>{float(op.get('exclusive_s', 0.0)):.3f}</td><td>{op.get('calls', 0)}</td>"
            + "".join(f"<td>{float(op.get(k, 0.0)):.3f}</td>" for k in ("median_s", "p95_s", "max_s"))
            + "</tr>"
            for name, op in ops.items()
        )
        out.append(f"<table class='kernels'>{head}{body}</table>")
    return "\n".join(out)


def _waiting_median(role: Mapping[str, Any]) -> str:
    """A role's median worker's waits for its next command, or a dash (it recorded none)."""
    waiting = role.get("waiting")
    return f"{float(waiting['median_s']):.3f}" if waiting else "-"


def _processes_section(summary: Mapping[str, Any]) -> str:
    """One section per process (when there are several): its wall, operations and categories."""
    processes = summary.get("processes") or []
    if len(processes) < 2:
        return ""
    out = [
        "<h2>Processes</h2>",
        f"<p class='note'>{html_text(run_line(summary))}.</p>",
    ]
    for p in processes:
        pid, host = html_text(str(p.get("pid"))), html_text(str(p.get("host") or "?"))
        done = "" if p.get("complete", True) else " — incomplete (the session did not end normally)"
        cats = ", ".join(f"{html_text(c)} {v:.3f} s" for c, v in (p.get("categories") or {}).items())
        gpu = float(p.get("gpu_bound_s", 0.0))
        who = html_text(f"{p['label']} — " if p.get("label") else "")  # DDP ranks: "rank N"
        nccl = f"; NCCL kernels {float(p['nccl_s']):.3f} s" if "nccl_s" in p else ""
        out.append(
            f"<h3 id='process-{pid}'>{who}Process {pid}@{host}{done}</h3>"
            f"<p class='note'>wall {float(p.get('wall_s', 0.0)):.3f} s, {int(p.get('events', 0)):,} events;"
            f" {html_text(UNANNOTATED)} {float(p.get('unannotated_s', 0.0)):.3f} s;"
            + (f" {html_text(WAITING_ROW)} {float(p['waiting_s']):.3f} s;" if p.get("waiting_s") else "")
            + f" categories: {cats or 'none'}"
            + (f"; GPU-bound {gpu:.3f} s" if gpu else "")
            + nccl
            + "</p>"
        )
        ops = sorted_operations(p.get("operations") or {})
        if not ops:
            out.append("<p class='empty'>No operations in this process.</p>")
            continue
        head = "<tr><th>operation</th><th>total s</th><th>exclusive s</th><th>calls</th><th>GPU s</th>" + (
            "<th>NCCL s</th></tr>" if nccl else "</tr>"
        )
        body = "".join(
            f"<tr><td>{html_text(name)}</td><td>{float(op.get('total_s', 0.0)):.3f}</td>"
            f"<td>{float(op.get('exclusive_s', 0.0)):.3f}</td><td>{int(op.get('calls', 0))}</td>"
            f"<td>{sum(float(v) for v in (op.get('gpu_categories') or {}).values()):.3f}</td>"
            + (f"<td>{float(op.get('nccl_s', 0.0)):.3f}</td>" if nccl else "")
            + "</tr>"
            for name, op in ops
        )
        out.append(f"<table class='kernels'>{head}{body}</table>")
    return "\n".join(out)


def _warnings_section(summary: Mapping[str, Any]) -> str:
    warnings = summary.get("warnings") or []
    if not warnings:
        return "<p class='empty'>No warnings.</p>"
    return "<ul class='warnings'>" + "".join(f"<li>{html_text(str(w))}</li>" for w in warnings) + "</ul>"


def render_html(summary: dict, report: Mapping[str, Any] | None = None) -> str:
    """The full report page as a string (write_html writes it; tests and servers can use it directly).

    ``report``: :func:`rlscope.analysis.report.report_data` of the same trace (timeline and kernel
    tables); without it those sections say they are unavailable.
    """
    check_schema(summary)
    state: dict[str, bool] = {}
    gpu = _has_gpu_data(summary) or bool((report or {}).get("kernels"))
    trace_dir = html_text(str(summary.get("trace_dir", "?")))
    gpu_note = (
        " GPU categories: " + ", ".join(c for c in GPU_CATEGORY_ORDER if c in gpu_categories(summary))
        if has_gpu_time(summary)
        else ""
    )
    body = [
        "<h1>rlscope report</h1>",
        f"<div class='sub'>{trace_dir}</div>",
        # where the time went and what to change; the correction's details folded (viz/first_screen.py)
        first_screen(summary, _has_gpu_data(summary)),
        compile_line(summary),  # a line only when compiling dominates the run (viz/compile.py)
        "<h2>Time by operation and category</h2>",
        _category_section(summary, state),
        *(_gpu_sections(summary, report, state, gpu_note) if gpu else ["<h2>GPU</h2>", _cpu_only_line()]),
        "<h2>Timeline</h2>",
        timeline_section(report, lambda f, **kw: _fig_html(f, state, **kw)),
        whatif_section(summary, report, lambda f, **kw: _fig_html(f, state, **kw)),  # viz/whatif_html.py
        "<h2>Kernels by operation</h2>" if gpu else "",
        _kernel_section(summary, report) if gpu else "",
        "<h2>Phases</h2>",
        _phase_section(summary, state),
        compile_section(summary),
        stacks_section(summary),
        device_scopes_section(summary),
        _roles_section(summary),
        _processes_section(summary),
        "<h2>Sharing</h2>" if gpu else "",  # GPU memory, occupancy, kernel lengths, co-location
        sharing_html(summary, state, lambda f: _fig_html(f, state)) if gpu else "",
        "<h2>Warnings</h2>",
        _warnings_section(summary),
    ]
    return page(f"rlscope report — {summary.get('trace_dir', '?')}", body)


def _cpu_only_line() -> str:
    return f"<p class='empty'>{html_text(CPU_ONLY_TEXT)}</p>"


def _gpu_sections(
    summary: Mapping[str, Any], report: Mapping[str, Any] | None, state: dict[str, bool], gpu_note: str
) -> list[str]:
    """Resource overlap and GPU utilization over time (a run with GPU data)."""
    return [
        "<h2>Resource overlap</h2>",
        f"<p class='note'>{html_text(gpu_note)}</p>" if gpu_note else "",
        _resource_section(summary, state),
        "<h2>GPU utilization over time</h2>",
        _gpu_util_section(summary, report, state),
    ]


def page(title: str, parts: Iterable[str]) -> str:
    """The page shell of every rlscope HTML output (the report, the diff): doctype, title and the
    report's style sheet around ``parts`` (empty ones left out)."""
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>{html_text(title)}</title>\n<style>{_CSS}{FIRST_SCREEN_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(part for part in parts if part)
        + "\n</body>\n</html>\n"
    )


def render(result: AnalysisResult) -> str:
    """The report page of an analysis: its summary and its timeline and kernel data."""
    return render_html(dict(result.summary), result.report)


def write(result: AnalysisResult, path: str) -> None:
    """Write the report of an analysis to ``path``; an unwritable path is one RLScopeError line."""
    try:
        _write_page(render(result), path)
    except OSError as e:
        raise RLScopeError(f"{path}: cannot write: {e.strerror or e}") from None


def write_html(summary: dict, path: str, report: Mapping[str, Any] | None = None) -> None:
    """Write the self-contained report to ``path`` (parent folders are created)."""
    _write_page(render_html(summary, report), path)


def _write_page(page: str, path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
