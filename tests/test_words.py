"""The correction footer in plain words (rlscope.viz.words), and the -v details behind it."""

from __future__ import annotations

from rlscope.viz.terminal import summary_text
from rlscope.viz.words import correction_details, correction_sentence


def _corrected(**overhead) -> dict:
    return {
        "schema": "rlscope.summary/1",
        "wall_s": 17.5,
        "unannotated_s": 0.0,
        "operations": {},
        "corrected_for_overhead": True,
        "uncertainty_s": 0.05,
        "calibration": {
            "status": "applied",
            "path": "embedded in the trace",
            "created": "2026-11-27T14:48:14",
        },
        "overhead": {
            "raw_wall_s": 18.8,
            "corrected_wall_s": 17.5,
            "slowdown": 18.8 / 17.5,
            "uncertainty_s": 0.05,
            "removed_s": {"collectors (windows)": 1.094, "writer": 0.142, "rlscope_periodic": 0.028},
            "windows": {"switched": ["backend"], "full_share": 0.49},
            "not_removable_s": 0.0,
            **overhead,
        },
    }


def test_one_sentence_says_what_rlscope_added_and_that_it_is_removed():
    s = correction_sentence(_corrected())
    assert s == "rlscope added 1.30 s (7% of the run); the figures above have it removed, ±50.0 ms."


def test_raw_figures_say_so_and_why():
    s = correction_sentence(
        {"corrected_for_overhead": False, "calibration": {"reason": "raw figures requested"}}
    )
    assert s == "The figures are raw: rlscope's own overhead is still in them (raw figures requested)."


def test_details_name_each_removed_cost_and_the_calibration_date_as_the_calibrations():
    lines = correction_details(_corrected())
    text = "\n".join(lines)
    assert "removed 1.09 s: the backend and GPU collectors, measured in this run's windows" in text
    assert "removed 0.14 s: the trace writer holding the GIL" in text
    assert "backend collectors were on in alternating windows (49% of the run)" in text
    # the date is the calibration's, never presented as the trace's
    assert "per-event costs from the calibration made 2026-11-27 14:48:14 (stored in the trace" in text
    assert "embedded in the trace 2026" not in text


def test_table_footer_is_the_sentence_and_v_adds_the_details():
    plain = summary_text(_corrected(), width=120)
    assert "rlscope added 1.30 s (7% of the run)" in plain
    assert "residual costs" not in plain and "trace writer" not in plain
    verbose = summary_text(_corrected(), width=120, verbose=True)
    assert "the trace writer holding the GIL" in verbose


def test_a_run_of_several_processes_says_what_all_of_them_lost():
    """The run's wall is its longest process's (a torchrun agent that rlscope hardly slows): the sentence
    adds up what was removed from every process instead."""
    summary = {
        "corrected_for_overhead": True,
        "calibration": {"status": "applied"},
        "overhead": {
            "raw_wall_s": 38.7,
            "corrected_wall_s": 38.68,
            "uncertainty_s": 0.5,
            "removed_s": {"collectors (windows)": 6.0, "writer": 3.0, "scope": 1.0},
        },
        "processes": [{"wall_s": 38.68}, {"wall_s": 26.0}, {"wall_s": 25.32}],
    }
    assert correction_sentence(summary) == (
        "rlscope added 10.0 s to the 3 processes (10% of their time);"
        " the figures above have it removed, ±0.50 s."
    )
