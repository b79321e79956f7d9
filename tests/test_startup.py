"""Start-up is the ``startup`` phase's: up to the program's first phase or operation, not its first line."""

from __future__ import annotations

import rlscope
from rlscope.analysis import analyze
from rlscope.categories import NO_PHASE, UNANNOTATED


def _run(sess, clock, startup: bool) -> None:
    """``startup`` for 1 us (the interpreter), 5 us of the program's imports and set-up, then ``step``
    (2 us) in ``train``, and 1 us after it."""
    with sess:
        if startup:
            with rlscope.phase("startup"):
                clock.advance(1000)
        else:
            clock.advance(1000)
        clock.advance(5000)
        with rlscope.phase("train"), rlscope.scope("step"):
            clock.advance(2000)
        clock.advance(1000)


def test_the_programs_own_start_up_is_the_startup_phases(fake_session):
    sess, clock = fake_session
    _run(sess, clock, startup=True)
    phases = analyze(str(sess.trace_dir), correct=False).summary["phases"]
    assert phases["startup"]["wall_s"] * 1e9 == 6000  # the interpreter's 1 us and the program's 5 us
    assert phases["startup"]["unannotated_s"] * 1e9 == 6000
    assert phases[NO_PHASE]["unannotated_s"] * 1e9 == 1000  # only the time after the train phase
    assert phases["train"]["operations"]["step"]["total_s"] * 1e9 == 2000


def test_without_a_startup_phase_the_time_stays_where_it_was(fake_session):
    sess, clock = fake_session
    _run(sess, clock, startup=False)
    s = analyze(str(sess.trace_dir), correct=False).summary
    assert "startup" not in s["phases"]
    assert s["phases"][NO_PHASE]["unannotated_s"] * 1e9 == 7000
    assert s["unannotated_s"] * 1e9 == 7000 and UNANNOTATED not in s["operations"]


def test_a_startup_phase_with_nothing_after_it_is_left_as_recorded(fake_session):
    sess, clock = fake_session
    with sess:
        with rlscope.phase("startup"):
            clock.advance(1000)
        clock.advance(4000)
    phases = analyze(str(sess.trace_dir), correct=False).summary["phases"]
    assert phases["startup"]["wall_s"] * 1e9 == 1000 and phases[NO_PHASE]["unannotated_s"] * 1e9 == 4000


def test_a_startup_phase_that_ends_between_detail_stretches_counts_its_time_once(tmp_path):
    """Its end is written where the next stretch resumes, before that resume's other rows (the window
    mode): moved on to the program's first operation, it goes after them, so no time is counted twice."""
    from tests.conftest import FakeClock

    clock = FakeClock()
    sess = rlscope.profile(
        tmp_path / "trace", backend=False, gpu=False, detail="0.000002s,0.00001s,0.000002s"
    )
    sess.clock = clock
    with sess:  # detail in [0, 2) and [10, 12) us
        with rlscope.phase("startup"):
            clock.advance(3000)  # ends at 3 us, between the stretches
        clock.advance(8000)
        with rlscope.scope("step"):  # the program's first operation, at 11 us
            clock.advance(500)
        clock.advance(500)
    raw = analyze(str(tmp_path / "trace"), correct=False).summary["raw"]
    assert raw["wall_s"] * 1e9 == 12000
    assert raw["unannotated_s"] * 1e9 == 11500 and raw["operations"]["step"]["exclusive_s"] * 1e9 == 500
    # the interpreter's 3 us and the set-up up to the operation in the stretch (from 10 to 11 us)
    assert raw["phases"]["startup"]["wall_s"] * 1e9 == 4000
    assert raw["phases"][NO_PHASE]["unannotated_s"] * 1e9 == 7500
