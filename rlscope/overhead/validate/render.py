"""``rlscope validate``'s table and verdict on the terminal (rich)."""

from __future__ import annotations

import re
import statistics
from typing import Any


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


def render(result: dict[str, Any], console: Any = None) -> None:
    """The comparison table and the verdict line."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 132))  # a log file: no wrapped cells
    n = result["reps"]
    table = Table(
        title=escape(f"rlscope validate: {n} run{'s' if n > 1 else ''} per mode, median [min–max]"),
        title_justify="left",
        header_style="bold",
    )
    table.add_column("operation")
    for col in ("share", "unprofiled / timers s", "raw s", "corrected s", "corrected error", "raw slowdown"):
        table.add_column(col, justify="right")
    table.add_column("ok", justify="center")
    for r in result["rows"]:
        ok = {None: "", True: "[green]yes[/]", False: "[red]NO[/]"}[r["ok"]]
        table.add_row(
            escape(r["operation"]),
            f"{r['share']:.0%}",
            escape(_spread(r["reference_s"], ".3f")),
            _spread(r["raw_s"], ".3f", spread=False),
            _spread(r["corrected_s"], ".3f", spread=False),
            escape(_spread(r["error"], "+.1%")),
            _times(r["raw_slowdown"]),
            ok,
        )
    console.print(table)
    if result.get("twin"):
        console.print(
            f"twin runs: timed and profiled side by side, in turns of {result['twin']['turn_ms']:g} ms on"
            f" one core; total: the timed run's time from {result['reference']}, its waits and its timers'"
            " cost taken off; operations: inclusive time under plain timers (raw per operation not shown:"
            " it holds the waits)"
        )
    else:
        console.print(
            f"total: unprofiled time from {result['reference']}; operations: inclusive time under plain"
            f" timers (their own cost, {result['timer_costs_ns']['pair']:.0f} ns per scope, taken off)"
        )
    for w in distinct_warnings(result["profiled"]):
        console.print(f"analyzer: {escape(w)}", style="yellow")
    style = "bold green" if result["verdict"]["pass"] else "bold red"
    console.print(f"[{style}]{escape(result['verdict']['line'])}[/]")
