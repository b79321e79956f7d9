"""Parallel analysis: ``analyze(trace)`` serially vs ``analyze(trace, workers=N)`` on a many-process trace.

    python benchmarks/parallel_analysis.py [--processes 64] [--events 100000000] [--workers 2]
        [--reps 2] [--trace DIR] [--json FILE]

Writes a synthetic trace of ``--processes`` process directories (the shape of
``analyzer_throughput.py``: nested operations, simulator and backend categories, a second thread;
``--events`` in all, zstd-compressed streams), timing that apart; with ``--trace DIR`` it is kept
there and reused by later runs with the same shape. Then runs serial and ``--workers N`` analyses
alternately, ``--reps`` times each, each in a fresh interpreter, as ``rlscope-analyze`` runs them
(raw figures, no interval tables: only the exports need those). Reports wall time, CPU time (the
analyzing process's and its workers'), the CPU the machine's other processes used meanwhile (in
cores, from /proc/stat: what the analysis shared the VM with), the analyzing process's peak RSS, its
largest worker's (getrusage), and the peak of driver and workers together (their RSS summed, sampled
every 0.2 s from outside: pages a forked worker shares with the driver count in both, so it is an
upper bound). Checks that every summary equals the first serial one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyzer_throughput import write_synthetic

from rlscope.trace import schema as S

SHAPE_FILE = "benchmark-shape.json"  # beside the process directories: what the kept trace holds


def write_trace(path: Path, processes: int, events: int) -> int:
    """``processes`` copies of one synthetic process, each with its own pid (and clock anchors)."""
    base = path / "_base"
    per = write_synthetic(base, events // processes)
    events_table = pa.ipc.open_stream(str(base / "process-1" / S.EVENTS_FILE)).read_all()
    names = (base / "process-1" / S.NAMES_FILE).read_bytes()
    zstd = pa.ipc.IpcWriteOptions(compression="zstd")
    for i in range(processes):
        d = path / f"process-{1000 + i}"
        d.mkdir(parents=True)
        meta = {
            "pid": str(1000 + i),
            "host": "synthetic",
            "clock_anchor_ns": "0",
            "clock_anchor_unix_ns": str(i),
        }
        table = events_table.replace_schema_metadata(S.events_schema(meta).metadata)
        with (
            pa.OSFile(str(d / S.EVENTS_FILE), "wb") as f,
            pa.ipc.new_stream(f, table.schema, options=zstd) as w,
        ):
            for batch in table.to_batches(max_chunksize=100_000):
                w.write_batch(batch)
        (d / S.NAMES_FILE).write_bytes(names)
    shutil.rmtree(base)
    return per * processes


def _child(trace: str, workers: int, out: str) -> None:
    from rlscope.analysis import analyze

    t0 = time.perf_counter()
    summary = analyze(trace, correct=False, workers=workers or None, intervals=False).summary
    seconds = time.perf_counter() - t0
    with open(out, "w") as f:
        json.dump(summary, f, sort_keys=True, default=str)
    me, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "seconds": seconds,
        "cpu_s": me.ru_utime + me.ru_stime + workers.ru_utime + workers.ru_stime,  # the pool's included
        "peak_main_gib": me.ru_maxrss / 2**20,  # KiB -> GiB
        "peak_worker_gib": workers.ru_maxrss / 2**20,
    }
    print(json.dumps(out))


def _rss_kib(pid: int) -> int:
    """VmRSS from /proc/PID/status: cheap (smaps_rollup's PSS walks the page tables under the process's
    mmap lock, and sampling it slowed the workers it measured by half)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:  # it ended between the listing and the read
        pass
    return 0


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (from /proc: each process's parent)."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        tree += frontier
    return tree


def _run(trace: Path, workers: int, out: Path) -> dict:
    """One analysis in a fresh interpreter, with the peak RSS of its process tree sampled meanwhile."""
    cmd = [sys.executable, __file__, "--child", str(trace), str(workers), str(out)]
    busy, t0 = _busy_cpu_s(), time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], sum(_rss_kib(p) for p in _tree(proc.pid)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = proc.communicate()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"analysis failed (exit {proc.returncode}): {' '.join(cmd)}")
    r = {**json.loads(stdout.strip().splitlines()[-1]), "peak_total_gib": peak[0] / 2**20}
    # the other processes' CPU meanwhile, in cores on average: what the analysis had to share the VM with
    r["others_cores"] = max(0.0, _busy_cpu_s() - busy - r["cpu_s"]) / (time.perf_counter() - t0)
    return r


def _trace(args: argparse.Namespace, scratch: Path) -> Path:
    """The trace to analyze: the kept one when it has the asked shape, else a new one (timed)."""
    trace = Path(args.trace) if args.trace else scratch / "trace"
    shape = {"processes": args.processes, "events": args.events}
    marker = trace / SHAPE_FILE
    if marker.exists() and json.loads(marker.read_text()).get("asked") == shape:
        print(f"trace: reusing {trace} ({marker.read_text().strip()})")
        return trace
    if trace.exists():
        shutil.rmtree(trace)
    t0 = time.perf_counter()
    n = write_trace(trace, args.processes, args.events)
    seconds = time.perf_counter() - t0
    marker.write_text(json.dumps({"asked": shape, "events": n, "written_s": round(seconds, 1)}) + "\n")
    print(f"trace: {args.processes} processes, {n:,} events, written in {seconds:.1f} s to {trace}")
    return trace


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=64)
    p.add_argument("--events", type=int, default=100_000_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reps", type=int, default=2, help="analyses of each kind, alternating")
    p.add_argument("--trace", help="write the trace here and keep it (reused when its shape matches)")
    p.add_argument("--json", default=None, metavar="FILE", help="write serial_s, parallel_s and speedup here")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), args.child[2])
        return
    with tempfile.TemporaryDirectory() as d:
        trace = _trace(args, Path(d))
        kinds = {0: "serial", args.workers: f"{args.workers} workers"}
        runs: dict[int, list[dict]] = {w: [] for w in kinds}
        first = None
        for rep in range(args.reps):
            for workers, label in kinds.items():
                out = Path(d) / f"summary-{workers}-{rep}.json"
                r = _run(trace, workers, out)
                runs[workers].append(r)
                first = first or out.read_text()
                r["identical"] = out.read_text() == first
                print(
                    f"rep {rep + 1} {label:>10}: {r['seconds']:.1f} s (CPU {r['cpu_s']:.1f} s; others"
                    f" {r['others_cores']:.2f} cores)  peak RSS: main"
                    f" {r['peak_main_gib']:.2f} GiB, largest worker {r['peak_worker_gib']:.2f} GiB;"
                    f" of all {r['peak_total_gib']:.2f} GiB; same summary: {r['identical']}",
                    flush=True,
                )
        for workers, label in kinds.items():
            secs = [r["seconds"] for r in runs[workers]]
            med = statistics.median(secs)
            print(f"{label:>10}: median {med:.1f} s (min {min(secs):.1f}, max {max(secs):.1f})")
        speedup = statistics.median(r["seconds"] for r in runs[0]) / statistics.median(
            r["seconds"] for r in runs[args.workers]
        )
        same = all(r["identical"] for rs in runs.values() for r in rs)
        print(f"speedup (medians): {speedup:.2f}x  all summaries identical: {same}")
        if args.json:
            serial = statistics.median(r["seconds"] for r in runs[0])
            res = {"serial_s": serial, "parallel_s": serial / speedup, "speedup": speedup, "identical": same}
            Path(args.json).write_text(json.dumps(res) + "\n")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
