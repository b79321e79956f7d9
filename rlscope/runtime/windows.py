"""The alternating windows of a session: when the expensive collectors are on, and who switches them.

A session keeps every collector that can be switched (a :class:`~rlscope.collectors.protocol.Toggler`)
on in full windows and off in light ones, so the analysis measures their cost in the run itself
(docs/overhead.md, rlscope/overhead/correct/windows.py). Between detail stretches
(rlscope/trace/detail.py) they stay off. Switches come at the main thread's scope exits (annotate.py
and the C lean path read the session's ``window_due_ns`` and call :meth:`Session.switch_window`), from
the window timer's thread when no scope exit comes, and at ``backward()`` returns inside a long
operation.

The due times the boundaries compare with (``window_due_ns``, ``long_op_ns``) stay attributes of the
session, mirrored into C (rlscope/session.py); this module owns the schedule that sets them.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from typing import TYPE_CHECKING

from rlscope import annotate, categories
from rlscope.overhead.correct import reference
from rlscope.runtime.ticks import NEVER
from rlscope.text import printable
from rlscope.trace import detail as detail_schedule
from rlscope.trace import schema as S
from rlscope.trace.detail import DetailSchedule

if TYPE_CHECKING:
    from rlscope.collectors.protocol import Toggler
    from rlscope.session import Session

SWITCH_BUDGET = 0.03  # the windows' switches take at most this share of the run (Windows.window_length_ns)
MAX_WINDOW_SCALE = 50.0  # and windows grow at most this much for it (5 s with the default 0.1 s)
# each window's length is random, WINDOW_FLOOR of its nominal length plus an exponential share of
# the rest (mean kept, at most WINDOW_CAP times it): windows of fixed length lock onto a loop's
# period (Windows.window_length_ns); False: fixed lengths
WINDOW_RANDOM = True
WINDOW_FLOOR = 0.3
WINDOW_CAP = 4.0
# a top-level operation on the main thread that lasted at least this share of a window is "long":
# its next call starts in the other kind of window (Windows.long_op_entry)
LONG_OP_SHARE = 0.5
# the window timer (Windows.switch_on_schedule): a window due for this share of its length that no
# scope exit on the main thread has switched is switched by the timer, when no operation is open on
# the main thread; while one is, the timer looks again this often
TIMER_GRACE = 0.1
TIMER_BUSY_POLL_S = 0.05
# the shared window grid of a distributed job (SharedWindows): a pair of windows lasts at least this
SHARED_PAIR_S = 1.0
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


class Windows:
    """One session's window schedule and the collectors it switches (its togglers)."""

    def __init__(
        self, session: Session, detail: DetailSchedule, *, window_s: float, full_share: float
    ) -> None:
        self.s = session
        self.detail = detail  # when full event detail is kept (rlscope/trace/detail.py)
        self.origin_ns = 0  # the schedule's origin on the session's clock, set at start
        self.mode = S.WINDOW_FULL
        # a pair of windows lasts 2 * window_s; full_share of it has every collector on (less
        # raw slowdown with a smaller share, fewer samples of categories and GPU work)
        self._window_ns = {
            S.WINDOW_FULL: int(2 * window_s * full_share * 1e9),
            S.WINDOW_LIGHT: int(2 * window_s * (1 - full_share) * 1e9),
        }
        self.togglers: list[Toggler] = []
        # togglers that joined while the collectors were starting, before the windows did
        # (a collector that starts on torch's import, with torch already imported)
        self._early: list[Toggler] = []
        self.started = False
        self._switch_ns = {S.WINDOW_FULL: 0, S.WINDOW_LIGHT: 0}  # the last switch into each mode took
        # the window timer's thread (switch_on_schedule), its stop flag, and the lock that keeps its
        # switches and the main thread's apart
        self._timer: threading.Thread | None = None
        self._timer_stop = threading.Event()
        self._switch_lock = threading.RLock()  # reentrant: a collector switched may import torch
        self._finish_due: int | None = None  # a light window the timer began: the window's real due
        self._window_began_ns = 0  # when the current window began (the last switch)
        self.timer_due_ns = NEVER  # when the timer may switch the current window (switch_on_schedule)
        self._jitter = random.Random(0x726C73)  # seeded: a run's windows are the same each time
        # a distributed job's processes share one grid of windows (SharedWindows); None: own windows
        pair_ns = int(max(2 * window_s, SHARED_PAIR_S) * 1e9)
        self._shared = SharedWindows(pair_ns, full_share) if shared_windows_wanted() else None

    def after_fork(self) -> None:
        """In a forked child: the parent's timer thread did not survive, and its lock may have been held."""
        self._timer, self._timer_stop, self._switch_lock = None, threading.Event(), threading.RLock()
        self._finish_due = None
        self.started, self._early = False, []

    def start(self, collectors: list[object], switch: bool) -> None:
        """Alternate windows with and without the expensive collectors among ``collectors``
        (docs/overhead.md); ``switch`` False: the session runs without windows, collectors stay on."""
        s = self.s
        self.togglers = [c for c in collectors if hasattr(c, "set_enabled")] + self._early  # type: ignore[misc]
        self._early = []
        self.started = True
        self.mode = S.WINDOW_FULL
        s.events.append((s.clock(), s.main_tid, S.WINDOW, S.WINDOW_FULL, -1, -1, 0))
        if switch and self.togglers:
            # the run starts in a light window: a loop's first calls are its cold ones (CUDA
            # modules loaded, libraries set up), and in a full window the windows remove only a
            # typical call's excess from them (PPO-GPU on an H100: the first backprop took 15-17 ms
            # in a full window, 6 ms in a light one, 5-7 ms typically)
            self.switch_window()

    def add_toggler(self, collector: Toggler) -> None:
        """A collector started after the session (on torch's import) joins the windows."""
        s = self.s
        if not self.started:  # start takes it with the others
            self._early.append(collector)
            return
        self.togglers.append(collector)
        if s.window_due_ns != NEVER:  # windows under way: join the current one
            collector.set_enabled(self.mode == S.WINDOW_FULL)
        elif self.mode == S.WINDOW_FULL:
            self.switch_window()  # the first expensive collector: a light window first, as at start
        else:  # every earlier one was dropped in a light window: the windows go on from it
            collector.set_enabled(False)
            self._schedule(S.WINDOW_LIGHT, s.clock())

    def stop(self) -> None:
        """No switch after this: the session is ending."""
        s = self.s
        s.window_due_ns = s.long_op_ns = self.timer_due_ns = NEVER
        self._stop_window_timer()
        self.started, self._early = False, []

    def after_wait(self, start: int, waited: int) -> None:
        """A window holds the same share of the job's own time: its due moves by the part of a twin
        wait (from ``start``, ``waited`` ns) that fell inside it.

        Why only that part: the window timer may switch during a long wait (the partner catching
        up at the start of a run: 3.5 s on an H200), and the window it begins then holds none of
        the job's time yet. Moved by the whole wait, that window lasted the wait again, and a
        2,000-step loop ran in one full window.
        """
        s = self.s
        with self._switch_lock:
            if s.window_due_ns == NEVER:
                return
            shift = start + waited - max(start, self._window_began_ns)
            self.timer_due_ns += shift
            if self._finish_due is not None:  # a light window the timer began: due 0 until finished
                self._finish_due += shift
            else:
                s.window_due_ns += shift

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
        s = self.s
        due, self._finish_due = self._finish_due, None
        annotate.category_enter(s, categories.PROFILER)  # rlscope's time, removed like a switch
        for col in list(self.togglers):
            finish = getattr(col, "finish_off_main", None)
            if finish is not None:
                try:
                    finish()
                except Exception as e:  # never break the user's job: the light window costs more
                    print(
                        f"rlscope: warning: cannot finish switching {col!r}: {printable(e)}", file=sys.stderr
                    )
        annotate.category_exit(s, categories.PROFILER)
        s.window_due_ns = due

    def _switch(self, on_main: bool) -> None:
        """The switch itself, under the switch lock; ``on_main``: on the main thread (a scope exit),
        else on the window timer's (:meth:`switch_on_schedule`)."""
        s = self.s
        t0 = s.clock()
        mode = S.WINDOW_LIGHT if self.mode == S.WINDOW_FULL else S.WINDOW_FULL
        if self._shared is not None and s.window_due_ns != NEVER:  # windows under way: the grid's
            mode = self._shared.mode_at(t0)
        if not self._in_detail(t0):  # only aggregates are kept: the collectors stay off
            mode = S.WINDOW_LIGHT
        if mode == self.mode and s.window_due_ns != NEVER:
            self._schedule(mode, t0)  # due, but this kind of window goes on: look again later
            return
        if on_main:
            annotate.category_enter(s, categories.PROFILER)
        on = mode == S.WINDOW_FULL
        for col in list(self.togglers):  # a failing one is dropped while iterating
            try:
                # off the main thread, a collector may switch in a way safe beside the job's calls
                switch = col.set_enabled if on_main else getattr(col, "set_enabled_off_main", col.set_enabled)
                switch(on)
            except Exception as e:  # never break the user's job: this collector stays as it is
                self.togglers.remove(col)
                print(f"rlscope: warning: cannot switch {col!r}: {printable(e)}", file=sys.stderr)
        self.mode = mode
        if on_main:
            speed = reference.session_sample_ps()  # ~0.15 ms, rlscope's time like the switch
            annotate.category_exit(s, categories.PROFILER)
        else:  # timed beside the running job, the sample would time the job's hold of the GIL
            speed = -1
        now = s.clock()
        # the timer's switch is a row on its own thread: rows of the main thread stay in time order
        thread = s.main_tid if on_main else threading.get_native_id()
        s.events.append((now, thread, S.WINDOW, mode, speed, -1, 0))
        self._switch_ns[mode] = now - t0
        self._window_began_ns = now
        self._finish_due = None
        self._schedule(mode, now)
        if not on_main and not on and any(hasattr(c, "finish_off_main") for c in self.togglers):
            # the next scope exit on the main thread finishes the switch, then the schedule resumes
            self._finish_due, s.window_due_ns = s.window_due_ns, 0

    def main_thread_in_operation(self) -> bool:
        """Whether an operation is open on the main thread now (either scope path)."""
        s = self.s
        if s._lean is not None:
            return s._lean.open_ops(s.main_tid) > 0
        return bool(s._main_state is not None and s._main_state.ops)

    def _overdue(self, now: int) -> bool:
        """Whether this running session's window is past the timer's grace at ``now``."""
        s = self.s
        due = max(self.timer_due_ns, s.window_due_ns)
        return annotate._active is s and not s._stopping and now >= due

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
        s = self.s
        if not self._overdue(now):
            return False
        with self._switch_lock:
            now = s.clock()
            if now < max(self.timer_due_ns, s.window_due_ns) or self.main_thread_in_operation():
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
        s = self.s
        if s.clock is not time.perf_counter_ns or annotate._active is not s or os.getpid() != s._pid:
            return
        from rlscope.runtime import child_signal

        self._timer_stop = threading.Event()
        self._timer = threading.Thread(target=self._window_timer, name="rlscope-windows", daemon=True)
        with child_signal.signals_kept_from_new_threads():  # started later than start(), so again here
            self._timer.start()

    def _window_timer(self) -> None:
        s = self.s
        stop = self._timer_stop
        try:
            while not stop.is_set():
                due = max(self.timer_due_ns, s.window_due_ns)
                if due >= NEVER:  # every collector was dropped: nothing to switch
                    stop.wait(1.0)
                    continue
                wait_ns = due - s.clock()
                if wait_ns > 0:
                    stop.wait(min(wait_ns / 1e9, 1.0))
                elif not self.switch_on_schedule(s.clock()):
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
        s = self.s
        if not self.togglers:
            s.window_due_ns = s.long_op_ns = self.timer_due_ns = NEVER
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
        s.window_due_ns = due
        self.timer_due_ns = min(NEVER, due + grace)
        if self._timer is None:  # the first window with a collector to switch
            self._start_window_timer()
        s.long_op_ns = min(NEVER, int(LONG_OP_SHARE * self._window_ns[mode] * self._window_scale()))

    def _in_detail(self, now: int) -> bool:
        """Whether ``now`` lies in a detail stretch of the run (rlscope/trace/detail.py). A schedule
        of iterations is followed by the writer, which counts them as it folds the events: the
        collectors follow it a flush late, and what they record outside a stretch is left out."""
        s = self.s
        agg = getattr(s._writer, "aggregator", None)
        if self.detail.iterations:
            return agg is None or agg.detail_now()
        if agg is not None and agg.stretch_full(now):  # the stretch filled: off until the next
            return False
        return self.detail.in_detail(now - self.origin_ns)

    def _detail_change(self, now: int) -> int:
        """When the run next enters or leaves a detail stretch, on the session's clock. A schedule of
        iterations: outside a stretch, look again after a flush; inside, at the next window's end
        (a full window may run past the stretch's end: its records there are left out)."""
        s = self.s
        if self.detail.iterations:
            if self._in_detail(now):
                return NEVER
            return now + int(s.options["flush_interval"] * 1e9)
        change = self.detail.next_change(now - self.origin_ns)
        return NEVER if change >= detail_schedule.NEVER else min(NEVER, self.origin_ns + change)

    def long_op_entry(self, name_id: int) -> None:
        """A long operation starts on the main thread (annotate's scope entry, at top level): if its
        last call ran in this kind of window, switch first, so its calls alternate between kinds.

        Why: a long call with no scope exit inside (SB3 PPO's ``train``, 1-2 s) takes the switch
        that falls due during it at its exit, so the next window starts with the operation after it.
        When that one spans one switch, the next call runs in the same kind of window as the last:
        on an H100, both ``train`` calls of an SB3 PPO run ran in light windows, their categories and GPU
        work never seen. Random lengths break that only over many calls; a run may have two.
        """
        s = self.s
        if self._shared is not None:  # the grid decides: a process of its own would leave it
            return
        if s.long_ops.get(name_id) == self.mode and s.window_due_ns != NEVER:
            self.switch_window()

    def long_op_done(self, name_id: int) -> None:
        """A top-level call on the main thread lasted at least ``long_op_ns``: remember its kind."""
        s = self.s
        s.long_ops[name_id] = self.mode

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
