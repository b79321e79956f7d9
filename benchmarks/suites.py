"""The suites: which benchmarks run, how, and which figures each gives.

Every step runs a benchmark script, the ``rlscope`` / ``rlscope-analyze`` command line or a bundled
workload in its own process (so one step's state cannot reach the next, and the steps go through the
same public entries a user does) and returns its figures: ``{name: {"value", "unit", "better"}}``,
the names of ``benchmarks/baseline.json``. A step whose optional dependency is missing (no GPU,
no Ray, no stable-baselines3) is skipped with the reason, never failed.

- ``ci``: a few minutes on a 2-core CPU machine (CI runs it after the tests, printed only);
- ``cpu``: the CPU figures of BENCHMARKS.md (about 30-40 minutes on 2 cores);
- ``gpu``: the GPU figures (one GPU, 16 cores; run it in parts with ``--only``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
Figures = dict[str, dict[str, Any]]


class Skip(Exception):
    """A step that cannot run here (a missing GPU or package): the reason is recorded."""


@dataclass
class Context:
    """What a step needs: the suite, the machine, a scratch directory and a log."""

    suite: str
    machine: str
    work: Path
    log: Callable[[str], None] = print
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def gpu(self) -> bool:
        return self.machine != "cpu-vm"


def fig(value: float | None, unit: str, better: str) -> dict[str, Any]:
    """One figure as results files hold it."""
    return {"value": None if value is None else round(float(value), 4), "unit": unit, "better": better}


def run(ctx: Context, cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    """Run a command from the repository root; its output (stdout and stderr) goes to the log file.

    The command runs in a process group of its own: when it outruns ``timeout`` or the runner is
    stopped (CI's time limit sends SIGTERM), the whole group gets SIGTERM, then SIGKILL, so no
    child (validate's runs, torchrun's ranks) outlives the suite.
    """
    ctx.log("$ " + " ".join(cmd))
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**ctx.env, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        stop_group(proc)
        raise
    with open(ctx.work / "log.txt", "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{stdout}{stderr}\n")
    if proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"exit {proc.returncode}: {' | '.join(tail)}")
    return stdout


def stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the command's process group, SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.communicate(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def py(*args: str) -> list[str]:
    return [sys.executable, *args]


def rlscope(*args: str) -> list[str]:
    return py("-m", "rlscope.cli.main", *args)


def rlscope_analyze(*args: str) -> list[str]:
    return py("-c", "import sys; from rlscope.cli.analyze import main; sys.exit(main())", *args)


def slug(text: str) -> str:
    """A configuration's or workload's name as part of a figure name: no spaces or commas."""
    return text.replace(",", "").replace(" ", "_")


def need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise Skip(f"{module} is not installed")


def need_gpu(ctx: Context) -> None:
    if not ctx.gpu:
        raise Skip("no CUDA GPU")


# --- costs per event ------------------------------------------------------------------------------


def costs(ctx: Context) -> Figures:
    """Scope, category and backend-op cost per enter+exit pair (benchmarks/scope_overhead.py)."""
    out = ctx.work / "costs.json"
    n = "200000" if ctx.suite == "ci" else "1000000"
    run(ctx, py("benchmarks/scope_overhead.py", "--n", n, "--json", str(out)), 300)
    r = json.loads(out.read_text())
    return {f"costs.{k}": fig(v, "ns", "lower") for k, v in r.items()}


def calibrate(ctx: Context) -> Figures:
    """``rlscope calibrate --quick`` (5 runs in the cpu suite): each cost's median, the runs' spread."""
    runs = 1 if ctx.suite == "ci" else 5
    cals = []
    for i in range(runs):
        out = ctx.work / f"calibration-{i}.json"
        run(ctx, rlscope("calibrate", "--quick", "-q", "--out", str(out)), 600)
        cals.append(json.loads(out.read_text()))
    figures: Figures = {"calibrate.refused": fig(sum(len(c["refused"]) for c in cals), "costs", "zero")}
    for entry in sorted({e for c in cals for e in c["costs_ns"]}):
        totals = [c["costs_ns"][entry]["total"] for c in cals if entry in c["costs_ns"]]
        med = statistics.median(totals)
        figures[f"calibrate.{entry}_ns"] = fig(med, "ns", "lower")
        if len(totals) > 1 and med:
            figures[f"calibrate.{entry}_spread"] = fig((max(totals) - min(totals)) / med, "ratio", "lower")
    return figures


def backend(ctx: Context) -> Figures:
    """The native backend recorder's cost per recorded torch op (benchmarks/backend_overhead.py)."""
    need("torch")
    out = ctx.work / "backend.json"
    run(ctx, py("benchmarks/backend_overhead.py", "--quick", "--json", str(out)), 600)
    res = json.loads(out.read_text())["results"]
    return {
        f"backend.{slug(w)}_ns_per_op": fig(r["native"]["ns_per_op"], "ns", "lower") for w, r in res.items()
    }


def cupti(ctx: Context) -> Figures:
    """GPU tracing's CPU cost per launch, default configuration and switched off (cupti_cost.py)."""
    need_gpu(ctx)
    out = ctx.work / "cupti.json"
    run(ctx, py("benchmarks/cupti_cost.py", "--reps", "1", "--json", str(out)), 600)
    table = json.loads(out.read_text())["table"]
    return {
        f"cupti.{slug(config)}_launch_ns": fig(row["launch_extra_ns"], "ns", "lower")
        for config, row in table.items()
        if config != "none"
    }


def memory(ctx: Context) -> Figures:
    """The GPU memory recorder per allocation+free pair and per drained entry (memory_cost.py)."""
    need_gpu(ctx)
    out = ctx.work / "memory.json"
    run(ctx, py("benchmarks/memory_cost.py", "--json", str(out)), 600)
    r = json.loads(out.read_text())
    return {
        "memory.native_ns_per_pair": fig(r.get("native_added_ns_per_pair"), "ns", "lower"),
        "memory.native_drain_ns_per_entry": fig(r.get("native_drain_ns_per_entry"), "ns", "lower"),
    }


# --- default-profile slowdown beside torch.profiler -----------------------------------------------


def slowdown(ctx: Context) -> Figures:
    """The bundled PPO unprofiled, under rlscope's default profile and under torch.profiler."""
    need("torch")
    out = ctx.work / "slowdown.json"
    device = "cuda" if ctx.gpu else "cpu"
    steps, reps = ("4096", "1") if ctx.suite == "ci" else ("10240", "3")
    cmd = py("benchmarks/ppo_overhead.py", "--device", device, "--timesteps", steps, "--reps", reps)
    run(ctx, [*cmd, "--json", str(out)], 900)
    r = json.loads(out.read_text())
    return {f"slowdown.{k}_x": fig(v, "x", "lower") for k, v in r["slowdown"].items() if k != "unprofiled"}


# --- the validation matrix ------------------------------------------------------------------------

# name: (command after `python`, suites); the GPU rows' sizes are the device matrix's
MATRIX: dict[str, dict[str, list[str]]] = {
    "ci": {
        "dqn": ["benchmarks/validation_workloads.py", "dqn", "--scale", "1"],
        "sim_eager": ["benchmarks/validation_workloads.py", "sim_eager", "--device", "cpu", "--scale", "1"],
    },
    "cpu": {
        "ppo_cpu": ["benchmarks/validation_workloads.py", "ppo_cpu", "--scale", "3"],
        "dqn": ["benchmarks/validation_workloads.py", "dqn", "--scale", "2"],
        "sim_eager": ["benchmarks/validation_workloads.py", "sim_eager", "--device", "cpu", "--scale", "2"],
        "sb3_ppo": ["benchmarks/thirdparty/sb3_ppo.py", "--timesteps", "16384"],
        "sb3_sac": ["benchmarks/thirdparty/sb3_sac.py", "--timesteps", "600"],
    },
    "gpu": {
        "ppo_gpu": ["benchmarks/validation_workloads.py", "ppo_gpu", "--scale", "2"],
        "ppo_cpu": ["benchmarks/validation_workloads.py", "ppo_cpu", "--scale", "0.5"],
        "dqn": ["benchmarks/validation_workloads.py", "dqn", "--scale", "0.5"],
        "sb3_ppo": [
            "benchmarks/thirdparty/sb3_ppo.py",
            "--device",
            "cuda",
            "--timesteps",
            "8192",
            "--n-steps",
            "256",
        ],
        "sim_eager": [
            "benchmarks/validation_workloads.py",
            "sim_eager",
            "--device",
            "cuda",
            "--scale",
            "0.5",
        ],
        "sb3_sac": ["benchmarks/thirdparty/sb3_sac.py", "--device", "cuda", "--timesteps", "400"],
    },
}
MATRIX_REPS = {"ci": "3", "cpu": "5", "gpu": "4"}


def validation_figures(row: str, result: dict[str, Any], prefix: str = "") -> Figures:
    """A validate JSON's headline: the total's median error, its raw slowdown, the worst checked operation
    (``prefix``: ``twin_`` for the twin regime's figures beside the plain regime's headline)."""
    total = next(r for r in result["rows"] if r["operation"] == "[total]")

    def median(values: list[float | None]) -> float | None:
        vals = [v for v in values if v is not None]
        return statistics.median(vals) if vals else None

    err = median(total["error"])
    ops = [median(r["error"]) for r in result["rows"] if r["operation"] != "[total]" and r["ok"] is not None]
    ops = [e for e in ops if e is not None]
    # plain runs set at one main-thread speed (validate's speed probe): the error before it too
    unadjusted = (total.get("speed_adjusted") or {}).get("unadjusted_median_error")
    extra = (
        {}
        if unadjusted is None
        else {f"matrix.{row}.{prefix}unadjusted_total_error_pct": fig(100 * unadjusted, "%", "zero")}
    )
    return {
        **extra,
        f"matrix.{row}.{prefix}total_error_pct": fig(None if err is None else 100 * err, "%", "zero"),
        f"matrix.{row}.{prefix}worst_operation_error_pct": fig(
            100 * max(ops, key=abs) if ops else None, "%", "zero"
        ),
        f"matrix.{row}.{prefix}raw_slowdown_x": fig(median(total["raw_slowdown"]), "x", "lower"),
        f"matrix.{row}.{prefix}pass": fig(1.0 if result["verdict"]["pass"] else 0.0, "bool", "higher"),
    }


MATRIX_REPS_PLAIN = {"ci": "3", "cpu": "10", "gpu": "10"}


def matrix(ctx: Context) -> Figures:
    """``rlscope validate`` on each row of the suite's matrix, in both regimes: plain interleaved runs,
    as users run their programs (the headline figures), then ``--twin`` (``twin_`` figures); sb3 rows
    need the bench extras."""
    figures: Figures = {}
    rows = MATRIX["gpu" if ctx.gpu and ctx.suite == "gpu" else ctx.suite]
    for row, args in rows.items():
        if (
            args[0].startswith("benchmarks/thirdparty")
            and importlib.util.find_spec("stable_baselines3") is None
        ):
            ctx.log(f"matrix {row}: skipped (stable-baselines3 not installed: pip install -e '.[bench]')")
            continue
        for prefix, regime in (("", ["--reps", MATRIX_REPS_PLAIN[ctx.suite]]),
                               ("twin_", ["--twin", "--reps", MATRIX_REPS[ctx.suite]])):  # fmt: skip
            out = ctx.work / f"val_{prefix}{row}.json"
            cmd = rlscope("validate", *regime, "--json", str(out))
            try:  # validate exits 1 on FAIL and 3 on INCONCLUSIVE: the JSON still holds the figures
                run(
                    ctx,
                    [*cmd, "--trace-dir", str(ctx.work / f"trace-{row}"), "--", *py(*args)],
                    1800,
                    env={"OMP_NUM_THREADS": "1"},
                )
            except RuntimeError as e:
                if not out.exists():
                    raise RuntimeError(f"{row}: {e}") from None
            figures |= validation_figures(row, json.loads(out.read_text()), prefix)
            shutil.rmtree(ctx.work / f"trace-{row}", ignore_errors=True)
    return figures


# --- analysis, simulators, sharing, Ray, DDP ------------------------------------------------------


def analyzer(ctx: Context) -> Figures:
    """Files to breakdown table, one core (benchmarks/analyzer_throughput.py)."""
    out = ctx.work / "analyzer.json"
    events = "3000000" if ctx.suite == "ci" else "10000000"
    run(
        ctx,
        [
            "taskset",
            "-c",
            "1",
            *py("benchmarks/analyzer_throughput.py", "--events", events, "--json", str(out)),
        ]
        if shutil.which("taskset") and os.cpu_count() and os.cpu_count() > 1
        else py("benchmarks/analyzer_throughput.py", "--events", events, "--json", str(out)),
        900,
    )
    r = json.loads(out.read_text())
    return {"analyzer.events_per_s": fig(r["events_per_s"] / 1e6, "M/s", "higher")}


def parallel(ctx: Context) -> Figures:
    """Serial against two-worker analysis of a 64-process trace (benchmarks/parallel_analysis.py)."""
    out = ctx.work / "parallel.json"
    cmd = py("benchmarks/parallel_analysis.py", "--events", "20000000", "--processes", "64", "--workers", "2")
    run(ctx, [*cmd, "--reps", "3", "--trace", str(ctx.work / "t20m"), "--json", str(out)], 1800)
    shutil.rmtree(ctx.work / "t20m", ignore_errors=True)
    r = json.loads(out.read_text())
    return {
        "parallel.serial_s": fig(r["serial_s"], "s", "lower"),
        "parallel.speedup_x": fig(r["speedup"], "x", "higher"),
    }


def longrun(ctx: Context) -> Figures:
    """Runs of a learner and 8 env workers, 10 minutes to 8 hours (2 hours at most in ci), made
    through the trace writer (benchmarks/longrun.py): the trace's MB, per hour per process, the
    analysis's seconds and peak RSS, its worst error against the generator's truth (band ±1%)."""
    out = ctx.work / "longrun.json"
    lengths = "10m,2h" if ctx.suite == "ci" else "10m,30m,2h,8h"
    try:  # an error beyond the band exits 1 after the JSON is written: the figures say it
        run(ctx, py("benchmarks/longrun.py", "--lengths", lengths, "--json", str(out)), 3600)
    except RuntimeError:
        if not out.exists():
            raise
    r = json.loads(out.read_text())
    figures: Figures = {}
    for length in r["runs"]:
        k = f"longrun.{length['label']}"
        figures[f"{k}.trace_mb"] = fig(length["trace_mb"], "MB", "lower")
        figures[f"{k}.mb_per_hour_process"] = fig(length["mb_per_hour_process"], "MB", "lower")
        figures[f"{k}.analyze_s"] = fig(length["analyze_s"], "s", "lower")
        figures[f"{k}.peak_rss_mb"] = fig(length["peak_rss_mb"], "MB", "lower")
        figures[f"{k}.max_error_pct"] = fig(length["max_error_pct"], "%", "zero")
    first, last = r["runs"][0]["label"], r["runs"][-1]["label"]
    figures[f"longrun.rss_{last}_over_{first}_x"] = fig(r["rss_growth_x"], "x", "lower")
    return figures


def simulators(ctx: Context) -> Figures:
    """``rlscope-analyze bench-sim`` (``--quick`` on a CPU): each backend's best env-steps/s."""
    out = ctx.work / "sim.json"
    args = ["bench-sim", "-q", "--json", str(out)] + ([] if ctx.gpu else ["--quick"])
    run(ctx, rlscope_analyze(*args), 1800, env={"OMP_NUM_THREADS": "1"})
    r = json.loads(out.read_text())
    figures: Figures = {}
    for backend in sorted({row["backend"] for row in r["cartpole"]}):
        best = max(row["steps_per_sec"] for row in r["cartpole"] if row["backend"] == backend)
        figures[f"sim.{backend}_steps_per_s"] = fig(best, "steps/s", "higher")
    return figures


def sharing(ctx: Context) -> Figures:
    """``share-check -k 2,4`` on the bundled PPO: the measured slowdown, the memory estimate's error."""
    need_gpu(ctx)
    out = ctx.work / "share.json"
    cmd = rlscope("share-check", "-k", "2,4", "--work-dir", str(ctx.work / "sc"), "--json", str(out))
    run(ctx, [*cmd, "--", *py("benchmarks/sharing_workloads.py", "ppo")], 1200)
    figures: Figures = {}
    for r in json.loads(out.read_text())["runs"]:
        k = r["k"]
        figures[f"sharing.ppo_k{k}_slowdown_x"] = fig(r["measured_slowdown"], "x", "lower")
        if r.get("measured_memory_bytes") and r["predicted_memory_bytes"]:
            err = 100 * (r["predicted_memory_bytes"] / r["measured_memory_bytes"] - 1)
            figures[f"sharing.ppo_k{k}_memory_error_pct"] = fig(err, "%", "zero")
    return figures


def ray(ctx: Context) -> Figures:
    """Ray PPO (4 actors): each actor's corrected busy time against its own plain timer."""
    need("ray")
    trace, out = ctx.work / "ray-trace", ctx.work / "ray.json"
    cmd = py("-m", "rlscope.workloads.ppo_ray", "--actors", "4", "--total-timesteps", "50000")
    run(ctx, [*cmd, "--trace-dir", str(trace), "--json", str(out)], 1200)
    timers = {str(a["pid"]): a["busy_s"] for a in json.loads(out.read_text())["actors"]}
    summary = analyze_json(ctx, trace)
    busy = summary["roles"]["RolloutWorker"]["busy_s"]
    errors = [100 * (busy[pid] / t - 1) for pid, t in timers.items() if pid in busy and t]
    return {
        "ray.actor_busy_error_pct": fig(max(errors, key=abs) if errors else None, "%", "zero"),
        "ray.actors_seen": fig(len(errors), "actors", "higher"),
    }


def ddp(ctx: Context) -> Figures:
    """Two torchrun ranks of the bundled PPO (gloo on a CPU): the slowdown and both ranks seen."""
    need("torch")
    job = py("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "workloads/ppo_ddp.py")
    job += ["--total-steps", "20480", "--seed", "1", "--eval-episodes", "0", "--quiet"]
    t0 = time.perf_counter()
    run(ctx, job, 900)
    plain = time.perf_counter() - t0
    trace = ctx.work / "ddp-trace"
    t0 = time.perf_counter()
    run(ctx, [*rlscope("run", "--trace-dir", str(trace), "--no-analyze", "--"), *job], 900)
    profiled = time.perf_counter() - t0
    ranks = analyze_json(ctx, trace)["roles"].get("ddp rank", {})
    busy = list(ranks.get("busy_s", {}).values())
    return {
        "ddp.slowdown_x": fig(profiled / plain, "x", "lower"),
        "ddp.ranks_seen": fig(ranks.get("workers", 0), "ranks", "higher"),
        "ddp.rank_busy_spread": fig((max(busy) - min(busy)) / max(busy) if busy else None, "ratio", "lower"),
    }


def in_process(ctx: Context) -> Figures:
    """SB3 PPO with and without rlscope in one process (in_process_ab.py; its policy on the GPU where
    there is one): the corrected train's and learn()'s error, the light and full states' cost, the
    speed probe's reading under a session, what a light session and its autograd engine wrappers
    add to a torch update step, the corrected learn() of an unannotated SB3 PPO between detail
    stretches, and on a GPU what GPU collection leaves on a launch there."""
    need("stable_baselines3")
    out = ctx.work / "in_process.json"
    device = "cuda" if ctx.gpu else "cpu"
    cmd = py("benchmarks/in_process_ab.py", "--reps", "8", "--device", device, "--json", str(out))
    run(ctx, cmd, 1200, {"OMP_NUM_THREADS": "1"})
    r = json.loads(out.read_text())
    return {
        "in_process.train_error_pct": fig(100 * r["train"]["corrected_error"]["median"], "%", "zero"),
        "in_process.train_raw_slowdown_x": fig(r["train"]["raw_slowdown"]["median"], "x", "lower"),
        "in_process.learn_error_pct": fig(100 * r["learn"]["corrected_error"]["median"], "%", "zero"),
        "in_process.learn_raw_slowdown_x": fig(r["learn"]["raw_slowdown"]["median"], "x", "lower"),
        "in_process.light_state_x": fig(r["light"]["light_over_unprofiled"]["median"], "x", "lower"),
        "in_process.full_state_x": fig(r["light"]["full_over_unprofiled"]["median"], "x", "lower"),
        # the probe's reading under a session over its reading without one, less one: ideally 0;
        # and from the samples in the session's light windows only, and in its full ones only
        "in_process.probe_session_bias_pct": fig(
            100 * (r["probe"]["session_over_none"]["median"] - 1), "%", "zero"
        ),
        **{
            f"in_process.probe_{kind}_windows_bias_pct": fig(
                100 * (r["probe"][f"{kind}_windows_over_none"]["median"] - 1), "%", "zero"
            )
            for kind in ("light", "full")
            if f"{kind}_windows_over_none" in r["probe"]
        },
        # what a light session adds to a torch update step, and the engine wrappers' part of it
        "in_process.light_step_added_us": fig(r["engine"]["light_added_us"]["median"], "us", "lower"),
        "in_process.engine_wrappers_us": fig(r["engine"]["engine_wrappers_us"]["median"], "us", "lower"),
        # an unannotated SB3 PPO between detail stretches: the aggregates' correction on its own
        "in_process.summary_error_pct": fig(100 * r["summary"]["corrected_error"]["median"], "%", "zero"),
        "in_process.summary_raw_slowdown_x": fig(r["summary"]["raw_slowdown"]["median"], "x", "lower"),
        **{
            f"in_process.summary_{v}_error_pct": fig(
                100 * r["summary"][f"corrected_error.{v}"]["median"], "%", "zero"
            )
            for v in ("no_backend", "no_auto_ops")
        },
        # on a GPU: what GPU collection, detached between detail stretches, leaves on every launch
        **{
            f"in_process.gpu_ops_{v}_added_us": fig(r["gpu_ops"][f"{v}_added_us"]["median"], "us", "lower")
            for v in ("gpu", "gpu_no_nvml")
            if "gpu_ops" in r
        },
    }


def analyze_json(ctx: Context, trace: Path) -> dict[str, Any]:
    """A trace's summary through ``rlscope-analyze --json`` (the format docs/trace-format.md fixes)."""
    out = trace.with_suffix(".summary.json")
    run(ctx, rlscope_analyze(str(trace), "-q", "--json", str(out)), 900)
    return json.loads(out.read_text())


STEPS: dict[str, Callable[[Context], Figures]] = {
    "costs": costs,
    "calibrate": calibrate,
    "backend": backend,
    "cupti": cupti,
    "memory": memory,
    "slowdown": slowdown,
    "matrix": matrix,
    "analyzer": analyzer,
    "parallel": parallel,
    "longrun": longrun,
    "simulators": simulators,
    "sharing": sharing,
    "ray": ray,
    "ddp": ddp,
    "in_process": in_process,
}
SUITES: dict[str, list[str]] = {
    "ci": ["costs", "calibrate", "analyzer", "longrun", "slowdown", "matrix"],
    "cpu": [
        "costs",
        "calibrate",
        "backend",
        "slowdown",
        "analyzer",
        "parallel",
        "longrun",
        "simulators",
        "ray",
        "ddp",
        "in_process",
        "matrix",
    ],
    "gpu": [
        "costs",
        "calibrate",
        "backend",
        "cupti",
        "memory",
        "slowdown",
        "simulators",
        "sharing",
        "in_process",
        "matrix",
    ],
}


def detect_machine() -> str:
    """``h100`` / ``h200`` by the first GPU's name, else ``cpu-vm`` (the baseline's keys)."""
    try:
        name = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "cpu-vm"
    for kind in ("H100", "H200"):
        if kind in name:
            return kind.lower()
    return "cpu-vm" if not name.strip() else name.strip().splitlines()[0].lower().replace(" ", "-")
