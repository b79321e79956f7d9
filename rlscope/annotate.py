"""User annotations: ``scope`` (operations), ``phase`` and ``simulator`` (a CPU category).

This is the hot path. With no session active, entering and leaving a scope is a global load and
a return (see benchmarks/scope_overhead.py). With a session, each boundary appends one tuple to
the session's deque; nesting is tracked on a per-thread stack so that scope objects stay
stateless and can be cached per name (which also makes them reentrant and thread-safe).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rlscope import categories
from rlscope.trace import schema as S

if TYPE_CHECKING:
    from rlscope.session import Session

F = TypeVar("F", bound=Callable[..., Any])

# The active session, set by rlscope.session; read on every scope boundary.
_active: Session | None = None
# The session bound to the C lean path and its module (collectors/scope_native.c): its category
# stacks live in C, so category_enter/exit below hand its boundaries there.
_lean: Any = None
_lean_session: Session | None = None

# Process-wide name interning (append-only list; ids are positions). Names are few, events many.
_names: list[str] = []
_name_ids: dict[str, int] = {}
_names_lock = threading.Lock()
# Names of automatic operations and phases (rlscope/runtime/auto_ops.py, the library adapters): their
# own ids, apart from a user scope of the same name, flagged in names.arrows' ``auto`` column
_auto_name_ids: dict[str, int] = {}
auto_ids: set[int] = set()


def intern(name: str, auto: bool = False) -> int:
    """Id of ``name`` in the process's name table, adding it on first use; ``auto``: the name of
    an automatic operation or phase, a different id from a user scope's ``name``."""
    ids = _auto_name_ids if auto else _name_ids
    i = ids.get(name)
    if i is None:
        with _names_lock:
            i = ids.get(name)
            if i is None:
                i = len(_names)
                _names.append(name)
                ids[name] = i
                if auto:
                    auto_ids.add(i)
    return i


class ThreadState:
    """Per-thread stacks of open operations, phases and categories for one session."""

    __slots__ = ("cats", "ident32", "open_names", "ops", "phases", "thread")

    def __init__(self) -> None:
        self.thread = threading.get_native_id()
        self.ident32 = threading.get_ident() & 0xFFFFFFFF  # how CUPTI names the thread
        self.ops: list[tuple[int, int]] = []  # (instance id, name id)
        self.phases: list[tuple[int, int]] = []
        self.cats: list[int] = []
        self.open_names: dict[int, int] = {}  # name id -> how many instances open (recursion flag)


def _close_stack(
    session: Session, st: ThreadState, stack: list[tuple[int, int]], name_id: int, end_kind: int, ts: int
) -> None:
    """Close the innermost open instance named ``name_id`` (and, flagged, anything left open inside it)."""
    for pos in range(len(stack) - 1, -1, -1):
        if stack[pos][1] == name_id:
            break
    else:
        return  # opened before this profile started: nothing to close
    append = session.events.append
    while len(stack) > pos:
        inst, nid = stack.pop()
        parent = stack[-1][0] if stack else -1
        flags = 0 if len(stack) == pos else S.FLAG_FORCED_CLOSE
        if end_kind == S.OP_END:
            n = st.open_names[nid] - 1
            if n:
                st.open_names[nid] = n
            else:
                del st.open_names[nid]
        append((ts, st.thread, end_kind, inst, parent, nid, flags))


def close_all(session: Session, states: list[ThreadState], end_ns: int) -> None:
    """At the session's end: close every scope and category still open on any thread, flagged as
    forced closes (the analysis tells them from the program's own ends)."""
    lean = session._lean
    append = session.events.append
    for st in states:
        if lean is not None:  # what the lean path holds open: its stacks are in C
            lean.close_open(st.thread, end_ns, False)
        for stack, kind in ((st.ops, S.OP_END), (st.phases, S.PHASE_END)):
            while stack:
                inst, nid = stack.pop()
                parent = stack[-1][0] if stack else -1
                append((end_ns, st.thread, kind, inst, parent, nid, S.FLAG_FORCED_CLOSE))
        st.open_names.clear()
        if lean is not None:
            lean.close_open(st.thread, end_ns, True)
        while st.cats:
            c = st.cats.pop()
            parent = st.cats[-1] if st.cats else 0
            append((end_ns, st.thread, S.CAT_END, c, parent, -1, S.FLAG_FORCED_CLOSE))


class _Scope:
    """An operation (``scope``) or phase boundary pair; context manager and decorator."""

    __slots__ = ("_begin", "name", "name_id")

    def __init__(self, name: str, begin_kind: int, auto: bool = False) -> None:
        self.name = name
        self.name_id = intern(name, auto)
        self._begin = begin_kind

    def __enter__(self) -> _Scope:
        s = _active
        if s is None:
            return self
        nid = self.name_id
        if s.long_ops and nid in s.long_ops and self._begin == S.OP_BEGIN:  # calls alternate window kinds
            st = s.thread_state()
            if not st.ops and st.thread == s.main_tid:
                s.long_op_entry(nid)  # may switch first: the whole call runs in the new window
        ts = s.clock()
        if s.nvtx_pop is not None:
            s.nvtx_pop()
        st = s.thread_state()
        if self._begin == S.OP_BEGIN:
            stack = st.ops
            if not stack and st.thread == s.main_tid:
                s.top_begin_ns = ts
            n = st.open_names.get(nid, 0)
            st.open_names[nid] = n + 1
            flags = S.FLAG_RECURSIVE if n else 0
        else:
            stack = st.phases
            flags = 0
        inst = next(s.ids)
        s.events.append((ts, st.thread, self._begin, inst, stack[-1][0] if stack else -1, nid, flags))
        stack.append((inst, nid))
        if s.nvtx_push is not None:
            s.nvtx_push(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        s = _active
        if s is None:
            return
        ts = s.clock()
        if s.nvtx_pop is not None:
            s.nvtx_pop()
        st = s.thread_state()
        nid = self.name_id
        if self._begin == S.OP_BEGIN:
            ops = st.ops
            if ops and ops[-1][1] == nid:  # the common case, inlined: closing the innermost scope
                inst = ops.pop()[0]
                n = st.open_names[nid] - 1
                if n:
                    st.open_names[nid] = n
                else:
                    del st.open_names[nid]
                s.events.append((ts, st.thread, S.OP_END, inst, ops[-1][0] if ops else -1, nid, 0))
                if not ops and st.thread == s.main_tid:
                    if ts - s.top_begin_ns >= s.long_op_ns:
                        s.long_op_done(nid)  # before a switch due now: the kind the call ran in
                    elif s.long_ops:
                        s.long_ops.pop(nid, None)  # its last call was short: no longer alternated
            else:
                _close_stack(s, st, ops, nid, S.OP_END, ts)
            if ts >= s.window_due_ns and st.thread == s.main_tid:
                s.switch_window()
        else:
            _close_stack(s, st, st.phases, nid, S.PHASE_END, ts)
        if ts >= s.tick_due_ns:
            s.run_tick(ts)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        kind = "scope" if self._begin == S.OP_BEGIN else "phase"
        return f"rlscope.{kind}({self.name!r})"


class _Category:
    """A CPU category boundary pair (simulator, backend, cuda_api); innermost wins."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code

    def __enter__(self) -> _Category:
        s = _active
        if s is not None:
            category_enter(s, self.code)
        return self

    def __exit__(self, *exc: object) -> None:
        s = _active
        if s is not None:
            category_exit(s, self.code)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def category_enter(s: Session, code: int) -> None:
    """Record entering CPU category ``code`` on this thread (used by collectors too)."""
    if s is _lean_session:
        _lean.category_enter(code)
        return
    ts = s.clock()
    st = s.thread_state()
    cats = st.cats
    s.events.append((ts, st.thread, S.CAT_BEGIN, code, cats[-1] if cats else categories.PYTHON, -1, 0))
    cats.append(code)


def category_exit(s: Session, code: int) -> None:
    """Record leaving CPU category ``code``; categories left open inside it are closed too."""
    if s is _lean_session:
        _lean.category_exit(code)
        return
    ts = s.clock()
    st = s.thread_state()
    cats = st.cats
    if code not in cats:
        return
    append = s.events.append
    while cats:
        c = cats.pop()
        parent = cats[-1] if cats else categories.PYTHON
        append((ts, st.thread, S.CAT_END, c, parent, -1, 0 if c == code else S.FLAG_FORCED_CLOSE))
        if c == code:
            return


_scopes: dict[str, _Scope] = {}
_phases: dict[str, _Scope] = {}


def scope(name: str | Callable[..., Any]) -> _Scope:
    """An operation: ``with rlscope.scope("inference"):`` or ``@rlscope.scope("inference")``.

    Scopes nest per thread; exclusive time goes to the innermost one. Exceptions propagate
    unchanged and the scope still closes. ``@rlscope.scope`` with no name uses the function's name.
    """
    if callable(name):
        return scope(name.__qualname__)(name)  # type: ignore[return-value]
    sc = _scopes.get(name)
    if sc is None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"rlscope.scope needs a non-empty str name, got {name!r}")
        sc = _scopes.setdefault(name, _Scope(name, S.OP_BEGIN))
    return sc


def phase(name: str) -> _Scope:
    """A coarse stage of the run (``training``, ``evaluation``); operations are reported per phase."""
    ph = _phases.get(name)
    if ph is None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"rlscope.phase needs a non-empty str name, got {name!r}")
        ph = _phases.setdefault(name, _Scope(name, S.PHASE_BEGIN))
    return ph


_auto: dict[tuple[str, int], _Scope] = {}


def auto_scope(name: str, kind: int = S.OP_BEGIN) -> _Scope:
    """An automatic operation (``kind`` OP_BEGIN) or phase (PHASE_BEGIN): recorded as a scope or
    phase is, under a name id of its own that the trace marks as automatic (rlscope/runtime/auto_ops.py)."""
    sc = _auto.get((name, kind))
    if sc is None:
        sc = _auto.setdefault((name, kind), _Scope(name, kind, auto=True))
    return sc


_SIMULATOR = _Category(categories.SIMULATOR)


def simulator(fn: F | None = None) -> Any:
    """Mark code as simulator time: ``with rlscope.simulator():`` or ``@rlscope.simulator``."""
    if fn is not None:
        return _SIMULATOR(fn)
    return _SIMULATOR


_WAITING = _Category(categories.WAITING)


def waiting(fn: F | None = None) -> Any:
    """Mark a blocking wait for the next command or task as waiting, not work: ``with
    rlscope.waiting(): cmd = conn.recv()`` in a worker loop of one's own. Outside operations it is
    the ``[waiting]`` row, apart from ``[unannotated]``; vector-env and Pool workers are marked
    already (rlscope/runtime/waits.py)."""
    if fn is not None:
        return _WAITING(fn)
    return _WAITING
