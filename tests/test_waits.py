"""A worker's waits for its next command are reported as waits (``[waiting]``), never as work.

Synthetic traces on a fake clock give the exact figures (a learner and its env workers, each worker's
receive marked by ``rlscope.waiting()``); the worker-loop wrappers are checked on a real pipe in this
process; real vector-env runs under ``rlscope run`` check that the library loops record their waits.
"""

from __future__ import annotations

import inspect
import io
import json
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.analysis.roles import over_processes, process_role, process_roles
from rlscope.categories import SIMULATOR, UNANNOTATED, WAITING, WAITING_ROW
from rlscope.runtime import waits
from rlscope.trace import schema as S
from rlscope.trace.reader import load_trace
from rlscope.viz import html
from rlscope.viz.terminal import render_summary
from tests.conftest import FakeClock

MS = 1_000_000
STEPS = 5
WAIT_MS, STEP_MS, GLUE_MS = 10, 1, 2  # each command: the wait for it, the env step, sending the result


def _process(trace, monkeypatch, pid: int, ppid: int, work) -> None:
    """One process's session on a fake clock: ``work(clock)`` is its program."""
    with monkeypatch.context() as m:
        m.setattr(os, "getpid", lambda: pid)
        m.setattr(os, "getppid", lambda: ppid)
        sess = rlscope.profile(trace, backend=False, gpu=False, windows=False)
        sess.clock = clock = FakeClock()
        with sess:
            work(clock)


def _worker(clock: FakeClock) -> None:
    """An env worker's loop: wait for the command, step, send the result back (its own Python)."""
    for _ in range(STEPS):
        with rlscope.waiting():
            clock.advance(WAIT_MS * MS)
        with rlscope.scope("simulation"):
            clock.advance(STEP_MS * MS)
        clock.advance(GLUE_MS * MS)


def _learner(clock: FakeClock) -> None:
    for _ in range(STEPS):
        with rlscope.scope("inference"):
            clock.advance(3 * MS)
        with rlscope.scope("simulation"):  # its wait on the workers' steps
            clock.advance(10 * MS)
    clock.advance(1 * MS)


def _vector_job(trace, monkeypatch) -> dict:
    _process(trace, monkeypatch, 7, 1, _learner)
    for pid in (8, 9):
        _process(trace, monkeypatch, pid, 7, _worker)
    return analyze(trace, correct=False).summary


def _rendered(summary: dict) -> str:
    from rich.console import Console

    buf = io.StringIO()
    render_summary(summary, Console(file=buf, width=220, color_system=None))
    return buf.getvalue()


def test_a_workers_waits_are_its_waiting_row_not_unannotated(tmp_path, monkeypatch):
    s = _vector_job(tmp_path / "vec", monkeypatch)
    by_pid = {p["pid"]: p for p in s["processes"]}
    for pid in (8, 9):
        w = by_pid[pid]
        assert w["waiting_s"] * 1e9 == STEPS * WAIT_MS * MS
        assert w["unannotated_s"] * 1e9 == STEPS * GLUE_MS * MS  # its own Python stays unannotated
        assert w["wall_s"] == pytest.approx(w["unannotated_s"] + w["waiting_s"] + STEPS * STEP_MS * MS / 1e9)
    child = s["roles"]["env worker"]  # children that stepped environments
    assert child["busy_s"] == {"8": STEPS * STEP_MS * MS / 1e9, "9": STEPS * STEP_MS * MS / 1e9}
    assert child["waiting"]["total_s"] * 1e9 == 2 * STEPS * WAIT_MS * MS
    assert child["waiting"]["median_s"] * 1e9 == STEPS * WAIT_MS * MS
    assert "waiting" not in s["roles"]["main"] and "child" not in s["roles"]
    # the headline is the learner's: it waited on no command, so it has no [waiting] row
    assert s["headline"]["pids"] == [7] and "waiting_s" not in s
    assert over_processes(s)["waiting_s"] * 1e9 == 2 * STEPS * WAIT_MS * MS


def test_waits_are_no_what_if_target_and_the_learner_waits_on_the_workers(tmp_path, monkeypatch):
    s = _vector_job(tmp_path / "vec", monkeypatch)
    targets = (s.get("what_if") or {}).get("operations") or {}
    assert targets and not [op for op, parts in targets.items() if "waiting" in parts]
    from rlscope.analysis.whatif import _idle_keys

    keys = [("", ""), (UNANNOTATED, "waiting"), (UNANNOTATED, "python"), ("simulation", "python")]
    assert _idle_keys(keys).tolist() == [False, True, False, False]  # recorded: only its waits are idle
    keys = [("", ""), (UNANNOTATED, "python"), ("simulation", "python")]
    assert _idle_keys(keys).tolist() == [False, True, False]  # a loop rlscope does not know


def test_a_headline_worker_shows_its_waits_within_the_run(tmp_path, monkeypatch):
    """A launcher that ran no operation gives the headline to the busiest worker: its [waiting] row
    is its own, and no row of the table passes 100% of the run."""
    trace = tmp_path / "pool"
    _process(trace, monkeypatch, 7, 1, lambda clock: clock.advance(1 * MS))
    _process(trace, monkeypatch, 8, 7, _worker)
    s = analyze(trace, correct=False).summary
    assert s["headline"]["pids"] == [8]
    assert s["waiting_s"] * 1e9 == STEPS * WAIT_MS * MS
    assert s["unannotated_s"] * 1e9 == STEPS * GLUE_MS * MS
    assert "waiting" not in s["unannotated_categories"]
    rows = [o["total_s"] for o in s["operations"].values()] + [s["unannotated_s"], s["waiting_s"]]
    assert all(r <= s["wall_s"] for r in rows)
    assert sum(rows) == pytest.approx(s["processes"][1]["wall_s"])
    assert all(ph.get("waiting_s", 0.0) <= ph["wall_s"] for ph in s["phases"].values())
    out = _rendered(s)
    row = next(line for line in out.splitlines() if line.lstrip("│ ").startswith(WAITING_ROW))
    assert f"{STEPS * WAIT_MS / 1000:.3f}" in row


def test_reports_show_waiting_rows(tmp_path, monkeypatch):
    s = _vector_job(tmp_path / "vec", monkeypatch)
    out = _rendered(s)
    assert "waiting s" in out and f"{WAITING_ROW} median s" in out
    page = html.render_html(s)
    assert WAITING_ROW in page and f"{STEPS * WAIT_MS * 2 / 1000:.3f}" in page  # the role's waits


def _loop(index, pipe, other):
    """A stand-in worker loop: receive commands until ``close``."""
    got = []
    while True:
        cmd = pipe.recv()
        if cmd == "close":
            return got
        got.append(cmd)


def test_a_wrapped_loop_marks_only_its_commands_receive(fake_session):
    sess, _ = fake_session
    loop = waits.wrap_loop(_loop, "pipe", "recv")
    assert waits.wrap_loop(loop, "pipe", "recv") is loop  # once
    assert loop.__qualname__ == _loop.__qualname__  # pickled by reference as the library's own
    mine, theirs = mp.Pipe()
    other, _ = mp.Pipe()
    for cmd in ("step", "step", "reset", "close"):
        theirs.send(cmd)
    with sess:
        assert loop(0, pipe=mine, other=other) == ["step", "step", "reset"]
    assert "recv" not in vars(other) and "recv" in vars(mine)  # only the named argument's
    proc = load_trace(str(sess.trace_dir)).processes[0]
    kind, ident = (proc.events.column(c).to_numpy() for c in ("kind", "id"))
    assert int(((kind == S.CAT_BEGIN) & (ident == WAITING)).sum()) == 4  # one wait per command


def test_an_object_without_attributes_of_its_own_is_left_as_is():
    assert waits.mark_waits(object(), "recv") is False
    assert waits.mark_waits(mp.get_context("fork").SimpleQueue(), "get") is True


def test_the_library_loops_are_known():
    for spec in waits.WORKER_LOOPS:
        module = pytest.importorskip(spec.module)
        fn = getattr(module, spec.function)
        assert spec.argument in inspect.signature(fn).parameters, spec


VECTOR_ENVS = textwrap.dedent(
    """
    import sys

    import gymnasium as gym

    if __name__ == "__main__":
        if sys.argv[1] == "sb3":
            from stable_baselines3.common.env_util import make_vec_env
            from stable_baselines3.common.vec_env import SubprocVecEnv

            env = make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=SubprocVecEnv, seed=0)
            env.reset()
            for _ in range(20):
                env.step([env.action_space.sample() for _ in range(2)])
        else:
            env = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
            env.reset(seed=0)
            for _ in range(20):
                env.step(env.action_space.sample())
        env.close()
        print("DONE")
    """
)


@pytest.mark.parametrize("library", ["gymnasium", "sb3"])
def test_vector_env_workers_record_one_wait_per_command(tmp_path, library):
    pytest.importorskip("gymnasium")
    if library == "sb3":
        pytest.importorskip("stable_baselines3")
    script = tmp_path / "job.py"
    script.write_text(VECTOR_ENVS)
    trace = tmp_path / "trace"
    run = ["run", "--no-analyze", "--gpu", "off", "--no-backend", "--trace-dir", str(trace), "--"]
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.main", *run, sys.executable, str(script), library],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "DONE" in r.stdout, r.stderr

    def count(p, kind: int, code: int) -> int:
        k, i = (p.events.column(c).to_numpy() for c in ("kind", "id"))
        return int(((k == kind) & (i == code)).sum())

    procs = load_trace(trace).processes
    workers = [p for p in procs if count(p, S.CAT_BEGIN, SIMULATOR) > 0 and p.metadata.get("run_parent")]
    assert len(workers) == 2
    for p in workers:
        # the reset, 20 steps and the close at least (and the library's own set-up commands)
        assert count(p, S.CAT_BEGIN, WAITING) >= 22
        assert count(p, S.CAT_BEGIN, WAITING) == count(p, S.CAT_END, WAITING)
    s = analyze(trace, correct=False).summary
    roles = {p["pid"]: p["role"] for p in s["processes"]}
    assert {roles[w.pid] for w in workers} == {"env worker"}
    for p in s["processes"]:
        if p["pid"] in {w.pid for w in workers}:
            assert p["waiting_s"] > 0
            assert "waiting" not in {c for o in p["operations"].values() for c in o["categories"]}
    if library == "sb3":  # the forkserver that forked them waits for fork requests
        (server,) = [
            p for p in procs if p.pid not in {w.pid for w in workers} and p.metadata.get("run_parent")
        ]
        assert count(server, S.CAT_BEGIN, WAITING) >= 2
        assert roles[server.pid] == "forkserver"  # its workers carry its command line: not forkservers


def test_the_forkserver_has_a_role_of_its_own():
    """SubprocVecEnv's default start method forks its workers from multiprocessing's forkserver,
    which does nothing else: its role says so (not ``child``, not a straggler's peer). Its ``sys.argv``
    is ``['-c']`` alone: the recorded whole command line (``orig_argv``) tells it."""
    code = "from multiprocessing.forkserver import main; main(5, 6, ['__main__'], **{})"
    meta = {"argv": json.dumps(["-c"]), "orig_argv": json.dumps(["python3", "-c", code]), "ppid": "7"}
    assert process_role(meta, {7}) == "forkserver"
    assert process_role({**meta, "orig_argv": json.dumps(["python3", "train.py"])}, {7}) == "child"
    assert process_role({"argv": "not json", "ppid": "7"}, {7}) == "child"
    # its workers are forked from it and carry its command line: children of a forkserver
    worker = {**meta, "pid": "9", "ppid": "8"}
    assert process_roles([{**meta, "pid": "8"}, worker], [8, 9]) == ["forkserver", "child"]


def test_a_process_records_its_whole_command_line():
    from rlscope.runtime.metadata import process_metadata

    meta = process_metadata({}, 0, 0, 0)
    assert json.loads(meta["orig_argv"]) == sys.orig_argv and json.loads(meta["argv"]) == sys.argv
