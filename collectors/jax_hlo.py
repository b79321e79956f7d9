"""JAX executables' kernels and the ``jax.named_scope`` each belongs to, from XLA's optimized HLO.

A jitted training loop is one XLA executable: inside it the CPU sees one call, and the only trace
of the program's ``jax.named_scope("inference")`` / ``("simulation")`` / ``("backprop")`` is the
metadata XLA keeps on each HLO instruction (``op_name="jit(update)/while/body/backprop/..."``). XLA
names each GPU kernel after the instruction that launches it (a fusion ``loop_add_fusion.1`` runs as
the kernel ``loop_add_fusion_1``), so the CUPTI records of the kernels can be joined to those names
(rlscope/analysis/device_scopes.py). This collector writes, for every executable the process builds
or loads, one row per kernel-launching instruction: its module, its kernel name and its named-scope
path (``hlo.arrows``, rlscope/trace/schema.py).

Where: jax has no public hook that sees the executables of implicit ``jax.jit`` calls (the stages
API sees only those the program compiles through ``.lower().compile()``), so the collector wraps
``jax._src.compiler.compile_or_get_cached``, the one function every compilation and persistent-cache
load goes through (jax 0.4.30 to 0.10). Where it is missing, one warning and no scopes; the run goes
on. The wrapper only keeps the executable; its HLO text is printed and parsed on the writer's thread
at the next flush (``TraceWriter.before_flush``), not on the thread that compiled.
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from rlscope import _imports, annotate
from rlscope.errors import warn_once
from rlscope.trace import schema as S

# name-stack components jax adds for its own structure (loops, calls, conditionals, checkpoints): not
# the program's scopes. Transformations wrap a scope's name (``jvp(backprop)``, ``transpose(...)``)
# and are unwrapped; a nested ``jit(f)`` / ``pjit(f)`` names a function, not a scope.
STRUCTURE = frozenset(
    {
        "while",
        "body",
        "cond",
        "closed_call",
        "core_call",
        "eval_jaxpr",
        "scan",
        "remat",
        "checkpoint",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "pure_callback",
        "shard_map",
        "cond_fun",
        "body_fun",
    }
)
_BRANCH = re.compile(r"^branch_\d+(_fun)?$")
# a function's qualified name (``make_update.<locals>.epoch``): jax names a loop's or a branch's body
# after the function it ran, which is the code's structure, not a scope the program named
_QUALNAME = re.compile(r"[.<]")
_WRAPPED = re.compile(r"^(\w+)\((.*)\)$")
_CALLS = ("jit", "pjit", "xla_pmap", "pmap", "xla_call")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
# ``name = type opcode(operands)``; a type is a shape (``f32[4,8]{1,0}``) or a tuple of them, neither of
# which holds a word directly followed by '(': the first such word is the opcode
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*[^=]*?\s([a-z][\w\-]*)\(")
_CALLED = re.compile(r"(calls|to_apply)=%?([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
# instructions that launch no kernel of their own
_NO_KERNEL = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while", "conditional", "call"}
)


def scope_path(op_name: str) -> str:
    """The program's named scopes in an HLO ``op_name``, outermost first, '/'-joined ('' when none).

    >>> scope_path("jit(update)/while/body/closed_call/backprop/transpose(jvp(inference))/dot_general")
    'backprop/inference'
    """
    parts = op_name.split("/")[:-1]  # the last part is the primitive (dot_general, add, ...)
    out = []
    for part in parts:
        while True:
            m = _WRAPPED.match(part)
            if m is None or m.group(1) in _CALLS:
                break
            part = m.group(2)  # a transformation of a scope: jvp(backprop) -> backprop
        if (
            not part
            or _WRAPPED.match(part)
            or part in STRUCTURE
            or _BRANCH.match(part)
            or _QUALNAME.search(part)
        ):
            continue
        out.append(part)
    return "/".join(out)


def kernel_name(instruction: str) -> str:
    """The GPU kernel XLA makes of an HLO instruction (its name, as LLVM function names allow)."""
    return re.sub(r"[^\w]", "_", instruction)


def kernels(hlo_text: str) -> Iterator[tuple[str, str]]:
    """(kernel name, named-scope path) of each instruction of an HLO module's text that may launch a
    kernel of its name, each name once.

    First the instructions of the computations that run on their own (the entry, loop bodies, command
    buffers); then those inside a fusion's or wrapper's computation (``calls=``) that carry a scope of
    their own: a fusion's kernel has the fusion's name, but XLA names a few kernels after the
    instruction they emit from inside their wrapper (a sort's passes: ``sort_14_1``, ``sort_14_1__1``).
    A reduction's ``to_apply`` computation (a comparator, an adder) launches nothing."""
    called: set[str] = set()
    applied: set[str] = set()
    for line in hlo_text.splitlines():
        if "calls=" in line or "to_apply=" in line:
            m = _INSTRUCTION.match(line)
            if m is not None and m.group(2) not in ("while", "conditional", "call"):
                for kind, name in _CALLED.findall(line):
                    (called if kind == "calls" else applied).add(name)
    seen: set[str] = set()
    fused: list[tuple[str, str]] = []
    inside = None
    for line in hlo_text.splitlines():
        if not line.startswith((" ", "\t")):
            m = _COMPUTATION.match(line)
            inside = m.group(1) if m is not None else None
            continue
        if inside is None or inside in applied:
            continue
        m = _INSTRUCTION.match(line)
        if m is None or m.group(2) in _NO_KERNEL:
            continue
        op = _OP_NAME.search(line)
        row = kernel_name(m.group(1)), scope_path(op.group(1)) if op is not None else ""
        if inside in called:
            if op is not None and "/" in op.group(1):  # fusions' parts name ops without a path at times
                fused.append(row)
        elif row[0] not in seen:
            seen.add(row[0])
            yield row
    for row in fused:
        if row[0] not in seen:
            seen.add(row[0])
            yield row


# the recorder of the running session; the wrapper stays installed once made and writes to it
_active: JaxHloRecorder | None = None
_wrapped = False
_wrap_lock = threading.Lock()


def _wrap(jax: Any) -> bool:
    """Wrap jax's compile-or-load function once per process; False where this jax has none."""
    global _wrapped
    with _wrap_lock:
        if _wrapped:
            return True
        try:
            from jax._src import compiler
        except ImportError:
            return False
        original = getattr(compiler, "compile_or_get_cached", None)
        if original is None:
            return False

        def compile_or_get_cached(*args: Any, **kwargs: Any) -> Any:
            executable = original(*args, **kwargs)
            recorder = _active
            if recorder is not None:
                recorder.pending.append((executable, recorder.session.clock()))
            return executable

        compile_or_get_cached.__wrapped__ = original  # type: ignore[attr-defined]
        compiler.compile_or_get_cached = compile_or_get_cached
        _wrapped = True
        return True


class JaxHloRecorder:
    """Writes ``hlo.arrows`` rows for each executable the session's process compiles, from jax's import."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.pending: collections.deque[tuple[Any, int]] = collections.deque()
        self.rows: Any = None  # the stream's queue, made when jax is imported

    def start(self) -> JaxHloRecorder:
        _imports.when_imported("jax", self._begin)
        return self

    def _begin(self, jax: Any) -> None:
        global _active
        if annotate._active is not self.session:
            return
        if not _wrap(jax):
            warn_once(
                f"jax {getattr(jax, '__version__', '?')} has no compile_or_get_cached: "
                "named scopes inside jitted code are not recorded"
            )
            return
        schema = S.columns_schema(S.HLO_COLUMNS_DOC, collector="jax.hlo")
        self.rows = self.session.writer.add_stream(S.HLO_FILE, schema)
        self.session.writer.before_flush(self.drain)
        _active = self

    def drain(self) -> None:
        """Parse the executables compiled since the last flush (on the writer's thread)."""
        while self.pending:
            executable, when = self.pending.popleft()
            try:
                modules = executable.hlo_modules()
            except Exception:  # an executable that cannot print its HLO: no scopes for its kernels
                continue
            for module in modules:
                module_id = annotate.intern(module.name)
                for kernel, path in kernels(module.to_string()):
                    path_id = annotate.intern(path) if path else -1
                    self.rows.append((module_id, annotate.intern(kernel), path_id, when))

    def stop(self) -> None:
        global _active
        _imports.cancel("jax", self._begin)
        if _active is self:
            _active = None
        if self.rows is not None:
            self.drain()

    def __repr__(self) -> str:
        return f"JaxHloRecorder({'recording' if self.rows is not None else 'waiting for jax'})"


def start_for(session: Any, started: Sequence[Any]) -> JaxHloRecorder:
    """The registry's factory (rlscope/collectors/registry.py): waits for the program to import jax."""
    return JaxHloRecorder(session).start()
