"""The live view (rlscope top, rlscope run --live): streams followed as they grow, exact figures.

Traces are written here byte by byte as a session's writer writes them (zstd IPC streams, one
record batch per flush), so a test can stop a file in the middle of a batch, add a process between
two refreshes, and know every figure the view must show.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from rlscope.analysis.live import STEPS_OUTERMOST, STEPS_SIMULATION, LiveFigures, LiveView
from rlscope.cli import live as cli_live
from rlscope.cli import main
from rlscope.trace import schema as S
from rlscope.trace.follow import StreamTail, TraceFollower
from rlscope.viz import live as viz_live

S_NS = 1_000_000_000
MAIN, HELPER, WRITER = 100, 200, 300  # thread ids
HOST = "synthetic-host"  # not this host: a process has ended only when its writer closed its events
# names.arrows of every synthetic process: (name, automatic)
NAMES = [("training", 0), ("inference", 0), ("simulation", 0), ("backprop", 0), ("simulation", 1)]
TRAINING, INFERENCE, SIMULATION, BACKPROP, SIMULATION_AUTO = range(5)
PYTHON, SIMULATOR, BACKEND = 0, 1, 2


class Stream:
    """One stream file written as the trace writer writes it, whose bytes a test appends when it likes."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.schema = schema
        self._sink = io.BytesIO()
        options = pa.ipc.IpcWriteOptions(compression="zstd")
        self._writer = pa.ipc.new_stream(self._sink, schema, options=options)
        self._taken = 0
        self.write([])  # the schema and an empty batch reach disk first, as StreamFile has it

    def _new_bytes(self) -> bytes:
        data = self._sink.getvalue()
        out, self._taken = data[self._taken :], len(data)
        return out

    def batch(self, rows: list[tuple]) -> bytes:
        """The bytes of one record batch of ``rows`` (not yet on disk)."""
        cols = list(zip(*rows, strict=True)) if rows else [[] for _ in self.schema]
        arrays = [pa.array(list(c), type=f.type) for c, f in zip(cols, self.schema, strict=True)]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        return self._new_bytes()

    def append(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(data)

    def write(self, rows: list[tuple]) -> None:
        self.append(self.batch(rows))

    def close(self) -> None:
        self._writer.close()
        self.append(self._new_bytes())


class Proc:
    """A profiled process's directory: its session's start row, names, and aggregates flush by flush."""

    def __init__(self, trace: Path, pid: int, ppid: int = 1, start_ns: int = 0, **meta: str) -> None:
        self.dir = trace / f"{S.PROCESS_PREFIX}{pid}"
        self.dir.mkdir(parents=True)
        metadata = {"pid": str(pid), "ppid": str(ppid), "host": HOST, **meta}
        self.events = Stream(self.dir / S.EVENTS_FILE, S.events_schema(metadata))
        self.names = Stream(self.dir / S.NAMES_FILE, S.names_schema(auto=True))
        self.aggregates = Stream(self.dir / S.AGGREGATES_FILE, S.columns_schema(S.AGGREGATE_COLUMNS_DOC))
        self.names.write([(i, n, a) for i, (n, a) in enumerate(NAMES)])
        self.events.write([(start_ns, MAIN, S.SESSION_START, -1, -1, -1, 0)])

    def flush(self, ts_s: float, rows: list[tuple]) -> None:
        """Aggregate rows (thread, phase, operation, category, time_s, calls) of the flush at ``ts_s``."""
        self.aggregates.write(_rows(ts_s, rows))

    def end(self, ts_s: float) -> None:
        self.events.write([(int(ts_s * S_NS), MAIN, S.SESSION_END, -1, -1, -1, 0)])
        for s in (self.events, self.names, self.aggregates):
            s.close()


def _rows(ts_s: float, rows: list[tuple]) -> list[tuple]:
    return [
        (int(ts_s * S_NS), thread, 0, phase, op, cat, round(t * S_NS), calls, 0, 0)
        for thread, phase, op, cat, t, calls in rows
    ]


def _learner_flush(k: int) -> list[tuple]:
    """One second of a learner whose k-th flush has k x its first's calls: main-thread time 1 s."""
    return [
        (MAIN, TRAINING, INFERENCE, PYTHON, 0.3, 0),
        (MAIN, TRAINING, INFERENCE, BACKEND, 0.1, 0),
        (MAIN, TRAINING, SIMULATION, SIMULATOR, 0.4, 0),
        (MAIN, TRAINING, -1, PYTHON, 0.2, 0),
        (HELPER, -1, -1, PYTHON, 1.0, 0),  # an idle helper thread: not work
        (HELPER, -1, BACKPROP, PYTHON, 0.5, 0),  # a helper inside an operation: counted
        (WRITER, -1, -1, 7, 0.01, 0),  # the writer's flush, outside operations: not counted
        (MAIN, TRAINING, INFERENCE, S.AGGREGATE_CALLS, 0.4, 10 * k),
        (MAIN, TRAINING, SIMULATION, S.AGGREGATE_CALLS, 0.4, 10 * k),
        (HELPER, -1, BACKPROP, S.AGGREGATE_CALLS, 0.5, 5),
    ]


def _view(follower: TraceFollower, figures: LiveFigures) -> LiveView:
    figures.update(follower.poll())
    return figures.view(follower.ended)


def test_a_stream_tail_reads_complete_batches_only_and_goes_on_where_it_stopped(tmp_path):
    proc = Proc(tmp_path, 7)
    tail = StreamTail(proc.dir / S.AGGREGATES_FILE, S.AGGREGATE_COLUMNS)
    assert [b.num_rows for b in tail.read()] == [0]  # the writer's empty first batch
    data = proc.aggregates.batch(_rows(1.0, _learner_flush(1)))
    done = 0
    for cut in (5, 40, len(data) // 2, len(data) - 1):  # inside the prefix, the header, the body
        proc.aggregates.append(data[done:cut])
        done = cut
        assert tail.read() == [], cut
    proc.aggregates.append(data[done:])
    (batch,) = tail.read()
    assert batch.num_rows == 10 and batch.column("calls").to_pylist()[-3:] == [10, 10, 5]
    before = tail.bytes_read
    assert tail.read() == [] and tail.bytes_read - before <= 8  # nothing new: one look at the end
    assert not tail.closed
    proc.aggregates.close()
    assert tail.read() == [] and tail.closed and not tail.damaged


def _child_flush(sim_s: float, calls: int) -> list[tuple]:
    return [
        (MAIN, -1, SIMULATION_AUTO, SIMULATOR, sim_s, 0),
        (MAIN, -1, -1, PYTHON, round(1.0 - sim_s, 9), 0),
        (MAIN, -1, SIMULATION_AUTO, S.AGGREGATE_CALLS, sim_s, calls),
    ]


@pytest.fixture
def run(tmp_path):
    """A learner with two flushes on disk (at 1 s and 2 s)."""
    learner = Proc(tmp_path / "trace", 10)
    learner.flush(1.0, _learner_flush(1))
    learner.flush(2.0, _learner_flush(2))
    return tmp_path / "trace", learner


def _ops(span) -> dict[str, tuple]:
    return {
        op: (round(f.seconds, 9), round(f.share, 9), f.calls, f.per_s) for op, f in span.operations.items()
    }


def test_the_last_interval_and_the_run_so_far_are_exact_as_flushes_and_processes_come(run):
    trace, learner = run
    follower, figures = TraceFollower(trace), LiveFigures(every_s=2.0)
    view = _view(follower, figures)
    (main_group,) = view.groups
    assert (main_group.role, main_group.pids, main_group.ended) == ("main", [10], 0)
    expected = {
        "backprop": (1.0, 0.5, 10, 5.0),  # on a helper thread, inside an operation
        "inference": (0.8, 0.4, 30, 15.0),
        "simulation": (0.8, 0.4, 30, 15.0),
        "[unannotated]": (0.4, 0.2, 0, None),  # main thread only: the helper's idle second is not work
    }
    assert _ops(main_group.interval) == _ops(main_group.so_far) == expected
    cats = {c: (round(p.seconds, 9), round(p.share, 9)) for c, p in main_group.so_far.categories.items()}
    assert cats == {"python": (2.0, 1.0), "simulator": (0.8, 0.4), "backend": (0.2, 0.1)}
    assert main_group.interval.seconds == 2.0 and main_group.interval.main_s == 2.0
    assert (view.steps_operation, view.steps_rule, view.steps_interval) == (
        "simulation",
        STEPS_SIMULATION,
        15.0,
    )
    assert view.elapsed_s == 2.0 and not view.ended and view.gpu_interval is None

    # the learner's third flush, the first half of its fourth; a worker appears, with NVML samples
    learner.flush(3.0, _learner_flush(3))
    fourth = learner.aggregates.batch(_rows(4.0, _learner_flush(4)))
    learner.aggregates.append(fourth[: len(fourth) // 2])
    worker = Proc(trace, 11, ppid=10, start_ns=int(1.5 * S_NS))
    worker.flush(2.5, _child_flush(0.9, 100))
    worker.flush(3.5, _child_flush(0.9, 100))
    nvml = Stream(worker.dir / S.NVML_FILE, S.columns_schema(S.NVML_COLUMNS_DOC))
    nvml.write(
        [
            (int(t * S_NS), 0, u, 0, 0, 0, 0)
            for t, u in ((1.0, 90), (2.0, 10), (2.6, 20), (3.0, 30), (3.4, 40))
        ]
    )
    view = _view(follower, figures)
    main_group, workers = view.groups
    assert _ops(main_group.interval) == {  # flushes 2 and 3: (1 s, 3 s]
        "backprop": (1.0, 0.5, 10, 5.0),
        "inference": (0.8, 0.4, 50, 25.0),
        "simulation": (0.8, 0.4, 50, 25.0),
        "[unannotated]": (0.4, 0.2, 0, None),
    }
    assert _ops(main_group.so_far)["inference"] == (1.2, 0.4, 60, 20.0)  # 3 flushes, 3 s
    assert (workers.role, workers.pids) == ("env worker", [11])  # it stepped envs
    assert _ops(workers.interval) == {
        "simulation": (1.8, 0.9, 200, 100.0),
        "[unannotated]": (0.2, 0.1, 0, None),
    }
    # the learner's simulation scope and the worker's automatic one are one operation: steps are both's
    assert view.steps_operation == "simulation" and (view.steps_interval, view.steps_so_far) == (125.0, 120.0)
    assert view.gpu_interval == 25.0 and view.gpu_so_far == 38.0 and view.gpu_devices == 1
    assert view.elapsed_s == 3.5
    assert viz_live.line(view) == (
        "rlscope: 4 s  125 steps/s  main · pid 10: backprop 50%  inference 40%  simulation 40%"
        "  [unannotated] 20%  GPU 25%  | env worker · pid 11: simulation 90%  [unannotated] 10%"
    )

    # the rest of the fourth flush; both sessions end
    learner.aggregates.append(fourth[len(fourth) // 2 :])
    worker.flush(4.0, _child_flush(0.6, 50))
    assert not _view(follower, figures).ended
    learner.end(4.0)
    worker.end(4.0)
    view = _view(follower, figures)
    assert view.ended and [g.ended for g in view.groups] == [1, 1]
    main_group, workers = view.groups
    assert _ops(main_group.so_far)["inference"] == (1.6, 0.4, 100, 25.0)
    assert _ops(workers.so_far)["simulation"] == (2.4, 0.8, 250, 100.0)
    assert viz_live.line(view).startswith("rlscope: ended, 4 s  ")


def test_a_refresh_reads_only_what_came_since_the_last(run):
    trace, learner = run
    follower, figures = TraceFollower(trace), LiveFigures(every_s=2.0)
    _view(follower, figures)
    before = follower.bytes_read
    _view(follower, figures)
    assert follower.bytes_read - before <= 8 * 4  # one look past the end of each stream
    data = learner.aggregates.batch(_rows(3.0, _learner_flush(3)))
    learner.aggregates.append(data)
    before = follower.bytes_read
    _view(follower, figures)
    assert follower.bytes_read - before <= len(data) + 8 * 4


def test_steps_are_the_outermost_operation_of_the_main_thread_without_simulation(tmp_path):
    proc = Proc(tmp_path, 5)
    proc.flush(
        2.0,
        [
            (MAIN, -1, INFERENCE, PYTHON, 0.5, 0),
            (MAIN, -1, BACKPROP, PYTHON, 1.5, 0),
            (MAIN, -1, INFERENCE, S.AGGREGATE_CALLS, 0.5, 40),
            (MAIN, -1, BACKPROP, S.AGGREGATE_CALLS, 1.5, 8),
        ],
    )
    follower, figures = TraceFollower(tmp_path), LiveFigures(every_s=2.0)
    view = _view(follower, figures)
    assert (view.steps_operation, view.steps_rule, view.steps_so_far) == ("backprop", STEPS_OUTERMOST, 4.0)


def test_a_process_killed_before_it_closed_its_trace_has_ended(tmp_path):
    Proc(tmp_path, 5, host="here")
    assert not TraceFollower(tmp_path, alive=lambda pid: True, host="here").poll()[0].ended
    follower = TraceFollower(tmp_path, alive=lambda pid: False, host="here")
    assert follower.poll()[0].ended and follower.ended
    elsewhere = TraceFollower(tmp_path, alive=lambda pid: False, host="another-host")
    assert not elsewhere.poll()[0].ended  # its pid says nothing on another host


def test_a_run_before_its_first_process_is_waited_for(tmp_path):
    (tmp_path / "rlscope-manifest.jsonl").write_text('{"format": "rlscope-trace"}\n')
    follower, figures = TraceFollower(tmp_path), LiveFigures(every_s=2.0)
    view = _view(follower, figures)
    assert view.groups == [] and not view.ended
    assert viz_live.line(view) == viz_live.waiting_line()
    Proc(tmp_path, 9).flush(1.0, _child_flush(0.5, 5))
    assert [g.role for g in _view(follower, figures).groups] == ["main"]


def test_top_once_prints_the_view(run, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    trace, _ = run
    assert main.main(["top", str(trace), "--once"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "running — 2.0 s — 1 process" in out
    assert "steps/s: 15.0 in the last 2.0 s, 15.0 so far (calls of simulation, summed" in out
    assert "main · pid 10 — last 2.0 s and so far (2.0 s)" in out
    cells = [line.replace("│", " ").split() for line in out.splitlines()]
    rows = {c[0]: c[1:] for c in cells if c}
    assert rows["inference"] == ["0.80", "40%", "30", "15.0", "0.80", "40%", "30", "15.0"]
    assert rows["[unannotated]"] == ["0.40", "20%", "-", "-", "0.40", "20%", "-", "-"]
    assert "categories (last / so far): python 100% / 100%  simulator 40% / 40%  backend 10% / 10%" in out


def test_top_without_a_terminal_prints_a_line_per_interval_until_the_run_ends(run, capsys, monkeypatch):
    trace, learner = run

    def the_run_ends(seconds: float) -> None:  # the refresh's wait: meanwhile the run writes and ends
        learner.flush(3.0, _learner_flush(3))
        learner.end(3.0)

    monkeypatch.setattr(cli_live.time, "sleep", the_run_ends)
    assert main.main(["top", str(trace), "--every", "2"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines() == [
        "rlscope: 2 s  15.0 steps/s  backprop 50%  inference 40%  simulation 40%  [unannotated] 20%",
        "rlscope: ended, 3 s  20.0 steps/s  backprop 50%  inference 40%  simulation 40%  [unannotated] 20%",
    ]


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: p / "missing", "no such file or directory"),
        (lambda p: p, "empty directory, not an rlscope trace"),
        (lambda p: (p / "notes.txt").write_text("x") and p, "not an rlscope trace"),
        (lambda p: (p / "f").write_text("x") and p / "f", "not a directory"),
    ],
)
def test_top_on_bad_input_is_one_line_and_status_2(tmp_path, capsys, make, why):
    path = make(tmp_path)
    assert main.main(["top", str(path), "--once"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("rlscope: error: ") and why in err


def test_a_process_that_is_no_trace_is_one_line_and_status_2(tmp_path, capsys):
    (tmp_path / "process-3").mkdir()
    (tmp_path / "process-3" / S.EVENTS_FILE).write_bytes(b"not arrow at all")
    assert main.main(["top", str(tmp_path), "--once"]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "not an Arrow IPC stream" in err


def test_the_pinned_region_scrolls_the_program_above_and_gives_the_terminal_back():
    frames: list[bytes] = []
    region = viz_live.PinnedRegion(2, size=lambda: (80, 24), write=frames.append)
    region.draw(["one", "two"])
    region.close()
    setup, teardown = frames[0].decode(), frames[1].decode()
    assert "\x1b[1;16r" in setup  # 24 rows, the last 8 kept for the view
    assert "\x1b[17;1H\x1b[2Kone" in setup and "\x1b[18;1H\x1b[2Ktwo" in setup
    assert setup.endswith("\x1b8") and "\x1b[r" in teardown and "\x1b[J" in teardown


SCRIPT = """
import time
import rlscope

end = time.perf_counter() + 2.5
i = 0
while time.perf_counter() < end:
    with rlscope.scope("simulation"):
        time.sleep(0.002)
    i += 1
    if i % 200 == 0:
        print("tick", i, flush=True)
print("done", flush=True)
"""


def test_run_live_prints_progress_lines_and_leaves_the_program_output_whole(tmp_path):
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--live", "--live-every", "0.5", "--no-analyze"]
    cmd += ["--gpu", "off", "--trace-dir", "t", "--", sys.executable, "script.py"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    progress = [line for line in r.stderr.splitlines() if line.startswith("rlscope: ") and "steps/s" in line]
    assert progress, r.stderr
    assert "simulation" in progress[-1]
    out = r.stdout.splitlines()
    assert out[-1] == "done" and all(line.startswith("tick ") for line in out[:-1])


def test_a_batch_that_does_not_decode_stops_that_file_there_and_is_said(run):
    trace, learner = run
    follower, figures = TraceFollower(trace), LiveFigures(every_s=2.0)
    data = bytearray(learner.aggregates.batch(_rows(3.0, _learner_flush(3))))
    body = 8 + int.from_bytes(data[4:8], "little")  # past its prefix and header
    data[body + 8 : body + 16] = b"\x00" * 8  # its first buffer's zstd frame: no longer one
    learner.aggregates.append(bytes(data))
    view = _view(follower, figures)
    assert _ops(view.groups[0].so_far)["inference"] == (0.8, 0.4, 30, 15.0)  # the two flushes before it
    (warning,) = follower.take_warnings()
    assert "aggregates.arrows: record batch at byte" in warning and "does not decode" in warning
