"""Signals under ``rlscope run``: they reach the program's process group, its trace is flushed, nothing
of it outlives rlscope, and a Ctrl-C during the analysis is one line (rlscope/cli/supervise.py)."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlscope.cli import main as cli_main
from rlscope.cli import supervise
from rlscope.trace import schema as S
from rlscope.trace.check import check_trace
from rlscope.trace.reader import load_trace

# a flush interval longer than the run: what the program recorded reaches disk only on its way out
RUN = ["run", "--no-analyze", "--gpu", "off", "--no-backend", "--flush-interval", "30"]
WAIT_S = 60.0  # bound of every wait: a start-up on a loaded 2-core machine takes a few seconds

# writes its pid (and its helper's, if any) to argv[1] once it runs, then works until it is ended
WORKING = textwrap.dedent(
    """
    import os, sys, time
    import rlscope

    with rlscope.scope("work"):
        open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        while True:
            time.sleep(0.01)
    """
)

# ignores SIGTERM, and so does a helper process it starts
STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    helper = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 600"])
    open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {helper.pid}")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(0.01)
    """
)

# its own SIGTERM handler: finish the step, save, leave normally
OWN_HANDLER = textwrap.dedent(
    """
    import os, signal, sys, time
    import rlscope

    stop = False

    def on_sigterm(signum, frame):
        global stop
        stop = True

    signal.signal(signal.SIGTERM, on_sigterm)
    open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    while not stop:
        with rlscope.scope("step"):
            time.sleep(0.01)
    with rlscope.scope("save"):
        time.sleep(1.0)  # longer than a relay's grace: nothing of rlscope's ends it meanwhile
    print("SAVED", flush=True)
    """
)


def _signals_at_default() -> None:
    """In ``rlscope run``'s process before it starts: the signals these tests send at their default
    action, as a shell gives them to a command it runs. Why: a test runner started under ``nohup``
    (SIGHUP ignored) or as a background job of a script (SIGINT ignored) passes its ignored signals
    on, and rlscope, as documented, keeps a signal it was started with ignored ignored: the test
    would then wait for an end that never comes."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)


class _Run:
    """``rlscope run`` of ``script`` without a terminal, its output in files (a program that outlived
    rlscope would hold pipes open)."""

    def __init__(self, tmp_path: Path, script: str, *options: str) -> None:
        path, self.trace, self.pid_file = tmp_path / "job.py", tmp_path / "trace", tmp_path / "pid"
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        path.write_text(script)
        cmd = [sys.executable, "-m", "rlscope.cli.main", *RUN, "--trace-dir", str(self.trace), *options]
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [*cmd, "--", sys.executable, str(path), str(self.pid_file)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                preexec_fn=_signals_at_default,
            )

    def pids(self) -> list[int]:
        """The pids the program wrote, once it runs (it must not end first)."""
        deadline = time.monotonic() + WAIT_S
        while not self.pid_file.exists():
            assert self.proc.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "the program did not start"
            time.sleep(0.05)
        return [int(x) for x in self.pid_file.read_text().split()]

    def finish(self) -> tuple[int, str, str]:
        """rlscope's exit status, stdout and stderr, once it has ended."""
        code = self.proc.wait(timeout=WAIT_S)
        return code, self.out.read_text(), self.err.read_text()

    def cleanup(self) -> None:
        """End whatever still runs (a test that failed)."""
        if self.pid_file.exists():
            for pid in self.pid_file.read_text().split():
                if _alive(int(pid)):
                    os.kill(int(pid), signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _gone(pids: list[int]) -> bool:
    """Whether every one of ``pids`` has ended (a killed process's last breath is bounded)."""
    deadline = time.monotonic() + WAIT_S
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _end_signals(trace: Path) -> list[int]:
    """The signal each process's session end carries (-1: it ended normally)."""
    ends = []
    for p in load_trace(trace).processes:
        ev = p.events.to_pydict()
        ends += [i for k, i in zip(ev["kind"], ev["id"], strict=True) if k == S.SESSION_END]
    return ends


@pytest.mark.parametrize(
    "signum, end", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGHUP, signal.SIGHUP), (signal.SIGINT, -1)]
)
def test_a_signal_to_rlscope_run_ends_the_program_after_it_flushed_its_trace(tmp_path, signum, end):
    """``kill``, a scheduler, ``docker stop``, a closed terminal, Ctrl-C without a terminal: the
    program gets the signal, flushes and ends; rlscope exits as a shell would and names the trace."""
    run = _Run(tmp_path, WORKING)
    trace = run.trace
    try:
        pids = run.pids()
        run.proc.send_signal(signum)
        code, _, err = run.finish()
        assert code == 128 + signum, err
        assert _gone(pids), "the program outlived rlscope run"
        assert f"trace in {trace}" in err
    finally:
        run.cleanup()
    (p,) = load_trace(trace).processes
    assert p.complete and not p.warnings, p.warnings  # not "did not end normally"
    assert "work" in p.names  # its open scope was flushed on the way out
    # SIGINT is Python's KeyboardInterrupt: the program leaves through its normal exit path
    assert _end_signals(trace) == [int(end)]
    findings = [str(f) for f in check_trace(str(trace))]
    assert not [f for f in findings if f.startswith(("error", "warning"))], findings
    if end != -1:
        assert any(f"ended by {signal.Signals(end).name}" in f for f in findings), findings


def test_the_programs_first_process_flushes_when_a_sigterm_is_sent_to_it(tmp_path):
    """A SIGTERM straight to the program (``kill PID``, a scheduler ending the process tree)."""
    run = _Run(tmp_path, WORKING)
    trace = run.trace
    try:
        (pid,) = run.pids()
        os.kill(pid, signal.SIGTERM)
        code, _, err = run.finish()
        assert code == 143, err  # it died of SIGTERM, as it does without rlscope
    finally:
        run.cleanup()
    (p,) = load_trace(trace).processes
    assert p.complete and not p.warnings, p.warnings
    assert _end_signals(trace) == [signal.SIGTERM]


def test_what_does_not_end_within_the_grace_period_is_killed(tmp_path):
    """A program (and a helper of its) that ignores SIGTERM is killed with its whole process group."""
    run = _Run(tmp_path, STUBBORN, "--grace", "0.5")
    trace = run.trace
    try:
        pids = run.pids()
        run.proc.send_signal(signal.SIGTERM)
        code, _, err = run.finish()
        assert code == 128 + signal.SIGKILL, err
        notes = [line for line in err.splitlines() if "SIGKILL" in line]
        note = "the program did not end within 0.5 s of SIGTERM; killing its process group (SIGKILL)"
        assert notes == [f"rlscope run: {note}"], err
        assert _gone(pids), "a process of the program outlived rlscope run"
        assert f"exit status 137; trace in {trace}" in err
    finally:
        run.cleanup()


def test_a_program_with_its_own_sigterm_handler_stays_in_charge(tmp_path):
    """Its handler replaces rlscope's: the program ends as it chooses, and its trace ends normally."""
    run = _Run(tmp_path, OWN_HANDLER)
    trace = run.trace
    try:
        run.pids()
        run.proc.send_signal(signal.SIGTERM)
        code, out, err = run.finish()
        assert code == 0, err
        assert "SAVED" in out
    finally:
        run.cleanup()
    (p,) = load_trace(trace).processes
    assert p.complete and not p.warnings, p.warnings
    assert _end_signals(trace) == [-1]  # through atexit, as the program left
    assert {"step", "save"} <= set(p.names)


def test_ctrl_c_during_the_analysis_is_one_line_and_status_130(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "_print_report", interrupted)
    monkeypatch.setattr(supervise, "foreground_terminal", lambda fd=0: None)  # whatever runs pytest
    monkeypatch.setattr(supervise, "_isatty", lambda fd: False)
    trace = tmp_path / "trace"
    args = ["--trace-dir", str(trace), "--gpu", "off", "--no-backend", "--", sys.executable, "-c", "pass"]
    try:
        code = cli_main.run(args)
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt left rlscope run")
    assert code == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"rlscope run: analysis interrupted; the trace is in {trace} (rlscope-analyze {trace})"
    )


def test_run_help_names_the_grace_period(capsys):
    with pytest.raises(SystemExit):
        cli_main.run(["--help"])
    assert "--grace SECONDS" in capsys.readouterr().out


def test_a_terminal_is_handed_over_only_by_its_foreground_job():
    r, w = os.pipe()
    try:
        assert supervise.foreground_terminal(r) is None  # not a terminal: signals come to rlscope
    finally:
        os.close(r)
        os.close(w)
    assert supervise.exit_status(-signal.SIGTERM) == 143 and supervise.exit_status(3) == 3


def test_under_a_terminal_the_program_is_the_foreground_job(tmp_path):
    """As a shell's job: it reads the terminal (input(), breakpoint()), Ctrl-Z stops and continues
    it, Ctrl-C reaches it straight from the terminal.

    (A signal that comes after CPython's last check and before a blocking read waits for the read to
    return, with rlscope or without: the Ctrl-C is sent while the program loops in Python.)"""
    script, trace = tmp_path / "job.py", tmp_path / "trace"
    pid_file = tmp_path / "pid"
    script.write_text(
        f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('FOREGROUND', os.tcgetpgrp(0) == os.getpgrp(), flush=True)\n"
        "print('GOT', input(), flush=True)\n"
        "import time\nwhile True:\n    time.sleep(0.01)\n"
    )
    cmd = [sys.executable, "-m", "rlscope.cli.main", *RUN, "--trace-dir", str(trace)]
    pid, fd = pty.fork()  # rlscope in a session of its own, the pty its controlling terminal
    if pid == 0:
        try:
            os.execv(sys.executable, [*cmd, "--", sys.executable, str(script)])
        finally:
            os._exit(127)
    seen = b""

    def read_until(token: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + WAIT_S
        while token not in seen:
            left = deadline - time.monotonic()
            assert left > 0, seen.decode(errors="replace")
            if select.select([fd], [], [], left)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # the other side closed (Linux says EIO)
                    chunk = b""
                assert chunk, seen.decode(errors="replace")
                seen += chunk

    status = None
    try:
        read_until(b"FOREGROUND ")
        read_until(b"\n")
        assert b"FOREGROUND True" in seen, seen
        os.write(fd, b"\x1a")  # Ctrl-Z: rlscope, alone in an orphaned group here, is not stopped
        os.write(fd, b"hello\n")
        read_until(b"GOT hello")
        os.write(fd, b"\x03")  # Ctrl-C: the program's KeyboardInterrupt
        read_until(b"exit status")
        _, status = os.waitpid(pid, 0)
    finally:
        if status is None:  # it went wrong: end what still runs
            if pid_file.exists() and _alive(program := int(pid_file.read_text())):
                os.kill(program, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130, seen
    (p,) = load_trace(trace).processes
    assert p.complete and not p.warnings, p.warnings


THREADS = textwrap.dedent(
    """
    import os, signal, sys, threading

    def blocked(tid):
        mask = [line for line in open(f"/proc/self/task/{tid}/status") if line.startswith("SigBlk:")]
        return int(mask[0].split()[1], 16) >> (signal.SIGINT - 1) & 1 == 1

    open(sys.argv[1], "w").write(str(os.getpid()))
    ours = [t for t in threading.enumerate() if t.name.startswith("rlscope-")]
    print("THREADS", len(ours), all(blocked(t.native_id) for t in ours), blocked(threading.get_native_id()))
    """
)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread signal masks in /proc")
def test_rlscopes_threads_leave_the_programs_signals_to_it(tmp_path):
    """A Ctrl-C taken by rlscope's writer thread would not wake the program's main thread from a
    blocking call (input(), a sleep): rlscope's threads block the signals a program handles."""
    run = _Run(tmp_path, THREADS)
    try:
        code, out, err = run.finish()
        assert code == 0, err
    finally:
        run.cleanup()
    assert "THREADS" in out and out.split("THREADS")[1].split()[1:] == ["True", "False"], out
    assert int(out.split("THREADS")[1].split()[0]) >= 2  # the writer and the signal relay at least


def _blocked(native_id: int) -> int:
    """The signal mask of one of this process's threads (Linux: SigBlk in /proc)."""
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread masks from /proc")
def test_a_profile_sessions_threads_leave_the_programs_signals_to_it(tmp_path):
    """rlscope.profile in a program of its own (no rlscope run): its writer thread blocks SIGINT and
    SIGTERM, and the program's main thread is left as it was."""
    import threading

    import rlscope

    main_before = _blocked(threading.get_native_id())
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False):
        (writer,) = [t for t in threading.enumerate() if t.name == "rlscope-writer"]
        mask = _blocked(writer.native_id)
        assert _blocked(threading.get_native_id()) == main_before
    for sig in (signal.SIGINT, signal.SIGTERM):
        assert mask & (1 << (sig - 1)), sig
