"""Cost per recorded torch op of the backend recorders: native (C++ RecordFunction) vs Python mode.

Every mode runs the same loops inside an rlscope session (so the writer thread's flushes are the
same in all of them), interleaved, several repetitions. Costs compare each mode's fastest block
with the fastest block without backend recording (``--stat median``: medians of the paired
per-repetition differences): on a shared machine other processes only ever add time, so the
minimum is the estimate least disturbed by them.

- ``none``: ``backend=False``;
- ``native``: the native recorder (collectors/torch_native.cpp), as rlscope uses it;
- ``native-unmuted``: the same with nested-op muting off (what muting saves);
- ``native-off``: the native recorder switched off with ``set_enabled(False)`` (the light windows);
- ``python``: the ``TorchFunctionMode`` fallback (``RLSCOPE_NATIVE_BACKEND=0``).

"per op" divides by the torch ops each mode records per iteration (the native recorder records
aten ops and autograd nodes, the Python mode torch API calls: the counts differ and are shown).

    python benchmarks/backend_overhead.py [--reps 7] [--block-s 0.25] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import rlscope
from rlscope.trace import schema as S

MODES = ("none", "native", "native-unmuted", "native-off", "python")


def workloads(torch: Any) -> dict[str, Callable[[], None]]:
    """Small torch calls typical of an RL loop; each callable is one iteration."""
    F = torch.nn.functional
    a, b = torch.randn(4), torch.randn(4)
    x, w, bias = torch.randn(2, 8), torch.randn(8, 8), torch.randn(8)
    logits = torch.randn(4)
    categorical = torch.distributions.Categorical
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    obs = torch.randn(16, 8)

    def add() -> None:
        torch.add(a, b)

    def linear() -> None:
        F.linear(x, w, bias)

    def sample() -> None:
        categorical(logits=logits).sample()

    def relu() -> None:
        F.relu(x)

    def train_step() -> None:
        loss = net(obs).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    net(obs).pow(2).mean().backward()  # gradients for Adam.step alone (they stay: step does not clear them)

    def adam_step() -> None:
        opt.step()

    return {
        "torch.add": add,
        "F.relu": relu,
        "F.linear": linear,
        "Categorical.sample": sample,
        "Adam.step": adam_step,
        "mlp train step": train_step,
    }


def _recorder(session: Any) -> Any:
    """The session's backend recorder (rlscope.collectors.torch_ops.BackendRecorder)."""
    return next(c for c in session._collectors if hasattr(c, "kind"))


def _records(trace_dir: str, t0: int, t1: int) -> int:
    """Backend records that began in [t0, t1): native rows or Python-mode category begins."""
    proc = rlscope.load_trace(trace_dir).processes[0]
    if proc.backend is not None and proc.backend.num_rows:
        start = proc.backend.column("start_ns").to_numpy()
        return int(((start >= t0) & (start < t1)).sum())
    ev = proc.events
    ts, kind, ident = (ev.column(c).to_numpy() for c in ("ts_ns", "kind", "id"))
    return int(((kind == S.CAT_BEGIN) & (ident == rlscope.categories.BACKEND) & (ts >= t0) & (ts < t1)).sum())


def run_block(mode: str, fn: Callable[[], None], n: int, tmp: str) -> tuple[float, int]:
    """(ns per iteration, records per iteration) of ``n`` iterations under ``mode``."""
    from rlscope.collectors import torch_native

    trace_dir = tempfile.mkdtemp(dir=tmp)
    os.environ["RLSCOPE_NATIVE_BACKEND"] = "0" if mode == "python" else "1"
    session = rlscope.profile(trace_dir, gpu=False, backend=mode != "none", windows=False, nvml_hz=0)
    session.start()
    try:
        if mode != "none":
            rec = _recorder(session)
            expect = "python" if mode == "python" else "native"
            if rec.kind != expect:
                raise SystemExit(f"backend recorder is {rec.kind!r}, wanted {expect!r}")
            if mode == "native-off":
                rec.set_enabled(False)
            if mode.startswith("native"):
                torch_native._lib.tn_set_muting(int(mode != "native-unmuted"))
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        t1 = time.perf_counter_ns()
    finally:
        session.stop()
        if torch_native._lib is not None:
            torch_native._lib.tn_set_muting(1)
    recs = 0 if mode in ("none", "native-off") else _records(trace_dir, t0, t1)
    shutil.rmtree(trace_dir, ignore_errors=True)
    return (t1 - t0) / n, recs / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--block-s", type=float, default=0.1, help="seconds per timed block")
    ap.add_argument("--stat", choices=("min", "median"), default="min")
    ap.add_argument("--quick", action="store_true", help="5 repetitions of 0.05 s blocks")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: less noise)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.block_s = 5, 0.05
    import torch

    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="rlscope-backend-bench-")
    work = workloads(torch)
    sizes = {}
    for name, fn in work.items():  # warm up (every mode once: muting learns) and size the blocks
        for mode in MODES:
            run_block(mode, fn, 200, tmp)
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        sizes[name] = max(200, int(args.block_s * 200 / (time.perf_counter() - t0)))
    raw: dict[str, dict[str, list[tuple[float, float]]]] = {w: {m: [] for m in MODES} for w in work}
    rng = np.random.default_rng(0)
    for _ in range(args.reps):
        for name, fn in work.items():
            for mode in rng.permutation(MODES):
                raw[name][str(mode)].append(run_block(str(mode), fn, sizes[name], tmp))
    shutil.rmtree(tmp, ignore_errors=True)

    results = {name: _summarize(raw[name], sizes[name], args.stat) for name in work}
    _print(results, args)
    if args.json:
        meta = {"torch": torch.__version__, "threads": args.threads, "reps": args.reps, "stat": args.stat}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    return 0


def _summarize(raw: dict[str, list[tuple[float, float]]], iterations: int, stat: str) -> dict[str, Any]:
    """Per mode: time per iteration, extra time over ``none``, records, cost per recorded op."""
    base = [t for t, _ in raw["none"]]
    ref = min(base) if stat == "min" else statistics.median(base)
    row: dict[str, Any] = {"iterations": iterations, "none_ns_per_iter": ref}
    for mode in MODES[1:]:
        times = [t for t, _ in raw[mode]]
        recs = statistics.median(r for _, r in raw["native" if mode == "native-off" else mode])
        if stat == "min":
            per_iter, extra = min(times), min(times) - ref
        else:
            per_iter = statistics.median(times)
            extra = statistics.median(t - b for t, b in zip(times, base, strict=True))
        row[mode] = {
            "ns_per_iter": per_iter,
            "extra_ns_per_iter": extra,
            "records_per_iter": recs,
            "ns_per_op": extra / recs if recs else None,
            "slowdown": (ref + extra) / ref,
        }
    return row


def _print(results: dict[str, Any], args: argparse.Namespace) -> None:
    how = "fastest" if args.stat == "min" else "median"
    print(f"backend recording cost ({how} of {args.reps} interleaved repetitions; ns per recorded op)")
    head = f"{'workload':<20} {'none ns/it':>10}"
    for mode in MODES[1:]:
        head += f" {mode + ' ns/op':>20} {'ops/it':>6} {'×':>5}"
    print(head)
    for name, row in results.items():
        line = f"{name:<20} {row['none_ns_per_iter']:>10.0f}"
        for mode in MODES[1:]:
            r = row[mode]
            per_op = "-" if r["ns_per_op"] is None else f"{r['ns_per_op']:.0f}"
            line += f" {per_op:>20} {r['records_per_iter']:>6.1f} {r['slowdown']:>5.2f}"
        print(line)
    print("native-off: extra time per op the native recorder would record, with recording switched off")


if __name__ == "__main__":
    sys.exit(main())
