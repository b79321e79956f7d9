"""The command-line tools end to end: rlscope run, rlscope-analyze and their bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

UNMODIFIED_SCRIPT = textwrap.dedent(
    """
    import gymnasium as gym
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    venv = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    venv.reset(seed=0)
    total = 0.0
    for _ in range(3000):
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        venv.step(venv.action_space.sample())
        total += r
        if term or trunc:
            env.reset()
    print("RESULT", total)
    """
)


GOLDEN_TRACE = Path(__file__).parent / "golden" / "traces" / "ppo_cpu"


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd)


def test_rlscope_run_unmodified_script(tmp_path):
    pytest.importorskip("gymnasium")
    script = tmp_path / "train.py"
    script.write_text(UNMODIFIED_SCRIPT)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    trace = tmp_path / "trace"
    r = _cli(
        "rlscope.cli.main",
        "run",
        "--trace-dir",
        str(trace),
        "--no-analyze",
        "--",
        sys.executable,
        str(script),
    )
    assert r.returncode == 0, r.stderr
    # the user's program printed the same thing: profiling changed nothing
    assert "RESULT 3000.0" in plain.stdout and "RESULT 3000.0" in r.stdout
    out = tmp_path / "s.json"
    a = _cli("rlscope.cli.analyze", str(trace), "--json", str(out), "-q")
    assert a.returncode == 0, a.stderr
    s = json.loads(out.read_text())
    assert s["categories"]["simulator"] > 0  # gymnasium.make / make_vec envs were auto-wrapped
    # their steps are the automatic simulation operation (docs/automatic-operations.md)
    sim = s["operations"]["simulation"]
    assert sim["auto"] and sim["categories"]["simulator"] == pytest.approx(s["categories"]["simulator"])
    assert "simulator" not in s["unannotated_categories"]


def test_a_program_that_profiles_itself_runs_under_rlscope_run(tmp_path):
    """rlscope.profile inside a run records into the run's trace (one warning) instead of failing."""
    from rlscope.trace.reader import load_trace

    script = tmp_path / "self_profiled.py"
    own = tmp_path / "own-trace"
    script.write_text(
        f"import rlscope\nwith rlscope.profile({str(own)!r}) as s:\n"
        "    with rlscope.scope('mine'):\n        pass\nprint('RESULT', s.active)\n"
    )
    trace = tmp_path / "t"
    r = _cli(
        "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--gpu", "off", str(script)
    )
    assert r.returncode == 0, r.stderr
    assert "RESULT True" in r.stdout
    assert r.stderr.count("rlscope run already profiles this program") == 1, r.stderr
    assert not own.exists()
    (proc,) = load_trace(trace).processes
    assert "mine" in proc.names


def test_run_propagates_exit_status(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys; sys.exit(3)\n")
    r = _cli("rlscope.cli.main", "run", "--trace-dir", str(tmp_path / "t"), "--no-analyze", str(script))
    assert r.returncode == 3


@pytest.mark.parametrize("status", [0, 1, 7])
def test_run_exits_with_the_programs_status_whatever_the_analysis_finds(tmp_path, status):
    # a shell command writes no trace: the analysis has nothing to read, and that is only a warning
    trace = str(tmp_path / "t")
    r = _cli("rlscope.cli.main", "run", "--trace-dir", trace, "--", "bash", "-c", f"exit {status}")
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr


def test_run_exits_130_when_the_program_is_interrupted(tmp_path):
    # an uncaught KeyboardInterrupt ends Python by SIGINT: a shell says 130, and so does rlscope run
    script = tmp_path / "interrupted.py"
    script.write_text("import rlscope\nwith rlscope.scope('work'):\n    raise KeyboardInterrupt\n")
    trace = tmp_path / "t"
    r = _cli("rlscope.cli.main", "run", "--trace-dir", str(trace), "--gpu", "off", "--", str(script))
    assert r.returncode == 130, r.stderr
    c = _cli("rlscope.cli.analyze", "check", str(trace))  # its trace was flushed on the way out
    assert c.returncode == 0 and "error" not in c.stdout, c.stdout


def test_startup_is_its_own_phase_and_ends_before_the_programs_first_line(tmp_path):
    from rlscope.trace import schema as S
    from rlscope.trace.reader import load_trace

    script = tmp_path / "job.py"
    script.write_text("import rlscope\nwith rlscope.scope('first'):\n    pass\n")
    trace = tmp_path / "t"
    r = _cli(
        "rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--gpu", "off", str(script)
    )
    assert r.returncode == 0, r.stderr
    (proc,) = load_trace(trace).processes
    ev = proc.events.to_pydict()
    rows = list(zip(ev["ts_ns"], ev["kind"], ev["name"], ev["flags"], strict=True))
    startup = [
        (ts, k, f) for ts, k, n, f in rows if k in (S.PHASE_BEGIN, S.PHASE_END) and proc.name(n) == "startup"
    ]
    assert [k for _, k, _ in startup] == [S.PHASE_BEGIN, S.PHASE_END]
    assert startup[1][2] == 0  # closed by the program's first line, not by rlscope at the end
    (first,) = [ts for ts, k, n, _ in rows if k == S.OP_BEGIN and proc.name(n) == "first"]
    assert startup[1][0] <= first  # the script's own scopes are outside the startup phase


def test_run_with_a_missing_script_is_one_line_and_status_2(tmp_path):
    for cmd in ([str(tmp_path / "nope.py")], ["python", str(tmp_path / "nope.py")]):
        r = _cli("rlscope.cli.main", "run", "--trace-dir", str(tmp_path / "t"), "--", *cmd)
        assert r.returncode == 2
        assert r.stderr.strip().count("\n") == 0 and "no such script" in r.stderr
        assert r.stdout == ""


def test_analyze_outputs(tmp_path):
    import rlscope

    trace = tmp_path / "t"
    with rlscope.profile(trace, backend=False), rlscope.phase("training"), rlscope.scope("inference"):
        pass
    out, html = tmp_path / "s.json", tmp_path / "r.html"
    r = _cli("rlscope.cli.analyze", str(trace), "--json", str(out), "--html", str(html))
    assert r.returncode == 0, r.stderr
    assert "inference" in r.stdout
    s = json.loads(out.read_text())
    assert set(s) >= {"wall_s", "operations", "unannotated_s", "phases"}
    op = s["operations"]["inference"]
    assert set(op) >= {"total_s", "exclusive_s", "categories", "resources"}
    assert set(op["resources"]) == {"cpu_only", "gpu_only", "cpu_gpu"}
    assert html.read_text().count("<script") >= 1
    c = _cli("rlscope.cli.analyze", "check", str(trace))
    assert c.returncode == 0 and "ok" in c.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["rlscope.cli.analyze"],
        ["rlscope.cli.analyze", "--bogus", "x"],
        ["rlscope.cli.main", "frobnicate"],
        ["rlscope.cli.main", "run"],
        ["rlscope.cli.main", "demo", "--seconds", "-1"],
        ["rlscope.cli.main", "run", "--trace-dir", "/tmp/x", "--", "definitely-not-a-command-rlscope"],
    ],
)
def test_bad_cli_arguments(args):
    r = _cli(*args)
    assert r.returncode == 2, (args, r.stderr)
    assert "Traceback" not in r.stderr
    assert "error" in r.stderr


def test_unwritable_output_is_one_line_error(tmp_path):
    import rlscope

    trace = tmp_path / "t"
    with rlscope.profile(trace, backend=False):
        pass
    r = _cli("rlscope.cli.analyze", str(trace), "--json", str(tmp_path / "no" / "such" / "dir.json"), "-q")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cannot write" in r.stderr


def test_the_analysis_keeps_freed_memory_on_glibc():
    """rlscope-analyze asks glibc to reuse freed arrays' pages (rlscope/cli/heap.py); elsewhere a no-op."""
    import platform

    from rlscope.cli.heap import keep_freed_memory

    taken = keep_freed_memory()
    assert taken == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    if taken:  # and Arrow's buffers come from that heap
        import pyarrow as pa

        assert pa.default_memory_pool().backend_name == "system"


WARM_CHECK = textwrap.dedent(
    """
    import contextlib, io, sys
    from rlscope.cli import warm
    warm.warm()
    before = set(sys.modules)
    from rlscope.analysis import analyze
    from rlscope.cli.output import report
    result = analyze(sys.argv[1], intervals=False)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        report(result, json_path=sys.argv[2], html_path=None, quiet=False, prog="rlscope", verbose=False)
    ours = ("rlscope", "numpy", "pyarrow", "pandas")
    print(sorted(m for m in set(sys.modules) - before if m.startswith(ours)))
    """
)


def test_the_reports_imports_are_done_while_the_program_runs(tmp_path):
    """`rlscope run` imports the analysis and the report in a thread while the program runs
    (rlscope/cli/warm.py): after it, analyzing a trace and printing its report import nothing more
    of rlscope's, numpy's, pyarrow's or pandas' (the list is complete)."""
    script = tmp_path / "prog.py"
    script.write_text("import rlscope\nwith rlscope.scope('step'):\n    sum(range(100000))\n")
    trace = tmp_path / "trace"
    run = ["rlscope.cli.main", "run", "--trace-dir", str(trace), "--no-analyze", "--"]
    r = _cli(*run, sys.executable, str(script))
    assert r.returncode == 0, r.stderr
    cmd = [sys.executable, "-c", WARM_CHECK, str(trace), str(tmp_path / "s.json")]
    check = subprocess.run(cmd, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == "[]", check.stdout


ANALYSIS_IMPORTS = textwrap.dedent(
    """
    import gc, sys
    from rlscope.cli import output
    from rlscope.cli.analyze import main
    passes, seen = [], []
    gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info["generation"]))
    _report = output.report

    def report(*args, **kwargs):  # after the analysis: the collector's state and passes so far
        seen.append((gc.isenabled(), len(passes)))
        return _report(*args, **kwargs)

    output.report = report
    assert main([sys.argv[1], "-q", "--json", sys.argv[2]]) == 0
    print(seen, gc.isenabled())
    print(" ".join(sorted(sys.modules)))
    """
)


def test_the_analysis_imports_only_what_it_uses(tmp_path):
    """`rlscope-analyze -q --json` imports no recording API (annotations, session, collectors), no
    HTML or terminal renderer, neither cloudpickle (pyarrow's optional import) nor importlib.metadata,
    and runs with the cyclic garbage collector off, on again when the command returns in-process."""
    out = tmp_path / "s.json"
    cmd = [sys.executable, "-c", ANALYSIS_IMPORTS, str(GOLDEN_TRACE), str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    passes, modules = r.stdout.splitlines()
    assert passes == "[(False, 0)] True"  # no collection while it ran (dozens with the collector on)
    modules = set(modules.split())
    assert {"rlscope.analysis.summary", "rlscope.viz.data_files", "pyarrow", "numpy"} <= modules
    unused = {
        "rlscope.annotate",
        "rlscope.session",
        "rlscope.collectors.scope_native",
        "rlscope.runtime.hooks",
        "rlscope.viz.html",
        "rlscope.viz.terminal",
        "cloudpickle",
        "importlib.metadata",
    }
    assert not modules & unused, sorted(modules & unused)
    assert json.loads(out.read_text())["operations"]


def test_the_recording_api_is_imported_on_first_use():
    """`import rlscope` leaves the annotations and the session unimported until one of their names
    is used; each name is then the module's own object, found directly after its first use."""
    code = textwrap.dedent(
        """
        import sys
        import rlscope, rlscope.trace
        assert "rlscope.session" not in sys.modules and "rlscope.annotate" not in sys.modules
        assert "rlscope.trace.ownership" not in sys.modules
        from rlscope import annotate, session
        from rlscope.trace import ownership
        for name in ("scope", "phase", "simulator", "waiting"):
            assert getattr(rlscope, name) is getattr(annotate, name) and name in vars(rlscope)
        assert rlscope.profile is session.profile and rlscope.Session is session.Session
        assert rlscope.trace.clear_trace_dir is ownership.clear_trace_dir
        assert set(rlscope.__all__) <= set(dir(rlscope))
        try:
            rlscope.no_such_name
        except AttributeError:
            print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_the_collector_stays_on_for_the_simulator_benchmark(monkeypatch):
    """bench-sim runs torch and gymnasium workloads: the cyclic collector is not turned off for it."""
    import gc

    from rlscope.cli import analyze

    seen = []
    monkeypatch.setitem(analyze.SUBCOMMANDS, "bench-sim", lambda argv: seen.append(gc.isenabled()) or 0)
    assert analyze.main(["bench-sim", "--quick"]) == 0
    assert seen == [True] and gc.isenabled()


def test_the_c_loops_arrays_leave_no_reference_cycles():
    """The C loops' array arguments (rlscope/analysis/native) are checked as numpy's ndpointer checks
    them and passed as their address, leaving nothing for the cyclic collector (off in rlscope-analyze):
    numpy's ``array.ctypes`` pointers are each a reference cycle."""
    import ctypes
    import gc

    import numpy as np

    from rlscope.analysis import native

    fn = native.function("timeline_sorted_in_blocks", native.N, native.I64, native.I64, restype=native.N)
    if fn is None:
        pytest.skip(f"no C loops here: {native.unavailable()}")
    starts = np.array([0, 3, 5], dtype=np.int64)
    ts = np.array([1, 2, 2, 5, 6], dtype=np.int64)
    assert fn(2, starts, ts) == 1
    assert fn(2, starts, ts[::-1].copy()) == 0  # the address of each call's own array
    assert fn(1, starts[:2], np.array([7, 8, 9], dtype=np.int64)[:3]) == 1
    assert fn(0, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)) == 1  # empty arrays
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        for _ in range(20):
            fn(2, starts, ts)
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
    for bad in (ts.astype(np.int32), np.arange(10, dtype=np.int64)[::2], ts.tolist(), None):
        with pytest.raises(ctypes.ArgumentError):
            fn(2, starts, bad)
    assert native.array_type(np.int64) is not native.I64 and native.BOOL.__name__ == "array_bool"


def test_run_returns_only_after_the_reports_imports_end(tmp_path, monkeypatch):
    """A program shorter than the report's imports: the launcher waits for the thread doing them
    before it goes on (an interpreter exiting under a thread inside an import can abort, losing the
    program's status)."""
    from rlscope.cli import main as cli_main
    from rlscope.cli import warm

    ended = threading.Event()

    def slow_imports() -> None:
        time.sleep(0.5)
        ended.set()

    monkeypatch.setattr(warm, "warm", slow_imports)
    code = cli_main.run(["--trace-dir", str(tmp_path / "t"), "--", "bash", "-c", "exit 3"])
    assert code == 3 and ended.is_set()
