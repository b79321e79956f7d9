"""What-if from the critical path: the run's wall if an operation, a category within it or a process role
were k times faster, predicted by replaying the recorded schedule with those durations scaled.

Plain subtraction overstates a speedup wherever the time it removes overlapped other work or was spent
waiting on it: a kernel the CPU never waited for, a learner's step that waited on its slowest env worker.
So the run is replayed as a graph of what waited on what (docs/what-if.md).

The model
---------
Every process's **main thread** is a chain of segments in recorded order, each with its operation and
category; a segment that is *work* lasts its recorded duration times the scenario's factor (1/k where the
scenario matches its operation and category, or its process's role; 0 for k = inf). Time that is
*waiting* is never replayed as a duration: it ends when what it waited for ends, as replayed.

- **GPU work**: each kernel, copy or memset runs on its stream in recorded order and starts no earlier
  than its launching CUDA API call started (as replayed) and the previous record on its stream ended,
  plus the recorded latency from the later of the two (its launch latency, or the gap on the stream).
- **Synchronizing CUDA API calls** (rlscope.analysis.gpu_calls' classification: named syncs, and calls
  that launched a device->host copy) on the main thread wait for the last record launched before them on
  each stream they waited for (a device->host copy's own stream; otherwise every stream whose last record
  ended before the call returned). A call ends at the later of its own start and that GPU work's end, plus
  its recorded tail after the later of the two; the recorded wait is derived, the tail scales with the
  call's operation and ``cuda_api`` category.
- **Workers**: a process whose parent (``run_parent``, else ``ppid``) is in the trace and spent time in
  operations (an AsyncVectorEnv or SubprocVecEnv learner, a Pool's caller) is the parent's worker. Its
  time outside operations in ``waiting`` (or ``rlscope``) is waiting for its next command: the receive of
  its loop, recorded (rlscope/runtime/waits.py, ``rlscope.waiting()``); a worker that recorded no wait runs
  a loop rlscope does not know, and its time outside operations in ``python`` waits too. So its work
  spans (maximal stretches in operations or in simulator, backend or CUDA code) start no earlier than the
  parent's clock reached their recorded start. The parent waits: the innermost operation instance open on
  its main thread when a worker's span ended (the maximal stretch where it is innermost) waits, from the
  first of those spans' start to the last one's end, for all of them; its own time before and after is
  work. A span starting inside that wait starts its recorded lag after the wait began (the command's
  latency), a worker's start and end follow the parent's clock.
- **Launchers**: a process with children and no operation of its own (torchrun's agent) ends no earlier
  than its children, plus its recorded lag.
- Everything else (other processes, DDP ranks, a worker whose parent does no work) replays its main
  thread's own chain from its recorded start.

The replay is a longest-path evaluation, barrier by barrier in recorded time order, vectorized over
every scenario at once (each scenario a column: one pass replays them all). With every factor 1 it ends
exactly at the recorded wall. The predicted wall is the latest process end minus the run's start; the
saving is the recorded wall minus it. The replay runs on the raw timeline the analysis holds (for a run
kept in detail stretches, its detail joined), so every figure but ``recorded_s`` is scaled to the
summary's wall by ``wall_s / recorded_s``: corrected for overhead, standing for the whole run.

The **critical path** is the chain of segments that set the recorded end: walking back from the last
process end, through whichever dependency set each barrier's time (GPU work, a worker's span, the parent's
clock), to the run's start. Each scenario's target reports what share of its time lies on it. The path is
drawn as what ran on it: a main thread's operation instances in time order (each as its largest key),
the GPU records on it.

Not captured: threads other than the main thread (their work rides along; a main thread waiting on one
counts as work), waits between DDP ranks in collectives (each rank replays on its own), CUDA events and
streams waiting on other streams, a parent that works while its workers step (its time inside the wait is
taken as waiting), GPU waits in light windows (GPU tracing is off there: they replay as recorded CPU
time), the time of rlscope itself as a scenario.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rlscope import categories
from rlscope.analysis import gpu, native
from rlscope.analysis.gpu_calls import SYNC_APIS, _nesting, api_base_name
from rlscope.analysis.native import BOOL, I8, I32, I64, N
from rlscope.blocks import BLOCK_ROWS, blocks, search_sorted
from rlscope.categories import UNANNOTATED
from rlscope.keys import distinct_times, factorize, factorize_rows
from rlscope.trace.reader import clock_offset, parent_pid

if TYPE_CHECKING:
    from rlscope.analysis.timeline import Timeline
    from rlscope.trace.reader import ProcessTrace

__all__ = [
    "ALL",
    "GPU",
    "K_VALUES",
    "TOP_OPERATIONS",
    "ProcessInputs",
    "Request",
    "k_label",
    "process_inputs",
    "request",
    "saving",
    "what_if",
]

K_VALUES: tuple[float, ...] = (2.0, 10.0, math.inf)
"""The speedups every scenario is replayed at (inf: the time goes to zero)."""
TOP_OPERATIONS = 8  # operations given scenarios: the ones with most time, CPU and GPU
ALL, GPU = "all", "gpu"  # targets of an operation besides its CPU categories: all of it, its GPU work
ELASTIC = 0  # the key of waiting time: derived by the replay, never a duration
PATH_SEGMENTS = 12  # the critical path's longest segments listed in the summary
_NCODE = 16  # category codes are below this: a key's code is (name id + 1) * _NCODE + category
_WAITING = categories.CPU_CATEGORIES[categories.WAITING]
# a worker outside operations in these waits: its recorded waits, else (no wait recorded) its Python too
_IDLE = frozenset(categories.CPU_CATEGORIES[c] for c in (categories.WAITING, categories.PROFILER))
_IDLE_UNRECORDED = _IDLE | {categories.CPU_CATEGORIES[categories.PYTHON]}
# rlscope's own time and waits: no scenario makes them faster
_NOT_TARGETS = frozenset({categories.CPU_CATEGORIES[categories.PROFILER], _WAITING})
_GPU_NAMES = frozenset(categories.GPU_CATEGORIES.values())
_CHUNK = 1 << 15  # entries replayed at once (times the scenarios: the largest temporary array)


def k_label(k: float) -> str:
    """A speedup as the summary's keys write it: ``"2"``, ``"10"``, ``"inf"``."""
    return "inf" if math.isinf(k) else f"{k:g}"


def saving(
    what_if_summary: Mapping[str, Any] | None,
    operation: str,
    category: str | None = None,
    k: float = math.inf,
) -> float | None:
    """Seconds the run's wall would lose were ``operation`` (its ``category``: a CPU category or
    ``"gpu"``; None: all of it) ``k`` times faster, from the summary's ``what_if``; None when that
    scenario was not replayed (no ``what_if``, an operation outside the top ones, another k)."""
    if not what_if_summary:
        return None
    target = (what_if_summary.get("operations") or {}).get(operation, {}).get(category or ALL)
    if target is None:
        return None
    value = target.get("saving_s", {}).get(k_label(k))
    return None if value is None else float(value)


# --------------------------------------------------------------------------- per process


@dataclasses.dataclass(frozen=True)
class Request:
    """Which processes have a parent in the run and which have children, from the surveys: each
    process's inputs then keep the points the run's replay needs of it, and no more."""

    pids: frozenset[int]
    parents: frozenset[int]


def request(metadata: Sequence[Mapping[str, str]]) -> Request:
    pids = frozenset(int(m.get("pid", 0) or 0) for m in metadata)
    return Request(pids, frozenset(parent_pid(dict(m)) for m in metadata) & pids)


@dataclasses.dataclass
class ProcessInputs:
    """One process's main thread and GPU work as the replay needs them; times in ns since the run start.

    The main thread is a chain of *stretches* between nodes (the times a dependency may start or end
    at): stretch ``j`` spans ``node_t[j]..node_t[j+1]`` and holds, per key, its time
    (``ent_key``/``ent_ns``, entries ``ent_off[j]:ent_off[j+1]``). A parent keeps its *runs* instead
    (start, key, operation instance), cut at run level where its workers need nodes.
    """

    pid: int
    parent: int  # the process that started it (0: none known)
    keys: list[tuple[str, str]]  # (operation, category) of each key; key 0 (ELASTIC) is waiting
    start_ns: int
    end_ns: int
    working: bool  # its main thread spent time in an operation
    node_t: np.ndarray
    ent_off: np.ndarray
    ent_key: np.ndarray
    ent_ns: np.ndarray
    runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # a parent's (start, key, instance)
    required: np.ndarray | None  # a parent's node times
    sync_s: np.ndarray  # synchronizing calls that waited for GPU work: start, end,
    sync_e: np.ndarray
    sync_b: np.ndarray  # tail after the later of their start and that work's end (< 0: clock skew)
    sync_key: np.ndarray  # the key their own time counts in
    sync_dep_off: np.ndarray  # streams each waited for: sync_dep_stream[off[j]:off[j+1]]
    sync_dep_stream: np.ndarray
    rec_t: np.ndarray  # GPU records in push order (launch time, then stream order): launch time
    rec_stream: np.ndarray
    rec_delta: np.ndarray  # start minus the later of its launch and the previous record's end
    rec_dur: np.ndarray
    rec_key: np.ndarray
    rec_start: np.ndarray  # recorded start (the critical path's segments)
    rec_won: np.ndarray  # started at its launch, not after the record before it (the critical path)
    # the main thread as drawn on the critical path (start, key): runs of one operation instance (cut
    # where a wait may begin or end), each as its largest key, consecutive ones of one key joined
    drawn: tuple[np.ndarray, np.ndarray] = dataclasses.field(
        default_factory=lambda: (_empty_i64(), np.zeros(0, np.int32))
    )


def _empty_i64() -> np.ndarray:
    return np.zeros(0, np.int64)


def _insert(
    t: np.ndarray, cols: list[np.ndarray], points: np.ndarray, end: int
) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Runs starting at ``t`` (each lasting to the next; the last to ``end``) cut at ``points`` (sorted,
    distinct): the new starts, each column with the cut run's value carried, and which rows are points."""
    inner = points[(points > t[0]) & (points < end)]
    pos = np.searchsorted(t, inner, "left")
    is_point = np.insert(np.zeros(len(t), bool), pos, True)
    return np.insert(t, pos, inner), [np.insert(c, pos, c[pos - 1]) for c in cols], is_point


def _within(
    t: np.ndarray, lo: np.ndarray, hi: np.ndarray, side: str = "right"
) -> tuple[np.ndarray, np.ndarray]:
    """(the interval of each time, whether it lies in it) among disjoint sorted intervals ``[lo, hi)``;
    ``side="left"``: in ``(lo, hi]`` instead."""
    if not len(lo):
        return np.zeros(len(t), np.int64), np.zeros(len(t), bool)
    j = np.searchsorted(lo, t, side) - 1
    at = np.maximum(j, 0)
    inside = (j >= 0) & ((t < hi[at]) if side == "right" else (t <= hi[at]))
    return at, inside


def _stretches(
    t: np.ndarray, key: np.ndarray, end: int, nodes: np.ndarray, elastic: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(node_t, ent_off, ent_key, ent_ns) of runs (``t``, ``key``, lasting to ``end``) between ``nodes``
    (sorted, distinct, with ``t[0]``); ``elastic``: (2, n) intervals whose time becomes waiting.

    Each node inside a run cuts it: the run's part before the first node stays in its stretch, the
    part from each node on (the run's key) opens the node's. The runs and the nodes' parts are
    counted as two lists, not merged into one: each figure is a sum of whole nanoseconds, the same
    in any order, and a merge of millions of runs with a million nodes was the what-if's largest cost.
    The stretches are counted a block at a time (:func:`_stretch_block`): a stretch's runs and nodes
    are consecutive, and a block's arrays stay small where the run's would be millions of entries.
    """
    inner = nodes[(nodes > t[0]) & (nodes < end)]
    n, m = len(t), len(inner)
    fn = native.function(
        "whatif_stretches", I64, I32, N, N, I64, N, I64, I64, N, N, I64, I32, I64, N, restype=N
    )
    e_lo, e_hi = (_empty_i64(), _empty_i64()) if elastic is None else (elastic[0], elastic[1])
    dtypes = (t.dtype, key.dtype, inner.dtype, e_lo.dtype)
    if fn is not None and dtypes == (np.int64, np.int32, np.int64, np.int64):
        nkeys = max(int(key.max(initial=0)), ELASTIC) + 1
        cap = min(n + m + 1, (m + 1) * nkeys)  # the parts: each run's in its stretch, a cut one's in the next
        ent_off = np.empty(m + 2, np.int64)
        ent_key, ns = np.empty(cap, np.int32), np.empty(cap, np.int64)
        got = fn(t, key, n, end, inner, m, e_lo, e_hi, len(e_lo), nkeys, ent_off, ent_key, ns, cap)
        if got >= 0:
            return np.concatenate([[t[0]], inner, [end]]).astype(np.int64), ent_off, ent_key[:got], ns[:got]
    pos = np.searchsorted(t, inner, "left")  # a node cuts run pos - 1 (inner > t[0]: pos >= 1)
    if _on_run_starts(t, inner, pos):
        return _aligned_stretches(t, key, end, inner, pos, elastic)
    first = np.ones(m, bool)  # the first node cutting its run: where the run's own part ends
    first[1:] = pos[1:] != pos[:-1]
    cut = _Cuts(t, key, end, inner, pos, first, elastic)
    # above every key the runs and nodes can take (ELASTIC among them): codes sort by (stretch, key)
    nkeys = max(int(key.max(initial=0)), ELASTIC) + 1
    per = max((1 << 20) // nkeys, 1) if (m + 1) * nkeys <= 4 * (n + m) + 4096 else 1 << 16
    parts = [_stretch_block(cut, a, min(a + per, m + 1), nkeys) for a in range(0, m + 1, per)]
    code = np.concatenate([c for c, _ in parts]) if parts else _empty_i64()
    ns = np.concatenate([v for _, v in parts]) if parts else _empty_i64()
    ent_stretch, ent_key = np.divmod(code, nkeys)
    node_t = np.concatenate([[t[0]], inner, [end]]).astype(np.int64)
    # each stretch's first entry: the entries before it (counted: the stretches are sorted)
    ent_off = np.zeros(len(node_t), np.int64)
    np.cumsum(np.bincount(ent_stretch, minlength=len(node_t))[: len(node_t) - 1], out=ent_off[1:])
    return node_t, ent_off, ent_key.astype(np.int32), ns


def _on_run_starts(t: np.ndarray, inner: np.ndarray, pos: np.ndarray) -> bool:
    """Whether every node falls on a run's start (``pos``: where each is searched in ``t``)."""
    n = len(t)
    return bool((pos < n).all() and (t[np.minimum(pos, n - 1)] == inner).all())


def _aligned_stretches(
    t: np.ndarray, key: np.ndarray, end: int, inner: np.ndarray, pos: np.ndarray, elastic: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_stretches` where every node falls on a run's start (``t[pos] == inner``: the operation
    instances' starts the critical path is drawn at, a process without GPU work's start only): no run
    is cut, so each stretch is whole runs, summed per key a block of stretches at a time."""
    n = len(t)
    if elastic is not None:
        key = np.where(_within(t, elastic[0], elastic[1])[1], ELASTIC, key)
    first = np.concatenate([[0], pos, [n]])  # stretch s's runs: [first[s], first[s + 1])

    def durations(lo: int, hi: int) -> np.ndarray:
        """Runs ``[lo, hi)``'s lengths: whole ns, exact in a double (the weights of a count)."""
        dur = np.empty(hi - lo)
        np.subtract(t[lo + 1 : hi], t[lo : hi - 1], out=dur[:-1], casting="unsafe")
        dur[-1] = (t[hi] if hi < n else end) - t[hi - 1]
        return dur

    ent_stretch, ent_key, ns = _key_sums(key, first, durations)
    node_t = np.concatenate([[t[0]], inner, [end]]).astype(np.int64)
    ent_off = np.zeros(len(node_t), np.int64)
    np.cumsum(np.bincount(ent_stretch, minlength=len(node_t))[: len(node_t) - 1], out=ent_off[1:])
    return node_t, ent_off, ent_key.astype(np.int32), ns


def _key_sums(
    key: np.ndarray, first: np.ndarray, durations: Callable[[int, int], np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stretch, key, ns) of each key with time in each stretch, sorted by (stretch, key): stretch s
    is runs ``[first[s], first[s + 1])``, ``durations(lo, hi)``: runs ``[lo, hi)``'s lengths."""
    nkeys = max(int(key.max(initial=0)), ELASTIC) + 1
    n_stretch = len(first) - 1
    # a block's count is per x nkeys doubles: 2 MB, in the CPU's cache (8 MB took half again as long)
    per = max((1 << 18) // nkeys, 1)
    codes, sums = [_empty_i64()], [_empty_i64()]
    for a in range(0, n_stretch, per):
        b = min(a + per, n_stretch)
        lo, hi = int(first[a]), int(first[b])
        code = key[lo:hi].astype(np.int64)
        if b - a > 1:
            code += np.repeat(np.arange(0, (b - a) * nkeys, nkeys), np.diff(first[a : b + 1]))
        total = np.bincount(code, weights=durations(lo, hi), minlength=(b - a) * nkeys)
        found = np.flatnonzero(total > 0)
        ns = np.rint(total[found]).astype(np.int64)
        keep = ns > 0
        codes.append(found[keep] + a * nkeys)
        sums.append(ns[keep])
    ent_stretch, ent_key = np.divmod(np.concatenate(codes), nkeys)
    return ent_stretch, ent_key, np.concatenate(sums)


@dataclasses.dataclass(frozen=True)
class _Cuts:
    """Runs (``t``, ``key``, the last lasting to ``end``) and the nodes ``inner`` that cut them: node q
    cuts run ``pos[q] - 1``, ``first[q]``: the first node cutting it; ``elastic`` as :func:`_stretches`."""

    t: np.ndarray
    key: np.ndarray
    end: int
    inner: np.ndarray
    pos: np.ndarray
    first: np.ndarray
    elastic: np.ndarray | None


def _stretch_block(cut: _Cuts, a: int, b: int, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes ``stretch * nkeys + key`` in order, their whole-ns sums above 0) of stretches [a, b).

    Stretch s >= 1 is opened by node s - 1; its runs are those from the node's run on (``pos``), up to
    the run the next block's first node cuts."""
    t, pos, n, m = cut.t, cut.pos, len(cut.t), len(cut.inner)
    lo, hi = (int(pos[a - 1]) if a > 0 else 0), (int(pos[b - 1]) if b - 1 < m else n)
    # each run's stretch: a, plus the block's nodes at or before it
    run_stretch = np.bincount(pos[a : b - 1] - lo, minlength=hi - lo + 1)[: hi - lo]
    np.cumsum(run_stretch, out=run_stretch)
    run_stretch += a
    # each run lasts to the next run, or to the first node cutting it (which may be the next block's)
    run_dur = np.empty(hi - lo, np.int64)
    run_dur[:] = t[lo + 1 : hi + 1] if hi < n else np.append(t[lo + 1 : hi], cut.end)
    q = np.arange(a, min(b, m))  # the first nodes cutting the block's runs (node a - 1 cuts the run before)
    q = q[cut.first[q]]
    run_dur[pos[q] - 1 - lo] = cut.inner[q]
    run_dur -= t[lo:hi]
    # the nodes opening the block's stretches: each part lasts to the next run, or the next node
    # cutting the same run
    q = np.arange(max(a - 1, 0), b - 1)
    at = pos[q]
    node_end = np.where(at < n, t[np.minimum(at, n - 1)], cut.end)
    nxt = q + 1 < m
    same = np.zeros(len(q), bool)
    same[nxt] = ~cut.first[q[nxt] + 1]
    node_end = np.where(same, cut.inner[np.minimum(q + 1, m - 1)], node_end)
    run_key, node_key = cut.key[lo:hi], cut.key[at - 1]
    if cut.elastic is not None:
        run_key = np.where(_within(t[lo:hi], cut.elastic[0], cut.elastic[1])[1], ELASTIC, run_key)
        node_key = np.where(_within(cut.inner[q], cut.elastic[0], cut.elastic[1])[1], ELASTIC, node_key)
    code = np.concatenate([run_stretch * nkeys + run_key, (q + 1) * nkeys + node_key])
    dur = np.concatenate([run_dur, node_end - cut.inner[q]]).astype(np.float64)
    code -= a * nkeys
    span = (b - a) * nkeys
    if span <= 4 * len(code) + 4096:  # few (stretch, key) pairs: counted densely, no sort
        total = np.bincount(code, weights=dur, minlength=span)
        found = np.flatnonzero(total > 0)
        total = total[found]
    else:
        found, inverse = np.unique(code, return_inverse=True)
        total = np.bincount(inverse.reshape(-1), weights=dur, minlength=len(found))
    ns = np.rint(total).astype(np.int64)
    keep = ns > 0
    return found[keep] + a * nkeys, ns[keep]


def _syncs(
    proc: ProcessTrace,
    tl: Timeline,
    api: gpu.ApiCalls,
    recs: gpu.GpuRecords,
    launch: tuple[np.ndarray, np.ndarray],
    launch_t: np.ndarray,
    stream: np.ndarray,
    span: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Main-thread synchronizing calls that waited for GPU work: (start, end, that work's end, (call,
    stream) pairs it waited for)."""
    group, outer, group_end = _nesting(api)
    on_main = api.thread[outer] == tl.main_thread
    names, inv = factorize(api.name)
    named = np.array([api_base_name(proc.name(int(n))) in SYNC_APIS for n in names], bool)[inv]
    g_sync = np.bincount(group, weights=named, minlength=len(outer)) > 0
    idx, found = launch
    copy = recs.category == categories.GPU_MEMCPY
    rnames, rinv = factorize(recs.name)
    dtoh = copy & np.array(["DtoH" in proc.name(int(n)) for n in rnames], bool)[rinv] & found
    g_dtoh = np.zeros(len(outer), bool)
    g_dtoh[group[idx[dtoh]]] = True
    sync = np.flatnonzero((g_sync | g_dtoh) & on_main)
    empty = _empty_i64()
    if not len(sync):
        return empty, empty, empty, []
    s = np.clip(api.start[outer[sync]], *span)
    e = np.clip(group_end[sync], *span)
    # a call that launched a device->host copy waits for that copy's stream only
    own = {(int(g), int(q)) for g, q in zip(group[idx[dtoh]], stream[dtoh], strict=True)}
    g = np.full(len(sync), np.iinfo(np.int64).min, np.int64)
    pairs: list[tuple[int, int]] = []
    for q in np.unique(stream).tolist():
        on_q = np.flatnonzero(stream == q)
        order = on_q[np.argsort(launch_t[on_q], kind="stable")]
        k = np.searchsorted(launch_t[order], e, "right") - 1
        last = order[np.maximum(k, 0)]
        ok = (k >= 0) & (recs.end[last] <= e)
        for j in np.flatnonzero(ok).tolist():
            grp = int(sync[j])
            if g_dtoh[grp] and (grp, q) not in own:
                continue
            pairs.append((j, q))
            g[j] = max(g[j], int(recs.end[last[j]]))
    return s, e, g, pairs


def _no_records() -> dict[str, np.ndarray]:
    empty = {k: _empty_i64() for k in ("t", "stream", "delta", "dur", "start")}
    return empty | {"key": np.zeros(0, np.int32), "won": np.zeros(0, bool)}


def _records(
    launch_t: np.ndarray, stream: np.ndarray, recs: gpu.GpuRecords, key: np.ndarray
) -> dict[str, np.ndarray]:
    """GPU records in push order (launch time, then stream order), each with its latency: its start minus
    the later of its launch and the end of the record before it on its stream, in launch order."""
    order = np.lexsort((recs.start, launch_t, stream))
    on = stream[order]
    first = np.ones(len(order), bool)
    first[1:] = on[1:] != on[:-1]
    ends = recs.end[order]
    prev_end = np.where(first, np.iinfo(np.int64).min, np.roll(ends, 1))
    delta = np.empty(len(order), np.int64)
    delta[order] = recs.start[order] - np.maximum(launch_t[order], prev_end)
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    push = np.lexsort((position, launch_t))
    won = np.empty(len(order), bool)  # started at its launch (else right after the record before it)
    won[order] = launch_t[order] >= prev_end
    return {
        "won": won[push],
        "t": launch_t[push],
        "stream": stream[push].astype(np.int64),
        "delta": delta[push],
        "dur": (recs.end - recs.start)[push],
        "key": key[push],
        "start": recs.start[push],
    }


def process_inputs(
    proc: ProcessTrace, joined: gpu.JoinedTimeline, run_start_ns: int, req: Request
) -> ProcessInputs | None:
    """One process's inputs to the run's what-if (None without a main thread)."""
    tl, api, recs = joined
    if len(tl.ts) == 0:
        return None
    main = tl.main_rows()  # the timeline's rows are grouped by thread: the main thread's are one block
    start, end = int(tl.start_ns), int(tl.end_ns)
    if main.stop == main.start or end <= start:
        return None
    inst_name = np.append(tl.inst_name, -1)
    is_parent = proc.pid in req.parents
    inst_code = (inst_name + 1) * _NCODE  # per instance: its key less the category
    size = (int(inst_name.max()) + 2) * _NCODE  # every code's

    # GPU records: stream, launch, operation
    has_gpu = api is not None and recs is not None and len(recs.start) > 0 and proc.gpu is not None
    sync_s = sync_e = sync_g = _empty_i64()
    pairs: list[tuple[int, int]] = []
    rec_code = rec_t = stream = _empty_i64()
    if has_gpu:
        table = proc.gpu
        rows = np.flatnonzero(table.column("category").to_numpy() != categories.CUDA_API)
        device = table.column("device").to_numpy()[rows].astype(np.int64)
        _, stream = factorize_rows(
            np.vstack([device, table.column("stream").to_numpy()[rows].astype(np.int64)])
        )
        launch = gpu.launching_call(api, recs)
        idx, found = launch
        rec_t = np.clip(np.where(found, api.start[idx], recs.start), start, end)
        rec_op, _ = gpu.attribute(tl, api, recs, launch)
        rec_code = (inst_name[rec_op] + 1) * _NCODE + recs.category
        if len(api.start) and api.name is not None:
            sync_s, sync_e, sync_g, pairs = _syncs(proc, tl, api, recs, launch, rec_t, stream, (start, end))
        keep = np.unique(np.array([j for j, _ in pairs], np.int64))
        remap = np.full(len(sync_s), -1, np.int64)
        remap[keep] = np.arange(len(keep))
        pairs = [(int(remap[j]), q) for j, q in pairs]
        sync_s, sync_e, sync_g = sync_s[keep], sync_e[keep], sync_g[keep]
        # a launch inside a waiting call happens, for the replay, at the call's start
        j, inside = _within(rec_t, sync_s, sync_e)
        rec_t = np.where(inside, sync_s[j] if len(sync_s) else rec_t, rec_t)

    worker = parent_pid(proc.metadata) in req.pids  # a worker's spans start and end at nodes
    by_code = None
    if not is_parent and not len(sync_s):  # no runs kept nor cut: from the rows to what is kept, in one pass
        given = np.unique(np.concatenate([np.array([start], np.int64), rec_t]))
        by_code = _main_pass_by_code(proc, tl, main, (start, end), inst_code, size, given, worker)
    # keys: waiting first, then every (operation, category) of the main thread and the GPU work
    present = by_code[1].copy() if by_code is not None else _main_codes(tl, main, inst_code, size)
    present[rec_code] = True
    codes = np.flatnonzero(present)
    key_of = np.cumsum(present, dtype=np.int32)  # per code present: 1 + its rank among them
    rec_key = key_of[rec_code]
    keys = [("", "")] + [
        (
            UNANNOTATED if c // _NCODE == 0 else proc.name(int(c // _NCODE - 1)),
            categories.CATEGORY_NAMES.get(int(c % _NCODE), str(int(c % _NCODE))),
        )
        for c in codes.tolist()
    ]
    idle_key = _idle_keys(keys)
    # a waiting call: its time up to the GPU work's end is waiting, the rest its own
    sync_m = np.clip(sync_g, sync_s, sync_e)
    sync_key = np.zeros(len(sync_s), np.int32)
    kept = None
    if by_code is not None:
        kept = _by_key(*by_code, key_of, idle_key)
        if kept is None:  # a process that records its waits: idle keys of another set, the pass by key
            kept = _main_pass(tl, main, (start, end), inst_code, key_of, idle_key, given, worker)
    if kept is not None:
        drawn, stretches, working = kept
        run_t = run_key = run_inst = nodes = None
    else:
        stretches = None  # made below from the runs
        drawn, (run_t, run_key, run_inst), nodes, sync_key, working = _main_thread(
            tl,
            main,
            (start, end),
            inst_code,
            key_of,
            is_parent,
            idle_key,
            (sync_s, sync_m, sync_e),
            rec_t,
            worker,
        )
    rec = _records(rec_t, stream, recs, rec_key) if has_gpu else _no_records()
    dep_j = np.array([j for j, _ in pairs], np.int64)
    dep_q = np.array([q for _, q in pairs], np.int64)
    by_j = np.argsort(dep_j, kind="stable")
    shift = clock_offset(proc) - run_start_ns
    sync_b = sync_e - np.maximum(sync_g, sync_s)
    inputs = ProcessInputs(
        pid=proc.pid,
        parent=parent_pid(proc.metadata),
        keys=keys,
        start_ns=start + shift,
        end_ns=end + shift,
        working=working,
        node_t=_empty_i64(),
        ent_off=_empty_i64(),
        ent_key=np.zeros(0, np.int32),
        ent_ns=_empty_i64(),
        runs=(run_t + shift, run_key, run_inst) if is_parent else None,
        required=nodes + shift if is_parent else None,
        sync_s=sync_s + shift,
        sync_e=sync_e + shift,
        sync_b=sync_b,
        sync_key=sync_key,
        sync_dep_off=np.searchsorted(dep_j[by_j], np.arange(len(sync_s) + 1), "left").astype(np.int64),
        sync_dep_stream=dep_q[by_j],
        rec_t=rec["t"] + shift,
        rec_stream=rec["stream"],
        rec_delta=rec["delta"],
        rec_dur=rec["dur"],
        rec_key=rec["key"],
        rec_start=rec["start"] + shift,
        rec_won=rec["won"],
        drawn=(np.add(drawn[0], shift, out=drawn[0]), drawn[1]),  # in place: its own, millions of starts
    )
    if not is_parent:  # on the process's clock, then shifted: a stretch's times are differences
        if stretches is None:
            stretches = _stretches(run_t, run_key, end, nodes)
        node_t, inputs.ent_off, inputs.ent_key, inputs.ent_ns = stretches
        inputs.node_t = node_t + shift
    return inputs


def _main_thread(
    tl: Timeline,
    main: slice,
    span: tuple[int, int],
    inst_code: np.ndarray,
    key_of: np.ndarray,
    is_parent: bool,
    idle_key: np.ndarray,
    syncs: tuple[np.ndarray, np.ndarray, np.ndarray],
    rec_t: np.ndarray,
    worker: bool,
) -> tuple[
    tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray, bool
]:
    """process_inputs's main thread a pass at a time: (drawn, (run_t, run_key, run_inst), nodes,
    sync_key, working). The runs (:func:`_main_runs`) cut at the waiting calls ``syncs`` (their start,
    their wait's end, their end: the time up to the wait's end is waiting), their idle flips, the drawn
    path (:func:`_drawn`) and the nodes: ``span``'s start, the calls' starts and ends, ``rec_t`` and a
    ``worker``'s flips."""
    start, end = span
    sync_s, sync_m, sync_e = syncs
    # the runs, and where waiting for a command may begin or end (without syncs, found in their pass)
    runs = _main_runs(tl, main, span, inst_code, key_of, is_parent, None if len(sync_s) else idle_key)
    run_t, run_key, run_inst, inst_t, idle_flip, working = runs
    del runs
    sync_key = np.zeros(len(sync_s), np.int32)
    if len(sync_s):
        run_t, (run_key, run_inst), _ = _insert(
            run_t, [run_key, run_inst], np.unique(np.concatenate([sync_s, sync_m, sync_e])), end
        )
        sync_key = run_key[np.searchsorted(run_t, sync_s, "right") - 1]
        run_key = np.where(_within(run_t, sync_s, sync_m)[1], ELASTIC, run_key)
        idle_flip = _flips(run_t, run_key, idle_key)
    # sorted, as _drawn's C loop takes them (the idle flips are: without syncs, neither sort nor copy)
    cuts = (
        np.sort(np.concatenate([sync_s, sync_m, sync_e, idle_flip]), kind="stable")
        if len(sync_s)
        else idle_flip
    )
    drawn = _drawn(run_t, run_key, inst_t, cuts, end)
    required = [np.array([start], np.int64), sync_s, sync_e, rec_t]
    if worker:
        required.append(idle_flip)
    nodes = np.unique(np.concatenate(required))
    return drawn, (run_t, run_key, run_inst), nodes, sync_key, working


def _main_pass(
    tl: Timeline,
    main: slice,
    span: tuple[int, int],
    inst_code: np.ndarray,
    key_of: np.ndarray,
    idle_key: np.ndarray,
    nodes: np.ndarray,
    flip_nodes: bool,
    present: np.ndarray | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, ...], bool] | None:
    """What :func:`_main_thread` and :func:`_stretches` keep of a process that is no parent and makes
    no waiting calls, in one C pass over the main thread's rows ``main``: (drawn, (node_t, ent_off,
    ent_key, ent_ns), working), the stretches between ``nodes`` (sorted, distinct) and, with
    ``flip_nodes`` (a worker's), the idle flips; ``present`` (bool, a code each, zeroed): each row's
    code marked in it as :func:`_main_codes` marks them. None where :func:`_main_thread`'s passes run:
    no C loops, columns of other types, or input the C hands back (times out of order, a stretch of
    2**53 ns, a category of ``_NCODE`` or more, two categories of an instance of one key).

    Why: its runs are nearly a row each (millions), and each of those passes wrote or read them whole,
    where this one writes what is kept: the drawn path and the stretches' sums."""
    start, end = span
    row_types = I32, I64, I8, N  # op, ts, cat, their count
    table_types = I64, N, I32, N, BOOL, BOOL, N  # inst_code, key_of (each with its length), present, idle
    given_types = N, N, I64, N, N  # start, end, nodes, their count, flip_nodes
    out_types = I64, I32, N, I64, N, I64, I32, I64, N, I64  # drawn, cap; node_t, cap; ent_*, cap; counts
    fn = native.function("whatif_main_pass", *row_types, *table_types, *given_types, *out_types, restype=N)
    dtypes = (tl.op.dtype, tl.ts.dtype, tl.cat.dtype, inst_code.dtype, key_of.dtype, nodes.dtype)
    if fn is None or dtypes != (np.int32, np.int64, np.int8, np.int64, np.int32, np.int64):
        return None
    n = main.stop - main.start
    op, ts, cat = tl.op[main], tl.ts[main], tl.cat[main]
    out_t, out_key = np.empty(n + 1, np.int64), np.empty(n + 1, np.int32)  # a stretch a row at most
    cap_nodes = len(nodes) + (n if flip_nodes else 0)
    node_t, ent_off = np.empty(cap_nodes + 2, np.int64), np.empty(cap_nodes + 2, np.int64)
    # a stretch's entries are its parts (the runs', and those the nodes cut), a key each at most: with
    # few nodes (no flips among them) a few keys' worth, not a place a row
    cap_e = min(n + len(nodes) + 1, (cap_nodes + 1) * len(idle_key))
    ent_key, ent_ns = np.empty(cap_e, np.int32), np.empty(cap_e, np.int64)
    counts = np.zeros(4, np.int64)
    if present is None:
        present = np.zeros(len(key_of), bool)
    tables = (inst_code, len(inst_code), key_of, len(key_of), present, idle_key, len(idle_key))
    got = fn(
        op, ts, cat, n, *tables, start, end, nodes, len(nodes), int(flip_nodes), out_t, out_key, n + 1,
        node_t, cap_nodes, ent_off, ent_key, ent_ns, cap_e, counts,
    )  # fmt: skip
    if got < 0:
        return None
    k, m, e, working = counts.tolist()
    node_t = np.concatenate([[start], node_t[:m], [end]]).astype(np.int64)
    return (out_t[:k], out_key[:k]), (node_t, ent_off[: m + 2], ent_key[:e], ent_ns[:e]), bool(working)


def _main_pass_by_code(
    proc: ProcessTrace,
    tl: Timeline,
    main: slice,
    span: tuple[int, int],
    inst_code: np.ndarray,
    size: int,
    nodes: np.ndarray,
    flip_nodes: bool,
) -> tuple[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, ...], bool], np.ndarray, np.ndarray] | None:
    """:func:`_main_pass` keyed by code + 1 (key 0 stays the waiting one), each code idle as its key is in
    a process that records no waits (:func:`_idle_codes`), marking the codes its rows hold: (what it
    keeps, the codes present, the idle flags it read). None where the pass does not run.

    Why: the keys are the codes present numbered in order, so a pass keyed by code keeps what a pass
    by key keeps with the codes in place of the keys (ties go to the smaller, the stretches' entries in
    order), and the codes present come out of that pass, not out of one of their own
    (:func:`_main_codes`) before it. :func:`_by_key` then numbers them."""
    present = np.zeros(size, bool)
    idle = _idle_codes(proc, size)
    key_of = np.arange(1, size + 1, dtype=np.int32)
    kept = _main_pass(tl, main, span, inst_code, key_of, idle, nodes, flip_nodes, present)
    return None if kept is None else (kept, present, idle)


def _idle_codes(proc: ProcessTrace, size: int) -> np.ndarray:
    """Per code + 1 below ``size`` + 1 (0: the waiting key, never idle), whether its key is idle
    (:func:`_idle_keys`) where no key is waiting outside operations: outside them in a category of
    ``_IDLE_UNRECORDED``."""
    outside = [k == 0 or proc.name(k - 1) == UNANNOTATED for k in range(size // _NCODE)]
    names = [categories.CATEGORY_NAMES.get(c, str(c)) for c in range(_NCODE)]
    idle_cat = np.array([name in _IDLE_UNRECORDED for name in names], bool)
    return np.append(False, (np.array(outside, bool)[:, None] & idle_cat[None, :]).ravel())


def _by_key(
    kept: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, ...], bool],
    main_present: np.ndarray,
    idle_code: np.ndarray,
    key_of: np.ndarray,
    idle_key: np.ndarray,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, ...], bool] | None:
    """What :func:`_main_pass_by_code` kept (``main_present``: the codes of the rows, ``idle_code``: the
    idle flags it read) with each code + 1 replaced by its key (``key_of``; 0 stays 0), in place; None
    where a code's flag is not its key's (``idle_key``: a process that records its waits), so that the
    pass runs again by key."""
    codes = np.flatnonzero(main_present)
    if not np.array_equal(idle_code[codes + 1], idle_key[key_of[codes]]):
        return None
    to_key = np.append(np.int32(0), key_of).astype(np.int32, copy=False)
    (drawn_t, drawn_key), (node_t, ent_off, ent_key, ent_ns), working = kept
    for keys in (drawn_key, ent_key):
        _renumber(keys, to_key)
    return (drawn_t, drawn_key), (node_t, ent_off, ent_key, ent_ns), working


def _renumber(keys: np.ndarray, to_key: np.ndarray) -> None:
    """``keys`` (int32) replaced by ``to_key[keys]`` in place: in one C pass, else a block at a time (no
    second column of a key per drawn stretch)."""
    fn = native.function("whatif_renumber", N, I32, I32, N, restype=N)
    if fn is not None and keys.dtype == to_key.dtype == np.int32 and keys.flags.c_contiguous:
        if fn(len(keys), keys, to_key, len(to_key)) < 0:
            raise IndexError("a key outside the table")
        return
    for r in blocks(len(keys)):
        keys[r] = to_key[keys[r]]


def _main_codes(tl: Timeline, main: slice, inst_code: np.ndarray, size: int) -> np.ndarray:
    """Per code ``inst_code[op] + category`` below ``size``: whether a row of ``main`` (the main thread's)
    holds it. Read before the runs are made, so that their pass writes each run's key, not its code."""
    fn = native.function("whatif_main_codes", I32, I8, N, I64, N, BOOL, N, restype=N)
    present = np.zeros(size, bool)
    if fn is not None and (tl.op.dtype, tl.cat.dtype, inst_code.dtype) == (np.int32, np.int8, np.int64):
        op, cat = tl.op[main], tl.cat[main]
        if fn(op, cat, len(op), inst_code, len(inst_code), present, size) == 0:
            return present
        present[:] = False
    for r in blocks(main.stop - main.start):
        rows = slice(main.start + r.start, main.start + r.stop)
        present[inst_code[tl.op[rows]] + tl.cat[rows]] = True  # op -1 reads the appended -1
    return present


def _main_runs(
    tl: Timeline,
    main: slice,
    span: tuple[int, int],
    inst_code: np.ndarray,
    key_of: np.ndarray,
    is_parent: bool,
    idle: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, bool]:
    """(run_t, run_key, run_inst, inst_t, idle_flip, working) of the main thread's rows ``main``: each
    run of one code ``inst_code[op] + category`` (a parent's also of one operation instance) by its
    start, key (``key_of[code]``) and instance, and where each run of one instance starts; times clamped
    to ``span``'s end, the first one its start. ``idle``: per key, whether it is waiting for a command;
    idle_flip: the starts of the runs whose ``idle`` differs from the run's before (:func:`_flips`;
    None without ``idle``); working: whether a run is in an operation instance.

    One pass over the rows in C, writing the runs, their keys and the flips (a run a row, nearly: the
    rows are millions, every torch op's begin and end); numpy's a block of rows at a time, then
    :func:`_flips`."""
    start, end = span
    n = main.stop - main.start
    run_t, run_key = np.empty(n, np.int64), np.empty(n, np.int32)
    run_inst = np.empty(n, tl.op.dtype)
    args = I32, I64, I8, N, I64, N, I32, N, BOOL, N, N, N, N, I64, I32, I32, I64, I64, I64
    fn = native.function("whatif_main_runs", *args, restype=N)
    dtypes = (tl.op.dtype, tl.ts.dtype, tl.cat.dtype, inst_code.dtype, key_of.dtype)
    if fn is not None and dtypes == (np.int32, np.int64, np.int8, np.int64, np.int32):
        op, ts, cat = tl.op[main], tl.ts[main], tl.cat[main]
        inst_t, counts = np.empty(n, np.int64), np.zeros(4, np.int64)
        flips = np.empty(n if idle is not None else 0, np.int64)
        flags = idle if idle is not None else np.zeros(0, bool)
        tables = (inst_code, len(inst_code), key_of, len(key_of), flags, len(flags))
        out = (run_t, run_key, run_inst, inst_t, flips, counts)
        if fn(op, ts, cat, n, *tables, start, end, int(is_parent), *out) == 0:
            k, j, m, working = counts.tolist()
            return (
                run_t[:k],
                run_key[:k],
                run_inst[:k],
                inst_t[:j],
                flips[:m] if idle is not None else None,
                bool(working),
            )
    inst_t = [np.zeros(0, np.int64)]
    k = 0
    before: tuple[int, int] | None = None  # the previous block's last (code, instance)
    for r in blocks(n):
        rows = slice(main.start + r.start, main.start + r.stop)
        op, ts = tl.op[rows], tl.ts[rows]
        code = inst_code[op] + tl.cat[rows]  # op -1 reads the appended -1
        new_op = np.ones(len(op), bool)
        new_op[1:] = op[1:] != op[:-1]
        change = np.ones(len(op), bool)
        change[1:] = code[1:] != code[:-1]
        if before is not None:
            new_op[0] = op[0] != before[1]
            change[0] = code[0] != before[0]
        if is_parent:
            change |= new_op
        at = np.flatnonzero(change)
        run_t[k : k + len(at)] = np.minimum(ts[at], end)
        run_key[k : k + len(at)] = key_of[code[at]]
        run_inst[k : k + len(at)] = op[at]
        k += len(at)
        inst_t.append(np.minimum(ts[new_op], end))
        before = (int(code[-1]), int(op[-1]))
    inst_t = np.concatenate(inst_t)
    run_t[0] = inst_t[0] = start
    run_t, run_key, run_inst = run_t[:k], run_key[:k], run_inst[:k]
    flips = _flips(run_t, run_key, idle) if idle is not None else None
    return run_t, run_key, run_inst, inst_t, flips, bool(run_inst.max(initial=-1) >= 0)


def _flips(t: np.ndarray, key: np.ndarray, idle: np.ndarray) -> np.ndarray:
    """The starts of the runs (``t``, ``key``) whose ``idle[key]`` differs from the run's before."""
    fn = native.function("whatif_flips", I64, I32, N, BOOL, N, I64, restype=N)
    if fn is not None and t.dtype == np.int64 and key.dtype == np.int32:
        out = np.empty(max(len(t) - 1, 0), np.int64)
        m = fn(t, key, len(t), idle, len(idle), out)
        if m >= 0:
            return out[:m]
    on = idle[key]
    return t[np.flatnonzero(on[1:] != on[:-1]) + 1]


def _first_sorted(values: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(values, kind="stable")[:k]`` without sorting every value (the critical path has
    millions of segments, the summary lists a dozen): the k-th smallest value bounds the selection."""
    fn = native.function("whatif_first_sorted", I64, N, N, I64, restype=N)
    if fn is not None and values.dtype == np.int64:
        out = np.empty(max(k, 0), np.int64)
        return out[: fn(values, len(values), k, out)]
    if len(values) <= k:
        return np.argsort(values, kind="stable")
    bound = np.partition(values, k - 1)[k - 1]
    below = np.flatnonzero(values < bound)
    chosen = np.union1d(below, np.flatnonzero(values == bound)[: k - len(below)])  # in index order
    return chosen[np.argsort(values[chosen], kind="stable")]


def _changes(a: np.ndarray) -> np.ndarray:
    """Where each run of one value in ``a`` begins."""
    out = np.ones(len(a), bool)
    out[1:] = a[1:] != a[:-1]
    return out


def _drawn(
    run_t: np.ndarray, run_key: np.ndarray, inst_t: np.ndarray, cuts: np.ndarray, end: int
) -> tuple[np.ndarray, np.ndarray]:
    """The main thread in time order as the critical path draws it: each run of one operation instance
    (starting at ``inst_t``, also cut at ``cuts``: where a synchronizing call's wait or a command's wait
    may begin or end) as its largest key, consecutive ones of one key joined.

    Why: the replay's stretches hold each key's total only, and a run with no dependency inside it (a
    single-process CPU run) is one stretch; drawn as its largest key it would hide what ran when."""
    fn = native.function("whatif_drawn", I64, I32, N, N, I64, N, I64, N, N, I64, I32, restype=N)
    dtypes = (run_t.dtype, run_key.dtype, inst_t.dtype, cuts.dtype)
    if fn is not None and dtypes == (np.int64, np.int32, np.int64, np.int64):
        nkeys = max(int(run_key.max(initial=0)), ELASTIC) + 1
        cap = len(inst_t) + len(cuts) + 1  # the stretches: inst_t and cuts (each sorted) merged there
        out_t, out_key = np.empty(cap, np.int64), np.empty(cap, np.int32)
        k = fn(run_t, run_key, len(run_t), end, inst_t, len(inst_t), cuts, len(cuts), nkeys, out_t, out_key)
        if k >= 0:
            return out_t[:k], out_key[:k]
    points = distinct_times(np.concatenate([inst_t, cuts]).astype(np.int64, copy=False))
    # the points inside the run, one stretch of the sorted points: a view, no copy of millions
    inner = points[np.searchsorted(points, run_t[0], "right") : np.searchsorted(points, end, "left")]
    pos = search_sorted(run_t, inner, "left")
    if _on_run_starts(run_t, inner, pos):
        node_t = np.concatenate([[run_t[0]], inner, [end]]).astype(np.int64)
        key = _aligned_largest_keys(run_t, run_key, end, pos)
    else:
        node_t, ent_off, ent_key, ent_ns = _stretches(run_t, run_key, end, points)
        stretch = np.repeat(np.arange(len(node_t) - 1), np.diff(ent_off))
        key = _largest_keys(stretch, ent_key, ent_ns, len(node_t) - 1)
    new = _changes(key)
    return node_t[:-1][new], key[new]


def _aligned_largest_keys(run_t: np.ndarray, run_key: np.ndarray, end: int, pos: np.ndarray) -> np.ndarray:
    """Each stretch's largest key where every node falls on a run's start (``pos``, as
    :func:`_aligned_stretches`): a stretch of one run (most of them: the idle flips cut at every torch op
    outside an operation) is its run's key, 0 when it has no time; the others are summed per key.

    Why: the count per stretch and key is per x keys doubles a block, read whole; over millions of
    one-run stretches it was most of the drawing's time."""
    runs = np.diff(pos, prepend=0, append=len(run_t))  # per stretch, its runs (cut at 0, ``pos``, the end)
    key = np.zeros(len(runs), np.int32)
    one = runs == 1
    several = ~one
    mine = np.repeat(several, runs)  # the runs of the stretches of several runs; the others, one each
    o_dur, m_dur = _run_lengths(run_t, end, mine)
    key[one] = np.where(o_dur > 0, run_key[~mine], 0)
    del o_dur
    if several.any():
        m_first = np.concatenate([[0], np.cumsum(runs[several])])
        stretch, ent_key, ns = _key_sums(run_key[mine], m_first, lambda lo, hi: m_dur[lo:hi])
        key[several] = _largest_keys(stretch, ent_key, ns, len(m_first) - 1)
    return key


def _run_lengths(run_t: np.ndarray, end: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the lengths of the runs outside ``mask``, of those in it), each in run order: ``dur[~mask]``
    and ``dur[mask]`` of ``dur = np.diff(run_t, append=end)``, made a block of runs at a time (the
    runs are millions: no column of them all, nor its copy with ``end`` appended)."""
    n = len(run_t)
    inside = int(np.count_nonzero(mask))
    out, into = np.empty(n - inside, run_t.dtype), np.empty(inside, run_t.dtype)
    a = b = 0
    dur = np.empty(min(n, BLOCK_ROWS), run_t.dtype)
    for r in blocks(n):
        d, m = dur[: r.stop - r.start], mask[r]
        stop = min(r.stop + 1, n)
        np.subtract(run_t[r.start + 1 : stop], run_t[r.start : stop - 1], out=d[: stop - 1 - r.start])
        if r.stop == n:
            d[-1] = end - run_t[-1]
        part = d[~m]
        out[a : a + len(part)] = part
        a += len(part)
        part = d[m]
        into[b : b + len(part)] = part
        b += len(part)
    return out, into


def _largest_keys(stretch: np.ndarray, ent_key: np.ndarray, ent_ns: np.ndarray, n_stretch: int) -> np.ndarray:
    """Per stretch: its largest key of the entries (``stretch``, ``ent_key``, ``ent_ns``: sorted by
    stretch, then key), the first (smallest key) of equal ones; 0 for a stretch with none. A maximum per
    stretch and one pass, not a sort of every entry."""
    most = np.zeros(n_stretch, ent_ns.dtype)
    if len(stretch):
        starts = np.flatnonzero(_changes(stretch))
        most[stretch[starts]] = np.maximum.reduceat(ent_ns, starts)
    at_most = np.flatnonzero(ent_ns == most[stretch])
    top = at_most[_changes(stretch[at_most])]
    key = np.zeros(n_stretch, np.int32)
    key[stretch[top]] = ent_key[top]
    return key


# --------------------------------------------------------------------------- the run's replay


def _idle_keys(keys: list[tuple[str, str]]) -> np.ndarray:
    """Keys of a worker waiting for its command: time outside operations in ``waiting`` or ``rlscope``
    where the process recorded its waits, else (a loop rlscope does not know) in ``python`` too."""
    outside = [i > 0 and op == UNANNOTATED for i, (op, _) in enumerate(keys)]
    recorded = any(o and cat == _WAITING for o, (_, cat) in zip(outside, keys, strict=True))
    idle = _IDLE if recorded else _IDLE_UNRECORDED
    return np.array([o and cat in idle for o, (_, cat) in zip(outside, keys, strict=True)], bool)


def _stretch_of_entries(x: ProcessInputs) -> np.ndarray:
    return np.repeat(np.arange(len(x.node_t) - 1), np.diff(x.ent_off))


def _spans(x: ProcessInputs) -> tuple[np.ndarray, np.ndarray]:
    """A worker's work spans as (first node, last node): maximal stretches holding work (none for a
    worker with no stretch: a compile worker that started and did nothing recorded)."""
    if len(x.node_t) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    idle = _idle_keys(x.keys)
    work_ns = np.bincount(
        _stretch_of_entries(x), weights=np.where(idle[x.ent_key], 0, x.ent_ns), minlength=len(x.node_t) - 1
    )
    work = np.concatenate([[False], work_ns > 0, [False]])
    edges = np.flatnonzero(work[1:] != work[:-1])
    return edges[0::2], edges[1::2]


@dataclasses.dataclass
class _Trigger:
    """A worker's node that starts no earlier than its parent's clock reached its recorded time."""

    node: int
    source: int  # the parent's node (-1: the time is before the parent started: fixed)
    weight: float  # after the source node (the lag into a wait); the fixed time when no source


def _cut_parent(
    p: ProcessInputs, kids: list[tuple[int, ProcessInputs]]
) -> tuple[list[tuple[int, int, list[tuple[int, int]]]], dict[int, list[_Trigger]], np.ndarray]:
    """Cut a working parent's runs into stretches where its workers need nodes: its waits (made
    waiting time) and the parent's clock at each worker's span starts, start and end. Returns the waits
    (start node, end node, [(worker, its span end node)]), each worker's triggers, and the kept syncs."""
    assert p.runs is not None and p.required is not None
    run_t, run_key, run_inst = p.runs
    change = np.ones(len(run_t), bool)
    change[1:] = run_inst[1:] != run_inst[:-1]
    group = np.cumsum(change) - 1
    g_t0 = run_t[change]
    # the spans of every worker, and the wait (a group of the parent's runs) each one's end falls in
    spans = [(c, x, *_spans(x)) for c, x in kids]
    wait: dict[int, list[Any]] = {}
    for c, x, first, last in spans:
        ws, we = x.node_t[first], x.node_t[last]
        inside = (we > p.start_ns) & (we <= p.end_ns)
        gid = group[np.maximum(np.searchsorted(run_t, we, "left") - 1, 0)]
        for k in np.flatnonzero(inside).tolist():
            w = wait.setdefault(int(gid[k]), [None, None, []])
            w[0] = int(ws[k]) if w[0] is None else min(w[0], int(ws[k]))
            w[1] = int(we[k]) if w[1] is None else max(w[1], int(we[k]))
            w[2].append((c, int(last[k])))
    windows = sorted(
        (max(int(g_t0[g]), w[0]), w[1], w[2]) for g, w in wait.items() if max(int(g_t0[g]), w[0]) < w[1]
    )
    w_lo = np.array([w[0] for w in windows], np.int64)
    w_hi = np.array([w[1] for w in windows], np.int64)
    # the parent's own syncs inside a wait are part of it
    keep = ~_within(p.sync_e, w_lo, w_hi, side="left")[1]
    s_lo, s_hi = p.sync_s[keep], p.sync_e[keep]

    def sources(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the parent's time each trigger hangs from, its lag after it): a wait's start, a sync's start,
        the parent's end, the time itself (then a node of the parent), or -1 before the parent began."""
        at, lag = t.copy(), np.zeros(len(t), np.int64)
        for lo, hi in ((s_lo, s_hi), (w_lo, w_hi)):  # a wait over a sync: the wait's start
            j, inside = _within(t, lo, hi)
            at = np.where(inside, lo[j] if len(lo) else t, at)
        lag = t - at
        late = t >= p.end_ns
        at, lag = np.where(late, p.end_ns, at), np.where(late, t - p.end_ns, lag)
        early = t < p.start_ns
        return np.where(early, -1, at), np.where(early, t, lag)

    wanted: dict[int, list[tuple[int, int, int]]] = {}  # worker -> (its node, parent time, lag)
    for c, x, first, last in spans:
        end = len(x.node_t) - 1
        # its start, each span's start, and its end unless a span ends there (the end is then work's)
        nodes = np.unique(np.concatenate([[0], first, [] if len(last) and last[-1] == end else [end]]))
        at, lag = sources(x.node_t[nodes.astype(np.int64)])
        wanted[c] = list(zip(nodes.astype(np.int64).tolist(), at.tolist(), lag.tolist(), strict=True))
    points = [t for rows in wanted.values() for _, t, _ in rows if t >= 0]
    nodes = np.unique(np.concatenate([p.required, w_lo, w_hi, np.array(points, np.int64)]))
    elastic = np.vstack([w_lo, w_hi]) if len(windows) else None
    p.node_t, p.ent_off, p.ent_key, p.ent_ns = _stretches(run_t, run_key, p.end_ns, nodes, elastic)
    node_of = {int(t): i for i, t in enumerate(p.node_t.tolist())}
    triggers = {
        c: [
            _Trigger(node, -1, float(lag)) if t < 0 else _Trigger(node, node_of[t], float(lag))
            for node, t, lag in rows
        ]
        for c, rows in wanted.items()
    }
    waits = [(node_of[lo], node_of[hi], members) for lo, hi, members in windows]
    return waits, triggers, keep


@dataclasses.dataclass
class _Ready:
    """One process's chain as the replay runs it, with its state."""

    node_t: np.ndarray
    ent_off: np.ndarray
    ent_key: np.ndarray
    ent_ns: np.ndarray
    F: np.ndarray  # (scenarios, keys): each key's factor in each scenario
    rec_node: np.ndarray
    rec_stream: np.ndarray
    rec_delta: np.ndarray
    rec_dur: np.ndarray
    rec_key: np.ndarray
    anchor: int = 0
    val: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    next_rec: int = 0
    tail: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    tail_rec: dict[int, int] = dataclasses.field(default_factory=dict)
    launch_won: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, bool))  # recorded
    block: tuple | None = None  # (first node, last node, cumulative time, GPU streams): _Replay._block
    source: dict[int, tuple] = dataclasses.field(default_factory=dict)  # baseline: what set a barrier


SYNC, WAIT, JOIN, TRIGGER = 0, 1, 2, 3
_PRIORITY = {SYNC: 0, WAIT: 1, JOIN: 1, TRIGGER: 2}  # at one time: GPU waits, then waits on workers


class _Replay:
    """The longest-path evaluation of every chain at once, one column per scenario (column 0: recorded)."""

    def __init__(self, chains: list[_Ready]) -> None:
        self.ch = chains
        self.fallbacks = 0  # values asked behind a chain's replayed point (read back linearly)

    def _block(self, ch: _Ready) -> None:
        """The chain's next nodes from its anchor (about ``_CHUNK`` entries) made ready for lookups, every
        scenario at once: each node's cumulative time, and for the GPU records launched there, per
        stream, what their recurrence needs (then a node's value is two lookups and a push a few)."""
        b0 = ch.anchor
        lo = int(ch.ent_off[b0])
        b1 = min(len(ch.node_t) - 1, max(b0 + 1, int(np.searchsorted(ch.ent_off, lo + _CHUNK, "right")) - 1))
        hi = int(ch.ent_off[b1])
        cum = np.zeros((ch.F.shape[0], max(hi - lo, 0) + 1))
        if hi > lo:
            np.cumsum(ch.ent_ns[lo:hi] * ch.F[:, ch.ent_key[lo:hi]], axis=1, out=cum[:, 1:])
        cum = cum[:, ch.ent_off[b0 : b1 + 1] - lo]
        # a record r ends at e_r = max(e_{r-1}, L_r) + Q_r on its stream: with P the running sum of Q
        # there, e_r - P_r = max(e_{r-1} - P_{r-1}, L_r - P_{r-1}), and L_r = base + cum[node_r]
        streams: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        r_lo, r_hi = np.searchsorted(ch.rec_node, [b0, b1], "left").tolist()
        if r_hi > r_lo:
            on = ch.rec_stream[r_lo:r_hi]
            q_all = ch.rec_dur[r_lo:r_hi] * ch.F[:, ch.rec_key[r_lo:r_hi]] + ch.rec_delta[r_lo:r_hi]
            launch = cum[:, ch.rec_node[r_lo:r_hi] - b0]
            for q in np.unique(on).tolist():
                sel = np.flatnonzero(on == q)
                p = np.cumsum(q_all[:, sel], axis=1)
                streams[q] = (r_lo + sel, launch[:, sel] - p + q_all[:, sel], p)
        ch.block = (b0, b1, cum, streams)

    def advance(self, c: int, n: int) -> None:
        """Replay chain ``c`` up to node ``n`` along its own stretches, pushing the GPU work launched."""
        ch = self.ch[c]
        while ch.anchor < n:
            if ch.block is None or not ch.block[0] <= ch.anchor < ch.block[1]:
                self._block(ch)
            b0, b1, cum, streams = ch.block
            a, target = ch.anchor, min(n, b1)
            base = ch.val - cum[:, a - b0]  # the value of node j is base + cum[:, j - b0]
            if ch.next_rec < len(ch.rec_node):
                self._push(ch, target, base, streams)
            ch.anchor, ch.val = target, base + cum[:, target - b0]

    def _push(self, ch: _Ready, n1: int, base: np.ndarray, streams: dict[int, tuple]) -> None:
        """Run the GPU records launched before node n1 (not yet run) on their streams: each stream's
        tail is all the replay needs of them."""
        r0 = ch.next_rec
        r1 = int(ch.rec_node.searchsorted(n1))
        if r1 <= r0:
            return
        ch.next_rec = r1
        for q, (index, d, p) in streams.items():
            i0, i1 = int(index.searchsorted(r0)), int(index.searchsorted(r1))
            if i1 <= i0:
                continue
            top = base + d[:, i0:i1].max(axis=1)
            tail = ch.tail.get(q)
            if tail is not None:
                top = np.maximum(top, tail - p[:, i0 - 1] if i0 else tail)
            ch.tail[q] = top + p[:, i1 - 1]
            ch.tail_rec[q] = int(index[i1 - 1])

    def value_at(self, c: int, n: int) -> np.ndarray:
        ch = self.ch[c]
        if n >= ch.anchor:
            self.advance(c, n)
            return ch.val
        self.fallbacks += 1  # behind its replayed point: read back along its own stretches
        lo, hi = int(ch.ent_off[n]), int(ch.ent_off[ch.anchor])
        return ch.val - (ch.ent_ns[lo:hi] * ch.F[:, ch.ent_key[lo:hi]]).sum(axis=1)

    def barrier(self, kind: int, c: int, n: int, payload: Any) -> None:
        ch = self.ch[c]
        if kind == TRIGGER and n == 0:  # a worker's start follows its parent's clock alone
            ch.val = self._trigger_value(payload)
            ch.source[0] = _link_source(payload)
            return
        self.advance(c, n)
        own = ch.val
        best: tuple | None = None
        ext: np.ndarray | None = None
        if kind == SYNC:
            deps, b, key = payload
            scaled = b * ch.F[:, key] if b > 0 else b
            for q in deps:
                v = ch.tail[q] + scaled
                if ext is None or v[0] > ext[0]:
                    best = ("gpu", ch.tail_rec[q], float(b), int(key))
                ext = v if ext is None else np.maximum(ext, v)
        elif kind in (WAIT, JOIN):
            for q, m, lag in payload:
                v = self.value_at(q, m) + lag
                if ext is None or v[0] > ext[0]:
                    best = ("proc", q, m, lag)
                ext = v if ext is None else np.maximum(ext, v)
        else:
            ext = self._trigger_value(payload)
            best = _link_source(payload)
        if ext is None:
            return
        if ext[0] >= own[0]:
            ch.source[n] = best
        ch.val = np.maximum(own, ext)

    def _trigger_value(self, t: Any) -> np.ndarray:
        if t.source < 0:
            return np.full(len(self.ch[0].val), t.weight)
        return self.value_at(t.source_chain, t.source) + t.weight


@dataclasses.dataclass
class _Link:
    """A trigger's source: the parent's chain and node, and the lag after it (``source`` -1: a fixed time,
    ``weight``)."""

    source_chain: int
    source: int
    weight: float


def _link_source(link: _Link) -> tuple:
    if link.source < 0:
        return ("fixed",)
    return ("proc", link.source_chain, link.source, link.weight)


@dataclasses.dataclass
class _Target:
    kind: str  # "operation" or "role"
    name: str
    part: str  # ALL, a CPU category or GPU (operations); ALL (roles)


def _matches(target: _Target, role: str, keys: list[tuple[str, str]]) -> np.ndarray:
    out = np.zeros(len(keys), bool)
    for i, (op, cat) in enumerate(keys):
        if i == ELASTIC or cat in _NOT_TARGETS:
            continue
        if target.kind == "role":
            out[i] = role == target.name
        elif op == target.name:
            out[i] = target.part == ALL or cat == target.part or (target.part == GPU and cat in _GPU_NAMES)
    return out


def _key_time(x: ProcessInputs) -> np.ndarray:
    """Each key's replayed time in a process (ns): main-thread work and GPU records."""
    k = len(x.keys)
    cpu = np.bincount(x.ent_key, weights=x.ent_ns.astype(np.float64), minlength=k)
    gpu_ns = np.bincount(x.rec_key, weights=x.rec_dur.astype(np.float64), minlength=k)
    out = cpu + gpu_ns
    out[ELASTIC] = 0.0
    return out


def _targets(procs: list[ProcessInputs], roles: list[str], top: int) -> list[_Target]:
    """The top operations by time (each whole, by CPU category and its GPU work), and every role when
    the run has several processes."""
    by_op: dict[str, dict[str, float]] = {}
    for x in procs:
        for (op, cat), ns in zip(x.keys, _key_time(x).tolist(), strict=True):
            if ns > 0 and cat not in _NOT_TARGETS and op:
                part = GPU if cat in _GPU_NAMES else cat
                by_op.setdefault(op, {}).setdefault(part, 0.0)
                by_op[op][part] += ns
    ranked = sorted(by_op.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:top]
    order = [*categories.CPU_CATEGORIES.values(), GPU]
    out = []
    for op, parts in ranked:
        out.append(_Target("operation", op, ALL))
        out += [_Target("operation", op, p) for p in sorted(parts, key=order.index)]
    if len(procs) > 1:
        out += [_Target("role", r, ALL) for r in dict.fromkeys(roles)]
    return out


def _node(x: ProcessInputs, t: np.ndarray) -> np.ndarray:
    """The node at each time (the last node at or before it, should one be missing)."""
    return np.maximum(np.searchsorted(x.node_t, t, "right") - 1, 0)


def _factors(
    targets: list[_Target], role: str, keys: list[tuple[str, str]], ks: Sequence[float]
) -> np.ndarray:
    """(1 + targets x ks, keys): column 0 the recorded run, then each target at each k; waiting is 0."""
    f = np.array([0.0 if math.isinf(k) else 1.0 / k for k in ks])
    m = np.array([_matches(t, role, keys) for t in targets], bool).reshape(len(targets), len(keys))
    rest = 1.0 - (1.0 - f)[None, :, None] * m[:, None, :]
    out = np.vstack([np.ones((1, len(keys))), rest.reshape(-1, len(keys))])
    out[:, ELASTIC] = 0.0
    return out


@dataclasses.dataclass
class _Path:
    """The recorded critical path: per chain, its stretches and GPU records on it, and the lags."""

    cpu: dict[int, list[tuple[int, int]]]
    gpu: dict[int, list[tuple[int, int]]]  # (first record, last record) of a run on one stream
    sync: list[tuple[int, int, float]]  # (chain, key, the tail after the GPU work) of waits on it
    complete: bool  # walked back to the run's start


def _run_starts(ch: _Ready) -> tuple[np.ndarray, np.ndarray]:
    """(rank of each record in stream order, the record that began each one's run on its stream: the
    last one at or before it that started at its launch rather than after the record before it)."""
    order = np.argsort(ch.rec_stream, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    began = np.maximum.accumulate(np.where(ch.launch_won[order], np.arange(len(order)), 0))
    start_of = np.empty(len(order), np.int64)
    start_of[order] = order[began]
    return rank, start_of


def _walk_back(replay: _Replay, end_chain: int) -> _Path:
    """From the last process end back to the run's start, through whatever set each barrier's time."""
    ch = replay.ch
    marks = {c: np.array(sorted(x.source), np.int64) for c, x in enumerate(ch)}
    starts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    path = _Path({}, {}, [], False)
    c, n = end_chain, len(ch[end_chain].node_t) - 1
    seen: set[tuple[int, int]] = set()
    for _ in range(sum(len(m) for m in marks.values()) + 2):
        if (c, n) in seen:
            return path
        seen.add((c, n))
        j = int(marks[c].searchsorted(n, "right")) - 1
        if j < 0:
            path.cpu.setdefault(c, []).append((0, n))
            path.complete = True
            return path
        b = int(marks[c][j])
        if b < n:
            path.cpu.setdefault(c, []).append((b, n))
        src = ch[c].source[b]
        if src[0] == "gpu":
            _, r, tail, key = src
            path.sync.append((c, key, tail))
            if c not in starts:
                starts[c] = _run_starts(ch[c])
            r0 = int(starts[c][1][r])
            path.gpu.setdefault(c, []).append((r0, r))
            n = int(ch[c].rec_node[r0])
        elif src[0] == "proc":
            _, c, n, _ = src
        else:
            path.complete = True
            return path
    return path


_Clip = tuple[tuple[np.ndarray, np.ndarray], int, np.ndarray, np.ndarray, np.ndarray]  # _clip's arguments
_Picked = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # index, start, end, key


@dataclasses.dataclass
class _PathPart:
    """One chain's intervals on the critical path, in order: its main thread's (lane 0), its drawn path
    clipped to the path's stretches (``clip``: :func:`_clip`'s arguments) where read, or its GPU
    records' (lane 1: ``cols``, their start, end and key). ``checked``: a C pass over every drawn run
    found them in order and their keys shown's (a later pass reads only some)."""

    chain: int
    lane: int
    clip: _Clip | None = None
    cols: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    checked: ClassVar[bool] = False  # set on the part once found: not a field, its intervals are the same

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, key) of every interval."""
        s, e, k = _clip(*self.clip) if self.clip is not None else self.cols
        return np.asarray(s, np.int64), np.asarray(e, np.int64), np.asarray(k, np.int32)

    def longest(self, k: int) -> _Picked:
        """Its ``k`` longest intervals as ``_first_sorted(start - end, k)`` picks them: a main thread's in one
        C pass that writes no other."""
        if self.clip is not None:
            args = I64, I32, N, N, I64, I64, N, BOOL, N, N, I64, I64, I64, I32
            fn = native.function("whatif_clip_longest", *args, restype=N)
            if fn is not None and _clip_types(self.clip):
                (ds, dk), end, lo, hi, shown = self.clip
                idx, s, e = (np.empty(k, np.int64) for _ in range(3))
                key = np.empty(k, np.int32)
                n = fn(ds, dk, len(ds), end, lo, hi, len(lo), shown, len(shown), k, idx, s, e, key)
                if n >= 0:
                    self.checked = True
                    m = min(n, k)
                    return idx[:m], s[:m], e[:m], key[:m]
        s, e, key = self.columns()
        idx = _first_sorted(s - e, k)
        return idx, s[idx], e[idx], key[idx]

    def overlapping(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, key) of its intervals overlapping ``[lo, hi)`` in order, a main thread's in one C
        pass over the drawn runs about the window."""
        if self.clip is not None:
            args = I64, I32, N, N, I64, I64, N, BOOL, N, N, N, N, I64, I64, I32, N
            fn = native.function("whatif_clip_window", *args, restype=N)
            if fn is not None and _clip_types(self.clip):
                (ds, dk), end, c_lo, c_hi, shown = self.clip
                cap = len(ds) + len(c_lo)  # as _clip's
                s, e, key = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int32)
                runs = (ds, dk, len(ds), end, c_lo, c_hi, len(c_lo), shown, len(shown))
                m = fn(*runs, lo, hi, int(self.checked), s, e, key, cap)
                if m >= 0:
                    return s[:m], e[:m], key[:m]
        s, e, key = self.columns()
        idx = np.flatnonzero((e > lo) & (s < hi))
        return s[idx], e[idx], key[idx]


def _clip_types(clip: _Clip) -> bool:
    """Whether :func:`_clip`'s arguments are of the types its C loops take."""
    (ds, dk), _, lo, hi, _ = clip
    return ds.dtype == lo.dtype == hi.dtype == np.int64 and dk.dtype == np.int32


@dataclasses.dataclass
class PathIntervals:
    """The critical path's intervals: each a run of one key on a process's main thread (lane 0) or one GPU
    record (lane 1), in ns since the run start, part by part in path order (``parts``; a part's
    ``chain`` indexes ``pids`` and ``keys``).

    Why parts: a main thread's intervals are millions (one CPU-bound process: nearly every torch op),
    of which the summary lists a dozen and the report a window's; they are clipped from its drawn
    path where read (:meth:`longest`, :meth:`overlapping`), never written whole."""

    parts: list[_PathPart]
    pids: list[int]
    keys: list[list[tuple[str, str]]]

    def _picked(self, picked: list[_Picked]) -> tuple[np.ndarray, ...]:
        """The parts' picks end to end: (part, index in it, start, end, key); sorted by (part, index),
        the path's order."""
        if not picked:
            empty = _empty_i64()
            return empty, empty, empty, empty, np.zeros(0, np.int32)
        count = np.array([len(p[0]) for p in picked], np.int64)
        part = np.repeat(np.arange(len(picked), dtype=np.int64), count)
        return part, *(np.concatenate([p[i] for p in picked]) for i in range(4))

    def _rows(self, cols: tuple[np.ndarray, ...], order: np.ndarray) -> list[dict[str, Any]]:
        part, _, start, end, key = cols
        out = []
        for i in order.tolist():
            p = self.parts[int(part[i])]
            op, cat = self.keys[p.chain][int(key[i])]
            out.append(
                {
                    "pid": self.pids[p.chain],
                    "lane": "gpu" if p.lane else "main",
                    "operation": op,
                    "category": cat,
                    "start_s": float(start[i]) / 1e9,
                    "end_s": float(end[i]) / 1e9,
                }
            )
        return out

    def longest(self, k: int) -> list[dict[str, Any]]:
        """The ``k`` longest intervals (the first in path order of equal ones), in order of start."""
        cols = self._picked([p.longest(k) for p in self.parts])
        part, idx, start, end, _ = cols
        top = np.lexsort((idx, part, start - end))[:k]  # each part's k longest hold the path's
        return self._rows(cols, top[np.argsort(start[top], kind="stable")])

    def overlapping(self, lo: int, hi: int, most: int) -> tuple[list[dict[str, Any]], int]:
        """The first ``most`` intervals overlapping ``[lo, hi)`` in order of start (the first in path order
        of equal ones), and how many overlap it."""
        # each part's in order: their place among its picks orders them as their index would
        picked = [
            (np.arange(len(s), dtype=np.int64), s, e, k)
            for s, e, k in (p.overlapping(lo, hi) for p in self.parts)
        ]
        cols = self._picked(picked)
        order = np.lexsort((cols[1], cols[0], cols[2]))
        return self._rows(cols, order[:most]), len(order)


def _clip(
    drawn: tuple[np.ndarray, np.ndarray], end: int, lo: np.ndarray, hi: np.ndarray, shown: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, key) of the drawn runs (``ProcessInputs.drawn``, the last lasting to ``end``) within
    the sorted disjoint intervals ``[lo, hi)``, keys not ``shown`` left out, touching ones of one key
    joined."""
    ds, dk = drawn
    fn = native.function("whatif_clip", I64, I32, N, N, I64, I64, N, BOOL, N, I64, I64, I32, N, restype=N)
    if fn is not None and ds.dtype == lo.dtype == hi.dtype == np.int64 and dk.dtype == np.int32:
        cap = len(ds) + len(lo)  # overlaps of two lists of disjoint sorted intervals
        s, e, k = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int32)
        got = fn(ds, dk, len(ds), end, lo, hi, len(lo), shown, len(shown), s, e, k, cap)
        if got >= 0:
            return s[:got], e[:got], k[:got]
    de = np.append(ds[1:], end).astype(np.int64)
    i0 = np.searchsorted(de, lo, "right")  # the first run ending after each interval's start
    cnt = np.maximum(np.searchsorted(ds, hi, "left") - i0, 0)
    if len(lo) == 1:  # one interval (a process's path without a break): its runs are one slice
        run = slice(int(i0[0]), int(i0[0] + cnt[0]))
        s, e, k = np.maximum(ds[run], lo[0]), np.minimum(de[run], hi[0]), dk[run]
    else:
        which = np.repeat(np.arange(len(lo)), cnt)
        at = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(i0, cnt)
        s, e, k = np.maximum(ds[at], lo[which]), np.minimum(de[at], hi[which]), dk[at]
    keep = shown[k] & (e > s)
    s, e, k = s[keep], e[keep], k[keep]
    new = np.ones(len(s), bool)
    new[1:] = (k[1:] != k[:-1]) | (s[1:] != e[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s))[: len(first)] - 1
    return s[first], e[last], k[first]


def _segments(
    procs: list[ProcessInputs], replay: _Replay, path: _Path
) -> tuple[list[np.ndarray], list[np.ndarray], PathIntervals]:
    """Per chain, each key's time on the path (ns: main thread, GPU), and the path's intervals."""
    on_key, on_gpu_key = [], []
    parts: list[_PathPart] = []
    for c, (x, ch) in enumerate(zip(procs, replay.ch, strict=True)):
        k = len(x.keys)
        mark = np.zeros(len(x.node_t), np.int64)
        for lo, hi in path.cpu.get(c, []):
            mark[lo] += 1
            mark[hi] -= 1
        on = np.cumsum(mark)[:-1] > 0
        stretch = _stretch_of_entries(x)
        weight = x.ent_ns * ch.F[0, x.ent_key] * on[stretch]
        on_key.append(np.bincount(x.ent_key, weights=weight, minlength=k))
        working = np.bincount(stretch, weights=weight, minlength=len(x.node_t) - 1) > 0
        if working.any():  # the stretches on the path that hold work, drawn as what ran in them
            edge = np.flatnonzero(np.diff(np.concatenate([[0], working.astype(np.int8), [0]])))
            lo, hi = x.node_t[edge[0::2]], x.node_t[edge[1::2]]
            parts.append(_PathPart(c, 0, clip=(x.drawn, x.end_ns, lo, hi, ch.F[0] > 0)))
        g = np.zeros(k)
        if path.gpu.get(c):
            rank, _ = _run_starts(ch)
            rmark = np.zeros(len(rank) + 1, np.int64)
            for r0, r in path.gpu[c]:
                rmark[rank[r0]] += 1
                rmark[rank[r] + 1] -= 1
            on_rec = (np.cumsum(rmark)[:-1] > 0)[rank]
            g = np.bincount(x.rec_key, weights=x.rec_dur * on_rec, minlength=k).astype(np.float64)
            r = np.flatnonzero(on_rec)
            parts.append(_PathPart(c, 1, cols=(x.rec_start[r], x.rec_start[r] + x.rec_dur[r], x.rec_key[r])))
        on_gpu_key.append(g)
    for c, key, tail in path.sync:
        on_key[c][key] += max(tail, 0.0)
    return on_key, on_gpu_key, PathIntervals(parts, [x.pid for x in procs], [x.keys for x in procs])


def corrections(summary: Mapping[str, Any]) -> list[dict[tuple[str, str], float]]:
    """Per process (summary order), corrected over raw seconds of each (operation, category): the factor
    the replay scales that recorded main-thread time by, so each scenario's time is its corrected time.

    Why: rlscope's own cost is not spread evenly: the scope boundaries, the automatic operations'
    wrappers and the recorders' callbacks sit in some operations' ``python`` and ``backend`` time far
    more than in others. Scaled by the run's overall ratio only, an operation's Python made infinitely
    fast saved more than its corrected Python time (a raw figure with rlscope's cost in it)."""
    raw = (summary.get("raw") or summary).get("processes") or []
    out = []
    for got, rec in zip(summary.get("processes") or [], raw, strict=False):
        f: dict[tuple[str, str], float] = {}
        for op, o in (rec.get("operations") or {}).items():
            mine = ((got.get("operations") or {}).get(op) or {}).get("categories") or {}
            for cat, r in (o.get("categories") or {}).items():
                if r and r > 0 and cat in mine:
                    f[(op, cat)] = max(0.0, float(mine[cat]) / float(r))
        r_un, c_un = float(rec.get("unannotated_s", 0.0)), float(got.get("unannotated_s", 0.0))
        if r_un > 0:
            f[(UNANNOTATED, "*")] = max(0.0, c_un / r_un)
        out.append(f)
    return out


def _corrected_ns(x: ProcessInputs, factors: Mapping[tuple[str, str], float] | None) -> np.ndarray:
    """The process's main-thread time per entry, scaled by its (operation, category)'s correction."""
    ns = x.ent_ns.astype(np.float64)
    if not factors:
        return ns
    per_key = np.array(
        [factors.get((op, cat), factors.get((op, "*"), 1.0)) for op, cat in x.keys], np.float64
    )
    per_key[ELASTIC] = 1.0
    return ns * per_key[x.ent_key] if len(per_key) else ns


def what_if(
    inputs: Sequence[ProcessInputs | None],
    roles: Sequence[str],
    wall_s: float,
    ks: Sequence[float] | None = None,
    top: int = TOP_OPERATIONS,
    factors: Sequence[Mapping[tuple[str, str], float]] | None = None,
) -> tuple[dict[str, Any], PathIntervals] | None:
    """The summary's ``what_if`` and the critical path's intervals, from each process's inputs (in trace
    order, None for a process without them) and role; ``wall_s``: the summary's wall, which the savings
    are scaled to; ``factors``: per process (trace order), the correction of each (operation, category)
    of its main-thread time (:func:`corrections`; None: the time as recorded). None without any input."""
    ks = K_VALUES if ks is None else ks
    present = [(i, x) for i, x in enumerate(inputs) if x is not None]
    if not present:
        return None
    procs = [dataclasses.replace(x) for _, x in present]  # cut and rewritten here, not in the pieces
    proles = [roles[i] for i, _ in present]
    pfactors = [factors[i] if factors is not None and i < len(factors) else None for i, _ in present]
    by_pid: dict[int, int] = {}
    for c, x in enumerate(procs):
        by_pid.setdefault(x.pid, c)
    parent_of = [by_pid.get(x.parent) if x.parent and x.parent != x.pid else None for x in procs]
    kids: dict[int, list[int]] = {}
    for c, p in enumerate(parent_of):
        if p is not None:
            kids.setdefault(p, []).append(c)

    def depth(c: int) -> int:
        d, seen = 0, {c}
        while parent_of[c] is not None and parent_of[c] not in seen:
            c = parent_of[c]
            seen.add(c)
            d += 1
        return d

    barriers: list[tuple[int, int, int, int, int, Any]] = []
    kept: dict[int, np.ndarray] = {}
    elastic: set[int] = set()
    # every parent (its runs kept), a worker's spans cut before its parent's; one whose children left
    # no inputs (a compile pool's launcher, its forked workers ended before their first flush) is cut
    # as one with none
    parents = [c for c, x in enumerate(procs) if x.runs is not None]
    for p in sorted(parents, key=depth, reverse=True):
        x = procs[p]
        if not x.working:  # a parent that did no work: its runs become stretches as they are
            assert x.required is not None
            x.node_t, x.ent_off, x.ent_key, x.ent_ns = _stretches(x.runs[0], x.runs[1], x.end_ns, x.required)
        else:
            waits, triggers, kept[p] = _cut_parent(x, [(c, procs[c]) for c in kids.get(p, [])])
            for _, hi, members in waits:
                barriers.append(
                    (int(x.node_t[hi]), _PRIORITY[WAIT], p, hi, WAIT, [(q, m, 0.0) for q, m in members])
                )
            for c, rows in triggers.items():
                elastic.add(c)
                for t in rows:
                    link = _Link(p, t.source, t.weight)
                    barriers.append(
                        (int(procs[c].node_t[t.node]), _PRIORITY[TRIGGER], c, t.node, TRIGGER, link)
                    )
    for c, x in enumerate(procs):
        launcher = c in kids and not x.working and c not in elastic
        if c in elastic or launcher:  # time outside operations waits (for a command, for the children)
            idle = _idle_keys(x.keys)
            x.ent_key = np.where(idle[x.ent_key], ELASTIC, x.ent_key).astype(np.int32)
            x.drawn = (x.drawn[0], np.where(idle[x.drawn[1]], ELASTIC, x.drawn[1]).astype(np.int32))
        if launcher:
            last = len(x.node_t) - 1
            last_kid = max(procs[q].end_ns for q in kids[c])  # it ends its recorded lag after the last one
            members = [(q, len(procs[q].node_t) - 1, float(x.end_ns - last_kid)) for q in kids[c]]
            t = max(x.end_ns, last_kid)
            barriers.append((t, _PRIORITY[JOIN], c, last, JOIN, members))
        keep = kept.get(c, np.ones(len(x.sync_s), bool))
        n_e = _node(x, x.sync_e)
        for j in np.flatnonzero(keep).tolist():
            deps = x.sync_dep_stream[x.sync_dep_off[j] : x.sync_dep_off[j + 1]].tolist()
            payload = (deps, float(x.sync_b[j]), int(x.sync_key[j]))
            barriers.append((int(x.sync_e[j]), _PRIORITY[SYNC], c, int(n_e[j]), SYNC, payload))
    barriers.sort(key=lambda b: b[:4])
    corrected = any(pfactors)
    for x, fx in zip(procs, pfactors, strict=True):  # each scenario's time is its corrected time
        x.ent_ns = _corrected_ns(x, fx)

    targets = _targets(procs, proles, top)
    nscen = 1 + len(targets) * len(ks)
    chains = []
    for x, role in zip(procs, proles, strict=True):
        ch = _Ready(
            node_t=x.node_t,
            ent_off=x.ent_off,
            ent_key=x.ent_key,
            ent_ns=x.ent_ns.astype(np.float64),
            F=_factors(targets, role, x.keys, ks),
            rec_node=_node(x, x.rec_t),
            rec_stream=x.rec_stream,
            rec_delta=x.rec_delta.astype(np.float64),
            rec_dur=x.rec_dur.astype(np.float64),
            rec_key=x.rec_key,
        )
        ch.val = np.full(nscen, float(x.node_t[0]))
        ch.launch_won = x.rec_won
        chains.append(ch)
    replay = _Replay(chains)
    for _, _, c, n, kind, payload in barriers:
        replay.barrier(kind, c, n, payload)
    for c, x in enumerate(procs):
        replay.advance(c, len(x.node_t) - 1)
    ends = np.vstack([ch.val for ch in chains])
    t0 = min(x.start_ns for x in procs)
    walls = ends.max(axis=0) - t0
    recorded = max(x.end_ns for x in procs) - t0

    path = _walk_back(replay, int(np.argmax(ends[:, 0])))
    on_cpu, on_gpu, intervals = _segments(procs, replay, path)
    return _summary(
        procs,
        proles,
        targets,
        ks,
        walls,
        recorded,
        wall_s,
        on_cpu,
        on_gpu,
        intervals,
        path,
        replay,
        corrected,
    )


def _summary(
    procs: list[ProcessInputs],
    roles: list[str],
    targets: list[_Target],
    ks: Sequence[float],
    walls: np.ndarray,
    recorded: int,
    wall_s: float,
    on_cpu: list[np.ndarray],
    on_gpu: list[np.ndarray],
    intervals: PathIntervals,
    path: _Path,
    replay: _Replay,
    corrected: bool = False,
) -> tuple[dict[str, Any], PathIntervals]:
    # savings are against the replay of the run as it was: the recorded wall, or with corrected times
    # the corrected replay's (rlscope's own cost taken out); then scaled to the summary's wall
    base = float(walls[0]) if corrected else float(recorded)
    scale = wall_s / (base / 1e9) if base > 0 else 1.0
    times = [_key_time(x) for x in procs]
    on_path = [a + b for a, b in zip(on_cpu, on_gpu, strict=True)]
    labels = [k_label(k) for k in ks]
    operations: dict[str, dict[str, Any]] = {}
    role_out: dict[str, Any] = {}
    for i, t in enumerate(targets):
        time_ns = on_ns = 0.0
        for x, role, spent, on in zip(procs, roles, times, on_path, strict=True):
            m = _matches(t, role, x.keys)
            time_ns += float(spent[m].sum())
            on_ns += float(on[m].sum())
        cols = 1 + i * len(ks) + np.arange(len(ks))
        saved = np.maximum(base - walls[cols], 0.0) / 1e9 * scale
        entry = {
            "time_s": time_ns / 1e9 * scale,
            "on_path_s": on_ns / 1e9 * scale,
            "on_path_share": on_ns / time_ns if time_ns > 0 else 0.0,
            "saving_s": dict(zip(labels, saved.tolist(), strict=True)),
            "wall_s": dict(zip(labels, (wall_s - saved).tolist(), strict=True)),
        }
        if t.kind == "role":
            role_out[t.name] = {
                "pids": [x.pid for x, r in zip(procs, roles, strict=True) if r == t.name],
                **entry,
            }
        else:
            operations.setdefault(t.name, {})[t.part] = entry
    by_op: dict[str, dict[str, float]] = {}
    by_pid: dict[str, float] = {}
    for x, on in zip(procs, on_path, strict=True):
        for (op, cat), ns in zip(x.keys, on.tolist(), strict=True):
            if ns > 0:
                part = by_op.setdefault(op, {})
                part[cat] = part.get(cat, 0.0) + ns / 1e9 * scale
        by_pid[str(x.pid)] = by_pid.get(str(x.pid), 0.0) + float(on.sum()) / 1e9 * scale
    accounted = sum(float(on.sum()) for on in on_path)
    notes = []
    if not corrected and abs(float(walls[0]) - recorded) > 1.0:
        notes.append(
            f"the replay of the recorded schedule ends {float(walls[0]) / 1e9:.6f} s after the run's start,"
            f" not at its recorded wall {recorded / 1e9:.6f} s: predictions are relative to the replay"
        )
    if not path.complete:
        notes.append("the critical path could not be followed back to the run's start")
    if replay.fallbacks:
        notes.append(
            f"{replay.fallbacks} dependencies were met out of recorded order and read back along their"
            " process's own time: the predictions around them are approximate"
        )
    if any(r == "ddp rank" for r in roles):
        notes.append(
            "DDP ranks replay on their own: their waits on one another in collectives are not modeled"
        )
    out = {
        "recorded_s": recorded / 1e9,
        "wall_s": wall_s,
        "k": labels,
        "operations": operations,
        "roles": role_out,
        "critical_path": {
            "length_s": float(walls[0]) / 1e9 * scale,
            "operations": by_op,
            "latency_s": max(float(walls[0]) - accounted, 0.0) / 1e9 * scale,
            "processes": by_pid,
            "segments": intervals.longest(PATH_SEGMENTS),
        },
        "notes": notes,
    }
    return out, intervals


MAX_DRAWN = 20_000  # the critical path's intervals the report carries (its timeline window's first ones)


def in_window(intervals: PathIntervals, window_s: Sequence[float]) -> dict[str, Any]:
    """The critical path's intervals that overlap the report's timeline window (the first ``MAX_DRAWN``)."""
    lo, hi = round(float(window_s[0]) * 1e9), round(float(window_s[1]) * 1e9)
    rows, overlapping = intervals.overlapping(lo, hi, MAX_DRAWN)
    return {"intervals": rows, "capped": overlapping > MAX_DRAWN}
