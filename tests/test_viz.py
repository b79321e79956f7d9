"""Viz renders analyzer summaries built in code: no trace, no analyzer, no GPU needed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rlscope.viz.colors import category_color
from rlscope.viz.html import NO_GPU_TEXT, render_html, write_html
from rlscope.viz.terminal import has_gpu_time, summary_text


def _op(
    total: float, excl: float, calls: int, cats: dict[str, float], res: dict[str, float] | None = None
) -> dict:
    return {
        "total_s": total,
        "exclusive_s": excl,
        "calls": calls,
        "categories": cats,
        "resources": res or {"cpu_only": excl, "gpu_only": 0.0, "cpu_gpu": 0.0},
    }


def _summary(**over: Any) -> dict:
    base: dict[str, Any] = {
        "schema": "rlscope.summary/1",
        "trace_dir": "/tmp/trace-cpu",
        "wall_s": 10.0,
        "unannotated_s": 1.0,
        "categories": {"python": 4.0, "simulator": 6.0},
        "unannotated_categories": {"python": 1.0},
        "operations": {
            "inference": _op(3.0, 3.0, 100, {"python": 3.0}),
            "simulation": _op(6.0, 6.0, 100, {"simulator": 5.617, "python": 0.383}),
        },
        "phases": {"training": {"wall_s": 10.0, "unannotated_s": 1.0, "operations": {}}},
        "processes": [{"pid": 1, "host": "h", "wall_s": 10.0, "events": 400, "complete": True}],
        "warnings": [],
    }
    base["phases"]["training"]["operations"] = base["operations"]
    base.update(over)
    return base


@pytest.fixture
def cpu_summary() -> dict:
    return _summary()


@pytest.fixture
def empty_summary() -> dict:
    return _summary(
        trace_dir="/tmp/trace-empty",
        wall_s=2.5,
        unannotated_s=2.5,
        categories={"python": 2.5},
        unannotated_categories={"python": 2.5},
        operations={},
        phases={},
        warnings=["process 7 produced no events"],
    )


@pytest.fixture
def gpu_summary() -> dict:
    ops = {
        "backprop": _op(
            4.0,
            4.0,
            50,
            {"python": 0.5, "backend": 2.0, "cuda_api": 1.5, "gpu_kernel": 3.0, "gpu_memcpy": 0.2},
            {"cpu_only": 1.0, "gpu_only": 0.2, "cpu_gpu": 3.0},
        ),
        "inference": _op(
            2.0,
            2.0,
            50,
            {"python": 1.0, "backend": 0.5, "cuda_api": 0.5, "gpu_kernel": 0.4},
            {"cpu_only": 1.6, "gpu_only": 0.0, "cpu_gpu": 0.4},
        ),
    }
    return _summary(
        trace_dir="/tmp/trace-gpu",
        wall_s=7.0,
        unannotated_s=1.0,
        categories={"python": 2.5, "backend": 2.5, "cuda_api": 2.0, "gpu_kernel": 3.4, "gpu_memcpy": 0.2},
        unannotated_categories={"python": 1.0},
        operations=ops,
        phases={"training": {"wall_s": 7.0, "unannotated_s": 1.0, "operations": ops}},
    )


@pytest.fixture
def two_phase_summary() -> dict:
    train = {"inference": _op(2.0, 2.0, 20, {"python": 2.0}), "backprop": _op(3.0, 3.0, 20, {"backend": 3.0})}
    evaluate = {"inference": _op(1.0, 1.0, 10, {"python": 1.0})}
    return _summary(
        trace_dir="/tmp/trace-phases",
        wall_s=7.0,
        unannotated_s=1.0,
        categories={"python": 4.0, "backend": 3.0},
        unannotated_categories={"python": 1.0},
        operations={
            "inference": _op(3.0, 3.0, 30, {"python": 3.0}),
            "backprop": _op(3.0, 3.0, 20, {"backend": 3.0}),
        },
        phases={
            "training": {"wall_s": 5.5, "unannotated_s": 0.5, "operations": train},
            "evaluation": {"wall_s": 1.5, "unannotated_s": 0.5, "operations": evaluate},
        },
    )


def _row(text: str, first_cell: str, endswith: bool = False) -> list[str]:
    """Cells of the table row whose first cell is (or, ``endswith``, ends with) ``first_cell``."""
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)[1:-1]]  # rich draws cells between │
        if cells and (cells[0].endswith(first_cell) if endswith else cells[0] == first_cell):
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{text}")


# --------------------------------------------------------------------------- terminal


def test_terminal_rows_numbers_and_total(cpu_summary: dict) -> None:
    text = summary_text(cpu_summary)
    assert "/tmp/trace-cpu" in text and "wall 10.000 s" in text
    sim = _row(text, "simulation")
    assert sim[:4] == ["simulation", "6.000", "60%", "6.000"]
    assert "5.617 (94%)" in sim and "0.383 (6%)" in sim
    assert _row(text, "[unannotated]")[:4] == ["[unannotated]", "1.000", "10%", "1.000"]
    total = _row(text, "total")
    assert float(total[3]) == pytest.approx(cpu_summary["wall_s"])
    assert total[1] == "10.000"
    # Sorted by total time, largest first; no GPU columns without GPU time.
    assert text.index("simulation") < text.index("inference") < text.index("[unannotated]")
    assert "GPU only" not in text and "per phase" not in text and "note:" not in text


def test_terminal_empty(empty_summary: dict) -> None:
    text = summary_text(empty_summary)
    assert "no operations recorded" in text
    assert "warning: process 7 produced no events" in text
    assert _row(text, "total")[3] == "2.500"


def test_terminal_gpu_columns(gpu_summary: dict) -> None:
    assert has_gpu_time(gpu_summary)
    text = summary_text(gpu_summary)
    assert "CPU only s" in text and "GPU only s" in text and "CPU+GPU s" in text
    backprop = _row(text, "backprop")
    assert "2.000 (50%)" in backprop and "1.500 (38%)" in backprop  # backend, cuda_api
    assert backprop[-4:] == ["1.000", "0.200", "3.000", "50"]  # resources, calls
    assert "gpu_kernel" not in text  # GPU categories show up as overlap, not as CPU-share columns
    assert float(_row(text, "total")[3]) == pytest.approx(gpu_summary["wall_s"])


def test_terminal_phases(two_phase_summary: dict) -> None:
    text = summary_text(two_phase_summary)
    assert "per phase" in text
    assert "training (79% of run)" in text and "evaluation (21% of run)" in text
    assert text.index("training (") < text.index("evaluation (")


def test_terminal_mismatch_and_markup_safe(cpu_summary: dict) -> None:
    cpu_summary["operations"]["[bold]odd[/bold]"] = _op(0.5, 0.5, 1, {"python": 0.5})
    text = summary_text(cpu_summary)
    assert "[bold]odd[/bold]" in text  # names are not rich markup
    assert "exclusive times sum to 10.500 s, not the wall time 10.000 s" in text


def test_wrong_schema_refused(cpu_summary: dict) -> None:
    cpu_summary["schema"] = "rlscope.summary/2"
    with pytest.raises(ValueError, match="schema"):
        summary_text(cpu_summary)
    with pytest.raises(ValueError, match="schema"):
        render_html(cpu_summary)


def test_import_rlscope_does_not_import_rich_or_plotly() -> None:
    import subprocess
    import sys

    code = "import sys, rlscope; print('rich' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --------------------------------------------------------------------------- html


def _assert_self_contained(page: str) -> None:
    assert "<script" in page and "plotly" in page.lower()
    assert not re.search(r"<script[^>]*\bsrc=", page)  # plotly.js inline, nothing fetched
    assert "cdn.plot.ly/plotly" not in page
    assert page.count("plotly.js v") == 1  # the bundle is embedded once, not per chart


def test_html_cpu(cpu_summary: dict, tmp_path: Path) -> None:
    path = tmp_path / "out" / "report.html"
    write_html(cpu_summary, str(path))
    assert path.exists()
    page = path.read_text(encoding="utf-8")
    _assert_self_contained(page)
    for name in ("inference", "simulation", "[unannotated]", "/tmp/trace-cpu"):
        assert name in page
    assert NO_GPU_TEXT in page
    assert "One phase (training)" in page
    assert "No warnings." in page
    assert "10.000 s" in page


def test_html_gpu(gpu_summary: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    write_html(gpu_summary, str(path))
    page = path.read_text(encoding="utf-8")
    _assert_self_contained(page)
    assert NO_GPU_TEXT not in page
    for name in ("backprop", "inference", "gpu_kernel", "gpu_memcpy", "CPU+GPU"):
        assert name in page
    assert f'"color":"{category_color("gpu_kernel")}"' in page  # gpu_kernel's fixed colour, in a chart


def test_html_two_phases(two_phase_summary: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    write_html(two_phase_summary, str(path))
    page = path.read_text(encoding="utf-8")
    _assert_self_contained(page)
    assert page.count('class="plotly-graph-div"') == 2  # categories + phases (no GPU chart)
    for name in ("training", "evaluation", "inference", "backprop"):
        assert name in page


def test_html_empty_says_so(empty_summary: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    write_html(empty_summary, str(path))
    page = path.read_text(encoding="utf-8")
    assert "No operations recorded" in page
    assert NO_GPU_TEXT in page and "No phases recorded" in page
    assert "process 7 produced no events" in page
    assert "[unannotated]" in page  # all the time is unannotated, and it still gets its bar
    _assert_self_contained(page)


def test_html_escapes_names(cpu_summary: dict) -> None:
    """Markup in a name is text; control and bidi characters show as on the terminal (\\x1b, \\u202e)."""
    script = "</script><script>alert(1)</script>"
    control = "\x1b]0;evil\x07\u202e"
    cpu_summary["operations"] = {
        "<img src=x onerror=alert(1)>": _op(9.0, 9.0, 1, {"python": 9.0}),
        script: _op(5.0, 5.0, 1, {"python": 5.0}),
        control: _op(4.0, 4.0, 1, {"python": 4.0}),
    }
    cpu_summary["phases"]["training"]["operations"] = cpu_summary["operations"]
    cpu_summary["warnings"] = ["<b>bad</b>", f"w {control}"]
    page = render_html(cpu_summary)
    assert "<img src=x" not in page and "<b>bad</b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script>alert" not in page and "&lt;/script&gt;&lt;script&gt;alert(1)" in page
    assert "\\x1b]0;evil\\x07\\u202e" in page and "w \\x1b]0;evil" in page
    assert "\x1b]0;evil" not in page and "\u202e" not in page and "\\u001b]0;evil" not in page


def test_calibration_table_says_where_each_cost_is_paid():
    from rich.console import Console

    from rlscope.viz.terminal import render_calibration

    cal = {
        "key": {"host": "h", "python": "3.11", "torch": "2.13"},
        "costs_ns": {
            "scope": {"inside": 120.0, "outside": 30.0, "total": 150.0, "spread": 0.05},
            "writer": {"per_event": 80.0, "spread": 0.1},
            "memory": {"per_event": 104.0, "spread": 0.08},
        },
        "refused": [{"entry": "nvml", "reason": "nvml: refused: unstable, spread 228%"}],
        "skipped": {},
    }
    console = Console(record=True, width=200)
    render_calibration(cal, console)
    rows = {line.split("│")[1].strip(): line for line in console.export_text().splitlines() if "│" in line}
    assert "on the allocating thread" in rows["memory"] and "104" in rows["memory"]
    assert "GIL stall" in rows["writer"] and "GIL" not in rows["memory"]
    assert "refused: unstable" in rows["nvml"]
