"""The profiling session: owns the trace writer and the collectors for one process.

``rlscope.profile(trace_dir)`` is a context manager and has ``start()``/``stop()``. Each process
writes its own subdirectory ``process-<pid>`` of ``trace_dir``; a forked child that inherits an
active session starts its own. Every way a process can end normally flushes its session: ``atexit``,
a ``multiprocessing`` finalizer (rlscope/runtime/process_exit.py), and the SIGTERM or SIGHUP that
ends it under ``rlscope run`` or as a forked child (rlscope/runtime/child_signal.py).

The session keeps the session's life; its parts live beside it: the collectors
(rlscope/collectors/registry.py), the alternating windows and detail stretches
(rlscope/runtime/windows.py), the work due at scope exits (rlscope/runtime/ticks.py), the options
(rlscope/runtime/options.py) and the trace's metadata (rlscope/runtime/metadata.py).
"""

from __future__ import annotations

import atexit
import itertools
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlscope import _imports, annotate
from rlscope.collectors import scope_native
from rlscope.errors import RLScopeError, warn_once
from rlscope.overhead.correct import reference
from rlscope.runtime import hooks, process_exit, waits
from rlscope.runtime.metadata import end_facts, process_metadata
from rlscope.runtime.options import session_options
from rlscope.runtime.run_session import RunSession
from rlscope.runtime.ticks import NEVER, Ticks
from rlscope.runtime.windows import Windows
from rlscope.text import printable
from rlscope.trace import detail as detail_schedule
from rlscope.trace import ownership
from rlscope.trace import schema as S
from rlscope.trace.detail import DetailSchedule


class Session:
    """One profiling session of this process. Use through :func:`rlscope.profile`."""

    # read by the scope boundaries (annotate.py; the C lean path through set_due)
    window_due_ns = scope_native.due_attribute("window_due_ns")
    tick_due_ns = scope_native.due_attribute("tick_due_ns")
    long_op_ns = scope_native.due_attribute("long_op_ns")

    def __init__(
        self,
        trace_dir: str | os.PathLike[str] = "rlscope-trace",
        *,
        flush_interval: float = 1.0,
        backend: bool = True,
        gpu: str | bool = "auto",
        nvtx: bool = False,
        nvml_hz: float = 10.0,
        windows: bool = True,
        window_s: float = 0.1,
        full_share: float = 0.5,
        auto_ops: bool = False,
        detail: str | DetailSchedule | None = None,
        stack_hz: float = 0.0,
    ) -> None:
        self.trace_dir = Path(trace_dir)
        self.options, detail_kept = session_options(
            flush_interval=flush_interval,
            backend=backend,
            gpu=gpu,
            nvtx=nvtx,
            nvml_hz=nvml_hz,
            windows=windows,
            window_s=window_s,
            full_share=full_share,
            auto_ops=auto_ops,
            detail=detail,
            stack_hz=stack_hz,
        )
        self._lean: Any = None  # the C scope module while bound to its lean path (start to stop)
        self.nvtx_push: Any = None  # set when NVTX ranges are on (see _start_nvtx)
        self.nvtx_pop: Any = None
        # what the scope boundaries read (annotate.py; the C lean path through set_due): the due times
        # of the ticks and the windows, the main thread, and the long top-level operations (name id
        # -> the window kind their last call ran in) with the main thread's open top-level op's start
        self.tick_due_ns = NEVER
        self.window_due_ns = NEVER
        self.long_op_ns = NEVER
        self.main_tid = -1
        self.long_ops: dict[int, int] = {}
        self.top_begin_ns = 0
        self.ticks = Ticks(self)  # Kineto's cycles, a twin run's turns (rlscope/runtime/ticks.py)
        # alternating windows (docs/overhead.md), the detail stretches (rlscope/runtime/windows.py)
        self.windows = Windows(self, detail_kept, window_s=window_s, full_share=full_share)
        self.clock = time.perf_counter_ns
        self.ids = itertools.count()
        self.events: Any = None  # the writer's deque, once started
        self.scope_recorder = "python"  # set at start: collectors/scope_native.py
        self.process_dir: Path | None = None
        self._tls = threading.local()
        self._states: list[annotate.ThreadState] = []
        # reentrant: a SIGTERM handler that stops the session may run while this thread holds it
        self._states_lock = threading.RLock()
        self._writer: Any = None  # rlscope.trace.writer.TraceWriter once started
        self._collectors: list[Any] = []
        self._pid = 0
        self._stopping = False  # stop() is running (a signal handler must not re-enter it)
        self._pending_signal = 0  # a SIGTERM that came during stop(): re-raised when it is done
        self._mp_hooked = False  # the multiprocessing exit hook is registered (kept across fork)
        self._lock: ownership.Lock | None = None  # the trace directory's shared lock while writing

    # -- per-thread state (hot path) -------------------------------------------------------
    def thread_state(self) -> annotate.ThreadState:
        st = getattr(self._tls, "st", None)
        if st is None:
            st = annotate.ThreadState()
            self._tls.st = st
            with self._states_lock:
                self._states.append(st)
        return st

    def set_ticker(self, fn: Callable[[], None], every_ns: int) -> None:
        """Run ``fn`` at the first scope exit after every ``every_ns`` (rlscope/runtime/ticks.py)."""
        self.ticks.set_ticker(fn, every_ns)

    def run_tick(self, now: int) -> None:
        """At a scope exit once ``tick_due_ns`` has passed (annotate.py, the C lean path)."""
        self.ticks.run(now)

    def switch_window(self) -> None:
        """At a scope exit on the main thread once ``window_due_ns`` has passed."""
        self.windows.switch_window()

    def long_op_entry(self, name_id: int) -> None:
        """A long operation starts on the main thread at top level (rlscope/runtime/windows.py)."""
        self.windows.long_op_entry(name_id)

    def long_op_done(self, name_id: int) -> None:
        """A top-level call on the main thread lasted at least ``long_op_ns``."""
        self.windows.long_op_done(name_id)

    def thread_states(self) -> list[annotate.ThreadState]:
        with self._states_lock:
            return list(self._states)

    @property
    def writer(self) -> Any:
        return self._writer

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return annotate._active is self

    def start(self) -> Session:
        """Start recording: collectors, the trace writer, the windows. Raises RLScopeError when it cannot.

        The threads it starts (writer, window timer, NVML sampler, signal relay) block the program's
        signals (rlscope/runtime/child_signal.py): a Ctrl-C or SIGTERM reaches the program's main
        thread, never one of rlscope's, which would leave it pending while the main thread waits.
        """
        from rlscope.runtime import child_signal

        with child_signal.signals_kept_from_new_threads():
            return self._start()

    def _start(self) -> Session:
        if annotate._active is not None:
            raise RLScopeError("an rlscope session is already active in this process")
        from rlscope.trace.writer import TraceWriter  # imports pyarrow: only when profiling

        # the C scope methods (built on first use, cached): a scope pair costs a fraction of Python's
        self.scope_recorder = scope_native.install()
        # the directory is rlscope's (or new), and its shared lock keeps a run from replacing it
        self._lock = ownership.join(self.trace_dir)
        try:
            self.process_dir = ownership.new_process_dir(self.trace_dir, os.getpid())
        except OSError as e:
            self._release_lock()
            raise RLScopeError(f"cannot write trace to {self.trace_dir}: {e.strerror or e}") from None
        start_ns = self.clock()
        self.windows.origin_ns = (
            detail_schedule.origin_ns(start_ns) if self.clock is time.perf_counter_ns else start_ns
        )
        # read next to start_ns: the pair maps this process's clock onto every other's; read after
        # the metadata's package lookups (milliseconds, tens under load in a fresh interpreter), it
        # shifted a short-lived pool worker's session past its parent's end
        unix_ns = time.time_ns()
        self._pid = os.getpid()
        metadata = process_metadata(self.options, self.windows.origin_ns, start_ns, unix_ns)
        if hooks.RUN_TRACE_DIR_ENV in os.environ:  # under `rlscope run`: this process's children are its
            os.environ[hooks.RUN_PARENT_ENV] = str(self._pid)
        from rlscope.overhead.correct import calibration

        # the residual per-event costs travel inside the trace: analyzed anywhere, same figures
        embedded = calibration.for_trace_metadata(metadata)
        if embedded is not None:
            metadata[calibration.METADATA_KEY] = embedded
        try:
            self._writer = TraceWriter(
                self.process_dir,
                metadata,
                annotate._names,
                flush_interval=self.options["flush_interval"],
                clock=self.clock,
                events=scope_native.event_buffer() if self.scope_recorder == "native" else None,
                auto_ids=annotate.auto_ids,
                detail=self.windows.detail,
                origin_ns=self.windows.origin_ns,
                main_thread=threading.get_native_id(),  # the thread that sets main_tid below
            )
        except OSError as e:
            self._release_lock()
            raise RLScopeError(f"cannot write trace to {self.process_dir}: {e.strerror or e}") from None
        self.events = self._writer.events
        annotate._active = self
        torch_before = "torch" in sys.modules  # before the collectors import it (twin.add_points)
        from rlscope.collectors.registry import start_collectors

        self._collectors = start_collectors(self)  # a collector that cannot start warns and is skipped
        # the run starts once collectors are up: their start-up (importing torch) is not the job's time
        self.main_tid = threading.get_native_id()
        # the machine's Python speed now (overhead/correct/reference.py: ``parent`` of the start, window and
        # end rows), taken before the run starts: the analysis prices rlscope's Python at the run's speed
        speed = reference.session_sample_ps()
        self.events.append((self.clock(), self.main_tid, S.SESSION_START, -1, speed, -1, 0))
        self._main_state = self.thread_state()
        self.windows.start(self._collectors, switch=self.options["windows"])
        scope_native.bind_lean(self)
        if self.options["auto_ops"]:  # after the lean path is bound: they ask it for the ops open
            from rlscope.runtime import adapters, auto_ops

            auto_ops.start(self)
            adapters.apply_when_imported()  # the libraries' phases, once each library is imported
        self.ticks.turn = turn = hooks.current_turn()
        if turn is not None and torch_before:
            turn.add_points(self)
        self.ticks.sync()
        atexit.register(self.stop_at_exit)
        waits.install()  # worker loops' receives are waits, not work (rlscope/runtime/waits.py)
        if not self._mp_hooked:
            self._mp_hooked = True
            _imports.when_imported(
                "multiprocessing.util", lambda util: process_exit.hook_multiprocessing(self, util)
            )
        return self

    def add_toggler(self, collector: Any) -> None:
        """A collector started after the session (on torch's import) joins the windows."""
        if self.options["windows"] and hasattr(collector, "set_enabled"):
            self.windows.add_toggler(collector)

    def stop(self, *, signal: int = 0) -> None:
        """Close open scopes (flagged), stop collectors and flush everything to disk. Idempotent.

        ``signal``: the signal that ends the process (its parent terminated it); recorded in the
        session's end event, so the analysis tells it from a crash.
        """
        if self._writer is None or os.getpid() != self._pid or self._stopping:
            return
        self._stopping = True
        turn = self.ticks.turn
        if turn is not None:  # its wrapper is on top of the backend collector's: off first
            turn.remove_points()
        try:
            self._stop(signal)
        finally:
            self._stopping = False
            if turn is not None and not signal:  # a twin run: the partner runs its last stretch now
                turn.release()
        pending, self._pending_signal = self._pending_signal, 0
        if pending:  # the parent's SIGTERM came while stopping: end as it asked, now that all is on disk
            os.kill(os.getpid(), pending)

    def _stop(self, signal: int) -> None:
        # the run ends now: the collectors' last buffers, and any flush before the end row, are rlscope's time
        assert self._writer is not None
        end_ns = self._writer.session_ends()
        self.windows.stop()
        if self.options["auto_ops"]:  # no automatic boundary after this; what is open closes below
            from rlscope.runtime import auto_ops

            auto_ops.stop()
        for col in reversed(self._collectors):
            try:
                col.stop()
            except Exception as e:  # a collector failing must not lose the trace
                warnings.warn(f"rlscope: collector {col!r} failed to stop: {printable(e)}", stacklevel=2)
        self._collectors.clear()
        with self._states_lock:
            states = list(self._states)
        annotate.close_all(self, states, end_ns)
        # id: the signal that ended the process (-1: the session ended normally); parent: the
        # machine's Python speed, timed after the run's end (rlscope/overhead/correct/reference.py)
        speed = reference.session_sample_ps() if not signal else -1
        end = (end_ns, threading.get_native_id(), S.SESSION_END, signal or -1, speed, -1, 0)
        self.events.append(end)
        if annotate._active is self:
            annotate._active = None
        scope_native.unbind_lean(self)
        scope_native.forget_thread()  # the C methods' cached references to this session (this thread's)
        self.nvtx_push = self.nvtx_pop = None
        self.ticks.clear()
        writer, self._writer = self._writer, None
        writer.close()
        end_facts(self.process_dir)
        self._release_lock()
        atexit.unregister(self.stop_at_exit)

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def stop_at_exit(self) -> None:
        """stop() from an exit hook (atexit, a multiprocessing finalizer): warns once, never raises."""
        try:
            self.stop()
        except Exception as e:
            warn_once(f"the end of this process's trace may be lost: {e!r}")

    def __enter__(self) -> Session:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _restart_in_child(self) -> None:
        """After fork: the parent's writer thread did not survive; start this process's own."""
        scope_native.unbind_lean(self)  # the parent's buffer: nothing of the child's goes there
        self._writer = None
        # the parent's lock stays the parent's (the inherited descriptor is left open: closing a copy
        # would not release it); this process takes its own as its session starts
        self._lock = None
        self.events = None
        self._collectors = []
        self._tls = threading.local()
        self._states = []
        self._states_lock = threading.RLock()
        self._stopping, self._pending_signal = False, 0
        # the parent's window timer did not survive the fork; its lock may have been held then
        self.windows.after_fork()
        # the parent's GPU collectors (Kineto rotation, NVTX) belong to the parent process
        self.ticks.clear()
        self.nvtx_push = self.nvtx_pop = None
        self.long_ops, self.long_op_ns = {}, NEVER
        # no GPU tracing in a forked child: CUDA cannot run in a child of a process that initialized it,
        # and the parent's CUPTI and NVML state (their threads, their locks) did not survive the fork;
        # starting them again hung the forked workers of torch.compile's compile pool on a GPU
        self.options = {**self.options, "gpu": False}
        annotate._active = None
        try:
            self.start()
        except RLScopeError as e:
            warnings.warn(f"rlscope: not profiling forked child {os.getpid()}: {printable(e)}", stacklevel=1)
            return
        from rlscope.runtime import child_signal

        # when its parent ends it with SIGTERM, flush first (where SIGTERM has its default action)
        child_signal.end_cleanly_on_sigterm(self)


def profile(trace_dir: str | os.PathLike[str] = "rlscope-trace", **options: Any) -> Session | RunSession:
    """A profiling session writing to ``trace_dir``: ``with rlscope.profile("trace"):`` or ``.start()``.

    Options: ``flush_interval`` (s, default 1.0), ``backend`` (record time in PyTorch ops, default
    True), ``gpu`` ("auto", "kineto", "cupti" or False), ``nvtx`` (default False: every scope also an
    NVTX range, for Nsight Systems, while the GPU is traced), ``nvml_hz``,
    ``windows`` (default True: switch backend-op recording and GPU tracing off in every other
    window of ``window_s`` seconds on average, default 0.1, so their cost is measured in this very
    run; ``full_share``, default 0.5, is the share of the time they are on;
    rlscope/overhead/correct/windows.py), ``auto_ops`` (default False; on under ``rlscope run``:
    record ``simulation``, ``inference`` and ``backprop`` and the library adapters' phases in code
    without scopes, rlscope/runtime/auto_ops.py, docs/automatic-operations.md), ``detail`` (when
    every event is kept, rlscope/trace/detail.py), ``stack_hz`` (default 0; 100 under ``rlscope run``:
    Python stack samples a second, which break ``[unannotated]`` and Python time down by source line,
    collectors/stacks.py).
    """
    mode = os.environ.get(hooks.MODE_ENV)  # a run of `rlscope validate`: off | timers | profile
    factory = hooks.mode_session() if mode else None
    if factory is not None:
        return factory(mode, trace_dir, options)
    if mode:
        warn_once(f"{hooks.MODE_ENV}={mode!r} is set outside a run of rlscope validate: profiling")
    run = annotate._active
    if run is not None and os.environ.get(hooks.RUN_TRACE_DIR_ENV):
        return RunSession(run, trace_dir)
    return Session(trace_dir, **options)


def active_session() -> Session | None:
    return annotate._active


def _after_fork_in_child() -> None:
    s = annotate._active
    if s is not None:
        s._restart_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
