"""The live view's figures: per role, the last interval and the run so far, while the run goes on.

They come from the aggregates each process appends at every flush (rlscope/trace/aggregate.py),
read as they reach disk (:mod:`rlscope.trace.follow`): a few rows per thread and state and flush,
so a refresh costs the rows that came since the last one, and the totals are kept per key, not per
row, so memory is bounded by the run's distinct states however long it lasts.

The rules are the breakdown's (:mod:`rlscope.analysis.breakdown`): on a process's main thread, the
thread of its session's start row, all time counts, inside an operation or as ``[unannotated]``; on
other threads only time inside operations. Shares are of the main-thread time of the processes shown.
The figures are raw: rlscope's own cost is in them (the end-of-run analysis removes it), and the
categories are those the aggregates carry (time in torch ops that the native backend recorder
records, and in CUDA API calls, counts as python: only the full analysis merges those in).

**The last interval** is each process's flushes stamped within the refresh period before the run's
latest flush, on the clock all processes share (at least a process's last flush when that is newer
than a flush period): a process whose last flush is older has ended or stalled, and is out of it.
**Rates** (calls/s) are per process, its calls over the time its flushes cover, summed over processes.
**Steps** are the calls of ``simulation`` (a user's scope or the automatic one: one operation) summed
over every process, when any process has them; else those of the main thread's operation with the
most inclusive time in the first role (the aggregates keep no nesting: an outer loop's scope has the
most).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope import categories
from rlscope.analysis.roles import SIMULATION, process_roles, refined_role, role_order
from rlscope.trace import schema as S
from rlscope.trace.follow import AGGREGATE_COLUMNS, ProcessNews
from rlscope.trace.header import parent_pid
from rlscope.trace.reader import sum_by

__all__ = [
    "STEP_OPERATIONS",
    "Group",
    "LiveFigures",
    "LiveView",
    "OpFigures",
    "Part",
    "Span",
]

UNANNOTATED, NO_PHASE = categories.UNANNOTATED, categories.NO_PHASE
# what steps are counted by, first found first
STEP_OPERATIONS = ("simulation",)
STEPS_SIMULATION = "simulation"
STEPS_OUTERMOST = "outermost operation on the main thread"
CATEGORY_ORDER = ("python", "simulator", "backend", "cuda_api", "rlscope")


@dataclasses.dataclass(frozen=True)
class Part:
    """Seconds, and their share of the main-thread time they are shown with."""

    seconds: float
    share: float


@dataclasses.dataclass(frozen=True)
class OpFigures(Part):
    """An operation's exclusive seconds, its calls that ended and their rate (None: no time to divide by)."""

    calls: int = 0
    per_s: float | None = None


@dataclasses.dataclass
class Span:
    """One stretch of the run (the last interval, or the run so far) of one group of processes."""

    seconds: float  # the longest time a process's flushes in it cover
    main_s: float  # main-thread seconds: what shares are of
    phases: dict[str, dict[str, OpFigures]]  # phase -> operation -> figures, most time first
    operations: dict[str, OpFigures]  # the same over phases; [unannotated] last
    categories: dict[str, Part]  # CPU category -> time (CATEGORY_ORDER)


@dataclasses.dataclass
class Group:
    """The processes of one role."""

    role: str
    pids: list[int]
    ended: int  # how many of them have ended
    interval: Span
    so_far: Span


@dataclasses.dataclass
class LiveView:
    """Everything a live view shows at one refresh (no text: rlscope.viz.live renders it)."""

    elapsed_s: float  # the first process's start to the latest flush
    processes: int
    ended: bool
    groups: list[Group]  # launcher roles first (roles.role_order)
    steps_operation: str  # the operation steps are the calls of ("" none yet)
    steps_rule: str  # STEPS_SIMULATION or STEPS_OUTERMOST
    steps_interval: float | None  # steps/s
    steps_so_far: float | None
    gpu_interval: float | None  # mean NVML util_gpu (%) over devices; None without samples
    gpu_so_far: float | None
    gpu_devices: int
    flushes: int  # flushes read so far, over every process (0: nothing to show yet)


@dataclasses.dataclass
class Tally:
    """Sums over some flushes of one process, keyed by its name ids."""

    time: dict[tuple[int, int, int], int] = dataclasses.field(default_factory=dict)  # (phase, op, cat) ns
    main_ns: int = 0
    calls: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)  # (phase, op)
    main_inclusive: dict[int, int] = dataclasses.field(default_factory=dict)  # op -> ns, main thread

    def add(self, other: Tally) -> None:
        for k, v in other.time.items():
            self.time[k] = self.time.get(k, 0) + v
        for k, v in other.calls.items():
            self.calls[k] = self.calls.get(k, 0) + v
        for k, v in other.main_inclusive.items():
            self.main_inclusive[k] = self.main_inclusive.get(k, 0) + v
        self.main_ns += other.main_ns


_SMALL = 4096  # rows summed in Python below this many: cheaper than a group-by's set-up


def _sums(keys: list[np.ndarray], values: np.ndarray) -> dict[Any, int]:
    """``values`` summed per distinct row of ``keys``: (key, ...) -> sum (exact int64 sums)."""
    if len(values) < _SMALL:
        out: dict[Any, int] = {}
        for key, v in zip(zip(*(k.tolist() for k in keys), strict=True), values.tolist(), strict=True):
            out[key] = out.get(key, 0) + v
        return out
    names = [f"k{i}" for i in range(len(keys))]
    table = pa.table({**dict(zip(names, keys, strict=True)), "v": values})
    summed = sum_by(table, names, ["v"])
    columns = [summed.column(n).to_pylist() for n in names]
    return dict(zip(zip(*columns, strict=True), summed.column("v").to_pylist(), strict=True))


def _tally(cols: dict[str, np.ndarray], main_thread: int) -> Tally:
    """Aggregate rows (columns as int64 arrays) summed by the main-thread rule."""
    thread, phase, op, cat = cols["thread"], cols["phase"], cols["operation"], cols["category"]
    ns, n = cols["time_ns"], cols["calls"]
    on_main = thread == main_thread
    calls = (cat == S.AGGREGATE_CALLS) & (op >= 0)
    # off the main thread only operations are work (breakdown's rule)
    timed = (cat != S.AGGREGATE_CALLS) & (on_main | (op >= 0))
    main_calls = calls & on_main
    return Tally(
        time=_sums([phase[timed], op[timed], cat[timed]], ns[timed]),
        main_ns=int(ns[timed & on_main].sum()),
        calls=_sums([phase[calls], op[calls]], n[calls]),
        main_inclusive={k[0]: v for k, v in _sums([op[main_calls]], ns[main_calls]).items()},
    )


@dataclasses.dataclass
class _Flush:
    ts: int  # on the process's clock
    since: int  # the flush before it (or the session's start): it covers (since, ts]
    tally: Tally


@dataclasses.dataclass
class _Named:
    """A process's tally by names (names are per process: a run's figures add up by name)."""

    time: dict[tuple[str, str, str], float]
    main_s: float
    calls: dict[tuple[str, str], int]
    main_inclusive: dict[str, float]
    span_s: float


class _Process:
    """One process's running totals and its recent flushes (those a last interval may need)."""

    def __init__(self, news: ProcessNews, every_ns: int) -> None:
        self.news = news
        self.every_ns = every_ns
        self.total = Tally()
        self.recent: collections.deque[_Flush] = collections.deque()
        self.first_since: int | None = None
        self.last_ts: int | None = None
        self.flushes = 0
        self.gpu_total: dict[tuple[str, int], tuple[int, int]] = {}  # (host, device) -> (sum, samples)
        self.gpu_recent: collections.deque[tuple[int, tuple[str, int], int]] = collections.deque()

    def add(self, news: ProcessNews) -> None:
        self.news = news
        if news.aggregates:
            table = pa.Table.from_batches(news.aggregates)
            self._add({c: table.column(c).to_numpy().astype(np.int64) for c in AGGREGATE_COLUMNS})
        if news.nvml:
            self._add_gpu(pa.Table.from_batches(news.nvml))

    def _add(self, cols: dict[str, np.ndarray]) -> None:
        """New aggregate rows: into the totals at once; the flushes a last interval may need, one
        by one (the others only move the process's span on)."""
        ts = cols["ts_ns"]
        if not len(ts):
            return
        flushes = np.unique(ts)
        start = self.last_ts if self.last_ts is not None else self.news.start_ns
        since = np.concatenate([[flushes[0] if start is None else start], flushes[:-1]])
        since = np.minimum(since, flushes)
        last_span = int(flushes[-1] - since[-1])
        recent = flushes > flushes[-1] - 2 * max(self.every_ns, last_span)
        older = ts <= flushes[~recent].max(initial=np.iinfo(np.int64).min)
        if older.any():  # attaching to a run under way: its history, at once
            self.total.add(_tally({c: v[older] for c, v in cols.items()}, self.news.main_thread))
        for f, f_since in zip(flushes[recent].tolist(), since[recent].tolist(), strict=True):
            rows = ts == f
            flush = _Flush(f, f_since, _tally({c: v[rows] for c, v in cols.items()}, self.news.main_thread))
            self.total.add(flush.tally)
            self.recent.append(flush)
        if self.first_since is None:
            self.first_since = int(since[0])
        self.last_ts = int(flushes[-1])
        self.flushes += len(flushes)

    def _add_gpu(self, table: pa.Table) -> None:
        ts, device, util = (
            table.column(c).to_numpy().astype(np.int64) for c in ("ts_ns", "device", "util_gpu")
        )
        ok = util >= 0
        ts, device, util = ts[ok] + self.news.offset_ns, device[ok], util[ok]
        host = self.news.header.metadata.get("host", "")
        for (d,), total in _sums([device], util).items():
            s, n = self.gpu_total.get((host, d), (0, 0))
            self.gpu_total[(host, d)] = (s + total, n + int((device == d).sum()))
        recent = ts > ts.max(initial=0) - 2 * self.every_ns
        for t, d, u in zip(ts[recent].tolist(), device[recent].tolist(), util[recent].tolist(), strict=True):
            self.gpu_recent.append((t, (host, d), u))

    @property
    def last_shared(self) -> int | None:
        return None if self.last_ts is None else self.last_ts + self.news.offset_ns

    def window(self, latest: int, every_ns: int) -> list[_Flush]:
        """Its flushes in the last interval ending at ``latest`` (shared clock)."""
        if not self.recent:
            return []
        last = self.recent[-1]
        width = max(every_ns, last.ts - last.since)
        off = self.news.offset_ns
        return [f for f in self.recent if f.ts + off > latest - width]

    def prune(self, latest: int, every_ns: int, gpu_latest: int) -> None:
        """Forget flushes and samples no later interval can need."""
        if self.recent:
            last = self.recent[-1]
            keep_after = latest - 2 * max(every_ns, last.ts - last.since) - self.news.offset_ns
            while len(self.recent) > 1 and self.recent[0].ts <= keep_after:
                self.recent.popleft()
        while self.gpu_recent and self.gpu_recent[0][0] <= gpu_latest - 2 * every_ns:
            self.gpu_recent.popleft()

    def named(self, tally: Tally, span_ns: int) -> _Named:
        news = self.news
        time: dict[tuple[str, str, str], float] = {}
        for (phase, op, cat), ns in tally.time.items():
            key = (
                news.name_of(phase, NO_PHASE),
                news.name_of(op, UNANNOTATED),
                categories.CPU_CATEGORIES.get(cat, "python"),
            )
            time[key] = time.get(key, 0.0) + ns / 1e9
        calls: dict[tuple[str, str], int] = {}
        for (phase, op), n in tally.calls.items():
            key2 = (news.name_of(phase, NO_PHASE), news.name_of(op, UNANNOTATED))
            calls[key2] = calls.get(key2, 0) + n
        inclusive: dict[str, float] = {}
        for op, ns in tally.main_inclusive.items():
            name = news.name_of(op, UNANNOTATED)
            inclusive[name] = inclusive.get(name, 0.0) + ns / 1e9
        return _Named(time, tally.main_ns / 1e9, calls, inclusive, span_ns / 1e9)


def _sum(flushes: Iterable[_Flush]) -> Tally:
    out = Tally()
    for f in flushes:
        out.add(f.tally)
    return out


def _rate(parts: list[_Named], calls_of: dict[int, int]) -> float | None:
    """Calls per second summed over processes (``calls_of``: by part index); None: no time covered."""
    spans = [p.span_s for p in parts]
    if not any(s > 0 for s in spans):
        return None
    return sum(calls_of.get(i, 0) / s for i, s in enumerate(spans) if s > 0)


def _ordered(ops: dict[str, OpFigures]) -> dict[str, OpFigures]:
    """Most time first, ties by name; [unannotated] last, as the report's tables have it."""
    order = sorted(ops.items(), key=lambda kv: (kv[0] == UNANNOTATED, -kv[1].seconds, kv[0]))
    return dict(order)


def _span(parts: list[_Named]) -> Span:
    main_s = sum(p.main_s for p in parts)

    def share(s: float) -> float:
        return s / main_s if main_s > 0 else 0.0

    seconds: dict[tuple[str, str], float] = {}
    cats: dict[str, float] = {}
    for p in parts:
        for (phase, op, cat), s in p.time.items():
            seconds[(phase, op)] = seconds.get((phase, op), 0.0) + s
            cats[cat] = cats.get(cat, 0.0) + s
    calls: dict[tuple[str, str], dict[int, int]] = {}
    for i, p in enumerate(parts):
        for key, n in p.calls.items():
            calls.setdefault(key, {})[i] = n
    phases: dict[str, dict[str, OpFigures]] = {}
    by_op: dict[str, tuple[float, dict[int, int]]] = {}
    for key in dict.fromkeys([*seconds, *calls]):
        phase, op = key
        s, per = seconds.get(key, 0.0), calls.get(key, {})
        phases.setdefault(phase, {})[op] = OpFigures(
            s, share(s), sum(per.values()), _rate(parts, per) if per else None
        )
        total_s, total_calls = by_op.get(op, (0.0, {}))
        merged = dict(total_calls)
        for i, n in per.items():
            merged[i] = merged.get(i, 0) + n
        by_op[op] = (total_s + s, merged)
    operations = {
        op: OpFigures(s, share(s), sum(per.values()), _rate(parts, per) if per else None)
        for op, (s, per) in by_op.items()
    }
    phase_order = sorted(phases, key=lambda ph: (-sum(f.seconds for f in phases[ph].values()), ph))
    order = [c for c in CATEGORY_ORDER if c in cats] + sorted(set(cats) - set(CATEGORY_ORDER))
    return Span(
        seconds=max((p.span_s for p in parts), default=0.0),
        main_s=main_s,
        phases={ph: _ordered(phases[ph]) for ph in phase_order},
        operations=_ordered(operations),
        categories={c: Part(cats[c], share(cats[c])) for c in order},
    )


def _roles(procs: list[_Process]) -> list[str]:
    """Each process's role (rlscope.analysis.roles's rules, on the metadata read so far)."""
    roles = process_roles([p.news.header.metadata for p in procs], [p.news.pid for p in procs])
    launchers = {
        parent_pid(p.news.header.metadata) for p in procs if p.news.header.metadata.get("world_size")
    }
    return [
        refined_role(
            r,
            p.news.pid in launchers,
            any(p.news.name_of(op, UNANNOTATED) == SIMULATION for _, op in p.total.calls),
        )
        for p, r in zip(procs, roles, strict=True)
    ]


def _mean_util(samples: dict[tuple[str, int], tuple[int, int]]) -> float | None:
    """Mean over devices of each device's mean utilization."""
    means = [s / n for s, n in samples.values() if n]
    return sum(means) / len(means) if means else None


class LiveFigures:
    """The live view's state: fed each poll's news, it gives the view (see the module doc)."""

    def __init__(self, every_s: float) -> None:
        self.every_ns = int(every_s * 1e9)
        self._procs: dict[str, _Process] = {}
        self._ended: set[str] = set()

    def update(self, news: list[ProcessNews]) -> None:
        for n in news:
            proc = self._procs.get(n.name)
            if proc is None:
                proc = self._procs[n.name] = _Process(n, self.every_ns)
            proc.add(n)
            if n.ended:
                self._ended.add(n.name)
        latest, gpu_latest = self._latest()
        for proc in self._procs.values():
            proc.prune(latest, self.every_ns, gpu_latest)

    def _latest(self) -> tuple[int, int]:
        flushes = [p.last_shared for p in self._procs.values() if p.last_shared is not None]
        samples = [p.gpu_recent[-1][0] for p in self._procs.values() if p.gpu_recent]
        return max(flushes, default=0), max(samples, default=0)

    def view(self, ended: bool = False) -> LiveView:
        """The figures as of the last update; ``ended``: the run is over."""
        procs = list(self._procs.values())
        latest, gpu_latest = self._latest()
        interval: list[_Named] = []
        so_far: list[_Named] = []
        for p in procs:
            window = p.window(latest, self.every_ns)
            span = window[-1].ts - window[0].since if window else 0
            interval.append(p.named(_sum(window), span))
            whole = p.last_ts - p.first_since if p.last_ts is not None and p.first_since is not None else 0
            so_far.append(p.named(p.total, whole))
        roles = _roles(procs)
        groups = []
        for role in role_order([{"role": r} for r in roles]):
            members = [i for i, r in enumerate(roles) if r == role]
            groups.append(
                Group(
                    role=role,
                    pids=[procs[i].news.pid for i in members],
                    ended=sum(procs[i].news.name in self._ended for i in members),
                    interval=_span([interval[i] for i in members]),
                    so_far=_span([so_far[i] for i in members]),
                )
            )
        op, rule = self._steps_operation(so_far, roles, groups)
        starts = [
            (p.first_since + p.news.offset_ns)
            for p in procs
            if p.first_since is not None and p.last_ts is not None
        ]
        gpu_now: dict[tuple[str, int], tuple[int, int]] = {}
        gpu_all: dict[tuple[str, int], tuple[int, int]] = {}
        for p in procs:
            for ts, key, util in p.gpu_recent:
                if ts > gpu_latest - self.every_ns:
                    s, n = gpu_now.get(key, (0, 0))
                    gpu_now[key] = (s + util, n + 1)
            for key, (s, n) in p.gpu_total.items():
                s0, n0 = gpu_all.get(key, (0, 0))
                gpu_all[key] = (s0 + s, n0 + n)
        return LiveView(
            elapsed_s=(latest - min(starts)) / 1e9 if starts else 0.0,
            processes=len(procs),
            ended=ended,
            groups=groups,
            steps_operation=op,
            steps_rule=rule,
            steps_interval=self._steps(interval, op),
            steps_so_far=self._steps(so_far, op),
            gpu_interval=_mean_util(gpu_now),
            gpu_so_far=_mean_util(gpu_all),
            gpu_devices=len(gpu_all),
            flushes=sum(p.flushes for p in procs),
        )

    @staticmethod
    def _steps_operation(so_far: list[_Named], roles: list[str], groups: list[Group]) -> tuple[str, str]:
        for op in STEP_OPERATIONS:
            if any(n for p in so_far for (_, o), n in p.calls.items() if o == op):
                return op, STEPS_SIMULATION
        for g in groups:
            inclusive: dict[str, float] = {}
            for p, r in zip(so_far, roles, strict=True):
                if r == g.role:
                    for op, s in p.main_inclusive.items():
                        inclusive[op] = inclusive.get(op, 0.0) + s
            if inclusive:
                return max(inclusive.items(), key=lambda kv: (kv[1], kv[0]))[0], STEPS_OUTERMOST
        return "", ""

    @staticmethod
    def _steps(parts: list[_Named], op: str) -> float | None:
        if not op:
            return None
        calls = {i: sum(n for (_, o), n in p.calls.items() if o == op) for i, p in enumerate(parts)}
        return _rate(parts, calls)
