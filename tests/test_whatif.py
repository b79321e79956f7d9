"""What-if from the critical path (rlscope/analysis/whatif.py) on synthetic traces with known critical paths.

Every process is a session on a fake clock; all share one time axis (their Unix anchors are faked to one
offset), so the replay's predictions are exact and checked to the nanosecond.

The multi-process trace (µs since the run start): a learner (pid 100) and two env workers (101, 102).

    learner  0-10 [unannotated] python
             10-70 simulation: its own 10-16, waits for the workers 16-60, its own 60-70
             70-100 inference: python 70-74, cudaLaunchKernel 74-76 (kernel 80-180 on stream 7), python 76-100
             100-200 backprop: python 100-110, cudaStreamSynchronize 110-190 (waits for the kernel),
                     python 190-200
             200-210 [unannotated] python
    worker 1  simulation 16-40 (python 16-20, simulator 20-40), idle otherwise (2-205)
    worker 2  simulation 17-60 (python 17-21, simulator 21-60), idle otherwise (2-205)

The critical path, back from the learner's end: its python 190-210, the synchronize's tail after the kernel
(10), the kernel (100), its launch latency (6), the learner 60-74, worker 2's step 17-60 (43), its command's
latency after the learner began waiting (1), the learner 0-16: 210 µs in all.
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlscope
from rlscope import categories as C
from rlscope.analysis import analyze, gpu, whatif
from rlscope.annotate import intern
from rlscope.cli.analyze import main
from rlscope.trace import schema as S
from rlscope.trace.reader import clock_offset, load_trace
from rlscope.viz import html, terminal, whatif_html
from rlscope.viz import whatif as viz_whatif
from tests.conftest import FakeClock, write_stream

US = 1000
BASE = 1_000_000_000  # the fake clocks' origin
ANCHOR = 10**18  # every process's Unix anchor is its clock plus this: one time axis
U = 1e-6  # µs in seconds


def _process(trace, monkeypatch, pid: int, ppid: int, start_us: int, body, env=None) -> None:
    """One process's session from ``start_us``; ``body(at, gpu, thread)`` moves its clock to absolute µs
    with ``at`` and appends its GPU rows (gpu.arrows, written by hand) to ``gpu``."""
    clock = FakeClock()
    clock.now = BASE + start_us * US

    def at(us: int) -> None:
        assert BASE + us * US >= clock.now
        clock.now = BASE + us * US

    rows: list[tuple] = []
    with monkeypatch.context() as m:
        m.setattr(os, "getpid", lambda: pid)
        m.setattr(os, "getppid", lambda: ppid)
        m.setattr(time, "time_ns", lambda: clock.now + ANCHOR)
        for k, v in (env or {}).items():
            m.setenv(k, v)
        sess = rlscope.profile(trace, backend=False, gpu=False, windows=False)
        sess.clock = clock
        with sess:
            body(at, rows, threading.get_native_id())
    if rows:
        write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)


def _t(us: int) -> int:
    return BASE + us * US


def _learner(at, rows, thread) -> None:
    at(10)
    with rlscope.scope("simulation"):
        at(70)
    with rlscope.scope("inference"):
        at(74)
        rows.append((C.CUDA_API, _t(74), _t(76), 1, thread, -1, -1, intern("cudaLaunchKernel_v7000"), 0))
        rows.append((C.GPU_KERNEL, _t(80), _t(180), 1, -1, 0, 7, intern("gemm"), 0))
        at(100)
    with rlscope.scope("backprop"):
        at(110)
        rows.append(
            (C.CUDA_API, _t(110), _t(190), 2, thread, -1, -1, intern("cudaStreamSynchronize_v3020"), 0)
        )
        at(200)
    at(210)


def _worker(step_from: int, step_to: int):
    def body(at, rows, thread) -> None:
        at(step_from)
        with rlscope.scope("simulation"):
            at(step_from + 4)
            with rlscope.simulator():
                at(step_to)
        at(205)

    return body


@pytest.fixture
def learner_trace(tmp_path, monkeypatch):
    trace = tmp_path / "trace"
    _process(trace, monkeypatch, 100, 1, 0, _learner)
    _process(trace, monkeypatch, 101, 100, 2, _worker(16, 40))
    _process(trace, monkeypatch, 102, 100, 2, _worker(17, 60))
    return trace


def _inputs(trace_dir) -> tuple[list[whatif.ProcessInputs | None], list[str], float]:
    """Each process's what-if inputs as the analysis extracts them, their roles and the raw wall."""
    summary = analyze(trace_dir, correct=False, what_if=False).summary
    trace = load_trace(trace_dir)
    run_start = min(int(p.events.column("ts_ns").to_numpy().min()) + clock_offset(p) for p in trace.processes)
    req = whatif.request([p.metadata for p in trace.processes])
    inputs = [whatif.process_inputs(p, gpu.timeline_with_gpu(p), run_start, req) for p in trace.processes]
    return inputs, [p["role"] for p in summary["processes"]], summary["wall_s"]


def _saving(w: dict, op: str, part: str = whatif.ALL) -> dict[str, float]:
    return w["operations"][op][part]["saving_s"]


def test_replay_at_k1_is_the_recorded_run(learner_trace):
    inputs, roles, wall = _inputs(learner_trace)
    assert wall == pytest.approx(210 * U, abs=1e-15)
    w, _ = whatif.what_if(inputs, roles, wall, ks=(1.0,))
    assert w["notes"] == []
    assert w["recorded_s"] == pytest.approx(210 * U, abs=1e-15)
    targets = [t for parts in w["operations"].values() for t in parts.values()] + list(w["roles"].values())
    assert len(targets) > 10
    for t in targets:
        assert t["saving_s"] == {"1": 0.0}
        assert t["wall_s"] == {"1": pytest.approx(210 * U, abs=1e-15)}


def test_a_worker_whose_own_children_left_no_events(learner_trace):
    """torch.compile's compile pool: a child of the job forks workers that end before their first
    flush (no events). The child is still a parent by the metadata, with no child to cut its spans by:
    the what-if replays it as one without children, and its figures do not change."""
    before = analyze(learner_trace, correct=False).summary["what_if"]
    events = pa.ipc.open_stream(learner_trace / "process-101" / S.EVENTS_FILE).read_all()
    meta = {k.decode(): v.decode() for k, v in (events.schema.metadata or {}).items()}
    empty = learner_trace / "process-103"
    empty.mkdir()
    schema = S.events_schema({**meta, "pid": "103", "ppid": "101"})
    with pa.OSFile(str(empty / S.EVENTS_FILE), "wb") as f, pa.ipc.new_stream(f, schema) as w:
        w.write_table(schema.empty_table())
    after = analyze(learner_trace, correct=False).summary["what_if"]
    assert after["operations"] == before["operations"] and after["wall_s"] == before["wall_s"]
    assert after["roles"]["env worker"] == before["roles"]["env worker"]


def test_multiprocess_what_if_is_exact(learner_trace):
    s = analyze(learner_trace, correct=False).summary
    w = s["what_if"]
    assert w["k"] == ["2", "10", "inf"]
    assert w["recorded_s"] == pytest.approx(210 * U) and w["wall_s"] == pytest.approx(210 * U)
    assert w["notes"] == []

    def exact(got: dict[str, float], want: tuple[float, float, float]) -> None:
        assert got == {k: pytest.approx(v * U, abs=1e-14) for k, v in zip(w["k"], want, strict=True)}

    # GPU 2x faster: the synchronize waits 20 µs less; 10x or more: it stops waiting (70 µs), never the
    # 30 µs the kernel overlapped the CPU's own work (plain subtraction would say 50, 90, 100)
    exact(_saving(w, "inference", "gpu"), (50, 70, 70))
    # the env workers infinitely fast: the learner's wait shrinks to the command's latency (1 µs); the
    # kernel still binds the synchronize after it, so the whole of worker 2's step (43 µs) is won
    exact(w["roles"]["env worker"]["saving_s"], (21.5, 38.7, 43))
    assert w["roles"]["env worker"]["pids"] == [101, 102]
    # simulation everywhere: the learner's own 16 µs and worker 2's 43 (worker 1's 24 was never waited for)
    exact(_saving(w, "simulation"), (29.5, 53.1, 59))
    exact(_saving(w, "simulation", "simulator"), (19.5, 35.1, 39))
    # Python of backprop: 10 µs before the synchronize only make it wait longer, 10 after it are won
    exact(_saving(w, "backprop", "python"), (5, 9, 10))
    # the synchronize's own tail after the kernel ended is CUDA API time on the path
    exact(_saving(w, "backprop", "cuda_api"), (5, 9, 10))
    # Python of inference: only the 4 µs before the launch delays the kernel the synchronize waits for
    exact(_saving(w, "inference", "python"), (2, 3.6, 4))
    exact(_saving(w, "inference", "cuda_api"), (0, 0, 0))
    # inference as a whole: the kernel gone too, the backprop then waits for nothing
    exact(_saving(w, "inference"), (52, 93.6, 100))
    exact(_saving(w, "[unannotated]", "python"), (10, 18, 20))

    inf = w["operations"]["inference"]
    assert inf["python"]["time_s"] == pytest.approx(28 * U)
    assert inf["python"]["on_path_s"] == pytest.approx(4 * U)
    assert inf["python"]["on_path_share"] == pytest.approx(4 / 28)
    assert inf["gpu"]["on_path_share"] == pytest.approx(1.0)
    assert w["operations"]["backprop"]["python"]["on_path_share"] == pytest.approx(0.5)
    assert w["operations"]["simulation"][whatif.ALL]["time_s"] == pytest.approx(83 * U)  # 16 + 24 + 43
    assert w["operations"]["simulation"][whatif.ALL]["on_path_s"] == pytest.approx(59 * U)
    assert w["operations"]["inference"]["gpu"]["wall_s"]["2"] == pytest.approx(160 * U)

    path = w["critical_path"]
    assert path["length_s"] == pytest.approx(210 * U)
    want = {
        "[unannotated]": {"python": 20},
        "simulation": {"python": 20, "simulator": 39},
        "inference": {"python": 4, "gpu_kernel": 100},
        "backprop": {"python": 10, "cuda_api": 10},
    }
    assert path["operations"] == {
        op: {c: pytest.approx(v * U) for c, v in cs.items()} for op, cs in want.items()
    }
    assert path["latency_s"] == pytest.approx(7 * U)  # the kernel's launch latency 6, the command's 1
    assert path["processes"] == {"100": pytest.approx(160 * U), "101": 0.0, "102": pytest.approx(43 * U)}
    kernel = [g for g in path["segments"] if g["lane"] == "gpu"]
    assert kernel == [
        {
            "pid": 100,
            "lane": "gpu",
            "operation": "inference",
            "category": "gpu_kernel",
            "start_s": pytest.approx(80 * U),
            "end_s": pytest.approx(180 * U),
        }
    ]
    assert {"pid": 102, "operation": "simulation", "category": "simulator"}.items() <= max(
        path["segments"], key=lambda g: g["end_s"] - g["start_s"] if g["pid"] == 102 else 0
    ).items()


def test_saving_reads_the_summary(learner_trace):
    w = analyze(learner_trace, correct=False).summary["what_if"]
    assert whatif.saving(w, "inference", "gpu", 2) == pytest.approx(50 * U)
    assert whatif.saving(w, "inference", "gpu") == pytest.approx(70 * U)  # k = inf
    assert whatif.saving(w, "simulation") == pytest.approx(59 * U)
    assert whatif.saving(w, "simulation", k=math.inf) == whatif.saving(w, "simulation", "all", math.inf)
    assert whatif.saving(w, "inference", "gpu", 3) is None  # not replayed at that k
    assert whatif.saving(w, "no such operation") is None
    assert whatif.saving(w, "backprop", "gpu") is None  # it launched nothing
    assert whatif.saving(None, "inference") is None


def _three_steps(at, rows, thread) -> None:
    """Three ``step`` calls: 60 us in the simulator and 20 us of Python in all, 15 us outside them."""
    for i in range(3):
        with rlscope.scope("step"):
            at(10 + 30 * i)
            with rlscope.simulator():
                at(30 + 30 * i)
        at(35 + 30 * i)


def test_single_process_cpu_is_plain_subtraction(tmp_path, monkeypatch):
    """No waits: the main thread is the critical path, and a speedup saves exactly the time it removes."""

    trace = tmp_path / "one"
    _process(trace, monkeypatch, 7, 1, 0, _three_steps)
    w = analyze(trace, correct=False).summary["what_if"]
    assert w["roles"] == {}
    step = w["operations"]["step"]
    assert step["simulator"]["time_s"] == pytest.approx(60 * U)
    assert step["simulator"]["on_path_share"] == pytest.approx(1.0)
    assert step["simulator"]["saving_s"] == {
        "2": pytest.approx(30 * U),
        "10": pytest.approx(54 * U),
        "inf": pytest.approx(60 * U),
    }
    assert step["python"]["saving_s"]["inf"] == pytest.approx(20 * U)
    assert w["operations"]["[unannotated]"]["python"]["saving_s"]["inf"] == pytest.approx(15 * U)
    assert w["critical_path"]["operations"] == {
        "[unannotated]": {"python": pytest.approx(15 * U)},
        "step": {"python": pytest.approx(20 * U), "simulator": pytest.approx(60 * U)},
    }


def _alternating(at, rows, thread) -> None:
    """4 µs outside operations, then twice: inference 5, simulation 3 + simulator 10 twice, backprop 8."""
    at(4)
    t = 4
    for _ in range(2):
        with rlscope.scope("inference"):
            t += 5
            at(t)
        for _ in range(2):
            with rlscope.scope("simulation"):
                t += 3
                at(t)
                with rlscope.simulator():
                    t += 10
                    at(t)
        with rlscope.scope("backprop"):
            t += 8
            at(t)
    at(t + 2)


def test_single_process_path_is_drawn_as_it_ran(tmp_path, monkeypatch):
    """A single-process CPU run has no dependency inside it: its path is drawn as the main thread's
    operations in time order (each as its largest category, back-to-back ones of one kind joined), not as
    one interval of the run's largest operation."""

    trace = tmp_path / "alternating"
    _process(trace, monkeypatch, 7, 1, 0, _alternating)
    result = analyze(trace, correct=False)
    want = [("[unannotated]", "python", 0, 4)]
    for i in range(2):
        t = 4 + 39 * i
        want += [
            ("inference", "python", t, t + 5),
            ("simulation", "simulator", t + 5, t + 31),
            ("backprop", "python", t + 31, t + 39),
        ]
    want.append(("[unannotated]", "python", 82, 84))
    w = result.summary["what_if"]

    def rows(intervals: list[dict]) -> list[tuple]:
        assert {(iv["pid"], iv["lane"]) for iv in intervals} == {(7, "main")}
        return [
            (iv["operation"], iv["category"], round(iv["start_s"] / U, 6), round(iv["end_s"] / U, 6))
            for iv in intervals
        ]

    assert rows(w["critical_path"]["segments"]) == want  # the longest ones: every one here
    # the report draws those overlapping its timeline's window
    lo, hi = (s / U for s in result.report["timeline"]["window_s"])
    assert rows(result.report["critical_path"]["intervals"]) == [
        iv for iv in want if iv[3] > lo and iv[2] < hi
    ]
    assert w["critical_path"]["operations"] == {
        "[unannotated]": {"python": pytest.approx(6 * U)},
        "inference": {"python": pytest.approx(10 * U)},
        "simulation": {"python": pytest.approx(12 * U), "simulator": pytest.approx(40 * U)},
        "backprop": {"python": pytest.approx(16 * U)},
    }
    assert w["operations"]["simulation"]["all"]["saving_s"]["inf"] == pytest.approx(52 * U)


def test_a_launcher_ends_after_its_last_rank(tmp_path, monkeypatch):
    """torchrun's agent does no work: it ends its recorded lag after its last rank, whatever sped it up."""

    def rank(work_to: int, end: int):
        def body(at, rows, thread) -> None:
            at(10)
            with rlscope.scope("work"):
                at(work_to)
            at(end)

        return body

    def agent(at, rows, thread) -> None:
        at(100)

    trace = tmp_path / "ddp"
    for r, (pid, work_to, end) in enumerate(((21, 50, 60), (22, 80, 90))):
        env = {"WORLD_SIZE": "2", "RANK": str(r), "LOCAL_RANK": str(r)}
        _process(trace, monkeypatch, pid, 20, 5, rank(work_to, end), env=env)
    _process(trace, monkeypatch, 20, 1, 0, agent)
    w = analyze(trace, correct=False).summary["what_if"]
    # "work" gone: both ranks end 20 µs after their start at 5, the agent 10 µs after the last: 70 µs won,
    # the longest rank's work, not the 110 µs both ranks did
    assert w["operations"]["work"]["all"]["saving_s"]["inf"] == pytest.approx(70 * U)
    assert w["operations"]["work"]["all"]["saving_s"]["2"] == pytest.approx(35 * U)
    # the ranks' every second gone (their time outside "work" too): they end as they start, at 5
    assert w["roles"]["ddp rank"]["saving_s"]["inf"] == pytest.approx(85 * U)
    assert any("DDP ranks" in n for n in w["notes"])


def test_what_if_is_optional_and_rendered(learner_trace, capsys):
    assert "what_if" not in analyze(learner_trace, correct=False, what_if=False).summary
    result = analyze(learner_trace, correct=False)
    footer = viz_whatif.footer_lines(result.summary)
    assert footer[1:] == [
        "  inference: 2× −52.0 µs (25%), 10× −93.6 µs (45%), ∞ −100.0 µs (48%) of the run; 80% of its time"
        " on the critical path",
        "  inference · GPU work: 2× −50.0 µs (24%), 10× −70.0 µs (33%), ∞ −70.0 µs (33%) of the run; 100% of"
        " its time on the critical path",
    ]
    assert footer[0] in terminal.text(result, width=400)
    page = html.render(result)
    assert whatif_html.HTML_TITLE in page and f"id='{whatif_html.DIV_ID}'" in page.replace('"', "'")
    assert "<td>role env worker (2 processes)</td><td>67.0 µs</td><td>64%</td>" in page
    # the critical path over the timeline's window: worker 2's step, the kernel, the learner's pieces
    drawn = result.report["critical_path"]["intervals"]
    assert {(iv["pid"], iv["lane"]) for iv in drawn} == {(100, "main"), (100, "gpu"), (102, "main")}

    assert main([str(learner_trace), "--raw", "--what-if"]) == 0
    out = capsys.readouterr().out
    assert "scenario" in out and "saved at" in out  # the table (80 columns: wrapped)
    assert "│ role env " in out and "│ worker (2 " in out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),  # the operation
            st.integers(0, 30),  # its Python before the call, µs
            st.sampled_from(["launch", "copy", "sync", "none"]),
            st.integers(1, 60),  # the kernel's length, µs
            st.integers(0, 1),  # its stream
        ),
        min_size=1,
        max_size=12,
    )
)
def test_random_gpu_runs_replay_exactly_and_never_save_more_than_the_time(
    tmp_path_factory, monkeypatch, steps
):
    """Any schedule of launches, copies and syncs: at k=1 the replay is the recorded run; a saving grows
    with k and never exceeds the time made faster."""
    trace = tmp_path_factory.mktemp("random") / "trace"

    def body(at, rows, thread) -> None:
        now, corr = 0, 0
        tails = {0: 0, 1: 0}
        for op, py, call, kernel, stream in steps:
            with rlscope.scope(op):
                now += py
                at(now)
                if call == "none":
                    continue
                corr += 1
                name = {"launch": "cudaLaunchKernel_v7000", "copy": "cudaMemcpyAsync_v3020"}
                if call in name:
                    rows.append(
                        (C.CUDA_API, _t(now), _t(now + 2), corr, thread, -1, -1, intern(name[call]), 0)
                    )
                    start = max(now + 1, tails[stream])
                    end = start + kernel
                    tails[stream] = end
                    cat, rec = (C.GPU_KERNEL, "k") if call == "launch" else (C.GPU_MEMCPY, "memcpy DtoH")
                    rows.append((cat, _t(start), _t(end), corr, -1, 0, stream, intern(rec), 8))
                    ret = now + 2 if call == "launch" else max(now + 2, end + 1)  # a DtoH copy waits
                else:  # a device-wide synchronize
                    ret = max(now + 3, max(tails.values()) + 1)
                    rows.append(
                        (
                            C.CUDA_API,
                            _t(now),
                            _t(ret),
                            corr,
                            thread,
                            -1,
                            -1,
                            intern("cudaDeviceSynchronize"),
                            0,
                        )
                    )
                now = ret
                at(now)
        at(now + 5)

    _process(trace, monkeypatch, 9, 1, 0, body)
    inputs, roles, wall = _inputs(trace)
    w, _ = whatif.what_if(inputs, roles, wall, ks=(1.0,))
    assert w["notes"] == [] and w["recorded_s"] == pytest.approx(wall, abs=1e-15)
    for parts in w["operations"].values():
        for e in parts.values():
            assert e["saving_s"] == {"1": 0.0}
    w, _ = whatif.what_if(inputs, roles, wall)
    assert w["critical_path"]["length_s"] == pytest.approx(wall)
    for parts in w["operations"].values():
        for e in parts.values():
            s2, s10, sinf = (e["saving_s"][k] for k in ("2", "10", "inf"))
            assert 0.0 <= s2 <= s10 + 1e-15 <= sinf + 2e-15
            assert sinf <= e["time_s"] + 1e-15


def test_each_scenario_is_its_corrected_time(tmp_path, monkeypatch):
    """rlscope's cost sits in some (operation, category) more than others: with the correction's
    factors the replay scales each one's time to its corrected figure, so a scenario's time and its
    saving at k=∞ are that figure (the same single-process loop, with a correction that halves the
    step's Python and leaves its simulator time)."""

    trace = tmp_path / "one"
    _process(trace, monkeypatch, 7, 1, 0, _three_steps)
    inputs, roles, wall = _inputs(trace)
    factors = [{("step", "python"): 0.5, ("[unannotated]", "*"): 1.0}]
    w, _ = whatif.what_if(inputs, roles, wall - 10 * U, factors=factors)  # the corrected wall: 10 us less
    step = w["operations"]["step"]
    assert step["python"]["time_s"] == pytest.approx(10 * U)
    assert step["python"]["saving_s"]["inf"] == pytest.approx(10 * U)
    assert step["simulator"]["saving_s"]["inf"] == pytest.approx(60 * U)
    assert w["notes"] == []
    summary = {
        "processes": [{"operations": {"step": {"categories": {"python": 1.0, "simulator": 3.0}}}}],
        "raw": {"processes": [{"operations": {"step": {"categories": {"python": 2.0, "simulator": 3.0}}}}]},
    }
    assert whatif.corrections(summary) == [{("step", "python"): 0.5, ("step", "simulator"): 1.0}]


@pytest.mark.parametrize("spread", [1, 3, 10**12])
def test_first_sorted_equals_the_head_of_a_stable_argsort(spread: int) -> None:
    """The summary's longest path segments: the same indices, in the same order, as a full stable sort."""
    rng = np.random.default_rng(spread)
    for n in (0, 5, 12, 13, 5000):
        values = rng.integers(-spread, spread + 1, n)
        for k in (1, 12):
            want = np.argsort(values, kind="stable")[:k]
            assert whatif._first_sorted(values, k).tolist() == want.tolist()


def _stretches_by_merging(
    t: np.ndarray, key: np.ndarray, end: int, nodes: np.ndarray, elastic: np.ndarray | None
) -> tuple[np.ndarray, ...]:
    """whatif._stretches as it is defined: the runs cut at the nodes into one list of parts, each part's
    key that of its run (waiting inside an elastic interval), summed per (stretch, key)."""
    inner = nodes[(nodes > t[0]) & (nodes < end)]
    part_t, (part_key,), is_node = whatif._insert(t, [key], inner, end)
    if elastic is not None:
        part_key = np.where(whatif._within(part_t, elastic[0], elastic[1])[1], whatif.ELASTIC, part_key)
    stretch = np.cumsum(is_node)
    dur = np.diff(np.append(part_t, end))
    cells, inverse = np.unique(np.stack([stretch, part_key]), axis=1, return_inverse=True)
    ns = np.bincount(inverse.reshape(-1), weights=dur).astype(np.int64)
    cells, ns = cells[:, ns > 0], ns[ns > 0]
    node_t = np.concatenate([[t[0]], inner, [end]])
    off = np.concatenate([[0], np.cumsum(np.bincount(cells[0], minlength=len(node_t))[:-1])])
    return node_t, off, cells[1], ns


@pytest.mark.parametrize(
    ("n", "n_nodes", "n_keys"),
    [(50, 10, 3), (3000, 900, 5000), (200_000, 150_000, 40), (300_000, 300_000, 4)],
)
def test_stretches_sum_each_key_of_each_stretch_in_blocks(n: int, n_nodes: int, n_keys: int) -> None:
    rng = np.random.default_rng(n)
    t = np.sort(rng.integers(0, 10 * n, n))
    key = rng.integers(0, n_keys, n).astype(np.int32)
    end = int(t[-1]) + 7
    nodes = np.unique(np.concatenate([[t[0]], rng.integers(0, end + 5, n_nodes), t[:: max(n // 20, 1)]]))
    lo = np.sort(rng.choice(10 * n, 10, replace=False))
    for elastic in (None, np.stack([lo[0::2], lo[1::2]])):
        got = whatif._stretches(t, key, end, nodes, elastic)
        want = _stretches_by_merging(t, key, end, nodes, elastic)
        for g, w in zip(got, want, strict=True):
            assert g.tolist() == w.tolist()


@pytest.mark.parametrize(
    ("n", "n_nodes"), [(1, 0), (7, 0), (50_000, 0), (7, 3), (50_000, 20_000), (300_000, 9)]
)
def test_stretches_at_run_starts_are_whole_runs(n: int, n_nodes: int) -> None:
    """Nodes that each fall on a run's start (the operation instances' starts; a process without GPU
    work has its start only): no run is cut, each stretch is whole runs."""
    rng = np.random.default_rng(n + n_nodes)
    t = np.sort(rng.integers(0, 10 * n, n))
    key = rng.integers(0, 6, n).astype(np.int32)
    end = int(t[-1]) + 3
    nodes = np.unique(np.concatenate([[t[0]], rng.choice(t, n_nodes)]))
    lo = np.sort(rng.choice(10 * n + 10, 4, replace=False))
    for elastic in (None, np.stack([lo[0::2], lo[1::2]])):
        got = whatif._stretches(t, key, end, nodes, elastic)
        want = _stretches_by_merging(t, key, end, nodes, elastic)
        for g, w in zip(got, want, strict=True):
            assert g.tolist() == w.tolist()
