"""Compilation as people read it: the table footer's few lines and an HTML section.

Both render the summary's ``compile`` (:mod:`rlscope.analysis.compilation`): how long the program's
threads spent compiling (JAX's XLA compilations, torch.compile's frames and backward graphs), the
stages, the functions compiled most and, for torch.compile, the guards whose failure compiled a
frame again. The category split says how much of each operation was compiling; this says what was
compiled and why it was compiled again. A run that compiled nothing shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.analysis.advice.base import pct, secs
from rlscope.text import html_text, printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DOMINANT_SHARE",
    "FOOTER_FUNCTIONS",
    "FOOTER_REASONS",
    "HTML_TITLE",
    "dominates",
    "footer_lines",
    "headline",
    "html_line",
    "html_section",
    "render_footer",
]

FOOTER_FUNCTIONS = 3  # under the table: the functions compiled longest (--json and --html have 5)
FOOTER_REASONS = 2  # and the guards that failed most
DOMINANT_SHARE = 0.5  # compiling this share of the wall or more: the HTML report says so on top
HTML_TITLE = "Compilation"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def dominates(summary: Mapping[str, Any]) -> bool:
    """True when the threads compiled for at least :data:`DOMINANT_SHARE` of the run's wall."""
    c = summary.get("compile") or {}
    wall = float(summary.get("wall_s", 0.0))
    return wall > 0 and float(c.get("seconds", 0.0)) >= DOMINANT_SHARE * wall


def headline(summary: Mapping[str, Any]) -> str:
    """``4.20 s compiling (42% of the wall): 7 compilations (2 recompiles, 1 loaded from the persistent
    cache)``; "" when nothing compiled."""
    c = summary.get("compile") or {}
    if not c:
        return ""
    seconds, wall = float(c.get("seconds", 0.0)), float(summary.get("wall_s", 0.0))
    counted = [
        *([_plural(int(c["recompiles"]), "recompile")] if c.get("recompiles") else []),
        *(
            [f"{int(c['persistent_cache_hits'])} loaded from the persistent cache"]
            if c.get("persistent_cache_hits")
            else []
        ),
    ]
    tail = f" ({', '.join(counted)})" if counted else ""
    share = f" ({pct(seconds, wall)} of the wall)" if wall > 0 else ""
    what = [_plural(int(c.get("compilations", 0)), "compilation")] if c.get("compilations") else []
    if c.get("triton_kernels"):
        what.append(_plural(int(c["triton_kernels"]), "Triton kernel"))
    return f"{secs(seconds)} compiling{share}: {', '.join(what) or _plural(0, 'compilation')}{tail}"


def _stages(c: Mapping[str, Any]) -> str:
    """The stages that took any time, in the pipeline's order."""
    stages = (c.get("stages") or {}).items()
    return ", ".join(f"{name} {secs(float(s))}" for name, s in stages if float(s) > 0)


def _function(f: Mapping[str, Any]) -> str:
    """``name: 3.10 s, 3 compilations, 2 recompiles`` (recompiles where torch.compile counted them)."""
    recompiles = int(f.get("recompiles", 0))
    return (
        f"{f.get('function', '?')}: {secs(float(f.get('seconds', 0.0)))},"
        f" {_plural(int(f.get('compilations', 0)), 'compilation')}"
        + (f", {_plural(recompiles, 'recompile')}" if recompiles else "")
    )


def footer_lines(
    summary: Mapping[str, Any], functions: int = FOOTER_FUNCTIONS, reasons: int = FOOTER_REASONS
) -> list[str]:
    """The footer's lines, names escaped; [] when nothing compiled."""
    c = summary.get("compile") or {}
    if not c:
        return []
    stages = _stages(c)
    lines = [f"compile: {headline(summary)}" + (f"; {stages}" if stages else "")]
    lines += [f"  {_function(f)}" for f in (c.get("functions") or [])[:functions]]
    lines += [
        f"  recompiled {r.get('function', '?')} ({int(r.get('count', 0))}×): {r.get('reason', '?')}"
        for r in (c.get("recompile_reasons") or [])[:reasons]
    ]
    return [printable(line) for line in lines]


def render_footer(summary: Mapping[str, Any], console: Console) -> None:
    from rich.text import Text

    for i, line in enumerate(footer_lines(summary)):
        console.print(Text(line, style="bold" if i == 0 and dominates(summary) else "dim"))


def html_line(summary: Mapping[str, Any]) -> str:
    """One line for the report's top when compiling dominates the run; "" otherwise."""
    if not dominates(summary):
        return ""
    return (
        f"<p class='note'><b>Most of this run was compiling</b>: {html_text(headline(summary))}"
        f". <a href='#compilation'>{HTML_TITLE}</a> below says what and why.</p>"
    )


def _rows(cells: list[list[str]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in cells)


def html_section(summary: Mapping[str, Any]) -> str:
    """The compile time, its stages, the functions compiled most and the guards that failed; "" when
    nothing compiled."""
    c = summary.get("compile") or {}
    if not c:
        return ""
    torch = "recompiles" in c
    stages = _stages(c)
    out = [
        f"<h2 id='compilation'>{HTML_TITLE}</h2>",
        f"<p>{html_text(headline(summary))}."
        + (f" Stages: {html_text(stages)}." if stages else "")
        + " Compile time is the <code>compile</code> category of the operation that compiled.</p>",
    ]
    functions = c.get("functions") or []
    if functions:
        head = "<th>function</th><th>compile s</th><th>compilations</th>"
        head += "<th>recompiles</th>" if torch else ""
        body = _rows(
            [
                [
                    str(f.get("function", "?")),
                    f"{float(f.get('seconds', 0.0)):.3f}",
                    str(int(f.get("compilations", 0))),
                    *([str(int(f.get("recompiles", 0)))] if torch else []),
                ]
                for f in functions
            ]
        )
        out.append(f"<table class='kernels'><tr>{head}</tr>{body}</table>")
    reasons = c.get("recompile_reasons") or []
    if reasons:
        body = _rows(
            [
                [str(r.get("function", "?")), str(r.get("reason", "?")), str(r.get("count", 0))]
                for r in reasons
            ]
        )
        out.append(
            "<p>Recompiled because a guard of every earlier compilation failed:</p>"
            "<table class='kernels'><tr><th>function</th><th>guard that failed</th><th>times</th></tr>"
            f"{body}</table>"
        )
    return "\n".join(out)
