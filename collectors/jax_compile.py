"""JAX compilations: when a JAX program traces, lowers and XLA-compiles a function, on which thread.

JAX reports each stage of a compilation through its public monitoring API
(``jax.monitoring.register_event_duration_secs_listener``): ``/jax/core/compile/jaxpr_trace_duration``
(tracing the Python function to a jaxpr, reported for a top-level trace only),
``/jax/core/compile/jaxpr_to_mlir_module_duration`` (lowering it to an MLIR module) and
``/jax/core/compile/backend_compile_duration`` (XLA compiling the module, or loading it from jax's
persistent compilation cache, which it also reports, as ``/jax/compilation_cache/cache_hits``). Each
is reported as its stage ends, by the thread that ran it, with the stage's duration (jax's
``dispatch.log_elapsed_time``). A call whose executable jax holds in memory reports no lowering and no
compilation (at most a trace of no time, a hit of its tracing cache), so the backend stages count the
compilations exactly. The listener is registered when the program imports jax (rlscope/_imports.py);
jax calls it at compilations only.

Why a stream of its own (``compile.arrows``: start, end, thread, stage, function; shared with
torch.compile's recorder, collectors/compile_stream.py) and not category rows in the events: the
listener learns of a stage when it has ended, so a category begin would be timed before rows its
thread has already written (a scope the traced function opened, a detail cut), and before the
writer's last flush, which has already folded the time since into the run's aggregates
(rlscope/trace/aggregate.py): the per-thread time order the writer and rlscope/trace/validate.py
rely on would break. As recorded intervals, the stages are carved out of their thread's timeline by
the analysis as the ``compile`` category (rlscope/analysis/timeline.py, as the native recorder's
torch ops are as ``backend``), and counted over the whole run (rlscope/analysis/compilation.py).

A stage's start is the listener's time less the duration jax measured (``time.time()`` around the
stage), on the session's clock; rows are appended to the stream's queue from the compiling thread and
written at the writer's next flush.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rlscope import _imports, annotate
from rlscope.collectors import compile_stream
from rlscope.trace import schema as S

# jax's event names (jax/_src/dispatch.py, jax/_src/compiler.py) and the stage each records
STAGE_EVENTS: dict[str, int] = {
    "/jax/core/compile/jaxpr_trace_duration": S.COMPILE_TRACE,
    "/jax/core/compile/jaxpr_to_mlir_module_duration": S.COMPILE_LOWER,
    "/jax/core/compile/backend_compile_duration": S.COMPILE_BACKEND,
}
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"

# the recorder of the running session: jax's listeners cannot be removed through its public API, so
# the process registers one pair, once, and they write to whichever recorder is active
_active: JaxCompileRecorder | None = None
_registered = False
_register_lock = threading.Lock()


def _on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
    recorder = _active
    if recorder is not None:
        stage = STAGE_EVENTS.get(event)
        if stage is not None:
            recorder.record(stage, duration_secs, kwargs.get("fun_name"))


def _on_event(event: str, **kwargs: Any) -> None:
    recorder = _active
    if recorder is not None and event == CACHE_HIT_EVENT:
        recorder.record(S.COMPILE_CACHE_HIT, 0.0, None)


def _register(jax: Any) -> None:
    global _registered
    with _register_lock:
        if not _registered:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            jax.monitoring.register_event_listener(_on_event)
            _registered = True


class JaxCompileRecorder:
    """Records the compile stages of the session's process into ``compile.arrows``, from jax's import on."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.rows: Any = None  # the stream's queue, made when jax is imported: no file without jax

    def start(self) -> JaxCompileRecorder:
        _imports.when_imported("jax", self._begin)
        return self

    def _begin(self, jax: Any) -> None:
        global _active
        if annotate._active is not self.session:
            return
        self.rows = compile_stream.rows(self.session, "jax.monitoring")
        _register(jax)
        _active = self

    def record(self, stage: int, duration_secs: float, function: Any) -> None:
        """One stage that has just ended on this thread, ``duration_secs`` long."""
        end = self.session.clock()
        start = end - max(0, round(duration_secs * 1e9))
        name = annotate.intern(function) if isinstance(function, str) and function else -1
        thread = threading.get_native_id()
        self.rows.append((start, end, thread, stage, name))
        aggregator = compile_stream.aggregator(self.session)
        if aggregator is not None and stage not in S.COMPILE_UNTIMED:  # as triton_compile.record
            aggregator.compiled(thread, start, end)

    def stop(self) -> None:
        global _active
        _imports.cancel("jax", self._begin)
        if _active is self:
            _active = None

    def __repr__(self) -> str:
        return f"JaxCompileRecorder({'recording' if self.rows is not None else 'waiting for jax'})"


def start_for(session: Any, started: Sequence[Any]) -> JaxCompileRecorder:
    """The registry's factory (rlscope/collectors/registry.py): waits for the program to import jax."""
    return JaxCompileRecorder(session).start()
