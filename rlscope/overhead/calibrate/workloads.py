"""The micro-workloads a calibration times, and how one round times them.

Every cost is a *differential* measurement: a round times a micro-workload several times
unprofiled and profiled, interleaved, and takes each side's *minimum* (:func:`_interleaved`):
another process stealing the core only ever adds time, so the fastest of several short timings is
the one it disturbed least (a mean, or one long timing, absorbs every preemption). Costs paid on
the job's own thread are timed in its CPU time, which leaves out the time it waited for a core.
Each micro-workload does a little Python work between events, as real loops do. The trace of each
profiled timing, analyzed by rlscope's own analyzer, says how much of the cost landed *inside* the
begin/end pair (charged to the operation or category it opens); the rest landed *outside*.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import rlscope
from rlscope.annotate import simulator
from rlscope.overhead.correct import reference
from rlscope.trace import schema as S

OUTER = rlscope.scope("rlscope.overhead.calibrate.rounds.outer")
INNER = rlscope.scope("rlscope.overhead.calibrate.rounds.inner")
# warm-ups run here: what is measured never sees them
WARM = rlscope.scope("rlscope.overhead.calibrate.rounds.warm-up")
_SIM = simulator()
NO_FLUSH = 1e6  # flush interval that never fires during a measured loop: the writer is measured apart
_work = reference.work  # the reference loop's step (overhead/correct/reference.py), between events here too


def _scope_loop(n: int, outer: Any = OUTER, inner: Any = INNER) -> None:
    state = [1]
    with outer:
        for _ in range(n):
            _work(state)
            with inner:
                pass


def _category_loop(n: int, outer: Any = OUTER) -> None:
    state = [1]
    with outer:
        for _ in range(n):
            _work(state)
            with _SIM:
                pass


_spin = reference.spin  # plain Python, no events: the job that background threads stall through the GIL


@dataclasses.dataclass(frozen=True)
class Workload:
    """``run(n)`` is timed. ``reset()`` runs before every timing, outside the clock and the session,
    so that every timing does the same work (an RL loop that kept training would not). ``warm()``
    runs just before the clock starts, inside the session: a timing right after a session's start
    (or a trace's analysis) would otherwise pay for cold caches, and a short one noticeably."""

    run: Callable[[int], None]
    reset: Callable[[], None] | None = None
    warm: Callable[[], None] | None = None


SCOPES = Workload(_scope_loop, warm=lambda: _scope_loop(300, WARM, WARM))
CATEGORIES = Workload(_category_loop, warm=lambda: _category_loop(300, WARM))


def _workload(fn: Callable[[int], None] | Workload) -> Workload:
    return fn if isinstance(fn, Workload) else Workload(fn)


def _measure(w: Workload, n: int, cpu: bool) -> tuple[float, int, int]:
    """(ns on the chosen clock, wall start, wall end) of ``w.run(n)``.

    ``cpu``: the thread's CPU time, for costs paid on the job's own thread: time another process
    steals while this thread waits for a core is not CPU time, so load inflates it far less.
    """
    if w.warm is not None:
        w.warm()
    w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    w.run(n)
    c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
    return float(c1 - c0 if cpu else w1 - w0), w0, w1


def _timed(fn: Callable[[int], None], n: int) -> float:
    """Wall ns of ``fn(n)``."""
    t0 = time.perf_counter_ns()
    fn(n)
    return float(time.perf_counter_ns() - t0)


class _Traces:
    """Fresh trace directories under one root, each deleted once read (a calibration makes hundreds)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0

    def session(self, **options: Any) -> Any:
        """A session with the expensive collectors off unless asked for, and no alternating windows
        (a calibration measures one configuration at a time)."""
        self.count += 1
        opts = {"flush_interval": NO_FLUSH, "backend": False, "gpu": False, **options, "windows": False}
        return rlscope.profile(self.root / f"t{self.count}", **opts)

    def profiled(
        self,
        w: Workload,
        n: int,
        options: dict[str, Any],
        cpu: bool,
        read: Callable[[Any, int, int], Any] | None = None,
    ) -> tuple[float, Any]:
        """Time ``w.run(n)`` under a fresh session; ``read(trace, wall start, wall end)`` takes what
        is needed from its trace, which is then deleted."""
        if w.reset is not None:
            w.reset()
        s = self.session(**options)
        with s:
            t, w0, w1 = _measure(w, n, cpu)
        try:
            return t, None if read is None else read(rlscope.load_trace(str(s.trace_dir)), w0, w1)
        finally:
            shutil.rmtree(s.trace_dir, ignore_errors=True)


def _interleaved(
    traces: _Traces,
    fn: Callable[[int], None] | Workload,
    n: int,
    m: int,
    options: dict[str, Any],
    read: Callable[[Any, int, int], Any],
    *,
    cpu: bool = True,
    baseline: dict[str, Any] | None = None,
) -> tuple[float, float, list[Any]]:
    """One round: ``m`` timings unprofiled (``baseline``: under a session with those options
    instead) and ``m`` profiled, interleaved; (unprofiled min ns, profiled min ns, what was read).

    The minimum of each side: disturbance (another process, a cache flushed by it) only ever adds
    time, so the fastest of several short timings is the least disturbed one.
    """
    w = _workload(fn)
    unprof, prof, seen = [], [], []
    for _ in range(m):
        if baseline is None:
            if w.reset is not None:
                w.reset()
            unprof.append(_measure(w, n, cpu)[0])
        else:
            unprof.append(traces.profiled(w, n, baseline, cpu)[0])
        t, info = traces.profiled(w, n, options, cpu, read)
        prof.append(t)
        seen.append(info)
    return min(unprof), min(prof), seen


def _summary(trace: Any) -> dict[str, Any]:
    from rlscope.analysis import analyze

    return dict(analyze(trace, correct=False, intervals=False).summary)


def _measured(
    trace: Any, a: int, b: int, begin: int, end: int, name: str | None = None, category: int | None = None
) -> dict[str, float] | None:
    """What the timed loop's boundaries measured they cost (schema.EVENT_COST_COLUMN), per pair:
    ``measured_inside`` (after a begin's timestamp, before an end's) and ``measured_outside``. The
    analyzer removes a measured boundary's own figure and, around it, what the calibration found
    beyond it (rlscope/overhead/correct/residual.py). None without measurements (the Python methods)."""
    proc = trace.processes[0]
    ev = proc.events
    if S.EVENT_COST_COLUMN[0] not in ev.column_names:
        return None
    ts, kind = ev.column("ts_ns").to_numpy(), ev.column("kind").to_numpy()
    keep = (ts >= a) & (ts <= b) & ((kind == begin) | (kind == end))
    if name is not None:
        ids = [i for i, x in enumerate(proc.names) if x == name]
        keep &= np.isin(ev.column("name").to_numpy(), ids)
    if category is not None:  # not the writer's flush marks
        keep &= ev.column("id").to_numpy() == category
    cost = ev.column(S.EVENT_COST_COLUMN[0]).to_numpy()[keep]
    pairs = len(cost) / 2
    if pairs == 0 or (cost > 0).mean() < 0.9:  # most boundaries must have measured themselves
        return None
    pre, post = S.unpack_cost(cost)
    opens = kind[keep] == begin
    return {
        "measured_inside": float(np.where(opens, post, pre).sum()) / pairs,
        "measured_outside": float(np.where(opens, pre, post).sum()) / pairs,
    }


def _measured_median(seen: list[tuple[float, dict[str, float] | None]]) -> dict[str, float]:
    """Median per-pair measurements over a round's timings ({} when a timing had none)."""
    got = [m for _, m in seen]
    if not got or any(m is None for m in got):
        return {}
    return {k: statistics.median(m[k] for m in got) for k in ("measured_inside", "measured_outside")}  # type: ignore[index]


def _split(total_ns: float, inside_ns: float) -> dict[str, float]:
    inside = max(0.0, min(inside_ns, total_ns))
    return {"inside": inside, "outside": max(total_ns - inside, 0.0), "total": total_ns}


def _rl_units(torch: Any) -> dict[str, Callable[[], None]]:
    """The two units of a synthetic actor-critic loop (not one of the validation workloads), with
    the kinds of torch calls RL code makes: ``act``, four environment steps (a no-grad forward of
    tiny MLPs, a Categorical sample, a numpy "environment" step), and ``learn``, one update (a
    Categorical's log_prob/entropy, a loss, backward, gradient clipping, Adam). A unit makes the
    same calls on tensors of the same shapes every time; the values drift, which does not change
    what tiny ops take."""
    import numpy as np
    from torch.distributions import Categorical

    torch.manual_seed(0)

    def mlp(out: int) -> Any:
        layers = [torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh()]
        return torch.nn.Sequential(*layers, torch.nn.Linear(64, out))

    actor, critic = mlp(2), mlp(1)
    params = [*actor.parameters(), *critic.parameters()]
    opt = torch.optim.Adam(params, lr=1e-4, eps=1e-5)
    state = {"obs": np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)}

    def act() -> None:
        obs = state["obs"]
        for _ in range(4):
            with torch.no_grad():
                x = torch.as_tensor(obs)
                a = Categorical(logits=actor(x)).sample()
                critic(x).flatten()
            obs = (obs * 0.99 + 0.01 * a.numpy()[:, None]).astype(np.float32)
        state["action"] = a

    def learn() -> None:
        x = torch.as_tensor(state["obs"])
        ret = torch.ones(4)
        dist = Categorical(logits=actor(x))
        loss = -(dist.log_prob(state["action"]) * ret).mean() - 0.01 * dist.entropy().mean()
        loss = loss + 0.5 * (critic(x).view(-1) - ret).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()

    return {"act": act, "learn": learn}


ABBA = (True, False, False, True)  # recorder on, off, off, on: a linear drift cancels within a quad


def interquartile_mean(values: Sequence[float]) -> float:
    """Mean of the middle half of ``values``: robust to the few a preemption hit, like the median,
    and less noisy than it on the many it did not."""
    xs = sorted(values)
    q = len(xs) // 4
    return statistics.fmean(xs[q : len(xs) - q])


def relative_cost(quads: list[Sequence[float]]) -> float:
    """What recording adds, relative to the unit's time unrecorded, from quads of timings of one
    unit taken on, off, off, on: the interquartile mean over quads of (on + on) / (off + off), less 1.

    The four timings of a quad lie within a few ms, so a change of the machine's speed (another
    process, the host's other tenants) slows them alike and cancels in the ratio."""
    return interquartile_mean([(a1 + a2) / (b1 + b2) for a1, b1, b2, a2 in quads]) - 1.0


def _backend_starts(trace: Any) -> Any:
    """Sorted start times of the torch calls recorded: the native recorder's ops, or the Python
    mode's backend intervals."""
    import numpy as np

    from rlscope import categories
    from rlscope.trace import schema as S

    proc = trace.processes[0]
    kind, ident, ts = (proc.events.column(c).to_numpy() for c in ("kind", "id", "ts_ns"))
    starts = [ts[(kind == S.CAT_BEGIN) & (ident == categories.BACKEND)]]
    native = getattr(proc, "backend", None)
    if native is not None and native.num_rows:
        starts.append(native.column("start_ns").to_numpy())
    return np.sort(np.concatenate(starts))


def _count_within(starts: Any, spans: list[tuple[int, int]]) -> list[int]:
    """How many of the sorted ``starts`` fall in each (start, end) span."""
    import numpy as np

    lo = np.searchsorted(starts, [a for a, _ in spans], side="left")
    hi = np.searchsorted(starts, [b for _, b in spans], side="right")
    return [int(n) for n in hi - lo]
