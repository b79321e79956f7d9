"""A trace directory profiled into twice: the analysis reads the latest run and says so."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from rlscope.analysis import analyze
from rlscope.trace.reader import load_trace
from rlscope.trace.runs import groups

# a known busy wait per run, so the wall of the analyzed run says which runs it spans
SCRIPT = textwrap.dedent(
    """
    import sys, time
    import rlscope

    seconds = float(sys.argv[2])
    with rlscope.profile(sys.argv[1], gpu=False, backend=False):
        with rlscope.scope("work"):
            t = time.perf_counter()
            while time.perf_counter() - t < seconds:
                pass
    """
)

CHILD_SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp, sys, time
    import rlscope

    def child(d):
        with rlscope.profile(d, gpu=False, backend=False), rlscope.scope("child"):
            time.sleep(0.2)

    if __name__ == "__main__":
        with rlscope.profile(sys.argv[1], gpu=False, backend=False), rlscope.scope("parent"):
            p = mp.get_context("spawn").Process(target=child, args=(sys.argv[1],))
            p.start()
            p.join()
    """
)


def test_groups_split_runs_that_do_not_overlap() -> None:
    # two processes overlapping (a parent and its child), then a later process; offsets shift clocks
    spans = [(0, 100), (50, 300), (400, 500), None]
    assert groups(spans, [0, 0, 0, 0]) == [[0, 1], [2, 3]]
    assert groups(spans, [0, 0, -200, 0]) == [[0, 1, 2, 3]]  # on the shared clock the third overlaps
    assert groups([None, None], [0, 0]) == [[0, 1]]


def test_analysis_reads_only_the_latest_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT)
    for seconds in ("0.3", "0.1"):
        subprocess.run([sys.executable, str(script), str(trace), seconds], check=True, timeout=120)
    assert len(list(trace.glob("process-*"))) == 2
    result = analyze(str(trace), correct=False)
    wall = result.summary["wall_s"]
    assert 0.1 <= wall < 0.25, wall  # the second run's 0.1 s, not both runs and the gap between them
    assert any("1 earlier run" in w for w in result.summary["warnings"]), result.summary["warnings"]
    loaded = load_trace(trace)
    assert len(loaded.processes) == 1
    assert any("only the latest is analyzed" in w for w in loaded.warnings)


def test_a_parent_and_its_child_stay_one_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    script = tmp_path / "child.py"
    script.write_text(CHILD_SCRIPT)
    subprocess.run([sys.executable, str(script), str(trace)], check=True, timeout=120)
    assert len(list(trace.glob("process-*"))) == 2
    result = analyze(str(trace), correct=False)
    assert not any("earlier run" in w for w in result.summary["warnings"])
    ops = json.dumps(result.summary.get("operations", result.summary))
    assert "child" in ops and "parent" in ops
