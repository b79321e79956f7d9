"""What each part of a GPU session's light window costs the eager step, switched on and off in place.

    python benchmarks/light_parts.py [--pairs 150] [--iters 40] [--parts busy,nvml10,...] [--json FILE]

`benchmarks/lockstep.py` put the light state at +5.9% of the eager simulator's step on the H100,
~4.5 points of it with the GPU session's parts that run in light windows too (the memory recorder
and NVML sampling), but could not split them: each state there is a process of its own, ±3% a
round. Here each part is switched on and off between blocks of ``--iters`` iterations of the same
loop (`loops.sim_eager_step`, no session), in one process, the order inside each pair of blocks
drawn at random, so the host's speed (which moves over 0.1-0.3 s) cancels in each pair's on - off.

Parts, in this order (the tracker last: torch cannot detach it):

- ``busyN``: N us of busy-waiting per iteration, the known cost that checks the method (its
  "ns each" is the measured excess over the busy time spent: 1.0 when the method sees all of it);
- ``nvmlHZ``: rlscope's NVML sampler (`collectors/nvml.py`, its own sampling code) at HZ samples a
  second, its thread paused in the off blocks; also per sample (on - off over the samples taken);
- ``backend_idle``: the native backend-op recorder's callback registered and disabled, as light
  windows hold it, against removed (the CPU's light window has it too);
- ``history``: torch's allocator history (no context), which runs the allocator's per-event trace
  entry as the native tracker does; also per allocator event;
- ``tracker``: rlscope's native tracker attached and enabled against attached and gated off (its own
  per-event work; torch's part is ``history``'s); counts the allocator events per iteration;
  ``tracker:PATH`` the same for another version of `collectors/memory_native.cpp` (an earlier
  commit's), attached beside it, to compare the two in one process. ``history`` run again after a
  tracker is attached costs only its ring buffer (torch builds the entry for the tracker anyway):
  the difference between the two runs is torch's own part of a tracker's cost.

Per part: the median of on/off over the pairs with a 95% interval (bootstrap of the median), the
added us per iteration, the share of the step, and the cost per counted sample or event (the
median pair's; the JSON has the mean's too). Results: BENCHMARKS.md §9, seventeenth session.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_PARTS = "busy20,busy0,nvml10,nvml100,history,tracker"


class Part:
    """A part switched on and off between blocks; ``count`` is what it did while on (samples, events)."""

    def on(self) -> None: ...

    def off(self) -> None: ...

    def count(self) -> int:
        return 0

    def close(self) -> None: ...


class Busy(Part):
    """N us of busy-waiting per iteration, inside the timed block (the step calls ``extra``)."""

    def __init__(self, us: float, extra: list[float]) -> None:
        self.us, self.extra = us, extra

    def on(self) -> None:
        self.extra[0] = self.us * 1e-6

    def off(self) -> None:
        self.extra[0] = 0.0

    def count(self) -> int:  # the busy time spent, in ns (so "ns each" reads 1 when all of it shows)
        n, self.extra[1] = round(self.extra[1] * 1e9), 0.0
        return n


class Nvml(Part):
    """rlscope's NvmlSampler with a gate: the thread keeps its timer, and samples only when on."""

    def __init__(self, hz: float) -> None:
        from rlscope.collectors.nvml import NvmlSampler

        gate = threading.Event()
        taken = [0]

        class Gated(NvmlSampler):
            def _sample(self) -> None:
                if gate.is_set():
                    super()._sample()
                    taken[0] += 1

        rows: list[Any] = []
        session = SimpleNamespace(writer=SimpleNamespace(add_stream=lambda *a: rows))
        self.gate, self.taken, self.rows = gate, taken, rows
        self.sampler = Gated(session, hz).start()

    def on(self) -> None:
        self.gate.set()

    def off(self) -> None:
        self.gate.clear()

    def count(self) -> int:
        n, self.taken[0] = self.taken[0], 0
        self.rows.clear()
        return n

    def close(self) -> None:
        self.sampler.stop()


class History(Part):
    """torch's allocator history as rlscope's fallback records it (collectors/gpu_memory.py)."""

    def __init__(self, torch: Any) -> None:
        from rlscope.collectors import gpu_memory

        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA: no allocator history")
        self.torch, self.gm = torch, gpu_memory

    def on(self) -> None:
        self.gm.record_history(self.torch, True, clear=True)

    def off(self) -> None:
        self.gm.record_history(self.torch, False)

    def count(self) -> int:
        snap = self.torch.cuda.memory._snapshot()
        n = sum(len(t) for t in snap.get("device_traces", []) or [])
        self.gm.record_history(self.torch, False)  # so the next on starts from an empty history
        return n


class Tracker(Part):
    """rlscope's native tracker, attached once, enabled in the on blocks and drained after each.

    ``source``: another version of collectors/memory_native.cpp with the same C functions (an
    earlier commit's, to compare two versions in one process; both stay attached, each gated)."""

    def __init__(self, torch: Any, source: str | None = None) -> None:
        from rlscope.collectors import gpu_memory

        if source is None:
            self.lib = gpu_memory.load_native(torch)
        else:
            self.lib = gpu_memory.open_tracker(torch, Path(source), what=source)
        if self.lib.mn_start() != 0:
            raise RuntimeError("torch refused the allocator trace tracker")
        self.lib.mn_enable(0)
        self.drain = gpu_memory.drain_native

    def on(self) -> None:
        self.lib.mn_enable(1)

    def off(self) -> None:
        self.lib.mn_enable(0)

    def count(self) -> int:
        cols = self.drain(self.lib, 0)
        return 0 if cols is None else len(cols[0])


class BackendIdle(Part):
    """The native backend-op recorder's callback registered with torch and disabled (what a light
    window holds), against not registered at all: does a disabled callback cost an op anything?"""

    def __init__(self, torch: Any) -> None:
        from rlscope.collectors import torch_native

        self.lib = torch_native.load(torch)

    def on(self) -> None:
        if self.lib.tn_start() != 0:
            raise RuntimeError("torch refused the backend recorder's callback")
        self.lib.tn_enable(0)

    def off(self) -> None:
        self.lib.tn_stop()


def make_part(name: str, torch: Any, extra: list[float]) -> Part:
    if name.startswith("busy"):
        return Busy(float(name[4:]), extra)
    if name.startswith("nvml"):
        return Nvml(float(name[4:]))
    if name == "backend_idle":
        return BackendIdle(torch)
    if name == "history":
        return History(torch)
    if name == "tracker":
        return Tracker(torch)
    if name.startswith("tracker:"):  # tracker:PATH, another version's source
        return Tracker(torch, name.split(":", 1)[1])
    raise SystemExit(f"light_parts: unknown part {name!r}")


def measure(
    part: Part, block: Callable[[], float], pairs: int, iters: int, rng: random.Random
) -> dict[str, Any]:
    """Pairs of blocks, one with the part on and one off, in a random order; per-pair on/off."""
    on_t, off_t, counts = [], [], []
    for _ in range(pairs):
        order = [True, False] if rng.random() < 0.5 else [False, True]
        for is_on in order:
            (part.on if is_on else part.off)()
            t = block()
            if is_on:
                on_t.append(t)
                counts.append(part.count())
            else:
                off_t.append(t)
                part.count()  # nothing should be counted off; drained so the next on starts clean
        part.off()
    on, off = np.array(on_t), np.array(off_t)
    ratio = on / off
    boot = np.median(rng_choice(ratio, 2000, rng), axis=1)
    excess_us = (on - off) / iters * 1e6
    n = int(np.sum(counts))
    return {
        "pairs": pairs,
        "ratio_median": float(np.median(ratio)),
        "ratio_ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
        "off_us_per_iter": float(np.median(off) / iters * 1e6),
        "excess_us_per_iter": float(np.median(excess_us)),
        "excess_us_per_iter_mean": float(np.mean(excess_us)),
        "counted": n,
        "per_iter_counted": n / (pairs * iters),
        # per counted thing (sample, event, busy ns): the median pair's excess over the mean count
        # per block, as the table's other columns; the mean excess's beside it (a drain or sample
        # that lands in a few blocks shows there)
        "ns_per_counted": float(np.median(on - off) * 1e9 / (n / pairs)) if n else None,
        "ns_per_counted_mean": float(np.sum(on - off) * 1e9 / n) if n else None,
    }


def rng_choice(x: np.ndarray, reps: int, rng: random.Random) -> np.ndarray:
    gen = np.random.default_rng(rng.randrange(1 << 30))
    return gen.choice(x, size=(reps, len(x)), replace=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=150)
    p.add_argument("--iters", type=int, default=40, help="iterations per block (~1.5 ms each on the H100)")
    p.add_argument("--parts", default=DEFAULT_PARTS)
    p.add_argument("--device", default="cuda", help="cuda, or cpu to check the wiring (busy parts only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import torch
    from loops import sim_eager_step

    step = sim_eager_step(args.device)
    extra = [0.0, 0.0]  # busy-wait per iteration (s); the busy time actually spent (s)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def block() -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            step()
            if extra[0]:
                b0 = time.perf_counter()
                end = b0 + extra[0]
                b1 = b0
                while b1 < end:
                    b1 = time.perf_counter()
                extra[1] += b1 - b0
        sync()
        return time.perf_counter() - t0

    for _ in range(20):  # warm-up: CUDA modules, caches
        block()
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
    head = ("part", "on/off", "95% interval", "+us/iter", "share", "count/iter", "ns each")
    print("{:>9} {:>7} {:>15} {:>9} {:>7} {:>10} {:>8}".format(*head))
    for name in args.parts.split(","):
        label = name if ":" not in name else f"{name.split(':')[0]}:{Path(name.split(':', 1)[1]).stem}"
        try:
            part = make_part(name, torch, extra)
        except Exception as e:  # a part this machine cannot run (no NVML, no CUDA headers): say so, go on
            print(f"{label:>9} skipped: {type(e).__name__}: {e}")
            results[label] = {"skipped": str(e)}
            continue
        try:
            r = measure(part, block, args.pairs, args.iters, rng)
        finally:
            part.close()
        results[label + ("" if label not in results else "_again")] = r
        each = f"{r['ns_per_counted']:8.3g}" if r["ns_per_counted"] is not None else f"{'-':>8}"
        lo, hi = r["ratio_ci95"]
        print(
            f"{label:>9} {r['ratio_median']:7.4f} {lo:7.4f}-{hi:7.4f} {r['excess_us_per_iter']:9.2f}"
            f" {r['excess_us_per_iter'] / r['off_us_per_iter']:7.2%} {r['per_iter_counted']:10.2f} {each}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
