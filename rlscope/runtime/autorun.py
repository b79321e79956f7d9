"""Imported by the ``sitecustomize`` that ``rlscope run`` puts on the child's PYTHONPATH.

Starts a session for this interpreter (and, through the inherited environment, for every Python
subprocess it starts, each in its own process directory) and wraps every env made through
``gymnasium.make`` / ``gymnasium.make_vec`` with the simulator wrapper. A failure here warns and
lets the user's script run unprofiled: profiling must never break the job.

A program that starts Ray gets its Ray workers profiled too: they are children of the raylet, not of
this process tree, so on import of ray the bootstrap hands them Ray's ``worker_process_setup_hook``
(:func:`rlscope.ray.follow_run`); their traces come back into the run's trace directory.

The time from the session's start to the program's first line (the rest of the interpreter's
start-up) is the ``startup`` phase. In the processes the program starts (spawned workers,
subprocesses), whose parent may end them with SIGTERM, the session flushes before they die.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

from rlscope._imports import when_imported
from rlscope.collectors.gym import patch_gymnasium
from rlscope.session import RUN_OPTIONS_ENV as OPTIONS_ENV
from rlscope.session import RUN_TRACE_DIR_ENV as TRACE_DIR_ENV

# "<pid> <trace dir>" of the run's first profiled process; the processes it starts inherit it
ROOT_ENV = "RLSCOPE_RUN_ROOT"
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

    try:
        options = json.loads(os.environ.get(OPTIONS_ENV, "{}") or "{}")
        session = rlscope.profile(trace_dir, **options).start()
    except Exception as e:
        warnings.warn(f"rlscope: this process is not profiled: {e}", stacklevel=1)
        return
    try:
        open_startup_phase()
        if is_child_of_the_run(trace_dir) and hasattr(session, "end_cleanly_on_sigterm"):
            session.end_cleanly_on_sigterm()
    except Exception as e:  # the trace goes on without these
        warnings.warn(f"rlscope: {e}", stacklevel=1)
    when_imported("gymnasium", patch_gymnasium)
    when_imported("ray", lambda ray: follow_ray(session, options))


def follow_ray(session: Any, options: dict[str, Any]) -> None:
    """The program imported ray: its ``ray.init`` will start rlscope sessions in the Ray workers."""
    from rlscope.ray import follow_run

    follow_run(session, options)


def is_child_of_the_run(trace_dir: str) -> bool:
    """False in the run's first profiled process (which marks the environment), True in the others."""
    me = f"{os.getpid()} {trace_dir}"
    root = os.environ.setdefault(ROOT_ENV, me)
    return root != me and root.split(" ", 1)[-1] == trace_dir


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
