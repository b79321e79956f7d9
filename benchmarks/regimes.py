"""Does rlscope put the profiled process in the machine's slow regime? Fresh processes, interleaved.

    python benchmarks/regimes.py [--reps 3] [--steps 3000] [--configs off,threads,profile,...] [--json F]

On the devices the eager simulator's iteration runs at one of two speeds, ~1.6x apart, switching
every few seconds (light-window medians of one profiled run: ~1,000 or ~1,600 us, nothing between),
and profiled processes spent more of their time in the slow one than unprofiled ones: the windows
cannot see that, since it slows light and full windows alike. This runs the eager simulator's step
(benchmarks/loops.py) in a fresh process per configuration and repetition, each iteration timed by
the script itself, and reports per configuration the median iteration time and the share of
50-iteration blocks in the slow regime (block median over 1.3x the fastest blocks of the
unprofiled runs). Profiled runs count their light windows only (read off the trace's WINDOW rows),
so the collectors' own cost is out and what is left is what the process runs like.

Configurations:
- ``off``: unprofiled;
- ``threads``: unprofiled, with two threads waking as rlscope's do (10 Hz, 1 Hz with an Arrow
  batch of 100k rows written zstd-compressed): is it their wake-ups;
- ``profile``: rlscope's default profile;
- ``off-pin``, ``profile-pin``: the same with the main thread pinned to one core of the allowed set
  (after the session started: rlscope's threads keep the whole set): is it the main thread moving
  between cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CONFIGS = ("off", "threads", "profile", "off-pin", "profile-pin")
BLOCK = 50
SLOW = 1.3


def _busy_threads(stop: threading.Event) -> None:
    """Two daemon threads waking like rlscope's NVML sampler and trace writer."""
    import numpy as np
    import pyarrow as pa

    def sampler() -> None:
        while not stop.wait(0.1):
            sum(range(2000))

    def writer() -> None:
        rows = np.arange(700_000, dtype=np.int64).reshape(-1, 7)
        while not stop.wait(1.0):
            batch = pa.RecordBatch.from_arrays(
                [pa.array(rows[:, k]) for k in range(7)], names=list("abcdefg")
            )
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(
                sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")
            ) as w:
                w.write_batch(batch)

    for fn in (sampler, writer):
        threading.Thread(target=fn, daemon=True).start()


def child(config: str, steps: int, out: Path, device: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import numpy as np
    import torch
    from loops import sim_eager_step

    import rlscope

    step = sim_eager_step(device)
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None
    for _ in range(300):  # warm-up: CUDA context, allocator, first launches
        step()
    sync()
    stop = threading.Event()
    if config == "threads":
        _busy_threads(stop)
    session = None
    if config.startswith("profile"):
        session = rlscope.profile(out.with_suffix(".trace")).start()
    if config.endswith("-pin"):
        os.sched_setaffinity(threading.get_native_id(), {min(os.sched_getaffinity(0))})
    t = np.empty(steps + 1, np.int64)
    t[0] = time.perf_counter_ns()
    for i in range(steps):
        step()
        t[i + 1] = time.perf_counter_ns()
    sync()
    stop.set()
    light = np.ones(steps, bool)
    if session is not None:
        session.stop()
        light = _light_iterations(out.with_suffix(".trace"), t)
    out.write_text(json.dumps({"t": t.tolist(), "light": light.tolist()}))


def _light_iterations(trace: Path, t) -> list[bool]:
    """Per iteration: it began and ended in the same light window (the session's clock is perf_counter_ns)."""
    import numpy as np

    import rlscope
    from rlscope.analysis.timeline import build_timeline
    from rlscope.overhead.correct.windows import window_rows
    from rlscope.trace import schema as S

    tl = build_timeline(rlscope.load_trace(str(trace)).processes[0].events)
    win_ts, win_mode = window_rows(tl)
    start = np.searchsorted(win_ts, t[:-1], side="right") - 1
    end = np.searchsorted(win_ts, t[1:], side="right") - 1
    return (start == end) & (start >= 0) & (win_mode[np.maximum(start, 0)] == S.WINDOW_LIGHT)


def blocks(record: dict) -> list[float]:
    """Median iteration time (us) of each run of BLOCK consecutive counted iterations."""
    import numpy as np

    t = np.asarray(record["t"])
    dt = np.diff(t) / 1e3
    light = np.asarray(record["light"], bool)
    out, run = [], []
    for d, ok in zip(dt, light, strict=True):
        if ok:
            run.append(d)
            if len(run) == BLOCK:
                out.append(float(np.median(run)))
                run = []
        else:
            run = []
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--json", default=None)
    p.add_argument("--device", default="cuda", help="cpu: check the wiring")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.steps, Path(args.out), args.device)
        return 0
    configs = args.configs.split(",")
    got: dict[str, list[list[float]]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for k in range(len(configs)):
                config = configs[(k + rep) % len(configs)]  # rotated: no config always first
                out = Path(tmp, f"{config}-{rep}.json")
                cmd = [sys.executable, __file__, "--child", config, "--steps", str(args.steps)]
                cmd += ["--device", args.device, "--out", str(out)]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{config} rep {rep + 1} failed: {r.stderr[-500:]}", file=sys.stderr)
                    continue
                got[config].append(blocks(json.loads(out.read_text())))
                b = got[config][-1]
                print(
                    f"rep {rep + 1} {config}: {statistics.median(b) if b else float('nan'):.0f} us",
                    file=sys.stderr,
                )
    base = [b for run in got.get("off", []) for b in run] or [
        b for c in got.values() for run in c for b in run
    ]
    fast = sorted(base)[max(0, len(base) // 10 - 1)] if base else float("nan")  # 10th percentile
    summary = {}
    print(
        f"fast regime (unprofiled blocks' 10th percentile): {fast:.0f} us; slow: block median > {SLOW}x that"
    )
    print(f"{'config':<13}{'median us per run':>34}{'slow blocks per run':>28}")
    for c, runs in got.items():
        meds = [statistics.median(r) for r in runs if r]
        slow = [sum(b > SLOW * fast for b in r) / len(r) for r in runs if r]
        summary[c] = {"median_us": meds, "slow_share": slow, "blocks": runs}
        print(f"{c:<13}{' '.join(f'{m:.0f}' for m in meds):>34}{' '.join(f'{s:.0%}' for s in slow):>28}")
    if args.json:
        Path(args.json).write_text(json.dumps({"fast_us": fast, "configs": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
