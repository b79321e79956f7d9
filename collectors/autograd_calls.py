"""Autograd engine calls on the thread that made them, so the GPU work the engine's threads launch
belongs to the operation that called ``backward()``.

On CUDA, ``backward()`` hands the graph's nodes to the autograd engine's device thread (one per
GPU) and waits: every backward kernel, and DDP's all-reduce (its reducer's hooks fire there), is
launched from a thread where no operation is open. Each call of the engine's entry
(rlscope/runtime/autograd_engine.py) writes an ``engine_begin`` and an ``engine_end`` row on the
calling thread; the analysis gives a launch on a thread with no open operation, made during such a
call on another thread, to the operation open on the caller (rlscope/analysis/gpu.py).

The same rows cut a long update into pieces that every window records (one per ``backward()``),
which the windows compare where the update's own calls are too few (SB3 PPO's ``train``: a few calls
a run, over a thousand ``backward()`` calls each; rlscope/overhead/correct/pieces.py). A window
overdue while such an update runs switches at its next ``backward()`` return
(Windows.switch_at_engine_return, rlscope/runtime/windows.py), so its pieces fall in both kinds of window.

Always on while GPU tracing or the backend recorder runs, in light windows too: a call costs two
event rows, a few per training step, and a window may switch in the middle of a call. Timed alone,
this wrapper's two calls take 0.8 us; inside a torch update loop on cpu-vm, this wrapper and the
backend recorder's together cost a ``backward()`` 9-13 us, most of what a light session adds to a
0.5 ms step (``benchmarks/in_process_ab.py --part engine``; BENCHMARKS.md §3). The windows cannot
see it, and the correction does not remove it yet.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from rlscope import _imports, annotate
from rlscope.runtime import autograd_engine
from rlscope.trace import schema as S


class AutogradCalls:
    """Wraps the autograd engine's entry once torch is imported; writes a row pair per call."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._handle: tuple | None = None
        self._ids = itertools.count()

    def start(self) -> AutogradCalls:
        _imports.when_imported("torch", self._wrap)
        return self

    def _wrap(self, torch: Any) -> None:
        if annotate._active is self.session:
            self._handle = autograd_engine.wrap(torch, "calls", self._begin, self._end)

    def _begin(self) -> tuple[int, int] | None:
        s = self.session
        if annotate._active is not s:  # still wrapped under another wrapper after the session stopped
            return None
        call, thread = next(self._ids), threading.get_native_id()
        s.events.append((s.clock(), thread, S.ENGINE_BEGIN, call, -1, -1, 0))
        return call, thread

    def _end(self, token: tuple[int, int] | None) -> None:
        s = self.session
        if token is not None and annotate._active is s:
            now = s.clock()
            s.events.append((now, token[1], S.ENGINE_END, token[0], -1, -1, 0))
            if token[1] == s.main_tid and now >= s.windows.timer_due_ns:  # a window overdue in a long update
                s.windows.switch_at_engine_return(now)

    def stop(self) -> None:
        _imports.cancel("torch", self._wrap)
        autograd_engine.unwrap(self._handle)
        self._handle = None

    def __repr__(self) -> str:
        return "AutogradCalls(torch.autograd._engine_run_backward)"


def start_for(session: Any, started: Sequence[Any]) -> AutogradCalls | None:
    """The registry's factory (rlscope/collectors/registry.py): only where torch ops or the GPU are
    recorded (the rows before it), whose time and launches the calls attribute."""
    return AutogradCalls(session).start() if started else None
