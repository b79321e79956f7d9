"""JAX environments (gymnax, Brax): their ``step`` and ``reset`` are ``simulation``, inside jitted code too.

A JAX RL loop steps its environments inside one jitted function, where no Python runs per step: there
the wrapper puts the call under ``jax.named_scope("simulation")`` while jax traces it, so the kernels
XLA makes of the environment's code carry the scope (rlscope/analysis/device_scopes.py). Called
eagerly (concrete arrays, no tracing), the call is also the automatic operation ``simulation`` on the
CPU, as a gymnasium env's step is (rlscope/runtime/auto_ops.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlscope.runtime import auto_ops

METHODS = ("step", "reset")


def _traced(jax: Any, args: tuple, kwargs: dict) -> bool:
    """Whether jax is tracing this call (an argument is a tracer, not an array)."""
    tracer = jax.core.Tracer
    return any(isinstance(x, tracer) for x in jax.tree_util.tree_leaves((args, kwargs)))


def simulation(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a JAX env's ``step``/``reset``: a ``simulation`` named scope, and eagerly the operation."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not auto_ops._on:
            return fn(*args, **kwargs)
        import jax

        with jax.named_scope(auto_ops.SIMULATION):
            if _traced(jax, args, kwargs):
                return fn(*args, **kwargs)
            opened = auto_ops.simulation_begin()
            try:
                return fn(*args, **kwargs)
            finally:
                auto_ops.simulation_end(opened)

    return auto_ops._like(wrapper, fn)


def wrap_class(cls: type) -> None:
    """``cls``'s own ``step``/``reset``, wrapped once."""
    for method in METHODS:
        auto_ops.patch(cls, method, simulation)


def wrap_subclasses(base: type) -> None:
    """Every subclass of ``base`` defined so far, and each defined from now on (``__init_subclass__``):
    Brax's environments and wrappers each define their own ``step``."""
    todo = [base]
    while todo:
        cls = todo.pop()
        wrap_class(cls)
        todo.extend(cls.__subclasses__())
    original = base.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if original is not None:
            original.__func__(cls, **kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        wrap_class(cls)

    base.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
