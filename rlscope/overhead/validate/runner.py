"""``rlscope validate``'s parent side: the child processes of every mode, and the result they give.

The command runs ``reps`` times in each of three modes, each run its own process, interleaved with
the mode order rotated per repetition (machine noise hits every mode alike):

- **unprofiled**: ``RLSCOPE_MODE=off``. The time between ``rlscope.profile``'s start and stop (or,
  for a script that never calls it, from interpreter start to exit) is the ground truth for the total.
- **timers**: ``RLSCOPE_MODE=timers``. Every scope boundary is one clock read, aggregated into
  inclusive and exclusive time per operation (nesting per thread, as rlscope's analyzer does), less
  the timers' own cost nested inside each operation. This is the ground truth per operation.
- **profiled**: rlscope's profile (the script's ``rlscope.profile`` redirected to the validation's
  trace directory, or, for a script without one, a whole-process session as ``rlscope run`` starts),
  analyzed with the machine's overhead calibration: corrected wall and per-operation inclusive time.

With ``--twin`` each repetition runs the timed and the profiled run side by side instead, taking
turns on one core (:mod:`rlscope.overhead.validate.twin`), and no unprofiled run.
What each child does is :mod:`rlscope.overhead.validate.child`; the comparison is
:mod:`rlscope.overhead.validate.verdict`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlscope.errors import RLScopeError
from rlscope.overhead.validate import hoststat, twin, window_speed
from rlscope.overhead.validate.aggregate import corrected_timers, timer_cost_s
from rlscope.overhead.validate.child import (
    MODE_ENV,
    OPTIONS_ENV,
    PROBE_ENV,
    RECORD_ENV,
    TRACE_ENV,
    WHOLE_ENV,
    measure_timer_costs,
)
from rlscope.overhead.validate.options import Options, _cpu_list
from rlscope.overhead.validate.speed_probe import LOOP, PERIOD_S, WARM
from rlscope.overhead.validate.verdict import CHECKED_SHARE, SHOWN_SHARE, compare
from rlscope.runtime import hooks
from rlscope.runtime.hooks import RUN_OPTIONS_ENV, RUN_PARENT_ENV, RUN_TRACE_DIR_ENV

MODES = ("unprofiled", "timers", "profiled")
_MODE_VALUE = {"unprofiled": "off", "timers": "timers", "profiled": "profile"}
_TAIL_LINES = 20
BOOT = "rlscope.overhead.validate.child:child_boot"  # what the boot sitecustomize runs in a child


@dataclass
class ChildRun:
    """One run of the user's command: how it ended and what its record says."""

    mode: str
    rep: int
    returncode: int
    process_s: float  # measured by the parent, start to end of the process
    record: dict[str, Any] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)
    host: dict[str, float] | None = None  # the run's cores meanwhile (hoststat: busy, steal seconds)
    position: int = 0  # 1: it ran first in its repetition (a twin pair: it took the first turn)

    @property
    def measured_s(self) -> float | None:
        """In-process time: the rlscope.profile windows, or interpreter start to exit without any,
        less what a twin run waited for its partner's turns (rlscope/overhead/validate/twin.py).

        None for a profiled run: its time is the trace's wall.
        """
        if self.mode == "profiled":
            return None
        if self.record.get("profile_calls"):
            return float(self.record["window_s"]) - float(self.record.get("window_waited_s") or 0.0)
        turn = self.record.get("turn") or {}
        return float(self.record.get("process_s", 0.0)) - float(turn.get("waited_s", 0.0))

    @property
    def waited_s(self) -> float:
        """Seconds a twin run waited for its partner after its start (0 outside twin runs)."""
        return float((self.record.get("turn") or {}).get("waited_s", 0.0))


def mode_order(rep: int) -> list[str]:
    """The modes of repetition ``rep``, rotated so that no mode always runs first (or after another)."""
    k = rep % len(MODES)
    return [*MODES[k:], *MODES[:k]]


def profile_overrides(opts: Options) -> dict[str, Any]:
    """Session options the validation imposes (only those the user gave)."""
    out: dict[str, Any] = dict(opts.session)
    if opts.gpu is not None:
        out["gpu"] = False if opts.gpu == "off" else opts.gpu
    if not opts.backend:
        out["backend"] = False
    return out


def child_env(opts: Options, mode: str, boot: Path, record: Path, trace: Path, whole: bool) -> dict[str, str]:
    """The environment of one child run (module docstring: the variables)."""
    env = dict(os.environ)
    for k in (
        MODE_ENV,
        RECORD_ENV,
        TRACE_ENV,
        OPTIONS_ENV,
        WHOLE_ENV,
        PROBE_ENV,
        hooks.BOOT_ENV,
        RUN_TRACE_DIR_ENV,
        RUN_OPTIONS_ENV,
        RUN_PARENT_ENV,
    ):
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(boot), env.get("PYTHONPATH", "")) if x)
    env[hooks.BOOT_ENV] = BOOT
    env[MODE_ENV] = _MODE_VALUE[mode]
    env[RECORD_ENV] = str(record)
    if whole:
        env[WHOLE_ENV] = "1"
    if not opts.speed_probe:
        env[PROBE_ENV] = "0"
    if mode == "profiled":
        if whole:  # as `rlscope run` does (rlscope/runtime/autorun.py)
            env[RUN_TRACE_DIR_ENV] = str(trace)
            env[RUN_OPTIONS_ENV] = json.dumps({"gpu": "auto", **profile_overrides(opts)})
        else:
            env[TRACE_ENV] = str(trace)
            env[OPTIONS_ENV] = json.dumps(profile_overrides(opts))
    return env


def run_child(
    command: list[str], env: dict[str, str], verbose: bool, cpus: frozenset[int] | None = None
) -> tuple[int, float, list[str]]:
    """Run the command; (exit status, seconds, last lines of its output unless ``verbose``).

    ``cpus``: pinned there before it starts (its threads and children inherit it). Every mode on
    the same cores takes the scheduler's placement out of the comparison."""
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    with _pinned(cpus):  # the calling thread's affinity, which the child inherits (no preexec_fn)
        t0 = time.perf_counter()
        proc = _start(command, env, verbose)
    with proc:
        try:
            for line in proc.stdout or ():  # verbose: the output goes to the terminal, no pipe
                tail.append(line.rstrip("\n"))
            code = proc.wait()
        except BaseException as e:
            # verbose: as subprocess.call did. Terminated: a SIGTERM sent to rlscope alone (not its
            # process group) must not leave the program running. A piped run's own SIGINT (Ctrl-C
            # reaches the whole group) is left to the program to finish.
            if verbose:
                proc.kill()
            elif isinstance(e, Terminated):
                proc.terminate()
            raise
    return code, time.perf_counter() - t0, list(tail)


@contextlib.contextmanager
def _pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """This thread on ``cpus`` for the block (Linux affinity is per thread and inherited at fork)."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _start(
    command: list[str], env: dict[str, str], verbose: bool, pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen:
    try:
        if verbose:
            return subprocess.Popen(command, env=env, pass_fds=pass_fds)
        return subprocess.Popen(
            command,
            env=env,
            pass_fds=pass_fds,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except (FileNotFoundError, PermissionError) as e:
        raise RLScopeError(f"{command[0]}: cannot run: {e.strerror or e}") from None


def profiled_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """What validation needs from an analyzer summary: walls and per-operation times, raw and corrected."""
    raw_ops = summary["raw"]["operations"]
    cal = summary.get("calibration", {})
    return {
        "raw_wall_s": summary["raw"]["wall_s"],
        "corrected_wall_s": summary["wall_s"],
        "corrected_for_overhead": bool(summary.get("corrected_for_overhead")),
        "calibration": cal.get("path") or f"{cal.get('status', '?')}: {cal.get('reason', '')}".strip(),
        "overhead": summary.get("overhead", {}),
        "warnings": summary.get("warnings", []),
        "operations": {
            op: {
                "raw_s": raw_ops.get(op, {}).get("total_s", 0.0),
                "corrected_s": e["total_s"],
                "raw_exclusive_s": raw_ops.get(op, {}).get("exclusive_s", 0.0),
                "corrected_exclusive_s": e["exclusive_s"],
                "calls": e["calls"],
            }
            for op, e in summary["operations"].items()
        },
    }


def _window_speeds(record: dict[str, Any]) -> dict[str, float | None]:
    """A profiled run's probe level in its light and in its full windows (None: no sample there)."""
    got = record.get("speed_windows") or {}
    return {f"speed_{kind}_ns": (got.get(kind) or {}).get("ns_per_iteration") for kind in ("light", "full")}


def _fail_line(run: ChildRun, why: str) -> str:
    lines = [f"validate: the command {why} in the {run.mode} run (repetition {run.rep + 1})"]
    if run.tail:
        lines.append("last lines of its output:")
        lines += [f"  {x}" for x in run.tail]
    return "\n".join(lines)


def steal_share(run: ChildRun) -> float | None:
    """Core-seconds the hypervisor took from the run's cores per second of the run (None where not
    known). Idle cores accrue no steal, so for a job that keeps one core busy this is the share of
    its time it lost to the host."""
    h = run.host
    if not h or run.process_s <= 0:
        return None
    return h["steal"] / run.process_s


def _reps(n: int) -> str:
    return f"{n} repetition" + ("" if n == 1 else "s")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a batch scheduler) while validating: stop as Ctrl-C does, keeping the
    repetitions already done."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated


class _Runner:
    """Runs the child processes of one validation in a scratch directory."""

    def __init__(self, opts: Options, work: Path, log: Any) -> None:
        self.opts, self.work, self.log = opts, work, log
        from rlscope.runtime import BOOT_DIR  # its sitecustomize calls child_boot, then autorun

        self.boot = BOOT_DIR
        self.traces = opts.trace_dir or work / "traces"
        self.whole: bool | None = None  # the script never calls rlscope.profile (known after one run)

    def trace_dir(self, rep: int) -> Path:
        return self.traces / f"rep-{rep + 1}"

    def _prepare(self, mode: str, rep: int, tag: str = "") -> tuple[Path, dict[str, str]]:
        """A run's record path and environment (its trace directory emptied)."""
        record = self.work / f"{mode}{tag}-{rep + 1}.json"
        trace = self.trace_dir(rep)
        if mode == "profiled":
            from rlscope.trace import clear_trace_dir

            clear_trace_dir(trace)
        return record, child_env(self.opts, mode, self.boot, record, trace, bool(self.whole))

    def _label(self, rep: int) -> str:
        most = max(self.opts.reps, self.opts.max_reps)
        of = f"{self.opts.reps}-{most}" if most > self.opts.reps else str(most)
        return "warm-up" if rep < 0 else f"repetition {rep + 1}/{of}"

    def _cores(self) -> frozenset[int] | None:
        if self.opts.cpus:
            return self.opts.cpus
        return frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None

    def run(self, mode: str, rep: int) -> ChildRun:
        """One run; RLScopeError when the command fails or leaves no record."""
        record, env = self._prepare(mode, rep)
        self.log(f"{self._label(rep)}: {mode} ...")
        cores = self._cores()
        before = hoststat.core_seconds(cores)
        code, seconds, tail = run_child(self.opts.command, env, self.opts.verbose, self.opts.cpus)
        host = hoststat.delta(before, hoststat.core_seconds(cores))
        position = mode_order(rep).index(mode) + 1 if rep >= 0 else 1
        return self._finish(
            ChildRun(mode, rep, code, seconds, tail=tail, host=host, position=position), record
        )

    def run_pair(
        self, rep: int, modes: tuple[str, str] = ("timers", "profiled"), counted: bool = True
    ) -> list[ChildRun]:
        """Two runs side by side, in turns on one core (overhead/validate/twin.py): each turn catches up with
        the partner's count, then leads for half of ``--turn-ms``; which run takes the first turn
        alternates by repetition (``modes[0]`` in even ones). The two runs, the first one first. Two
        runs of the same mode are the method's null (how far apart two alike runs read); ``counted=False``
        makes both sides take turns by time (the null's control for the count matching)."""
        lead_first = rep % 2 == 0
        order = [0, 1] if lead_first else [1, 0]
        tags = ("", "-twin") if modes[0] == modes[1] else ("", "")
        cores = self._cores()
        main_cpu, aux = twin_cores(cores)
        turn_ns = int(self.opts.turn_ms * 1e6)
        r0, w0 = os.pipe()  # modes[0] reads its turns here; modes[1] writes them
        r1, w1 = os.pipe()
        specs = (
            twin.Spec(r0, w1, not counted, lead_first, turn_ns, main_cpu, aux),
            twin.Spec(r1, w0, not counted, not lead_first, turn_ns, main_cpu, aux),
        )
        partner_w = {0: w1, 1: w0}  # the parent's DONE when a run exits
        prepared = {i: self._prepare(modes[i], rep, tags[i]) for i in order}
        where = f" on CPU {main_cpu}" if main_cpu is not None else ""
        first = f"{modes[order[0]]}{tags[order[0]]}"
        self.log(f"{self._label(rep)}: {modes[0]} and {modes[1]} in turns{where}, {first} first ...")
        before = hoststat.core_seconds(cores)
        procs: dict[int, subprocess.Popen] = {}
        try:
            try:
                with _pinned(self.opts.cpus):
                    t0 = time.perf_counter()
                    for i in order:
                        env = {**prepared[i][1], twin.TURN_ENV: specs[i].encode()}
                        procs[i] = _start(
                            self.opts.command, env, self.opts.verbose, (specs[i].rfd, specs[i].wfd)
                        )
            finally:
                os.close(r0)
                os.close(r1)
            ended = _wait_pair(procs, partner_w, t0, self.opts.verbose)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            os.close(w0)
            os.close(w1)
        host = hoststat.delta(before, hoststat.core_seconds(cores))
        runs = []
        for pos, i in enumerate(order):
            code, seconds, tail = ended[i]
            own = dict(host) if host else None
            run = ChildRun(modes[i], rep, code, seconds, tail=tail, host=own, position=pos + 1)
            runs.append(self._finish(run, prepared[i][0]))
        return runs

    def _finish(self, run: ChildRun, record: Path) -> ChildRun:
        """Check a run's exit and read its record; RLScopeError when it failed or left none."""
        cores = self._cores()
        code, seconds = run.returncode, run.process_s
        if run.host is not None:
            run.host["cores"] = len(cores) if cores else os.cpu_count() or 1
        if code != 0:
            raise RLScopeError(_fail_line(run, f"exited with status {code}"))
        if not record.exists():
            raise RLScopeError(
                _fail_line(run, "left no measurement (not a Python program, or it ended through os._exit?)")
            )
        run.record = json.loads(record.read_text())
        if self.whole is None:
            self.whole = run.record["profile_calls"] == 0
        measured = run.measured_s
        stolen = f", {steal_share(run):.1%} of it stolen by the host" if steal_share(run) else ""
        shown = f", measured {measured:.2f} s" if measured is not None else ""
        waited = f", waited {run.waited_s:.1f} s for its twin" if run.record.get("turn") else ""
        self.log(f"  {run.mode}: ran {seconds:.1f} s{shown}{waited}{stolen}")
        return run


def twin_cores(cores: Iterable[int] | None) -> tuple[int | None, tuple[int, ...]]:
    """Where a twin pair runs: both main threads on the highest core given, every other thread on
    the rest (the main threads take turns; the rest would crowd them); (None, ()) where the cores
    are not known."""
    if not cores:
        return None, ()
    ids = sorted(cores)
    return ids[-1], tuple(ids[:-1])


def _wait_pair(
    procs: dict[int, subprocess.Popen], partner_w: dict[int, int], t0: float, verbose: bool
) -> dict[int, tuple[int, float, list[str]]]:
    """Wait for both runs of a twin pair, reading their output; when one exits, tell the other
    (DONE on its turns' pipe), so it never waits for a turn that will not come. Per key: exit
    status, seconds since ``t0``, the last lines of its output."""
    import struct

    out: dict[int, tuple[int, float, list[str]]] = {}

    def watch(key: int, proc: subprocess.Popen) -> None:
        tail: deque[str] = deque(maxlen=_TAIL_LINES)
        try:
            for line in proc.stdout or ():
                tail.append(line.rstrip("\n"))
            code = proc.wait()
        finally:
            with contextlib.suppress(OSError):
                os.write(partner_w[key], struct.pack("<q", twin.DONE))
        out[key] = (code, time.perf_counter() - t0, list(tail))

    threads = [threading.Thread(target=watch, args=kv, daemon=True) for kv in procs.items()]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # a timed join: Ctrl-C and SIGTERM reach this thread meanwhile
    except BaseException as e:
        for p in procs.values():
            if verbose or isinstance(e, Terminated):
                p.terminate() if isinstance(e, Terminated) else p.kill()
        raise
    return out


def look_points(reps: int, max_reps: int) -> list[int]:
    """The repetition counts at which ``--max-reps`` looks at the intervals: ``reps``, then each
    doubling, then ``max_reps``. Few looks keep each look's interval narrow (median_interval's
    Bonferroni share), and doubling still stops a quiet machine early. A count too small to give
    any interval at the looks' shared level (five runs cannot reach 95%) is no look: it would
    spend a share of the confidence on nothing."""
    points = [reps]
    while points[-1] * 2 < max_reps:
        points.append(points[-1] * 2)
    if max_reps > reps:
        points.append(max_reps)
    while len(points) > 1:
        # [min, max] of n runs holds the median with 1 - 2^(1-n): n must reach 1 + log2(10 K)
        useful = [n for n in points if 2.0 ** (1 - n) <= 0.10 / len(points)]
        if len(useful) == len(points) or not useful:
            break
        points = useful
    return points


def settled(result: dict[str, Any]) -> bool:
    """Every checked figure's 90% interval lies wholly inside its band or wholly outside it: more
    repetitions would not change the verdict's meaning (:func:`judge`)."""
    checked = [r for r in result["rows"] if r["tolerance"] is not None]
    return all(r.get("judged") in ("confirmed", "systematic") for r in checked)


def validate(opts: Options, log: Any = lambda msg: None, started: float | None = None) -> dict[str, Any]:
    """Run the repetitions of every mode, analyze the traces, and compare (see :func:`compare`).

    ``opts.reps`` repetitions always; then, up to ``opts.max_reps``, more until the comparison is
    :func:`settled` at one of the :func:`look_points`. On a noisy machine a verdict on five
    repetitions is often "inconclusive"; repetitions added until each interval clears its band's
    edge cost only what the machine's noise requires. ``started``: ``time.perf_counter()`` when the
    command began, so ``--time-limit`` counts a first calibration too (default: now).
    """
    costs = measure_timer_costs()
    got = _Measured()
    result: dict[str, Any] = {}
    points = look_points(opts.reps, max(opts.reps, opts.max_reps))
    t0 = started if started is not None else time.perf_counter()  # --time-limit counts from it
    with tempfile.TemporaryDirectory(prefix="rlscope-validate-") as tmp:
        runner = _Runner(opts, Path(tmp), log)
        try:
            if opts.warmup:
                runner.run("unprofiled", -1)
            rep_s = 0.0  # the last repetition's seconds
            for rep in itertools.count():
                if rep in points:
                    if rep == points[-1] or settled(result):
                        break
                    nxt = points[points.index(rep) + 1]
                    log(f"not settled after {rep} repetitions: running to {nxt}")
                elapsed = time.perf_counter() - t0
                if rep and opts.time_limit is not None and elapsed + rep_s > opts.time_limit:
                    log(f"--time-limit: one more repetition (~{rep_s:.0f} s) ends past {opts.time_limit:g} s")
                    result["stopped"] = f"--time-limit {opts.time_limit:g} s after {_reps(rep)}"
                    break
                _one_rep(opts, runner, rep, costs, got, log)
                rep_s = time.perf_counter() - t0 - elapsed
                result = _result(opts, costs, got, bool(runner.whole))
        except KeyboardInterrupt as e:
            if not result:
                raise
            terminated = isinstance(e, Terminated)
            why = "SIGTERM" if terminated else "interrupted"
            log(f"{why}: keeping the {result['reps']} repetitions done")
            result["stopped"] = f"{why} after {_reps(result['reps'])}"
            result["signal"] = "SIGTERM" if terminated else "SIGINT"
    if result.get("stopped"):
        v = result["verdict"]
        v["line"] += f" [stopped early: {result['stopped']}]"
    return result


@dataclass
class _Measured:
    """What the runs so far measured: every run, and per repetition the timer runs' figures and
    blocks and the profiled run's analyzed figures."""

    runs: list[ChildRun] = field(default_factory=list)
    timers: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[dict[str, list[float]]] = field(default_factory=list)
    samples: list[dict[str, list[list[float]]]] = field(default_factory=list)  # [block median, instances]
    profiled: list[dict[str, Any]] = field(default_factory=list)


def _one_rep(
    opts: Options, runner: _Runner, rep: int, costs: dict[str, float], got: _Measured, log: Any
) -> None:
    """Every mode once (in :func:`mode_order`), each run's figures appended to ``got``."""
    from rlscope.analysis import analyze

    for run in runner.run_pair(rep) if opts.twin else (runner.run(mode, rep) for mode in mode_order(rep)):
        mode = run.mode
        got.runs.append(run)
        if mode == "timers":
            got.timers.append(corrected_timers(run.record["timers"], costs))
            # an instance's own timer boundaries (the part inside it) off its exclusive time
            own, blocks = costs["inside"], run.record.get("blocks", {})
            got.blocks.append({op: [x - own for x in q] for op, q in blocks.items()})
            samples = run.record.get("block_samples", {})
            got.samples.append({op: [[m - own, n] for m, n in xs] for op, xs in samples.items()})
        elif mode == "profiled":
            summary = analyze(runner.trace_dir(rep), calibration=opts.calibration, intervals=False).summary
            got.profiled.append({"trace_dir": summary["trace_dir"], **profiled_figures(summary)})
            if run.record.get("speed_samples"):  # the probe's level in each kind of window
                run.record["speed_windows"] = window_speed.levels(
                    run.record["speed_samples"], runner.trace_dir(rep), run.record.get("pid")
                )
            p = got.profiled[-1]
            if opts.twin:  # its waits for the twin's turns are in the raw trace, as rlscope's time
                p["turn_waited_s"] = run.waited_s
                p["raw_wall_s"] -= run.waited_s
            log(f"  analyzed: wall {p['raw_wall_s']:.2f} s raw, {p['corrected_wall_s']:.2f} s corrected")


def _result(opts: Options, costs: dict[str, float], got: _Measured, whole: bool) -> dict[str, Any]:
    """The validation's JSON from the runs so far, compared."""
    result: dict[str, Any] = {
        "schema": "rlscope.overhead.validate.runner/1",
        "command": opts.command,
        "reps": len(got.profiled),
        "min_reps": opts.reps,
        "max_reps": max(opts.reps, opts.max_reps),
        # how often the stopping rule may look at the intervals (look_points, median_interval)
        "looks": len(look_points(opts.reps, max(opts.reps, opts.max_reps))),
        "profile_overrides": profile_overrides(opts),
        "cpus": _cpu_list(opts.cpus) if opts.cpus else None,
        "twin": {"turn_ms": opts.turn_ms} if opts.twin else None,
        "regime": "twin" if opts.twin else "interleaved",
        "script_calls_profile": not whole,
        # what the runs' speed_ns measure: results of different probes do not merge (merge.py)
        "speed_probe": None
        if opts.twin or not opts.speed_probe
        else {"warm": WARM, "loop": LOOP, "period_s": PERIOD_S},
        "reference": "interpreter start to exit" if whole else "rlscope.profile start to stop",
        "tolerance": {
            "total": opts.tolerance_total,
            "operation": opts.tolerance_op,
            "shown_share": SHOWN_SHARE,
            "checked_share": CHECKED_SHARE,
        },
        "timer_costs_ns": costs,
        "runs": [
            {
                "mode": r.mode,
                "rep": r.rep + 1,
                "position": r.position,
                "process_s": r.process_s,
                "measured_s": r.measured_s,
                "waited_s": r.waited_s,
                "turn": r.record.get("turn"),
                # a timed run's time less its timers' own cost (the twin's reference for the total)
                "net_s": None if r.measured_s is None else r.measured_s - timer_cost_s(r.record, costs),
                "returncode": r.returncode,
                "host": r.host,
                "steal_share": steal_share(r),
                # the main thread's speed over the measured region (speed_probe.py; None: not probed)
                "speed_ns": (r.record.get("speed") or {}).get("ns_per_iteration"),
                # a profiled run's in its light and in its full windows (window_speed.py)
                **(_window_speeds(r.record) if r.mode == "profiled" else {}),
                # ns per iteration of each sample, in time order
                "speed_samples": [ns for _, ns in r.record.get("speed_samples") or []],
            }
            for r in got.runs
        ],
        # copies: a repetition cut short by a signal appends to the lists after this result
        "timers": list(got.timers),
        "timer_blocks": list(got.blocks),
        "timer_block_samples": list(got.samples),
        "profiled": list(got.profiled),
    }
    result.update(compare(result, opts))
    return result
