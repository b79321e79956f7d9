"""pyarrow's probes for optional packages, answered "absent" for the analysis's process.

pandas: pyarrow imports pandas the first time it converts an array to or from numpy (to recognize
pandas objects and cache its missing-value markers), and that import is 0.2-0.35 s of a 2-core VM:
a tenth of analyzing a five-minute trace. The analysis and its renderers use no pandas. Answered
once, the probe is not repeated; a later ``import pandas`` (a notebook's, ``Table.to_pandas``)
works as usual, because pyarrow imports it again when asked for pandas itself.

cloudpickle: pyarrow's import tries it (and falls back to the standard pickle when it is not
installed), 15-18 ms with the typing_extensions it imports; the analysis pickles no Python
functions through pyarrow, and pyarrow 26 binds the standard pickle in the end either way. Only
pyarrow's own import sees it absent: a later ``import cloudpickle`` works as usual.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _Absent:
    """A meta-path finder that says the packages ``names`` are not installed."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def import_pyarrow() -> None:
    """Import pyarrow with cloudpickle reported absent (a no-op once either is imported)."""
    if "pyarrow" in sys.modules or "cloudpickle" in sys.modules:
        return
    finder = _Absent("cloudpickle")
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow  # noqa: F401
    finally:
        sys.meta_path.remove(finder)


def skip_pandas_probe() -> None:
    """Make pyarrow's probe for pandas now, with pandas reported absent (a no-op once pandas or the
    probe ran)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _Absent("pandas")
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # its first array: the probe
    finally:
        sys.meta_path.remove(finder)
