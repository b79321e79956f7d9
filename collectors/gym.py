"""The ``simulator`` CPU category for gymnasium environments, and auto-wrapping for ``rlscope run``."""

from __future__ import annotations

import functools
from typing import Any

from rlscope.annotate import simulator

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


def _is_wrapped(env: Any) -> bool:
    while env is not None:
        if getattr(env, "_rlscope_simulator", False):
            return True
        env = getattr(env, "env", None)
    return False


@functools.cache
def _wrapper_classes() -> tuple[type, type]:
    """The wrapper classes, built on first use so that gymnasium is imported only when needed."""
    import gymnasium as gym

    class SimulatorWrapper(gym.Wrapper):
        """Records ``step``/``reset`` as simulator time."""

        _rlscope_simulator = True

        def step(self, action: Any) -> Any:
            with _SIM:
                return self.env.step(action)

        def reset(self, **kwargs: Any) -> Any:
            with _SIM:
                return self.env.reset(**kwargs)

    class SimulatorVectorWrapper(gym.vector.VectorWrapper):
        """Records vector ``step``/``reset`` as simulator time."""

        _rlscope_simulator = True

        def step(self, actions: Any) -> Any:
            with _SIM:
                return self.env.step(actions)

        def reset(self, **kwargs: Any) -> Any:
            with _SIM:
                return self.env.reset(**kwargs)

    return SimulatorWrapper, SimulatorVectorWrapper
