"""The HTML report's first screen: the answer before the method.

What a reader opens a report for, where the time went and what to change, comes first and fits one
screen (1366×768 and up): the headline cards, the top rows of the per-operation table (the terminal
table's columns) and the advice's top findings (:mod:`rlscope.viz.advice`). How the figures were made
(the overhead correction's removed time, windows and calibration; each operation corrected, ± and
raw; which figures come from detail stretches) is one sentence under them, its details folded in a
``<details>`` element a reader opens when checking a figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlscope.text import html_text
from rlscope.viz.advice import html_section as advice_section
from rlscope.viz.colors import operation_color
from rlscope.viz.terminal import (
    UNANNOTATED,
    cpu_categories,
    has_gpu_time,
    operation_label,
    sorted_operations,
)
from rlscope.viz.words import correction_details, correction_sentence, detail_sentence

__all__ = ["CORRECTION_ID", "FIRST_SCREEN_CSS", "TOP_OPERATIONS_ID", "TOP_ROWS", "first_screen"]

TOP_ROWS = 5  # operations in the first screen's table; the chart below it has them all
TOP_OPERATIONS_ID = "top-operations"
CORRECTION_ID = "correction"
CORRECTION_SUMMARY = "How the figures were made: the overhead correction, ± and raw per operation"

FIRST_SCREEN_CSS = """
.first h2 { margin-top: 1em; }
.cards { margin: 0.8em 0; }
table.top { border-collapse: collapse; font-size: 0.95em; width: 100%; font-variant-numeric: tabular-nums; }
table.top th, table.top td { padding: 0.15em 0.6em; border-bottom: 1px solid #eee; text-align: right; }
table.top th:first-child, table.top td:first-child { text-align: left; }
table.top .swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.4em;
                    border-radius: 2px; vertical-align: baseline; }
table.top tr.unannotated td:first-child { font-style: italic; }
ol.advice { margin: 0.4em 0; padding-left: 1.6em; }
ol.advice li { margin-bottom: 0.5em; }
.stake { font-variant-numeric: tabular-nums; }
details > summary { cursor: pointer; color: #555; font-size: 0.9em; }
details.correction { margin: 0.3em 0 0 0; }
"""


def _cards(summary: Mapping[str, Any], has_gpu_data: bool) -> str:
    """The run in a few figures: wall, GPU-bound share (a GPU run), top operation, top CPU category,
    unannotated share; only the figures this run has."""
    wall = float(summary.get("wall_s", 0.0))
    ops = sorted_operations(summary.get("operations") or {})
    unann = float(summary.get("unannotated_s", 0.0))

    def pct(s: float) -> str:
        return f"{100.0 * s / wall:.0f}%" if wall > 0 else "-"

    def card(value: str, key: str) -> str:
        return f"<div class='card'><div class='v'>{value}</div><div class='k'>{key}</div></div>"

    cards = [card(f"{wall:.3f} s", "wall time")]
    if has_gpu_data:
        bound = float(summary.get("gpu_bound_s", 0.0) or 0.0)
        cards.append(card(pct(bound), f"GPU-bound ({bound:.3f} s with a kernel or copy running)"))
    if ops:
        name, top = ops[0]
        cards.append(
            card(html_text(name), f"top operation: {pct(float(top.get('total_s', 0.0)))} of the run")
        )
    cats = {c: float(v) for c, v in (summary.get("categories") or {}).items() if c in cpu_categories(summary)}
    if sum(cats.values()) > 0:
        cat, secs = max(cats.items(), key=lambda kv: kv[1])
        share = f"{100.0 * secs / sum(cats.values()):.0f}%"
        cards.append(card(html_text(cat), f"top category: {share} of the CPU time"))
    if wall > 0:
        cards.append(card(pct(unann), f"unannotated ({unann:.3f} s)"))
    return "<div class='cards'>" + "".join(cards) + "</div>"


def _share(part: float, whole: float) -> str:
    """A share as the terminal table writes it: '-' for none, '<1%' for a sliver."""
    if whole <= 0 or part <= 0:
        return "-"
    p = 100.0 * part / whole
    return "<1%" if p < 0.5 else f"{p:.0f}%"


def _top_operations(summary: Mapping[str, Any]) -> str:
    """The per-operation table's top rows (the terminal's columns: total, share of the run, exclusive,
    each CPU category's share of the exclusive time, GPU time on a GPU run, calls), then
    ``[unannotated]``."""
    wall = float(summary.get("wall_s", 0.0))
    ops = sorted_operations(summary.get("operations") or {})
    cats = cpu_categories(summary)
    gpu = has_gpu_time(summary)
    head = (
        "<tr><th>operation</th><th>total s</th><th>% run</th><th>excl s</th>"
        + "".join(f"<th>{html_text(c)}</th>" for c in cats)
        + ("<th>GPU s</th>" if gpu else "")
        + "<th>calls</th></tr>"
    )

    def row(label: str, colour: str, entry: Mapping[str, Any], cat_s: Mapping[str, Any], calls: str) -> str:
        total, excl = float(entry.get("total_s", 0.0)), float(entry.get("exclusive_s", 0.0))
        gpu_s = sum(float(v) for v in (entry.get("gpu_categories") or {}).values())
        return (
            f"<td><span class='swatch' style='background:{colour}'></span>{html_text(label)}</td>"
            f"<td>{total:.3f}</td><td>{_share(total, wall)}</td><td>{excl:.3f}</td>"
            + "".join(f"<td>{_share(float(cat_s.get(c, 0.0)), excl)}</td>" for c in cats)
            + (f"<td>{gpu_s:.3f}</td>" if gpu else "")
            + f"<td>{calls}</td></tr>"
        )

    body = [
        "<tr class='operation'>"
        + row(
            operation_label(n, op),
            operation_color(n),
            op,
            op.get("categories") or {},
            str(op.get("calls", 0)),
        )
        for n, op in ops[:TOP_ROWS]
    ]
    unann = float(summary.get("unannotated_s", 0.0))
    body.append(
        "<tr class='unannotated'>"
        + row(
            UNANNOTATED,
            operation_color(UNANNOTATED),
            {"total_s": unann, "exclusive_s": unann},
            summary.get("unannotated_categories") or {},
            "-",
        )
    )
    more = len(ops) - TOP_ROWS
    plural = "s" if more > 1 else ""
    tail = (
        f"<p class='note'>… and {more} more operation{plural}: the chart below has them all.</p>"
        if more > 0
        else ""
    )
    empty = "" if ops else "<p class='empty'>No operations recorded: all time is unannotated.</p>"
    return (
        f"{empty}<table class='top' id='{TOP_OPERATIONS_ID}'><thead>{head}</thead>"
        f"<tbody>{''.join(body)}</tbody></table>{tail}"
    )


def _correction(summary: Mapping[str, Any]) -> str:
    """The correction in one sentence (the terminal's words, :mod:`rlscope.viz.words`), and folded
    under it what a reader checking a figure wants: the correction's details, each top operation
    corrected, ± and raw, and which figures come from detail stretches."""
    sentence = f"<p class='note'><b>{html_text(correction_sentence(summary))}</b></p>"
    folded = []
    if summary.get("corrected_for_overhead") and summary.get("overhead"):
        details = "".join(f"<li>{html_text(d)}</li>" for d in correction_details(summary))
        raw_ops = (summary.get("raw") or {}).get("operations") or {}
        rows = "".join(
            f"<tr><td>{html_text(name)}</td><td>{float(op.get('total_s', 0.0)):.4f}</td>"
            f"<td>± {float(op.get('uncertainty_s', 0.0)):.4f}</td>"
            f"<td>{float((raw_ops.get(name) or {}).get('total_s', 0.0)):.4f}</td></tr>"
            for name, op in sorted_operations(summary.get("operations") or {})[:8]
        )
        folded.append(
            f"<ul class='note details'>{details}</ul>"
            "<table class='kernels'><tr><th>operation</th><th>corrected s</th><th>uncertainty</th>"
            f"<th>raw s</th></tr>{rows}</table>"
        )
    if detail_sentence(summary):  # which figures are whole-run, which from the detail stretches
        folded.append(f"<p class='note'>{html_text(detail_sentence(summary))}</p>")
    if not folded:
        return sentence
    return (
        f"{sentence}<details class='correction' id='{CORRECTION_ID}'>"
        f"<summary>{html_text(CORRECTION_SUMMARY)}</summary>{''.join(folded)}</details>"
    )


def first_screen(summary: Mapping[str, Any], has_gpu_data: bool) -> str:
    """Cards, the top operations and the advice, then the correction's sentence with its details
    folded: the report's opening, before the charts."""
    return (
        "<div class='first'>"
        + _cards(summary, has_gpu_data)
        + _top_operations(summary)
        + advice_section(summary)
        + _correction(summary)
        + "</div>"
    )
