"""Python's garbage collector in a program, unprofiled and profiled: how often and how long it stops.

    python benchmarks/gc_cost.py [--runs 3] -- python benchmarks/validation_workloads.py dqn

A full (generation 2) collection with torch imported scans ~170k objects: 100-130 ms on the 2-core
VM. Whether one lands inside a short run's measured window decides its total by ±10-25%, and
profiling moves them (rlscope's own objects and allocations). This runs the program in both modes
(``RLSCOPE_MODE=off`` / ``profile``, alternating), each with a ``gc.callbacks`` hook, and prints per
run the collections of generations 1 and 2 and their time, and the time of those inside
``rlscope.profile`` (start to stop, as validate measures it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# runs the program with a gc hook; the session's start/stop are found through rlscope's mode stub
HOOK = r"""
import gc, json, os, runpy, sys, time, atexit
log = []
t = {}
def cb(phase, info):
    if phase == "start":
        t["s"] = time.perf_counter()
    elif info["generation"] >= 1:
        log.append((info["generation"], t["s"], time.perf_counter() - t["s"]))
gc.callbacks.append(cb)
import rlscope
window = {}
real_profile = rlscope.profile
def profile(*a, **k):
    s = real_profile(*a, **k)
    start, stop = s.start, s.stop
    def start_(*a2, **k2):
        r = start(*a2, **k2); window["start"] = time.perf_counter(); return r
    def stop_(*a2, **k2):
        window.setdefault("stop", time.perf_counter()); return stop(*a2, **k2)
    s.start, s.stop = start_, stop_
    return s
rlscope.profile = profile
def report():
    w0, w1 = window.get("start", 0.0), window.get("stop", float("inf"))
    out = {g: [d for gg, s, d in log if gg == g] for g in (1, 2)}
    inside = [d for g, s, d in log if g == 2 and w0 <= s <= w1]
    print("GCCOST " + json.dumps({"gen1_n": len(out[1]), "gen1_s": sum(out[1]), "gen2_n": len(out[2]),
          "gen2_s": sum(out[2]), "gen2_inside_n": len(inside), "gen2_inside_s": sum(inside),
          "window_s": (w1 - w0) if "stop" in window else None}), file=sys.stderr)
atexit.register(report)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if len(command) < 2 or not command[0].startswith("python"):
        p.error("give a Python command: -- python script.py ARGS")
    results: dict[str, list[dict]] = {"off": [], "profile": []}
    with tempfile.TemporaryDirectory() as tmp:
        hook = os.path.join(tmp, "gc_hook.py")
        with open(hook, "w") as f:
            f.write(HOOK)
        for run in range(args.runs):
            for mode in ("off", "profile") if run % 2 == 0 else ("profile", "off"):
                env = {**os.environ, "RLSCOPE_MODE": mode}
                if mode == "profile":
                    env["RLSCOPE_VALIDATE_TRACE_DIR"] = os.path.join(tmp, f"trace-{run}")
                proc = subprocess.run(
                    [sys.executable, hook, *command[1:]], env=env, capture_output=True, text=True
                )
                line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("GCCOST ")), None)
                if line is None:
                    print(
                        f"{mode}: no measurement (exit {proc.returncode}): {proc.stderr[-300:]}",
                        file=sys.stderr,
                    )
                    continue
                r = json.loads(line[7:])
                results[mode].append(r)
                print(
                    f"run {run + 1} {mode:8} full GCs {r['gen2_n']} ({1e3 * r['gen2_s']:.0f} ms), inside the"
                    f" window {r['gen2_inside_n']} ({1e3 * r['gen2_inside_s']:.0f} ms) of"
                    f" {r['window_s'] or 0:.2f} s; gen1 {r['gen1_n']} ({1e3 * r['gen1_s']:.0f} ms)",
                    flush=True,
                )
    for mode, rs in results.items():
        if rs:
            inside = [r["gen2_inside_s"] for r in rs]
            print(f"{mode:8} full-GC time inside the window: median {1e3 * statistics.median(inside):.0f} ms"
                  f" [{1e3 * min(inside):.0f}-{1e3 * max(inside):.0f}]")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
