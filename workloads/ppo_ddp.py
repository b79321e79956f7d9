"""PPO on CartPole-v1 with its learner in DistributedDataParallel, annotated with rlscope.

The bundled single-process PPO (``ppo_cartpole.py``: its agent, envs, rollout, advantages and loss,
imported from there, with its hyperparameters and rlscope annotations) run as several ranks in the
style of CleanRL's ``ppo_atari_multigpu.py``: each rank steps its own envs (seeded ``seed + rank``)
and collects its own rollout, and the learner is wrapped
in ``torch.nn.parallel.DistributedDataParallel``, so ``loss.backward()`` all-reduces (averages) the
gradients across ranks inside ``backprop`` and every rank takes the same optimizer step. Backend
``gloo`` on the CPU, ``nccl`` on GPUs (one per rank, ``cuda:LOCAL_RANK``).

Run it (``--total-steps`` counts env steps over all ranks)::

    torchrun --nproc-per-node 2 -m rlscope.workloads.ppo_ddp --total-steps 300000 --seed 1
    rlscope run -- torchrun --nproc-per-node 2 workloads/ppo_ddp.py --total-steps 20000   # profiled

Each rank prints one line; rank 0 then prints the mean over ranks of each rank's running mean of
its last 20 training episodes (``final_mean_return``), which reaches 475 when it has learned.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import rlscope

try:  # run as a file (torchrun workloads/ppo_ddp.py) or as a module (-m rlscope.workloads.ppo_ddp)
    import ppo_cartpole as _core
except ImportError:
    from rlscope.workloads import ppo_cartpole as _core

RUNNING_WINDOW, Agent, Episodes, Rollout = _core.RUNNING_WINDOW, _core.Agent, _core.Episodes, _core.Rollout
collect_rollout, compute_advantages = _core.collect_rollout, _core.compute_advantages
ppo_loss = _core.ppo_loss
evaluate, make_envs, running_mean_crossing = _core.evaluate, _core.make_envs, _core.running_mean_crossing


class DDPAgent(Agent):
    """The PPO agent whose ``forward`` is ``get_action_and_value``: DDP hooks ``forward`` only."""

    def forward(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.get_action_and_value(x, action)


def timed_allreduce_hook(state, bucket):  # unannotated: DDP checks annotations, and these are strings
    """DDP's default all-reduce (average the bucket), timed per call for an independent check of a
    profiler's NCCL time (benchmarks/ddp_nccl.py).

    On CUDA the collective runs on a side stream held back by a short GPU sleep until the CPU has
    queued it, so the CUDA events before and after it bracket the collective's kernel, not the CPU's
    launch; on the CPU (gloo) the call is timed on the clock. Each call's CPU time (perf_counter_ns,
    the profiler's clock) is kept too, to match calls with a profiler's recording windows.
    """
    buf = bucket.buffer()
    buf.div_(dist.get_world_size())
    at = time.perf_counter_ns()
    if buf.is_cuda:
        side = state.setdefault("stream", torch.cuda.Stream(device=buf.device))
        side.wait_stream(torch.cuda.current_stream())
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000)  # ~0.1 ms of GPU cycles: the collective is queued meanwhile
            begin.record()
            dist.all_reduce(buf)
            end.record()
        torch.cuda.current_stream().wait_stream(side)
        state["calls"].append((at, begin, end))
    else:
        dist.all_reduce(buf)
        state["calls"].append((at, (time.perf_counter_ns() - at) / 1e6))
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(buf)
    return fut


def allreduce_times(state: dict[str, Any]) -> list[tuple[int, float]]:
    """(perf_counter_ns at the call, milliseconds of the collective) of each timed call."""
    if state["calls"] and len(state["calls"][0]) == 3:
        torch.cuda.synchronize()
        return [(at, float(b.elapsed_time(e))) for at, b, e in state["calls"]]
    return [(at, float(ms)) for at, ms in state["calls"]]


def setup(backend: str) -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, MASTER_ADDR/PORT in the env)."""
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size(), device


def train(
    total_steps: int = 300_000,
    seed: int = 1,
    backend: str = "auto",
    num_envs: int = 4,
    num_steps: int = 128,
    learning_rate: float = 5e-4,
    gamma: float = 0.99,
    gae_lambda: float = 0.95,
    num_minibatches: int = 4,
    update_epochs: int = 4,
    clip_coef: float = 0.2,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
    max_grad_norm: float = 0.5,
    eval_episodes: int = 5,
    verbose: bool = True,
    time_allreduce: bool = False,
) -> dict[str, Any]:
    """Train on this rank; returns this rank's learning curve (``ppo_cartpole.train``'s keys).

    ``time_allreduce``: all-reduce through :func:`timed_allreduce_hook` (the same arithmetic as
    DDP's default), and return each call's time as ``allreduce_ms`` with ``allreduce_at_ns``."""
    rank, world, dev = setup(backend)
    batch_size = num_envs * num_steps  # per rank
    minibatch_size = batch_size // num_minibatches
    num_iterations = max(1, total_steps // (batch_size * world))

    # The same initial weights on every rank (DDP also broadcasts rank 0's), different envs and samples.
    torch.manual_seed(seed)
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    rng = np.random.default_rng(seed + rank)
    if dev.type == "cpu":
        torch.set_num_threads(1)  # a 64-64 MLP is fastest single-threaded, and ranks share the cores

    envs = make_envs(num_envs)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    agent = DDPAgent(obs_dim, int(envs.single_action_space.n)).to(dev)
    ddp_agent = DDP(agent, device_ids=[dev.index] if dev.type == "cuda" else None)
    hook_state: dict[str, Any] = {"calls": []}
    if time_allreduce:
        ddp_agent.register_comm_hook(hook_state, timed_allreduce_hook)
    optimizer = torch.optim.Adam(ddp_agent.parameters(), lr=learning_rate, eps=1e-5)
    torch.manual_seed(seed + rank)  # action sampling differs per rank

    buf = Rollout.zeros(num_steps, num_envs, obs_dim, dev)
    episodes = Episodes.start(num_envs)  # end steps count every rank's env steps
    episode_returns, episode_end_steps = episodes.returns, episodes.end_steps
    global_step = 0
    start = time.perf_counter()
    with rlscope.phase("training"):
        next_obs = torch.as_tensor(envs.reset(seed=seed + 1000 * rank)[0], dtype=torch.float32, device=dev)
        next_done = torch.zeros(num_envs, device=dev)
        for iteration in range(1, num_iterations + 1):
            optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * learning_rate

            # the local module in the rollout: no DDP hooks
            next_obs, next_done, global_step = collect_rollout(
                agent, envs, buf, next_obs, next_done, episodes, global_step,
                steps_per_step=num_envs * world, gamma=gamma, bootstrap_truncated=True, dev=dev,
            )  # fmt: skip
            advantages, returns = compute_advantages(agent, buf, next_obs, next_done, gamma, gae_lambda)

            b_obs = buf.obs.reshape((-1, obs_dim))
            b_logprobs, b_actions = buf.logprobs.reshape(-1), buf.actions.reshape(-1).long()
            b_advantages, b_returns, b_values = (
                advantages.reshape(-1),
                returns.reshape(-1),
                buf.values.reshape(-1),
            )

            b_inds = np.arange(batch_size)
            for _epoch in range(update_epochs):
                rng.shuffle(b_inds)
                for start_i in range(0, batch_size, minibatch_size):
                    mb = b_inds[start_i : start_i + minibatch_size]
                    with rlscope.scope("backprop"):
                        _, newlogprob, entropy, newvalue = ddp_agent(b_obs[mb], b_actions[mb])
                        loss = ppo_loss(
                            newlogprob,
                            entropy,
                            newvalue,
                            b_logprobs[mb],
                            b_advantages[mb],
                            b_returns[mb],
                            b_values[mb],
                            clip_coef,
                            ent_coef,
                            vf_coef,
                        )["loss"]

                        optimizer.zero_grad()
                        loss.backward()  # DDP all-reduces the gradients here
                        nn.utils.clip_grad_norm_(ddp_agent.parameters(), max_grad_norm)
                        optimizer.step()

            if verbose and rank == 0 and iteration % 10 == 0:
                recent = episode_returns[-RUNNING_WINDOW:]
                print(
                    f"step {global_step:>8}  rank 0 mean return {np.mean(recent) if recent else 0:7.1f}"
                    f"  sps {int(global_step / (time.perf_counter() - start))}",
                    flush=True,
                )
    train_seconds = time.perf_counter() - start

    eval_returns: list[float] = []
    if eval_episodes > 0:
        with rlscope.phase("evaluation"):
            eval_returns = evaluate(agent, eval_episodes, seed + rank, dev)
    envs.close()

    timed = allreduce_times(hook_state)
    recent = episode_returns[-RUNNING_WINDOW:]
    final = float(np.mean(recent)) if recent else float("nan")
    mean_over_ranks = torch.tensor([final], dtype=torch.float64, device=dev)
    dist.all_reduce(mean_over_ranks)
    dist.destroy_process_group()
    return {
        "rank": rank,
        "world_size": world,
        "episode_returns": episode_returns,
        "episode_end_steps": episode_end_steps,
        "global_step": global_step,
        "final_mean_return": final,
        "mean_over_ranks": float(mean_over_ranks.item()) / world,
        "steps_to_475": running_mean_crossing(episode_returns, episode_end_steps),
        "eval_returns": eval_returns,
        "wall_seconds": train_seconds,
        "device": str(dev),
        "seed": seed,
        **(
            {"allreduce_at_ns": [a for a, _ in timed], "allreduce_ms": [m for _, m in timed]} if timed else {}
        ),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--total-steps", type=int, default=300_000, help="env steps over all ranks")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    p.add_argument("--num-envs", type=int, default=4, help="envs per rank")
    p.add_argument("--num-steps", type=int, default=128, help="steps per env per rollout")
    p.add_argument("--learning-rate", type=float, default=5e-4, help="Adam's rate, annealed to 0")
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--json", default=None, metavar="FILE", help="write each rank's result to FILE.rank<N>")
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--time-allreduce",
        action="store_true",
        help="time each gradient all-reduce (CUDA events; --json has them)",
    )
    args = p.parse_args(argv)

    result = train(
        total_steps=args.total_steps,
        seed=args.seed,
        backend=args.backend,
        num_envs=args.num_envs,
        num_steps=args.num_steps,
        learning_rate=args.learning_rate,
        eval_episodes=args.eval_episodes,
        verbose=not args.quiet,
        time_allreduce=args.time_allreduce,
    )
    print(
        f"rank {result['rank']}/{result['world_size']} seed {args.seed}: {result['global_step']} steps "
        f"in {result['wall_seconds']:.1f}s, final mean return {result['final_mean_return']:.1f}, "
        f"steps_to_475 {result['steps_to_475']}, eval {result['eval_returns']}",
        flush=True,
    )
    if result["rank"] == 0:
        print(f"mean over ranks of final mean return: {result['mean_over_ranks']:.1f}", flush=True)
    if args.json:
        with open(f"{args.json}.rank{result['rank']}", "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
