"""What every command that reports a trace does with the analysis: files asked for, table, warnings.

``rlscope-analyze``, ``rlscope demo`` and ``rlscope run`` share it, so they print and write the same
thing; each output is a renderer of the one :class:`~rlscope.analysis.AnalysisResult`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rlscope.errors import RLScopeError
from rlscope.text import printable

if TYPE_CHECKING:
    from rlscope.analysis.result import AnalysisResult

__all__ = ["report", "write_text"]


def write_text(path: str | Path, text: str) -> None:
    """Write a file a command was asked for; a path that cannot be written is one line and status 2."""
    try:
        Path(path).write_text(text if text.endswith("\n") else text + "\n")
    except OSError as e:
        raise RLScopeError(f"{path}: cannot write: {e.strerror or e}") from None


def report(
    result: AnalysisResult,
    json_path: str | None = None,
    html_path: str | None = None,
    quiet: bool = False,
    prog: str = "rlscope-analyze",
    verbose: bool = False,
) -> None:
    """Write the JSON and HTML asked for; unless ``quiet``, print the table (with the correction's
    details when ``verbose``) and each warning on stderr, one line each.

    ``quiet`` leaves only errors on the terminal: the warnings stay in the JSON and HTML.
    """
    # each renderer imported only when its output is asked for (the HTML's is the largest)
    if json_path:
        from rlscope.viz import data_files

        data_files.write_json(result, json_path)
    if html_path:
        from rlscope.viz import html

        html.write(result, html_path)
    if quiet:
        return
    from rlscope.viz import terminal

    terminal.render(result, warnings=False, verbose=verbose)
    for w in result.warnings:
        print(f"{prog}: warning: {printable(w)}", file=sys.stderr)
