"""PPO on CartPole-v1, annotated with rlscope.

One readable file in the style of CleanRL's ``ppo.py`` so that a researcher can diff it against
their own training loop: the only rlscope-specific lines are ``rlscope.wrap_env`` (env step/reset
count as ``simulator`` time), two phases (``training``, ``evaluation``) and four operations
(``inference``, ``simulation``, ``compute_advantages``, ``backprop``). With no profiling session
active those are no-ops, and with one active they change no result: a seeded CPU run gives the
same episode returns profiled or not.

Run it::

    python -m rlscope.workloads.ppo_cartpole --total-timesteps 200000 --seed 1
    python -m rlscope.workloads.ppo_cartpole --trace-dir /tmp/ppo-trace   # profiled
    python -m rlscope.workloads.ppo_cartpole --sim fused --device cuda      # simulation on the GPU

``--sim`` picks the simulator (rlscope.workloads.cartpole): ``gymnasium`` (default, gymnasium's own
CartPole on the CPU), or the bundled ``torch``, ``compiled`` and ``fused`` CartPole, which step on the
policy's device, so a rollout stays there (:func:`collect_rollout_on_device`). Same hyperparameters and
number of envs on every simulator: only where the time goes changes.

Hyperparameters are CleanRL's defaults for CartPole (4 envs x 128 steps, 4 minibatches, 4 epochs,
gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, grad norm 0.5, 64-64 tanh MLP)
with two changes, both measured on this file (CPU, seeds 1-8, 200k steps):

- learning rate 1e-3 (annealed to 0) instead of 2.5e-4: with 2.5e-4 the running mean of 20
  training episodes stays around 300-450 through 200k steps; with 1e-3 it reaches 475 after
  45k-95k steps on every seed and ends at 500. The annealing follows ``total_timesteps``: with a
  100k budget the rate decays twice as fast and one seed in six stalls below 475.
- episodes cut by CartPole's 500-step time limit are bootstrapped with the critic's value of the
  last state instead of being treated as terminal (``bootstrap_truncated``), which keeps the
  returns at 500 rather than dipping to the high 400s once the policy is good.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical

import rlscope

ENV_ID = "CartPole-v1"
SIMS = ("gymnasium", "torch", "compiled", "fused")  # the simulators --sim picks from
COMPILE_MODES = ("default", "reduce-overhead")  # the torch.compile modes --compile picks from
SOLVED_RETURN = 475.0  # CartPole-v1's reward threshold
RUNNING_WINDOW = 20  # episodes in the running mean that defines final_mean_return / steps_to_475
EVAL_SEED_OFFSET = 10_000  # evaluation episodes use env seeds the training envs never see
# False: the loop runs with no rlscope annotation at all (``--no-scopes``), as an unmodified program
# that ``rlscope run`` finds the operations of on its own (benchmarks/auto_ops.py compares the two)
ANNOTATE = True
# with ``--time-operations``: seconds per operation name in the current iteration (perf_counter around
# each scope), the ground truth an unprofiled run gives a profile's per-operation figures to compare with
OPERATION_SECONDS: dict[str, float] | None = None


def scope(name: str) -> Any:
    """``rlscope.scope(name)``, or nothing with ``ANNOTATE`` off; timed with ``OPERATION_SECONDS`` on."""
    inner = rlscope.scope(name) if ANNOTATE else contextlib.nullcontext()
    return inner if OPERATION_SECONDS is None else _timed(name, inner)


@contextlib.contextmanager
def _timed(name: str, inner: Any) -> Any:
    """``inner``, its wall time added to ``OPERATION_SECONDS[name]``."""
    t0 = time.perf_counter()
    try:
        with inner:
            yield
    finally:
        if OPERATION_SECONDS is not None:
            OPERATION_SECONDS[name] = OPERATION_SECONDS.get(name, 0.0) + time.perf_counter() - t0


def phase(name: str) -> Any:
    """``rlscope.phase(name)``, or nothing with ``ANNOTATE`` off."""
    return rlscope.phase(name) if ANNOTATE else contextlib.nullcontext()


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    """Orthogonal init, as in CleanRL: PPO is noticeably less stable with PyTorch's default init."""
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Separate actor and critic MLPs (64-64, tanh)."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        # validate_args=False: the logits' check is a data-dependent branch, a graph break under
        # torch.compile; the network's logits are finite
        probs = Categorical(logits=self.actor(x), validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    def compile_policy(self, mode: str) -> None:
        """``torch.compile`` :meth:`get_action_and_value` in place: both networks' forward and the
        action's sampling, one graph. Not ``Module.compile``: torch's tracing rules skip
        ``Module._call_impl``, which that compiles, so the modules would run eager; and not
        ``torch.compile(module)``, which renames the state dict's keys."""
        self.get_action_and_value = torch.compile(self.get_action_and_value, mode=mode)  # type: ignore[method-assign]


def resolve_device(device: str) -> torch.device:
    """``auto`` means CUDA when available, else CPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    return torch.device(device)


def make_envs(num_envs: int, sim: str = "gymnasium", device: torch.device | None = None) -> Any:
    """The training envs on simulator ``sim`` (:data:`SIMS`).

    ``gymnasium``: a synchronous vector env with SAME_STEP autoreset: a step that ends an episode
    returns the next episode's first observation, so every stored transition is a real one (gymnasium
    1.x's default, NEXT_STEP, would insert a no-op "reset" transition after each episode end). The
    bundled simulators reset the NEXT_STEP way, on ``device``; their rollouts mask those transitions.
    """
    if sim != "gymnasium":
        from rlscope.workloads import cartpole

        if sim not in SIMS:
            raise ValueError(f"sim must be one of {', '.join(SIMS)}, got {sim!r}")
        return rlscope.wrap_env(cartpole.make_vec(sim, num_envs, device=device))  # simulation, as gymnasium's
    envs = gym.make_vec(
        ENV_ID,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    return rlscope.wrap_env(envs)


def running_mean_crossing(
    returns: Sequence[float], end_steps: Sequence[int], threshold: float = SOLVED_RETURN
) -> int | None:
    """First global step at which the mean of the last ``RUNNING_WINDOW`` episodes reaches ``threshold``."""
    for i in range(RUNNING_WINDOW - 1, len(returns)):
        if np.mean(returns[i - RUNNING_WINDOW + 1 : i + 1]) >= threshold:
            return int(end_steps[i])
    return None


def evaluate(agent: Agent, episodes: int, seed: int, device: torch.device) -> list[float]:
    """Greedy (argmax) episodes on a fresh env: how good the learned policy is, without exploration."""
    env = rlscope.wrap_env(gym.make(ENV_ID))
    returns: list[float] = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + EVAL_SEED_OFFSET + ep)
        done, ep_return = False, 0.0
        while not done:
            with scope("inference"), torch.no_grad():
                logits = agent.actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
                action = int(logits.argmax())
            with scope("simulation"):
                obs, reward, terminated, truncated, _ = env.step(action)
            ep_return += float(reward)
            done = terminated or truncated
        returns.append(ep_return)
    env.close()
    return returns


@dataclasses.dataclass
class Rollout:
    """Rollout storage: one row per step, one column per env (shared with ``ppo_ddp.py``)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    values: torch.Tensor

    @classmethod
    def zeros(cls, num_steps: int, num_envs: int, obs_dim: int, device: torch.device) -> Rollout:
        per_env = {k: torch.zeros((num_steps, num_envs), device=device) for k in PER_ENV}
        return cls(obs=torch.zeros((num_steps, num_envs, obs_dim), device=device), **per_env)


PER_ENV = ("actions", "logprobs", "rewards", "dones", "values")  # Rollout's fields with one value per env


@dataclasses.dataclass
class Episodes:
    """Finished training episodes: their returns and the global step each ended at."""

    returns: list[float]
    end_steps: list[int]
    running: np.ndarray  # the return so far of each env's current episode

    @classmethod
    def start(cls, num_envs: int) -> Episodes:
        return cls([], [], np.zeros(num_envs))

    def add(self, ended: torch.Tensor, returns: torch.Tensor, first_step: int, steps_per_step: int) -> None:
        """Episodes that ended in one rollout (``ended[t, i]``: env ``i``'s episode ended at step ``t``,
        with return ``returns[t, i]``), in the order a step-by-step loop meets them; one copy to the host."""
        ended_np, returns_np = ended.cpu().numpy(), returns.cpu().numpy()
        for t, i in zip(*np.nonzero(ended_np), strict=True):
            self.returns.append(float(returns_np[t, i]))
            self.end_steps.append(first_step + (int(t) + 1) * steps_per_step)


def act(
    agent: Agent, buf: Rollout, step: int, next_obs: torch.Tensor, next_done: torch.Tensor
) -> torch.Tensor:
    """One rollout step's observation and done flags stored, the policy's action chosen (inference)
    and stored with its log-probability and value: what every rollout does before the env steps."""
    buf.obs[step] = next_obs
    buf.dones[step] = next_done
    with scope("inference"), torch.no_grad():
        action, logprob, _, value = agent.get_action_and_value(next_obs)
        buf.values[step] = value.flatten()
    buf.actions[step] = action
    buf.logprobs[step] = logprob
    return action


def collect_rollout(
    agent: Agent,
    envs: gym.vector.VectorEnv,
    buf: Rollout,
    next_obs: torch.Tensor,
    next_done: torch.Tensor,
    episodes: Episodes,
    global_step: int,
    steps_per_step: int,
    gamma: float,
    bootstrap_truncated: bool,
    dev: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Fill ``buf`` with one rollout; returns the next observation and done flags and the global step
    (``steps_per_step`` env steps counted per vector step: the envs of every rank under DDP)."""
    num_steps = buf.obs.shape[0]
    for step in range(num_steps):
        global_step += steps_per_step
        action = act(agent, buf, step, next_obs, next_done)
        action_np = action.cpu().numpy()
        with scope("simulation"):  # the env step alone, as rlscope's automatic simulation
            next_obs_np, reward, terminations, truncations, infos = envs.step(action_np)
        next_done_np = np.logical_or(terminations, truncations)
        next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=dev)
        next_done = torch.as_tensor(next_done_np, dtype=torch.float32, device=dev)
        buf.rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=dev)

        # An episode cut by the time limit did not end: bootstrap its last reward with the value of
        # the state it was cut at, so the critic does not learn that step 500 is terminal (CleanRL
        # treats truncation as termination; see the module docstring).
        timeouts = np.flatnonzero(truncations & ~terminations)
        if bootstrap_truncated and timeouts.size:
            with scope("inference"), torch.no_grad():
                final_obs = np.stack(infos["final_obs"][timeouts])
                final_values = agent.get_value(torch.as_tensor(final_obs, device=dev).float())
                buf.rewards[step, timeouts] += gamma * final_values.flatten()

        episodes.running += reward
        for i in np.flatnonzero(next_done_np):
            episodes.returns.append(float(episodes.running[i]))
            episodes.end_steps.append(global_step)
            episodes.running[i] = 0.0
    return next_obs, next_done, global_step


def collect_rollout_on_device(
    agent: Agent,
    envs: Any,
    buf: Rollout,
    valid: torch.Tensor,
    next_obs: torch.Tensor,
    next_done: torch.Tensor,
    running: torch.Tensor,
    episodes: Episodes,
    global_step: int,
    gamma: float,
    dev: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """:func:`collect_rollout` for a simulator that steps on the policy's device (the bundled torch,
    compiled and fused CartPole): observations, rewards and flags stay tensors there, no step waits
    for the host, and one copy per rollout brings the finished episodes back.

    These simulators reset the NEXT_STEP way: the step after an episode ends ignores its action and
    returns the reset observation with reward 0. That transition belongs to no episode: ``valid`` is 0
    for it, and the loss leaves it out. The observation returned with the end is the episode's last,
    so a truncated episode's last reward is bootstrapped with its value (the next step's inference).
    ``running``: each env's return so far, on the device.
    """
    num_steps, num_envs = buf.rewards.shape
    first_step = global_step
    truncated = torch.zeros_like(buf.rewards)
    ended = torch.zeros((num_steps, num_envs), dtype=torch.bool, device=dev)
    returns = torch.zeros_like(buf.rewards)
    for step in range(num_steps):
        global_step += num_envs
        valid[step] = 1.0 - next_done  # after an end: the reset transition
        action = act(agent, buf, step, next_obs, next_done)
        with scope("simulation"):
            obs, reward, terminations, truncations, _ = envs.step(action)
        next_obs = torch.as_tensor(obs, dtype=torch.float32, device=dev)
        reward = torch.as_tensor(reward, dtype=torch.float32, device=dev)
        terminations = torch.as_tensor(terminations, device=dev)
        truncations = torch.as_tensor(truncations, device=dev)
        done = terminations | truncations
        buf.rewards[step] = reward
        truncated[step] = (truncations & ~terminations).float()
        running += reward
        ended[step] = done
        returns[step] = running
        running.masked_fill_(done, 0.0)
        next_done = done.float()

    with scope("inference"), torch.no_grad():  # the value of each step's next observation
        last_value = agent.get_value(next_obs).flatten()
    next_values = torch.cat([buf.values[1:], last_value[None]])
    buf.rewards += gamma * next_values * truncated
    episodes.add(ended, returns, first_step, num_envs)
    return next_obs, next_done, global_step


def compute_advantages(
    agent: Agent,
    buf: Rollout,
    next_obs: torch.Tensor,
    next_done: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation, bootstrapping from the value of the last observation;
    returns (advantages, returns)."""
    num_steps = buf.obs.shape[0]
    # the value call is inference and the recursion is not: each in a block of its own, as rlscope's
    # automatic operations tell them apart (docs/automatic-operations.md)
    with scope("inference"), torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)
    with scope("compute_advantages"), torch.no_grad():
        advantages = torch.zeros_like(buf.rewards)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            if t == num_steps - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - buf.dones[t + 1]
                nextvalues = buf.values[t + 1]
            delta = buf.rewards[t] + gamma * nextvalues * nextnonterminal - buf.values[t]
            advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        returns = advantages + buf.values
    return advantages, returns


def ppo_loss(
    newlogprob: torch.Tensor,
    entropy: torch.Tensor,
    newvalue: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor,
    clip_coef: float,
    ent_coef: float,
    vf_coef: float,
    norm_adv: bool = True,
    clip_vloss: bool = True,
    valid: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """PPO's clipped loss on one minibatch: ``loss`` and its parts (``pg_loss``, ``v_loss``,
    ``entropy_loss``), with ``logratio`` and ``ratio`` for the statistics. ``valid``: 1 for the
    transitions that count, 0 for those left out (:func:`collect_rollout_on_device`); None: all count."""
    logratio = newlogprob - old_logprobs
    ratio = logratio.exp()

    def mean(x: torch.Tensor) -> torch.Tensor:
        return x.mean() if valid is None else (x * valid).sum() / valid.sum().clamp(min=1.0)

    mb_advantages = advantages
    if norm_adv:
        if valid is None:
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
        else:
            centred = mb_advantages - mean(mb_advantages)
            std = (mean(centred**2) * valid.sum() / (valid.sum() - 1).clamp(min=1.0)).sqrt()
            mb_advantages = centred / (std + 1e-8)

    # Policy loss
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = mean(torch.max(pg_loss1, pg_loss2))

    # Value loss
    newvalue = newvalue.view(-1)
    if clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = old_values + torch.clamp(newvalue - old_values, -clip_coef, clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * mean(torch.max(v_loss_unclipped, v_loss_clipped))
    else:
        v_loss = 0.5 * mean((newvalue - returns) ** 2)

    entropy_loss = mean(entropy)
    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
    return {
        "loss": loss,
        "pg_loss": pg_loss,
        "v_loss": v_loss,
        "entropy_loss": entropy_loss,
        "logratio": logratio,
        "ratio": ratio,
    }


class Batch(NamedTuple):
    """An iteration's rollout flattened, on the policy's device: what each minibatch indexes."""

    obs: torch.Tensor
    actions: torch.Tensor  # int64
    logprobs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    values: torch.Tensor
    valid: torch.Tensor | None  # on-device simulators (collect_rollout_on_device); None: all count


def minibatch_loss(
    agent: Agent,
    batch: Batch,
    mb_inds: torch.Tensor,
    clip_coef: float,
    ent_coef: float,
    vf_coef: float,
    norm_adv: bool = True,
    clip_vloss: bool = True,
) -> dict[str, torch.Tensor]:
    """A minibatch (``mb_inds``, indices into ``batch`` on its device) gathered, its forward and PPO
    loss, and its statistics (``old_approx_kl``, ``approx_kl``, ``clipfrac``, tensors): the part of
    the update ``--compile`` compiles, the gathering in it. The statistics stay tensors so that the
    update waits for the GPU once an iteration, not once a minibatch."""
    mb = Batch(*(None if t is None else t[mb_inds] for t in batch))
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb.obs, mb.actions)
    out = ppo_loss(
        newlogprob, entropy, newvalue, mb.logprobs, mb.advantages, mb.returns, mb.values, clip_coef, ent_coef,
        vf_coef, norm_adv=norm_adv, clip_vloss=clip_vloss, valid=mb.valid,
    )  # fmt: skip
    with torch.no_grad():
        # http://joschu.net/blog/kl-approx.html
        logratio, ratio = out["logratio"].detach(), out["ratio"].detach()
        out["old_approx_kl"] = (-logratio).mean()
        out["approx_kl"] = ((ratio - 1) - logratio).mean()
        out["clipfrac"] = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return out


def train(
    total_timesteps: int = 200_000,
    seed: int = 1,
    device: str = "auto",
    num_envs: int = 4,
    num_steps: int = 128,
    learning_rate: float = 1e-3,
    anneal_lr: bool = True,
    gamma: float = 0.99,
    gae_lambda: float = 0.95,
    num_minibatches: int = 4,
    update_epochs: int = 4,
    norm_adv: bool = True,
    clip_coef: float = 0.2,
    clip_vloss: bool = True,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
    max_grad_norm: float = 0.5,
    target_kl: float | None = None,
    bootstrap_truncated: bool = True,
    eval_episodes: int = 5,
    log_fn: Callable[[dict[str, Any]], None] | None = None,
    time_limit_s: float | None = None,
    sim: str = "gymnasium",
    compile_mode: str | None = None,
) -> dict[str, Any]:
    """Train PPO on CartPole-v1 and return its learning curve.

    Returns ``episode_returns`` / ``episode_end_steps`` (one entry per finished training episode, in
    order), ``global_step``, ``final_mean_return`` (mean of the last 20 episodes), ``steps_to_475``
    (first global step where that running mean reached 475, or None), ``eval_returns``,
    ``wall_seconds``, ``iteration_seconds`` (per iteration: rollout, advantages, update; what a compiled
    run's steady state is read from, its first iterations compiling), ``operation_seconds`` (with
    ``--time-operations``: per iteration, each operation's seconds), ``device`` and ``sim``. ``log_fn``,
    if given, receives one dict of statistics per iteration. ``sim``: the simulator (:data:`SIMS`);
    evaluation is always on gymnasium's CartPole. ``compile_mode`` (:data:`COMPILE_MODES`):
    ``torch.compile`` the policy's step (both networks' forward and the action's sampling) and the
    update's minibatch forward and loss (backward runs its compiled graph) in that mode; the gradient
    clipping and the optimizer's step stay eager: they are a few foreach launches, about 4% of the
    update's dispatch and launch time on a GPU, and Adam's step compiled as CUDA graphs (a capturable
    Adam with a tensor learning rate) compiles for over a minute.
    """
    dev = resolve_device(device)
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    num_iterations = max(1, total_timesteps // batch_size)

    # Determinism on CPU: every random draw comes from these seeds (torch: init and action sampling;
    # numpy generator: minibatch order; env reset: the simulators).
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    prev_threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(1)  # a 64-64 MLP on a batch of 4-512 is faster single-threaded

    envs = make_envs(num_envs, sim, dev)
    on_device = sim != "gymnasium"
    try:
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        agent = Agent(obs_dim, int(envs.single_action_space.n)).to(dev)
        loss_fn = minibatch_loss
        if compile_mode is not None:
            agent.compile_policy(compile_mode)
            loss_fn = torch.compile(minibatch_loss, mode=compile_mode)
        optimizer = torch.optim.Adam(agent.parameters(), lr=learning_rate, eps=1e-5)

        buf = Rollout.zeros(num_steps, num_envs, obs_dim, dev)
        episodes = Episodes.start(num_envs)
        episode_returns, episode_end_steps = episodes.returns, episodes.end_steps
        valid = torch.ones((num_steps, num_envs), device=dev)  # on-device simulators: see their rollout
        running = torch.zeros(num_envs, device=dev)

        global_step = 0
        iteration_seconds: list[tuple[float, float, float]] = []
        operation_seconds: list[dict[str, float]] = []  # per iteration, with --time-operations
        start = time.perf_counter()
        with phase("training"):
            next_obs_np, _ = envs.reset(seed=seed)
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=dev)
            next_done = torch.zeros(num_envs, device=dev)

            for iteration in range(1, num_iterations + 1):
                if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
                    break  # `rlscope demo` trains for a wall-clock budget rather than a step count
                if anneal_lr:
                    frac = 1.0 - (iteration - 1.0) / num_iterations
                    optimizer.param_groups[0]["lr"] = frac * learning_rate

                t_rollout = time.perf_counter()
                if on_device:
                    next_obs, next_done, global_step = collect_rollout_on_device(
                        agent,
                        envs,
                        buf,
                        valid,
                        next_obs,
                        next_done,
                        running,
                        episodes,
                        global_step,
                        gamma,
                        dev,
                    )
                else:
                    next_obs, next_done, global_step = collect_rollout(
                        agent, envs, buf, next_obs, next_done, episodes, global_step, steps_per_step=num_envs,
                        gamma=gamma, bootstrap_truncated=bootstrap_truncated, dev=dev,
                    )  # fmt: skip
                t_advantages = time.perf_counter()
                advantages, returns = compute_advantages(agent, buf, next_obs, next_done, gamma, gae_lambda)
                t_update = time.perf_counter()

                # Flatten the batch.
                batch = Batch(
                    buf.obs.reshape((-1, obs_dim)), buf.actions.reshape(-1).long(), buf.logprobs.reshape(-1),
                    advantages.reshape(-1), returns.reshape(-1), buf.values.reshape(-1),
                    valid.reshape(-1) if on_device else None,
                )  # fmt: skip

                # Optimize the policy and value network.
                b_inds = np.arange(batch_size)
                clipfracs = []
                for _epoch in range(update_epochs):
                    rng.shuffle(b_inds)
                    order = torch.as_tensor(b_inds, device=dev)  # one copy an epoch, not one a minibatch
                    for start_i in range(0, batch_size, minibatch_size):
                        with scope("backprop"):
                            if compile_mode is not None:  # a new step: the last one's graph outputs are free
                                torch.compiler.cudagraph_mark_step_begin()
                            out = loss_fn(
                                agent, batch, order[start_i : start_i + minibatch_size], clip_coef, ent_coef,
                                vf_coef, norm_adv=norm_adv, clip_vloss=clip_vloss,
                            )  # fmt: skip
                            loss = out["loss"]
                            pg_loss, v_loss, entropy_loss = out["pg_loss"], out["v_loss"], out["entropy_loss"]
                            old_approx_kl, approx_kl = out["old_approx_kl"], out["approx_kl"]
                            clipfracs.append(out["clipfrac"])

                            optimizer.zero_grad()
                            loss.backward()
                            nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                            optimizer.step()

                    if target_kl is not None and approx_kl > target_kl:
                        break
                t_end = time.perf_counter()
                iteration_seconds.append(
                    (t_advantages - t_rollout, t_update - t_advantages, t_end - t_update)
                )
                if OPERATION_SECONDS is not None:
                    operation_seconds.append(dict(OPERATION_SECONDS))
                    OPERATION_SECONDS.clear()

                if log_fn is not None:
                    y_pred, y_true = batch.values.cpu().numpy(), batch.returns.cpu().numpy()
                    var_y = np.var(y_true)
                    explained_var = float("nan") if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)
                    recent = episode_returns[-RUNNING_WINDOW:]
                    log_fn(
                        {
                            "iteration": iteration,
                            "global_step": global_step,
                            "mean_return": float(np.mean(recent)) if recent else float("nan"),
                            "episodes": len(episode_returns),
                            "learning_rate": optimizer.param_groups[0]["lr"],
                            "value_loss": v_loss.item(),
                            "policy_loss": pg_loss.item(),
                            "entropy": entropy_loss.item(),
                            "old_approx_kl": old_approx_kl.item(),
                            "approx_kl": approx_kl.item(),
                            "clipfrac": torch.stack(clipfracs).mean().item(),
                            "explained_variance": explained_var,
                            "sps": int(global_step / (time.perf_counter() - start)),
                        }
                    )
        train_seconds = time.perf_counter() - start

        eval_returns: list[float] = []
        if eval_episodes > 0:
            with phase("evaluation"):
                eval_returns = evaluate(agent, eval_episodes, seed, dev)
    finally:
        envs.close()
        torch.set_num_threads(prev_threads)

    recent = episode_returns[-RUNNING_WINDOW:]
    return {
        "episode_returns": episode_returns,
        "episode_end_steps": episode_end_steps,
        "global_step": global_step,
        "final_mean_return": float(np.mean(recent)) if recent else float("nan"),
        "steps_to_475": running_mean_crossing(episode_returns, episode_end_steps),
        "eval_returns": eval_returns,
        "wall_seconds": train_seconds,
        "iteration_seconds": iteration_seconds,
        **({"operation_seconds": operation_seconds} if OPERATION_SECONDS is not None else {}),
        "device": str(dev),
        "seed": seed,
        "sim": sim,
    }


def _print_log(stats: dict[str, Any]) -> None:
    if stats["iteration"] % 10 == 0:
        print(
            f"step {stats['global_step']:>8}  mean return (last {RUNNING_WINDOW}) {stats['mean_return']:7.1f}"
            f"  episodes {stats['episodes']:>5}  sps {stats['sps']}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command line: train (optionally under ``rlscope.profile``), print a summary, dump JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--total-timesteps", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--sim",
        choices=SIMS,
        default="gymnasium",
        help="the simulator the training envs run on (default gymnasium)",
    )
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=128, help="steps per env per rollout")
    p.add_argument("--update-epochs", type=int, default=4, help="passes over each rollout per update")
    p.add_argument("--trace-dir", default=None, help="profile with rlscope, writing the trace here")
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--json", default=None, metavar="FILE", help="write the result dict as JSON")
    p.add_argument("--quiet", action="store_true", help="no per-iteration log")
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop training after this long, whatever --total-timesteps says (a long profiled run)",
    )
    p.add_argument(
        "--compile",
        choices=COMPILE_MODES,
        default=None,
        help="torch.compile the policy's step and the update's loss in this mode",
    )
    p.add_argument(
        "--no-scopes",
        action="store_true",
        help="run with no rlscope annotation (for `rlscope run`'s automatic operations)",
    )
    p.add_argument(
        "--time-operations",
        action="store_true",
        help="time each operation (perf_counter around its scope): operation_seconds in --json",
    )
    args = p.parse_args(argv)
    global ANNOTATE, OPERATION_SECONDS
    ANNOTATE = not args.no_scopes
    OPERATION_SECONDS = {} if args.time_operations else None

    kwargs: dict[str, Any] = {
        "total_timesteps": args.total_timesteps,
        "seed": args.seed,
        "device": args.device,
        "num_envs": args.num_envs,
        "num_steps": args.num_steps,
        "update_epochs": args.update_epochs,
        "eval_episodes": args.eval_episodes,
        "log_fn": None if args.quiet else _print_log,
        "sim": args.sim,
        "time_limit_s": args.time_limit,
        "compile_mode": args.compile,
    }
    if args.trace_dir:
        with rlscope.profile(args.trace_dir):
            result = train(**kwargs)
    else:
        result = train(**kwargs)

    print(
        f"seed {args.seed}: {result['global_step']} steps in {result['wall_seconds']:.1f}s, "
        f"final mean return {result['final_mean_return']:.1f}, steps_to_475 {result['steps_to_475']}, "
        f"eval {result['eval_returns']}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
