"""Run the program ``rlscope run`` profiles as a shell runs a job, and end it when rlscope is ended.

The program runs in a process group of its own, so that a signal meant for the run reaches every
process of it (Pool workers, vector-env workers, subprocesses) and nothing else. rlscope forwards
the SIGINT, SIGTERM and SIGHUP it receives (``kill``, a batch scheduler, ``docker stop``,
``subprocess.terminate()``, a closed terminal) to that group with :func:`os.killpg`: each profiled
process flushes its trace and dies of the signal (rlscope/runtime/child_signal.py). rlscope then
waits a grace period for the program and the rest of its group, kills what is left with SIGKILL
(one line on stderr says so) and returns the exit status a shell gives: 128 + N for signal N.
Nothing of the run outlives ``rlscope run``, and its trace is whole for the analysis that follows.

A group of its own is no longer the terminal's foreground group. When stdin is a terminal and
rlscope is its foreground job, rlscope hands the foreground to the program's group and takes it back
when the program ends, as a shell's job control does: Ctrl-C reaches the program straight from the
terminal (rlscope does not see it), and a ``breakpoint()`` or ``input()`` in the program reads the
terminal instead of stopping on SIGTTIN. A program stopped by Ctrl-Z (or by reading the terminal in
the background) stops rlscope's own job too, so the shell sees a stopped job; ``fg`` or ``bg``
continues rlscope, which continues the program (with the terminal again in the foreground case).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

# what rlscope forwards to the program's process group
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# longer than a profiled process's own bound on its flush (child_signal.SIGNAL_FLUSH_TIMEOUT_S, 5 s,
# plus its relay's 0.5 s), and docker stop's own grace period
DEFAULT_GRACE_S = 10.0
_POLL_S = 0.05  # how often the rest of the group is looked for, once the program itself has ended
_KILLED_S = 5.0  # how long the killed processes of the group are waited for


def exit_status(code: int) -> int:
    """``Popen.returncode`` as a shell gives it: 128 + N when signal N ended the program."""
    return 128 - code if code < 0 else code


def foreground_terminal(fd: int = 0) -> int | None:
    """``fd`` when it is a terminal whose foreground process group is rlscope's, else None.

    Only then is the terminal rlscope's to hand over: a job started with ``&`` keeps it where the
    shell put it, and without a terminal the signals come to rlscope and are forwarded."""
    try:
        if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except OSError:
        pass
    return None


def run_program(command: list[str], env: dict[str, str], grace_s: float = DEFAULT_GRACE_S) -> int:
    """Run ``command`` to its end in a process group of its own; its exit status as a shell gives it.

    Raises what :class:`subprocess.Popen` raises for a program that cannot start
    (``FileNotFoundError``). Off the main thread, where no signal handler can be set, the program
    runs in rlscope's group and is waited for plainly."""
    if threading.current_thread() is not threading.main_thread():
        with subprocess.Popen(command, env=env) as proc:
            return exit_status(proc.wait())
    with _signals_to_pipe() as wake:
        proc = subprocess.Popen(command, env=env, process_group=0)
        return _Job(proc, wake, grace_s).wait()


@contextlib.contextmanager
def _signals_to_pipe() -> Iterator[int]:
    """While supervising, the forwarded signals and SIGCHLD wake a pipe that the wait reads.

    Their Python handlers do nothing: :func:`signal.set_wakeup_fd` writes each signal's number to
    the pipe from C, and the wait loop acts on it between its own steps, so a signal that comes
    while the program is being started is forwarded once it has a group, and none is lost or
    forwarded twice. Caught signals return to their default action in the program (``execve``)."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    # a signal rlscope was started with ignored (``nohup``, a script's ``&`` for SIGINT) stays
    # ignored, and the program inherits that as it would without rlscope
    previous = {s: signal.getsignal(s) for s in FORWARDED if signal.getsignal(s) != signal.SIG_IGN}
    previous[signal.SIGCHLD] = signal.getsignal(signal.SIGCHLD)  # ignored, it would reap the program
    old_fd = -1
    try:
        for s in previous:
            signal.signal(s, _wake_only)
        old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        yield r
    finally:
        signal.set_wakeup_fd(old_fd)
        for s, handler in previous.items():
            if handler is not None:  # None: set outside Python, left as it is
                signal.signal(s, handler)
        os.close(r)
        os.close(w)


def _wake_only(signum: int, frame: object) -> None:
    """Handler of the supervised signals: the wake-up pipe carries them (see _signals_to_pipe)."""


class _Job:
    """The program's process group, from its start to the end of the last of its processes."""

    def __init__(self, proc: subprocess.Popen, wake: int, grace_s: float) -> None:
        self.proc, self.pgid, self.wake, self.grace_s = proc, proc.pid, wake, grace_s
        self.deadline: float | None = None  # grace period's end, from the first forwarded signal
        self.first: int = 0  # the first signal forwarded
        self.killed = False
        self.job_control = _controlling_terminal(0)  # a shell to hand a stopped job to
        self.tty: int | None = None
        self.ttou: list[Any] = []  # SIGTTOU's handler before rlscope ignored it, once it did
        self._use_terminal(foreground_terminal(0))
        self._give_terminal()

    def wait(self) -> int:
        try:
            status = self._wait_for_program()
            self.proc.returncode = code = os.waitstatus_to_exitcode(status)
            self._take_terminal()
            if self.deadline is not None:  # rlscope was asked to end the run: all of it
                self._wait_for_group()
            return exit_status(code)
        finally:
            if self.ttou:  # (None: set outside Python, where SIGTTOU has its default action)
                signal.signal(signal.SIGTTOU, self.ttou[0] or signal.SIG_DFL)

    def _wait_for_program(self) -> int:
        """The program's wait status; forwards signals and kills the group past the grace period."""
        flags = os.WNOHANG | (os.WUNTRACED if self.job_control else 0)
        while True:
            self._handle_signals()
            pid, status = _waitpid(self.pgid, flags)
            if pid and os.WIFSTOPPED(status):
                self._stopped(os.WSTOPSIG(status))
                continue
            if pid:
                return status
            self._sleep()

    def _wait_for_group(self) -> None:
        """After a forwarded signal: until the rest of the program's group has flushed and ended
        (killed ones included: a process killed in an uninterruptible wait ends when it returns,
        which rlscope waits for no longer than :data:`_KILLED_S`)."""
        killed_by: float | None = None
        while _group_alive(self.pgid):
            self._handle_signals()
            if self.killed:
                killed_by = killed_by or time.monotonic() + _KILLED_S
                if time.monotonic() > killed_by:
                    return
            self._sleep(_POLL_S)

    def _sleep(self, at_most: float | None = None) -> None:
        """Until a signal comes (SIGCHLD included), the grace period ends, or ``at_most`` seconds."""
        timeout = at_most
        if self.deadline is not None and not self.killed:
            left = max(0.0, self.deadline - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        with contextlib.suppress(InterruptedError):
            select.select([self.wake], [], [], timeout)

    def _handle_signals(self) -> None:
        """Forward what came; at the grace period's end, SIGKILL the group (once)."""
        for signum in _drain(self.wake):
            if signum not in FORWARDED:
                continue
            _killpg(self.pgid, signum)
            if self.deadline is None:
                self.first, self.deadline = signum, time.monotonic() + self.grace_s
        if self.deadline is not None and not self.killed and time.monotonic() >= self.deadline:
            self.killed = True
            what = "the program" if self.proc.returncode is None else "processes the program left"
            name = signal.Signals(self.first).name
            print(
                f"rlscope run: {what} did not end within {self.grace_s:g} s of {name};"
                " killing its process group (SIGKILL)",
                file=sys.stderr,
                flush=True,
            )
            _killpg(self.pgid, signal.SIGKILL)

    def _stopped(self, stopsig: int) -> None:
        """The program stopped: as its shell would see it, through rlscope's own job.

        A program that touched the terminal while rlscope holds the foreground (it read before the
        hand-over) gets the terminal and goes on. Otherwise rlscope stops its own process group,
        the job its shell watches, with the same kind of stop, and once continued (``fg``, ``bg``)
        hands the terminal over again if it has it and continues the program."""
        if stopsig in (signal.SIGTTIN, signal.SIGTTOU) and self._holds_terminal():
            self._use_terminal(0)
        else:
            self._take_terminal()
            _killpg(os.getpgrp(), signal.SIGTTIN if stopsig == signal.SIGTTIN else signal.SIGTSTP)
            # here once continued
            self.tty = None
            self._use_terminal(foreground_terminal(0))
        self._give_terminal()
        _killpg(self.pgid, signal.SIGCONT)

    def _use_terminal(self, fd: int | None) -> None:
        """Hand terminal ``fd`` to the program from now on (None: no terminal to hand).

        A background group that changes the foreground gets SIGTTOU: rlscope ignores it while it
        hands the terminal back and forth (only once the program has started: an ignored signal
        is inherited)."""
        if fd is None:
            return
        self.tty = fd
        if not self.ttou:
            self.ttou.append(signal.signal(signal.SIGTTOU, signal.SIG_IGN))

    def _holds_terminal(self) -> bool:
        """Whether the terminal's foreground is rlscope's group or the program's."""
        try:
            return _isatty(0) and os.tcgetpgrp(0) in (os.getpgrp(), self.pgid)
        except OSError:
            return False

    def _give_terminal(self) -> None:
        if self.tty is not None:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(self.tty, self.pgid)

    def _take_terminal(self) -> None:
        """The foreground back to rlscope, if the program's group still has it (after ``bg``, the
        shell has it: it stays there)."""
        if self.tty is None:
            return
        with contextlib.suppress(OSError):
            if os.tcgetpgrp(self.tty) == self.pgid:
                os.tcsetpgrp(self.tty, os.getpgrp())


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _controlling_terminal(fd: int) -> bool:
    """Whether ``fd`` is rlscope's controlling terminal (a terminal of another session is not)."""
    if not _isatty(fd):
        return False
    try:
        os.tcgetpgrp(fd)
    except OSError:
        return False
    return True


def _drain(fd: int) -> bytes:
    """The signal numbers waiting in the wake-up pipe."""
    out = b""
    while True:
        try:
            got = os.read(fd, 512)
        except (BlockingIOError, InterruptedError):
            return out
        if not got:
            return out
        out += got


def _waitpid(pid: int, flags: int) -> tuple[int, int]:
    """``os.waitpid``; a child reaped elsewhere reads as exited with status 0, as Popen has it."""
    while True:
        try:
            return os.waitpid(pid, flags)
        except InterruptedError:
            continue
        except ChildProcessError:
            return pid, 0


def _killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (one rlscope may signal; zombies do not count).

    The program's processes that outlived it belong to init, or to rlscope where rlscope is the
    one that adopts orphans (PID 1 of a container, a subreaper): those rlscope reaps here."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-pgid, os.WNOHANG)[0]:
            pass
    return _runs_in(pgid)


def _runs_in(pgid: int) -> bool:
    """Linux: whether a process of group ``pgid`` other than a zombie is listed in /proc (where
    there is no /proc: True, as :func:`os.killpg` said)."""
    try:
        pids = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False
