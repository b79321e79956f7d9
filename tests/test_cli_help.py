"""Every command's --help describes the command and each of its options; bad arguments are one line."""

from __future__ import annotations

import re

import pytest

from rlscope.cli import analyze, main


def _call(entry, argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = entry(argv)
    except SystemExit as e:  # argparse's --help inside a subcommand
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _undescribed_options(help_text: str) -> list[str]:
    """Option entries of a --help text with no description (on their line or the next)."""
    lines = help_text.splitlines()
    missing = []
    in_options = False
    for i, line in enumerate(lines):
        if line.endswith(":") and not line.startswith(" "):
            in_options = line in ("options:", "positional arguments:")
            continue
        if not in_options or not re.match(r"^  \S", line):
            continue
        described = re.match(r"^  \S.*?  +\S", line) or (
            i + 1 < len(lines) and re.match(r"^ {6,}\S", lines[i + 1])
        )
        if not described:
            missing.append(line.strip())
    return missing


def test_rlscope_help_lists_every_command_with_what_it_does(capsys):
    code, out, err = _call(main.main, ["--help"], capsys)
    assert code == 0 and err == ""
    for name in main.COMMANDS:
        assert re.search(rf"^  {name} +\w", out, re.MULTILINE), name
    assert "rlscope-analyze --help" in out


def test_rlscope_without_a_command_prints_the_help_and_status_2(capsys):
    code, out, _ = _call(main.main, [], capsys)
    assert code == 2 and "commands:" in out


@pytest.mark.parametrize(
    "entry, prog, command",
    [(main.main, "rlscope", c) for c in ("demo", "run", "top", "calibrate", "validate")]
    + [(main.main, "rlscope", "share-check")]
    + [(analyze.main, "rlscope-analyze", c) for c in analyze.SUBCOMMANDS],
)
def test_subcommand_help_describes_each_option(entry, prog, command, capsys):
    code, out, _ = _call(entry, [command, "--help"], capsys)
    assert code == 0
    assert out.startswith(f"usage: {prog} {command}")
    assert _undescribed_options(out) == []
    # a trace read is TRACE_DIR everywhere (never trace_dir or DIR)
    assert "trace_dir" not in out and not re.search(r"--trace(?!-dir) DIR\b", out)


def test_rlscope_analyze_help_lists_every_subcommand(capsys):
    code, out, _ = _call(analyze.main, ["--help"], capsys)
    assert code == 0
    assert set(analyze.SUBCOMMAND_HELP) == set(analyze.SUBCOMMANDS)
    for name in analyze.SUBCOMMANDS:
        assert len(re.findall(rf"^  {name} +\w", out, re.MULTILINE)) == 1, name
        assert name in out.splitlines()[1], name  # and in the usage line
    assert _undescribed_options(out) == []
    code, out, _ = _call(main.main, ["--help"], capsys)
    assert all(name in out for name in analyze.SUBCOMMANDS)  # rlscope --help points to every one


def test_check_errors_go_to_stderr_with_the_prefix(tmp_path, capsys):
    code, out, err = _call(analyze.main, ["check", str(tmp_path / "nope")], capsys)
    assert code == 2 and out == ""
    assert err.startswith("rlscope-analyze: error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "entry, argv",
    [
        (main.main, ["frobnicate"]),
        (main.main, ["--bogus"]),
        (main.main, ["demo", "--seconds", "-1"]),
        (main.main, ["calibrate", "--reps", "1"]),
        (main.main, ["calibrate", "--rounds", "x"]),
        (main.main, ["run", "--flush-interval", "0", "--", "python", "x.py"]),
        (main.main, ["share-check", "--timeout", "-5", "--", "python", "x.py"]),
        (analyze.main, ["trace", "--workers", "-3"]),
        (analyze.main, ["trace", "--workers", "two"]),
        (analyze.main, ["share"]),
        (main.main, ["calibrate", "--rounds", "1"]),
        (main.main, ["demo", "--device", "tpu"]),
        (analyze.main, []),
        (analyze.main, ["--bogus", "x"]),
        (analyze.main, ["diff", "only-one"]),
        (analyze.main, ["check"]),
    ],
)
def test_bad_arguments_are_one_line_and_status_2(entry, argv, capsys):
    code, out, err = _call(entry, argv, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "error" in err, err


def test_calibrate_counts_rounds_and_validate_runs_so_one_name_means_one_thing(capsys):
    """calibrate's option is --rounds (--reps, its former name, still works but is not shown);
    validate's --reps is runs per mode."""
    code, out, _ = _call(main.main, ["calibrate", "--help"], capsys)
    assert code == 0 and "--rounds" in out and "--reps" not in out
    code, out, _ = _call(main.main, ["validate", "--help"], capsys)
    assert code == 0 and "--reps" in out and "--rounds" not in out
    code, _, err = _call(main.main, ["calibrate", "--reps", "1"], capsys)
    assert code == 2 and "--reps (now --rounds) must be >= 2" in err
