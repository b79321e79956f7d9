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
each worker. The learner switches its collectors' windows at a top-level exit every 100 ms; in the
full windows of the detail stretches its native backend recorder writes the outermost torch ops
of each ``inference`` (``OPS_PER_INFERENCE``) and ``backprop`` (``OPS_PER_BACKPROP``) call, each op
costing the call ``BACKEND_COST_NS`` of Python outside it, as the calibration embedded in the trace
says. The workers step their envs without torch: no collector of theirs is switched, so they write
no windows. Every process's writer thread marks every flush (the ``rlscope`` category), as a
session does.

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
here) and in the simulator category, and the calls, summed in ns as the rows were made; and the
operations' own work, that time less what the backend recorder cost them (what the corrected
figures should read).
"""

from __future__ import annotations

import argparse
import collections
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
import pyarrow as pa

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
# the outermost torch ops the backend recorder writes in a full window: per call, spread evenly over
# the call with OP_SHARE of its own work inside them; each op costs the call BACKEND_COST_NS (COSTS_NS's
# backend ``outside``, to the ns)
OPS_PER_INFERENCE, OPS_PER_BACKPROP = 16, 64
OP_SHARE = 0.6
BACKEND_COST_NS = 580
TORCH_OPS = ["aten::linear", "aten::tanh", "aten::addmm", "aten::mul"]
LEARNER_NAMES = ["training", "inference", "simulation", "backprop", *TORCH_OPS]
WORKER_NAMES = ["simulation"]
TRAINING, INFERENCE, SIMULATION, BACKPROP = range(4)  # the learner's name ids
FIRST_TORCH_OP = 4  # TORCH_OPS' first name id
MAX_ROUNDS = 10  # rounds to settle which calls lie in a detail stretch once longer (Loop._block)
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


@dataclasses.dataclass
class Block:
    """A block of the loop as it ran: each step's start, its offsets (lengthened where the backend
    recorder ran), the learner's window switches, and which calls recorded their torch ops."""

    starts: np.ndarray
    steps: Steps
    switch_t: np.ndarray  # each switch's time (just after a top-level exit of the learner)
    switch_mode: np.ndarray  # and the mode it switches to
    inf_full: np.ndarray  # per step: its inference ran in a full window of a detail stretch
    bp_full: np.ndarray  # per step and backprop call: the same (False where no update)


def _exits(starts: np.ndarray, st: Steps, up: np.ndarray) -> np.ndarray:
    """The learner's top-level exits of the steps starting at ``starts`` (``up``: the update steps):
    every inference's end, then every simulation's, then every backprop call's."""
    return np.concatenate(
        [starts + st.inf_end, starts + st.sim_end, (starts[up, None] + st.bp_end[up]).ravel()]
    )


class Loop:
    """The learner's loop a block at a time, the same in every process that makes the run (each makes
    it again from the seed): the steps, the learner's windows, and the calls its backend recorder ran
    in, each such call longer by its torch ops' cost, and so every later step later."""

    def __init__(self, seed: int, workers: int, schedule: DetailSchedule) -> None:
        self.seed, self.workers, self.schedule = seed, workers, schedule
        self.cell = -1  # the window grid cell of the last top-level exit
        self.mode = S.WINDOW_FULL  # the mode the last switch switched to

    def blocks(self, start: int, end: int) -> Iterator[Block]:
        """The blocks of the steps that start before ``end``."""
        t, block = start, 0
        while t < end:
            got = self._block(block, t, end)
            if got is None:
                return
            yield got
            t = int(got.starts[-1] + got.steps.length[-1])
            block += 1

    def _block(self, block: int, t: int, end: int) -> Block | None:
        drawn = block_steps(self.seed, block, self.workers)
        n = len(drawn.length)
        # the windows switch at exits picked on the steps as drawn (each switch then moves with its
        # exit): which calls began in a full window does not depend on how much longer any became
        s0 = t + np.cumsum(drawn.length) - drawn.length
        up = np.flatnonzero(drawn.update)
        exit_t = _exits(s0, drawn, up)
        exit_step = np.concatenate([np.arange(n), np.arange(n), np.repeat(up, BACKPROPS)])
        order = np.argsort(exit_t, kind="stable")
        cell = (exit_t[order] - RUN_START_NS) // WINDOW_NS
        at = order[cell > np.concatenate([[self.cell], cell[:-1]])]  # the exits each switch follows
        mode = self.mode ^ (np.arange(1, len(at) + 1) & 1)
        modes = np.append(self.mode, mode)  # before the first switch, then after each
        inf_window = modes[np.searchsorted(exit_t[at], s0 + drawn.inf_begin, "right")] == S.WINDOW_FULL
        bp_window = np.zeros((n, BACKPROPS), bool)
        bp_begin0 = s0[up, None] + drawn.bp_begin[up]
        bp_window[up] = modes[np.searchsorted(exit_t[at], bp_begin0, "right")] == S.WINDOW_FULL
        # which of those lay wholly in a detail stretch, recorded (so as long as that makes them),
        # depends on the recorded calls before each: settled in a few rounds (only calls within the
        # moves' milliseconds of a stretch's edge can change, each by the calls before it)
        inf_len = drawn.inf_end - drawn.inf_begin + OPS_PER_INFERENCE * BACKEND_COST_NS
        bp_len = drawn.bp_end - drawn.bp_begin + OPS_PER_BACKPROP * BACKEND_COST_NS
        inf_full, bp_full = inf_window, bp_window
        for _ in range(MAX_ROUNDS):
            st = _lengthened(drawn, inf_full, bp_full)
            starts = t + np.cumsum(st.length) - st.length
            inf_b, bp_b = starts + st.inf_begin, starts[:, None] + st.bp_begin
            now_inf = inf_window & self._in_stretch(inf_b, inf_b + inf_len)
            now_bp = bp_window & self._in_stretch(bp_b, bp_b + bp_len)
            if np.array_equal(now_inf, inf_full) and np.array_equal(now_bp, bp_full):
                break
            inf_full, bp_full = now_inf, now_bp
        else:
            raise RuntimeError(f"block {block}: the recorded calls did not settle in {MAX_ROUNDS} rounds")
        moved = _exits(starts, st, up)  # the same exits, in the same order, where they moved
        k = int(np.searchsorted(starts, end))
        if not k:
            return None
        if k < n:  # the run ends inside this block
            st, starts, inf_full, bp_full = st.head(k), starts[:k], inf_full[:k], bp_full[:k]
            cell = cell[exit_step[order] < k]
            mode, at = mode[exit_step[at] < k], at[exit_step[at] < k]
        self.cell = int(cell[-1])
        if len(mode):
            self.mode = int(mode[-1])
        return Block(starts, st, moved[at] + 1 * US, mode, inf_full, bp_full)

    def _in_stretch(self, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Whether calls from ``begin`` to ``end`` lie wholly in a detail stretch (a call the
        stretch's end cuts runs unrecorded: the collectors are off from the cut on)."""
        sch = self.schedule
        return sch.in_detail_each(begin - RUN_START_NS) & sch.in_detail_each(end - RUN_START_NS)


def _lengthened(st: Steps, inf_full: np.ndarray, bp_full: np.ndarray) -> Steps:
    """The steps with each recorded call longer by its torch ops' cost, and what follows it in its
    step later."""
    d = OPS_PER_INFERENCE * BACKEND_COST_NS * inf_full
    moved = {f: getattr(st, f) + d for f in ("inf_end", "sim_begin", "cat_begin", "cat_end", "sim_end")}
    moved.update({f: getattr(st, f) + d[:, None] for f in ("w_begin", "w_cat_begin", "w_cat_end", "w_end")})
    e = OPS_PER_BACKPROP * BACKEND_COST_NS * bp_full
    after = d[:, None] + np.cumsum(e, axis=1)
    out = dataclasses.replace(st, **moved, bp_begin=st.bp_begin + after - e, bp_end=st.bp_end + after)
    out.length = np.where(st.update, out.bp_end[:, -1], out.sim_end)
    return out


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


NO_OPS = np.zeros((0, 3), np.int64)
OPS_SCHEMA = S.columns_schema(
    S.BACKEND_COLUMNS_DOC, collector="native"
)  # (start, end, name) rows of torch ops: none


def torch_ops(begin: np.ndarray, work_end: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` outermost torch ops of each call from ``begin``, whose own work ends at ``work_end``
    (the call's end less the ops' cost): evenly spread, OP_SHARE of each slot inside its op, and
    BACKEND_COST_NS of the recorder's after each slot, so the last op ends before the call does."""
    slot = (work_end - begin) // k
    inner = (slot * OP_SHARE).astype(np.int64)
    start = begin[:, None] + np.arange(k) * (slot + BACKEND_COST_NS)[:, None] + ((slot - inner) // 2)[:, None]
    out = np.empty((start.size, 3), np.int64)
    out[:, 0] = start.ravel()
    out[:, 1] = (start + inner[:, None]).ravel()
    out[:, 2] = np.tile(FIRST_TORCH_OP + np.arange(k) % len(TORCH_OPS), len(begin))
    return out


@dataclasses.dataclass
class Truth:
    """What one process spent, in ns, as made: as recorded, and less what the recorder cost."""

    exclusive: dict[str, int] = dataclasses.field(default_factory=dict)
    work: dict[str, int] = dataclasses.field(default_factory=dict)
    simulator: dict[str, int] = dataclasses.field(default_factory=dict)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(
        self,
        op: str,
        begin: np.ndarray,
        end: np.ndarray,
        cat: tuple[np.ndarray, np.ndarray] | None = None,
        cost: int = 0,
    ) -> None:
        """Calls of ``op`` from ``begin`` to ``end``, ``cost`` ns of it in all the recorder's."""
        took = int((end - begin).sum())
        self.exclusive[op] = self.exclusive.get(op, 0) + took
        self.work[op] = self.work.get(op, 0) + took - cost
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
    """One process's rows a block at a time, in time order (its events, and the learner's torch ops
    as (start, end, name) rows), and its truth as they are made."""

    def __init__(self, spec: ProcessSpec) -> None:
        self.spec = spec
        self.truth = Truth()
        self.rng = np.random.default_rng([spec.seed, 1_000_000 + spec.index])  # its own draws
        self._next_id = 1  # instance ids (the learner's phase is 0)
        self.loop_end = spec.run_end - SEC // 2
        self.session_end = spec.run_end if spec.learner else 0  # a worker's: after the loop

    def _cost(self, n: int) -> np.ndarray:
        """What each boundary measured it cost: pre | post << 32 (EVENT_COST_COLUMN)."""
        return self.rng.integers(30, 90, n) | self.rng.integers(30, 90, n) << 32

    def _speed(self, n: int) -> np.ndarray:
        """The reference loop's ps per iteration at a session or window row (the speed probe)."""
        return self.rng.integers(105_000, 140_000, n)

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The session's rows: its start, the loop's blocks, its end."""
        sp = self.spec
        tid = sp.main_tid
        head = [rows([sp.start], tid, S.SESSION_START, -1, self._speed(1))]
        if sp.learner:  # the workers switch no collector: they have no windows
            head.append(rows([sp.start + 20 * US], tid, S.WINDOW, S.WINDOW_FULL))
        loop_start = RUN_START_NS + int(LOOP_START_S * SEC)
        if sp.learner:
            head.append(rows([loop_start - 100 * US], tid, S.PHASE_BEGIN, 0, -1, TRAINING))
        yield np.concatenate(head), NO_OPS
        last = loop_start
        for block in Loop(sp.seed, sp.workers, sp.schedule).blocks(loop_start, self.loop_end):
            yield self._learner(block) if sp.learner else (self._worker(block), NO_OPS)
            last = int(block.starts[-1] + block.steps.length[-1])
        if sp.learner:
            tail = [rows([last + 50 * US], tid, S.PHASE_END, 0, -1, TRAINING)]
        else:  # the learner closes its workers as the run ends
            self.session_end = last + 100 * MS + 10 * MS * sp.index
            tail = []
        tail.append(rows([self.session_end], tid, S.SESSION_END, -1, self._speed(1)))
        yield np.concatenate(tail), NO_OPS

    def _learner(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        s, st = block.starts, block.steps
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
        bp_full = block.bp_full[up].reshape(-1)
        m = len(bp_id)
        parts += [
            rows(bp_begin, tid, S.OP_BEGIN, bp_id, -1, BACKPROP, self._cost(m)),
            rows(bp_end, tid, S.OP_END, bp_id, -1, BACKPROP, self._cost(m)),
            rows(block.switch_t, tid, S.WINDOW, block.switch_mode, self._speed(len(block.switch_t))),
        ]
        inf_cost = OPS_PER_INFERENCE * BACKEND_COST_NS * block.inf_full
        bp_cost = OPS_PER_BACKPROP * BACKEND_COST_NS * bp_full
        self.truth.add("inference", t["inf_begin"], t["inf_end"], cost=int(inf_cost.sum()))
        self.truth.add("simulation", t["sim_begin"], t["sim_end"], (t["cat_begin"], t["cat_end"]))
        self.truth.add("backprop", bp_begin, bp_end, cost=int(bp_cost.sum()))
        full = block.inf_full
        ops = [
            torch_ops(t["inf_begin"][full], t["inf_end"][full] - inf_cost[full], OPS_PER_INFERENCE),
            torch_ops(bp_begin[bp_full], bp_end[bp_full] - bp_cost[bp_full], OPS_PER_BACKPROP),
        ]
        return by_time(*parts), by_time(*ops)

    def _worker(self, block: Block) -> np.ndarray:
        s, st = block.starts, block.steps
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
        return by_time(*parts)

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


def _put_ops(stream: collections.deque | None, ops: np.ndarray, thread: int) -> None:
    """Torch ops as the native recorder hands them to the writer: one record batch a flush."""
    if stream is None or not len(ops):
        return
    cols = [ops[:, 0], ops[:, 1], np.full(len(ops), thread, np.int64), ops[:, 2].astype(np.int32)]
    stream.append(pa.RecordBatch.from_arrays([pa.array(c) for c in cols], schema=OPS_SCHEMA))


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
    ops_stream = writer.add_stream(S.BACKEND_FILE, OPS_SCHEMA) if spec.learner else None
    blocks = made.blocks()
    pending, pending_ops = next(blocks)
    marks_end = spec.run_end if spec.learner else made.loop_end  # a worker's session ends after its loop
    marks = made.flush_marks(marks_end)
    done = False
    try:
        for t in flush_times(spec, marks_end):
            while not done and (not len(pending) or pending[-1, 0] <= t):
                try:
                    more, more_ops = next(blocks)
                except StopIteration:
                    done = True
                    continue
                pending, pending_ops = (
                    np.concatenate([pending, more]),
                    np.concatenate([pending_ops, more_ops]),
                )
            k, j = (
                int(np.searchsorted(pending[:, 0], t, "right")),
                int(np.searchsorted(marks[:, 0], t, "right")),
            )
            buffer.put(by_time(pending[:k], marks[:j]))
            pending, marks = pending[k:], marks[j:]
            ended = pending_ops[:, 1] <= t  # the recorder hands over the ops that ended
            _put_ops(ops_stream, pending_ops[ended], spec.main_tid)
            pending_ops = pending_ops[~ended]
            clock[0] = t
            writer.flush()
        rest = [(pending, pending_ops), *blocks]
        buffer.put(by_time(*(r[0] for r in rest), marks))
        _put_ops(ops_stream, np.concatenate([r[1] for r in rest]), spec.main_tid)
        clock[0] = made.session_end
    finally:
        writer.close()
    agg = writer.aggregator
    return {
        "pid": spec.pid,
        "role": "learner" if spec.learner else "env worker",
        "wall_ns": made.session_end - spec.start,
        "exclusive_ns": made.truth.exclusive,
        "work_ns": made.truth.work,
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
    which is replaced); its truth: per process and summed over them, seconds per operation, as
    recorded (``exclusive``: what the raw figures read) and less the recorder's cost (``work``: what
    the corrected ones should).

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
            e = totals.setdefault(op, {"exclusive_s": 0.0, "work_s": 0.0, "simulator_s": 0.0, "calls": 0})
            e["exclusive_s"] += ns / 1e9
            e["work_s"] += p["work_ns"][op] / 1e9
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
