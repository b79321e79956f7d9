"""What recording the CUDA caching allocator's events costs (collectors/gpu_memory.py), on a GPU.

    python benchmarks/memory_cost.py [--n 20000] [--json FILE]

Per allocation+free pair of a 4 KiB tensor (the allocator's fast path, where a fixed cost shows
most), median of 5 rounds: with no recording, with rlscope's native allocator tracker
(collectors/memory_native.cpp, the default), with torch's allocator history as rlscope's fallback
records it (no context, no stacks), and with the history's defaults (Python and C++ stacks, what
``torch.cuda.memory._record_memory_history()`` does). Then the drains after n pairs, per drained
entry (the writer thread's cost): the native queue into numpy arrays, and the history's snapshot,
clear and conversion to rows, which holds the GIL throughout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from rlscope.collectors import gpu_memory


def pairs_ns(n: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        x = torch.empty(1024, device="cuda")
        del x
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    mem = torch.cuda.memory
    pairs_ns(1000)  # warm-up: context, allocator pool

    def rounds(setup) -> float:
        out = []
        for _ in range(5):
            setup()
            out.append(pairs_ns(args.n))
            mem._record_memory_history(enabled=None)
        return statistics.median(out)

    try:
        lib = gpu_memory.load_native(torch)
    except gpu_memory.NativeMemoryUnavailable as e:
        print(f"native tracker not measured: {e}")
        lib = None
    res: dict = {"n": args.n, "off_ns": rounds(lambda: None)}
    if lib is not None:
        lib.mn_start()
        lib.mn_enable(0)
        gpu_memory.drain_native(lib, 0)

        def native_round() -> float:
            lib.mn_enable(1)
            try:
                return pairs_ns(args.n)
            finally:
                lib.mn_enable(0)
                gpu_memory.drain_native(lib, 0)

        res["native_ns"] = statistics.median(native_round() for _ in range(5))
        res["native_added_ns_per_pair"] = res["native_ns"] - res["off_ns"]
        lib.mn_enable(1)
        pairs_ns(args.n)
        lib.mn_enable(0)
        t0 = time.perf_counter_ns()
        cols = gpu_memory.drain_native(lib, 0)
        drained = 0 if cols is None else len(cols[0])
        res["native_drain_ns_per_entry"] = (time.perf_counter_ns() - t0) / max(drained, 1)
        res["native_drained_entries"] = drained
    res.update(
        {
            "rlscope_history_ns": rounds(lambda: gpu_memory.record_history(torch, True, clear=True)),
            "default_history_ns": rounds(lambda: mem._record_memory_history(max_entries=10**6)),
        }
    )
    gpu_memory.record_history(torch, True, clear=True)
    pairs_ns(args.n)
    t0 = time.perf_counter_ns()
    snap = mem._snapshot()
    gpu_memory.record_history(torch, True, clear=True)
    rows = gpu_memory.entries_to_rows(snap, time.time_ns(), time.perf_counter_ns())
    drain = time.perf_counter_ns() - t0
    mem._record_memory_history(enabled=None)
    res.update(drained_entries=len(rows), drain_ns_per_entry=drain / max(len(rows), 1))
    res["added_ns_per_pair"] = res["rlscope_history_ns"] - res["off_ns"]
    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
