"""torch.distributed's collectives from torch's flight recorder: every one, with its GPU time, given to
the operation that queued it (or that called ``backward()``), in light windows too."""

from __future__ import annotations

import itertools
import time

import pytest

import rlscope
from rlscope.analysis import nccl
from rlscope.collectors import collectives
from rlscope.collectors.collectives import CollectiveRecorder, arm, entry_row
from rlscope.trace import schema as S
from tests.conftest import summary_of

MS = 1_000_000


def test_arm_sets_the_recorder_and_timing_and_keeps_what_the_user_set():
    env: dict[str, str] = {}
    assert arm(env, torch_version=(2, 11))
    assert env == {"TORCH_FR_BUFFER_SIZE": str(collectives.BUFFER_SIZE), "TORCH_NCCL_ENABLE_TIMING": "1"}
    older: dict[str, str] = {}  # a torch that reads only the older name
    assert arm(older, torch_version=(2, 6))
    assert older == {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(collectives.BUFFER_SIZE),
        "TORCH_NCCL_ENABLE_TIMING": "1",
    }
    user = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "50", "TORCH_NCCL_ENABLE_TIMING": "0"}
    assert arm(user)
    assert user == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "50", "TORCH_NCCL_ENABLE_TIMING": "0"}
    assert not arm({"TORCH_FR_BUFFER_SIZE": "0"})  # the user turned the recorder off: nothing to read


def _entry(rid: int, created_ns: int, ms: float | None, *, retired: bool = True, thread: int = 0, **kw):
    e = {
        "record_id": rid,
        "pg_id": 0,
        "collective_seq_id": rid + 1,
        "profiling_name": kw.pop("name", "nccl:all_reduce"),
        "time_created_ns": created_ns,
        "thread_id": str(thread),
        "input_sizes": [[256, 4]],
        "input_dtypes": ["Float"],
        "retired": retired,
        **kw,
    }
    if ms is not None:
        e["duration_ms"] = ms
    return e


def test_entry_row_moves_the_wall_clock_and_waits_for_gpu_time():
    row = entry_row(_entry(3, 5_000, 2.5, thread=0x1_0000_0007), offset_ns=1_000, threads={7: 77})
    ts, dur, thread, _name, nbytes, rid, pg, recorder = row
    assert (ts, dur, thread, nbytes, rid, pg, recorder) == (4_000, 2_500_000, 77, 256 * 4 * 4, 3, 0, 0)
    assert entry_row(_entry(4, 0, None, retired=False), 0, {}) is None  # still running: next flush
    gloo = entry_row(_entry(5, 0, None, name="gloo:all_reduce"), 0, {})
    assert gloo is not None and gloo[1] == -1  # retired without GPU time


def _started(sess, dump, **kw) -> CollectiveRecorder:
    """A collective recorder of ``sess`` reading ``dump``, started as if a process group existed."""
    rec = CollectiveRecorder(sess, dump=dump, **kw)
    rec._seen_group = True
    return rec.start()


def _recorder(sess, entries_at):
    """A collective recorder of ``sess`` whose flight recorder holds ``entries_at(wall)`` at each read,
    ``wall(t)`` stamping events'-clock time ``t`` as the recorder's wall clock does."""

    def dump():
        offset = time.time_ns() - sess.clock()
        return [{"entries": entries_at(lambda t: t + offset)}, None]  # NCCL's recorder; no generic one

    return _started(sess, dump)


def test_every_collective_goes_to_the_operation_that_queued_it(fake_session):
    sess, clock = fake_session
    reads = []

    with sess:
        ident = sess.thread_states()[0].ident32
        t0 = clock.now

        def entries(wall):
            reads.append(1)
            done = [
                _entry(0, wall(t0 + 50 * MS), 2.0, thread=ident),  # backprop: 2 ms
                _entry(1, wall(t0 + 150 * MS), 3.0, thread=ident),  # backprop: 3 ms
            ]
            if len(reads) == 1:  # the first read: the third has not finished yet
                return [*done, _entry(2, wall(t0 + 190 * MS), None, retired=False, thread=ident)]
            return [
                *done,
                _entry(2, wall(t0 + 190 * MS), 4.0, thread=ident),  # backprop: 4 ms
                _entry(3, wall(t0 + 250 * MS), 1.0, thread=ident),  # inference: 1 ms
            ]

        rec = _recorder(sess, entries)
        with rlscope.scope("backprop"):
            clock.advance(200 * MS)
            sess.writer.flush()
        with rlscope.scope("inference"):
            clock.advance(100 * MS)
            sess.writer.flush()
        rec.stop()
    (p,) = summary_of(sess.trace_dir)["processes"]
    assert p["nccl_source"] == "collectives"
    backprop = p["operations"]["backprop"]
    assert backprop["nccl_s"] == pytest.approx(9e-3, rel=1e-6)  # each collective written once
    assert backprop["nccl_collectives"] == {"nccl:all_reduce": {"count": 3, "total_s": pytest.approx(9e-3)}}
    assert p["operations"]["inference"]["nccl_s"] == pytest.approx(1e-3, rel=1e-6)
    assert p["nccl_s"] == pytest.approx(10e-3, rel=1e-6)


def test_collectives_queued_by_the_autograd_engine_go_to_backward_s_caller(fake_session):
    """DDP's all-reduce is queued from the engine's thread (unknown to the session, thread -1) while
    the caller waits in ``backward()`` inside its backprop: the collective is backprop's."""
    pytest.importorskip("torch")
    import pyarrow as pa

    from rlscope.analysis import gpu
    from rlscope.collectors.autograd_calls import AutogradCalls
    from rlscope.trace.reader import load_process
    from tests.test_engine_attribution import _backward_advancing

    sess, clock = fake_session
    with sess:
        calls = AutogradCalls(sess).start()
        t0 = clock.now
        with rlscope.scope("backprop"):
            _backward_advancing(clock, 100 * MS)  # the engine call: t0 .. t0+100 ms
        clock.advance(50 * MS)
        calls.stop()
    proc = load_process(sess.process_dir)
    names = [*proc.names, "nccl:all_reduce"]
    table = pa.table(
        {
            "ts_ns": pa.array([t0 + 40 * MS, t0 + 120 * MS], pa.int64()),
            "duration_ns": pa.array([2 * MS, 5 * MS], pa.int64()),
            "thread": pa.array([-1, -1], pa.int64()),
            "name": pa.array([len(names) - 1] * 2, pa.int32()),
            "bytes": pa.array([0, 0], pa.int64()),
            "record_id": pa.array([0, 2], pa.int64()),
            "pg_id": pa.array([0, 0], pa.int64()),
        }
    )
    proc.names, proc.collectives = names, table
    rows, lost = nccl.collective_rows(proc, gpu.timeline_with_gpu(proc))
    assert rows == {
        ("backprop", "nccl:all_reduce"): [1, 2 * MS],  # during the engine call
        ("[unannotated]", "nccl:all_reduce"): [1, 5 * MS],  # after backprop closed: no operation
    }
    assert lost == 1  # record id 1 is missing


def test_collective_figures_replace_the_scaled_kernel_figures_raw_and_corrected():
    """Kernels traced in full windows say 400 ns (scaled 2x to 800 ns corrected); the recorder saw
    every collective: 1000 ns, the same raw and corrected. A gloo collective adds no time."""
    kernel = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"
    kernel_rows = [(100, {("backprop", "gpu_kernel", kernel): [4, 400.0]})]
    colls = [
        (
            100,
            (
                {
                    ("backprop", "nccl:all_reduce"): [10, 1000.0],
                    ("backprop", "gloo:all_reduce"): [3, -1.0],
                },
                0,
            ),
        )
    ]

    def proc(gpu_kernel_s: float) -> dict:
        return {"pid": 100, "operations": {"backprop": {"gpu_categories": {"gpu_kernel": gpu_kernel_s}}}}

    summary = {"processes": [proc(2000e-9)], "raw": {"processes": [proc(1000e-9)]}}
    nccl.add_to_summary(summary, kernel_rows, colls)
    for p in (summary["processes"][0], summary["raw"]["processes"][0]):
        assert p["nccl_source"] == "collectives"
        op = p["operations"]["backprop"]
        assert op["nccl_s"] == pytest.approx(1000e-9) == p["nccl_s"]
        assert op["nccl_collectives"] == {"nccl:all_reduce": {"count": 10, "total_s": pytest.approx(1e-6)}}
        assert "nccl_recorded_s" not in op
        assert list(op["nccl_kernels"].values()) == [{"count": 4, "total_s": pytest.approx(400e-9)}]

    lost = [(100, ({("backprop", "nccl:all_reduce"): [1, 5.0]}, 2))]
    summary = {"processes": [proc(1e-9)]}
    nccl.add_to_summary(summary, [], lost)
    assert any("2 collectives missing" in w for w in summary["warnings"])


def test_without_collectives_nccl_time_comes_from_the_kernels():
    kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    summary = {"processes": [{"pid": 1, "operations": {"backprop": {}}}]}
    nccl.add_to_summary(summary, [(1, {("backprop", "gpu_kernel", kernel): [1, 50.0]})], [(1, None)])
    (p,) = summary["processes"]
    assert p["nccl_source"] == "kernels" and p["nccl_s"] == pytest.approx(50e-9)


def test_a_recorder_that_fails_warns_once_and_never_stops_the_job(fake_session, capfd):
    sess, clock = fake_session

    def broken():
        raise RuntimeError("no recorder")

    with sess:
        rec = _started(sess, broken)
        with rlscope.scope("backprop"):
            clock.advance(MS)
            sess.writer.flush()
            sess.writer.flush()
        rec.stop()
    assert capfd.readouterr().err.count("cannot read torch's flight recorder (no recorder)") == 1
    assert not (sess.process_dir / S.COLLECTIVES_FILE).exists()
    (p,) = summary_of(sess.trace_dir)["processes"]
    assert p["operations"]["backprop"]["total_s"] == pytest.approx(1e-3)


def test_overwritten_entries_are_counted_by_the_recorder_and_the_analysis(fake_session, capfd):
    sess, clock = fake_session
    reads = iter([[0, 1], [5, 6]])  # ids 2..4 were overwritten between the reads

    with sess:
        rec = _recorder(sess, lambda wall: [_entry(i, wall(clock.now), 1.0) for i in next(reads, [])])
        sess.writer.flush()
        sess.writer.flush()
        rec.stop()
    assert "3 collectives were overwritten" in capfd.readouterr().err
    summary = summary_of(sess.trace_dir)
    assert any("3 collectives missing" in w for w in summary["warnings"])
    assert summary["processes"][0]["nccl_s"] == pytest.approx(4e-3)


GLOO_SCRIPT = """
import sys, torch, torch.distributed as dist, rlscope
with rlscope.profile(sys.argv[1], backend=False):
    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
    t = torch.ones(1000)
    with rlscope.scope("sync"):
        for _ in range(3):
            dist.all_reduce(t)
    dist.destroy_process_group()
print(float(t[0]))
"""


def test_torch_s_flight_recorder_is_read_in_a_real_process_group(tmp_path):
    """The whole path on the CPU with gloo: the session arms torch's recorder before the group
    exists, reads it, and each all-reduce is one row, on the thread that queued it, in its scope
    (gloo's collectives have no GPU time: -1, and no NCCL figure)."""
    pytest.importorskip("torch.distributed")
    import subprocess
    import sys

    from rlscope.trace.reader import load_trace

    trace = tmp_path / "trace"
    r = subprocess.run(
        [sys.executable, "-c", GLOO_SCRIPT, str(trace), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "1.0"  # the program's result is untouched
    (proc,) = load_trace(trace).processes
    table = proc.collectives
    assert table is not None and table.num_rows == 3
    assert {proc.name(n) for n in table.column("name").to_pylist()} == {"gloo:all_reduce"}
    assert table.column("duration_ns").to_pylist() == [-1, -1, -1]
    assert table.column("bytes").to_pylist() == [4000] * 3
    kinds, threads = proc.events.column("kind").to_numpy(), proc.events.column("thread").to_numpy()
    main = int(threads[kinds == S.SESSION_START][0])
    assert table.column("thread").to_pylist() == [main] * 3  # queued by the main thread
    rows, lost = nccl.collective_rows(proc)
    assert rows == {("sync", "gloo:all_reduce"): [3, -1.0]} and lost == 0
    (p,) = summary_of(trace)["processes"]
    assert "nccl_s" not in p


def test_both_recorders_are_read_and_a_collective_in_both_counts_once(fake_session):
    """ProcessGroupNCCL's recorder and the generic one number their entries separately; a torch whose
    two dumps read one recorder must not double the time."""
    sess, clock = fake_session
    with sess:
        t, me = clock.now + MS // 2, sess.thread_states()[0].ident32  # inside backprop, below

        def dumps():
            offset = time.time_ns() - sess.clock()
            nccl_entries = [_entry(i, t + offset + i, 1.0, thread=me) for i in range(3)]
            gloo = [_entry(i, t + offset + 9 + i, None, name="gloo:barrier", thread=me) for i in (0, 2)]
            return [{"entries": nccl_entries}, {"entries": nccl_entries + gloo}]  # gloo's id 1: lost

        rec = _started(sess, dumps)
        with rlscope.scope("backprop"):
            clock.advance(MS)
            sess.writer.flush()
        rec.stop()
    from rlscope.trace.reader import load_process

    proc = load_process(sess.process_dir)
    assert proc.collectives.column("recorder").to_pylist() == [0, 0, 0, 1, 1]
    rows, lost = nccl.collective_rows(proc)
    assert rows == {("backprop", "nccl:all_reduce"): [3, 3 * MS], ("backprop", "gloo:barrier"): [2, -1.0]}
    assert lost == 1  # the generic recorder's id 1


def test_reads_are_paced_to_the_collectives_rate_and_the_end_reads_all(fake_session):
    """A read parses the whole ring: at 15 collectives a second (a DDP PPO) reads come up to 10 s
    apart, growing at most 2x a time; a quiet stretch is read again within seconds; the session's
    end reads once more, and no collective is written twice or lost."""
    sess, clock = fake_session
    now = [0.0]
    made: list[int] = []  # record ids in the ring (never full here)
    reads: list[float] = []

    def dumps():
        reads.append(now[0])
        offset = time.time_ns() - sess.clock()
        return [{"entries": [_entry(i, clock.now + offset, 1.0) for i in made]}, None]

    with sess:
        rec = _started(sess, dumps, clock=lambda: now[0])
        for second in range(60):  # one flush a second, 15 new collectives each
            now[0] = float(second)
            made.extend(range(len(made), len(made) + 15))
            rec.flush()
        busy = list(reads)
        for second in range(60, 80):  # quiet: no new collective
            now[0] = float(second)
            rec.flush()
        quiet = reads[len(busy) :]
        now[0] = 80.0
        made.extend(range(len(made), len(made) + 15))
        rec.stop()
    gaps = [b - a for a, b in itertools.pairwise(busy)]
    assert gaps[:3] == [1.0, 2.0, 4.0] and max(gaps) <= 10.0  # doubling, then at most 10 s
    assert len(busy) < 15  # not one read a second
    assert quiet and all(b - a <= 10.0 for a, b in itertools.pairwise(quiet))
    assert reads[-1] == 80.0  # the end reads
    from rlscope.trace.reader import load_process

    ids = load_process(sess.process_dir).collectives.column("record_id").to_pylist()
    assert sorted(ids) == list(range(len(made)))  # every one, once
    assert rec.lost == 0


def test_entries_from_before_the_profile_started_are_not_its_own(fake_session):
    """A forked child (a DataLoader worker of a DDP rank) inherits its parent's recorder: the rank's
    all-reduces, queued before the child's profile started, are neither written nor counted lost."""
    sess, clock = fake_session
    with sess:
        clock.advance(10 * MS)

        def entries(wall):
            before = [_entry(i, wall(clock.now - 20 * MS), 1.0) for i in range(10)]  # the parent's
            return [*before, _entry(10, wall(clock.now), 2.0), _entry(11, wall(clock.now), 2.0)]

        rec = _recorder(sess, entries)
        clock.advance(MS)
        sess.writer.flush()
        rec.stop()
    from rlscope.trace.reader import load_process

    assert load_process(sess.process_dir).collectives.column("record_id").to_pylist() == [10, 11]
    assert rec.lost == 0
