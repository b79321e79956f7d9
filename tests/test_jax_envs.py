"""gymnax and Brax environments are simulation: a named scope on their kernels inside jitted code, the
operation when called eagerly. Stand-in packages with the libraries' module paths and class shapes
(jax's CPU build)."""

from __future__ import annotations

import sys
import textwrap

import pytest

import rlscope
from rlscope.trace.reader import load_trace, name_of

jax = pytest.importorskip("jax")

GYMNAX = """
import jax.numpy as jnp

class Environment:
    def step(self, key, state, action, params=None):
        return self.step_env(key, state, action, params)

    def reset(self, key, params=None):
        return self.reset_env(key, params)
"""
GYMNAX_ENV = """
import jax.numpy as jnp
from gymnax.environments.environment import Environment

class CartPole(Environment):
    def step_env(self, key, state, action, params):
        return jnp.sin(state) * 2.0 + action

    def reset_env(self, key, params):
        return jnp.zeros(4)
"""
BRAX = """
class Env:
    def step(self, state, action):
        raise NotImplementedError

class Wrapper(Env):
    def __init__(self, env):
        self.env = env

    def step(self, state, action):
        return self.env.step(state, action) + 1.0
"""
BRAX_ENV = """
import jax.numpy as jnp
from brax.envs.base import Env

class Ant(Env):
    def step(self, state, action):
        return jnp.cos(state) * 3.0 + action

    def reset(self, rng):
        return jnp.ones(4)
"""


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    files = {
        "gymnax/__init__.py": "",
        "gymnax/environments/__init__.py": "",
        "gymnax/environments/environment.py": GYMNAX,
        "gymnax/environments/cartpole.py": GYMNAX_ENV,
        "brax/__init__.py": "",
        "brax/envs/__init__.py": "",
        "brax/envs/base.py": BRAX,
        "brax/envs/ant.py": BRAX_ENV,
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in list(sys.modules):
        if name.split(".")[0] in ("gymnax", "brax"):
            del sys.modules[name]


def _scopes(trace_dir, module: str) -> set[str]:
    proc = load_trace(trace_dir).processes[0]
    rows = proc.hlo.to_pylist()
    return {
        name_of(proc.names, r["path"], "")
        for r in rows
        if name_of(proc.names, r["module"], "") == module and r["path"] >= 0
    }


def test_gymnax_and_brax_steps_carry_the_simulation_scope_in_jitted_code(tmp_path, stand_ins):
    jnp = jax.numpy
    with rlscope.profile(tmp_path / "t", gpu=False, backend=False, auto_ops=True) as sess:
        from brax.envs.ant import Ant
        from brax.envs.base import Wrapper
        from gymnax.environments.cartpole import CartPole

        gym_env, brax_env = CartPole(), Wrapper(Ant())

        @jax.jit
        def rollout(state):
            with jax.named_scope("inference"):
                action = jnp.tanh(state).sum()
            state = gym_env.step(None, state, action)
            return brax_env.step(state, action)

        rollout(jnp.ones(4)).block_until_ready()
        gym_env.reset(None)  # eagerly: the operation
        brax_env.env.reset(None)
    assert _scopes(sess.trace_dir, "jit_rollout") >= {"inference", "simulation"}
    from tests.conftest import summary_of

    ops = summary_of(sess.trace_dir)["operations"]
    assert ops["simulation"]["calls"] == 2  # the two eager resets; the traced steps are not CPU calls
    assert "inference" not in ops  # a named scope inside jitted code is no CPU operation


def test_without_automatic_operations_nothing_changes(tmp_path, stand_ins):
    with rlscope.profile(tmp_path / "t", gpu=False, backend=False, auto_ops=False) as sess:
        from gymnax.environments.cartpole import CartPole

        env = CartPole()

        def step(s):
            with jax.named_scope("inference"):
                return env.step(None, s, 1.0)

        jax.jit(step)(jax.numpy.ones(4)).block_until_ready()
    assert _scopes(sess.trace_dir, "jit_step") == {"inference"}  # recorded, and no simulation scope
