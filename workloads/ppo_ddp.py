"""PPO on CartPole-v1 with its learner in DistributedDataParallel, annotated with rlscope.

The bundled single-process PPO (``ppo_cartpole.py``: same agent, envs, hyperparameters and rlscope
annotations) run as several ranks in the style of CleanRL's ``ppo_atari_multigpu.py``: each rank
steps its own envs (seeded ``seed + rank``) and collects its own rollout, and the learner is wrapped
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
    from ppo_cartpole import RUNNING_WINDOW, Agent, evaluate, make_envs, running_mean_crossing
except ImportError:
    from rlscope.workloads.ppo_cartpole import (
        RUNNING_WINDOW,
        Agent,
        evaluate,
        make_envs,
        running_mean_crossing,
    )


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

    obs = torch.zeros((num_steps, num_envs, obs_dim), device=dev)
    actions = torch.zeros((num_steps, num_envs), device=dev)
    logprobs = torch.zeros((num_steps, num_envs), device=dev)
    rewards = torch.zeros((num_steps, num_envs), device=dev)
    dones = torch.zeros((num_steps, num_envs), device=dev)
    values = torch.zeros((num_steps, num_envs), device=dev)

    episode_returns: list[float] = []
    episode_end_steps: list[int] = []  # global steps (all ranks) at each episode's end
    running_return = np.zeros(num_envs)
    global_step = 0
    start = time.perf_counter()
    with rlscope.phase("training"):
        next_obs = torch.as_tensor(envs.reset(seed=seed + 1000 * rank)[0], dtype=torch.float32, device=dev)
        next_done = torch.zeros(num_envs, device=dev)
        for iteration in range(1, num_iterations + 1):
            optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * learning_rate

            for step in range(num_steps):
                global_step += num_envs * world
                obs[step] = next_obs
                dones[step] = next_done
                with rlscope.scope("inference"), torch.no_grad():  # the local module: no DDP hooks
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                with rlscope.scope("simulation"):
                    next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                    next_done_np = np.logical_or(terminations, truncations)
                    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=dev)
                    next_done = torch.as_tensor(next_done_np, dtype=torch.float32, device=dev)
                    rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=dev)

                # bootstrap episodes cut by the time limit (see ppo_cartpole.py's docstring)
                timeouts = np.flatnonzero(truncations & ~terminations)
                if timeouts.size:
                    with rlscope.scope("inference"), torch.no_grad():
                        final_obs = torch.as_tensor(np.stack(infos["final_obs"][timeouts]), device=dev)
                        rewards[step, timeouts] += gamma * agent.get_value(final_obs.float()).flatten()

                running_return += reward
                for i in np.flatnonzero(next_done_np):
                    episode_returns.append(float(running_return[i]))
                    episode_end_steps.append(global_step)
                    running_return[i] = 0.0

            with rlscope.scope("compute_advantages"), torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages = torch.zeros_like(rewards)
                lastgaelam = 0
                for t in reversed(range(num_steps)):
                    nextnonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
                    nextvalues = next_value if t == num_steps - 1 else values[t + 1]
                    delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                    advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
                returns = advantages + values

            b_obs = obs.reshape((-1, obs_dim))
            b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1).long()
            b_advantages, b_returns, b_values = (
                advantages.reshape(-1),
                returns.reshape(-1),
                values.reshape(-1),
            )

            b_inds = np.arange(batch_size)
            for _epoch in range(update_epochs):
                rng.shuffle(b_inds)
                for start_i in range(0, batch_size, minibatch_size):
                    mb = b_inds[start_i : start_i + minibatch_size]
                    with rlscope.scope("backprop"):
                        _, newlogprob, entropy, newvalue = ddp_agent(b_obs[mb], b_actions[mb])
                        ratio = (newlogprob - b_logprobs[mb]).exp()
                        mb_adv = b_advantages[mb]
                        mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                        pg_loss = torch.max(
                            -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                        ).mean()
                        newvalue = newvalue.view(-1)
                        v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -clip_coef, clip_coef)
                        v_loss = 0.5 * torch.max(
                            (newvalue - b_returns[mb]) ** 2, (v_clipped - b_returns[mb]) ** 2
                        )
                        loss = pg_loss - ent_coef * entropy.mean() + vf_coef * v_loss.mean()

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
