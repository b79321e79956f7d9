"""Worker loops' waits for their next command, recorded as the ``waiting`` category.

A vector-env or Pool worker spends most of its life blocked in one call: the receive at the top of
its loop, until the learner sends the next ``step`` or the pool the next task. Recorded as plain
time outside operations, that wait read as ``[unannotated]`` work. The worker loops below are
wrapped so that exactly that receive is the ``waiting`` category (rlscope/categories.py); the
analysis reports it as the ``[waiting]`` row and counts it in no figure of work.

Why a recorded boundary, not a rule over the timeline: the loop's own Python (dispatching the
command, sending the result back, unpickling an observation) is work and stays ``[unannotated]``;
only the blocking call waits, and only the code that makes it knows where it starts and ends.

Each loop is a module function that a ``Process`` runs (its ``target``), looked up in its module
when the parent builds the workers (and, under the forkserver and spawn start methods, again in
the child when the target is unpickled), so the module attribute is replaced: the wrapper marks the
receive of the connection or queue argument named in :data:`WORKER_LOOPS`, on that object alone,
and calls the library's own loop. A loop a library passes differently, or one of the program's
own, can use ``rlscope.waiting()`` around its receive. The forkserver that forks SubprocVecEnv's
workers by default waits in one ``select`` for fork requests: that select is its wait.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import Any, NamedTuple

from rlscope import _imports, annotate

__all__ = ["WORKER_LOOPS", "WorkerLoop", "install", "is_forkserver", "mark_waits", "wrap_loop"]


class WorkerLoop(NamedTuple):
    """A worker loop: ``module.function`` blocks in ``argument.method()`` for its next command."""

    module: str
    function: str
    argument: str
    method: str


WORKER_LOOPS: tuple[WorkerLoop, ...] = (
    # stable-baselines3's SubprocVecEnv: ``cmd, data = remote.recv()``
    WorkerLoop("stable_baselines3.common.vec_env.subproc_vec_env", "_worker", "remote", "recv"),
    # gymnasium's AsyncVectorEnv: ``command, data = pipe.recv()``
    WorkerLoop("gymnasium.vector.async_vector_env", "_async_worker", "pipe", "recv"),
    # multiprocessing.Pool: ``task = get()``, ``get = inqueue.get``
    WorkerLoop("multiprocessing.pool", "worker", "inqueue", "get"),
)


def mark_waits(obj: Any, method: str) -> bool:
    """Make ``obj.method`` (one connection's ``recv``, one queue's ``get``) a wait, on that object
    alone. False where the object takes no attribute of its own (it is then left as it is)."""
    call = getattr(obj, method, None)
    if call is None or getattr(call, "_rlscope_wait", False):
        return False

    @functools.wraps(call)
    def waited(*args: Any, **kwargs: Any) -> Any:
        with annotate.waiting():
            return call(*args, **kwargs)

    waited._rlscope_wait = True  # type: ignore[attr-defined]
    try:
        setattr(obj, method, waited)
    except (AttributeError, TypeError):  # __slots__, a C type: no waits marked, nothing else changes
        return False
    return True


def wrap_loop(fn: Any, argument: str, method: str) -> Any:
    """``fn`` (a worker loop) with its ``argument``'s ``method`` marked as a wait before it runs."""
    if getattr(fn, "_rlscope_wait", False):
        return fn
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def loop(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:  # the library's own call will say what is wrong
            return fn(*args, **kwargs)
        if argument in bound.arguments:
            mark_waits(bound.arguments[argument], method)
        return fn(*args, **kwargs)

    loop._rlscope_wait = True  # type: ignore[attr-defined]
    return loop


def _patch(spec: WorkerLoop) -> Any:
    def patch(module: Any) -> None:
        fn = getattr(module, spec.function, None)
        if callable(fn):
            setattr(module, spec.function, wrap_loop(fn, spec.argument, spec.method))

    return patch


def is_forkserver() -> bool:
    """This process is multiprocessing's forkserver (trace.header.is_forkserver_command)."""
    from rlscope.trace import header  # here: it loads numpy, which importing rlscope does not

    return header.is_forkserver_command(list(getattr(sys, "orig_argv", [])))


def _forkserver_waits(selectors: Any) -> None:
    """The forkserver's loop blocks in ``selector.select()`` for the next fork request (or a child's
    exit) and does nothing else: that select is its wait, in this process only (the workers it forks
    inherit the class, not the wait)."""
    cls = selectors.DefaultSelector
    select = getattr(cls, "select", None)  # inherited (EpollSelector's is _PollLikeSelector's): set on cls
    if select is None or getattr(select, "_rlscope_wait", False):
        return
    pid = os.getpid()

    @functools.wraps(select)
    def waited(self: Any, *args: Any, **kwargs: Any) -> Any:
        if os.getpid() != pid:
            return select(self, *args, **kwargs)
        with annotate.waiting():
            return select(self, *args, **kwargs)

    waited._rlscope_wait = True  # type: ignore[attr-defined]
    cls.select = waited


_installed = False


def install() -> None:
    """Wrap every worker loop of :data:`WORKER_LOOPS` once its module is imported (now, if it is), and
    the forkserver's wait for fork requests in the forkserver."""
    global _installed
    if _installed:
        return
    _installed = True
    for spec in WORKER_LOOPS:
        _imports.when_imported(spec.module, _patch(spec))
    if is_forkserver():
        _imports.when_imported("selectors", _forkserver_waits)
