"""``rlscope validate``'s table and verdict on the terminal (rich).

Operation names, notes and the analyzer's warnings hold the program's names and paths: they are shown
through :func:`rlscope.text.printable` (one line, no terminal control) and never read as rich markup.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from rlscope.text import printable


def distinct_warnings(profiled: list[dict[str, Any]]) -> list[str]:
    """The profiled runs' analyzer warnings, once each: two that differ only in their figures (a
    switch count, an event count) are one line, the first run's, with how many runs said it.

    Why: every repetition's analysis says the same thing about the same program, and five lines of
    "only 5 window switches" / "only 4 window switches" bury the verdict under them."""
    seen: dict[str, list[Any]] = {}
    for p in profiled:
        for w in dict.fromkeys(p["warnings"]):
            key = re.sub(r"[0-9][0-9,.]*", "#", w)
            if key in seen:
                seen[key][1] += 1
            else:
                seen[key] = [w, 1]
    n = len(profiled)
    return [w if k == n or n < 2 else f"{w} ({k} of {n} runs)" for w, k in seen.values()]


def _spread(values: list[float | None], fmt: str, spread: bool = True) -> str:
    """``median [min–max]`` of the values there are (the median alone for one, or when asked)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    med = format(statistics.median(vals), fmt)
    if len(vals) == 1 or not spread:
        return med
    return f"{med} [{format(min(vals), fmt)}–{format(max(vals), fmt)}]"


def _times(values: list[float | None]) -> str:
    """A slowdown's median as ``1.23x``; ``-`` when none is known."""
    text = _spread(values, ".2f", spread=False)
    return text if text == "-" else text + "x"


# the table's columns, most wanted first: at a narrow width the last ones are left out (with a
# note), never an operation's name cut
COLUMNS: tuple[tuple[str, str], ...] = (
    ("operation", "left"),
    ("corrected error", "right"),
    ("ok", "center"),
    ("unadjusted", "right"),
    ("share", "right"),
    ("unprofiled / timers s", "right"),
    ("corrected s", "right"),
    ("raw slowdown", "right"),
    ("raw s", "right"),
)
_OK = {None: "", True: "yes", False: "NO"}
_OK_STYLE = {True: "green", False: "red"}


def _unadjusted(row: dict[str, Any]) -> str:
    """The median error before the runs were set at one speed; ``-`` where they were not."""
    a = row.get("speed_adjusted") or {}
    e = a.get("unadjusted_median_error")
    return "-" if e is None else format(e, "+.1%")


def cells(result: dict[str, Any]) -> list[list[str]]:
    """The table's rows as the terminal shows them (names through :func:`rlscope.text.printable`, so
    widths are measured on what is shown), in ``COLUMNS`` order."""
    out = []
    for r in result["rows"]:
        out.append(
            [
                printable(r["operation"]),
                _spread(r["error"], "+.1%"),
                _OK[r["ok"]],
                _unadjusted(r),
                f"{r['share']:.0%}",
                _spread(r["reference_s"], ".3f"),
                _spread(r["corrected_s"], ".3f", spread=False),
                _times(r["raw_slowdown"]),
                _spread(r["raw_s"], ".3f", spread=False),
            ]
        )
    return out


def fit_columns(rows: list[list[str]], width: int) -> tuple[list[int], list[int]]:
    """(kept, dropped) column indices: the columns with any figure (a column of ``-`` alone says
    nothing), then as many as fit ``width`` in ``COLUMNS`` order. A column is as wide as its widest
    cell or its header; a rich table adds 3 characters a column and 1 for its edge."""

    def need(i: int) -> int:
        return max([len(COLUMNS[i][0]), *(len(row[i]) for row in rows)]) + 3

    filled = [i for i in range(len(COLUMNS)) if i == 0 or any(row[i] not in ("", "-") for row in rows)]
    kept: list[int] = []
    used = 1
    for i in filled:
        if i == 0 or used + need(i) <= width:
            kept.append(i)
            used += need(i)
    return kept, [i for i in range(len(COLUMNS)) if i not in kept and i in filled]


def regime(result: dict[str, Any]) -> str:
    """Which comparison the runs made, in one line."""
    if result.get("twin"):
        return (
            f"regime: twin runs, timed and profiled side by side in turns of {result['twin']['turn_ms']:g} ms"
            f" on one core; total: the timed run's time from {result['reference']}, its waits and its"
            " timers' cost taken off; operations: inclusive time under plain timers"
        )
    adjusted = any(r.get("speed_adjusted") for r in result["rows"])
    left = any(r.get("speed_left") for r in result["rows"])
    speed = ""
    if adjusted and left:
        speed = (
            "; times set at one main-thread speed (speed probe) in the rows where that narrowed"
            " their reference runs' spread"
        )
    elif adjusted:
        speed = "; every run's times set at one main-thread speed (speed probe)"
    return (
        "regime: plain interleaved runs (unprofiled, timers, profiled; the order rotated per repetition);"
        f" total: unprofiled time from {result['reference']}; operations: inclusive time under plain"
        f" timers (their own cost, {result['timer_costs_ns']['pair']:.0f} ns per scope, taken off)" + speed
    )


def render(result: dict[str, Any], console: Any = None) -> None:
    """The comparison table, the regime, notes, and the verdict (one line, last)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 132))  # a log file: no wrapped cells
    n = result["reps"]
    rows = cells(result)
    kept, dropped = fit_columns(rows, console.width)
    table = Table(
        title=escape(f"rlscope validate: {n} run{'s' if n > 1 else ''} per mode, median [min–max]"),
        title_justify="left",
        header_style="bold",
    )
    for i in kept:
        header, justify = COLUMNS[i]
        table.add_column(header, justify=justify, no_wrap=True, overflow="fold")  # type: ignore[arg-type]
    for r, row in zip(result["rows"], rows, strict=True):
        texts = []
        for i in kept:
            text = escape(row[i])
            if COLUMNS[i][0] == "ok" and r["ok"] is not None:
                text = f"[{_OK_STYLE[r['ok']]}]{text}[/]"
            texts.append(text)
        table.add_row(*texts)
    console.print(table)
    if dropped:
        left = ", ".join(COLUMNS[i][0] for i in dropped)
        console.print(f"not shown at this width: {left} (a wider terminal or --json shows them)")
    console.print(escape(printable(regime(result))))
    for note in result["verdict"].get("notes", []):
        console.print(f"note: {escape(printable(note))}")
    for w in distinct_warnings(result["profiled"]):
        console.print(f"analyzer: {escape(printable(w))}", style="yellow")
    status = result["verdict"].get("status", "PASS" if result["verdict"]["pass"] else "FAIL")
    style = {"PASS": "bold green", "FAIL": "bold red"}.get(status, "bold yellow")
    console.print(f"[{style}]{escape(printable(result['verdict']['line']))}[/]")
