"""Rendering a run-to-run diff (rlscope.analysis.diff): a rich table and a plotly delta-bar page.

Each change is shown beside its uncertainty and called what it is: slower, faster, or within noise
(the analysis decides; these renderers only say it).
"""

from __future__ import annotations

from typing import Any

from rlscope.categories import UNANNOTATED
from rlscope.text import html_text

__all__ = ["WITHIN_NOISE_MARK", "WITHIN_NOISE_PATTERN", "diff_html", "diff_text", "render_diff", "verdict"]

# a change within noise (or that cannot be told, an operation that ran once) is hatched in its category's
# colour, never faded: a faded dark violet is the light violet of another category
WITHIN_NOISE_MARK = "· within noise"
WITHIN_NOISE_PATTERN: dict[str, Any] = {
    "shape": "/",
    "fillmode": "replace",
    "bgcolor": "#ffffff",
    "solidity": 0.4,
}


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def verdict(change: dict[str, Any], once: str = "can't tell", only_in: str | None = None) -> str:
    """'only in A' / 'only in B', 'slower' / 'faster' (significant), 'within noise', or ``once`` when
    the noise is unknown (an operation that ran once in a trace)."""
    if only_in:
        return f"only in {only_in.upper()}"
    sig = change.get("significant")
    if sig is None:
        return once
    if not sig:
        return "within noise"
    return "slower" if change["delta_s"] > 0 else "faster"


def judged_change(o: dict[str, Any]) -> dict[str, Any]:
    """The change an operation is judged by: per call where the runs made different numbers of calls
    (rlscope.analysis.diff.LENGTH_SHARE), else its total."""
    return o["per_call"] if o.get("judged") == "per_call" and o.get("per_call") else o["total"]


def _unc(change: dict[str, Any]) -> str:
    u = change.get("uncertainty_s")
    return "?" if u is None else f"{u:.3f}"


def _per_call(o: dict[str, Any]) -> str:
    pc = o.get("per_call")
    if not pc:
        return "-"
    mark = "" if pc.get("significant") else " (noise)" if pc.get("significant") is False else " (?)"
    return f"{1e3 * pc['delta_s']:+.3f}{mark}"


def _largest_category(o: dict[str, Any]) -> str:
    """The category whose change is largest among the significant ones ('-' when none is)."""
    cats = [
        (c, ch)
        for c, ch in {**o["categories"], **(o.get("gpu_categories") or {})}.items()
        if ch.get("significant")
    ]
    if not cats:
        return "-"
    c, ch = max(cats, key=lambda kv: abs(kv[1]["delta_s"]))
    return f"{c} {ch['delta_s']:+.3f} s"


def _label_html(name: str, o: dict[str, Any]) -> str:
    """The page's row label: the name, and where the operation ran in one trace only, which."""
    return f"{name} (only in {o['only_in'].upper()})" if o.get("only_in") else name


def _other_rows(d: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    rows = [(UNANNOTATED, d["unannotated"]), ("wall", d["wall"])]
    if "gpu_bound" in d:  # only when a trace has GPU data
        rows.append(("GPU-bound", d["gpu_bound"]))
    return rows


def _table(d: dict[str, Any], compact: bool = False) -> Any:
    from rlscope.viz.terminal import Columns, cell

    t = Columns(title=cell(f"rlscope diff — A: {d['a']}  B: {d['b']}"), title_justify="left")
    t.add_column("operation")
    for col in ("A s", "B s", "Δ s", "± s", "B/A"):
        t.add_column(col, justify="right")
    t.add_column("change")
    t.add_column("calls A→B", justify="right")
    t.add_column("Δ per call ms", justify="right")
    t.add_column("largest category change")
    for name, o in d["operations"].items():
        tot = o["total"]
        judged = judged_change(o)
        word = verdict(judged, only_in=o.get("only_in")) + (" per call" if judged is not tot else "")
        t.add_row(
            cell(name, style="bold" if judged.get("significant") else ""),
            f"{tot['a']:.3f}",
            f"{tot['b']:.3f}",
            f"{tot['delta_s']:+.3f}",
            _unc(tot),
            _fmt_ratio(tot["ratio"]),
            cell(word, style="bold" if judged.get("significant") else "dim"),
            f"{o['calls']['a']}→{o['calls']['b']}",
            _per_call(o),
            _largest_category(o),
        )
    t.add_section()
    for label, p in _other_rows(d):
        t.add_row(
            cell(label, style="italic" if label == UNANNOTATED else ""),
            f"{p['a']:.3f}",
            f"{p['b']:.3f}",
            f"{p['delta_s']:+.3f}",
            _unc(p),
            _fmt_ratio(p["ratio"]),
            cell(verdict(p, once="-"), style="bold" if p.get("significant") else "dim"),
            "",
            "",
            "",
        )
    return t


def _note(d: dict[str, Any]) -> str:
    z = d.get("significance_z", 3.0)
    return (
        f"slower/faster: the change is more than {z:g} times its uncertainty (± s: one standard deviation,"
        " from the spread of each operation's calls in both traces and the overhead correction's);"
        " within noise otherwise; can't tell: an operation that ran once has no spread to judge by,"
        " nor has unannotated time. An operation whose calls differ between the runs (runs of different"
        " lengths) is judged per call."
    )


def render_diff(d: dict[str, Any], console: Any = None) -> None:
    """Rich table: per operation, A and B total time, the change with its uncertainty and what it is,
    the calls and the change per call, and the category that moved most among those that moved."""
    from rich.console import Console

    from rlscope.viz.terminal import cell, fit_table

    console = console or Console()
    first = ["B/A", "calls A→B", "Δ per call ms", "A s"]
    then = ["largest category change", "± s"]
    console.print(fit_table(lambda compact: _table(d, compact), console, first, then))
    console.print(cell(_note(d), style="dim"))


def diff_text(d: dict[str, Any], width: int = 160) -> str:
    """The diff table as plain text (no colors), for tests, logs and files."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    render_diff(d, Console(file=buf, width=width, color_system=None, force_terminal=False))
    return buf.getvalue()


def _category_bars(fig: Any, d: dict[str, Any], ops: list[str]) -> None:
    """Per category, its changes beyond noise as solid bars and the others hatched in the same colour,
    each kind its own legend entry (``c`` and ``c · within noise``), so the legend shows what the bars
    show: a faded colour would read as a lighter category (a faint ``backend`` looks like ``python``)."""
    from rlscope.viz.colors import category_color
    from rlscope.viz.html import _label

    key = "categories"
    cats = sorted({c for o in d["operations"].values() for c in o[key]})
    labels = [_label(n) for n in ops]
    for c in cats:
        changes = [d["operations"][n][key].get(c) or {"delta_s": 0.0, "significant": False} for n in ops]
        beyond = [bool(ch.get("significant")) for ch in changes]
        colour = category_color(c)
        common = {
            "orientation": "h",
            "y": labels,
            "customdata": [verdict(ch) for ch in changes],
            "legendgroup": c,
            "hovertemplate": "%{y}<br>%{fullData.name}: %{x:+.3f} s (%{customdata})<extra></extra>",
        }
        # the solid trace is there even without a bar (the category's name and colour in the figure's
        # data, as in every chart), out of the legend then: the legend lists what is drawn
        fig.add_bar(
            name=_label(c),
            x=[ch["delta_s"] if b else None for ch, b in zip(changes, beyond, strict=True)],
            marker={"color": colour},
            showlegend=any(beyond),
            **common,
        )
        if any(not b and ch["delta_s"] for ch, b in zip(changes, beyond, strict=True)):
            fig.add_bar(
                name=_label(f"{c} {WITHIN_NOISE_MARK}"),
                x=[None if b else ch["delta_s"] for ch, b in zip(changes, beyond, strict=True)],
                marker={
                    "color": colour,
                    "line": {"color": colour, "width": 1},
                    "pattern": WITHIN_NOISE_PATTERN,
                },
                **common,
            )


def diff_html(d: dict[str, Any]) -> str:
    """The diff as a page in the report's style (:func:`rlscope.viz.html.page`): the wall-time change,
    delta bars (B - A) per operation stacked by category in the report's colours (changes within noise
    hatched, :func:`_category_bars`), and a table that says which changes are beyond noise."""
    import plotly.graph_objects as go

    from rlscope.viz.html import _bar_layout, _fig_html, page

    ops = list(d["operations"])
    fig = go.Figure()
    _category_bars(fig, d, ops)
    _bar_layout(
        fig,
        len(ops),
        "change in exclusive seconds, B − A (negative: B is faster; hatched: within noise or can't tell)",
    )
    fig.update_layout(barmode="relative")
    w = d["wall"]
    rows = [
        (_label_html(n, o), o["total"], f"{o['calls']['a']}→{o['calls']['b']}")
        for n, o in d["operations"].items()
    ]
    rows += [(label, p, "") for label, p in _other_rows(d)]
    table = "".join(
        f"<tr class='{'sig' if p.get('significant') else 'noise'}'><td>{html_text(name)}</td>"
        f"<td>{p['a']:.3f}</td><td>{p['b']:.3f}</td><td>{p['delta_s']:+.3f}</td><td>{_unc(p)}</td>"
        f"<td>{_fmt_ratio(p['ratio'])}</td>"
        f"<td>{html_text(verdict(p, once='ran once' if calls else '-'))}</td>"
        f"<td>{calls}</td></tr>"
        for name, p, calls in rows
    )
    style = "<style>tr.sig td { font-weight: bold; } tr.noise td { color: #777; }</style>"
    return page(
        "rlscope diff",
        [
            style,
            "<h1>rlscope diff</h1>",
            f"<div class='sub'>A: {html_text(str(d['a']))}<br>B: {html_text(str(d['b']))}</div>",
            f"<p class='headline'>Wall time <b>{w['a']:.3f} s</b> → <b>{w['b']:.3f} s</b> "
            f"({w['delta_s']:+.3f} ± {_unc(w)} s, B/A {_fmt_ratio(w['ratio'])}:"
            f" {html_text(verdict(w, '-'))})</p>",
            "<h2>Change by operation and category</h2>",
            _fig_html(fig, {}) if ops else "<p class='empty'>No operations in either trace.</p>",
            "<h2>Total time per operation</h2>",
            "<table class='kernels'><thead><tr><th>operation</th><th>A s</th><th>B s</th><th>Δ s</th>"
            "<th>± s</th><th>B/A</th><th>change</th><th>calls A→B</th></tr></thead>"
            f"<tbody>{table}</tbody></table>",
            f"<p class='note'>{html_text(_note(d))}</p>",
        ],
    )
