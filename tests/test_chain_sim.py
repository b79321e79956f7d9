"""The mass-spring chain: torch, compiled and fused against a float64 numpy reference.

Tolerance: displacements are ~0.05 and velocities below ~1; a step is ~10 float32 operations, so its
error is a few float32 ulps of ~1 (<= ~1e-6 absolute). The chain is stable and damped (no chaotic
amplification), so over a rollout the error grows at most linearly: 1e-5 for 200 steps. The fused
kernel runs under Triton's interpreter in a subprocess (TRITON_INTERPRET=1 must precede importing
triton), and on a GPU in ``gpu``-marked tests.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

from rlscope.workloads import chain as ch

STEP_ATOL = 1e-6
ROLLOUT_ATOL = 1e-5


def reference_rollout(state: np.ndarray, steps: int, gain: float) -> tuple[np.ndarray, float]:
    s = state.astype(np.float64)
    total = 0.0
    for _ in range(steps):
        s, r = ch.step_reference(s, -gain * s[:, 0, 1])
        total += float(r.sum())
    return s, total


def _check_backend(
    backend: str, links: int, n: int = 16, device: str = "cpu", k: int = 17
) -> dict[str, float]:
    """Errors of one step and of a 200-step rollout against the float64 reference."""
    env = ch.make_chain(backend, n, links, device=device, seed=links)
    s0, _ = env.reset()
    assert s0.shape == (n, links, 2) and s0.dtype == torch.float32
    f = np.random.default_rng(links).standard_normal(n).astype(np.float32)
    ref, rref = ch.step_reference(s0.cpu().numpy(), f)
    obs, r, te, tr, info = env.step(torch.from_numpy(f))
    assert info == {} and not te.any() and not tr.any()
    out = {
        "step": float(np.abs(obs.cpu().numpy() - ref).max()),
        "step_reward": float(np.abs(r.cpu().numpy() - rref).max()),
    }
    start = env.get_state().cpu().numpy()
    stats = env.rollout(200, gain=2.0, steps_per_launch=k)
    ref_state, ref_total = reference_rollout(start, 200, 2.0)
    out["rollout"] = float(np.abs(stats.final_state.cpu().numpy() - ref_state).max())
    out["rollout_reward_rel"] = abs(stats.total_reward - ref_total) / abs(ref_total)
    return out


def _interpreter_checks() -> dict[str, Any]:
    return {str(s): _check_backend("fused", s) for s in (1, 3, 8)}


_PROC: dict[str, Any] = {}


def setup_module() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    _PROC["p"] = subprocess.Popen(
        [sys.executable, __file__, "--interpreter-checks"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def teardown_module() -> None:
    p = _PROC.get("p")
    if p is not None and p.poll() is None:
        p.kill()


def _assert_close(errs: dict[str, float], what: str) -> None:
    assert errs["step"] <= STEP_ATOL, (what, errs)
    assert errs["step_reward"] <= STEP_ATOL, (what, errs)
    assert errs["rollout"] <= ROLLOUT_ATOL, (what, errs)
    assert errs["rollout_reward_rel"] <= 1e-5, (what, errs)


@pytest.mark.parametrize("links", [1, 2, 7])
def test_torch_matches_reference(links: int) -> None:
    _assert_close(_check_backend("torch", links), f"torch S={links}")


def test_compiled_matches_reference() -> None:
    _assert_close(_check_backend("compiled", 5), "compiled S=5")


def test_fused_interpreter_matches_reference() -> None:
    pytest.importorskip("triton")
    p = _PROC["p"]
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-3000:]
    for s, errs in json.loads(out.strip().splitlines()[-1]).items():
        _assert_close(errs, f"fused S={s}")


def test_fused_kernel_source() -> None:
    src = ch._chain_source(64)
    tree = ast.parse(src)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and fn.name == "_chain_s64"
    assert src.count("tl.load(") == 2 * 64 + 1 and src.count("tl.store(") == 2 * 64 + 1
    # the loop reads each neighbour's old position: link i uses p{i-1}, saved before x{i-1} moved
    assert "a = 50.0 * (p0 - 2.0 * x1 + x2)" in src


def test_state_round_trip_and_layouts() -> None:
    for backend in ("torch",):
        env = ch.make_chain(backend, 3, 4, device="cpu", seed=0)
        env.reset()
        s = torch.arange(24, dtype=torch.float32).reshape(3, 4, 2)
        env.set_state(s)
        assert torch.equal(env.get_state(), s)


def test_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown chain backend"):
        ch.make_chain("gymnasium", 4, 2)
    with pytest.raises(ValueError, match="links"):
        ch.make_chain("torch", 4, 0, device="cpu")
    with pytest.raises(ValueError, match="num_envs"):
        ch.make_chain("torch", 0, 4, device="cpu")
    with pytest.raises(ValueError, match="registers"):
        ch.make_chain("fused", 4, ch.MAX_FUSED_LINKS + 1)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="fused"):
            ch.make_chain("fused", 4, 2)
    env = ch.make_chain("torch", 4, 3, device="cpu")
    with pytest.raises(ValueError, match="reset"):
        env.rollout(1)
    env.reset(seed=1)
    with pytest.raises(ValueError, match="force"):
        env.step(torch.zeros(3))
    with pytest.raises(ValueError, match="force"):
        env.step(torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="state"):
        env.set_state(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="num_steps"):
        env.rollout(-2)


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("backend", ["torch", "compiled", "fused"])
@pytest.mark.parametrize("links", [1, 16, 64])
def test_gpu_matches_reference(backend: str, links: int) -> None:
    _assert_close(_check_backend(backend, links, n=512, device="cuda", k=50), f"{backend} S={links} cuda")


if __name__ == "__main__" and "--interpreter-checks" in sys.argv:
    print(json.dumps(_interpreter_checks()))
