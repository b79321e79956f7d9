"""Rendering a run-to-run diff (rlscope.analysis.diff): a rich table and a plotly delta-bar page."""

from __future__ import annotations

import html
from typing import Any

from rlscope.categories import UNANNOTATED


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def _row_label(name: str, o: dict[str, Any]) -> str:
    return f"{name} (only in {o['only_in'].upper()})" if o["only_in"] else name


def render_diff(d: dict[str, Any], console: Any = None) -> None:
    """Rich table: per operation, A and B total time, the difference and the ratio, and the
    category that moved most."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    t = Table(title=escape(f"rlscope diff — A: {d['a']}  B: {d['b']}"))
    for col, just in (
        ("operation", "left"),
        ("A s", "right"),
        ("B s", "right"),
        ("Δ s", "right"),
        ("B/A", "right"),
        ("largest category change", "left"),
    ):
        t.add_column(col, justify=just)
    for name, o in d["operations"].items():
        cats = sorted(o["categories"].items(), key=lambda kv: -abs(kv[1]["delta_s"]))
        moved = f"{cats[0][0]} {cats[0][1]['delta_s']:+.3f} s" if cats else "-"
        tot = o["total"]
        t.add_row(
            escape(_row_label(name, o)),
            f"{tot['a']:.3f}",
            f"{tot['b']:.3f}",
            f"{tot['delta_s']:+.3f}",
            _fmt_ratio(tot["ratio"]),
            moved,
        )
    for label, key in ((UNANNOTATED, "unannotated"), ("wall", "wall"), ("GPU-bound", "gpu_bound")):
        p = d[key]
        t.add_row(
            escape(label),
            f"{p['a']:.3f}",
            f"{p['b']:.3f}",
            f"{p['delta_s']:+.3f}",
            _fmt_ratio(p["ratio"]),
            "",
        )
    console.print(t)


def diff_html(d: dict[str, Any]) -> str:
    """The diff as a page in the report's style (:func:`rlscope.viz.html.page`): the wall-time change,
    delta bars (B - A) per operation stacked by category in the report's colours, and a table."""
    import plotly.graph_objects as go

    from rlscope.viz.colors import category_color
    from rlscope.viz.html import _bar_layout, _fig_html, _label, page

    ops = list(d["operations"])
    cats = sorted({c for o in d["operations"].values() for c in o["categories"]})
    fig = go.Figure()
    for c in cats:
        fig.add_bar(
            name=c,
            orientation="h",
            y=[_label(n) for n in ops],
            x=[d["operations"][n]["categories"].get(c, {}).get("delta_s", 0.0) for n in ops],
            marker_color=category_color(c),
            hovertemplate="%{y}<br>%{fullData.name}: %{x:+.3f} s<extra></extra>",
        )
    _bar_layout(fig, len(ops), "change in exclusive seconds, B − A (negative: B is faster)")
    fig.update_layout(barmode="relative")
    w = d["wall"]
    rows = [(_row_label(n, o), o["total"]) for n, o in d["operations"].items()]
    rows += [(UNANNOTATED, d["unannotated"]), ("wall", d["wall"]), ("GPU-bound", d["gpu_bound"])]
    table = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{p['a']:.3f}</td><td>{p['b']:.3f}</td>"
        f"<td>{p['delta_s']:+.3f}</td><td>{_fmt_ratio(p['ratio'])}</td></tr>"
        for name, p in rows
    )
    return page(
        "rlscope diff",
        [
            "<h1>rlscope diff</h1>",
            f"<div class='sub'>A: {html.escape(str(d['a']))}<br>B: {html.escape(str(d['b']))}</div>",
            f"<p class='headline'>Wall time <b>{w['a']:.3f} s</b> → <b>{w['b']:.3f} s</b> "
            f"({w['delta_s']:+.3f} s, B/A {_fmt_ratio(w['ratio'])})</p>",
            "<h2>Change by operation and category</h2>",
            _fig_html(fig, {}) if ops else "<p class='empty'>No operations in either trace.</p>",
            "<h2>Total time per operation</h2>",
            "<table class='kernels'><thead><tr><th>operation</th><th>A s</th><th>B s</th><th>Δ s</th>"
            f"<th>B/A</th></tr></thead><tbody>{table}</tbody></table>",
        ],
    )
