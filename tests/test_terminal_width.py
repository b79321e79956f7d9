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


# --------------------------------------------------------------------------- per process, per role, diff


def _ddp_summary() -> dict:
    """A two-rank DDP run with NCCL kernels (the table that once had five zero-width columns)."""
    s = _summary()
    ops = {
        "backprop": {"total_s": 6.123, "exclusive_s": 4.0, "calls": 100, "nccl_s": 1.234},
        "simulation": {"total_s": 3.5, "exclusive_s": 3.5, "calls": 400},
        "inference": {"total_s": 2.25, "exclusive_s": 2.25, "calls": 400},
    }
    s["processes"] = [
        {
            "pid": 40000 + r,
            "host": "gpu-node-17",
            "node": "gpu-node-17",
            "role": "ddp rank",
            "label": f"rank {r}",
            "wall_s": 13.0,
            "unannotated_s": 1.0,
            "gpu_bound_s": 5.5,
            "nccl_s": 1.234 + r,
            "operations": ops,
            "complete": True,
        }
        for r in range(2)
    ]
    s["roles"] = {
        "ddp rank": {
            "workers": 2,
            "pids": [40000, 40001],
            "spread": {"median_s": 11.9, "p95_s": 12.0, "max_s": 12.0, "min_s": 11.8},
            "stragglers": [{"pid": 40001, "busy_s": 12.0, "ratio": 1.3}],
            "operations": {n: {"total_s": 2 * o["total_s"]} for n, o in ops.items()},
        }
    }
    return s


PROCESS_HEADERS = {
    "process",
    "wall s",
    "in ops s",
    "unannot. s",
    "GPU-bound s",
    "NCCL s",
    "NCCL by operation (s)",
    "top operations (total s)",
    "role",
    "workers",
    "median s",
    "p95 s",
    "max s",
    "lagging (x median)",
}


def _header_cells(text: str, first: str) -> list[str]:
    line = next(line for line in text.splitlines() if _tokens(line)[:1] == [first])
    return [c.strip() for c in re.split(r"[│┃]| {2,}", line) if c.strip()]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_process_and_role_tables_fit_with_whole_columns(width):
    text = summary_text(_ddp_summary(), width=width)
    lines = text.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), text
    assert "…" not in text and "┳┳" not in text and "━━┳┳" not in text, text
    assert not re.search(r"[┃│] ?[┃│]", text), text  # no empty (zero-width) column
    for first in ("process", "role"):
        cells = _header_cells(text, first)
        assert set(cells) <= PROCESS_HEADERS, (cells, text)
    assert "NCCL s" in _header_cells(text, "process")  # the DDP figure stays as long as anything does
    for r in range(2):
        assert any(f"rank {r} pid {40000 + r}@gpu-node-17" in line for line in lines), text
    assert "pid 40001 1.30x" in text or "lagging (x median)" in text.split("not shown, for width")[-1]


def test_wide_process_table_keeps_every_column():
    text = summary_text(_ddp_summary(), width=240)
    assert set(_header_cells(text, "process")) == PROCESS_HEADERS & {
        "process",
        "wall s",
        "in ops s",
        "unannot. s",
        "GPU-bound s",
        "NCCL s",
        "NCCL by operation (s)",
        "top operations (total s)",
    }
    assert "backprop 1.234" in text


def test_role_table_leaves_out_an_empty_lagging_column():
    s = _ddp_summary()
    s["roles"]["ddp rank"]["stragglers"] = []
    text = summary_text(s, width=200)
    assert "lagging" not in text and "no stragglers" in text


DIFF_HEADERS = {
    "operation",
    "A s",
    "B s",
    "Δ s",
    "± s",
    "B/A",
    "change",
    "calls A→B",
    "Δ per call ms",
    "largest category change",
}


@pytest.mark.parametrize("width", [60, 80, 120])
def test_diff_table_fits_with_whole_names(width):
    from rlscope.analysis.diff import diff_summaries
    from rlscope.viz.diff import diff_text

    a, b = _summary(), _summary()
    b["operations"] = {n: {**o, "total_s": o["total_s"] * 1.5} for n, o in b["operations"].items()}
    a["operations"]["rollout_storage_reset"] = _op(0.25, {"python": 0.25})
    text = diff_text(diff_summaries(a, b), width=width)
    lines = text.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), text
    assert "…" not in text, text
    header = _header_cells(text, "operation")
    assert set(header) <= DIFF_HEADERS and {"operation", "Δ s", "change"} <= set(header), (header, text)
    for name in [*a["operations"], "[unannotated]", "wall"]:
        assert any(name in _tokens(line) or name in line for line in lines), (name, text)
    assert "GPU-bound" not in text or width  # rows only where a trace has GPU data (checked in test_diff)


def test_a_name_too_long_for_the_width_folds_never_cut():
    from rlscope.analysis.diff import diff_summaries
    from rlscope.viz.diff import diff_text

    a = _summary()
    name = "a_very_long_operation_name_that_takes_the_whole_line"
    a["operations"][name] = _op(0.25, {"python": 0.25})
    for text in (diff_text(diff_summaries(a, _summary()), width=60), summary_text(a, width=60)):
        assert "…" not in text and all(len(line.rstrip()) <= 60 for line in text.splitlines()), text
        firsts = [_tokens(line)[0] for line in text.splitlines() if _tokens(line)]
        # whole on one line, or folded onto the next: every character of it is there, in order
        assert any(x == name or x + y == name for x, y in zip(firsts, [*firsts[1:], ""], strict=True)), text


def _share_results() -> tuple[dict, dict]:
    gib = 1 << 30
    est = {
        "inputs": {
            "gpu_busy_fraction": 0.31,
            "busy_periods_per_s": 950.0,
            "busy_period_residual_us": 12.5,
            "per_copy_bytes": 2.5 * gib,
            "cpu_cores_per_copy": 1.2,
            "host_cpus": 16,
            "device": "NVIDIA H100 80GB HBM3",
            "notes": [],
        },
        "k_fit": 3,
        "max_slowdown": 1.25,
        "binds": "gpu_time_slicing",
        "k_max_memory": 31,
        "table": [
            {
                "k": k,
                "memory_bytes": k * 2.5 * gib,
                "memory_shared_allocator_bytes": k * 2.1 * gib,
                "slowdown": 1 + 0.2 * (k - 1),
                "throughput": k / (1 + 0.2 * (k - 1)),
                "binds": "gpu_time_slicing",
            }
            for k in (1, 2, 4, 8, 16)
        ],
    }
    runs = [
        {
            "k": k,
            "mean_wall_s": 20.0 * (1 + 0.2 * (k - 1)),
            "mean_cores": 1.2,
            "measured_slowdown": 1 + 0.21 * (k - 1),
            "predicted_slowdown": 1 + 0.2 * (k - 1),
            "measured_memory_bytes": k * 2.4 * gib,
            "predicted_memory_bytes": k * 2.5 * gib,
            "predicted_binds": "gpu_time_slicing",
            "exit_codes": [0] * k,
        }
        for k in (1, 2, 4)
    ]
    res = {
        "mode": "time-sharing",
        "mps_available": False,
        "command": ["python", "train.py"],
        "basis": "loop",
        "runs": runs,
    }
    return est, res


@pytest.mark.parametrize("width", [60, 80, 120])
def test_share_tables_fit_with_whole_columns(width):
    from rlscope.cli.share_check import check_text, estimate_text

    est, res = _share_results()
    for text, first in ((estimate_text(est, width), "k"), (check_text(res, width), "k")):
        lines = text.splitlines()  # the table: from its header (the prose above wraps in the terminal)
        at = next(i for i, line in enumerate(lines) if _tokens(line)[:1] == [first])
        table = "\n".join(lines[max(at - 1, 0) :])
        assert all(len(line.rstrip()) <= width for line in table.splitlines()), text
        assert "…" not in text, text
        header = _header_cells(table, first)
        assert "slowdown" in header and ("gpu_time_slicing" in text or "binds" in text), (header, text)
        if width < 120:
            assert "not shown, for width" in text or len(header) >= 6
