"""``rlscope calibrate``: measure what each kind of recorded event costs on this machine and stack.

Method (docs/overhead.md): every cost is a *differential* measurement, repeated in rounds until it
is stable. A round times a micro-workload several times unprofiled and profiled, interleaved, and
takes each side's *minimum*: another process stealing the core only ever adds time, so the
fastest of several short timings is the one it disturbed least (a mean, or one long timing,
absorbs every preemption). Costs paid on the job's own thread are timed in its CPU time, which
leaves out the time it waited for a core. The round's estimate is (profiled min - unprofiled min)
per event. The backend recorder's cost is measured differently, in one session with the
recorder switched between the units of an RL loop (``measure_backend``).

A shared machine's speed also changes by itself: on the 2-core development VM a plain Python loop
takes 115 or 200 ns per iteration depending on the host, switching within a second or holding
for tens of seconds, and every cost in ns moves with it. So a round's estimate is *judged* divided
by what the machine did meanwhile: per ns of a reference Python loop timed right after it
(``per_ref``), or, for the backend, relative to the code it was measured on (``rho``). Rounds
repeat until the last ``k`` judged estimates agree within 20% of their median (and that median
with the median of all rounds), up to a time budget. The costs of Python code are stored in ns at
the fastest reference seen during the calibration (``at_speed``), the backend's at the fastest its
loop ran: both the least disturbed speed, which every calibration reaches. A cost that is
negative, still unstable when the budget runs out, or outside the range plausible for its kind
(``PLAUSIBLE_NS``) is *refused*: one line says which and why, and the file records the refusal
instead of the number. A wrong cost is worse than none: the analyzer corrects with what passed and
says what was not calibrated.

The trace of each profiled timing, analyzed by rlscope's own analyzer, says how much of the cost
landed *inside* the begin/end pair (charged to the operation or category it opens); the rest
landed *outside* (charged to the enclosing one). Each micro-workload does a little Python work
between events, as real loops do.

Measured: scopes (with and without NVTX ranges), simulator/category boundaries, the trace writer's
CPU time per converted row (not a differential: see ``measure_writer``), and on a GPU the NVML
sampler and the GPU memory recorder per allocator event (rlscope/overhead/calibrate/memory.py); until
alternating windows measure them inside the user's run, also backend-op recording
and each CUDA API call under each GPU collector.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import rlscope
from rlscope import categories
from rlscope.annotate import simulator
from rlscope.overhead.correct import calibration as cal_mod
from rlscope.overhead.correct import reference
from rlscope.trace import schema as S

OUTER = rlscope.scope("rlscope.overhead.calibrate.rounds.outer")
INNER = rlscope.scope("rlscope.overhead.calibrate.rounds.inner")
WARM = rlscope.scope("rlscope.overhead.calibrate.rounds.warm-up")  # warm-ups run here: what is measured never sees them
_SIM = simulator()
NO_FLUSH = 1e6  # flush interval that never fires during a measured loop: the writer is measured apart

TOLERANCE = 0.20  # the last k round estimates must lie within this fraction of their median
# Plausible cost per event (ns), per kind; outside it a measurement is refused, not stored. Wide on
# purpose: they catch a broken measurement (a load spike, a collector that did not record), not a
# slow machine. scope/category: a few hundred ns of Python on a fast core, a few us on a slow VM.
# backend: a C++ RecordFunction callback (a fraction of a us) or a Python TorchFunctionMode
# dispatch (2-4 us). cuda_api: CUPTI's callback and activity record per call. writer: converting
# one event row to Arrow (0.1-0.5 us). nvml: the sampler's Python around a few NVML queries.
PLAUSIBLE_NS: dict[str, tuple[float, float]] = {
    "scope": (50.0, 20_000.0),
    "scope_nvtx": (50.0, 50_000.0),
    "category": (50.0, 20_000.0),
    "backend": (20.0, 100_000.0),
    "cuda_api.native": (50.0, 100_000.0),
    "cuda_api.kineto": (50.0, 100_000.0),
    "writer": (5.0, 20_000.0),
    "nvml": (1_000.0, 10_000_000.0),
    # torch's allocator trace entry and rlscope's tracker per recorded event (~0.1-0.3 us on H100)
    "memory": (10.0, 5_000.0),
}


@dataclasses.dataclass(frozen=True)
class Plan:
    """How hard to try: ``k`` round estimates must agree; each round's figure is the minimum of
    ``timings`` short timings per side; ``budget_s`` per cost; ``scale`` sizes the loops."""

    k: int = 5
    timings: int = 5
    budget_s: float = 10.0
    scale: float = 1.0


FULL = Plan()
QUICK = Plan(k=4, timings=4, budget_s=5.0, scale=0.5)


@dataclasses.dataclass
class Stable:
    """The round estimates of one cost; ``field`` is the one judged, over the last ``k`` rounds.

    ``cost_field`` is the figure stored, in ns, when the judged one is that figure divided by what
    the machine's speed did meanwhile (``per_ref``: by the reference loop timed in the same round;
    ``rho``: the cost relative to the unprofiled code it was measured on). On a shared VM the
    machine's speed switches between regimes far apart (a plain Python loop 115 or 200 ns per
    iteration, for a fraction of a second or tens of seconds), and every cost in ns switches with
    it: judged in ns, a sound measurement would be refused whenever a switch fell inside it."""

    field: str
    k: int
    rounds: list[dict[str, float]]
    elapsed_s: float = 0.0
    cost_field: str = ""  # "": the judged field is the cost itself
    # "median": every round counts, and the cost is their median, stable once at least k rounds
    # ran and the median's 90% interval is within TOLERANCE of it: for a cost whose rounds are
    # separate processes, each with its own draw of the cost (rlscope/overhead/calibrate/memory.py), where
    # k in a row agreeing within 20% is luck. Judged on the median, not on the rounds: the draws
    # are the cost's own spread from process to process (an H200's nine read 57-162 ns), which
    # more rounds do not narrow, and refusing it removed nothing where ~110 ns was due
    rule: str = "last_k"

    @property
    def counted(self) -> list[dict[str, float]]:
        """The rounds the cost is judged and stored from: the last k, or all ("median" rule)."""
        return self.rounds if self.rule == "median" else self.rounds[-self.k :]

    @property
    def last(self) -> list[float]:
        return [r[self.field] for r in self.counted]

    @property
    def value(self) -> float:
        """The judged figure: median of the last k round estimates."""
        return statistics.median(self.last)

    @property
    def estimates(self) -> list[float]:
        """Every round's estimate of the cost stored (ns)."""
        return [r[self.cost_field or self.field] for r in self.rounds]

    @property
    def counted_estimates(self) -> list[float]:
        """The counted rounds' estimates of the cost stored (ns)."""
        return [r[self.cost_field or self.field] for r in self.counted]

    @property
    def cost(self) -> float:
        """The cost stored (ns): median of its estimates over the counted rounds."""
        return statistics.median(self.counted_estimates)

    @property
    def spread(self) -> float:
        """(max - min) / |median| of the last k estimates (inf when the median is 0); with the
        "median" rule, the median absolute deviation over |median| of all of them."""
        last = self.last
        med = statistics.median(last)
        if med == 0:
            return float("inf")
        if self.rule == "median":
            return statistics.median(abs(v - med) for v in last) / abs(med)
        mid = abs(med)
        return (max(last) - min(last)) / mid

    @property
    def median_error(self) -> float:
        """Half-width of the median's 90% interval over |median| ("median" rule): 1.645 standard
        errors of a median, 1.2533 sigma / sqrt(n), with sigma from the MAD (1.4826 MAD); inf
        when the median is 0. Normal-theory, not order statistics: nine rounds give the median
        no distribution-free 90% interval narrower than the 3rd to the 7th round."""
        n = len(self.last)
        return 1.645 * 1.2533 * 1.4826 * self.spread / math.sqrt(n) if n else float("inf")

    @property
    def drift(self) -> float:
        """|median of the last k / median of all rounds - 1|: a run of k agreeing rounds at one end
        of a noisy sequence is luck, not stability (0 with the "median" rule: all rounds count)."""
        every = statistics.median(r[self.field] for r in self.rounds)
        return abs(self.value / every - 1) if every else float("inf")

    @property
    def stable(self) -> bool:
        if self.rule == "median":
            return len(self.rounds) >= self.k and self.median_error <= TOLERANCE
        return len(self.rounds) >= self.k and self.spread <= TOLERANCE and self.drift <= TOLERANCE

    def median(self, field: str) -> float:
        """Median of another per-round figure over the counted rounds."""
        return statistics.median(r[field] for r in self.counted)


# the budget ends the rounds only once the last-k window could slide past this many early rounds:
# a quick calibration's scope cost was refused at its k = 4 rounds, 354 ns then 279, 270, 273 (the
# first one cold), where one more round would have been stable (thirty-first session)
SLIDE_ROUNDS = 2


def _min_rounds_at_budget(k: int, rule: str) -> int:
    """Rounds before the budget may end a judgement: the last-k rule's window needs SLIDE_ROUNDS
    more to slide past early rounds; the median rule judges every round."""
    return k + (SLIDE_ROUNDS if rule == "last_k" else 0)


def until_stable(
    round_fn: Callable[[], dict[str, float]],
    field: str,
    k: int,
    budget_s: float,
    clock: Callable[[], float] = time.perf_counter,
    max_rounds: int = 500,
    cost_field: str = "",
    rule: str = "last_k",
) -> Stable:
    """Run rounds until the last ``k`` estimates of ``field`` agree within TOLERANCE, or until the
    budget is spent (at least ``k + SLIDE_ROUNDS`` rounds then): why a number is trusted is a rule,
    not luck.
    ``cost_field``: the per-round figure stored as the cost, when ``field`` is not it (Stable)."""
    if k < 2:
        raise ValueError(f"k must be >= 2 to judge stability, got {k}")
    t0 = clock()
    st = Stable(field, k, [], cost_field=cost_field, rule=rule)
    at_budget = _min_rounds_at_budget(k, rule)
    while len(st.rounds) < max_rounds:
        st.rounds.append(round_fn())
        st.elapsed_s = clock() - t0
        if st.stable or (len(st.rounds) >= at_budget and st.elapsed_s >= budget_s):
            break
    return st


def _ns(v: float) -> str:
    return f"{v:,.0f} ns" if abs(v) >= 10 else f"{v:.1f} ns"


# what a judged figure that is not the cost itself is, for the refusal line
JUDGED = {"per_ref": "ns per ns of the reference loop", "rho": "relative to the unprofiled code"}


def refusal(entry: str, st: Stable) -> str | None:
    """None if the cost can be stored, else one line saying which cost and why, with the numbers."""
    judged = st.cost_field and st.cost_field != st.field
    fmt = (lambda v: f"{v:.3g}") if judged else _ns
    costs = st.counted_estimates
    seen = f"last {len(costs)} of {len(st.rounds)} rounds: {', '.join(_ns(v) for v in costs)}"
    if judged:
        seen += f"; judged {JUDGED.get(st.field, st.field)}: {', '.join(fmt(v) for v in st.last)}"
    if st.cost < 0:
        return f"{entry}: refused: negative cost {_ns(st.cost)} ({seen})"
    if not st.stable and st.rule == "median":
        return (
            f"{entry}: refused: unstable, the median {fmt(st.value)} is known to +-{st.median_error:.0%}"
            f" (90%) > {TOLERANCE:.0%} after {st.elapsed_s:.1f} s, the rounds' median absolute"
            f" deviation {st.spread:.0%} of it ({seen})"
        )
    if not st.stable:
        if st.spread <= TOLERANCE:  # the last k agree, but not with the rounds before them
            every = statistics.median(r[st.field] for r in st.rounds)
            return (
                f"{entry}: refused: unstable, the last rounds' median {fmt(st.value)} is {st.drift:.0%} off"
                f" the median of all {len(st.rounds)} rounds {fmt(every)} after {st.elapsed_s:.1f} s ({seen})"
            )
        return (
            f"{entry}: refused: unstable, spread {st.spread:.0%} of the median {fmt(st.value)}"
            f" > {TOLERANCE:.0%} after {st.elapsed_s:.1f} s ({seen})"
        )
    lo, hi = PLAUSIBLE_NS.get(entry, (0.0, float("inf")))
    if not lo <= st.cost <= hi:
        return (
            f"{entry}: refused: implausible {_ns(st.cost)}, outside {_ns(lo)}..{_ns(hi)}"
            f" (spread {st.spread:.0%}, {seen})"
        )
    return None


# -- micro-workloads --------------------------------------------------------------------------


_work = reference.work  # the reference loop's step (rlscope/overhead/correct/reference.py), between events here too


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


def _reference() -> float:
    """CPU ns per iteration of a plain Python loop (the least of 3 short timings): how fast this
    machine runs Python at the moment; stored beside each cost (``ref_ns``), since on a shared
    machine every cost moves with it."""
    return reference.reference_ns(2000, 3)  # the loop a session times too (rlscope/overhead/correct/reference.py)


REF_TRIES = 3  # a round whose reference moved is run again, at most this many times in all


def _with_reference(one: Callable[[], dict[str, float]], cost: str = "") -> Callable[[], dict[str, float]]:
    """Each round with the reference loop timed right before and right after it (``ref``: their
    mean); ``cost``: that figure of the round divided by ``ref`` too (``per_ref``), the figure judged
    for stability. A round whose two reference timings differ by more than TOLERANCE ran while the
    machine changed speed, so its ratio means nothing: it is run again (up to REF_TRIES in all).
    Timed after the round only, one such round on an H100 judged a native scope pair at 5.96 ns per
    reference ns between rounds at 2.6-3.2, and the scope cost was refused as unstable."""

    def round_with_reference() -> dict[str, float]:
        for _ in range(REF_TRIES):
            before = _reference()
            r = one()
            after = _reference()
            if abs(after - before) <= TOLERANCE * min(after, before):
                break
        ref = (before + after) / 2
        judged = {"per_ref": r[cost] / ref} if cost else {}
        return {**r, "ref": ref, "ref_moved": after / before - 1, **judged}

    return round_with_reference


def _until_stable_per_ref(one: Callable[[], dict[str, float]], cost: str, plan: Plan) -> Stable:
    """Rounds of ``one`` until ``cost`` per ns of the reference loop is stable; ``cost`` is stored.
    For costs of Python code (scopes, the writer), which moves with the machine as the loop does."""
    return until_stable(_with_reference(one, cost), "per_ref", plan.k, plan.budget_s, cost_field=cost)


# a round whose reference loop ran this much slower than the fastest seen ran in the host's slow
# regime (the VM's two speeds are 1.4-1.7x apart; within 1.3x a C boundary's ns do not move)
SLOW_REGIME = cal_mod.SLOW_REGIME
# while fewer than k rounds ran at the fast speed, wait this many budgets for it: the slow regime
# holds for seconds to tens of seconds, and in it a lean scope pair read 220-404 ns a round (one
# calibration in CI's probe, 28 rounds in 5 s, refused)
SLOW_WAIT = 3.0


def _c_methods() -> bool:
    """Whether the scope and category boundaries run the C methods (either C path), whose cost is
    judged in ns and whose flushes time themselves."""
    from rlscope.collectors import scope_native

    return scope_native.calibration_key().startswith("native")


def _until_stable_boundary(
    one: Callable[[], dict[str, float]],
    cost: str,
    plan: Plan,
    clock: Callable[[], float] = time.perf_counter,
    known_fastest: float | None = None,
) -> Stable:
    """Rounds of a scope or category boundary cost until stable.

    On the C methods it is judged in ns, over the rounds run at the machine's fast speed. Nearly all
    of a C boundary's cost is its clock reads and stores, which follow the interpreter's speed only
    partly: on the 2-core VM the lean path's scope pair read 143-157 ns in rounds whose reference
    loop ran at 107-140 ns, where the figure per reference ns moved 1.04-1.43 (five calibrations
    stored 111-153 ns), and 186-231 ns in the host's slow regime (reference loop 162-185 ns), where
    in ns it moved too. So a round whose reference ran over SLOW_REGIME times the fastest seen
    (this calibration's, or the machine's speed record) does not count; the fast ones are judged in
    ns and stored as measured. While fewer than k rounds were fast, the budget is SLOW_WAIT times
    longer; a calibration that still saw too few falls back to the figure per reference ns, stored
    at the fastest speed, as the Python methods' costs are, judged on the median of all its rounds
    (the "median" rule). Why the median: in the slow regime a C boundary's figure per reference ns
    moves round to round, and one calibration whose host stayed slow through its scope pair's 57
    rounds (15 s) and the wait after them was refused twice under "k in a row within 20%" (its last
    four 1.24-1.69); the median of those rounds, 1.50, was known to +-2%, where the same batch's
    other four stored 1.35-1.76 reference iterations (BENCHMARKS.md §9, thirty-second session)."""
    if not _c_methods():
        return _until_stable_per_ref(one, cost, plan)
    fast, rounds, elapsed = _until_stable_at_speed(
        _with_reference(one, cost), cost, plan.k, plan.budget_s, known_fastest, clock, cost_field=cost
    )
    if fast is not None:
        return fast
    return Stable("per_ref", plan.k, rounds, elapsed_s=elapsed, cost_field=cost, rule="median")


def _until_stable_at_speed(
    round_fn: Callable[[], dict[str, float]],
    field: str,
    k: int,
    budget_s: float,
    known_fastest: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    cost_field: str = "",
    rule: str = "last_k",
) -> tuple[Stable | None, list[dict[str, float]], float]:
    """Rounds (each with its reference loop, ``ref``) until the ones run at the machine's fast
    speed are stable in ``field``: a round whose reference ran over SLOW_REGIME times the fastest
    seen (this calibration's rounds, ``known_fastest``, the machine's speed record) does not count.
    While fewer than k rounds were fast the budget is SLOW_WAIT times longer. Returns the fast
    rounds' Stable (None: fewer than k were fast), every round, and the seconds spent."""
    known = [x for x in (cal_mod.read_fastest_ref(), known_fastest) if x]
    t0 = clock()
    rounds: list[dict[str, float]] = []
    fast = Stable(field, k, [], cost_field=cost_field, rule=rule)
    while len(rounds) < 500:
        rounds.append(round_fn())
        fastest = min([r["ref"] for r in rounds] + known)
        counted = [r for r in rounds if r["ref"] <= SLOW_REGIME * fastest]
        fast = Stable(field, k, counted, cost_field=cost_field, rule=rule)
        fast.elapsed_s = clock() - t0
        spent = fast.elapsed_s >= budget_s * (1 if len(fast.rounds) >= k else SLOW_WAIT)
        # too few fast rounds: the SLOW_WAIT budget alone ends it
        slid = len(fast.rounds) >= _min_rounds_at_budget(k, rule) or len(fast.rounds) < k
        if fast.stable or (len(rounds) >= k and spent and slid):
            break
    return (fast if len(fast.rounds) >= k else None), rounds, fast.elapsed_s


def figure(cost: dict[str, float]) -> float:
    """The figure a cost entry is known by: its total per event, or its background cost."""
    for field in ("total", "per_event", "per_sample"):
        if field in cost:
            return float(cost[field])
    raise KeyError(f"no cost figure in {cost}")


def at_speed(cost: dict[str, float], st: Stable, ref_ns: float) -> dict[str, float]:
    """A cost judged per ns of the reference loop (``per_ref``), in ns at the speed where that loop
    takes ``ref_ns`` per iteration: every ns figure scaled alike, and the figures it came from."""
    scale = st.value * ref_ns / st.cost if st.cost else 1.0
    return {
        **{f: v * scale for f, v in cost.items()},
        "per_ref": st.value,
        "ref_ns": ref_ns,
        "measured_ns": st.cost,
    }


def backend_at_speed(cost: dict[str, float], st: Stable, ref_ns: float) -> dict[str, float]:
    """The backend's cost in ns at the speed where the reference loop takes ``ref_ns``, where even
    its fastest counted round ran slower: its ns figures scaled by ``ref_ns`` over that round's
    reference, with the figures they came from.

    Why: the cost is stored at the fastest each unit ran over the counted rounds, which is the
    machine's speed only if one round ran at it. A round counts as fast up to SLOW_REGIME (1.3x)
    the fastest reference, and on the VM beside a busy core one calibration's backend rounds all ran
    at 188 ns against 148-150 for its own scope and category rounds: it stored 962 ns against 693-718
    for the other four (CI's probe of 2111963). The backend's cost per reference ns held within 3%
    over those four (4.53-4.65) while their ns moved with their reference; scaled by the references
    in the probe's table, the five would have read about 670-760 ns."""
    refs = [r["ref"] for r in st.counted if "ref" in r]
    if not refs or not min(refs) > ref_ns:
        return cost
    scaled = cal_mod.scaled_ns(cost, ref_ns / min(refs))
    return {**scaled, "ref_ns": ref_ns, "measured_ref_ns": min(refs), "measured_ns": cost["total"]}


def _ref(st: Stable) -> float:
    """The reference loop's ns per iteration over the judged rounds (NaN where none was timed)."""
    refs = [r["ref"] for r in st.rounds[-st.k :] if "ref" in r]
    return statistics.median(refs) if refs else float("nan")


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


def _with_measured(entry: dict[str, float], st: Stable) -> dict[str, float]:
    """The cost entry with the boundaries' own measurements, when every counted round had them."""
    if all("measured_inside" in r for r in st.rounds[-st.k :]):
        entry["measured_inside"] = st.median("measured_inside")
        entry["measured_outside"] = st.median("measured_outside")
    return entry


def _split(total_ns: float, inside_ns: float) -> dict[str, float]:
    inside = max(0.0, min(inside_ns, total_ns))
    return {"inside": inside, "outside": max(total_ns - inside, 0.0), "total": total_ns}


# -- measurements: each returns the stability record and the cost entry to store -------------


def measure_scope(
    plan: Plan, traces: _Traces, options: dict[str, Any], known_fastest: float | None = None
) -> tuple[Stable, dict[str, float]]:
    """Per scope (enter + exit): total cost, and the part the analyzer puts inside the scope (the
    inner scope's analyzed time: its true time is empty). ``known_fastest``: the reference loop's
    fastest ns seen so far (_until_stable_boundary)."""
    n = max(int(20_000 * plan.scale), 1000)

    def inside(trace: Any, a: int, b: int) -> tuple[float, dict[str, float] | None]:
        ns = _summary(trace)["operations"][INNER.name]["exclusive_s"] * 1e9 / n
        return ns, _measured(trace, a, b, S.OP_BEGIN, S.OP_END, INNER.name)

    def one() -> dict[str, float]:
        u, p, seen = _interleaved(traces, SCOPES, n, plan.timings, options, inside)
        return {"total": (p - u) / n, "inside": min(x[0] for x in seen), **_measured_median(seen)}

    one()  # warm-up: imports, caches, the first session's start
    st = _until_stable_boundary(one, "total", plan, known_fastest=known_fastest)
    return st, _with_measured(_split(st.cost, st.median("inside")), st)


def measure_category(
    plan: Plan, traces: _Traces, known_fastest: float | None = None
) -> tuple[Stable, dict[str, float]]:
    """Per simulator/category boundary pair (``rlscope.simulator``, ``wrap_env``)."""
    n = max(int(20_000 * plan.scale), 1000)

    def inside(trace: Any, a: int, b: int) -> tuple[float, dict[str, float] | None]:
        cats = _summary(trace)["operations"][OUTER.name]["categories"]
        measured = _measured(trace, a, b, S.CAT_BEGIN, S.CAT_END, category=categories.SIMULATOR)
        return cats.get("simulator", 0.0) * 1e9 / n, measured

    def one() -> dict[str, float]:
        u, p, seen = _interleaved(traces, CATEGORIES, n, plan.timings, {}, inside)
        return {"total": (p - u) / n, "inside": min(x[0] for x in seen), **_measured_median(seen)}

    one()
    st = _until_stable_boundary(one, "total", plan, known_fastest=known_fastest)
    return st, _with_measured(_split(st.cost, st.median("inside")), st)


def measure_writer(plan: Plan, traces: _Traces) -> tuple[Stable, dict[str, float]]:
    """The trace writer's cost per event row: CPU time of a flush of real event rows, per row.

    Not a wall-clock differential of the job: how much of a flush lands on the job depends on the
    GIL hand-off and the scheduler (200-2,300 ns per row on a loaded 2-core VM, 200-400 ns idle),
    so it never settles. The flush's own work per row is fixed, and while it drains and converts
    rows it holds the GIL, so the job waits that long. The Arrow IPC write at its end (about a
    fifth of it here) may run without the GIL: where a core is free for it, this overstates the
    stall by up to that much.
    """
    rows = max(int(40_000 * plan.scale), 5000)

    def one() -> dict[str, float]:
        per_row = []
        with traces.session() as s:
            for _ in range(plan.timings):
                s.writer.flush()
                _scope_loop(rows // 2)  # two rows per iteration wait in the writer's buffer
                queued = len(s.events)
                c0 = time.thread_time_ns()
                s.writer.flush()
                per_row.append((time.thread_time_ns() - c0) / max(queued, 1))
        shutil.rmtree(s.trace_dir, ignore_errors=True)
        return {"per_event": min(per_row)}

    one()
    st = _until_stable_per_ref(one, "per_event", plan)
    return st, {"per_event": st.cost}


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


def measure_backend(
    torch: Any, plan: Plan, traces: _Traces, known_fastest: float | None = None
) -> tuple[Stable, dict[str, float]]:
    """Per recorded torch call: what the backend recorder adds to an RL loop, in one session.

    The recorder is switched with ``set_enabled`` between the units of the loop (``_rl_units``),
    as the alternating windows switch it, so the two sides differ by the recording alone, at the
    same moment. A round times each unit in ``24 * plan.timings`` quads (on, off, off, on; thread
    CPU time): per unit the relative cost (:func:`relative_cost`) and the unit's fastest time
    unrecorded; the judged figure is the loop's relative cost (``rho``, units weighted by their
    median time), which does not move with the machine's speed. The cost stored is the extra time
    per recorded call with each unit's relative cost (median of the judged rounds) at its fastest
    time over those rounds (``total`` per round is the same at that round's fastest, for the record).

    The inside part is the backend time the analyzer sees beyond what the calls take unprofiled;
    the loop cannot isolate that, so it comes from single ``torch.tanh`` calls timed both ways
    (wall time: the analyzer's view), the median of ``plan.k`` measurements once the total is stable.
    Torch runs on one intra-op thread meanwhile: with a core busy elsewhere, every parallel region
    waits for a descheduled worker (a tiny Linear took 4 ms instead of 20 us), which is load, not
    rlscope's cost.
    """
    units = _rl_units(torch)
    quads = 24 * plan.timings
    x = torch.ones(4, 64)
    n_tanh = max(int(2000 * plan.scale), 200)

    def tanh_calls(k: int, outer: Any = OUTER) -> None:
        with outer:
            for _ in range(k):
                torch.tanh(x)

    tanh = Workload(tanh_calls, warm=lambda: tanh_calls(100, WARM))

    def seen_backend(trace: Any, a: int, b: int) -> float:
        return _summary(trace)["operations"][OUTER.name]["categories"].get("backend", 0.0) * 1e9

    def one(quads: int = quads) -> dict[str, float]:
        timed: dict[str, list[list[float]]] = {u: [] for u in units}
        recorded: dict[str, list[tuple[int, int]]] = {u: [] for u in units}  # wall spans of "on" units
        s = traces.session(backend=True)
        with s, OUTER:
            recorder = next(c for c in s._collectors if hasattr(c, "set_enabled"))
            for name, unit in units.items():
                for on in (True, False, True, False):  # warm-up: caches, the first update's Adam state
                    recorder.set_enabled(on)
                    unit()
                for _ in range(quads):
                    quad = []
                    for on in ABBA:
                        recorder.set_enabled(on)
                        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                        unit()
                        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
                        quad.append(float(c1 - c0))
                        if on:
                            recorded[name].append((w0, w1))
                    timed[name].append(quad)
        try:
            starts = _backend_starts(rlscope.load_trace(str(s.trace_dir)))
        finally:
            shutil.rmtree(s.trace_dir, ignore_errors=True)
        out: dict[str, float] = {"calls": 0.0}
        extra = weighted = typical = 0.0
        for name in units:
            rho = relative_cost(timed[name])
            off = [(q[1] + q[2]) / 2 for q in timed[name]]
            out[f"rho.{name}"], out[f"fastest.{name}"] = rho, min(off)
            extra += rho * min(off)
            weighted += rho * statistics.median(off)
            typical += statistics.median(off)
            out["calls"] += statistics.median(_count_within(starts, recorded[name]))
        calls = out["calls"]
        return {**out, "total": extra / calls if calls else float("nan"), "rho": weighted / typical}

    def inside() -> float:
        u, _, seen = _interleaved(
            traces, tanh, n_tanh, plan.timings, {"backend": True}, seen_backend, cpu=False
        )
        return (min(seen) - u) / n_tanh

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one(8)  # warm-up: the recorder learns which ops to mute (their first 8 calls), caches fill
        # its rounds take 1-1.5 s, so the usual budget would allow k rounds and no more
        # judged over the rounds run at the machine's fast speed (``known_fastest``: the reference
        # loop's fastest so far), as the boundaries are. Why: rho is steady when the host slows
        # down, the stored ns are not: beside a busy core, two calibrations of five whose backend
        # rounds all ran in a slow stretch (reference loop 243-259 ns against 142-159) stored 884
        # and 1,138 ns against 641-749 (BENCHMARKS.md §9, twenty-sixth session)
        # the median rule (every fast round counts; stable once the median is known to 20%): at the
        # fast speed its rho moves 15-25% from one 1-1.5 s round to the next, and k rounds in a row
        # within 20% was luck: 2 of 5 --quick calibrations beside a busy core were refused so, with
        # 4 rounds' ns within 10% (BENCHMARKS.md §9, twenty-seventh session). More budget lets an
        # unsettled median narrow; a settled one stops at k rounds
        fast, rounds, elapsed = _until_stable_at_speed(
            _with_reference(one),
            "rho",
            plan.k,
            4 * plan.budget_s,
            known_fastest,
            cost_field="total",
            rule="median",
        )
        st = fast or Stable("rho", plan.k, rounds, elapsed_s=elapsed, cost_field="total", rule="median")
        inside_ns = statistics.median(inside() for _ in range(plan.k))
    finally:
        torch.set_num_threads(threads)
    # in ns at the fastest the machine ran each unit over the judged rounds, as the Python costs
    extra = sum(st.median(f"rho.{u}") * min(r[f"fastest.{u}"] for r in st.counted) for u in units)
    calls = st.median("calls")  # per act + learn
    out = _split(extra / calls if calls else float("nan"), inside_ns)
    out["calls_per_loop"] = calls
    return st, out


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


def measure_cuda_api(
    torch: Any, plan: Plan, traces: _Traces, collector: str
) -> tuple[Stable, dict[str, float]]:
    """Per CUDA API call under a GPU collector: one kernel launch per iteration, traced vs not.

    Wall time: CUPTI's cost is partly paid on its own threads and in the waits for them. CUPTI's
    cost cannot be split by the analyzer (it has no untraced API time to compare with), so it is
    put inside the call, up to 80% of the calls' mean traced duration; the rest outside.
    """
    from rlscope.analysis import gpu as gpu_an

    x = torch.zeros(16, device="cuda")
    n = max(int(2000 * plan.scale), 200)

    def launches(k: int) -> None:
        state = [1]
        with OUTER:
            for _ in range(k):
                _work(state)
                x.add_(1.0)
            torch.cuda.synchronize()

    def api_calls(trace: Any, a: int, b: int) -> tuple[int, float]:
        proc = trace.processes[0]
        if proc.gpu is None or proc.metadata.get("gpu.collector") != _collector_name(collector):
            raise RuntimeError(f"GPU collector {collector} did not record")
        api, _ = gpu_an.split(proc.gpu, a, b)
        keep = api.end > api.start  # calls outside the timed window are clipped to nothing
        t, s, e = gpu_an.union_per_thread(api.thread[keep], api.start[keep], api.end[keep])
        return len(t), float((e - s).sum())

    traced = {"gpu": collector, "nvml_hz": 0, "nvtx": False}
    m = max(plan.timings // 2, 2)  # a GPU collector's start and stop cost far more than a timing

    def one() -> dict[str, float]:
        u, p, seen = _interleaved(traces, launches, n, m, traced, api_calls, cpu=False, baseline={})
        calls = statistics.median(c for c, _ in seen)
        mean_dur = statistics.median(d / c for c, d in seen if c) if calls else 0.0
        return {"total": (p - u) / calls if calls else float("nan"), "mean_dur": mean_dur, "calls": calls}

    one()
    st = until_stable(_with_reference(one), "total", plan.k, plan.budget_s)
    mean_dur = st.median("mean_dur")
    out = _split(st.cost, min(st.cost, 0.8 * mean_dur))
    out["traced_call_mean_ns"] = mean_dur
    out["calls_per_iteration"] = st.median("calls") / n
    return st, out


def _collector_name(mode: str) -> str:
    return {"auto": "native", "cupti": "native"}.get(mode, mode)


def measure_nvml(plan: Plan, traces: _Traces) -> tuple[Stable, dict[str, float]]:
    """The NVML sampler's stall per sample: a Python loop with the sampler at 500 Hz vs without
    (wall time: the stall is the sampler thread holding the GIL)."""
    per_iter = _timed(_spin, 20_000) / 20_000
    n = max(int(0.1e9 / per_iter), 20_000)  # about 0.1 s: 50 samples

    def samples(trace: Any, a: int, b: int) -> int:
        nv = trace.processes[0].nvml
        if nv is None:
            return 0
        ts = nv.column("ts_ns").to_numpy()
        return int(((ts >= a) & (ts <= b)).sum())

    sampled = {"gpu": "auto", "nvml_hz": 500.0}
    m = max(plan.timings // 2, 2)

    def one() -> dict[str, float]:
        u, p, seen = _interleaved(traces, _spin, n, m, sampled, samples, cpu=False, baseline={})
        k = statistics.median(seen)
        if not k:
            raise RuntimeError("NVML recorded no samples")
        return {"per_sample": (p - u) / k}

    one()
    st = until_stable(_with_reference(one), "per_sample", plan.k, plan.budget_s)
    return st, {"per_sample": st.cost}


def measure_memory(torch: Any, plan: Plan) -> tuple[Stable, dict[str, float]]:
    """The GPU memory recorder's cost per recorded allocator event, one child process a round
    (rlscope/overhead/calibrate/memory.py says why), judged in ns; the tracker is built here first, so no
    child pays for a compile."""
    from rlscope.collectors import gpu_memory
    from rlscope.overhead.calibrate import memory as calibrate_memory

    gpu_memory.load_native(torch)
    # 120 pairs a phase: at 40, four children on an H200 read 86-113 ns (spread 29%, refused)
    n, m = max(int(1000 * plan.scale), 200), 120

    def one() -> dict[str, float]:
        return calibrate_memory.run_child(n, m)

    # a round is a process start (~4.5 s): the budget counts rounds, not micro-timings. Judged by
    # the median of at least k + 2 children: each child draws its own cost (an H100's six children
    # read 89-151 ns, an H200's four 86-113), so k in a row within 20% came too rarely. Up to ~13
    # children in --quick: a median absolute deviation of 21% (an H200's, 2026-11-26) needs 11
    st = until_stable(one, "per_event", plan.k + 2, plan.budget_s * 12, rule="median")
    out = {f: st.median(f) for f in ("torch_part", "events_per_iteration", "unrecorded_ns_per_iteration")}
    return st, {"per_event": st.cost, **out}


def _finite(v: float, digits: int) -> float | None:
    """A number for the JSON file: NaN and infinity (a round that measured nothing) become null."""
    return round(v, digits) if math.isfinite(v) else None


def _stderr(msg: str) -> None:
    print(f"rlscope calibrate: {msg}", file=sys.stderr, flush=True)


# a boundary cost refused (negative or unstable) is measured once more after the machine is back
# within SLOW_REGIME of its fastest speed, waited for at most this long. Why: CI's probe (twenty-fifth
# session) had one calibration of five measure the scope and category pairs at -53 ns while its
# reference loop ran 2.5x slower than the other four; a refusal there costs the user the correction,
# and a few seconds later the machine was fast again
SPEED_WAIT_S = 30.0


def _wait_for_speed(
    fastest: float,
    wait_s: float,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Time the reference loop until it runs within SLOW_REGIME of ``fastest`` or ``wait_s`` has
    passed; returns the last reading (ns per iteration)."""
    t0 = clock()
    while True:
        ref = _reference()
        if ref <= SLOW_REGIME * fastest or clock() - t0 >= wait_s:
            return ref
        sleep(0.25)


def _fastest_known(refs: Iterable[float]) -> float | None:
    """The reference loop's fastest ns per iteration seen: ``refs`` and this machine's speed record
    (None: neither has one)."""
    seen = [x for x in (*refs, cal_mod.read_fastest_ref()) if x]
    return min(seen) if seen else None


def _ran_slow(st: Stable, fastest: float | None) -> bool:
    """Whether a cost's judged rounds ran in the slow regime: their reference loop over SLOW_REGIME
    times ``fastest``."""
    ref = _ref(st)
    return fastest is not None and math.isfinite(ref) and ref > SLOW_REGIME * fastest


def _above_its_fastest(st: Stable) -> bool:
    """Whether a cost's stored figure sits more than TOLERANCE above its own fastest round: a
    plateau the reference loop did not show. Why: on the C methods one calibration of five (a fast
    host, reference loop 142-162 ns throughout) judged the category pair stable at 317-364 ns after
    a first round of 228 ns, where the other four stored 241-263 ns and its own scope pair 247
    (BENCHMARKS.md §9, thirty-second session). The fastest timing is the least disturbed one, as for
    each round's own timings (module docstring)."""
    fastest = _fastest_round(st)
    return fastest is not None and st.cost > (1 + TOLERANCE) * fastest


def _fastest_round(st: Stable) -> float | None:
    """The lowest positive round estimate of a cost (None: none positive)."""
    return min((e for e in st.estimates if e > 0), default=None)


def _measure_backend_again(
    measured: tuple[Stable, dict[str, float]],
    measure: Callable[[float], tuple[Stable, dict[str, float]]],
    refs: list[float],
    log: Callable[[str], None],
    wait_s: float = SPEED_WAIT_S,
    wait: Callable[[float, float], float] = lambda fastest, s: _wait_for_speed(fastest, s),
) -> tuple[Stable, dict[str, float]]:
    """The backend's cost, measured once more when none of its rounds ran at the machine's fast
    speed (no fast round in SLOW_WAIT budgets), after waiting up to ``wait_s`` for that speed.
    Why: its ns are the slow speed's, ~1.4-1.5x the fast speed's, and the costs of five
    calibrations beside a busy core then disagreed (CI's probe of 08a11aa: 1,035 ns with the
    reference loop at 252 ns, 684-728 ns at 149-160 ns; BENCHMARKS.md §9, twenty-seventh session),
    where the scope and category costs are measured again so already. Slow again: the faster of the
    two measurements is stored as measured, and the log says so."""
    st = measured[0]
    fastest = _fastest_known([*refs, *(r["ref"] for r in st.rounds if "ref" in r)])
    if not _ran_slow(st, fastest):
        return measured
    assert fastest is not None  # _ran_slow needs it
    now = wait(fastest, wait_s)
    log(
        f"backend: no round ran at the machine's fast speed (reference loop {_ref(st):.0f} ns, the"
        f" fastest {fastest:.0f} ns): measured again, the reference loop now at {now:.0f} ns"
    )
    again = measure(fastest)
    if not _ran_slow(again[0], fastest):
        return again
    best = min((measured, again), key=lambda m: _ref(m[0]))
    log(
        f"backend: slow again (reference loop {_ref(again[0]):.0f} ns): stored as measured, at the"
        " slower speed"
    )
    return best


def _measure_boundaries_again(
    boundaries: dict[str, tuple[Stable, dict[str, float]]],
    plan: Plan,
    traces: _Traces,
    refs: list[float],
    log: Callable[[str], None],
    wait_s: float = SPEED_WAIT_S,
) -> None:
    """A C boundary cost judged while the machine ran slow throughout (its rounds' reference loop
    over SLOW_REGIME times the fastest the calibration saw by its end) is measured once more, now
    that the fast speed is known. Why: a calibration's first measurement, the scope pair, has no
    fast speed to compare with on a machine without a speed record; one taken in the slow regime
    stored 201 ns against 142-157 for the same machine's four others.

    A boundary cost that would still be refused (negative, unstable) is measured once more after
    waiting up to ``wait_s`` for the machine's fast speed (SPEED_WAIT_S); if it is refused again,
    the refusal stands (run_calibration says why)."""
    fastest = _fastest_known(refs)
    again = {
        "scope": lambda: measure_scope(plan, traces, {}, known_fastest=fastest),
        "category": lambda: measure_category(plan, traces, known_fastest=fastest),
    }
    for entry, (st, _) in list(boundaries.items()):
        if _c_methods() and _ran_slow(st, fastest):
            log(
                f"{entry}: measured at a {_ref(st):.0f} ns reference loop, the fastest was {fastest:.0f} ns:"
                " again"
            )
            boundaries[entry] = again[entry]()
        elif _c_methods() and refusal(entry, st) is None and _above_its_fastest(st):
            log(
                f"{entry}: judged at {st.cost:.0f} ns, over {1 + TOLERANCE:.1f}x its fastest round"
                f" ({_fastest_round(st):.0f} ns): measured again, the lower kept"
            )
            other = again[entry]()
            if refusal(entry, other[0]) is None and other[0].cost < st.cost:
                boundaries[entry] = other
        why = refusal(entry, boundaries[entry][0])
        if why is None:
            continue
        if fastest is not None:
            now = _wait_for_speed(fastest, wait_s)
            log(
                f"{why}; measured again, the reference loop now at {now:.0f} ns (the fastest"
                f" {fastest:.0f} ns, waited up to {wait_s:.0f} s for it)"
            )
        else:
            log(f"{why}; measured again")
        boundaries[entry] = again[entry]()


def run_calibration(
    reps: int | None = None,
    scale: float | None = None,
    gpu: bool = True,
    log: Callable[[str], None] = print,
    *,
    quick: bool = False,
    budget_s: float | None = None,
    warn: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """Measure every event cost until stable; returns the calibration dict (``rlscope.overhead.correct.calibration``).

    ``reps``: round estimates that must agree (k, default 5; 4 with ``quick``). ``scale``: loop
    sizes. ``budget_s``: seconds per cost before an unstable one is refused. A refused cost is
    left out of ``costs_ns``, listed in ``refused`` and reported through ``warn`` (one line each).
    """
    base = QUICK if quick else FULL
    plan = dataclasses.replace(
        base,
        k=base.k if reps is None else reps,
        scale=base.scale if scale is None else scale,
        budget_s=base.budget_s if budget_s is None else budget_s,
    )
    t0 = time.perf_counter()
    costs: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    refused: list[dict[str, Any]] = []
    rounds_ns: dict[str, list[float | None]] = {}  # every round's estimate, for whoever doubts a cost
    kept: dict[str, tuple[Stable, dict[str, float]]] = {}
    refs: list[float] = []  # the reference loop of every round: the machine's speed over the calibration

    def keep(entry: str, measured: tuple[Stable, dict[str, float]]) -> None:
        st, cost = measured
        refs.extend(r["ref"] for r in st.rounds if "ref" in r)
        rounds_ns[entry] = [_finite(v, 1) for v in st.estimates]
        why = refusal(entry, st)
        if why is None:
            kept[entry] = (st, cost)
            return
        warn(why)
        refused.append(
            {
                "entry": entry,
                "reason": why,
                "estimates_ns": [_finite(v, 1) for v in st.estimates[-st.k :]],
                "spread": _finite(st.spread, 4),
                "ref_ns": _finite(_ref(st), 1),
            }
        )

    with tempfile.TemporaryDirectory(prefix="rlscope-calibrate-") as tmp:
        traces = _Traces(Path(tmp))
        log("scopes ...")
        boundaries = {"scope": measure_scope(plan, traces, {})}
        log("simulator/category boundaries ...")
        boundaries["category"] = measure_category(plan, traces)
        for st, _ in boundaries.values():
            refs.extend(r["ref"] for r in st.rounds if "ref" in r)
        if _c_methods():
            # each flush of the native event buffer times itself in the run (its end row's cost);
            # a per-row cost measured here varies by +-25% from one process to the next
            skipped["writer"] = "measured in the run: each flush times itself (native event buffer)"
        else:
            log("trace writer ...")
            keep("writer", measure_writer(plan, traces))
        torch = _import_torch()
        if torch is None:
            skipped["backend"] = "torch is not installed"
        else:
            log("backend-op recording ...")
            # the speed record is read again inside (_until_stable_at_speed): only this run's refs here
            measured = measure_backend(torch, plan, traces, min(refs, default=None))
            measured = _measure_backend_again(
                measured, lambda fastest: measure_backend(torch, plan, traces, fastest), refs, log
            )
            keep("backend", measured)
        _measure_boundaries_again(boundaries, plan, traces, refs, log)
        for entry, measured in boundaries.items():
            keep(entry, measured)
        cuda = torch is not None and gpu and torch.cuda.is_available()
        if not cuda:
            why = "no CUDA GPU" if gpu else "--no-gpu"
            for kind in ("scope_nvtx", "cuda_api.native", "cuda_api.kineto", "nvml", "memory"):
                skipped[kind] = why
        else:
            log("GPU memory recorder ...")
            try:
                measured = measure_memory(torch, plan)
            except Exception as e:  # no tracker here (no CUDA headers, no compiler): not calibrated
                skipped["memory"] = f"{type(e).__name__}: {e}"
            else:
                keep("memory", measured)
            log("scopes with NVTX ranges ...")
            keep("scope_nvtx", measure_scope(plan, traces, {"gpu": "auto", "nvml_hz": 0, "nvtx": True}))
            for mode in ("cupti", "kineto"):
                name = f"cuda_api.{_collector_name(mode)}"
                log(f"CUDA API calls under the {_collector_name(mode)} collector ...")
                try:
                    measured = measure_cuda_api(torch, plan, traces, mode)
                except Exception as e:  # a collector that cannot run here is not calibrated
                    skipped[name] = f"{type(e).__name__}: {e}"
                else:
                    keep(name, measured)
            log("NVML sampler ...")
            try:
                measured = measure_nvml(plan, traces)
            except Exception as e:
                skipped["nvml"] = f"{type(e).__name__}: {e}"
            else:
                keep("nvml", measured)
    # costs of Python code in ns at the fastest the machine ran Python: the host's speed switches
    # between regimes for seconds at a time; its fastest is reached in nearly every calibration,
    # its mix of regimes is not the same in any two. The fastest seen in this calibration, or the
    # machine's record of earlier ones where that is faster (a calibration held in the slow regime
    # throughout: calibration.machine_fastest_ref)
    run_fastest = min(refs) if refs else float("nan")
    fastest_ref, record = (
        cal_mod.machine_fastest_ref(run_fastest) if math.isfinite(run_fastest) else (run_fastest, None)
    )
    if record is not None and record < run_fastest * (1 - TOLERANCE):
        log(
            f"the reference loop ran at {run_fastest:.0f} ns at best here, this machine's record is"
            f" {record:.0f} ns: costs of Python code stored at the record's speed"
        )
    for entry, (st, cost) in kept.items():
        if st.field == "per_ref" and math.isfinite(fastest_ref):
            cost = at_speed(cost, st, fastest_ref)
        elif entry == "backend" and math.isfinite(fastest_ref):
            cost = backend_at_speed(cost, st, fastest_ref)
        costs[entry] = {**cost, "spread": st.spread, "rounds": float(len(st.rounds))}
        if "ref_ns" not in cost and math.isfinite(_ref(st)):
            costs[entry]["ref_ns"] = _ref(st)
        log(f"{entry}: {_ns(figure(cost))} ({len(st.rounds)} rounds, spread {st.spread:.0%})")
    return {
        "schema": cal_mod.SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - t0, 1),
        "key": cal_mod.current_key(),
        "method": (
            "differential micro-workloads in rounds (per-round minimum of short interleaved timings) until"
            f" the last {plan.k} agree within {TOLERANCE:.0%}; split inside/outside by the analyzer"
            " (docs/overhead.md)"
        ),
        "reps": plan.k,
        "plan": dataclasses.asdict(plan),
        "costs_ns": {
            k: {f: round(v, 4 if f == "spread" else 1) for f, v in c.items()} for k, c in costs.items()
        },
        "refused": refused,
        "skipped": skipped,
        "rounds_ns": rounds_ns,
        # ns per iteration of the reference loop: the fastest of this calibration, this machine's
        # record before it (None: none yet), and the one the costs of Python code are stored at
        "reference_ns": {
            "run_fastest": _finite(run_fastest, 1),
            "machine_record": None if record is None else _finite(record, 1),
            "used": _finite(fastest_ref, 1),
        },
    }


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch
