"""Rounds until stable: why a calibrated cost is trusted is a rule, not luck.

A round times a micro-workload several times unprofiled and profiled (:mod:`.workloads`) and gives
one estimate of a cost. A shared machine's speed also changes by itself: on a 2-core VM a plain
Python loop takes 115 or 200 ns per iteration depending on the host, switching within a second or
holding for tens of seconds, and every cost in ns moves with it. So a round's estimate is *judged*
divided by what the machine did meanwhile: per ns of a reference Python loop timed right after it
(``per_ref``), or, for the backend, relative to the code it was measured on (``rho``). Rounds
repeat until the last ``k`` judged estimates agree within 20% of their median (and that median
with the median of all rounds), up to a time budget (:class:`Stable`, :func:`until_stable`); the
C boundaries are judged in ns over the rounds run at the machine's fast speed
(:func:`_until_stable_at_speed`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterable

from rlscope.overhead.correct import calibration as cal_mod
from rlscope.overhead.correct import reference

TOLERANCE = 0.20  # the last k round estimates must lie within this fraction of their median


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
# first one cold), where one more round would have been stable
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


def _reference() -> float:
    """CPU ns per iteration of a plain Python loop (the least of 3 short timings): how fast this
    machine runs Python at the moment; stored beside each cost (``ref_ns``), since on a shared
    machine every cost moves with it."""
    return reference.reference_ns(2000, 3)  # the loop a session times too (overhead/correct/reference.py)


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
# calibration on a loaded 2-core VM, 28 rounds in 5 s, refused)
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
    other four stored 1.35-1.76 reference iterations."""
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


def _ref(st: Stable) -> float:
    """The reference loop's ns per iteration over the judged rounds (NaN where none was timed)."""
    refs = [r["ref"] for r in st.rounds[-st.k :] if "ref" in r]
    return statistics.median(refs) if refs else float("nan")


# a boundary cost refused (negative or unstable) is measured once more after the machine is back
# within SLOW_REGIME of its fastest speed, waited for at most this long. Why: on a loaded 2-core VM
# one calibration of five measured the scope and category pairs at -53 ns while its
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
    a first round of 228 ns, where the other four stored 241-263 ns and its own scope pair 247.
    The fastest timing is the least disturbed one, as for
    each round's own timings (module docstring)."""
    fastest = _fastest_round(st)
    return fastest is not None and st.cost > (1 + TOLERANCE) * fastest


def _fastest_round(st: Stable) -> float | None:
    """The lowest positive round estimate of a cost (None: none positive)."""
    return min((e for e in st.estimates if e > 0), default=None)
