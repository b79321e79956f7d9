"""A process rlscope profiles flushes its trace when a signal ends it, then dies of that signal.

``Pool.terminate``, ``with Pool(...)`` and daemonic children at the parent's exit end children with
SIGTERM; ``rlscope run`` forwards the SIGTERM or SIGHUP it gets (``kill``, a batch scheduler,
``docker stop``, a closed terminal) to the program's process group (rlscope/cli/supervise.py).
Where such a signal still has its default action, rlscope puts a handler there that flushes the
session (its end event carries the signal, so the analysis tells it from a crash), restores the
default action and sends the signal again: the exit status is the one the process had without
rlscope.

A program's own handler stays in charge. The session's handler is installed before the program's
first line, so a program that sets its own (``signal.signal(SIGTERM, save_and_exit)``) replaces it,
C handler included (CPython's ``signal.signal`` is a ``sigaction``): this module never ends such a
process (``rlscope run`` kills what still runs after its grace period), and its trace ends on the
way the program leaves (``sys.exit``, the end of the script: ``atexit``). A program that calls the
handler it replaced (``previous(signum, frame)``) chains to rlscope's, which flushes and ends the
process as the default action would have. A signal the process inherited as ignored (``nohup``)
stays ignored.

CPython runs a Python handler only on the main thread, between bytecodes. A main thread that took
the signal just before it blocked in C (a pool worker entering ``sem_wait`` on its task queue), or a
signal the kernel handed to another thread, leaves the handler pending while the main thread waits
for ever: the child hung where it would have died, and so did its parent's ``with Pool()``. So the
native scope module (collectors/scope_native.c) chains a C handler in front of CPython's
that writes the signal to a pipe; a relay thread waits on it and, when the main thread has not
started the Python handler within :data:`RELAY_GRACE_S`, ends the process itself. Whichever starts
first claims the ending; the other does nothing. Without the native module (no compiler,
``RLSCOPE_NATIVE_SCOPES=0``) only the Python handler runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rlscope.errors import warn_once

# a child's flush when its parent ends it may take this long before it dies regardless
SIGNAL_FLUSH_TIMEOUT_S = 5.0
# how long the relay thread leaves the main thread to start the Python handler. It starts within
# microseconds wherever the main thread runs Python or a call that checks for signals; a main
# thread in a long C call that released the GIL starts it when the call returns, and the relay
# must not flush the session while that thread could still be recording: long enough for most
# such calls, short beside a parent's wait (a hang cost `with Pool()` its whole run)
RELAY_GRACE_S = 0.5

# the signals that end a process of a run: a parent's (SIGTERM) and those `rlscope run` forwards to
# the program (SIGTERM, SIGHUP; its SIGINT is Python's KeyboardInterrupt, whose exit path flushes)
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# the asynchronous signals a program may handle (SIGKILL and SIGSTOP cannot be, and a fault is
# delivered to the thread that caused it); see signals_kept_from_new_threads
PROGRAM_SIGNALS = frozenset(
    getattr(signal, name)
    for name in (
        "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTERM", "SIGCHLD", "SIGCONT",
        "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO",
    )
    if hasattr(signal, name)
)  # fmt: skip

_session: Any = None  # the session to flush (it may be stopping already)
_claim = threading.Lock()  # taken by whichever ends the process: the handler or the relay
_relay_fds: tuple[int, int] | None = None  # the relay's pipe (read, write), if relayed
_relay_pid = 0  # the process that relay belongs to (a forked child inherits the parent's fds)
_relayed: set[int] = set()  # the signals this process's relay carries


@contextlib.contextmanager
def signals_kept_from_new_threads() -> Iterator[None]:
    """The threads started in this block (rlscope's writer, window timer, relay) never take a
    signal meant for the program: they block :data:`PROGRAM_SIGNALS`, which they inherit from the
    thread that starts them.

    The kernel hands a process-directed signal (Ctrl-C, ``kill``) to any thread that does not block
    it. CPython runs the Python handler on the main thread only, and a main thread waiting in a
    system call (``input()``, ``breakpoint()``'s prompt, a long ``time.sleep``, a read) wakes only
    for a signal delivered to it: taken by one of rlscope's threads, a Ctrl-C would wait for that
    call to return. A signal that comes during the block waits until its end."""
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, PROGRAM_SIGNALS)
    except (AttributeError, OSError, ValueError):  # no POSIX thread signal masks here
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def end_cleanly_on_sigterm(session: Any) -> None:
    """Flush ``session`` before a SIGTERM ends this process (a forked child's: its parent's signal)."""
    end_cleanly_on(session, (signal.SIGTERM,))


def end_cleanly_on(session: Any, signums: Iterable[int] = ENDING_SIGNALS) -> None:
    """Flush ``session`` before one of ``signums`` ends this process; only those that still have
    their default action are taken (a handler of the program's stays, an ignored signal stays
    ignored). Call on the main thread."""
    global _session, _claim
    try:
        taken = [s for s in signums if signal.getsignal(s) in (signal.SIG_DFL, _on_signal)]
        if not taken:
            return
        _session = session
        _claim = threading.Lock()  # a forked child's own (the parent's state came with the fork)
        for signum in taken:
            signal.signal(signum, _on_signal)
    except (ValueError, OSError) as e:  # not the main thread, or no signals here
        warn_once(f"a signal that ends process {os.getpid()} will lose its last second of trace ({e})")
        return
    _start_relay(taken)


def _on_signal(signum: int, frame: Any) -> None:
    """The Python handler, on the main thread."""
    if not _claim.acquire(blocking=False):  # the relay thread is ending the process
        return
    _end(signum, lambda: signal.signal(signum, signal.SIG_DFL))


def _end(signum: int, restore_default: Callable[[], None]) -> None:
    """Flush the session, marked as ended by ``signum``, and die of that signal's default action.

    The default action is restored first: a second signal, or the watchdog's after
    :data:`SIGNAL_FLUSH_TIMEOUT_S` (a flush that hangs), ends the process at once.
    """
    try:
        restore_default()
        s = _session
        if s is not None and s._pid == os.getpid() and (s._writer is not None or s._stopping):
            watchdog = threading.Timer(SIGNAL_FLUSH_TIMEOUT_S, os.kill, (os.getpid(), signum))
            watchdog.daemon = True
            watchdog.start()
            if s._stopping:  # a worker's own exit was flushing (its pool's sentinel came first):
                # let that stop finish, it re-raises the signal when done
                s._pending_signal = signum
                return
            s.stop(signal=signum)
    except Exception as e:
        warn_once(f"could not flush the trace before {signal.Signals(signum).name}: {e!r}")
    os.kill(os.getpid(), signum)


def _native() -> Any:
    """The loaded native scope module, or None (never builds or loads it here)."""
    from rlscope.collectors import scope_native

    return scope_native._module if scope_native.wanted() else None


def _start_relay(signums: Iterable[int]) -> None:
    """Chain the C handler for each of ``signums`` and start this process's relay thread (once per
    process; one pipe carries every relayed signal's number)."""
    global _relay_fds, _relay_pid, _relayed
    native = _native()
    if native is None or not hasattr(native, "relay_signal"):
        return
    if _relay_pid != os.getpid():  # no relay yet, or a forked child's (the parent's pipe, no reader)
        if _relay_fds is not None:
            for fd in _relay_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        _relay_fds, _relay_pid, _relayed = None, 0, set()
    fds = _relay_fds
    if fds is None:
        try:
            fds = os.pipe()
            os.set_blocking(fds[1], False)  # the C handler must never block on it
        except OSError as e:
            warn_once(f"signal relay not installed ({e}): a process blocked in C may not flush on a signal")
            return
    for signum in signums:
        if signum in _relayed:
            continue
        try:
            native.relay_signal(signum, fds[1])
        except OSError as e:
            warn_once(
                f"{signal.Signals(signum).name} relay not installed ({e}):"
                " a process blocked in C may not flush on it"
            )
            continue
        _relayed.add(signum)
    if _relay_fds is not None:  # its thread is waiting already
        return
    if not _relayed:  # nothing writes to this pipe
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        return
    _relay_fds, _relay_pid = fds, os.getpid()
    threading.Thread(target=_relay, args=(fds[0], native), name="rlscope-signal", daemon=True).start()


def _relay(fd: int, native: Any) -> None:
    """The relay thread: wait for a relayed signal; end the process if the main thread does not."""
    # the kernel then gives process-directed signals to the program's threads (one started outside
    # signals_kept_from_new_threads, in a forked child, blocks them here)
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, PROGRAM_SIGNALS)
    while True:
        try:
            got = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            return
        if not got:
            return
        signum = got[0]
        time.sleep(RELAY_GRACE_S)
        if not _claim.acquire(blocking=False):  # the main thread's handler has it
            return
        _end(signum, lambda s=signum: native.default_signal(s))
        return
