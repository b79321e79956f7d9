"""Triton JIT compilations: a ``@triton.jit`` kernel compiled at its first launch, on the launching thread.

A Triton kernel compiles (or loads from Triton's disk cache) the first time it is launched with a new
specialization: the project's fused CartPole simulator spends seconds so in its first step, which
read as simulation time. Triton reports each compilation as it ends through its public listener
``triton.knobs.compilation.listener`` (Triton 3.4 and later), called on the compiling thread with
the compilation's measured times (``times.total``, µs) and whether it was a disk-cache hit. The
recorder chains any listener the program set, and records one interval per compilation: start = the
listener's time less ``times.total``, on the session's clock.

The intervals join ``compile.arrows`` (collectors/compile_stream.py), as JAX's and torch.compile's
stages do, so the analysis carves them out of their thread's timeline as the ``compile`` category and
counts them (``summary["compile"]``: stage ``triton``, ``triton_kernels``). A kernel inductor compiles
inside a torch.compile frame is nested in that frame's interval: the thread's compile time counts it
once. Without ``knobs.compilation`` (Triton before 3.4) there is nothing to listen to: the recorder
says so once and records nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rlscope import _imports, annotate
from rlscope.collectors import compile_stream
from rlscope.errors import warn_once
from rlscope.trace import schema as S


def _kernel_name(src: Any) -> str | None:
    """The compiled kernel's Python name (an ASTSource's JIT function), None for IR given as text."""
    fn = getattr(src, "fn", None)
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", None)
    return name if isinstance(name, str) and name else None


class TritonCompileRecorder:
    """Records the session's process's Triton compilations into ``compile.arrows``, from triton's import."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.rows: Any = None  # the stream's queue, made when triton is imported: no file without it
        self._knobs: Any = None
        self._previous: Any = None  # the program's own listener, called first

    def start(self) -> TritonCompileRecorder:
        _imports.when_imported("triton", self._begin)
        return self

    def _begin(self, triton: Any) -> None:
        if annotate._active is not self.session:
            return
        knobs = getattr(getattr(triton, "knobs", None), "compilation", None)
        if knobs is None or not hasattr(knobs, "listener"):
            warn_once(
                "Triton compilations not recorded: this Triton has no knobs.compilation.listener"
                " (Triton 3.4 and later have it); its JIT compile time stays in the launching operation"
            )
            return
        self.rows = compile_stream.rows(self.session, "triton.knobs")
        self._knobs, self._previous = knobs, knobs.listener
        knobs.listener = self._listener

    def _listener(self, **kwargs: Any) -> None:
        previous = self._previous
        if previous is not None:
            previous(**kwargs)
        if annotate._active is self.session:
            self.record(kwargs.get("times"), kwargs.get("src"))

    def record(self, times: Any, src: Any) -> None:
        """One compilation that has just ended on this thread, ``times.total`` µs long."""
        end = self.session.clock()
        total_us = getattr(times, "total", 0) or 0
        start = end - max(0, round(float(total_us) * 1e3))
        name = _kernel_name(src)
        nid = annotate.intern(name) if name else -1
        thread = threading.get_native_id()
        self.rows.append((start, end, thread, S.COMPILE_TRITON, nid))
        aggregator = compile_stream.aggregator(self.session)
        if aggregator is not None:  # the aggregates count what they have not folded yet as compile
            aggregator.compiled(thread, start, end)

    def stop(self) -> None:
        _imports.cancel("triton", self._begin)
        knobs, self._knobs = self._knobs, None
        if knobs is not None and getattr(knobs, "listener", None) == self._listener:
            knobs.listener = self._previous  # the program's own listener back, unless it set another

    def __repr__(self) -> str:
        return f"TritonCompileRecorder({'recording' if self.rows is not None else 'waiting for triton'})"


def start_for(session: Any, started: Sequence[Any]) -> TritonCompileRecorder:
    """The registry's factory (rlscope/collectors/registry.py): waits for the program to import triton."""
    return TritonCompileRecorder(session).start()
