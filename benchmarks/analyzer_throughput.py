"""Analyzer throughput: events per second from trace files to the breakdown table, on one core.

    python benchmarks/analyzer_throughput.py [--events 10000000] [--shared-ops] [--json FILE]
    python benchmarks/analyzer_throughput.py --trace DIR | --record SECONDS [--reps 5] [--json FILE]

Synthetic (the default): writes a trace of realistic shape (nested operations, simulator and
backend categories, two threads, record batches of 100k rows like a 1 s flush of a busy process),
then times ``rlscope.analysis.analyze`` end to end (load, timelines, breakdown, summary, intervals
and kernel tables; raw figures; best of 3).

Real (``--trace``, or ``--record`` to first record the bundled PPO without scopes under ``rlscope
run --detail all`` for that many seconds): ``rlscope-analyze DIR --detail-budget all`` as a user
runs it (every row analysed, corrected), in a process of its own, its user+system seconds and peak
RSS (``wait4``), with the analysis's C loops and with their numpy versions
(``RLSCOPE_NATIVE_ANALYSIS=0``), interleaved; the rate is the trace's rows (every Arrow file's)
over user+system seconds. The two paths' JSON must be identical (exit 1 otherwise).
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

import numpy as np
import pyarrow as pa

from rlscope.analysis import analyze
from rlscope.trace import schema as S

# One training iteration on one thread: 12 events.
#   inference{backend}, simulation{simulator}, backprop{backend}
PATTERN = [
    (S.OP_BEGIN, 0, -1, 1),
    (S.CAT_BEGIN, 2, 0, -1),
    (S.CAT_END, 2, 0, -1),
    (S.OP_END, 0, -1, 1),
    (S.OP_BEGIN, 1, -1, 2),
    (S.CAT_BEGIN, 1, 0, -1),
    (S.CAT_END, 1, 0, -1),
    (S.OP_END, 1, -1, 2),
    (S.OP_BEGIN, 2, -1, 3),
    (S.CAT_BEGIN, 2, 0, -1),
    (S.CAT_END, 2, 0, -1),
    (S.OP_END, 2, -1, 3),
]


def write_synthetic(path: Path, n_events: int, batch: int = 100_000, shared_ops: bool = False) -> int:
    """A zstd-compressed trace like rlscope writes. A quarter of the iterations run on a second
    thread: as a data-loading thread with its own operation name (the usual shape), or, with
    ``shared_ops``, with the same operation names as the main thread (the worst case: those
    operations need the cross-thread sweep)."""
    proc = path / "process-1"
    proc.mkdir(parents=True)
    reps = n_events // len(PATTERN)
    n = reps * len(PATTERN)
    kind = np.tile(np.array([p[0] for p in PATTERN], np.int8), reps)
    local = np.tile(np.array([p[1] for p in PATTERN], np.int64), reps)
    it = np.repeat(np.arange(reps, dtype=np.int64), len(PATTERN))
    is_cat = (kind == S.CAT_BEGIN) | (kind == S.CAT_END)
    ident = np.where(is_cat, local, it * 3 + local + 1)
    parent = np.tile(np.array([p[2] for p in PATTERN], np.int64), reps)
    parent = np.where(is_cat, parent, 0)  # ops' parent: the phase instance 0... as op id space differs
    parent = np.where(is_cat, parent, -1)
    name = np.tile(np.array([p[3] for p in PATTERN], np.int32), reps)
    thread = np.where(it % 4 == 3, 2, 1).astype(np.int64)  # a quarter of iterations on a second thread
    if not shared_ops:
        name = np.where((thread == 2) & (name >= 0), 4, name).astype(np.int32)
    ts = np.arange(n, dtype=np.int64) * 500 + 1000
    flags = np.zeros(n, np.int8)
    cols = {
        "ts_ns": ts,
        "thread": thread,
        "kind": kind,
        "id": ident,
        "parent": parent,
        "name": name,
        "flags": flags,
    }
    head = {  # a session's start and its first window's mode row, as every session writes them
        "ts_ns": [0, 0],
        "thread": [1, 1],
        "kind": [S.SESSION_START, S.WINDOW],
        "id": [-1, S.WINDOW_FULL],
        "parent": [-1, -1],
        "name": [-1, -1],
        "flags": [0, 0],
    }
    tail = {
        "ts_ns": [int(ts[-1]) + 1],
        "thread": [1],
        "kind": [S.SESSION_END],
        "id": [-1],
        "parent": [-1],
        "name": [-1],
        "flags": [0],
    }
    meta = {"pid": "1", "host": "synthetic", "clock_anchor_ns": "0", "clock_anchor_unix_ns": "0"}
    schema = S.events_schema(meta)
    zstd = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.OSFile(str(proc / S.EVENTS_FILE), "wb") as f, pa.ipc.new_stream(f, schema, options=zstd) as w:
        w.write_table(pa.table(head, schema=schema))
        for i in range(0, n, batch):
            w.write_table(pa.table({k: v[i : i + batch] for k, v in cols.items()}, schema=schema))
        w.write_table(pa.table(tail, schema=schema))
    names = pa.table(
        {
            "id": pa.array([0, 1, 2, 3, 4], pa.int32()),
            "name": ["training", "inference", "simulation", "backprop", "data_loading"],
        },
        schema=S.names_schema(),
    )
    with pa.OSFile(str(proc / S.NAMES_FILE), "wb") as f, pa.ipc.new_stream(f, names.schema) as w:
        w.write_table(names)
    return n + len(head["ts_ns"]) + len(tail["ts_ns"])


PATHS = {"native": "1", "numpy": "0"}  # RLSCOPE_NATIVE_ANALYSIS of each path


def trace_rows(trace: Path) -> int:
    """Rows in every Arrow file of ``trace`` (events, backend ops, aggregates, stacks, ...)."""
    rows = 0
    for path in sorted(trace.rglob("*.arrows")):
        with pa.OSFile(str(path)) as f:
            rows += sum(batch.num_rows for batch in pa.ipc.open_stream(f))
    return rows


def record(seconds: float, trace: Path) -> None:
    """The bundled PPO without scopes under ``rlscope run --detail all`` for ``seconds``."""
    cmd = [sys.executable, "-m", "rlscope.cli.main", "run", "--detail", "all", "--no-analyze",
           "--trace-dir", str(trace), "--", sys.executable, "-m", "rlscope.workloads.ppo_cartpole",
           "--no-scopes", "--quiet", "--eval-episodes", "0", "--total-timesteps", str(10**9),
           "--time-limit", str(seconds)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def analyze_once(trace: Path, out: Path, native: str) -> tuple[float, float]:
    """(user+system seconds, peak RSS MB) of one ``rlscope-analyze`` of ``trace`` in its own process."""
    env = dict(os.environ, RLSCOPE_NATIVE_ANALYSIS=native)
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", str(trace), "--detail-budget", "all", "-q",
           "--json", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"rlscope-analyze {trace} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def real(trace: Path, reps: int, work: Path) -> dict:
    """Each path ``reps`` times, interleaved (the order alternates), and whether their JSON agree."""
    rows = trace_rows(trace)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in PATHS}
    for rep in range(reps):
        for name in list(PATHS)[:: 1 if rep % 2 == 0 else -1]:
            got[name].append(analyze_once(trace, work / f"{name}.json", PATHS[name]))
    same = (work / "native.json").read_bytes() == (work / "numpy.json").read_bytes()
    out: dict = {"rows": rows, "reps": reps, "same_json": same}
    for name, runs in got.items():
        cpu = [c for c, _ in runs]
        med = statistics.median(cpu)
        out[name] = {
            "cpu_s_median": med,
            "cpu_s_range": [min(cpu), max(cpu)],
            "rows_per_s": rows / med,
            "peak_rss_mb": statistics.median(m for _, m in runs),
        }
        print(f"{name:>6}: {med:.2f} s ({min(cpu):.2f}-{max(cpu):.2f}) user+sys, "
              f"{rows / med / 1e6:.2f} M rows/s, peak {out[name]['peak_rss_mb']:.0f} MB")  # fmt: skip
    out["native_over_numpy"] = out["native"]["cpu_s_median"] / out["numpy"]["cpu_s_median"]
    print(f"{rows:,} rows; native/numpy {out['native_over_numpy']:.2f}x; same JSON: {same}")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--shared-ops", action="store_true", help="second thread runs the same operations")
    p.add_argument("--json", default=None, metavar="FILE", help="write events, best_s and events_per_s here")
    p.add_argument("--trace", default=None, metavar="DIR", help="time rlscope-analyze on this real trace")
    p.add_argument(
        "--record",
        type=float,
        default=None,
        metavar="SECONDS",
        help="record the bundled PPO for this long, then time its analysis as --trace",
    )
    p.add_argument("--reps", type=int, default=5, help="runs of each path (--trace, --record)")
    args = p.parse_args()
    if args.trace or args.record:
        with tempfile.TemporaryDirectory() as d:
            trace = Path(args.trace) if args.trace else Path(d) / "trace"
            if not args.trace:
                record(args.record, trace)
            result = real(trace, args.reps, Path(d))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        raise SystemExit(0 if result["same_json"] else 1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    with tempfile.TemporaryDirectory() as d:
        n = write_synthetic(Path(d), args.events, shared_ops=args.shared_ops)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            summary = analyze(d, correct=False).summary
            best = min(best, time.perf_counter() - t0)
        ops = summary["operations"]
        expected = {"inference", "simulation", "backprop"} | (set() if args.shared_ops else {"data_loading"})
        assert set(ops) == expected, ops.keys()
        print(f"events: {n:,}  best of 3: {best:.3f} s  throughput: {n / best / 1e6:.2f} M events/s (1 core)")
        if args.json:
            Path(args.json).write_text(
                json.dumps({"events": n, "best_s": best, "events_per_s": n / best}) + "\n"
            )


if __name__ == "__main__":
    main()
