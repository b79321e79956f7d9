"""Scope and category boundaries in C (``scope_native.c``): the hot path of every profiled loop.

A scope pair through annotate.py's Python methods costs ~1 µs in a tight loop and 3.6-4.0 µs inside
a real RL loop on a 2-core CPU machine, where the job's own work evicts the interpreter's caches between
boundaries (timed inside the eager simulator's loop). The C methods do the same work in a few hundred bytes of
machine code. They are installed on ``annotate._Scope`` and ``annotate._Category`` (every scope
object, old or new, takes them) when a session or validate's timers start.

The C file is compiled on first use with ``cc`` against this Python's headers (under a second) and
cached (collectors/native_build.py: ``$RLSCOPE_CACHE_DIR/build``), keyed by the source, the
Python build and the compiler. No compiler, no headers or a failed build: a one-line warning and
the Python methods stay (``scope_recorder()`` says which is in use; the trace metadata records it,
and calibrations are keyed by it). ``RLSCOPE_NATIVE_SCOPES=0`` keeps the Python methods.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import itertools
import os
import sys
import sysconfig
import time
import warnings
from pathlib import Path
from typing import Any

from rlscope import annotate, categories
from rlscope.collectors import native_build
from rlscope.trace import schema as S

SOURCE = Path(__file__).with_name("scope_native.c")
ABI_VERSION = 6
MODULE = "rlscope_scope_native"
ENV = "RLSCOPE_NATIVE_SCOPES"
LEAN_ENV = "RLSCOPE_LEAN_SCOPES"  # 0: sessions keep the full C path (benchmarks comparing the two)

_module: Any = None
_failed: str | None = None  # why the native methods are not available (asked once per process)
_python_methods = {
    annotate._Scope: (annotate._Scope.__enter__, annotate._Scope.__exit__),
    annotate._Category: (annotate._Category.__enter__, annotate._Category.__exit__),
}


class NativeScopesUnavailable(RuntimeError):
    """The C scope methods cannot be built or loaded; the message is one line saying why."""


def build() -> Path:
    """Compile (once, cached: collectors/native_build.py) and return the extension's path."""
    cc = native_build.find_compiler("cc", "gcc")
    if cc is None:
        raise NativeScopesUnavailable("no C compiler (cc)")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise NativeScopesUnavailable(f"no Python headers (Python.h) in {include}")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = native_build.cache_key(SOURCE.read_bytes(), sys.version, include, cc)
    out = native_build.build_dir() / f"scope_native-{key}{suffix}"

    def command(tmp: str) -> list[str]:
        return [str(cc), "-O2", "-shared", "-fPIC", "-std=c11", f"-I{include}", str(SOURCE), "-o", tmp]

    try:
        return native_build.build(out, command, "the native scope recorder", timeout_s=120)
    except native_build.BuildError as e:
        raise NativeScopesUnavailable(str(e)) from None


def load() -> Any:
    """Build if needed and import the extension (once per process)."""
    global _module
    if _module is not None:
        return _module
    path = build()
    try:
        loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
        spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
        assert spec is not None
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
    except (ImportError, OSError) as e:
        raise NativeScopesUnavailable(f"cannot load the native scope recorder: {e}") from None
    if mod.abi_version() != ABI_VERSION:
        raise NativeScopesUnavailable("native scope recorder: version mismatch with its Python side")
    _module = mod
    return mod


def wanted() -> bool:
    """Whether the native methods are asked for (``RLSCOPE_NATIVE_SCOPES=0`` says no)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def lean_wanted() -> bool:
    """Whether sessions bind to the lean C path (``RLSCOPE_LEAN_SCOPES=0`` says no)."""
    return os.environ.get(LEAN_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def calibration_key() -> str:
    """The ``scopes`` field of the calibration key: ``native-<ABI>`` (the lean path),
    ``native-full-<ABI>`` (the full C path) or ``python``. The C methods' version is part of it: a
    change in what they do per boundary (ABI 5: two clock reads more, to measure themselves; ABI 6:
    the lean path) changes what they cost, so older calibrations do not apply."""
    if available() != "native":
        return "python"
    return f"native-{ABI_VERSION}" if lean_wanted() else f"native-full-{ABI_VERSION}"


def bind(session: Any) -> Any:
    """Bind ``session`` (started, its events an EventBuffer) to the lean C path; returns the
    module (the session's handle: set_due, set_nvtx, close_open, unbind), or None when the session
    keeps the full path (Python methods, ``RLSCOPE_LEAN_SCOPES=0``, another kind of queue)."""
    if _module is None or scope_recorder() != "native" or not lean_wanted():
        return None
    if not isinstance(session.events, _module.EventBuffer):
        return None
    session.ids = _module.bind(
        session,
        session.events,
        session.clock,
        session.long_ops,
        session.main_tid,
        session.window_due_ns,
        session.tick_due_ns,
        session.long_op_ns,
        next(session.ids),
    )
    return _module


def due_attribute(name: str) -> property:
    """A session attribute the boundaries compare with at every scope exit, mirrored into the C
    globals of the lean scope path while the session is bound to it (scope_native.c), so
    a boundary there reads an int instead of the session's dictionary. The value stays in the
    instance dictionary under its own name: the full C path reads it there."""

    def get(self: Any) -> int:
        return self.__dict__[name]

    def set_(self: Any, value: int) -> None:
        d = self.__dict__
        d[name] = value
        if self._lean is not None:
            self._lean.set_due(d["window_due_ns"], d["tick_due_ns"], d["long_op_ns"])

    return property(get, set_)


def bind_lean(session: Any) -> None:
    """Scope boundaries take the C lean path from here on (scope_native.c): ``session``'s per-thread
    stacks, instance ids and due times held in C, its ``_lean`` the module. Needs the native methods
    and their event buffer; the clock is the one set now (a test's fake clock is called from C)."""
    lean = bind(session)
    if lean is None:
        return
    session._lean = lean
    annotate._lean, annotate._lean_session = lean, session
    if session.nvtx_push is not None:
        lean.set_nvtx(session.nvtx_push, session.nvtx_pop)


def unbind_lean(session: Any) -> None:
    """Back to the session's Python state (its stop, a forked child): ids count again from 0."""
    if session._lean is None:
        return
    session._lean.unbind()
    session._lean = None
    if annotate._lean_session is session:
        annotate._lean, annotate._lean_session = None, None
    session.ids = itertools.count()


def available() -> str:
    """The recorder a session started now would use: ``native`` (built, loaded) or ``python``.

    Never raises: when the extension cannot be had, warns once (per process) and says ``python``.
    """
    global _failed
    if not wanted():
        return "python"
    if _failed is not None:
        return "python"
    t0 = time.perf_counter()
    try:
        load()
    except Exception as e:  # never stop a session from starting: the Python methods work everywhere
        _failed = str(e) if isinstance(e, NativeScopesUnavailable) else f"{type(e).__name__}: {e}"
        warnings.warn(f"rlscope: scopes use the Python recorder (slower): {e}", stacklevel=2)
        return "python"
    if time.perf_counter() - t0 > 1.0:
        print(
            f"rlscope: built the native scope recorder ({time.perf_counter() - t0:.1f} s, cached)",
            file=sys.stderr,
        )
    return "native"


def install() -> str:
    """Put the C methods on annotate's classes (idempotent), or the Python ones back when the
    native recorder is not wanted or cannot be had; returns the recorder in use. Never raises."""
    global _failed
    if available() != "native":
        uninstall()
        return "python"
    if scope_recorder() == "native":
        return "native"
    try:
        mod = load()
        scope_enter, scope_exit = _python_methods[annotate._Scope]
        cat_enter, cat_exit = _python_methods[annotate._Category]
        kinds = (S.OP_BEGIN, S.OP_END, S.CAT_BEGIN, S.CAT_END, S.FLAG_RECURSIVE, S.FLAG_FORCED_CLOSE)
        mod.install(
            annotate._Scope,
            annotate._Category,
            vars(annotate),
            time.perf_counter_ns,
            scope_enter,
            scope_exit,
            annotate._close_stack,
            cat_enter,
            cat_exit,
            (*kinds, categories.PYTHON),
        )
    except (TypeError, ValueError) as e:  # annotate's classes changed without the C side
        _failed = str(e)
        warnings.warn(f"rlscope: scopes use the Python recorder (slower): {e}", stacklevel=2)
        uninstall()
        return "python"
    return "native"


def event_buffer() -> Any:
    """A new native event queue for a session's writer (rlscope.trace.writer); needs load()."""
    return load().EventBuffer()


def forget_thread() -> None:
    """Drop the calling thread's cached references to the session just stopped (at a session's stop; other
    threads' caches are replaced at their next boundary under another session)."""
    if _module is not None:
        _module.forget_thread()


def uninstall() -> None:
    """Back to annotate.py's Python methods (tests, benchmarks comparing the two)."""
    for cls, (enter, exit_) in _python_methods.items():
        cls.__enter__ = enter  # type: ignore[method-assign]
        cls.__exit__ = exit_  # type: ignore[method-assign]
    forget_thread()


def scope_recorder() -> str:
    """Which methods annotate's scopes run now: ``native`` or ``python``."""
    native = annotate._Scope.__dict__["__enter__"] is not _python_methods[annotate._Scope][0]
    return "native" if native else "python"
