"""GPU time by ``jax.named_scope``: the operations inside one jitted function (``device_scopes``).

A jitted JAX update is one call on the CPU; its kernels all go to the operation that called it
(rlscope/analysis/gpu.py, by correlation to the launching CUDA call). Inside it, each kernel carries
the named scopes of the code it came from, in the HLO metadata recorded per executable
(collectors/jax_hlo.py, ``hlo.arrows``). Here each kernel is joined to its instruction by name:

- **by name**: the kernel's name is an instruction's of a recorded module (XLA names fusions'
  kernels after them; a second kernel of one instruction gets a ``_1`` suffix). Where several modules
  hold an instruction of that name under different scopes, the module compiled last before the
  kernel's launch is taken;
- **by neighbour**: a kernel XLA did not name (a cuBLAS, cuDNN or CUB kernel of a library call) takes
  the scope of the kernels joined by name just before and just after it in the same operation call
  (CUPTI's correlation order) where the two agree: a library call runs between the fusions that make
  its operands and use its result, in the same scope. Where they differ it is in no named scope;
- otherwise it is in no named scope. Copies and memsets carry no name: no named scope.

Kernels launched while their thread compiles (XLA's autotuning runs candidate kernels) are
compilation, not the program's: they are counted apart (``compiling_s``).

Figures are per call: GPU tracing runs in the full windows and detail stretches only (the
correction's windows, docs/long-runs.md), so each (phase, operation)'s GPU seconds are divided by the
calls whose kernels were recorded, and stand for the run multiplied by its calls in the trace. Kernel
time is CUPTI's, as in the rest of the GPU figures; rlscope adds no time to a kernel. A scope is
reported at its outermost name (``backprop`` for ``backprop/inference``: a gradient taken in a
``backprop`` scope through a policy's ``inference`` scope is backprop's), with the full paths below it.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any, TypeVar

import numpy as np

from rlscope import categories
from rlscope.analysis import gpu
from rlscope.analysis.timeline import compile_intervals
from rlscope.trace import schema as S
from rlscope.trace.reader import ProcessTrace, name_of

NO_SCOPE = "[no named scope]"
TOP_ROWS = 20
Key = tuple[str, str, str]  # (phase, operation, scope path)
Op = tuple[str, str]  # (phase, operation)
V = TypeVar("V")
_SUFFIX = re.compile(r"_{1,2}\d+$")  # a kernel's pass (sort_14_1__2) or a second kernel (_1)


def _counter() -> collections.Counter:
    return collections.Counter()


@dataclasses.dataclass
class DeviceScopes:
    """GPU time of one process (or a run) by (phase, operation, scope path), and how kernels were joined."""

    seconds: collections.Counter[Key] = dataclasses.field(default_factory=_counter)  # recorded
    kernels: collections.Counter[Key] = dataclasses.field(default_factory=_counter)
    recorded_calls: collections.Counter[Op] = dataclasses.field(default_factory=_counter)  # with kernels
    calls: collections.Counter[Op] = dataclasses.field(default_factory=_counter)  # in the trace
    by_name: int = 0
    by_neighbour: int = 0
    unnamed: int = 0
    compiling_s: float = 0.0

    def add(self, other: DeviceScopes) -> None:
        for mine, theirs in (
            (self.seconds, other.seconds),
            (self.kernels, other.kernels),
            (self.recorded_calls, other.recorded_calls),
            (self.calls, other.calls),
        ):
            mine.update(theirs)
        self.by_name += other.by_name
        self.by_neighbour += other.by_neighbour
        self.unnamed += other.unnamed
        self.compiling_s += other.compiling_s

    def per_call(self, key: Key) -> float:
        """GPU seconds of one call of the key's operation in that scope."""
        return self.seconds[key] / max(self.recorded_calls[key[:2]], 1)

    def run_seconds(self, key: Key) -> float:
        """The key's GPU seconds over every call of its operation in the trace."""
        op = key[:2]
        return self.per_call(key) * max(self.calls[op], self.recorded_calls[op])


def _instruction_paths(proc: ProcessTrace) -> dict[str, list[tuple[int, str]]]:
    """kernel name -> [(compiled_ns, scope path)], sorted by compile time; the times on the joined
    clock of the launches (``hlo.arrows`` is read whole, on the process's own clock)."""
    t = proc.hlo
    out: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    compiled = t.column("compiled_ns").to_numpy().astype(np.int64, copy=False)
    if proc.gaps is not None and len(proc.gaps):
        compiled = proc.gaps.map(compiled)
    columns = (t.column("kernel").to_pylist(), t.column("path").to_pylist(), compiled.tolist())
    for k, p, c in zip(*columns, strict=True):
        path = name_of(proc.names, int(p), "") if p is not None and p >= 0 else ""
        out[name_of(proc.names, int(k), "")].append((int(c), path))
    for v in out.values():
        v.sort()
    return out


def instruction_of(instructions: dict[str, V], kernel: str) -> V | None:
    """What ``instructions`` (keyed by the kernel names XLA gives them) holds for ``kernel``: its own
    name, else without a pass's or a second kernel's suffix (``sort_14_1__2``, then ``sort_14_1``)."""
    found = instructions.get(kernel)
    while found is None and _SUFFIX.search(kernel):
        kernel = _SUFFIX.sub("", kernel)
        found = instructions.get(kernel)
    return found


def _paths_by_name(proc: ProcessTrace, names: np.ndarray, launched: np.ndarray) -> list[str | None]:
    """Each kernel's scope path by name ('' : an instruction in no scope), None where none matches."""
    paths = _instruction_paths(proc)
    memo: dict[int, list[tuple[int, str]] | None] = {}
    out: list[str | None] = []
    for nid, t in zip(names.tolist(), launched.tolist(), strict=True):
        if nid not in memo:
            memo[nid] = instruction_of(paths, name_of(proc.names, int(nid), ""))
        cands = memo[nid]
        if not cands:
            out.append(None)
        elif len(cands) == 1 or len({p for _, p in cands}) == 1:
            out.append(cands[0][1])
        else:  # the module compiled last before this launch
            before = [p for c, p in cands if c <= t]
            out.append(before[-1] if before else cands[0][1])
    return out


def _while_compiling(proc: ProcessTrace, tl: Any, thread: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Whether each launch (thread, time) happened inside a compilation of its thread."""
    out = np.zeros(len(when), bool)
    if proc.compile is None or not proc.compile.num_rows:
        return out
    c_thread, c_start, c_end = gpu.union_per_thread(
        *compile_intervals(proc.compile, tl.start_ns, tl.end_ns, proc.gaps)
    )
    for t in np.unique(c_thread).tolist():
        sel = c_thread == t
        s, e = c_start[sel], c_end[sel]
        mine = thread == t
        i = np.searchsorted(s, when[mine], side="right") - 1
        out[mine] = (i >= 0) & (when[mine] < e[np.maximum(i, 0)])
    return out


def _calls(tl: Any, names: list[str]) -> collections.Counter[Op]:
    """Each (phase, operation)'s calls in the trace (its instances)."""
    begins = np.flatnonzero(tl.kind == S.OP_BEGIN)
    inst = tl.id[begins]
    inst_name = np.append(tl.inst_name, -1)
    ph = inst_name[tl.phase[begins]]
    op = tl.inst_name[inst]
    out: collections.Counter[Op] = collections.Counter()
    for (p, o), n in collections.Counter(zip(ph.tolist(), op.tolist(), strict=True)).items():
        out[(name_of(names, p, categories.NO_PHASE), name_of(names, o, categories.UNANNOTATED))] += n
    return out


def _neighbours(
    by_name: list[str | None], is_kernel: np.ndarray, op: np.ndarray, out: DeviceScopes
) -> list[str]:
    """Each record's path: its own by name; for a kernel no instruction names, the path of the kernels
    joined by name just before and just after it in the same operation call, where they agree (or the
    one there is, at the call's start or end); else none. Counts the joins in ``out``."""
    n = len(by_name)
    before: list[tuple[int, str] | None] = [None] * n
    after: list[tuple[int, str] | None] = [None] * n
    last: tuple[int, str] | None = None
    for i in range(n):
        before[i] = last
        if is_kernel[i] and by_name[i] is not None:
            last = (int(op[i]), by_name[i])
    last = None
    for i in range(n - 1, -1, -1):
        after[i] = last
        if is_kernel[i] and by_name[i] is not None:
            last = (int(op[i]), by_name[i])
    paths: list[str] = []
    for i in range(n):
        if not is_kernel[i]:
            paths.append("")  # copies and memsets, and kernels launched while compiling
            continue
        if by_name[i] is not None:
            out.by_name += 1
            paths.append(by_name[i])
            continue
        inst = int(op[i])
        sides = {s[1] for s in (before[i], after[i]) if s is not None and s[0] == inst and inst >= 0}
        if len(sides) == 1:
            out.by_neighbour += 1
            paths.append(sides.pop())
        else:
            out.unnamed += 1
            paths.append("")
    return paths


def attribute(proc: ProcessTrace, joined: gpu.JoinedTimeline) -> DeviceScopes | None:
    """A process's GPU time by named scope; None without recorded HLO or GPU records."""
    tl, api, records = joined
    if proc.hlo is None or not proc.hlo.num_rows or records is None or api is None or not len(records.start):
        return None
    launch = gpu.launching_call(api, records)
    op, phase = gpu.attribute(tl, api, records, launch)
    thread, when = gpu.launch_points(tl, api, records, launch)
    order = np.lexsort((records.start, records.correlation))
    op, phase, thread, when = op[order], phase[order], thread[order], when[order]
    is_kernel = records.category[order] == categories.GPU_KERNEL
    compiling = _while_compiling(proc, tl, thread, when)
    by_name = _paths_by_name(proc, records.name[order], when)
    dur = (records.end - records.start)[order]
    out = DeviceScopes(calls=_calls(tl, proc.names))
    inst_name = np.append(tl.inst_name, -1)
    paths = _neighbours(by_name, is_kernel & ~compiling, op, out)
    seen: set[tuple[int, Op]] = set()
    ops: dict[tuple[int, int], Op] = {}  # (phase, operation) name ids -> names
    for i in range(len(order)):
        if compiling[i]:
            out.compiling_s += float(dur[i]) / 1e9
            continue
        inst = int(op[i])
        ids = (int(inst_name[phase[i]]), int(inst_name[inst]))
        key_op = ops.get(ids)
        if key_op is None:
            key_op = ops[ids] = (
                name_of(proc.names, ids[0], categories.NO_PHASE),
                name_of(proc.names, ids[1], categories.UNANNOTATED),
            )
        key = (*key_op, paths[i])
        out.seconds[key] += float(dur[i]) / 1e9
        out.kernels[key] += int(is_kernel[i])
        if inst >= 0 and (inst, key_op) not in seen:
            seen.add((inst, key_op))
            out.recorded_calls[key_op] += 1
    return out


def summary(scopes: DeviceScopes | None) -> dict[str, Any] | None:
    """The summary's ``device_scopes``: GPU seconds per outermost scope (over the run, and per call of the
    operations that launched them), and per (phase, operation, path)."""
    if scopes is None or not any(path for (_, _, path) in scopes.seconds):
        return None
    top: collections.Counter[str] = collections.Counter()
    top_per_call: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    top_kernels: collections.Counter[str] = collections.Counter()
    for key in scopes.seconds:
        name = key[2].split("/")[0] or NO_SCOPE
        top[name] += scopes.run_seconds(key)
        top_per_call[name][key[1]] += scopes.per_call(key)
        top_kernels[name] += scopes.kernels[key]
    total = sum(top.values())
    rows = sorted(scopes.seconds, key=lambda k: -scopes.run_seconds(k))[:TOP_ROWS]
    joined = scopes.by_name + scopes.by_neighbour + scopes.unnamed
    return {
        "source": "XLA HLO metadata (jax.named_scope), kernels joined by name",
        "gpu_s": total,
        "kernels": joined,
        "joined_by_name": scopes.by_name / joined if joined else 0.0,
        "joined_by_neighbour": scopes.by_neighbour / joined if joined else 0.0,
        "compiling_s": scopes.compiling_s,
        "scopes": {
            name: {
                "gpu_s": s,
                "share": s / total if total else 0.0,
                "kernels": int(top_kernels[name]),
                "per_call_s": dict(top_per_call[name]),
            }
            for name, s in top.most_common()
        },
        "rows": [
            {
                "phase": k[0],
                "operation": k[1],
                "path": k[2] or NO_SCOPE,
                "gpu_s": scopes.run_seconds(k),
                "per_call_s": scopes.per_call(k),
                "calls_recorded": int(scopes.recorded_calls[k[:2]]),
                "kernels": int(scopes.kernels[k]),
            }
            for k in rows
        ],
    }
