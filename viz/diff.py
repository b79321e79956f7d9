"""Rendering a run-to-run diff (rlscope.analysis.diff): a rich table and a plotly delta-bar page."""

from __future__ import annotations

import html
from typing import Any


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


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
        tag = f" (only in {o['only_in'].upper()})" if o["only_in"] else ""
        tot = o["total"]
        t.add_row(
            escape(name + tag),
            f"{tot['a']:.3f}",
            f"{tot['b']:.3f}",
            f"{tot['delta_s']:+.3f}",
            _fmt_ratio(tot["ratio"]),
            moved,
        )
    for label, key in (("[unannotated]", "unannotated"), ("wall", "wall"), ("GPU-bound", "gpu_bound")):
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
    """A self-contained HTML section: delta bars (B - A) per operation, stacked by category."""
    import plotly.graph_objects as go
    import plotly.io as pio

    ops = list(d["operations"])
    cats = sorted({c for o in d["operations"].values() for c in o["categories"]})
    fig = go.Figure()
    for c in cats:
        fig.add_bar(
            name=c,
            orientation="h",
            y=ops,
            x=[d["operations"][n]["categories"].get(c, {}).get("delta_s", 0.0) for n in ops],
        )
    fig.update_layout(
        barmode="relative",
        title="Change in exclusive time, B − A (seconds), by category",
        xaxis_title="seconds (negative: B is faster)",
        height=120 + 40 * max(len(ops), 1),
    )
    plot = pio.to_html(fig, full_html=False, include_plotlyjs=True)
    w = d["wall"]
    head = (
        f"<h1>rlscope diff</h1><p>A: <code>{html.escape(str(d['a']))}</code><br>B: <code>"
        f"{html.escape(str(d['b']))}</code></p><p>Wall time {w['a']:.3f} s → {w['b']:.3f} s "
        f"({w['delta_s']:+.3f} s, B/A {_fmt_ratio(w['ratio'])})</p>"
    )
    if not ops:
        plot = "<p><em>No operations in either trace.</em></p>"
    page = "<html><head><meta charset='utf-8'><title>rlscope diff</title></head><body>{}</body></html>"
    return page.format(head + plot)
