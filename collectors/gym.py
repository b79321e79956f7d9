"""The ``simulator`` CPU category for gymnasium environments, and auto-wrapping for ``rlscope run``.

With automatic operations on (rlscope/runtime/auto_ops.py), a wrapped env's ``step``/``reset`` is
also the ``simulation`` operation (the outermost one, when wrapped envs nest).

Under ``rlscope run`` envs made by ``gymnasium.make``/``make_vec`` are wrapped, and gymnasium's own
vector envs and vector wrappers are patched at the class (:func:`patch_vector_envs`): a CleanRL-style
``gym.vector.SyncVectorEnv([make_env, ...])`` built directly wraps only its sub-envs, so without the
patch the vector env's batching, autoreset and info merging went to no operation, and simulation was
counted once per sub-env instead of once per vector step.
"""

from __future__ import annotations

import functools
from typing import Any

from rlscope.annotate import simulator
from rlscope.runtime import auto_ops
from rlscope.runtime.adapters.classes import subclasses

_SIM = simulator()


def wrap_env(env: Any) -> Any:
    """Wrap an env so time in its ``step``/``reset`` counts as ``simulator`` (and, with automatic
    operations, as the ``simulation`` operation): a gymnasium Env or VectorEnv, or any object with
    ``step`` and ``reset`` methods (a simulator of one's own on the GPU, EnvPool), whose other
    attributes the wrapper passes through.

    Wrapping twice is harmless (the env is returned as is). The wrapper changes no result.
    """
    if _is_wrapped(env):
        return env
    try:
        import gymnasium as gym
    except ImportError:  # not a gymnasium env, then: wrapped by its methods
        gym = None
    if gym is not None:
        single, vector = _wrapper_classes()
        if isinstance(env, gym.vector.VectorEnv):
            return vector(env)
        if isinstance(env, gym.Env):
            return single(env)
    if callable(getattr(env, "step", None)) and callable(getattr(env, "reset", None)):
        return SimulatedEnv(env)
    raise TypeError(
        f"rlscope.wrap_env expects a gymnasium Env or VectorEnv, or an object with step() and reset(),"
        f" got {type(env).__name__}"
    )


class SimulatedEnv:
    """Any env with ``step``/``reset`` (not gymnasium's): those are simulator time and the
    ``simulation`` operation; every other attribute is the env's own."""

    _rlscope_simulator = True

    def __init__(self, env: Any) -> None:
        self.env = env

    def step(self, *args: Any, **kwargs: Any) -> Any:
        return _simulated(self.env.step, *args, **kwargs)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        return _simulated(self.env.reset, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def __repr__(self) -> str:
        return f"SimulatedEnv({self.env!r})"


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
    patch_vector_envs(gym)
    gym._rlscope_patched = True


def patch_vector_envs(gym: Any) -> None:
    """Every vector env and vector wrapper class of gymnasium loaded so far: ``step``/``reset`` are
    simulator time and the ``simulation`` operation, however the env was built.

    Only a class's own methods are patched, once; nested calls (a wrapper's step calling its env's,
    a ``SyncVectorEnv`` calling its sub-envs') count once, as the outermost call, which includes
    the vector env's own work. ``AsyncVectorEnv.step`` in the main process is its wait for the
    workers; each worker process records its sub-envs' steps itself.
    """
    for cls in subclasses(gym.vector.VectorEnv):
        if getattr(cls, "_rlscope_simulator", False):  # rlscope's own wrapper records itself
            continue
        for method in ("step", "reset"):
            auto_ops.patch(cls, method, _simulator_method)


def _simulator_method(fn: Any) -> Any:
    """``fn`` (an env class's ``step``/``reset``) recorded as :func:`_simulated`."""

    @functools.wraps(fn)
    def method(*args: Any, **kwargs: Any) -> Any:
        return _simulated(fn, *args, **kwargs)

    method._rlscope_auto = True  # type: ignore[attr-defined]  # auto_ops.patch: patched once
    return method


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

    # gymnasium 1.x; 0.26-0.29 (PufferLib 2.0 pins 0.29) name it VectorEnvWrapper
    vector_wrapper = getattr(gym.vector, "VectorWrapper", None) or gym.vector.VectorEnvWrapper

    class SimulatorVectorWrapper(vector_wrapper):  # type: ignore[valid-type,misc]
        """Records vector ``step``/``reset`` as simulator time."""

        _rlscope_simulator = True

        def step(self, actions: Any) -> Any:
            return _simulated(self.env.step, actions)

        def reset(self, **kwargs: Any) -> Any:
            return _simulated(self.env.reset, **kwargs)

    return SimulatorWrapper, SimulatorVectorWrapper
