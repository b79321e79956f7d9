"""The Arrow trace directory: the contract between collection and analysis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlscope.trace.ownership import clear_trace_dir

__all__ = ["clear_trace_dir"]


def __getattr__(name: str) -> Any:
    """``clear_trace_dir`` from :mod:`rlscope.trace.ownership`, imported at its first use: the
    package's modules (the schema every annotation and collector imports) load without it."""
    if name == "clear_trace_dir":
        from rlscope.trace.ownership import clear_trace_dir

        return clear_trace_dir
    raise AttributeError(f"module 'rlscope.trace' has no attribute {name!r}")
