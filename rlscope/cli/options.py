"""The options rlscope's commands share, defined once: one name, one meaning, one help text.

Every command adds what it takes with these (``rlscope``, ``rlscope-analyze`` and their subcommands),
so ``--json`` writes JSON everywhere, ``TRACE_DIR`` names a trace to read everywhere, ``--trace-dir``
names where a trace is written, and numbers are checked where they are parsed (a bad value is
argparse's one-line error and exit status 2, see :class:`rlscope.cli.parser.Parser`).

    p = Parser(prog="rlscope-analyze diff", ...)
    options.trace_dir(p, dest="a", metavar="A", help="baseline trace directory")
    options.json_out(p, "the diff")
    options.workers(p)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from rlscope.collectors import gpu

__all__ = [
    "GPU_MODES",
    "calibration",
    "count",
    "detail_budget",
    "gpu",
    "grace",
    "html_out",
    "json_out",
    "no_backend",
    "positive_float",
    "positive_int",
    "program",
    "quiet",
    "raw",
    "ray",
    "seconds",
    "trace_dir",
    "trace_dir_out",
    "verbose",
    "window",
    "workers",
]

TRACE_HELP = "trace directory written by rlscope.profile / rlscope run"
STACK_HZ = 100.0  # rlscope run's stack samples a second (collectors/stacks.py)
GPU_MODES = (*gpu.GPU_MODES, "off")  # the session's modes (collectors/gpu.py), and none


def _number(kind: Callable[[str], Any], name: str, low: float, strict: bool) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None
        if value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"must be {'>' if strict else '>='} {low:g}, got {text}")
        return value

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1."""
    return _number(int, "an integer", 1, strict=False)(text)


def positive_float(text: str) -> float:
    """An argparse ``type``: a number > 0."""
    return _number(float, "a number", 0, strict=True)(text)


def count(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low``."""
    return _number(int, "an integer", low, strict=False)


def trace_dir(
    p: argparse.ArgumentParser, dest: str = "trace_dir", metavar: str = "TRACE_DIR", help: str = TRACE_HELP
) -> argparse.Action:
    """The trace a command reads: a positional ``TRACE_DIR``."""
    return p.add_argument(dest, metavar=metavar, help=help)


def trace_dir_out(p: argparse.ArgumentParser, default: str) -> argparse.Action:
    """Where a command that runs a program writes its trace: ``--trace-dir DIR``.

    Parsed as None when not given: the default directory may then give way to a numbered one next to
    it (rlscope/trace/ownership.py), a directory the user named may not.
    """
    return p.add_argument(
        "--trace-dir",
        default=None,
        metavar="DIR",
        help=f"write the trace here (default {default}); a previous rlscope trace there is replaced,"
        " a directory that holds anything else, or that another run is writing, is refused",
    )


def json_out(
    p: argparse.ArgumentParser, what: str = "the summary", default: str | None = None
) -> argparse.Action:
    return p.add_argument("--json", metavar="FILE", default=default, help=f"write {what} as JSON")


def html_out(
    p: argparse.ArgumentParser, what: str = "an interactive HTML report", default: str | None = None
) -> argparse.Action:
    tail = f" (default {default})" if default else ""
    return p.add_argument("--html", metavar="FILE", default=default, help=f"write {what}{tail}")


def quiet(
    p: argparse.ArgumentParser, help: str = "print only errors (the warnings stay in --json)"
) -> argparse.Action:
    return p.add_argument("-q", "--quiet", action="store_true", help=help)


def verbose(
    p: argparse.ArgumentParser, help: str = "also print how the overhead correction was made"
) -> argparse.Action:
    return p.add_argument("-v", "--verbose", action="store_true", help=help)


def window(
    p: argparse.ArgumentParser,
    help: str = "timeline window of the HTML report, seconds since the run start (either side may be"
    " empty); default: a few iterations of the outermost repeating operation",
) -> argparse.Action:
    return p.add_argument("--window", metavar="START:END", help=help)


def calibration(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument(
        "--calibration",
        metavar="FILE",
        help="overhead calibration to use (default: the one embedded in the trace when it was recorded,"
        " else the one `rlscope calibrate` saved for the trace's machine and software stack)",
    )


def raw(
    p: argparse.ArgumentParser, help: str = "report raw figures: no overhead correction"
) -> argparse.Action:
    return p.add_argument("--raw", action="store_true", help=help)


def workers(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="analyze the processes of the trace in N local worker processes (same result as serial)",
    )


def ray(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="analyze the processes in Ray tasks on the cluster at ADDRESS ('auto', 'local' or host:port;"
        " needs rlscope[ray])",
    )


def gpu(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument(
        "--gpu",
        default="auto",
        choices=list(GPU_MODES),
        help="how to record GPU kernels and copies (default auto: the native CUPTI recorder, else"
        " Kineto; off: no GPU trace)",
    )


def no_backend(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument("--no-backend", action="store_true", help="do not record time inside torch ops")


def seconds(p: argparse.ArgumentParser, flag: str, default: float | None, help: str) -> argparse.Action:
    """A duration option (> 0), in seconds."""
    return p.add_argument(flag, type=positive_float, default=default, metavar="SECONDS", help=help)


def grace(p: argparse.ArgumentParser, default: float) -> argparse.Action:
    """How long a command that runs a program lets it end on a signal: ``--grace SECONDS``."""
    return p.add_argument(
        "--grace",
        type=positive_float,
        default=default,
        metavar="SECONDS",
        help="SIGTERM, SIGHUP and SIGINT sent to rlscope go to the program's process group; after that"
        f" long, what still runs of it is killed with SIGKILL (default {default:g})",
    )


def _usage_error(parse: Callable[[str], Any], text: str) -> Any:
    """``parse(text)``, its RLScopeError made argparse's usage error (one line, exit status 2)."""
    from rlscope.errors import RLScopeError

    try:
        return parse(text)
    except RLScopeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def detail_schedule(text: str) -> str:
    """``--detail``'s value, checked now (a bad one is a usage error, not a failure in the program)."""
    from rlscope.trace.detail import DetailSchedule

    return _usage_error(lambda t: DetailSchedule.parse(t).to_env(), text)


def detail(p: argparse.ArgumentParser) -> argparse.Action:
    """When a program's full event detail is kept: ``--detail SPEC`` (rlscope/trace/detail.py)."""
    from rlscope.trace.detail import DEFAULT_SPEC, STRETCH_ROWS

    return p.add_argument(
        "--detail",
        type=detail_schedule,
        default=DEFAULT_SPEC,
        metavar="FIRST[,EVERY,LENGTH]|all",
        help="keep every event (timeline, backend ops, GPU work) for the first FIRST of the run, then for"
        f" LENGTH every EVERY, a stretch ending early once it holds {STRETCH_ROWS / 1e3:g}k rows; the rest"
        " of the run is kept as aggregates, which the whole-run figures come from. 'all' keeps every"
        f" event of the run (default {DEFAULT_SPEC}; units ms, s, m, h, or 'it': iterations of the"
        " outermost operation, e.g. 200it,5000it,50it)",
    )


def rate_hz(text: str) -> float:
    """An argparse ``type``: a finite rate >= 0 (0: off)."""
    value = _number(float, "a rate in Hz", 0, strict=False)(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite rate, got {text}")
    return value


def stack_hz(p: argparse.ArgumentParser) -> argparse.Action:
    """How often each process's Python stacks are sampled: ``--stack-hz HZ`` (collectors/stacks.py)."""
    return p.add_argument(
        "--stack-hz",
        type=rate_hz,
        default=STACK_HZ,
        metavar="HZ",
        help="sample every Python thread's stack HZ times a second, so [unannotated] and each operation's"
        f" Python time are broken down by function and source line (default {STACK_HZ:g}; 0: off)",
    )


def detail_budget_rows(text: str) -> int | str | None:
    """``--detail-budget``'s value: rows, 'auto', or None for 'all' (rlscope/trace/budget.py)."""
    from rlscope.trace.budget import parse

    return _usage_error(parse, text)


def detail_budget(p: argparse.ArgumentParser) -> argparse.Action:
    """How much of each process's detail the analysis holds: ``--detail-budget auto|ROWS|all``."""
    from rlscope.trace.budget import AUTO, AUTO_ROWS

    return p.add_argument(
        "--detail-budget",
        type=detail_budget_rows,
        default=AUTO,
        metavar="auto|ROWS|all",
        help="analyze at most this many event rows (events, torch ops, GPU records) of each process,"
        " which bounds the analysis's memory; the aggregates stand for the detail left out, and the"
        " trace keeps it. 'auto' (default): as many as the process's first detail stretch holds, at"
        f" most {AUTO_ROWS / 1e6:g}M, so a long run's analysis takes no more memory than a short one's;"
        " ROWS: e.g. 500k, 4M; 'all': every row",
    )


def program(p: argparse.ArgumentParser) -> argparse.Action:
    """The program a wrapper command runs: everything after the options (``--`` optional)."""
    return p.add_argument(
        "command", nargs=argparse.REMAINDER, help="the program to run (python train.py ARGS...)"
    )
