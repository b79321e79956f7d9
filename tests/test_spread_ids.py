"""Instance ids spread far beyond a process's rows: the analysis reads them as it reads compact ones.

A session numbers its operation and phase instances for the whole run, so a trace kept in detail
stretches holds ids up to the run's count of instances. The timeline renumbers such ids
(rlscope/analysis/timeline.py, ``_dense_instances``) so that no table is sized by them; the figures
and the exports' ids must be those of the trace as written.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlscope.analysis import analyze
from rlscope.analysis.timeline import build_timeline
from rlscope.trace import schema as S
from rlscope.trace.reader import load_process

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from longrun_trace import make_trace

SHIFT = 10**9  # far beyond any count of rows the test's process has


def _shifted(events: pa.Table) -> pa.Table:
    """The events with every operation and phase id (and parent) moved up by SHIFT."""
    kind = events.column("kind").to_numpy()
    scoped = np.isin(kind, (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END))
    out = events
    for col in ("id", "parent"):
        v = events.column(col).to_numpy().copy()
        v[scoped & (v >= 0)] += SHIFT
        out = out.set_column(out.schema.get_field_index(col), out.schema.field(col), pa.array(v, pa.int64()))
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("ids")
    compact = base / "compact"
    make_trace(compact, 6 / 3600, workers=0, seed=1, jobs=1)
    spread = base / "spread"
    shutil.copytree(compact, spread)
    (proc,) = spread.glob("process-*")
    table = pa.ipc.open_stream(proc / S.EVENTS_FILE).read_all()
    with pa.OSFile(str(proc / S.EVENTS_FILE), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(_shifted(table))
    return compact, spread


def test_tables_are_sized_by_instances_not_ids(traces: tuple[Path, Path]) -> None:
    compact, spread = traces
    (proc,) = spread.glob("process-*")
    tl = build_timeline(load_process(proc).events)
    assert tl.inst_ids is not None and tl.inst_ids.min() >= SHIFT
    assert len(tl.inst_name) == len(tl.inst_ids) < 2 * len(tl.ts)
    (plain,) = compact.glob("process-*")
    assert build_timeline(load_process(plain).events).inst_ids is None  # compact ids index directly


def test_figures_and_exported_ids_are_the_traces(traces: tuple[Path, Path]) -> None:
    compact, spread = traces
    a, b = analyze(compact, workers=1), analyze(spread, workers=1)
    assert b.summary["operations"] == a.summary["operations"]
    assert b.summary["warnings"] == a.summary["warnings"]
    ops_a, ops_b = a.interval_tables().operations, b.interval_tables().operations
    assert ops_b.column("id").to_numpy().tolist() == (ops_a.column("id").to_numpy() + SHIFT).tolist()
    parent_a = ops_a.column("parent").to_numpy()
    assert (
        ops_b.column("parent").to_numpy().tolist() == np.where(parent_a >= 0, parent_a + SHIFT, -1).tolist()
    )
    assert ops_b.column("depth").equals(ops_a.column("depth"))
    phases_a, phases_b = a.interval_tables().phases, b.interval_tables().phases
    assert phases_b.column("id").to_numpy().tolist() == (phases_a.column("id").to_numpy() + SHIFT).tolist()
