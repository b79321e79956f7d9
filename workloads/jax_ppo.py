"""PPO on CartPole in JAX, PureJaxRL style, annotated with rlscope.

One file, as PureJaxRL's ``ppo.py``: the environment is pure JAX functions, vectorized with ``vmap``,
and a whole update (the rollout, GAE, and the epochs of minibatch updates) is one ``jax.jit`` call.
Inside it ``jax.named_scope("inference")``, ``("simulation")``, ``("compute_advantages")`` and
``("backprop")`` name the parts, as they appear in the compiled program's metadata; outside it the
Python loop over updates runs in the ``training`` phase, each jitted update one ``update`` operation
(``rlscope.scope``; ``init`` before them), each first call also compiling its function (the
``xla_compile`` category, docs/jax.md). With no profiling session active the annotations are no-ops.

Run it (``pip install "rlscope[jax]"``)::

    python -m rlscope.workloads.jax_ppo --seconds 60 --num-envs 4 --seed 1
    rlscope run -- python -m rlscope.workloads.jax_ppo --seconds 10

The environment is gymnax's CartPole-v1 when gymnax 1.x is installed, else the bundled one below: the
dynamics of gymnasium's CartPole-v1 (Euler steps of 0.02 s, termination past 12 degrees or 2.4 units,
reward 1 per step, truncation at 500 steps) in float32. The optimizer is optax's Adam when optax is
installed, else the few lines of Adam below (same update: gradients clipped to a global norm of 0.5,
eps 1e-5). Neither is a dependency of rlscope.

Hyperparameters are PureJaxRL's for CartPole (128 steps per env, 4 epochs of 4 minibatches, gamma
0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, 64-64 tanh MLPs) with the learning rate of
rlscope's torch PPO (1e-3, annealed to 0 over ``--total-timesteps``).
An episode cut at 500 steps is bootstrapped with the critic's value of its last state, as in
workloads/ppo_cartpole.py, so the returns stay at 500 once the policy is good.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.metadata
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rlscope

SOLVED_RETURN = 475.0  # CartPole-v1's reward threshold
RUNNING_WINDOW = 20  # episodes in the running mean that defines the mean return


# --------------------------------------------------------------------------- CartPole in JAX

# gymnasium's CartPole-v1 constants
GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
MAX_STEPS = 500  # the TimeLimit of CartPole-v1


class CartPoleState(NamedTuple):
    """One bundled CartPole: its physical state, its step count and its episode's return so far."""

    obs: jax.Array  # x, x_dot, theta, theta_dot
    t: jax.Array
    ret: jax.Array


def cartpole_reset(key: jax.Array) -> CartPoleState:
    """A new episode: every state variable uniform in [-0.05, 0.05], as gymnasium's reset."""
    obs = jax.random.uniform(key, (4,), jnp.float32, -0.05, 0.05)
    return CartPoleState(obs, jnp.int32(0), jnp.float32(0.0))


def cartpole_dynamics(obs: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """gymnasium's CartPole step (Euler): the next state and whether the pole fell or the cart left."""
    x, x_dot, theta, theta_dot = obs[0], obs[1], obs[2], obs[3]
    force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG)
    costheta, sintheta = jnp.cos(theta), jnp.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    x, x_dot = x + TAU * x_dot, x_dot + TAU * xacc
    theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * thetaacc
    terminated = (jnp.abs(x) > X_THRESHOLD) | (jnp.abs(theta) > THETA_THRESHOLD)
    return jnp.stack([x, x_dot, theta, theta_dot]).astype(jnp.float32), terminated


class Step(NamedTuple):
    """What one env step gives the rollout (the next episode already begun where this one ended)."""

    obs: jax.Array  # the next observation: the new episode's first where this one ended
    reward: jax.Array
    done: jax.Array  # the episode ended, terminated or truncated
    truncated: jax.Array  # it was cut at MAX_STEPS (bootstrapped, not terminal)
    last_obs: jax.Array  # the episode's last observation (the bootstrap's state when truncated)
    episode_return: jax.Array  # the ended episode's return (0 where none ended)


def bundled_env() -> tuple[Callable[..., Any], Callable[..., Any], str]:
    """(reset, step) of the bundled CartPole, auto-resetting: ``reset(key) -> (state, obs)``,
    ``step(key, state, action) -> (state, Step)``."""

    def reset(key: jax.Array) -> tuple[CartPoleState, jax.Array]:
        state = cartpole_reset(key)
        return state, state.obs

    def step(key: jax.Array, state: CartPoleState, action: jax.Array) -> tuple[CartPoleState, Step]:
        obs, terminated = cartpole_dynamics(state.obs, action)
        t, ret = state.t + 1, state.ret + 1.0
        truncated = ~terminated & (t >= MAX_STEPS)
        done = terminated | truncated
        fresh = cartpole_reset(key)
        after = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, CartPoleState(obs, t, ret))
        return after, Step(after.obs, jnp.float32(1.0), done, truncated, obs, jnp.where(done, ret, 0.0))

    return reset, step, "bundled"


def gymnax_env() -> tuple[Callable[..., Any], Callable[..., Any], str] | None:
    """(reset, step) of gymnax's CartPole-v1 with the same interface, or None without gymnax 1.x
    (whose step says terminated and truncated apart, and gives the last observation)."""
    try:
        import gymnax  # type: ignore[import-not-found]

        if int(importlib.metadata.version("gymnax").split(".")[0]) < 1:
            return None
    except (ImportError, ValueError):
        return None
    env, params = gymnax.make("CartPole-v1")

    class State(NamedTuple):
        env: Any
        t: jax.Array
        ret: jax.Array

    def reset(key: jax.Array) -> tuple[State, jax.Array]:
        obs, s = env.reset(key, params)
        return State(s, jnp.int32(0), jnp.float32(0.0)), obs

    def step(key: jax.Array, state: State, action: jax.Array) -> tuple[State, Step]:
        obs, s, reward, terminated, truncated, info = env.step(key, state.env, action, params)
        last = info["final_observation"]
        t, ret = state.t + 1, state.ret + reward
        done = terminated | truncated
        truncated = truncated & ~terminated
        after = State(s, jnp.where(done, 0, t), jnp.where(done, 0.0, ret))
        return after, Step(obs, reward, done, truncated, last, jnp.where(done, ret, 0.0))

    return reset, step, "gymnax"


# --------------------------------------------------------------------------- the agent


def orthogonal(key: jax.Array, shape: tuple[int, int], scale: float) -> jax.Array:
    return jax.nn.initializers.orthogonal(scale)(key, shape, jnp.float32)


def init_params(key: jax.Array, obs_dim: int = 4, n_actions: int = 2, hidden: int = 64) -> dict[str, Any]:
    """Separate actor and critic MLPs (64-64, tanh), orthogonal init as CleanRL's and PureJaxRL's."""
    k = jax.random.split(key, 6)

    def mlp(keys: jax.Array, out: int, last_scale: float) -> list[tuple[jax.Array, jax.Array]]:
        sizes = [(obs_dim, hidden, math.sqrt(2)), (hidden, hidden, math.sqrt(2)), (hidden, out, last_scale)]
        return [
            (orthogonal(kk, (a, b), s), jnp.zeros(b, jnp.float32))
            for kk, (a, b, s) in zip(keys, sizes, strict=True)
        ]

    return {"actor": mlp(k[:3], n_actions, 0.01), "critic": mlp(k[3:], 1, 1.0)}


def _mlp(layers: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            x = jnp.tanh(x)
    return x


def policy(params: dict[str, Any], obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(action logits, value) of a batch of observations."""
    return _mlp(params["actor"], obs), _mlp(params["critic"], obs)[..., 0]


class Adam(NamedTuple):
    """Adam's moments and step count (the fallback without optax)."""

    mu: Any
    nu: Any
    count: jax.Array


def make_optimizer(max_grad_norm: float, eps: float = 1e-5) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(init, update): gradients clipped to ``max_grad_norm``, then Adam's direction (the learning
    rate applied by the caller, annealed per update). optax's when installed, else the same in JAX."""
    try:
        import optax  # type: ignore[import-not-found]
    except ImportError:
        optax = None
    if optax is not None:
        tx = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.scale_by_adam(eps=eps))
        return tx.init, tx.update
    b1, b2 = 0.9, 0.999

    def init(params: Any) -> Adam:
        zeros = jax.tree.map(jnp.zeros_like, params)
        return Adam(zeros, zeros, jnp.int32(0))

    def update(grads: Any, state: Adam) -> tuple[Any, Adam]:
        norm = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(grads)))
        grads = jax.tree.map(lambda g: jnp.where(norm < max_grad_norm, g, g / norm * max_grad_norm), grads)
        count = state.count + 1
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g**2, state.nu, grads)
        c1, c2 = 1 - b1**count, 1 - b2**count
        direction = jax.tree.map(lambda m, v: (m / c1) / (jnp.sqrt(v / c2) + eps), mu, nu)
        return direction, Adam(mu, nu, count)

    return init, update


# --------------------------------------------------------------------------- one update, jitted


class Config(NamedTuple):
    """The hyperparameters (module docstring)."""

    num_envs: int = 4
    num_steps: int = 128
    total_timesteps: int = 500_000
    lr: float = 1e-3
    update_epochs: int = 4
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    @property
    def num_updates(self) -> int:
        return max(1, self.total_timesteps // (self.num_envs * self.num_steps))


class Runner(NamedTuple):
    """Everything an update carries to the next: the agent, its optimizer and the envs."""

    params: Any
    opt: Any
    env_state: Any
    obs: jax.Array
    key: jax.Array
    update: jax.Array  # updates done (the learning rate's annealing)


class Transition(NamedTuple):
    """One step of the rollout, per env: what the minibatch updates learn from."""

    obs: jax.Array
    action: jax.Array
    logp: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array
    episode_return: jax.Array


def make_update(
    cfg: Config, env: tuple[Callable[..., Any], Callable[..., Any], str]
) -> tuple[Callable[[jax.Array], Runner], Callable[[Runner], tuple[Runner, Any]]]:
    """(init(key) -> Runner, update(runner) -> (runner, (done, episode_return) per step and env))."""
    reset, step, _ = env
    opt_init, opt_update = make_optimizer(cfg.max_grad_norm)
    batch = cfg.num_envs * cfg.num_steps
    minibatch = batch // cfg.num_minibatches

    def init(key: jax.Array) -> Runner:
        k_params, k_env, key = jax.random.split(key, 3)
        params = init_params(k_params)
        env_state, obs = jax.vmap(reset)(jax.random.split(k_env, cfg.num_envs))
        return Runner(params, opt_init(params), env_state, obs, key, jnp.int32(0))

    def env_step(carry: tuple, _: Any) -> tuple[tuple, Transition]:
        params, env_state, obs, key = carry
        key, k_act, k_step = jax.random.split(key, 3)
        with jax.named_scope("inference"):
            logits, value = policy(params, obs)
            action = jax.random.categorical(k_act, logits)
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=1)[:, 0]
        with jax.named_scope("simulation"):
            env_state, s = jax.vmap(step)(jax.random.split(k_step, cfg.num_envs), env_state, action)
        with jax.named_scope("inference"):  # a cut episode goes on: its last state's value bootstraps it
            reward = s.reward + cfg.gamma * jnp.where(s.truncated, policy(params, s.last_obs)[1], 0.0)
        t = Transition(obs, action, logp, value, reward, s.done, s.episode_return)
        return (params, env_state, s.obs, key), t

    def advantages(traj: Transition, last_value: jax.Array) -> tuple[jax.Array, jax.Array]:
        def back(carry: tuple, t: Transition) -> tuple[tuple, jax.Array]:
            gae, next_value = carry
            nonterminal = 1.0 - t.done
            delta = t.reward + cfg.gamma * next_value * nonterminal - t.value
            gae = delta + cfg.gamma * cfg.gae_lambda * nonterminal * gae
            return (gae, t.value), gae

        _, adv = jax.lax.scan(back, (jnp.zeros_like(last_value), last_value), traj, reverse=True)
        return adv, adv + traj.value

    def loss_fn(params: Any, mb: tuple) -> jax.Array:
        t, adv, targets = mb
        logits, value = policy(params, t.obs)
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, t.action[:, None], axis=1)[:, 0]
        entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = jnp.exp(logp - t.logp)
        pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps) * adv).mean()
        v_clipped = t.value + jnp.clip(value - t.value, -cfg.clip_eps, cfg.clip_eps)
        v_loss = 0.5 * jnp.maximum((value - targets) ** 2, (v_clipped - targets) ** 2).mean()
        return pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy

    def update(runner: Runner) -> tuple[Runner, Any]:
        params, opt, env_state, obs, key, n = runner
        (params, env_state, obs, key), traj = jax.lax.scan(
            env_step, (params, env_state, obs, key), None, cfg.num_steps
        )
        with jax.named_scope("compute_advantages"):
            adv, targets = advantages(traj, policy(params, obs)[1])
        lr = cfg.lr * (1.0 - n / cfg.num_updates)

        def epoch(carry: tuple, _: Any) -> tuple[tuple, None]:
            params, opt, key = carry
            key, k_perm = jax.random.split(key)
            perm = jax.random.permutation(k_perm, batch)
            flat = jax.tree.map(lambda a: a.reshape((batch, *a.shape[2:]))[perm], (traj, adv, targets))
            mbs = jax.tree.map(lambda a: a.reshape((cfg.num_minibatches, minibatch, *a.shape[1:])), flat)

            def minibatch_step(carry: tuple, mb: tuple) -> tuple[tuple, None]:
                params, opt = carry
                with jax.named_scope("backprop"):
                    grads = jax.grad(loss_fn)(params, mb)
                    direction, opt = opt_update(grads, opt)
                    params = jax.tree.map(lambda p, d: p - lr * d, params, direction)
                return (params, opt), None

            (params, opt), _ = jax.lax.scan(minibatch_step, (params, opt), mbs)
            return (params, opt, key), None

        (params, opt, key), _ = jax.lax.scan(epoch, (params, opt, key), None, cfg.update_epochs)
        ended = (traj.done, traj.episode_return)
        return Runner(params, opt, env_state, obs, key, n + 1), ended

    return jax.jit(init), jax.jit(update)


# --------------------------------------------------------------------------- the training loop


def train(
    seconds: float | None = 60.0,
    num_envs: int = 4,
    seed: int = 1,
    total_timesteps: int = 500_000,
    lr: float = 1e-3,
    log_fn: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train until ``total_timesteps`` or ``seconds`` of wall time (compiling included); the result
    says what was learnt: the mean return of the last RUNNING_WINDOW episodes, and when it first
    reached SOLVED_RETURN (steps and seconds since the start)."""
    cfg = Config(num_envs=num_envs, total_timesteps=total_timesteps, lr=lr)
    env = gymnax_env() or bundled_env()
    init, update = make_update(cfg, env)
    start = time.perf_counter()
    recent: collections.deque[float] = collections.deque(maxlen=RUNNING_WINDOW)
    curve: list[tuple[int, float, float]] = []  # (steps, seconds, mean return) per update with an episode
    steps = episodes = updates = 0
    solved: tuple[int, float] | None = None
    with rlscope.phase("training"):
        with rlscope.scope("init"):
            runner = jax.block_until_ready(init(jax.random.PRNGKey(seed)))
        while updates < cfg.num_updates:
            if seconds is not None and time.perf_counter() - start >= seconds:
                break
            with rlscope.scope("update"):
                runner, (ended, returns) = update(runner)
                ended, returns = np.asarray(ended), np.asarray(returns)  # waits for the update
            updates += 1
            steps += cfg.num_envs * cfg.num_steps
            finished = returns[ended]  # time-major: in the order the episodes ended
            if len(finished):
                episodes += len(finished)
                recent.extend(finished.tolist())
                mean = float(np.mean(recent))
                elapsed = time.perf_counter() - start
                curve.append((steps, elapsed, mean))
                if solved is None and len(recent) == RUNNING_WINDOW and mean >= SOLVED_RETURN:
                    solved = (steps, elapsed)
            if log_fn is not None:
                log_fn({"update": updates, "steps": steps, "episodes": episodes, "mean": _mean(recent)})
    wall = time.perf_counter() - start
    return {
        "env": env[2],
        "steps": steps,
        "updates": updates,
        "episodes": episodes,
        "wall_seconds": wall,
        "final_mean_return": _mean(recent),
        "steps_to_475": solved[0] if solved else None,
        "seconds_to_475": solved[1] if solved else None,
        "curve": curve,
        "seed": seed,
        "num_envs": num_envs,
    }


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def _print_log(stats: dict[str, Any]) -> None:
    if stats["update"] % 20 == 0:
        print(
            f"update {stats['update']:>5}  steps {stats['steps']:>8}  mean return (last {RUNNING_WINDOW})"
            f" {stats['mean']:7.1f}  episodes {stats['episodes']:>6}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command line: train (optionally under ``rlscope.profile``), print a summary, dump JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=60.0, help="wall-time budget, compiling included")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=500_000, help="the learning rate anneals over it")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--trace-dir", default=None, help="profile with rlscope, writing the trace here")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result dict as JSON")
    p.add_argument("--quiet", action="store_true", help="no per-update log")
    p.add_argument(
        "--jax-trace", default=None, metavar="DIR", help="also record jax's own profiler trace (XProf) here"
    )
    args = p.parse_args(argv)
    kwargs: dict[str, Any] = {
        "seconds": args.seconds,
        "num_envs": args.num_envs,
        "seed": args.seed,
        "total_timesteps": args.total_timesteps,
        "lr": args.lr,
        "log_fn": None if args.quiet else _print_log,
    }
    profiled = rlscope.profile(args.trace_dir) if args.trace_dir else contextlib.nullcontext()
    xprof = (
        jax.profiler.trace(args.jax_trace, create_perfetto_trace=True)
        if args.jax_trace
        else contextlib.nullcontext()
    )
    with profiled, xprof:
        result = train(**kwargs)
    solved = result["seconds_to_475"]
    print(
        f"seed {args.seed} ({result['env']} CartPole): {result['steps']} steps in"
        f" {result['wall_seconds']:.1f}s,"
        f" final mean return {result['final_mean_return']:.1f}, steps_to_475 {result['steps_to_475']}"
        + (f" ({solved:.1f}s)" if solved is not None else "")
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
