"""CUDA graph replays and torch.compile on a GPU, checked against CUDA events and plain runs.

    python benchmarks/compiled_gpu_check.py [--replays 2000] [--timesteps 8192] [--reps 2] [--out DIR]
    python benchmarks/compiled_gpu_check.py --dry-run   # no CUDA: the CPU plumbing of part 2 only

1. **Hand-captured CUDA graph.** The bundled PPO's actor and critic (``workloads/ppo_cartpole.py``: two
   4-64-64 MLPs, batch ``--batch``) captured with ``torch.cuda.graph`` and replayed ``--replays`` times
   under ``rlscope.profile(trace, windows=False)`` (GPU tracing on all the run: every replay recorded),
   in chunks: a ``torch.cuda._sleep`` in a ``backlog`` operation first, so the replays queue behind it
   and run back to back, then the chunk's replays inside ``inference``, each between a pair of
   ``torch.cuda.Event(enable_timing=True)``. Compared: the summary's ``inference`` GPU kernel time
   (``operations.inference.gpu_categories.gpu_kernel``, corrected and raw) and, from the trace, each
   replay's kernels (joined to its ``cudaGraphLaunch`` by CUPTI's correlation id) summed and spanned,
   against the events' time (target: within 10%). Also: GPU records whose launching call was not
   found (they would count as unannotated), the kernels per replay, and which operations the graph's
   kernels went to. The same replays unprofiled give the events' time without CUPTI.
   The same again with the default windows (GPU tracing on in every other window, CUPTI detached in
   between): the graph's kernels recorded in full windows must still join their replay. CUPTI before
   CUDA 13.1 Update 1 gave graph launches wrong correlation ids after a detach and re-attach (its
   release notes), which would show here as kernels without a launch or in another operation.
   The PPO's graph is 17 kernels of 1-4 us with the GPU's own gaps between them, so its kernel time
   is well under the events' (its span is what they measure); a graph of ``SLEEP_KERNELS`` sleeps of
   known length (``torch.cuda._sleep``), replayed the same way with tracing on, checks the kernel time
   the report gives against the events where the gaps are negligible (target: within 10%).
2. **torch.compile.** The PPO eager, ``--compile default`` and ``--compile reduce-overhead`` (``--device
   cuda``; the policy's step and the update's loss compiled) under ``rlscope run --json``: ``compile``
   (seconds, compilations, recompiles), the wall and the per-operation times; the compiling runs start
   with an empty inductor cache. Then each variant plain, interleaved ``--reps`` times, each run's
   steady state read from its own timers (``iteration_seconds``: rollout, advantages and update of
   each iteration; the median iteration after the first ``WARM_ITERATIONS``, so compiling and start-up
   are left out). The measured gain of compiling an iteration (eager minus compiled: the rollout's for
   ``inference``, the update's for ``backprop``) against the advice's prediction from the eager
   profiled run: the ``launch_bound`` findings' ``seconds_at_stake`` (rlscope/analysis/advice/
   launch.py) over its iterations, read from a leading finding's ``hides`` where one superseded them
   (the PPO's small MLP on the GPU: acting on the CPU wins more). Kept for the model: the eager run's
   findings, its operations' categories and their CUDA API evidence (``gpu_calls``); and the
   ``rlscope-analyze diff`` of the eager run against each compiled one (``diff``).

3. **A replay's own cost.** The policy step and a training step compiled with ``reduce-overhead``
   against the same eager and a single eager op, per call, with rlscope's reference loop beside them
   (:func:`replay_check`).

With the defaults it takes about 5 minutes on an H200 (most of it compiling: the profiled compiled
runs start cold; ``--reps 1`` saves a minute).

Prints one JSON document (also written to ``--out``/compiled_gpu_check.json). Fails with one line
when no CUDA device is present, unless ``--dry-run``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PPO = ROOT / "workloads" / "ppo_cartpole.py"
MODES = ("eager", "default", "reduce-overhead")
LAUNCH_RULE = "launch_bound"  # rlscope/analysis/advice/launch.py
ADVICE_KEYS = ("rule", "operation", "seconds_at_stake")  # of each finding of the eager run, kept
GRAPH_APIS = ("cudaGraphLaunch", "cuGraphLaunch")
CHUNK = 100  # replays queued behind one sleep
SLEEP_CYCLES = 5_000_000  # ~2.5 ms at 2 GHz: longer than the CPU takes to queue a chunk
SLEEP_KERNELS = 4  # the sleep graph's kernels, each of SLEEP_KERNEL_CYCLES (~25 us at 2 GHz)
SLEEP_KERNEL_CYCLES = 50_000
TARGET = 0.10


# -- part 1: a hand-captured CUDA graph ------------------------------------------------------------


def _policy(batch: int) -> tuple[Any, Any]:
    """The PPO's actor and critic as one module, and a static input batch, on the GPU."""
    import torch
    from torch import nn

    torch.manual_seed(0)

    def mlp(out: int) -> nn.Sequential:
        return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.actor, self.critic = mlp(2), mlp(1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.actor(x), self.critic(x)

    return Policy().cuda().eval(), torch.randn(batch, 4, device="cuda")


def _capture(policy: Any, x: Any) -> Any:
    """The forward captured in a CUDA graph (warmed up on a side stream first, as torch asks)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            policy(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        policy(x)
    torch.cuda.synchronize()
    return graph


class _Sleeps:
    """A stand-in policy whose forward is SLEEP_KERNELS GPU sleeps of known length."""

    def __call__(self, x: Any) -> None:
        import torch

        for _ in range(SLEEP_KERNELS):
            torch.cuda._sleep(SLEEP_KERNEL_CYCLES)


def _replays(graph: Any, n: int, seconds: float, scope: Any) -> list[float]:
    """Replay ``graph`` ``n`` times (or for ``seconds``, when set), chunks queued behind a sleep; each
    replay's CUDA-event time in seconds."""
    import torch

    times: list[float] = []
    start = time.perf_counter()
    while len(times) < n or (seconds and time.perf_counter() - start < seconds):
        with scope("backlog"):
            torch.cuda._sleep(SLEEP_CYCLES)
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CHUNK)
        ]
        with scope("inference"):
            for begin, end in pairs:
                begin.record()
                graph.replay()
                end.record()
        torch.cuda.synchronize()
        times += [b.elapsed_time(e) / 1e3 for b, e in pairs]
    return times


def graph_child(mode: str, args: argparse.Namespace) -> None:
    """One run of part 1 in its own process (``plain``, ``full`` or ``windows``), its result to JSON."""
    import contextlib

    import torch

    import rlscope

    policy, x = _policy(args.batch)
    if mode == "sleep":
        policy = _Sleeps()
    seconds = args.windows_seconds if mode == "windows" else 0.0
    if mode == "plain":
        graph = _capture(policy, x)
        times = _replays(graph, args.replays, 0.0, lambda name: contextlib.nullcontext())
    else:
        with rlscope.profile(args.trace_dir, windows=mode == "windows"):  # full, sleep: tracing all along
            with rlscope.scope("capture"):
                graph = _capture(policy, x)
            times = _replays(graph, args.replays, seconds, rlscope.scope)
            torch.cuda.synchronize()
    Path(args.result).write_text(json.dumps({"replays": len(times), "event_s": sum(times), "times": times}))


def _graph_launches(trace_dir: Path) -> dict[str, Any]:
    """From the trace: each graph launch's kernels (joined by correlation id), summed and spanned, and
    the GPU records whose launching call is missing."""
    import numpy as np

    from rlscope import categories
    from rlscope.analysis import gpu
    from rlscope.analysis.gpu_calls import api_base_name
    from rlscope.trace.reader import load_trace

    out: dict[str, Any] = {"graph_launches": 0, "kernels": 0, "kernel_sum_s": 0.0, "span_s": 0.0}
    out.update(records=0, records_without_launch=0, gpu_s_without_launch=0.0, kernels_per_launch={})
    for proc in load_trace(trace_dir).processes:
        if proc.gpu is None or not proc.gpu.num_rows:
            continue
        api, recs = gpu.split(proc.gpu, *gpu.session_bounds(proc))
        idx, found = gpu.launching_call(api, recs)
        dur = recs.end - recs.start
        out["records"] += len(found)
        out["records_without_launch"] += int((~found).sum())
        out["gpu_s_without_launch"] += float(dur[~found].sum()) / 1e9
        names = {int(i): api_base_name(proc.name(int(i))) for i in np.unique(api.name)}
        is_graph = np.array([names[int(i)] in GRAPH_APIS for i in api.name], bool)
        out["graph_launches"] += int(np.unique(api.correlation[is_graph]).size)
        mine = found & is_graph[idx] & (recs.category == categories.GPU_KERNEL)
        corr = recs.correlation[mine]
        if not len(corr):
            continue
        uniq, inv = np.unique(corr, return_inverse=True)
        first = np.full(len(uniq), np.iinfo(np.int64).max)
        last = np.zeros(len(uniq), np.int64)
        np.minimum.at(first, inv, recs.start[mine])
        np.maximum.at(last, inv, recs.end[mine])
        out["kernels"] += int(mine.sum())
        out["kernel_sum_s"] += float(dur[mine].sum()) / 1e9
        out["span_s"] += float((last - first).sum()) / 1e9
        for k, n in zip(*np.unique(np.bincount(inv), return_counts=True), strict=True):
            out["kernels_per_launch"][str(int(k))] = out["kernels_per_launch"].get(str(int(k)), 0) + int(n)
    return out


def _kernels_by_operation(result: Any) -> dict[str, int]:
    """Kernels per operation from the analysis's kernel table, the backlog's sleeps left out (by their
    operation: the sleep graph's own kernels are sleeps too)."""
    out: dict[str, int] = {}
    for row in result.kernels.to_pylist():
        if row["category"] == "gpu_kernel" and row["operation"] != "backlog":
            out[row["operation"]] = out.get(row["operation"], 0) + int(row["count"])
    return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def graph_check(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Part 1: the replays plain, profiled with GPU tracing on all along, and with the windows."""
    import rlscope.analysis

    out: dict[str, Any] = {"batch": args.batch, "replays": args.replays}
    for mode in ("plain", "full", "windows", "sleep"):
        trace, res = work / f"graph-{mode}", work / f"graph-{mode}.json"
        cmd = [
            sys.executable,
            __file__,
            "--graph-child",
            mode,
            "--trace-dir",
            str(trace),
            "--result",
            str(res),
        ]
        cmd += ["--replays", str(args.replays), "--batch", str(args.batch)]
        cmd += ["--windows-seconds", str(args.windows_seconds)]
        _timed(cmd)
        child = json.loads(res.read_text())
        entry: dict[str, Any] = {"replays": child["replays"], "event_s": child["event_s"]}
        entry["event_per_replay_us"] = 1e6 * child["event_s"] / max(child["replays"], 1)
        if mode != "plain":
            result = rlscope.analysis.analyze(str(trace))
            s = result.summary
            inference = (s.get("operations") or {}).get("inference") or {}
            raw = ((s.get("raw") or {}).get("operations") or {}).get("inference") or {}
            entry["summary_gpu_kernel_s"] = float(
                (inference.get("gpu_categories") or {}).get("gpu_kernel", 0.0)
            )
            entry["summary_gpu_kernel_raw_s"] = float(
                (raw.get("gpu_categories") or {}).get("gpu_kernel", 0.0)
            )
            entry["trace"] = _graph_launches(trace)
            entry["kernels_by_operation"] = _kernels_by_operation(result)
            entry["warnings"] = list(s.get("warnings") or [])
            t = entry["trace"]
            graph_kernels = sum(entry["kernels_by_operation"].values())
            entry["graph_kernels_in_inference"] = _ratio(
                entry["kernels_by_operation"].get("inference", 0), graph_kernels
            )
        if mode in ("full", "sleep"):
            ev = child["event_s"]
            entry["summary_over_events"] = _ratio(entry["summary_gpu_kernel_s"], ev)
            entry["kernel_sum_over_events"] = _ratio(t["kernel_sum_s"], ev)
            entry["span_over_events"] = _ratio(t["span_s"], ev)
            entry["within_target"] = {
                k: v is not None and abs(v - 1.0) <= TARGET
                for k, v in (
                    ("summary", entry["summary_over_events"]),
                    ("span", entry["span_over_events"]),
                )
            }
        out[mode] = entry
    out["cupti_slowdown_per_replay"] = _ratio(
        out["full"]["event_per_replay_us"], out["plain"]["event_per_replay_us"]
    )
    return out


# -- part 2: torch.compile on the bundled PPO --------------------------------------------------------


def _ppo(mode: str, args: argparse.Namespace, timesteps: int) -> list[str]:
    return [
        str(PPO), "--quiet", "--device", args.device, "--total-timesteps", str(timesteps),
        "--eval-episodes", "0", "--num-envs", str(args.num_envs), "--seed", "1",
        *(["--compile", mode] if mode != "eager" else []), *(["--no-scopes"] if args.no_scopes else []),
    ]  # fmt: skip


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def _operations(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per operation: total, exclusive, its compile time and its GPU kernel time."""
    return {
        name: {
            "total_s": float(op.get("total_s", 0.0)),
            "exclusive_s": float(op.get("exclusive_s", 0.0)),
            "compile_s": float((op.get("categories") or {}).get("compile", 0.0)),
            "one_time_s": float((op.get("one_time_s") or {}).get("total_s", 0.0)),
            "gpu_kernel_s": float((op.get("gpu_categories") or {}).get("gpu_kernel", 0.0)),
            "calls": int(op.get("calls", 0)),
            "categories": dict(op.get("categories") or {}),
            "gpu_categories": dict(op.get("gpu_categories") or {}),
        }
        for name, op in (summary.get("operations") or {}).items()
    }


def _profiled(mode: str, args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict[str, Any]:
    out = work / f"ppo-{mode}.json"
    run = [sys.executable, "-m", "rlscope.cli.main", "run", "--trace-dir", str(work / f"ppo-{mode}")]
    wall = _timed([*run, "--json", str(out), "--", sys.executable, *_ppo(mode, args, args.timesteps)], env)
    if not out.exists():  # the run went through, its end-of-run analysis did not: say why, keep the trace
        return {"process_wall_s": wall, "analysis_failed": _analysis_error(work / f"ppo-{mode}", out, args)}
    s = json.loads(out.read_text())
    _keep(work / f"ppo-{mode}", args)
    c = s.get("compile") or {}
    # launch_bound's findings, also where a finding the run leads with hid them (a small policy on the
    # GPU: acting on the CPU wins more; the rule's own number is under its ``hides``)
    launch = [f for f in s.get("advice") or [] if f.get("rule") == LAUNCH_RULE] + [
        h for f in s.get("advice") or [] for h in f.get("hides") or [] if h.get("rule") == LAUNCH_RULE
    ]
    return {
        "process_wall_s": wall,
        "wall_s": float(s.get("wall_s", 0.0)),
        "compile": {k: c.get(k) for k in ("compilations", "seconds", "recompiles", "stages", "functions")},
        "recompile_reasons": c.get("recompile_reasons") or [],
        "operations": _operations(s),
        "launch_bound": [
            {"operation": f.get("operation"), "seconds_at_stake": float(f.get("seconds_at_stake", 0.0))}
            for f in launch
        ],
        "advice": [{k: f.get(k) for k in ADVICE_KEYS} for f in s.get("advice") or []],
        "warnings": list(s.get("warnings") or []),
    }


def _analysis_error(trace: Path, out: Path, args: argparse.Namespace) -> str:
    """The trace analyzed again, its error's last lines; the trace kept in ``--out`` (gzipped tar,
    when under 15 MB) to be analyzed elsewhere."""
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", str(trace), "--json", str(out)],
        capture_output=True,
        text=True,
    )
    _keep(trace, args)
    return f"rc {r.returncode}: {(r.stderr or r.stdout)[-3000:]}"


def _keep(trace: Path, args: argparse.Namespace) -> None:
    """``trace`` in ``--out`` as a gzipped tar, when under 15 MB: to analyze again where the rules or the
    analysis change."""
    import tarfile

    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        tgz = Path(args.out) / f"{trace.name}.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            tar.add(trace, arcname=trace.name)
        if tgz.stat().st_size > 15e6:
            tgz.unlink()


PHASES = ("rollout", "advantages", "update")  # the workload's iteration timers (iteration_seconds)
PHASE_OPERATIONS = {"rollout": "inference", "update": "backprop"}  # the operation each phase's gain is of
WARM_ITERATIONS = 2  # iterations left out of a steady state: compiling, CUDA graph recording, warm-up


def _steady(result_json: Path) -> dict[str, float]:
    """Per phase, and per operation (``--time-operations``), the median iteration's seconds after the
    first ``WARM_ITERATIONS``: the time an iteration takes once compiling and warm-up are over (the
    workload's own timers)."""
    res = json.loads(result_json.read_text())
    its = res["iteration_seconds"][WARM_ITERATIONS:]
    ops = (res.get("operation_seconds") or [])[WARM_ITERATIONS:]
    if not its:
        raise SystemExit(f"--timesteps too small: no iteration after the first {WARM_ITERATIONS}")
    out = {phase: statistics.median(it[i] for it in its) for i, phase in enumerate(PHASES)}
    if ops:
        out.update({op: statistics.median(it.get(op, 0.0) for it in ops) for op in PHASE_OPERATIONS.values()})
    return out


def _gpu_call_facts(trace: Path) -> dict[str, Any]:
    """Per operation, the CUDA API evidence the advice rules read (rlscope.analysis.gpu_calls), from an
    analysis of ``trace`` in this process: the inputs a fix's predicted gain is computed from."""
    import dataclasses

    from rlscope.analysis import advice, analyze

    seen: dict[str, Any] = {}
    real = advice.advise

    def keep(summary: Any, gpu_calls: Any = None) -> Any:
        seen.update({k: dataclasses.asdict(v) for k, v in (gpu_calls or {}).items()})
        return real(summary, gpu_calls)

    advice.advise = keep
    try:
        analyze(trace, intervals=False)
    finally:
        advice.advise = real
    return seen


def compile_check(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Part 2: each variant profiled (cold inductor cache), then plain, interleaved, each run's steady
    state read from its own iteration timers."""
    modes = [m for m in MODES if m in args.modes.split(",")]
    profiled = {}
    for mode in modes:  # a fresh inductor cache each: the compile time a first run pays
        profiled[mode] = _profiled(
            mode, args, work, {"TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor-{mode}")}
        )
        print(json.dumps({"profiled": mode, **profiled[mode]}), file=sys.stderr, flush=True)  # kept if cut
    if "eager" in profiled and (work / "ppo-eager").is_dir():
        profiled["eager"]["gpu_calls"] = _gpu_call_facts(work / "ppo-eager")
    plain: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    walls: dict[str, list[float]] = {m: [] for m in modes}
    for rep in range(args.reps):
        order = modes if rep % 2 == 0 else modes[::-1]
        for mode in order:  # the profiled run's cache: warm, as a second run of a program finds it
            env = {"TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor-{mode}")}
            res = work / f"plain-{mode}-{rep}.json"
            cmd = [
                sys.executable,
                *_ppo(mode, args, args.plain_timesteps or args.timesteps),
                "--time-operations",
                "--json",
                str(res),
            ]
            walls[mode].append(_timed(cmd, env))
            plain[mode].append(_steady(res))
    iterations = args.timesteps // (args.num_envs * 128)  # the profiled runs'
    steady = {m: {ph: statistics.median(r[ph] for r in runs) for ph in runs[0]} for m, runs in plain.items()}
    out: dict[str, Any] = {"timesteps": args.timesteps, "iterations": iterations, "reps": args.reps}
    out["profiled"] = profiled
    out["plain_walls_s"] = walls
    out["plain_steady_s"] = plain  # per run: per phase, its median steady-state iteration
    out["steady_iteration_s"] = steady  # per mode: per phase, the median over the runs
    if "eager" in profiled:
        out["gain"] = _gains(profiled["eager"], steady, plain, iterations)
        out["per_operation"] = _per_operation(profiled)
        out["diff"] = {m: _diff(work, m) for m in profiled if m != "eager"}
    return out


def _diff(work: Path, mode: str) -> dict[str, Any]:
    """``rlscope-analyze diff`` of the eager run against ``mode``'s (the before/after of compiling):
    per operation its change, its uncertainty, whether beyond noise and each category's change."""
    a, b, out = work / "ppo-eager", work / f"ppo-{mode}", work / f"diff-{mode}.json"
    if not (a.is_dir() and b.is_dir()):
        return {"error": "a profiled run left no trace"}
    r = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", "diff", str(a), str(b), "--json", str(out), "-q"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0 or not out.exists():
        return {"error": f"rc {r.returncode}: {(r.stderr or r.stdout)[-2000:]}"}
    d = json.loads(out.read_text())
    keep = ("delta_s", "uncertainty_s", "significant")
    return {
        "wall": {k: d["wall"].get(k) for k in (*keep, "a", "b")},
        "operations": {
            name: {
                **{k: o.get(k) for k in keep},
                "a_s": o["total"]["a"],
                "b_s": o["total"]["b"],
                "categories": {c: round(ch["delta_s"], 6) for c, ch in (o.get("categories") or {}).items()},
            }
            for name, o in d["operations"].items()
        },
    }


def _gains(eager: dict[str, Any], steady: dict[str, Any], plain: dict[str, Any], iterations: int) -> dict:
    """Per compiled mode and operation: the measured gain of an iteration (eager minus compiled, the
    plain runs' per-operation timers, medians; with the range of the runs' pairwise differences in
    order) against the advice's prediction from the eager profiled run.

    The prediction is the ``launch_bound`` finding's ``seconds_at_stake`` as a share of the operation's
    time in that run less its warm-up (``one_time_s``, which the stake leaves out too), applied to the
    plain eager runs' steady time of the operation: the profiled and the plain runs are separate
    processes, and the host's CPU speed moves 1.5-2.5x between them (rlscope's reference loop says by
    how much), so seconds of one are not seconds of the other; a share of the same work is. The
    stake over the profiled run's iterations, in its own seconds, is kept beside
    (``predicted_at_profile_speed_s``)."""
    stake = {f["operation"]: f["seconds_at_stake"] for f in eager.get("launch_bound", [])}
    ops = eager.get("operations", {})
    out: dict[str, Any] = {}
    for mode in steady:
        if mode == "eager":
            continue
        per: dict[str, Any] = {}
        for phase, op in PHASE_OPERATIONS.items():
            key = op if op in steady["eager"] else phase  # plain runs without operation timers: the phase
            measured = steady["eager"][key] - steady[mode][key]
            pairs = [e[key] - c[key] for e, c in zip(plain["eager"], plain[mode], strict=False)]
            o = ops.get(op, {})
            steady_total = o.get("total_s", 0.0) - o.get("one_time_s", 0.0)
            share = stake.get(op, 0.0) / steady_total if steady_total > 0 else 0.0
            predicted = share * steady["eager"][key]
            per[op] = {
                "timer": key,
                "eager_s": steady["eager"][key],
                "measured_s": measured,
                "measured_share": measured / steady["eager"][key] if steady["eager"][key] > 0 else None,
                "measured_range_s": [min(pairs), max(pairs)] if pairs else None,
                "predicted_share": share,
                "predicted_s": predicted,
                "predicted_at_profile_speed_s": stake.get(op, 0.0) / iterations,
                "predicted_over_measured": _ratio(predicted, measured),
            }
        total_m = sum(v["measured_s"] for v in per.values())
        total_p = sum(v["predicted_s"] for v in per.values())
        per["total"] = {
            "measured_s": total_m,
            "predicted_s": total_p,
            "predicted_over_measured": _ratio(total_p, total_m),
        }
        out[mode] = per
    return out


def _per_operation(profiled: dict[str, Any]) -> dict[str, Any]:
    """Per operation the eager run flagged launch-bound: its time at stake, and in the profiled runs its
    eager time against each compiled run's time without its compiling."""
    out = {}
    for f in profiled["eager"].get("launch_bound", []):
        name = f["operation"]
        eager = profiled["eager"].get("operations", {}).get(name, {}).get("total_s", 0.0)
        entry: dict[str, Any] = {"seconds_at_stake": f["seconds_at_stake"], "eager_s": eager}
        for mode, run in profiled.items():
            op = run.get("operations", {}).get(name)
            if mode != "eager" and op:
                entry[f"{mode}_s"] = op["total_s"]
                entry[f"{mode}_without_compile_s"] = op["total_s"] - op["compile_s"]
                entry[f"{mode}_gain_s"] = eager - (op["total_s"] - op["compile_s"])
        out[name] = entry
    return out


# -- part 3: what a replay costs the CPU ----------------------------------------------------------

REPLAY_CALLS = 2000  # calls timed per variant and repetition
REPLAY_REPS = 3


def _per_call(fn: Any, n: int) -> float:
    """Seconds per call of ``fn`` over ``n`` calls after a warm-up, the GPU drained at both ends: the
    CPU's cost of a call wherever the GPU keeps up (the steps here run a few µs of kernels)."""
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n


def replay_check(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Part 3: one call of the PPO's policy step and of a training step (forward, loss, backward)
    compiled with ``mode="reduce-overhead"``, against the same eager, and one eager ``add_`` (a single
    op's dispatch and launch), with rlscope's reference loop timed beside them (the machine's Python
    speed at that moment): what a CUDA graph tree's replay itself costs the CPU per call (guards, the
    inputs copied into the graph's buffers, the tree's bookkeeping, the launch), which
    ``launch_bound``'s stake charges per call (``REPLAY_REFERENCE_LOOPS`` in
    rlscope/analysis/advice/launch.py holds these figures in reference loops). Interleaved
    ``REPLAY_REPS`` times; medians and ranges."""
    import torch

    from rlscope.overhead.correct.reference import reference_ns

    policy, x = _policy(args.num_envs)
    train_policy, xb = _policy(args.num_envs * 128 // 4)  # a minibatch: the PPO's 4 per rollout
    train_policy.train()
    unit = torch.zeros(args.num_envs, device="cuda")

    def loss_of(out: tuple[Any, Any]) -> Any:
        return out[0].square().mean() + out[1].square().mean()

    compiled_step = torch.compile(lambda t: policy(t), mode="reduce-overhead")
    compiled_loss = torch.compile(lambda t: loss_of(train_policy(t)), mode="reduce-overhead")

    def eager_inference() -> None:
        with torch.no_grad():
            policy(x)

    def compiled_inference() -> None:
        with torch.no_grad():
            compiled_step(x)

    def eager_train() -> None:
        loss_of(train_policy(xb)).backward()

    def compiled_train() -> None:
        torch.compiler.cudagraph_mark_step_begin()
        compiled_loss(xb).backward()

    variants = {
        "add_": lambda: unit.add_(1.0),
        "eager_inference": eager_inference,
        "compiled_inference": compiled_inference,
        "eager_train": eager_train,
        "compiled_train": compiled_train,
    }
    for fn in variants.values():  # compile and record the graphs before timing
        for _ in range(5):
            fn()
    seen: dict[str, list[float]] = {k: [] for k in ("reference_ns", *variants)}
    for _ in range(REPLAY_REPS):
        seen["reference_ns"].append(reference_ns())
        for name, fn in variants.items():
            seen[name].append(_per_call(fn, REPLAY_CALLS) * 1e6)
    out: dict[str, Any] = {
        name: {"median": statistics.median(v), "range": [min(v), max(v)]} for name, v in seen.items()
    }
    out["unit"] = {"reference_ns": "ns an iteration", **{k: "µs a call" for k in variants}}
    ref = out["reference_ns"]["median"]
    out["per_reference_ns"] = {k: out[k]["median"] * 1e3 / ref for k in variants}
    return out


def _cupti_wheels() -> dict[str, str]:
    """The CUPTI wheels installed (torch's dependency): before 13.1 Update 1, graph launches had wrong
    correlation ids after CUPTI was attached again (part 1's windows run shows whether it matters)."""
    from importlib import metadata

    return {
        d.metadata["Name"]: d.version
        for d in metadata.distributions()
        if (d.metadata["Name"] or "").lower().startswith("nvidia-cuda-cupti")
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--replays", type=int, default=2000, help="graph replays, profiled with tracing on")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--windows-seconds", type=float, default=2.0, help="replays under the default windows")
    p.add_argument(
        "--timesteps", type=int, default=8192, help="PPO steps of a run: num-envs x 128 an iteration"
    )
    p.add_argument("--plain-timesteps", type=int, default=None, help="PPO steps of a plain run (--timesteps)")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES), help="of eager, default, reduce-overhead")
    p.add_argument("--no-scopes", action="store_true", help="the PPO unannotated: automatic operations")
    p.add_argument("--out", default=None, help="directory for compiled_gpu_check.json")
    p.add_argument("--dry-run", action="store_true", help="no CUDA: part 2 on the CPU, part 1 skipped")
    parts = "cuda_graph,replay_cost,torch_compile"
    p.add_argument("--parts", default=parts, help=f"of {parts}")
    p.add_argument("--graph-child", choices=("plain", "full", "windows", "sleep"), help=argparse.SUPPRESS)
    p.add_argument("--trace-dir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.graph_child:
        graph_child(args.graph_child, args)
        return
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit(
            "compiled_gpu_check: no CUDA device (torch.cuda.is_available() is False);"
            " --dry-run checks the CPU plumbing"
        )
    args.device = "cpu" if args.dry_run else "cuda"
    t0 = time.perf_counter()
    result: dict[str, Any] = {"device": torch.cuda.get_device_name() if not args.dry_run else "cpu (dry run)"}
    result["torch"] = torch.__version__
    result["cuda"] = torch.version.cuda
    result["cupti_wheels"] = _cupti_wheels()
    parts = [
        ("cuda_graph", None if args.dry_run else graph_check),
        ("replay_cost", None if args.dry_run else replay_check),
        ("torch_compile", compile_check),
    ]
    parts = [(name, check) for name, check in parts if name in args.parts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, check in parts:  # each part written as it ends: a run cut short keeps the parts done
            result[name] = None if check is None else check(args, Path(tmp))
            result["seconds"] = time.perf_counter() - t0
            _write(result, args.out)
            print(
                f"compiled_gpu_check: {name} done at {result['seconds']:.0f} s", file=sys.stderr, flush=True
            )
    print(json.dumps(result, indent=1))


def _write(result: dict[str, Any], out: str | None) -> None:
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "compiled_gpu_check.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
