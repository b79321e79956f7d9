"""Parallel analysis: ``analyze(trace)`` serially vs ``analyze(trace, workers=N)`` on a many-process trace.

    python benchmarks/parallel_analysis.py [--processes 64] [--events 100000000] [--workers 2]

Writes a synthetic trace of ``--processes`` process directories (the shape of
``analyzer_throughput.py``: nested operations, simulator and backend categories, a second thread;
``--events`` in all, zstd-compressed streams), then runs each analysis in a fresh interpreter and
reports its wall time and peak memory (the analyzing process's max RSS, and the largest of its
pool workers'). Checks that the parallel summary equals the serial one.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyzer_throughput import write_synthetic

from rlscope.trace import schema as S


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
    for p in sorted(base.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    base.rmdir()
    return per * processes


def _child(trace: str, workers: int, out: str) -> None:
    from rlscope.analysis import analyze

    t0 = time.perf_counter()
    summary = analyze(trace, correct=False, workers=workers or None).summary
    seconds = time.perf_counter() - t0
    with open(out, "w") as f:
        json.dump(summary, f, sort_keys=True, default=str)
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    peak_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(json.dumps({"seconds": seconds, "peak_main_gib": peak_self, "peak_worker_gib": peak_child}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=64)
    p.add_argument("--events", type=int, default=100_000_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), args.child[2])
        return
    with tempfile.TemporaryDirectory() as d:
        trace = Path(d) / "trace"
        t0 = time.perf_counter()
        n = write_trace(trace, args.processes, args.events)
        print(f"trace: {args.processes} processes, {n:,} events, written in {time.perf_counter() - t0:.1f} s")
        results = {}
        for workers in (0, args.workers):
            out = str(Path(d) / f"summary-{workers}.json")
            cmd = [sys.executable, __file__, "--child", str(trace), str(workers), out]
            line = (
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                .stdout.strip()
                .splitlines()[-1]
            )
            results[workers] = json.loads(line)
            label = "serial" if workers == 0 else f"{workers} workers"
            r = results[workers]
            print(
                f"{label:>10}: {r['seconds']:.1f} s  peak RSS: main {r['peak_main_gib']:.2f} GiB,"
                f" largest worker {r['peak_worker_gib']:.2f} GiB"
            )
        same = Path(d, "summary-0.json").read_text() == Path(d, f"summary-{args.workers}.json").read_text()
        speedup = results[0]["seconds"] / results[args.workers]["seconds"]
        print(f"speedup: {speedup:.2f}x  identical summaries: {same}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
