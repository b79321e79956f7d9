"""Automatic RL operations: ``simulation``, ``inference`` and ``backprop`` in unmodified PyTorch code.

On by default under ``rlscope run``, and with ``rlscope.profile(auto_ops=True)``. The boundaries
(docs/automatic-operations.md has them with what they leave out):

- ``simulation``: a gymnasium ``Env``/``VectorEnv`` ``step``/``reset`` (the wrapper of
  rlscope/collectors/gym.py) or a stable-baselines3 ``VecEnv`` ``step``/``reset``
  (rlscope/runtime/adapters/sb3.py); the outermost one when they nest. An env step is never part
  of an inference or an update: it ends an automatic ``inference`` or ``backprop`` still open.
- ``inference``: the outermost block with autograd disabled (``torch.no_grad()``,
  ``torch.inference_mode()``, as blocks or decorators) in which a ``torch.nn.Module`` is called,
  outside a learner update, from its first module call to the block's end (action sampling after the
  policy's forward counts; work in the block before its first module call does not). A long trail
  after the block's last module call is not acting: when the block's end comes more than
  TRAIL_MIN_NS and TRAIL_FACTOR times the calls' span after the last call ended (CleanRL computes
  its advantages in the ``no_grad`` block of its bootstrap value: a 128-step loop, 3-10 ms after a
  60 us critic call), the operation ends where that call ended and the trail is its parent's
  (``[unannotated]`` at the top, where the stack samples name its lines). With autograd off
  globally (no such block), each outermost module call.
- ``backprop``: a learner update, from the first grad-enabled outermost module call after the
  previous ``optimizer.step()`` to the end of the next ``optimizer.step()`` (loss, ``backward()``,
  gradient clipping and the step inside).

A user's scope always wins. An automatic operation opens as the innermost operation of its thread
(so it nests under the user's scopes open then) and ends at its own end only when every operation
opened inside it has closed; when a user's scope opened inside it is still open then, it is not
closed there (that would split the user's scope) but at the next automatic boundary after that
scope has closed. A user's scope that closes around it ends it too. Inside a user's operation of
the same name it does not open at all (it would only repeat it). It is never renamed: automatic
operations have name ids of their own, marked in the trace (names.arrows' ``auto`` column); the
analysis reads them as the user's operation of the same name, with an ``auto`` flag
(rlscope/trace/auto_names.py).

Torch's own hook where it is cheap enough: the global optimizer step post-hook. Module calls go
through a wrapper of ``nn.Module.__call__`` (torch's global forward hooks cost three times as much
a call, see install_torch), and grad-disabled blocks through wrapped ``__enter__``/``__exit__`` of
``no_grad`` and ``inference_mode`` (torch has no hook for them), for as long as a session with
automatic operations runs. Nothing is installed without such a session; with one, each module call
(submodules too) costs one Python call, two counters on most of them. That cost is removed by the
overhead correction: each outermost call adds the module calls it made to the innermost operation
open on its thread (:func:`module_call_counts`, written by collectors/module_calls.py), and the
analysis prices them with the calibrated ``module_call`` cost (rlscope/overhead/correct/module_calls.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rlscope import _imports, annotate
from rlscope.runtime import backends, never_compiled
from rlscope.trace import schema as S

SIMULATION = "simulation"
INFERENCE = "inference"
BACKPROP = "backprop"
ROLLOUT = "rollout"  # library phases (rlscope/runtime/adapters/)
UPDATE = "update"

_on = False  # a session with automatic operations is running in this process
_session: Any = None
_torch_handles: list[Any] = []  # what install_torch put on, for uninstall_torch
# module classes whose call starts a library's ``update`` phase, ended by the next optimizer step
# (TorchRL's loss modules: rlscope/runtime/adapters/torchrl.py)
_update_modules: tuple[type, ...] = ()
# an inference block's trail after its last module call that ends the operation at that call (module
# docstring): longer than both. Action sampling, a GPU sync for the actions and their conversion
# take tens to hundreds of microseconds after forwards of similar length; an advantage loop after a
# bootstrap value takes milliseconds after one small call
TRAIL_MIN_NS = 2_000_000
TRAIL_FACTOR = 20
_clock: Callable[[], int] = int  # the session's clock (its own, a test's fake one included)


class _Counts:
    """One thread's module-call counts by operation name id, and the thread's OS id.

    Why a plain object beside the thread's state: the state is a ``threading.local``, so the writer's
    thread reading ``tid`` through it would read (and make) a state of its own, and file the
    program's calls under the writer's id.
    """

    __slots__ = ("counts", "tid")

    def __init__(self) -> None:
        self.tid = threading.get_native_id()
        self.counts: dict[int, int] = {}


# every thread's module-call counts, for the module-call collector (on the writer's thread)
_counters: list[_Counts] = []
# module classes that set autograd themselves inside their forward, each with the mode it sets
# (given the module and the mode at the call): TorchRL's value estimators run with autograd as their
# ``differentiable`` says, so a GAE called with autograd on is inference, not the start of backprop
_grad_set_inside: tuple[tuple[type, Callable[[Any, bool], bool]], ...] = ()


class _Thread(threading.local):
    """One thread's state: module calls open, the grad-disabled blocks, the automatic operations open."""

    def __init__(self) -> None:
        self.calls = 0  # module calls open (every submodule's too)
        self.blocks: list[bool] = []  # open no_grad/inference_mode blocks: True for a candidate one
        self.candidates = 0  # True entries of blocks (0 or 1 but for odd nesting)
        self.inference: tuple[Any, int] | None = None
        self.per_call = False  # the inference is one module call's (autograd off globally)
        self.first = 0  # the open inference's first module call began (session clock, ns)
        self.last = 0  # and its last outermost module call ended (0: none yet)
        self.update: tuple[Any, int] | None = None
        self.sim: tuple[Any, int] | None = None
        self.update_phase: _Phase | None = None  # an update phase a loss module's call opened
        self.late: list[tuple[Any, int]] = []  # ended while a user's scope inside them was open
        # module calls made on this thread (every level), those already given to an operation, and
        # what each operation got (name id -> calls; -1: none open): totals, never reset, so that a
        # reader diffing them (collectors/module_calls.py) loses nothing to a reset
        self.seen = 0
        self.counted = 0
        self.counter = _Counts()
        _counters.append(self.counter)


_tls = _Thread()


def enabled() -> bool:
    return _on


def _depth() -> int:
    """Operations open on this thread (the lean C path holds its stacks in C)."""
    s = _session
    lean = s._lean
    if lean is not None:
        return lean.op_depth()
    return len(s.thread_state().ops)


def _top() -> int:
    """The name id of the innermost operation open on this thread (-1: none)."""
    s = _session
    lean = s._lean
    if lean is not None:
        return int(lean.op_top())
    ops = s.thread_state().ops
    return ops[-1][1] if ops else -1


def _count(t: _Thread) -> None:
    """An outermost module call ends: the module calls made since the last one go to the innermost
    operation open now (the one that paid for their wrapper)."""
    n = t.seen - t.counted
    t.counted = t.seen
    nid = _top()
    counts = t.counter.counts
    counts[nid] = counts.get(nid, 0) + n


def module_call_counts() -> list[tuple[int, dict[int, int]]]:
    """Every thread's (OS thread id, module calls by operation name id so far), copies: the module-call
    collector diffs them at each flush."""
    return [(c.tid, dict(c.counts)) for c in list(_counters)]


def _user_open(name: str) -> bool:
    """Whether the user's own operation ``name`` is open on this thread: the automatic one of the same
    name would only repeat it (a hand-annotated loop reads as before, at no extra cost)."""
    nid = annotate.intern(name)
    lean = _session._lean
    if lean is not None:
        return bool(lean.op_open(nid))
    return any(n == nid for _, n in _session.thread_state().ops)


# what _open gives where the user's own operation of the name is open: held as an open automatic
# operation (the boundaries go on as if it were), closed as nothing
_SKIPPED: tuple[Any, int] = (None, -1)


def _open(name: str) -> tuple[Any, int]:
    """Open the automatic operation ``name`` (_SKIPPED: the user's own of that name is open)."""
    if _user_open(name):
        return _SKIPPED
    t = _tls
    if t.late:
        _close_late(t)
    sc = annotate.auto_scope(name)
    depth = _depth()
    sc.__enter__()
    return sc, depth


def _close(t: _Thread, op: tuple[Any, int]) -> None:
    """End ``op`` if nothing opened inside it is still open; else at a later boundary (_close_late)."""
    if op is _SKIPPED:  # never opened: the user's operation of its name was open
        return
    sc, depth = op
    now = _depth()
    if now == depth + 1:
        sc.__exit__(None, None, None)
    elif now > depth + 1:
        t.late.append(op)
    # now <= depth: a scope around it closed, and closed it


def _end_inference(t: _Thread, op: tuple[Any, int]) -> None:
    """An inference block ends: ``op`` ends now, or where its last module call ended when the trail
    since is long (module docstring; the lean C path only: it writes an end at a past time)."""
    if op is not _SKIPPED and t.last:
        trail = _clock() - t.last
        if trail > TRAIL_MIN_NS and trail > TRAIL_FACTOR * (t.last - t.first):
            sc, depth = op
            lean = _session._lean
            if lean is not None and _depth() == depth + 1 and lean.op_end_at(sc.name_id, t.last):
                return
    _close(t, op)


def _close_late(t: _Thread) -> None:
    while t.late:
        sc, depth = t.late[-1]
        now = _depth()
        if now > depth + 1:
            return  # the user's scope inside it is still open
        t.late.pop()
        if now == depth + 1:
            sc.__exit__(None, None, None)


# -- simulation ---------------------------------------------------------------------------------


def simulation_begin() -> bool:
    """An env step or reset starts; True if it opened ``simulation`` (pass it to simulation_end)."""
    if not _on:
        return False
    t = _tls
    if t.sim is not None:
        return False
    if t.inference is not None:  # an env step is never inference
        _close(t, t.inference)
        t.inference = None
    if t.update is not None:  # nor an update: acting with autograd on opened it
        _close(t, t.update)
        t.update = None
    _end_update_phase(t)
    t.sim = _open(SIMULATION)
    return True


def simulation_end(opened: bool) -> None:
    if not opened:
        return
    t = _tls
    if t.sim is not None:
        sim, t.sim = t.sim, None
        if _on:
            _close(t, sim)


def simulation(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an env's ``step``/``reset`` method: its calls are ``simulation``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _on:
            return fn(*args, **kwargs)
        opened = simulation_begin()
        try:
            return fn(*args, **kwargs)
        finally:
            simulation_end(opened)

    return _like(wrapper, fn)


def _like(wrapper: Any, fn: Any) -> Any:
    import functools

    wrapper = functools.wraps(fn)(wrapper)
    wrapper._rlscope_auto = True
    return wrapper


# -- torch: module calls, grad-disabled blocks, optimizer steps -----------------------------------


def update_phase_starts_at(cls: type) -> None:
    """A call of a ``cls`` module (at the outermost level) opens the ``update`` phase, which the
    next optimizer step ends (a library's loss modules)."""
    global _update_modules
    if cls not in _update_modules:
        _update_modules = (*_update_modules, cls)


def grad_mode_set_inside(cls: type, mode: Callable[[Any, bool], bool]) -> None:
    """A ``cls`` module sets autograd itself in its forward, to ``mode(module, mode_at_call)``: its
    call is inference or backprop by that mode, not by the one at the call."""
    global _grad_set_inside
    if all(c is not cls for c, _ in _grad_set_inside):
        _grad_set_inside = (*_grad_set_inside, (cls, mode))


def _grad_mode(torch: Any, module: Any) -> bool:
    """The autograd mode a module call runs its forward in."""
    grad = torch.is_grad_enabled()
    for cls, mode in _grad_set_inside:
        if isinstance(module, cls):
            return bool(mode(module, grad))
    return grad


def _begin_update_phase(t: _Thread) -> None:
    """Open the update phase at a loss module's call, around the automatic operation open then
    rather than inside it: a phase begun inside an operation would hold part of it (the operation
    longer than the phase's own time). A grad-enabled forward before the loss's (a value network's)
    opened that operation; it ends here, and the call opens the next inside the phase."""
    ph = phase(UPDATE)
    if not _would_open(ph):
        return
    for attr in ("update", "inference"):
        op = getattr(t, attr)
        if op is not None:
            setattr(t, attr, None)
            _close(t, op)
    t.update_phase = ph.__enter__()


def _end_update_phase(t: _Thread) -> None:
    if t.update_phase is not None:
        ph, t.update_phase = t.update_phase, None
        ph.__exit__(None, None, None)


def _outer_call(t: _Thread, torch: Any, module: Any) -> None:
    """The first of a module call's hooks at the outermost level: inference or backprop starts."""
    if t.late:
        _close_late(t)
    if t.sim is not None:  # a model inside the simulator is the simulator's
        return
    if t.candidates == 0 and isinstance(module, torch.fx.GraphModule) and not torch.is_grad_enabled():
        return  # a compiled function's graph, run by AOT autograd with autograd off: not inference
    if _update_modules and t.update_phase is None and isinstance(module, _update_modules):
        _begin_update_phase(t)
    if _grad_mode(torch, module):
        if t.update is None and t.inference is None:
            t.update = _open(BACKPROP)
    elif t.update is None and t.inference is None:
        t.per_call = t.candidates == 0  # autograd off globally: this call alone
        t.inference = _open(INFERENCE)
        if not t.per_call:
            t.first, t.last = _clock(), 0


def install_torch(torch: Any) -> None:
    """Put the hooks on (once a session with automatic operations runs and torch is imported)."""
    if _torch_handles or not _on:
        return
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim

    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    # Module calls: nn.Module.__call__ wrapped rather than torch's global forward pre-hook and
    # forward hook. Why: a global hook sends every module call (every submodule's) down _call_impl's
    # slow path; measured on a 64-64 MLP (6 module calls a forward, CPU): +2.3 us a module call with
    # the two hooks, +0.8 us with the wrapper, which keeps the fast path. Only the outermost call
    # matters, but the depth must be counted at every level: a nested call (most of them) reads the
    # depth once and writes it twice (benchmarks/auto_ops.py --part wrapper: 1.0 us a module call on
    # cpu-vm, 1.2 when it read-modify-wrote it going in and out).
    module_call = nn_module.Module.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if compiling():  # while Dynamo traces: nothing at all (a side effect there is a graph break)
            return module_call(self, *args, **kwargs)
        t = _tls
        depth = t.calls
        t.calls = depth + 1
        t.seen += 1
        if depth:  # inside another module's call
            try:
                return module_call(self, *args, **kwargs)
            finally:
                t.calls = depth
        if _on:
            _outer_call(t, torch, self)
        try:
            return module_call(self, *args, **kwargs)
        finally:
            t.calls = 0
            if _on:
                _count(t)
                if t.inference is not None and not t.per_call:
                    t.last = _clock()
            if t.per_call and t.inference is not None:
                inf, t.inference, t.per_call = t.inference, None, False
                if _on:
                    _close(t, inf)

    def step_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if compiling():  # inlined in a compiled step: nothing at all, as in __call__
            return
        t = _tls
        if t.update is not None:
            upd, t.update = t.update, None
            if _on:
                _close(t, upd)
        _end_update_phase(t)

    nn_module.Module.__call__ = _like(__call__, module_call)
    _torch_handles.append((nn_module.Module, "__call__", module_call))
    _torch_handles.append(optim.register_optimizer_step_post_hook(step_hook))
    never_compiled.skip(__call__, step_hook)  # run as they are inside compiled code's eager parts
    for cls in (torch.no_grad, torch.inference_mode):
        _torch_handles.append(_wrap_block(cls, torch))


def _wrap_block(cls: type, torch: Any) -> tuple[type, Any, Any]:
    """Wrap a grad-disabling context manager's ``__enter__``/``__exit__`` (torch has no hook for them)."""
    enter, exit_ = cls.__enter__, cls.__exit__

    def __enter__(self: Any) -> Any:
        t = _tls
        # a candidate: it disables autograd (it was on), at the outermost level, outside an update
        candidate = _on and t.calls == 0 and t.update is None and torch.is_grad_enabled()
        t.blocks.append(candidate)
        t.candidates += candidate
        return enter(self)

    def __exit__(self: Any, *exc: Any) -> Any:
        try:
            return exit_(self, *exc)
        finally:
            t = _tls
            if t.blocks and t.blocks.pop():
                t.candidates -= 1
                if t.candidates == 0 and t.inference is not None and not t.per_call:
                    inf, t.inference = t.inference, None
                    if _on:
                        _end_inference(t, inf)

    cls.__enter__ = _like(__enter__, enter)
    cls.__exit__ = _like(__exit__, exit_)
    never_compiled.skip(__enter__, __exit__)
    return (cls, enter, exit_)


def uninstall_torch() -> None:
    """Take the hooks off again (the session stops)."""
    while _torch_handles:
        h = _torch_handles.pop()
        if isinstance(h, tuple) and len(h) == 3 and isinstance(h[1], str):
            cls, attr, original = h
            if getattr(cls.__dict__.get(attr), "__wrapped__", None) is original:  # nothing on top of it
                setattr(cls, attr, original)
        elif isinstance(h, tuple):
            cls, enter, exit_ = h
            cls.__enter__, cls.__exit__ = enter, exit_
        else:
            h.remove()


# -- lifecycle ------------------------------------------------------------------------------------


def _reset(t: _Thread) -> None:
    """Nothing open (a session starts or stops; a forked child starts with its parent's state)."""
    t.calls, t.blocks, t.candidates = 0, [], 0
    t.inference = t.update = t.sim = t.update_phase = None
    t.per_call = False
    t.late = []
    t.counted = t.seen  # calls before now were no session's
    t.counter.tid = threading.get_native_id()  # a forked child's thread has an id of its own


def start(session: Any) -> None:
    """Automatic operations for ``session`` (Session.start, with ``auto_ops``)."""
    global _on, _session, _clock
    _reset(_tls)
    _session, _on, _clock = session, True, session.clock
    for backend in backends.BACKENDS:  # each framework's hooks, once the program imports it
        if backend.auto_ops_install:
            _imports.when_imported(backend.module, backends.load(backend.auto_ops_install))


def stop() -> None:
    """The session stops: no more automatic boundaries (its stop closes what is open)."""
    global _on, _session
    _on = False
    for backend in backends.BACKENDS:
        if backend.auto_ops_install:
            _imports.cancel(backend.module, backends.load(backend.auto_ops_install))
            backends.load(backend.auto_ops_uninstall)()
    _reset(_tls)
    _session = None


def phase(name: str) -> Any:
    """A library adapter's phase (``rollout``, ``update``): automatic, and only where no phase is
    open on the thread (a user's phase wins, and is not cut into the library's)."""
    return _Phase(annotate.auto_scope(name, S.PHASE_BEGIN))


class _Phase:
    __slots__ = ("opened", "scope")

    def __init__(self, scope: Any) -> None:
        self.scope = scope
        self.opened = False

    def __enter__(self) -> _Phase:
        if _would_open(self):
            self.scope.__enter__()
            self.opened = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.opened:
            self.opened = False
            if _on:
                self.scope.__exit__(None, None, None)


def _would_open(ph: _Phase) -> bool:
    """Whether the phase opens if entered now: a session runs and no phase is open on the thread."""
    s = _session
    return _on and s is not None and not s.thread_state().phases


def in_phase(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a library method: its calls are the automatic phase ``name``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _on:
            return fn(*args, **kwargs)
        with phase(name):
            return fn(*args, **kwargs)

    return _like(wrapper, fn)


def patch(cls: type, method: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``cls.method`` (its own, not inherited) by ``wrap(it)``, once."""
    fn = cls.__dict__.get(method)
    if fn is None or getattr(fn, "_rlscope_auto", False):
        return False
    setattr(cls, method, wrap(fn))
    return True
