"""benchmarks/analyzer_throughput.py on a real trace: what it counts, and that it compares the paths."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import analyzer_throughput as bench  # noqa: E402


def test_the_rate_counts_every_arrow_file_s_rows(tmp_path):
    n = bench.write_synthetic(tmp_path / "t", 1200)
    extra = tmp_path / "t" / "process-1" / "extra.arrows"
    table = pa.table({"x": pa.array(range(7), pa.int64())})
    with pa.OSFile(str(extra), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table)
    assert bench.trace_rows(tmp_path / "t") == n + 5 + 7  # events, the five names, the extra file


def test_both_paths_run_interleaved_and_agree(tmp_path):
    bench.write_synthetic(tmp_path / "t", 1200)
    got = bench.real(tmp_path / "t", 2, tmp_path)
    assert got["same_json"] and got["reps"] == 2
    for path in ("native", "numpy"):
        lo, hi = got[path]["cpu_s_range"]
        assert 0 < lo <= got[path]["cpu_s_median"] <= hi
        assert got[path]["rows_per_s"] == got["rows"] / got[path]["cpu_s_median"]
        assert got[path]["peak_rss_mb"] > 0
