"""Registration points for the code that rlscope's own tools run inside a profiled program.

The session belongs to the core, which never imports the tools (``rlscope.overhead.validate``).
A tool that changes what a process's session does registers it here, from inside that process:

- ``BOOT_ENV`` names a ``module:function`` that the boot ``sitecustomize`` calls before the
  session starts; the launching tool sets it, and the processes the program starts inherit it
  (``rlscope validate``: its child boot, which registers the two points below);
- ``mode_session``: what :func:`rlscope.profile` returns while ``RLSCOPE_MODE`` is set;
- ``turns``: this process's turns of a twin run, which the session hands over at scope ends.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

BOOT_ENV = "RLSCOPE_BOOT_HOOK"
MODE_ENV = "RLSCOPE_MODE"  # off | timers | profile: the session rlscope validate measures with
# Set by `rlscope run` (rlscope/cli/main.py) for the program it profiles; rlscope/runtime/autorun.py
# starts that program's session from them
RUN_TRACE_DIR_ENV = "RLSCOPE_RUN_TRACE_DIR"
RUN_OPTIONS_ENV = "RLSCOPE_RUN_OPTIONS"
RUN_PARENT_ENV = "RLSCOPE_RUN_PARENT"  # pid of the latest profiled process in a process's ancestry

ModeSession = Callable[[str, "str | os.PathLike[str]", dict[str, Any]], Any]

_mode_session: ModeSession | None = None
_turns: Callable[[], Any] | None = None


def register(*, mode_session: ModeSession | None = None, turns: Callable[[], Any] | None = None) -> None:
    """Set the session factory for ``RLSCOPE_MODE`` and the source of twin turns (None: leave as is)."""
    global _mode_session, _turns
    if mode_session is not None:
        _mode_session = mode_session
    if turns is not None:
        _turns = turns


def mode_session() -> ModeSession | None:
    """The registered factory of ``RLSCOPE_MODE`` sessions (None: no tool registered one)."""
    return _mode_session


def current_turn() -> Any:
    """This process's twin turns, or None (no twin run, or a process forked from one)."""
    return _turns() if _turns is not None else None


def run_boot_hook() -> None:
    """Call the ``module:function`` named by ``BOOT_ENV``, if any (the boot sitecustomize does)."""
    spec = os.environ.get(BOOT_ENV)
    if not spec:
        return
    module, _, function = spec.partition(":")
    getattr(importlib.import_module(module), function or "boot")()
