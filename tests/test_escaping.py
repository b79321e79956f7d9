"""Names from a trace reach the terminal escaped, one line each; ``-q`` leaves only errors.

A traced program chooses its operation, phase and role names, and its paths: an escape sequence in
one must not retitle or clear the terminal, a newline must not split a warning, rich markup in one
is a name like any other. JSON keeps the names exactly as the program gave them.
"""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import pytest

import rlscope
from rlscope.cli import analyze as analyze_cli
from rlscope.cli import main as main_cli
from rlscope.errors import warn_once
from rlscope.text import printable

TITLE = "\x1b]0;evil-title\x07"  # OSC 0: retitles the terminal
CLEAR = "a\nb\x1b[2J\u202ec"  # a newline, "clear the screen", a right-to-left override
LINK = "\x1b]8;;https://example.invalid\x1b\\click\x1b]8;;\x1b\\"  # OSC 8 hyperlink
MARKUP = "[bold]x[/]"
PLAIN = "naïve 中文 🚀"
PHASE = "phase\x9b2J"  # C1 CSI
NAMES = (TITLE, CLEAR, LINK, MARKUP, PLAIN)


def _hidden(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on or not show (a newline between lines is fine)."""
    kept = {"\n", "\u200d"}
    return [c for c in text if c not in kept and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (TITLE, "\\x1b]0;evil-title\\x07"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),
        ("x\u202ey\u2066z\u200b\ufeff", "x\\u202ey\\u2066z\\u200b\\ufeff"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("\udcff", "\\udcff"),  # an undecodable byte of a path (surrogateescape)
        ("\U000e0041", "\\U000e0041"),  # a tag character: invisible
        (PLAIN, PLAIN),
        ("👨\u200d👩\u200d👧 é\u0301 \u00a0\u3000", "👨\u200d👩\u200d👧 é\u0301 \u00a0\u3000"),
        ("C:\\Users\\me\\trace", "C:\\Users\\me\\trace"),
        (MARKUP, MARKUP),
        (3, "3"),
    ],
)
def test_printable_escapes_what_a_terminal_acts_on_and_keeps_ordinary_unicode(text: object, shown: str):
    assert printable(text) == shown


def test_printable_leaves_no_code_point_a_terminal_acts_on():
    every = "".join(chr(cp) for cp in range(0x110000))
    out = printable(every)
    assert _hidden(out) == [] and "\n" not in out


def test_warn_once_is_one_escaped_line(capsys):
    warn_once(f"cannot read {TITLE}/{CLEAR}")
    err = capsys.readouterr().err
    assert err == "rlscope: warning: cannot read \\x1b]0;evil-title\\x07/a\\nb\\x1b[2J\\u202ec\n"


@pytest.fixture
def evil_trace(fake_session, tmp_path: Path) -> Path:
    """A trace of the NAMES, in a directory whose name has control characters, from a session that
    never ended (its warnings name that directory). The fixture's finished trace is left alone."""
    session, clock = fake_session
    session.start()
    clock.advance(1_000_000)  # time outside the phase: the per-phase table shows
    with rlscope.phase(PHASE):
        for name in NAMES:
            with rlscope.scope(name):
                clock.advance(1_000_000)
    session.writer.flush()
    killed = tmp_path / "killed\x1b[2J\nrun"
    shutil.copytree(session.trace_dir, killed)  # as a SIGKILL would leave it: no session end
    session.stop()
    return killed


@pytest.fixture
def wide(monkeypatch):
    """A console wide enough for every column: names are checked whole."""
    monkeypatch.setenv("COLUMNS", "240")


def _assert_safe(text: str) -> None:
    assert _hidden(text) == [], [c for c in _hidden(text)]


def test_analyze_shows_names_escaped_on_one_line_each(evil_trace, wide, capsys):
    assert analyze_cli.main([str(evil_trace)]) == 0
    out, err = capsys.readouterr()
    _assert_safe(out)
    _assert_safe(err)
    assert printable(TITLE) in out and printable(CLEAR) in out and printable(LINK) in out
    assert printable(PHASE) in out  # the per-phase table
    assert MARKUP in out and PLAIN in out  # markup shown as written; ordinary Unicode as it is
    warnings = err.splitlines()
    assert warnings and all(w.startswith("rlscope-analyze: warning: ") for w in warnings)
    assert any("did not end normally" in w and "killed\\x1b[2J\\nrun" in w for w in warnings)


def test_json_keeps_the_exact_names(evil_trace, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert analyze_cli.main([str(evil_trace), "-q", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert set(NAMES) <= set(summary["operations"])
    assert PHASE in summary["phases"]
    assert any(str(evil_trace) in w and "did not end normally" in w for w in summary["warnings"])


def test_quiet_prints_nothing_for_a_trace_with_warnings(evil_trace, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert analyze_cli.main([str(evil_trace), "-q", "--json", str(out)]) == 0
    assert capsys.readouterr() == ("", "")
    assert json.loads(out.read_text())["warnings"]  # they are in --json


def test_diff_quiet_prints_nothing_and_diff_shows_names_escaped(evil_trace, wide, tmp_path, capsys):
    page = tmp_path / "diff.html"
    assert analyze_cli.main(["diff", str(evil_trace), str(evil_trace), "-q", "--html", str(page)]) == 0
    assert capsys.readouterr() == ("", "")
    html = page.read_text()  # the page shows names as the terminal does
    assert printable(TITLE) in html and TITLE not in html and "\u202e" not in html
    assert analyze_cli.main(["diff", str(evil_trace), str(evil_trace)]) == 0
    out, err = capsys.readouterr()
    _assert_safe(out + err)
    assert printable(TITLE) in out and printable(CLEAR) in out and MARKUP in out
    assert "killed\\x1b[2J\\nrun" in out  # the title names A and B


def test_check_findings_are_escaped_one_line_each(evil_trace, capsys):
    analyze_cli.main(["check", str(evil_trace)])
    out, err = capsys.readouterr()
    _assert_safe(out + err)
    assert "killed\\x1b[2J\\nrun" in out + err


def test_errors_are_one_escaped_line(tmp_path, capsys):
    missing = tmp_path / "no\x1b]0;x\x07\nsuch"
    assert analyze_cli.main([str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("rlscope-analyze: error: ")
    assert "no\\x1b]0;x\\x07\\nsuch" in err
    assert main_cli.main(["run", "--trace-dir", str(tmp_path / "t"), "--", "no\x1b[2J\nsuch-program"]) == 2
    err = capsys.readouterr().err
    assert err == "rlscope: error: no\\x1b[2J\\nsuch-program: command not found\n"


def _summary(**over: object) -> dict:
    op = {"total_s": 1.0, "exclusive_s": 1.0, "calls": 1, "categories": {"python": 1.0}}
    base = {
        "schema": "rlscope.summary/1",
        "trace_dir": f"/tmp/{TITLE}",
        "wall_s": 2.0,
        "unannotated_s": 1.0,
        "categories": {"python": 1.0},
        "operations": {name: dict(op) for name in NAMES},
        "processes": [{"pid": 1, "host": "h", "wall_s": 2.0, "complete": True}],
        "warnings": [f"w {CLEAR}"],
    }
    base.update(over)
    return base


def test_the_table_never_reads_a_name_or_a_category_as_markup():
    from rlscope.viz.terminal import summary_text

    cat = "[red]cat\x1b[0m[/red]"  # a category a newer analyzer wrote: a column header
    op = {"total_s": 1.0, "exclusive_s": 1.0, "calls": 1, "categories": {cat: 1.0}}
    summary = _summary(operations={MARKUP: op, ":rocket:": op}, categories={cat: 1.0})
    wide = summary_text(summary, width=240)
    assert MARKUP in wide and ":rocket:" in wide and printable(cat) in wide
    narrow = summary_text(summary, width=40)  # the caption names the columns left out, the category too
    caption = "".join(narrow.split()).partition("notshown,forwidth:")[2]
    assert printable(cat) in caption
    _assert_safe(wide + narrow)


def test_table_lines_and_advice_footer_are_escaped():
    from rlscope.viz.terminal import summary_text

    advice = [
        {
            "rule": "r",
            "operation": TITLE,
            "change": f"do {CLEAR}",
            "seconds_at_stake": 0.5,
            "evidence": f"seen in {LINK}",
        }
    ]
    roles = {f"role{TITLE}": {"workers": 2, "spread": {}, "operations": {CLEAR: {"total_s": 1.0}}}}
    processes = [
        {"pid": 1, "host": f"h{CLEAR}", "wall_s": 2.0, "complete": False, "role": f"role{TITLE}"},
        {"pid": 2, "host": "h", "wall_s": 2.0, "complete": True, "role": f"role{TITLE}"},
    ]
    text = summary_text(_summary(advice=advice, roles=roles, processes=processes), width=240)
    _assert_safe(text)
    for visible in (printable(TITLE), printable(CLEAR), printable(LINK), printable(f"h{CLEAR}")):
        assert visible in text
    assert f"warning: w {printable(CLEAR)}" in text


def test_a_cell_shows_what_rich_would_drop():
    """rich's Text removes BEL and CR on its own: escaped first, they show."""
    from rich.console import Console

    from rlscope.viz.terminal import cell

    console = Console(record=True, width=80, color_system=None)
    console.print(cell("bell\x07 cr\r"))
    assert console.export_text() == "bell\\x07 cr\\r\n"
