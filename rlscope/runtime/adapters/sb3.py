"""stable-baselines3: ``collect_rollouts`` is the ``rollout`` phase, ``train`` the ``update`` phase,
a ``VecEnv``'s ``step``/``reset`` is ``simulation``.

``train`` is wrapped on PPO, A2C, DQN, SAC and TD3 (DDPG is TD3's subclass and inherits it); a
subclass that overrides it and calls ``super().train()`` stays in one phase (an automatic phase
opens only where none is open). ``VecEnv.step`` is the base class's (its subclasses implement
``step_async``/``step_wait``); ``reset`` is wrapped on every ``VecEnv`` subclass defined when
stable-baselines3 is imported (DummyVecEnv, SubprocVecEnv and the wrappers), the outermost call
counting.
"""

from __future__ import annotations

from typing import Any

from rlscope.runtime import auto_ops
from rlscope.runtime.adapters.classes import subclasses as _subclasses

ALGORITHMS = ("PPO", "A2C", "DQN", "SAC", "TD3")


def apply(sb3: Any) -> None:
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv

    for cls in (OnPolicyAlgorithm, OffPolicyAlgorithm):
        auto_ops.patch(cls, "collect_rollouts", lambda fn: auto_ops.in_phase(auto_ops.ROLLOUT, fn))
    for name in ALGORITHMS:
        cls = getattr(sb3, name, None)
        if cls is not None:
            auto_ops.patch(cls, "train", lambda fn: auto_ops.in_phase(auto_ops.UPDATE, fn))
    auto_ops.patch(VecEnv, "step", auto_ops.simulation)
    for cls in _subclasses(VecEnv):
        auto_ops.patch(cls, "reset", auto_ops.simulation)
