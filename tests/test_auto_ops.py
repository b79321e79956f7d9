"""Automatic operations (rlscope/runtime/auto_ops.py) against ground truth on a fake clock.

Fake modules, envs and optimizers advance the clock by known amounts inside the blocks the
operations are defined by; the raw analysis must give exactly those times.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.runtime import auto_ops
from rlscope.trace import schema as S
from tests.conftest import FakeClock

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

FWD = 7_000  # a module's forward
BEFORE = 500  # in a no_grad block before its first module call (left out of inference)
SAMPLE = 2_000  # in the block after the forward: action sampling (inside inference)
STEP_ENV = 11_000  # an env step
GLUE = 3_000  # the loop's own code between the blocks (unannotated)
LOSS = 4_000  # loss and backward between the forward and the optimizer step
OPT = 5_000  # inside optimizer.step


class ClockNet(torch.nn.Module):
    """A forward that takes FWD ns of the fake clock (a submodule call inside: nesting)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.lin = torch.nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.advance(FWD)
        return self.lin(x)


class ClockEnv(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def step(self, action):
        self.clock.advance(STEP_ENV)
        return self.observation_space.sample(), 1.0, False, False, {}

    def reset(self, *, seed=None, options=None):
        self.clock.advance(STEP_ENV)
        return self.observation_space.sample(), {}


def _optimizer(params, clock: FakeClock) -> torch.optim.Optimizer:
    class ClockSGD(torch.optim.SGD):
        def step(self, closure=None):
            clock.advance(OPT)
            return super().step(closure)

    return ClockSGD(params, lr=0.01)


def _session(tmp_path, **options):
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, windows=False, **options)
    sess.clock = clock
    return sess, clock


def _ops(sess) -> dict:
    return analyze(sess.trace_dir, correct=False).summary["operations"]


def _loop(clock: FakeClock, iters: int, updates: int, user_scope: str | None = None) -> None:
    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    env = rlscope.wrap_env(ClockEnv(clock))
    env.reset()
    x = torch.ones(2)
    for _ in range(iters):
        with torch.no_grad():
            clock.advance(BEFORE)
            net(x)
            clock.advance(SAMPLE)
        clock.advance(GLUE)
        env.step(0)
        clock.advance(GLUE)
    for _ in range(updates):
        loss = net(x).sum()
        clock.advance(LOSS)
        opt.zero_grad()
        loss.backward()
        if user_scope:
            with rlscope.scope(user_scope):
                opt.step()
        else:
            opt.step()
        clock.advance(GLUE)


def test_operations_match_the_known_times(tmp_path):
    sess, clock = _session(tmp_path, auto_ops=True)
    iters, updates = 20, 6
    with sess:
        _loop(clock, iters, updates)
    ops = _ops(sess)
    inf, sim, bp = ops["inference"], ops["simulation"], ops["backprop"]
    assert inf["calls"] == iters and inf["auto"]
    assert inf["total_s"] == pytest.approx(iters * (FWD + SAMPLE) * 1e-9, rel=1e-9)
    assert sim["calls"] == iters + 1  # and the reset
    assert sim["total_s"] == pytest.approx((iters + 1) * STEP_ENV * 1e-9, rel=1e-9)
    assert bp["calls"] == updates
    assert bp["total_s"] == pytest.approx(updates * (FWD + LOSS + OPT) * 1e-9, rel=1e-9)
    assert set(ops) == {"inference", "simulation", "backprop"} and all(o["auto"] for o in ops.values())


def test_off_by_default_in_profile(tmp_path):
    sess, clock = _session(tmp_path)
    with sess:
        _loop(clock, 3, 2)
    assert _ops(sess) == {}
    assert not hasattr(torch.no_grad.__enter__, "_rlscope_auto")


def test_hooks_come_off_at_stop(tmp_path):
    from torch.optim import optimizer

    call, hooks = torch.nn.Module.__call__, len(optimizer._global_optimizer_post_hooks)
    sess, clock = _session(tmp_path, auto_ops=True)
    with sess:
        _loop(clock, 1, 1)
        assert getattr(torch.no_grad.__enter__, "_rlscope_auto", False)
        assert torch.nn.Module.__call__ is not call
    assert torch.nn.Module.__call__ is call
    assert len(optimizer._global_optimizer_post_hooks) == hooks
    assert not getattr(torch.no_grad.__enter__, "_rlscope_auto", False)
    assert not getattr(torch.inference_mode.__exit__, "_rlscope_auto", False)


def test_a_user_scope_is_never_split(tmp_path):
    """backprop opened before the user's scope ends inside it: it waits for the scope to close."""
    sess, clock = _session(tmp_path, auto_ops=True)
    updates = 5
    with sess:
        _loop(clock, 0, updates, user_scope="optimizer")
        rlscope.wrap_env(ClockEnv(clock)).reset()  # the next automatic boundary
    ops = _ops(sess)
    user = ops["optimizer"]
    assert user["calls"] == updates and not user["auto"]
    assert user["total_s"] == pytest.approx(updates * OPT * 1e-9, rel=1e-9)
    bp = ops["backprop"]
    assert bp["calls"] == updates
    # it closes at the next automatic boundary after the user's scope: the next forward, or the reset
    assert bp["total_s"] == pytest.approx(updates * (FWD + LOSS + OPT + GLUE) * 1e-9, rel=1e-9)


def test_automatic_operations_nest_under_a_user_scope(tmp_path):
    sess, clock = _session(tmp_path, auto_ops=True)
    with sess, rlscope.scope("train"):
        _loop(clock, 4, 3)
    ops = _ops(sess)
    assert ops["inference"]["total_s"] == pytest.approx(4 * (FWD + SAMPLE) * 1e-9, rel=1e-9)
    assert ops["backprop"]["total_s"] == pytest.approx(3 * (FWD + LOSS + OPT) * 1e-9, rel=1e-9)
    assert ops["train"]["calls"] == 1


def test_a_user_scope_closing_first_ends_the_automatic_one(tmp_path):
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    with sess:
        for _ in range(3):
            with rlscope.scope("forward"):
                loss = net(torch.ones(2)).sum()
            clock.advance(LOSS)
            loss.backward()
            opt.step()
    ops = _ops(sess)
    assert ops["forward"]["total_s"] == pytest.approx(3 * FWD * 1e-9, rel=1e-9)
    assert ops["backprop"]["total_s"] == pytest.approx(3 * FWD * 1e-9, rel=1e-9)


def test_autograd_off_globally_each_outermost_call(tmp_path):
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    with sess:
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        try:
            for _ in range(4):
                net(torch.ones(2))
                clock.advance(GLUE)
        finally:
            torch.set_grad_enabled(prev)
    inf = _ops(sess)["inference"]
    assert inf["calls"] == 4 and inf["total_s"] == pytest.approx(4 * FWD * 1e-9, rel=1e-9)


def test_blocks_without_a_module_call_and_blocks_inside_an_update(tmp_path):
    """A no_grad block with no module call (a target-network soft update) is no inference; one
    inside an update (PPO's approx-KL) belongs to the update; inference_mode counts like no_grad."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    with sess:
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(0.5)
            clock.advance(GLUE)
        loss = net(torch.ones(2)).sum()
        with torch.no_grad():
            net(torch.ones(2))  # inside the update
        clock.advance(LOSS)
        loss.backward()
        opt.step()
        with torch.inference_mode():
            net(torch.ones(2))
            clock.advance(SAMPLE)
    ops = _ops(sess)
    assert ops["backprop"]["total_s"] == pytest.approx((2 * FWD + LOSS + OPT) * 1e-9, rel=1e-9)
    assert ops["inference"]["calls"] == 1
    assert ops["inference"]["total_s"] == pytest.approx((FWD + SAMPLE) * 1e-9, rel=1e-9)


class SlowNet(ClockNet):
    """A forward of 200 us: a trail of TRAIL_MIN_NS after it is under TRAIL_FACTOR times its span."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.advance(200_000 - FWD)
        return super().forward(x)


def test_a_long_trail_after_the_last_module_call_is_not_inference(tmp_path):
    """CleanRL's bootstrap value: one small critic call, then its advantage loop in the same no_grad
    block. The call stays inference, the loop goes to [unannotated]; a short trail (sampling) and
    one that is long but under TRAIL_FACTOR times its calls' span stay in."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net, slow, x = ClockNet(clock), SlowNet(clock), torch.ones(2)
    trail = auto_ops.TRAIL_MIN_NS + 1_000
    reps = 3
    with sess:
        for _ in range(reps):
            with torch.no_grad():  # acting: sampling after the forward
                net(x)
                clock.advance(SAMPLE)
            clock.advance(GLUE)
            with torch.no_grad():  # the bootstrap value, then the advantages
                net(x)
                clock.advance(trail)
            clock.advance(GLUE)
            with torch.no_grad():  # a long forward, then a trail under 20 times it
                slow(x)
                clock.advance(trail)
            clock.advance(GLUE)
    result = analyze(sess.trace_dir, correct=False).summary
    inf = result["operations"]["inference"]
    assert inf["calls"] == 3 * reps
    assert inf["total_s"] == pytest.approx(reps * (FWD + SAMPLE + FWD + 200_000 + trail) * 1e-9, rel=1e-9)
    assert result["unannotated_s"] == pytest.approx(reps * (trail + 3 * GLUE) * 1e-9, rel=1e-9)


def test_an_operation_ended_at_its_last_call_closes_its_nvtx_range(tmp_path):
    """With NVTX ranges on (the ``nvtx`` option), an inference cut at its last call makes the same NVTX
    calls as one that ends with its block."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net, x = ClockNet(clock), torch.ones(2)
    calls: list[str] = []
    with sess:
        if sess._lean is None:
            pytest.skip("the native scope path is not bound")
        with rlscope.scope("warm"):  # the start-up phase ends here, before the ranges are on
            pass

        def push(name: str) -> None:
            calls.append(f"push {name}")

        def pop() -> None:
            calls.append("pop")

        sess.nvtx_push, sess.nvtx_pop = push, pop
        sess._lean.set_nvtx(push, pop)
        for trail in (SAMPLE, auto_ops.TRAIL_MIN_NS + 1_000):  # ends with its block; cut at its call
            with torch.no_grad():
                net(x)
                clock.advance(trail)
            calls.append("block ended")
        sess._lean.set_nvtx(None, None)
        sess.nvtx_push = sess.nvtx_pop = None
    once = ["pop", "push inference", "pop", "block ended"]
    assert calls == once + once
    assert _ops(sess)["inference"]["total_s"] == pytest.approx((FWD + SAMPLE + FWD) * 1e-9, rel=1e-9)


def test_an_env_step_ends_acting_with_autograd_on(tmp_path):
    """Actions chosen with autograd on open backprop; the env step ends it (never inside it)."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    env = rlscope.wrap_env(ClockEnv(clock))
    with sess:
        for _ in range(3):
            net(torch.ones(2))
            clock.advance(GLUE)
            env.step(0)
    ops = _ops(sess)
    assert ops["simulation"]["total_s"] == pytest.approx(3 * STEP_ENV * 1e-9, rel=1e-9)
    assert ops["backprop"]["total_s"] == pytest.approx(3 * (FWD + GLUE) * 1e-9, rel=1e-9)


def test_an_env_step_inside_a_no_grad_block_splits_inference(tmp_path):
    """An evaluation loop inside one no_grad block: inference per policy call, simulation apart."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    env = rlscope.wrap_env(ClockEnv(clock))
    with sess, torch.no_grad():
        for _ in range(3):
            net(torch.ones(2))
            clock.advance(SAMPLE)
            env.step(0)
    ops = _ops(sess)
    assert ops["inference"]["calls"] == 3
    assert ops["inference"]["total_s"] == pytest.approx(3 * (FWD + SAMPLE) * 1e-9, rel=1e-9)
    assert ops["simulation"]["exclusive_s"] == pytest.approx(3 * STEP_ENV * 1e-9, rel=1e-9)


def test_a_user_scope_and_the_automatic_one_of_its_name_are_one_operation(tmp_path):
    """A user's ``inference`` and an automatic one apart in time: one entry, its calls and time both's,
    ``auto`` false (not every instance was automatic)."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    with sess:
        with rlscope.scope("inference"):
            clock.advance(GLUE)
        with torch.no_grad():
            net(torch.ones(2))
    ops = _ops(sess)
    assert set(ops) == {"inference"}
    assert ops["inference"]["calls"] == 2 and not ops["inference"]["auto"]
    assert ops["inference"]["total_s"] == pytest.approx((GLUE + FWD) * 1e-9)


def test_names_file_marks_automatic_names(tmp_path):
    import pyarrow as pa

    sess, clock = _session(tmp_path, auto_ops=True)
    with sess:
        _loop(clock, 1, 1)
    proc = sess.process_dir
    names = pa.ipc.open_stream(str(proc / S.NAMES_FILE)).read_all().to_pylist()
    auto = {r["name"] for r in names if r[S.NAMES_AUTO_COLUMN]}
    assert {"inference", "simulation", "backprop"} <= auto


def test_no_operation_gives_a_hint(tmp_path):
    sess, clock = _session(tmp_path)
    with sess:
        clock.advance(GLUE)
    s = analyze(sess.trace_dir, correct=False).summary
    assert s["operations"] == {}
    assert "rlscope.scope" in s["hint"] and "rlscope run" in s["hint"]
    assert json.loads(json.dumps(s))["hint"] == s["hint"]
    sess, clock = _session(tmp_path / "auto", auto_ops=True)
    with sess:
        clock.advance(GLUE)
    hint = analyze(sess.trace_dir, correct=False).summary["hint"]
    assert "rlscope.scope" in hint and "rlscope run" not in hint


@pytest.mark.parametrize("native", ["1", "0"], ids=["c-scopes", "python-scopes"])
def test_a_hand_annotated_loop_gets_no_automatic_copies(tmp_path, monkeypatch, native):
    """Inside the user's own ``inference``/``simulation``/``backprop`` the automatic operation of the same
    name does not open: the hand-annotated loop reads exactly as without automatic operations."""
    monkeypatch.setenv("RLSCOPE_NATIVE_SCOPES", native)
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    env = rlscope.wrap_env(ClockEnv(clock))
    x = torch.ones(2)
    with sess:
        for _ in range(5):
            with rlscope.scope("inference"), torch.no_grad():
                net(x)
            with rlscope.scope("simulation"):
                env.step(0)
        with rlscope.scope("backprop"):
            loss = net(x).sum()
            clock.advance(LOSS)
            loss.backward()
            opt.step()
        with rlscope.scope("rollout"), torch.no_grad():  # another name: the automatic one nests
            net(x)
    ops = _ops(sess)
    assert set(ops) == {"inference", "simulation", "backprop", "rollout"}
    assert ops["simulation"]["total_s"] == pytest.approx(5 * STEP_ENV * 1e-9, rel=1e-9)
    assert ops["backprop"]["total_s"] == pytest.approx((FWD + LOSS + OPT) * 1e-9, rel=1e-9)
    # the user's five and the automatic one inside ``rollout``: one operation, not all automatic
    assert ops["inference"]["calls"] == 6 and not ops["inference"]["auto"]
    assert ops["inference"]["total_s"] == pytest.approx(6 * FWD * 1e-9, rel=1e-9)
    assert not any(o["auto"] for o in ops.values())


# -- one name, one operation: a user's scope and the automatic operation of its name ----------------


def _rl_loop(clock: FakeClock, scoped: bool, iters: int = 6, updates: int = 3) -> None:
    """The same loop with the three RL operations scoped by hand, or left to rlscope to find."""

    def scope(name: str):
        return rlscope.scope(name) if scoped else contextlib.nullcontext()

    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    env = rlscope.wrap_env(ClockEnv(clock))
    x = torch.ones(2)
    with scope("simulation"):
        env.reset()
    for _ in range(iters):
        with scope("inference"), torch.no_grad():
            net(x)
            clock.advance(SAMPLE)
        clock.advance(GLUE)
        with scope("simulation"):
            env.step(0)
    for _ in range(updates):
        _update(net, opt, clock, around=scope("backprop"))


def _update(net, opt, clock: FakeClock, around: Any = None, after_forward: Any = None) -> None:
    """One learner update (forward, loss, backward, the optimizer step), ``around`` the whole of it and
    ``after_forward`` around what follows the forward (context managers; None: none)."""
    with around or contextlib.nullcontext():
        loss = net(torch.ones(2)).sum()
        with after_forward or contextlib.nullcontext():
            clock.advance(LOSS)
            opt.zero_grad()
            loss.backward()
            opt.step()
    clock.advance(GLUE)


def _terminal(summary: dict) -> str:
    from rich.console import Console

    from rlscope.viz.terminal import render_summary

    buf = io.StringIO()
    render_summary(summary, Console(file=buf, width=200, color_system="truecolor", force_terminal=True))
    return buf.getvalue()


def _ansi(colour: str) -> str:
    """rich's truecolor foreground code of ``colour``."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"38;2;{r};{g};{b}"


def test_an_annotated_and_an_unmodified_run_are_the_same_operations(tmp_path):
    """Keys, colours and the diff: ``backprop`` scoped by hand and ``backprop`` found by rlscope match;
    only the ``auto`` flag (and the table's ``(auto)`` mark) tells them apart."""
    from rlscope.cli import analyze as cli
    from rlscope.viz.colors import OPERATION_COLORS

    runs = {}
    for scoped in (True, False):
        sess, clock = _session(tmp_path / ("annotated" if scoped else "unmodified"), auto_ops=not scoped)
        with sess:
            _rl_loop(clock, scoped)
        runs[scoped] = sess.trace_dir
    annotated, unmodified = (analyze(runs[s], correct=False).summary for s in (True, False))
    rl = {"inference", "simulation", "backprop"}
    for s, auto in ((annotated, False), (unmodified, True)):
        assert set(s["operations"]) == set(s["processes"][0]["operations"]) == rl
        assert set(s["phases"]["[no phase]"]["operations"]) == rl
        assert all(o["auto"] is auto for o in s["operations"].values())
        assert all(o["auto"] is auto for o in s["processes"][0]["operations"].values())
    for name in rl:
        assert annotated["operations"][name]["calls"] == unmodified["operations"][name]["calls"], name
    # the same colour, the documented one, in both tables; the unmodified run's rows marked
    for s, mark in ((annotated, ""), (unmodified, " (auto)")):
        out = _terminal(s)
        for name in rl:
            drawn = re.escape(_ansi(OPERATION_COLORS[name])) + r"[;0-9]*m\s*" + re.escape(name + mark)
            assert re.search(drawn, out), (name, mark)
        assert ("(auto): found by rlscope" in out) is bool(mark)
    # rlscope diff matches every operation: none is only in one trace
    out = tmp_path / "diff.json"
    assert cli.main(["diff", str(runs[True]), str(runs[False]), "--raw", "--json", str(out), "-q"]) == 0
    d = json.loads(out.read_text())
    assert set(d["operations"]) == rl and all(o["only_in"] is None for o in d["operations"].values())


def test_a_hand_backprop_and_automatic_ones_are_one_operation(tmp_path):
    """One update scoped by hand, the others found: one ``backprop``, every call and second in it, and
    not ``auto`` (not every instance was automatic)."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    with sess:
        for i in range(4):
            _update(net, opt, clock, around=rlscope.scope("backprop") if i == 0 else None)
    s = analyze(sess.trace_dir, correct=False).summary
    for ops in (s["operations"], s["processes"][0]["operations"], s["phases"]["[no phase]"]["operations"]):
        assert set(ops) == {"backprop"}
        bp = ops["backprop"]
        assert bp["calls"] == 4 and not bp["auto"]
        assert bp["total_s"] == pytest.approx(4 * (FWD + LOSS + OPT) * 1e-9, rel=1e-9)
    assert "(auto)" not in _terminal(s)


def test_a_hand_backprop_inside_an_automatic_one_is_not_counted_twice(tmp_path):
    """The automatic ``backprop`` opens at the loss's forward, the user's scope inside it: one operation,
    whose total is the outer instance's (the inner one is flagged recursive, as for one name id)."""
    sess, clock = _session(tmp_path, auto_ops=True)
    net = ClockNet(clock)
    opt = _optimizer(net.parameters(), clock)
    with sess:
        for _ in range(3):
            _update(net, opt, clock, after_forward=rlscope.scope("backprop"))
        rlscope.wrap_env(ClockEnv(clock)).reset()  # the next automatic boundary ends the last one
    ops = _ops(sess)
    bp = ops["backprop"]
    assert bp["calls"] == 6 and not bp["auto"] and ops["simulation"]["auto"]
    # the automatic one ends at the next automatic boundary after the user's scope (the next forward)
    assert bp["total_s"] == pytest.approx(3 * (FWD + LOSS + OPT + GLUE) * 1e-9, rel=1e-9)
    assert bp["exclusive_s"] == pytest.approx(bp["total_s"], rel=1e-9)
    (proc,) = rlscope.load_trace(str(sess.trace_dir)).processes
    kind = proc.events.column("kind").to_numpy()
    begins = kind == S.OP_BEGIN
    name = proc.events.column("name").to_numpy()
    ids = {int(i) for i in name[begins] if proc.names[int(i)] == "backprop"}
    assert len(ids) == 1  # one id per name in the events the analysis reads
    recursive = (proc.events.column("flags").to_numpy() & S.FLAG_RECURSIVE) != 0
    assert int((begins & recursive).sum()) == 3
    assert proc.automatic == {"backprop": False, "simulation": True}
