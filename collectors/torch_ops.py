"""The ``backend`` CPU category: time inside PyTorch's native ops.

:func:`start` returns a :class:`BackendRecorder`. When the user's code imports torch it starts
rlscope's native recorder (collectors/torch_native.py: a C++ RecordFunction callback, every
thread, a fraction of a microsecond per op) and, where that cannot be built or loaded, this
module's Python mode, with one warning line saying why. ``RLSCOPE_NATIVE_BACKEND=0`` asks for
the Python mode.

The Python mode: a ``TorchFunctionMode`` wraps every call into the torch API made from Python (module
functions, Tensor methods, ``backward``) in a ``backend`` category interval. Inside the handler
the mode is disabled, so a torch call made by torch's own Python code is not recorded twice and
the whole call, including the C++ kernels and autograd engine it runs, counts as backend.

Why not Kineto's CPU events: they are only delivered when the profiler stops (or at schedule
cycle ends), so a long run would hold its whole trace in memory, and they are per aten op and
need de-nesting. Why not ``sys.setprofile``: it fires on every Python call, costing far more.
The cost of this mode is measured by benchmarks/scope_overhead.py and corrected by calibration.
Torch function modes are thread-local: only the thread that started the session (or imported
torch during it) is recorded. torch is not imported by rlscope: the mode is entered when the
user's code imports torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from rlscope import _imports, annotate, categories
from rlscope.trace import schema as S


class BackendCollector:
    """Enters the backend-recording torch function mode once torch is imported (the Python mode)."""

    def __init__(self) -> None:
        self.mode: Any = None
        self.enabled = True  # read by the mode on every torch call (set_enabled)

    def start(self) -> BackendCollector:
        _imports.when_imported("torch", self._enter)
        return self

    def _enter(self, torch: Any) -> None:
        from torch.overrides import TorchFunctionMode

        backend = categories.BACKEND
        cat_begin, cat_end = S.CAT_BEGIN, S.CAT_END
        # torch.compile traces through active modes: recording must vanish from compiled graphs
        # (Dynamo cannot trace perf_counter_ns, and compiled code is timed as a whole anyway)
        compiling = torch.compiler.is_compiling

        session = annotate._active
        if session is None:
            return
        # torch function modes are per thread: the mode records the thread that enters it, so that
        # thread's state, clock and event queue are bound once here instead of looked up per call
        st = session.thread_state()
        cats, thread = st.cats, st.thread
        clock, append = session.clock, session.events.append

        collector = self

        class BackendMode(TorchFunctionMode):
            # annotate.category_enter/exit inlined: this runs on every torch call (its cost is
            # calibrated as ``backend``, docs/overhead.md)
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if not collector.enabled or annotate._active is not session or compiling():
                    return func(*args, **(kwargs or {}))
                if annotate._lean_session is session:  # its categories are on the C lean path's stack
                    annotate._lean.category_enter(backend)
                    try:
                        return func(*args, **kwargs) if kwargs else func(*args)
                    finally:
                        annotate._lean.category_exit(backend)
                parent = cats[-1] if cats else 0
                append((clock(), thread, cat_begin, backend, parent, -1, 0))
                cats.append(backend)
                try:
                    return func(*args, **kwargs) if kwargs else func(*args)
                finally:
                    if cats and cats[-1] == backend:
                        cats.pop()
                        append((clock(), thread, cat_end, backend, parent, -1, 0))
                    else:  # something inside left categories open: close them properly
                        annotate.category_exit(session, backend)

        self.mode = BackendMode()
        self.mode.__enter__()

    def set_enabled(self, on: bool) -> None:
        """Record torch calls or not (the session's alternating windows): a flag the mode checks."""
        self.enabled = bool(on)

    def stop(self) -> None:
        _imports.cancel("torch", self._enter)
        if self.mode is not None:
            mode, self.mode = self.mode, None
            mode.__exit__(None, None, None)

    def __repr__(self) -> str:
        return "BackendCollector(torch function mode)"


class BackendRecorder:
    """The session's backend collector: picks the native recorder or the Python mode at torch import.

    ``set_enabled`` works before torch is imported too: the choice made then starts as told.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.active: Any = None  # NativeBackendCollector or BackendCollector, once torch is imported
        self.enabled = True

    @property
    def kind(self) -> str:
        """``native``, ``python``, or ``""`` while torch is not imported."""
        if self.active is None:
            return ""
        return "python" if isinstance(self.active, BackendCollector) else "native"

    def start(self) -> BackendRecorder:
        _imports.when_imported("torch", self._begin)
        return self

    def _begin(self, torch: Any) -> None:
        if annotate._active is not self.session:
            return
        from rlscope.collectors.torch_native import NativeBackendCollector, NativeBackendUnavailable

        why = "RLSCOPE_NATIVE_BACKEND=0" if os.environ.get("RLSCOPE_NATIVE_BACKEND") == "0" else ""
        if not why:
            # the first use builds the library (seconds): rlscope's time, shown and removed as such
            annotate.category_enter(self.session, categories.PROFILER)
            try:
                native = NativeBackendCollector(self.session)
                native.enabled = self.enabled
                self.active = native.start()
                return
            except NativeBackendUnavailable as e:
                why = str(e)
            finally:
                annotate.category_exit(self.session, categories.PROFILER)
        print(
            f"rlscope: warning: native backend-op recorder not used ({why}); recording torch calls"
            " with the Python mode (about 3 µs per call, the thread that imported torch only)",
            file=sys.stderr,
            flush=True,
        )
        python_mode = BackendCollector()
        python_mode.enabled = self.enabled
        python_mode._enter(torch)
        self.active = python_mode

    def set_enabled(self, on: bool) -> None:
        """Switch backend recording on or off (the session's alternating windows)."""
        self.enabled = bool(on)
        if self.active is not None:
            self.active.set_enabled(self.enabled)

    def stop(self) -> None:
        _imports.cancel("torch", self._begin)
        if self.active is not None:
            active, self.active = self.active, None
            active.stop()

    def __repr__(self) -> str:
        return f"BackendRecorder({self.active!r})"


def start(session: Any) -> BackendRecorder:
    """Record the backend category for ``session``: native recorder first, else the Python mode."""
    return BackendRecorder(session).start()


def start_for(session: Any, started: Sequence[Any]) -> BackendRecorder | None:
    """The registry's factory (rlscope/collectors/registry.py): only with the ``backend`` option on."""
    return start(session) if session.options.get("backend", True) else None
