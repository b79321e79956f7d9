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


def test_cli_passes_the_update_epochs(monkeypatch):
    """``--update-epochs`` reaches train() (4, PPO's default, when not given)."""
    seen = []
    result = {"global_step": 0, "wall_seconds": 0.0, "final_mean_return": 0.0, "steps_to_475": None}
    result["eval_returns"] = []
    monkeypatch.setattr(ppo_cartpole, "train", lambda **kw: seen.append(kw["update_epochs"]) or result)
    ppo_cartpole.main(["--quiet", "--update-epochs", "2"])
    ppo_cartpole.main(["--quiet"])
    assert seen == [2, 4]


@pytest.mark.parametrize(
    "sim", ["torch", pytest.param("compiled", marks=pytest.mark.slow)]
)  # compiling: ~40 s
def test_a_short_run_on_a_bundled_simulator(sim):
    result = ppo_cartpole.train(seed=2, sim=sim, **SHORT)
    assert result["sim"] == sim and result["global_step"] == 2048
    returns, ends = result["episode_returns"], result["episode_end_steps"]
    assert len(returns) == len(ends) > 20
    assert all(r == int(r) and 1.0 <= r <= 500.0 for r in returns)  # whole episodes, reward 1 a step
    assert ends == sorted(ends) and ends[0] > 0 and ends[-1] <= result["global_step"]
    assert ppo_cartpole.train(seed=2, sim=sim, **SHORT)["episode_returns"] == returns  # seeded


def test_the_masked_loss_is_the_loss_of_the_valid_transitions():
    g = torch.Generator().manual_seed(0)
    n = 64
    args = [torch.randn(n, generator=g) for _ in range(7)]  # newlogprob, entropy, newvalue, old ...
    valid = (torch.rand(n, generator=g) > 0.3).float()
    keep = valid.bool()
    masked = ppo_cartpole.ppo_loss(*args, 0.2, 0.01, 0.5, valid=valid)
    subset = ppo_cartpole.ppo_loss(*[a[keep] for a in args], 0.2, 0.01, 0.5)
    for key in ("loss", "pg_loss", "v_loss", "entropy_loss"):
        assert masked[key].item() == pytest.approx(subset[key].item(), rel=1e-5), key
    everything = ppo_cartpole.ppo_loss(*args, 0.2, 0.01, 0.5, valid=torch.ones(n))
    assert everything["loss"].item() == pytest.approx(
        ppo_cartpole.ppo_loss(*args, 0.2, 0.01, 0.5)["loss"].item()
    )


def test_episodes_of_a_rollout_come_back_in_step_order():
    episodes = ppo_cartpole.Episodes([], [], np.zeros(3))
    ended = torch.tensor([[False, True, False], [True, False, True]])
    returns = torch.tensor([[0.0, 7.0, 0.0], [9.0, 0.0, 4.0]])
    episodes.add(ended, returns, first_step=100, steps_per_step=3)
    assert episodes.returns == [7.0, 9.0, 4.0]
    assert episodes.end_steps == [103, 106, 106]


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["gymnasium", "torch", "compiled"])
def test_ppo_learns_cartpole_on_every_cpu_simulator(sim):
    """CartPole solved (a running mean of 20 episodes of 475) within the default 200k steps, and the
    learned policy scores 500 on gymnasium's own CartPole."""
    result = ppo_cartpole.train(seed=1, device="cpu", sim=sim, eval_episodes=3)
    assert result["steps_to_475"] is not None, result["final_mean_return"]
    assert min(result["eval_returns"]) >= 475.0


def test_a_short_run_on_the_fused_simulator_through_tritons_interpreter(tmp_path):
    """The fused kernel runs on a GPU; Triton's interpreter runs it on CPU tensors (set before triton
    is imported, hence a process of its own)."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "rlscope.workloads.ppo_cartpole", "--sim", "fused", "--device", "cpu"]
    cmd += ["--total-timesteps", "1024", "--eval-episodes", "1", "--quiet", "--json", str(out)]
    r = subprocess.run(cmd, env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["sim"] == "fused" and result["global_step"] == 1024
    assert len(result["episode_returns"]) > 10
    assert all(r == int(r) and 1.0 <= r <= 500.0 for r in result["episode_returns"])


def test_the_operation_timers_lie_inside_their_phases(tmp_path, monkeypatch):
    """``--time-operations``: per iteration, each operation's seconds (a timer around every call of its
    scope) are positive and fit inside the phase that runs them: inference and simulation inside the
    rollout (the GAE's bootstrap value is one more inference call, in the advantages' phase), backprop
    inside the update. The same returns as without timers."""
    monkeypatch.setattr(ppo_cartpole, "OPERATION_SECONDS", None)  # main() sets the module's global
    out = tmp_path / "r.json"
    args = ["--total-timesteps", "2048", "--device", "cpu", "--eval-episodes", "0", "--quiet", "--json"]
    ppo_cartpole.main([*args, str(out), "--time-operations"])
    timed = json.loads(out.read_text())
    ppo_cartpole.main([*args, str(tmp_path / "plain.json")])
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert "operation_seconds" not in plain and plain["episode_returns"] == timed["episode_returns"]
    ops, its = timed["operation_seconds"], timed["iteration_seconds"]
    assert len(ops) == len(its) == 4
    for o, (rollout, advantages, update) in zip(ops, its, strict=True):
        assert set(o) == {"inference", "simulation", "compute_advantages", "backprop"}
        assert all(v > 0 for v in o.values())
        assert o["simulation"] < rollout and o["backprop"] <= update
        assert o["compute_advantages"] <= advantages
        assert o["inference"] + o["simulation"] <= rollout + advantages
