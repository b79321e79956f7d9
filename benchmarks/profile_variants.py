"""Corrected totals of several profile configurations against the same unprofiled runs, interleaved.

    python benchmarks/profile_variants.py --reps 6 --variant default= \\
        --variant flush_end=flush_interval=1000 -- python benchmarks/validation_workloads.py dqn --scale 2

``rlscope validate`` judges one configuration; two validations a few minutes apart see the machine
in two states (BENCHMARKS §9: the same tree gave 4 of 5 rows, then 1 of 5). This runs the command
unprofiled and under every ``--variant NAME=KEY=VALUE[,KEY=VALUE...]`` (rlscope.profile options, as
validate's ``--set``; an empty list is the default profile), one process each, the order rotated per
repetition, and reports per variant the corrected error of each repetition against that
repetition's unprofiled run, so variants are compared on the same machine states. Each process is
run and analyzed exactly as validate does (its runner and analysis).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
from pathlib import Path

from rlscope.analysis import analyze
from rlscope.overhead.validate.cli import _parse_setting, parse_args
from rlscope.overhead.validate.runner import _Runner
from rlscope.overhead.validate.verdict import median_interval


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--variant", action="append", default=[], help="NAME=KEY=VALUE[,KEY=VALUE...]")
    p.add_argument("--cpus", default=None, help="pin every run here (validate's --cpus)")
    p.add_argument("--json", default=None)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("no command")
    base = parse_args(["--reps", str(a.reps), *(["--cpus", a.cpus] if a.cpus else []), "--", *command])
    variants = {}
    for v in a.variant or ["default="]:
        name, _, settings = v.partition("=")
        session = dict(_parse_setting(s) for s in settings.split(",") if s)
        variants[name] = dataclasses.replace(base, session=session)
    walls: dict[str, list[float]] = {"unprofiled": []}
    raws: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="rlscope-variants-") as tmp:
        runners = {
            name: _Runner(opts, Path(tmp), lambda m: None)  # one scratch dir: records per mode and rep
            for name, opts in {"unprofiled": base, **variants}.items()
        }
        for name, r in runners.items():
            r.traces = Path(tmp) / f"traces-{name}"
        order = list(runners)
        runners["unprofiled"].run("unprofiled", -1)  # warm-up
        for rep in range(a.reps):
            k = rep % len(order)
            for name in order[k:] + order[:k]:
                r = runners[name]
                if name == "unprofiled":
                    walls[name].append(r.run("unprofiled", rep).measured_s or 0.0)
                    continue
                r.run("profiled", rep)
                s = analyze(r.trace_dir(rep), intervals=False).summary
                walls.setdefault(name, []).append(s["wall_s"])
                raws.setdefault(name, []).append(s["raw"]["wall_s"])
                line = f"raw {raws[name][-1]:.3f} s, corrected {s['wall_s']:.3f} s"
                print(f"rep {rep + 1} {name}: {line}", flush=True)
            print(f"rep {rep + 1} unprofiled: {walls['unprofiled'][-1]:.3f} s", flush=True)
    ref = walls["unprofiled"]
    out = {"command": command, "reps": a.reps, "unprofiled_s": ref, "variants": {}}
    print(f"unprofiled: median {statistics.median(ref):.3f} s [{min(ref):.3f}-{max(ref):.3f}]")
    for name in variants:
        err = [c / u - 1 for c, u in zip(walls[name], ref, strict=True)]
        slow = [w / u for w, u in zip(raws[name], ref, strict=True)]
        iv = median_interval(err)
        out["variants"][name] = {"corrected_s": walls[name], "raw_s": raws[name], "error": err}
        out["variants"][name]["interval"] = iv
        ivs = f"{iv[0]:+.1%}..{iv[1]:+.1%}" if iv else "-"
        print(
            f"{name:>12}: raw {statistics.median(slow):.2f}x,"
            f" corrected error median {statistics.median(err):+.1%}"
            f" [{min(err):+.1%}, {max(err):+.1%}], 90% interval of the median {ivs}"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
