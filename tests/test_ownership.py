"""rlscope removes only what a trace's manifest lists, one run writes a trace at a time, and a
write that fails (a full disk) stops the recording, not the job."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlscope
from rlscope.analysis.result import analyze
from rlscope.errors import RLScopeError
from rlscope.session import active_session
from rlscope.trace import ownership
from rlscope.trace.reader import ProcessTrace, load_trace
from rlscope.trace.schema import EVENTS_FILE, OP_BEGIN
from rlscope.trace.writer import StreamFile

MANIFEST = ownership.MANIFEST_FILE


def _session(path: Path, **kw: object) -> rlscope.Session:
    return rlscope.profile(path, backend=False, gpu=False, **kw)


def _profiled(path: Path, name: str = "step") -> None:
    with _session(path), rlscope.scope(name):
        pass


def _operations(proc: ProcessTrace) -> list[str]:
    """The names of the operations a process's events begin, in order."""
    ev = proc.events
    begins = ev.column("kind").to_numpy() == OP_BEGIN
    return [proc.names[i] for i in ev.column("name").to_numpy()[begins]]


def _user_files(root: Path) -> dict[str, bytes]:
    """A user's folders whose names look like rlscope's, with a file in each."""
    files = {"process-data/model.pt": b"weights", ".process-cache/blob": b"cache", "process-1234/x": b"x"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def _intact(root: Path, files: dict[str, bytes]) -> bool:
    return all((root / rel).read_bytes() == data for rel, data in files.items())


def _rlscope(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rlscope.cli.main", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


# -- the manifest -----------------------------------------------------------------------------------


def test_a_session_lists_its_process_directory_in_the_manifest(tmp_path):
    _profiled(tmp_path / "t")
    manifest = ownership.read_manifest(tmp_path / "t")
    assert manifest is not None
    assert manifest.header["format"] == ownership.FORMAT
    assert manifest.header["format_version"] == ownership.FORMAT_VERSION
    assert manifest.header["writer"].startswith("rlscope ")
    assert manifest.entries == [f"process-{os.getpid()}"]


def test_clearing_removes_only_what_the_manifest_lists(tmp_path):
    trace = tmp_path / "t"
    _profiled(trace)
    files = _user_files(trace)  # put there by the user after the trace was written
    assert ownership.clear_trace_dir(trace) == 1
    assert _intact(trace, files)
    assert not (trace / f"process-{os.getpid()}").exists()
    assert ownership.read_manifest(trace).entries == []


def test_a_damaged_manifest_never_reaches_outside_its_directory(tmp_path):
    trace = tmp_path / "t"
    _profiled(trace)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("keep")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("keep")
    (trace / "process-link").symlink_to(elsewhere)
    (trace / "process-file").write_text("a file, not a directory")
    with open(trace / MANIFEST, "a") as f:
        for entry in ("../victim", "process-1/../../victim", "/tmp", "process-link", "process-file", "x"):
            f.write(json.dumps({"entry": entry}) + "\n")
        f.write('{"entry": "process-cut')  # a write cut short by a kill
    ownership.clear_trace_dir(trace)
    assert (victim / "keep").read_text() == "keep"
    assert (elsewhere / "keep").read_text() == "keep"
    assert (trace / "process-link").is_symlink()
    assert (trace / "process-file").is_file()


def test_profile_refuses_a_directory_that_is_not_a_trace(tmp_path):
    files = _user_files(tmp_path / "mine")
    with pytest.raises(RLScopeError, match="not an rlscope trace"):
        _session(tmp_path / "mine").start()
    assert _intact(tmp_path / "mine", files)
    assert not (tmp_path / "mine" / MANIFEST).exists()
    assert active_session() is None


def test_a_trace_without_a_manifest_is_named_as_such(tmp_path):
    old = tmp_path / "old"
    _profiled(old)
    (old / MANIFEST).unlink()
    (old / ownership.LOCK_FILE).unlink()
    with pytest.raises(RLScopeError, match="without a manifest"):
        _session(old).start()


def test_a_second_session_of_a_process_writes_beside_the_first(tmp_path):
    trace = tmp_path / "t"
    _profiled(trace, "first")
    _profiled(trace, "second")
    names = sorted(p.name for p in trace.iterdir() if p.name.startswith("process-"))
    assert names == [f"process-{os.getpid()}", f"process-{os.getpid()}-2"]
    assert sorted(n for p in load_trace(trace).processes for n in _operations(p)) == ["first", "second"]


def test_profile_inside_an_active_session_is_one_clear_error(tmp_path):
    with _session(tmp_path / "a"):
        with pytest.raises(RLScopeError, match="already active"):
            _session(tmp_path / "b").start()
        with rlscope.scope("still recorded"):
            pass
    assert _operations(load_trace(tmp_path / "a").processes[0]) == ["still recorded"]
    assert not (tmp_path / "b" / f"process-{os.getpid()}").exists()


# -- the lock -----------------------------------------------------------------------------------------

_HOLD = """
import sys, time
from rlscope.trace import ownership
ownership.claim(sys.argv[1], "rlscope run")
print("held", flush=True)
time.sleep(60)
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_profile_into_a_trace_a_run_holds_is_refused(tmp_path):
    trace = tmp_path / "t"
    holder = _holder(trace)
    try:
        with pytest.raises(RLScopeError, match=rf"being written by rlscope run \(pid {holder.pid}"):
            _session(trace).start()
    finally:
        holder.kill()
        holder.wait()
    _profiled(trace)  # its holder gone, the lock is free


def test_a_run_cannot_claim_a_trace_a_session_writes(tmp_path):
    trace = tmp_path / "t"
    with _session(trace):
        with pytest.raises(RLScopeError, match="being written by"):
            ownership.claim(trace, "rlscope run")
        # the default directory gives way to a numbered one next to it
        got = ownership.claim(trace, "rlscope run", fallback=True)
        assert got.path == tmp_path / "t-2"
        got.lock.release()
    assert (trace / f"process-{os.getpid()}" / EVENTS_FILE).is_file()


def test_a_stale_lock_is_taken_over_and_said(tmp_path, capsys):
    trace = tmp_path / "t"
    trace.mkdir()
    (trace / MANIFEST).write_text("")
    dead = {"what": "rlscope run", "pid": 999_999_999, "host": "h", "since_unix": 1.0, "token": "x"}
    (trace / ownership.LOCK_FILE).write_text(json.dumps(dead))
    got = ownership.claim(trace, "rlscope run")
    try:
        assert "took over a stale lock of rlscope run (pid 999999999" in capsys.readouterr().err
        held = json.loads((trace / ownership.LOCK_FILE).read_text())
        assert held["pid"] == os.getpid() and held["token"] == got.lock.token
    finally:
        got.lock.release()
    assert (trace / ownership.LOCK_FILE).read_text() == ""  # released cleanly: nothing stale


# -- rlscope run --------------------------------------------------------------------------------------


def test_run_refuses_a_named_directory_it_did_not_write(tmp_path):
    files = _user_files(tmp_path / "data")
    r = _rlscope(
        "run", "--no-analyze", "--trace-dir", "data", "--", sys.executable, "-c", "pass", cwd=tmp_path
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "not an rlscope trace" in lines[0], r.stderr
    assert _intact(tmp_path / "data", files)


def test_run_writes_next_to_a_default_directory_it_did_not_write(tmp_path):
    files = _user_files(tmp_path / "rlscope-trace")
    r = _rlscope("run", "--no-analyze", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "writing to" in r.stderr and "rlscope-trace-2" in r.stderr
    assert _intact(tmp_path / "rlscope-trace", files)
    assert ownership.read_manifest(tmp_path / "rlscope-trace-2").entries


def test_run_replaces_its_own_previous_trace_and_says_so(tmp_path):
    args = ("run", "--no-analyze", "--trace-dir", "t", "--", sys.executable, "-c", "pass")
    first = _rlscope(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "replacing" not in first.stderr
    files = _user_files(tmp_path / "t")
    (old,) = ownership.read_manifest(tmp_path / "t").entries
    second = _rlscope(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "replacing the previous trace" in second.stderr
    assert _intact(tmp_path / "t", files)
    (new,) = ownership.read_manifest(tmp_path / "t").entries
    assert new != old and not (tmp_path / "t" / old).exists()


def test_a_second_run_into_a_live_trace_is_refused_and_deletes_nothing(tmp_path):
    program = "import time, rlscope\nwith rlscope.scope('train'):\n    time.sleep(30)\n"
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--trace-dir", "t", "--"]
    first = subprocess.Popen([*cmd, sys.executable, "-c", program], cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any((tmp_path / "t").glob("process-*/events.arrows")):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        second = _rlscope(
            "run", "--no-analyze", "--trace-dir", "t", "--", sys.executable, "-c", "pass", cwd=tmp_path
        )
        assert second.returncode == 2
        assert len(second.stderr.strip().splitlines()) == 1
        assert f"being written by rlscope run (pid {first.pid}" in second.stderr
        assert any((tmp_path / "t").glob("process-*/events.arrows"))
    finally:
        first.terminate()  # rlscope run ends its program too
        first.wait(timeout=60)


# -- a write that fails -------------------------------------------------------------------------------


def test_a_full_disk_stops_the_recording_not_the_job(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("RLSCOPE_WARNED", "")  # the one-line warning is printed once per run
    real = StreamFile.write_rows
    writes = {"events": 0}

    def disk_fills(self: StreamFile, rows: object) -> None:
        if self.path.name == EVENTS_FILE:
            writes["events"] += 1
            if writes["events"] > 1:  # one round of steps written, then the disk is full
                raise OSError(errno.ENOSPC, "No space left on device")
        real(self, rows)

    monkeypatch.setattr(StreamFile, "write_rows", disk_fills)
    session = _session(tmp_path / "t", flush_interval=3600).start()  # flushed here, by hand
    queued = []
    for _ in range(5):
        for _ in range(2000):
            with rlscope.scope("step"):
                pass
        session.writer.flush()
        queued.append(len(session.writer.events))
    writer = session.writer
    session.stop()
    assert max(queued) <= 2, queued  # drained at every flush: nothing piles up in the job
    assert writer.failed is not None and writer.failed.errno == errno.ENOSPC
    assert writer.rows_dropped >= 4 * 2 * 2000
    err = capfd.readouterr().err
    assert err.count("cannot write the trace") == 1, err
    assert len([line for line in err.splitlines() if "cannot write" in line]) == 1
    proc = load_trace(tmp_path / "t").processes[0]
    ends = proc.events.filter(proc.events.column("kind").to_numpy() == 1).num_rows
    assert ends == 2000  # the round written before the disk filled, whole
    # the manifest says the recording was cut, and the analysis says so
    assert ownership.read_manifest(tmp_path / "t").cuts == {proc.path.name: "No space left on device"}
    (said,) = [w for w in proc.warnings if "recording stopped early" in w]
    assert "No space left on device" in said
    assert not [w for w in proc.warnings if "did not end normally" in w]  # not a crash: said once, why
    # the aggregates went on in their own file: the whole run's calls are all there
    summary = analyze(tmp_path / "t", workers=1).summary
    assert summary["operations"]["step"]["calls"] == 5 * 2000
    assert summary["detail"]["summarized_s"] > 0
