"""Trace files: readable by common tools, robust to truncation, corruption and kills."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

import rlscope
from rlscope.analysis.roles import over_processes
from rlscope.errors import TraceError
from rlscope.trace import schema as S
from rlscope.trace.header import recorded_options
from rlscope.trace.reader import load_trace
from tests.conftest import summary_of

# every events table checked is also checked by the numpy checks (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("validation_audited")


def _small_trace(path: Path) -> Path:
    with rlscope.profile(path, backend=False):
        for _ in range(50):
            with rlscope.scope("step"):
                pass
    return next(path.glob("process-*"))


def test_files_open_with_common_tools(tmp_path):
    proc = _small_trace(tmp_path / "t")
    events = proc / S.EVENTS_FILE
    table = pa.ipc.open_stream(str(events)).read_all()
    assert table.num_rows == 103  # 100 scope rows, session start and end, the first window
    assert table.schema.metadata[b"rlscope.schema_version"] == b"1"
    pd = pytest.importorskip("pandas")
    assert len(table.to_pandas()) == 103
    assert isinstance(pd.DataFrame, type)
    pl = pytest.importorskip("polars")
    assert pl.read_ipc_stream(events).height == 103
    duckdb = pytest.importorskip("duckdb")
    names = pa.ipc.open_stream(str(proc / S.NAMES_FILE)).read_all()
    assert "step" in names.column("name").to_pylist()
    events_table = table  # noqa: F841 (DuckDB finds Arrow tables in Python scope by variable name)
    n = duckdb.sql("select count(*) from events_table where kind = 0").fetchall()[0][0]
    assert n == 50


def test_metadata(tmp_path):
    proc = load_trace(_small_trace(tmp_path / "t").parent).processes[0]
    md = proc.metadata
    for key in ("host", "pid", "ppid", "rank", "python", "torch", "rlscope.version", "clock"):
        assert key in md
    assert int(md["pid"]) == os.getpid()
    assert proc.complete


def test_the_clock_anchor_pair_is_read_together_however_slow_the_metadata(tmp_path, monkeypatch):
    """clock_anchor_ns and clock_anchor_unix_ns map a process's clock onto the others'; the
    metadata's package lookups took 28-40 ms in a fresh interpreter, and read after them the Unix
    anchor shifted a short-lived pool worker's session past its parent's end."""
    from rlscope.runtime import metadata as session_mod

    real = session_mod.stack_info

    def slow_stack_info() -> dict[str, str]:
        time.sleep(0.05)
        return real()

    monkeypatch.setattr(session_mod, "stack_info", slow_stack_info)
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0) as s:
        pass
    md = load_trace(tmp_path / "t").processes[0].metadata
    offset = int(md["clock_anchor_unix_ns"]) - int(md["clock_anchor_ns"])
    assert abs(offset - (time.time_ns() - time.perf_counter_ns())) < 5_000_000  # 5 ms, not 50
    assert s.process_dir.exists()


def test_truncated_file_reads_complete_batches(tmp_path):
    trace = tmp_path / "t"
    with rlscope.profile(trace, backend=False, flush_interval=0.05) as s:
        for i in range(6):
            with rlscope.scope(f"op{i}"):
                time.sleep(0.08)  # a flush (record batch) between scopes
    events = s.process_dir / S.EVENTS_FILE
    data = events.read_bytes()
    batches = list(pa.ipc.open_stream(data))

    def op_rows(tables: list) -> int:  # not the writer's flush marks
        return sum(k in (S.OP_BEGIN, S.OP_END) for b in tables for k in b.column("kind").to_pylist())

    events.write_bytes(data[: len(data) - 30])  # cut into the last batch
    t = load_trace(trace)
    assert t.warnings and "truncated" in t.warnings[0]
    # every complete batch is read, the cut one is not (the last op's end may be in either, as the
    # flushes fell)
    assert op_rows([t.processes[0].events]) == op_rows(batches[:-1]) > 0
    summary = summary_of(trace)
    assert "op0" in summary["operations"]


def _write_stream(path: Path, version: str) -> None:
    schema = S.events_schema({})
    schema = schema.with_metadata({**schema.metadata, b"rlscope.schema_version": version.encode()})
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(schema.empty_table())


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing", "no such file or directory"),
        ("empty_dir", "empty directory"),
        ("not_trace", "not an rlscope trace"),
        ("regular_file", "not a directory"),
        ("corrupt", "not an Arrow IPC stream"),
        ("empty_file", "empty file"),
        ("newer_schema", "schema version 99 is newer"),
    ],
)
def test_bad_input_is_one_line_error(tmp_path, setup, message):
    target = tmp_path / "trace"
    proc = target / "process-1"
    if setup == "empty_dir":
        target.mkdir()
    elif setup == "not_trace":
        target.mkdir()
        (target / "notes.txt").write_text("hello")
    elif setup == "regular_file":
        target.write_text("x")
    elif setup in ("corrupt", "empty_file", "newer_schema"):
        proc.mkdir(parents=True)
        if setup == "corrupt":
            (proc / S.EVENTS_FILE).write_bytes(os.urandom(300))
        elif setup == "empty_file":
            (proc / S.EVENTS_FILE).write_bytes(b"")
        else:
            _write_stream(proc / S.EVENTS_FILE, "99")
    with pytest.raises(TraceError, match=message):
        load_trace(target)
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", str(target)], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(tmp_path) in lines[0]
    assert r.stdout == ""


KILLED_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import rlscope
    rlscope.profile(sys.argv[1], backend=False, flush_interval=0.1).start()
    with rlscope.phase("training"):
        with rlscope.scope("forever"):
            n = 0
            while True:
                with rlscope.scope("tick"):
                    time.sleep(0.002)
                n += 1
                if n == 50:
                    print("ready", flush=True)
    """
)


def test_sigkill_leaves_readable_trace(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    trace = tmp_path / "trace"
    p = subprocess.Popen([sys.executable, str(script), str(trace)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    t = load_trace(trace)
    assert any("did not end normally" in w for w in t.warnings)
    s = summary_of(trace)
    ops = s["operations"]
    assert ops["tick"]["calls"] >= 50
    # the scope open at the kill is closed at the end of the data, not lost
    assert ops["forever"]["total_s"] == pytest.approx(s["wall_s"], rel=0.05)
    analyze_cmd = [sys.executable, "-m", "rlscope.cli.analyze", str(trace)]
    r = subprocess.run(analyze_cmd, capture_output=True, text=True)
    assert r.returncode == 0 and "did not end normally" in r.stderr
    quiet = subprocess.run([*analyze_cmd, "-q"], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == ""  # -q: errors only


FORK_SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp, sys, time
    import rlscope

    def work():
        with rlscope.scope("child_work"):
            time.sleep(0.05)

    if __name__ == "__main__":
        with rlscope.profile(sys.argv[1], backend=False), rlscope.scope("parent"):
            procs = [mp.get_context("fork").Process(target=work) for _ in range(2)]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
    """
)


def test_forked_children_get_their_own_process_dirs(tmp_path):
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    trace = tmp_path / "trace"
    subprocess.run([sys.executable, str(script), str(trace)], check=True)
    t = load_trace(trace)
    assert len(t.processes) == 3 and all(p.complete for p in t.processes)
    child_work = over_processes(summary_of(trace))["operations"]["child_work"]  # the children's own
    assert child_work["calls"] == 2
    assert child_work["exclusive_s"] == pytest.approx(0.1, rel=0.2)
    # GPU tracing stays the parent's: a forked child cannot use CUDA its parent initialized, and the
    # parent's CUPTI and NVML state did not survive the fork
    pids = {str(p.pid) for p in t.processes}
    gpu = sorted((p.metadata.get("ppid") in pids, recorded_options(p.metadata)["gpu"]) for p in t.processes)
    assert gpu == [(False, "auto"), (True, False), (True, False)]


def test_one_bad_process_does_not_hide_the_others(tmp_path):
    trace = tmp_path / "t"
    _small_trace(trace)
    bad = trace / "process-999999"
    bad.mkdir()
    (bad / S.EVENTS_FILE).write_bytes(os.urandom(100))
    t = load_trace(trace)
    assert len(t.processes) == 1
    assert any("process skipped" in w for w in t.warnings)


def test_empty_trace_is_one_line_error(tmp_path):
    proc = tmp_path / "t" / "process-1"
    proc.mkdir(parents=True)
    with pa.OSFile(str(proc / S.EVENTS_FILE), "wb") as f, pa.ipc.new_stream(f, S.events_schema({})) as w:
        w.write_table(S.events_schema({}).empty_table())
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", str(tmp_path / "t")], capture_output=True, text=True
    )
    assert r.returncode == 2 and "empty trace" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_session_records_torchs_threads_as_the_run_ended(tmp_path):
    """A program sets torch's intra-op threads after importing it (after the session started): the
    count the thread advice reads is the one at the session's end (end.json), with the usable cores."""
    import torch

    from rlscope.analysis import analyze

    before = torch.get_num_threads()
    try:
        with rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0):
            torch.set_num_threads(1 if before > 1 else 2)
            with rlscope.scope("op"):
                pass
        wanted = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    (entry,) = analyze(str(tmp_path / "t"), correct=False).summary["processes"]
    assert entry["threads"]["torch_intra_op"] == wanted
    assert entry["threads"]["usable_cores"] >= 1


def test_an_unreadable_end_of_run_file_is_one_warning(tmp_path):
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False, nvml_hz=0), rlscope.scope("op"):
        pass
    (proc_dir,) = (tmp_path / "t").glob("process-*")
    (proc_dir / S.END_META_FILE).write_text("[1, 2")
    proc = load_trace(tmp_path / "t").processes[0]
    assert any("end.json: unreadable" in w and "no end-of-run facts" in w for w in proc.warnings)


def test_name_ids_missing_from_the_names_get_placeholders_in_every_table(tmp_path):
    """Name ids past names.arrows (cut short, or a damaged id) of operation rows and of torch ops get
    an ``<unknown name N>`` each, the rows pointing to it; ids in range, -1 and the names of rows of
    other kinds are left as they are (no table changes when every id is in range)."""
    import numpy as np

    from rlscope.trace.reader import ProcessTrace, _placeholder_names

    def events(names: list[int]) -> pa.Table:
        kinds = [S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.PHASE_BEGIN]
        return pa.table(
            {"kind": pa.array(kinds[: len(names)], pa.int8()), "name": pa.array(names, pa.int32())}
        )

    def backend(names: list[int]) -> pa.Table:
        return pa.table({"name": pa.array(names, pa.int32())})

    intact = ProcessTrace(tmp_path, {}, [], events([0, 1, 50, -1]), ["a", "b"], backend=backend([1, -1, 0]))
    tables = (intact.events, intact.backend)
    _placeholder_names(intact, tmp_path, intact.warnings)
    assert (intact.events, intact.backend) == tables and intact.names == ["a", "b"] and not intact.warnings
    proc = ProcessTrace(tmp_path, {}, [], events([0, 7, 50, -1]), ["a", "b"], backend=backend([9, -2, 1]))
    _placeholder_names(proc, tmp_path, proc.warnings)
    assert proc.names == ["a", "b", "<unknown name -2>", "<unknown name 7>", "<unknown name 9>"]
    assert proc.events.column("name").to_pylist() == [0, 3, 50, -1]
    assert proc.backend.column("name").to_pylist() == [4, 2, 1]
    assert len(proc.warnings) == 1 and "3 name id(s) missing" in proc.warnings[0]
    assert np.array_equal(proc.events.column("kind").to_numpy(), intact.events.column("kind").to_numpy())
    for bad in (-2, 2):  # one id just out of range, in one table alone
        proc = ProcessTrace(tmp_path, {}, [], events([0, 1, -1, -1]), ["a", "b"], backend=backend([1, bad]))
        _placeholder_names(proc, tmp_path, proc.warnings)
        assert proc.names == ["a", "b", f"<unknown name {bad}>"]
        assert proc.backend.column("name").to_pylist() == [1, 2]


def _aggregate_batches(seed: int, batches: int, rows: int) -> list[pa.RecordBatch]:
    """aggregates.arrows batches of few distinct keys: each key summed from many rows."""
    import numpy as np

    rng = np.random.default_rng(seed)
    schema = pa.schema([(c, t) for c, t, _ in S.AGGREGATE_COLUMNS_DOC])
    out = []
    for b in range(batches):
        keys = {"thread": rng.integers(1, 4, rows), "mode": rng.integers(0, 3, rows)}
        keys |= {c: rng.integers(-1, 6, rows) for c in ("phase", "operation")}
        keys["category"] = rng.integers(-1, 8, rows)
        sums = {c: rng.integers(-(2**40), 2**62, rows) for c in ("time_ns", "calls", "boundaries", "cost_ns")}
        cols = {"ts_ns": np.full(rows, 1000 + b)} | keys | sums
        out.append(
            pa.RecordBatch.from_arrays([pa.array(cols[f.name], f.type) for f in schema], schema=schema)
        )
    return out


@pytest.mark.parametrize(("batches", "rows"), [(0, 0), (1, 1), (3, 50), (5, 60_000)])
def test_aggregates_are_summed_as_arrows_group_by_sums_them(tmp_path, batches, rows):
    """read_aggregates' sums per key, in the order Arrow's group_by gives the keys (the whole run's
    float sums follow it): the same table as the public group_by of every row, also over its folds
    of 200,000 rows."""
    from rlscope.trace.reader import AGGREGATE_KEYS, AGGREGATE_SUMS, read_aggregates

    parts = _aggregate_batches(batches + rows, batches, rows)
    path = tmp_path / S.AGGREGATES_FILE
    schema = pa.schema(
        [(c, t) for c, t, _ in S.AGGREGATE_COLUMNS_DOC], metadata={"rlscope.schema_version": "1"}
    )
    with pa.ipc.new_stream(str(path), schema) as w:
        for b in parts:
            w.write_batch(b)
    summed, last = read_aggregates(path)
    assert last == (999 + batches if batches else -1)
    if not batches:
        assert summed.num_rows == 0 and summed.column_names == AGGREGATE_KEYS + AGGREGATE_SUMS
        return
    table = pa.Table.from_batches(parts).select(AGGREGATE_KEYS + AGGREGATE_SUMS)
    if rows * batches <= 200_000:  # one fold: Arrow's grouping of the whole table
        ref = table.group_by(AGGREGATE_KEYS, use_threads=False).aggregate(
            [(c, "sum") for c in AGGREGATE_SUMS]
        )
        ref = ref.rename_columns([c.removesuffix("_sum") for c in ref.column_names])
        assert summed.equals(ref, check_metadata=True)
    totals = {}
    for row in table.to_pylist():
        key = tuple(row[c] for c in AGGREGATE_KEYS)
        totals[key] = [a + row[c] for a, c in zip(totals.get(key, [0] * 4), AGGREGATE_SUMS, strict=True)]
    got = {tuple(r[c] for c in AGGREGATE_KEYS): [r[c] for c in AGGREGATE_SUMS] for r in summed.to_pylist()}
    wrap = [[(v + 2**63) % 2**64 - 2**63 for v in sums] for sums in totals.values()]  # int64 sums wrap
    assert got == dict(zip(totals, wrap, strict=True)) and summed.schema == table.schema


def test_reading_aggregates_does_not_load_arrows_query_engine(tmp_path):
    """pyarrow.acero imports pyarrow's datasets, parquet and TLS: 35 ms of the analysis's start."""
    path = tmp_path / S.AGGREGATES_FILE
    schema = pa.schema(
        [(c, t) for c, t, _ in S.AGGREGATE_COLUMNS_DOC], metadata={"rlscope.schema_version": "1"}
    )
    with pa.ipc.new_stream(str(path), schema) as w:
        for b in _aggregate_batches(1, 2, 10):
            w.write_batch(b)
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from rlscope.trace.reader import read_aggregates
        table, _ = read_aggregates(Path({str(path)!r}))
        assert table.num_rows
        print(sorted(m for m in ("pyarrow.acero", "pyarrow.dataset") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
