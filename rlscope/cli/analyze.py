"""``rlscope-analyze``: turn a trace directory into a breakdown table, JSON and HTML.

    rlscope-analyze TRACE_DIR [--json FILE] [--html FILE] [--window START:END] [-q] [-v]
    rlscope-analyze check TRACE_DIR
    rlscope-analyze diff A B [--json FILE] [--html FILE]
    rlscope-analyze export TRACE_DIR [--chrome out.json[.gz]] [--window START:END] [--csv DIR]
    rlscope-analyze share TRACE_DIR [-k 1,2,4] [--json FILE]
    rlscope-analyze bench-sim [--quick] ...   (the simulator benchmark)

Bad input gets one line on stderr, ``rlscope-analyze: error: ...``, and exit status 2; never a
traceback. The options shared with other commands are defined in :mod:`rlscope.cli.options`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from rlscope.cli import options
from rlscope.cli.heap import keep_freed_memory, no_cycle_collection
from rlscope.cli.output import write_text
from rlscope.cli.pandas_probe import import_pyarrow, skip_pandas_probe
from rlscope.cli.parser import EXIT_BAD_INPUT, Parser, command_list
from rlscope.errors import RLScopeError
from rlscope.text import printable

PROG = "rlscope-analyze"

SUBCOMMAND_HELP = {
    "check": "validate a trace directory; one line per finding, status 2 on an error",
    "diff": "compare two traces, B - A, per operation and category, each change against its noise",
    "export": "write a trace as a Chrome trace (Perfetto, chrome://tracing) and/or CSV tables",
    "share": "estimate how many copies of the traced job fit one GPU, and what binds",
    "bench-sim": "benchmark the bundled CartPole and chain simulators (gymnasium, torch, compiled, fused)",
}


def _analyze_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        usage=f"{PROG} [options] TRACE_DIR\n       {PROG} {{{','.join(SUBCOMMAND_HELP)}}} ...",
        description="Where did the time go? Per-operation breakdown of an rlscope trace: a table on the"
        " terminal, and on request JSON and a self-contained HTML report. Figures are corrected for"
        " rlscope's own overhead unless --raw is given.",
        epilog=command_list(
            f"other commands (run '{PROG} COMMAND --help' for their options):", SUBCOMMAND_HELP
        ),
    )
    options.trace_dir(p)
    options.json_out(p, "the summary (shape: docs/trace-format.md)")
    options.html_out(p)
    options.window(p)
    options.calibration(p)
    options.raw(p)
    options.workers(p)
    options.ray(p)
    options.detail_budget(p)
    p.add_argument(
        "--what-if",
        action="store_true",
        help="also print the what-if table: the run's wall replayed from its critical path with each top"
        " operation (whole, by category, its GPU work) and each role 2, 10 and infinitely many times"
        " faster; time that overlapped other work or waited on it is not counted twice (docs/what-if.md)",
    )
    options.quiet(p)
    options.verbose(p)
    return p


def _check(argv: list[str]) -> int:
    from rlscope.trace.check import check_trace

    p = Parser(
        prog=f"{PROG} check",
        description="Validate a trace directory as the analysis reads it: files readable, timestamps in"
        " order, operations that begin and end, names present. An error is damage the analysis repairs"
        " (dropping or changing rows, as it says) or a trace it cannot read. Errors and warnings go to"
        " stderr, one line each; 'ok' or the notes to stdout; exit status 2 when any finding is an"
        " error.",
    )
    options.trace_dir(p, help="trace directory to check")
    args = p.parse_args(argv)
    findings = check_trace(args.trace_dir)
    for f in findings:
        if f.level in ("error", "warning"):
            print(f"{PROG}: {printable(f)}", file=sys.stderr)
        else:
            print(printable(f))
    if not any(f.level in ("error", "warning") for f in findings):
        print(f"{printable(args.trace_dir)}: ok")
    return EXIT_BAD_INPUT if any(f.level == "error" for f in findings) else 0


def _diff(argv: list[str]) -> int:
    from rlscope.analysis import analyze
    from rlscope.analysis.diff import diff_results
    from rlscope.viz.diff import diff_html, render_diff

    p = Parser(
        prog=f"{PROG} diff",
        description="Compare two traces (B - A): per operation, A and B total time, the change with its"
        " uncertainty (the spread of the operation's calls in each trace and the overhead correction's),"
        " whether it is beyond noise, and the category that moved most; both traces are corrected for"
        " overhead as rlscope-analyze does.",
    )
    options.trace_dir(p, dest="a", metavar="A", help="baseline trace directory")
    options.trace_dir(p, dest="b", metavar="B", help="trace directory to compare with it")
    options.json_out(p, "the diff")
    options.html_out(p, "an HTML page of the changes, stacked by category")
    options.calibration(p)
    options.raw(p)
    options.detail_budget(p)
    options.quiet(p)
    args = p.parse_args(argv)
    kw = {
        "calibration": args.calibration,
        "correct": not args.raw,
        "intervals": False,
        "detail_budget": args.detail_budget,
    }
    d = diff_results(analyze(args.a, **kw), analyze(args.b, **kw))
    if args.json:
        write_text(args.json, json.dumps(d, indent=2))
    if args.html:
        write_text(args.html, diff_html(d))
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
    """Run the command ``argv`` (None: this process's own command line, the process ending with it)."""
    own = argv is None
    argv = sys.argv[1:] if own else list(argv)
    if argv and argv[0] == "bench-sim":  # runs torch and gymnasium workloads: the collector stays on
        return _main(argv)
    with no_cycle_collection(process_ends=own):
        return _main(argv)


def _main(argv: list[str]) -> int:
    import_pyarrow()  # without cloudpickle, which the analysis does not use (rlscope/cli/pandas_probe.py)
    keep_freed_memory()
    skip_pandas_probe()  # the analysis uses no pandas: not imported (rlscope/cli/pandas_probe.py)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return SUBCOMMANDS[argv[0]](argv[1:])
        args = _analyze_parser().parse_args(argv)
        from rlscope.analysis import analyze
        from rlscope.cli.output import report

        window = None
        if args.window:
            from rlscope.analysis.intervals import parse_window

            window = parse_window(args.window)
        result = analyze(
            args.trace_dir,
            calibration=args.calibration,
            window=window,
            correct=not args.raw,
            progress=not args.quiet,
            workers=args.workers,
            ray_address=args.ray,
            intervals=False,  # the table, JSON and HTML need no interval tables (exports do)
            detail_budget=args.detail_budget,
        )
        report(result, json_path=args.json, html_path=args.html, quiet=args.quiet, verbose=args.verbose)
        if args.what_if and not args.quiet:
            from rich.console import Console

            from rlscope.viz.whatif import render_table

            render_table(result.summary, Console())
        return 0
    except RLScopeError as e:
        print(f"{PROG}: error: {printable(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # the last safety net: a damaged trace the reader's checks did not foresee
        if "-v" in argv or "--verbose" in argv:
            traceback.print_exc()
        print(f"{PROG}: error: {printable(unexpected_error_line(argv, e))}", file=sys.stderr)
        return EXIT_BAD_INPUT


def unexpected_error_line(argv: list[str], e: BaseException) -> str:
    """The one line said for an exception the analysis did not expect: a trace damaged in a way its
    checks (rlscope/trace/validate.py) do not catch, or a bug; never a traceback unless ``-v``."""
    text = str(e).strip()
    what = f"{type(e).__name__}: {text.splitlines()[0][:200]}" if text else type(e).__name__
    args = argv[1:] if argv and argv[0] in SUBCOMMANDS else argv
    dirs = [a for a in args if not a.startswith("-") and os.path.isdir(a)]
    if not dirs:
        return f"unexpected {what} (-v shows the traceback)"
    where = " or ".join(dirs[:2])
    return (
        f"cannot analyze {where}: {what} (a damaged trace? '{PROG} check {dirs[0]}' lists what is wrong;"
        " -v shows the traceback)"
    )


if __name__ == "__main__":
    sys.exit(main())
