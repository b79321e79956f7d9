"""The ``backend`` CPU category: time inside PyTorch's native ops.

Mechanism: a ``TorchFunctionMode`` wraps every call into the torch API made from Python (module
functions, Tensor methods, ``backward``) in a ``backend`` category interval. Inside the handler
the mode is disabled, so a torch call made by torch's own Python code is not recorded twice and
the whole call, including the C++ kernels and autograd engine it runs, counts as backend.

Why not Kineto's CPU events: they are only delivered when the profiler stops (or at schedule
cycle ends), so a long run would hold its whole trace in memory, and they are per aten op and
need de-nesting. Why not ``sys.setprofile``: it fires on every Python call, costing far more.
The cost of this mode is measured by benchmarks/scope_overhead.py and corrected by calibration.
Torch function modes are thread-local: only the thread that started the session is recorded.
"""

from __future__ import annotations

import warnings
from typing import Any

from rlscope import annotate, categories


def start(session: Any) -> Any:
    """Enter the backend mode on this thread; None (with a warning) when torch is unavailable."""
    try:
        import torch
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    except Exception as e:  # a broken torch install must not stop the user's job
        warnings.warn(f"rlscope: backend time not recorded (torch failed to import: {e})", stacklevel=3)
        return None

    backend = categories.BACKEND
    enter = annotate.category_enter
    leave = annotate.category_exit

    class BackendMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if kwargs is None:
                kwargs = {}
            s = annotate._active
            if s is None:
                return func(*args, **kwargs)
            enter(s, backend)
            try:
                return func(*args, **kwargs)
            finally:
                leave(s, backend)

    del torch
    mode = BackendMode()
    mode.__enter__()
    return _ModeHandle(mode)


class _ModeHandle:
    def __init__(self, mode: Any) -> None:
        self.mode = mode

    def stop(self) -> None:
        self.mode.__exit__(None, None, None)

    def __repr__(self) -> str:
        return "torch_ops.BackendMode"
