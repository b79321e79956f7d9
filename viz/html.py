"""Self-contained HTML report of an analyzer summary (``rlscope.summary/1``) with plotly.

The file embeds plotly.js once (``include_plotlyjs=True`` on the first chart) so it opens offline and
can be attached to a bug report or copied off a cluster. Every section is always present: when it has no
data it says so, so a reader can tell "nothing happened" from "the report is broken".
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.viz.terminal import (
    GPU_CATEGORY_ORDER,
    RESOURCE_KEYS,
    RESOURCE_LABELS,
    UNANNOTATED,
    check_schema,
    cpu_categories,
    gpu_categories,
    has_gpu_time,
    sorted_operations,
)

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["CATEGORY_COLORS", "NO_GPU_TEXT", "render_html", "write_html"]

# Fixed colors so a category looks the same in every chart and every report.
CATEGORY_COLORS: dict[str, str] = {
    "python": "#3776ab",
    "simulator": "#2ca02c",
    "backend": "#ff7f0e",
    "cuda_api": "#d62728",
    "gpu_kernel": "#9467bd",
    "gpu_memcpy": "#8c564b",
    "gpu_memset": "#e377c2",
}
RESOURCE_COLORS: dict[str, str] = {"cpu_only": "#1f77b4", "gpu_only": "#9467bd", "cpu_gpu": "#17becf"}
_OTHER_COLOR = "#7f7f7f"
_UNANNOTATED_COLOR = "#c7c7c7"
_OP_PALETTE = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
)
NO_GPU_TEXT = "no GPU activity recorded"
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
"""


def _label(name: str) -> str:
    """Names as plotly labels: plotly.js interprets a little HTML, so escape to show names literally."""
    return html.escape(name, quote=False)


def _fig_html(fig: go.Figure, state: dict[str, bool]) -> str:
    """One chart as a div; plotly.js goes inline with the first chart only, so the page has it once."""
    import plotly.io as pio

    include = not state.get("plotlyjs_included", False)
    state["plotlyjs_included"] = True
    return pio.to_html(fig, full_html=False, include_plotlyjs=include, config={"displaylogo": False})


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


def _headline(summary: Mapping[str, Any]) -> str:
    wall = float(summary.get("wall_s", 0.0))
    ops = sorted_operations(summary.get("operations") or {})
    unann = float(summary.get("unannotated_s", 0.0))

    def pct(s: float) -> str:
        return f"{100.0 * s / wall:.0f}%" if wall > 0 else "-"

    parts = [
        f"<p class='headline'>Wall time <b>{wall:.3f} s</b>; unannotated <b>{unann:.3f} s</b> "
        f"({pct(unann)}); {len(ops)} operation(s).</p>"
    ]
    if ops:
        items = "".join(
            f"<li><b>{html.escape(name)}</b>: {float(op.get('total_s', 0.0)):.3f} s "
            f"({pct(float(op.get('total_s', 0.0)))} of run), {int(op.get('calls', 0))} call(s)</li>"
            for name, op in ops[:3]
        )
        parts.append(f"<p>Top operations by total time:</p><ol>{items}</ol>")
    else:
        parts.append("<p class='empty'>No operations recorded: all time is unannotated.</p>")
    return "\n".join(parts)


def _category_section(summary: Mapping[str, Any], state: dict[str, bool]) -> str:
    import plotly.graph_objects as go

    ops = sorted_operations(summary.get("operations") or {})
    unann = float(summary.get("unannotated_s", 0.0))
    rows: list[tuple[str, Mapping[str, float]]] = [(n, op.get("categories") or {}) for n, op in ops]
    if unann > 0 or summary.get("unannotated_categories"):
        rows.append((UNANNOTATED, summary.get("unannotated_categories") or {}))
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
                name=cat,
                y=labels,
                x=xs,
                orientation="h",
                marker_color=CATEGORY_COLORS.get(cat, _OTHER_COLOR),
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
    return _fig_html(fig, state) + note


def _resource_section(summary: Mapping[str, Any], state: dict[str, bool]) -> str:
    import plotly.graph_objects as go

    if not has_gpu_time(summary):
        return f"<p class='empty'>{NO_GPU_TEXT}.</p>"
    ops = sorted_operations(summary.get("operations") or {})
    if not ops:
        return "<p class='empty'>GPU time recorded, but no operations to break it down by.</p>"
    labels = [_label(name) for name, _ in ops]
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
        return f"<p class='empty'>One phase ({html.escape(name)}): the charts above cover it.</p>"

    ordered = sorted(phases.items(), key=lambda kv: (-float(kv[1].get("wall_s", 0.0)), kv[0]))
    labels = [_label(name) for name, _ in ordered]
    # One color per operation name across all phases, assigned in order of whole-run total time.
    op_names = [n for n, _ in sorted_operations(summary.get("operations") or {})]
    for _, phase in ordered:
        op_names.extend(n for n in sorted(phase.get("operations") or {}) if n not in op_names)

    fig = go.Figure()
    for i, op_name in enumerate(op_names):
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
                marker_color=_OP_PALETTE[i % len(_OP_PALETTE)],
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


def _warnings_section(summary: Mapping[str, Any]) -> str:
    warnings = summary.get("warnings") or []
    if not warnings:
        return "<p class='empty'>No warnings.</p>"
    return "<ul class='warnings'>" + "".join(f"<li>{html.escape(str(w))}</li>" for w in warnings) + "</ul>"


def render_html(summary: dict) -> str:
    """The full report page as a string (write_html writes it; tests and servers can use it directly)."""
    check_schema(summary)
    state: dict[str, bool] = {}
    trace_dir = html.escape(str(summary.get("trace_dir", "?")))
    gpu_note = (
        " GPU categories: " + ", ".join(c for c in GPU_CATEGORY_ORDER if c in gpu_categories(summary))
        if has_gpu_time(summary)
        else ""
    )
    body = [
        "<h1>rlscope report</h1>",
        f"<div class='sub'>{trace_dir}</div>",
        _headline(summary),
        "<h2>Time by operation and category</h2>",
        _category_section(summary, state),
        "<h2>Resource overlap</h2>",
        f"<p class='note'>{html.escape(gpu_note)}</p>" if gpu_note else "",
        _resource_section(summary, state),
        "<h2>Phases</h2>",
        _phase_section(summary, state),
        "<h2>Warnings</h2>",
        _warnings_section(summary),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>rlscope report — {trace_dir}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body>\n</html>\n"
    )


def write_html(summary: dict, path: str) -> None:
    """Write the self-contained report to ``path`` (parent folders are created)."""
    page = render_html(summary)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
