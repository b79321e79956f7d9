"""Where each operation's time runs, by source line: the table's ``-v`` footer and an HTML section.

Both render the summary's ``stacks`` (rlscope/analysis/stacks.py): per operation, the program's
lines its stack samples ran (the innermost frame in the program's own code). ``[unannotated]`` comes
first, since that is the time nothing else explains.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.categories import UNANNOTATED
from rlscope.text import html_text, printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["FOOTER_LINES", "HTML_TITLE", "footer_lines", "html_section", "render_footer"]

FOOTER_LINES = 3  # per operation, in the terminal
FOOTER_OPS = 4  # operations shown there: [unannotated] and the ones with most samples
HTML_TITLE = "Where the time runs (stack samples)"


def _ordered(ops: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """``[unannotated]`` first, then by samples."""
    return sorted(ops.items(), key=lambda kv: (kv[0] != UNANNOTATED, -int(kv[1].get("samples", 0))))


def _where(row: Mapping[str, Any]) -> str:
    """``file:line function``, the file by its last two path parts (the program's own, usually)."""
    parts = str(row.get("file", "?")).replace("\\", "/").split("/")
    short = os.path.join(*parts[-2:]) if len(parts) > 1 else parts[0]
    return f"{short}:{row.get('line', 0)} {row.get('function', '?')}"


def footer_lines(summary: Mapping[str, Any], per_op: int = FOOTER_LINES, ops: int = FOOTER_OPS) -> list[str]:
    """The footer's lines; [] when the trace has no stack samples."""
    stacks = summary.get("stacks") or {}
    operations = stacks.get("operations") or {}
    if not operations:
        return []
    lines = [f"where the time runs ({stacks.get('samples', 0)} stack samples at {stacks.get('hz', 0):g} Hz):"]
    for op, o in _ordered(operations)[:ops]:
        lines.append(f"  {printable(op)} ({o.get('samples', 0)} samples)")
        lines.append(f"    in your code: {_tops(o.get('top_lines'), per_op)}")
        if o.get("top_functions") != o.get("top_lines"):
            lines.append(f"    running: {_tops(o.get('top_functions'), per_op)}")
    return lines


def _tops(rows: list[Mapping[str, Any]] | None, n: int) -> str:
    return printable(", ".join(f"{_where(r)} {r['share']:.0%}" for r in (rows or [])[:n]))


def render_footer(summary: Mapping[str, Any], console: Console) -> None:
    from rich.text import Text

    for line in footer_lines(summary):
        console.print(Text(line, style="dim"))


def _table(rows: list[Mapping[str, Any]] | None) -> str:
    body = "".join(
        f"<tr><td>{html_text(_where(r))}</td><td>{r['samples']}</td><td>{r['share']:.0%}</td></tr>"
        for r in rows or []
    )
    return f"<table><tr><th>line</th><th>samples</th><th>share</th></tr>{body}</table>"


def html_section(summary: Mapping[str, Any]) -> str:
    """Per operation a table of its top lines, where and (Python samples only) its Python time."""
    stacks = summary.get("stacks") or {}
    operations = stacks.get("operations") or {}
    if not operations:
        return ""
    out = [
        f"<h2>{HTML_TITLE}</h2>",
        f"<p>{stacks.get('samples', 0)} samples of the program's Python stacks at {stacks.get('hz', 0):g} Hz,"
        " each counted in the operation its thread was in. A line is the innermost one in the program's"
        " own code (not the standard library or an installed package).</p>",
    ]
    for op, o in _ordered(operations):
        out.append(f"<h3>{html_text(op)}: {o.get('samples', 0)} samples</h3>{_table(o.get('top_lines'))}")
        if o.get("top_python_lines"):
            out.append(f"<p>Python time ({o.get('python_samples', 0)} samples):</p>")
            out.append(_table(o["top_python_lines"]))
    return "\n".join(out)
