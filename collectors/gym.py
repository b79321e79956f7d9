"""The ``simulator`` CPU category for gymnasium environments, and auto-wrapping for ``rlscope run``.

With automatic operations on (rlscope/runtime/auto_ops.py), a wrapped env's ``step``/``reset`` is
also the ``simulation`` operation (the outermost one, when wrapped envs nest).
"""

from __future__ import annotations

import functools
from typing import Any

from rlscope.annotate import simulator
from rlscope.runtime import auto_ops

_SIM = simulator()


def wrap_env(env: Any) -> Any:
    """Wrap a gymnasium env (single or vector) so time in ``step``/``reset`` counts as ``simulator``.

    Wrapping twice is harmless (the env is returned as is). The wrapper changes no result.
    """
    import gymnasium as gym

    if _is_wrapped(env):
        return env
    single, vector = _wrapper_classes()
    if isinstance(env, gym.vector.VectorEnv):
        return vector(env)
    if isinstance(env, gym.Env):
        return single(env)
    raise TypeError(f"rlscope.wrap_env expects a gymnasium Env or VectorEnv, got {type(env).__name__}")


def patch_gymnasium(gym: Any) -> None:
    """Make ``gymnasium.make``/``make_vec`` return simulator-wrapped envs (``rlscope run``, and the
    Ray workers of RLlib's env runners, rlscope/runtime/adapters/rllib.py)."""
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


def _is_wrapped(env: Any) -> bool:
    while env is not None:
        if getattr(env, "_rlscope_simulator", False):
            return True
        env = getattr(env, "env", None)
    return False


def _simulated(call: Any, *args: Any, **kwargs: Any) -> Any:
    """An env's ``step``/``reset``: simulator time, and the automatic ``simulation`` operation."""
    opened = auto_ops.simulation_begin()
    try:
        with _SIM:
            return call(*args, **kwargs)
    finally:
        auto_ops.simulation_end(opened)


@functools.cache
def _wrapper_classes() -> tuple[type, type]:
    """The wrapper classes, built on first use so that gymnasium is imported only when needed."""
    import gymnasium as gym

    class SimulatorWrapper(gym.Wrapper):
        """Records ``step``/``reset`` as simulator time."""

        _rlscope_simulator = True

        def step(self, action: Any) -> Any:
            return _simulated(self.env.step, action)

        def reset(self, **kwargs: Any) -> Any:
            return _simulated(self.env.reset, **kwargs)

    class SimulatorVectorWrapper(gym.vector.VectorWrapper):
        """Records vector ``step``/``reset`` as simulator time."""

        _rlscope_simulator = True

        def step(self, actions: Any) -> Any:
            return _simulated(self.env.step, actions)

        def reset(self, **kwargs: Any) -> Any:
            return _simulated(self.env.reset, **kwargs)

    return SimulatorWrapper, SimulatorVectorWrapper
