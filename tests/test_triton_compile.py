"""Triton JIT compilations (collectors/triton_compile.py): the launching operation's compile time.

Triton is not needed: a stand-in module with Triton's ``knobs.compilation.listener`` slot, called as
Triton calls it when a compilation ends (its measured ``times.total`` in µs), on the fake clock.
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

import rlscope
from rlscope.analysis import analyze
from tests.conftest import FakeClock

MS = 1_000_000


def _fake_triton(own_listener):
    mod = types.ModuleType("triton")
    mod.knobs = SimpleNamespace(compilation=SimpleNamespace(listener=own_listener))
    return mod


def _compiled(triton, name: str, total_us: int, cache_hit: bool = False) -> None:
    """A compilation that ends now, reported as Triton reports one."""
    src = SimpleNamespace(fn=SimpleNamespace(__name__=name))
    times = SimpleNamespace(total=total_us, lowering_stages=[])
    listener = triton.knobs.compilation.listener
    listener(src=src, metadata={}, metadata_group={}, times=times, cache_hit=cache_hit)


def test_a_kernels_jit_compile_is_the_compile_time_of_the_operation_that_launched_it(tmp_path, monkeypatch):
    """The fused simulator's first step compiles its kernel: that time is compile, not simulation."""
    seen = []
    triton = _fake_triton(lambda **kw: seen.append(kw["cache_hit"]))  # the program's own listener
    monkeypatch.setitem(sys.modules, "triton", triton)
    own = triton.knobs.compilation.listener
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "t", backend=False, gpu=False, windows=False)
    sess.clock = clock
    with sess:
        for step in range(3):
            with rlscope.scope("simulation"):
                clock.advance(1 * MS)
                if step == 0:
                    clock.advance(25 * MS)
                    _compiled(triton, "cartpole_fused", 25_000)  # 1 ms .. 26 ms of the first step
                    clock.advance(4 * MS)
                    _compiled(triton, "reset_kernel", 4_000, cache_hit=True)  # from the disk cache
    assert triton.knobs.compilation.listener is own  # the program's listener back at the stop
    assert seen == [False, True]  # and it heard every compilation
    summary = analyze(sess.trace_dir, correct=False).summary
    sim = summary["operations"]["simulation"]
    assert sim["calls"] == 3 and sim["total_s"] == pytest.approx(32e-3, abs=1e-12)
    assert sim["categories"]["compile"] == pytest.approx(29e-3, abs=1e-12)
    assert sim["categories"]["python"] == pytest.approx(3e-3, abs=1e-12)
    c = summary["compile"]
    assert c["triton_kernels"] == 2 and c["compilations"] == 0
    assert c["seconds"] == pytest.approx(29e-3, abs=1e-12)
    assert c["stages"] == {"triton": pytest.approx(29e-3, abs=1e-12)}
    assert [f["function"] for f in c["functions"]] == ["cartpole_fused", "reset_kernel"]


def test_a_triton_without_the_listener_is_said_once_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))  # before Triton 3.4
    for run in ("a", "b"):
        with rlscope.profile(tmp_path / run, backend=False, gpu=False, windows=False), rlscope.scope("step"):
            pass
    err = capsys.readouterr().err
    assert err.count("Triton compilations not recorded: this Triton has no knobs.compilation.listener") == 1
    assert analyze(tmp_path / "b", correct=False).summary["operations"]["step"]["calls"] == 1
