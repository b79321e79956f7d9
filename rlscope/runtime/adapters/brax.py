"""Brax: each environment's and wrapper's own ``step`` and ``reset`` are ``simulation``, as a named scope
inside jitted code (rlscope/runtime/adapters/jax_envs.py); Brax defines them per subclass of ``Env``."""

from __future__ import annotations

from typing import Any

from rlscope.runtime.adapters.jax_envs import wrap_subclasses


def apply(base: Any) -> None:
    """``base`` is ``brax.envs.base``."""
    cls = getattr(base, "Env", None)
    if isinstance(cls, type):
        wrap_subclasses(cls)
