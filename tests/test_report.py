"""The HTML report's data (kernel tables, timeline window, cap) and page, on tiny traces built in code."""

from __future__ import annotations

import html
import re
import threading

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis import intervals as I
from rlscope.analysis.kernels import kernel_table
from rlscope.analysis.report import DEFAULT_ITERATIONS, report_data, timeline_data
from rlscope.annotate import intern
from rlscope.cli import analyze as cli
from rlscope.errors import RLScopeError
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from rlscope.viz.html import (
    CPU_ONLY_TEXT,
    GPU_SECTION_TITLES,
    NO_GPU_TEXT,
    NO_NVML_TEXT,
    RAW_NOTE,
    SECTION_TITLES,
    render_html,
)
from tests.conftest import FakeClock, summary_of, write_stream


@pytest.fixture
def gpu_trace(tmp_path):
    """training 0..1500 ns: outer 100..1000 > inner 200..500; step 1000..1500; run ends at 2000.

    outer launches sgemm twice (540..700, 710..800) and relu once (810..850) on stream 7; inner launches
    relu (320..330, stream 8); step launches a copy (1120..1200); an sgemm with no launch seen at
    1300..1310 (stream 8). NVML samples every 500 ns.
    """
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False)
    sess.clock = clock
    with sess:
        t0 = clock.now
        n = {
            k: intern(k)
            for k in ("cudaLaunchKernel", "sgemm", "relu<float>", "cudaMemcpyAsync", "Memcpy HtoD")
        }
        with rlscope.phase("training"):
            clock.advance(100)
            with rlscope.scope("outer"):
                clock.advance(100)
                with rlscope.scope("inner"):
                    clock.advance(300)
                clock.advance(500)
            with rlscope.scope("step"):
                clock.advance(500)
        clock.advance(500)
    th = threading.get_native_id()
    api, k = C.CUDA_API, C.GPU_KERNEL
    rows = [
        # category, start, end, correlation, thread, device, stream, name, bytes
        (api, t0 + 520, t0 + 530, 7, th, -1, -1, n["cudaLaunchKernel"], 0),
        (k, t0 + 540, t0 + 700, 7, -1, 0, 7, n["sgemm"], 0),
        (api, t0 + 600, t0 + 610, 9, th, -1, -1, n["cudaLaunchKernel"], 0),
        (k, t0 + 710, t0 + 800, 9, -1, 0, 7, n["sgemm"], 0),
        (api, t0 + 620, t0 + 625, 10, th, -1, -1, n["cudaLaunchKernel"], 0),
        (k, t0 + 810, t0 + 850, 10, -1, 0, 7, n["relu<float>"], 0),
        (api, t0 + 300, t0 + 310, 11, th, -1, -1, n["cudaLaunchKernel"], 0),
        (k, t0 + 320, t0 + 330, 11, -1, 0, 8, n["relu<float>"], 0),
        (api, t0 + 1100, t0 + 1110, 8, th, -1, -1, n["cudaMemcpyAsync"], 0),
        (C.GPU_MEMCPY, t0 + 1120, t0 + 1200, 8, -1, 0, 7, n["Memcpy HtoD"], 64),
        (k, t0 + 1300, t0 + 1310, 99, -1, 0, 8, n["sgemm"], 0),
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    nvml = [(t0 + t, 0, u, 0, 0, 0, 0) for t, u in ((0, 0), (500, 100), (1000, 100), (1500, 100), (2000, 0))]
    write_stream(sess.process_dir / S.NVML_FILE, S.NVML_COLUMNS_DOC, nvml)
    return sess.trace_dir


@pytest.fixture
def cpu_trace(tmp_path):
    """10 iterations of step (100 ns: sim 60 + learn 40), after 1000 ns of setup; ends 1000 ns later."""
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "cpu", backend=False, gpu=False)
    sess.clock = clock
    with sess:
        clock.advance(1000)
        for _ in range(10):
            with rlscope.scope("step"):
                with rlscope.scope("sim"):
                    clock.advance(60)
                with rlscope.scope("learn"):
                    clock.advance(40)
        clock.advance(1000)
    return sess.trace_dir


def _page(trace_dir, window=None) -> tuple[str, dict]:
    summary = summary_of(trace_dir)
    report = report_data(load_trace(trace_dir), window, summary=summary)
    return render_html(summary, report), report


def test_kernel_table_counts_and_shares(gpu_trace):
    rows = {(r["operation"], r["kernel"]): r for r in kernel_table(load_trace(gpu_trace)).to_pylist()}
    assert set(rows) == {
        ("outer", "sgemm"),
        ("outer", "relu<float>"),
        ("inner", "relu<float>"),
        ("step", "Memcpy HtoD"),
        ("[unannotated]", "sgemm"),
    }
    sg = rows[("outer", "sgemm")]
    assert (sg["count"], sg["category"]) == (2, "gpu_kernel")
    assert sg["total_s"] == pytest.approx(250e-9) and sg["mean_s"] == pytest.approx(125e-9)
    assert sg["share"] == pytest.approx(250 / 290)
    assert rows[("outer", "relu<float>")]["share"] == pytest.approx(40 / 290)
    assert rows[("step", "Memcpy HtoD")]["category"] == "gpu_memcpy"
    assert rows[("inner", "relu<float>")]["count"] == 1


def test_gpu_report_sections(gpu_trace):
    page, report = _page(gpu_trace)
    for title in SECTION_TITLES:
        assert f"<h2>{title}</h2>" in page
    assert RAW_NOTE.replace("'", "&#x27;") in page
    assert NO_GPU_TEXT not in page and NO_NVML_TEXT not in page
    assert "GPU-bound" in page and "NVML utilization" in page
    # kernel tables: escaped names, right counts
    assert "relu&lt;float&gt;" in page and "relu<float>" not in page
    assert re.search(r"<td>sgemm</td><td>gpu_kernel</td><td>2</td>", page)
    assert re.search(r"<td>Memcpy HtoD</td><td>gpu_memcpy</td><td>1</td>", page)
    # timeline: the whole 2000 ns run fits the default window; one row per thread and per stream
    tl = report["timeline"]
    assert tl["window_s"] == pytest.approx((0.0, 2000e-9))
    assert tl["rows"][0].endswith("(main)")
    assert [r.split(" GPU ")[1] for r in tl["rows"][1:]] == ["0 stream 7", "0 stream 8"]
    assert not tl["capped"] and tl["drawn_intervals"] == 3 + 6
    assert "seconds since the run start" in page
    # five charts of their own sections, and the Sharing section's kernel-length histogram
    assert page.count("plotly.js v") == 1 and page.count('class="plotly-graph-div"') == 6
    # NVML on the run's time axis: samples at 500..2000 ns after the first
    assert report["nvml_shift_s"] is not None


def test_cpu_only_report_folds_the_gpu_sections(cpu_trace):
    page, report = _page(cpu_trace)
    # one line says there was no GPU and what a GPU run would add, instead of four empty sections
    assert page.count(NO_GPU_TEXT) == 1 and html.escape(CPU_ONLY_TEXT) in page
    for title in GPU_SECTION_TITLES:
        assert f"<h2>{title}</h2>" not in page
        assert title.lower() in CPU_ONLY_TEXT.lower() or title == "Kernels by operation"
    assert NO_NVML_TEXT not in page and "No kernels or copies recorded" not in page
    # headline cards: only figures the run has (no "-" card, no GPU card)
    cards = re.findall(r"<div class='v'>([^<]*)</div><div class='k'>([^<]*)</div>", page)
    assert cards and all(v.strip() not in ("", "-") for v, _ in cards), cards
    assert not any("GPU" in k for _, k in cards)
    assert [k.split(":")[0] for _, k in cards][1:3] == ["top operation", "top category"]
    assert report["kernels"] == []
    assert set(report["timeline"]["ops"]["name"]) == {"step", "sim", "learn"}
    assert "<h2>Timeline</h2>" in page and "Timeline capped" not in page


def test_default_window_is_a_few_iterations(cpu_trace):
    report = report_data(load_trace(cpu_trace))
    assert report["window_choice"] == "default"
    # step, sim and learn all have 10 instances; step has the most total time. Median start: the
    # 5th instance (1000 + 4 * 100 ns), period 100 ns.
    w0, w1 = report["timeline"]["window_s"]
    assert w0 == pytest.approx(1400e-9) and w1 == pytest.approx((1400 + DEFAULT_ITERATIONS * 100) * 1e-9)
    assert report["timeline"]["ops"]["name"].count("step") == DEFAULT_ITERATIONS


def test_window_clips_intervals(gpu_trace):
    report = report_data(load_trace(gpu_trace), (300e-9, 600e-9))
    tl = report["timeline"]
    assert report["window_choice"] == "user"
    ops = dict(
        zip(tl["ops"]["name"], zip(tl["ops"]["start_s"], tl["ops"]["end_s"], strict=True), strict=True)
    )
    assert ops["outer"] == pytest.approx((300e-9, 600e-9))
    assert ops["inner"] == pytest.approx((300e-9, 500e-9))
    assert "step" not in ops
    gpu = sorted(zip(tl["gpu"]["name"], tl["gpu"]["start_s"], tl["gpu"]["end_s"], strict=True))
    assert [g[0] for g in gpu] == ["relu<float>", "sgemm"]
    assert gpu[1][1:] == pytest.approx((540e-9, 600e-9))
    with pytest.raises(RLScopeError, match="outside the run"):
        report_data(load_trace(gpu_trace), (5.0, 6.0))


def _synthetic_intervals(n: int) -> I.Intervals:
    start = np.arange(n, dtype=np.int64) * 1000
    ops = pa.table(
        {
            "pid": np.ones(n, np.int64),
            "thread": np.full(n, 7, np.int64),
            "id": np.arange(n, dtype=np.int64),
            "name": pa.array([f"op{i % 3}" for i in range(n)]),
            "start_ns": start,
            "end_ns": start + 900,
            "depth": np.zeros(n, np.int64),
            "parent": np.full(n, -1, np.int64),
            "phase": pa.array([""] * n),
        },
        schema=I.OPS_SCHEMA,
    )
    return I.Intervals(
        operations=ops,
        phases=I.PHASES_SCHEMA.empty_table(),
        cpu=I.CPU_SCHEMA.empty_table(),
        gpu=I.GPU_SCHEMA.empty_table(),
        api=I.API_SCHEMA.empty_table(),
        run_start_ns=0,
        run_end_ns=n * 1000,
        window_ns=None,
        main_threads={1: 7},
    )


def test_timeline_capped_and_small():
    n = 200_000
    tl = timeline_data(_synthetic_intervals(n), (0, n * 1000), max_intervals=20_000)
    assert tl["capped"] and tl["total_intervals"] == n and tl["drawn_intervals"] == 20_000
    assert tl["shown_until_s"] == pytest.approx(20_000 * 1000e-9)
    summary = {
        "schema": "rlscope.summary/1",
        "trace_dir": "/tmp/big",
        "wall_s": n * 1e-6,
        "unannotated_s": 0.0,
        "operations": {},
        "phases": {},
        "warnings": [],
    }
    small = timeline_data(_synthetic_intervals(10), (0, 10_000))
    base = len(
        render_html(summary, {"run_s": 1e-5, "window_choice": "user", "timeline": small, "kernels": []})
    )
    page = render_html(summary, {"run_s": n * 1e-6, "window_choice": "user", "timeline": tl, "kernels": []})
    assert "Timeline capped" in page and "20,000 of" in page and "200,000 intervals" in page
    assert len(page) - base < 1_000_000  # the drawn timeline adds little on top of plotly.js


def test_cli_html_with_window(gpu_trace, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main([str(gpu_trace), "--html", str(out), "--window", "0.0000003:0.0000006", "-q"]) == 0
    page = out.read_text(encoding="utf-8")
    assert "window chosen with --window" in page and "<h2>Kernels by operation</h2>" in page
    assert cli.main([str(gpu_trace), "--html", str(tmp_path / "x.html"), "--window", "5:6", "-q"]) == 2
    assert "outside the run" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_default_window_is_one_iteration_of_the_repeating_phases(tmp_path):
    """A rollout-and-update loop (the adapters' phases): the window is one whole iteration, from the
    median update's start to the next one's, not a few of the many minibatch operations."""
    from rlscope.analysis import analyze

    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False)
    sess.clock = clock
    with sess:
        for _ in range(5):
            with rlscope.phase("rollout"):
                for _ in range(20):
                    with rlscope.scope("inference"):
                        clock.advance(100)
            with rlscope.phase("update"):
                for _ in range(8):
                    with rlscope.scope("backprop"):
                        clock.advance(400)
    report = analyze(str(tmp_path / "t"), correct=False).report
    w0, w1 = report["timeline"]["window_s"]
    # an iteration: rollout 2,000 ns + update 3,200 ns; update is the longer of the two phases with 5
    # instances; the median (3rd) update starts at 2 * 5,200 + 2,000 ns
    assert (w1 - w0) * 1e9 == pytest.approx(5200)
    assert w0 * 1e9 == pytest.approx(2 * 5200 + 2000, abs=5)
    names = report["timeline"]["ops"]["name"]
    assert names.count("backprop") == 8 and names.count("inference") == 20
