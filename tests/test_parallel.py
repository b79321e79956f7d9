"""Parallel analysis (rlscope.analysis.parallel) gives what the serial one gives, without Ray.

A synthetic many-process trace written in code: CPU and GPU processes (kernels with launch resources,
NCCL kernels, NVML samples, allocator events), a helper thread, processes that start at the same
instant (ties in the timeline's cap), one with no events and one unreadable. Every output of the
result is compared: summary, JSON, CSV, HTML, table, kernel and interval tables, report data.
"""

from __future__ import annotations

import json
import re
import weakref
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlscope import categories as C
from rlscope.analysis import analyze, parallel, report
from rlscope.analysis.report import report_data
from rlscope.cli import analyze as cli
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, load_trace
from rlscope.viz import data_files, html, terminal

NAMES = ["training", "step", "inner", "cudaLaunchKernel", "sgemm", "ncclDevKernel_AllReduce_Sum_f32"]
STEP, INNER, LAUNCH, SGEMM, NCCL = 1, 2, 3, 4, 5
DEVICES = {"host_cpus": 16, "devices": [{"index": 0, "name": "H100", "total_memory": 80 << 30}]}


def _stream(path: Path, schema: pa.Schema, columns: dict) -> None:
    table = pa.table({f.name: pa.array(columns[f.name], f.type) for f in schema}, schema=schema)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(table)


def _events(iterations: int) -> dict[str, list]:
    """Session, a phase, per iteration step > inner > simulator on thread 1 and every third a step on
    thread 2; times from 0 (the clock anchors place each process)."""
    rows = [(0, 1, S.SESSION_START, -1, -1, -1), (1, 1, S.PHASE_BEGIN, 0, -1, 0)]
    for i in range(iterations):
        t, op, inner = 10 + 100 * i, 1 + 3 * i, 2 + 3 * i
        rows += [
            (t, 1, S.OP_BEGIN, op, -1, STEP),
            (t + 10, 1, S.OP_BEGIN, inner, op, INNER),
            (t + 20, 1, S.CAT_BEGIN, C.SIMULATOR, C.PYTHON, -1),
            (t + 40, 1, S.CAT_END, C.SIMULATOR, C.PYTHON, -1),
            (t + 50, 1, S.OP_END, inner, op, INNER),
            (t + 80, 1, S.OP_END, op, -1, STEP),
        ]
        if i % 3 == 0:
            rows += [(t + 5, 2, S.OP_BEGIN, 3 + 3 * i, -1, STEP), (t + 95, 2, S.OP_END, 3 + 3 * i, -1, STEP)]
    end = 10 + 100 * iterations
    rows += [(end, 1, S.PHASE_END, 0, -1, 0), (end + 5, 1, S.SESSION_END, -1, -1, -1)]
    rows.sort(key=lambda r: (r[1], r[0]))  # per thread in time order, as the writer flushes them
    cols = list(zip(*rows, strict=True))
    return {
        "ts_ns": cols[0],
        "thread": cols[1],
        "kind": cols[2],
        "id": cols[3],
        "parent": cols[4],
        "name": cols[5],
        "flags": [0] * len(rows),
    }


def _gpu(iterations: int) -> dict[str, list]:
    """A launch inside each inner, its kernel (every other one an NCCL all-reduce) after it; one
    kernel whose launch was not seen."""
    rows = []
    for i in range(iterations):
        t = 10 + 100 * i
        rows.append((C.CUDA_API, t + 12, t + 14, i + 1, 1, -1, -1, LAUNCH, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        kernel = NCCL if i % 2 else SGEMM
        res = (64 + i, 1, 1, 256, 1, 1, 32 + 8 * (i % 3), 0, 0)
        rows.append((C.GPU_KERNEL, t + 30, t + 70 + i % 5, i + 1, -1, 0, 7 + i % 2, kernel, 0, *res))
    rows.append((C.GPU_KERNEL, 5, 9, 999, -1, 0, 7, SGEMM, 0, 1, 1, 1, 32, 1, 1, 16, 0, 0))
    cols = list(zip(*rows, strict=True))
    return dict(zip(S.GPU_COLUMNS + S.GPU_KERNEL_COLUMNS, cols, strict=True))


def _memory(iterations: int) -> dict[str, list]:
    rows = [(2, -1, 0, S.MEMORY_SEGMENT_ALLOC, 0, 1 << 20, 0)]
    for i in range(iterations):
        t = 10 + 100 * i
        rows += [
            (t + 15, 1, 0, S.MEMORY_ALLOC, 100 + i, 4096, 0),
            (t + 45, 1, 0, S.MEMORY_FREE, 100 + i, 4096, 0),
        ]
    cols = list(zip(*rows, strict=True))
    return dict(zip(S.MEMORY_COLUMNS, cols, strict=True))


def write_trace(root: Path, processes: int = 6, iterations: int = 40) -> Path:
    """``processes`` processes; even ones have GPU data; processes 0 and 1 start at the same instant."""
    names = S.names_schema()
    for k in range(processes):
        d = root / f"process-{100 + k}"
        d.mkdir(parents=True)
        meta = {
            "pid": str(100 + k),
            "ppid": "100" if k else "1",
            "host": "synthetic",
            "clock_anchor_ns": "0",
            "clock_anchor_unix_ns": str(max(0, k - 1) * 37),
        }
        _stream(d / S.EVENTS_FILE, S.events_schema(meta), _events(iterations + 7 * k))
        _stream(d / S.NAMES_FILE, names, {"id": list(range(len(NAMES))), "name": NAMES})
        if k % 2 == 0:
            gpu_schema = S.columns_schema(
                S.GPU_COLUMNS_DOC + S.GPU_KERNEL_COLUMNS_DOC,
                "native",
                {S.DEVICES_METADATA_KEY: json.dumps(DEVICES)},
            )
            _stream(d / S.GPU_FILE, gpu_schema, _gpu(iterations))
            nvml = {c: [] for c in S.NVML_COLUMNS}
            for t in range(0, 100 * iterations, 200):
                for c, v in zip(
                    S.NVML_COLUMNS, (t, 0, 50, 10, (1 << 30) + t * 1000, 1500, 300_000), strict=True
                ):
                    nvml[c].append(v)
            _stream(d / S.NVML_FILE, S.columns_schema(S.NVML_COLUMNS_DOC), nvml)
            _stream(d / S.MEMORY_FILE, S.columns_schema(S.MEMORY_COLUMNS_DOC), _memory(iterations))
    empty = root / f"process-{100 + processes}"  # ended before its first flush
    empty.mkdir()
    _stream(
        empty / S.EVENTS_FILE,
        S.events_schema({"pid": str(100 + processes)}),
        {c: [] for c in S.EVENT_COLUMNS},
    )
    bad = root / f"process-{101 + processes}"  # not a trace file at all: skipped, with a warning
    bad.mkdir()
    (bad / S.EVENTS_FILE).write_bytes(b"not arrow")
    return root


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    return write_trace(tmp_path_factory.mktemp("parallel") / "trace")


def _plain(x):
    """Report data with its numpy arrays as (dtype, values), comparable with ==."""
    if isinstance(x, np.ndarray):
        return (str(x.dtype), x.tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def _page(result) -> str:
    """The HTML report, less the random ids plotly gives its figures."""
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "ID", html.render(result))


def assert_same_outputs(a, b, tmp_path: Path) -> None:
    """Two analyses agree on every output: summary, JSON, report, kernels, intervals, CSV, HTML, table."""
    assert a.summary == b.summary
    assert data_files.to_json(a) == data_files.to_json(b)
    assert _plain(dict(a.report)) == _plain(dict(b.report))
    assert a.kernels.equals(b.kernels)
    assert (a.intervals is None) == (b.intervals is None)
    if a.intervals is not None:
        for name, table in a.intervals.tables().items():
            assert table.equals(b.intervals.tables()[name]), name
        for field in ("run_start_ns", "run_end_ns", "window_ns", "main_threads", "spans"):
            assert getattr(a.intervals, field) == getattr(b.intervals, field), field
        files = [data_files.write_csv(r, tmp_path / f"csv-{i}") for i, r in enumerate((a, b))]
        for fa, fb in zip(*files, strict=True):
            assert fa.read_bytes() == fb.read_bytes(), fa.name
    assert _page(a) == _page(b)
    assert terminal.text(a, width=200) == terminal.text(b, width=200)


@pytest.mark.parametrize(
    ("correct", "window", "intervals"),
    [(True, None, True), (False, None, True), (True, (0.000001, 0.000002), True), (True, None, False)],
)
def test_pool_analysis_equals_serial(trace_dir, tmp_path, correct, window, intervals):
    serial = analyze(trace_dir, correct=correct, window=window, intervals=intervals)
    pooled = analyze(trace_dir, correct=correct, window=window, intervals=intervals, workers=2)
    assert_same_outputs(serial, pooled, tmp_path)
    assert len(serial.processes) == 7  # the unreadable one skipped, the one without events kept
    assert any("(process skipped)" in w for w in serial.warnings)
    assert "nccl_s" in next(p for p in serial.processes if p["pid"] == 100)  # GPU figures were merged
    assert serial.summary["sharing"]["kernel_lengths"]["all"]["kernels"]["count"] > 0


def test_loaded_trace_in_a_pool_equals_serial(trace_dir, tmp_path):
    trace = load_trace(trace_dir)
    assert_same_outputs(analyze(trace), analyze(trace, workers=2), tmp_path)
    assert_same_outputs(analyze(trace), analyze(trace_dir), tmp_path)


def test_the_timeline_cap_is_the_one_of_all_intervals(trace_dir, monkeypatch):
    """Each process sends only its earliest intervals; the capped timeline is still the one built from
    every interval of the run (ties included: two processes start at the same instant)."""
    monkeypatch.setattr(report, "MAX_INTERVALS", 101)
    for window in (None, (0.0000005, 0.000003)):
        whole = report_data(load_trace(trace_dir), window, max_intervals=101)["timeline"]
        for workers in (None, 2):
            timeline = analyze(trace_dir, window=window, workers=workers, intervals=False).report["timeline"]
            assert timeline["capped"] and timeline["drawn_intervals"] <= 101
            # the summary labels the rows; report_data labels them the same way from the metadata
            assert _plain(timeline) == _plain(whole)


def test_one_process_at_a_time(trace_dir, monkeypatch):
    """Serially one process is loaded at a time; in a pool the driver loads none (the workers survey too)."""
    calls: list[tuple[str, bool]] = []
    loaded: list[weakref.ref[ProcessTrace]] = []
    most = [0]
    load = parallel.load_process

    def tracked(path: Path, light: bool = False, drops: list | None = None) -> ProcessTrace:
        calls.append((path.name, light))
        proc = load(path, light, drops)
        if not light:
            loaded.append(weakref.ref(proc))
            most[0] = max(most[0], sum(r() is not None for r in loaded))
        return proc

    monkeypatch.setattr(parallel, "load_process", tracked)
    analyze(trace_dir)
    assert sum(not light for _, light in calls) == 7 and most[0] == 1  # surveyed light, then one by one
    calls.clear()
    analyze(trace_dir, workers=2)  # the workers' calls happen in their own processes
    assert calls == []


def test_exports_say_when_the_analysis_left_the_intervals_out(trace_dir, tmp_path):
    from rlscope.errors import RLScopeError
    from rlscope.viz import chrome

    result = analyze(trace_dir, intervals=False)
    assert result.intervals is None and result.report["timeline"]["ops"]["name"]  # the timeline is there
    for export in (chrome.render, lambda r: data_files.write_csv(r, tmp_path)):
        with pytest.raises(RLScopeError, match="intervals=True"):
            export(result)


def test_cli_workers_write_the_serial_json(trace_dir, tmp_path):
    outs = [tmp_path / "serial.json", tmp_path / "pool.json"]
    assert cli.main([str(trace_dir), "-q", "--json", str(outs[0])]) == 0
    assert cli.main([str(trace_dir), "-q", "--json", str(outs[1]), "--workers", "2"]) == 0
    assert outs[0].read_text() == outs[1].read_text()
