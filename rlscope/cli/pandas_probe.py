"""pyarrow's probe for pandas, answered "absent" for the analysis's process.

Why: pyarrow imports pandas the first time it converts an array to or from numpy (to recognize
pandas objects and cache its missing-value markers), and that import is 0.2-0.35 s of a 2-core VM:
a tenth of analyzing a five-minute trace. The analysis and its renderers use no pandas. Answered
once, the probe is not repeated; a later ``import pandas`` (a notebook's, ``Table.to_pandas``)
works as usual, because pyarrow imports it again when asked for pandas itself.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _Absent:
    """A meta-path finder that says pandas is not installed."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def skip_pandas_probe() -> None:
    """Make pyarrow's probe for pandas now, with pandas reported absent (a no-op once pandas or the
    probe ran)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _Absent()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # its first array: the probe
    finally:
        sys.meta_path.remove(finder)
