"""Stack samples: each counts in the operation and category its thread was in, by source line.

Synthetic samples on a fake-clock trace give the exact counts; one real sampler run checks that a busy
function of the program's own is named for nearly all of its time.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

import rlscope
from rlscope import annotate, categories
from rlscope.analysis import analyze, stacks
from rlscope.analysis.timeline import build_timeline
from rlscope.trace import schema as S
from tests.conftest import write_stream
from tests.test_native_breakdown import timeline

TRAIN = "/home/me/project/train.py"
GYM = "/usr/lib/python3.11/site-packages/gymnasium/core.py"


def _frames(names: dict[str, int]) -> list[tuple]:
    """Stack 0: gymnasium's step (line 50) called from train.py:10 in rollout. Stack 1: train.py:20
    in update, the program's own line running. Stack 2: inside the standard library only."""
    return [
        (0, 0, names["step"], names[GYM], 50),
        (0, 1, names["rollout"], names[TRAIN], 10),
        (0, 2, names["<module>"], names[TRAIN], 99),
        (1, 0, names["update"], names[TRAIN], 20),
        (1, 1, names["<module>"], names[TRAIN], 98),
        (2, 0, names["step"], names[GYM], 51),
    ]


@pytest.fixture
def sampled(fake_session):
    """A trace: ``op`` from 1 to 3 us (its second half in the simulator category), unannotated until
    4 us; samples written as the sampler writes them, at known times."""
    sess, clock = fake_session
    names = {n: annotate.intern(n) for n in ("step", "rollout", "update", "<module>", TRAIN, GYM)}
    with sess:
        main = threading.get_native_id()
        t0 = clock()
        clock.advance(1000)
        with rlscope.scope("op"):
            clock.advance(1000)
            with rlscope.simulator():
                clock.advance(1000)
        clock.advance(1000)
    samples = [
        (t0 + 1500, main, 1),  # op, python: the program's own line
        (t0 + 2500, main, 0),  # op, simulator: gymnasium's line, called from train.py:10
        (t0 + 2600, main, 0),
        (t0 + 3500, main, 2),  # unannotated, library only
        (t0 + 500, main + 1, 1),  # a thread without rows: unannotated python
    ]
    write_stream(sess.process_dir / S.STACKS_FILE, S.STACKS_COLUMNS_DOC, samples)
    write_stream(sess.process_dir / S.FRAMES_FILE, S.FRAMES_COLUMNS_DOC, _frames(names))
    return sess


def test_samples_count_where_their_thread_was(sampled):
    proc = rlscope.load_trace(str(sampled.trace_dir)).processes[0]
    counts = stacks.attribute(proc, build_timeline(proc.events), proc.names)
    op, un = counts.ops["op"], counts.ops[categories.UNANNOTATED]
    assert counts.samples == 5 and (op.samples, op.python) == (3, 1) and (un.samples, un.python) == (2, 2)
    assert op.where == {(TRAIN, 10, "rollout"): 2, (TRAIN, 20, "update"): 1}
    assert op.running == {(GYM, 50, "step"): 2, (TRAIN, 20, "update"): 1}
    assert op.python_where == {(TRAIN, 20, "update"): 1}
    # a stack with no frame of the program's counts at its innermost frame
    assert un.where == {(GYM, 51, "step"): 1, (TRAIN, 20, "update"): 1}


def test_the_summary_lists_each_operations_top_lines_with_shares(sampled):
    summary = analyze(str(sampled.trace_dir)).summary["stacks"]
    assert summary["samples"] == 5
    op = summary["operations"]["op"]
    assert op["top_lines"][0] == {
        "file": TRAIN,
        "line": 10,
        "function": "rollout",
        "samples": 2,
        "share": pytest.approx(2 / 3),
    }
    assert op["top_python_lines"][0]["line"] == 20 and op["top_python_lines"][0]["share"] == 1.0
    assert op["named_share"] == 1.0
    assert next(iter(summary["operations"])) == "op"  # most samples first


def test_a_frame_in_a_recorded_library_folder_is_not_the_programs_line(fake_session):
    """A package installed outside the usual site folders (``pip install --target``, a tree on
    PYTHONPATH) is a library where the sampler recorded it as one: the program's line is its caller."""
    sess, clock = fake_session
    lib = "/opt/deps/stable_baselines3/ppo/ppo.py"
    names = {n: annotate.intern(n) for n in ("train", "learn", TRAIN, lib)}
    with sess:
        main = threading.get_native_id()
        with rlscope.scope("op"):
            clock.advance(1000)
            t = clock()
    frames = [(0, 0, names["train"], names[lib], 275), (0, 1, names["learn"], names[TRAIN], 12)]
    dirs = {S.LIBRARY_DIRS_METADATA_KEY: json.dumps(["/opt/deps/"])}
    write_stream(sess.process_dir / S.STACKS_FILE, S.STACKS_COLUMNS_DOC, [(t - 500, main, 0)])
    write_stream(sess.process_dir / S.FRAMES_FILE, S.FRAMES_COLUMNS_DOC, frames, extra=dirs)
    op = analyze(str(sess.trace_dir)).summary["stacks"]["operations"]["op"]
    assert (op["top_lines"][0]["file"], op["top_lines"][0]["line"]) == (TRAIN, 12)
    assert (op["top_functions"][0]["file"], op["top_functions"][0]["line"]) == (lib, 275)
    assert op["named_share"] == 1.0 and op["python_named_share"] == 1.0


def test_the_footer_and_the_html_section_name_the_lines(sampled):
    from rlscope.viz import stacks as view

    summary = analyze(str(sampled.trace_dir)).summary
    lines = view.footer_lines(summary)
    assert lines[1] == f"  {categories.UNANNOTATED} (2 samples)"  # the unexplained time first
    op = lines.index("  op (3 samples)")
    assert (
        lines[op + 1] == "    in your code: project/train.py:10 rollout 67%, project/train.py:20 update 33%"
    )
    assert lines[op + 2] == "    running: gymnasium/core.py:50 step 67%, project/train.py:20 update 33%"
    html = view.html_section(summary)
    assert "project/train.py:10 rollout" in html and "<h3>op: 3 samples</h3>" in html


def test_no_samples_no_section(fake_session):
    sess, clock = fake_session
    with sess, rlscope.scope("op"):
        clock.advance(1000)
    summary = analyze(str(sess.trace_dir)).summary
    assert summary.get("stacks") is None
    from rlscope.viz import stacks as view

    assert view.footer_lines(summary) == [] and view.html_section(summary) == ""


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_the_sampler_names_a_busy_function_of_the_program(tmp_path):
    """A real run: nearly every sample of an operation that only spins in ``_busy`` is ``_busy``'s."""
    with rlscope.profile(tmp_path / "t", backend=False, gpu=False, stack_hz=500, window_s=0.02):
        for _ in range(10):
            with rlscope.scope("spin"):
                _busy(0.03)
    summary = analyze(str(tmp_path / "t")).summary["stacks"]
    spin = summary["operations"]["spin"]
    assert spin["samples"] >= 5  # full windows only, on a loaded machine: some, not a rate
    busy = sum(r["samples"] for r in spin["top_lines"] if r["function"] == "_busy")
    assert busy / spin["samples"] >= 0.8


class _CountedEvent(threading.Event):
    """An event that counts its waits: a timed one is a wake-up of the sampler's thread, an untimed
    one the thread going to sleep until it is switched on."""

    def __init__(self) -> None:
        super().__init__()
        self.timed_waits = self.sleeps = 0

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            self.sleeps += 1
        else:
            self.timed_waits += 1
        return super().wait(timeout)


def _until(done: Callable[[], bool]) -> None:
    """Wait for the sampler's thread to reach a state (bounded: a loaded machine schedules it late)."""
    deadline = time.monotonic() + 10.0
    while not done() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert done()


class _Writer:
    def add_stream(self, name: str, schema: object) -> list:
        return []


class _Session:
    clock = staticmethod(time.perf_counter_ns)
    writer = _Writer()


def test_a_disabled_sampler_sleeps_until_enabled_and_stops_while_asleep():
    """Switched off (a light window, or between detail stretches), the thread neither samples nor
    wakes: once asleep, no timed wait, where polling at 1 kHz would have made hundreds. Switched on, it
    samples; stopped while asleep, it ends."""
    from rlscope.collectors.stacks import StackSampler

    sampler = StackSampler(_Session(), hz=1000)
    sampler._stop, sampler._on = stop, on = _CountedEvent(), _CountedEvent()
    sampler.set_enabled(False)
    sampler.start()
    _until(lambda: on.sleeps == 1)
    time.sleep(0.2)
    assert stop.timed_waits == 0
    assert len(sampler.samples) == 0
    sampler.set_enabled(True)
    _until(lambda: len(sampler.samples) > 0)  # this thread's stack, sampled from the sampler's
    sampler.set_enabled(False)
    _until(lambda: on.sleeps == 2)
    waits = stop.timed_waits
    time.sleep(0.2)
    assert stop.timed_waits == waits  # asleep again
    thread = sampler._thread
    sampler.stop()  # joins it for up to 5 s: asleep and never woken, it would still be alive
    assert not thread.is_alive()


@pytest.mark.parametrize("seed", range(4))
def test_sample_rows_are_the_last_row_of_their_thread_at_or_before_them(seed):
    """Per sample, the row of its thread that began last at or before it: against a walk over the
    rows, with threads of no rows, samples before a thread's first row and at a row's own time."""
    rng = np.random.default_rng(seed)
    tl = timeline(rng, rows=400, threads=1 + seed)
    thread = rng.choice(np.append(np.unique(tl.thread), [7, 8]), 300).astype(np.int64)
    ts = np.append(rng.integers(int(tl.ts.min()) - 10, int(tl.ts.max()) + 10, 250), rng.choice(tl.ts, 50))
    want = np.full(len(ts), -1)
    for i, (t, when) in enumerate(zip(thread.tolist(), ts.tolist(), strict=True)):
        mine = np.flatnonzero((tl.thread == t) & (tl.ts <= when))
        if len(mine):
            want[i] = mine[-1]  # a thread's rows in time order: the last began latest
    assert stacks.sample_rows(tl, thread, ts).tolist() == want.tolist()
    empty = dataclasses.replace(tl, ts=tl.ts[:0], thread_idx=tl.thread_idx[:0])
    assert stacks.sample_rows(empty, thread, ts).tolist() == [-1] * len(ts)


def _stack_lines_frame_by_frame(frames, names, own, roots):
    """The ``where`` and ``running`` lines of each stack read a frame at a time, innermost first: what
    stacks._stack_lines finds with numpy."""
    columns = [frames.column(c).to_pylist() for c in ("stack", "depth", "file", "line", "function")]
    rows = sorted(zip(*columns, strict=True))
    innermost: dict = {}
    running: dict = {}
    where: dict = {}
    for s, _, f, ln, fu in rows:
        here = (stacks.name_of(names, f), ln, stacks.name_of(names, fu))
        innermost.setdefault(s, here)
        if own and here[0].startswith(own):
            continue
        running.setdefault(s, here)
        if s not in where and not stacks.is_library(here[0], roots):
            where[s] = here
    return {s: (where.get(s, running.get(s, first)), running.get(s, first)) for s, first in innermost.items()}


@pytest.mark.parametrize("n_stacks", [0, 1, 7, 400])
def test_stack_lines_as_read_frame_by_frame(n_stacks: int) -> None:
    """Each stack's lines: its innermost frame outside rlscope's own files (``running``) and the first
    of those outside library folders too (``where``), each falling back to the one before; stacks of
    own frames alone, of library frames alone, of one frame, frames out of order."""
    import pyarrow as pa

    rng = np.random.default_rng(n_stacks)
    names = ["/own/rlscope/a.py", "/lib/python3/b.py", "<frozen c>", "/app/d.py", "/app/e.py", "f", "g", "h"]
    depth = np.concatenate([np.zeros(0, np.int64), *(np.arange(k) for k in rng.integers(1, 6, n_stacks))])
    sid = np.repeat(np.arange(n_stacks) * 3 + 1, np.bincount(np.cumsum(depth == 0) - 1, minlength=n_stacks))
    file = rng.choice(np.array([0, 1, 2, 3, 4]), len(depth), p=[0.3, 0.3, 0.1, 0.2, 0.1])
    shuffle = rng.permutation(len(depth))
    frames = pa.table(
        {
            "stack": sid[shuffle], "depth": depth[shuffle], "file": file[shuffle],
            "line": rng.integers(1, 500, len(depth))[shuffle],
            "function": rng.integers(5, 8, len(depth))[shuffle],
        }
    )  # fmt: skip
    own, roots = ("/own/rlscope",), ("/lib/python3",)
    assert stacks._stack_lines(frames, names, own, roots) == _stack_lines_frame_by_frame(
        frames, names, own, roots
    )
