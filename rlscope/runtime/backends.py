"""The ML frameworks rlscope records, and what each provides: one row a framework.

A framework (a *backend*) gives rlscope what the RL operations are made of:

- **op recording**: each framework op's time, the ``backend`` category (a collector row);
- **automatic operations**: hooks on its module calls, grad-disabled blocks and optimizer steps that
  open and close ``inference`` and ``backprop`` in unmodified code (rlscope/runtime/auto_ops.py);
- **engine attribution**: work its own threads run for a call of the program's thread (torch's
  autograd engine runs ``backward()`` on threads of its own), so GPU launches and time there go to
  the operation that asked for them (a collector row);
- **GPU launch correlation**: how a kernel recorded by CUPTI (framework-neutral, the ``gpu`` row)
  finds the host call that launched it: the CUDA API call's correlation id on the launching thread,
  and, for launches from the framework's threads, the engine rows above (rlscope/analysis/gpu.py);
- any further collectors of its own (torch: collectives from its flight recorder, allocator events,
  torch.compile's compilations).

The collectors are rows of rlscope/collectors/registry.py with ``backend`` set to the framework's
name; a row here names them. Importing this module imports no framework: everything is named
``module:attribute`` and loaded when the framework itself is imported by the program.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Backend:
    """One framework: the import that makes it present and what rlscope records of it."""

    name: str
    module: str  # the program's import of it starts its hooks (rlscope/_imports.py)
    op_recorder: str  # its row in rlscope/collectors/registry.py ("" : none)
    engine_attribution: str  # its row there ("" : the framework runs no threads of its own)
    collectors: tuple[str, ...] = ()  # its further rows there
    auto_ops_install: str = ""  # ``module:function(framework_module)``: the automatic-operation hooks on
    auto_ops_uninstall: str = ""  # ``module:function()``: and off again

    def rows(self) -> tuple[str, ...]:
        """Every collector row of this framework, in the registry's names."""
        return tuple(r for r in (self.op_recorder, self.engine_attribution, *self.collectors) if r)


def load(ref: str) -> Callable[..., Any]:
    """The callable a ``module:attribute`` reference names (imported now)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


BACKENDS: tuple[Backend, ...] = (
    Backend(
        name="torch",
        module="torch",
        op_recorder="torch.ops",
        engine_attribution="torch.engine",
        collectors=("torch.collectives", "torch.memory", "torch.compile", "torch.module_calls"),
        auto_ops_install="rlscope.runtime.auto_ops:install_torch",
        auto_ops_uninstall="rlscope.runtime.auto_ops:uninstall_torch",
    ),
    # XLA runs a jitted function as one executable: no op recorder or engine rows on the CPU (docs/jax.md)
    Backend(
        name="jax", module="jax", op_recorder="", engine_attribution="", collectors=("jax.compile", "jax.hlo")
    ),
)


def by_name(name: str) -> Backend | None:
    """The row of the framework called ``name``, or None."""
    return next((b for b in BACKENDS if b.name == name), None)
