"""One colour per operation and per category, the same in every chart, every report and every run.

A colour comes from the name alone, never from the order names appear in or from the other names
of the run: the well-known categories and operations have fixed colours, and any other name gets
one from a stable hash (CRC-32, unlike ``hash()`` the same in every process) into a qualitative
palette that none of the fixed colours are in. Two rare names can share a palette colour; the
legend and hover text still tell them apart, and neither changes colour when the other appears.
"""

from __future__ import annotations

import zlib

__all__ = [
    "CATEGORY_COLORS",
    "OPERATION_COLORS",
    "OTHER_COLOR",
    "RESOURCE_COLORS",
    "category_color",
    "operation_color",
]

# CPU categories outermost to innermost, then the GPU, then rlscope's own work
CATEGORY_COLORS: dict[str, str] = {
    "python": "#3776ab",
    "simulator": "#2ca02c",
    "backend": "#ff7f0e",
    "cuda_api": "#d62728",
    "gpu_kernel": "#9467bd",
    "gpu_memcpy": "#8c564b",
    "gpu_memset": "#e377c2",
    "rlscope": "#7f7f7f",
}
# the operations of the bundled workloads and of most RL loops
OPERATION_COLORS: dict[str, str] = {
    "[unannotated]": "#c7c7c7",
    "inference": "#4c78a8",
    "simulation": "#54a24b",
    "backprop": "#e45756",
    "train": "#f58518",
    "collect_rollouts": "#72b7b2",
    "compute_advantages": "#eeca3b",
    "replay_buffer": "#b279a2",
    "target_update": "#ff9da6",
    "env_step": "#88d27a",
    "step": "#9d755d",
}
RESOURCE_COLORS: dict[str, str] = {"cpu_only": "#1f77b4", "gpu_only": "#9467bd", "cpu_gpu": "#17becf"}
OTHER_COLOR = "#7f7f7f"
# qualitative colours for other names: none of the fixed ones above, distinct from each other
_PALETTE: tuple[str, ...] = (
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
    "#bcbd22",
    "#17a589",
    "#d37295",
    "#a0522d",
    "#6b6ecf",
    "#e7969c",
    "#637939",
)


def _hashed(name: str) -> str:
    return _PALETTE[zlib.crc32(name.encode("utf-8")) % len(_PALETTE)]


def operation_color(name: str) -> str:
    """The colour of operation ``name`` in every chart (fixed for well-known names, else hashed)."""
    return OPERATION_COLORS.get(name) or _hashed(name)


def category_color(name: str) -> str:
    """The colour of category ``name`` in every chart (fixed for rlscope's categories, else hashed)."""
    return CATEGORY_COLORS.get(name) or _hashed(name)
