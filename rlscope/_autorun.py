"""Imported by the ``sitecustomize`` that ``rlscope run`` puts on the child's PYTHONPATH.

Starts a session for this interpreter (and, through the inherited environment, for every Python
subprocess it starts, each in its own process directory) and wraps every env made through
``gymnasium.make`` / ``gymnasium.make_vec`` with the simulator wrapper. A failure here warns and
lets the user's script run unprofiled: profiling must never break the job.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from rlscope._imports import when_imported

TRACE_DIR_ENV = "RLSCOPE_RUN_TRACE_DIR"
OPTIONS_ENV = "RLSCOPE_RUN_OPTIONS"


def patch_gymnasium(gym: Any) -> None:
    """Make ``gymnasium.make``/``make_vec`` return simulator-wrapped envs."""
    from rlscope.collectors.gym import wrap_env

    if getattr(gym, "_rlscope_patched", False):
        return
    for attr in ("make", "make_vec"):
        original = getattr(gym, attr, None)
        if original is None:
            continue

        def patched(*args: Any, __orig: Any = original, **kwargs: Any) -> Any:
            return wrap_env(__orig(*args, **kwargs))

        patched.__wrapped__ = original  # type: ignore[attr-defined]
        patched.__doc__ = original.__doc__
        setattr(gym, attr, patched)
    gym._rlscope_patched = True


def start_from_env() -> None:
    trace_dir = os.environ.get(TRACE_DIR_ENV)
    if not trace_dir:
        return
    import rlscope

    try:
        options = json.loads(os.environ.get(OPTIONS_ENV, "{}") or "{}")
        rlscope.profile(trace_dir, **options).start()
    except Exception as e:
        warnings.warn(f"rlscope: this process is not profiled: {e}", stacklevel=1)
        return
    when_imported("gymnasium", patch_gymnasium)


start_from_env()
