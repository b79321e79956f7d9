"""rlscope: a cross-stack profiler for deep reinforcement-learning workloads.

Annotate with :func:`scope` / :func:`phase` / :func:`simulator` / :func:`waiting`, profile with
:func:`profile`, read traces with :func:`load_trace` and validate them with :func:`check_trace`.
Importing rlscope imports neither torch nor gymnasium nor any GPU library, and the recording API
(the annotations, the session and its collectors) only on first use: a process that only analyzes
traces (``rlscope-analyze``) never loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rlscope._version import __version__

if TYPE_CHECKING:
    from rlscope.annotate import phase, scope, simulator, waiting
    from rlscope.session import Session, profile

__all__ = [
    "Session",
    "__version__",
    "check_trace",
    "load_trace",
    "phase",
    "profile",
    "scope",
    "simulator",
    "waiting",
    "wrap_env",
]


# the recording API's names and their modules, imported at the first use of one of them
_RECORDING = {
    "Session": "rlscope.session",
    "profile": "rlscope.session",
    "phase": "rlscope.annotate",
    "scope": "rlscope.annotate",
    "simulator": "rlscope.annotate",
    "waiting": "rlscope.annotate",
}


def __getattr__(name: str) -> Any:
    module = _RECORDING.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # bound here: later lookups of the name do not come back
        return value
    if name == "ray":  # rlscope.ray.profile without importing Ray (or rlscope.ray) before it is used
        return importlib.import_module("rlscope.ray")
    raise AttributeError(f"module 'rlscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_RECORDING})


def wrap_env(env: Any) -> Any:
    """Wrap an env (gymnasium's, or any object with ``step``/``reset``: a GPU simulator of one's own)
    so its ``step``/``reset`` time counts as ``simulator``, and as ``simulation`` under ``rlscope run``."""
    from rlscope.collectors.gym import wrap_env as _wrap

    return _wrap(env)


def load_trace(trace_dir: str) -> Any:
    """Load a trace directory into a :class:`rlscope.trace.reader.Trace` (Arrow tables per process)."""
    from rlscope.trace.reader import load_trace as _load

    return _load(trace_dir)


def check_trace(trace_dir: str) -> Any:
    """Validate a trace directory; returns a list of findings (empty when the trace is sound)."""
    from rlscope.trace.check import check_trace as _check

    return _check(trace_dir)
