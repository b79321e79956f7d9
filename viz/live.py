"""The live view on a terminal: tables for ``rlscope top``, one line for logs, and a region kept at
the bottom of a terminal that a running program shares (``rlscope run --live``).

Viz sees only the :class:`~rlscope.analysis.live.LiveView` the analysis made; it never reads a trace.

Why a region of its own for ``rlscope run --live``: the program writes to the same terminal straight
from its own processes, which rich's ``Live`` cannot redirect; a display redrawn in place moves the
cursor up over what it drew last, and would overwrite whatever the program printed meanwhile. So
:class:`PinnedRegion` makes the terminal scroll only the lines above the view (a scrolling region,
as ``apt`` keeps its progress bar), and each redraw is one ``write`` that saves the cursor, draws the
bottom lines and puts the cursor back: the program's output scrolls above, untouched, and a write of
the program's never lands inside the view (the terminal takes one ``write`` at a time).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rlscope.categories import UNANNOTATED
from rlscope.text import printable
from rlscope.viz.colors import category_color, operation_color
from rlscope.viz.terminal import Columns, cell, fit_table

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

    from rlscope.analysis.live import Group, LiveView, OpFigures, Span

__all__ = ["PinnedRegion", "line", "renderable", "text", "waiting_line"]

LINE_OPERATIONS = 6  # operations named in the one-line summary of the first role, at most
LINE_OTHER_OPERATIONS = 2  # and of each other role
LINE_CATEGORIES = ("python", "simulator", "backend", "cuda_api", "rlscope")


def _pct(share: float) -> str:
    p = 100.0 * share
    return "<1%" if 0 < p < 0.5 else f"{p:.0f}%"


def _secs(s: float) -> str:
    return f"{s:.2f}"


def _rate(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:,.0f}" if r >= 100 else f"{r:.1f}"


def _who(group: Group) -> str:
    """``main · pid 812``, ``child ×8``; ``, 2 ended`` when some have."""
    n = len(group.pids)
    who = f"{group.role} · pid {group.pids[0]}" if n == 1 else f"{group.role} ×{n}"
    if group.ended:
        who += " (ended)" if group.ended == n else f" ({group.ended} ended)"
    return who


def waiting_line() -> str:
    return "rlscope: waiting for the run's first process to write"


def _ops_words(span: Span, limit: int) -> str:
    ops = [(name, f) for name, f in span.operations.items() if f.seconds > 0][:limit]
    return "  ".join(f"{name} {_pct(f.share)}" for name, f in ops)


def line(view: LiveView) -> str:
    """One plain line: the run's time, steps/s, the first role's operations and GPU busy in the last
    interval, then each other role's top operations (the run so far once it has ended)."""
    if not view.flushes:
        return waiting_line()
    ended = view.ended
    span_of = (lambda g: g.so_far) if ended else (lambda g: g.interval)
    steps = view.steps_so_far if ended else view.steps_interval
    gpu = view.gpu_so_far if ended else view.gpu_interval
    head = f"rlscope: {'ended, ' if ended else ''}{view.elapsed_s:.0f} s"
    parts = [head]
    if steps is not None:
        parts.append(f"{_rate(steps)} steps/s")
    first = view.groups[0]
    ops = _ops_words(span_of(first), LINE_OPERATIONS)
    if len(view.groups) > 1:
        ops = f"{_who(first)}: {ops}" if ops else _who(first)
    if ops:
        parts.append(ops)
    if gpu is not None:
        parts.append(f"GPU {gpu:.0f}%")
    out = "  ".join(parts)
    for g in view.groups[1:]:
        words = _ops_words(span_of(g), LINE_OTHER_OPERATIONS)
        out += f"  | {_who(g)}" + (f": {words}" if words else "")
    return printable(out)


def _header(view: LiveView, trace: str) -> list[str]:
    state = "run ended" if view.ended else "running"
    ended = sum(g.ended for g in view.groups)
    procs = f"{view.processes} process{'es' if view.processes != 1 else ''}"
    if ended and not view.ended:
        procs += f" ({ended} ended)"
    lines = [f"rlscope top — {trace} — {state} — {view.elapsed_s:.1f} s — {procs}"]
    last = max((g.interval.seconds for g in view.groups), default=0.0)
    if view.steps_operation:
        from rlscope.analysis.live import STEPS_OUTERMOST

        which = ", the main thread's outermost operation" if view.steps_rule == STEPS_OUTERMOST else ""
        lines.append(
            f"steps/s: {_rate(view.steps_interval)} in the last {last:.1f} s,"
            f" {_rate(view.steps_so_far)} so far"
            f" (calls of {view.steps_operation}{which}, summed over processes)"
        )
    if view.gpu_interval is not None or view.gpu_so_far is not None:
        dev = f"{view.gpu_devices} device{'s' if view.gpu_devices != 1 else ''}"
        now = "-" if view.gpu_interval is None else f"{view.gpu_interval:.0f}%"
        all_ = "-" if view.gpu_so_far is None else f"{view.gpu_so_far:.0f}%"
        lines.append(
            f"GPU busy (NVML utilization, mean of {dev}): {now} in the last {last:.1f} s, {all_} so far"
        )
    return lines


_COLUMNS = ("last s", "last %", "last calls", "last /s", "so far s", "so far %", "so far calls", "so far /s")


def _cells(f: OpFigures | None) -> list[str]:
    if f is None:
        return ["-", "-", "-", "-"]
    calls = str(f.calls) if f.calls else "-"
    return [_secs(f.seconds), _pct(f.share), calls, _rate(f.per_s) if f.calls else "-"]


def _group_table(group: Group) -> Columns:
    now, run = group.interval, group.so_far
    title = (
        f"{_who(group)} — last {now.seconds:.1f} s and so far ({run.seconds:.1f} s);"
        " % of main-thread time, exclusive seconds"
    )
    table = Columns(title=title, title_justify="left", header_style="bold")
    table.add_column("phase / operation")
    for header in _COLUMNS:
        table.add_column(header, justify="right")
    phases = list(run.phases)
    several = len(phases) > 1
    for i, phase in enumerate(phases):
        if several:
            if i:
                table.add_section()
            p_now = sum(f.seconds for f in now.phases.get(phase, {}).values())
            p_run = sum(f.seconds for f in run.phases[phase].values())
            share_now = p_now / now.main_s if now.main_s > 0 else 0.0
            share_run = p_run / run.main_s if run.main_s > 0 else 0.0
            table.add_row(
                cell(phase, style="bold"),
                _secs(p_now),
                _pct(share_now),
                "",
                "",
                _secs(p_run),
                _pct(share_run),
                "",
                "",
            )
        for op, f in run.phases[phase].items():
            name = f"  {op}" if several else op
            style = "italic" if op == UNANNOTATED else operation_color(op)
            table.add_row(cell(name, style=style), *_cells(now.phases.get(phase, {}).get(op)), *_cells(f))
    return table


def _category_line(group: Group) -> Text:
    from rich.text import Text

    out = Text("categories (last / so far): ", style="dim")
    names = [c for c in group.so_far.categories if c in LINE_CATEGORIES] + [
        c for c in group.so_far.categories if c not in LINE_CATEGORIES
    ]
    for i, c in enumerate(names):
        if i:
            out.append("  ")
        now = group.interval.categories.get(c)
        out.append(printable(c), style=category_color(c))
        out.append(f" {_pct(now.share) if now else '-'} / {_pct(group.so_far.categories[c].share)}")
    return out


def _fitted(group: Group, console: Console) -> Table:
    return fit_table(
        lambda compact: _group_table(group),
        console,
        ["last calls", "so far calls", "last s", "so far s"],
        ["so far /s"],
        all_in="a wider terminal has all",
    )


class _View:
    """The view as a rich renderable that fits its tables to the console it is drawn on; ``compact``:
    tables without rules (a few lines of a terminal are all it has)."""

    def __init__(self, view: LiveView, trace: str, compact: bool = False) -> None:
        self.view, self.trace, self.compact = view, trace, compact

    def __rich_console__(self, console: Console, options: object) -> object:
        view = self.view
        for text_line in _header(view, self.trace):
            yield cell(text_line, style="bold")
        if not view.flushes:
            yield cell(waiting_line(), style="dim")
            return
        for group in view.groups:
            table = _fitted(group, console)
            if self.compact:
                table.box, table.show_edge = None, False
            yield table
            if group.so_far.categories:
                yield _category_line(group)
        if not view.ended:
            yield cell("raw figures, from the aggregates; the end-of-run analysis corrects them", style="dim")


def renderable(view: LiveView, trace: str, compact: bool = False) -> RenderableType:
    """The whole view (header, a table and a category line per role) for rich to draw."""
    return _View(view, trace, compact)


def text(view: LiveView, trace: str, width: int = 160, color: bool = False, compact: bool = False) -> str:
    """The view as text (ANSI colours with ``color``), for tests, ``--once`` and the pinned region."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        color_system="standard" if color else None,
        force_terminal=color,
        legacy_windows=False,
    )
    console.print(renderable(view, trace, compact))
    return buf.getvalue()


class PinnedRegion:
    """The last lines of a terminal, kept for a view while a program writes above (see module doc)."""

    def __init__(
        self,
        fd: int,
        size: Callable[[], tuple[int, int]] | None = None,
        write: Callable[[bytes], object] | None = None,
    ) -> None:
        """``size``: the terminal's (columns, rows); ``write``: how a frame reaches it (one call)."""
        self.fd = fd
        self.size = size or (lambda: tuple(os.get_terminal_size(fd)))  # type: ignore[return-value]
        self.write = write or (lambda data: os.write(fd, data))
        self.rows = 0  # the lines kept (0: none yet)
        self.screen = (0, 0)

    def height(self, rows: int) -> int:
        """How many lines the view may have on a terminal of ``rows``: a third of it, 3 at least."""
        return max(3, min(rows // 3, 20))

    def _setup(self, cols: int, rows: int) -> bytes:
        k = self.height(rows)
        self.rows, self.screen = k, (cols, rows)
        top = rows - k
        # k new lines make room below the cursor (scrolling what is there up), then back up; the
        # scrolling region moves the cursor home, so it is saved and restored around it
        return b"\n" * k + f"\x1b[{k}A\x1b7\x1b[1;{top}r\x1b8".encode()

    def draw(self, lines: list[str]) -> None:
        """Show ``lines`` (already fitted to the width; cut to the region's height) at the bottom."""
        cols, rows = self.size()
        frame = b""
        if (cols, rows) != self.screen:
            frame += self._teardown() if self.rows else b""
            frame += self._setup(cols, rows)
        k, top = self.rows, rows - self.rows
        shown = lines[:k]
        if len(lines) > k:
            shown[-1] = "… (more in rlscope top)"
        shown += [""] * (k - len(shown))
        body = "".join(f"\x1b[{top + 1 + i};1H\x1b[2K{s}" for i, s in enumerate(shown))
        self.write(frame + f"\x1b7{body}\x1b8".encode())

    def _teardown(self) -> bytes:
        _, rows = self.screen
        top = rows - self.rows
        return f"\x1b7\x1b[r\x1b[{top + 1};1H\x1b[J\x1b8".encode()

    def close(self) -> None:
        """The whole terminal scrolls again, and the view's lines are cleared."""
        if self.rows:
            self.write(self._teardown())
            self.rows, self.screen = 0, (0, 0)
