"""A trace directory profiled into twice is said; a parent and its children stay one run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rlscope.analysis import analyze
from rlscope.analysis.roles import over_processes
from rlscope.trace.reader import ProcessHeader, load_trace
from rlscope.trace.runs import groups, runs_warning

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


# the parent starts a Python child and exits at once: the child's session starts after the end of
# its parent's, with ppid 1 (multiprocessing's resource tracker does this to a short-lived job)
ORPHAN_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys
    code = "import time; time.sleep(0.3)"
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    """
)


def test_groups_split_runs_that_do_not_overlap() -> None:
    # two processes overlapping (a parent and its child), then a later process; offsets shift clocks
    spans = [(0, 100), (50, 300), (400, 500), None]
    assert groups(spans, [0, 0, 0, 0]) == [[0, 1], [2, 3]]
    assert groups(spans, [0, 0, -200, 0]) == [[0, 1, 2, 3]]  # on the shared clock the third overlaps
    assert groups([None, None], [0, 0]) == [[0, 1]]


def test_a_child_belongs_to_its_parents_run_whatever_the_clocks_say() -> None:
    def h(pid: int, ppid: int) -> ProcessHeader:
        return ProcessHeader(Path("."), {"pid": str(pid), "ppid": str(ppid), "host": "h"}, [])

    spans = [(0, 100), (400, 500), (600, 700)]
    assert runs_warning([h(1, 0), h(2, 1), h(3, 1)], spans) is None
    warning = runs_warning([h(1, 0), h(2, 1), h(3, 9)], spans)
    assert warning is not None and "holds 2 runs" in warning
    # a child that started after its parent exited reads ppid 1; the pid its launcher left in the
    # environment (run_parent, under `rlscope run`) still ties it to the run
    orphan = ProcessHeader(Path("."), {"pid": "3", "ppid": "1", "run_parent": "1", "host": "h"}, [])
    assert runs_warning([h(1, 0), h(2, 1), orphan], spans) is None


def test_a_child_that_outlives_its_parent_stays_in_its_run(tmp_path: Path) -> None:
    # under `rlscope run`: the parent exits at once, the child starts its session after that (ppid 1)
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN_SCRIPT)
    trace = tmp_path / "trace"
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--gpu", "off", "--no-backend"]
    r = subprocess.run([*cmd, "--trace-dir", str(trace), "--", sys.executable, str(script)], timeout=120)
    assert r.returncode == 0
    deadline = time.monotonic() + 60
    while True:  # the orphan writes its trace after `rlscope run` returned
        done = load_trace(trace)
        if len(done.processes) == 2 and all(p.complete for p in done.processes):
            break
        assert time.monotonic() < deadline, "the orphan's trace never completed"
        time.sleep(0.1)
    parent, child = sorted(done.processes, key=lambda p: int(p.metadata["clock_anchor_unix_ns"]))
    assert child.metadata["ppid"] != str(parent.pid), "reparented: its parent had exited"
    assert child.metadata["run_parent"] == str(parent.pid)
    assert not done.warnings, done.warnings


def test_two_runs_in_one_directory_are_said(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT)
    for seconds in ("0.3", "0.1"):
        subprocess.run([sys.executable, str(script), str(trace), seconds], check=True, timeout=120)
    assert len(list(trace.glob("process-*"))) == 2
    result = analyze(str(trace), correct=False)
    # both processes are still read (a pipeline may run its steps one after the other into one directory)
    assert result.summary["wall_s"] >= 0.4, result.summary["wall_s"]
    assert any("holds 2 runs that do not overlap" in w for w in result.summary["warnings"])
    loaded = load_trace(trace)
    assert len(loaded.processes) == 2
    assert any("give each run its own trace directory" in w for w in loaded.warnings)


def test_a_parent_and_its_child_stay_one_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    script = tmp_path / "child.py"
    script.write_text(CHILD_SCRIPT)
    subprocess.run([sys.executable, str(script), str(trace)], check=True, timeout=120)
    assert len(list(trace.glob("process-*"))) == 2
    result = analyze(str(trace), correct=False)
    assert not any("earlier run" in w for w in result.summary["warnings"])
    ops = over_processes(result.summary)["operations"]  # every process's: the child's are its own
    assert "child" in ops and "parent" in ops


def test_the_users_own_sitecustomize_still_runs_under_rlscope_run(tmp_path: Path) -> None:
    # rlscope run's sitecustomize comes first on PYTHONPATH and shadows the user's: it runs it itself
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    script = tmp_path / "job.py"
    script.write_text("import builtins, rlscope\nprint('USER', getattr(builtins, 'USER_SITE_RAN', False))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--no-analyze", "--gpu", "off", "--no-backend"]
    r = subprocess.run(
        [*cmd, "--trace-dir", str(tmp_path / "trace"), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert "USER True" in r.stdout
    assert len(load_trace(tmp_path / "trace").processes) == 1  # and the program is profiled
