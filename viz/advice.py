"""The advice as people read it: the terminal table's footer and the HTML report's first section.

Both render the summary's ``advice`` list (:mod:`rlscope.analysis.advice`) as it is: ranked by the time
at stake, each finding with its change, that time (and its share of the run) and the evidence from the
trace. The terminal shows the top ``FOOTER_FINDINGS``; the HTML and the JSON have every one, the HTML
its top ``FIRST_SCREEN_FINDINGS`` open on the report's first screen and the others folded under them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.analysis.advice.base import pct, secs
from rlscope.text import html_text, printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "FIRST_SCREEN_FINDINGS",
    "FOOTER_FINDINGS",
    "HTML_ID",
    "HTML_TITLE",
    "footer_lines",
    "html_section",
    "render_footer",
]

FOOTER_FINDINGS = 5  # a footer, not a report: the rest are in --json and --html
# open on the HTML report's first screen under the top operations: a 1366x768 screen holds two of
# the longest (a change of four lines, its evidence of two)
FIRST_SCREEN_FINDINGS = 2
HTML_ID = "advice"
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


def _html_item(a: Mapping[str, Any], wall: float) -> str:
    where = f"{a['rule']}" + (f" · {a['operation']}" if a.get("operation") else "")
    return (
        "<li>"
        f"<b>{html_text(str(a['change']))}</b><br>"
        f"<span class='stake'>{html_text(_stake(a, wall))}</span>"
        f" <span class='note'>[{html_text(where)}]</span><br>"
        f"<span class='note'>Evidence: {html_text(str(a['evidence']))}</span></li>"
    )


def html_section(summary: Mapping[str, Any], shown: int = FIRST_SCREEN_FINDINGS) -> str:
    """The report's advice section (``id`` :data:`HTML_ID`): every finding, ranked, the first ``shown``
    open and the rest folded in a ``<details>`` after them; or one line saying there is none."""
    advice = list(summary.get("advice") or [])
    if not advice:
        return f"<div id='{HTML_ID}'><h2>{HTML_TITLE}</h2>\n<p class='empty'>{html_text(NO_ADVICE)}</p></div>"
    wall = float(summary.get("wall_s", 0.0))
    items = [_html_item(a, wall) for a in advice]
    more = ""
    if len(items) > shown:
        rest = len(items) - shown
        more = (
            f"<details class='more'><summary>{rest} more finding{'s' if rest > 1 else ''}</summary>"
            f"<ol class='advice' start='{shown + 1}'>" + "".join(items[shown:]) + "</ol></details>"
        )
    return (
        f"<div id='{HTML_ID}'><h2>{HTML_TITLE}</h2>\n<ol class='advice'>"
        + "".join(items[:shown])
        + f"</ol>{more}</div>"
    )
