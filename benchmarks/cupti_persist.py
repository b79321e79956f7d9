"""Does a process stay slower after GPU tracing was attached and detached? Before/after, in fresh processes.

    python benchmarks/cupti_persist.py [--procs 3] [--iters 150] [--blocks 20] [--cpus 3] [--json FILE]

Each child process times blocks of the eager CartPole loop (`benchmarks/loops.py`'s
``sim_eager_step``: ~50 small launches per iteration) before and after one rlscope session that
does no work: with GPU tracing (``gpu="cupti"``: CUPTI attached, then detached at stop) in the
*cupti* processes, without it (``gpu=False``) in the *control* processes, and with CUPTI left
attached at stop (``RLSCOPE_CUPTI_DETACH=0``) in the *keep* processes: the positive control, whose
after/before shows the size of a cost the benchmark can see. Blocks run A x N, session, B x N; the
figure is the median of the B blocks over the median of the A blocks, per process. Control
processes show how much a process drifts over the same seconds; a gap between cupti and control
says what attaching CUPTI once leaves behind, which the windows (both kinds run after the first
attach) cannot see. ``--cpus`` pins every child to those cores (unpinned, blocks of one process
moved between levels 40% apart on the H200).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, statistics, sys, tempfile, time
import torch
import rlscope

mode, iters, blocks, device = sys.argv[1], int(sys.argv[2]), int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, sys.argv[3])  # the benchmarks directory
from loops import sim_eager_step

step = sim_eager_step(device)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

def block():
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    sync()
    return (time.perf_counter() - t0) / iters

block()
a = [block() for _ in range(blocks)]
with tempfile.TemporaryDirectory() as d:
    with rlscope.profile(d, gpu=False if mode == "control" else "cupti", backend=False, nvml_hz=0):
        block()  # some work while attached: CUPTI's kernels and API callbacks get used
b = [block() for _ in range(blocks)]
print(json.dumps({"mode": mode, "a_us": [x * 1e6 for x in a], "b_us": [x * 1e6 for x in b],
                  "ratio": statistics.median(b) / statistics.median(a)}))
"""


def _p10(xs: list[float]) -> float:
    """The fast end of a process's blocks: the devices switch between two speeds ~1.5x apart every
    few seconds, so a median before vs after is partly which speed each half drew; the fastest
    blocks of each half are in the fast speed in both."""
    return sorted(xs)[len(xs) // 10]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=3, help="processes per mode (alternated)")
    p.add_argument("--iters", type=int, default=150, help="iterations per block (~0.25 s on a device)")
    p.add_argument("--blocks", type=int, default=20, help="blocks before and after the session")
    p.add_argument("--cpus", default=None, help="pin the children to these cores (taskset list)")
    p.add_argument("--modes", default="cupti,control,keep", help="which kinds of process, in turn")
    p.add_argument("--device", default="cuda", help="cpu: a smoke test of the script (no CUPTI there)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    results = []
    here = os.path.dirname(os.path.abspath(__file__))  # the child imports loops.py from here
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        modes = args.modes.split(",")
        pin = ["taskset", "-c", args.cpus] if args.cpus else []
        for i in range(args.procs):
            for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:  # rotate the order
                env = dict(os.environ)
                if mode == "keep":
                    env["RLSCOPE_CUPTI_DETACH"] = "0"
                argv = [script, mode, str(args.iters), here, str(args.blocks), args.device]
                r = subprocess.run(
                    [*pin, sys.executable, *argv],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                if r.returncode != 0:
                    print(f"{mode}: failed: {r.stderr.strip().splitlines()[-1:]}")
                    continue
                out = json.loads(r.stdout.strip().splitlines()[-1])
                results.append(out)
                a, b = statistics.median(out["a_us"]), statistics.median(out["b_us"])
                out["fast_ratio"] = _p10(out["b_us"]) / _p10(out["a_us"])
                print(
                    f"{mode:8} before {a:7.1f} us/it  after {b:7.1f} us/it  after/before {out['ratio']:.3f}"
                    f"  fast ends (10th percentiles) {out['fast_ratio']:.3f}"
                )
    for mode in modes:
        rs = [r["ratio"] for r in results if r["mode"] == mode]
        fs = [r["fast_ratio"] for r in results if r["mode"] == mode]
        if rs:
            print(
                f"{mode:8} after/before median {statistics.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}],"
                f" fast ends {statistics.median(fs):.3f} [{min(fs):.3f}-{max(fs):.3f}]"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
