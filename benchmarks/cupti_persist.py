"""Does a process stay slower after GPU tracing was attached and detached? Before/after, in fresh processes.

    python benchmarks/cupti_persist.py [--procs 3] [--iters 1500] [--json FILE]

Each child process times blocks of the eager CartPole loop (`benchmarks/loops.py`'s
``sim_eager_step``: ~50 small launches per iteration) before and after one rlscope session that
does no work: with GPU tracing (``gpu="cupti"``: CUPTI attached, then detached at stop) in the
*cupti* processes, without it (``gpu=False``) in the *control* processes. Blocks alternate A, A,
session, B, B; the figure is the median of the B blocks over the median of the A blocks, per
process. Control processes show how much a process drifts over the same seconds; a gap between the
two says what attaching CUPTI once leaves behind, which the windows (both kinds run after the first
attach) cannot see.
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

mode, iters = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])  # the benchmarks directory
from loops import sim_eager_step

step = sim_eager_step("cuda")

def block():
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters

block()
a = [block() for _ in range(3)]
with tempfile.TemporaryDirectory() as d:
    with rlscope.profile(d, gpu="cupti" if mode == "cupti" else False, backend=False, nvml_hz=0):
        block()  # some work while attached: CUPTI's kernels and API callbacks get used
b = [block() for _ in range(3)]
print(json.dumps({"mode": mode, "a_us": [x * 1e6 for x in a], "b_us": [x * 1e6 for x in b],
                  "ratio": statistics.median(b) / statistics.median(a)}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=3, help="processes per mode (alternated)")
    p.add_argument("--iters", type=int, default=1500, help="iterations per block")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    results = []
    here = os.path.dirname(os.path.abspath(__file__))  # the child imports loops.py from here
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        for i in range(args.procs):
            for mode in ("cupti", "control") if i % 2 == 0 else ("control", "cupti"):
                r = subprocess.run(
                    [
                        sys.executable,
                        script,
                        mode,
                        str(args.iters),
                        here,
                    ],
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
                print(
                    f"{mode:8} before {a:7.1f} us/it  after {b:7.1f} us/it  after/before {out['ratio']:.3f}"
                )
    for mode in ("cupti", "control"):
        rs = [r["ratio"] for r in results if r["mode"] == mode]
        if rs:
            print(f"{mode:8} after/before median {statistics.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
