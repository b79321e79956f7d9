"""gymnax: every environment's ``step`` and ``reset`` (its base class's, which call ``step_env`` /
``reset_env``) are ``simulation``, as a named scope inside jitted code (adapters/jax_envs.py)."""

from __future__ import annotations

from typing import Any

from rlscope.runtime.adapters.jax_envs import wrap_class


def apply(environment: Any) -> None:
    """``environment`` is ``gymnax.environments.environment``."""
    cls = getattr(environment, "Environment", None)
    if isinstance(cls, type):
        wrap_class(cls)
