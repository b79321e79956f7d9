"""The null of `rlscope validate --twin`: two *timed* runs of one program taking turns, as a timed and a
profiled run do (rlscope/overhead/validate/twin.py). Every figure should read 1.000.

    python benchmarks/twin_null.py [--reps 4] [--turn-ms 100] [--cpus LIST] [--json F] [--timed]
                                   -- python train.py ARGS...

Why: a twin validation sets the profiled run's corrected figures against the timed run beside it; a
difference between the two *sides* of the protocol (first and second turn, the core each thread
lands on, the cache each turn starts with; until the thirtieth session also leading and catching up,
which read the catching-up side +10.7% on an H100) would read as rlscope's error. Here both sides run
the same plain timers, so whatever the second side's figures differ from the first's by is the
method's own bias and noise. Per repetition and per operation above 5% of the run: the second side's
(the profiled run's place in a validation) inclusive time over the first's (their timers' own cost
taken off both), and the same for the whole run; the median and range over repetitions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from rlscope.overhead.validate import aggregate as validate_aggregate
from rlscope.overhead.validate import child as validate_child
from rlscope.overhead.validate import cli as validate_cli
from rlscope.overhead.validate import runner as validate_runner


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--turn-ms", default="100")
    p.add_argument("--cpus", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--timed", action="store_true", help="both sides take turns by time (no count matching)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    vargs = ["--twin", "--turn-ms", args.turn_ms, "--no-warmup"]
    if args.cpus:
        vargs += ["--cpus", args.cpus]
    opts = validate_cli.parse_args([*vargs, "--", *[c for c in args.command if c != "--"]])
    costs = validate_child.measure_timer_costs()

    def log(msg: str) -> None:
        print(f"twin_null: {msg}", file=sys.stderr, flush=True)

    reps: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rlscope-twin-null-") as tmp:
        runner = validate_runner._Runner(opts, Path(tmp), log)
        runner.run("timers", -1)  # warm-up, and whether the script calls rlscope.profile
        for rep in range(args.reps):
            pair = runner.run_pair(rep, ("timers", "timers"), counted=not args.timed)
            runs = pair if rep % 2 == 0 else pair[::-1]  # the pipes' first side (the timed run's place) first
            lead, follow = runs
            t_lead = validate_aggregate.corrected_timers(lead.record["timers"], costs)
            t_follow = validate_aggregate.corrected_timers(follow.record["timers"], costs)
            total = [r.measured_s - validate_aggregate.timer_cost_s(r.record, costs) for r in runs]
            row = {"[total]": [total[0], total[1]]}
            for op, v in t_lead.items():
                if op in t_follow and v["inclusive_s"] >= 0.05 * total[0]:
                    row[op] = [v["inclusive_s"], t_follow[op]["inclusive_s"]]
            sides = [
                {
                    "measured_s": r.measured_s,
                    "timer_cost_s": validate_aggregate.timer_cost_s(r.record, costs),
                    "window_s": r.record["window_s"],
                    "window_waited_s": r.record["window_waited_s"],
                    "process_s": r.process_s,
                    "turn": r.record["turn"],
                }
                for r in runs
            ]
            reps.append({"rep": rep + 1, "lead_first": lead.position == 1, "figures": row, "sides": sides})
            log(
                "  "
                + ", ".join(f"{op} {b / a:.3f}" for op, (a, b) in row.items() if a > 0)
                + f" looks {follow.record['turn']['looks']} turns {follow.record['turn']['turns']}"
            )
    print(f"twin null: second side / first over {args.reps} repetitions, median [min-max]")
    summary = {}
    for op in reps[0]["figures"]:
        ratios = [r["figures"][op][1] / r["figures"][op][0] for r in reps if op in r["figures"]]
        summary[op] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
        print(f"  {op:24s} {summary[op]['median']:.3f} [{summary[op]['min']:.3f}-{summary[op]['max']:.3f}]")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"command": opts.command, "reps": reps, "summary": summary}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
