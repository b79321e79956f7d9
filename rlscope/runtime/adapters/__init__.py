"""Library adapters: a library's own phases, put on its classes when the program imports it.

Each adapter wraps a few methods of one library (never a dependency of rlscope: nothing here
imports it) so that its calls are automatic phases (rlscope/runtime/auto_ops.py); the generic
automatic operations nest inside them. They act only while a session with automatic operations
runs (one flag read per call otherwise).

- stable-baselines3 (``sb3``): ``collect_rollouts`` is ``rollout``, ``train`` is ``update`` (PPO,
  A2C, DQN, SAC, TD3 and their subclasses), ``VecEnv`` ``step``/``reset`` are ``simulation``.
- TorchRL (``torchrl``): a collector's rollout is ``rollout``, a loss module's or value
  estimator's call and the optimizer step after it are ``update``.
- RLlib's new API stack (``rllib``): ``EnvRunner.sample`` is ``rollout``, ``Learner.update`` is
  ``update``, in the Ray workers that ``rlscope run`` profiles (rlscope/ray.py).
- PufferLib (``pufferlib``): a ``pufferlib.vector`` backend's ``step``/``reset``/``send``/``recv``/
  ``async_reset`` are ``simulation``.
- gymnax and Brax (``gymnax``, ``brax``): an environment's ``step``/``reset`` are ``simulation``: a
  ``jax.named_scope`` inside jitted code (its kernels' scope, rlscope/analysis/device_scopes.py), and
  the operation when called eagerly.
"""

from __future__ import annotations

from rlscope import _imports

# (module whose import triggers the adapter, the adapter's module under rlscope.runtime.adapters)
ADAPTERS = (
    ("stable_baselines3", "sb3"),
    ("torchrl", "torchrl"),
    ("ray.rllib", "rllib"),
    ("pufferlib.vector", "pufferlib"),
    ("gymnax.environments.environment", "gymnax"),
    ("brax.envs.base", "brax"),
)


def _apply(adapter: str) -> object:
    def apply(module: object) -> None:
        import importlib

        importlib.import_module(f"rlscope.runtime.adapters.{adapter}").apply(module)

    apply.__name__ = f"apply_{adapter}"
    return apply


_callbacks = {adapter: _apply(adapter) for _, adapter in ADAPTERS}
_registered = False


def apply_when_imported() -> None:
    """Each adapter runs once its library is imported (now, if it already is)."""
    global _registered
    if _registered:
        return
    _registered = True
    for module, adapter in ADAPTERS:
        _imports.when_imported(module, _callbacks[adapter])
