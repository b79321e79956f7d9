"""GPU time by ``jax.named_scope`` inside jitted code: a terminal footer and an HTML section.

Both render the summary's ``device_scopes`` (rlscope/analysis/device_scopes.py): the GPU time of each
outermost named scope, per call of the operation that ran the jitted function and over the run, and
how the kernels were joined to the program's scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.analysis.advice.base import secs
from rlscope.text import html_text, printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["HTML_TITLE", "footer_lines", "html_section", "render_footer"]

HTML_TITLE = "GPU time by named scope (inside jitted code)"
FOOTER_SCOPES = 6


def _per_call(scope: Mapping[str, Any]) -> str:
    per = scope.get("per_call_s") or {}
    return ", ".join(f"{secs(float(s))} per {printable(op)}" for op, s in per.items() if s > 0)


def footer_lines(summary: Mapping[str, Any], n: int = FOOTER_SCOPES) -> list[str]:
    """The footer's lines; [] when the run recorded no named scopes on the GPU."""
    d = summary.get("device_scopes") or {}
    scopes = d.get("scopes") or {}
    if not scopes:
        return []
    lines = [
        f"GPU time by jax.named_scope ({secs(float(d.get('gpu_s', 0.0)))}; kernels joined to XLA's HLO:"
        f" {d.get('joined_by_name', 0.0):.0%} by name, {d.get('joined_by_neighbour', 0.0):.0%} by neighbour):"
    ]
    for name, s in list(scopes.items())[:n]:
        lines.append(
            f"  {printable(name)}: {secs(float(s.get('gpu_s', 0.0)))} ({s.get('share', 0.0):.0%}),"
            f" {_per_call(s)}"
        )
    return lines


def render_footer(summary: Mapping[str, Any], console: Console) -> None:
    from rich.text import Text

    for line in footer_lines(summary):
        console.print(Text(line, style="dim"))


def html_section(summary: Mapping[str, Any]) -> str:
    """The scopes' table and the paths below them."""
    d = summary.get("device_scopes") or {}
    scopes = d.get("scopes") or {}
    if not scopes:
        return ""
    body = "".join(
        f"<tr><td>{html_text(name)}</td><td>{secs(float(s.get('gpu_s', 0.0)))}</td>"
        f"<td>{s.get('share', 0.0):.0%}</td><td>{s.get('kernels', 0)}</td>"
        f"<td>{html_text(_per_call(s))}</td></tr>"
        for name, s in scopes.items()
    )
    rows = "".join(
        f"<tr><td>{html_text(r['operation'])}</td><td>{html_text(r['path'])}</td>"
        f"<td>{secs(float(r['gpu_s']))}</td><td>{secs(float(r['per_call_s']))}</td><td>{r['kernels']}</td></tr>"
        for r in d.get("rows") or []
    )
    return (
        f"<h2>{HTML_TITLE}</h2>"
        f"<p>Each GPU kernel joined to the HLO instruction it came from and the jax.named_scope around that"
        f" code ({d.get('joined_by_name', 0.0):.0%} of kernels by name,"
        f" {d.get('joined_by_neighbour', 0.0):.0%} by the kernels around them;"
        " kernels XLA ran while compiling:"
        f" {secs(float(d.get('compiling_s', 0.0)))}, not counted).</p>"
        "<table><tr><th>scope</th><th>GPU time</th><th>share</th><th>kernels</th><th>per call</th></tr>"
        f"{body}</table>"
        "<table><tr><th>operation</th><th>scope path</th><th>GPU time</th><th>per call</th>"
        "<th>kernels</th></tr>"
        f"{rows}</table>"
    )
