"""Imported by the ``sitecustomize`` that ``rlscope run`` puts on the child's PYTHONPATH.

Starts a session for this interpreter (and, through the inherited environment, for every Python
subprocess it starts, each in its own process directory) and wraps every env made through
``gymnasium.make`` / ``gymnasium.make_vec`` with the simulator wrapper. A failure here warns and
lets the user's script run unprofiled: profiling must never break the job.

A program that starts Ray gets its Ray workers profiled too: they are children of the raylet, not of
this process tree, so on import of ray the bootstrap hands them Ray's ``worker_process_setup_hook``
(:func:`rlscope.ray.follow_run`); their traces come back into the run's trace directory.

The time from the session's start to the program's first line (the rest of the interpreter's
start-up) is the ``startup`` phase; the analysis extends it to the program's first phase or
operation, so its imports and set-up are start-up too (rlscope/analysis/startup.py).

Every process of the run, the first one included, flushes its session before a SIGTERM or SIGHUP
ends it (rlscope/runtime/child_signal.py): a parent ends its workers with SIGTERM, and ``rlscope
run`` forwards the SIGTERM or SIGHUP it gets (``kill``, a batch scheduler, ``docker stop``, a closed
terminal) to the program's whole process group. The handler is installed before the program's first
line, so a handler of the program's own replaces it and stays in charge; that process's trace then
ends on the program's own way out (``atexit``).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

from rlscope._imports import when_imported
from rlscope.collectors.gym import patch_gymnasium
from rlscope.runtime import child_signal
from rlscope.runtime.hooks import RUN_OPTIONS_ENV as OPTIONS_ENV
from rlscope.runtime.hooks import RUN_TRACE_DIR_ENV as TRACE_DIR_ENV
from rlscope.session import Session

STARTUP_PHASE = "startup"


def is_multiprocessing_helper() -> bool:
    """multiprocessing's resource tracker (``-c "from multiprocessing.resource_tracker import ..."``).

    It runs none of the program's code, outlives the process that started it (its session would
    start after its parent's end and read ppid 1), and would only add an empty process to the
    report. The forkserver is profiled: the workers it forks inherit its session.
    """
    argv = getattr(sys, "orig_argv", [])
    return "-c" in argv and any("multiprocessing.resource_tracker" in a for a in argv)


def start_from_env() -> None:
    trace_dir = os.environ.get(TRACE_DIR_ENV)
    if not trace_dir or is_multiprocessing_helper():
        return
    import rlscope

    with child_signal.signals_kept_from_new_threads():  # the threads rlscope starts here
        try:
            options = json.loads(os.environ.get(OPTIONS_ENV, "{}") or "{}")
            session = rlscope.profile(trace_dir, **options).start()
        except Exception as e:
            warnings.warn(f"rlscope: this process is not profiled: {e}", stacklevel=1)
            return
        try:
            open_startup_phase()
            if isinstance(session, Session):  # not a stand-in of rlscope validate's (off, timers)
                child_signal.end_cleanly_on(session, child_signal.ENDING_SIGNALS)
        except Exception as e:  # the trace goes on without these
            warnings.warn(f"rlscope: {e}", stacklevel=1)
    when_imported("gymnasium", patch_gymnasium)
    when_imported("ray", lambda ray: follow_ray(session, options))


def follow_ray(session: Any, options: dict[str, Any]) -> None:
    """The program imported ray: its ``ray.init`` will start rlscope sessions in the Ray workers."""
    from rlscope.ray import follow_run

    follow_run(session, options)


def open_startup_phase() -> None:
    """Open the ``startup`` phase; it closes right before the program's first line runs.

    The interpreter runs the program itself (``python train.py``, ``-m``, ``-c``), so its first
    line is found with a profile function (this thread only) that waits for the first
    ``<module>`` frame of ``__main__`` and then removes itself; only the few calls left before
    the program (the end of ``site``, ``runpy`` for ``-m``) pass through it. If a profiler is
    already installed, there is no startup phase rather than one that never closes.
    """
    if sys.getprofile() is not None:
        return
    import rlscope

    startup = rlscope.phase(STARTUP_PHASE)

    def until_main(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name != "<module>":
            return
        if frame.f_globals.get("__name__") != "__main__":
            return
        if sys.getprofile() is until_main:
            sys.setprofile(None)
        try:
            startup.__exit__(None, None, None)
        except Exception as e:  # never break the program
            warnings.warn(f"rlscope: no startup phase: {e}", stacklevel=1)

    startup.__enter__()
    sys.setprofile(until_main)


start_from_env()
