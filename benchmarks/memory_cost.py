"""What recording the CUDA caching allocator's events costs (collectors/gpu_memory.py), on a GPU.

    python benchmarks/memory_cost.py [--n 20000] [--json FILE]

Per allocation+free pair of a 4 KiB tensor (the allocator's fast path, where a fixed cost shows
most), median of 7 interleaved rounds (the order rotating), each mode's added cost paired with
the same round's unrecorded time: with no recording, with rlscope's native allocator tracker
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
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    mem = torch.cuda.memory
    pairs_ns(100)  # CUDA initialized first: a tracker attached before reaches no device
    try:
        lib = gpu_memory.load_native(torch)
        lib.mn_start()
        lib.mn_enable(0)
    except gpu_memory.NativeMemoryUnavailable as e:
        print(f"native tracker not measured: {e}")
        lib = None

    def history_off() -> None:
        mem._record_memory_history(enabled=None)

    def native(on: bool) -> None:
        lib.mn_enable(int(on))
        if not on:
            gpu_memory.drain_native(lib, 0)

    modes = {  # (switch on, switch off)
        "off": (lambda: None, lambda: None),
        "history": (lambda: gpu_memory.record_history(torch, True, clear=True), history_off),
        "history_defaults": (lambda: mem._record_memory_history(max_entries=10**6), history_off),
    }
    if lib is not None:
        modes["native"] = (lambda: native(True), lambda: native(False))
    pairs_ns(args.n)  # warm-up: context, allocator pool, the first round's page faults
    times: dict[str, list[float]] = {m: [] for m in modes}
    # the native tracker first, interleaved with "off" only, so torch's history (on and off in the
    # second group) cannot interfere; the end checks the tracker still gets events after it
    res: dict = {"n": args.n, "rounds": args.rounds}
    groups = [[m for m in ("off", "native") if m in modes], ["off", "history", "history_defaults"]]
    for g, names in enumerate(groups):
        if g == 1 and lib is not None:  # the native drain after n pairs, per drained entry
            native(True)
            pairs_ns(args.n)
            lib.mn_enable(0)
            t0 = time.perf_counter_ns()
            cols = gpu_memory.drain_native(lib, 0)
            drained = 0 if cols is None else len(cols[0])
            res["native_drain_ns_per_entry"] = (time.perf_counter_ns() - t0) / max(drained, 1)
            res["native_drained_entries"] = drained
        for r in range(args.rounds):  # interleaved, the order rotating each round: drift hits all modes
            for m in names[r % len(names) :] + names[: r % len(names)]:
                on, off = modes[m]
                on()
                times[m].append(pairs_ns(args.n))
                off()
    off_t = times["off"]
    for m, t in times.items():
        res[f"{m}_ns"] = statistics.median(t)
        if m != "off":  # paired with the same group's off rounds, round by round
            base = off_t[: len(t)] if m == "native" else off_t[-len(t) :]
            paired = [a - b for a, b in zip(t, base, strict=True)]
            res[f"{m}_added_ns_per_pair"] = statistics.median(paired)
    if lib is not None:  # does the tracker still get events after torch's history was on and off?
        native(True)
        pairs_ns(1000)
        lib.mn_enable(0)
        cols = gpu_memory.drain_native(lib, 0)
        res["native_entries_after_history_of_2000"] = 0 if cols is None else len(cols[0])
    gpu_memory.record_history(torch, True, clear=True)
    pairs_ns(args.n)
    t0 = time.perf_counter_ns()
    snap = mem._snapshot()
    gpu_memory.record_history(torch, True, clear=True)
    rows = gpu_memory.entries_to_rows(snap, time.time_ns(), time.perf_counter_ns())
    drain = time.perf_counter_ns() - t0
    history_off()
    res.update(history_drained_entries=len(rows), history_drain_ns_per_entry=drain / max(len(rows), 1))
    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
