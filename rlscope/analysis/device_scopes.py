"""GPU time by ``jax.named_scope``: the operations inside one jitted function (``device_scopes``).

A jitted JAX update is one call on the CPU; its kernels all go to the operation that called it
(rlscope/analysis/gpu.py, by correlation to the launching CUDA call). Inside it, each kernel carries
the named scopes of the code it came from, in the HLO metadata recorded per executable
(collectors/jax_hlo.py, ``hlo.arrows``). Here each kernel is joined to its instruction by name:

- **by name**: the kernel's name is an instruction's of a recorded module (XLA names fusions'
  kernels after them). Where several modules hold an instruction of that name under different scopes,
  the module compiled last before the kernel's launch is taken;
- **by neighbour**: a kernel XLA did not name (a cuBLAS or cuDNN kernel of a library call) takes the
  scope of the kernel launched just before it by the same operation call (CUPTI's correlation order):
  a library call runs between the fusions that make its operands and use its result, in the same scope;
- otherwise it is in no named scope. Copies and memsets carry no name: no named scope.

Kernel time is CUPTI's, as in the rest of the GPU figures; it is not corrected (rlscope adds no time
to a kernel). A scope is reported at its outermost name (``backprop`` for ``backprop/inference``: a
gradient taken in a ``backprop`` scope through a policy's ``inference`` scope is backprop's), with the
full paths below it.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np

from rlscope import categories
from rlscope.analysis import gpu
from rlscope.trace.reader import ProcessTrace, name_of

NO_SCOPE = "[no named scope]"
TOP_ROWS = 20
Key = tuple[str, str, str]  # (phase, operation, scope path)


@dataclasses.dataclass
class DeviceScopes:
    """GPU time of one process (or a run) by (phase, operation, scope path), and how kernels were joined."""

    seconds: collections.Counter[tuple[str, str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    kernels: collections.Counter[tuple[str, str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    by_name: int = 0
    by_neighbour: int = 0
    unnamed: int = 0

    def add(self, other: DeviceScopes) -> None:
        self.seconds.update(other.seconds)
        self.kernels.update(other.kernels)
        self.by_name += other.by_name
        self.by_neighbour += other.by_neighbour
        self.unnamed += other.unnamed


def _instruction_paths(proc: ProcessTrace) -> dict[int, list[tuple[int, str]]]:
    """kernel-name id -> [(compiled_ns, scope path)], sorted by compile time."""
    t = proc.hlo
    out: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
    for k, p, c in zip(
        t.column("kernel").to_pylist(),
        t.column("path").to_pylist(),
        t.column("compiled_ns").to_pylist(),
        strict=True,
    ):
        out[int(k)].append((int(c), name_of(proc.names, int(p), "") if p is not None and p >= 0 else ""))
    for v in out.values():
        v.sort()
    return out


def _kernel_paths(proc: ProcessTrace, names: np.ndarray, launched: np.ndarray) -> list[str | None]:
    """Each kernel's scope path by name ('' : an instruction in no scope), None where no instruction matches.

    The HLO rows name kernels with their own name ids; the GPU records with theirs (one names table per
    process, so equal strings share an id)."""
    paths = _instruction_paths(proc)
    out: list[str | None] = []
    for nid, t in zip(names.tolist(), launched.tolist(), strict=True):
        cands = paths.get(int(nid))
        if not cands:
            out.append(None)
        elif len(cands) == 1 or len({p for _, p in cands}) == 1:
            out.append(cands[0][1])
        else:  # the module compiled last before this launch
            before = [p for c, p in cands if c <= t]
            out.append(before[-1] if before else cands[0][1])
    return out


def attribute(proc: ProcessTrace, joined: gpu.JoinedTimeline) -> DeviceScopes | None:
    """A process's GPU time by named scope; None without recorded HLO or GPU records."""
    tl, api, records = joined
    if proc.hlo is None or not proc.hlo.num_rows or records is None or api is None or not len(records.start):
        return None
    launch = gpu.launching_call(api, records)
    op, phase = gpu.attribute(tl, api, records, launch)
    _, when = gpu.launch_points(tl, api, records, launch)
    inst_name = np.append(tl.inst_name, -1)
    order = np.lexsort((records.start, records.correlation))
    is_kernel = records.category[order] == categories.GPU_KERNEL
    by_name = _kernel_paths(proc, records.name[order], when[order])
    out = DeviceScopes()
    path: list[str] = []
    last: tuple[int, str] | None = None  # (operation instance, path) of the last kernel joined by name
    for i, row in enumerate(order.tolist()):
        found = by_name[i] if is_kernel[i] else ""
        if found is None and last is not None and last[0] == int(op[row]) and op[row] >= 0:
            found = last[1]
            out.by_neighbour += 1
        elif found is None:
            found = ""
            out.unnamed += 1
        elif is_kernel[i]:
            out.by_name += 1
            last = (int(op[row]), found)
        path.append(found)
    ph = inst_name[phase[order]]
    opn = inst_name[op[order]]
    dur = (records.end - records.start)[order]
    for p, o, s, d, k in zip(ph.tolist(), opn.tolist(), path, dur.tolist(), is_kernel.tolist(), strict=True):
        key = (
            name_of(proc.names, p, categories.NO_PHASE),
            name_of(proc.names, o, categories.UNANNOTATED),
            s,
        )
        out.seconds[key] += d / 1e9
        out.kernels[key] += int(k)
    return out


def scaled_like(scopes: DeviceScopes | None, raw: Any, corrected: Any) -> DeviceScopes | None:
    """``scopes`` with each (phase, operation)'s GPU seconds scaled as the correction scaled that
    operation's GPU time (``raw`` and ``corrected``: its breakdowns): where GPU tracing ran in full
    windows only, those stand for every instance (rlscope/overhead/correct/full_windows.py)."""
    if scopes is None or corrected is None:
        return scopes

    def by_op(b: Any) -> collections.Counter[tuple[str, str]]:
        out: collections.Counter[tuple[str, str]] = collections.Counter()
        g = b.gpu_time.to_pydict()
        for ph, op, sec in zip(g["phase"], g["operation"], g["seconds"], strict=True):
            out[(ph, op)] += sec
        return out

    before, after = by_op(raw), by_op(corrected)
    for key in list(scopes.seconds):
        r = before.get(key[:2], 0.0)
        if r > 0:
            scopes.seconds[key] *= after.get(key[:2], r) / r
    return scopes


def merged(parts: list[DeviceScopes | None]) -> DeviceScopes | None:
    """The run's device scopes from its processes' (None where none recorded any)."""
    got = [p for p in parts if p is not None]
    if not got:
        return None
    out = DeviceScopes()
    for p in got:
        out.add(p)
    return out


def summary(scopes: DeviceScopes | None) -> dict[str, Any] | None:
    """The summary's ``device_scopes``: GPU seconds per outermost scope, and per (phase, operation, path)."""
    if scopes is None or not any(path for (_, _, path) in scopes.seconds):
        return None
    top: collections.Counter[str] = collections.Counter()
    top_kernels: collections.Counter[str] = collections.Counter()
    for (_, _, path), s in scopes.seconds.items():
        top[path.split("/")[0] or NO_SCOPE] += s
    for (_, _, path), k in scopes.kernels.items():
        top_kernels[path.split("/")[0] or NO_SCOPE] += k
    total = sum(top.values())
    rows = sorted(scopes.seconds.items(), key=lambda kv: -kv[1])[:TOP_ROWS]
    joined = scopes.by_name + scopes.by_neighbour + scopes.unnamed
    return {
        "source": "XLA HLO metadata (jax.named_scope), kernels joined by name",
        "gpu_s": total,
        "kernels": joined,
        "joined_by_name": scopes.by_name / joined if joined else 0.0,
        "joined_by_neighbour": scopes.by_neighbour / joined if joined else 0.0,
        "scopes": {
            name: {"gpu_s": s, "share": s / total if total else 0.0, "kernels": int(top_kernels[name])}
            for name, s in top.most_common()
        },
        "rows": [
            {
                "phase": ph,
                "operation": op,
                "path": path or NO_SCOPE,
                "gpu_s": s,
                "kernels": int(scopes.kernels[(ph, op, path)]),
            }
            for (ph, op, path), s in rows
        ],
    }
