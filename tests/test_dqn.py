"""The DQN CartPole workload: result shape, determinism with and without profiling, its trace and CLI.

Learning itself is not asserted here (a 50k-step run takes ~15 s); the numbers measured are in the
workload's module docstring.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import rlscope

pytest.importorskip("gymnasium")

from rlscope.analysis import analyze
from rlscope.workloads import dqn_cartpole

# 1500 steps of training after 500 of warm-up: 375 gradient steps, 3 target updates, about 1 s.
SHORT = {"total_timesteps": 2000, "learning_starts": 500, "device": "cpu"}


def test_short_run_returns_documented_keys():
    threads = torch.get_num_threads()
    result = dqn_cartpole.train(seed=1, **SHORT)

    assert result["global_step"] == 2000
    assert result["updates"] == 1500 // 4  # train_frequency 4
    assert result["target_updates"] == 3  # steps 500, 1000 and 1500
    returns, ends = result["episode_returns"], result["episode_end_steps"]
    assert len(returns) == len(ends) > 20
    assert all(isinstance(r, float) and 1.0 <= r <= 500.0 for r in returns)
    assert ends == sorted(ends) and ends[0] > 0 and ends[-1] <= result["global_step"]
    assert result["final_mean_return"] == pytest.approx(np.mean(returns[-20:]))
    assert result["seconds"] > 0 and result["device"] == "cpu"
    assert torch.get_num_threads() == threads  # train() restores the thread count it lowered


def test_same_seed_same_returns_with_and_without_profiling(tmp_path):
    plain = dqn_cartpole.train(seed=3, **SHORT)
    with rlscope.profile(tmp_path):
        profiled = dqn_cartpole.train(seed=3, **SHORT)
    again = dqn_cartpole.train(seed=3, **SHORT)
    other_seed = dqn_cartpole.train(seed=4, **SHORT)

    assert profiled["episode_returns"] == plain["episode_returns"] == again["episode_returns"]
    assert profiled["updates"] == plain["updates"]
    assert other_seed["episode_returns"] != plain["episode_returns"]

    ops = analyze(tmp_path).operations
    for name in ("inference", "simulation", "replay_buffer", "backprop", "target_update"):
        assert ops[name]["calls"] > 0, name
    assert ops["inference"]["calls"] == ops["simulation"]["calls"] == 2000
    assert ops["backprop"]["calls"] == plain["updates"]
    # one add per step plus one sample per update
    assert ops["replay_buffer"]["calls"] == 2000 + plain["updates"]


def test_time_limit_stops_training():
    # the budget is spent by the env reset already: not a single step is taken
    result = dqn_cartpole.train(seed=1, time_limit_s=0.0, **SHORT)
    assert result["global_step"] == result["updates"] == 0
    assert result["episode_returns"] == [] and math.isnan(result["final_mean_return"])


def test_replay_buffer_wraps_and_samples_what_was_added():
    rb = dqn_cartpole.ReplayBuffer(capacity=3, obs_dim=2)
    for t in range(5):  # two envs per add: 10 transitions through a buffer of 3
        obs = np.array([[t, 0], [t, 1]], dtype=np.float32)
        rb.add(obs, obs + 1, np.array([0, 1]), np.array([t, t], dtype=np.float32), np.array([False, True]))
    assert rb.size == 3 and rb.pos == 10 % 3
    b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(
        64, np.random.default_rng(0), torch.device("cpu")
    )
    assert b_obs.shape == (64, 2) and b_actions.dtype == torch.int64
    assert torch.equal(b_next_obs, b_obs + 1)
    assert torch.equal(b_dones, b_actions.float())  # env 1 (action 1) always done
    assert set(b_rewards.tolist()) <= {3.0, 4.0}  # only the last 3 transitions remain


def test_linear_schedule():
    assert dqn_cartpole.linear_schedule(1.0, 0.05, 100, 0) == 1.0
    assert dqn_cartpole.linear_schedule(1.0, 0.05, 100, 50) == pytest.approx(0.525)
    assert dqn_cartpole.linear_schedule(1.0, 0.05, 100, 1000) == 0.05


def test_cli_writes_json(tmp_path, capsys):
    path = tmp_path / "result.json"
    dqn_cartpole.main(
        [
            "--total-timesteps",
            "1000",
            "--learning-starts",
            "200",
            "--device",
            "cpu",
            "--json",
            str(path),
            "--quiet",
        ]
    )

    data = json.loads(path.read_text())
    assert data["global_step"] == 1000 and data["seed"] == 1
    assert data["updates"] == 800 // 4
    assert len(data["episode_returns"]) == len(data["episode_end_steps"]) > 0
    assert not math.isnan(data["final_mean_return"])
    assert "final mean return" in capsys.readouterr().out
