"""JAX on a GPU, checked against JAX's own tools: named-scope device time, compile time, slowdown.

    python benchmarks/jax_gpu_check.py [--reps 5] [--num-envs 64] [--timesteps 327680] [--out DIR]

1. **Device time by named scope.** The bundled PureJaxRL-style PPO (``workloads/jax_ppo.py``: one
   jitted update, ``jax.named_scope`` inside) under ``rlscope run``: the summary's ``device_scopes``
   (rlscope/analysis/device_scopes.py), per update call. The same PPO under ``jax.profiler.trace``
   (``--jax-trace``) with XLA dumping its optimized HLO (``--xla_dump_to``): XProf's GPU events of the
   update's module, each kernel's name joined to the dumped module's instructions and their named
   scopes, summed per outermost scope, over its updates. The totals per update, and each scope's
   error. XProf's own instruction join (``args.hlo_op``) is listed too: inside a CUDA-graph command
   buffer it names the buffer, not the instruction.
2. **Compile time.** In one process under ``rlscope.profile``: the PPO's update lowered and compiled
   with ``jax.jit(update).lower(runner).compile()``, timed around it, against the summary's
   ``compile.seconds``.
3. **Slowdown.** The PPO plain and under ``rlscope run --no-analyze``, interleaved ``--reps`` times
   (order alternating): the median of the workload's own wall (compiling included) and of the
   process's, and their ratios.

Prints one JSON document (also written to ``--out``/jax_gpu_check.json).
"""

from __future__ import annotations

import argparse
import collections
import gzip
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


def _ppo(args: argparse.Namespace, result: Path) -> list[str]:
    return [
        "-m", "rlscope.workloads.jax_ppo", "--seconds", "100000", "--quiet", "--num-envs", str(args.num_envs),
        "--total-timesteps", str(args.timesteps), "--json", str(result),
    ]  # fmt: skip


def _run(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def hlo_dumps(dump_dir: Path) -> dict[str, dict[str, str]]:
    """module -> {instruction's kernel name: named-scope path}, from XLA's own dump of the optimized HLO
    of each executable (``--xla_dump_to``) in the XProf run."""
    from rlscope.collectors.jax_hlo import kernels

    out: dict[str, dict[str, str]] = {}
    for f in sorted(dump_dir.glob("*after_optimizations.txt")):
        module = f.name.split(".")[1]
        out.setdefault(module, {}).update(dict(kernels(f.read_text())))
    return out


def xprof_scopes(trace_dir: Path, dump_dir: Path, module: str) -> dict[str, Any]:
    """GPU seconds per outermost named scope of ``module``'s events in XProf's perfetto trace: each GPU
    event names the HLO instruction XLA annotated its launch with (``args.hlo_op``), whose named scopes
    XLA's dump of that module holds."""
    from rlscope.analysis.device_scopes import instruction_of
    from rlscope.collectors.jax_hlo import kernel_name

    files = sorted(trace_dir.rglob("perfetto_trace.json.gz"))
    if not files:
        raise SystemExit(f"no perfetto_trace.json.gz under {trace_dir}")
    with gzip.open(files[-1]) as f:
        doc = json.loads(f.read())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    gpu_pids = {
        e["pid"]
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and "GPU" in str(e.get("args", {}).get("name"))
    }
    paths = hlo_dumps(dump_dir).get(module, {})
    scopes: collections.Counter[str] = collections.Counter()
    other: collections.Counter[str] = collections.Counter()  # events of other modules, or none
    unmapped = 0.0
    events_in = 0
    missed: collections.Counter[str] = collections.Counter()  # hlo_op -> seconds, not in the dump
    by_kernel: collections.Counter[str] = collections.Counter()  # the event's kernel name joined instead
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in gpu_pids:
            continue
        args = e.get("args") or {}
        dur = float(e.get("dur", 0.0)) / 1e6
        if args.get("hlo_module") != module:
            other[str(args.get("hlo_module"))] += dur
            continue
        events_in += 1
        op = str(args.get("hlo_op", ""))
        path = paths.get(kernel_name(op))
        if path is None:
            unmapped += dur
            missed[op] += dur
            path = ""
        scopes[path.split("/")[0] or "[no named scope]"] += dur
        by_kernel[(instruction_of(paths, str(e.get("name"))) or "").split("/")[0] or "[no named scope]"] += (
            dur
        )
    return {
        "file": str(files[-1]),
        "scopes": dict(scopes),
        "scopes_by_kernel_name": dict(by_kernel),
        "events": events_in,
        "unmapped_s": unmapped,
        "instructions_dumped": len(paths),
        "missed_ops": dict(missed.most_common(8)),
        "dumped_sample": sorted(paths)[:12],
        "other_modules_s": dict(other.most_common(8)),
    }


def unjoined(trace_dir: Path) -> dict[str, float]:
    """GPU seconds of the kernels no recorded HLO instruction names, by kernel name (top 10)."""
    from rlscope import categories
    from rlscope.trace.reader import load_trace, name_of

    out: collections.Counter[str] = collections.Counter()
    for proc in load_trace(trace_dir).processes:
        if proc.hlo is None or proc.gpu is None:
            continue
        known = set(proc.hlo.column("kernel").to_pylist())
        g = proc.gpu.to_pydict()
        for cat, name, s, e in zip(g["category"], g["name"], g["start_ns"], g["end_ns"], strict=True):
            if cat == categories.GPU_KERNEL and name not in known:
                out[name_of(proc.names, name, "?")[:120]] += (e - s) / 1e9
    return dict(out.most_common(10))


def compile_check(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The PPO update's lower().compile(), timed, against rlscope's compile seconds of that process."""
    code = f"""
import json, time, jax, rlscope
from rlscope.workloads import jax_ppo
cfg = jax_ppo.Config(num_envs={args.num_envs}, total_timesteps={args.timesteps})
init, update = jax_ppo.make_update(cfg, jax_ppo.bundled_env())
runner = jax.block_until_ready(jax.jit(init)(jax.random.PRNGKey(0)))
with rlscope.profile({str(work / "compile")!r}, gpu=False):
    t0 = time.perf_counter()
    jax.jit(update).lower(runner).compile()
    timed = time.perf_counter() - t0
from rlscope.analysis import analyze
s = analyze({str(work / "compile")!r}).summary
c = s["compile"]
print(json.dumps({{"timed_s": timed, "recorded_s": c["seconds"], "stages": c["stages"]}}))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["ratio"] = out["recorded_s"] / out["timed_s"]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--timesteps", type=int, default=40 * 64 * 128)
    p.add_argument(
        "--out", default=None, help="folder for the traces and the JSON (default: a temporary one)"
    )
    args = p.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="rlscope-jaxgpu-"))
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    out: dict[str, Any] = {"args": vars(args)}

    # 1. device time by named scope: rlscope against XProf, per update
    dump = work / "xla_dump"
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    _run([py, *_ppo(args, work / "xprof.json"), "--jax-trace", str(work / "xprof")], {"XLA_FLAGS": flags})
    xp = xprof_scopes(work / "xprof", dump, "jit_update")
    updates = json.loads((work / "xprof.json").read_text())["updates"]
    _run([py, "-m", "rlscope.cli.main", "run", "--trace-dir", str(work / "trace"), "--no-analyze", "--",
          py, *_ppo(args, work / "profiled.json")])  # fmt: skip
    t0 = time.perf_counter()
    _run([py, "-m", "rlscope.cli.analyze", str(work / "trace"), "-q", "--json", str(work / "summary.json")])
    out["analyze_s"] = time.perf_counter() - t0
    summary = json.loads((work / "summary.json").read_text())
    ds = summary.get("device_scopes") or {}
    calls = summary["operations"].get("update", {}).get("calls", 0)
    ours = {k: v["per_call_s"].get("update", 0.0) for k, v in (ds.get("scopes") or {}).items()}
    # XProf names a command buffer's kernels after the buffer (``args.hlo_op``: command_buffer_55), so
    # its instruction join leaves most of them in no scope; its kernels' names joined to XLA's dump are
    # the reference (rlscope's kernel timing and its own HLO capture checked against them)
    theirs = {k: v / max(updates, 1) for k, v in xp["scopes_by_kernel_name"].items()}
    out["device_scopes"] = {
        "rlscope_per_update_s": ours,
        "xprof_per_update_s": theirs,
        "error": {k: ours.get(k, 0.0) / v - 1 for k, v in theirs.items() if v > 0},
        "total_error": sum(ours.values()) / sum(theirs.values()) - 1 if sum(theirs.values()) else None,
        "rlscope_joined_by_name": ds.get("joined_by_name"),
        "rlscope_joined_by_neighbour": ds.get("joined_by_neighbour"),
        "rlscope_compiling_s": ds.get("compiling_s"),
        "rlscope_update_calls": calls,
        "xprof_updates": updates,
        "xprof": {k: v for k, v in xp.items() if k != "scopes"},
        "rlscope_rows": ds.get("rows"),
        "compile": summary.get("compile"),
        "wall_s": summary.get("wall_s"),
        "warnings": summary.get("warnings"),
    }
    out["device_scopes"]["unjoined_kernels"] = unjoined(work / "trace")
    print(json.dumps(out["device_scopes"], indent=1, default=str), flush=True)

    # 2. compile time against lower().compile()
    out["compile_check"] = compile_check(args, work)
    print(json.dumps(out["compile_check"]), flush=True)

    # 3. slowdown, interleaved
    if args.reps < 1:
        (work / "jax_gpu_check.json").write_text(json.dumps(out, indent=1, default=str))
        return out
    plain_w, prof_w, plain_p, prof_p = [], [], [], []
    for rep in range(args.reps):
        for variant in ("plain", "rlscope") if rep % 2 == 0 else ("rlscope", "plain"):
            res = work / f"{variant}{rep}.json"
            cmd = [py, *_ppo(args, res)]
            if variant == "rlscope":
                trace = str(work / f"t{rep}")
                cmd = [py, "-m", "rlscope.cli.main", "run", "--trace-dir", trace, "--no-analyze", "--", *cmd]
            wall = _run(cmd)
            own = json.loads(res.read_text())["wall_seconds"]
            (plain_p if variant == "plain" else prof_p).append(wall)
            (plain_w if variant == "plain" else prof_w).append(own)
    med = statistics.median
    out["slowdown"] = {
        "training_wall": med(prof_w) / med(plain_w),
        "process_wall": med(prof_p) / med(plain_p),
        "plain_training_s": plain_w,
        "rlscope_training_s": prof_w,
        "plain_process_s": plain_p,
        "rlscope_process_s": prof_p,
    }
    print(json.dumps(out["slowdown"]), flush=True)
    (work / "jax_gpu_check.json").write_text(json.dumps(out, indent=1, default=str))
    return out


if __name__ == "__main__":
    main()
