"""Every process of a run counts: pool workers, terminated children and empty processes (rlscope run)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlscope
from rlscope.categories import SIMULATOR
from rlscope.collectors import scope_native
from rlscope.trace import schema as S
from rlscope.trace.check import check_trace
from rlscope.trace.reader import load_trace

# a flush interval longer than the run: whatever a worker recorded reaches disk only through the
# exit hooks (multiprocessing finalizer, atexit, SIGTERM handler), which is what these tests test
RUN = ["run", "--no-analyze", "--gpu", "off", "--no-backend", "--flush-interval", "30"]

POOL_SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp
    import sys
    import time

    import rlscope

    def task(x):
        with rlscope.scope("task"):
            t = time.perf_counter()
            while time.perf_counter() - t < 0.005:  # a 5 ms task: the worker lives a few ms
                pass
        return x * x

    if __name__ == "__main__":
        method, ending = sys.argv[1], sys.argv[2]
        ctx = mp.get_context(method)
        if ending == "terminate":  # `with Pool()` ends with terminate(): SIGTERM to every worker
            with ctx.Pool(2) as pool:
                print("RESULT", sum(pool.map(task, range(4))))
        else:  # close() and join(): the workers return and leave through os._exit
            pool = ctx.Pool(2)
            print("RESULT", sum(pool.map(task, range(4))))
            pool.close()
            pool.join()
    """
)

TERMINATED_CHILD_SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp
    import time

    import rlscope

    def child(started):
        with rlscope.scope("sleeping"):
            started.set()
            time.sleep(60)

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        started = ctx.Event()
        p = ctx.Process(target=child, args=(started,))
        p.start()
        assert started.wait(30)
        p.terminate()
        p.join(30)
        print("EXITCODE", p.exitcode)
    """
)


def _rlscope(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlscope.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def _run_script(tmp_path, source: str, *script_args: str):
    script = tmp_path / "job.py"
    script.write_text(source)
    trace = tmp_path / "trace"
    r = _rlscope(*RUN, "--trace-dir", str(trace), "--", sys.executable, str(script), *script_args)
    assert r.returncode == 0, r.stderr
    return r, load_trace(trace)


def _events(proc, kind):
    k = proc.events.column("kind").to_numpy()
    return k == kind


def _op_names(proc) -> list[str]:
    names = proc.events.column("name").to_numpy()[_events(proc, S.OP_BEGIN)]
    return [proc.name(int(n)) for n in names]


def _end_signals(proc) -> list[int]:
    return [int(i) for i in proc.events.column("id").to_numpy()[_events(proc, S.SESSION_END)]]


@pytest.mark.parametrize("ending", ["terminate", "close-join"])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pool_workers_with_5ms_tasks_keep_their_events(tmp_path, method, ending):
    r, trace = _run_script(tmp_path, POOL_SCRIPT, method, ending)
    assert "RESULT 14" in r.stdout  # the job's result is unchanged
    assert len(trace.processes) >= 2  # the program and at least one worker
    tasks = [name for p in trace.processes for name in _op_names(p) if name == "task"]
    assert len(tasks) == 4, "every task's scope reached disk, in whichever worker ran it"
    for p in trace.processes:
        if p.events.num_rows == 0:  # a spawned worker the pool ended while it was still starting up
            assert not _op_names(p)
            continue
        assert p.complete, f"{p.path}: flagged as crashed"
        assert not p.warnings, p.warnings
        # ended normally (-1), or by the pool's SIGTERM after flushing (15), never crashed
        assert set(_end_signals(p)) <= {-1, 15}
        if ending == "close-join":
            assert _end_signals(p) == [-1]
    # spawn starts multiprocessing's resource tracker, which runs none of the job's code: not profiled
    assert not [p for p in trace.processes if p.metadata.get("argv") == '["-c"]']
    findings = check_trace(str(tmp_path / "trace"))
    assert not [f for f in findings if f.level in ("error", "warning")], findings
    c = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", "check", str(tmp_path / "trace")],
        capture_output=True,
        text=True,
    )
    assert c.returncode == 0, c.stdout + c.stderr


def test_a_terminated_child_flushes_and_keeps_its_exit_status(tmp_path):
    r, trace = _run_script(tmp_path, TERMINATED_CHILD_SCRIPT)
    assert "EXITCODE -15" in r.stdout  # died of SIGTERM, as it would have without rlscope
    (child,) = [p for p in trace.processes if "sleeping" in _op_names(p)]
    assert child.complete and not child.warnings
    assert _end_signals(child) == [15]
    # the scope it was in is closed by rlscope, flagged; the process is not called crashed
    findings = [str(f) for f in check_trace(str(tmp_path / "trace"))]
    assert any("ended by SIGTERM" in f for f in findings), findings
    assert not any(f.startswith(("error", "warning")) for f in findings), findings


BLOCKED_CHILD_SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp
    import os
    import signal
    import threading
    import time

    import rlscope

    def child(ready):
        with rlscope.scope("blocked"):
            lock = threading.Lock()
            lock.acquire()

            def poke():  # SIGTERM to this thread, not the main one: CPython's handler runs here, and
                time.sleep(0.3)  # the main thread, blocked in C, never learns of it
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

            threading.Thread(target=poke, daemon=True).start()
            ready.set()
            lock.acquire()  # for ever: only the signal ends this process

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        ready = ctx.Event()
        p = ctx.Process(target=child, args=(ready,))
        p.start()
        assert ready.wait(30)
        p.join(15)
        print("EXITCODE", p.exitcode)
        if p.exitcode is None:  # hung: do not leave it behind
            os.kill(p.pid, signal.SIGKILL)
            p.join()
    """
)


@pytest.mark.skipif(scope_native.available() != "native", reason="the relay needs the native scope module")
def test_a_sigterm_the_main_thread_cannot_see_still_ends_the_child_after_its_flush(tmp_path):
    """A child whose main thread waits in C while SIGTERM is taken on another thread (or just
    before the wait) never runs the Python handler: without the relay (rlscope/runtime/child_signal.py) it
    hung, where without rlscope it died at once; a pool worker did this to `with Pool()` in CI."""
    r, trace = _run_script(tmp_path, BLOCKED_CHILD_SCRIPT)
    assert "EXITCODE -15" in r.stdout, r.stdout + r.stderr  # died of the signal, as without rlscope
    (child,) = [p for p in trace.processes if "blocked" in _op_names(p)]
    assert child.complete and not child.warnings
    assert _end_signals(child) == [15]


VECTOR_ENV_SCRIPT = textwrap.dedent(
    """
    import sys

    import gymnasium as gym

    env = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2, context="fork")
    env.reset(seed=0)
    for _ in range(20):
        env.step(env.action_space.sample())
    env.close(terminate=sys.argv[1] == "terminate")
    print("DONE")
    """
)


@pytest.mark.parametrize("ending", ["terminate", "close"])
def test_async_vector_env_workers_keep_their_simulator_time(tmp_path, ending):
    pytest.importorskip("gymnasium")
    r, trace = _run_script(tmp_path, VECTOR_ENV_SCRIPT, ending)
    assert "DONE" in r.stdout

    def steps_envs(p) -> bool:
        return bool((_events(p, S.CAT_BEGIN) & (p.events.column("id").to_numpy() == SIMULATOR)).any())

    main = [p for p in trace.processes if not p.metadata.get("run_parent")]
    workers = [p for p in trace.processes if steps_envs(p) and p not in main]
    assert len(workers) == 2, "each worker's env steps (simulator time) reached disk"
    # the main process's simulation is its wait on the workers: one per vector step and the reset
    assert _op_names(main[0]).count("simulation") == 21
    for p in trace.processes:
        assert p.complete and not p.warnings, (p.path, p.warnings)


def test_check_accepts_a_process_with_no_events_with_a_note(tmp_path):
    from rlscope.trace.writer import StreamFile

    trace = tmp_path / "trace"
    with rlscope.profile(trace, backend=False, gpu=False), rlscope.scope("work"):
        pass
    # a process its parent ended before its session wrote a single event: headers only
    empty = trace / f"{S.PROCESS_PREFIX}999999"
    empty.mkdir()
    for filename, schema in (
        (S.EVENTS_FILE, S.events_schema({"pid": "999999"})),
        (S.NAMES_FILE, S.names_schema()),
    ):
        StreamFile(empty / filename, schema).close()
    (note,) = [f for f in check_trace(str(trace)) if str(empty) in f.where]
    assert note.level == "info" and "no events" in note.message
    c = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", "check", str(trace)], capture_output=True, text=True
    )
    assert c.returncode == 0, c.stdout + c.stderr
    assert "info" in c.stdout and "no events" in c.stdout


def test_a_warning_prints_once_per_run_not_once_per_worker(tmp_path: Path) -> None:
    """Pool workers inherit what their parent said: the GPU warning (or any) is one line per run."""
    script = tmp_path / "warn.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing as mp
            from rlscope.errors import warn_once

            def work(i):
                warn_once("GPU tracing off: test")
                return i

            if __name__ == "__main__":
                warn_once("GPU tracing off: test")
                with mp.get_context("spawn").Pool(2) as pool:
                    pool.map(work, range(4))
            """
        )
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("GPU tracing off: test") == 1
