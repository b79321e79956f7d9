"""Inside a measured child run of ``rlscope validate``: the sessions each mode runs, and the record.

Environment of a child run (read by :func:`rlscope.profile` through the session hook this module
registers, and by the boot ``sitecustomize`` that validate puts first on the child's
``PYTHONPATH``): ``RLSCOPE_MODE`` (off | timers | profile), ``RLSCOPE_VALIDATE_RECORD`` (where the
child writes its measurements as JSON; taken by the first process only),
``RLSCOPE_VALIDATE_TRACE_DIR`` and ``RLSCOPE_VALIDATE_OPTIONS`` (profile mode: where
``rlscope.profile`` writes, and options that override the script's), ``RLSCOPE_VALIDATE_WHOLE``
(``1``: the mode's session spans the whole process, for scripts that never call ``rlscope.profile``).

- **off** (unprofiled): a :class:`NullSession` records only when it starts and stops; scopes take
  their no-session fast path.
- **timers**: a :class:`TimerSession` stands in for the session: every scope boundary is one clock
  read and one row in an event buffer, folded into a
  :class:`~rlscope.overhead.validate.aggregate.TimerAggregate`.
- **profile**: rlscope's own session, into the validation's trace directory.

The core never imports this module: :func:`child_boot` (named by the boot hook,
:mod:`rlscope.runtime.hooks`) registers :func:`session_for_mode` and the twin turns with the session.
"""

from __future__ import annotations

import atexit
import functools
import gc
import itertools
import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from rlscope import annotate
from rlscope.errors import RLScopeError
from rlscope.overhead.validate import speed_probe, twin
from rlscope.overhead.validate.aggregate import TimerAggregate
from rlscope.overhead.validate.speed_probe import SpeedProbe
from rlscope.runtime import hooks

MODE_ENV = hooks.MODE_ENV
RECORD_ENV = "RLSCOPE_VALIDATE_RECORD"
TRACE_ENV = "RLSCOPE_VALIDATE_TRACE_DIR"
OPTIONS_ENV = "RLSCOPE_VALIDATE_OPTIONS"
WHOLE_ENV = "RLSCOPE_VALIDATE_WHOLE"
PROBE_ENV = "RLSCOPE_VALIDATE_SPEED_PROBE"  # "0": no speed probe (rlscope validate --no-speed-probe)
_NEVER = 2**63 - 1
_TICK_NS = 1_000_000_000  # how often a timer session folds its events into totals (bounds memory)


class ChildRecord:
    """What one child run measured, written as JSON at exit to the path the parent gave.

    Only the process that took the path writes (``pid`` check): a fork or a Python subprocess of
    the job must not overwrite it.
    """

    def __init__(self, path: str | None, mode: str) -> None:
        self.path = path
        self.mode = mode
        self.pid = os.getpid()
        self.boot_ns = time.perf_counter_ns()
        self.window_ns = 0
        self.window_waited_ns = 0  # of window_ns: waiting for a twin's turn (overhead/validate/twin.py)
        self.profile_calls = 0
        self.timers = TimerAggregate()
        self.open: list[Any] = []  # sessions started and not stopped yet
        self.regions: list[tuple[int, int]] = []  # (start, stop) clock readings of the measured sessions
        self.probe: SpeedProbe | None = None  # the main thread's speed (speed_probe.py), where started
        if path:
            atexit.register(self.write)

    def start_probe(self) -> None:
        """Sample the main thread's speed until the record is written (not in twin runs)."""
        wanted = os.environ.get(PROBE_ENV, "1") != "0" and twin.current() is None
        if self.path and self.probe is None and wanted:
            probe = SpeedProbe()
            if probe.start():
                self.probe = probe

    def write(self) -> None:
        exit_ns = time.perf_counter_ns()
        if not self.path or os.getpid() != self.pid:
            return
        for session in list(self.open):
            session.stop()
        speed = samples = None
        if self.probe is not None:
            self.probe.stop()
            samples = self.probe.samples(self.regions or [(self.boot_ns, exit_ns)])
            speed = speed_probe.level(samples)
        data = {
            "mode": self.mode,
            "pid": self.pid,
            "profile_calls": self.profile_calls,
            "window_s": self.window_ns / 1e9,
            "window_waited_s": self.window_waited_ns / 1e9,
            "process_s": (exit_ns - self.boot_ns) / 1e9,
            "speed": speed,
            # each sample with its clock reading: a profiled run's are split by its windows
            # (window_speed.py), and the result keeps them to check how the level summarizes a run
            "speed_samples": samples,
            "turn": turn.as_record() if (turn := twin.current()) is not None else None,
            "boundaries": self.timers.boundary_counts(),
            "timers": self.timers.counters(list(annotate._names)),
            "blocks": self.timers.block_quantiles(list(annotate._names)),
            "block_samples": self.timers.block_samples(list(annotate._names)),
        }
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)


_record: ChildRecord | None = None


def child_record() -> ChildRecord:
    """This process's record; one that writes nothing outside a measured child run."""
    global _record
    if _record is None or _record.pid != os.getpid():
        _record = ChildRecord(os.environ.pop(RECORD_ENV, None), os.environ.get(MODE_ENV, ""))
    return _record


class NullSession:
    """``RLSCOPE_MODE=off``: a session that records only its start and stop times, and no trace."""

    def __init__(
        self, trace_dir: str | os.PathLike[str] = "rlscope-trace", record: ChildRecord | None = None
    ):
        self.trace_dir = Path(trace_dir)
        self.record = record if record is not None else child_record()
        self._t0: int | None = None
        # a twin run's turns (overhead/validate/twin.py): their waits are not the job's
        self._turn = twin.current()
        self._waited0 = 0

    @property
    def active(self) -> bool:
        return self._t0 is not None

    def start(self) -> Any:
        if self._t0 is None:
            self.record.profile_calls += 1
            self.record.open.append(self)
            self._waited0 = self._turn.waited_ns if self._turn is not None else 0
            self._t0 = time.perf_counter_ns()
        return self

    def stop(self) -> None:
        t = time.perf_counter_ns()
        if self._t0 is not None:
            self.record.window_ns += t - self._t0
            self.record.regions.append((self._t0, t))
            if self._turn is not None:
                self.record.window_waited_ns += self._turn.waited_ns - self._waited0
            self._t0 = None
            self.record.open.remove(self)
            if self._turn is not None:  # a twin run: the partner runs its last stretch now
                self._turn.release()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TimerSession(NullSession):
    """``RLSCOPE_MODE=timers``: what annotate's scopes use from a Session, recording into plain timers.

    annotate._Scope and category_enter/exit touch ``clock``, ``events.append``, ``thread_state()``,
    ``ids``, ``nvtx_push``/``nvtx_pop``, ``tick_due_ns``/``run_tick``, ``window_due_ns``/``main_tid``/
    ``switch_window`` and ``long_ops``/``long_op_ns``/``top_begin_ns``; nothing else runs (no writer
    thread, no collectors), so a boundary costs one clock read and one append. Events are folded into
    totals once a second (``run_tick``) and at stop, the folding time taken off the open operations.
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike[str] = "rlscope-trace",
        record: ChildRecord | None = None,
        clock: Any = time.perf_counter_ns,
        aggregate: TimerAggregate | None = None,
    ) -> None:
        super().__init__(trace_dir, record)
        self.clock = clock
        self.ids = itertools.count()
        # annotate's events; with the C scope methods, their buffer, so boundaries stamp what they
        # cost into their rows, which the aggregate takes off (TimerAggregate.feed)
        self.events: Any = []
        self.nvtx_push: Any = None
        self.nvtx_pop: Any = None
        self.tick_due_ns = _NEVER
        self.window_due_ns = _NEVER  # no collector windows to switch (Session.switch_window)
        self.main_tid = -1
        self.long_ops: dict[int, int] = {}  # none: no windows (Session.long_op_entry)
        self.long_op_ns = _NEVER
        self.top_begin_ns = 0
        self._fold_due_ns = _NEVER
        self.timers = aggregate if aggregate is not None else self.record.timers
        self._tls = threading.local()
        self._native: Any = None  # the C methods' module while they run the timer path

    def thread_state(self) -> annotate.ThreadState:
        st = getattr(self._tls, "st", None)
        if st is None:
            st = self._tls.st = annotate.ThreadState()
        return st

    def start(self) -> Any:
        if self._t0 is not None:
            return self
        if annotate._active is not None:
            raise RLScopeError("an rlscope session is already active in this process")
        from rlscope.collectors import scope_native

        # the C scope methods, on their timer path (collectors/scope_native.c): a boundary reads the
        # clock and writes one row, stamped with its cost. Through the session's full path the
        # truth read +0.9% high in a torch loop, its boundaries slowing the job's code around
        # them; the Python methods where there is no compiler
        native = None
        if scope_native.install() == "native" and self.clock is time.perf_counter_ns:
            self.events = scope_native.event_buffer()
            native = scope_native.load()
        super().start()
        annotate._active = self  # type: ignore[assignment]
        self._fold_due_ns = self.clock() + _TICK_NS
        if self._turn is not None and "torch" in sys.modules:
            self._turn.add_points(self)
        self._sync_tick()
        if native is not None:
            native.set_timer(self, self.events, self.tick_due_ns)
            self._native = native
        return self

    def stop(self) -> None:
        if self._t0 is None:
            return
        end = self.clock()
        if annotate._active is self:
            annotate._active = None
        self._end_timer_path()
        self.tick_due_ns = self._fold_due_ns = _NEVER
        self.drain()
        self.timers.close_all(end)
        super().stop()

    def drain(self) -> None:
        """Fold the events recorded so far into the totals (list ops are atomic: no lock needed).

        With the garbage collector off: a fold turns a second of events into Python lists, all
        alive until it ends, and a collection meanwhile promoted them all, which brought the job a
        full collection the unprofiled run did not make (~85 ms in a torch process, inside one of
        its operations: the eager simulator's timer runs read +3.7% over 2.3 s). The
        lists die by reference count when the fold ends, so the collector never needs to see them.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            if isinstance(self.events, list):
                n = len(self.events)
                chunk: Any = self.events[:n]
                del self.events[:n]
            else:  # the native buffer: rows of the events' 7 columns and the cost
                import numpy as np  # here: a measured child imports no more than its program does

                chunk = np.frombuffer(self.events.drain(), np.int64).reshape(-1, 8).tolist()
            self.timers.feed(chunk)
            del chunk
        finally:
            if enabled:
                gc.enable()

    def run_tick(self, now: int) -> None:
        """At an end boundary once ``tick_due_ns`` has passed: fold the events (once a second),
        hand a twin's turn over (overhead/validate/twin.py); the time spent is a pause, not the job's."""
        t0 = self.clock()
        turn = self._turn
        hand_over = turn is not None and now >= turn.due_ns and turn.ready(now)
        # folded before a hand-over too: a pause applies to the events fed before it
        if hand_over or now >= self._fold_due_ns:
            self.drain()
            self._fold_due_ns = now + _TICK_NS
        if hand_over:
            turn.hand_over(now)
        self._sync_tick()
        self.timers.pause(threading.get_native_id(), self.clock() - t0)

    def _sync_tick(self) -> None:
        turn = self._turn
        self.tick_due_ns = min(self._fold_due_ns, turn.due_ns if turn is not None else _NEVER)
        if self._native is not None:
            self._native.set_timer_tick(self.tick_due_ns)

    def _end_timer_path(self) -> None:
        if self._native is not None:
            self._native.set_timer(None, None, 0)
            self._native = None

    def switch_window(self) -> None:
        """Never due (``window_due_ns``); here for annotate's sake."""

    def _restart_in_child(self) -> None:
        """After fork (rlscope.session's hook): the child is not measured."""
        annotate._active = None
        self._end_timer_path()
        self._t0 = None


def session_for_mode(mode: str, trace_dir: str | os.PathLike[str], options: dict[str, Any]) -> Any:
    """What :func:`rlscope.profile` returns when ``RLSCOPE_MODE`` is set (a child of rlscope validate)."""
    from rlscope.session import Session

    if mode == "off":
        return NullSession(trace_dir)
    if mode == "timers":
        return TimerSession(trace_dir)
    if mode == "profile":
        child_record().profile_calls += 1
        override = json.loads(os.environ.get(OPTIONS_ENV) or "{}")
        return _profiled_session()(os.environ.get(TRACE_ENV) or trace_dir, **{**options, **override})
    warnings.warn(f"rlscope: unknown {MODE_ENV}={mode!r} (off, timers, profile): profiling", stacklevel=3)
    return Session(trace_dir, **options)


@functools.cache
def _profiled_session() -> type:
    """rlscope's Session, noting the region it measured in the record (where the speed probe's
    samples count). Made on first use: only a profiled run imports the session module."""
    from rlscope.session import Session

    class ProfiledSession(Session):
        _region_t0: int | None = None

        def start(self) -> Any:
            if self._region_t0 is None:
                self._region_t0 = time.perf_counter_ns()
            return super().start()

        def stop(self, *, signal: int = 0) -> None:
            t0, self._region_t0 = self._region_t0, None
            super().stop(signal=signal)
            if t0 is not None:
                child_record().regions.append((t0, time.perf_counter_ns()))

    return ProfiledSession


def install() -> None:
    """Register this module's sessions and the twin turns with the session (:mod:`rlscope.runtime.hooks`):
    the core reaches them through the hook, never by importing validate."""
    hooks.register(mode_session=session_for_mode, turns=twin.current)


def child_boot() -> None:
    """Run by the boot sitecustomize in every process of a validation (``BOOT`` in
    :func:`rlscope.overhead.validate.runner.child_env`): register the sessions, take the record, and
    start a whole-process session if asked."""
    install()
    turn = twin.start_from_env()  # a twin run: wait for the first turn before the job's time starts
    if turn is not None:
        atexit.register(turn.finish)  # before the record's: runs after it (the partner waits till then)
    record = child_record()
    record.start_probe()
    if os.environ.get(WHOLE_ENV) == "1" and record.path:
        if record.mode == "timers":
            TimerSession(record=record).start()
        elif record.mode == "off":
            NullSession(record=record).start()


def measure_timer_costs(n: int = 10_000, reps: int = 9) -> dict[str, float]:
    """What the timers add per boundary pair, in ns, over the no-session fast path.

    ``pair``: one scope enter + exit; ``inside``: the part of it inside the scope's own interval
    (an empty scope's measured inclusive time); ``category``: one category enter + exit (wrap_env).
    Minima over ``reps`` loops of ``n`` pairs, measured in this process.
    """
    from rlscope import categories

    sc = annotate.scope("rlscope.overhead.validate.runner.timer-cost")
    cat = annotate._Category(categories.SIMULATOR)

    def loop(cm: Any, agg: TimerAggregate | None = None) -> float:
        """ns per pair of ``n`` pairs of ``cm``; under a timer session (``agg``) less its pauses: a
        fold falling inside the loop is the session's bookkeeping, not a boundary's cost (at a short
        fold interval every loop held one, and the pair read 2.8 us instead of 0.08 us:
        tests/test_validate.py::test_timer_mode_busy_waits)."""
        p0 = agg.paused_ns if agg is not None else 0
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with cm:
                pass
        elapsed = time.perf_counter_ns() - t0
        return (elapsed - ((agg.paused_ns - p0) if agg is not None else 0)) / n

    plain_scope, plain_cat, timed_scope, timed_cat, inside = [], [], [], [], []
    measured_scope: list[float] = []
    measured_cat: list[float] = []
    for _ in range(reps):
        plain_scope.append(loop(sc))
        plain_cat.append(loop(cat))
        agg = TimerAggregate()
        ts = TimerSession(record=ChildRecord(None, "timers"), aggregate=agg).start()
        try:
            timed_scope.append(loop(sc, agg))
            ts.drain()
            measured_scope.append(agg.measured_ns / n)
            timed_cat.append(loop(cat, agg))
            ts.drain()
            measured_cat.append((agg.measured_ns / n) - measured_scope[-1])
        finally:
            ts.stop()
        o = agg.ops[sc.name_id]
        inside.append(o[6] / o[5])
    # minima: on a shared machine other work only ever adds time to a loop. Where boundaries measure
    # themselves (their cost already taken off in TimerAggregate.feed), what is left to take off
    # is the rest of a pair: its dispatch into the C methods and back
    pair = max(0.0, min(timed_scope) - min(plain_scope) - min(measured_scope))
    return {
        "pair": pair,
        "inside": max(0.0, min(pair, min(inside))),
        "category": max(0.0, min(timed_cat) - min(plain_cat) - min(measured_cat)),
    }
