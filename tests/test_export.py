"""Export (Chrome trace, CSV) on a tiny synthetic trace with a fake clock: exact times, no GPU needed."""

from __future__ import annotations

import csv
import gzip
import json
import os
import threading

import pytest

import rlscope
from rlscope import categories as C
from rlscope.analysis.intervals import OPS_SCHEMA, intervals, parse_window
from rlscope.annotate import intern
from rlscope.cli import export
from rlscope.errors import RLScopeError
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from rlscope.viz.chrome import to_chrome, write_chrome
from tests.conftest import FakeClock, write_stream


@pytest.fixture
def trace_dir(tmp_path):
    """Phase training 0..1500 ns: outer 100..1000 > inner 200..500 (simulator 250..400), step 1000..1500.

    GPU: launch 450..470 -> sgemm 480..900 (stream 7, corr 7); memcpy call 1100..1110 -> copy
    1120..1200 (corr 8); a kernel with no launch seen (corr 99, stream 8) at 1300..1310.
    """
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False)
    sess.clock = clock
    with sess:
        t0 = clock.now
        names = {n: intern(n) for n in ("cudaLaunchKernel", "sgemm", "cudaMemcpyAsync", "Memcpy HtoD")}
        with rlscope.phase("training"):
            clock.advance(100)
            with rlscope.scope("outer"):
                clock.advance(100)
                with rlscope.scope("inner"):
                    clock.advance(50)
                    with rlscope.simulator():
                        clock.advance(150)
                    clock.advance(100)
                clock.advance(500)
            with rlscope.scope("step"):
                clock.advance(500)
        clock.advance(500)
    th = threading.get_native_id()
    rows = [
        # category, start, end, correlation, thread, device, stream, name, bytes
        (C.CUDA_API, t0 + 450, t0 + 470, 7, th, -1, -1, names["cudaLaunchKernel"], 0),
        (C.GPU_KERNEL, t0 + 480, t0 + 900, 7, -1, 0, 7, names["sgemm"], 0),
        (C.CUDA_API, t0 + 1100, t0 + 1110, 8, th, -1, -1, names["cudaMemcpyAsync"], 0),
        (C.GPU_MEMCPY, t0 + 1120, t0 + 1200, 8, -1, 0, 7, names["Memcpy HtoD"], 64),
        (C.GPU_KERNEL, t0 + 1300, t0 + 1310, 99, -1, 0, 8, names["sgemm"], 0),
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    return sess.trace_dir


def _x(events, cat):
    return {e["name"]: e for e in events if e["ph"] == "X" and e["cat"] == cat}


def _meta(events, kind):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == kind}


def test_interval_tables_exact(trace_dir):
    iv = intervals(load_trace(trace_dir))
    ops = {r["name"]: r for r in iv.operations.to_pylist()}
    assert {n: (r["start_ns"], r["end_ns"], r["depth"]) for n, r in ops.items()} == {
        "outer": (100, 1000, 0),
        "inner": (200, 500, 1),
        "step": (1000, 1500, 0),
    }
    assert ops["inner"]["parent"] == ops["outer"]["id"] and ops["outer"]["parent"] == -1
    assert {r["phase"] for r in ops.values()} == {"training"}
    assert [(r["name"], r["start_ns"], r["end_ns"]) for r in iv.phases.to_pylist()] == [("training", 0, 1500)]
    cpu = [(r["category"], r["start_ns"], r["end_ns"]) for r in iv.cpu.to_pylist()]
    assert sorted(cpu) == [("cuda_api", 450, 470), ("cuda_api", 1100, 1110), ("simulator", 250, 400)]
    assert [(r["name"], r["start_ns"], r["correlation"]) for r in iv.gpu.to_pylist()] == [
        ("sgemm", 480, 7),
        ("Memcpy HtoD", 1120, 8),
        ("sgemm", 1300, 99),
    ]
    assert iv.api.num_rows == 2 and iv.run_end_ns == 2000


def test_chrome_events_tracks_and_flows(trace_dir, tmp_path):
    out = tmp_path / "out.json"
    write_chrome(to_chrome(intervals(load_trace(trace_dir))), out)
    events = json.loads(out.read_text())["traceEvents"]
    pid, th = os.getpid(), threading.get_native_id()

    ops = _x(events, "user_annotation")
    want = {"training": (0, 1500), "outer": (100, 900), "inner": (200, 300), "step": (1000, 500)}
    for name, (ts, dur) in want.items():
        assert (ops[name]["ts"], ops[name]["dur"]) == (ts / 1000, dur / 1000)
        assert (ops[name]["pid"], ops[name]["tid"]) == (pid, th)
    assert _x(events, "simulator")["simulator"]["ts"] == 0.25
    api = _x(events, "cuda_runtime")
    assert set(api) == {"cudaLaunchKernel", "cudaMemcpyAsync"}

    kernels = [e for e in events if e.get("cat") == "kernel"]
    copy = _x(events, "gpu_memcpy")["Memcpy HtoD"]
    assert copy["args"]["bytes"] == 64
    procs, threads = _meta(events, "process_name"), _meta(events, "thread_name")
    for k in [*kernels, copy]:
        assert procs[(k["pid"], 0)] == "GPU 0"
        assert threads[(k["pid"], k["tid"])] == f"stream {k['tid']}"
        assert k["pid"] != pid
    assert threads[(pid, th)] == f"main thread {th}"

    flows = [e for e in events if e["ph"] in "sf" and e["cat"] == "ac2g"]
    by_id: dict[int, dict[str, dict]] = {}
    for f in flows:
        by_id.setdefault(f["id"], {})[f["ph"]] = f
    assert set(by_id) == {7, 8}  # the kernel with no launch seen gets no arrow
    assert (by_id[7]["s"]["pid"], by_id[7]["s"]["tid"], by_id[7]["s"]["ts"]) == (pid, th, 0.45)
    f7 = by_id[7]["f"]
    assert (f7["ts"], f7["tid"], f7["bp"]) == (0.48, 7, "e")
    assert f7["pid"] == next(k["pid"] for k in kernels if k["ts"] == 0.48)
    assert by_id[8]["f"]["ts"] == copy["ts"]


def test_export_cli_gzip_window_and_csv(trace_dir, tmp_path):
    gz, csv_dir = tmp_path / "out.json.gz", tmp_path / "csv"
    # 300..600 ns: outer and inner clipped, step left out, the kernel clipped, the copy left out
    assert (
        export.main([str(trace_dir), "--chrome", str(gz), "--window", "3e-7:6e-7", "--csv", str(csv_dir)])
        == 0
    )
    with gzip.open(gz, "rt") as f:
        obj = json.load(f)
    events = obj["traceEvents"]
    ops = _x(events, "user_annotation")
    assert {n: (e["ts"], e["dur"]) for n, e in ops.items()} == {
        "training": (0.3, 0.3),
        "outer": (0.3, 0.3),
        "inner": (0.3, 0.2),
    }
    assert {(e["name"], e["ts"], e["dur"]) for e in events if e.get("cat") == "kernel"} == {
        ("sgemm", 0.48, 0.12)
    }
    assert not _x(events, "gpu_memcpy")
    assert obj["otherData"]["window_s"] == pytest.approx([3e-7, 6e-7])

    def header(name):
        with (csv_dir / name).open(newline="") as f:
            return next(csv.reader(f))

    assert header("operations.csv")[:4] == ["operation", "calls", "total_s", "exclusive_s"]
    assert {"python", "simulator", "cuda_api", "gpu_kernel", "cpu_gpu_s"} <= set(header("operations.csv"))
    assert header("phases.csv")[:3] == ["phase", "phase_wall_s", "operation"]
    assert header("op_intervals.csv") == OPS_SCHEMA.names
    assert header("gpu_records.csv")[:3] == ["pid", "category", "name"]
    for name in ("phase_intervals.csv", "cpu_segments.csv", "cuda_api_calls.csv"):
        assert (csv_dir / name).is_file()
    with (csv_dir / "operations.csv").open(newline="") as f:
        rows = {r["operation"]: r for r in csv.DictReader(f)}
    assert float(rows["inner"]["simulator"]) == pytest.approx(150e-9)
    assert set(rows) == {"outer", "inner", "step", "[unannotated]"}


def test_window_outside_run_is_one_line_error(trace_dir, tmp_path):
    trace = load_trace(trace_dir)
    with pytest.raises(RLScopeError, match="outside the run") as e:
        intervals(trace, (5.0, 6.0))
    assert "\n" not in str(e.value)
    with pytest.raises(RLScopeError):
        export.main([str(trace_dir), "--chrome", str(tmp_path / "x.json"), "--window", "1:"])
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(RLScopeError):
        parse_window("abc")
    with pytest.raises(RLScopeError):
        parse_window("2:1")
    with pytest.raises(RLScopeError):
        export.main([str(trace_dir)])  # nothing asked for


def test_trace_without_gpu_and_bad_dir(tmp_path):
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "t", backend=False, gpu=False)
    sess.clock = clock
    with sess, rlscope.scope("only"):
        clock.advance(1000)
    obj = to_chrome(intervals(load_trace(sess.trace_dir)))
    assert [e["cat"] for e in obj["traceEvents"] if e["ph"] == "X"] == ["user_annotation"]
    assert not any(e["ph"] in "sf" for e in obj["traceEvents"])
    with pytest.raises(RLScopeError):  # TraceError is an RLScopeError
        export.main([str(tmp_path / "missing"), "--chrome", str(tmp_path / "o.json")])


def _table(schema, rows):
    import pyarrow as pa

    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)


def test_short_backend_ops_fold_into_their_innermost_operation():
    from rlscope.analysis.intervals import BACKEND_SCHEMA

    ops = _table(
        OPS_SCHEMA,
        [  # pid, thread, id, name, start, end, depth, parent, phase
            (1, 7, 1, "outer", 0, 1000, 0, -1, ""),
            (1, 7, 2, "inner", 200, 500, 1, 1, ""),
            (1, 8, 3, "other", 0, 1000, 0, -1, ""),
        ],
    )
    backend = _table(
        BACKEND_SCHEMA,
        [  # pid, thread, name, start, end
            (1, 7, "aten::add", 250, 260),  # short, in inner
            (1, 7, "aten::add", 300, 330),  # short, in inner
            (1, 7, "aten::mul", 600, 650),  # short, in outer
            (1, 7, "aten::addmm", 700, 900),  # long: its own box
            (1, 7, "aten::to", 1200, 1210),  # short, in no operation: only counted
            (1, 8, "aten::relu", 100, 150),  # short, in the other thread's operation
        ],
    )
    tables = {"operations": ops, "backend": backend}
    obj = to_chrome(tables, main_threads={1: 7}, min_op_ns=100)
    x = [e for e in obj["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in x if e["cat"] == "cpu_op"] == [("aten::addmm", 0.7, 0.2)]
    args = {e["name"]: e["args"] for e in x if e["cat"] == "user_annotation"}
    assert (args["inner"]["folded_cpu_ops"], args["inner"]["folded_cpu_op_us"]) == (2, 0.04)
    assert args["inner"]["folded_cpu_op_names"] == {"aten::add": 2}
    assert (args["outer"]["folded_cpu_ops"], args["outer"]["folded_cpu_op_names"]) == (1, {"aten::mul": 1})
    assert (args["other"]["folded_cpu_ops"], args["other"]["folded_cpu_op_us"]) == (1, 0.05)
    assert obj["otherData"]["folded_cpu_ops"] == 5 and obj["otherData"]["folded_cpu_ops_below_us"] == 0.1
    assert obj["otherData"]["folded_cpu_ops_outside_operations"] == 1
    assert obj["otherData"]["folded_cpu_ops_outside_operations_us"] == 0.01
    # 0 keeps every op, and then no operation carries folded ones
    kept = to_chrome(tables, main_threads={1: 7}, min_op_ns=0)
    assert sum(e.get("cat") == "cpu_op" for e in kept["traceEvents"]) == 6
    assert not any("folded_cpu_ops" in e.get("args", {}) for e in kept["traceEvents"])
    assert kept["otherData"]["folded_cpu_ops"] == 0


PPO_TRACE = os.path.join(os.path.dirname(__file__), "golden", "traces", "ppo_cpu")


def test_export_of_a_cpu_ppo_run_is_small_gzip_and_says_what_it_wrote(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert export.main([PPO_TRACE, "--chrome"]) == 0  # default: gzip, named after the trace, here
    out = capsys.readouterr().out
    path = tmp_path / "ppo_cpu.json.gz"
    with gzip.open(path, "rb") as f:
        data = f.read()
    obj = json.loads(data)
    run_s = 3.255382909  # the trace's run, ns exact
    n_events = sum(e["ph"] != "M" for e in obj["traceEvents"])
    # under 20 MB per 10 s of run, as JSON (the file itself is gzip, several times smaller)
    assert len(data) < 20e6 * run_s / 10 and path.stat().st_size < len(data) / 4
    assert f"wrote ppo_cpu.json.gz: {n_events:,} events" in out
    assert "gzip JSON, window 0.000–3.255 s" in out and "folded into their operations" in out
    folded = obj["otherData"]["folded_cpu_ops"]
    assert f"{folded:,} backend ops shorter than 10 µs" in out

    # --all-ops: every backend op of the trace, and the folded ones were exactly those left out
    assert export.main([PPO_TRACE, "--chrome", str(tmp_path / "all.json"), "--all-ops"]) == 0
    every = json.loads((tmp_path / "all.json").read_text())
    n_ops = sum(e.get("cat") == "cpu_op" for e in every["traceEvents"])
    assert n_ops == 178_689 and every["otherData"]["folded_cpu_ops"] == 0
    assert sum(e.get("cat") == "cpu_op" for e in obj["traceEvents"]) == n_ops - folded
    # the time of the folded ops is on the operations that hold them, to the rounding of each
    short_us = sum(e["dur"] for e in every["traceEvents"] if e.get("cat") == "cpu_op" and e["dur"] < 10)
    on_ops = sum(e["args"].get("folded_cpu_op_us", 0.0) for e in obj["traceEvents"] if e["ph"] == "X")
    outside = obj["otherData"]["folded_cpu_ops_outside_operations_us"]
    assert on_ops + outside == pytest.approx(short_us, rel=1e-4) and outside < 0.1 * on_ops
    assert "window 0.000–3.255 s" in capsys.readouterr().out
    with pytest.raises(RLScopeError, match="min-op-us"):
        export.main([PPO_TRACE, "--chrome", "--min-op-us", "-1"])


class _FakeTTY:
    """A text stream that claims to be a terminal (progress lines are drawn only on one)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_export_shows_progress_on_a_terminal_only(trace_dir, tmp_path, monkeypatch, capsys):
    import sys

    assert export.main([str(trace_dir), "--chrome", str(tmp_path / "a.json.gz")]) == 0
    err = capsys.readouterr().err  # not a terminal: warnings only, no progress lines
    assert all(line.startswith("rlscope-analyze: warning:") for line in err.splitlines())
    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    assert export.main([str(trace_dir), "--chrome", str(tmp_path / "b.json.gz")]) == 0
    drawn = "".join(tty.parts)
    assert "analyzing" in drawn and "building the Chrome trace" in drawn and "writing" in drawn
    assert "wrote" in capsys.readouterr().out
