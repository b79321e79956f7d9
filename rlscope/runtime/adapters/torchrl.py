"""TorchRL: a collector's ``rollout`` is the ``rollout`` phase; a loss module's or a value
estimator's (GAE, TD(lambda)) call opens the ``update`` phase, which the next optimizer step ends;
an env's ``step``/``reset``/``step_and_maybe_reset`` is ``simulation`` (the outermost call).

The policy's forward inside the collector runs with autograd off (the collector's own
``torch.no_grad()``), so the generic ``inference`` finds it; the loss module's forward is the first
grad-enabled module call of the update, so ``backprop`` starts with it. A value estimator turns
autograd off inside its forward (``differentiable=False``, the default), not around its call: TorchRL's
PPO tutorial calls GAE with autograd on, which would otherwise open ``backprop`` at GAE,
before the update phase. Its call is ``inference`` (in the update phase), called in a
``torch.no_grad()`` block or not.
"""

from __future__ import annotations

import importlib
from typing import Any

from rlscope.runtime import auto_ops
from rlscope.runtime.adapters.classes import subclasses as _subclasses

ENV_METHODS = ("step", "reset", "step_and_maybe_reset")


def _class(path: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(path), name, None)
    except ImportError:
        return None


def apply(torchrl: Any) -> None:
    env_base = _class("torchrl.envs.common", "EnvBase")
    if env_base is not None:
        for cls in _subclasses(env_base):
            for method in ENV_METHODS:
                auto_ops.patch(cls, method, auto_ops.simulation)
    # the collectors' base class: DataCollectorBase up to TorchRL 0.13, BaseCollector from 0.14
    collector = _class("torchrl.collectors", "DataCollectorBase")
    collector = collector or _class("torchrl.collectors", "BaseCollector")
    if collector is not None:
        for cls in _subclasses(collector):
            auto_ops.patch(cls, "rollout", lambda fn: auto_ops.in_phase(auto_ops.ROLLOUT, fn))
    loss = _class("torchrl.objectives.common", "LossModule")
    if loss is not None:
        auto_ops.update_phase_starts_at(loss)
    estimator = _class("torchrl.objectives.value.advantages", "ValueEstimatorBase")
    if estimator is not None:
        auto_ops.update_phase_starts_at(estimator)
        auto_ops.grad_mode_set_inside(estimator, _estimator_grad)


def _estimator_grad(estimator: Any, grad: bool) -> bool:
    """A value estimator's forward runs under ``torch.set_grad_enabled(self.differentiable)``."""
    return bool(getattr(estimator, "differentiable", grad))
