"""What a calibration stores of a cost, and when it refuses to store it.

A cost that is negative, still unstable when the budget runs out, or outside the range plausible
for its kind (``PLAUSIBLE_NS``) is *refused*: one line says which and why, and the file records the
refusal instead of the number. A wrong cost is worse than none: the analyzer corrects with what
passed and says what was not calibrated. The costs of Python code are stored in ns at the fastest
reference loop seen (:func:`at_speed`), the backend's at the fastest its loop ran
(:func:`backend_at_speed`): both the least disturbed speed, which every calibration reaches.
"""

from __future__ import annotations

import math
import statistics

from rlscope.overhead.calibrate.rounds import TOLERANCE, Stable
from rlscope.overhead.correct import calibration as cal_mod

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
    # the automatic operations' wrapper of nn.Module.__call__ per call (~1.7 us in an RL loop, 2-core VM)
    "module_call": (20.0, 20_000.0),
}


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
    for the other four. The backend's cost per reference ns held within 3%
    over those four (4.53-4.65) while their ns moved with their reference; scaled by their references,
    the five would have read about 670-760 ns."""
    refs = [r["ref"] for r in st.counted if "ref" in r]
    if not refs or not min(refs) > ref_ns:
        return cost
    scaled = cal_mod.scaled_ns(cost, ref_ns / min(refs))
    return {**scaled, "ref_ns": ref_ns, "measured_ref_ns": min(refs), "measured_ns": cost["total"]}


def _finite(v: float, digits: int) -> float | None:
    """A number for the JSON file: NaN and infinity (a round that measured nothing) become null."""
    return round(v, digits) if math.isfinite(v) else None
