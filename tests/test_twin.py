"""``rlscope validate --twin``: two runs of one program taking turns (rlscope/twin.py), checked
against known counts and known busy-wait times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rlscope import twin, validate


def test_spec_round_trips_through_the_environment():
    for spec in (
        twin.Spec(3, 4, True, False, 5_000_000, 1, (0, 2)),
        twin.Spec(7, 8, False, True),
    ):
        assert twin.Spec.decode(spec.encode()) == spec


def test_twin_cores_put_the_main_threads_on_one_core_and_the_rest_beside():
    assert validate.twin_cores({0, 1}) == (1, (0,))
    assert validate.twin_cores({5}) == (5, ())
    assert validate.twin_cores(None) == (None, ())


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class _Side:
    """One of two threads running a loop of ``n`` steps, each one scope exit, in turns."""

    def __init__(self, spec: twin.Spec, n: int, step_s: float) -> None:
        self.spec, self.n, self.step_s = spec, n, step_s
        self.exits = 0
        self.handed: list[tuple[int, int | None]] = []  # (own count, the target it had) per hand-over
        self.turn: twin.Turn | None = None

    def run(self) -> None:
        t = self.turn = twin.Turn(self.spec)  # made on this thread: it takes the turns
        t.count = lambda: self.exits  # type: ignore[method-assign]
        t.start()
        for _ in range(self.n):
            _busy(self.step_s)
            self.exits += 1
            now = time.perf_counter_ns()
            if now >= t.due_ns and t.ready(now):
                self.handed.append((self.exits, t._target))
                t.hand_over(now)
        t.finish()


def test_the_follower_hands_over_where_the_leader_did_and_neither_waits_for_an_ended_partner():
    """A leader of 1 ms steps in turns of 20 ms and a follower of 1.5 ms steps: the follower
    hands over once it has run as far as the leader's count (a step past it at most), never
    capped; both run to the end (the one that ends first sends DONE)."""
    r_lead, w_lead = os.pipe()
    r_follow, w_follow = os.pipe()
    try:
        lead = _Side(twin.Spec(r_lead, w_follow, True, True, 20_000_000), 300, 0.001)
        follow = _Side(twin.Spec(r_follow, w_lead, False, False, 20_000_000), 300, 0.0015)
        threads = [threading.Thread(target=s.run) for s in (lead, follow)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert not any(th.is_alive() for th in threads), "a side waited for a turn that never came"
    finally:
        for fd in (r_lead, w_lead, r_follow, w_follow):
            os.close(fd)
    assert lead.exits == follow.exits == 300
    assert lead.turn is not None and follow.turn is not None
    assert lead.turn.turns >= 8 and follow.turn.turns >= 8
    assert follow.turn.capped == 0
    for own, target in follow.handed:
        if target is not None:
            assert target <= own <= target + 1, follow.handed
    # each waited about as long as the other ran: the leader's waits hold the follower's slower steps
    assert lead.turn.waited_ns / 1e9 > 0.5 * 300 * 0.0015
    assert follow.turn.waited_ns / 1e9 > 0.5 * 300 * 0.001


def test_done_frees_a_waiting_side_at_once():
    r, w = os.pipe()
    r2, w2 = os.pipe()
    try:
        os.write(w, twin._MSG.pack(twin.DONE))
        t = twin.Turn(twin.Spec(r, w2, False, False, 1_000_000))
        t.start()
        assert t.free and t.due_ns == twin.NEVER
        assert not t.ready(time.perf_counter_ns())
    finally:
        for fd in (r, w, r2, w2):
            os.close(fd)


BUSY = textwrap.dedent(
    """
    import os, sys, time
    import rlscope

    if len(sys.argv) > 1 and os.environ.get("RLSCOPE_MODE") == sys.argv[1]:
        raise SystemExit(3)  # fails in this mode only

    def busy(s):
        end = time.perf_counter() + s
        while time.perf_counter() < end:
            pass

    with rlscope.profile("ignored-trace", backend=False):
        for _ in range(200):
            with rlscope.scope("step"):
                with rlscope.scope("work"):
                    busy(0.003)
                with rlscope.scope("rest"):
                    busy(0.001)
    """
)


def _cli(*args: str, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlscope.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def _validate_twin(tmp_path, source: str, reps: int) -> tuple[subprocess.CompletedProcess, dict]:
    """``rlscope validate --twin`` on a script (uncalibrated, no warm-up): the run and its JSON."""
    script = tmp_path / "script.py"
    script.write_text(source)
    out = tmp_path / "v.json"
    r = _cli("validate", "--twin", "--reps", str(reps), "--no-warmup", "--no-calibrate", "--json", str(out),
             "--", "python", str(script), cwd=tmp_path)  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return r, json.loads(out.read_text())


def test_twin_runs_take_turns_and_keep_their_waits_out_of_both_sides(tmp_path):
    """Ground truth: 200 steps of 3 + 1 ms of busy-waiting. Each run waits about as long as the
    other runs; the timed run's total and the profiled run's raw and corrected walls must still
    read the busy time (a wait left in would double them)."""
    r, res = _validate_twin(tmp_path, BUSY, reps=2)
    assert "twin runs" in r.stdout
    assert res["twin"] == {"turn_ms": 100.0}
    runs = res["runs"]
    assert [(x["mode"], x["position"]) for x in runs] == [
        ("timers", 1), ("profiled", 2), ("profiled", 1), ("timers", 2)
    ]  # fmt: skip
    nominal = 200 * 0.004
    for x in runs:
        turn = x["turn"]
        assert turn is not None and turn["turns"] >= 3 and turn["counted"]
        assert x["waited_s"] > 0.3 * nominal  # it did wait for its twin
        if not turn["leader"]:
            assert turn["capped"] == 0
    rows = {row["operation"]: row for row in res["rows"]}
    for ref in rows["[total]"]["reference_s"]:
        assert 0.97 * nominal <= ref <= 1.3 * nominal
    for ref in rows["work"]["reference_s"]:
        assert 0.97 * 200 * 0.003 <= ref <= 1.3 * 200 * 0.003
    for p in res["profiled"]:
        assert 0.97 * nominal <= p["raw_wall_s"] <= 1.3 * nominal
        assert 0.97 * nominal <= p["corrected_wall_s"] <= 1.3 * nominal
    assert all(x is None for x in rows["work"]["raw_s"])  # raw per operation holds the waits: not shown


@pytest.mark.parametrize("mode", ["profile", "timers"])
def test_a_twin_that_fails_ends_the_pair_with_one_line_and_no_hang(tmp_path, mode):
    script = tmp_path / "busy.py"
    script.write_text(BUSY)
    r = _cli("validate", "--twin", "--reps", "1", "--no-warmup", "--no-calibrate", "--", "python",
             str(script), mode, cwd=tmp_path, timeout=120)  # fmt: skip
    assert r.returncode == 2, r.stderr
    error = next(line for line in r.stderr.splitlines() if line.startswith("rlscope: error:"))
    side = "profiled" if mode == "profile" else "timers"
    assert f"{side} run" in error and "status 3" in error, r.stderr
    assert "Traceback" not in r.stderr


def test_turn_ms_out_of_range_is_one_line():
    r = _cli("validate", "--twin", "--turn-ms", "0", "--", "python", "-c", "pass")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "--turn-ms" in r.stderr


UPDATE = textwrap.dedent(
    """
    import time
    import torch
    import rlscope

    def busy(s):
        end = time.perf_counter() + s
        while time.perf_counter() < end:
            pass

    w = torch.ones(4, requires_grad=True)
    with rlscope.profile("ignored-trace", backend=False):
        for _ in range(2):
            with rlscope.scope("train"):  # one long update, no scope inside: SB3 PPO's shape
                for _ in range(150):
                    busy(0.004)
                    (w * 2.0).sum().backward()
    if hasattr(torch.autograd._engine_run_backward, "_rlscope_engine"):
        raise SystemExit(3)  # a wrapper of rlscope's outlived the session
    """
)


def test_a_long_update_without_scopes_hands_over_at_its_backward_calls(tmp_path):
    """Two 0.6 s updates with no scope inside, 150 backward calls each: without other places to
    hand over, a turn would last a whole update (at most 3 turns a run). Both runs count the
    autograd engine's returns with the scope exits, so they take ~0.1 s turns inside the updates,
    the follower reaches the leader's count each time (never capped), and the totals still read the
    busy time. The engine is unwrapped when the session ends (the script exits 3 otherwise)."""
    pytest.importorskip("torch")
    _, res = _validate_twin(tmp_path, UPDATE, reps=1)
    nominal = 2 * 150 * 0.004
    for x in res["runs"]:
        turn = x["turn"]
        assert turn["turns"] >= 6 and turn["counted"], turn
        if not turn["leader"]:
            assert turn["capped"] == 0, turn
    rows = {row["operation"]: row for row in res["rows"]}
    assert 0.97 * nominal <= rows["train"]["reference_s"][0] <= 1.3 * nominal
    assert 0.97 * nominal <= res["profiled"][0]["corrected_wall_s"] <= 1.3 * nominal
