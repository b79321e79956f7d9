"""``rlscope calibrate``'s command line, and the one-time calibration the other commands ask for."""

from __future__ import annotations

import argparse
import sys

from rlscope.cli.parser import Parser


def main(argv: list[str]) -> int:
    """``rlscope calibrate [--out FILE] [--rounds K] [--quick] [--no-gpu] [-q]``."""
    p = Parser(
        prog="rlscope calibrate",
        description="Measure rlscope's cost per recorded event on this machine and software stack, and"
        " save it where rlscope-analyze finds it to correct traces (method: docs/overhead.md).",
    )
    p.add_argument("--out", metavar="FILE", help="write here instead of the per-machine cache")
    p.add_argument(
        "--rounds",
        type=int,
        metavar="K",
        help="consecutive rounds whose estimates must agree within 20%% (default 5; 4 with --quick)",
    )
    # the former name of --rounds (validate's --reps counts runs per mode: one name, one concept)
    p.add_argument("--reps", type=int, dest="old_reps", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="fewer, shorter rounds; the same stability rule")
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU measurements")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines and no table")
    args = p.parse_args(argv)
    rounds, name = args.rounds, "--rounds"
    if args.old_reps is not None and rounds is None:
        rounds, name = args.old_reps, "--reps (now --rounds)"
    if rounds is not None and rounds < 2:
        p.error(f"{name} must be >= 2: stability is agreement between rounds")
    if args.old_reps is not None:
        print("rlscope calibrate: --reps is now --rounds", file=sys.stderr)
    from rlscope.overhead.calibrate.run import run_calibration
    from rlscope.overhead.correct import calibration
    from rlscope.viz.terminal import render_calibration

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"rlscope calibrate: {msg}", file=sys.stderr, flush=True)

    # a refused cost is one line on stderr even with -q (run_calibration's warn), never dropped silently
    cal = run_calibration(rounds=rounds, quick=args.quick, gpu=not args.no_gpu, log=log)
    path = calibration.save(cal, args.out)
    if not args.quiet:
        render_calibration(cal)
    print(f"calibration: {path}  ({cal['duration_s']:.0f} s)")
    return 0


def ensure_calibration(quiet: bool = False, quick: bool = False) -> None:
    """Calibrate once per machine and stack if no calibration exists yet (the demo reports corrected).

    ``quick``: ``rlscope calibrate --quick``'s plan, for a caller with a time limit.
    """
    from rlscope.overhead.correct import calibration

    if calibration.path_for(calibration.current_key()).exists():
        return
    from rlscope.overhead.calibrate.run import run_calibration

    how = "quickly (--quick)" if quick else "(a minute or more on a noisy machine)"
    print(f"rlscope: no overhead calibration for this machine yet: calibrating once {how} ...")
    cal = run_calibration(
        log=lambda m: None if quiet else print(f"rlscope calibrate: {m}", file=sys.stderr), quick=quick
    )
    print(f"rlscope: calibration saved to {calibration.save(cal)}")
