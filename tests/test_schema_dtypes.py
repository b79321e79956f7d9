"""Every trace column's numpy dtype, read without pandas.

The writer builds its Arrow columns from numpy arrays of these dtypes (rlscope/trace/writer.py);
``schema.numpy_dtype`` gives them without ``DataType.to_pandas_dtype``, which imports pandas in
some pyarrow versions (at every profiled process's start, and failing at interpreter shutdown).
"""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from rlscope.analysis import analyze
from rlscope.trace import schema as S

DOCS = [v for k, v in vars(S).items() if k.endswith("_COLUMNS_DOC") and isinstance(v, list)]


@pytest.mark.parametrize("typ", sorted({t for doc in DOCS for _, t, _ in doc}))
def test_each_column_type_has_the_dtype_arrow_gives_it(typ: str) -> None:
    arrow = getattr(pa, typ)()
    assert S.numpy_dtype(arrow) == arrow.to_pandas_dtype()


def test_a_profiled_process_records_without_pandas(tmp_path) -> None:
    """In a process where pandas cannot be imported, a session still writes every row it recorded."""
    trace = tmp_path / "t"
    code = f"""
import sys
sys.modules["pandas"] = None  # any import of pandas now raises ImportError
import rlscope
with rlscope.profile({str(trace)!r}, gpu=False, backend=False):
    for _ in range(3):
        with rlscope.scope("inference"):
            pass
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert analyze(trace).summary["operations"]["inference"]["calls"] == 3


@pytest.mark.parametrize("typ", sorted({t for doc in DOCS for _, t, _ in doc}))
def test_a_numpy_column_becomes_the_arrow_column_pyarrow_would_make(typ: str) -> None:
    """What the GPU collectors hand the writer: numpy columns, some strided views of a record array,
    some of a wider or unsigned dtype than the schema's."""
    import numpy as np

    from rlscope.trace.writer import to_arrow

    arrow = getattr(pa, typ)()
    if pa.types.is_string(arrow):
        values = ["a", "", "kernel<1>"]
        assert to_arrow(values, arrow).equals(pa.array(values, arrow))
        return
    grid = np.arange(12, dtype=np.uint64).reshape(4, 3)  # a record field's column: strided
    column = grid[:, 1]
    assert to_arrow(column, arrow).equals(pa.array(column.astype(S.numpy_dtype(arrow)), arrow))
    assert to_arrow([], arrow).equals(pa.array([], arrow))
