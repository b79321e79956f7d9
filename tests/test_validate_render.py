"""``rlscope validate``'s output: one verdict with one reason, and a table that fits 60, 80 and 120
columns without cutting an operation's name or a header, and without empty columns."""

from __future__ import annotations

import sys

import pytest
from rich.console import Console

from rlscope.overhead.validate import render
from rlscope.overhead.validate.cli import parse_args
from rlscope.overhead.validate.verdict import compare

LONG = "a-rather-long-operation-name/step"


def _row(name: str, share: float, err: list[float], ok: bool | None, raw: bool = True) -> dict:
    # plain runs (raw figures known) were set at one main-thread speed; twin runs never are
    adjusted = {"unadjusted_median_error": 0.04, "elasticity": 0.9, "speed_ns": 30.0, "spread": 0.2}
    return {
        "operation": name,
        "share": share,
        "reference_s": [1.25, 1.2, 1.3],
        "raw_s": [1.5] * 3 if raw else [None] * 3,
        "corrected_s": [1.21] * 3,
        "error": err,
        "raw_slowdown": [1.25] * 3 if raw else [None] * 3,
        "ok": ok,
        "tolerance": None if ok is None else 0.08,
        "speed_adjusted": adjusted if raw else None,
    }


def _result(twin: bool = False) -> dict:
    return {
        "reps": 3,
        "rows": [
            _row("[total]", 1.0, [0.01, -0.012, 0.02], True),
            _row("inference", 0.41, [0.03, -0.1, 0.0], False, raw=not twin),
            _row(LONG, 0.02, [0.0] * 3, None, raw=not twin),
        ],
        "twin": {"turn_ms": 50.0} if twin else None,
        "reference": "rlscope.profile start to stop",
        "timer_costs_ns": {"pair": 80.0},
        "profiled": [{"warnings": []}],
        "verdict": {"status": "FAIL", "pass": False, "line": "FAIL: inference -10.0%", "notes": []},
    }


def _text(result: dict, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render.render(result, console)
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("twin", [False, True])
def test_the_table_fits_without_cutting_names_or_headers_and_says_what_it_left_out(width, twin):
    result = _result(twin)
    text = _text(result, width)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= width
    assert "…" not in text
    for name in ("[total]", "inference", LONG):
        assert any(name in x for x in lines), (name, text)
    header = next(x for x in lines if x.startswith("┃"))
    kept, dropped = render.fit_columns(render.cells(result), width)
    for i in kept:
        assert render.COLUMNS[i][0] in header, (render.COLUMNS[i][0], text)
    for i in dropped:
        assert render.COLUMNS[i][0] not in header
        # the note wraps at the console's width, between words of a header too
        assert render.COLUMNS[i][0] in " ".join(text.split("not shown at this width:")[1].split())
    # no empty column: every kept column has a figure in some row
    rows = render.cells(result)
    assert all(any(row[i] not in ("", "-") for row in rows) for i in kept[1:])
    assert ("not shown at this width" in text) == bool(dropped)


def test_a_column_without_figures_is_left_out_and_a_wide_table_shows_every_other():
    headers = [c for c, _ in render.COLUMNS]
    raw_s, unadjusted = headers.index("raw s"), headers.index("unadjusted")
    rows = render.cells(_result())
    assert [row[unadjusted] for row in rows] == ["+4.0%"] * 3
    kept, dropped = render.fit_columns(rows, 400)
    assert dropped == [] and len(kept) == len(render.COLUMNS)
    rows = render.cells(_result(twin=True))
    for row in rows[1:]:
        assert row[raw_s] == "-"  # twin: raw s per operation is not known
        assert row[unadjusted] == "-"  # twin runs share one core's speed: nothing adjusted
    rows = [[*row[:raw_s], "-"] for row in rows]
    kept, dropped = render.fit_columns(rows, 400)
    assert raw_s not in kept and raw_s not in dropped  # nothing to show, nothing to say


def test_the_output_names_the_regime_it_measured():
    assert "regime: plain interleaved runs" in _text(_result(), 120)
    assert "set at one main-thread speed" in _text(_result(), 200)
    assert "regime: twin runs" in _text(_result(twin=True), 120)
    # one row left as measured (its speeds did not narrow its reference runs' spread): the line says
    # the times were set at one speed only in some rows
    partly = _result()
    partly["rows"][1] = {**partly["rows"][1], "speed_adjusted": None, "speed_left": {"narrowing": -0.1}}
    line = render.regime(partly)
    assert "in the rows where that narrowed their reference runs' spread" in line
    assert "every run's times" not in line


def _compared(corrected: list[float], unprofiled: list[float] | None = None) -> dict:
    opts = parse_args(["--", sys.executable, "-c", "pass"])
    unprofiled = unprofiled or [1.0] * len(corrected)
    result = {
        "runs": [{"mode": "unprofiled", "rep": r + 1, "measured_s": u} for r, u in enumerate(unprofiled)],
        "profiled": [
            {"raw_wall_s": 1.5, "corrected_wall_s": c, "corrected_for_overhead": True, "operations": {}}
            for c in corrected
        ],
        "timers": [{}] * len(corrected),
    }
    return compare(result, opts)["verdict"]


@pytest.mark.parametrize(
    ("corrected", "status"),
    [
        ([1.19, 1.21, 1.2, 1.22, 1.18], "FAIL"),  # every plausible error outside ±5%
        ([1.0, 1.01, 0.99, 1.0, 1.0], "PASS"),  # every plausible error inside
        ([0.85, 1.15, 1.02, 0.98, 1.0], "INCONCLUSIVE"),  # the interval reaches across the band
        ([1.0], "PASS"),  # one run: the median alone
        ([1.2], "FAIL"),
    ],
)
def test_the_verdict_is_one_status_with_one_reason(corrected, status):
    v = _compared(corrected)
    assert v["status"] == status and v["line"] == f"{status}: {v['reason']}"
    others = {"PASS", "FAIL", "INCONCLUSIVE"} - {status}
    assert not any(o in v["line"] for o in others)
    assert v["pass"] is (status == "PASS")


def test_one_run_makes_no_claim_about_variability():
    v = _compared([1.0])
    assert v["noise"] is None
    assert not any("vary" in n for n in v["notes"]) and "vary" not in v["line"]
    assert "1 run per mode" in v["reason"] and "±0%" not in v["line"]
    v = _compared([1.0, 1.0], unprofiled=[1.0, 1.2])
    assert any("vary by ±9% (2 runs)" in n for n in v["notes"])
