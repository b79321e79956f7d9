"""The PPO CartPole workload: result shape, determinism with and without profiling, and its CLI.

Learning itself is not asserted here (minutes of training); those runs are recorded in benchmarks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import rlscope

pytest.importorskip("gymnasium")

from rlscope.workloads import ppo_cartpole

SHORT = {"total_timesteps": 2048, "device": "cpu", "eval_episodes": 1}


def test_short_run_returns_documented_keys():
    threads = torch.get_num_threads()
    result = ppo_cartpole.train(seed=1, **SHORT)

    assert result["global_step"] == 2048
    returns, ends = result["episode_returns"], result["episode_end_steps"]
    assert len(returns) == len(ends) > 20
    assert all(1.0 <= r <= 500.0 for r in returns)
    assert ends == sorted(ends) and ends[0] > 0 and ends[-1] <= result["global_step"]
    assert result["final_mean_return"] == pytest.approx(np.mean(returns[-20:]))
    assert result["steps_to_475"] is None  # 2048 steps cannot solve CartPole
    assert len(result["eval_returns"]) == 1 and 1.0 <= result["eval_returns"][0] <= 500.0
    assert torch.get_num_threads() == threads  # train() restores the thread count it lowered


def test_same_seed_same_returns_with_and_without_profiling(tmp_path):
    plain = ppo_cartpole.train(seed=3, **SHORT)
    with rlscope.profile(tmp_path):
        profiled = ppo_cartpole.train(seed=3, **SHORT)
    again = ppo_cartpole.train(seed=3, **SHORT)
    other_seed = ppo_cartpole.train(seed=4, **SHORT)

    assert profiled["episode_returns"] == plain["episode_returns"] == again["episode_returns"]
    assert profiled["eval_returns"] == plain["eval_returns"]
    assert other_seed["episode_returns"] != plain["episode_returns"]
    assert list(tmp_path.glob("process-*/events.arrows")), "profiling wrote no trace"


def test_running_mean_crossing():
    returns = [10.0] * 5 + [500.0] * 25
    ends = list(range(100, 3100, 100))
    # the last 20 episodes average >= 475 once at most one of them is a 10: episode index 23
    assert ppo_cartpole.running_mean_crossing(returns, ends) == ends[23]
    assert ppo_cartpole.running_mean_crossing([500.0] * 19, list(range(19))) is None


def test_cli_writes_json(tmp_path, capsys):
    path = tmp_path / "result.json"
    ppo_cartpole.main(["--total-timesteps", "1024", "--device", "cpu", "--json", str(path), "--quiet"])

    data = json.loads(path.read_text())
    assert data["global_step"] == 1024
    assert data["seed"] == 1
    assert len(data["episode_returns"]) == len(data["episode_end_steps"]) > 0
    assert "final mean return" in capsys.readouterr().out
