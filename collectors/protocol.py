"""What the session asks of a collector: the typed interfaces every collector implements.

A collector records one kind of event for the session that started it (the session is passed to its
factory, a row of :mod:`rlscope.collectors.registry`). Its rows go to the session's trace writer:
to the event queue (``session.events``), or to a stream of its own (``session.writer.add_stream``)
that it fills at flushes (``session.writer.before_flush``). Every collector starts and stops; one
whose records cost the job enough to be measured is a :class:`Toggler`, switched off in light windows
(rlscope/runtime/windows.py) so the analysis measures its cost in the run itself.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Collector(Protocol):
    """Started once by the session; stopped once at its end, where it writes what it still holds.

    ``start`` returns the collector (factories read ``Thing(session).start()``); it raises only
    when the collector cannot work at all, and a collector waiting for a library (torch) to be
    imported starts as a no-op and begins on that import (rlscope/_imports.py).
    """

    def start(self) -> Collector: ...

    def stop(self) -> None: ...


@runtime_checkable
class Toggler(Protocol):
    """A collector the windows switch: on in full windows, off in light ones and between detail
    stretches. ``set_enabled`` runs on the main thread at a scope exit, as rlscope's own time."""

    def set_enabled(self, on: bool) -> None: ...


@runtime_checkable
class OffMainToggler(Toggler, Protocol):
    """A toggler the window timer may switch from its own thread, beside the job's calls.

    ``set_enabled_off_main`` does the part safe there; ``finish_off_main`` the rest, at the main
    thread's next scope exit (native CUPTI: detached off the main thread, its buffers flushed on it).
    """

    def set_enabled_off_main(self, on: bool) -> None: ...

    def finish_off_main(self) -> None: ...
