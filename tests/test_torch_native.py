"""The native backend-op recorder (collectors/torch_native.cpp): build, what it records, the trace
it writes, what the analyzer makes of it, and the fallback to the Python mode."""

from __future__ import annotations

import ctypes
import multiprocessing
import shutil
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import rlscope
from rlscope import annotate, categories
from rlscope.analysis.breakdown import analyze
from rlscope.analysis.gpu import timeline_with_gpu
from rlscope.analysis.intervals import intervals
from rlscope.analysis.timeline import backend_intervals, build_timeline
from rlscope.collectors import native_build, torch_native, torch_ops
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from rlscope.viz.chrome import to_chrome
from tests.conftest import write_stream

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def lib():
    """The built library (the first build of a machine takes seconds; later ones are cached)."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler to build the native backend-op recorder")
    try:
        return torch_native.load(torch)
    except torch_native.NativeBackendUnavailable as e:
        pytest.skip(f"native backend-op recorder unavailable: {e}")


@pytest.fixture
def recording(lib):
    """The callback on, queues emptied before and after; yields a drain function."""
    assert lib.tn_start() == 0
    lib.tn_enable(1)

    def drain() -> list[tuple[str, int, int, int]]:
        """(name, tid, start, end) of the records so far, in drain order."""
        n = lib.tn_pending()
        start, end, tid = (np.empty(n, np.int64) for _ in range(3))
        name = np.empty(n, np.int32)
        i64 = ctypes.c_int64
        p = torch_native._ptr
        k = lib.tn_drain(p(start, i64), p(end, i64), p(tid, i64), p(name, ctypes.c_int32), n)
        return [
            (lib.tn_name(int(nm)).decode(), int(t), int(s), int(e))
            for s, e, t, nm in zip(start[:k], end[:k], tid[:k], name[:k], strict=True)
        ]

    drain()
    yield drain
    lib.tn_stop()
    drain()


def mine(records: list, tid: int | None = None) -> list:
    tid = threading.get_native_id() if tid is None else tid
    return [r for r in records if r[1] == tid]


def test_build_is_cached_and_shares_python_clock_and_thread_ids(lib):
    path = torch_native.library_path(torch)
    assert path.exists() and path.parent == native_build.build_dir()
    before = time.perf_counter_ns()
    now = lib.tn_now()
    after = time.perf_counter_ns()
    assert before <= now <= after  # CLOCK_MONOTONIC, the clock of perf_counter_ns
    assert lib.tn_gettid() == threading.get_native_id()
    assert torch_native.build(torch) == path  # cached: no second compile


def test_outermost_ops_only_with_their_names(recording, lib):
    a, w = torch.randn(8, 8), torch.randn(4, 8)
    torch.nn.functional.linear(a, w)  # runs t, mm/addmm... inside: nested, not recorded
    recording()
    muted = lib.tn_muted_ops()
    t0 = time.perf_counter_ns()
    for _ in range(10):  # linear's nested ops get muted after a few calls: still one record each
        torch.add(a, a)
        torch.nn.functional.linear(a, w)
        a.sum()
        torch.matmul(a, a)
    t1 = time.perf_counter_ns()
    recs = mine(recording())
    assert [r[0] for r in recs] == ["aten::add", "aten::linear", "aten::sum", "aten::matmul"] * 10
    starts, ends = np.array([r[2] for r in recs]), np.array([r[3] for r in recs])
    assert (starts >= t0).all() and (ends <= t1).all() and (ends > starts).all()
    assert (starts[1:] >= ends[:-1]).all()  # one thread's outermost ops never overlap
    names = [lib.tn_name(i).decode() for i in range(lib.tn_num_names())]
    assert lib.tn_mute_state(names.index("aten::linear")) == 1  # 10 nested ops: worth muting
    assert lib.tn_mute_state(names.index("aten::add")) == -1  # none nested
    assert lib.tn_muted_ops() > muted


def test_muting_does_not_hide_nested_ops_from_torch_profiler(recording, lib):
    a, w = torch.randn(8, 8), torch.randn(4, 8)
    for _ in range(10):
        torch.nn.functional.linear(a, w)
    recording()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        muted = lib.tn_muted_ops()
        torch.nn.functional.linear(a, w)
        assert lib.tn_muted_ops() == muted
    assert "aten::t" in {e.key for e in prof.key_averages()}
    assert [r[0] for r in mine(recording())] == ["aten::linear"]


def test_second_python_thread_recorded_with_its_native_id(recording):
    a = torch.randn(16, 16)
    seen = {}

    def work() -> None:
        seen["tid"] = threading.get_native_id()
        torch.mm(a, a)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    recs = recording()
    assert [r[0] for r in mine(recs, seen["tid"])] == ["aten::mm"]
    assert not [r for r in mine(recs) if r[0] == "aten::mm"]


def test_backward_on_cpu_recorded_per_autograd_node_by_the_callback(recording):
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 3, requires_grad=True)
    loss = (x @ w).tanh().sum()
    recording()
    loss.backward()
    names = [r[0] for r in mine(recording())]  # CPU backward runs on the calling thread
    nodes = [n for n in names if n.startswith("autograd::engine::evaluate_function: ")]
    assert any("TanhBackward0" in n for n in nodes) and any("MmBackward0" in n for n in nodes)
    assert "aten::tanh_backward" not in names  # nested in its node


def test_backward_and_grad_calls_are_one_record_each_in_a_session(lib, tmp_path):
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 3, requires_grad=True)
    original = torch.autograd._engine_run_backward
    with rlscope.profile(tmp_path / "t", gpu=False, windows=False, nvml_hz=0):
        assert torch.autograd._engine_run_backward is not original
        loss = (x @ w).tanh().sum()
        t0 = time.perf_counter_ns()
        loss.backward()
        t1 = time.perf_counter_ns()
        torch.autograd.grad((x @ w).sum(), w)
    assert torch.autograd._engine_run_backward is original
    proc = load_trace(tmp_path / "t").processes[0]
    b = proc.backend.to_pydict()
    rows = [
        (proc.name(n), s, e)
        for n, s, e, t in zip(b["name"], b["start_ns"], b["end_ns"], b["thread"], strict=True)
        if t == threading.get_native_id()
    ]
    # the engine's work between nodes is backend time too (on CUDA, the caller's whole wait);
    # backward() makes the seed gradient first
    assert [n for n, s, e in rows if s < t1 and e > t0] == ["aten::ones_like", "torch.autograd.backward"]
    assert [n for n, _, _ in rows].count("torch.autograd.backward") == 2  # backward and grad
    assert not [n for n, _, _ in rows if n.startswith("autograd::engine")]


def test_a_backward_in_a_light_window_makes_no_call_into_the_library(lib, tmp_path, monkeypatch):
    """The engine wrapper's call into the library costs a backward() microseconds in light windows
    too, where the windows cannot see it: off, the wrapper does not call; on, it records the call."""
    calls: list[bytes] = []
    real = torch_native._pylib.tn_enter
    monkeypatch.setattr(torch_native._pylib, "tn_enter", lambda name: calls.append(name) or real(name))
    x = torch.randn(4, 8, requires_grad=True)
    with rlscope.profile(tmp_path / "t", gpu=False, windows=False, nvml_hz=0) as sess:
        backend = next(c.active for c in sess._collectors if isinstance(c, torch_ops.BackendRecorder))
        assert isinstance(backend, torch_native.NativeBackendCollector)
        backend.set_enabled(False)
        (x * 2).sum().backward()
        assert calls == []
        backend.set_enabled(True)
        (x * 2).sum().backward()
        assert calls == [torch_native.ENGINE_NAME]


def test_set_enabled_false_records_nothing(recording, lib):
    a = torch.randn(4)
    recording()
    lib.tn_enable(0)
    for _ in range(5):
        torch.add(a, a)
    assert mine(recording()) == []
    lib.tn_enable(1)
    torch.add(a, a)
    assert [r[0] for r in mine(recording())] == ["aten::add"]


def test_compiled_region_is_one_record(recording):
    @torch.compile(backend="eager")
    def f(x):
        return (x.sin() + x.cos()).relu() * 2

    x = torch.randn(32)
    f(x)  # compiles
    recording()
    f(x)
    names = [r[0] for r in mine(recording())]
    assert any(n.startswith("Torch-Compiled Region") for n in names)
    assert not {"aten::sin", "aten::cos", "aten::relu", "aten::mul"} & set(names)


def _analyzed(trace_dir) -> dict[tuple[str, str], float]:
    b = analyze(load_trace(trace_dir))[0]
    t = b.cpu_time.to_pylist()
    return {(r["operation"], r["category"]): r["seconds"] for r in t if r["main_thread"]}


def test_profile_backend_time_matches_timed_matmuls(lib, tmp_path):
    a = torch.randn(384, 384)
    a @ a
    timed = 0
    n = 20
    with rlscope.profile(tmp_path / "t", gpu=False, windows=False, nvml_hz=0) as session:
        kinds = [c.kind for c in session._collectors if isinstance(c, torch_ops.BackendRecorder)]
        assert kinds == ["native"]
        for _ in range(n):
            with rlscope.scope("matmul"):
                t0 = time.perf_counter_ns()
                a @ a
                timed += time.perf_counter_ns() - t0
            with rlscope.scope("python"):
                sum(range(2000))
    proc = load_trace(tmp_path / "t").processes[0]
    assert proc.metadata["backend.collector"] == "native"
    got = _analyzed(tmp_path / "t")
    backend = got[("matmul", "backend")] * 1e9
    # the timed window holds the op plus a Python call's overhead: a little more than the op
    assert timed * 0.8 - n * 20_000 <= backend <= timed
    assert ("python", "backend") not in got

    # the Chrome export names the ops
    chrome = to_chrome(intervals(load_trace(tmp_path / "t")))
    ops = [e for e in chrome["traceEvents"] if e.get("cat") == "cpu_op"]
    assert {e["name"] for e in ops} >= {"aten::matmul"}
    assert "backend" not in {e["name"] for e in ops}


def _child_work() -> None:
    a = torch.ones(8)  # tiny: no OpenMP region (GNU OpenMP does not survive fork)
    with rlscope.scope("child"):
        torch.sub(a, a)


def test_forked_child_records_its_own_ops(lib, tmp_path):
    ctx = multiprocessing.get_context("fork")
    a = torch.randn(8, 8)
    with rlscope.profile(tmp_path / "t", gpu=False, windows=False, nvml_hz=0):
        torch.add(a, a)
        p = ctx.Process(target=_child_work)
        p.start()
        p.join()
    assert p.exitcode == 0
    procs = {pr.pid: pr for pr in load_trace(tmp_path / "t").processes}
    child = procs[p.pid]
    names = {child.name(i) for i in child.backend.column("name").to_pylist()}
    assert "aten::sub" in names and "aten::add" not in names  # the parent's records stay its own
    assert set(child.backend.column("thread").to_pylist()) == {p.pid}
    parent = next(pr for pid, pr in procs.items() if pid != p.pid)
    assert "aten::sub" not in {parent.name(i) for i in parent.backend.column("name").to_pylist()}


def test_fallback_to_python_mode_when_the_build_fails(tmp_path, monkeypatch, capfd):
    def fail(_torch):
        raise torch_native.NativeBackendUnavailable("compiler says no")

    monkeypatch.setattr(torch_native, "_lib", None)
    monkeypatch.setattr(torch_native, "build", fail)
    a = torch.randn(4)
    with rlscope.profile(tmp_path / "t", gpu=False, windows=False, nvml_hz=0) as session:
        (rec,) = [c for c in session._collectors if isinstance(c, torch_ops.BackendRecorder)]
        assert rec.kind == "python"
        with rlscope.scope("op"):
            torch.add(a, a)
    err = capfd.readouterr().err.strip().splitlines()
    assert [ln for ln in err if "native backend-op recorder" in ln] == [
        next(ln for ln in err if "compiler says no" in ln)
    ]
    proc = load_trace(tmp_path / "t").processes[0]
    assert proc.backend is None
    assert ("op", "backend") in _analyzed(tmp_path / "t")


def test_build_failure_and_missing_compiler_say_why_in_one_line(tmp_path, monkeypatch):
    broken = tmp_path / "broken.cpp"
    broken.write_text('#error "this recorder does not build"\n')
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch_native, "SOURCE", broken)
    with pytest.raises(torch_native.NativeBackendUnavailable, match="does not build") as e:
        torch_native.build(torch)
    assert "\n" not in str(e.value)
    assert not list((tmp_path / "cache" / "build").glob("*"))  # no half-written file left
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(torch_native.NativeBackendUnavailable, match="no C\\+\\+ compiler"):
        torch_native.build(torch)


# -- the analyzer, on hand-made traces (no torch needed) --------------------------------------


def _events(rows: list[tuple]) -> pa.Table:
    schema = S.events_schema({})
    cols = list(zip(*rows, strict=True))
    return pa.table([pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def test_timeline_merges_backend_intervals_under_cuda_api():
    main, other = 100, 200
    ev = _events(
        [
            (0, main, S.SESSION_START, -1, -1, -1, 0),
            (10, main, S.OP_BEGIN, 0, -1, 7, 0),
            (90, main, S.OP_END, 0, -1, 7, 0),
            (100, main, S.SESSION_END, -1, -1, -1, 0),
        ]
    )
    backend = (
        np.array([main, main, other]),
        np.array([20, 50, 30]),
        np.array([50, 70, 40]),  # the second op starts where the first ends
        np.array([3, 4, 5]),
    )
    api = (np.array([main]), np.array([55]), np.array([60]))
    tl = build_timeline(ev, api=api, backend=backend)
    m = tl.thread == main
    rows = zip(tl.ts[m], tl.seg_end[m], tl.cat[m], strict=True)
    seg = {(int(t), int(e)): int(c) for t, e, c in rows if e > t}
    assert seg == {
        (0, 10): categories.PYTHON,
        (10, 20): categories.PYTHON,
        (20, 50): categories.BACKEND,
        (50, 55): categories.BACKEND,
        (55, 60): categories.CUDA_API,
        (60, 70): categories.BACKEND,
        (70, 90): categories.PYTHON,
        (90, 100): categories.PYTHON,
    }
    begins = tl.kind == S.BACKEND_BEGIN
    assert tl.name[begins & m].tolist() == [3, 4]
    assert int(tl.cat[(tl.thread == other) & (tl.ts == 30)][0]) == categories.BACKEND


def test_python_mode_category_rows_still_make_backend_time():
    main = 1
    ev = _events(
        [
            (0, main, S.SESSION_START, -1, -1, -1, 0),
            (10, main, S.CAT_BEGIN, categories.BACKEND, 0, -1, 0),
            (30, main, S.CAT_END, categories.BACKEND, 0, -1, 0),
            (40, main, S.SESSION_END, -1, -1, -1, 0),
        ]
    )
    tl = build_timeline(ev, backend=(np.zeros(0, np.int64),) * 4)
    assert int(tl.cat[tl.ts == 10][0]) == categories.BACKEND
    assert int(tl.cat[tl.ts == 30][0]) == categories.PYTHON


def test_backend_intervals_clipped_to_the_session_and_made_disjoint():
    table = pa.table(
        {
            "start_ns": pa.array([5, 20, 25, 60], pa.int64()),
            "end_ns": pa.array([15, 30, 28, 70], pa.int64()),
            "thread": pa.array([1, 1, 1, 1], pa.int64()),
            "name": pa.array([0, 1, 2, 3], pa.int32()),
        }
    )
    _, start, end, name = backend_intervals(table, 10, 50)
    assert start.tolist() == [10, 20, 25] and end.tolist() == [15, 25, 28] and name.tolist() == [0, 1, 2]


def test_reader_and_timeline_use_backend_file(tmp_path):
    s = rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False, nvml_hz=0).start()
    op = annotate.intern("aten::mm")
    t0 = time.perf_counter_ns()
    with rlscope.scope("step"):
        time.sleep(0.002)
    t1 = time.perf_counter_ns()
    s.stop()
    proc_dir = s.process_dir
    write_stream(proc_dir / S.BACKEND_FILE, S.BACKEND_COLUMNS_DOC, [(t0 + 100, t1 - 100, s.main_tid, op)])
    proc = load_trace(tmp_path / "t").processes[0]
    assert proc.backend.num_rows == 1
    tl, _, _ = timeline_with_gpu(proc)
    inside = (tl.kind == S.BACKEND_BEGIN) & (tl.name == op)
    assert inside.sum() == 1 and int(tl.cat[inside][0]) == categories.BACKEND


@pytest.mark.gpu
def test_backward_on_cuda_is_one_record_spanning_the_callers_wait(lib, tmp_path):
    """On CUDA the engine's device thread runs the nodes while the caller waits: the caller's
    thread holds one ``torch.autograd.backward`` record over that wait (the engine wrapper,
    rlscope/runtime/autograd_engine.py), in full windows and light ones alike unwrapped at the end."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.randn(64, device="cuda", requires_grad=True)

    def graph() -> torch.Tensor:
        y = x
        for _ in range(100):  # 200 nodes: the engine's work outweighs the Python around it
            y = y * 1.01 + 0.1
        return y.sum()

    # warm: the first backward on a device loads CUDA modules lazily before the engine runs (the
    # seed gradient's kernel): 15 ms outside the engine call on an H100, against 4 ms inside it
    graph().backward()
    original = torch.autograd._engine_run_backward
    spans = []
    with rlscope.profile(tmp_path / "t", gpu=False, windows=False, nvml_hz=0):
        for _ in range(3):
            loss = graph()
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            loss.backward()
            t1 = time.perf_counter_ns()
            spans.append((t0, t1))
        torch.cuda.synchronize()
    assert torch.autograd._engine_run_backward is original
    proc = load_trace(tmp_path / "t").processes[0]
    b = proc.backend.to_pydict()
    main = threading.get_native_id()
    recs = [
        (s, e)
        for n, s, e, t in zip(b["name"], b["start_ns"], b["end_ns"], b["thread"], strict=True)
        if t == main and proc.name(n) == "torch.autograd.backward"
    ]
    assert len(recs) == 3
    for (s, e), (t0, t1) in zip(recs, spans, strict=True):
        # the record lies inside the timed call and covers most of it (the seed gradient and the
        # Python around the engine call are outside it)
        assert t0 <= s and e <= t1
        assert e - s >= 0.5 * (t1 - t0)


class _SlowDrainLib:
    """A stand-in for the native library whose drain blocks until released: one record, op 0."""

    def __init__(self) -> None:
        self.draining = threading.Event()
        self.release = threading.Event()
        self.stopped = False

    def tn_pending(self) -> int:
        return 1

    def tn_drain(self, start, end, tid, name, n) -> int:
        self.draining.set()
        assert self.release.wait(5)
        start[0], end[0], tid[0], name[0] = 10, 20, 1, 0
        return 1

    def tn_drops(self) -> int:
        return 0

    def tn_num_names(self) -> int:
        return 1

    def tn_name(self, i: int) -> bytes:
        return b"aten::add"

    def tn_stop(self) -> None:
        self.stopped = True


def test_a_flush_under_way_when_the_collector_stops_keeps_its_batch():
    """The writer's periodic flush and the session's stop may meet: the stop waits for the drain
    under way, which keeps its rows (it once found the library gone mid-drain and lost its batch)."""
    col = torch_native.NativeBackendCollector(session=None)
    col.lib = lib = _SlowDrainLib()
    col._schema = S.columns_schema(S.BACKEND_COLUMNS_DOC, collector="native")
    col.rows = []
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            col.flush()
        except BaseException as e:  # the writer would warn and drop the batch
            errors.append(e)

    writer = threading.Thread(target=flush)
    writer.start()
    assert lib.draining.wait(5)
    stopper = threading.Thread(target=col.stop)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive() and not lib.stopped  # the stop waits for the drain under way
    lib.release.set()
    writer.join(5)
    stopper.join(5)
    assert errors == []
    assert lib.stopped and col.lib is None
    batches = col.rows
    assert sum(b.num_rows for b in batches) >= 1
    assert batches[0].column(0).to_pylist() == [10]
