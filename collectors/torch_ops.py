"""The ``backend`` CPU category: time inside PyTorch's native ops.

Mechanism: a ``TorchFunctionMode`` wraps every call into the torch API made from Python (module
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

from typing import Any

from rlscope import _imports, annotate, categories
from rlscope.trace import schema as S


class BackendCollector:
    """Enters the backend-recording torch function mode once torch is imported."""

    def __init__(self) -> None:
        self.mode: Any = None

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

        class BackendMode(TorchFunctionMode):
            # annotate.category_enter/exit inlined: this runs on every torch call (its cost is
            # calibrated as ``backend``, docs/overhead.md)
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if annotate._active is not session or compiling():
                    return func(*args, **(kwargs or {}))
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

    def stop(self) -> None:
        _imports.cancel("torch", self._enter)
        if self.mode is not None:
            mode, self.mode = self.mode, None
            mode.__exit__(None, None, None)

    def __repr__(self) -> str:
        return "BackendCollector(torch function mode)"


def start(session: Any) -> BackendCollector:
    return BackendCollector().start()
