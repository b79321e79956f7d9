"""The ``simulator`` CPU category for gymnasium environments, and auto-wrapping for ``rlscope run``."""

from __future__ import annotations

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
    if isinstance(env, gym.vector.VectorEnv):
        return _SimulatorVectorWrapper(env)
    if isinstance(env, gym.Env):
        return _SimulatorWrapper(env)
    raise TypeError(f"rlscope.wrap_env expects a gymnasium Env or VectorEnv, got {type(env).__name__}")


def _is_wrapped(env: Any) -> bool:
    while env is not None:
        if getattr(env, "_rlscope_simulator", False):
            return True
        env = getattr(env, "env", None)
    return False


def _wrapper_classes() -> tuple[type, type]:
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


def __getattr__(name: str) -> Any:
    # gymnasium is imported only when a wrapper is first needed (lazy optional import)
    if name in ("_SimulatorWrapper", "_SimulatorVectorWrapper"):
        single, vector = _wrapper_classes()
        globals()["_SimulatorWrapper"], globals()["_SimulatorVectorWrapper"] = single, vector
        return globals()[name]
    raise AttributeError(name)
