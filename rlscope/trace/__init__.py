"""The Arrow trace directory: the contract between collection and analysis."""

from __future__ import annotations

from rlscope.trace.ownership import clear_trace_dir

__all__ = ["clear_trace_dir"]
