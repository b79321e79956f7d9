"""A child rlscope profiles flushes its trace when its parent ends it with SIGTERM, then dies of it.

``Pool.terminate``, ``with Pool(...)`` and daemonic children at the parent's exit end children with
SIGTERM. Where SIGTERM still has its default action, rlscope puts a handler there that flushes the
session (its end event carries the signal, so the analysis tells it from a crash), restores the
default action and sends the signal again: the exit status is the one the child had without rlscope.

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
from collections.abc import Callable
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

_session: Any = None  # the session to flush (it may be stopping already)
_claim = threading.Lock()  # taken by whichever ends the process: the handler or the relay
_relay_fds: tuple[int, int] | None = None  # the relay's pipe (read, write), if relayed
_relay_pid = 0  # the process that relay belongs to (a forked child inherits the parent's fds)


def end_cleanly_on_sigterm(session: Any) -> None:
    """Flush ``session`` before a SIGTERM ends this process; only where SIGTERM still has its
    default action (a handler of the program's stays). Call on the main thread."""
    global _session, _claim
    try:
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, _on_sigterm):
            return
        _session = session
        _claim = threading.Lock()  # a forked child's own (the parent's state came with the fork)
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError) as e:  # not the main thread, or no signals here
        warn_once(f"a SIGTERM to process {os.getpid()} will lose its last second of trace ({e})")
        return
    _start_relay(signal.SIGTERM)


def _on_sigterm(signum: int, frame: Any) -> None:
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
        warn_once(f"could not flush the trace before SIGTERM: {e!r}")
    os.kill(os.getpid(), signum)


def _native() -> Any:
    """The loaded native scope module, or None (never builds or loads it here)."""
    from rlscope.collectors import scope_native

    return scope_native._module if scope_native.wanted() else None


def _start_relay(signum: int) -> None:
    """Chain the C handler and start this process's relay thread (once per process)."""
    global _relay_fds, _relay_pid
    native = _native()
    if native is None or not hasattr(native, "relay_signal"):
        return
    if _relay_pid == os.getpid():  # relayed already: its thread is waiting
        return
    if _relay_fds is not None:  # a forked child: the parent's pipe, and no thread reads it here
        for fd in _relay_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        _relay_fds = None
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)  # the C handler must never block on it
        native.relay_signal(signum, w)
    except OSError as e:
        warn_once(f"SIGTERM relay not installed ({e}): a child blocked in C may not flush on SIGTERM")
        return
    _relay_fds, _relay_pid = (r, w), os.getpid()
    threading.Thread(target=_relay, args=(r, native), name="rlscope-signal", daemon=True).start()


def _relay(fd: int, native: Any) -> None:
    """The relay thread: wait for a relayed signal; end the process if the main thread does not."""
    # the kernel then gives process-directed signals to the threads that can run the handler
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
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
