"""The what-if as people read it: ``rlscope-analyze --what-if``'s table and the table footer's top lines
(the HTML report's section is viz/whatif_html.py).

Both render the summary's ``what_if`` (:mod:`rlscope.analysis.whatif`): per scenario (an operation, a
category of it or its GPU work, a role, made k times faster) the run's wall the replay predicts, the time
saved, and the share of the scenario's own time that lay on the critical path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlscope.analysis.advice.base import pct, secs
from rlscope.text import printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "FOOTER_SCENARIOS",
    "TABLE_ROWS",
    "footer_lines",
    "path_lines",
    "render_footer",
    "render_table",
    "scenarios",
    "table_lines",
    "times",
]

TABLE_ROWS = 20  # the terminal table's scenarios, most time saved first (--json and --html have all)
FOOTER_SCENARIOS = 2  # under the summary table: the operations whose speedup saves most


def times(k: str) -> str:
    return "∞" if k == "inf" else f"{k}×"


def scenarios(what_if: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every scenario as one row (``what``, ``kind``, ``time_s``, ``on_path_share``, ``saving_s`` by k),
    most time saved at the largest k first."""
    rows = []
    for op, parts in (what_if.get("operations") or {}).items():
        for part, e in parts.items():
            if part != "all" and len(parts) == 2:  # its one category is all of it: one row says it
                continue
            what = op if part == "all" else f"{op} · {'GPU work' if part == 'gpu' else part}"
            rows.append({"what": what, "kind": "operation", **e})
    for role, e in (what_if.get("roles") or {}).items():
        n = len(e.get("pids") or [])
        rows.append({"what": f"role {role} ({n} process{'es' if n != 1 else ''})", "kind": "role", **e})
    last = (what_if.get("k") or ["inf"])[-1]
    return sorted(rows, key=lambda r: (-float(r["saving_s"].get(last, 0.0)), r["what"]))


def _savings(row: Mapping[str, Any], ks: list[str], wall: float) -> str:
    return ", ".join(
        f"{times(k)} −{secs(float(row['saving_s'][k]))} ({pct(float(row['saving_s'][k]), wall)})" for k in ks
    )


def footer_lines(summary: Mapping[str, Any], limit: int = FOOTER_SCENARIOS) -> list[str]:
    """A header and the operations whose speedup saves most; [] without ``what_if``."""
    w = summary.get("what_if")
    if not w:
        return []
    ks, wall = list(w.get("k") or []), float(w.get("wall_s", 0.0))
    rows = [r for r in scenarios(w) if r["kind"] == "operation" and float(r["saving_s"].get(ks[-1], 0.0)) > 0]
    if not rows:
        return ["what if: no operation's speedup would shorten the run (the replay of its critical path)"]
    lines = ["what if an operation were k× faster, from the critical path (--what-if: every scenario):"]
    for r in rows[:limit]:
        lines.append(
            f"  {r['what']}: {_savings(r, ks, wall)} of the run;"
            f" {pct(float(r['on_path_share']), 1.0)} of its time on the critical path"
        )
    return lines


def render_footer(summary: Mapping[str, Any], console: Console) -> None:
    from rich.text import Text

    for i, line in enumerate(footer_lines(summary)):
        console.print(Text(printable(line), style="bold" if i == 0 else ""))


def table_lines(summary: Mapping[str, Any], limit: int = TABLE_ROWS) -> list[list[str]]:
    """The table's rows as text: what, its time, on the path, then the time saved at each k."""
    w = summary.get("what_if") or {}
    ks, wall = list(w.get("k") or []), float(w.get("wall_s", 0.0))
    out = []
    for r in scenarios(w)[:limit]:
        saved = [f"{secs(float(r['saving_s'][k]))} {pct(float(r['saving_s'][k]), wall)}" for k in ks]
        out.append([r["what"], secs(float(r["time_s"])), pct(float(r["on_path_share"]), 1.0), *saved])
    return out


def path_lines(w: Mapping[str, Any]) -> list[str]:
    path = w.get("critical_path") or {}
    length = float(path.get("length_s", 0.0))
    parts = sorted(
        ((op, cat, s) for op, cats in (path.get("operations") or {}).items() for cat, s in cats.items()),
        key=lambda x: -x[2],
    )
    shown = ", ".join(f"{op} {cat} {secs(s)} ({pct(s, length)})" for op, cat, s in parts[:6])
    latency = float(path.get("latency_s", 0.0))
    return [
        f"the critical path, {secs(length)}: {shown}"
        + (f"; latencies between them {secs(latency)}" if latency > 0 else "")
    ]


def render_table(summary: Mapping[str, Any], console: Console, limit: int = TABLE_ROWS) -> None:
    """``rlscope-analyze --what-if``: the scenarios most time saved first, the critical path, notes."""
    from rich.table import Table
    from rich.text import Text

    w = summary.get("what_if")
    if not w:
        console.print(Text("what if: not computed for this analysis", style="dim"))
        return
    ks = list(w.get("k") or [])
    wall = secs(float(w.get("wall_s", 0.0)))
    table = Table(
        title=Text(f"what if — the run's wall {wall}, replayed with each scenario k× faster"),
        title_justify="left",
        header_style="bold",
    )
    table.add_column("scenario")
    table.add_column("its time", justify="right")
    table.add_column("on path", justify="right")
    for k in ks:
        table.add_column(f"saved at {times(k)}", justify="right")
    for row in table_lines(summary, limit):
        table.add_row(*(Text(printable(c)) for c in row))
    console.print(table)
    for line in [*path_lines(w), *(w.get("notes") or [])]:
        console.print(Text(printable(line), style="dim"))
