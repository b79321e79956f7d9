"""The HTML report's what-if section: every scenario of the summary's ``what_if``
(:mod:`rlscope.analysis.whatif`) in a table, the critical path by operation, and the path drawn over the
timeline's window by the timeline's own script (in proportion at every zoom).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlscope.analysis.advice.base import pct, secs
from rlscope.analysis.roles import worker_label
from rlscope.text import html_text
from rlscope.viz.whatif import path_lines, scenarios, times

__all__ = ["DIV_ID", "HTML_TITLE", "html_section"]

HTML_TITLE = "What if: the run replayed from its critical path"
DIV_ID = "rlscope-critical-path"  # the path chart's element id


def _path_chart(
    cp: Mapping[str, Any], fig_html: Callable[..., str], window_s: list[float], names: Mapping[int, str]
) -> str:
    """The critical path in the timeline's window: a row per process's main thread and GPU (processes in
    the summary's order, ``names`` their labels), each interval in its operation's colour, drawn in
    proportion at every zoom by the timeline's script."""
    import plotly.graph_objects as go

    from rlscope.viz.colors import operation_color
    from rlscope.viz.timeline import BAR_WIDTH, SCRIPT, _script_json

    intervals = cp.get("intervals") or []
    order = {pid: i for i, pid in enumerate(names)}
    lanes = sorted(
        {(int(iv["pid"]), str(iv["lane"])) for iv in intervals},
        key=lambda pl: (order.get(pl[0], len(order)), pl[0], pl[1] == "gpu"),
    )
    row_of = {pl: i for i, pl in enumerate(lanes)}
    rows = [
        f"{names.get(pid, f'pid {pid}')} · {'GPU' if lane == 'gpu' else 'main thread'}" for pid, lane in lanes
    ]
    keys = list(dict.fromkeys(str(iv["operation"]) for iv in intervals))
    key_of = {k: i for i, k in enumerate(keys)}
    w0 = float(window_s[0])
    seg: dict[str, list[int]] = {"layer": [], "key": [], "start": [], "dur": [], "label": []}
    labels: dict[str, int] = {}
    for iv in intervals:
        seg["layer"].append(row_of[(int(iv["pid"]), str(iv["lane"]))])
        seg["key"].append(key_of[str(iv["operation"])])
        seg["start"].append(round((float(iv["start_s"]) - w0) * 1e9))
        seg["dur"].append(max(round((float(iv["end_s"]) - float(iv["start_s"])) * 1e9), 0))
        label = html_text(f"{iv['operation']} · {iv['category']}", quote=False)
        seg["label"].append(labels.setdefault(label, len(labels)))
    fig = go.Figure()
    for k in keys:
        fig.add_trace(
            go.Bar(
                name=html_text(k, quote=False),
                y=[],
                x=[],
                orientation="h",
                marker={"color": operation_color(k), "line": {"width": 0}},
                hovertemplate="%{fullData.name}<br>%{hovertext}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="overlay",
        height=max(160, 90 + 36 * len(rows)),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": "seconds since the run start", "range": [w0, float(window_s[1])]},
        yaxis={
            "tickvals": list(range(len(rows))),
            "ticktext": [html_text(r, quote=False) for r in rows],
            "range": [len(rows) - 0.5, -0.5],
            "automargin": True,
        },
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        template="plotly_white",
    )
    payload = {
        "window": [float(x) for x in window_s],
        "keys": [{"trace": i} for i in range(len(keys))],
        "layers": [{"y": i, "width": BAR_WIDTH} for i in range(len(rows))],
        "seg": seg,
        "labels": list(labels),
    }
    draw = f"rlscopeTimeline(document.getElementById('{{plot_id}}'), {_script_json(payload)});"
    return f"<script>{SCRIPT}</script>" + fig_html(fig, post_script=draw, div_id=DIV_ID)


def html_section(
    summary: Mapping[str, Any], report: Mapping[str, Any] | None, fig_html: Callable[..., str] | None = None
) -> str:
    """Every scenario in a table, the critical path by operation, and the path drawn over the timeline's
    window (``fig_html`` turns a figure into its div; without it, or without a timeline, no drawing)."""
    w = summary.get("what_if")
    if not w:
        return ""
    ks, wall = list(w.get("k") or []), float(w.get("wall_s", 0.0))
    head = "".join(f"<th>saved at {times(k)}</th>" for k in ks)
    body = "".join(
        f"<tr><td>{html_text(r['what'])}</td><td>{secs(float(r['time_s']))}</td>"
        f"<td>{pct(float(r['on_path_share']), 1.0)}</td>"
        + "".join(
            f"<td>{secs(float(r['saving_s'][k]))} ({pct(float(r['saving_s'][k]), wall)})</td>" for k in ks
        )
        + "</tr>"
        for r in scenarios(w)
    )
    out = [
        f"<h2>{HTML_TITLE}</h2>",
        "<p class='note'>The recorded run replayed as a graph of what waited on what (each process's main"
        " thread, its GPU streams, the synchronizing CUDA calls, a learner's waits on its env workers), with"
        " one operation, one of its categories, its GPU work or a role made k times faster; time that"
        " overlapped other work or waited on it does not count twice. <i>On path</i>: the share of the"
        " scenario's own time on the critical path, the chain of work that set the run's end.</p>",
        f"<table><tr><th>scenario</th><th>its time</th><th>on path</th>{head}</tr>{body}</table>",
        "".join(
            f"<p class='note'>{html_text(line)}</p>" for line in [*path_lines(w), *(w.get("notes") or [])]
        ),
    ]
    cp = (report or {}).get("critical_path")
    timeline = (report or {}).get("timeline")
    if cp and cp.get("intervals") and timeline and fig_html is not None:
        capped = " (its first intervals only)" if cp.get("capped") else ""
        out.append(f"<h3>The critical path in the timeline's window{capped}</h3>")
        procs = summary.get("processes") or []
        names = {int(p["pid"]): worker_label(p) for p in procs} if len(procs) > 1 else {}
        out.append(_path_chart(cp, fig_html, timeline["window_s"], names))
    return "\n".join(out)
