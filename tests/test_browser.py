"""The HTML report in a real browser: headless Chromium runs its JavaScript.

Asserts that the page logs nothing to the JavaScript console (no errors, no uncaught exceptions),
that every plotly chart rendered its SVG, and that the timeline's drawn bars are in proportion
to the operations' time at the default window, a narrow and a wide one, and zoomed in the page.
A screenshot is saved for humans: under tmp_path, and copied to ``$RLSCOPE_SCREENSHOT_DIR`` when
that is set.

Skipped when no Chromium is installed, except under ``CI`` (set): there a missing browser fails,
so CI cannot pass by skipping (``.ci/run`` installs Debian's ``chromium``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import rlscope
from rlscope.viz.colors import operation_color
from rlscope.viz.timeline import DIV_ID

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=5000",  # let the page's scripts (plotly) run to completion
]
TIMEOUT_S = 120

# Chromium logs every console message of a web page (console.log/warn/error and uncaught
# exceptions) as `[pid:tid:date:INFO:CONSOLE:LINE] "message", source: URL (LINE)`; it logs them
# all at INFO for ordinary pages (only its own chrome:// pages keep the level), so the level
# cannot be read back. The report has no reason to log anything: every console message fails.
_CONSOLE_RE = re.compile(r"^\[[^\]]*:CONSOLE[:(]\d+\)?\] ?(.*)$", re.MULTILINE)


def _chromium() -> str:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but no Chromium found (looked for {', '.join(CHROMIUM_NAMES)})")
    pytest.skip("no Chromium binary found (apt-get install chromium)")


def _run_chromium(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    user_dir = tmp / f"chromium-profile-{time.monotonic_ns()}"
    cmd = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={user_dir}", *extra, page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def console_messages(page: Path, tmp: Path) -> tuple[list[str], str]:
    """(the page's console messages, its DOM after the scripts ran)."""
    res = _run_chromium(page, tmp, "--enable-logging=stderr", "--v=0", "--dump-dom")
    assert res.returncode == 0, f"chromium exited {res.returncode}:\n{res.stderr[-3000:]}"
    return _CONSOLE_RE.findall(res.stderr), res.stdout


class _PlotCounter(HTMLParser):
    """Counts plotly containers, and those that hold a rendered ``main-svg``."""

    def __init__(self) -> None:
        super().__init__()
        self.containers = 0
        self.rendered = 0
        self._stack: list[tuple[str, int | None]] = []  # (tag, container index or None)
        self._done: set[int] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        index = None
        if tag == "div" and "plotly-graph-div" in classes:
            index = self.containers
            self.containers += 1
        if tag == "svg" and "main-svg" in classes:
            inside = [i for _, i in self._stack if i is not None]
            if inside and inside[-1] not in self._done:
                self._done.add(inside[-1])
                self.rendered += 1
        if tag not in _VOID:
            self._stack.append((tag, index))

    def handle_endtag(self, tag: str) -> None:
        for k in range(len(self._stack) - 1, -1, -1):  # tolerate unclosed children
            if self._stack[k][0] == tag:
                del self._stack[k:]
                return


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


def count_plots(dom: str) -> tuple[int, int]:
    """(plotly containers, containers with a rendered main-svg) in a dumped DOM."""
    parser = _PlotCounter()
    parser.feed(dom)
    parser.close()
    return parser.containers, parser.rendered


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report made by the real pipeline: a small profiled run, then ``rlscope-analyze --html``."""
    tmp = tmp_path_factory.mktemp("browser")
    trace = tmp / "trace"
    with rlscope.profile(str(trace), gpu=False), rlscope.phase("training"):
        for _ in range(5):
            with rlscope.scope("inference"):
                _busy(0.003)
            with rlscope.scope("backprop"):
                _busy(0.002)
    return _html_report(trace, tmp / "report.html")


def _html_report(trace: Path, out: Path) -> Path:
    """``rlscope-analyze TRACE --html OUT``, as a user runs it."""
    res = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", str(trace), "--html", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert out.exists()
    return out


def test_console_check_catches_errors(tmp_path: Path) -> None:
    """Positive control: the console parser sees console.error and uncaught (also late) exceptions."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!doctype html><html><body><p>control</p><script>"
        'console.error("control-console-error");'
        'setTimeout(() => { throw new Error("control-late-throw"); }, 500);'
        'throw new TypeError("control-throw");'
        "</script></body></html>\n"
    )
    messages, dom = console_messages(page, tmp_path)
    text = "\n".join(messages)
    assert "control-console-error" in text
    assert "Uncaught TypeError: control-throw" in text
    assert "Uncaught Error: control-late-throw" in text
    assert "<p>control</p>" in dom


_WORKER = """
import sys, time
import rlscope
with rlscope.profile(sys.argv[1], gpu=False):
    for _ in range(3):
        with rlscope.scope(sys.argv[2]):
            end = time.perf_counter() + 0.003
            while time.perf_counter() < end:
                pass
"""


@pytest.fixture(scope="module")
def multi_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """A report of a run of two processes (a learner and an actor, one session each), and their pids."""
    tmp = tmp_path_factory.mktemp("browser-multi")
    trace, script = tmp / "trace", tmp / "worker.py"
    script.write_text(_WORKER)
    for op in ("learner", "actor"):
        subprocess.run([sys.executable, str(script), str(trace), op], check=True, timeout=TIMEOUT_S)
    return _html_report(trace, tmp / "report.html"), sorted(
        int(p.name.split("-")[1]) for p in trace.glob("process-*")
    )


def test_multi_process_report_in_chromium(multi_report: tuple[Path, list[int]], tmp_path: Path) -> None:
    page, pids = multi_report
    assert len(pids) == 2
    messages, dom = console_messages(page, tmp_path)
    assert messages == [], "JavaScript console messages:\n" + "\n".join(messages)
    containers, rendered = count_plots(dom)
    assert containers > 0 and rendered == containers, (
        f"{containers - rendered} of {containers} plots did not render"
    )
    assert "No operations or GPU work in this window" not in dom
    for pid in pids:  # a section per process, and a timeline row per process ("main · host · pid N")
        assert f'id="process-{pid}"' in dom
        assert re.search(rf">main · [^<]* · pid {pid}<", dom), f"no timeline row for pid {pid}"


def test_plot_counter() -> None:
    dom = (
        '<div class="plotly-graph-div js-plotly-plot"><div><svg class="main-svg"></svg>'
        '<svg class="main-svg"></svg></div></div><div class="plotly-graph-div"></div>'
        '<svg class="main-svg"></svg>'
    )
    assert count_plots(dom) == (2, 1)


def test_report_in_chromium(report: Path, tmp_path: Path) -> None:
    messages, dom = console_messages(report, tmp_path)
    assert messages == [], "JavaScript console messages:\n" + "\n".join(messages)
    containers, rendered = count_plots(dom)
    assert containers > 0, "no plotly charts in the report"
    assert rendered == containers, f"{containers - rendered} of {containers} plots did not render"

    shot = tmp_path / "report.png"
    res = _run_chromium(report, tmp_path, f"--screenshot={shot}", "--window-size=1300,2400")
    assert res.returncode == 0, res.stderr[-3000:]
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dest = os.environ.get("RLSCOPE_SCREENSHOT_DIR")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(dest) / "report.png")


# --- progress bars (rlscope.progress; they share this file's profiled trace) ---


class _FakeTTY:
    """A text stream that claims to be a terminal."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_progress_silent_when_stderr_not_a_tty(report: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from rlscope.analysis import analyze
    from rlscope.progress import should_show, track

    trace = str(report.parent / "trace")
    capfd.readouterr()
    assert not sys.stderr.isatty() and not should_show(True)
    assert list(track(range(3), "counting")) == [0, 1, 2]
    with_progress = analyze(trace, progress=True).summary
    assert capfd.readouterr() == ("", "")  # nothing on stdout or stderr
    assert with_progress == analyze(trace, progress=False).summary


def test_progress_drawn_on_a_tty_unless_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlscope.progress import spinner, track

    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    assert list(track(range(3), "counting", enabled=False)) == [0, 1, 2]
    with spinner("waiting", enabled=False):
        pass
    assert tty.parts == []
    assert list(track(iter(range(3)), "counting [x]", total=3)) == [0, 1, 2]
    assert "counting [x]" in "".join(tty.parts)


# --- the timeline, drawn in proportion (rlscope.viz.timeline) ---

# a short real CPU PPO run: thousands of sub-pixel inference and simulation instances
PPO_TRACE = Path(__file__).resolve().parent / "golden" / "traces" / "ppo_cpu"
_BAR_RE = re.compile(
    r'<path d="M([-\d.]+),[-\d.]+V[-\d.]+H([-\d.]+)V[-\d.]+Z" style="[^"]*fill: rgb\((\d+), (\d+), (\d+)\)'
)


def drawn_shares(dom: str) -> dict[str, float]:
    """Fill colour -> the width of its timeline bars, as a share of the plot area's width."""
    width = _plot_px(dom)
    out: dict[str, float] = {}
    for m in _BAR_RE.finditer(_chart(dom)):
        colour = "#{:02x}{:02x}{:02x}".format(*(int(v) for v in m.group(3, 4, 5)))
        out[colour] = out.get(colour, 0.0) + abs(float(m.group(2)) - float(m.group(1))) / width
    return out


def data_shares(timeline: dict, w0: float, w1: float) -> dict[str, float]:
    """Operation -> its time in [w0, w1] (the outermost level, where the PPO trace has them all) as a
    share of it: what the drawn widths must match."""
    ops = timeline["ops"]
    start = np.clip(np.asarray(ops["start_s"]), w0, w1)
    dur = np.clip(np.asarray(ops["end_s"]), w0, w1) - start
    names = np.asarray(ops["name"], dtype=object)
    assert set(np.asarray(ops["depth"]).tolist()) == {0}
    return {str(n): float(dur[names == n].sum()) / (w1 - w0) for n in dict.fromkeys(ops["name"])}


def _assert_in_proportion(drawn: dict[str, float], data: dict[str, float], plot_px: float) -> None:
    """Each operation within 10% of its share of the window (and of 2 bins, 6 px, when smaller)."""
    assert data and sum(data.values()) > 0.5
    for name, share in data.items():
        got = drawn.get(operation_color(name), 0.0)
        assert abs(got - share) <= max(0.1 * share, 6.0 / plot_px), (name, got, share, drawn)


@pytest.mark.parametrize("window", [None, "2.20:2.23", "1.0:4.0"], ids=["default window", "narrow", "wide"])
def test_timeline_drawn_in_proportion(tmp_path: Path, window: str | None) -> None:
    from rlscope.analysis import analyze

    page = tmp_path / "report.html"
    extra = ["--window", window] if window else []
    res = subprocess.run(
        [sys.executable, "-m", "rlscope.cli.analyze", str(PPO_TRACE), "--html", str(page), "-q", *extra],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    win = tuple(float(v) for v in window.split(":")) if window else None
    timeline = analyze(str(PPO_TRACE), correct=False, window=win).report["timeline"]
    w0, w1 = timeline["window_s"]
    messages, dom = console_messages(page, tmp_path)
    assert messages == [], "JavaScript console messages:\n" + "\n".join(messages)
    _assert_in_proportion(drawn_shares(dom), data_shares(timeline, w0, w1), _plot_px(dom))
    if window is None:
        # control: bins far below a pixel are drawn as plotly draws instances as they are, each
        # widened to a pixel or two, and the short, frequent simulation steps come out far too wide
        control = tmp_path / "control.html"
        control.write_text(
            page.read_text(encoding="utf-8").replace("RLSCOPE_BIN_PX = 3;", "RLSCOPE_BIN_PX = 0.05;"),
            encoding="utf-8",
        )
        _, dom = console_messages(control, tmp_path)
        share = data_shares(timeline, w0, w1)["simulation"]
        assert drawn_shares(dom)[operation_color("simulation")] > 1.5 * share

        # zoomed in the page (as a drag does): redrawn from the instances for the new range
        z0, z1 = w0 + 0.3 * (w1 - w0), w0 + 0.4 * (w1 - w0)
        zoomed = tmp_path / "zoomed.html"
        zoomed.write_text(
            page.read_text(encoding="utf-8").replace(
                "</body>",
                "<script>window.addEventListener('load', function () { setTimeout(function () {"
                f" Plotly.relayout(document.getElementById('{DIV_ID}'), {{'xaxis.range': [{z0!r}, {z1!r}]}});"
                " }, 500); });</script></body>",
            ),
            encoding="utf-8",
        )
        messages, dom = console_messages(zoomed, tmp_path)
        assert messages == [], "JavaScript console messages:\n" + "\n".join(messages)
        ticks = [float(t) for t in re.findall(r'<g class="xtick"><text[^>]*>([-\d.]+)</text>', _chart(dom))]
        assert ticks and all(z0 <= t <= z1 for t in ticks), (ticks, z0, z1)  # the zoom took place
        _assert_in_proportion(drawn_shares(dom), data_shares(timeline, z0, z1), _plot_px(dom))


def _chart(dom: str) -> str:
    """The timeline chart's part of the DOM."""
    start = dom.index(f'id="{DIV_ID}"')
    return dom[start : dom.index("<h2>", start)]


def _plot_px(dom: str) -> float:
    """The width of the timeline's plot area in pixels."""
    return float(re.search(r'class="nsewdrag drag"[^>]*width="([\d.]+)"', _chart(dom)).group(1))


def test_critical_path_drawn_as_its_intervals(tmp_path: Path) -> None:
    """The what-if's critical path chart: each operation's bars as wide as its intervals in the window
    (the PPO run's single process alternates inference, simulation and backprop on it)."""
    from rlscope.analysis import analyze
    from rlscope.viz.whatif_html import DIV_ID as PATH_ID

    page = _html_report(PPO_TRACE, tmp_path / "report.html")
    report = analyze(str(PPO_TRACE)).report
    w0, w1 = report["timeline"]["window_s"]
    data: dict[str, float] = {}
    for iv in report["critical_path"]["intervals"]:
        share = max(min(iv["end_s"], w1) - max(iv["start_s"], w0), 0.0) / (w1 - w0)
        data[iv["operation"]] = data.get(iv["operation"], 0.0) + share
    assert len(data) >= 4  # not one operation over the whole window
    messages, dom = console_messages(page, tmp_path)
    assert messages == [], "JavaScript console messages:\n" + "\n".join(messages)
    start = dom.index(f'id="{PATH_ID}"')
    chart = dom[start : min(i for i in (dom.find("<h2>", start), dom.find("<h3>", start), len(dom)) if i > 0)]
    width = float(re.search(r'class="nsewdrag drag"[^>]*width="([\d.]+)"', chart).group(1))
    drawn: dict[str, float] = {}
    for m in _BAR_RE.finditer(chart):
        colour = "#{:02x}{:02x}{:02x}".format(*(int(v) for v in m.group(3, 4, 5)))
        drawn[colour] = drawn.get(colour, 0.0) + abs(float(m.group(2)) - float(m.group(1))) / width
    _assert_in_proportion(drawn, data, width)
