"""PufferLib: a vector env's ``step``/``reset`` and the ``send``/``recv``/``async_reset`` that
clean_pufferl-style loops call instead are ``simulation`` (the outermost call: a ``step`` is one,
the ``send`` and ``recv`` inside it count in it).

The gymnasium envs under PufferLib's emulation layer are simulation anyway (``gymnasium.make`` under
``rlscope run``), but as sub-envs: once per sub-env a step in the ``Serial`` backend, and only in
the workers of the ``Multiprocessing`` backend, whose learner-side ``recv`` is the wait for them (as
``AsyncVectorEnv.step`` is). The policy's forward in ``torch.no_grad()`` and the
update are the generic ``inference`` and ``backprop``; PufferLib has no training loop of its own in
the package, so there are no library phases.
"""

from __future__ import annotations

from typing import Any

from rlscope.runtime import auto_ops

VECTOR_CLASSES = ("Serial", "Multiprocessing", "Ray")
METHODS = ("step", "reset", "send", "recv", "async_reset")


def apply(vector: Any) -> None:
    """``vector`` is ``pufferlib.vector``: its backends' methods, each class's own."""
    for name in VECTOR_CLASSES:
        cls = getattr(vector, name, None)
        if isinstance(cls, type):
            for method in METHODS:
                auto_ops.patch(cls, method, auto_ops.simulation)
