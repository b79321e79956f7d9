"""benchmarks/run_slowdown.py: what it measures, what it keeps when its time runs out, its variants."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import run_slowdown  # noqa: E402

PROGRAM = (
    "import time; t = time.perf_counter(); sum(range(2_000_000));"
    " print(f'1000 steps in {time.perf_counter() - t:.3f} s')"
)


def test_a_time_limit_stops_before_a_pair_that_would_not_end_in_time(tmp_path):
    """Three pairs asked for, a limit that the first pair already uses up: one pair, its corrected wall
    analyzed, the JSON written and marked incomplete."""
    out = tmp_path / "r.json"
    args = ["--reps", "3", "--time-limit", "0.001", "--json", str(out), "--", sys.executable, "-c", PROGRAM]
    result = run_slowdown.main(args)
    assert json.loads(out.read_text()) == result
    assert result["pairs"] == 1 and not result["complete"] and result["reps"] == 3
    assert len(result["plain_s"]) == len(result["rlscope_s"]) == len(result["corrected_wall_s"]) == 1
    assert len(result["train_plain_s"]) == len(result["train_rlscope_s"]) == 1
    assert result["train_slowdown_median"] > 0 and result["slowdown_median"] > 0
    assert result["corrected_wall_s"][0] > 0


def test_the_plain_span_is_timed_where_a_session_is(tmp_path):
    """The plain run's span holds the loop it printed and leaves out the interpreter's start-up and
    finalization; the error is each corrected wall against its own pair's span."""
    result = run_slowdown.main(["--reps", "2", "--", sys.executable, "-c", PROGRAM])
    for span, wall, trained in zip(
        result["plain_span_s"], result["plain_s"], result["train_plain_s"], strict=True
    ):
        assert trained - 5e-4 <= span < wall  # the loop printed to 3 decimals
    expected = [
        100 * (c - s) / s for c, s in zip(result["corrected_wall_s"], result["plain_span_s"], strict=True)
    ]
    assert result["corrected_error_pct_median"] == statistics.median(expected)
    assert result["corrected_error_pct_spread"] == [min(expected), max(expected)]
    raw = [100 * (r - s) / s for r, s in zip(result["raw_wall_s"], result["plain_span_s"], strict=True)]
    assert result["raw_error_pct_median"] == statistics.median(raw)
    assert result["raw_error_pct_spread"] == [min(raw), max(raw)]
    assert all(0 < c <= r for c, r in zip(result["corrected_wall_s"], result["raw_wall_s"], strict=True))


def test_variants_run_beside_the_same_plain_runs(tmp_path):
    """Two profiled variants, each with its own options: each is compared with the same plain runs
    and spans, the top-level figures are the first variant's, and each trace holds its own options."""
    args = [
        "--reps",
        "2",
        "--variant",
        "default=",
        "--variant",
        "bare=--no-backend --no-auto-ops --stack-hz 0",
    ]
    result = run_slowdown.main([*args, "--", sys.executable, "-c", PROGRAM])
    assert list(result["variants"]) == ["default", "bare"]
    assert result["pairs"] == 2 and result["complete"]
    for name, figures in result["variants"].items():
        assert len(figures["rlscope_s"]) == len(figures["corrected_wall_s"]) == 2, name
        expected = [
            100 * (c - s) / s
            for c, s in zip(figures["corrected_wall_s"], result["plain_span_s"], strict=True)
        ]
        assert figures["corrected_error_pct_median"] == statistics.median(expected)
        ratios = [b / a for a, b in zip(result["plain_s"], figures["rlscope_s"], strict=True)]
        assert figures["slowdown_median"] == statistics.median(ratios)
    first = result["variants"]["default"]
    assert {k: result[k] for k in first} == first


def test_a_variant_needs_a_name_of_its_own(capsys):
    """``NAME=OPTIONS``, each name once, never ``plain``: anything else is a usage error."""
    for bad in (
        ["--variant", "nooptions"],
        ["--variant", "plain=--gpu off"],
        ["--variant", "a=", "--variant", "a="],
    ):
        with pytest.raises(SystemExit) as e:
            run_slowdown.main([*bad, "--", sys.executable, "-c", PROGRAM])
        assert e.value.code == 2
    assert "NAME=OPTIONS" in capsys.readouterr().err
