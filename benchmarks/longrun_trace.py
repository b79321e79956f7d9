"""A long run's trace, made fast through the writer's own path, and its ground truth.

    python benchmarks/longrun_trace.py OUT --hours 2 [--workers 8] [--seed 0] [--jobs 2]
        [--summary-flush 60] [--truth FILE]

The run: a PPO-like learner and ``workers`` env-worker processes under ``rlscope run``, with the
default detail schedule (rlscope/trace/detail.py) on the run's origin. The learner, in a ``training``
phase, steps: ``inference`` (0.7-1.2 ms), then ``simulation`` (the simulator category while its
workers step, and a little Python either side), and after every ``UPDATE_EVERY`` steps
``BACKPROPS`` ``backprop`` calls of 5-9 ms. Each worker runs ``simulation`` (the simulator category
inside, 0.3-1.1 ms, an episode reset of 1-3 ms now and then) when the learner's step reaches it
through its pipe, and waits otherwise. About 2,600 event rows a second on the learner, 1,700 on
each worker. Every process switches its collectors' windows at a top-level exit every 100 ms, and
its writer thread marks every flush (the ``rlscope`` category), as a session does.

Why through the writer: the trace must be what a session writes, at any length. The rows are made
in numpy, a block of steps at a time, and handed to the real :class:`~rlscope.trace.writer.TraceWriter`
through :class:`RowBuffer`, a stand-in for the native event buffer; its Aggregator folds them, cuts
the detail stretches (pause, resume and summarized rows) and writes events, aggregates and names
with the trace's schemas. The writer flushes every simulated second, as a session does; with
``summary_flush_s`` 60 it flushes every minute between the detail stretches (every second in and
next to them), so there the aggregates hold one row set a minute, not one a second: the same sums
in fewer rows, a smaller aggregates file read faster, and a trace made in about half the time.
Each process is written on its own (``jobs`` at once).

The truth: per process, the time made in each operation (exclusive: no operation nests in another
here) and in the simulator category, and the calls, summed in ns as the rows were made.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rlscope import categories
from rlscope._version import __version__
from rlscope.overhead.correct import calibration
from rlscope.trace import ownership
from rlscope.trace import schema as S
from rlscope.trace.detail import DEFAULT_SPEC, DetailSchedule
from rlscope.trace.writer import TraceWriter

US, MS, SEC = 1_000, 1_000_000, 1_000_000_000
STEPS_PER_BLOCK = 4096  # learner steps made at once (about 10 s of the run)
UPDATE_EVERY = 128  # rollout steps between updates
BACKPROPS = 4  # backprop calls per update
WINDOW_NS = 100 * MS  # the collectors' window (Session's window_s 0.1, full_share 0.5)
SUMMARY_FLUSH_S = 1  # the writer's flushes between the detail stretches, every this many seconds
RUN_START_NS = 10_000 * SEC  # the run's origin on the host's clock (perf_counter_ns)
UNIX_START_NS = 1_795_000_000 * SEC
LAUNCHER_PID, LEARNER_PID = 40_990, 41_000
LEARNER_START_S, WORKER_START_S, LOOP_START_S = 0.2, 0.4, 1.0  # seconds after the run's origin
LEARNER_NAMES = ["training", "inference", "simulation", "backprop"]
WORKER_NAMES = ["simulation"]
TRAINING, INFERENCE, SIMULATION, BACKPROP = range(4)  # the learner's name ids
OPTIONS = {
    "flush_interval": 1.0,
    "backend": True,
    "gpu": "auto",
    "nvtx": False,
    "nvml_hz": 10.0,
    "windows": True,
    "window_s": 0.1,
    "full_share": 0.5,
    "auto_ops": False,
}
STACK = {
    "python": "3.11.7",
    "torch": "2.13.0+cpu",
    "machine": "x86_64",
    "cpu": "AMD EPYC",
    "gpu": "",
    "cuda": "",
    "gymnasium": "1.4.0",
}
# what `rlscope calibrate --quick` measured on cpu-vm, embedded as a session embeds its machine's
COSTS_NS = {
    "backend": {"calls_per_loop": 298.0, "inside": 0.0, "outside": 580.2, "ref_ns": 109.7, "total": 580.2},
    "category": {
        "inside": 103.0,
        "measured_inside": 53.2,
        "measured_outside": 54.1,
        "outside": 40.3,
        "ref_ns": 113.3,
        "total": 143.3,
    },
    "scope": {
        "inside": 105.6,
        "measured_inside": 56.1,
        "measured_outside": 57.8,
        "outside": 48.7,
        "ref_ns": 122.6,
        "total": 154.3,
    },
}


# -- the timing of the loop ---------------------------------------------------------------------


@dataclasses.dataclass
class Steps:
    """A block of learner steps: each array in ns from its step's start, one row per step (and a
    column per worker, per backprop call)."""

    inf_begin: np.ndarray
    inf_end: np.ndarray
    sim_begin: np.ndarray
    cat_begin: np.ndarray
    cat_end: np.ndarray
    sim_end: np.ndarray
    w_begin: np.ndarray
    w_cat_begin: np.ndarray
    w_cat_end: np.ndarray
    w_end: np.ndarray
    update: np.ndarray
    bp_begin: np.ndarray
    bp_end: np.ndarray
    length: np.ndarray

    def head(self, n: int) -> Steps:
        return Steps(*(getattr(self, f.name)[:n] for f in dataclasses.fields(self)))


def block_steps(seed: int, block: int, workers: int) -> Steps:
    """The ``block``-th block of steps: the same draws in every process that makes the run."""
    rng = np.random.default_rng([seed, block])
    n, w = STEPS_PER_BLOCK, max(workers, 1)

    def draw(lo: int, hi: int, shape: tuple[int, ...] = (n,)) -> np.ndarray:
        return rng.integers(lo, hi, shape, dtype=np.int64)

    inf_begin = draw(20 * US, 60 * US)
    inf_end = inf_begin + draw(700 * US, 1200 * US)
    sim_begin = inf_end + draw(10 * US, 30 * US)
    cat_begin = sim_begin + draw(5 * US, 15 * US)
    w_begin = cat_begin[:, None] + draw(20 * US, 60 * US, (n, w))  # the pipe to each worker
    w_cat_begin = w_begin + draw(2 * US, 6 * US, (n, w))
    sim = draw(300 * US, 1100 * US, (n, w))
    sim += np.where(rng.random((n, w)) < 1 / 256, draw(1 * MS, 3 * MS, (n, w)), 0)  # episode resets
    w_cat_end = w_cat_begin + sim
    w_end = w_cat_end + draw(2 * US, 6 * US, (n, w))
    back = w_end + draw(20 * US, 60 * US, (n, w))  # the pipe back
    cat_end = back.max(axis=1) if workers else cat_begin + sim[:, 0]
    sim_end = cat_end + draw(5 * US, 15 * US)
    update = (block * n + np.arange(1, n + 1)) % UPDATE_EVERY == 0
    gaps, durs = draw(30 * US, 80 * US, (n, BACKPROPS)), draw(5 * MS, 9 * MS, (n, BACKPROPS))
    bp_end = sim_end[:, None] + np.cumsum(gaps + durs, axis=1)
    bp_begin = bp_end - durs
    length = np.where(update, bp_end[:, -1], sim_end)
    lead = (inf_begin, inf_end, sim_begin, cat_begin, cat_end, sim_end)
    return Steps(*lead, w_begin, w_cat_begin, w_cat_end, w_end, update, bp_begin, bp_end, length)


def loop_blocks(seed: int, workers: int, start: int, end: int) -> Iterator[tuple[np.ndarray, Steps]]:
    """(step start times, steps) a block at a time: the steps that start before ``end``."""
    t, block = start, 0
    while t < end:
        steps = block_steps(seed, block, workers)
        starts = t + np.cumsum(steps.length) - steps.length
        n = int(np.searchsorted(starts, end))
        if n < STEPS_PER_BLOCK:
            steps, starts = steps.head(n), starts[:n]
        if not n:
            return
        yield starts, steps
        t = int(starts[-1] + steps.length[-1])
        block += 1


# -- one process's rows ---------------------------------------------------------------------------


def rows(
    ts: np.ndarray,
    thread: int,
    kind: int | np.ndarray,
    ident: int | np.ndarray,
    parent: int | np.ndarray = -1,
    name: int | np.ndarray = -1,
    cost: int | np.ndarray = 0,
) -> np.ndarray:
    """Event rows (ts_ns, thread, kind, id, parent, name, flags, cost) as the native buffer holds them."""
    ts = np.asarray(ts, np.int64).reshape(-1)
    out = np.zeros((len(ts), 8), np.int64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = ts, thread, kind, ident
    out[:, 4], out[:, 5], out[:, 7] = parent, name, cost
    return out


def by_time(*parts: np.ndarray) -> np.ndarray:
    """Rows in time order, as the shared buffer appends them (ties keep their order)."""
    table = np.concatenate(parts)
    return table[np.argsort(table[:, 0], kind="stable")]


@dataclasses.dataclass
class Truth:
    """What one process spent, in ns, as made."""

    exclusive: dict[str, int] = dataclasses.field(default_factory=dict)
    simulator: dict[str, int] = dataclasses.field(default_factory=dict)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(
        self, op: str, begin: np.ndarray, end: np.ndarray, cat: tuple[np.ndarray, np.ndarray] | None
    ) -> None:
        self.exclusive[op] = self.exclusive.get(op, 0) + int((end - begin).sum())
        self.calls[op] = self.calls.get(op, 0) + len(begin)
        if cat is not None:
            self.simulator[op] = self.simulator.get(op, 0) + int((cat[1] - cat[0]).sum())


@dataclasses.dataclass
class ProcessSpec:
    """One process of the run: which (0 the learner, k the k-th worker), its ids and its session."""

    index: int
    workers: int
    hours: float
    seed: int
    summary_flush_s: int = SUMMARY_FLUSH_S  # the writer's flushes between detail stretches
    detail: str = DEFAULT_SPEC  # the detail schedule (rlscope/trace/detail.py)

    @property
    def schedule(self) -> DetailSchedule:
        return DetailSchedule.parse(self.detail)

    @property
    def learner(self) -> bool:
        return self.index == 0

    @property
    def pid(self) -> int:
        return LEARNER_PID + self.index

    @property
    def main_tid(self) -> int:
        return self.pid

    @property
    def writer_tid(self) -> int:
        return self.pid + 50

    @property
    def names(self) -> list[str]:
        return LEARNER_NAMES if self.learner else WORKER_NAMES

    @property
    def run_end(self) -> int:
        return RUN_START_NS + int(self.hours * 3600 * SEC)

    @property
    def start(self) -> int:
        offset = LEARNER_START_S if self.learner else WORKER_START_S + 0.03 * self.index
        return RUN_START_NS + int(offset * SEC)

    def metadata(self) -> dict[str, str]:
        """The events file's metadata, the keys a session writes (Session._metadata)."""
        meta = {
            "rlscope.version": __version__,
            "host": "longrun-synthetic",
            "pid": str(self.pid),
            "ppid": str(LAUNCHER_PID if self.learner else LEARNER_PID),
            "run_parent": "" if self.learner else str(LEARNER_PID),
            "rank": "",
            **STACK,
            "clock": "perf_counter_ns",
            "scopes": "native-6",
            "clock_anchor_ns": str(self.start),
            "clock_anchor_unix_ns": str(UNIX_START_NS + self.start - RUN_START_NS),
            "argv": json.dumps(
                ["ppo_subproc.py", "--num-envs", str(self.workers)]
                if self.learner
                else ["-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]
            ),
            "options": json.dumps({**OPTIONS, "detail": self.schedule.to_env()}),
            "detail_origin_ns": str(RUN_START_NS),
        }
        cal = {
            "schema": "rlscope.overhead.correct.calibration/1",
            "costs_ns": COSTS_NS,
            "key": calibration.trace_key(meta),
            "created": "2026-11-29T06:54:34+00:00",
            "refused": [],
            "reference_ns": {"machine_record": None, "run_fastest": 107.9, "used": 107.9},
            "source": "benchmarks/longrun_trace.py",
        }
        meta[calibration.METADATA_KEY] = json.dumps(cal, separators=(",", ":"), sort_keys=True)
        return meta


class ProcessRows:
    """One process's event rows a block at a time, in time order, and its truth as they are made."""

    def __init__(self, spec: ProcessSpec) -> None:
        self.spec = spec
        self.truth = Truth()
        self.rng = np.random.default_rng([spec.seed, 1_000_000 + spec.index])  # its own draws
        self._next_id = 1  # instance ids (the learner's phase is 0)
        self._cell = -1  # the window grid cell of the last switch
        self._mode = S.WINDOW_FULL
        self.loop_end = spec.run_end - SEC // 2
        self.session_end = spec.run_end if spec.learner else 0  # a worker's: after the loop

    def _cost(self, n: int) -> np.ndarray:
        """What each boundary measured it cost: pre | post << 32 (EVENT_COST_COLUMN)."""
        return self.rng.integers(30, 90, n) | self.rng.integers(30, 90, n) << 32

    def _speed(self, n: int) -> np.ndarray:
        """The reference loop's ps per iteration at a session or window row (the speed probe)."""
        return self.rng.integers(105_000, 140_000, n)

    def blocks(self) -> Iterator[np.ndarray]:
        """The session's rows: its start, the loop's blocks, its end."""
        sp = self.spec
        tid = sp.main_tid
        head = [
            rows([sp.start], tid, S.SESSION_START, -1, self._speed(1)),
            rows([sp.start + 20 * US], tid, S.WINDOW, S.WINDOW_FULL),
        ]
        loop_start = RUN_START_NS + int(LOOP_START_S * SEC)
        if sp.learner:
            head.append(rows([loop_start - 100 * US], tid, S.PHASE_BEGIN, 0, -1, TRAINING))
        yield np.concatenate(head)
        last = loop_start
        for starts, steps in loop_blocks(sp.seed, sp.workers, loop_start, self.loop_end):
            yield self._learner(starts, steps) if sp.learner else self._worker(starts, steps)
            last = int(starts[-1] + steps.length[-1])
        if sp.learner:
            tail = [rows([last + 50 * US], tid, S.PHASE_END, 0, -1, TRAINING)]
        else:  # the learner closes its workers as the run ends
            self.session_end = last + 100 * MS + 10 * MS * sp.index
            tail = []
        tail.append(rows([self.session_end], tid, S.SESSION_END, -1, self._speed(1)))
        yield np.concatenate(tail)

    def _learner(self, s: np.ndarray, st: Steps) -> np.ndarray:
        tid, n = self.spec.main_tid, len(s)
        per_step = 2 + BACKPROPS * st.update
        first = self._next_id + np.cumsum(per_step) - per_step
        self._next_id += int(per_step.sum())
        inf_id, sim_id = first, first + 1
        t = {
            k: s + getattr(st, k)
            for k in ("inf_begin", "inf_end", "sim_begin", "cat_begin", "cat_end", "sim_end")
        }
        sim_cat = categories.SIMULATOR
        parts = [
            rows(t["inf_begin"], tid, S.OP_BEGIN, inf_id, -1, INFERENCE, self._cost(n)),
            rows(t["inf_end"], tid, S.OP_END, inf_id, -1, INFERENCE, self._cost(n)),
            rows(t["sim_begin"], tid, S.OP_BEGIN, sim_id, -1, SIMULATION, self._cost(n)),
            rows(t["cat_begin"], tid, S.CAT_BEGIN, sim_cat, categories.PYTHON, -1, self._cost(n)),
            rows(t["cat_end"], tid, S.CAT_END, sim_cat, categories.PYTHON, -1, self._cost(n)),
            rows(t["sim_end"], tid, S.OP_END, sim_id, -1, SIMULATION, self._cost(n)),
        ]
        up = np.flatnonzero(st.update)
        bp_begin = (s[up, None] + st.bp_begin[up]).reshape(-1)
        bp_end = (s[up, None] + st.bp_end[up]).reshape(-1)
        bp_id = (first[up, None] + 2 + np.arange(BACKPROPS)).reshape(-1)
        m = len(bp_id)
        parts += [
            rows(bp_begin, tid, S.OP_BEGIN, bp_id, -1, BACKPROP, self._cost(m)),
            rows(bp_end, tid, S.OP_END, bp_id, -1, BACKPROP, self._cost(m)),
        ]
        self.truth.add("inference", t["inf_begin"], t["inf_end"], None)
        self.truth.add("simulation", t["sim_begin"], t["sim_end"], (t["cat_begin"], t["cat_end"]))
        self.truth.add("backprop", bp_begin, bp_end, None)
        exits = np.sort(np.concatenate([t["inf_end"], t["sim_end"], bp_end]))
        return by_time(*parts, self._windows(exits))

    def _worker(self, s: np.ndarray, st: Steps) -> np.ndarray:
        tid, n, k = self.spec.main_tid, len(s), self.spec.index - 1
        ids = self._next_id + np.arange(n)
        self._next_id += n
        b, cb = s + st.w_begin[:, k], s + st.w_cat_begin[:, k]
        ce, e = s + st.w_cat_end[:, k], s + st.w_end[:, k]
        sim_cat = categories.SIMULATOR
        parts = [
            rows(b, tid, S.OP_BEGIN, ids, -1, 0, self._cost(n)),
            rows(cb, tid, S.CAT_BEGIN, sim_cat, categories.PYTHON, -1, self._cost(n)),
            rows(ce, tid, S.CAT_END, sim_cat, categories.PYTHON, -1, self._cost(n)),
            rows(e, tid, S.OP_END, ids, -1, 0, self._cost(n)),
        ]
        self.truth.add("simulation", b, e, (cb, ce))
        return by_time(*parts, self._windows(e))

    def _windows(self, exits: np.ndarray) -> np.ndarray:
        """Window switches: at the first top-level exit in each new 100 ms of the run, modes alternating."""
        cell = (exits - RUN_START_NS) // WINDOW_NS
        before = np.concatenate([[self._cell], cell[:-1]])
        at = exits[cell > before] + 1 * US
        if len(cell):
            self._cell = int(cell[-1])
        mode = self._mode ^ (np.arange(1, len(at) + 1) & 1)
        if len(at):
            self._mode = int(mode[-1])
        return rows(at, self.spec.main_tid, S.WINDOW, mode, self._speed(len(at)))

    def flush_marks(self, end: int) -> np.ndarray:
        """The writer thread's ``rlscope`` interval of every flush (one a second) before ``end``;
        the end row's cost: the flush's CPU time on that thread."""
        at = self.spec.start + SEC * np.arange(1, max((end - self.spec.start) // SEC, 0) + 1)
        at = at[at + 2 * MS < end] - 50 * US
        took = self.rng.integers(300 * US, 1500 * US, len(at))
        wt = self.spec.writer_tid
        begin = rows(at, wt, S.CAT_BEGIN, categories.PROFILER, 0)
        stop = rows(at + 50 * US + took, wt, S.CAT_END, categories.PROFILER, 0, -1, took * 4 // 5)
        return by_time(begin, stop)


# -- the writer ---------------------------------------------------------------------------------


class RowBuffer:
    """The native event buffer's interface (collectors/scope_native.c: ``EventBuffer``) over rows
    made in numpy: what :class:`~rlscope.trace.writer.TraceWriter` drains at each flush."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._n = 0

    def put(self, table: np.ndarray) -> None:
        self._parts.append(table)
        self._n += len(table)

    def __len__(self) -> int:
        return self._n

    def drain_into(self, out: np.ndarray) -> int:
        n, at = self._n, 0
        for part in self._parts:
            out[at : at + len(part)] = part
            at += len(part)
        self._parts, self._n = [], 0
        return n

    def capacity(self) -> int:
        return 1 << 40  # never grown ahead: the rows are made in memory already

    def reserve_ahead(self, rows: int) -> None:
        pass

    def release(self) -> None:
        self._parts, self._n = [], 0


def flush_times(spec: ProcessSpec, end: int) -> list[int]:
    """When the writer flushes before ``end``: every second in and next to a detail stretch, every
    ``spec.summary_flush_s`` between them."""
    sched = spec.schedule
    out = []
    k = 1
    while (t := spec.start + k * SEC) < end:
        rel = t - RUN_START_NS
        if k % spec.summary_flush_s == 0 or sched.in_detail(rel) or sched.in_detail(rel - SEC):
            out.append(t)
        k += 1
    return out


def write_process(trace_dir: str, spec: ProcessSpec) -> dict[str, Any]:
    """Write one process directory through the writer; its truth and row counts."""
    made = ProcessRows(spec)
    buffer = RowBuffer()
    clock = [spec.start]
    writer = TraceWriter(
        Path(trace_dir) / f"{S.PROCESS_PREFIX}{spec.pid}",
        spec.metadata(),
        list(spec.names),
        flush_interval=1e9,  # flushed here, at the simulated flush times
        clock=lambda: clock[0],
        events=buffer,
        detail=spec.schedule,
        origin_ns=RUN_START_NS,
        main_thread=spec.main_tid,
    )
    blocks = made.blocks()
    pending = next(blocks)
    marks_end = spec.run_end if spec.learner else made.loop_end  # a worker's session ends after its loop
    marks = made.flush_marks(marks_end)
    done = False
    try:
        for t in flush_times(spec, marks_end):
            while not done and (not len(pending) or pending[-1, 0] <= t):
                try:
                    pending = np.concatenate([pending, next(blocks)])
                except StopIteration:
                    done = True
            k, j = (
                int(np.searchsorted(pending[:, 0], t, "right")),
                int(np.searchsorted(marks[:, 0], t, "right")),
            )
            buffer.put(by_time(pending[:k], marks[:j]))
            pending, marks = pending[k:], marks[j:]
            clock[0] = t
            writer.flush()
        rest = [pending, *blocks]
        buffer.put(by_time(*rest, marks))
        clock[0] = made.session_end
    finally:
        writer.close()
    agg = writer.aggregator
    return {
        "pid": spec.pid,
        "role": "learner" if spec.learner else "env worker",
        "wall_ns": made.session_end - spec.start,
        "exclusive_ns": made.truth.exclusive,
        "simulator_ns": made.truth.simulator,
        "calls": made.truth.calls,
        "rows_made": agg.folded_rows if agg else None,
        "rows_kept": agg.kept_rows if agg else None,
    }


def make_trace(
    trace_dir: str | Path,
    hours: float,
    workers: int = 8,
    seed: int = 0,
    jobs: int | None = None,
    summary_flush_s: int = SUMMARY_FLUSH_S,
    detail: str = DEFAULT_SPEC,
) -> dict[str, Any]:
    """Write the run's trace into ``trace_dir`` (a new or empty directory, or a trace this made,
    which is replaced); its truth: per process and summed over them, seconds per operation.

    ``jobs``: processes written at once (default: the CPU count); the trace is the same whatever it
    is. ``summary_flush_s``: the writer's flushes between the detail stretches (1: a session's).
    ``detail``: the detail schedule (a session's default: 60s,600s,10s).
    """
    path = Path(trace_dir)
    ownership.clear_trace_dir(path)
    lock = ownership.join(path)
    t0 = time.perf_counter()
    try:
        specs = [ProcessSpec(i, workers, hours, seed, summary_flush_s, detail) for i in range(workers + 1)]
        for spec in specs:  # listed in the manifest in order, before any is made
            ownership.new_process_dir(path, spec.pid)
        n_jobs = min(jobs or multiprocessing.cpu_count(), len(specs))
        if n_jobs > 1:
            ctx = multiprocessing.get_context("fork")
            with concurrent.futures.ProcessPoolExecutor(n_jobs, mp_context=ctx) as pool:
                procs = list(pool.map(write_process, [str(path)] * len(specs), specs))
        else:
            procs = [write_process(str(path), s) for s in specs]
    finally:
        if lock is not None:
            lock.release()
    totals: dict[str, dict[str, float]] = {}
    for p in procs:
        for op, ns in p["exclusive_ns"].items():
            e = totals.setdefault(op, {"exclusive_s": 0.0, "simulator_s": 0.0, "calls": 0})
            e["exclusive_s"] += ns / 1e9
            e["simulator_s"] += p["simulator_ns"].get(op, 0) / 1e9
            e["calls"] += p["calls"][op]
    return {
        "hours": hours,
        "workers": workers,
        "seed": seed,
        "make_s": time.perf_counter() - t0,
        "processes": procs,
        "operations": totals,
        "rows_made": sum(p["rows_made"] or 0 for p in procs),
        "rows_kept": sum(p["rows_kept"] or 0 for p in procs),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="trace directory to write (new, empty, or one this made)")
    p.add_argument("--hours", type=float, default=2.0, help="the run's length (default 2)")
    p.add_argument("--workers", type=int, default=8, help="env-worker processes (default 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=None, help="processes written at once (default: CPUs)")
    p.add_argument(
        "--summary-flush",
        type=int,
        default=SUMMARY_FLUSH_S,
        metavar="S",
        help=f"flush every S simulated seconds between the detail stretches (default {SUMMARY_FLUSH_S},"
        " as a session does; 60: one aggregates row set a minute there, made faster)",
    )
    p.add_argument("--detail", default=DEFAULT_SPEC, help=f"the detail schedule (default {DEFAULT_SPEC})")
    p.add_argument("--truth", type=Path, default=None, help="write the ground truth here (JSON)")
    args = p.parse_args(argv)
    truth = make_trace(
        args.out, args.hours, args.workers, args.seed, args.jobs, args.summary_flush, args.detail
    )
    mb = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file()) / 1e6
    print(
        f"{args.out}: {args.hours:g} h, {args.workers + 1} processes, {truth['rows_made']:,} rows made,"
        f" {truth['rows_kept']:,} kept, {mb:.1f} MB, in {truth['make_s']:.1f} s"
    )
    if args.truth:
        args.truth.write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
