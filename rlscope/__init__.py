"""rlscope: a cross-stack profiler for deep reinforcement-learning workloads.

Annotate with :func:`scope` / :func:`phase` / :func:`simulator` / :func:`waiting`, profile with
:func:`profile`, read traces with :func:`load_trace` and validate them with :func:`check_trace`.
Importing rlscope imports neither torch nor gymnasium nor any GPU library.
"""

from __future__ import annotations

from typing import Any

from rlscope._version import __version__
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


def __getattr__(name: str) -> Any:
    if name == "ray":  # rlscope.ray.profile without importing Ray (or rlscope.ray) before it is used
        import importlib

        return importlib.import_module("rlscope.ray")
    raise AttributeError(f"module 'rlscope' has no attribute {name!r}")


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
