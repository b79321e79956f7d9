"""benchmarks/lockstep.py on the CPU: every configuration runs in both children and comes back with
its pairs, its analysis and its per-operation figures (wiring; the figures are the benchmark's)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _lockstep_cpu() -> list[str]:
    """benchmarks/lockstep.py on the CPU, both main threads on this machine's last core, every other
    thread on its first, the children parked on all of them."""
    cpus = sorted(os.sched_getaffinity(0))
    pins = ["--cpu", str(cpus[-1]), "--aux-cpu", str(cpus[0]), "--park", ",".join(map(str, cpus))]
    return [sys.executable, str(ROOT / "benchmarks" / "lockstep.py"), "--device", "cpu", *pins]


def _lockstep_rows(tmp_path, configs: str, pairs: int, *extra: str) -> dict:
    """One lockstep run on the CPU; its rows by configuration."""
    tmp_path.mkdir(exist_ok=True)
    out = tmp_path / "lockstep.json"
    cmd = [*_lockstep_cpu(), "--configs", configs, "--pairs", str(pairs), "--iters", "60"]
    cmd += ["--rounds", "1", "--json", str(out), *extra]
    env = {**os.environ, "RLSCOPE_CALIBRATION_DIR": str(tmp_path / "calibration")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r["config"]: r for r in json.loads(out.read_text())["rows"]}


@pytest.mark.slow
def test_lockstep_runs_every_config_and_keeps_what_it_measured(tmp_path):
    """One lockstep run of four configurations (the null, B's state ``busy100`` adding 100 µs of
    busy-waiting to each ~250 µs iteration, the default profile, and the default profile with the
    writer flushing once a minute), 10 pairs each: every pair timed in both children, the default
    profile analyzed and corrected in B, per-operation figures against A's timers, and the kept
    table. What the figures read (busy100 near its expected cost, the null near 1, the corrected
    error) is the benchmark's to measure, over enough pairs to hold on a host that changes speed."""
    configs = "none,busy100,default,default_noflush"
    rows = _lockstep_rows(tmp_path, configs, 10, "--keep", str(tmp_path), "--a-timers")
    assert set(rows) == {"none", "busy100", "default", "default_noflush"}
    for r in rows.values():
        assert len(r["base"]) == len(r["state"]) == 10
        assert len(r["spans"]) == 10 and all(a0 < a1 and b0 < b1 for a0, a1, b0, b1 in r["spans"])
    # 100 µs over an iteration of 100-1,000 µs (~250 µs on a 2-core CPU machine at its fast speed,
    # ~530 µs where its cores switch to a speed ~1.6-2x slower)
    assert 1.1 < rows["busy100"]["expected"] < 2.0
    # the default profile: analyzed in B and corrected below raw
    d = rows["default"]
    assert d["analysis"]["corrected"] is True and d["analysis"]["calls"] >= 600
    assert d["corrected_error"] < d["raw_error"]
    # per operation against A's timers (--a-timers): every operation of the step, their shares of A's
    # iteration adding up to most of it
    ops = d["op_errors"]
    assert set(ops) == {"iter", "policy", "step", "stats"}
    assert ops["iter"][0] == pytest.approx(d["corrected_error"], abs=1e-9)  # A's timers scaled to its wall
    assert ops["step"][0] < ops["step"][1]  # corrected below raw
    assert 0.7 < sum(sh for k, (_, _, sh) in ops.items() if k != "iter") <= 1.02, ops
    assert 0 <= d["a_untimed_share"] < 0.3
    # the writer flushing once a minute: B's trace still analyzed and corrected
    quiet = rows["default_noflush"]
    assert quiet["analysis"]["corrected"] is True and quiet["analysis"]["calls"] >= 600
    assert quiet["corrected_error"] < quiet["raw_error"]
    assert quiet["analysis"]["writer_s"] >= 0 and d["analysis"]["writer_s"] >= 0
    # every state pair placed by B's kind of window, read from the kept table
    assert sum(n for n, _ in rows["default"]["window_pairs"].values()) == 10
    kept = tmp_path / "lockstep-default-1.npz"
    assert kept.exists()
    import numpy as np

    z = np.load(kept)
    names = list(z["names"])
    assert "iter" in names and "step" in names
    assert len(z["begin"]) == len(z["end"]) == len(z["excl"]) and (z["end"] >= z["begin"]).all()


@pytest.mark.slow
def test_lockstep_runs_the_dqn_loop(tmp_path):
    """``--loop dqn`` (the bundled DQN's iteration, a backprop every 4) runs in both children and
    refuses blocks that would split an update cycle."""
    out = tmp_path / "lockstep.json"
    base = [*_lockstep_cpu(), "--loop", "dqn"]
    bad = subprocess.run([*base, "--iters", "6"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "multiple of 4" in bad.stderr
    cmd = [*base, "--configs", "none", "--pairs", "4", "--iters", "8", "--rounds", "1"]
    cmd += ["--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert len(row["state"]) == 4 and row["cost"] == pytest.approx(1.0, abs=0.3)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["sb3_ppo", "sb3_sac"])
def test_lockstep_runs_third_party_loops(tmp_path, loop):
    """``--loop sb3_ppo`` / ``sb3_sac`` (stable-baselines3, one ``learn`` call a step, annotated as
    benchmarks/thirdparty annotates it) run in both children; the default profile's corrected figure
    per operation comes back for SB3's own methods. Wiring only: how close it reads is a benchmark."""
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "lockstep.json"
    cmd = [*_lockstep_cpu(), "--loop", loop, "--configs", "none,default", "--pairs", "3", "--iters", "1"]
    cmd += ["--rounds", "1", "--a-timers", "--json", str(out)]
    env = {**os.environ, "RLSCOPE_CALIBRATION_DIR": str(tmp_path / "calibration")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["config"]: r for r in json.loads(out.read_text())["rows"]}
    assert len(rows["none"]["state"]) == 3
    d = rows["default"]
    assert d["analysis"]["calls"] == 3 and d["corrected_error"] < d["raw_error"]
    assert {"iter", "train", "collect_rollouts", "inference", "env_step"} <= set(d["op_errors"])
