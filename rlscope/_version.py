"""rlscope's version, and the versions of the packages a trace records (no heavy imports)."""

from __future__ import annotations

__version__ = "0.1.0"


def package_version(name: str) -> str:
    """The installed version of ``name`` ("" when it is not installed), read without importing it."""
    import importlib.metadata  # its email parser is 15 ms of every import of rlscope otherwise

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""
