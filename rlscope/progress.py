"""Transient progress bars for slow steps, shown only to a person watching a terminal.

The bar goes to stderr, and only when stderr is a TTY and the caller has not been asked to be
quiet: redirected output, pipes and CI logs stay clean, and stdout is never touched. The bar
disappears once the step is done (``transient``), leaving only the requested output behind.

``rich`` is imported lazily, so ``import rlscope`` stays light. Descriptions name trace paths and are
shown through :func:`rlscope.text.printable`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rlscope.text import printable

T = TypeVar("T")


def should_show(enabled: bool = True) -> bool:
    """True when a progress bar may be drawn: enabled, and stderr is an interactive terminal."""
    if not enabled:
        return False
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def track(
    iterable: Iterable[T], description: str, total: float | None = None, enabled: bool = True
) -> Iterator[T]:
    """Yield from ``iterable``, with a transient progress bar on stderr when :func:`should_show`.

    ``total`` defaults to ``len(iterable)`` where it has one. When no bar is shown this is a
    plain pass-through: nothing is printed and the items are the same.
    """
    if not should_show(enabled):
        yield from iterable
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    columns = [SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn()]
    if total is not None:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        yield from progress.track(iterable, total=total, description=printable(description))


@contextlib.contextmanager
def spinner(description: str, enabled: bool = True) -> Iterator[None]:
    """A transient spinner on stderr for one step that cannot be counted (same rules as :func:`track`)."""
    if not should_show(enabled):
        yield
        return
    from rich.console import Console
    from rich.text import Text

    with Console(stderr=True).status(Text(printable(description))):
        yield
