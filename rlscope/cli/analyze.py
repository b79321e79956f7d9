"""``rlscope-analyze``: turn a trace directory into a breakdown table, JSON and HTML.

    rlscope-analyze TRACE_DIR [--json FILE] [--html FILE] [--window START:END] [--quiet]
    rlscope-analyze check TRACE_DIR
    rlscope-analyze diff A B [--json FILE] [--html FILE]
    rlscope-analyze export TRACE_DIR [--chrome out.json[.gz]] [--window START:END] [--csv DIR]
    rlscope-analyze bench-sim [--quick] ...   (the simulator benchmark)

Bad input gets one line on stderr and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlscope.cli.parser import Parser, command_list
from rlscope.errors import RLScopeError

EXIT_BAD_INPUT = 2


def _write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text + "\n")
    except OSError as e:
        raise RLScopeError(f"{path}: cannot write: {e.strerror or e}") from None


SUBCOMMAND_HELP = {
    "check": "validate a trace directory; one line per finding, status 2 on an error",
    "diff": "compare two traces, B - A, per operation and category (table, --json, --html)",
    "export": "write a trace as a Chrome trace (Perfetto, chrome://tracing) and/or CSV tables",
    "bench-sim": "benchmark the bundled CartPole and chain simulators (gymnasium, torch, compiled, fused)",
}


def _analyze_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="rlscope-analyze",
        usage="rlscope-analyze [options] TRACE_DIR\n       rlscope-analyze {check,diff,export,bench-sim} ...",
        description="Where did the time go? Per-operation breakdown of an rlscope trace: a table on the"
        " terminal, and on request JSON and a self-contained HTML report. Figures are corrected for"
        " rlscope's own overhead unless --raw is given.",
        epilog=command_list(
            "other commands (run 'rlscope-analyze COMMAND --help' for their options):", SUBCOMMAND_HELP
        ),
    )
    p.add_argument(
        "trace_dir", metavar="TRACE_DIR", help="trace directory written by rlscope.profile / rlscope run"
    )
    p.add_argument("--json", metavar="FILE", help="write the summary as JSON (shape: docs/trace-format.md)")
    p.add_argument("--html", metavar="FILE", help="write an interactive HTML report")
    p.add_argument(
        "--window",
        metavar="START:END",
        help="timeline window of the HTML report, seconds since the run start (either side may be empty);"
        " default: a few iterations of the outermost repeating operation",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="overhead calibration to use (default: the one embedded in the trace when it was recorded,"
        " else the one `rlscope calibrate` saved for the trace's machine and software stack)",
    )
    p.add_argument("--raw", action="store_true", help="report raw figures: no overhead correction")
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="analyze the processes of the trace in N local worker processes (same result as serial)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="analyze the processes in Ray tasks on the cluster at ADDRESS ('auto', 'local' or host:port;"
        " needs rlscope[ray])",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the table")
    return p


def _check(argv: list[str]) -> int:
    from rlscope.trace.check import check_trace

    p = Parser(
        prog="rlscope-analyze check",
        description="Validate a trace directory: files readable, timestamps in order, operations that"
        " begin and end, names present. Prints one line per finding, or 'ok'; exit status 2 when any"
        " finding is an error.",
    )
    p.add_argument("trace_dir", metavar="TRACE_DIR", help="trace directory to check")
    args = p.parse_args(argv)
    findings = check_trace(args.trace_dir)
    for f in findings:
        print(f)
    if not findings:
        print(f"{args.trace_dir}: ok")
    return EXIT_BAD_INPUT if any(f.level == "error" for f in findings) else 0


def _diff(argv: list[str]) -> int:
    from rlscope.analysis import analyze
    from rlscope.analysis.diff import diff_results
    from rlscope.viz.diff import diff_html, render_diff

    p = Parser(
        prog="rlscope-analyze diff",
        description="Compare two traces (B - A): per operation, A and B total time, the difference, the"
        " ratio and the category that moved most; both traces are corrected for overhead as"
        " rlscope-analyze does.",
    )
    p.add_argument("a", metavar="A", help="baseline trace directory")
    p.add_argument("b", metavar="B", help="trace directory to compare with it")
    p.add_argument("--json", metavar="FILE", help="write the diff as JSON")
    p.add_argument("--html", metavar="FILE", help="write an HTML page of the changes, stacked by category")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the table")
    args = p.parse_args(argv)
    d = diff_results(analyze(args.a, intervals=False), analyze(args.b, intervals=False))
    if args.json:
        _write_text(args.json, json.dumps(d, indent=2))
    if args.html:
        _write_text(args.html, diff_html(d))
    if not args.quiet:
        render_diff(d)
    return 0


def _export(argv: list[str]) -> int:
    from rlscope.cli import export

    return int(export.main(argv) or 0)


def _bench_sim(argv: list[str]) -> int:
    from rlscope.workloads import sim_benchmark

    return int(sim_benchmark.main(argv) or 0)


def _share(argv: list[str]) -> int:
    from rlscope.cli.share_check import share_main  # the co-location estimate (docs/sharing.md)

    return share_main(argv)


SUBCOMMANDS = {"check": _check, "diff": _diff, "export": _export, "bench-sim": _bench_sim, "share": _share}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return SUBCOMMANDS[argv[0]](argv[1:])
        args = _analyze_parser().parse_args(argv)
        from rlscope.analysis import analyze
        from rlscope.analysis.intervals import parse_window
        from rlscope.cli.output import report

        result = analyze(
            args.trace_dir,
            calibration=args.calibration,
            window=parse_window(args.window) if args.window else None,
            correct=not args.raw,
            progress=not args.quiet,
            workers=args.workers,
            ray_address=args.ray,
            intervals=False,  # the table, JSON and HTML need no interval tables (exports do)
        )
        report(result, json_path=args.json, html_path=args.html, quiet=args.quiet)
        return 0
    except RLScopeError as e:
        print(f"rlscope-analyze: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
