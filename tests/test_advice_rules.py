"""Advice rules on synthetic summaries: intra-op thread oversubscription, a small network on the GPU (acting
and learning), backprop-bound updates, the margin that keeps findings the same across repeated runs, and
changes said in the words of the library that runs the program, never suggesting what it already does.

Summaries are written by hand (the shape rlscope.analysis.summary gives), so every figure is known.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from rlscope.analysis.advice import advise
from rlscope.analysis.advice import program as P
from rlscope.analysis.gpu_calls import OpGpuCalls


def op(total: float, calls: int = 1000, gpu: dict | None = None, **cats: float) -> dict[str, Any]:
    return {
        "total_s": total,
        "exclusive_s": sum(cats.values()) or total,
        "calls": calls,
        "categories": cats,
        "gpu_categories": gpu or {},
    }


def summary(ops: dict[str, dict], wall: float, **extra: Any) -> dict[str, Any]:
    cats: dict[str, float] = {}
    for o in ops.values():
        for c, s in o["categories"].items():
            cats[c] = cats.get(c, 0.0) + s
    proc = {"pid": 100, "host": "h", "node": "h", "role": "main", "wall_s": wall, "categories": cats}
    return {
        "wall_s": wall,
        "categories": cats,
        "operations": ops,
        "processes": [{**proc, "operations": ops}],
    } | extra


def rules(s: dict, gpu_calls: dict | None = None) -> list[tuple[str, str]]:
    return [(a["rule"], a["operation"]) for a in advise(s, gpu_calls)]


def found(s: dict, rule: str, gpu_calls: dict | None = None) -> list[dict]:
    return [a for a in advise(s, gpu_calls) if a["rule"] == rule]


def stacks(op_name: str, *frames: tuple[str, str, float], python_line: tuple | None = None) -> dict:
    """A summary's stacks section: the operation's top running functions (file, function, share)."""
    entry = {
        "top_lines": [],
        "top_functions": [{"file": f, "line": 1, "function": fn, "share": sh} for f, fn, sh in frames],
    }
    if python_line:
        f, ln, fn, sh = python_line
        entry["top_python_lines"] = [{"file": f, "line": ln, "function": fn, "share": sh}]
    return {"hz": 100, "samples": 1000, "operations": {op_name: entry}}


SB3_PPO = "/usr/lib/python3.11/site-packages/stable_baselines3/ppo/ppo.py"
TORCH_ADAM = "/usr/lib/python3.11/site-packages/torch/optim/adam.py"
DYNAMO = "/usr/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py"


# --------------------------------------------------------------------------- intra-op threads


def _threaded(threads: int | None, cores: int = 2, backprop_ms: float = 22.0, python_ms: float = 0.9) -> dict:
    """A DQN-like CPU run: 1,000 updates of ``backprop_ms`` of torch ops and ``python_ms`` of Python each."""
    ops = {
        "backprop": op(1.0, calls=1000, backend=backprop_ms, python=python_ms),  # ms a call: seconds in all
        "inference": op(2.0, calls=10_000, backend=1.5, python=0.5),
        "simulation": op(2.0, calls=10_000, simulator=2.0),
    }
    ops["backprop"]["total_s"] = ops["backprop"]["exclusive_s"]
    s = summary(ops, wall=backprop_ms + python_ms + 5.0)
    if threads is not None:
        s["processes"][0]["threads"] = {"torch_intra_op": threads, "usable_cores": cores}
    return s


def test_intra_op_oversubscription_fires_on_more_threads_than_cores():
    s = _threaded(threads=8, cores=2)
    [a] = found(s, "intra_op_oversubscription")
    assert a["operation"] == "backprop"
    # backprop: 22 ms torch - 2 x 0.9 ms Python a call over 1,000 calls; inference: 1.5 s - 2 x 0.5 s
    assert a["seconds_at_stake"] == pytest.approx((22.0 - 1.8) + (1.5 - 1.0))
    assert a["evidence"].startswith(
        "torch runs 8 intra-op threads on 2 usable cores; backprop: 22.0 ms of torch ops a call over"
        " 1,000 calls (96% of its own time), one-thread estimate 1.8 ms; inference: 150.0 µs of torch ops"
        " a call over 10,000 calls (75% of its own time), one-thread estimate 100.0 µs (one-thread"
        " estimate: 2x the operation's Python time"
    )
    assert "torch.set_num_threads(1)" in a["change"] and "OMP_NUM_THREADS=1" in a["change"]


def test_intra_op_oversubscription_names_the_operation_with_most_torch_time():
    """Near-equal time at stake (a difference of two similar times, ordered by noise run to run) does not
    decide which operation the finding names: the one with most torch-op time does."""
    s = _threaded(threads=4, cores=2, backprop_ms=1.0, python_ms=0.25)  # 1.0 s torch, 0.5 s at stake
    s["operations"]["inference"] = op(2.5, calls=10_000, backend=2.0, python=0.76)  # 2.0 s, 0.48 s
    [a] = found(s, "intra_op_oversubscription")
    assert a["operation"] == "inference"
    assert a["seconds_at_stake"] == pytest.approx((1.0 - 0.5) + (2.0 - 1.52))


def test_intra_op_oversubscription_silent_with_one_thread():
    """The fixed program, slow figures kept: the thread count, not the time, says what the cause is."""
    assert found(_threaded(threads=1, cores=2), "intra_op_oversubscription") == []
    assert (
        found(_threaded(threads=1, cores=2, backprop_ms=0.24, python_ms=0.24), "intra_op_oversubscription")
        == []
    )


def test_intra_op_oversubscription_silent_without_thread_facts():
    assert found(_threaded(threads=None), "intra_op_oversubscription") == []


def test_intra_op_oversubscription_counts_every_torch_process_of_a_host():
    """Four processes of two threads on four cores: each fits alone, together they are twice too many."""
    s = _threaded(threads=2, cores=4)
    base = s["processes"][0]
    s["processes"] = [{**base, "pid": 100 + i} for i in range(4)]
    [a] = found(s, "intra_op_oversubscription")
    assert a["evidence"].startswith(
        "4 processes with torch ops run 8 intra-op threads on their host's 4 usable"
    )
    assert a["seconds_at_stake"] == pytest.approx(4 * ((22.0 - 1.8) + (1.5 - 1.0)))
    # on four hosts, one process each, nothing is oversubscribed (and 22 ms calls are not tiny)
    s["processes"] = [{**base, "pid": 100 + i, "node": f"h{i}"} for i in range(4)]
    assert found(s, "intra_op_oversubscription") == []


def test_intra_op_threads_on_tiny_torch_dominated_calls_without_oversubscription():
    """Four threads on sixteen cores: fires only where calls are tiny and torch ops dominate them."""
    tiny = _threaded(threads=4, cores=16, backprop_ms=0.45, python_ms=0.05)
    [a] = found(tiny, "intra_op_oversubscription")
    assert a["operation"] == "backprop" and a["seconds_at_stake"] == pytest.approx(0.45 - 0.1)
    assert a["evidence"].startswith(
        "torch runs 4 intra-op threads on 16 usable cores, for torch work of under 1.0 ms"
    )
    assert (
        found(_threaded(threads=4, cores=16, backprop_ms=1.5, python_ms=0.05), "intra_op_oversubscription")
        == []
    )
    assert (
        found(_threaded(threads=4, cores=16, backprop_ms=0.3, python_ms=0.2), "intra_op_oversubscription")
        == []
    )


def test_intra_op_oversubscription_supersedes_backprop_bound():
    s = _threaded(threads=8, cores=2)
    assert ("backprop_bound", "backprop") not in rules(s)
    s["processes"][0]["threads"]["torch_intra_op"] = 1
    assert ("backprop_bound", "backprop") in rules(s)


def test_a_superseded_finding_keeps_its_number_under_hides():
    """The finding the run leads with lists what it hides, each with its own time at stake, as that
    rule alone gives it (the compile check reads launch_bound's there when acting on the CPU wins)."""
    s = _threaded(threads=1, cores=2)
    [alone] = found(s, "backprop_bound")
    s["processes"][0]["threads"]["torch_intra_op"] = 8
    [lead] = found(s, "intra_op_oversubscription")
    assert lead["hides"] == [
        {"rule": "backprop_bound", "operation": "backprop", "seconds_at_stake": alone["seconds_at_stake"]}
    ]
    assert "hides" not in alone  # it hides nothing


def test_metadata_records_what_bounds_the_threads():
    from rlscope.runtime.metadata import cpu_facts

    torch = pytest.importorskip("torch")  # imported: the start's reading is taken

    f = cpu_facts()
    assert int(f["cpu.count"]) == os.cpu_count()
    assert 1 <= int(f["cpu.usable"]) <= int(f["cpu.affinity"]) <= int(f["cpu.count"])
    assert f["torch.intra_op_threads.start"] == str(torch.get_num_threads())


# --------------------------------------------------------------------------- a small network on the GPU


def _gpu_ppo(device: str) -> tuple[dict, dict]:
    """SB3 PPO with an MlpPolicy: on the GPU, tiny kernels driven by Python and launches, GPU busy 2%."""
    if device == "cpu":
        ops = {
            "inference": op(2.0, calls=6000, python=1.1, backend=0.9),
            "backprop": op(6.0, calls=3840, python=2.7, backend=3.3),
            "simulation": op(0.6, calls=6000, simulator=0.5, python=0.1),
        }
        return summary(ops, wall=11.0), {}
    ops = {
        "inference": op(3.0, calls=6000, gpu={"gpu_kernel": 0.06}, python=1.4, backend=0.6, cuda_api=1.0),
        "backprop": op(9.0, calls=3840, gpu={"gpu_kernel": 0.2}, python=3.0, backend=2.5, cuda_api=3.5),
        "simulation": op(0.6, calls=6000, simulator=0.5, python=0.1),
    }
    s = summary(ops, wall=14.0, gpu={"gpu_bound_fraction": 0.02}, gpu_categories={"gpu_kernel": 0.26})
    s["stacks"] = stacks("backprop", (SB3_PPO, "train", 0.3))
    calls = {
        "backprop": OpGpuCalls(
            instances=3840, kernels=200_000, short_kernels=190_000, kernel_s=0.2, launch_s=3.0
        ),
        "inference": OpGpuCalls(
            instances=6000, kernels=60_000, short_kernels=60_000, kernel_s=0.06, launch_s=0.9
        ),
    }
    return s, calls


def test_small_network_on_the_gpu_is_one_finding_to_act_and_learn_on_the_cpu():
    s, calls = _gpu_ppo("cuda")
    [a] = found(s, "gpu_idle_small_policy", calls)
    assert a["operation"] == "inference"
    assert a["seconds_at_stake"] == pytest.approx(1.0 + 3.5)  # both operations' CUDA API time
    assert a["change"].startswith("act and learn on the CPU: device='cpu'")
    assert "backprop took 9.00 s over 3,840 calls" in a["evidence"]
    # the launch, Python and update rules say nothing more about the operations it speaks for
    assert rules(s, calls) == [("gpu_idle_small_policy", "inference")]


def test_small_network_on_the_cpu_gets_no_gpu_advice():
    s, calls = _gpu_ppo("cpu")
    assert found(s, "gpu_idle_small_policy", calls) == []


def test_acting_alone_small_on_the_gpu_keeps_learning_there():
    """A learner whose kernels fill its time stays on the GPU: only acting moves (a script's CPU copy)."""
    s, calls = _gpu_ppo("cuda")
    s["operations"]["backprop"]["gpu_categories"] = {"gpu_kernel": 8.0}
    del s["stacks"]
    [a] = found(s, "gpu_idle_small_policy", calls)
    assert a["change"].startswith("a CPU copy of the policy for acting")
    assert "backprop" not in a["evidence"]


# --------------------------------------------------------------------------- backprop-bound


def _sb3_ppo_cpu(backprop_share: float, **stack: Any) -> dict:
    """SB3 PPO on the CPU: backprop at ``backprop_share`` of the run, torch ops 55% of it."""
    wall = 10.0
    bp = backprop_share * wall
    ops = {
        "backprop": op(bp, calls=3840, backend=0.55 * bp, python=0.45 * bp),
        "inference": op(2.0, calls=6000, backend=1.1, python=0.9),
        "simulation": op(1.0, calls=6000, simulator=0.8, python=0.2),
    }
    s = summary(ops, wall=wall)
    s["stacks"] = stacks("backprop", (SB3_PPO, "train", 0.2), *stack.get("frames", ()))
    return s


def test_backprop_bound_fires_on_an_update_that_takes_most_of_the_run():
    s = _sb3_ppo_cpu(0.56, frames=[(TORCH_ADAM, "_single_tensor_adam", 0.12)])
    [a] = found(s, "backprop_bound")
    assert a["operation"] == "backprop"
    assert a["seconds_at_stake"] == pytest.approx(0.45 * 5.6)  # its Python time
    assert a["evidence"] == (
        "backprop took 5.60 s (56% of the run) over 3,840 calls (1.5 ms each): 55% of its own time in torch"
        " ops (3.08 s), 45% Python (2.52 s)"
    )
    # stable-baselines3's words: its optimizer argument (PPO's eps kept), no torch.compile it has no switch
    # for, and the hyperparameters named as such
    assert "optimizer_kwargs=dict(eps=1e-5, fused=True)" in a["change"]
    assert "for-loop step, _single_tensor_adam, in 12% of them" in a["change"]
    assert "torch.compile" not in a["change"]
    assert "hyperparameters, which change what is learned: a larger batch_size" in a["change"]
    assert "set_to_none" not in a["change"]  # the default since torch 2.0


def test_backprop_bound_silent_on_a_small_update():
    assert found(_sb3_ppo_cpu(0.25), "backprop_bound") == []


def test_backprop_bound_never_suggests_a_fused_optimizer_to_a_fused_one():
    s = _sb3_ppo_cpu(0.56, frames=[(TORCH_ADAM, "_fused_adam", 0.05)])
    [a] = found(s, "backprop_bound")
    assert "fused" not in a["change"]


def test_python_backprop_supersedes_backprop_bound():
    s = _sb3_ppo_cpu(0.56)
    s["operations"]["backprop"]["categories"] = {"backend": 0.2 * 5.6, "python": 0.8 * 5.6}
    assert [r for r in rules(s) if r[1] == "backprop"] == [("python_backprop", "backprop")]


# --------------------------------------------------------------------------- the same findings run after run


def _cleanrl(python_share: float) -> dict:
    """A CleanRL PPO run: inference's Python share as one run measured it."""
    inf = 8.6
    ops = {
        "inference": op(inf, calls=500_000, python=python_share * inf, backend=(1 - python_share) * inf),
        "backprop": op(3.0, calls=2000, python=1.2, backend=1.8),
        "simulation": op(5.0, calls=500_000, simulator=3.5, python=1.5),
    }
    return summary(ops, wall=20.0)


def test_three_runs_of_one_command_give_the_same_findings():
    """49%, 51% and 50.4% Python: a line at 50% with no band said 4.34 s, nothing, and 3.66 s."""
    runs = [rules(_cleanrl(share)) for share in (0.49, 0.51, 0.504)]
    assert runs[0] == runs[1] == runs[2]
    assert all(r != "python_inference" for r, _ in runs[0])


def _typical() -> dict:
    """A run with findings of three summary-only rules, each share at a typical value (of an 80 s run)."""
    ops = {
        "simulation": op(40.0, calls=50_000, simulator=32.0, python=8.0),  # 50% of the run, 80% simulator
        "inference": op(15.0, calls=50_000, python=10.5, backend=4.5),  # 70% Python
        "backprop": op(44.0, calls=4000, python=16.0, backend=28.0),  # 55% of the run, 36% Python
    }
    return summary(ops, wall=80.0)


def _jitter(s: dict, points: float) -> dict:
    """The same run as another run of it measures it: every category share of every operation moved by
    ``points`` (its first category up, the second down), every operation's share of the run with it."""
    out = copy.deepcopy(s)
    for o in out["operations"].values():
        cats = list(o["categories"])
        excl = o["exclusive_s"]
        o["categories"][cats[0]] += points * excl
        o["categories"][cats[1]] -= points * excl
        o["total_s"] += points * out["wall_s"]
        o["exclusive_s"] = sum(o["categories"].values())
    out["processes"][0]["operations"] = out["operations"]
    return out


@pytest.mark.parametrize("make", [_typical, lambda: _cleanrl(0.50)], ids=["typical", "cleanrl"])
def test_run_to_run_noise_of_two_points_leaves_the_findings_unchanged(make):
    base = make()
    expected = rules(base)
    for points in (-0.02, -0.01, 0.01, 0.02):
        assert rules(_jitter(base, points)) == expected, points


def test_typical_run_fires_every_summary_rule_it_holds():
    assert sorted(rules(_typical())) == [
        ("backprop_bound", "backprop"),
        ("python_inference", "inference"),
        ("simulation_bound", "simulation"),
    ]


def test_a_shares_own_noise_widens_the_band():
    """58% Python clears the 5-point band, but not when the share's own noise is 10 points."""
    s = _cleanrl(0.58)
    assert ("python_inference", "inference") in rules(s)
    s["operations"]["inference"]["noise_s"] = {"categories": {"python": 0.10 * 8.6}}
    assert ("python_inference", "inference") not in rules(s)


# --------------------------------------------------------------------------- the library's words


@pytest.mark.parametrize(
    "marks, expected",
    [
        ({"stacks": stacks("inference", (SB3_PPO, "collect_rollouts", 0.3))}, P.SB3),
        (
            {
                "stacks": stacks(
                    "inference", ("/x/site-packages/torchrl/collectors/_single.py", "rollout", 0.3)
                )
            },
            P.TORCHRL,
        ),
        ({"roles": {}, "processes": [{"role": "SingleAgentEnvRunner", "operations": {}}]}, P.RLLIB),
        ({"phases": {"rollout": {"auto": True}, "update": {"auto": True}}}, P.UNKNOWN),
        ({"phases": {"update (auto)": {}}}, P.UNKNOWN),
        ({"phases": {"training": {"auto": False}}}, P.SCRIPT),
        ({}, P.SCRIPT),
    ],
)
def test_library_is_read_from_stacks_roles_and_phases(marks, expected):
    assert P.library({"operations": {}, **marks}) == expected


def test_python_inference_names_the_line_and_never_suggests_what_the_code_does():
    s = _cleanrl(0.70)
    s["stacks"] = stacks(
        "inference",
        (DYNAMO, "_fn", 0.2),
        python_line=("/home/u/cleanrl/cleanrl/ppo.py", 212, "main", 0.41),
    )
    [a] = found(s, "python_inference")
    assert a["evidence"].endswith("; most of its Python samples at cleanrl/ppo.py:212 in main (41%)")
    assert "torch.compile" not in a["change"]  # its samples run compiled code already
    assert "convert" not in a["change"]  # nothing in the trace says how it converts observations
    assert "--num-envs" in a["change"]


@pytest.mark.parametrize(
    "lib_stack, words",
    [
        (("/s/site-packages/torchrl/objectives/ppo.py", "forward"), "torch.compile(loss_module)"),
        (("/s/site-packages/ray/rllib/core/learner/learner.py", "update"), "torch_compile_learner=True"),
    ],
)
def test_update_change_in_the_librarys_words(lib_stack, words):
    s = _sb3_ppo_cpu(0.56)
    s["stacks"] = stacks("backprop", (*lib_stack, 0.2))
    [a] = found(s, "backprop_bound")
    assert words in a["change"]
    assert "fused" not in a["change"]  # sampled, and no optimizer step among its top functions


def test_the_what_if_caps_a_stake_at_what_the_run_would_lose():
    """A rule puts an operation's Python at stake; the run is shorter by that only where it lay on the
    critical path: the what-if's saving at k=inf caps the stake, and the evidence says so."""
    from rlscope.analysis.advice import Facts, on_the_critical_path
    from rlscope.analysis.advice.base import Finding

    found = Finding("python_inference", "inference", "evidence", 2.0, "change", parts=("python",))
    summary = {
        "wall_s": 10.0,
        "what_if": {"operations": {"inference": {"python": {"saving_s": {"inf": 0.5}}}}},
    }
    capped = on_the_critical_path(Facts(summary, {}), found)
    assert capped.seconds_at_stake == 0.5 and "at most 500.0 ms shorter" in capped.evidence
    more = {"wall_s": 10.0, "what_if": {"operations": {"inference": {"python": {"saving_s": {"inf": 3.0}}}}}}
    assert on_the_critical_path(Facts(more, {}), found) is found  # never raised above the rule's own
    assert on_the_critical_path(Facts({"wall_s": 10.0}, {}), found) is found  # no what-if: as the rule says
    elsewhere = {"wall_s": 10.0, "what_if": {"operations": {}}}  # not replayed: as the rule says
    assert on_the_critical_path(Facts(elsewhere, {}), found) is found
