"""The profiling session: owns the trace writer and the collectors for one process.

``rlscope.profile(trace_dir)`` is a context manager and has ``start()``/``stop()``. Each process
writes its own subdirectory ``process-<pid>`` of ``trace_dir``; a forked child that inherits an
active session starts its own.

Every way a process can end normally flushes its session: ``atexit`` for an interpreter that exits
(spawned children included: ``spawn_main`` ends with ``sys.exit``), a ``multiprocessing`` finalizer
for multiprocessing children, which leave through ``os._exit`` (see :meth:`Session._hook_multiprocessing`),
and, under ``rlscope run`` (every process of the run, the first included) and in forked children, a
handler for the SIGTERM or SIGHUP that ends the process: ``rlscope run`` forwarding a signal, a parent
ending its children (``Pool.terminate``, ``with Pool(...)``, daemonic children at the parent's exit).
Only a signal still at its default action is taken: a program's own handler stays in charge, and its
normal exit flushes the trace (rlscope/runtime/child_signal.py).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import random
import socket
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from rlscope import _imports, annotate, categories
from rlscope._version import __version__
from rlscope._version import package_version as _package_version
from rlscope.errors import RLScopeError, warn_once
from rlscope.overhead.correct import reference
from rlscope.runtime import hooks
from rlscope.text import printable
from rlscope.trace import detail as detail_schedule
from rlscope.trace import ownership
from rlscope.trace import schema as S
from rlscope.trace.detail import DetailSchedule


def _rank() -> str:
    for var in ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if var in os.environ:
            return os.environ[var]
    return ""


def stack_info() -> dict[str, str]:
    """Machine and CUDA facts that key overhead calibrations (correct/calibration.py); no torch import."""
    import platform

    from rlscope.overhead.correct.calibration import cpu_model, gpu_model, torch_cuda_version

    return {
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "gpu": gpu_model(),
        "cuda": torch_cuda_version(),
    }


_NEVER = 2**63 - 1
SWITCH_BUDGET = 0.03  # the windows' switches take at most this share of the run (Session.window_length_ns)
MAX_WINDOW_SCALE = 50.0  # and windows grow at most this much for it (5 s with the default 0.1 s)
# each window's length is random, WINDOW_FLOOR of its nominal length plus an exponential share of
# the rest (mean kept, at most WINDOW_CAP times it): windows of fixed length lock onto a loop's
# period (Session.window_length_ns); False: fixed lengths
WINDOW_RANDOM = True
WINDOW_FLOOR = 0.3
WINDOW_CAP = 4.0
# a top-level operation on the main thread that lasted at least this share of a window is "long":
# its next call starts in the other kind of window (Session.long_op_entry)
LONG_OP_SHARE = 0.5
# the window timer (Session.switch_on_schedule): a window due for this share of its length that no
# scope exit on the main thread has switched is switched by the timer, when no operation is open on
# the main thread; while one is, the timer looks again this often
TIMER_GRACE = 0.1
TIMER_BUSY_POLL_S = 0.05
# the shared window grid of a distributed job (SharedWindows): a pair of windows lasts at least this
SHARED_PAIR_S = 1.0
COLLECTIVES_ENV = "RLSCOPE_COLLECTIVES"  # 0: leave torch's flight recorder alone (collectors/collectives.py)
SHARED_WINDOWS_ENV = "RLSCOPE_SHARED_WINDOWS"  # 1: every process on the host follows one grid; 0: off


class SharedWindows:
    """One window schedule for every process of a distributed job on a host: a function of the time.

    Why: a collective (NCCL's all-reduce under DDP) takes as long as its rank waits for the others.
    With windows of its own, a rank slowed by its full window arrives late and waits less, so the
    collectives recorded in full windows were 2-5x shorter than those in light windows (two H100
    ranks, CUDA events around each all-reduce), and no scaling from the full windows could recover
    the run's NCCL time. With every rank in the same kind of window at the same time, the ranks are
    slowed alike and the waits recorded in full windows are the run's.

    The time axis (the host's monotonic clock, which every process reads alike) is cut into slots
    of one pair's length; slot ``k`` is full where ``(x + r_k) mod 1 < full_share``, ``x`` the
    position within the slot and ``r_k`` a hash of ``k``. So each process computes the same modes
    with nothing shared but the clock, and a loop of any period finds each of its calls in a full
    window with probability ``full_share``, independently from slot to slot (as the random
    lengths of a process's own windows do).
    """

    def __init__(self, pair_ns: int, full_share: float) -> None:
        self.pair_ns = max(1, int(pair_ns))
        self.full_share = full_share

    @staticmethod
    def _offset(k: int) -> float:
        """A uniform draw in [0, 1) for slot ``k`` (splitmix64: the same in every process)."""
        z = (k * 0x9E3779B97F4A7C15 + 0x726C73) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return ((z ^ (z >> 31)) >> 11) / float(1 << 53)

    def mode_at(self, t: int) -> int:
        k, rest = divmod(t, self.pair_ns)
        y = (rest / self.pair_ns + self._offset(k)) % 1.0
        return S.WINDOW_FULL if y < self.full_share else S.WINDOW_LIGHT

    def next_change(self, t: int) -> int:
        """The first time after ``t`` at which the mode may change (a switch point or a slot's end)."""
        k = t // self.pair_ns
        r = self._offset(k)
        start = k * self.pair_ns
        points = ((self.full_share - r) % 1.0, (1.0 - r) % 1.0)
        later = [start + int(x * self.pair_ns) for x in points if start + int(x * self.pair_ns) > t]
        return min([*later, start + self.pair_ns])


def shared_windows_wanted() -> bool:
    """Whether this process follows the host's shared window grid: set by RLSCOPE_SHARED_WINDOWS, else
    in a rank of a distributed job (torchrun and torch.distributed's launchers set WORLD_SIZE)."""
    forced = os.environ.get(SHARED_WINDOWS_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _due(name: str) -> property:
    """A session attribute the boundaries compare with at every scope exit, mirrored into the C
    globals of the lean scope path while the session is bound to it (collectors/scope_native.c), so
    a boundary there reads an int instead of the session's dictionary. The value stays in the
    instance dictionary under its own name: the full C path reads it there."""

    def get(self: Session) -> int:
        return self.__dict__[name]

    def set_(self: Session, value: int) -> None:
        d = self.__dict__
        d[name] = value
        if self._lean is not None:
            self._lean.set_due(d["window_due_ns"], d["tick_due_ns"], d["long_op_ns"])

    return property(get, set_)


class Session:
    """One profiling session of this process. Use through :func:`rlscope.profile`."""

    # read by the scope boundaries (annotate.py; the C lean path through set_due)
    window_due_ns = _due("window_due_ns")
    tick_due_ns = _due("tick_due_ns")
    long_op_ns = _due("long_op_ns")

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
    ) -> None:
        if flush_interval <= 0:
            raise RLScopeError(f"flush_interval must be > 0, got {flush_interval}")
        if gpu not in (False, None, "off", "auto", "cupti", "kineto"):
            raise RLScopeError(f"gpu must be one of auto, cupti, kineto or False, got {gpu!r}")
        if window_s <= 0:
            raise RLScopeError(f"window_s must be > 0, got {window_s}")
        if not 0 < full_share < 1:
            raise RLScopeError(f"full_share must be between 0 and 1, got {full_share}")
        if nvml_hz < 0:
            raise RLScopeError(f"nvml_hz must be >= 0 (0: no NVML sampling), got {nvml_hz}")
        self.trace_dir = Path(trace_dir)
        # when full event detail is kept (rlscope/trace/detail.py); with windows off, for the whole run
        self._detail = DetailSchedule.parse(detail if windows else "all")
        self._origin_ns = 0  # the schedule's origin on the session's clock, set at start
        self._lean: Any = None  # the C scope module while bound to its lean path (start to stop)
        self.options: dict[str, Any] = {
            "flush_interval": flush_interval,
            "backend": backend,
            "gpu": gpu,
            "nvtx": nvtx,
            "nvml_hz": nvml_hz,
            "windows": bool(windows),
            "window_s": window_s,
            "full_share": full_share,
            "auto_ops": bool(auto_ops),
            "detail": self._detail.to_env(),
        }
        self.nvtx_push: Any = None  # set when NVTX ranges are on (see _start_nvtx)
        self.nvtx_pop: Any = None
        # a collector's periodic work on the session's own thread (Kineto cycles), run at scope exits
        self.tick_due_ns = _NEVER  # the earliest of the ticker's and a twin run's turn
        self._ticker: Any = None
        self._tick_every_ns = 0
        self._ticker_due_ns = _NEVER
        self._turn: Any = None  # a twin run of rlscope validate: its turns (overhead/validate/twin.py)
        # alternating windows (docs/overhead.md): checked at scope exits on the main thread
        self.window_due_ns = _NEVER
        self.main_tid = -1
        self._window_mode = S.WINDOW_FULL
        # a pair of windows lasts 2 * window_s; full_share of it has every collector on (less
        # raw slowdown with a smaller share, fewer samples of categories and GPU work)
        self._window_ns = {
            S.WINDOW_FULL: int(2 * window_s * full_share * 1e9),
            S.WINDOW_LIGHT: int(2 * window_s * (1 - full_share) * 1e9),
        }
        self._togglers: list[Any] = []
        # togglers that joined while the collectors were starting, before the windows did
        # (a collector that starts on torch's import, with torch already imported)
        self._early_togglers: list[Any] = []
        self._windows_started = False
        self._switch_ns = {S.WINDOW_FULL: 0, S.WINDOW_LIGHT: 0}  # the last switch into each mode took
        # the window timer's thread (Session.switch_on_schedule), its stop flag, and the lock that
        # keeps its switches and the main thread's apart; the main thread's state (its open operations)
        self._timer: threading.Thread | None = None
        self._timer_stop = threading.Event()
        self._switch_lock = threading.RLock()  # reentrant: a collector switched may import torch
        self._finish_due: int | None = None  # a light window the timer began: the window's real due
        self._window_began_ns = 0  # when the current window began (the last switch)
        self._main_state: annotate.ThreadState | None = None
        self.timer_due_ns = _NEVER  # when the timer may switch the current window (switch_on_schedule)
        # long top-level operations (name id -> the window kind their last call ran in), read at
        # scope entries; the threshold, read at scope exits; the main thread's open top-level op's start
        self.long_ops: dict[int, int] = {}
        self.long_op_ns = _NEVER
        self.top_begin_ns = 0
        self._jitter = random.Random(0x726C73)  # seeded: a run's windows are the same each time
        # a distributed job's processes share one grid of windows (SharedWindows); None: own windows
        pair_ns = int(max(2 * window_s, SHARED_PAIR_S) * 1e9)
        self._shared = SharedWindows(pair_ns, full_share) if shared_windows_wanted() else None
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

    def set_ticker(self, fn: Any, every_ns: int) -> None:
        """Run ``fn`` at the first scope exit after every ``every_ns`` (see annotate._Scope.__exit__)."""
        self._ticker, self._tick_every_ns = fn, every_ns
        self._ticker_due_ns = self.clock() + every_ns
        self._sync_tick()

    def run_tick(self, now: int) -> None:
        """At a scope exit once ``tick_due_ns`` has passed: a twin run's turn, the ticker's work."""
        turn = self._turn
        if turn is not None and now >= turn.due_ns and turn.ready(now):
            # waiting for the twin is rlscope's time: the analyzer removes it from the job's
            annotate.category_enter(self, categories.PROFILER)
            try:
                waited = turn.hand_over(now)
            finally:
                annotate.category_exit(self, categories.PROFILER)
            self._after_wait(now, waited)
        if self._ticker is not None and now >= self._ticker_due_ns:
            self._ticker_due_ns = now + self._tick_every_ns
            annotate.category_enter(self, categories.PROFILER)  # rlscope's time, reported as such
            try:
                self._ticker()
            except Exception as e:  # never break the user's job
                self._ticker, self._ticker_due_ns = None, _NEVER
                print(
                    f"rlscope: warning: periodic collector work failed, stopped: {printable(e)}",
                    file=sys.stderr,
                )
            finally:
                annotate.category_exit(self, categories.PROFILER)
        self._sync_tick()

    def _after_wait(self, start: int, waited: int) -> None:
        """A window holds the same share of the job's own time: its due moves by the part of a twin
        wait (from ``start``, ``waited`` ns) that fell inside it.

        Why only that part: the window timer may switch during a long wait (the partner catching
        up at the start of a run: 3.5 s on an H200), and the window it begins then holds none of
        the job's time yet. Moved by the whole wait, that window lasted the wait again, and a
        2,000-step loop ran in one full window.
        """
        with self._switch_lock:
            if self.window_due_ns == _NEVER:
                return
            shift = start + waited - max(start, self._window_began_ns)
            self.timer_due_ns += shift
            if self._finish_due is not None:  # a light window the timer began: due 0 until finished
                self._finish_due += shift
            else:
                self.window_due_ns += shift

    def _sync_tick(self) -> None:
        turn = self._turn
        self.tick_due_ns = min(self._ticker_due_ns, turn.due_ns if turn is not None else _NEVER)

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

    def _metadata(self, start_ns: int, unix_ns: int) -> dict[str, str]:
        from rlscope.collectors import scope_native

        return {
            "rlscope.version": __version__,
            "host": socket.gethostname(),
            "pid": str(os.getpid()),
            "ppid": str(os.getppid()),
            # the profiled process that started this one, whatever became of it: a helper spawned
            # just before its parent exits reads ppid 1 (rlscope.trace.reader.parent_pid)
            "run_parent": os.environ.get(RUN_PARENT_ENV, ""),
            "rank": _rank(),
            # torchrun / torch.distributed: which rank of how many (rlscope.analysis.roles labels ranks)
            **{k.lower(): os.environ[k] for k in ("LOCAL_RANK", "WORLD_SIZE") if k in os.environ},
            "python": sys.version.split()[0],
            "torch": _package_version("torch"),
            **stack_info(),
            "gymnasium": _package_version("gymnasium"),
            "clock": "perf_counter_ns",
            # native | python: the scope methods a session here runs (a calibration key field)
            "scopes": scope_native.calibration_key(),
            "clock_anchor_ns": str(start_ns),
            "clock_anchor_unix_ns": str(unix_ns),
            "argv": json.dumps(sys.argv),
            "options": json.dumps(self.options),
            # the detail schedule's origin (rlscope/trace/detail.py), on the events' clock
            "detail_origin_ns": str(self._origin_ns),
        }

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
        from rlscope.collectors import scope_native
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
        self._origin_ns = (
            detail_schedule.origin_ns(start_ns) if self.clock is time.perf_counter_ns else start_ns
        )
        # read next to start_ns: the pair maps this process's clock onto every other's; read after
        # the metadata's package lookups (milliseconds, tens under load in a fresh interpreter), it
        # shifted a short-lived pool worker's session past its parent's end
        unix_ns = time.time_ns()
        self._pid = os.getpid()
        metadata = self._metadata(start_ns, unix_ns)
        if RUN_TRACE_DIR_ENV in os.environ:  # under `rlscope run`: this process's children are its
            os.environ[RUN_PARENT_ENV] = str(self._pid)
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
                detail=self._detail,
                origin_ns=self._origin_ns,
                main_thread=threading.get_native_id(),  # the thread that sets main_tid below
            )
        except OSError as e:
            self._release_lock()
            raise RLScopeError(f"cannot write trace to {self.process_dir}: {e.strerror or e}") from None
        self.events = self._writer.events
        annotate._active = self
        self._windows_started, self._early_togglers = False, []  # a forked child starts them again
        torch_before = "torch" in sys.modules  # before the collectors import it (twin.add_points)
        self._start_collectors()
        # the run starts once collectors are up: their start-up (importing torch) is not the job's time
        self.main_tid = threading.get_native_id()
        # the machine's Python speed now (overhead/correct/reference.py: ``parent`` of the start, window and
        # end rows), taken before the run starts: the analysis prices rlscope's Python at the run's speed
        speed = reference.session_sample_ps()
        self.events.append((self.clock(), self.main_tid, S.SESSION_START, -1, speed, -1, 0))
        self._main_state = self.thread_state()
        self._start_windows()
        self._bind_lean(scope_native)
        if self.options["auto_ops"]:  # after the lean path is bound: they ask it for the ops open
            from rlscope.runtime import adapters, auto_ops

            auto_ops.start(self)
            adapters.apply_when_imported()  # the libraries' phases, once each library is imported
        self._turn = hooks.current_turn()
        if self._turn is not None and torch_before:
            self._turn.add_points(self)
        self._sync_tick()
        atexit.register(self._stop_at_exit)
        if not self._mp_hooked:
            self._mp_hooked = True
            _imports.when_imported("multiprocessing.util", self._hook_multiprocessing)
        return self

    def _bind_lean(self, scope_native: Any) -> None:
        """Boundaries take the C lean path from here on (collectors/scope_native.c): this session's
        per-thread stacks, instance ids and due times held in C. Needs the native methods and
        their event buffer; the clock is the one set now (a test's fake clock is called from C)."""
        lean = scope_native.bind(self)
        if lean is None:
            return
        self._lean = lean
        annotate._lean, annotate._lean_session = lean, self
        if self.nvtx_push is not None:
            lean.set_nvtx(self.nvtx_push, self.nvtx_pop)

    def _unbind_lean(self) -> None:
        if self._lean is None:
            return
        self._lean.unbind()
        self._lean = None
        if annotate._lean_session is self:
            annotate._lean, annotate._lean_session = None, None
        self.ids = itertools.count()

    def _start_collectors(self) -> None:
        """Turn on optional collectors; a collector that cannot start warns and is skipped."""
        backend = None
        if self.options["backend"]:
            from rlscope.collectors import torch_ops

            backend = torch_ops.start(self)
            if backend is not None:
                self._collectors.append(backend)
        from rlscope.collectors.gpu import start_gpu_collectors

        gpu_collectors = start_gpu_collectors(self)
        self._collectors.extend(gpu_collectors)
        # each backward() call on its thread: whose GPU work the engine's threads launch, and the
        # boundaries that cut a long update into pieces the windows compare (overhead/correct/pieces.py)
        if gpu_collectors or backend is not None:
            from rlscope.collectors.autograd_calls import AutogradCalls

            self._collectors.append(AutogradCalls(self).start())
        if os.environ.get(COLLECTIVES_ENV, "1") != "0":  # torch.distributed's collectives, every one
            from rlscope.collectors.collectives import CollectiveRecorder

            self._collectors.append(CollectiveRecorder(self).start())
        from rlscope.collectors.gpu_memory import MemoryRecorder  # allocator events, once torch is imported

        self._collectors.append(MemoryRecorder(self).start())
        # NVTX ranges are off by default: the analysis never reads them, Nsight cannot trace a process
        # rlscope's own CUPTI subscriber holds, and they cost each scope ~1.2 us (H200, a scope pair
        # timed with and without them), paid in light windows too, where the windows cannot see it
        if gpu_collectors and self.options["nvtx"]:
            _imports.when_imported("torch", self._start_nvtx)

    def _start_windows(self) -> None:
        """Alternate windows with and without the expensive collectors (docs/overhead.md)."""
        self._togglers = [c for c in self._collectors if hasattr(c, "set_enabled")] + self._early_togglers
        self._early_togglers = []
        self._windows_started = True
        self._window_mode = S.WINDOW_FULL
        self.events.append((self.clock(), self.main_tid, S.WINDOW, S.WINDOW_FULL, -1, -1, 0))
        if self.options["windows"] and self._togglers:
            # the run starts in a light window: a loop's first calls are its cold ones (CUDA
            # modules loaded, libraries set up), and in a full window the windows remove only a
            # typical call's excess from them (PPO-GPU on an H100: the first backprop took 15-17 ms
            # in a full window, 6 ms in a light one, 5-7 ms typically)
            self.switch_window()

    def add_toggler(self, collector: Any) -> None:
        """A collector started after the session (on torch's import) joins the windows."""
        if self.options["windows"] and hasattr(collector, "set_enabled"):
            if not self._windows_started:  # _start_windows takes it with the others
                self._early_togglers.append(collector)
                return
            self._togglers.append(collector)
            if self.window_due_ns != _NEVER:  # windows under way: join the current one
                collector.set_enabled(self._window_mode == S.WINDOW_FULL)
            elif self._window_mode == S.WINDOW_FULL:
                self.switch_window()  # the first expensive collector: a light window first, as at start
            else:  # every earlier one was dropped in a light window: the windows go on from it
                collector.set_enabled(False)
                self._schedule(S.WINDOW_LIGHT, self.clock())

    def switch_window(self) -> None:
        """Switch the expensive collectors on or off; called by a scope exit on the main thread.

        The switch's own cost is marked as rlscope's time (removed by the analyzer); the WINDOW
        event is written after it, so the segments it splits are the job's. Right after the window
        timer began a light window, the first such exit finishes that switch instead
        (:meth:`_finish_off_main`).
        """
        with self._switch_lock:
            if self._finish_due is not None:
                self._finish_off_main()
                return
            self._switch(on_main=True)

    def _finish_off_main(self) -> None:
        """On the main thread: what a collector leaves undone when the timer switched it off on its
        own thread (CUPTI detached: collectors/cupti_native.py), then the window's schedule again."""
        due, self._finish_due = self._finish_due, None
        annotate.category_enter(self, categories.PROFILER)  # rlscope's time, removed like a switch
        for col in list(self._togglers):
            finish = getattr(col, "finish_off_main", None)
            if finish is not None:
                try:
                    finish()
                except Exception as e:  # never break the user's job: the light window costs more
                    print(
                        f"rlscope: warning: cannot finish switching {col!r}: {printable(e)}", file=sys.stderr
                    )
        annotate.category_exit(self, categories.PROFILER)
        self.window_due_ns = due

    def _switch(self, on_main: bool) -> None:
        """The switch itself, under the switch lock; ``on_main``: on the main thread (a scope exit),
        else on the window timer's (:meth:`switch_on_schedule`)."""
        t0 = self.clock()
        mode = S.WINDOW_LIGHT if self._window_mode == S.WINDOW_FULL else S.WINDOW_FULL
        if self._shared is not None and self.window_due_ns != _NEVER:  # windows under way: the grid's
            mode = self._shared.mode_at(t0)
        if not self._in_detail(t0):  # only aggregates are kept: the collectors stay off
            mode = S.WINDOW_LIGHT
        if mode == self._window_mode and self.window_due_ns != _NEVER:
            self._schedule(mode, t0)  # due, but this kind of window goes on: look again later
            return
        if on_main:
            annotate.category_enter(self, categories.PROFILER)
        on = mode == S.WINDOW_FULL
        for col in list(self._togglers):  # a failing one is dropped while iterating
            try:
                # off the main thread, a collector may switch in a way safe beside the job's calls
                switch = col.set_enabled if on_main else getattr(col, "set_enabled_off_main", col.set_enabled)
                switch(on)
            except Exception as e:  # never break the user's job: this collector stays as it is
                self._togglers.remove(col)
                print(f"rlscope: warning: cannot switch {col!r}: {printable(e)}", file=sys.stderr)
        self._window_mode = mode
        if on_main:
            speed = reference.session_sample_ps()  # ~0.15 ms, rlscope's time like the switch
            annotate.category_exit(self, categories.PROFILER)
        else:  # timed beside the running job, the sample would time the job's hold of the GIL
            speed = -1
        now = self.clock()
        # the timer's switch is a row on its own thread: rows of the main thread stay in time order
        thread = self.main_tid if on_main else threading.get_native_id()
        self.events.append((now, thread, S.WINDOW, mode, speed, -1, 0))
        self._switch_ns[mode] = now - t0
        self._window_began_ns = now
        self._finish_due = None
        self._schedule(mode, now)
        if not on_main and not on and any(hasattr(c, "finish_off_main") for c in self._togglers):
            # the next scope exit on the main thread finishes the switch, then the schedule resumes
            self._finish_due, self.window_due_ns = self.window_due_ns, 0

    def main_thread_in_operation(self) -> bool:
        """Whether an operation is open on the main thread now (either scope path)."""
        if self._lean is not None:
            return self._lean.open_ops(self.main_tid) > 0
        return bool(self._main_state is not None and self._main_state.ops)

    def _overdue(self, now: int) -> bool:
        """Whether this running session's window is past the timer's grace at ``now``."""
        due = max(self.timer_due_ns, self.window_due_ns)
        return annotate._active is self and not self._stopping and now >= due

    def switch_on_schedule(self, now: int) -> bool:
        """The window timer's check: switch a window due since TIMER_GRACE of its length that no
        scope exit switched, unless an operation is open on the main thread. Returns whether it switched.

        Why: switches come at the main thread's scope exits, so a program without scopes (or its
        start-up before the first one: importing torch, NCCL's set-up in a DDP rank, a torchrun
        agent) stayed in its first, light window for good, its backend ops and GPU work never
        recorded. An open operation is left to the main thread, which switches at the operation's
        exit or at its next ``backward()`` return (:meth:`switch_at_engine_return`): a switch from
        this thread would cut it at an arbitrary point, where no boundary marks the pieces.
        """
        if not self._overdue(now):
            return False
        with self._switch_lock:
            now = self.clock()
            if now < max(self.timer_due_ns, self.window_due_ns) or self.main_thread_in_operation():
                return False  # the main thread switched meanwhile, or holds an operation open
            self._switch(on_main=False)
            return True

    def switch_at_engine_return(self, now: int) -> None:
        """A ``backward()`` call returned on the main thread at ``now`` inside an open operation:
        switch the window the timer would have switched by now (TIMER_GRACE past due), had no
        operation been open (collectors/autograd_calls.py calls this).

        Why: a long update with no scope inside (SB3 PPO's ``train``: 1-5 s, a thousand
        ``backward()`` calls) otherwise lies whole in one window, so its pieces
        (overhead/correct/pieces.py) compared one call with another, which differ by their place in
        the run too (cpu-vm: ``train`` +9-11% over the timed runs). Switched between its
        ``backward()`` calls, its pieces have both kinds of window in every call and pair like a
        loop's operations. A call shorter than the grace (a rollout step's update of a few ms) is
        not cut: it only meets a switch it began less than TIMER_GRACE of a window before.
        """
        if not self._overdue(now):
            return
        if self.main_thread_in_operation():  # else the timer switches (switch_on_schedule)
            self.switch_window()

    def _start_window_timer(self) -> None:
        """The window timer's thread; only on the real clock (a test's fake clock calls
        :meth:`switch_on_schedule` itself, deterministically) and in the process that runs the
        session (a forked child starts its own)."""
        if self.clock is not time.perf_counter_ns or annotate._active is not self or os.getpid() != self._pid:
            return
        from rlscope.runtime import child_signal

        self._timer_stop = threading.Event()
        self._timer = threading.Thread(target=self._window_timer, name="rlscope-windows", daemon=True)
        with child_signal.signals_kept_from_new_threads():  # started later than start(), so again here
            self._timer.start()

    def _window_timer(self) -> None:
        stop = self._timer_stop
        try:
            while not stop.is_set():
                due = max(self.timer_due_ns, self.window_due_ns)
                if due >= _NEVER:  # every collector was dropped: nothing to switch
                    stop.wait(1.0)
                    continue
                wait_ns = due - self.clock()
                if wait_ns > 0:
                    stop.wait(min(wait_ns / 1e9, 1.0))
                elif not self.switch_on_schedule(self.clock()):
                    stop.wait(TIMER_BUSY_POLL_S)
        except Exception as e:  # never break the user's job: windows go on at scope exits
            print(f"rlscope: warning: window timer stopped: {printable(e)}", file=sys.stderr)

    def _stop_window_timer(self) -> None:
        self._timer_stop.set()
        timer, self._timer = self._timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.join(timeout=5.0)

    def _schedule(self, mode: int, now: int) -> None:
        """When the window of ``mode`` starting ``now`` ends, and how long a call in it is a long
        one (LONG_OP_SHARE of its nominal length); never, with no collector left to switch."""
        if not self._togglers:
            self.window_due_ns = self.long_op_ns = self.timer_due_ns = _NEVER
            return
        if self._shared is not None:
            due = self._shared.next_change(now)
            grace = int(TIMER_GRACE * self._shared.pair_ns / 2)
        else:
            length = self.window_length_ns(mode)
            due, grace = now + length, int(length * TIMER_GRACE)
        change = self._detail_change(now)
        if not self._in_detail(now):  # collectors off until the next detail stretch begins
            due = change
        elif mode == S.WINDOW_FULL:  # a full window ends with the stretch: none runs past its cut
            due = min(due, change)
        self.window_due_ns = due
        self.timer_due_ns = min(_NEVER, due + grace)
        if self._timer is None:  # the first window with a collector to switch
            self._start_window_timer()
        self.long_op_ns = min(_NEVER, int(LONG_OP_SHARE * self._window_ns[mode] * self._window_scale()))

    def _in_detail(self, now: int) -> bool:
        """Whether ``now`` lies in a detail stretch of the run (rlscope/trace/detail.py). A schedule
        of iterations is followed by the writer, which counts them as it folds the events: the
        collectors follow it a flush late, and what they record outside a stretch is left out."""
        agg = getattr(self._writer, "aggregator", None)
        if self._detail.iterations:
            return agg is None or agg.detail_now()
        if agg is not None and agg.stretch_full(now):  # the stretch filled: off until the next
            return False
        return self._detail.in_detail(now - self._origin_ns)

    def _detail_change(self, now: int) -> int:
        """When the run next enters or leaves a detail stretch, on the session's clock. A schedule of
        iterations: outside a stretch, look again after a flush; inside, at the next window's end
        (a full window may run past the stretch's end: its records there are left out)."""
        if self._detail.iterations:
            if self._in_detail(now):
                return _NEVER
            return now + int(self.options["flush_interval"] * 1e9)
        change = self._detail.next_change(now - self._origin_ns)
        return _NEVER if change >= detail_schedule.NEVER else min(_NEVER, self._origin_ns + change)

    def long_op_entry(self, name_id: int) -> None:
        """A long operation starts on the main thread (annotate's scope entry, at top level): if its
        last call ran in this kind of window, switch first, so its calls alternate between kinds.

        Why: a long call with no scope exit inside (SB3 PPO's ``train``, 1-2 s) takes the switch
        that falls due during it at its exit, so the next window starts with the operation after it.
        When that one spans one switch, the next call runs in the same kind of window as the last:
        on an H100, both ``train`` calls of an SB3 PPO run ran in light windows, their categories and GPU
        work never seen. Random lengths break that only over many calls; a run may have two.
        """
        if self._shared is not None:  # the grid decides: a process of its own would leave it
            return
        if self.long_ops.get(name_id) == self._window_mode and self.window_due_ns != _NEVER:
            self.switch_window()

    def long_op_done(self, name_id: int) -> None:
        """A top-level call on the main thread lasted at least ``long_op_ns``: remember its kind."""
        self.long_ops[name_id] = self._window_mode

    def _window_scale(self) -> float:
        """How much windows are lengthened so that switching takes at most SWITCH_BUDGET of the run."""
        pair = self._window_ns[S.WINDOW_FULL] + self._window_ns[S.WINDOW_LIGHT]
        return min(MAX_WINDOW_SCALE, max(1.0, sum(self._switch_ns.values()) / SWITCH_BUDGET / pair))

    def window_length_ns(self, mode: int) -> int:
        """The next window's length: ``window_s`` scaled up so switching costs <= SWITCH_BUDGET of the run.

        Why: detaching CUPTI in light windows and attaching it again costs ~14 ms a pair on the
        H200 (0.5 ms attached), 7% of the run with 0.1 s windows. The switch's time is removed by
        the analyzer, but it still slows the run; longer windows keep that small, measured here on
        the run itself rather than guessed per machine.

        Each length is then random, with the same mean. Switches come at scope exits once a
        window is due, and a leaf operation holds no exit: with fixed lengths, a loop whose
        rollout outlasts a window (SB3 PPO on an H200: 0.45 s of rollout, 0.35 s windows) got
        the switch to light during every rollout and back at every update's exit, so every
        update ran in a light window, its categories and GPU work never seen (or, the other way
        round, always in full windows, its cost never measured on itself). An exponential length
        is memoryless: whatever the loop's period, an instance's window is full with about
        ``full_share`` probability, independently of the last one's. Uniform lengths (+-50%) were
        not enough: in a simulation of that loop, an update ran in the same kind of window as the
        one before 72% of the time (long runs of one kind), the shifted exponential 51%.
        """
        scale = self._window_scale()
        if WINDOW_RANDOM:
            draw = WINDOW_FLOOR + (1 - WINDOW_FLOOR) * self._jitter.expovariate(1.0)
            scale *= min(draw, WINDOW_CAP)
        return int(self._window_ns[mode] * scale)

    def _start_nvtx(self, torch: Any) -> None:
        """Every scope also opens an NVTX range of its name, so Nsight Systems shows the operations."""
        if annotate._active is self and torch.cuda.is_available():
            self.nvtx_push, self.nvtx_pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
            if self._lean is not None:
                self._lean.set_nvtx(self.nvtx_push, self.nvtx_pop)

    def stop(self, *, signal: int = 0) -> None:
        """Close open scopes (flagged), stop collectors and flush everything to disk. Idempotent.

        ``signal``: the signal that ends the process (its parent terminated it); recorded in the
        session's end event, so the analysis tells it from a crash.
        """
        if self._writer is None or os.getpid() != self._pid or self._stopping:
            return
        self._stopping = True
        turn = self._turn
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
        # the run ends now: draining the collectors' last buffers is rlscope's time, not the job's
        end_ns = self.clock()
        self.window_due_ns = self.long_op_ns = self.timer_due_ns = _NEVER
        self._stop_window_timer()
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
        lean = self._lean
        for st in states:
            if lean is not None:  # what the lean path holds open: its stacks are in C
                lean.close_open(st.thread, end_ns, False)
            for stack, kind in ((st.ops, S.OP_END), (st.phases, S.PHASE_END)):
                while stack:
                    inst, nid = stack.pop()
                    parent = stack[-1][0] if stack else -1
                    self.events.append((end_ns, st.thread, kind, inst, parent, nid, S.FLAG_FORCED_CLOSE))
            st.open_names.clear()
            if lean is not None:
                lean.close_open(st.thread, end_ns, True)
            while st.cats:
                c = st.cats.pop()
                parent = st.cats[-1] if st.cats else 0
                self.events.append((end_ns, st.thread, S.CAT_END, c, parent, -1, S.FLAG_FORCED_CLOSE))
        # id: the signal that ended the process (-1: the session ended normally); parent: the
        # machine's Python speed, timed after the run's end (rlscope/overhead/correct/reference.py)
        speed = reference.session_sample_ps() if not signal else -1
        end = (end_ns, threading.get_native_id(), S.SESSION_END, signal or -1, speed, -1, 0)
        self.events.append(end)
        if annotate._active is self:
            annotate._active = None
        self._unbind_lean()
        from rlscope.collectors import scope_native

        scope_native.forget_thread()  # the C methods' cached references to this session (this thread's)
        self.nvtx_push = self.nvtx_pop = None
        self.tick_due_ns, self._ticker, self._ticker_due_ns, self._turn = _NEVER, None, _NEVER, None
        writer, self._writer = self._writer, None
        writer.close()
        self._release_lock()
        atexit.unregister(self._stop_at_exit)

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def _stop_at_exit(self) -> None:
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
        self._unbind_lean()  # the parent's buffer: nothing of the child's goes there
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
        self._timer, self._timer_stop, self._switch_lock = None, threading.Event(), threading.RLock()
        self._finish_due = None
        # the parent's GPU collectors (Kineto rotation, NVTX) belong to the parent process
        self.tick_due_ns, self._ticker, self._ticker_due_ns, self._turn = _NEVER, None, _NEVER, None
        self.nvtx_push = self.nvtx_pop = None
        self.long_ops, self.long_op_ns = {}, _NEVER
        annotate._active = None
        try:
            self.start()
        except RLScopeError as e:
            warnings.warn(f"rlscope: not profiling forked child {os.getpid()}: {printable(e)}", stacklevel=1)
            return
        self.end_cleanly_on_sigterm()

    def _hook_multiprocessing(self, util: Any) -> None:
        """Flush in multiprocessing children too, which end through ``os._exit`` (no atexit).

        ``BaseProcess._bootstrap`` (CPython's multiprocessing/process.py) runs the child's target,
        then ``util._exit_function()`` (its finalizers with an exit priority, highest first), then
        returns to ``os._exit`` (fork, forkserver; spawn's ``spawn_main`` calls ``sys.exit``, so
        atexit covers it as well). A ``util.Finalize`` is the hook that runs on that path. It must
        be registered *in the child, after* ``_bootstrap``'s ``_after_fork`` has cleared the
        finalizers inherited from the parent: ``util.register_after_fork`` hooks run right after
        that clearing (an ``os.register_at_fork`` hook runs before it, inside ``os.fork``).
        """
        util.register_after_fork(self, Session._register_mp_finalizer)
        if util.process.parent_process() is not None:  # started inside a running child already
            self._register_mp_finalizer()

    def _register_mp_finalizer(self) -> None:
        import multiprocessing.util

        # exitpriority 100: first of the finalizers (Pool and Queue ones use -5 to 10), so the
        # trace is on disk before any finalizer that could block and get the child killed
        multiprocessing.util.Finalize(self, self._stop_at_exit, exitpriority=100)

    def end_cleanly_on_sigterm(self) -> None:
        """In a forked child: when its parent ends it with SIGTERM, flush first
        (rlscope/runtime/child_signal.py). Only where SIGTERM still has its default action."""
        from rlscope.runtime import child_signal

        child_signal.end_cleanly_on_sigterm(self)


# Set by `rlscope run` (rlscope/cli/main.py) for the program it profiles; rlscope/runtime/autorun.py starts
# that program's session from them. Here because every reader imports this module anyway (importing
# rlscope.runtime.autorun would start a run).
RUN_TRACE_DIR_ENV = "RLSCOPE_RUN_TRACE_DIR"
RUN_OPTIONS_ENV = "RLSCOPE_RUN_OPTIONS"
RUN_PARENT_ENV = "RLSCOPE_RUN_PARENT"  # pid of the latest profiled process in a process's ancestry


def profile(trace_dir: str | os.PathLike[str] = "rlscope-trace", **options: Any) -> Session:
    """A profiling session writing to ``trace_dir``: ``with rlscope.profile("trace"):`` or ``.start()``.

    Options: ``flush_interval`` (s, default 1.0), ``backend`` (record time in PyTorch ops, default
    True), ``gpu`` ("auto", "kineto", "cupti" or False), ``nvtx`` (default False: every scope also an
    NVTX range, for Nsight Systems, while the GPU is traced), ``nvml_hz``,
    ``windows`` (default True: switch backend-op recording and GPU tracing off in every other
    window of ``window_s`` seconds on average, default 0.1, so their cost is measured in this very
    run; ``full_share``, default 0.5, is the share of the time they are on;
    rlscope/overhead/correct/windows.py), ``auto_ops`` (default False; on under ``rlscope run``:
    record ``simulation``, ``inference`` and ``backprop`` and the library adapters' phases in code
    without scopes, rlscope/runtime/auto_ops.py, docs/automatic-operations.md).
    """
    mode = os.environ.get(hooks.MODE_ENV)  # a run of `rlscope validate`: off | timers | profile
    factory = hooks.mode_session() if mode else None
    if factory is not None:
        return factory(mode, trace_dir, options)
    if mode:
        warn_once(f"{hooks.MODE_ENV}={mode!r} is set outside a run of rlscope validate: profiling")
    run = annotate._active
    if run is not None and os.environ.get(RUN_TRACE_DIR_ENV):
        return RunSession(run, trace_dir)
    return Session(trace_dir, **options)


class RunSession:
    """What ``rlscope.profile`` returns inside a program already profiled by ``rlscope run``.

    Why: the run's session (rlscope/runtime/autorun.py) started before the program's first line, and
    one process runs one session at a time; a program that profiles itself (``--trace-dir`` in the
    bundled workloads) must not crash because it is run under ``rlscope run``. Its scopes go to the
    run's trace; this object only stands in for the session it asked for, and says so once.
    """

    def __init__(self, run: Session, asked: str | os.PathLike[str]) -> None:
        self.run = run
        self.trace_dir = run.trace_dir
        self.asked = Path(asked)

    @property
    def active(self) -> bool:
        return annotate._active is self.run

    def start(self) -> RunSession:
        from rlscope.errors import warn_once

        warn_once(
            f"rlscope: rlscope run already profiles this program into {self.run.trace_dir};"
            f" rlscope.profile({str(self.asked)!r}) records there too and writes no trace of its own"
        )
        return self

    def stop(self) -> None:
        """The run's session ends with the program, not here."""

    def __enter__(self) -> RunSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getattr__(self, name: str) -> Any:  # add_toggler, clock, options ...: the run's
        return getattr(self.run, name)


def active_session() -> Session | None:
    return annotate._active


def _after_fork_in_child() -> None:
    s = annotate._active
    if s is not None:
        s._restart_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
