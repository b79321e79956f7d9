"""The automatic operations' module-call wrapper: counted per operation, priced, removed.

Ground truth on a fake clock: every module's forward advances the clock by its known work plus
``WRAP`` ns standing for what rlscope's wrapper of that call costs. With a calibration pricing a
module call at ``WRAP`` (and boundaries at nothing), the corrected operations must hold exactly the
known work: the trace counts every call, and the correction removes each one's cost from the
operation that made it.
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.overhead.correct import module_calls
from tests.conftest import FakeClock

torch = pytest.importorskip("torch")

WRAP = 700  # the wrapper's cost a module call (ns), as the fake forwards pay it
LEAF = 2_000  # a leaf module's own work
ROOT = 1_000  # the container's own work besides its two leaves
SAMPLE = 3_000  # in the no_grad block after the forward (inference, no module call)
LOSS = 4_000  # loss and backward (backprop, no module call)
OPT = 5_000  # inside optimizer.step
CALLS = 3  # module calls of one forward: the container and its two leaves
WORK = ROOT + 2 * LEAF  # the forward's known work


class Leaf(torch.nn.Module):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.advance(WRAP + LEAF)
        return x * 1.0


class Net(torch.nn.Module):
    """A container of two leaves: three module calls a forward, each paying WRAP."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.a, self.b = Leaf(clock), Leaf(clock)
        self.w = torch.nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.advance(WRAP + ROOT)
        return self.b(self.a(x)) * self.w


def _calibration(module_call: dict | None) -> dict:
    costs = {"scope": {"inside": 0.0, "outside": 0.0, "total": 0.0}}
    if module_call is not None:
        costs[module_calls.ENTRY] = module_call
    return {
        "schema": cal_mod.SCHEMA,
        "created": "test",
        "key": cal_mod.current_key(),
        "costs_ns": costs,
        "refused": [],
    }


def _run(tmp_path, iters: int = 20, updates: int = 5):
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, windows=False, auto_ops=True)
    sess.clock = clock
    net = Net(clock)

    class ClockSGD(torch.optim.SGD):
        def step(self, closure=None):
            clock.advance(OPT)
            return super().step(closure)

    opt = ClockSGD(net.parameters(), lr=0.01)
    x = torch.ones(2)
    with sess:
        for _ in range(iters):
            with torch.no_grad():
                net(x)
                clock.advance(SAMPLE)
            clock.advance(1_000)
        for _ in range(updates):
            loss = net(x).sum()
            clock.advance(LOSS)
            opt.zero_grad()
            loss.backward()
            opt.step()
            clock.advance(1_000)
    return sess


def test_the_trace_counts_every_module_call_per_operation(tmp_path):
    sess = _run(tmp_path)
    proc = rlscope.load_trace(str(sess.trace_dir)).processes[0]
    per_op: dict[str, int] = {}
    table = proc.module_calls
    for nid, n in zip(table.column("operation").to_pylist(), table.column("calls").to_pylist(), strict=True):
        per_op[proc.names[nid]] = per_op.get(proc.names[nid], 0) + n
    assert per_op == {"inference": 20 * CALLS, "backprop": 5 * CALLS}
    (thread,) = set(proc.module_calls.column("thread").to_pylist())
    assert module_calls.calls_per_instance(proc) == {
        (thread, "inference"): CALLS,
        (thread, "backprop"): CALLS,
    }


def test_corrected_operations_hold_the_known_work(tmp_path):
    cal_mod.save(_calibration({"inside": float(WRAP), "outside": 0.0, "total": float(WRAP)}))
    sess = _run(tmp_path)
    s = analyze(sess.trace_dir).summary
    raw, ops = s["raw"]["operations"], s["operations"]
    assert raw["inference"]["total_s"] == pytest.approx(20 * (WORK + CALLS * WRAP + SAMPLE) * 1e-9, abs=1e-12)
    assert ops["inference"]["total_s"] == pytest.approx(20 * (WORK + SAMPLE) * 1e-9, abs=2e-9)
    assert ops["backprop"]["total_s"] == pytest.approx(5 * (WORK + LOSS + OPT) * 1e-9, abs=2e-9)
    assert s["overhead"]["removed_s"][module_calls.ENTRY] == pytest.approx(
        25 * CALLS * WRAP * 1e-9, abs=1e-12
    )
    assert s["overhead"]["costs_used"][module_calls.ENTRY] == module_calls.ENTRY


def test_a_calibration_without_the_entry_prices_calls_at_the_default(tmp_path):
    cal_mod.save(_calibration(None))
    sess = _run(tmp_path)
    s = analyze(sess.trace_dir).summary
    removed = s["overhead"]["removed_s"][module_calls.ENTRY]
    # the default, priced at the run's speed (within residual.MAX_SPEED_SCALE either way)
    assert 0 < removed <= 25 * CALLS * 3 * module_calls.DEFAULT["inside"] * 1e-9
    assert any(n.startswith(f"{module_calls.ENTRY} not calibrated") for n in s["overhead"]["notes"])


def test_without_automatic_operations_nothing_is_counted(tmp_path):
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, windows=False)
    sess.clock = clock
    with sess, rlscope.scope("inference"):
        Net(clock)(torch.ones(2))
    proc = rlscope.load_trace(str(sess.trace_dir)).processes[0]
    assert proc.module_calls is None


def test_between_detail_stretches_the_summarized_instances_lose_their_calls_too(tmp_path):
    """A run kept in detail for 4 of its 20 steps: the corrected whole-run inference is still the
    known work, its summarized instances' module calls removed from the aggregates' time."""
    cal_mod.save(_calibration({"inside": float(WRAP), "outside": 0.0, "total": float(WRAP)}))
    clock = FakeClock()
    sess = rlscope.profile(tmp_path / "trace", backend=False, gpu=False, auto_ops=True, detail="2it,10it,2it")
    sess.clock = clock
    net = Net(clock)
    with sess:
        for _ in range(20):
            with rlscope.scope("step"):
                with torch.no_grad():
                    net(torch.ones(2))
                    clock.advance(SAMPLE)
                clock.advance(1_000)
            sess.writer.flush()  # the detail is cut at flushes
    s = analyze(sess.trace_dir).summary
    assert s["detail"]["summarized_s"] > 0
    raw, ops = s["raw"]["operations"], s["operations"]
    # every instance's calls removed, in the stretches and between them (the raw figures' own
    # accounting at the cuts is docs/long-runs.md's)
    removed = raw["inference"]["total_s"] - ops["inference"]["total_s"]
    assert removed == pytest.approx(20 * CALLS * WRAP * 1e-9, abs=1e-12)


def test_each_session_counts_its_own_calls_under_the_thread_that_made_them(tmp_path):
    """The collector reads the counts on the writer's thread, which a collection on a thread of its
    own halfway through each session stands for: every row names the program's thread, and each
    session counts its own calls only, not those made before it with no session."""
    import threading

    from rlscope.collectors.module_calls import ModuleCallCounter

    x = torch.ones(2)
    for k in range(2):
        clock = FakeClock()
        net = Net(clock)
        net(x)  # no session: no one's
        sess = rlscope.profile(tmp_path / f"t{k}", backend=False, gpu=False, windows=False, auto_ops=True)
        sess.clock = clock
        with sess:
            for i in range(10):
                with torch.no_grad():
                    net(x)
                    clock.advance(SAMPLE)
                if i == 4:
                    (counter,) = [c for c in sess._collectors if isinstance(c, ModuleCallCounter)]
                    flush = threading.Thread(target=counter.collect)
                    flush.start()
                    flush.join()
        proc = rlscope.load_trace(str(sess.trace_dir)).processes[0]
        table = proc.module_calls
        assert set(table.column("thread").to_pylist()) == {threading.get_native_id()}
        assert sum(table.column("calls").to_pylist()) == 10 * CALLS
        assert len(table) == 2  # the flush's rows and the rest at the end


def _random_timeline(rng, n_threads: int = 3, rows_per_thread: int = 400, n_inst: int = 60):
    """A timeline of ``n_threads`` threads (rows grouped by thread, as the analysis sorts them), each
    row inside one of its thread's instances or none, in a random category; instance names repeat
    across threads and an id may stand for the same name as another (names hold a duplicate)."""
    from rlscope import categories
    from rlscope.analysis.timeline import Timeline
    from rlscope.trace import schema as S

    names = ["inference", "backprop", "simulation", "inference", "other"]
    inst_thread = rng.integers(0, n_threads, n_inst)
    inst_name = rng.integers(-1, len(names), n_inst)
    cats = np.array(
        [
            categories.PYTHON,
            categories.BACKEND,
            categories.CUDA_API,
            categories.SIMULATOR,
            categories.PROFILER,
        ]
    )
    parts = {k: [] for k in ("ts", "end", "thread", "op", "cat", "kind")}
    for k in range(n_threads):
        t = np.cumsum(rng.integers(1, 5_000, rows_per_thread + 1)) + 10**9
        mine = np.flatnonzero(inst_thread == k)
        op = rng.choice(np.append(mine, [-1, -1]), rows_per_thread)
        kind = np.full(rows_per_thread, S.CAT_BEGIN)
        kind[np.unique(op[op >= 0], return_index=True)[1]] = S.OP_BEGIN
        parts["ts"].append(t[:-1])
        parts["end"].append(t[1:])
        parts["thread"].append(np.full(rows_per_thread, 100 + k))
        parts["op"].append(op)
        parts["cat"].append(rng.choice(cats, rows_per_thread))
        parts["kind"].append(kind)
    p = {k: np.concatenate(v) for k, v in parts.items()}
    n = len(p["ts"])
    tl = Timeline.with_seg_end(
        p["end"], ts=p["ts"], threads=np.arange(100, int(p["thread"].max()) + 1).astype(np.int32),
        kind=p["kind"].astype(np.int8),
        id=np.full(n, -1, np.int32), name=np.full(n, -1, np.int32), flags=np.zeros(n, np.int8),
        op=p["op"].astype(np.int32), cat=p["cat"].astype(np.int8), phase=np.full(n, -1, np.int32),
        main_thread=100, start_ns=int(p["ts"].min()), end_ns=int(p["end"].max()),
        inst_name=inst_name, inst_end=np.zeros(n_inst, np.int64),
        thread_idx=(p["thread"] - 100).astype(np.int16),
    )  # fmt: skip
    return names, tl


def _planned_reference(names, tl, mean, per_call_ns):
    """``planned`` by a walk over the rows: a costed row is inside an instance whose (thread, name)
    made calls; each instance's cost is spread over its costed rows in proportion to their length,
    over the interpreter's rows alone where it has any."""
    cost = {}
    for i in range(len(tl.ts)):
        op = int(tl.op[i])
        if op >= 0 and tl.inst_name[op] >= 0:
            m = mean.get((int(tl.thread[i]), names[tl.inst_name[op]]), 0.0)
            if m * per_call_ns > 0:
                cost[i] = m * per_call_ns
    python_rows, all_rows = defaultdict(list), defaultdict(list)
    for i in cost:
        dur = float(tl.seg_end[i] - tl.ts[i])
        all_rows[int(tl.op[i])].append((i, dur))
        if int(tl.cat[i]) not in module_calls._NOT_PYTHON:
            python_rows[int(tl.op[i])].append((i, dur))
    out = np.zeros(len(tl.ts))
    for inst, rows in all_rows.items():
        use = python_rows[inst] if sum(d for _, d in python_rows[inst]) > 0 else rows
        total = sum(d for _, d in use)
        for i, d in use:
            out[i] = d / total * cost[i] if total > 0 else 0.0
    return out


@pytest.mark.parametrize("seed", range(8))
def test_planned_spreads_each_instances_calls_as_a_walk_over_the_rows_does(seed, monkeypatch):
    """On random timelines: the cost per row of the brute-force walk, and each costed instance loses
    exactly its calls' cost (mean calls times the price)."""
    rng = np.random.default_rng(seed)
    names, tl = _random_timeline(rng)
    mean = {(100, "inference"): 3.0, (101, "backprop"): 1.5, (102, "inference"): 0.0, (100, "nowhere"): 2.0}
    monkeypatch.setattr(module_calls, "calls_per_instance", lambda proc, tl: mean)
    proc = SimpleNamespace(names=names)
    got = module_calls.planned(proc, tl, 700.0)
    want = _planned_reference(names, tl, mean, 700.0)
    assert want.any() and len(got) == len(tl.ts)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    for inst in np.unique(tl.op[got > 0]).tolist():
        name = names[tl.inst_name[inst]]
        thread = int(tl.thread[np.flatnonzero(tl.op == inst)[0]])
        assert got[tl.op == inst].sum() == pytest.approx(mean[(thread, name)] * 700.0, rel=1e-12)


def test_planned_is_empty_when_no_instance_made_calls(monkeypatch):
    names, tl = _random_timeline(np.random.default_rng(0))
    monkeypatch.setattr(module_calls, "calls_per_instance", lambda proc, tl: {(100, "nowhere"): 2.0})
    assert len(module_calls.planned(SimpleNamespace(names=names), tl, 700.0)) == 0
