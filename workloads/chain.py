"""A mass-spring chain of S links per env: a simulator whose memory traffic per step is a parameter.

Why: simulator kernel fusion keeps state in registers across K steps, so it pays in proportion to the
bytes an unfused step moves (as the RL-Scope paper measured). CartPole moves 16 bytes of state per
env-step; this chain moves ``8 * S`` (x and v of S masses), at a fixed few flops per byte, so the
fused-over-eager speedup can be measured as a function of S.

Dynamics (unit masses, fixed walls at both ends, semi-implicit Euler, float32)::

    a_i = K (x_{i-1} - 2 x_i + x_{i+1}) - C v_i + [i == 0] f,   x_{-1} = x_S = 0
    v_i <- v_i + DT a_i;  x_i <- x_i + DT v_i;  reward = -sum_i x_i^2

``rollout`` drives mass 0 with the feedback ``f = -gain * v_0``. Backends: ``torch`` (eager),
``compiled`` (``torch.compile``; CUDA graph of K steps on CUDA) and ``fused`` (a Triton kernel
generated for each S: every link of an env lives in its thread's registers for K steps).
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlscope.workloads.cartpole import (
    SimulatorArgumentError,
    _check_num_envs,
    _check_steps,
    _import_triton,
    _resolve_device,
)

__all__ = ["BACKENDS", "MAX_FUSED_LINKS", "ChainStats", "make_chain", "step_reference"]

BACKENDS = ("torch", "compiled", "fused")
SPRING = 50.0
DAMPING = 0.05
DT = 0.01
MAX_FUSED_LINKS = 64  # 2 S floats per thread stay in registers up to here; beyond, they would spill


@dataclass
class ChainStats:
    """What ``rollout`` returns: summed reward over envs and steps, and the final state ``[N, S, 2]``."""

    total_reward: float
    final_state: Any
    num_envs: int
    num_steps: int

    @property
    def env_steps(self) -> int:
        return self.num_envs * self.num_steps


def step_reference(state: np.ndarray, force: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step in float64 numpy (the plain reference the fast backends are tested against)."""
    x = state[..., 0].astype(np.float64)
    v = state[..., 1].astype(np.float64)
    xl = np.pad(x[:, :-1], ((0, 0), (1, 0)))
    xr = np.pad(x[:, 1:], ((0, 0), (0, 1)))
    a = SPRING * (xl - 2 * x + xr) - DAMPING * v
    a[:, 0] += force
    v = v + DT * a
    x = x + DT * v
    return np.stack([x, v], axis=-1), -(x * x).sum(axis=1)


def make_chain(
    backend: str,
    num_envs: int,
    links: int,
    device: Any = None,
    seed: int | None = None,
    *,
    steps_per_launch: int = 100,
    block: int = 64,
    num_warps: int = 2,
) -> ChainEnv:
    """A chain env of ``num_envs`` envs with ``links`` masses each on ``backend`` (see :data:`BACKENDS`)."""
    if backend not in BACKENDS:
        raise SimulatorArgumentError(
            f"unknown chain backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    num_envs = _check_num_envs(num_envs)
    links = _check_steps(links, "links", 1)
    steps_per_launch = _check_steps(steps_per_launch, "steps_per_launch", 1)
    if backend == "fused":
        if links > MAX_FUSED_LINKS:
            raise SimulatorArgumentError(
                f"the fused chain keeps links in registers: links <= {MAX_FUSED_LINKS}"
            )
        _import_triton()
    dev = _resolve_device(backend, device)
    return ChainEnv(backend, num_envs, links, dev, seed, steps_per_launch, block, num_warps)


# ---------------------------------------------------------------------------------------------
# torch / compiled
# ---------------------------------------------------------------------------------------------
def _chain_update(x: Any, v: Any, force: Any) -> tuple[Any, Any, Any]:
    """One step on ``x, v`` of shape ``[N, S]``; pure."""
    import torch
    import torch.nn.functional as F

    xl = F.pad(x[:, :-1], (1, 0))
    xr = F.pad(x[:, 1:], (0, 1))
    a = SPRING * (xl - 2.0 * x + xr) - DAMPING * v
    a = torch.cat([a[:, :1] + force.unsqueeze(1), a[:, 1:]], dim=1)
    v = v + DT * a
    x = x + DT * v
    return x, v, -(x * x).sum(dim=1)


def _chain_step_inplace(x: Any, v: Any, rew: Any, force: Any, reward_out: Any) -> None:
    nx, nv, r = _chain_update(x, v, force)
    x.copy_(nx)
    v.copy_(nv)
    reward_out.copy_(r)
    rew.add_(r)


def _chain_policy_inplace(x: Any, v: Any, rew: Any, gain: Any, reward_out: Any) -> None:
    _chain_step_inplace(x, v, rew, -gain * v[:, 0], reward_out)


_COMPILED: dict[str, Any] = {}


def _compiled(name: str) -> Any:
    fn = _COMPILED.get(name)
    if fn is None:
        import torch

        target = {"step": _chain_step_inplace, "policy": _chain_policy_inplace}[name]
        # static shapes: with S symbolic, inductor's reduction over S was ~10x slower (H200, torch 2.11)
        fn = _COMPILED[name] = torch.compile(target, fullgraph=True, dynamic=False)
    return fn


# ---------------------------------------------------------------------------------------------
# fused: one kernel per S, generated (Triton has no register arrays; S named scalars per thread)
# ---------------------------------------------------------------------------------------------
_KERNELS: dict[int, Any] = {}


def _chain_source(links: int) -> str:
    """Source of the fused kernel for ``links`` masses: loads, K-step loop, stores."""
    s = links
    lines = [
        f"def _chain_s{s}(state_ptr, rew_ptr, n_envs, k_steps, gain, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    m = offs < n_envs",
    ]
    # state layout [2, S, N]: link i's x at (i * N), v at ((S + i) * N), coalesced across envs
    lines += [f"    x{i} = tl.load(state_ptr + {i} * n_envs + offs, mask=m, other=0.0)" for i in range(s)]
    lines += [f"    v{i} = tl.load(state_ptr + {s + i} * n_envs + offs, mask=m, other=0.0)" for i in range(s)]
    lines += ["    rew = tl.load(rew_ptr + offs, mask=m, other=0.0)", "    for _ in range(k_steps):"]
    lines.append("        f = -gain * v0")
    for i in range(s):
        left = f"p{i - 1}" if i else "0.0"
        right = f"x{i + 1}" if i + 1 < s else "0.0"
        lines.append(f"        a = {SPRING!r} * ({left} - 2.0 * x{i} + {right}) - {DAMPING!r} * v{i}")
        if i == 0:
            lines.append("        a = a + f")
        lines.append(f"        v{i} = v{i} + {DT!r} * a")
        lines.append(f"        p{i} = x{i}")  # the old x_i, needed by link i + 1
        lines.append(f"        x{i} = x{i} + {DT!r} * v{i}")
        lines.append(f"        r = x{i} * x{i}" if i == 0 else f"        r = r + x{i} * x{i}")
    lines.append("        rew = rew - r")
    lines += [f"    tl.store(state_ptr + {i} * n_envs + offs, x{i}, mask=m)" for i in range(s)]
    lines += [f"    tl.store(state_ptr + {s + i} * n_envs + offs, v{i}, mask=m)" for i in range(s)]
    lines.append("    tl.store(rew_ptr + offs, rew, mask=m)")
    return "\n".join(lines) + "\n"


def _chain_kernel(links: int) -> Any:
    """The triton.jit kernel for ``links`` (its source registered with linecache so Triton can read it)."""
    k = _KERNELS.get(links)
    if k is None:
        triton = _import_triton()
        import triton.language as tl

        src = _chain_source(links)
        filename = f"<rlscope-chain-kernel-S{links}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        ns: dict[str, Any] = {"tl": tl, "triton": triton, "__name__": f"rlscope_chain_s{links}"}
        exec(compile(src, filename, "exec"), ns)
        k = _KERNELS[links] = triton.jit(ns[f"_chain_s{links}"])
    return k


# ---------------------------------------------------------------------------------------------
# the env
# ---------------------------------------------------------------------------------------------
class ChainEnv:
    """N chains of S links; ``step(force)`` pushes mass 0, ``rollout`` runs the feedback policy."""

    def __init__(
        self,
        backend: str,
        num_envs: int,
        links: int,
        device: Any,
        seed: int | None,
        steps_per_launch: int,
        block: int,
        num_warps: int,
    ) -> None:
        import torch

        self.backend = backend
        self.num_envs = num_envs
        self.links = links
        self.device = device
        self.steps_per_launch = steps_per_launch
        self.block = block
        self.num_warps = num_warps
        self._seed = seed
        # fused: [2, S, N] (coalesced per link); torch/compiled: [2, N, S] (contiguous rows per env)
        shape = (2, links, num_envs) if backend == "fused" else (2, num_envs, links)
        self.buf = torch.zeros(shape, dtype=torch.float32, device=device)
        # separate (non-aliasing) tensors for torch.compile's in-place step
        self.x = self.buf[0] if backend == "fused" else torch.zeros_like(self.buf[0])
        self.v = self.buf[1] if backend == "fused" else torch.zeros_like(self.buf[1])
        self.rew = torch.zeros(num_envs, dtype=torch.float32, device=device)
        self._reward = torch.zeros(num_envs, dtype=torch.float32, device=device)
        self._force = torch.zeros(num_envs, dtype=torch.float32, device=device)
        self._gain = torch.zeros((), dtype=torch.float32, device=device)
        self._graphs: dict[tuple[str, int], Any] = {}
        self._ready = False

    def reset(self, *, seed: int | None = None) -> tuple[Any, dict]:
        """Every link at a uniform random displacement in [-0.05, 0.05), at rest."""
        import torch

        if seed is None:
            seed, self._seed = self._seed, None
        gen = torch.Generator().manual_seed(seed if seed is not None else int(torch.seed() % 2**63))
        x = (torch.rand(self.num_envs, self.links, generator=gen) - 0.5) * 0.1
        state = torch.stack([x, torch.zeros_like(x)], dim=-1)
        self._ready = True
        self.set_state(state)
        return self.get_state(), {}

    def _require_reset(self) -> None:
        if not self._ready:
            raise SimulatorArgumentError("call reset() before step(), rollout() or get_state()")

    def get_state(self) -> Any:
        """Float32 ``[N, S, 2]`` (position, velocity per link), a copy."""
        import torch

        self._require_reset()
        if self.backend == "fused":
            return self.buf.permute(2, 1, 0).contiguous()
        return torch.stack([self.x, self.v], dim=-1)

    def set_state(self, state: Any) -> None:
        import torch

        self._require_reset()
        s = torch.as_tensor(state)
        if tuple(s.shape) != (self.num_envs, self.links, 2) or not s.dtype.is_floating_point:
            raise SimulatorArgumentError(
                f"state must be float [{self.num_envs}, {self.links}, 2], got {s.dtype} {tuple(s.shape)}"
            )
        s = s.to(device=self.device, dtype=torch.float32)
        if self.backend == "fused":
            self.buf.copy_(s.permute(2, 1, 0))
        else:
            self.x.copy_(s[..., 0])
            self.v.copy_(s[..., 1])

    # -- stepping ---------------------------------------------------------------------------------
    def _torch_call(self, kind: str) -> None:
        x, v = self.x, self.v
        if kind == "step":
            args = (x, v, self.rew, self._force, self._reward)
            fn = _chain_step_inplace
        else:
            args = (x, v, self.rew, self._gain, self._reward)
            fn = _chain_policy_inplace
        (_compiled(kind) if self.backend == "compiled" else fn)(*args)

    def _fused_launch(self, k: int, gain: float) -> None:
        triton = _import_triton()
        grid = (triton.cdiv(self.num_envs, self.block),)
        _chain_kernel(self.links)[grid](
            self.buf, self.rew, self.num_envs, k, gain, BLOCK=self.block, num_warps=self.num_warps
        )

    def _run(self, kind: str, n: int, k: int) -> None:
        if self.backend == "compiled" and self.device.type == "cuda":
            full, rest = divmod(n, k)
            for _ in range(full):
                self._graph(kind, k).replay()
            if rest:
                self._graph(kind, rest).replay()
            return
        for _ in range(n):
            self._torch_call(kind)

    def _graph(self, kind: str, k: int) -> Any:
        """K compiled steps in one CUDA graph (warmed up on the real buffers, which are then restored)."""
        import torch

        g = self._graphs.get((kind, k))
        if g is None:
            bufs = (self.x, self.v, self.rew, self._reward)
            saved = [t.clone() for t in bufs]
            stream = torch.cuda.Stream(self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._torch_call(kind)
            torch.cuda.current_stream(self.device).wait_stream(stream)
            for t, s in zip(bufs, saved, strict=True):
                t.copy_(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(k):
                    self._torch_call(kind)
            self._graphs[(kind, k)] = g
        return g

    def step(self, force: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Push mass 0 of each chain with ``force`` ``[N]``; no episode ends (flags are all False)."""
        import torch

        self._require_reset()
        f = torch.as_tensor(force)
        if tuple(f.shape) != (self.num_envs,) or not f.dtype.is_floating_point:
            raise SimulatorArgumentError(
                f"force must be float [{self.num_envs}], got {f.dtype} {tuple(f.shape)}"
            )
        self._force.copy_(f)
        if self.backend == "fused":
            # the fused kernel implements the feedback policy only; a forced step is the torch step
            x = self.buf.permute(0, 2, 1)
            nx, nv, r = _chain_update(x[0], x[1], self._force)
            self.buf.copy_(torch.stack([nx, nv]).permute(0, 2, 1))
            self._reward.copy_(r)
        else:
            self._run("step", 1, 1)
        flags = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return self.get_state(), self._reward.clone(), flags, flags.clone(), {}

    def rollout(
        self, num_steps: int, gain: float = 1.0, *, steps_per_launch: int | None = None
    ) -> ChainStats:
        """``num_steps`` steps of the feedback policy ``f = -gain * v_0``."""
        import torch

        self._require_reset()
        num_steps = _check_steps(num_steps)
        k = self.steps_per_launch if steps_per_launch is None else _check_steps(steps_per_launch, "K", 1)
        self.rew.zero_()
        if self.backend == "fused":
            left = num_steps
            while left > 0:
                n = min(k, left)
                self._fused_launch(n, float(gain))
                left -= n
        else:
            self._gain.fill_(float(gain))
            self._run("policy", num_steps, k)
        total = float(self.rew.to(torch.float64).sum())
        return ChainStats(total, self.get_state(), self.num_envs, num_steps)
