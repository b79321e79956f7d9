"""The report's timeline, ``share``/``share-check``, the simulator benchmark's report and ``rlscope
validate`` show names as the rest of rlscope does: escaped on the terminal (one line each, never read
as rich markup) and in HTML (plotly labels, hover text and role bands included)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from rlscope.analysis import sharing
from rlscope.cli import share_check
from rlscope.errors import RLScopeError
from rlscope.overhead.validate import render as validate_render
from rlscope.text import html_text, printable
from rlscope.viz import sim_report
from rlscope.viz.timeline import timeline_section
from tests.test_escaping import CLEAR, LINK, MARKUP, PLAIN, TITLE, _hidden

TAG = "<img src=x onerror=alert(1)>"
PLACEHOLDER = "k{plot_id}"  # the placeholder plotly fills in a post script with the chart's div id


def _strings(value: Any) -> list[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _console(width: int = 300) -> Console:
    return Console(record=True, width=width, file=io.StringIO(), color_system=None)


# --------------------------------------------------------------------------- the HTML timeline


def _timeline() -> dict[str, Any]:
    """Two processes (roles ``driver`` and TITLE): one thread row each, operations named by the
    evil names, and a GPU stream row whose kernels are named LINK, TAG and PLACEHOLDER."""
    ops = [TITLE, CLEAR, LINK, MARKUP, PLAIN, TAG]
    rows = ["driver · pid 1", f"worker{CLEAR}", f"worker{CLEAR} · GPU 0 stream 7"]
    n = len(ops)
    return {
        "window_s": (0.0, 1e-3),
        "rows": rows,
        "groups": [{"role": "driver", "first": 0, "last": 0}, {"role": TITLE, "first": 1, "last": 2}],
        "processes": {"row": [], "start_s": [], "end_s": []},
        "ops": {
            "row": [rows[0], rows[1]] * (n // 2),
            "name": ops,
            "start_s": np.arange(n) * 1e-4,
            "end_s": np.arange(n) * 1e-4 + 5e-5,
            "depth": np.zeros(n, np.int64),
        },
        "gpu": {
            "row": [rows[2]] * 3,
            "name": [LINK, TAG, PLACEHOLDER],
            "category": ["gpu_kernel"] * 3,
            "start_s": np.array([1e-4, 3e-4, 5e-4]),
            "end_s": np.array([2e-4, 4e-4, 6e-4]),
        },
        "total_intervals": n + 3,
        "drawn_intervals": n + 3,
        "capped": False,
        "shown_until_s": 1e-3,
        "max_intervals": 100_000,
    }


def _payload(post_script: str) -> dict[str, Any]:
    """The data ``timeline.js`` is called with, read back from the call in ``post_script``."""
    start = post_script.index("rlscopeTimeline(")
    start = post_script.index("{", post_script.index(", ", start))
    return json.JSONDecoder().raw_decode(post_script[start:])[0]


def test_timeline_labels_legend_roles_and_hover_text_are_escaped() -> None:
    seen: dict[str, Any] = {}

    def fig_html(fig: Any, post_script: str = "", div_id: str = "") -> str:
        seen.update(fig=fig.to_plotly_json(), post_script=post_script)
        return "<div></div>"

    report = {"run_s": 1e-3, "window_choice": "user", "timeline": _timeline()}
    section = timeline_section(report, fig_html)
    fig, payload = seen["fig"], _payload(seen["post_script"])
    legend = [t["name"] for t in fig["data"]]
    for name in (TITLE, CLEAR, LINK, MARKUP, PLAIN, TAG):
        assert html_text(name, quote=False) in legend
    assert fig["layout"]["yaxis"]["ticktext"][1] == html_text(f"worker{CLEAR}", quote=False)
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["driver", html_text(TITLE, quote=False)]
    assert payload["labels"] == [html_text(k, quote=False) for k in (LINK, TAG, PLACEHOLDER)]
    for text in (*_strings(fig), *_strings(payload), section, seen["post_script"]):
        assert _hidden(text) == [] and "<img" not in text, text


def test_timeline_html_is_escaped_and_its_data_stays_data() -> None:
    """As plotly writes the chart (plotly.js itself left out) and fills the post script's placeholder."""
    import plotly.io as pio

    def fig_html(fig: Any, post_script: str = "", div_id: str = "") -> str:
        return pio.to_html(
            fig, full_html=False, include_plotlyjs=False, post_script=post_script, div_id=div_id
        )

    report = {"run_s": 1e-3, "window_choice": "user", "timeline": _timeline()}
    section = timeline_section(report, fig_html)
    assert _hidden(section) == [] and "<img" not in section
    # a raw ESC or RLO is a \\u escape in JSON; the escaped names' backslashes are doubled there
    assert "\\u001b" not in section and "\\u202e" not in section.replace("\\\\u202e", "")
    call = section[section.index("rlscopeTimeline(document.getElementById(") :]
    assert html_text(PLACEHOLDER, quote=False) in _payload(call)["labels"]  # not the chart's div id


# --------------------------------------------------------------------------- share and share-check


def _inputs() -> dict[str, Any]:
    return {
        "gpu_busy_fraction": 0.05,
        "busy_periods_per_s": 1000.0,
        "busy_period_residual_us": 20.0,
        "busy_period_mean_us": 50.0,
        "host_cpus": 16,
        "cpu_cores_per_copy": 1.0,
        "per_copy_bytes": 1 << 30,
        "context_bytes": 500 << 20,
        "floor_bytes": 100 << 20,
        "cyclic_peak_bytes": 300 << 20,
        "device_memory_bytes": 80 << 30,
        "device": f"GPU {TITLE}",
        "notes": [f"op {CLEAR}", MARKUP],
    }


def test_share_estimate_shows_the_device_and_notes_escaped_one_line_each() -> None:
    text = share_check.estimate_text(sharing.estimate(_inputs(), (1, 2)), width=200)
    lines = text.splitlines()
    assert all(_hidden(line) == [] for line in lines)
    assert f"device GPU {printable(TITLE)})" in lines[0]
    assert f"note: op {printable(CLEAR)}" in lines and f"note: {MARKUP}" in lines


def test_share_check_warnings_and_command_are_escaped_one_line_each(monkeypatch, tmp_path, capsys) -> None:
    def probe(env: dict[str, str]) -> dict[str, Any]:
        raise RLScopeError(f"probe {TITLE} failed")

    def estimate_of(trace: str, ks: tuple[int, ...]) -> dict[str, Any]:
        raise RLScopeError(f"{trace}: {CLEAR}")

    def run_copies(command: list[str], k: int, env: dict[str, str], timeout: float, traces: Any) -> dict:
        return {"k": k, "wall_s": [1.0] * k, "exit_codes": [0] * k, "mean_wall_s": 1.0, "mean_cores": 1.0}

    monkeypatch.setattr(share_check, "switch_probe", probe)
    monkeypatch.setattr(share_check, "estimate_of", estimate_of)
    monkeypatch.setattr(share_check, "run_copies", run_copies)
    res = share_check.check([f"prog{LINK}", "-x"], (2,), f"t{TITLE}", tmp_path, 1.0, False)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"rlscope share-check: warning: probe {printable(TITLE)} failed; context switches left out",
        f"rlscope share-check: warning: no estimate: t{printable(TITLE)}: {printable(CLEAR)}",
    ]
    text = share_check.check_text(res, width=200)
    assert all(_hidden(line) == [] for line in text.splitlines())
    assert f"prog{printable(LINK)} -x" in text


# --------------------------------------------------------------------------- simulator benchmark report

WHY = "boom\n\x1b[2J[/dim] [bold]x"  # an exception's text: a newline, a control sequence, markup


def _benchmark() -> dict[str, Any]:
    row = {"num_envs": 4, "k": 1, "steps_per_sec": 1e5}
    return {
        "meta": {"gpu": f"GPU {TITLE}", "date": "2025-01-01", "torch": MARKUP, "command": f"run {TAG}"},
        "cartpole": [{**row, "backend": "torch"}, {**row, "backend": f"mine{CLEAR}"}],
        "fused_variants": [{"variant": f"v{LINK}", "steps_per_sec": 1e6, "mean_return": 1.0}],
        "targets": [{"target": f"t{TITLE}", "required": 1.0, "measured": 2.0, "met": True, "note": WHY}],
        "profiled": {"torch": {"num_envs": 4, "steps_per_sec": 1e5, "trace": f"/tmp/killed{CLEAR}"}},
        "breakdown": {"torch": {f"[bold]cat{TITLE}": 0.5, "_wall": 1.0}},
        "skipped": [{"what": f"profiled {MARKUP}", "why": WHY}],
    }


def test_benchmark_table_shows_its_text_escaped_never_as_markup() -> None:
    console = _console()
    sim_report.render_table(_benchmark(), console)
    text = console.export_text()
    assert _hidden(text.replace("\n", "")) == []
    assert f"GPU {printable(TITLE)}" in text.splitlines()[0] and MARKUP in text.splitlines()[0]
    for shown in (f"mine{printable(CLEAR)}", f"v{printable(LINK)}", f"t{printable(TITLE)}"):
        assert shown in text
    assert f"/tmp/killed{printable(CLEAR)}" in text and f"[bold]cat{printable(TITLE)} %" in text
    assert f"skipped profiled {MARKUP}: {printable(WHY)}" in text
    assert "met" in text  # the verdict's own markup still styles it


def test_benchmark_page_shows_its_text_escaped(tmp_path: Path) -> None:
    page = sim_report.write_html(_benchmark(), tmp_path / "b.html").read_text()
    assert "<img" not in page and TAG not in page and html_text(f"run {TAG}") in page
    assert html_text(f"GPU {TITLE}") in page and html_text(WHY) in page
    assert "\x1b" not in page and "[/dim]" in page  # markup is text in HTML too


# --------------------------------------------------------------------------- rlscope validate


def _validation() -> dict[str, Any]:
    row = {
        "operation": TITLE,
        "share": 1.0,
        "reference_s": [1.0, 1.1],
        "raw_s": [1.2, 1.2],
        "corrected_s": [1.0, 1.0],
        "error": [0.01, 0.02],
        "raw_slowdown": [1.2, 1.2],
        "ok": True,
        "tolerance": 0.08,
        "speed_adjusted": None,
    }
    return {
        "reps": 2,
        "rows": [row, {**row, "operation": CLEAR}, {**row, "operation": MARKUP, "ok": None}],
        "twin": None,
        "reference": "rlscope.profile start to stop",
        "timer_costs_ns": {"pair": 80.0},
        "profiled": [{"warnings": [f"w {LINK}"]}, {"warnings": [f"w {LINK}"]}],
        "verdict": {"status": "FAIL", "pass": False, "line": f"FAIL: {TITLE} +10%", "notes": [f"n {CLEAR}"]},
    }


@pytest.mark.parametrize("width", [60, 200])
def test_validate_shows_names_notes_and_warnings_escaped_one_line_each(width: int) -> None:
    console = _console(width)
    validate_render.render(_validation(), console)
    text = console.export_text()
    assert _hidden(text.replace("\n", "")) == []
    assert max(len(line) for line in text.splitlines()) <= width
    flat = " ".join(text.split())  # notes and warnings wrap at 60 columns
    for shown in (printable(TITLE), printable(CLEAR), MARKUP):
        assert any(shown in line for line in text.splitlines())  # a name is never cut or wrapped
    assert f"note: n {printable(CLEAR)}" in flat and f"analyzer: w {printable(LINK)}" in flat
    assert text.splitlines()[-1] == f"FAIL: {printable(TITLE)} +10%"
