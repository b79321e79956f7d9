"""``rlscope top`` and ``rlscope run --live``: the live view's loop, from a trace being written to a
terminal or a log.

``rlscope top TRACE_DIR`` attaches to a run from another terminal: a refreshed view (rich ``Live``)
on a terminal, one line per refresh otherwise, until every process of the run has ended
(:attr:`rlscope.trace.follow.TraceFollower.ended`) or Ctrl-C. ``rlscope run --live`` shows the same
view from the parent that supervises the program, on stderr: on a terminal in a region kept at its
bottom (:class:`rlscope.viz.live.PinnedRegion`: the program's own output scrolls above it,
untouched), otherwise one line every ``--live-every`` seconds and a last one as the program ends;
it stops when the program ends, before the end-of-run analysis.

Either way the view is read from the trace's files in rlscope's own process: what it costs the job
is the reading of the bytes written since the last refresh.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rlscope.cli import options
from rlscope.cli.parser import Parser
from rlscope.text import printable

if TYPE_CHECKING:
    from rlscope.analysis.live import LiveView

__all__ = ["LIVE_EVERY_S", "TOP_EVERY_S", "Watch", "add_run_options", "during_run", "top"]

TOP_EVERY_S = 2.0  # rlscope top's refresh
LIVE_EVERY_S = {True: 2.0, False: 10.0}  # rlscope run --live's: on a terminal, and one line to a log


class Watch:
    """A trace followed and its live figures: each :meth:`refresh` reads what came since the last."""

    def __init__(self, trace_dir: str | Path, every_s: float) -> None:
        from rlscope.analysis.live import LiveFigures
        from rlscope.trace.follow import TraceFollower

        self.follower = TraceFollower(trace_dir)
        self.figures = LiveFigures(every_s)
        self.trace = printable(self.follower.path)

    def refresh(self) -> tuple[LiveView, list[str]]:
        """The view now, and the warnings met since the last refresh."""
        news = self.follower.poll()
        self.figures.update(news)
        return self.figures.view(self.follower.ended), self.follower.take_warnings()


def _warn(prog: str, warnings: list[str]) -> None:
    for w in warnings:
        print(f"{prog}: warning: {printable(w)}", file=sys.stderr, flush=True)


def top(argv: list[str]) -> int:
    p = Parser(
        prog="rlscope top",
        description="Attach to a run being profiled (from another terminal) and show where its time goes,"
        " refreshed: per phase and operation, seconds and share of main-thread time, calls and calls/s;"
        " the CPU categories, GPU busy (NVML) and steps/s; each for the last interval and the run so"
        " far, per role. Exits when every process of the run has ended, or on Ctrl-C. Without a"
        " terminal it prints one line per refresh.",
    )
    options.trace_dir(p, help="trace directory a run is writing (rlscope run, rlscope.profile)")
    options.seconds(p, "--every", TOP_EVERY_S, f"refresh every SECONDS (default {TOP_EVERY_S:g})")
    p.add_argument("--once", action="store_true", help="print the view as it is now, once, and exit")
    args = p.parse_args(argv)
    watch = Watch(args.trace_dir, args.every)  # a path that is no trace: RLScopeError, one line
    try:
        if args.once:
            return _once(watch)
        if sys.stdout.isatty():
            return _top_live(watch, args.every)
        return _top_lines(watch, args.every)
    except KeyboardInterrupt:
        return 0


def _once(watch: Watch) -> int:
    from rich.console import Console

    from rlscope.viz import live

    view, warnings = watch.refresh()
    _warn("rlscope top", warnings)
    Console().print(live.renderable(view, watch.trace))
    return 0


def _top_live(watch: Watch, every: float) -> int:
    """A rich ``Live`` on stdout; warnings go above it (``Live`` redirects this process's stderr)."""
    from rich.console import Console
    from rich.live import Live

    from rlscope.viz import live

    view, warnings = watch.refresh()
    with Live(live.renderable(view, watch.trace), console=Console(), auto_refresh=False) as display:
        while True:
            _warn("rlscope top", warnings)
            display.update(live.renderable(view, watch.trace), refresh=True)
            if view.ended:
                return 0
            time.sleep(every)
            view, warnings = watch.refresh()


def _top_lines(watch: Watch, every: float) -> int:
    from rlscope.viz import live

    said = -1  # the flushes read as of the last line: a line says something new
    while True:
        view, warnings = watch.refresh()
        _warn("rlscope top", warnings)
        if view.flushes > said or view.ended:
            print(live.line(view), flush=True)
            said = view.flushes
        if view.ended:
            return 0
        time.sleep(every)


# -- rlscope run --live --------------------------------------------------------------------------------


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``rlscope run``'s ``--live`` and ``--live-every``."""
    p.add_argument(
        "--live",
        action="store_true",
        help="show where the time goes while the program runs (rlscope top's view, on stderr): on a"
        " terminal in its last lines, the program's output scrolling above; otherwise one line every"
        " --live-every seconds",
    )
    options.seconds(
        p,
        "--live-every",
        None,
        f"with --live, refresh every SECONDS (default {LIVE_EVERY_S[True]:g} on a terminal,"
        f" {LIVE_EVERY_S[False]:g} without one)",
    )


@contextlib.contextmanager
def during_run(trace_dir: Path, args: argparse.Namespace) -> Iterator[None]:
    """With ``--live``, the live view on stderr while the body runs the program; stopped (its region
    cleared) before the body's end returns. A failure of the view is one line; the program goes on."""
    if not args.live:
        yield
        return
    tty = sys.stderr.isatty()
    every = args.live_every or LIVE_EVERY_S[tty]
    stop = threading.Event()
    thread = threading.Thread(
        target=_watch_run, args=(trace_dir, every, stop, tty), name="rlscope-live", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10.0)


def _watch_run(trace_dir: Path, every: float, stop: threading.Event, tty: bool) -> None:
    from rlscope.viz import live

    region = live.PinnedRegion(sys.stderr.fileno()) if tty else None
    said = 0  # the flushes read as of the last line: a line says something new
    try:
        watch = Watch(trace_dir, every)
        while True:
            last = stop.wait(every)  # the program ended: one more look, for the log's last line
            view, warnings = watch.refresh()
            _warn("rlscope run", warnings)  # on a terminal, it scrolls above the region like the program's
            if region is not None and not last:
                cols, _ = region.size()
                region.draw(live.text(view, watch.trace, width=cols, color=True, compact=True).splitlines())
            elif region is None and view.flushes > said:
                print(live.line(view), file=sys.stderr, flush=True)
                said = view.flushes
            if last:
                return
    except Exception as e:  # the view is a convenience: its failure never stops the run
        print(f"rlscope run: the live view stopped: {printable(e)}", file=sys.stderr, flush=True)
    finally:
        if region is not None:
            region.close()
