"""The terminal table fits the width it has: columns are left out, never a name or number broken."""

from __future__ import annotations

import io
import re

import pytest

from rlscope.viz.terminal import render_summary, summary_text

CATEGORIES = ("python", "simulator", "backend", "cuda_api")
HEADERS = {
    "operation",
    "total s",
    "± s",
    "raw s",
    "% run",
    "excl s",
    *CATEGORIES,
    "CPU only s",
    "GPU only s",
    "CPU+GPU s",
    "calls",
    "phase / operation",
    "% phase",
}


def _op(total: float, cats: dict[str, float], calls: int = 100) -> dict:
    return {
        "total_s": total,
        "exclusive_s": total,
        "calls": calls,
        "uncertainty_s": 0.012,
        "categories": cats,
        "resources": {"cpu_only": total / 2, "gpu_only": total / 4, "cpu_gpu": total / 4},
    }


def _summary() -> dict:
    ops = {
        "simulation": _op(6.0, {"simulator": 5.617, "python": 0.383}),
        "inference": _op(3.0, {"python": 1.0, "backend": 1.5, "cuda_api": 0.5}),
        "backprop": _op(2.5, {"python": 0.5, "backend": 1.0, "cuda_api": 1.0}, 20),
        "compute_advantages": _op(0.5, {"python": 0.5}, 20),
    }
    return {
        "schema": "rlscope.summary/1",
        "trace_dir": "/tmp/rlscope-trace",
        "wall_s": 13.0,
        "unannotated_s": 1.0,
        "categories": {"python": 3.383, "simulator": 5.617, "backend": 2.5, "cuda_api": 1.5},
        "unannotated_categories": {"python": 1.0},
        "operations": ops,
        "phases": {
            "training": {"wall_s": 11.0, "unannotated_s": 0.5, "operations": ops},
            "evaluation": {"wall_s": 2.0, "unannotated_s": 0.5, "operations": {"inference": _op(1.5, {})}},
        },
        "processes": [{"pid": 1, "host": "h", "wall_s": 13.0, "events": 400, "complete": True}],
        "corrected_for_overhead": True,
        "raw": {
            "wall_s": 15.0,
            "unannotated_s": 1.2,
            "operations": {n: {"total_s": 1.2 * o["total_s"]} for n, o in ops.items()},
        },
        "warnings": [],
    }


def _tokens(line: str) -> list[str]:
    return [t for t in re.split(r"[\s│┃|]+", line) if t]


def _assert_nothing_broken(text: str, width: int, names: list[str]) -> None:
    lines = text.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), text
    assert "…" not in text, text  # no cell cut short
    for name in names:
        assert any(name in _tokens(line) for line in lines), (name, text)
        for line in lines:
            for tok in _tokens(line):
                assert tok == name or len(tok) < 3 or not name.startswith(tok), (name, tok, text)
    for line in lines:  # every header line names whole columns only
        if _tokens(line)[:1] in (["operation"], ["phase"]):
            cells = [c.strip() for c in re.split(r"[│┃]| {2,}", line) if c.strip()]
            assert set(cells) <= HEADERS, (cells, text)


@pytest.mark.parametrize("width", [50, 80, 120])
def test_table_at_width_has_no_split_names_and_whole_columns(width):
    summary = _summary()
    text = summary_text(summary, width=width)
    names = [*summary["operations"], "[unannotated]", "training", "evaluation"]
    cats_shown = [c for c in CATEGORIES if any(c in _tokens(line) for line in text.splitlines())]
    _assert_nothing_broken(text, width, names + cats_shown)
    assert "python" in cats_shown  # the outermost category stays as long as anything does
    if width < 160:
        assert "not shown, for width" in text  # says what was left out


def test_wide_table_keeps_every_column():
    text = summary_text(_summary(), width=220)
    assert "not shown" not in text
    for header in ("± s", "raw s", "excl s", "CPU only s", "CPU+GPU s", "calls", *CATEGORIES):
        assert header in text


def test_piped_output_uses_columns(monkeypatch):
    from rich.console import Console

    monkeypatch.setenv("COLUMNS", "60")
    buf = io.StringIO()
    render_summary(_summary(), Console(file=buf, color_system=None))  # not a terminal: COLUMNS, else 80
    _assert_nothing_broken(buf.getvalue(), 60, [*_summary()["operations"], "[unannotated]"])
