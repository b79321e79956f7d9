"""rlscope's version, and the versions of the packages a trace records (no heavy imports)."""

from __future__ import annotations

import importlib.metadata

__version__ = "0.1.0"


def package_version(name: str) -> str:
    """The installed version of ``name`` ("" when it is not installed), read without importing it."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""
