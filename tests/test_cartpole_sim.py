"""CartPole backends against gymnasium's CartPoleVectorEnv, and the benchmark's plumbing.

Tolerance (float32 backends vs gymnasium's float64): both sides start every compared step from the
same float32 state, so only the step's arithmetic differs. A result like ``x + tau*x_dot`` carries its
own float32 rounding (half an ulp: <= 2.4e-7 for |values| < 4), plus tau (0.02) times the float32 error
of the accelerations (~10 operations on values below ~20: <= ~1e-5 absolute, so <= 2e-7 after tau).
That bounds one step's error by ~5e-7; ATOL = 2e-6 leaves a 4x margin and is still far below anything a
wrong formula would produce (a wrong sign or constant moves values by >= 1e-3 within a step). The fused
kernel's fast path (Taylor sin/cos, Newton reciprocal, FMA) stays within the same bound. Flags are
compared exactly except for envs within 1e-5 of a threshold, where float32 may legitimately disagree.

The fused kernel is checked through Triton's interpreter in a subprocess (TRITON_INTERPRET=1 must be set
before triton is imported; a subprocess keeps it from leaking into other tests), and on a GPU by the
``gpu``-marked tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

from rlscope.workloads import cartpole as cp

ATOL = 2e-6
N = 64
ZERO = cp.LinearPolicy(np.zeros((4, 2)), np.zeros(2))  # always pushes left: no policy ties, short episodes


def _near_threshold(state: np.ndarray) -> np.ndarray:
    return (np.abs(np.abs(state[:, 0]) - cp.X_THRESHOLD) < 1e-5) | (
        np.abs(np.abs(state[:, 2]) - cp.THETA_THRESHOLD) < 1e-5
    )


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def compare_with_gymnasium(backend: str, n: int, steps: int, device: Any = "cpu", **opts: Any) -> float:
    """Step ``backend`` and gymnasium from the same float32 states with the same random actions;
    returns the largest observation error on envs that were not resetting."""
    g = cp.make_vec("gymnasium", n)
    e = cp.make_vec(backend, n, device=device, **opts)
    g.reset(seed=1)
    e.reset(seed=2)
    rng = np.random.default_rng(0)
    pending = np.zeros(n, bool)
    worst = 0.0
    for i in range(steps):
        s = g.get_state()
        if i % 7 == 3:  # now and then start from a random state, sometimes beyond the thresholds
            s = (rng.uniform(-1, 1, (n, 4)) * [2.6, 2.0, 0.25, 2.0]).astype(np.float32)
        g.set_state(s)
        e.set_state(torch.from_numpy(s))
        a = rng.integers(0, 2, n)
        og, rg, teg, trg, _ = g.step(a)
        oe, re, tee, tre, info = e.step(torch.from_numpy(a))
        assert info == {}
        oe, re, tee, tre = _np(oe), _np(re), _np(tee), _np(tre)
        assert oe.dtype == np.float32 and oe.shape == (n, 4) and tee.dtype == np.bool_
        live = ~pending
        err = float(np.abs(og[live] - oe[live]).max()) if live.any() else 0.0
        assert err <= ATOL, f"step {i}: max error {err}"
        worst = max(worst, err)
        ok = ~_near_threshold(og)
        np.testing.assert_array_equal(rg, re)
        np.testing.assert_array_equal(teg[ok], tee[ok])
        np.testing.assert_array_equal(trg, tre)
        pending = teg | trg
    return worst


# ---------------------------------------------------------------------------------------------
# the fused kernel through Triton's interpreter, in a subprocess started when this module is set up
# ---------------------------------------------------------------------------------------------
def _interpreter_checks() -> dict[str, Any]:
    """Run in the subprocess (TRITON_INTERPRET=1): returns numbers the parent asserts on."""
    out: dict[str, Any] = {}
    out["step_error"] = compare_with_gymnasium("fused", 32, 24)
    out["step_error_exact"] = compare_with_gymnasium("fused", 32, 8, trig="libdevice")
    # same seed -> bit-identical reset states (the counter-based RNG is shared)
    t = cp.make_vec("torch", N, device="cpu", seed=5)
    f = cp.make_vec("fused", N, device="cpu", seed=5, block=32)
    out["reset_identical"] = bool(torch.equal(t.reset()[0], f.reset()[0]))
    # rollouts with resets: zero policy (no ties), exact and fast physics; random policy, exact physics
    for name, pol, trig in (
        ("zero_poly", ZERO, "poly"),
        ("random_exact", cp.LinearPolicy.random(3), "libdevice"),
        ("mlp_exact", cp.MLPPolicy.random(8, seed=1), "libdevice"),
    ):
        t = cp.make_vec("torch", N, device="cpu", seed=7)
        f = cp.make_vec("fused", N, device="cpu", seed=7, trig=trig, block=32)
        t.reset()
        f.reset()
        rows = []
        for k in (1, 37):
            st, sf = t.rollout(75, pol), f.rollout(75, pol, steps_per_launch=k)
            dstate = float((st.final_state - sf.final_state).abs().max())
            rows.append([st.episodes, sf.episodes, st.total_reward, sf.total_reward])
            rows[-1] += [st.finished_return, sf.finished_return, dstate]
        out[name] = rows
    # the autoreset RNG draws the same states as torch after resets inside the kernel
    t = cp.make_vec("torch", N, device="cpu", seed=9)
    f = cp.make_vec("fused", N, device="cpu", seed=9)
    t.reset()
    f.reset()
    far = torch.tensor([[3.0, 0.0, 0.0, 0.0]]).repeat(N, 1)  # beyond the cart threshold: terminates
    t.set_state(far)
    f.set_state(far)
    t.rollout(2, ZERO)
    f.rollout(2, ZERO, steps_per_launch=2)
    out["autoreset_identical"] = bool(torch.equal(t.get_state(), f.get_state()))
    # truncation at 500 inside one launch: the balancing policy keeps every pole up
    f = cp.make_vec("fused", 32, device="cpu", seed=3)
    f.reset()
    s500 = f.rollout(500, cp.LinearPolicy.balancing(), steps_per_launch=500)
    s1 = f.rollout(1, cp.LinearPolicy.balancing())
    out["trunc"] = [s500.episodes, s500.total_reward, s500.finished_return, s1.episodes, s1.total_reward,
                    int(f.steps.max()), int(f.done.sum())]  # fmt: skip
    # step(): truncation flag and next-step autoreset
    f = cp.make_vec("fused", 8, device="cpu", seed=3)
    f.reset()
    f.steps.fill_(499)
    f.set_state(torch.zeros(8, 4))
    a = torch.ones(8, dtype=torch.int64)
    _, r1, te1, tr1, _ = f.step(a)
    o2, r2, te2, tr2, _ = f.step(a)
    out["step_trunc"] = [r1.tolist(), te1.tolist(), tr1.tolist(), r2.tolist(), te2.tolist(), tr2.tolist(),
                         float(o2.abs().max()), int(f.steps.max())]  # fmt: skip
    return out


_PROC: dict[str, Any] = {}


def setup_module() -> None:
    """Start the interpreter subprocess early so it overlaps the tests that compile."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    _PROC["p"] = subprocess.Popen(
        [sys.executable, __file__, "--interpreter-checks"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def teardown_module() -> None:
    p = _PROC.get("p")
    if p is not None and p.poll() is None:
        p.kill()


@pytest.fixture(scope="module")
def interp() -> dict[str, Any]:
    pytest.importorskip("triton")
    p = _PROC["p"]
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_fused_interpreter_matches_gymnasium(interp: dict[str, Any]) -> None:
    assert interp["step_error"] <= ATOL
    assert interp["step_error_exact"] <= ATOL


def test_fused_interpreter_resets_and_rollouts(interp: dict[str, Any]) -> None:
    assert interp["reset_identical"]
    assert interp["autoreset_identical"]
    for name in ("zero_poly", "random_exact", "mlp_exact"):
        for ep_t, ep_f, rw_t, rw_f, fin_t, fin_f, dstate in interp[name]:
            assert ep_t > 0, name  # resets happened
            assert (ep_t, rw_t, fin_t) == (ep_f, rw_f, fin_f), name
            assert dstate < 1e-4, name


def test_fused_interpreter_truncation(interp: dict[str, Any]) -> None:
    ep, total, fin, ep1, total1, max_steps, n_done = interp["trunc"]
    # 32 envs all truncated at step 500; the next step is their reset step (reward 0)
    assert (ep, total, fin, ep1, total1, max_steps, n_done) == (32, 32 * 500, 32 * 500, 0, 0, 0, 0)
    r1, te1, tr1, r2, te2, tr2, obs2, steps = interp["step_trunc"]
    assert r1 == [1.0] * 8 and te1 == [False] * 8 and tr1 == [True] * 8
    assert r2 == [0.0] * 8 and te2 == [False] * 8 and tr2 == [False] * 8
    assert obs2 <= 0.05 and steps == 0


# ---------------------------------------------------------------------------------------------
# torch (eager) on the CPU
# ---------------------------------------------------------------------------------------------
def test_torch_matches_gymnasium_step_for_step() -> None:
    assert compare_with_gymnasium("torch", 256, 120) <= ATOL


def test_autoreset_semantics_match_gymnasium() -> None:
    g, t = cp.make_vec("gymnasium", 4), cp.make_vec("torch", 4, device="cpu")
    g.reset(seed=0)
    t.reset(seed=0)
    s = np.array(
        [[2.39, 1.0, 0.0, 0.0], [0.0, 0.0, 0.2, 1.0], [0.0, 0.0, 0.0, 0.0], [-2.39, -1.0, 0, 0]], np.float32
    )
    g.set_state(s)
    t.set_state(torch.from_numpy(s))
    a = np.array([1, 1, 0, 0])
    outs = []
    for _ in range(3):
        outs.append((g.step(a), t.step(torch.from_numpy(a))))
    (g1, t1), (g2, t2), (g3, t3) = outs
    # step 1: envs 0, 1, 3 terminate (reward 1, flags set, terminal observation returned)
    np.testing.assert_array_equal(g1[2], [True, True, False, True])
    for i in (1, 2, 3):
        np.testing.assert_array_equal(g1[i], _np(t1[i]))
    np.testing.assert_allclose(g1[0], _np(t1[0]), atol=ATOL)
    # step 2: those envs are reset whatever the action: reward 0, both flags False, |obs| <= 0.05
    for gi, ti in ((g2, t2),):
        np.testing.assert_array_equal(gi[1], [0.0, 0.0, 1.0, 0.0])
        np.testing.assert_array_equal(_np(ti[1]), [0.0, 0.0, 1.0, 0.0])
        assert not _np(ti[2]).any() and not _np(ti[3]).any() and not gi[2].any()
        assert np.abs(_np(ti[0])[[0, 1, 3]]).max() <= 0.05
    # step 3: the new episodes pay reward again
    np.testing.assert_array_equal(g3[1], _np(t3[1]))


def test_truncation_at_500() -> None:
    for backend in ("gymnasium", "torch"):
        e = cp.make_vec(backend, 3, device=None if backend == "gymnasium" else "cpu", seed=0)
        e.reset()
        zero = np.zeros((3, 4), np.float32)
        for i in range(1, 502):
            e.set_state(zero if backend == "gymnasium" else torch.from_numpy(zero))  # never falls
            _, r, te, tr, _ = e.step(
                np.array([0, 1, 0]) if backend == "gymnasium" else torch.tensor([0, 1, 0])
            )
            r, te, tr = _np(r), _np(te), _np(tr)
            assert not te.any()
            assert tr.all() == (i == 500) and tr.any() == (i == 500), (backend, i)
            assert (r == (0.0 if i == 501 else 1.0)).all(), (backend, i)


def test_reset_states_are_uniform() -> None:
    n = 20000
    e = cp.make_vec("torch", n, device="cpu", seed=123)
    s = _np(e.reset()[0]).astype(np.float64)
    assert s.min() >= -0.05 and s.max() < 0.05
    sd = 0.1 / np.sqrt(12)
    assert np.abs(s.mean(0)).max() < 4 * sd / np.sqrt(n)
    assert np.abs(s.std(0) / sd - 1).max() < 0.03
    corr = np.corrcoef(s.T) - np.eye(4)
    assert np.abs(corr).max() < 0.05
    # Kolmogorov-Smirnov distance to U(-0.05, 0.05) of each component (critical value at alpha=1e-3)
    grid = np.sort(s, axis=0)
    cdf = (grid + 0.05) / 0.1
    ks = np.max(np.abs(cdf - (np.arange(1, n + 1) / n)[:, None]))
    assert ks < 1.95 / np.sqrt(n)
    # the autoreset stream: consecutive draws of one env are as uniform and uncorrelated
    base = cp.rng_base_torch(1, cp.seed_key(5), "cpu").repeat(n)
    draws = _np(cp.reset_noise_torch(base, torch.arange(n, dtype=torch.int32))).T.astype(np.float64)
    assert np.abs(draws.mean(0)).max() < 4 * sd / np.sqrt(n)
    assert abs(np.corrcoef(draws[:-1, 0], draws[1:, 0])[0, 1]) < 0.05
    # reseeding reproduces, a new seed differs, no seed continues the stream
    e2 = cp.make_vec("torch", n, device="cpu")
    np.testing.assert_array_equal(_np(e2.reset(seed=123)[0]), s.astype(np.float32))
    assert not np.array_equal(_np(e2.reset(seed=124)[0]), s.astype(np.float32))
    assert not np.array_equal(_np(e2.reset()[0]), _np(e2.reset()[0]))


def test_rollout_statistics_match_gymnasium_and_step() -> None:
    n = 128
    g, t = cp.make_vec("gymnasium", n), cp.make_vec("torch", n, device="cpu")
    g.reset(seed=4)
    t.reset(seed=4)
    t.set_state(torch.from_numpy(g.get_state()))
    g.set_state(g.get_state())
    # balancing policy, 60 steps: nobody falls; bang-bang control near the switching line can flip an
    # action between float32 and float64 (then that env drifts apart), so most, not all, states agree
    sg, st = g.rollout(60, cp.LinearPolicy.balancing()), t.rollout(60, cp.LinearPolicy.balancing())
    assert (sg.episodes, sg.total_reward, sg.finished_return) == (0, 60.0 * n, 0.0)
    assert (st.episodes, st.total_reward, st.finished_return) == (0, 60.0 * n, 0.0)
    close = np.abs(sg.final_state - _np(st.final_state)).max(1) < 1e-4
    assert close.mean() > 0.8
    # zero policy (no ties): terminations agree until the first resets, whose states differ by RNG
    g.reset(seed=4)
    t.set_state(torch.from_numpy(g.get_state()))
    t.done.zero_()
    t.steps.zero_()
    sg, st = g.rollout(8, ZERO), t.rollout(8, ZERO)
    assert sg.episodes > 0
    assert (sg.episodes, sg.total_reward, sg.finished_return) == (
        st.episodes,
        st.total_reward,
        st.finished_return,
    )
    np.testing.assert_allclose(sg.final_state, _np(st.final_state), atol=1e-5)
    # rollout's statistics are the sums of what step() returns
    a, b = cp.make_vec("torch", n, device="cpu", seed=8), cp.make_vec("torch", n, device="cpu", seed=8)
    a.reset()
    obs, _ = b.reset()
    pol = cp.LinearPolicy.random(1)
    sa = a.rollout(90, pol)
    eps, total = 0, 0.0
    for _ in range(90):
        act = torch.from_numpy(cp._policy_actions_np(pol, _np(obs)))
        obs, r, te, tr, _ = b.step(act)
        eps += int((te | tr).sum())
        total += float(r.sum())
    assert sa.episodes > 0 and (sa.episodes, sa.total_reward) == (eps, total)
    assert torch.equal(sa.final_state, obs)


def test_mlp_policy_rollout_torch_vs_gymnasium() -> None:
    pol = cp.MLPPolicy.random(8, seed=2)
    g, t = cp.make_vec("gymnasium", 32), cp.make_vec("torch", 32, device="cpu")
    g.reset(seed=0)
    t.reset(seed=0)
    t.set_state(torch.from_numpy(g.get_state()))
    g.set_state(g.get_state())
    sg, st = g.rollout(5, pol), t.rollout(5, pol)
    assert (sg.episodes, sg.total_reward) == (st.episodes, st.total_reward)


# ---------------------------------------------------------------------------------------------
# compiled (torch.compile) on the CPU: one compile for the whole file
# ---------------------------------------------------------------------------------------------
def test_compiled_matches_gymnasium_and_torch() -> None:
    assert compare_with_gymnasium("compiled", N, 20) <= ATOL
    t = cp.make_vec("torch", N, device="cpu", seed=11)
    c = cp.make_vec("compiled", N, device="cpu", seed=11)
    assert torch.equal(t.reset()[0], c.reset()[0])
    st, sc = t.rollout(60, ZERO), c.rollout(60, ZERO)
    assert st.episodes > 0
    assert (st.episodes, st.total_reward, st.finished_return) == (
        sc.episodes,
        sc.total_reward,
        sc.finished_return,
    )
    assert float((st.final_state - sc.final_state).abs().max()) < 1e-4


# ---------------------------------------------------------------------------------------------
# bad arguments
# ---------------------------------------------------------------------------------------------
def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> None:
    assert "\n" not in str(exc.value) and str(exc.value)


def test_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown backend") as e:
        cp.make_vec("jax", 4)
    _one_line(e)
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(ValueError, match="num_envs") as e:
            cp.make_vec("torch", bad, device="cpu")  # type: ignore[arg-type]
        _one_line(e)
    with pytest.raises(ValueError, match="seed"):
        cp.make_vec("torch", 4, device="cpu", seed=-1)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="fused") as e:
            cp.make_vec("fused", 4)
        _one_line(e)
        with pytest.raises(RuntimeError, match="CUDA") as e:
            cp.make_vec("torch", 4, device="cuda")
        _one_line(e)
    with pytest.raises(RuntimeError, match="fused"):
        cp.make_vec("fused", 4, device="cpu")
    for backend in ("torch", "gymnasium"):
        env = cp.make_vec(backend, 4, device="cpu" if backend == "torch" else None)
        with pytest.raises(ValueError, match="reset"):
            env.step(np.zeros(4, np.int64))
        env.reset(seed=0)
        for bad_actions, what in (
            (np.zeros(3, np.int64), "shape"),
            (np.zeros((4, 1), np.int64), "shape"),
            (np.zeros(4, np.float32), "integers"),
            (torch.zeros(4), "integers"),
        ):
            with pytest.raises(ValueError, match=what) as e:
                env.step(bad_actions)
            _one_line(e)
        with pytest.raises(ValueError, match="shape"):
            env.set_state(np.zeros((4, 3), np.float32))
        with pytest.raises(ValueError, match="LinearPolicy"):
            env.rollout(3, cp.LinearPolicy(np.zeros((4, 3)), np.zeros(2)))
        with pytest.raises(ValueError, match="policy"):
            env.rollout(3, "greedy")
        with pytest.raises(ValueError, match="num_steps"):
            env.rollout(-1, cp.LinearPolicy.balancing())
    g = cp.make_vec("gymnasium", 2)
    g.reset(seed=0)
    with pytest.raises(ValueError, match="push left"):
        g.step(np.array([0, 2]))


def test_import_is_lazy() -> None:
    code = (
        "import sys, rlscope, rlscope.workloads.cartpole, rlscope.workloads.chain,"
        " rlscope.workloads.sim_benchmark, rlscope.viz.sim_report\n"
        "bad = [m for m in ('triton', 'gymnasium', 'jax', 'plotly', 'rich') if m in sys.modules]\n"
        "print(bad)\nsys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------------------------------------
# the benchmark's plumbing (tiny, CPU): rows, speedups, targets, traces, table and HTML
# ---------------------------------------------------------------------------------------------
def test_benchmark_smoke(tmp_path: Any) -> None:
    from rich.console import Console

    from rlscope.viz.sim_report import render_table, write_html
    from rlscope.workloads import sim_benchmark as sb

    res = sb.run_benchmark(
        quick=True, device="cpu", max_log2_n=4, ks=[1], out_json=str(tmp_path / "r.json"), profile=True,
        budget=0.02, backends=("gymnasium", "torch"), chain_links=[1, 2], gymnax=False,
        trace_dir=str(tmp_path / "traces"),
    )  # fmt: skip
    backends = {r["backend"] for r in res["cartpole"]}
    assert backends == {"gymnasium-1", "gymnasium", "torch"}
    assert all(r["steps_per_sec"] > 0 for r in res["cartpole"])
    vec = [r for r in res["cartpole"] if r["backend"] == "gymnasium"]
    assert all(r["speedup_vs_gymnasium_vector"] == pytest.approx(1.0) for r in vec)
    assert {t["target"] for t in res["targets"]} and all("met" in t for t in res["targets"])
    assert set(res["traces"]) == {"gymnasium", "torch"}
    assert all(os.path.isdir(p) for p in res["traces"].values())
    assert json.loads((tmp_path / "r.json").read_text())["meta"]["quick"] is True
    console = Console(record=True, width=140)
    render_table(res, console)
    assert "gymnasium" in console.export_text()
    html = write_html(res, tmp_path / "r.html")
    assert "plotly" in html.read_text()


def test_hot_loop_counter() -> None:
    from rlscope.workloads.sim_benchmark import count_hot_loop_instructions

    sass = """
    /*0000*/ MOV R1, R2 ;
.L_x_1:
    /*0010*/ FFMA R1, R2, R3, R4 ;
    /*0020*/ REDUX.MAX.S32 UR4, R0 ;
    /*0030*/ @!P0 BRA `(.L_x_2) ;
    /*0040*/ LOP3.LUT R5, R5, R6, RZ, 0x3c, !PT ;
    /*0050*/ LOP3.LUT R5, R5, R6, RZ, 0x3c, !PT ;
.L_x_2:
    /*0060*/ VIADD R7, R7, 0x1 ;
    /*0070*/ @P1 BRA `(.L_x_1) ;
    /*0080*/ EXIT ;
"""
    assert count_hot_loop_instructions(sass) == 5  # FFMA, REDUX, BRA, VIADD, BRA


# ---------------------------------------------------------------------------------------------
# GPU (skipped without CUDA)
# ---------------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("backend", ["torch", "compiled", "fused"])
def test_gpu_matches_gymnasium(backend: str) -> None:
    assert compare_with_gymnasium(backend, 1024, 40 if backend == "compiled" else 150, device="cuda") <= ATOL


@pytest.mark.gpu
@gpu
def test_gpu_fused_exact_path_matches_gymnasium() -> None:
    assert compare_with_gymnasium("fused", 1024, 60, device="cuda", trig="libdevice") <= ATOL


@pytest.mark.gpu
@gpu
def test_gpu_rollouts_agree() -> None:
    n = 4096
    envs = {b: cp.make_vec(b, n, device="cuda", seed=21) for b in ("torch", "compiled", "fused")}
    first = [e.reset()[0] for e in envs.values()]
    assert all(torch.equal(first[0], f) for f in first[1:])
    stats = {b: e.rollout(300, ZERO, steps_per_launch=64) for b, e in envs.items()}
    ref = stats["torch"]
    assert ref.episodes > 0
    for s in stats.values():
        assert abs(s.episodes - ref.episodes) <= 0.01 * ref.episodes
        assert abs(s.total_reward - ref.total_reward) <= 0.01 * ref.total_reward
    # balancing policy, 500 steps per launch: everyone truncated at 500, then reset
    for b in ("compiled", "fused"):
        e = envs[b]
        e.reset(seed=1)
        s = e.rollout(501, cp.LinearPolicy.balancing(), steps_per_launch=500)
        assert (s.episodes, s.total_reward, s.finished_return) == (n, 500.0 * n, 500.0 * n), b
        assert float(e.get_state().abs().max()) <= 0.05, b


@pytest.mark.gpu
@gpu
def test_gpu_autoreset_and_truncation() -> None:
    for backend in ("torch", "compiled", "fused"):
        e = cp.make_vec(backend, 8, device="cuda", seed=0)
        t = cp.make_vec("torch", 8, device="cuda", seed=0)
        e.reset()
        t.reset()
        e.steps.fill_(499)
        zero = torch.zeros(8, 4, device="cuda")
        e.set_state(zero)
        a = torch.ones(8, dtype=torch.int64, device="cuda")
        _, r1, te1, tr1, _ = e.step(a)
        o2, r2, te2, tr2, _ = e.step(a)
        assert r1.tolist() == [1.0] * 8 and tr1.all() and not te1.any(), backend
        assert r2.tolist() == [0.0] * 8 and not tr2.any() and not te2.any(), backend
        # the reset states are the counter-based RNG's: identical to torch's second draw
        torch.testing.assert_close(
            o2, cp.reset_noise_torch(t.base, torch.ones_like(t.resets)).T, rtol=0, atol=0
        )


@pytest.mark.gpu
@gpu
def test_gpu_fused_mlp_policy() -> None:
    pol = cp.MLPPolicy.random(8, seed=3)
    t, f = (
        cp.make_vec("torch", 2048, device="cuda", seed=2),
        cp.make_vec("fused", 2048, device="cuda", seed=2),
    )
    t.reset()
    f.reset()
    st, sf = t.rollout(200, pol), f.rollout(200, pol, steps_per_launch=50)
    assert st.episodes > 0
    assert abs(st.episodes - sf.episodes) <= 0.02 * st.episodes


if __name__ == "__main__" and "--interpreter-checks" in sys.argv:
    print(json.dumps(_interpreter_checks()))
