"""A multiprocessing child's session flushes at its exit too, though the child ends through ``os._exit``.

Every way a process can end normally flushes its session: ``atexit`` for an interpreter that exits
(spawned children included: ``spawn_main`` ends with ``sys.exit``), the finalizer below for
multiprocessing children, and, under ``rlscope run`` (every process of the run, the first included)
and in forked children, a handler for the SIGTERM or SIGHUP that ends the process: ``rlscope run``
forwarding a signal, a parent ending its children (``Pool.terminate``, ``with Pool(...)``, daemonic
children at the parent's exit). Only a signal still at its default action is taken: a program's own
handler stays in charge, and its normal exit flushes the trace (rlscope/runtime/child_signal.py).

``BaseProcess._bootstrap`` (CPython's multiprocessing/process.py) runs the child's target, then
``util._exit_function()`` (its finalizers with an exit priority, highest first), then returns to
``os._exit`` (fork, forkserver; spawn's ``spawn_main`` calls ``sys.exit``, so atexit covers it as
well). A ``util.Finalize`` is the hook that runs on that path. It must be registered *in the child,
after* ``_bootstrap``'s ``_after_fork`` has cleared the finalizers inherited from the parent:
``util.register_after_fork`` hooks run right after that clearing (an ``os.register_at_fork`` hook
runs before it, inside ``os.fork``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlscope.session import Session


def hook_multiprocessing(session: Session, util: Any) -> None:
    """On ``multiprocessing.util``'s import: every child this process starts registers the finalizer."""
    util.register_after_fork(session, _register_finalizer)
    if util.process.parent_process() is not None:  # started inside a running child already
        _register_finalizer(session)


def _register_finalizer(session: Session) -> None:
    import multiprocessing.util

    # exitpriority 100: first of the finalizers (Pool and Queue ones use -5 to 10), so the
    # trace is on disk before any finalizer that could block and get the child killed
    multiprocessing.util.Finalize(session, session.stop_at_exit, exitpriority=100)
