"""``rlscope-analyze share TRACE`` and ``rlscope share-check [-k 2,4,8] -- python train.py``.

``share`` prints the co-location estimate of a trace (rlscope/analysis/sharing.py, docs/sharing.md).
``share-check`` measures it: the program alone, then k copies started together on the same GPU
(plain time-sharing between processes; with ``--mps`` under an MPS daemon, only where
``nvidia-cuda-mps-control`` exists), each copy's time and the device memory NVML sees in use (peak over
the run, less what was in use before). It prints measured slowdown and memory per copy beside the
estimate, which it takes from ``--trace`` or from one profiled run of the program (``rlscope run``)
made first.

The slowdown compares each copy's *loop*: the span from its first ``rlscope.scope`` entry to its last
exit, read from a scopes-only trace of the copy (``rlscope run --gpu off --no-backend``: about a
microsecond per scope, the same at every k, so the ratio is unaffected). The estimate models the loop;
a copy's whole wall also holds interpreter, import and CUDA context start-up, which contend
differently (context creation serialises in the driver) and diluted the comparison. Programs without
scopes, or ``--whole-process``, fall back to wall time from start to exit, and the output says which.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rlscope.cli import options
from rlscope.cli.output import write_text
from rlscope.cli.parser import Parser
from rlscope.cli.program import program_command
from rlscope.errors import RLScopeError, TraceError
from rlscope.text import printable

GIB = 1 << 30


def _k_list(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise RLScopeError(f"-k: expected numbers separated by commas, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise RLScopeError(f"-k: copies must be >= 1, got {text!r}")
    return ks


def estimate_of(trace_dir: str, ks: tuple[int, ...]) -> dict[str, Any]:
    """The trace's estimate (analysis.sharing.estimate) with the table for ``ks``."""
    from rlscope.analysis import analyze
    from rlscope.analysis.sharing import estimate

    summary = analyze(trace_dir, correct=False, intervals=False).summary
    est = (summary.get("sharing") or {}).get("estimate") or {}
    if "inputs" not in est:
        raise RLScopeError(f"{trace_dir}: {est.get('note') or (summary.get('sharing') or {}).get('note')}")
    return estimate(est["inputs"], tuple(sorted({1, *ks})))


def _fitted(table: Any, first: list[str], then: list[str], width: int | None) -> str:
    """A table (rlscope.viz.terminal.Columns) as text at ``width`` (default: the terminal's), columns
    left out with a note where it is narrower than the table."""
    import io

    from rich.console import Console

    from rlscope.viz.terminal import fit_table

    width = width or shutil.get_terminal_size().columns
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    console.print(fit_table(lambda compact: table, console, first, then))
    return buf.getvalue().rstrip("\n")


def estimate_text(est: dict[str, Any], width: int | None = None) -> str:
    """The estimate as terminal text: the device name and the notes come from the machine and the
    trace, so they are shown through :func:`rlscope.text.printable`, one line each."""
    from rlscope.viz.terminal import Columns

    m = est["inputs"]
    lines = [
        f"alone: GPU busy {100 * m['gpu_busy_fraction']:.2f}% of the time"
        f" ({m['busy_periods_per_s']:.0f} busy periods/s,"
        f" mean residual {m['busy_period_residual_us']:.1f} us),"
        f" {m['per_copy_bytes'] / GIB:.2f} GiB of device memory, {m['cpu_cores_per_copy']:.2f} CPU cores"
        f" ({m['host_cpus'] or '?'} on the host, device {printable(m['device'] or '?')})",
        f"fits: {est['k_fit']} copies with each at most {100 * (est['max_slowdown'] - 1):.0f}% slower;"
        f" then {est['binds']} binds (memory alone allows {est['k_max_memory']})",
    ]
    t = Columns(header_style="bold")
    t.add_column("k", justify="right")
    for col in ("memory GiB", "shared-alloc GiB", "slowdown", "throughput"):
        t.add_column(col, justify="right")
    t.add_column("binds")
    for r in est["table"]:
        t.add_row(
            str(r["k"]),
            f"{r['memory_bytes'] / GIB:.2f}",
            f"{r['memory_shared_allocator_bytes'] / GIB:.2f}",
            f"{r['slowdown']:.3f}",
            f"{r['throughput']:.2f}",
            str(r["binds"]),
        )
    lines.append(_fitted(t, ["shared-alloc GiB", "throughput"], ["memory GiB"], width))
    lines += [f"note: {printable(n)}" for n in m.get("notes", [])]
    return "\n".join(lines)


def share_main(argv: list[str]) -> int:
    """``rlscope-analyze share``."""
    p = Parser(
        prog="rlscope-analyze share",
        description="Estimate how many copies of the traced job fit one GPU, and which resource binds"
        " (memory, GPU time, CPU). The model is docs/sharing.md; 'rlscope share-check' measures it.",
    )
    options.trace_dir(p)
    p.add_argument(
        "-k", default="1,2,4,8,16", metavar="K,K,...", help="copies to tabulate (default 1,2,4,8,16)"
    )
    options.json_out(p, "the estimate")
    args = p.parse_args(argv)
    est = estimate_of(args.trace_dir, _k_list(args.k))
    if args.json:
        write_text(args.json, json.dumps(est, indent=2))
    print(estimate_text(est))
    return 0


class NvmlWatch:
    """Device memory in use (bytes) sampled at ``hz``: the peak, and per process where NVML tells."""

    def __init__(self, device: int = 0, hz: float = 20.0) -> None:
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        self.period = 1 / hz
        self.peak = 0
        self.per_pid: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def used(self) -> int:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.used())
            try:
                for pr in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                    mem = int(pr.usedGpuMemory or 0)
                    self.per_pid[pr.pid] = max(self.per_pid.get(pr.pid, 0), mem)
            except self.nvml.NVMLError:
                pass
            self._stop.wait(self.period)

    def __enter__(self) -> NvmlWatch:
        self.baseline = self.used()
        try:
            self.before = {pr.pid for pr in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)}
        except self.nvml.NVMLError:
            self.before = set()
        self.peak = self.baseline
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def loop_of(trace_dir: Path) -> tuple[float, int] | None:
    """(seconds from the first operation entry to the last exit, operation entries) of a trace."""
    import pyarrow.compute as pc

    from rlscope.trace import schema as S
    from rlscope.trace.reader import clock_offset, load_trace

    try:
        trace = load_trace(str(trace_dir), light=True)  # event times and kinds are all it needs
    except (TraceError, OSError):  # a copy that wrote no trace has no loop: fall back to wall time
        return None
    starts, ends, entries = [], [], 0
    for proc in trace.processes:
        ev, off = proc.events, clock_offset(proc)
        for kind, into, agg in ((S.EventKind.OP_BEGIN, starts, pc.min), (S.EventKind.OP_END, ends, pc.max)):
            ts = ev.filter(pc.equal(ev["kind"], int(kind)))["ts_ns"]
            if len(ts):
                into.append(agg(ts).as_py() + off)
                entries += len(ts) if kind == S.EventKind.OP_BEGIN else 0
    if not starts or not ends or max(ends) <= min(starts):
        return None
    return (max(ends) - min(starts)) / 1e9, entries


def _rlscope_run(command: list[str], trace_dir: Path | str, *options: str) -> list[str]:
    """``command`` under ``rlscope run --no-analyze``, writing its trace to ``trace_dir``."""
    run = [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(trace_dir), *options]
    return [*run, "--no-analyze", "--", *command]


def _copy_command(command: list[str], trace_dir: Path | None) -> list[str]:
    """A copy as given, or under a scopes-only run (the module docstring says why)."""
    if trace_dir is None:
        return command
    return _rlscope_run(command, trace_dir, "--gpu", "off", "--no-backend")


def run_copies(
    command: list[str], k: int, env: dict[str, str], timeout: float, traces: Path | None = None
) -> dict[str, Any]:
    """Start k copies together: each one's wall time, loop time and exit status, and the device memory.

    With ``traces``, copy i runs under a scopes-only ``rlscope run`` writing ``traces/k<k>-<i>``
    (see the module docstring for why).
    """
    try:
        watch: Any = NvmlWatch()
    except Exception as e:  # no NVML: times only
        watch, why = None, str(e)
    ctx = watch if watch is not None else _Null()
    walls: list[float] = [0.0] * k
    codes: list[int] = [0] * k
    cpus: list[float] = [0.0] * k
    with ctx:
        t0 = time.perf_counter()
        dirs = [traces / f"k{k}-{i}" if traces is not None else None for i in range(k)]
        procs = [
            subprocess.Popen(_copy_command(command, d), env=env, stdout=subprocess.DEVNULL) for d in dirs
        ]
        pending = set(range(k))
        while pending:
            for i in list(pending):
                done = _reap(procs[i])
                if done is not None:
                    walls[i] = time.perf_counter() - t0
                    codes[i], cpus[i] = done
                    pending.discard(i)
            if pending and time.perf_counter() - t0 > timeout:
                for i in pending:
                    procs[i].kill()
                raise RLScopeError(f"{k} copies did not finish within {timeout:g} s")
            time.sleep(0.01)
    out: dict[str, Any] = {"k": k, "wall_s": walls, "exit_codes": codes, "mean_wall_s": sum(walls) / k}
    # CPU time of each copy, all its threads (and, under rlscope run, its traced child): how many
    # cores a copy keeps busy, thread pools spinning included, is what k copies contend for
    out["cpu_s"] = cpus
    out["mean_cores"] = sum(c / w for c, w in zip(cpus, walls, strict=True) if w > 0) / k
    loops = [loop_of(d) if d is not None else None for d in dirs]
    if all(x is not None for x in loops):
        out["loop_s"] = [x[0] for x in loops]  # type: ignore[index]
        out["loop_entries"] = [x[1] for x in loops]  # type: ignore[index]
        out["mean_loop_s"] = sum(out["loop_s"]) / k
    if watch is not None:
        out["memory_bytes"] = watch.peak - watch.baseline
        # every process that appeared during the run: under rlscope run the copy is a child of Popen's
        out["per_process_bytes"] = [v for pid, v in watch.per_pid.items() if pid not in watch.before]
    else:
        out["memory_note"] = f"no NVML: {why}"
    return out


def _reap(proc: subprocess.Popen) -> tuple[int, float] | None:
    """(exit code, CPU seconds) of a copy that has ended, None while it runs. os.wait4, not poll():
    its resource usage holds the copy's CPU time, and that of the children it waited for."""
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


class _Null:
    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


# One process of the context-switch probe: a one-element kernel and a synchronize, back to back,
# counted over the same stretch as the other process (a file barrier lines their starts up).
_PROBE = """
import os, sys, time, torch
seconds, barrier, k = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
x = torch.zeros(1, device="cuda")
for _ in range(200):
    x.add_(1)
torch.cuda.synchronize()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
for _ in range(1000):
    x.add_(1)
b.record()
torch.cuda.synchronize()
kernel_us = a.elapsed_time(b) / 1000 * 1e3
open(os.path.join(barrier, str(os.getpid())), "w").close()
while len(os.listdir(barrier)) < k:
    time.sleep(0.0005)
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    x.add_(1)
    torch.cuda.synchronize()
    n += 1
print(n, time.perf_counter() - t0, kernel_us)
"""


def switch_probe(env: dict[str, str], seconds: float = 1.5, timeout: float = 120.0) -> dict[str, Any]:
    """The GPU's cost of switching between two processes' contexts, measured: reported beside the
    estimate, which leaves switches out (docs/sharing.md says why).

    Alone, a process's launch-and-synchronize loop runs at its CPU-side latency. Two such processes
    at once, each with its own context, take turns: every iteration of one follows the other's, so
    with time-slicing the GPU switches context each time, and the two together complete one
    iteration per (switch + kernel). Under MPS they share one context and overlap, and the same
    arithmetic gives a few microseconds. Raises RLScopeError when the probe cannot run (no torch,
    no GPU).
    """

    def run(k: int) -> list[tuple[int, float, float]]:
        with tempfile.TemporaryDirectory(prefix="rlscope-probe-") as barrier:
            cmd = [sys.executable, "-c", _PROBE, str(seconds), barrier, str(k)]
            procs = [
                subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(k)
            ]
            try:
                outs = [p.communicate(timeout=timeout) for p in procs]
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                raise RLScopeError(f"the context-switch probe did not finish within {timeout:g} s") from None
        rows = []
        for p, (out, err) in zip(procs, outs, strict=True):
            if p.returncode != 0 or not out.split():
                last = (err.strip().splitlines() or ["no output"])[-1]
                raise RLScopeError(f"the context-switch probe failed: {last}")
            n, t, kern = out.split()
            rows.append((int(n), float(t), float(kern)))
        return rows

    alone = run(1)[0]
    pair = run(2)
    kernel_us = alone[2]
    rate = sum(n / t for n, t, _ in pair)  # iterations per second of the two together
    return {
        "context_switch_us": max(1e6 / rate - kernel_us, 0.0),
        "alone_iteration_us": 1e6 * alone[1] / alone[0],
        "pair_iteration_us": [1e6 * t / n for n, t, _ in pair],
        "kernel_us": kernel_us,
        "seconds": seconds,
    }


def _mps(on: bool, pipe_dir: str) -> None:
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe_dir, CUDA_MPS_LOG_DIRECTORY=pipe_dir)
    if on:
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
    else:
        subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env=env, check=False)


def check(
    command: list[str],
    ks: tuple[int, ...],
    trace: str | None,
    work: Path,
    timeout: float,
    mps: bool,
    whole_process: bool = False,
    probe: bool = True,
) -> dict[str, Any]:
    if trace is None:
        trace = str(work / "profile")
        subprocess.run(_rlscope_run(command, trace), check=False, stdout=subprocess.DEVNULL)
    from rlscope.analysis.sharing import at_speed, estimate

    env = dict(os.environ)
    mode = "time-sharing"
    if mps:
        if shutil.which("nvidia-cuda-mps-control") is None:
            raise RLScopeError("--mps: nvidia-cuda-mps-control is not installed here")
        pipe = tempfile.mkdtemp(prefix="rlscope-mps-")
        env.update(CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=pipe)
        _mps(True, pipe)
        mode = "mps"
    traces = None if whole_process else work / "copies"
    switch: dict[str, Any] | None = None
    try:
        # the context switch's cost, in the same mode as the copies: reported beside the estimate,
        # not in it (docs/sharing.md: switching per busy period over-estimated 4-7x on the H100)
        if probe:
            try:
                switch = switch_probe(env)
            except RLScopeError as e:
                print(
                    f"rlscope share-check: warning: {printable(e)}; context switches left out",
                    file=sys.stderr,
                )
        est_ks = tuple(sorted({1, *ks}))
        try:
            est: dict[str, Any] | None = estimate_of(trace, ks)
        except RLScopeError as e:  # measure anyway: the copies' figures stand on their own
            print(f"rlscope share-check: warning: no estimate: {printable(e)}", file=sys.stderr)
            est = None
        alone = run_copies(command, 1, env, timeout, traces)
        if est is not None and alone.get("loop_entries") and alone["loop_s"][0] > 0:
            # the profiled run's CPU side is slower: the model wants the rates of the loop alone
            rate = alone["loop_entries"][0] / alone["loop_s"][0]
            est = estimate(at_speed(est["inputs"], rate), est_ks)
        runs = [alone] + [run_copies(command, k, env, timeout, traces) for k in ks if k != 1]
    finally:
        if mps:
            _mps(False, env["CUDA_MPS_PIPE_DIRECTORY"])
    none = {"slowdown": float("nan"), "binds": "?", "memory_bytes": 0}
    by_k = {t["k"]: t for t in est["table"]} if est else {}
    basis = "loop" if all("mean_loop_s" in r for r in runs) else "wall"
    rows = []
    for r in runs:
        pred = by_k.get(r["k"], none)
        row = {
            "k": r["k"],
            "measured_slowdown": r[f"mean_{basis}_s"] / alone[f"mean_{basis}_s"],
            "wall_slowdown": r["mean_wall_s"] / alone["mean_wall_s"],
            "predicted_slowdown": pred["slowdown"],
            "predicted_binds": pred["binds"],
            "predicted_memory_bytes": pred["memory_bytes"],
            **r,
        }
        if "memory_bytes" in r:
            row["measured_memory_bytes"] = r["memory_bytes"]
        rows.append(row)
    return {
        "command": command,
        "trace": trace,
        "mode": mode,
        "basis": basis,
        "mps_available": shutil.which("nvidia-cuda-mps-control") is not None,
        "context_switch_probe": switch,
        "estimate": est,
        "runs": rows,
    }


def check_text(res: dict[str, Any], width: int | None = None) -> str:
    from rlscope.viz.terminal import Columns

    pr = res.get("context_switch_probe")
    lines = []
    if pr:
        pair = ", ".join(f"{x:.1f}" for x in pr["pair_iteration_us"])
        lines.append(
            f"context switch: {pr['context_switch_us']:.1f} us (probe: {pr['alone_iteration_us']:.1f} us"
            f" per launch+sync alone, {pair} us with two processes)"
        )
    lines += [
        f"share-check ({res['mode']}; MPS {'available' if res['mps_available'] else 'not installed'}):"
        f" {printable(' '.join(res['command']))}",
        "slowdown of each copy's "
        + (
            "loop (first scope entry to last exit; start-up left out)"
            if res["basis"] == "loop"
            else "whole process (start to exit, start-up included: no scopes in the program)"
        ),
    ]
    t = Columns(header_style="bold")
    t.add_column("k", justify="right")
    cols = ("wall s", "cores", "slowdown", "predicted", "err", "mem GiB", "predicted GiB", "mem err")
    for col in cols:
        t.add_column(col, justify="right")
    t.add_column("binds (predicted)")
    for r in res["runs"]:
        err = r["predicted_slowdown"] / r["measured_slowdown"] - 1
        mem = r.get("measured_memory_bytes")
        mem_err = f"{100 * (r['predicted_memory_bytes'] / mem - 1):.0f}%" if mem else "?"
        if not r["predicted_memory_bytes"]:
            mem_err = "?"
        t.add_row(
            str(r["k"]),
            f"{r['mean_wall_s']:.2f}",
            f"{r.get('mean_cores', float('nan')):.2f}",
            f"{r['measured_slowdown']:.3f}",
            f"{r['predicted_slowdown']:.3f}",
            f"{100 * err:.0f}%",
            f"{mem / GIB:.2f}" if mem is not None else "?",
            f"{r['predicted_memory_bytes'] / GIB:.2f}",
            mem_err,
            str(r["predicted_binds"]),
        )
    lines.append(_fitted(t, ["cores", "wall s", "mem err", "predicted GiB"], ["binds (predicted)"], width))
    bad = [r["k"] for r in res["runs"] if any(r["exit_codes"])]
    if bad:
        lines.append(f"warning: copies exited with an error status at k = {bad}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``rlscope share-check``."""
    p = Parser(
        prog="rlscope share-check",
        description="Run k copies of a program at once on one GPU and compare each copy's slowdown and"
        " the device memory used with rlscope's co-location estimate (rlscope-analyze share).",
    )
    p.add_argument("-k", default="2,4,8", metavar="K,K,...", help="copies to run together (default 2,4,8)")
    p.add_argument(
        "--trace", metavar="TRACE_DIR", help="estimate from this trace (default: profile one run first)"
    )
    p.add_argument(
        "--work-dir", metavar="DIR", help="where the profiled run's trace goes (default: a temp dir)"
    )
    options.json_out(p, "the measurements and the estimate")
    options.seconds(p, "--timeout", 600.0, "seconds each set of copies may take (default 600)")
    p.add_argument(
        "--mps", action="store_true", help="run the copies under an MPS daemon (needs its control)"
    )
    p.add_argument(
        "--whole-process",
        action="store_true",
        help="time each copy from start to exit, start-up included (default: its scoped loop)",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the context-switch probe (two small torch processes, ~10 s): no switch cost estimated",
    )
    options.program(p)
    args = p.parse_args(argv)
    command = program_command(args.command, "rlscope share-check -k 2,4 -- python train.py ...")
    ks = _k_list(args.k)
    with tempfile.TemporaryDirectory(prefix="rlscope-share-") as tmp:
        work = Path(args.work_dir) if args.work_dir else Path(tmp)
        res = check(
            command, ks, args.trace, work, args.timeout, args.mps, args.whole_process, not args.no_probe
        )
    if args.json:
        write_text(args.json, json.dumps(res, indent=2))
    if res["estimate"]:
        print(estimate_text(res["estimate"]))
    print(check_text(res))
    return 0
