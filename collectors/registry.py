"""The collectors a session starts, in order: one row each.

A row names its factory lazily (``module:callable``), so importing this module imports no collector,
no torch and no CUDA library. A factory takes the session and the collectors started before it, and
returns the collector, or None where it has nothing to record (an option off, no GPU). The session
starts the rows in this order and stops them in the reverse one (rlscope/session.py).

``costs`` names the calibration entries the collector's records pay (``rlscope calibrate`` measures
them, rlscope/overhead/correct/residual.py prices them); ``backend`` the framework whose collector
it is (rlscope/runtime/backends.py lists what each framework provides). Adding a collector is one
module and one row here.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlscope.collectors.protocol import Collector

Factory = Callable[[Any, Sequence["Collector"]], "Collector | list[Collector] | None"]


@dataclasses.dataclass(frozen=True)
class CollectorRow:
    """One collector: its name, its factory (``module:callable``), what it costs, whose it is."""

    name: str
    factory: str
    costs: tuple[str, ...] = ()
    backend: str = ""  # "" : framework-neutral

    def load(self) -> Factory:
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)


COLLECTORS: tuple[CollectorRow, ...] = (
    # each torch op's time (the backend category): the native recorder, else a Python mode
    CollectorRow("torch.ops", "rlscope.collectors.torch_ops:start_for", ("backend",), backend="torch"),
    # GPU kernels, copies and CUDA API calls (native CUPTI, Kineto or cupti-python) and NVML samples
    CollectorRow("gpu", "rlscope.collectors.gpu:start_for", ("cuda_api.native", "cuda_api.kineto", "nvml")),
    # each backward() call: whose GPU work the engine's threads launch, and where a long update is cut
    CollectorRow("torch.engine", "rlscope.collectors.autograd_calls:start_for", backend="torch"),
    # torch.distributed's collectives, timed on the GPU from torch's flight recorder
    CollectorRow("torch.collectives", "rlscope.collectors.collectives:start_for", backend="torch"),
    # the CUDA caching allocator's events
    CollectorRow("torch.memory", "rlscope.collectors.gpu_memory:start_for", ("memory",), backend="torch"),
    # the automatic operations' wrapped module calls per thread and operation (their cost is removed)
    CollectorRow(
        "torch.module_calls", "rlscope.collectors.module_calls:start_for", ("module_call",), backend="torch"
    ),
    # Python stack samples: [unannotated] and each operation's Python time by function and line
    CollectorRow("stacks", "rlscope.collectors.stacks:start_for"),
    # JAX's compilations (tracing, lowering, XLA), from its monitoring events: the compile category
    CollectorRow("jax.compile", "rlscope.collectors.jax_compile:start_for", backend="jax"),
    # Triton's JIT compilations of @triton.jit kernels at their launches, from its compilation listener
    CollectorRow("triton.compile", "rlscope.collectors.triton_compile:start_for"),
    # torch.compile's compilations, from Dynamo's compile callbacks and metrics: the compile category
    CollectorRow("torch.compile", "rlscope.collectors.torch_compile:start_for", backend="torch"),
    # the kernels of JAX's executables and the named scope each belongs to, from XLA's HLO metadata
    CollectorRow("jax.hlo", "rlscope.collectors.jax_hlo:start_for", backend="jax"),
)


def start_collectors(session: Any, rows: Sequence[CollectorRow] | None = None) -> list[Collector]:
    """Start every row's collector for ``session``, in order; what cannot start warns in its factory."""
    started: list[Collector] = []
    for row in COLLECTORS if rows is None else rows:
        got = row.load()(session, tuple(started))
        if got is None:
            continue
        started.extend(got if isinstance(got, list) else [got])
    return started
