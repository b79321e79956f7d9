"""The shared wrapper around torch's autograd engine entry (rlscope/runtime/autograd_engine.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rlscope.runtime import autograd_engine  # noqa: E402


def _counter(log: list[str], name: str):
    def before() -> str:
        log.append(f"{name}+")
        return name

    def after(token: str) -> None:
        log.append(f"{token}-")

    return before, after


def _backward() -> torch.Tensor:
    x = torch.ones(3, requires_grad=True)
    (x * 2.0).sum().backward()
    return x.grad


def test_each_backward_and_grad_call_is_seen_once_and_results_are_unchanged():
    original = torch.autograd._engine_run_backward
    log: list[str] = []
    handle = autograd_engine.wrap(torch, "a", *_counter(log, "a"))
    try:
        assert torch.equal(_backward(), torch.full((3,), 2.0))
        y = torch.ones(2, requires_grad=True)
        (g,) = torch.autograd.grad((y * 3.0).sum(), y)
        assert torch.equal(g, torch.full((2,), 3.0))
    finally:
        autograd_engine.unwrap(handle)
    assert log == ["a+", "a-", "a+", "a-"]
    assert torch.autograd._engine_run_backward is original


def test_the_call_is_left_alone_while_dynamo_traces(monkeypatch):
    tracing = [True]
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: tracing[0])
    log: list[str] = []
    handle = autograd_engine.wrap(torch, "a", *_counter(log, "a"))
    try:
        assert torch.equal(_backward(), torch.full((3,), 2.0))
        assert log == []
        tracing[0] = False
        _backward()
        assert log == ["a+", "a-"]
    finally:
        autograd_engine.unwrap(handle)


def test_two_owners_stack_and_unwrap_in_either_order():
    original = torch.autograd._engine_run_backward
    log: list[str] = []
    inner = autograd_engine.wrap(torch, "twin", *_counter(log, "twin"))
    outer = autograd_engine.wrap(torch, "backend", *_counter(log, "backend"))
    assert inner is not None and outer is not None
    # the same owner again, outermost already: nothing wrapped twice
    assert autograd_engine.wrap(torch, "backend", *_counter(log, "x")) is None
    _backward()
    assert log == ["backend+", "twin+", "twin-", "backend-"]
    # the inner one first: the outer stays on top, and still works through the inner wrapper
    autograd_engine.unwrap(inner)
    assert torch.autograd._engine_run_backward is outer[2]
    log.clear()
    _backward()
    assert log == ["backend+", "twin+", "twin-", "backend-"]
    autograd_engine.unwrap(outer)
    assert torch.autograd._engine_run_backward is inner[2]
    torch.autograd._engine_run_backward = original  # what a session's end leaves (each put back its own)


def test_after_runs_when_backward_raises():
    log: list[str] = []
    handle = autograd_engine.wrap(torch, "a", *_counter(log, "a"))
    try:
        x = torch.ones(2)  # no grad: backward raises
        with pytest.raises(RuntimeError):
            x.sum().backward()
    finally:
        autograd_engine.unwrap(handle)
    assert log == ["a+", "a-"]
