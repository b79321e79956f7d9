"""``rlscope validate``: does rlscope's corrected profile of *your* program match the program unprofiled?

    rlscope validate [--reps 5] [--max-reps N] [--trace-dir D] [--json F] [--gpu MODE] [--no-backend]
                     [--tolerance PCT[,PCT]] [--calibration F] [--no-warmup] [--cpus LIST]
                     [--verbose] [--] python train.py ARGS...

The command runs ``reps`` times in each of three modes, each run its own process, interleaved with
the mode order rotated per repetition (machine noise hits every mode alike):

- **unprofiled**: ``RLSCOPE_MODE=off``. ``rlscope.profile()`` returns a session that records only
  when it starts and stops; scopes take their no-session fast path. The time between start and stop
  (or, for a script that never calls ``rlscope.profile``, from interpreter start to exit) is the
  ground truth for the total.
- **timers**: ``RLSCOPE_MODE=timers``. A :class:`TimerSession` stands in for the session: every
  scope boundary is one clock read and one row in an event buffer (the C methods, which also
  measure what they cost), aggregated into inclusive and exclusive time per operation (nesting per
  thread, as rlscope's analyzer does), less the timers' own cost nested inside each operation
  (what each boundary measured, and the calibrated dispatch around it). This is the ground truth
  per operation.
- **profiled**: rlscope's profile (the script's ``rlscope.profile`` redirected to the validation's
  trace directory, or, for a script without one, a whole-process session as ``rlscope run`` starts),
  analyzed with the machine's overhead calibration: corrected wall and per-operation inclusive time.

Environment of a child run (read by :func:`rlscope.profile` and by the ``sitecustomize`` that
validate puts first on the child's ``PYTHONPATH``): ``RLSCOPE_MODE`` (off | timers | profile),
``RLSCOPE_VALIDATE_RECORD`` (where the child writes its measurements as JSON; taken by the first
process only), ``RLSCOPE_VALIDATE_TRACE_DIR`` and ``RLSCOPE_VALIDATE_OPTIONS`` (profile mode: where
``rlscope.profile`` writes, and options that override the script's), ``RLSCOPE_VALIDATE_WHOLE``
(``1``: the mode's session spans the whole process, for scripts that never call ``rlscope.profile``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlscope import annotate
from rlscope.cli.parser import Parser
from rlscope.cli.program import program_command
from rlscope.errors import RLScopeError
from rlscope.overhead.validate import hoststat, twin
from rlscope.session import RUN_OPTIONS_ENV, RUN_PARENT_ENV, RUN_TRACE_DIR_ENV
from rlscope.trace import schema as S

MODE_ENV = "RLSCOPE_MODE"
RECORD_ENV = "RLSCOPE_VALIDATE_RECORD"
TRACE_ENV = "RLSCOPE_VALIDATE_TRACE_DIR"
OPTIONS_ENV = "RLSCOPE_VALIDATE_OPTIONS"
WHOLE_ENV = "RLSCOPE_VALIDATE_WHOLE"
MODES = ("unprofiled", "timers", "profiled")
_MODE_VALUE = {"unprofiled": "off", "timers": "timers", "profiled": "profile"}
_NEVER = 2**63 - 1
_TICK_NS = 1_000_000_000  # how often a timer session folds its events into totals (bounds memory)
# timed runs: each operation's median exclusive time per block of this length, the unprofiled-side
# counterpart of the profiled runs' light windows (windows.light_quantiles)
BLOCK_NS = 250_000_000
MIN_BLOCK_INSTANCES = 5
TURN_MS = twin.TURN_NS / 1e6  # --turn-ms's default


def quantiles3(values: list[float]) -> list[float]:
    """10th, 50th and 90th percentiles (linear interpolation, as numpy's default)."""
    v = sorted(values)

    def q(p: float) -> float:
        x = p * (len(v) - 1)
        i = int(x)
        return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (x - i)

    return [q(0.1), q(0.5), q(0.9)]


# ------------------------------------------------------------------------------------ child side


class TimerAggregate:
    """Inclusive/exclusive nanoseconds per operation from scope events, plus what to subtract later.

    Nesting is per thread and exclusive time goes to the innermost operation, as in rlscope's
    analyzer; a recursive instance (same name already open) adds no inclusive time. Besides the
    raw sums it counts the timer boundaries nested in each operation, so that their cost, measured
    apart (:func:`measure_timer_costs`), can be taken off (:func:`corrected_timers`).
    """

    # per-name counters (list positions)
    FIELDS = (
        "calls",
        "exclusive_ns",
        "direct_ops",  # child operations closed directly inside (their cost outside them lands here)
        "direct_phase_events",
        "direct_cat_events",
        "inclusive_calls",  # non-recursive instances
        "inclusive_ns",
        "nested_ops",  # operations closed anywhere inside the non-recursive instances
        "nested_phase_events",
        "nested_cat_events",
    )

    def __init__(self) -> None:
        self.ops: dict[int, list[int]] = {}
        # per name: the exclusive times of the current block, and the medians of the blocks so far
        # (the machine's speed over the run, to set beside the light windows': block_quantiles)
        self._block: dict[int, tuple[int, list[int]]] = {}
        self.block_medians: dict[int, list[tuple[float, int]]] = {}  # (median, instances) per block
        # thread -> [frames, closed op pairs, phase events, category events, paused ns]
        self._threads: dict[int, list[Any]] = {}
        self.measured_ns = 0  # what measured boundaries cost, taken off as pauses (feed)
        self.measured_boundaries = 0
        self.paused_ns = 0  # timer bookkeeping (folds, twin hand-overs), taken off as pauses (pause)

    def _thread(self, thread: int) -> list[Any]:
        th = self._threads.get(thread)
        if th is None:
            th = self._threads[thread] = [[], 0, 0, 0, 0]
        return th

    def feed(self, events: Iterable[Sequence[int]]) -> None:
        """Fold annotate's event rows ``(ts, thread, kind, inst, parent, name, flags[, cost])`` in.

        ``cost``: what the boundary measured it cost (collectors/scope_native.c; 0: not measured).
        Taken off as a pause at the side of the timestamp where it was paid, so no operation counts
        it: ``pre`` before the boundary's state change, ``post`` after it. ``measured_ns`` and
        ``measured_boundaries`` add them up, for :func:`measure_timer_costs`.
        """
        for row in events:
            ts, thread, kind, inst, _parent, nid, flags = row[:7]
            cost = row[7] if len(row) > 7 else 0
            th = self._thread(thread)
            pre = post = 0
            if cost > 0:
                pre, post = S.unpack_cost(cost)
                th[4] += pre
                self.measured_ns += pre + post
                self.measured_boundaries += 1
            frames = th[0]
            if kind == S.OP_BEGIN:
                if inst < 0:  # the C timer path writes no instance ids: recursion by name
                    flags = S.FLAG_RECURSIVE if any(f[1] == nid for f in frames) else 0
                # frame: inst, name, begin, ops0, phase0, cat0, paused0, child_incl, d_ops, d_ph, d_cat, rec
                frames.append(
                    [inst, nid, ts, th[1], th[2], th[3], th[4], 0, 0, 0, 0, flags & S.FLAG_RECURSIVE]
                )
            elif kind == S.OP_END:
                # an end closes its own instance, or (no ids) the innermost open one of its name
                key, want = (0, inst) if inst >= 0 else (1, nid)
                if any(f[key] == want for f in frames):  # else: opened before this session started
                    while True:
                        f = frames.pop()
                        self._close(th, f, ts)
                        if f[key] == want:
                            break
            elif kind in (S.PHASE_BEGIN, S.PHASE_END):
                th[2] += 1
                if frames:
                    frames[-1][9] += 1
            elif kind in (S.CAT_BEGIN, S.CAT_END):
                th[3] += 1
                if frames:
                    frames[-1][10] += 1
            th[4] += post

    def _close(self, th: list[Any], f: list[Any], end: int) -> None:
        incl = end - f[2] - (th[4] - f[6])
        o = self.ops.get(f[1])
        if o is None:
            o = self.ops[f[1]] = [0] * len(self.FIELDS)
        o[0] += 1
        o[1] += incl - f[7]
        self._add_to_block(f[1], end, incl - f[7])
        o[2] += f[8]
        o[3] += f[9]
        o[4] += f[10]
        if not f[11]:
            o[5] += 1
            o[6] += incl
            o[7] += th[1] - f[3]
            o[8] += th[2] - f[4]
            o[9] += th[3] - f[5]
        th[1] += 1
        frames = th[0]
        if frames:
            frames[-1][7] += incl
            frames[-1][8] += 1

    def _add_to_block(self, nid: int, end: int, excl: int) -> None:
        block = end // BLOCK_NS
        cur = self._block.get(nid)
        if cur is None or cur[0] != block:
            if cur is not None:
                self._fold(nid, cur[1])
            cur = self._block[nid] = (block, [])
        cur[1].append(excl)

    def _fold(self, nid: int, times: list[int]) -> None:
        if len(times) >= MIN_BLOCK_INSTANCES:
            self.block_medians.setdefault(nid, []).append((float(statistics.median(times)), len(times)))

    def _fold_open(self) -> None:
        """Fold every operation's current (last) block."""
        for nid, (_, times) in self._block.items():
            self._fold(nid, times)
        self._block.clear()

    def block_quantiles(self, names: list[str]) -> dict[str, list[float]]:
        """Per operation name with 3 blocks or more: the 10th, 50th and 90th percentiles of its
        blocks' median exclusive ns."""
        return {
            name: quantiles3([m for m, _ in blocks])
            for name, blocks in self.block_samples(names).items()
            if len(blocks) >= 3
        }

    def block_samples(self, names: list[str]) -> dict[str, list[list[float]]]:
        """Per operation name: ``[median exclusive ns, instances]`` of each block, for
        :mod:`rlscope.overhead.validate.speed_match`."""
        self._fold_open()
        out = {}
        for nid, blocks in self.block_medians.items():
            name = names[nid] if nid < len(names) else f"<name {nid}>"
            out[name] = [[m, float(n)] for m, n in blocks]
        return out

    def boundary_counts(self) -> dict[str, int]:
        """Boundaries folded in so far, by kind: what the timers' own dispatch cost adds up to
        over the run (validate's twin runs take it off the run's total)."""
        th = list(self._threads.values())
        return {
            "scope_pairs": sum(t[1] for t in th),
            "phase_events": sum(t[2] for t in th),
            "cat_events": sum(t[3] for t in th),
            "measured_ns": self.measured_ns,
        }

    def pause(self, thread: int, ns: int) -> None:
        """``ns`` of timer bookkeeping on ``thread``: not the job's time, taken off the open operations."""
        self._thread(thread)[4] += ns
        self.paused_ns += ns

    def close_all(self, end: int) -> None:
        """Close operations still open (a session stopped inside them), as Session.stop does."""
        for th in self._threads.values():
            while th[0]:
                self._close(th, th[0].pop(), end)

    def counters(self, names: list[str]) -> dict[str, dict[str, int]]:
        """Per operation name (several name ids may share one after a fork), counter name -> value."""
        out: dict[str, dict[str, int]] = {}
        for nid, vals in self.ops.items():
            name = names[nid] if nid < len(names) else f"<name {nid}>"
            acc = out.setdefault(name, dict.fromkeys(self.FIELDS, 0))
            for k, v in zip(self.FIELDS, vals, strict=True):
                acc[k] += v
        return out


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
        self.window_waited_ns = 0  # of window_ns: waiting for a twin's turn (rlscope/overhead/validate/twin.py)
        self.profile_calls = 0
        self.timers = TimerAggregate()
        self.open: list[Any] = []  # sessions started and not stopped yet
        if path:
            atexit.register(self.write)

    def write(self) -> None:
        exit_ns = time.perf_counter_ns()
        if not self.path or os.getpid() != self.pid:
            return
        for session in list(self.open):
            session.stop()
        data = {
            "mode": self.mode,
            "pid": self.pid,
            "profile_calls": self.profile_calls,
            "window_s": self.window_ns / 1e9,
            "window_waited_s": self.window_waited_ns / 1e9,
            "process_s": (exit_ns - self.boot_ns) / 1e9,
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
        self._turn = twin.current()  # a twin run's turns (rlscope/overhead/validate/twin.py): their waits are not the job's
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
        # them (BENCHMARKS.md §9, thirteenth session); the Python methods where there is no compiler
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
        its operations: the eager simulator's timer runs read +3.7% over 2.3 s, BENCHMARKS §9). The
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
        hand a twin's turn over (rlscope/overhead/validate/twin.py); the time spent is a pause, not the job's."""
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
        return Session(os.environ.get(TRACE_ENV) or trace_dir, **{**options, **override})
    warnings.warn(f"rlscope: unknown {MODE_ENV}={mode!r} (off, timers, profile): profiling", stacklevel=3)
    return Session(trace_dir, **options)


def child_boot() -> None:
    """Run by the child's sitecustomize (rlscope/runtime/boot): take the record, and start a whole-process
    session if asked."""
    turn = twin.start_from_env()  # a twin run: wait for the first turn before the job's time starts
    if turn is not None:
        atexit.register(turn.finish)  # before the record's: runs after it (the partner waits till then)
    record = child_record()
    if os.environ.get(WHOLE_ENV) == "1" and record.path:
        if record.mode == "timers":
            TimerSession(record=record).start()
        elif record.mode == "off":
            NullSession(record=record).start()


# ------------------------------------------------------------------------------------ timer costs


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


def corrected_timers(counters: dict[str, dict[str, int]], costs: dict[str, float]) -> dict[str, Any]:
    """Seconds per operation from a child's counters, less the timers' own cost inside each.

    An operation's own boundaries leave ``inside`` in its interval; each operation nested in it
    leaves a whole ``pair`` in its inclusive time and ``pair - inside`` in its exclusive time;
    phase and category boundaries half a pair each.
    """
    pair, inside, cat = costs["pair"], costs["inside"], costs["category"]
    out = {}
    for name, c in counters.items():
        incl_cost = (
            c["inclusive_calls"] * inside
            + c["nested_ops"] * pair
            + c["nested_phase_events"] * pair / 2
            + c["nested_cat_events"] * cat / 2
        )
        excl_cost = (
            c["calls"] * inside
            + c["direct_ops"] * (pair - inside)
            + c["direct_phase_events"] * pair / 2
            + c["direct_cat_events"] * cat / 2
        )
        out[name] = {
            "inclusive_s": max(0.0, c["inclusive_ns"] - incl_cost) / 1e9,
            "exclusive_s": max(0.0, c["exclusive_ns"] - excl_cost) / 1e9,
            "calls": c["calls"],
            "raw_inclusive_s": c["inclusive_ns"] / 1e9,
            "raw_exclusive_s": c["exclusive_ns"] / 1e9,
        }
    return out


def timer_cost_s(record: dict[str, Any], costs: dict[str, float]) -> float:
    """Seconds a timed run's boundaries added to its whole run: what they measured themselves and
    the dispatch around each (:func:`measure_timer_costs`). 0 for a run without timers."""
    b = record.get("boundaries") or {}
    pair, cat = costs.get("pair", 0.0), costs.get("category", 0.0)
    ns = (
        b.get("measured_ns", 0)
        + b.get("scope_pairs", 0) * pair
        + b.get("phase_events", 0) * pair / 2
        + b.get("cat_events", 0) * cat / 2
    )
    return ns / 1e9


# ------------------------------------------------------------------------------------ parent side

_TAIL_LINES = 20
SHOWN_SHARE = 0.01  # operations above this share of the run are shown
CHECKED_SHARE = 0.05  # and above this one checked against the operation tolerance


@dataclass
class Options:
    """What ``rlscope validate`` was asked to do."""

    command: list[str]
    reps: int = 5
    max_reps: int = 0  # --max-reps: more repetitions (doubling) until the verdict is settled
    trace_dir: Path | None = None
    json_path: str | None = None
    gpu: str | None = None  # None: the script's own choice, else rlscope's default
    backend: bool = True
    tolerance_total: float = 0.05
    tolerance_op: float = 0.08
    calibration: str | None = None
    calibrate: bool = True
    warmup: bool = True
    verbose: bool = False
    session: dict[str, Any] = field(default_factory=dict)  # --set KEY=VALUE: rlscope.profile options
    cpus: frozenset[int] | None = None  # --cpus: every run pinned to these CPUs
    time_limit: float | None = None  # --time-limit: start no repetition that would end past it (seconds)
    twin: bool = False  # --twin: timed and profiled runs side by side, in turns on one core
    turn_ms: float = TURN_MS


@dataclass
class ChildRun:
    """One run of the user's command: how it ended and what its record says."""

    mode: str
    rep: int
    returncode: int
    process_s: float  # measured by the parent, start to end of the process
    record: dict[str, Any] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)
    host: dict[str, float] | None = None  # the run's cores meanwhile (hoststat: busy, steal seconds)
    position: int = 0  # 1: it ran first in its repetition (a twin pair: it took the first turn)

    @property
    def measured_s(self) -> float | None:
        """In-process time: the rlscope.profile windows, or interpreter start to exit without any,
        less what a twin run waited for its partner's turns (rlscope/overhead/validate/twin.py).

        None for a profiled run: its time is the trace's wall.
        """
        if self.mode == "profiled":
            return None
        if self.record.get("profile_calls"):
            return float(self.record["window_s"]) - float(self.record.get("window_waited_s") or 0.0)
        turn = self.record.get("turn") or {}
        return float(self.record.get("process_s", 0.0)) - float(turn.get("waited_s", 0.0))

    @property
    def waited_s(self) -> float:
        """Seconds a twin run waited for its partner after its start (0 outside twin runs)."""
        return float((self.record.get("turn") or {}).get("waited_s", 0.0))


class _Parser(Parser):
    """The rlscope parser, whose errors raise RLScopeError (one line, exit 2, from rlscope's main)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise RLScopeError(f"validate: {message}")


def _parse_tolerance(text: str) -> tuple[float, float]:
    """``PCT`` (total and operations alike) or ``TOTAL,OPS`` in percent."""
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        raise RLScopeError(f"validate: --tolerance: not a percentage: {text!r}") from None
    if len(parts) not in (1, 2) or any(p <= 0 for p in parts):
        raise RLScopeError(f"validate: --tolerance wants PCT or TOTAL,OPS (percent, > 0), got {text!r}")
    return parts[0] / 100, parts[-1] / 100


def parse_args(argv: list[str]) -> Options:
    p = _Parser(
        prog="rlscope validate",
        description="Check rlscope's corrected profile of your program against the program unprofiled"
        " and under plain timers: rlscope validate [options] [--] python train.py ARGS...",
    )
    p.add_argument("--reps", type=int, default=5, help="runs per mode (default 5)")
    p.add_argument(
        "--max-reps",
        type=int,
        default=0,
        metavar="N",
        help="after --reps, add repetitions (doubling), up to N, until every checked figure's 90%%"
        " interval lies wholly inside or wholly outside its band (default: no more)",
    )
    p.add_argument(
        "--trace-dir", default=None, metavar="DIR", help="keep the profiled runs' traces here (rep-N each)"
    )
    p.add_argument("--json", default=None, metavar="FILE", help="write every measurement as JSON")
    p.add_argument(
        "--gpu",
        default=None,
        choices=["auto", "kineto", "cupti", "off"],
        help="GPU recording of the profiled runs, as in rlscope run (default auto)",
    )
    p.add_argument("--no-backend", action="store_true", help="profile without recording torch ops")
    p.add_argument(
        "--tolerance",
        default="5,8",
        metavar="PCT[,PCT]",
        help="pass band in percent for the total and for operations above 5%% of the run (default 5,8)",
    )
    p.add_argument("--calibration", default=None, metavar="FILE", help="overhead calibration to use")
    p.add_argument(
        "--no-calibrate", action="store_true", help="do not calibrate a machine that has no calibration yet"
    )
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed first run")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an rlscope.profile option for the profiled runs, e.g. --set full_share=0.3 or"
        " --set windows=false (repeatable; values are JSON, else strings)",
    )
    p.add_argument(
        "--cpus",
        default=None,
        metavar="LIST",
        help="run every mode on these CPUs only, e.g. 2-5 or 0,2,4 (the same cores for every run)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no repetition after the first that would end past SECONDS from the start"
        " (estimated from the last one); the verdict says where it stopped",
    )
    p.add_argument(
        "--twin",
        action="store_true",
        help="run each repetition's timed and profiled runs side by side, taking turns of ~50 ms on"
        " one core, so that both see the machine at the same speeds (no unprofiled runs; the total"
        " is checked against the timed run's)",
    )
    p.add_argument(
        "--turn-ms",
        type=float,
        default=twin.TURN_NS / 1e6,
        metavar="MS",
        help=f"--twin: a turn, a catch-up with the other run and a lead of half of it (default"
        f" {twin.TURN_NS / 1e6:g} ms)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show the program's output")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program to run (python train.py ...)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    if args.max_reps and args.max_reps < args.reps:
        p.error("--max-reps must be >= --reps")
    if args.time_limit is not None and not args.time_limit > 0:
        p.error("--time-limit must be > 0 seconds")
    if not 1 <= args.turn_ms <= 10_000:
        p.error("--turn-ms must be between 1 and 10000")
    command = program_command(args.command, "rlscope validate -- python train.py ...")
    total, ops = _parse_tolerance(args.tolerance)
    return Options(
        command=command,
        reps=args.reps,
        max_reps=args.max_reps,
        trace_dir=Path(args.trace_dir).resolve() if args.trace_dir else None,
        json_path=args.json,
        gpu=args.gpu,
        backend=not args.no_backend,
        tolerance_total=total,
        tolerance_op=ops,
        calibration=args.calibration,
        calibrate=not args.no_calibrate,
        warmup=not args.no_warmup,
        verbose=args.verbose,
        session=dict(_parse_setting(x) for x in args.set),
        cpus=_parse_cpus(args.cpus) if args.cpus is not None else None,
        time_limit=args.time_limit,
        twin=args.twin,
        turn_ms=args.turn_ms,
    )


def _parse_cpus(text: str) -> frozenset[int]:
    """``--cpus``: ``2-5``, ``0,2,4`` or a mix, each CPU one this process may run on."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise RLScopeError(f"validate: --cpus wants a list like 2-5 or 0,2,4, got {text!r}") from None
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if not cpus or not cpus <= allowed:
        raise RLScopeError(
            f"validate: --cpus {text}: not CPUs this process may use ({_cpu_list(allowed) or 'none known'})"
        )
    return frozenset(cpus)


def _cpu_list(cpus: Iterable[int]) -> str:
    """CPUs as ranges, e.g. ``0-3,6``."""
    out: list[str] = []
    for _, group in itertools.groupby(enumerate(sorted(cpus)), lambda ic: ic[1] - ic[0]):
        ids = [c for _, c in group]
        out.append(f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0]))
    return ",".join(out)


def _parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--set``: the value as JSON (numbers, true/false), else as a string."""
    import inspect

    from rlscope.session import Session

    key, sep, value = text.partition("=")
    known = [k for k in inspect.signature(Session.__init__).parameters if k not in ("self", "trace_dir")]
    if not sep or key not in known:
        raise RLScopeError(
            f"validate: --set wants KEY=VALUE with KEY one of {', '.join(known)}; got {text!r}"
        )
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def mode_order(rep: int) -> list[str]:
    """The modes of repetition ``rep``, rotated so that no mode always runs first (or after another)."""
    k = rep % len(MODES)
    return [*MODES[k:], *MODES[:k]]


def profile_overrides(opts: Options) -> dict[str, Any]:
    """Session options the validation imposes (only those the user gave)."""
    out: dict[str, Any] = dict(opts.session)
    if opts.gpu is not None:
        out["gpu"] = False if opts.gpu == "off" else opts.gpu
    if not opts.backend:
        out["backend"] = False
    return out


def child_env(opts: Options, mode: str, boot: Path, record: Path, trace: Path, whole: bool) -> dict[str, str]:
    """The environment of one child run (module docstring: the variables)."""
    env = dict(os.environ)
    for k in (
        MODE_ENV,
        RECORD_ENV,
        TRACE_ENV,
        OPTIONS_ENV,
        WHOLE_ENV,
        RUN_TRACE_DIR_ENV,
        RUN_OPTIONS_ENV,
        RUN_PARENT_ENV,
    ):
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(boot), env.get("PYTHONPATH", "")) if x)
    env[MODE_ENV] = _MODE_VALUE[mode]
    env[RECORD_ENV] = str(record)
    if whole:
        env[WHOLE_ENV] = "1"
    if mode == "profiled":
        if whole:  # as `rlscope run` does (rlscope/runtime/autorun.py)
            env[RUN_TRACE_DIR_ENV] = str(trace)
            env[RUN_OPTIONS_ENV] = json.dumps({"gpu": "auto", **profile_overrides(opts)})
        else:
            env[TRACE_ENV] = str(trace)
            env[OPTIONS_ENV] = json.dumps(profile_overrides(opts))
    return env


def run_child(
    command: list[str], env: dict[str, str], verbose: bool, cpus: frozenset[int] | None = None
) -> tuple[int, float, list[str]]:
    """Run the command; (exit status, seconds, last lines of its output unless ``verbose``).

    ``cpus``: pinned there before it starts (its threads and children inherit it). Every mode on
    the same cores takes the scheduler's placement out of the comparison."""
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    with _pinned(cpus):  # the calling thread's affinity, which the child inherits (no preexec_fn)
        t0 = time.perf_counter()
        proc = _start(command, env, verbose)
    with proc:
        try:
            for line in proc.stdout or ():  # verbose: the output goes to the terminal, no pipe
                tail.append(line.rstrip("\n"))
            code = proc.wait()
        except BaseException as e:
            # verbose: as subprocess.call did. Terminated: a SIGTERM sent to rlscope alone (not its
            # process group) must not leave the program running. A piped run's own SIGINT (Ctrl-C
            # reaches the whole group) is left to the program to finish.
            if verbose:
                proc.kill()
            elif isinstance(e, Terminated):
                proc.terminate()
            raise
    return code, time.perf_counter() - t0, list(tail)


@contextlib.contextmanager
def _pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """This thread on ``cpus`` for the block (Linux affinity is per thread and inherited at fork)."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _start(
    command: list[str], env: dict[str, str], verbose: bool, pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen:
    try:
        if verbose:
            return subprocess.Popen(command, env=env, pass_fds=pass_fds)
        return subprocess.Popen(
            command,
            env=env,
            pass_fds=pass_fds,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except (FileNotFoundError, PermissionError) as e:
        raise RLScopeError(f"{command[0]}: cannot run: {e.strerror or e}") from None


def profiled_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """What validation needs from an analyzer summary: walls and per-operation times, raw and corrected."""
    raw_ops = summary["raw"]["operations"]
    cal = summary.get("calibration", {})
    return {
        "raw_wall_s": summary["raw"]["wall_s"],
        "corrected_wall_s": summary["wall_s"],
        "corrected_for_overhead": bool(summary.get("corrected_for_overhead")),
        "calibration": cal.get("path") or f"{cal.get('status', '?')}: {cal.get('reason', '')}".strip(),
        "overhead": summary.get("overhead", {}),
        "warnings": summary.get("warnings", []),
        "operations": {
            op: {
                "raw_s": raw_ops.get(op, {}).get("total_s", 0.0),
                "corrected_s": e["total_s"],
                "raw_exclusive_s": raw_ops.get(op, {}).get("exclusive_s", 0.0),
                "corrected_exclusive_s": e["exclusive_s"],
                "calls": e["calls"],
            }
            for op, e in summary["operations"].items()
        },
    }


def _fail_line(run: ChildRun, why: str) -> str:
    lines = [f"validate: the command {why} in the {run.mode} run (repetition {run.rep + 1})"]
    if run.tail:
        lines.append("last lines of its output:")
        lines += [f"  {x}" for x in run.tail]
    return "\n".join(lines)


def steal_share(run: ChildRun) -> float | None:
    """Core-seconds the hypervisor took from the run's cores per second of the run (None where not
    known). Idle cores accrue no steal, so for a job that keeps one core busy this is the share of
    its time it lost to the host."""
    h = run.host
    if not h or run.process_s <= 0:
        return None
    return h["steal"] / run.process_s


def distinct_warnings(profiled: list[dict[str, Any]]) -> list[str]:
    """The profiled runs' analyzer warnings, once each: two that differ only in their figures (a
    switch count, an event count) are one line, the first run's, with how many runs said it.

    Why: every repetition's analysis says the same thing about the same program, and five lines of
    "only 5 window switches" / "only 4 window switches" bury the verdict under them."""
    seen: dict[str, list[Any]] = {}
    for p in profiled:
        for w in dict.fromkeys(p["warnings"]):
            key = re.sub(r"[0-9][0-9,.]*", "#", w)
            if key in seen:
                seen[key][1] += 1
            else:
                seen[key] = [w, 1]
    n = len(profiled)
    return [w if k == n or n < 2 else f"{w} ({k} of {n} runs)" for w, k in seen.values()]


def _reps(n: int) -> str:
    return f"{n} repetition" + ("" if n == 1 else "s")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a batch scheduler) while validating: stop as Ctrl-C does, keeping the
    repetitions already done."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated


class _Runner:
    """Runs the child processes of one validation in a scratch directory."""

    def __init__(self, opts: Options, work: Path, log: Any) -> None:
        self.opts, self.work, self.log = opts, work, log
        from rlscope.runtime import BOOT_DIR  # its sitecustomize calls child_boot, then autorun

        self.boot = BOOT_DIR
        self.traces = opts.trace_dir or work / "traces"
        self.whole: bool | None = None  # the script never calls rlscope.profile (known after one run)

    def trace_dir(self, rep: int) -> Path:
        return self.traces / f"rep-{rep + 1}"

    def _prepare(self, mode: str, rep: int, tag: str = "") -> tuple[Path, dict[str, str]]:
        """A run's record path and environment (its trace directory emptied)."""
        record = self.work / f"{mode}{tag}-{rep + 1}.json"
        trace = self.trace_dir(rep)
        if mode == "profiled":
            from rlscope.trace import clear_trace_dir

            clear_trace_dir(trace)
        return record, child_env(self.opts, mode, self.boot, record, trace, bool(self.whole))

    def _label(self, rep: int) -> str:
        most = max(self.opts.reps, self.opts.max_reps)
        of = f"{self.opts.reps}-{most}" if most > self.opts.reps else str(most)
        return "warm-up" if rep < 0 else f"repetition {rep + 1}/{of}"

    def _cores(self) -> frozenset[int] | None:
        if self.opts.cpus:
            return self.opts.cpus
        return frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None

    def run(self, mode: str, rep: int) -> ChildRun:
        """One run; RLScopeError when the command fails or leaves no record."""
        record, env = self._prepare(mode, rep)
        self.log(f"{self._label(rep)}: {mode} ...")
        cores = self._cores()
        before = hoststat.core_seconds(cores)
        code, seconds, tail = run_child(self.opts.command, env, self.opts.verbose, self.opts.cpus)
        host = hoststat.delta(before, hoststat.core_seconds(cores))
        position = mode_order(rep).index(mode) + 1 if rep >= 0 else 1
        return self._finish(
            ChildRun(mode, rep, code, seconds, tail=tail, host=host, position=position), record
        )

    def run_pair(
        self, rep: int, modes: tuple[str, str] = ("timers", "profiled"), counted: bool = True
    ) -> list[ChildRun]:
        """Two runs side by side, in turns on one core (rlscope/overhead/validate/twin.py): each turn catches up with
        the partner's count, then leads for half of ``--turn-ms``; which run takes the first turn
        alternates by repetition (``modes[0]`` in even ones). The two runs, the first one first. Two
        runs of the same mode are the method's null (benchmarks/twin_null.py); ``counted=False``
        makes both sides take turns by time (the null's control for the count matching)."""
        lead_first = rep % 2 == 0
        order = [0, 1] if lead_first else [1, 0]
        tags = ("", "-twin") if modes[0] == modes[1] else ("", "")
        cores = self._cores()
        main_cpu, aux = twin_cores(cores)
        turn_ns = int(self.opts.turn_ms * 1e6)
        r0, w0 = os.pipe()  # modes[0] reads its turns here; modes[1] writes them
        r1, w1 = os.pipe()
        specs = (
            twin.Spec(r0, w1, not counted, lead_first, turn_ns, main_cpu, aux),
            twin.Spec(r1, w0, not counted, not lead_first, turn_ns, main_cpu, aux),
        )
        partner_w = {0: w1, 1: w0}  # the parent's DONE when a run exits
        prepared = {i: self._prepare(modes[i], rep, tags[i]) for i in order}
        where = f" on CPU {main_cpu}" if main_cpu is not None else ""
        first = f"{modes[order[0]]}{tags[order[0]]}"
        self.log(f"{self._label(rep)}: {modes[0]} and {modes[1]} in turns{where}, {first} first ...")
        before = hoststat.core_seconds(cores)
        procs: dict[int, subprocess.Popen] = {}
        try:
            try:
                with _pinned(self.opts.cpus):
                    t0 = time.perf_counter()
                    for i in order:
                        env = {**prepared[i][1], twin.TURN_ENV: specs[i].encode()}
                        procs[i] = _start(
                            self.opts.command, env, self.opts.verbose, (specs[i].rfd, specs[i].wfd)
                        )
            finally:
                os.close(r0)
                os.close(r1)
            ended = _wait_pair(procs, partner_w, t0, self.opts.verbose)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            os.close(w0)
            os.close(w1)
        host = hoststat.delta(before, hoststat.core_seconds(cores))
        runs = []
        for pos, i in enumerate(order):
            code, seconds, tail = ended[i]
            own = dict(host) if host else None
            run = ChildRun(modes[i], rep, code, seconds, tail=tail, host=own, position=pos + 1)
            runs.append(self._finish(run, prepared[i][0]))
        return runs

    def _finish(self, run: ChildRun, record: Path) -> ChildRun:
        """Check a run's exit and read its record; RLScopeError when it failed or left none."""
        cores = self._cores()
        code, seconds = run.returncode, run.process_s
        if run.host is not None:
            run.host["cores"] = len(cores) if cores else os.cpu_count() or 1
        if code != 0:
            raise RLScopeError(_fail_line(run, f"exited with status {code}"))
        if not record.exists():
            raise RLScopeError(
                _fail_line(run, "left no measurement (not a Python program, or it ended through os._exit?)")
            )
        run.record = json.loads(record.read_text())
        if self.whole is None:
            self.whole = run.record["profile_calls"] == 0
        measured = run.measured_s
        stolen = f", {steal_share(run):.1%} of it stolen by the host" if steal_share(run) else ""
        shown = f", measured {measured:.2f} s" if measured is not None else ""
        waited = f", waited {run.waited_s:.1f} s for its twin" if run.record.get("turn") else ""
        self.log(f"  {run.mode}: ran {seconds:.1f} s{shown}{waited}{stolen}")
        return run


def twin_cores(cores: Iterable[int] | None) -> tuple[int | None, tuple[int, ...]]:
    """Where a twin pair runs: both main threads on the highest core given, every other thread on
    the rest (the main threads take turns; the rest would crowd them); (None, ()) where the cores
    are not known."""
    if not cores:
        return None, ()
    ids = sorted(cores)
    return ids[-1], tuple(ids[:-1])


def _wait_pair(
    procs: dict[int, subprocess.Popen], partner_w: dict[int, int], t0: float, verbose: bool
) -> dict[int, tuple[int, float, list[str]]]:
    """Wait for both runs of a twin pair, reading their output; when one exits, tell the other
    (DONE on its turns' pipe), so it never waits for a turn that will not come. Per key: exit
    status, seconds since ``t0``, the last lines of its output."""
    import struct

    out: dict[int, tuple[int, float, list[str]]] = {}

    def watch(key: int, proc: subprocess.Popen) -> None:
        tail: deque[str] = deque(maxlen=_TAIL_LINES)
        try:
            for line in proc.stdout or ():
                tail.append(line.rstrip("\n"))
            code = proc.wait()
        finally:
            with contextlib.suppress(OSError):
                os.write(partner_w[key], struct.pack("<q", twin.DONE))
        out[key] = (code, time.perf_counter() - t0, list(tail))

    threads = [threading.Thread(target=watch, args=kv, daemon=True) for kv in procs.items()]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # a timed join: Ctrl-C and SIGTERM reach this thread meanwhile
    except BaseException as e:
        for p in procs.values():
            if verbose or isinstance(e, Terminated):
                p.terminate() if isinstance(e, Terminated) else p.kill()
        raise
    return out


def look_points(reps: int, max_reps: int) -> list[int]:
    """The repetition counts at which ``--max-reps`` looks at the intervals: ``reps``, then each
    doubling, then ``max_reps``. Few looks keep each look's interval narrow (median_interval's
    Bonferroni share), and doubling still stops a quiet machine early. A count too small to give
    any interval at the looks' shared level (five runs cannot reach 95%) is no look: it would
    spend a share of the confidence on nothing."""
    points = [reps]
    while points[-1] * 2 < max_reps:
        points.append(points[-1] * 2)
    if max_reps > reps:
        points.append(max_reps)
    while len(points) > 1:
        # [min, max] of n runs holds the median with 1 - 2^(1-n): n must reach 1 + log2(10 K)
        useful = [n for n in points if 2.0 ** (1 - n) <= 0.10 / len(points)]
        if len(useful) == len(points) or not useful:
            break
        points = useful
    return points


def settled(result: dict[str, Any]) -> bool:
    """Every checked figure's 90% interval lies wholly inside its band or wholly outside it: more
    repetitions would not change the verdict's meaning (:func:`judge`)."""
    checked = [r for r in result["rows"] if r["tolerance"] is not None]
    return all(r.get("judged") in ("confirmed", "systematic") for r in checked)


def validate(opts: Options, log: Any = lambda msg: None, started: float | None = None) -> dict[str, Any]:
    """Run the repetitions of every mode, analyze the traces, and compare (see :func:`compare`).

    ``opts.reps`` repetitions always; then, up to ``opts.max_reps``, more until the comparison is
    :func:`settled` at one of the :func:`look_points`. On a noisy machine a verdict on five
    repetitions is often "inconclusive"; repetitions added until each interval clears its band's
    edge cost only what the machine's noise requires. ``started``: ``time.perf_counter()`` when the
    command began, so ``--time-limit`` counts a first calibration too (default: now).
    """
    costs = measure_timer_costs()
    got = _Measured()
    result: dict[str, Any] = {}
    points = look_points(opts.reps, max(opts.reps, opts.max_reps))
    t0 = started if started is not None else time.perf_counter()  # --time-limit counts from it
    with tempfile.TemporaryDirectory(prefix="rlscope-validate-") as tmp:
        runner = _Runner(opts, Path(tmp), log)
        try:
            if opts.warmup:
                runner.run("unprofiled", -1)
            rep_s = 0.0  # the last repetition's seconds
            for rep in itertools.count():
                if rep in points:
                    if rep == points[-1] or settled(result):
                        break
                    nxt = points[points.index(rep) + 1]
                    log(f"not settled after {rep} repetitions: running to {nxt}")
                elapsed = time.perf_counter() - t0
                if rep and opts.time_limit is not None and elapsed + rep_s > opts.time_limit:
                    log(f"--time-limit: one more repetition (~{rep_s:.0f} s) ends past {opts.time_limit:g} s")
                    result["stopped"] = f"--time-limit {opts.time_limit:g} s after {_reps(rep)}"
                    break
                _one_rep(opts, runner, rep, costs, got, log)
                rep_s = time.perf_counter() - t0 - elapsed
                result = _result(opts, costs, got, bool(runner.whole))
        except KeyboardInterrupt as e:
            if not result:
                raise
            terminated = isinstance(e, Terminated)
            why = "SIGTERM" if terminated else "interrupted"
            log(f"{why}: keeping the {result['reps']} repetitions done")
            result["stopped"] = f"{why} after {_reps(result['reps'])}"
            result["signal"] = "SIGTERM" if terminated else "SIGINT"
    if result.get("stopped"):
        v = result["verdict"]
        v["line"] += f" [stopped early: {result['stopped']}]"
    return result


@dataclass
class _Measured:
    """What the runs so far measured: every run, and per repetition the timer runs' figures and
    blocks and the profiled run's analyzed figures."""

    runs: list[ChildRun] = field(default_factory=list)
    timers: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[dict[str, list[float]]] = field(default_factory=list)
    samples: list[dict[str, list[list[float]]]] = field(default_factory=list)  # [block median, instances]
    profiled: list[dict[str, Any]] = field(default_factory=list)


def _one_rep(
    opts: Options, runner: _Runner, rep: int, costs: dict[str, float], got: _Measured, log: Any
) -> None:
    """Every mode once (in :func:`mode_order`), each run's figures appended to ``got``."""
    from rlscope.analysis import analyze

    for run in runner.run_pair(rep) if opts.twin else (runner.run(mode, rep) for mode in mode_order(rep)):
        mode = run.mode
        got.runs.append(run)
        if mode == "timers":
            got.timers.append(corrected_timers(run.record["timers"], costs))
            # an instance's own timer boundaries (the part inside it) off its exclusive time
            own, blocks = costs["inside"], run.record.get("blocks", {})
            got.blocks.append({op: [x - own for x in q] for op, q in blocks.items()})
            samples = run.record.get("block_samples", {})
            got.samples.append({op: [[m - own, n] for m, n in xs] for op, xs in samples.items()})
        elif mode == "profiled":
            summary = analyze(runner.trace_dir(rep), calibration=opts.calibration, intervals=False).summary
            got.profiled.append({"trace_dir": summary["trace_dir"], **profiled_figures(summary)})
            p = got.profiled[-1]
            if opts.twin:  # its waits for the twin's turns are in the raw trace, as rlscope's time
                p["turn_waited_s"] = run.waited_s
                p["raw_wall_s"] -= run.waited_s
            log(f"  analyzed: wall {p['raw_wall_s']:.2f} s raw, {p['corrected_wall_s']:.2f} s corrected")


def _result(opts: Options, costs: dict[str, float], got: _Measured, whole: bool) -> dict[str, Any]:
    """The validation's JSON from the runs so far, compared."""
    result: dict[str, Any] = {
        "schema": "rlscope.overhead.validate.runner/1",
        "command": opts.command,
        "reps": len(got.profiled),
        "min_reps": opts.reps,
        "max_reps": max(opts.reps, opts.max_reps),
        # how often the stopping rule may look at the intervals (look_points, median_interval)
        "looks": len(look_points(opts.reps, max(opts.reps, opts.max_reps))),
        "profile_overrides": profile_overrides(opts),
        "cpus": _cpu_list(opts.cpus) if opts.cpus else None,
        "twin": {"turn_ms": opts.turn_ms} if opts.twin else None,
        "script_calls_profile": not whole,
        "reference": "interpreter start to exit" if whole else "rlscope.profile start to stop",
        "tolerance": {
            "total": opts.tolerance_total,
            "operation": opts.tolerance_op,
            "shown_share": SHOWN_SHARE,
            "checked_share": CHECKED_SHARE,
        },
        "timer_costs_ns": costs,
        "runs": [
            {
                "mode": r.mode,
                "rep": r.rep + 1,
                "position": r.position,
                "process_s": r.process_s,
                "measured_s": r.measured_s,
                "waited_s": r.waited_s,
                "turn": r.record.get("turn"),
                # a timed run's time less its timers' own cost (the twin's reference for the total)
                "net_s": None if r.measured_s is None else r.measured_s - timer_cost_s(r.record, costs),
                "returncode": r.returncode,
                "host": r.host,
                "steal_share": steal_share(r),
            }
            for r in got.runs
        ],
        # copies: a repetition cut short by a signal appends to the lists after this result
        "timers": list(got.timers),
        "timer_blocks": list(got.blocks),
        "timer_block_samples": list(got.samples),
        "profiled": list(got.profiled),
    }
    result.update(compare(result, opts))
    return result


def _by_rep(runs: list[dict[str, Any]], mode: str) -> list[float]:
    return [r["measured_s"] for r in sorted(runs, key=lambda r: r["rep"]) if r["mode"] == mode]


def _row(
    name: str, share: float, ref: list[float], prof: list[dict[str, float]], tol: float | None, looks: int = 1
) -> dict:
    """One table row: per repetition reference, raw, corrected; errors paired by repetition."""
    raw = [p["raw"] for p in prof]
    cor = [p["corrected"] for p in prof]
    err = [c / r - 1 if r > 0 else None for c, r in zip(cor, ref, strict=True)]
    slow = [a / r if r > 0 and a is not None else None for a, r in zip(raw, ref, strict=True)]
    known = [e for e in err if e is not None]
    median_err = statistics.median(known) if known else None
    return {
        "operation": name,
        "share": share,
        "reference_s": ref,
        "raw_s": raw,
        "corrected_s": cor,
        "error": err,
        "raw_slowdown": slow,
        "median_error": median_err,
        "interval": median_interval(known, looks),
        "tolerance": tol,
        "ok": None if tol is None else median_err is not None and abs(median_err) <= tol,
    }


def median_interval(errors: list[float], looks: int = 1) -> list[float] | None:
    """Distribution-free 90% interval of the median error over repetitions, from order statistics:
    where the correction's typical error lies, given how much the repetitions disagree. None when
    there are too few repetitions for that confidence (fewer than 5 at 90%).

    The verdict is on medians, so the interval is too; and it assumes nothing about the errors'
    distribution, which on the machines measured is not normal (a process draws one of the
    machine's speeds, BENCHMARKS §9): one run in the slow speed widens a t-interval of the mean
    by its whole distance, and an order-statistic interval of the median by one rank. The interval
    [x(k), x(n+1-k)] of the sorted errors holds the median with probability 1 - 2 P(Bin(n, 1/2) < k);
    the narrowest one with at least the confidence asked is taken. ``looks``: how many times a
    sequential rule (``--max-reps``) may look at it to decide whether to stop; each look then asks
    1 - 10%/looks (Bonferroni), so stopping at the first interval that clears its band keeps the
    90% claim."""
    n = len(errors)
    want = 1 - 0.10 / max(1, looks)
    xs = sorted(errors)
    best = None
    below = 0  # P(Bin(n, 1/2) <= k - 1), k counting up from 1
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2**n
        if 1 - 2 * below < want:
            break
        best = [xs[k - 1], xs[n - k]]
    return best


def judge(row: dict[str, Any]) -> str:
    """``systematic`` (every plausible error is outside the band), ``confirmed`` (every plausible
    error is inside it) or ``inconclusive``, from the row's interval and tolerance."""
    iv, tol = row.get("interval"), row["tolerance"]
    if iv is None or tol is None:
        return "inconclusive"
    if iv[0] > tol or iv[1] < -tol:
        return "systematic"
    if -tol <= iv[0] and iv[1] <= tol:
        return "confirmed"
    return "inconclusive"


def compare(result: dict[str, Any], opts: Options) -> dict[str, Any]:
    """Rows (the total, then operations above 1% of the run) and the verdict.

    Total: unprofiled in-process time vs the profiled trace's wall (twin runs: the timed run's time,
    its timers' own cost taken off). Operations: inclusive time under the timers vs the trace's.
    Errors are paired by repetition (the runs of one repetition ran back to back, or in turns);
    the verdict is on their medians.
    """
    twin_runs = bool(result.get("twin"))
    if twin_runs:
        timed = sorted((r for r in result["runs"] if r["mode"] == "timers"), key=lambda r: r["rep"])
        unprof = [r["net_s"] for r in timed]
    else:
        unprof = _by_rep(result["runs"], "unprofiled")
    base = statistics.median(unprof)
    walls = [{"raw": p["raw_wall_s"], "corrected": p["corrected_wall_s"]} for p in result["profiled"]]
    looks = result.get("looks", 1)
    rows = [_row("[total]", 1.0, unprof, walls, opts.tolerance_total, looks)]
    names: dict[str, float] = {}
    for t in result["timers"]:
        for op in t:
            names[op] = statistics.median(x.get(op, {}).get("inclusive_s", 0.0) for x in result["timers"])
    for op, med in sorted(names.items(), key=lambda kv: -kv[1]):
        share = med / base if base > 0 else 0.0
        if share < SHOWN_SHARE:
            continue
        ref = [t.get(op, {}).get("inclusive_s", 0.0) for t in result["timers"]]
        prof = [
            {
                # twin runs: an operation's raw time holds the waits for the twin's turns inside it
                "raw": None if twin_runs else p["operations"].get(op, {}).get("raw_s", 0.0),
                "corrected": p["operations"].get(op, {}).get("corrected_s", 0.0),
            }
            for p in result["profiled"]
        ]
        rows.append(_row(op, share, ref, prof, opts.tolerance_op if share >= CHECKED_SHARE else None, looks))
        rows[-1].update(speed_rows(result, op))
        rows[-1].update(matched_row(result, op, ref, prof))
    misses = [r["operation"] for r in rows if r["ok"] is False]
    corrected = all(p["corrected_for_overhead"] for p in result["profiled"])
    noise = noise_floor(unprof)
    line = (
        f"{'PASS' if not misses else 'FAIL'}: total within ±{opts.tolerance_total:.0%}"
        f" and operations above {CHECKED_SHARE:.0%} of the run within ±{opts.tolerance_op:.0%}"
        + (f"; missed: {', '.join(misses)}" if misses else "")
        + ("" if corrected else f" (not corrected: {result['profiled'][0]['calibration']})")
    )
    # how sure: each checked row's 90% interval against its band (the verdict itself is on medians)
    checked = [r for r in rows if r["tolerance"] is not None]
    for r in checked:
        r["judged"] = judge(r)
    systematic = [r for r in checked if r["ok"] is False and r["judged"] == "systematic"]
    unsure = [r for r in checked if r["ok"] is False and r["judged"] != "systematic"]
    unconfirmed = [r for r in checked if r["ok"] and r["judged"] != "confirmed"]
    if systematic:
        line += "; systematic: " + ", ".join(
            f"{r['operation']} ({r['interval'][0]:+.0%}..{r['interval'][1]:+.0%})" for r in systematic
        )
    for label, group in (("inconclusive", unsure), ("not confirmed", unconfirmed)):
        if group:
            line += f"; {label}: " + ", ".join(r["operation"] for r in group)
    drift = speed_drift(checked)
    if unsure or unconfirmed:
        line += f" (their 90% intervals reach across the band; the unprofiled runs vary by ±{noise:.0%}:" + (
            f" not settled after {len(unprof)} repetitions, the most --max-reps allowed)"
            if result.get("looks", 1) > 1
            else " more --reps, --max-reps or a longer run narrow them)"
        )
    matched = light_level_clause(checked, opts.tolerance_op)
    if matched:
        line += "; " + matched["line"]
    if drift and (misses or unconfirmed):
        line += "; " + drift_text(drift)
    elif checked and not misses:
        line += "; confirmed: every checked figure's 90% interval lies inside its band"
    verdict = {
        "pass": not misses,
        "misses": misses,
        "line": line,
        "noise": noise,
        "systematic": [r["operation"] for r in systematic],
        "inconclusive": [r["operation"] for r in unsure],
        "not_confirmed": [r["operation"] for r in unconfirmed],
        "speed_drift": drift,
        "speed_matched": matched,
    }
    return {"rows": rows, "verdict": verdict}


def matched_row(
    result: dict[str, Any], op: str, ref: list[float], prof: list[dict[str, float]]
) -> dict[str, Any]:
    """``op``'s corrected error per repetition against the timed reference scaled to the profiled
    run's mix of the machine's speeds (rlscope/overhead/validate/speed_match.py): ``speed_mix`` is that scale (1: no
    two speeds seen, or nothing to place them by), ``matched_error`` the error, ``matched_median``
    its median. The profiled side's levels come from its light windows and its mix of speeds from
    all its windows (speed_match.profiled), the timed side's from its quarter-second blocks."""
    from rlscope.overhead.validate import speed_match

    samples = result.get("timer_block_samples") or []
    mixes: list[float] = []
    errors: list[float | None] = []
    levels: list[float | None] = []
    for i, p in enumerate(prof):
        ops = result["profiled"][i].get("overhead", {}).get("windows", {}).get("operations", {})
        windows = ops.get(op) or {}
        timed = (samples[i] if i < len(samples) else {}).get(op) or []
        t_speeds = speed_match.split(timed)
        p_speeds = speed_match.profiled(windows.get("light_windows") or [], windows.get("full_windows") or [])
        mix = speed_match.mix_factor(t_speeds, p_speeds)
        mixes.append(mix)
        levels.append(speed_match.level_ratio(t_speeds, p_speeds))
        scaled = ref[i] * mix
        errors.append(p["corrected"] / scaled - 1 if scaled > 0 else None)
    known = [e for e in errors if e is not None]
    seen = [lv for lv in levels if lv is not None]
    return {
        "speed_mix": mixes,
        "matched_error": errors,
        "matched_median": statistics.median(known) if known else None,
        # the light windows' level over the timed runs' at the same speed, less one, per repetition
        "light_level": [None if lv is None else lv - 1 for lv in levels],
        "light_level_median": statistics.median(seen) - 1 if seen else None,
    }


def light_level_clause(checked: list[dict[str, Any]], tolerance: float) -> dict[str, Any] | None:
    """The light state's own cost per checked operation, at the same speed on both sides
    (``light_level``), when some repetition gave one; None otherwise.

    Only this goes in the line. The mix-scaled errors (``matched_error``) stay in the JSON: they
    hold for a loop whose instances are alike, but a loop with phases of its own 1.25-2x apart
    reads them as speeds, and its light windows sample its phases unevenly (DQN on the VM: the
    reference scaled by 0.82-0.96x where the plain errors were right, matched errors up to +31%).
    A level ratio compares like with like, speed or phase, and needs no mix.
    """
    level = [r for r in checked if r.get("light_level_median") is not None]
    if not level:
        return None
    over = [r["operation"] for r in level if abs(r["light_level_median"]) > tolerance]
    figures = ", ".join(
        f"{r['operation']} {r['light_level_median']:+.1%}"
        f" ({sum(x is not None for x in r['light_level'])} of {len(r['light_level'])})"
        for r in level
    )
    return {
        "light_level": {r["operation"]: r["light_level_median"] for r in level},
        "over_tolerance": over,
        "line": (
            "light windows over timed runs at the same machine speed (the light state's own cost;"
            f" repetitions where both showed one): {figures}"
        ),
    }


def speed_rows(result: dict[str, Any], op: str) -> dict[str, Any]:
    """How fast the machine ran ``op`` over time, in the profiled and in the timed runs.

    Profiled runs: ``op``'s median exclusive time per light window (analysis/windows.py,
    ``light_window_ns``); timed runs: per quarter second (``TimerAggregate.block_quantiles``). Each
    as the 10th / 50th / 90th percentile over the windows or blocks, the widest over the
    repetitions:

    - ``light_spread`` and ``timer_spread``: p10 and p90 around p50. How far the machine's own
      speed moved within one run (other tenants, CPU frequency). The windows pair neighbours and do
      not feel it; a comparison between two processes does, by up to that much.
    - ``fast_error``: the profiled runs' p10 over the timed runs' p10, less one. The two kinds of
      run compared at the machine's fast end, where the speed moves least: a light state that
      costs the job nothing but its residual events gives about zero, whatever the machine did.
    """
    ops = [p.get("overhead", {}).get("windows", {}).get("operations", {}) for p in result["profiled"]]
    light = [q for o in ops if (q := o.get(op, {}).get("light_window_ns"))]
    timed = [q for b in result.get("timer_blocks", []) if (q := b.get(op))]

    def spread(qs: list[list[float]]) -> list[float] | None:
        rel = [(q[0] / q[1] - 1, q[2] / q[1] - 1) for q in qs if q[1] > 0]
        return [min(lo for lo, _ in rel), max(hi for _, hi in rel)] if rel else None

    fast = None
    if light and timed:
        ref = statistics.median(q[0] for q in timed)
        fast = statistics.median(q[0] for q in light) / ref - 1 if ref > 0 else None
    return {"light_spread": spread(light), "timer_spread": spread(timed), "fast_error": fast}


def speed_drift(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The checked operation whose speed moved the most within runs (profiled or timed), with its
    fast-end comparison (:func:`speed_rows`)."""
    width = lambda sp: sp[1] - sp[0] if sp else -1.0  # noqa: E731
    known = [r for r in rows if r.get("light_spread") or r.get("timer_spread")]
    if not known:
        return None
    r = max(known, key=lambda r: max(width(r.get("light_spread")), width(r.get("timer_spread"))))
    return {
        "operation": r["operation"],
        "light_spread": r.get("light_spread"),
        "timer_spread": r.get("timer_spread"),
        "fast_error": r.get("fast_error"),
        "light_level": r.get("light_level_median"),
    }


def drift_text(drift: dict[str, Any]) -> str:
    """The verdict's clause on the machine's own speed (:func:`speed_drift`)."""
    labels = (("light windows", "light_spread"), ("timed runs' quarter seconds", "timer_spread"))
    parts = [f"{label} {drift[key][0]:+.0%}..{drift[key][1]:+.0%}" for label, key in labels if drift.get(key)]
    text = (
        f"the machine's speed moved within runs ({drift['operation']}'s median time, 10th-90th percentile"
        f" around the median: {', '.join(parts)})"
    )
    # the same-speed level says the fast end's thing better (a run's p10 can be its other speed, or
    # a phase: DQN's read +19% at the fast end on the VM where its light state costs 0%)
    if drift.get("fast_error") is not None and drift.get("light_level") is None:
        fast = drift["fast_error"]
        text += f"; at the fast end (10th percentiles) light windows are {fast:+.1%} from timed runs"
    return text


def noise_floor(values: list[float]) -> float:
    """Half the relative range of the unprofiled runs: how far apart two runs of the same program are."""
    good = [v for v in values if v]
    if len(good) < 2:
        return 0.0
    return (max(good) - min(good)) / 2 / statistics.median(good)


def _spread(values: list[float | None], fmt: str, spread: bool = True) -> str:
    """``median [min–max]`` of the values there are (the median alone for one, or when asked)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    med = format(statistics.median(vals), fmt)
    if len(vals) == 1 or not spread:
        return med
    return f"{med} [{format(min(vals), fmt)}–{format(max(vals), fmt)}]"


def _times(values: list[float | None]) -> str:
    """A slowdown's median as ``1.23x``; ``-`` when none is known."""
    text = _spread(values, ".2f", spread=False)
    return text if text == "-" else text + "x"


def render(result: dict[str, Any], console: Any = None) -> None:
    """The comparison table and the verdict line."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 132))  # a log file: no wrapped cells
    n = result["reps"]
    table = Table(
        title=escape(f"rlscope validate: {n} run{'s' if n > 1 else ''} per mode, median [min–max]"),
        title_justify="left",
        header_style="bold",
    )
    table.add_column("operation")
    for col in ("share", "unprofiled / timers s", "raw s", "corrected s", "corrected error", "raw slowdown"):
        table.add_column(col, justify="right")
    table.add_column("ok", justify="center")
    for r in result["rows"]:
        ok = {None: "", True: "[green]yes[/]", False: "[red]NO[/]"}[r["ok"]]
        table.add_row(
            escape(r["operation"]),
            f"{r['share']:.0%}",
            escape(_spread(r["reference_s"], ".3f")),
            _spread(r["raw_s"], ".3f", spread=False),
            _spread(r["corrected_s"], ".3f", spread=False),
            escape(_spread(r["error"], "+.1%")),
            _times(r["raw_slowdown"]),
            ok,
        )
    console.print(table)
    if result.get("twin"):
        console.print(
            f"twin runs: timed and profiled side by side, in turns of {result['twin']['turn_ms']:g} ms on"
            f" one core; total: the timed run's time from {result['reference']}, its waits and its timers'"
            " cost taken off; operations: inclusive time under plain timers (raw per operation not shown:"
            " it holds the waits)"
        )
    else:
        console.print(
            f"total: unprofiled time from {result['reference']}; operations: inclusive time under plain"
            f" timers (their own cost, {result['timer_costs_ns']['pair']:.0f} ns per scope, taken off)"
        )
    for w in distinct_warnings(result["profiled"]):
        console.print(f"analyzer: {escape(w)}", style="yellow")
    style = "bold green" if result["verdict"]["pass"] else "bold red"
    console.print(f"[{style}]{escape(result['verdict']['line'])}[/]")


def main(argv: list[str]) -> int:
    """``rlscope validate``: 0 when the corrected profile is within tolerance, 1 when not."""
    started = time.perf_counter()
    opts = parse_args(argv)

    def log(msg: str) -> None:
        print(f"rlscope validate: {msg}", file=sys.stderr, flush=True)

    import signal

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if opts.calibration is None and opts.calibrate:
            from rlscope.cli.main import ensure_calibration

            # a machine's first calibration counts against --time-limit and is the quick one there: a
            # full one took minutes on a noisy H100 and left no time for a single repetition
            ensure_calibration(quick=opts.time_limit is not None)
        result = validate(opts, log, started)
    except Terminated:
        print("rlscope validate: terminated (SIGTERM) before a repetition was done", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("rlscope validate: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if opts.json_path:
        try:
            Path(opts.json_path).write_text(json.dumps(result, indent=1) + "\n")
        except OSError as e:
            raise RLScopeError(f"{opts.json_path}: cannot write: {e.strerror or e}") from None
    render(result)
    if result.get("signal"):  # cut short: the figures so far are written and shown, the exit says why
        return 143 if result["signal"] == "SIGTERM" else 130
    return 0 if result["verdict"]["pass"] else 1
