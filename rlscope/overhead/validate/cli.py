"""``rlscope validate``'s command line: its options, and the command's run from start to exit status.

rlscope validate [--reps 5] [--max-reps N] [--trace-dir D] [--json F] [--gpu MODE] [--no-backend]
                 [--tolerance PCT[,PCT]] [--calibration F] [--no-warmup] [--cpus LIST]
                 [--twin] [--verbose] [--] python train.py ARGS...
rlscope validate --merge A.json B.json [...] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rlscope.cli.options import GPU_MODES
from rlscope.cli.parser import Parser
from rlscope.cli.program import program_command
from rlscope.errors import RLScopeError
from rlscope.overhead.validate import twin
from rlscope.overhead.validate.options import Options, _cpu_list
from rlscope.overhead.validate.render import render
from rlscope.overhead.validate.runner import Terminated, _on_sigterm, validate


class _Parser(Parser):
    """The rlscope parser, whose errors raise RLScopeError (one line, exit 2, from rlscope's main)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise RLScopeError(f"validate: {message}")


def _parse_tolerance(text: str) -> tuple[float, float]:
    """``PCT`` (total and operations alike) or ``TOTAL,OPS`` in percent."""
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        raise RLScopeError(f"validate: --tolerance: not a percentage: {text!r}") from None
    if len(parts) not in (1, 2) or any(p <= 0 for p in parts):
        raise RLScopeError(f"validate: --tolerance wants PCT or TOTAL,OPS (percent, > 0), got {text!r}")
    return parts[0] / 100, parts[-1] / 100


def parse_args(argv: list[str]) -> Options:
    p = _Parser(
        prog="rlscope validate",
        description="Check rlscope's corrected profile of your program against the program unprofiled"
        " and under plain timers: rlscope validate [options] [--] python train.py ARGS...",
    )
    p.add_argument("--reps", type=int, default=5, help="runs per mode (default 5)")
    p.add_argument(
        "--max-reps",
        type=int,
        default=0,
        metavar="N",
        help="after --reps, add repetitions (doubling), up to N, until every checked figure's 90%%"
        " interval lies wholly inside or wholly outside its band (default: no more)",
    )
    p.add_argument(
        "--trace-dir", default=None, metavar="DIR", help="keep the profiled runs' traces here (rep-N each)"
    )
    p.add_argument("--json", default=None, metavar="FILE", help="write every measurement as JSON")
    p.add_argument(
        "--gpu",
        default=None,
        choices=list(GPU_MODES),
        help="GPU recording of the profiled runs, as in rlscope run (default auto)",
    )
    p.add_argument("--no-backend", action="store_true", help="profile without recording torch ops")
    p.add_argument(
        "--tolerance",
        default="5,8",
        metavar="PCT[,PCT]",
        help="pass band in percent for the total and for operations above 5%% of the run (default 5,8)",
    )
    p.add_argument("--calibration", default=None, metavar="FILE", help="overhead calibration to use")
    p.add_argument(
        "--no-calibrate", action="store_true", help="do not calibrate a machine that has no calibration yet"
    )
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed first run")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an rlscope.profile option for the profiled runs, e.g. --set full_share=0.3 or"
        " --set windows=false (repeatable; values are JSON, else strings)",
    )
    p.add_argument(
        "--cpus",
        default=None,
        metavar="LIST",
        help="run every mode on these CPUs only, e.g. 2-5 or 0,2,4 (the same cores for every run)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no repetition after the first that would end past SECONDS from the start"
        " (estimated from the last one); the verdict says where it stopped",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        default=[],
        metavar="FILE",
        help="run nothing: pool the repetitions of these --json results of one command (e.g. calls"
        " stopped by --time-limit) and compare again; with --json, write the merged result",
    )
    p.add_argument(
        "--no-speed-probe",
        action="store_true",
        help="compare the plain runs' times as measured, not set at one main-thread speed (the"
        " probe times a tiny loop on the main thread 10 times a second, by SIGALRM)",
    )
    p.add_argument(
        "--twin",
        action="store_true",
        help="run each repetition's timed and profiled runs side by side, taking turns of ~50 ms on"
        " one core, so that both see the machine at the same speeds (no unprofiled runs; the total"
        " is checked against the timed run's)",
    )
    p.add_argument(
        "--turn-ms",
        type=float,
        default=twin.TURN_NS / 1e6,
        metavar="MS",
        help=f"--twin: a turn, a catch-up with the other run and a lead of half of it (default"
        f" {twin.TURN_NS / 1e6:g} ms)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show the program's output")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program to run (python train.py ...)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    if args.max_reps and args.max_reps < args.reps:
        p.error("--max-reps must be >= --reps")
    if args.time_limit is not None and not args.time_limit > 0:
        p.error("--time-limit must be > 0 seconds")
    if not 1 <= args.turn_ms <= 10_000:
        p.error("--turn-ms must be between 1 and 10000")
    if args.merge:
        if args.command:
            p.error("--merge runs nothing: give result files, not a program")
        command = []
    else:
        command = program_command(args.command, "rlscope validate -- python train.py ...")
    total, ops = _parse_tolerance(args.tolerance)
    return Options(
        command=command,
        reps=args.reps,
        max_reps=args.max_reps,
        trace_dir=Path(args.trace_dir).resolve() if args.trace_dir else None,
        json_path=args.json,
        gpu=args.gpu,
        backend=not args.no_backend,
        tolerance_total=total,
        tolerance_op=ops,
        calibration=args.calibration,
        calibrate=not args.no_calibrate,
        warmup=not args.no_warmup,
        verbose=args.verbose,
        session=dict(_parse_setting(x) for x in args.set),
        cpus=_parse_cpus(args.cpus) if args.cpus is not None else None,
        time_limit=args.time_limit,
        twin=args.twin,
        turn_ms=args.turn_ms,
        speed_probe=not args.no_speed_probe,
        merge=tuple(args.merge),
    )


def _parse_cpus(text: str) -> frozenset[int]:
    """``--cpus``: ``2-5``, ``0,2,4`` or a mix, each CPU one this process may run on."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise RLScopeError(f"validate: --cpus wants a list like 2-5 or 0,2,4, got {text!r}") from None
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if not cpus or not cpus <= allowed:
        raise RLScopeError(
            f"validate: --cpus {text}: not CPUs this process may use ({_cpu_list(allowed) or 'none known'})"
        )
    return frozenset(cpus)


def _parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--set``: the value as JSON (numbers, true/false), else as a string."""
    import inspect

    from rlscope.session import Session

    key, sep, value = text.partition("=")
    known = [k for k in inspect.signature(Session.__init__).parameters if k not in ("self", "trace_dir")]
    if not sep or key not in known:
        raise RLScopeError(
            f"validate: --set wants KEY=VALUE with KEY one of {', '.join(known)}; got {text!r}"
        )
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


# the verdict's exit status (2: bad input, from rlscope's main; 130/143: interrupted)
EXIT_STATUS = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}


def main(argv: list[str]) -> int:
    """``rlscope validate``: 0 PASS, 1 FAIL, 3 INCONCLUSIVE (the verdict of the corrected profile)."""
    started = time.perf_counter()
    opts = parse_args(argv)
    if opts.merge:
        from rlscope.overhead.validate.merge import load, merge

        return _finish(opts, merge([load(f) for f in opts.merge], list(opts.merge)))

    def log(msg: str) -> None:
        print(f"rlscope validate: {msg}", file=sys.stderr, flush=True)

    import signal

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if opts.calibration is None and opts.calibrate:
            from rlscope.overhead.calibrate.cli import ensure_calibration

            # a machine's first calibration counts against --time-limit and is the quick one there: a
            # full one took minutes on a noisy H100 and left no time for a single repetition
            ensure_calibration(quick=opts.time_limit is not None)
        result = validate(opts, log, started)
    except Terminated:
        print("rlscope validate: terminated (SIGTERM) before a repetition was done", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("rlscope validate: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return _finish(opts, result)


def _finish(opts: Options, result: dict[str, Any]) -> int:
    """Write the result (``--json``), show it, and the exit status of its verdict."""
    if opts.json_path:
        try:
            Path(opts.json_path).write_text(json.dumps(result, indent=1) + "\n")
        except OSError as e:
            raise RLScopeError(f"{opts.json_path}: cannot write: {e.strerror or e}") from None
    render(result)
    if result.get("signal"):  # cut short: the figures so far are written and shown, the exit says why
        return 143 if result["signal"] == "SIGTERM" else 130
    return EXIT_STATUS[result["verdict"]["status"]]
