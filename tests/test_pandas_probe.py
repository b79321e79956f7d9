"""``rlscope-analyze`` answers pyarrow's probe for pandas as "absent" (rlscope/cli/pandas_probe.py):
the analysis never imports pandas, and a later use of pandas through pyarrow still works."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pandas", reason="what is checked is that an installed pandas is not imported")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_analysis_of_a_trace_imports_no_pandas(tmp_path) -> None:
    trace = tmp_path / "t"
    code = f"""
import sys
import rlscope
from rlscope.cli.pandas_probe import skip_pandas_probe
with rlscope.profile({str(trace)!r}, gpu=False, backend=False):
    with rlscope.scope("inference"):
        pass
skip_pandas_probe()
from rlscope.analysis import analyze
calls = analyze({str(trace)!r}).summary["operations"]["inference"]["calls"]
print(calls, "pandas" in sys.modules)
"""
    assert _run(code) == "1 False"


def test_pandas_still_works_through_pyarrow_after_the_probe() -> None:
    code = """
import pyarrow as pa
from rlscope.cli.pandas_probe import skip_pandas_probe
skip_pandas_probe()
print(pa.table({"a": [1, 2]}).to_pandas()["a"].sum())
"""
    assert _run(code) == "3"
