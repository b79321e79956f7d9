"""RLlib's new API stack: an ``EnvRunner``'s ``sample`` is the ``rollout`` phase, a ``Learner``'s
update (``update``, and ``update_from_batch``/``update_from_episodes`` where the version has them)
the ``update`` phase.

RLlib runs them in Ray workers, which ``rlscope run`` profiles through rlscope/ray.py with the run's
options, automatic operations included; the adapter applies there when the worker imports RLlib.
The env runners' gymnasium vector envs come from ``gymnasium.make_vec``/``make``, wrapped here as
``rlscope run`` wraps them in its own processes (their steps are ``simulation``); the RLModule's
forward inside the runner runs under ``torch.no_grad()`` (``inference``), the learner's forward,
loss, backward and optimizer step are ``backprop``.
"""

from __future__ import annotations

from typing import Any

from rlscope import _imports
from rlscope.runtime import auto_ops

RUNNERS = (
    ("ray.rllib.env.env_runner", "EnvRunner"),
    ("ray.rllib.env.single_agent_env_runner", "SingleAgentEnvRunner"),
    ("ray.rllib.env.multi_agent_env_runner", "MultiAgentEnvRunner"),
)
LEARNERS = (("ray.rllib.core.learner.learner", "Learner"),)
LEARNER_METHODS = ("update", "update_from_batch", "update_from_episodes")


def _rollout(cls: type) -> None:
    auto_ops.patch(cls, "sample", lambda fn: auto_ops.in_phase(auto_ops.ROLLOUT, fn))


def _update(cls: type) -> None:
    for method in LEARNER_METHODS:
        auto_ops.patch(cls, method, lambda fn: auto_ops.in_phase(auto_ops.UPDATE, fn))


def _on_import(module_name: str, name: str, patch: Any) -> None:
    def apply(module: Any) -> None:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            patch(cls)

    _imports.when_imported(module_name, apply)


def apply(rllib: Any) -> None:
    """Each class is patched when its module is imported (RLlib imports them lazily)."""
    from rlscope.collectors.gym import patch_gymnasium

    _imports.when_imported("gymnasium", patch_gymnasium)
    for module_name, name in RUNNERS:
        _on_import(module_name, name, _rollout)
    for module_name, name in LEARNERS:
        _on_import(module_name, name, _update)
