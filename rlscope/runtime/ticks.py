"""Work due at the main thread's scope exits: a collector's periodic work and a twin run's turns.

Both run on the profiled program's own thread, at the first scope exit after they fall due: the
boundaries compare the session's ``tick_due_ns`` with the exit's time (annotate.py and the C lean
path), so nothing is paid between two due times. Kineto's capture cycles register a ticker
(collectors/kineto_gpu.py); ``rlscope validate --twin`` registers its turns through
rlscope/runtime/hooks.py (rlscope/overhead/validate/twin.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from rlscope import annotate, categories
from rlscope.text import printable

if TYPE_CHECKING:
    from rlscope.session import Session

NEVER = 2**63 - 1  # a due time that never comes (the boundaries compare int64 times with it)


class Turn(Protocol):
    """A process's turns of a twin run (rlscope/overhead/validate/twin.py), as the session uses them."""

    due_ns: int

    def ready(self, now: int) -> bool: ...
    def hand_over(self, now: int) -> int: ...  # the ns waited for the partner
    def add_points(self, session: Session) -> None: ...
    def remove_points(self) -> None: ...
    def release(self) -> None: ...


class Ticks:
    """The session's ticker and twin turn, and the earliest due time of both (``tick_due_ns``)."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self.turn: Turn | None = None
        self._ticker: Callable[[], None] | None = None
        self._every_ns = 0
        self._ticker_due_ns = NEVER

    def set_ticker(self, fn: Callable[[], None], every_ns: int) -> None:
        """Run ``fn`` at the first scope exit after every ``every_ns``."""
        self._ticker, self._every_ns = fn, every_ns
        self._ticker_due_ns = self.s.clock() + every_ns
        self.sync()

    def run(self, now: int) -> None:
        """At a scope exit once ``tick_due_ns`` has passed: a twin run's turn, the ticker's work."""
        s, turn = self.s, self.turn
        if turn is not None and now >= turn.due_ns and turn.ready(now):
            # waiting for the twin is rlscope's time: the analyzer removes it from the job's
            annotate.category_enter(s, categories.PROFILER)
            try:
                waited = turn.hand_over(now)
            finally:
                annotate.category_exit(s, categories.PROFILER)
            s.windows.after_wait(now, waited)
        if self._ticker is not None and now >= self._ticker_due_ns:
            self._ticker_due_ns = now + self._every_ns
            annotate.category_enter(s, categories.PROFILER)  # rlscope's time, reported as such
            try:
                self._ticker()
            except Exception as e:  # never break the user's job
                self._ticker, self._ticker_due_ns = None, NEVER
                print(
                    f"rlscope: warning: periodic collector work failed, stopped: {printable(e)}",
                    file=sys.stderr,
                )
            finally:
                annotate.category_exit(s, categories.PROFILER)
        self.sync()

    def sync(self) -> None:
        """The session's ``tick_due_ns``: the earlier of the ticker's and the turn's due."""
        turn = self.turn
        self.s.tick_due_ns = min(self._ticker_due_ns, turn.due_ns if turn is not None else NEVER)

    def clear(self) -> None:
        """Nothing due any more (the session stopped, or a forked child's inherited ticks)."""
        self._ticker, self._ticker_due_ns, self.turn = None, NEVER, None
        self.s.tick_due_ns = NEVER
