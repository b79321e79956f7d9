"""Turn-taking for ``rlscope validate --twin``: a repetition's timed and profiled runs share one core.

Why: on the machines this is checked on, a core runs at a speed the host sets, and switches it every
few seconds (the CPU VM: 145-175 ns for the reference loop in one stretch, 190-330 ns in the
next). Two runs of the same program one after the other draw
different mixes of those speeds: unprofiled runs alone spread ±12-48% there, so a ±5% check of the
corrected profile against a run before or after it measures the host as much as rlscope. Run side by
side in turns of ~0.1 s on the same core, both runs see the same speeds in the same proportions, and
the host's share cancels (two alike runs in turns read 1.00 ± 0.03 of each other where separate
runs spread ±12% and more).

Protocol. The parent (overhead/validate/runner.py) makes one pipe per child, and each child writes to its
partner's. A child runs while the other blocks reading its pipe; at the first scope exit of the main
thread after its turn is due (the sessions' ``tick_due_ns`` hook: no cost between turns) it writes
how far it has run and blocks on its own pipe. How far: scope exits so far (the C scope methods'
count, the same in the timed and the profiled run of one program). Both children take turns alike:
a turn first *catches up* with the partner, running until it has reached the count the partner
handed over, then *leads* for half of ``turn_ns`` and hands its own count over. So each stretch of
the program is run twice in a row, first by the child that leads it, then by the other, whatever the
profile costs, and neither run ends with a long stretch alone. Why both alike: a side that only
catches up stretches its turns when the host slows the core, so it spends more of the host's slow
spells running than a side whose turns are fixed in time. With the timed run leading and the
profiled run catching up, the twin's null (two timed runs) read the catching-up side 1.107
[1.017-1.175] of the leading one on the eager simulator on an H100; tests/test_twin.py drives
this code on a fake clock whose host slows the core in spells:
+11.6% with one side only catching up, -0.2% with both alike.
A message of ``DONE`` (or an end of file):
the partner has ended; the run goes on without turns. The parent holds the write ends too and
sends ``DONE`` when a child exits, so a child never waits on a partner that died.
The time a child waits is not its own: the timer session takes it off as a pause, the profiled
session marks it as rlscope's time (the analyzer removes it), and each child's record says how
long it waited (``as_record``).
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from rlscope.runtime import autograd_engine

TURN_ENV = "RLSCOPE_VALIDATE_TURN"
DONE = -1
NEVER = 2**63 - 1
# a turn (a catch-up and a lead of half of it): short beside the host's slow spells of 0.1-0.3 s on the
# devices, long beside a hand-over. On a simulated host with such spells, two sides' totals spread
# -2.6%..+2.5% (10th-90th percentile) at 50 ms and -5.9%..+5.5% at 100 ms (tests/test_twin.py)
TURN_NS = 50_000_000
CATCH_UP_CAP = 4  # a catch-up hands over after this many turns' time, count reached or not
_MSG = struct.Struct("<q")


@dataclass(frozen=True)
class Spec:
    """One child's side of the turns, as the parent wrote it into ``RLSCOPE_VALIDATE_TURN``."""

    rfd: int  # read: the partner's hand-overs
    wfd: int  # write: this child's hand-overs
    by_time: bool  # turns of turn_ns only (the null's control); else catch up, then lead turn_ns / 2
    first: bool  # runs first (else waits at start for the partner's first hand-over)
    turn_ns: int = TURN_NS
    main_cpu: int | None = None  # the main thread's core (both children's), None: not pinned
    aux_cpus: tuple[int, ...] = ()  # every other thread's cores

    def encode(self) -> str:
        aux = "+".join(str(c) for c in self.aux_cpus)
        main = "" if self.main_cpu is None else str(self.main_cpu)
        return f"{self.rfd},{self.wfd},{int(self.by_time)},{int(self.first)},{self.turn_ns},{main},{aux}"

    @classmethod
    def decode(cls, text: str) -> Spec:
        rfd, wfd, by_time, first, turn_ns, main, aux = text.split(",")
        return cls(
            int(rfd),
            int(wfd),
            by_time == "1",
            first == "1",
            int(turn_ns),
            int(main) if main else None,
            tuple(int(c) for c in aux.split("+") if c),
        )


class Turn:
    """This process's turns. The active session asks ``ready`` at a scope exit once ``due_ns`` has
    passed, then ``hand_over``, which returns the nanoseconds spent (waiting for the partner,
    pinning threads, finishing GPU work): the session keeps them out of the job's time."""

    def __init__(self, spec: Spec, clock: Any = time.perf_counter_ns) -> None:
        self.spec = spec
        self.clock = clock
        self.pid = os.getpid()
        self.main_ident = threading.get_ident()
        self.due_ns = NEVER
        self.free = False  # the partner has ended: no more turns
        self.released = False  # this run's measured part has ended (release)
        self.end_wait_ns = 0  # in release, waiting for the partner's end
        self.turns = 0  # hand-overs made
        self.waited_ns = 0  # in hand_over(), after start
        self.start_wait_ns = 0  # at start, before the job's time begins
        self.capped = 0  # catch-ups handed over at CATCH_UP_CAP before the count was reached
        self.looks = 0  # looks at the count that found a catch-up not yet done
        self.log: list[tuple[int, int, int, int]] = []  # per turn: start ns, own ns, first count, last count
        self._target: int | None = None  # the partner's count to catch up with (None: leading)
        self._turn_start = 0
        self._turn_count = 0
        self._lead_start = 0  # when this turn's lead began
        self._look = (0, 0)  # (time, count) at the last look at the count
        self._look_from: int | None = None  # the catch-up's first look
        self._last_catch_ns = spec.turn_ns // 2  # how long the last catch-up took
        self._pinned: set[int] = set()
        self.points = 0  # returns from torch's autograd engine counted (add_points)
        self._engine: tuple[Any, Any, Any] | None = None  # (torch.autograd, original, wrapper)

    # -- the count ------------------------------------------------------------------------------
    def count(self) -> int | None:
        """Scope exits so far (None: the C scope methods are not in use; turns go by time)."""
        from rlscope.collectors import scope_native

        mod = scope_native._module
        return mod.exits() + self.points if mod is not None and hasattr(mod, "exits") else None

    def add_points(self, session: Any) -> None:
        """Hand over at returns from torch's autograd engine (backward, grad) too, counted with the
        scope exits; there the active ``session`` (its ``clock``, ``tick_due_ns`` and ``run_tick``)
        looks whether the turn is due, as at a scope exit. Call only where torch was imported before
        the session started, in both runs alike (the profiled session's collectors import it): the
        two counts must step together.

        Why: a long update with no scope inside (SB3 PPO's ``train``, ~3 s a call on the VM) held
        a turn for its whole length, so the two runs' updates ran seconds apart at whatever speeds
        the host drew then; its null read 0.87-1.07 on an H100 and one fresh-clone VM pass missed
        on it (``train`` -8.8%). An update makes a backward call every few ms."""
        torch = sys.modules.get("torch")
        if torch is None or self._engine is not None:
            return

        def after(_: Any) -> None:
            self.points += 1
            if threading.get_ident() == self.main_ident and not self.free and not self.released:
                with contextlib.suppress(Exception):  # never break the user's job
                    now = session.clock()
                    if now >= session.tick_due_ns:
                        session.run_tick(now)

        self._engine = autograd_engine.wrap(torch, "twin", lambda: None, after)

    def remove_points(self) -> None:
        """Unwrap the autograd engine (add_points), unless wrapped again since. The profiled session
        calls it before its collectors stop, so that each wrapper is taken off in the order put on."""
        autograd_engine.unwrap(self._engine)

    # -- start and end --------------------------------------------------------------------------
    def start(self) -> None:
        """At the child's start (before its job's time begins): pin, then wait for the first turn
        unless this child goes first."""
        for fd in (self.spec.rfd, self.spec.wfd):
            os.set_inheritable(fd, False)  # a program this one runs must not hold the turns' pipes
        if self.spec.main_cpu is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {self.spec.main_cpu})  # pid 0: this (the main) thread
        t0 = self.clock()
        if not self.spec.first:
            self._receive()
        now = self.clock()
        self.start_wait_ns = now - t0
        self._begin_turn(now)

    def release(self) -> None:
        """At the end of the measured run (its session's stop): hand the last turn over for good and
        wait until the partner's run has ended too. Why: each run's last stretch (after its last
        hand-over) then runs right after the other's, at the same speed, where it ran after the
        other process's whole exit (interpreter and torch teardown, a second or more later) and
        read the host's speed then: +2-6% on one side of the twin null on the VM.
        Nothing of this process runs meanwhile, so the partner's last
        stretch has the core to itself; a run without turns left (the partner released first, or
        ended) only says so."""
        if os.getpid() != self.pid or self.released:
            return
        self.released = True
        self.due_ns = NEVER
        self.remove_points()
        self._send_done()
        t0 = self.clock()
        while not self.free:  # the partner still runs: until its own release or exit (the parent's DONE)
            self._receive()
        self.end_wait_ns = self.clock() - t0

    def finish(self) -> None:
        """At exit: the partner runs on alone (if this run never released it)."""
        if os.getpid() != self.pid or self.free or self.released:
            return
        self.free = True
        self.due_ns = NEVER
        self._send_done()

    def _send_done(self) -> None:
        with contextlib.suppress(OSError):  # the partner is gone: nothing to tell
            os.write(self.spec.wfd, _MSG.pack(DONE))

    # -- a turn ---------------------------------------------------------------------------------
    def ready(self, now: int) -> bool:
        """Whether this turn is over (call once ``due_ns`` has passed); when not, ``due_ns`` says
        when to look again. Only the main thread takes turns."""
        if os.getpid() != self.pid or self.free:  # a forked child of the job takes no turns
            self.due_ns = NEVER
            return False
        return threading.get_ident() == self.main_ident and self._over(now)

    def hand_over(self, now: int) -> int:
        """Hand the turn over (``ready`` said so) and wait for the next; the ns spent."""
        self._pin_others()
        _sync_gpu()
        count = self.count()
        if len(self.log) < 2000:
            self.log.append((self._turn_start, now - self._turn_start, self._turn_count, count or 0))
        try:
            os.write(self.spec.wfd, _MSG.pack(count if count is not None else 0))
        except OSError:  # the partner is gone
            self.free = True
        self.turns += 1
        if not self.free:
            self._receive()
        end = self.clock()
        self.waited_ns += end - now
        self._begin_turn(end)
        return end - now

    @property
    def lead_ns(self) -> int:
        """How long a turn leads: half a turn, so that a catch-up and a lead make one."""
        return self.spec.turn_ns if self.spec.by_time else self.spec.turn_ns // 2

    def _over(self, now: int) -> bool:
        """Whether this turn is done: caught up with the partner, then led for ``lead_ns``. A
        catch-up short of its count looks again when, at its pace so far, it will have reached it."""
        if self._target is not None:
            count = self.count()
            if count is not None and count < self._target:
                return self._look_again(now, count)
            self._last_catch_ns = max(now - self._turn_start, 1)
            self._target = None
            self._lead_start = now  # the lead starts where the partner's count is reached
        if now - self._lead_start >= self.lead_ns:
            return True
        self.due_ns = self._lead_start + self.lead_ns
        return False

    def _look_again(self, now: int, count: int) -> bool:
        """A catch-up not yet done: when to look next (True: hand over at the cap instead)."""
        assert self._target is not None
        if self._look_from is None:  # the catch-up's first look: its start-up, if any, is behind it
            self._look_from = now
        elif now - self._look_from >= CATCH_UP_CAP * self.spec.turn_ns:
            self.capped += 1
            return True
        # the pace since the last look (a turn's first stretch can hold the program's start-up)
        done, took = count - self._look[1], now - self._look[0]
        step = self.spec.turn_ns / 8
        if done > 0 and took > 0:
            step = min(0.9 * took * (self._target - count) / done, self.spec.turn_ns / 4)
        self._look = (now, count)
        self.looks += 1
        self.due_ns = now + max(int(step), 20_000)
        return False

    def _receive(self) -> None:
        """Block until the partner hands over (its count) or ends."""
        data = b""
        while len(data) < _MSG.size:
            try:
                chunk = os.read(self.spec.rfd, _MSG.size - len(data))
            except OSError:
                chunk = b""
            if not chunk:  # end of file: nobody else holds the write end
                self.free = True
                return
            data += chunk
        (value,) = _MSG.unpack(data)
        if value == DONE:
            self.free = True
        elif not self.spec.by_time:
            self._target = value

    def _begin_turn(self, now: int) -> None:
        self._turn_start = now
        self._turn_count = self.count() or 0
        self._look = (now, self._turn_count)
        self._look_from = None
        if self.free:
            self.due_ns = NEVER
        elif self._target is None:  # the first turn of the side that starts, or turns by time
            self._lead_start = now
            self.due_ns = now + self.lead_ns
        else:  # first look: most of the last catch-up's length (the pace is known after it)
            self.due_ns = now + int(min(self._last_catch_ns, self.spec.turn_ns) * 0.8)

    def _pin_others(self) -> None:
        """Every thread but the main one onto the other cores (threads inherit the main thread's
        core when it creates them): only the main threads take turns."""
        if self.spec.main_cpu is None or not self.spec.aux_cpus:
            return
        me = threading.get_native_id()
        try:
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            return
        for tid in tids:
            if tid != me and tid not in self._pinned:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, set(self.spec.aux_cpus))
                self._pinned.add(tid)

    def as_record(self) -> dict[str, Any]:
        """What the child's record says about its turns."""
        return {
            "by_time": self.spec.by_time,
            "first": self.spec.first,
            "turns": self.turns,
            "waited_s": self.waited_ns / 1e9,
            "start_wait_s": self.start_wait_ns / 1e9,
            "end_wait_s": self.end_wait_ns / 1e9,
            "capped": self.capped,
            "looks": self.looks,
            "log": self.log,
            "counted": self.count() is not None,
        }


def _sync_gpu() -> None:
    """Finish this process's GPU work before the partner's turn: work left queued ran on the GPU
    beside the partner's and slowed one side more than the other (the twin null of PPO-GPU on an
    H100 read one side 1.02-1.05x the other, SB3 PPO 1.06-1.18x). Only where the program has set
    CUDA up itself."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:  # never break the job: the turn goes on without it
        pass


_current: Turn | None = None


def current() -> Turn | None:
    """This process's turns (None outside a twin run, and in a process forked from one)."""
    t = _current
    return t if t is not None and t.pid == os.getpid() else None


def start_from_env() -> Turn | None:
    """Called once at a validate child's start (rlscope.overhead.validate.runner.child_boot)."""
    global _current
    text = os.environ.pop(TURN_ENV, None)
    if not text:
        return None
    try:
        spec = Spec.decode(text)
    except ValueError:
        return None
    _current = Turn(spec)
    _current.start()
    return _current
