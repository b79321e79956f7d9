"""The advice as people read it: the terminal table's footer and the HTML report's first section.

Both render the summary's ``advice`` list (:mod:`rlscope.analysis.advice`) as it is: ranked by the time
at stake, each finding with its change, that time (and its share of the run) and the evidence from the
trace. The terminal shows the top ``FOOTER_FINDINGS``; the HTML and the JSON have every one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.analysis.advice.base import pct, secs
from rlscope.text import html_text, printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["FOOTER_FINDINGS", "HTML_TITLE", "footer_lines", "html_section", "render_footer"]

FOOTER_FINDINGS = 5  # a footer, not a report: the rest are in --json and --html
HTML_TITLE = "Advice"
NO_ADVICE = "No advice: no rule found a change worth 1% of the run in this trace."


def _stake(finding: Mapping[str, Any], wall: float) -> str:
    s = float(finding.get("seconds_at_stake", 0.0))
    return f"{secs(s)} at stake ({pct(s, wall)} of the run)" if wall > 0 else f"{secs(s)} at stake"


def footer_lines(summary: Mapping[str, Any], limit: int = FOOTER_FINDINGS) -> list[str]:
    """One line per top finding: the change, the time at stake, the evidence; [] without advice."""
    advice = list(summary.get("advice") or [])
    if not advice:
        return []
    wall = float(summary.get("wall_s", 0.0))
    more = f" ({len(advice) - limit} more in --json / --html)" if len(advice) > limit else ""
    lines = [f"advice, most time at stake first{more}:"]
    for i, a in enumerate(advice[:limit], 1):
        where = f"{a['operation']}: " if a.get("operation") else ""
        lines.append(f"{i}. {where}{a['change']} — {_stake(a, wall)}. Evidence: {a['evidence']}")
    return lines


def render_footer(summary: Mapping[str, Any], console: Console) -> None:
    """Print the advice footer under the table (nothing without advice); operation names and evidence
    come from the trace, so each line is shown through :func:`rlscope.text.printable`."""
    from rich.text import Text

    for i, line in enumerate(footer_lines(summary)):
        console.print(Text(printable(line), style="bold" if i == 0 else ""))


def html_section(summary: Mapping[str, Any]) -> str:
    """The report's advice section: every finding, ranked, or one line saying there is none."""
    advice = list(summary.get("advice") or [])
    if not advice:
        return f"<h2>{HTML_TITLE}</h2>\n<p class='empty'>{html_text(NO_ADVICE)}</p>"
    wall = float(summary.get("wall_s", 0.0))
    items = []
    for a in advice:
        where = f"{a['rule']}" + (f" · {a['operation']}" if a.get("operation") else "")
        items.append(
            "<li style='margin-bottom:0.6em'>"
            f"<b>{html_text(str(a['change']))}</b><br>"
            f"<span style='font-variant-numeric:tabular-nums'>{html_text(_stake(a, wall))}</span>"
            f" <span class='note'>[{html_text(where)}]</span><br>"
            f"<span class='note'>Evidence: {html_text(str(a['evidence']))}</span></li>"
        )
    return f"<h2>{HTML_TITLE}</h2>\n<ol class='advice'>" + "".join(items) + "</ol>"
