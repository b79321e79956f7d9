"""``rlscope``: the main command.

rlscope demo [--seconds 20] [--device auto|cpu|cuda] [--trace-dir D] [--html FILE] [--json FILE]
rlscope run [--trace-dir D] [--gpu MODE] [--no-backend] [--detail SPEC] [--no-analyze] [--live]
            [--] python train.py ARGS...
rlscope calibrate [--out FILE] [--rounds 5] [--quick] [--no-gpu]
rlscope validate [--reps 5] [--max-reps N] [--time-limit S] [--trace-dir D] [--json FILE] [--gpu MODE]
                 [--no-backend] [--tolerance PCT] [--] python train.py ARGS...
    run your program unprofiled, under plain timers and profiled: is the corrected profile right?
rlscope top TRACE_DIR [--every 2] [--once]
    attach to a run being profiled and show where its time goes, refreshed (rlscope run --live: the
    same view while rlscope runs the program)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from rlscope.cli import live, options, warm
from rlscope.cli.analyze import SUBCOMMAND_HELP as ANALYZE_COMMANDS
from rlscope.cli.parser import EXIT_BAD_INPUT, Parser, command_list
from rlscope.cli.program import program_command
from rlscope.cli.supervise import DEFAULT_GRACE_S, run_program
from rlscope.errors import RLScopeError
from rlscope.runtime import BOOT_DIR
from rlscope.runtime.hooks import RUN_OPTIONS_ENV, RUN_PARENT_ENV, RUN_TRACE_DIR_ENV
from rlscope.text import printable
from rlscope.trace import detail, ownership

DEMO_TRACE_DIR = "rlscope-demo-trace"
RUN_TRACE_DIR = "rlscope-trace"


def _print_report(
    trace_dir: str,
    html: str | None,
    json_path: str | None,
    quiet: bool = False,
    correct: bool = True,
    verbose: bool = False,
) -> None:
    from rlscope.analysis import analyze
    from rlscope.cli.heap import keep_freed_memory, no_cycle_collection
    from rlscope.cli.output import report

    keep_freed_memory()  # this process's last work: the analysis
    with no_cycle_collection(process_ends=False):
        result = analyze(trace_dir, correct=correct, progress=not quiet, intervals=False)
        report(result, json_path=json_path, html_path=html, quiet=quiet, prog="rlscope", verbose=verbose)


def demo(argv: list[str]) -> int:
    p = Parser(
        prog="rlscope demo",
        description="Profile the bundled PPO CartPole workload, then print and write its breakdown."
        " The first run on a machine also calibrates rlscope's overhead, once.",
    )
    options.seconds(p, "--seconds", 20.0, "how long to train (default 20)")
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where the policy runs (default auto: cuda when a GPU is available)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed of the training run (default 1)")
    options.trace_dir_out(p, DEMO_TRACE_DIR)
    options.html_out(p, "the HTML report here", default="rlscope-demo-report.html")
    options.json_out(p, "the summary")
    options.raw(p, "report raw figures (no calibration, no correction)")
    options.verbose(p)
    args = p.parse_args(argv)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RLScopeError("--device cuda: no CUDA GPU is available (use --device cpu or auto)")
    import rlscope
    from rlscope.workloads import ppo_cartpole

    if not args.raw:
        from rlscope.overhead.calibrate.cli import ensure_calibration

        ensure_calibration()
    # its own trace directory, locked for the demo's life (a previous demo's trace replaced)
    trace_dir = ownership.claim(args.trace_dir or DEMO_TRACE_DIR, "rlscope demo", args.trace_dir is None).path
    print(f"rlscope demo: training PPO on CartPole-v1 for {args.seconds:g} s (device {args.device}) ...")
    with rlscope.profile(trace_dir):
        result = ppo_cartpole.train(
            total_timesteps=200_000, seed=args.seed, device=args.device, time_limit_s=args.seconds
        )
    print(
        f"rlscope demo: {result['global_step']} steps, {len(result['episode_returns'])} episodes,"
        f" mean return of the last 20: {result['final_mean_return']:.1f}"
    )
    _print_report(str(trace_dir), args.html, args.json, correct=not args.raw, verbose=args.verbose)
    print(f"trace: {trace_dir}   report: {args.html}")
    return 0


def run(argv: list[str]) -> int:
    p = Parser(
        prog="rlscope run",
        description="Profile an unmodified program: rlscope run [options] [--] python train.py ARGS..."
        " Every Python process it starts is profiled (gymnasium environments count as simulator time);"
        " at the end the breakdown is printed. Exits with the program's exit status.",
    )
    options.trace_dir_out(p, RUN_TRACE_DIR)
    options.gpu(p)
    options.no_backend(p)
    p.add_argument(
        "--no-auto-ops",
        action="store_true",
        help="do not find simulation, inference and backprop (and the rollout/update phases of"
        " stable-baselines3, TorchRL, RLlib) in the program on their own; only its own scopes count",
    )
    options.seconds(
        p, "--flush-interval", 1.0, "how often each process writes its events to the trace (default 1)"
    )
    options.detail(p)
    options.stack_hz(p)
    p.add_argument("--no-analyze", action="store_true", help="do not print the breakdown at the end")
    options.html_out(p)
    options.json_out(p, "the summary")
    options.verbose(p)
    options.grace(p, DEFAULT_GRACE_S)
    live.add_run_options(p)
    options.program(p)
    args = p.parse_args(argv)
    command = program_command(args.command, "rlscope run -- python train.py ...")
    # locked for the run's life (the program's processes write under its token); a previous
    # trace there is replaced, what rlscope did not write is never touched
    claimed = ownership.claim(
        Path(args.trace_dir or RUN_TRACE_DIR).resolve(), "rlscope run", args.trace_dir is None
    )
    trace_dir = claimed.path
    run_options = {
        "flush_interval": args.flush_interval,
        "backend": not args.no_backend,
        "gpu": False if args.gpu == "off" else args.gpu,
        "auto_ops": not args.no_auto_ops,
        "detail": args.detail,
        "stack_hz": args.stack_hz,
    }
    if not (BOOT_DIR / "sitecustomize.py").is_file():
        raise RLScopeError(f"{BOOT_DIR / 'sitecustomize.py'} is missing: reinstall rlscope")
    env = dict(os.environ)
    env.pop(RUN_PARENT_ENV, None)  # this program is the run's first process
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if x)
    env[RUN_TRACE_DIR_ENV] = str(trace_dir)
    env[RUN_OPTIONS_ENV] = json.dumps(run_options)
    # every process of the run lays its detail stretches from this one origin (rlscope/trace/detail.py)
    env[detail.ORIGIN_ENV] = str(time.perf_counter_ns())
    # the report's imports while the program runs (rlscope/cli/warm.py)
    warming = warm.start() if not args.no_analyze else None
    try:  # in a process group of its own, which gets the signals rlscope gets (rlscope/cli/supervise.py)
        with live.during_run(trace_dir, args):
            code = run_program(command, env, grace_s=args.grace)
    except FileNotFoundError:
        raise RLScopeError(f"{command[0]}: command not found") from None
    finally:
        if warming is not None:
            warm.finish(warming)
    print(f"rlscope run: exit status {code}; trace in {printable(trace_dir)}", file=sys.stderr)
    if not args.no_analyze and trace_dir.exists():
        try:
            _print_report(str(trace_dir), args.html, args.json, verbose=args.verbose)
        except KeyboardInterrupt:  # Ctrl-C here stops the analysis only: the trace is on disk
            where = printable(trace_dir)
            print(
                f"rlscope run: analysis interrupted; the trace is in {where}"
                f" (rlscope-analyze {shlex.quote(where)})",
                file=sys.stderr,
            )
            return 130
        except Exception as e:  # the program's status is what `rlscope run` reports, whatever
            print(f"rlscope run: warning: no analysis: {printable(e)}", file=sys.stderr)
    return code


def calibrate(argv: list[str]) -> int:
    from rlscope.overhead.calibrate.cli import main as calibrate_main

    return calibrate_main(argv)


def validate(argv: list[str]) -> int:
    from rlscope.overhead.validate import main as validate_main

    return validate_main(argv)


def share_check(argv: list[str]) -> int:
    from rlscope.cli import share_check  # k copies on one GPU against the co-location estimate

    return share_check.main(argv)


COMMANDS = {
    "demo": demo,
    "run": run,
    "top": live.top,
    "calibrate": calibrate,
    "validate": validate,
    "share-check": share_check,
}
COMMAND_HELP = {
    "demo": "profile the bundled PPO CartPole workload for 20 s and show where its time went",
    "run": "profile an unmodified program: rlscope run [options] -- python train.py ...",
    "top": "attach to a run being profiled and show where its time goes, refreshed",
    "calibrate": "measure rlscope's own cost per event here (used to correct traces)",
    "validate": "check your program's corrected profile against the program unprofiled",
    "share-check": "run k copies of your program on one GPU and compare with rlscope-analyze share",
}


def _parser() -> Parser:
    """``rlscope --help``: what rlscope is, its commands and where to go next (dispatch is in main)."""
    from rlscope._version import __version__

    p = Parser(
        prog="rlscope",
        usage="rlscope [-h] [--version] COMMAND [options]",
        description="Profile a reinforcement-learning program across Python, the simulator, the ML"
        " backend, CUDA and the GPU, and say where its time went per operation, corrected for"
        " rlscope's own overhead.",
        epilog=command_list("commands:", COMMAND_HELP)
        + "\n\n"
        + command_list(
            "examples:",
            {
                "rlscope demo": "try it on the bundled PPO workload",
                "rlscope run -- python train.py": "profile your program as it is",
                "rlscope-analyze rlscope-trace": "the breakdown of a trace again (--html, --json)",
                "rlscope COMMAND --help": "a command's options",
                "rlscope-analyze --help": f"the analysis commands ({', '.join(ANALYZE_COMMANDS)})",
            },
        ),
    )
    p.add_argument("--version", action="version", version=f"rlscope {__version__}")
    p.add_argument("command", metavar="COMMAND", choices=list(COMMANDS), help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # no command: the help, and the status of a bad call
        _parser().print_help()
        return EXIT_BAD_INPUT
    if argv[0] not in COMMANDS:  # --help, --version, or one line and status 2
        p = _parser()
        try:
            if argv[0] in ("-h", "--help", "--version"):
                p.parse_args(argv[:1])
            what = "option" if argv[0].startswith("-") else "command"
            p.error(f"unknown {what} {argv[0]!r}; the commands are {', '.join(COMMANDS)}")
        except SystemExit as e:
            return int(e.code or 0)
    try:
        return COMMANDS[argv[0]](argv[1:])
    except RLScopeError as e:
        print(f"rlscope: error: {printable(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
