"""The HTML report's timeline section: a window of the run, one row per thread and per GPU stream.

Operation instances and GPU records are often far shorter than a pixel (a CartPole step is ~0.1 ms;
the default window is ~0.4 s over ~1000 px). plotly draws each bar at least a pixel or two wide,
which makes short, frequent operations look several times longer than they are. So the page does
not hand plotly one bar per instance: it carries the instances of the window, and ``timeline.js``
draws, for whatever x range is on screen (the window, or a zoom into it), each name's occupancy of
every few pixels, which keeps each name's drawn width in proportion to its time (see the script).
The data comes from :mod:`rlscope.analysis.report`; this module never reads a trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from rlscope.analysis.demangle import demangle
from rlscope.text import html_text
from rlscope.viz.colors import category_color, operation_color
from rlscope.viz.terminal import UNANNOTATED

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["BAR_WIDTH", "DIV_ID", "SCRIPT", "timeline_payload", "timeline_section"]

DIV_ID = "rlscope-timeline"  # the chart's element id (one timeline per page)
BAR_WIDTH = 0.8  # a row's bar thickness (y units); nested operations are thinner
_DEPTH_STEP, _MIN_WIDTH = 0.15, 0.2


def _script() -> str:
    return resources.files("rlscope.viz").joinpath("timeline.js").read_text(encoding="utf-8")


SCRIPT = _script()


def _label(name: str) -> str:
    """Names as plotly labels (legend, rows, roles, hover text): plotly.js interprets a little HTML, so
    markup is escaped, and control and bidi characters show as on the terminal (``\\x1b``, ``\\u202e``)."""
    return html_text(name, quote=False)


def _width(depth: int) -> float:
    return float(np.clip(BAR_WIDTH - _DEPTH_STEP * depth, _MIN_WIDTH, BAR_WIDTH))


def timeline_payload(tl: Mapping[str, Any], row_of: Mapping[str, int]) -> tuple[dict[str, Any], list[str]]:
    """What ``timeline.js`` draws from, and the traces it fills: [(kind, name)] in trace order.

    Layers are (row, depth) for operations and rows for GPU streams; keys are operation names
    (outermost first, so nested ones are drawn over them) and GPU categories. Times are integer ns
    since the window start, which keeps the page small.
    """
    w0, _ = tl["window_s"]
    ops, gpu = tl["ops"], tl["gpu"]
    depth = np.asarray(ops["depth"], np.int64)
    first_depth: dict[str, int] = {}
    for name, d in zip(ops["name"], depth.tolist(), strict=True):
        first_depth[name] = min(d, first_depth.get(name, d))
    op_keys = sorted(first_depth, key=lambda n: first_depth[n])  # stable: first seen within a depth
    keys = [("op", n) for n in op_keys] + [("gpu", c) for c in dict.fromkeys(gpu["category"])]
    key_of = {k: i for i, k in enumerate(keys)}
    layers: dict[tuple[int, float], int] = {}
    seg: dict[str, list[int]] = {"layer": [], "key": [], "start": [], "dur": [], "label": []}
    labels: dict[str, int] = {}

    def add(
        rows: list[str], names: list[str], kind: str, starts: Any, ends: Any, widths: list[float]
    ) -> None:
        start = np.rint((np.asarray(starts, float) - w0) * 1e9).astype(np.int64)
        dur = np.maximum(np.rint((np.asarray(ends, float) - np.asarray(starts, float)) * 1e9), 0)
        for row, name, w in zip(rows, names, widths, strict=True):
            seg["layer"].append(layers.setdefault((row_of[row], w), len(layers)))
            seg["key"].append(key_of[(kind, name)])
        seg["start"].extend(start.tolist())
        seg["dur"].extend(dur.astype(np.int64).tolist())

    add(ops["row"], ops["name"], "op", ops["start_s"], ops["end_s"], [_width(d) for d in depth.tolist()])
    seg["label"] = [-1] * len(seg["layer"])
    add(gpu["row"], gpu["category"], "gpu", gpu["start_s"], gpu["end_s"], [BAR_WIDTH] * len(gpu["name"]))
    seg["label"].extend(labels.setdefault(_label(demangle(n)), len(labels)) for n in gpu["name"])
    payload = {
        "window": [float(w) for w in tl["window_s"]],
        "keys": [{"trace": i} for i in range(len(keys))],
        "layers": [{"y": y, "width": w} for (y, w) in layers],
        "seg": seg,
        "labels": list(labels),
    }
    return payload, keys


def _script_json(value: Any) -> str:
    """JSON that stays data inside a <script> element: no ``<``, ``>`` or ``&`` a name holds can end
    the element or start an HTML comment in it, and no ``{plot_id}`` in a name is taken for plotly's
    placeholder in the post script. These characters only occur inside JSON strings, where ``\\u``
    escapes read back the same."""
    text = json.dumps(value, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("{plot_id}", "\\u007bplot_id}")):
        text = text.replace(ch, esc)
    return text


def timeline_section(report: Mapping[str, Any] | None, fig_html: Callable[..., str]) -> str:
    """The timeline section's HTML; ``fig_html(fig, post_script=...)`` turns a figure into its div."""
    import plotly.graph_objects as go

    if report is None or "timeline" not in report:
        return "<p class='empty'>No timeline: this report was rendered from a summary alone.</p>"
    if report["timeline"] is None:
        return "<p class='empty'>No timeline: the trace holds no events.</p>"
    tl = report["timeline"]
    w0, w1 = tl["window_s"]
    how = {
        "default": "default window: a few iterations of the outermost repeating operation, from its median"
        " instance",
        "all processes": "default window: the whole run, which covers every process",
    }.get(report.get("window_choice", ""), "window chosen with --window")
    head = (
        f"<p class='note'>Window {w0:.6f}–{w1:.6f} s of a {float(report.get('run_s', 0.0)):.3f} s run "
        f"({how}; pick another with <code>--window START:END</code>, or drag to zoom). Where instances"
        " are shorter than a few pixels, each stretch shows the operation that filled most of it, so"
        " every operation's width stays in proportion to its time.</p>"
    )
    cuts = report.get("cuts") or []
    if cuts:
        skipped = sum(float(c["skipped_s"]) for c in cuts)
        head += (
            f"<p class='note'><b>Detail stretches joined</b>: the run kept every event in stretches only"
            f" (docs/long-runs.md); the time axis joins them, and a dotted line marks each of the"
            f" {len(cuts)} joins ({skipped:,.1f} s of the run between them, in the whole-run figures"
            " only).</p>"
        )
    if tl["capped"]:
        head += (
            f"<p class='note'><b>Timeline capped</b>: drawing {tl['drawn_intervals']:,} of "
            f"{tl['total_intervals']:,} intervals in the window (those starting before "
            f"{tl['shown_until_s']:.6f} s); narrow --window to see the rest.</p>"
        )
    rows: list[str] = tl["rows"]
    if not rows:
        return head + "<p class='empty'>No operations or GPU work in this window.</p>"
    row_of = {r: i for i, r in enumerate(rows)}
    fig = go.Figure()
    procs = tl.get("processes") or {"row": []}
    if procs["row"]:  # several processes: one bar per process, its session, on its own row
        start = np.asarray(procs["start_s"], float)
        fig.add_trace(
            go.Bar(
                name="process",
                y=[row_of[r] for r in procs["row"]],
                x=np.asarray(procs["end_s"], float) - start,
                base=start,
                width=0.5,
                orientation="h",
                marker={"color": operation_color(UNANNOTATED), "line": {"width": 0}},
                hovertemplate="%{x:.3s}s<extra>process</extra>",
            )
        )
    payload, keys = timeline_payload(tl, row_of)
    offset = len(fig.data)
    for key in payload["keys"]:
        key["trace"] += offset
    for kind, name in keys:  # empty: timeline.js fills them for the x range on screen
        fig.add_trace(
            go.Bar(
                name=_label(name),
                y=[],
                x=[],
                orientation="h",
                marker={
                    "color": operation_color(name) if kind == "op" else category_color(name),
                    "line": {"width": 0},
                },
                hovertemplate="%{fullData.name}<br>%{hovertext}<extra></extra>",
            )
        )
    _role_bands(fig, tl.get("groups") or [])
    _cut_lines(fig, cuts)
    fig.update_layout(
        barmode="overlay",
        height=max(220, 90 + 36 * len(rows)),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": "seconds since the run start", "range": [w0, w1]},
        yaxis={
            "tickvals": list(range(len(rows))),
            "ticktext": [_label(r) for r in rows],
            "range": [len(rows) - 0.5, -0.5],
            "automargin": True,
        },
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        template="plotly_white",
    )
    draw = f"rlscopeTimeline(document.getElementById('{{plot_id}}'), {_script_json(payload)});"
    return head + f"<script>{SCRIPT}</script>" + fig_html(fig, post_script=draw, div_id=DIV_ID)


def _cut_lines(fig: go.Figure, cuts: list[Mapping[str, Any]]) -> None:
    """A dotted line where the joined timeline of a run kept in detail stretches skips time."""
    for c in cuts:
        fig.add_vline(x=float(c["at_s"]), line={"color": "#888", "width": 1, "dash": "dot"})
        fig.add_annotation(
            text=f"+{float(c['skipped_s']):,.0f} s",
            x=float(c["at_s"]),
            y=1.0,
            yref="paper",
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font={"size": 10, "color": "#777"},
        )


def _role_bands(fig: go.Figure, groups: list[Mapping[str, Any]]) -> None:
    """Shade every other role's rows and name the role at the band's right edge (several processes)."""
    for k, g in enumerate(groups):
        y0, y1 = float(g["first"]) - 0.5, float(g["last"]) + 0.5
        if k % 2 == 0:
            fig.add_hrect(y0=y0, y1=y1, fillcolor="#f2f2f2", line_width=0, layer="below")
        if k:
            fig.add_hline(y=y0, line={"color": "#bbb", "width": 1})
        fig.add_annotation(
            text=_label(str(g["role"])),
            x=1.0,
            xref="paper",
            y=y0,
            xanchor="right",
            yanchor="top",
            showarrow=False,
            font={"size": 11, "color": "#555"},
            bgcolor="rgba(255,255,255,0.7)",
        )
