"""One colour per operation and per category, the same in every chart, every report and every run.

Operations and categories are two kinds of thing, so they are drawn from two palettes a reader
can tell apart at a glance: operations in blues, greens, reds, oranges, yellows, teals and browns;
categories (what the CPU or GPU was doing) in violets for the CPU, darker the deeper the layer
(python, simulator, backend, CUDA API), and magentas and pinks for the GPU. No operation colour has a
category's hue, so "blue" always means an operation and "violet" always a category.

A colour comes from the name alone, never from the order names appear in or from the other names
of the run: the well-known categories and operations have fixed colours, and any other name gets
one from a stable hash (CRC-32, unlike ``hash()`` the same in every process) into its kind's
palette. Two rare names can share a palette colour; the legend and hover text still tell them
apart, and neither changes colour when the other appears. The terminal (rich) and the diff page
use the same functions.
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

# CPU categories outermost (light) to innermost (dark), then the GPU, then rlscope's own work
CATEGORY_COLORS: dict[str, str] = {
    "python": "#c5b3e6",
    "simulator": "#8e6bbf",
    "backend": "#5e35b1",
    "cuda_api": "#311b92",
    "gpu_kernel": "#ad1457",
    "gpu_memcpy": "#e26aa2",
    "gpu_memset": "#f4b6d2",
    "rlscope": "#616161",
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
    "replay_buffer": "#2f7f8a",
    "target_update": "#a0cbe8",
    "env_step": "#88d27a",
    "step": "#9d755d",
}
# resource overlap (GPU runs): greys and the GPU's magenta, apart from both palettes' fixed colours
RESOURCE_COLORS: dict[str, str] = {"cpu_only": "#969696", "gpu_only": "#dd3497", "cpu_gpu": "#7a0177"}
OTHER_COLOR = "#7f7f7f"
# qualitative colours for other operations: operation hues only, none of the fixed ones above
_OPERATION_PALETTE: tuple[str, ...] = (
    "#9ecae9",
    "#ffbf79",
    "#ff9d98",
    "#b5d9a8",
    "#83bcb6",
    "#f2cf5b",
    "#d8b5a5",
    "#1f5f99",
    "#b85a0d",
    "#a1302f",
    "#3b7a34",
    "#8c6d31",
    "#bcbd22",
    "#17becf",
)
# and for other categories: violets and pinks, none of the fixed ones above
_CATEGORY_PALETTE: tuple[str, ...] = ("#b39ddb", "#7b1fa2", "#ce93d8", "#880e4f", "#f06292", "#9575cd")


def _hashed(name: str, palette: tuple[str, ...]) -> str:
    return palette[zlib.crc32(name.encode("utf-8")) % len(palette)]


def operation_color(name: str) -> str:
    """The colour of operation ``name`` in every chart (fixed for well-known names, else hashed)."""
    return OPERATION_COLORS.get(name) or _hashed(name, _OPERATION_PALETTE)


def category_color(name: str) -> str:
    """The colour of category ``name`` in every chart (fixed for rlscope's categories, else hashed)."""
    return CATEGORY_COLORS.get(name) or _hashed(name, _CATEGORY_PALETTE)
