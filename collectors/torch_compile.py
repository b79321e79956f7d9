"""torch.compile's compilations: when, on which thread, of which function, in which stages, and why again.

Two of torch's own sources, each for what it knows exactly:

- **When and where**: Dynamo's compilation callbacks (``torch._dynamo.callback.callback_handler``,
  the registry behind ``torch._dynamo.callback.on_compile_start``/``on_compile_end``; removable, and
  called only when something compiles). torch runs them on the compiling thread around each
  compilation: a frame (Dynamo tracing its bytecode, then the backend it hands the graph to: AOT
  autograd, inductor's lowering, code generation, C++/Triton compile and compile-time autotuning), a
  backward graph compiled at its first backward call, and compile work at run time (CUDA graph
  recording, runtime autotuning). A compilation inside another runs them once, so the intervals are
  disjoint per thread. The interval is timed here, on the session's clock, with nothing to convert.
- **What and why**: each compilation's ``CompilationMetrics`` (``torch._dynamo.utils
  .get_compilation_metrics()``, the record torch logs to its ``dynamo_compile`` table and structured
  trace), matched by compile id: the function (``co_name``, file and line), the reason for a
  recompilation (the first guard that failed: "tensor 'x' size mismatch at index 0. expected 4,
  actual 8"), and the time in each stage (the ``*_cumulative_compile_time_us`` columns: the whole
  frame, the backend's share, inductor's share, autotuning). torch records them as the compilation's
  context exits, after the end callback, so the recorder holds each interval until its metrics come
  (at the next compilation, the writer's next flush, or the session's stop).

Not chosen: ``compilation_time_metrics`` (durations per timed key, with no thread, function or
reason); a handler on torch's structured trace (every payload, graphs and generated code, would be
formatted while compiling, inflating the time measured); wrapping Dynamo's internal event logger
(private, and its event names change between releases). The stage split is durations, not
intervals: torch reports how long each stage took, not when, so the trace keeps them as durations
ending at the compilation's end (rlscope/trace/schema.py), and the timeline uses the compilation's
interval alone.

Nothing is registered until the program imports ``torch._dynamo`` (torch.compile does, importing
torch does not), and the callbacks run only at compilations: a program that compiles nothing pays
nothing. The file is made at the first compilation (collectors/compile_stream.py).
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import Any

from rlscope import _imports, annotate
from rlscope.collectors import compile_stream
from rlscope.trace import schema as S

CALLBACK_MODULE = "torch._dynamo.callback"
_CACHE_ENTRY = re.compile(r"^\d+/\d+: ")
_STACK_DEPTH = 40  # frames looked through for a compiled module's call (Dynamo's own are ~15)
# the callbacks' trigger (torch._dynamo.callback.CallbackTrigger) -> the interval's stage
_TRIGGER_STAGE = {
    "DYNAMO": S.COMPILE_TORCH_FRAME,
    "LAZY_BACKWARD": S.COMPILE_TORCH_BACKWARD,
    "TRITON_AUTOTUNING": S.COMPILE_TORCH_RUNTIME,
    "CUDAGRAPH_RECORDING": S.COMPILE_TORCH_RUNTIME,
}


class _Pending:
    """A compilation whose interval is known and whose metrics have not come yet."""

    __slots__ = ("compile_id", "end", "module", "stage", "start", "thread")

    def __init__(self, compile_id: str, stage: int, thread: int, start: int, module: str | None) -> None:
        self.compile_id, self.stage, self.thread, self.module = compile_id, stage, thread, module
        self.start = self.end = start


def compiled_module() -> str | None:
    """``Policy.forward`` when the compilation starting is a compiled module's (``torch.compile(model)``).

    Dynamo compiles a module's call through a wrapper of torch's own (``inner``, in
    torch/_dynamo/external_utils.py), which is all its metrics name; the module is the ``_orig_mod`` of
    the OptimizedModule whose call is on this thread's stack."""
    frame = sys._getframe(2)
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return None
        owner = frame.f_locals.get("self") if frame.f_code.co_name == "__call__" else None
        orig = getattr(owner, "_orig_mod", None)
        if orig is not None:
            return f"{type(orig).__name__}.forward"
        frame = frame.f_back
    return None


def _metrics_key(m: Any) -> tuple[str, int]:
    """(compile id, stage) of a CompilationMetrics, as its interval is keyed."""
    if getattr(m, "is_runtime", False):
        stage = S.COMPILE_TORCH_RUNTIME
    elif getattr(m, "is_forward", None) is False:
        stage = S.COMPILE_TORCH_BACKWARD
    else:
        stage = S.COMPILE_TORCH_FRAME
    return str(getattr(m, "compile_id", None)), stage


def _us(m: Any, field: str) -> int:
    """A ``*_us`` field of the metrics in ns (0 where torch left it unset)."""
    v = getattr(m, field, None)
    return int(v) * 1000 if isinstance(v, (int, float)) and v > 0 else 0


def stage_split(m: Any, total_ns: int) -> dict[int, int]:
    """A compilation's ns per stage from its metrics, each exclusive of the stages inside it, summing
    to ``total_ns``, its interval.

    torch's columns nest: the frame's whole compile holds the backend's (AOT autograd, with inductor
    inside), and inductor's holds autotuning. Dynamo's part is the rest of the interval (torch's own
    timer of the whole frame starts a little before the callbacks and ends a little after). A backward
    graph's compile has no Dynamo part: it is all AOT autograd and its backend."""
    autotune = _us(m, "compile_time_autotune_time_us")
    inductor = _us(m, "inductor_cumulative_compile_time_us")
    backend = _us(m, "aot_autograd_cumulative_compile_time_us")
    whole = max(total_ns, backend, inductor, autotune)
    if getattr(m, "is_forward", None) is False:
        backend = whole
    out = {
        S.COMPILE_TORCH_AUTOTUNE: autotune,
        S.COMPILE_TORCH_INDUCTOR: max(0, inductor - autotune),
        S.COMPILE_TORCH_AOT: max(0, backend - max(inductor, autotune)),
        S.COMPILE_TORCH_DYNAMO: max(0, whole - max(backend, inductor, autotune)),
    }
    return {k: v for k, v in out.items() if v > 0}


def function_name(m: Any) -> str | None:
    """``forward (policy.py:41)``: the compiled code's name and where it is defined."""
    name = getattr(m, "co_name", None)
    if not name:
        return None
    filename, line = getattr(m, "co_filename", None), getattr(m, "co_firstlineno", None)
    return f"{name} ({os.path.basename(filename)}:{line})" if filename and line else str(name)


class TorchCompileRecorder:
    """Records the session's torch.compile compilations into ``compile.arrows``, from Dynamo's import on."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.rows: collections.deque[tuple] | None = None  # made at the first compilation
        self._open: dict[int, _Pending] = {}  # thread -> its compilation in progress
        self._pending: list[_Pending] = []  # ended, waiting for their metrics
        self._names: dict[str, str] = {}  # frame compile id -> function (a backward has none of its own)
        self._seen: Any = None  # the last CompilationMetrics taken
        self._handler: Any = None
        self._lock = threading.Lock()

    def start(self) -> TorchCompileRecorder:
        _imports.when_imported(CALLBACK_MODULE, self._begin)
        self.session.writer.before_flush(self.drain)
        return self

    def _begin(self, module: Any) -> None:
        if annotate._active is not self.session or self._handler is not None:
            return
        handler = module.callback_handler
        handler.register_start_callback(self._on_start)
        handler.register_end_callback(self._on_end)
        self._handler = handler

    def _on_start(self, args: Any) -> None:
        stage = _TRIGGER_STAGE.get(getattr(args.callback_trigger, "name", ""), S.COMPILE_TORCH_FRAME)
        thread = threading.get_native_id()
        module = compiled_module() if stage == S.COMPILE_TORCH_FRAME else None
        start = self.session.clock()
        self._open[thread] = _Pending(str(args.compile_id), stage, thread, start, module)
        aggregator = compile_stream.aggregator(self.session)
        if aggregator is not None:  # the aggregates count its time as compile (trace/aggregate.py)
            aggregator.compile_began(thread, start)
        if self._pending:
            self.drain()

    def _on_end(self, args: Any) -> None:
        end = self.session.clock()
        got = self._open.pop(threading.get_native_id(), None)
        if got is None:  # ended on another thread than it began on: the one that began it
            got = next((p for p in self._open.values() if p.compile_id == str(args.compile_id)), None)
            if got is None:
                return
            del self._open[got.thread]
        got.end = end
        aggregator = compile_stream.aggregator(self.session)
        if aggregator is not None:
            aggregator.compile_ended(got.thread, end)
        with self._lock:
            self._pending.append(got)

    def _new_metrics(self) -> list[Any]:
        """The CompilationMetrics torch recorded since the last call (it keeps its latest 64)."""
        utils = sys.modules.get("torch._dynamo.utils")
        getter = getattr(utils, "get_compilation_metrics", None)
        if getter is None:
            return []
        got = getter()
        if self._seen is not None:
            for i in range(len(got) - 1, -1, -1):
                if got[i] is self._seen:
                    got = got[i + 1 :]
                    break
        if got:
            self._seen = got[-1]
        return got

    def drain(self, final: bool = False) -> None:
        """Write the compilations whose metrics have come (``final``: every one, named or not)."""
        if not self._pending:
            return
        with self._lock:
            metrics: dict[tuple[str, int], Any] = {}
            for m in self._new_metrics():
                key = _metrics_key(m)
                metrics[key] = m
                name = function_name(m)
                if name and key[1] == S.COMPILE_TORCH_FRAME:
                    self._names[key[0]] = name
            waiting = []
            for p in self._pending:
                m = metrics.get((p.compile_id, p.stage))
                if m is None and not final:
                    waiting.append(p)
                else:
                    self._write(p, m)
            self._pending = waiting

    def _write(self, p: _Pending, m: Any) -> None:
        if self.rows is None:
            self.rows = compile_stream.rows(self.session, "torch._dynamo")
        if p.module and os.sep + "torch" + os.sep in str(getattr(m, "co_filename", "")):
            self._names[p.compile_id] = p.module  # the module, not torch's wrapper around its call
        name = self._names.get(p.compile_id)
        name_id = annotate.intern(name) if name else -1
        self.rows.append((p.start, p.end, p.thread, p.stage, name_id))
        if m is None or p.stage == S.COMPILE_TORCH_RUNTIME:  # run-time work is a stage of its own
            return
        for stage, ns in stage_split(m, p.end - p.start).items():
            self.rows.append((p.end - ns, p.end, p.thread, stage, name_id))
        reason = getattr(m, "recompile_reason", None)
        if reason and p.stage == S.COMPILE_TORCH_FRAME:
            reason = _CACHE_ENTRY.sub("", str(reason), count=1)  # "0/0: " names the entry that failed
            self.rows.append((p.start, p.end, p.thread, S.COMPILE_TORCH_RECOMPILE, annotate.intern(reason)))

    def stop(self) -> None:
        _imports.cancel(CALLBACK_MODULE, self._begin)
        handler, self._handler = self._handler, None
        if handler is not None:
            for remove, fn in (
                (handler.remove_start_callback, self._on_start),
                (handler.remove_end_callback, self._on_end),
            ):
                with contextlib.suppress(ValueError):  # removed already
                    remove(fn)
        self.drain(final=True)

    def __repr__(self) -> str:
        state = "recording" if self._handler is not None else "waiting for torch._dynamo"
        return f"TorchCompileRecorder({state})"


def start_for(session: Any, started: Sequence[Any]) -> TorchCompileRecorder:
    """The registry's factory (rlscope/collectors/registry.py): waits for the program to import Dynamo."""
    return TorchCompileRecorder(session).start()
