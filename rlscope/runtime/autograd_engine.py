"""One wrapper around torch's autograd engine entry, shared by the things that hook it.

Both ``torch.autograd.backward`` and ``torch.autograd.grad`` (and ``Tensor.backward`` through the
former) call ``torch.autograd._engine_run_backward``. The native backend recorder
(collectors/torch_native.py) records each call as one op, and ``rlscope validate --twin``
(overhead/validate/twin.py) counts its returns as points where the turn may hand over, and
collectors/autograd_calls.py marks each call on its thread (whose operation the engine threads'
GPU work belongs to). No public hook covers
the call (RecordFunction sees the engine's nodes, not the caller's wait), so the module attribute is
replaced while any runs. Kept in one place so the wrappers step aside while Dynamo traces
through the call (``torch.compiler.is_compiling()``: a side effect there is a graph break) and
unwrap only what they put on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rlscope.runtime import never_compiled

MARK = "_rlscope_engine"  # the wrapper's owner, on the wrapper function


def wrap(torch: Any, owner: str, before: Callable[[], Any], after: Callable[[Any], None]) -> tuple | None:
    """Replace ``torch.autograd._engine_run_backward`` with a wrapper that calls ``before()`` ahead
    of each call and ``after(its result)`` once it returns or raises, outside Dynamo's tracing.

    Returns the handle for :func:`unwrap`, or None where torch has no such function or ``owner``'s
    wrapper is already the outermost one (a second start of the same collector)."""
    autograd = getattr(torch, "autograd", None)
    original = getattr(autograd, "_engine_run_backward", None)
    if original is None or getattr(original, MARK, None) == owner:
        return None
    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    @functools.wraps(original)
    def _engine_run_backward(*args: Any, **kwargs: Any) -> Any:
        if compiling():
            return original(*args, **kwargs)
        token = before()
        try:
            return original(*args, **kwargs)
        finally:
            after(token)

    setattr(_engine_run_backward, MARK, owner)
    never_compiled.skip(_engine_run_backward)  # a frame of its own in a compiled update's eager part
    autograd._engine_run_backward = _engine_run_backward
    return (autograd, original, _engine_run_backward)


def unwrap(handle: tuple | None) -> None:
    """Put back what :func:`wrap` replaced, unless another wrapper went on top since (that one
    keeps calling this one's wrapper, which keeps working)."""
    if handle is None:
        return
    autograd, original, wrapper = handle
    if autograd._engine_run_backward is wrapper:
        autograd._engine_run_backward = original
