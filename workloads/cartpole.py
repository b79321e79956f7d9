"""CartPole-v1 as a vector environment on four backends, from the CPU baseline to one fused GPU kernel.

Why four: RL data collection is simulation-bound because simulators run on the CPU (RL-Scope, seed
004). The backends are the steps of the fix, each one a drop-in vector env with the same semantics:

- ``gymnasium``: gymnasium's own numpy ``CartPoleVectorEnv`` (the CPU baseline users pick).
- ``torch``: the same step as batched eager PyTorch ops on any device (GPU vectorization; one kernel
  launch per op, so it is launch-bound at small N).
- ``compiled``: the same Python step through ``torch.compile`` (a few fused kernels per step); on CUDA,
  K steps are captured into one CUDA graph, so a replay costs one launch for K steps.
- ``fused``: a Triton kernel that keeps each env's state in registers for K steps per launch and
  evaluates the policy, steps, auto-resets (counter-based RNG) and counts episodes inside the kernel
  (simulator kernel fusion).

All follow gymnasium's ``VectorEnv`` conventions with next-step autoreset, exactly like gymnasium's
``CartPoleVectorEnv``: the step after an env reports ``terminated`` or ``truncated`` ignores its
action, returns the reset observation, reward 0 and both flags False. ``get_state``/``set_state``
use float32 ``[N, 4]`` (x, x_dot, theta, theta_dot) everywhere. torch, triton and gymnasium are
imported when a backend needs them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rlscope.errors import RLScopeError

__all__ = [
    "BACKENDS",
    "LinearPolicy",
    "MLPPolicy",
    "RolloutStats",
    "SimulatorArgumentError",
    "SimulatorUnavailableError",
    "make_vec",
]

BACKENDS = ("gymnasium", "torch", "compiled", "fused")

# CartPole-v1 (gymnasium.envs.classic_control.cartpole), float32 forms of its constants.
GRAVITY = 9.8
MASSPOLE = 0.1
TOTAL_MASS = 1.1
LENGTH = 0.5
POLEMASS_LENGTH = 0.05
FORCE_MAG = 10.0
TAU = 0.02
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360
MAX_EPISODE_STEPS = 500
RESET_HIGH = 0.05
# Derived constants, written once so torch and Triton evaluate the same float32 expression:
# temp = +-F/M + ML_TM*thd^2*sin; thacc = (g*sin - cos*temp) / (2/3 - ML_TM*cos^2);
# xacc = temp - ML_TM*thacc*cos. Mathematically gymnasium's expressions (l*(4/3) = 2/3).
INV_TM = 1.0 / TOTAL_MASS
ML_TM = POLEMASS_LENGTH / TOTAL_MASS
TWO_THIRDS = LENGTH * 4.0 / 3.0

DEFAULT_STEPS_PER_LAUNCH = 256
_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9


class SimulatorArgumentError(RLScopeError, ValueError):
    """A bad argument to a simulator (unknown backend, wrong action shape or dtype, ...)."""


class SimulatorUnavailableError(RLScopeError, RuntimeError):
    """A backend that cannot run here (``fused`` without Triton or CUDA, say)."""


# ---------------------------------------------------------------------------------------------
# Policies and statistics
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearPolicy:
    """``action = argmax(obs @ weight + bias)``, weight ``[4, 2]``, bias ``[2]``.

    Every backend evaluates it as ``obs . (w[:,1] - w[:,0]) + (b[1] - b[0]) > 0`` in float32, in the
    same order (argmax's tie goes to action 0, as here), so the backends pick the same actions.
    """

    weight: np.ndarray
    bias: np.ndarray

    def __post_init__(self) -> None:
        w = np.asarray(self.weight, dtype=np.float32)
        b = np.asarray(self.bias, dtype=np.float32)
        if w.shape != (4, 2) or b.shape != (2,):
            raise SimulatorArgumentError(
                f"LinearPolicy needs weight [4, 2] and bias [2], got {w.shape} and {b.shape}"
            )
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "bias", b)

    def diff(self) -> np.ndarray:
        """``[w1-w0 (4 values), b1-b0]`` as float32: the whole policy in five numbers."""
        return np.append(self.weight[:, 1] - self.weight[:, 0], self.bias[1] - self.bias[0]).astype(
            np.float32
        )

    @classmethod
    def balancing(cls) -> LinearPolicy:
        """A controller that keeps most poles up for the full 500 steps (push toward the fall)."""
        w = np.zeros((4, 2), np.float32)
        w[:, 1] = [0.0, 0.2, 1.0, 0.5]
        return cls(w, np.zeros(2, np.float32))

    @classmethod
    def random(cls, seed: int = 0) -> LinearPolicy:
        """Random weights: short, varied episodes (many resets)."""
        rng = np.random.default_rng(seed)
        return cls(rng.standard_normal((4, 2)), rng.standard_normal(2) * 0.1)


@dataclass(frozen=True)
class MLPPolicy:
    """``action = argmax(relu(obs @ w1 + b1) @ w2 + b2)``; w1 ``[4, H]``, w2 ``[H, 2]``."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    def __post_init__(self) -> None:
        arrs = [np.asarray(a, dtype=np.float32) for a in (self.w1, self.b1, self.w2, self.b2)]
        h = arrs[0].shape[1] if arrs[0].ndim == 2 else -1
        want = [(4, h), (h,), (h, 2), (2,)]
        if h <= 0 or [a.shape for a in arrs] != want:
            raise SimulatorArgumentError(
                f"MLPPolicy needs w1 [4,H], b1 [H], w2 [H,2], b2 [2], got {[a.shape for a in arrs]}"
            )
        for name, a in zip(("w1", "b1", "w2", "b2"), arrs, strict=True):
            object.__setattr__(self, name, a)

    @property
    def hidden(self) -> int:
        return int(self.w1.shape[1])

    def flat(self) -> np.ndarray:
        """``[w1 row-major, b1, w2[:,1]-w2[:,0], b2[1]-b2[0]]`` as float32 (the kernel's layout)."""
        w2d = self.w2[:, 1] - self.w2[:, 0]
        return np.concatenate([self.w1.reshape(-1), self.b1, w2d, [self.b2[1] - self.b2[0]]]).astype(
            np.float32
        )

    @classmethod
    def random(cls, hidden: int = 8, seed: int = 0) -> MLPPolicy:
        rng = np.random.default_rng(seed)
        return cls(
            rng.standard_normal((4, hidden)),
            rng.standard_normal(hidden) * 0.1,
            rng.standard_normal((hidden, 2)),
            rng.standard_normal(2) * 0.1,
        )


Policy = LinearPolicy | MLPPolicy


def _as_policy(policy: Any) -> Policy:
    if isinstance(policy, LinearPolicy | MLPPolicy):
        return policy
    if isinstance(policy, tuple) and len(policy) == 2:
        return LinearPolicy(*(np.asarray(p.cpu() if hasattr(p, "cpu") else p) for p in policy))
    raise SimulatorArgumentError(
        f"policy must be a LinearPolicy, MLPPolicy or (W [4,2], b [2]) tuple, got {type(policy).__name__}"
    )


@dataclass
class RolloutStats:
    """What ``rollout`` returns, identical in meaning on every backend.

    ``episodes``: episodes that ended (terminated or truncated) during the rollout.
    ``total_reward``: sum of all rewards the rollout's steps returned (1 per step, 0 on reset steps).
    ``finished_return``: summed returns of the episodes that ended (their steps before the rollout too).
    ``final_state``: ``get_state()`` after the last step.
    """

    episodes: int
    total_reward: float
    finished_return: float
    final_state: Any
    num_envs: int
    num_steps: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def env_steps(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def mean_return(self) -> float:
        """Mean return of the episodes that ended (nan if none did)."""
        return self.finished_return / self.episodes if self.episodes else float("nan")


# ---------------------------------------------------------------------------------------------
# The counter-based RNG every GPU backend shares (reset noise)
# ---------------------------------------------------------------------------------------------
# reset state of env n at its c-th draw, component j:
#   base[n] = h(n ^ seed_key);  k = h(base[n] ^ c);  bits = h(k + j*0x9E3779B9 mod 2^32)
#   value   = ((bits >> 8) * 2^-24 - 0.5) * 0.1            (uniform in [-0.05, 0.05))
# h is a 32-bit integer hash (Wellons' hash-prospector "16 21f0aaad 15 735a2d97 15"). Counter-based,
# like Philox: a draw depends only on (seed, env, draw count), so torch, compiled and fused produce
# bit-identical reset states, in any order, without storing generator state. Both multipliers are
# < 2^31, so torch evaluates it exactly in int64 without overflow.
def _hash32_py(x: int) -> int:
    x &= _M32
    x ^= x >> 16
    x = (x * 0x21F0AAAD) & _M32
    x ^= x >> 15
    x = (x * 0x735A2D97) & _M32
    x ^= x >> 15
    return x


def seed_key(seed: int) -> int:
    """Fold a non-negative int seed (any size) into the 32-bit key of the reset RNG."""
    if seed < 0:
        raise SimulatorArgumentError(f"seed must be a non-negative int, got {seed}")
    key = 0x3C6EF372
    while True:
        key = _hash32_py(key ^ (seed & _M32))
        seed >>= 32
        if not seed:
            return key


def _hash32_torch(x: Any) -> Any:
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & _M32
    return x ^ (x >> 15)


def rng_base_torch(num_envs: int, key: int, device: Any) -> Any:
    """``base[n] = h(n ^ seed_key)`` as int64 ``[N]`` (computed once per seed)."""
    import torch

    return _hash32_torch(torch.arange(num_envs, dtype=torch.int64, device=device) ^ key)


def reset_noise_torch(base: Any, counter: Any) -> Any:
    """Reset states ``[4, N]`` float32 for draw ``counter[n]`` of each env (see the formula above)."""
    import torch

    k = _hash32_torch(base ^ counter.to(torch.int64))
    # salts as Python constants (not arange * golden: inductor would fold that into int32 index math)
    bits = _hash32_torch(torch.stack([k] + [(k + ((j * _GOLDEN) & _M32)) & _M32 for j in (1, 2, 3)]))
    return ((bits >> 8).to(torch.float32) * (2.0**-24) - 0.5) * 0.1


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------
def _check_num_envs(num_envs: Any) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs <= 0:
        raise SimulatorArgumentError(f"num_envs must be a positive int, got {num_envs!r}")
    return int(num_envs)


def _check_steps(num_steps: Any, what: str = "num_steps", minimum: int = 0) -> int:
    if isinstance(num_steps, bool) or not isinstance(num_steps, int | np.integer) or num_steps < minimum:
        raise SimulatorArgumentError(f"{what} must be an int >= {minimum}, got {num_steps!r}")
    return int(num_steps)


def _triton_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _resolve_device(backend: str, device: Any) -> Any:
    import torch

    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if backend == "fused" and not _triton_interpret():
            raise SimulatorUnavailableError(
                "the fused backend needs a CUDA GPU (or TRITON_INTERPRET=1 and device='cpu' for tests)"
            )
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise SimulatorArgumentError(f"bad device {device!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SimulatorUnavailableError(f"device {device!r} asked for, but torch sees no CUDA GPU")
    if backend == "fused" and dev.type != "cuda" and not _triton_interpret():
        raise SimulatorUnavailableError(
            f"the fused backend runs on CUDA, not {dev.type!r} (TRITON_INTERPRET=1 allows CPU tensors)"
        )
    return dev


def make_vec(
    backend: str,
    num_envs: int,
    device: Any = None,
    seed: int | None = None,
    *,
    max_episode_steps: int = MAX_EPISODE_STEPS,
    steps_per_launch: int = DEFAULT_STEPS_PER_LAUNCH,
    **options: Any,
) -> Any:
    """A CartPole-v1 vector env of ``num_envs`` on ``backend`` (one of :data:`BACKENDS`).

    ``device``: torch device for torch/compiled/fused (default: CUDA if available). ``seed``: the
    seed of the first ``reset()`` that gives none. ``steps_per_launch``: K, the steps a ``rollout``
    runs per kernel launch (fused) or per CUDA-graph replay (compiled on CUDA). ``options`` tune the
    fused kernel (``block``, ``num_warps``, ``reset_branch``, ``trig``).
    """
    if backend not in BACKENDS:
        raise SimulatorArgumentError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    num_envs = _check_num_envs(num_envs)
    max_episode_steps = _check_steps(max_episode_steps, "max_episode_steps", 1)
    steps_per_launch = _check_steps(steps_per_launch, "steps_per_launch", 1)
    if seed is not None and (not isinstance(seed, int | np.integer) or seed < 0):
        raise SimulatorArgumentError(f"seed must be a non-negative int or None, got {seed!r}")
    if backend == "gymnasium":
        if device not in (None, "cpu"):
            raise SimulatorArgumentError(f"the gymnasium backend runs on the CPU, not {device!r}")
        if options:
            raise SimulatorArgumentError(f"unknown options for gymnasium: {sorted(options)}")
        return GymnasiumCartPole(num_envs, seed, max_episode_steps)
    if backend == "fused":
        _import_triton()
    dev = _resolve_device(backend, device)
    if backend == "fused":
        return FusedCartPole(num_envs, dev, seed, max_episode_steps, steps_per_launch, **options)
    if options:
        raise SimulatorArgumentError(f"unknown options for {backend}: {sorted(options)}")
    return TorchCartPole(
        num_envs, dev, seed, max_episode_steps, steps_per_launch, compiled=backend == "compiled"
    )


# ---------------------------------------------------------------------------------------------
# gymnasium
# ---------------------------------------------------------------------------------------------
def _policy_actions_np(policy: Policy, obs: np.ndarray) -> np.ndarray:
    """The policy on float32 observations ``[N, 4]``, in the float32 order the kernels use."""
    obs = obs.astype(np.float32, copy=False)
    x, xd, th, thd = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
    if isinstance(policy, LinearPolicy):
        d = policy.diff()
        score = x * d[0] + xd * d[1] + th * d[2] + thd * d[3] + d[4]
    else:
        h = np.maximum(obs @ policy.w1 + policy.b1, np.float32(0))
        f = policy.flat()
        hd = policy.hidden
        score = h @ f[5 * hd : 6 * hd] + f[6 * hd]
    return (score > 0).astype(np.int64)


class GymnasiumCartPole:
    """gymnasium's ``CartPoleVectorEnv`` (numpy, float64 state) behind the common interface."""

    backend = "gymnasium"
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": "NextStep"}

    def __init__(self, num_envs: int, seed: int | None, max_episode_steps: int) -> None:
        import gymnasium as gym

        self.num_envs = num_envs
        self.device = "cpu"
        self._seed = seed
        self.env = gym.make_vec(
            "CartPole-v1",
            num_envs,
            vectorization_mode="vector_entry_point",
            max_episode_steps=max_episode_steps,
        )
        self.vec = self.env.unwrapped
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.single_observation_space = self.env.single_observation_space
        self.single_action_space = self.env.single_action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if seed is None and self._seed is not None:
            seed, self._seed = self._seed, None
        return self.env.reset(seed=seed, options=options)

    def _require_reset(self) -> None:
        if self.vec.state is None:
            raise SimulatorArgumentError("call reset() before step(), rollout() or get_state()")

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        self._require_reset()
        a = np.asarray(actions.cpu() if hasattr(actions, "cpu") else actions)
        if a.shape != (self.num_envs,):
            raise SimulatorArgumentError(f"actions must have shape ({self.num_envs},), got {a.shape}")
        if a.dtype == np.bool_:
            a = a.astype(np.int64)
        if not np.issubdtype(a.dtype, np.integer):
            raise SimulatorArgumentError(f"actions must be integers (0 or 1), got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() > 1):
            raise SimulatorArgumentError("actions must be 0 (push left) or 1 (push right)")
        return self.env.step(a)

    def get_state(self) -> np.ndarray:
        self._require_reset()
        return self.vec.state.T.astype(np.float32)

    def set_state(self, state: Any) -> None:
        """Set the physical state (float32 ``[N, 4]``); episode step counters are kept."""
        self._require_reset()
        s = np.asarray(state.cpu() if hasattr(state, "cpu") else state)
        if s.shape != (self.num_envs, 4):
            raise SimulatorArgumentError(f"state must have shape ({self.num_envs}, 4), got {s.shape}")
        self.vec.state = np.ascontiguousarray(s.astype(np.float32).astype(np.float64).T)

    def rollout(self, num_steps: int, policy: Any, *, steps_per_launch: int | None = None) -> RolloutStats:
        """Step ``num_steps`` times with ``policy`` (a Python loop; ``steps_per_launch`` is ignored)."""
        self._require_reset()
        num_steps = _check_steps(num_steps)
        policy = _as_policy(policy)
        episodes = 0
        total = 0.0
        finished = 0.0
        for _ in range(num_steps):
            obs = self.vec.state.T.astype(np.float32)
            _, r, te, tr, _ = self.vec.step(_policy_actions_np(policy, obs))
            done = te | tr
            episodes += int(done.sum())
            total += float(r.sum())
            finished += float(self.vec.steps[done].sum())
        return RolloutStats(episodes, total, finished, self.get_state(), self.num_envs, num_steps)

    def close(self) -> None:
        self.env.close()


# ---------------------------------------------------------------------------------------------
# torch and compiled
# ---------------------------------------------------------------------------------------------
def physics_torch(x: Any, xd: Any, th: Any, thd: Any, push: Any) -> tuple[Any, Any, Any, Any]:
    """One Euler step of CartPole-v1 in float32 (the same expression order as the Triton kernel)."""
    import torch

    ftm = torch.where(push, FORCE_MAG * INV_TM, -FORCE_MAG * INV_TM)
    c = torch.cos(th)
    s = torch.sin(th)
    temp = ftm + ML_TM * thd * thd * s
    thacc = (GRAVITY * s - c * temp) / (TWO_THIRDS - ML_TM * c * c)
    xacc = temp - ML_TM * thacc * c
    return x + TAU * xd, xd + TAU * xacc, th + TAU * thd, thd + TAU * thacc


def _linear_push_torch(state: Any, pd: Any) -> Any:
    x, xd, th, thd = state[0], state[1], state[2], state[3]
    return (x * pd[0] + xd * pd[1] + th * pd[2] + thd * pd[3] + pd[4]) > 0


def _mlp_push_torch(state: Any, pf: Any, hidden: int) -> Any:
    import torch

    w1 = pf[: 4 * hidden].view(4, hidden)
    b1 = pf[4 * hidden : 5 * hidden]
    w2d = pf[5 * hidden : 6 * hidden]
    h = torch.relu(state.T @ w1 + b1)
    return (h @ w2d + pf[6 * hidden]) > 0


def _cartpole_update(
    state: Any, steps: Any, done: Any, resets: Any, base: Any, push: Any, max_steps: int
) -> tuple[Any, Any, Any, Any, Any]:
    """The vector step with next-step autoreset; pure (returns new tensors)."""
    import torch

    nx, nxd, nth, nthd = physics_torch(state[0], state[1], state[2], state[3], push)
    term = (nx < -X_THRESHOLD) | (nx > X_THRESHOLD) | (nth < -THETA_THRESHOLD) | (nth > THETA_THRESHOLD)
    nsteps = steps + 1
    trunc = nsteps >= max_steps
    new_state = torch.where(done, reset_noise_torch(base, resets), torch.stack((nx, nxd, nth, nthd)))
    nsteps = torch.where(done, 0, nsteps)
    keep = ~done
    return new_state, nsteps, term & keep, trunc & keep, resets + done.to(resets.dtype)


def _step_inplace(
    state: Any,
    steps: Any,
    done: Any,
    resets: Any,
    base: Any,
    ep: Any,
    fin: Any,
    rew: Any,
    push: Any,
    reward_out: Any,
    term_out: Any,
    trunc_out: Any,
    max_steps: int,
) -> None:
    """One step written into the env's buffers (and episode statistics accumulated)."""
    new_state, nsteps, term, trunc, nresets = _cartpole_update(
        state, steps, done, resets, base, push, max_steps
    )
    live = ~done
    reward_out.copy_(live.to(reward_out.dtype))
    rew.add_(live.to(rew.dtype))
    new_done = term | trunc
    ep.add_(new_done.to(ep.dtype))
    fin.add_((nsteps * new_done).to(fin.dtype))
    state.copy_(new_state)
    steps.copy_(nsteps)
    done.copy_(new_done)
    resets.copy_(nresets)
    term_out.copy_(term)
    trunc_out.copy_(trunc)


def _compiled_step_fn(
    state: Any,
    steps: Any,
    done: Any,
    resets: Any,
    base: Any,
    ep: Any,
    fin: Any,
    rew: Any,
    actions: Any,
    use_policy: Any,
    pd: Any,
    reward_out: Any,
    term_out: Any,
    trunc_out: Any,
    max_steps: int,
) -> None:
    """step() and linear-policy rollout in one graph (``use_policy`` is a 0-dim bool tensor), so
    ``torch.compile`` compiles once for both."""
    import torch

    push = torch.where(use_policy, _linear_push_torch(state, pd), actions > 0)
    _step_inplace(
        state, steps, done, resets, base, ep, fin, rew, push, reward_out, term_out, trunc_out, max_steps
    )


def _compiled_mlp_fn(
    state: Any,
    steps: Any,
    done: Any,
    resets: Any,
    base: Any,
    ep: Any,
    fin: Any,
    rew: Any,
    pf: Any,
    reward_out: Any,
    term_out: Any,
    trunc_out: Any,
    max_steps: int,
    hidden: int,
) -> None:
    push = _mlp_push_torch(state, pf, hidden)
    _step_inplace(
        state, steps, done, resets, base, ep, fin, rew, push, reward_out, term_out, trunc_out, max_steps
    )


_COMPILED: dict[str, Any] = {}


def _compiled(name: str) -> Any:
    """``torch.compile`` of a step function, made once per process (dynamo caches per shape)."""
    fn = _COMPILED.get(name)
    if fn is None:
        import torch

        target = {"step": _compiled_step_fn, "mlp": _compiled_mlp_fn}[name]
        # automatic dynamic shapes: N changes are one recompile, not one per N (the step is elementwise)
        fn = _COMPILED[name] = torch.compile(target, fullgraph=True)
    return fn


class _TensorEnvBase:
    """Buffers and the API shared by the torch, compiled and fused backends (SoA state ``[4, N]``)."""

    backend = "torch"
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": "NextStep"}

    def __init__(
        self, num_envs: int, device: Any, seed: int | None, max_episode_steps: int, steps_per_launch: int
    ) -> None:
        import torch

        self.num_envs = num_envs
        self.device = device
        self.max_episode_steps = max_episode_steps
        self.steps_per_launch = steps_per_launch
        self._seed = seed
        self._key: int | None = None
        n = num_envs
        self.state = torch.zeros(4, n, dtype=torch.float32, device=device)
        self.steps = torch.zeros(n, dtype=torch.int32, device=device)
        self.done = torch.zeros(n, dtype=self._done_dtype(), device=device)
        self.resets = torch.zeros(n, dtype=torch.int32, device=device)
        self.base = torch.zeros(n, dtype=torch.int64, device=device)
        self.ep = torch.zeros(n, dtype=torch.int32, device=device)
        self.fin = torch.zeros(n, dtype=torch.int32, device=device)
        self.rew = torch.zeros(n, dtype=torch.int32, device=device)
        self._ready = False

    def _done_dtype(self) -> Any:
        import torch

        return torch.bool

    # -- gymnasium-style spaces (gymnasium imported only when asked) ----------------------------
    @property
    def single_observation_space(self) -> Any:
        import gymnasium as gym

        high = np.array([X_THRESHOLD * 2, np.inf, THETA_THRESHOLD * 2, np.inf], dtype=np.float32)
        return gym.spaces.Box(-high, high, dtype=np.float32)

    @property
    def single_action_space(self) -> Any:
        import gymnasium as gym

        return gym.spaces.Discrete(2)

    @property
    def observation_space(self) -> Any:
        from gymnasium.vector.utils import batch_space

        return batch_space(self.single_observation_space, self.num_envs)

    @property
    def action_space(self) -> Any:
        from gymnasium.vector.utils import batch_space

        return batch_space(self.single_action_space, self.num_envs)

    # -- reset / state --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """New episodes everywhere; ``seed`` restarts the reset RNG, else its streams continue."""
        if options:
            raise SimulatorArgumentError(f"reset options are not supported here, got {sorted(options)}")
        if seed is None and self._key is None:
            seed = self._seed if self._seed is not None else int(np.random.SeedSequence().entropy % 2**63)
        if seed is not None:
            if not isinstance(seed, int | np.integer) or seed < 0:
                raise SimulatorArgumentError(f"seed must be a non-negative int, got {seed!r}")
            self._key = seed_key(int(seed))
            self.base.copy_(rng_base_torch(self.num_envs, self._key, self.device))
            self.resets.zero_()
        self.state.copy_(reset_noise_torch(self.base, self.resets))
        self.resets.add_(1)
        self.steps.zero_()
        self.done.zero_()
        self._ready = True
        return self.state.T.contiguous(), {}

    def _require_reset(self) -> None:
        if not self._ready:
            raise SimulatorArgumentError("call reset() before step(), rollout() or get_state()")

    def get_state(self) -> Any:
        """Float32 ``[N, 4]`` (x, x_dot, theta, theta_dot) on the env's device (a copy)."""
        self._require_reset()
        return self.state.T.contiguous()

    def set_state(self, state: Any) -> None:
        """Set the physical state (float32 ``[N, 4]``); episode step counters and pending resets are kept."""
        import torch

        self._require_reset()
        s = torch.as_tensor(state)
        if tuple(s.shape) != (self.num_envs, 4):
            raise SimulatorArgumentError(f"state must have shape ({self.num_envs}, 4), got {tuple(s.shape)}")
        if not s.dtype.is_floating_point:
            raise SimulatorArgumentError(f"state must be floating point, got {s.dtype}")
        self.state.copy_(s.to(device=self.device, dtype=torch.float32).T)

    def _actions(self, actions: Any) -> Any:
        """Validate actions: shape ``(N,)``, integer or bool dtype; moved to the env's device."""
        import torch

        if isinstance(actions, np.ndarray | list | tuple):
            a_np = np.asarray(actions)
            if a_np.dtype == np.bool_:
                a_np = a_np.astype(np.int8)
            if not np.issubdtype(a_np.dtype, np.integer):
                raise SimulatorArgumentError(f"actions must be integers (0 or 1), got dtype {a_np.dtype}")
            actions = torch.from_numpy(np.ascontiguousarray(a_np))
        if not isinstance(actions, torch.Tensor):
            raise SimulatorArgumentError(f"actions must be a tensor or array, got {type(actions).__name__}")
        if tuple(actions.shape) != (self.num_envs,):
            raise SimulatorArgumentError(
                f"actions must have shape ({self.num_envs},), got {tuple(actions.shape)}"
            )
        if actions.dtype.is_floating_point or actions.dtype.is_complex:
            raise SimulatorArgumentError(f"actions must be integers (0 or 1), got dtype {actions.dtype}")
        if actions.dtype == torch.bool:
            actions = actions.to(torch.int8)
        return actions.to(self.device, non_blocking=True)

    def _begin_rollout(self, num_steps: Any, policy: Any) -> tuple[int, Policy]:

        self._require_reset()
        num_steps = _check_steps(num_steps)
        policy = _as_policy(policy)
        self.ep.zero_()
        self.fin.zero_()
        self.rew.zero_()
        return num_steps, policy

    def _end_rollout(self, num_steps: int) -> RolloutStats:
        import torch

        sums = torch.stack([b.to(torch.int64).sum() for b in (self.ep, self.rew, self.fin)]).tolist()
        ep, rew, fin = (int(v) for v in sums)
        return RolloutStats(ep, float(rew), float(fin), self.get_state(), self.num_envs, num_steps)

    def close(self) -> None:
        pass


class TorchCartPole(_TensorEnvBase):
    """Batched PyTorch: eager ops (``torch``) or the same step through ``torch.compile`` (``compiled``)."""

    def __init__(
        self,
        num_envs: int,
        device: Any,
        seed: int | None,
        max_episode_steps: int,
        steps_per_launch: int,
        compiled: bool = False,
    ) -> None:
        import torch

        super().__init__(num_envs, device, seed, max_episode_steps, steps_per_launch)
        self.compiled = compiled
        self.backend = "compiled" if compiled else "torch"
        n = num_envs
        self._reward = torch.zeros(n, dtype=torch.float32, device=device)
        self._term = torch.zeros(n, dtype=torch.bool, device=device)
        self._trunc = torch.zeros(n, dtype=torch.bool, device=device)
        self._act = torch.zeros(n, dtype=torch.int64, device=device)
        self._pd = torch.zeros(5, dtype=torch.float32, device=device)
        self._pf: Any = None
        self._true = torch.ones((), dtype=torch.bool, device=device)
        self._false = torch.zeros((), dtype=torch.bool, device=device)
        self._graphs: dict[tuple[str, int], Any] = {}
        self.graph_error: str | None = None

    # -- one step, three ways ------------------------------------------------------------------
    def _bufs(self) -> tuple[Any, ...]:
        return (self.state, self.steps, self.done, self.resets, self.base, self.ep, self.fin, self.rew)

    def _outs(self) -> tuple[Any, ...]:
        return (self._reward, self._term, self._trunc)

    def _eager_step(self, push: Any) -> None:
        _step_inplace(*self._bufs(), push, *self._outs(), self.max_episode_steps)

    def _compiled_call(self, kind: str, policy_hidden: int = 0) -> None:
        if kind == "mlp":
            _compiled("mlp")(*self._bufs(), self._pf, *self._outs(), self.max_episode_steps, policy_hidden)
        else:
            flag = self._true if kind == "policy" else self._false
            _compiled("step")(*self._bufs(), self._act, flag, self._pd, *self._outs(), self.max_episode_steps)

    def _run(self, kind: str, n: int, hidden: int = 0) -> None:
        """``n`` compiled steps; on CUDA, replays of a CUDA graph holding up to K steps."""
        if n <= 0:
            return
        if self.device.type != "cuda":
            for _ in range(n):
                self._compiled_call(kind, hidden)
            return
        k = min(self.steps_per_launch, n) if kind != "step" else 1
        full, rest = divmod(n, k)
        g = self._graph(kind, k, hidden)
        if g is None:  # capture failed: plain compiled calls
            for _ in range(n):
                self._compiled_call(kind, hidden)
            return
        for _ in range(full):
            g.replay()
        if rest:
            self._graph(kind, rest, hidden).replay()

    def _graph(self, kind: str, k: int, hidden: int) -> Any:
        """Capture ``k`` in-place compiled steps into one CUDA graph (compiling on scratch copies first,
        so the warm-up does not move the env)."""
        import torch

        if (kind, k) in self._graphs:
            return self._graphs[(kind, k)]
        saved = [b.clone() for b in (*self._bufs(), *self._outs())]
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._compiled_call(kind, hidden)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        for b, s in zip((*self._bufs(), *self._outs()), saved, strict=True):
            b.copy_(s)
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                for _ in range(k):
                    self._compiled_call(kind, hidden)
        except RuntimeError as e:  # keep working without graphs, and say why
            import warnings

            warnings.warn(
                f"rlscope: CUDA graph capture of the compiled step failed ({e}); no graphs", stacklevel=3
            )
            self.graph_error = str(e)
            g = None
        self._graphs[(kind, k)] = g
        return g

    # -- API -----------------------------------------------------------------------------------
    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Gymnasium vector step: ``(obs [N,4], reward [N], terminated [N], truncated [N], {})``."""
        self._require_reset()
        a = self._actions(actions)
        if self.compiled:
            self._act.copy_(a)
            self._run("step", 1)
        else:
            self._eager_step(a > 0)
        return self.state.T.contiguous(), self._reward.clone(), self._term.clone(), self._trunc.clone(), {}

    def rollout(self, num_steps: int, policy: Any, *, steps_per_launch: int | None = None) -> RolloutStats:
        """Run ``num_steps`` policy steps; returns :class:`RolloutStats`."""
        import torch

        num_steps, policy = self._begin_rollout(num_steps, policy)
        if steps_per_launch is not None:
            self.steps_per_launch = _check_steps(steps_per_launch, "steps_per_launch", 1)
        if isinstance(policy, LinearPolicy):
            self._pd.copy_(torch.from_numpy(policy.diff()))
            if self.compiled:
                self._run("policy", num_steps)
            else:
                for _ in range(num_steps):
                    self._eager_step(_linear_push_torch(self.state, self._pd))
        else:
            pf = torch.from_numpy(policy.flat()).to(self.device)
            if self._pf is None or self._pf.shape != pf.shape:
                self._pf = pf
                self._graphs = {k: g for k, g in self._graphs.items() if k[0] != "mlp"}
            else:
                self._pf.copy_(pf)
            if self.compiled:
                self._run("mlp", num_steps, policy.hidden)
            else:
                for _ in range(num_steps):
                    self._eager_step(_mlp_push_torch(self.state, self._pf, policy.hidden))
        return self._end_rollout(num_steps)


# ---------------------------------------------------------------------------------------------
# fused (Triton)
# ---------------------------------------------------------------------------------------------
# The kernel functions are plain functions here and become triton.jit functions when the fused
# backend is first used (_import_triton), so importing this module never imports triton. Their
# annotations stay strings (from __future__ import annotations), which Triton reads as constexpr.
tl: Any = None
triton: Any = None


def _k_hash32(x):  # type: ignore[no-untyped-def]
    x = x ^ (x >> 16)
    x = x * 0x21F0AAAD
    x = x ^ (x >> 15)
    x = x * 0x735A2D97
    x = x ^ (x >> 15)
    return x


def _k_uniform(k, SALT: tl.constexpr):  # type: ignore[no-untyped-def]
    bits = _k_hash32(k + SALT)
    return ((bits >> 8).to(tl.float32) * 5.9604644775390625e-08 - 0.5) * 0.1


def _k_physics(x, xd, th, thd, push, EXACT: tl.constexpr):  # type: ignore[no-untyped-def]
    """One Euler step. EXACT: libdevice sin/cos and IEEE-style division, valid for any state.

    Otherwise the caller guarantees |theta| <= 0.25 for every step whose result is kept (alive poles
    stay within 12 degrees; a launch whose entry state is wider takes the EXACT path), which allows:
    Taylor sin to theta^5 and cos to theta^6 (truncation error < 1.2e-8 and 4e-10 at 0.25, under
    float32 rounding), and 1/denom by one Newton step from the tangent at 0.6226 (denom = 2/3 -
    cos^2/22 lies in [0.6212, 0.6240], so the start is within 5e-6 and the refined value within float32
    rounding). On steps whose result is discarded (the physics of an env being reset) the values stay
    finite, which is all that is needed.
    """
    ftm = tl.where(push, 9.090909090909092, -9.090909090909092)  # force / total_mass
    if EXACT:
        c = tl.cos(th)
        s = tl.sin(th)
        temp = ftm + 0.045454545454545456 * thd * thd * s
        thacc = (9.8 * s - c * temp) / (0.6666666666666666 - 0.045454545454545456 * c * c)
    else:
        t = th * th
        s = th + th * t * (-0.16666666666666666 + t * 0.008333333333333333)
        c = 1.0 + t * (-0.5 + t * (0.041666666666666664 + t * -0.001388888888888889))
        temp = ftm + 0.045454545454545456 * thd * thd * s
        d = 0.6666666666666666 - 0.045454545454545456 * c * c
        r = 3.2123353678123994 - 2.5797070458844512 * d  # tangent of 1/d at d0 = 0.6226 (2/d0, 1/d0^2)
        r = r + r * (1.0 - d * r)
        thacc = (9.8 * s - c * temp) * r
    xacc = temp - 0.045454545454545456 * thacc * c
    return x + 0.02 * xd, xd + 0.02 * xacc, th + 0.02 * thd, thd + 0.02 * thacc


def _k_steps(  # type: ignore[no-untyped-def]
    x, xd, th, thd, steps, done, resets, base, act, pol_ptr, k_steps, max_steps,
    POLICY: tl.constexpr, HIDDEN: tl.constexpr, BRANCH: tl.constexpr, EXACT: tl.constexpr,
):  # fmt: skip
    """``k_steps`` steps of the block's envs with their state in registers."""
    if POLICY == 1:
        w0 = tl.load(pol_ptr)
        w1 = tl.load(pol_ptr + 1)
        w2 = tl.load(pol_ptr + 2)
        w3 = tl.load(pol_ptr + 3)
        wb = tl.load(pol_ptr + 4)
    term = done
    for _ in range(k_steps):
        if POLICY == 1:
            push = (x * w0 + xd * w1 + th * w2 + thd * w3 + wb) > 0.0
        elif POLICY == 2:
            score = tl.zeros_like(x) + tl.load(pol_ptr + 6 * HIDDEN)
            for j in tl.static_range(HIDDEN):
                h = (
                    x * tl.load(pol_ptr + j)
                    + xd * tl.load(pol_ptr + HIDDEN + j)
                    + th * tl.load(pol_ptr + 2 * HIDDEN + j)
                    + thd * tl.load(pol_ptr + 3 * HIDDEN + j)
                    + tl.load(pol_ptr + 4 * HIDDEN + j)
                )
                score += tl.maximum(h, 0.0) * tl.load(pol_ptr + 5 * HIDDEN + j)
            push = score > 0.0
        else:
            push = act > 0
        nx, nxd, nth, nthd = _k_physics(x, xd, th, thd, push, EXACT)
        term = (nx < -2.4) | (nx > 2.4) | (nth < -0.20943951023931953) | (nth > 0.20943951023931953)
        steps = steps + 1
        new_done = term | (steps >= max_steps)
        # Next-step autoreset of the envs that were done. The reset noise costs ~45 integer ops;
        # with BRANCH a block computes it only on steps where one of its envs resets (a block-uniform
        # branch, one warp reduction), which a good policy makes rare.
        if BRANCH:
            if tl.max(done.to(tl.int32), axis=0) > 0:
                key = _k_hash32(base ^ resets.to(tl.uint32))
                nx = tl.where(done, _k_uniform(key, 0), nx)
                nxd = tl.where(done, _k_uniform(key, 0x9E3779B9), nxd)
                nth = tl.where(done, _k_uniform(key, 0x3C6EF372), nth)
                nthd = tl.where(done, _k_uniform(key, 0xDAA66D2B), nthd)
                resets = resets + done.to(tl.int32)
                steps = tl.where(done, 0, steps)
                new_done = new_done & (done == 0)
        else:
            key = _k_hash32(base ^ resets.to(tl.uint32))
            nx = tl.where(done, _k_uniform(key, 0), nx)
            nxd = tl.where(done, _k_uniform(key, 0x9E3779B9), nxd)
            nth = tl.where(done, _k_uniform(key, 0x3C6EF372), nth)
            nthd = tl.where(done, _k_uniform(key, 0xDAA66D2B), nthd)
            resets = resets + done.to(tl.int32)
            steps = tl.where(done, 0, steps)
            new_done = new_done & (done == 0)
        done = new_done
        x = nx
        xd = nxd
        th = nth
        thd = nthd
    return x, xd, th, thd, steps, done, resets, term


def _k_cartpole(  # type: ignore[no-untyped-def]
    state_ptr, steps_ptr, done_ptr, resets_ptr, base_ptr, ep_ptr, fin_ptr, rew_ptr, act_ptr, pol_ptr,
    reward_ptr, term_ptr, trunc_ptr, n_envs, k_steps, max_steps,
    POLICY: tl.constexpr, HIDDEN: tl.constexpr, BLOCK: tl.constexpr, BRANCH: tl.constexpr,
    TRIG: tl.constexpr, OUTPUTS: tl.constexpr,
):  # fmt: skip
    """K CartPole steps per launch for BLOCK envs per program: load once, loop in registers, store once.

    POLICY: 0 actions from ``act_ptr`` (step(), K = 1), 1 linear, 2 MLP. TRIG: 0 exact physics,
    1 fast physics unless an env of the block enters with |theta| > 0.25 (see _k_physics).
    Episode statistics are accumulated once per launch, exactly, from the counters the step keeps
    anyway: resets (one per reset step), steps (current episode length) and done (pending reset).
    """
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_envs
    x = tl.load(state_ptr + offs, mask=mask, other=0.0)
    xd = tl.load(state_ptr + n_envs + offs, mask=mask, other=0.0)
    th = tl.load(state_ptr + 2 * n_envs + offs, mask=mask, other=0.0)
    thd = tl.load(state_ptr + 3 * n_envs + offs, mask=mask, other=0.0)
    steps0 = tl.load(steps_ptr + offs, mask=mask, other=0)
    done0 = tl.load(done_ptr + offs, mask=mask, other=0) != 0
    resets0 = tl.load(resets_ptr + offs, mask=mask, other=0)
    base = tl.load(base_ptr + offs, mask=mask, other=0).to(tl.uint32)
    act = tl.load(act_ptr + offs, mask=mask, other=0) if POLICY == 0 else steps0
    if TRIG == 1:  # envs about to reset do not count: their first step's physics is discarded
        if tl.max(tl.where(done0, 0.0, tl.abs(th)), axis=0) > 0.25:
            x, xd, th, thd, steps, done, resets, term = _k_steps(
                x, xd, th, thd, steps0, done0, resets0, base, act, pol_ptr, k_steps, max_steps,
                POLICY, HIDDEN, BRANCH, True,
            )  # fmt: skip
        else:
            x, xd, th, thd, steps, done, resets, term = _k_steps(
                x, xd, th, thd, steps0, done0, resets0, base, act, pol_ptr, k_steps, max_steps,
                POLICY, HIDDEN, BRANCH, False,
            )  # fmt: skip
    else:
        x, xd, th, thd, steps, done, resets, term = _k_steps(
            x, xd, th, thd, steps0, done0, resets0, base, act, pol_ptr, k_steps, max_steps,
            POLICY, HIDDEN, BRANCH, True,
        )  # fmt: skip
    tl.store(state_ptr + offs, x, mask=mask)
    tl.store(state_ptr + n_envs + offs, xd, mask=mask)
    tl.store(state_ptr + 2 * n_envs + offs, th, mask=mask)
    tl.store(state_ptr + 3 * n_envs + offs, thd, mask=mask)
    tl.store(steps_ptr + offs, steps, mask=mask)
    tl.store(done_ptr + offs, done.to(tl.int8), mask=mask)
    tl.store(resets_ptr + offs, resets, mask=mask)
    # Statistics of the launch: a reset step pays reward 0 and every other step 1; each episode that
    # ended in the launch is either reset inside it or pending (done) at its end; the ended episodes'
    # returns are the rewarded steps plus the entry episode's earlier steps minus the exit episode's.
    n_reset = resets - resets0
    rewarded = k_steps - n_reset
    ended = n_reset - done0.to(tl.int32) + done.to(tl.int32)
    ret = rewarded + tl.where(done0, 0, steps0) - tl.where(done, 0, steps)
    tl.store(ep_ptr + offs, tl.load(ep_ptr + offs, mask=mask, other=0) + ended, mask=mask)
    tl.store(fin_ptr + offs, tl.load(fin_ptr + offs, mask=mask, other=0) + ret, mask=mask)
    tl.store(rew_ptr + offs, tl.load(rew_ptr + offs, mask=mask, other=0) + rewarded, mask=mask)
    if OUTPUTS:  # step(): K = 1
        tl.store(reward_ptr + offs, tl.where(done0, 0.0, 1.0), mask=mask)
        tl.store(term_ptr + offs, (term & (done0 == 0)).to(tl.int8), mask=mask)
        tl.store(trunc_ptr + offs, ((steps >= max_steps) & (done0 == 0)).to(tl.int8), mask=mask)


_KERNEL_FUNCS = ("_k_hash32", "_k_uniform", "_k_physics", "_k_steps", "_k_cartpole")


def _import_triton() -> Any:
    """Import triton and turn the ``_k_*`` functions into triton.jit functions (once)."""
    global tl, triton
    if triton is not None:
        return triton
    try:
        import triton as _triton
        import triton.language as _tl
    except ImportError as e:
        raise SimulatorUnavailableError(f"the fused backend needs Triton (pip install triton): {e}") from None
    g = globals()
    for name in _KERNEL_FUNCS:
        g[name] = _triton.jit(g[name])
    tl, triton = _tl, _triton
    return triton


class FusedCartPole(_TensorEnvBase):
    """CartPole as one Triton kernel per K steps (see ``_k_cartpole``)."""

    backend = "fused"

    def __init__(
        self,
        num_envs: int,
        device: Any,
        seed: int | None,
        max_episode_steps: int,
        steps_per_launch: int,
        *,
        block: int = 128,
        num_warps: int = 1,
        reset_branch: bool = True,
        trig: str = "poly",
    ) -> None:
        import torch

        if block < 32 or block & (block - 1):
            raise SimulatorArgumentError(f"block must be a power of two >= 32, got {block}")
        if trig not in ("poly", "libdevice"):
            raise SimulatorArgumentError(f"trig must be 'poly' or 'libdevice', got {trig!r}")
        super().__init__(num_envs, device, seed, max_episode_steps, steps_per_launch)
        self.block = block
        self.num_warps = num_warps
        self.reset_branch = reset_branch
        self.trig = 1 if trig == "poly" else 0
        n = num_envs
        self._reward = torch.zeros(n, dtype=torch.float32, device=device)
        self._term = torch.zeros(n, dtype=torch.int8, device=device)
        self._trunc = torch.zeros(n, dtype=torch.int8, device=device)
        self._nopol = torch.zeros(1, dtype=torch.float32, device=device)

    def _done_dtype(self) -> Any:
        import torch

        return torch.int8

    def _launch(self, k: int, policy: int, hidden: int, pol: Any, act: Any, outputs: bool) -> None:
        grid = (triton.cdiv(self.num_envs, self.block),)
        _k_cartpole[grid](
            self.state, self.steps, self.done, self.resets, self.base, self.ep, self.fin, self.rew,
            act, pol, self._reward, self._term, self._trunc,
            self.num_envs, k, self.max_episode_steps,
            POLICY=policy, HIDDEN=hidden, BLOCK=self.block, BRANCH=self.reset_branch,
            TRIG=self.trig if policy else 0, OUTPUTS=outputs, num_warps=self.num_warps,
        )  # fmt: skip

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Gymnasium vector step (one launch of the kernel with K = 1 and the given actions)."""
        self._require_reset()
        a = self._actions(actions)
        self._launch(1, 0, 1, self._nopol, a, True)
        return (
            self.state.T.contiguous(),
            self._reward.clone(),
            self._term.clone().view(_torch_bool()),
            self._trunc.clone().view(_torch_bool()),
            {},
        )

    def rollout(self, num_steps: int, policy: Any, *, steps_per_launch: int | None = None) -> RolloutStats:
        """``num_steps`` policy steps in ``ceil(num_steps / K)`` launches; statistics summed on the GPU."""
        import torch

        num_steps, policy = self._begin_rollout(num_steps, policy)
        k = (
            self.steps_per_launch
            if steps_per_launch is None
            else _check_steps(steps_per_launch, "steps_per_launch", 1)
        )
        if isinstance(policy, LinearPolicy):
            kind, hidden, flat = 1, 1, policy.diff()
        else:
            kind, hidden, flat = 2, policy.hidden, policy.flat()
        pol = torch.from_numpy(flat).to(self.device)
        left = num_steps
        while left > 0:
            n = min(k, left)
            self._launch(n, kind, hidden, pol, self.steps, False)
            left -= n
        return self._end_rollout(num_steps)


def _torch_bool() -> Any:
    import torch

    return torch.bool
