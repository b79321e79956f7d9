"""Set every run's times at one main-thread speed before ``rlscope validate`` compares them.

Each run of a plain validation is its own process, and its main thread draws the machine's speeds
(:mod:`rlscope.overhead.validate.speed_probe` measures the draw). A time moves with the speed by an
*elasticity* ``b``: 1 for pure CPU work, less where the run waits for the GPU. Per row of the
comparison, ``b`` is fitted on the runs themselves: the slope of log(time) on log(speed) within
each side (reference runs, profiled runs), pooled, so the sides' own difference (what rlscope got
wrong) does not enter the slope. Each time ``t`` of a run at speed ``s`` becomes
``t * (c / s) ** b``, with ``c`` the row's median speed. A slope fitted on noise alone comes out
near 0 and adjusts little. The slope may exceed 1 where the job's data misses caches that a busy
neighbour on the same core shares, which the probe's tiny loop hardly uses; MAX_ELASTICITY bounds
it (fitted slopes: 0.3-0.6 on the h100 rows, 0.4-1.1 on cpu-vm's). docs/overhead.md gives the
spreads it removes.

A row is set at one speed only where that narrows its reference runs' spread (standard deviation of
log time) by ``MIN_NARROWING``: the reference runs are the ones rlscope never touches, so the speeds
must be seen to explain their times first. Why: where the runs drew speeds close together the slope
is poorly determined, and a bias of the probe between kinds of run then weighs by it. On cpu-vm, in
a quiet spell (speeds 12% apart), SB3 PPO's ``train`` fitted a slope of 1.76 (standard error 0.68)
while the timed runs' times did not follow their speeds (their spread grew from 5.8% to 6.8% when
adjusted); the profiled runs' probe read 4% faster than the timed runs' (3-4% in each of four sets
on cpu-vm), and the adjustment moved ``train`` from +3.2% to +13.5%. On the h100 rows and in cpu-vm's
noisier spells the adjustment halves the reference runs' spread and stays.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

MIN_RUNS = 5  # runs with a speed on each side, for a slope (three gave slopes off by 0.5)
MAX_ELASTICITY = 2.0
MIN_NARROWING = 0.10  # how much setting them at one speed must narrow the reference runs' spread


def elasticity(sides: Sequence[Sequence[tuple[float, float]]]) -> float:
    """The pooled within-side slope of log(time) on log(speed) over ``sides`` of (time, speed)
    pairs, clipped to [0, MAX_ELASTICITY]; 0 when the speeds do not vary within any side."""
    sxy = sxx = 0.0
    for pairs in sides:
        pts = [(math.log(s), math.log(t)) for t, s in pairs if t > 0 and s > 0]
        if len(pts) < 2:
            continue
        mx = statistics.fmean(x for x, _ in pts)
        my = statistics.fmean(y for _, y in pts)
        sxy += sum((x - mx) * (y - my) for x, y in pts)
        sxx += sum((x - mx) ** 2 for x, _ in pts)
    if sxx <= 0:
        return 0.0
    return min(max(sxy / sxx, 0.0), MAX_ELASTICITY)


def factors(
    ref_speed: Sequence[float | None],
    prof_speed: Sequence[float | None],
    ref: Sequence[float],
    prof: Sequence[float],
) -> tuple[list[float], list[float], dict[str, float]] | None:
    """Per run, the factor that sets its times at the row's median speed, for the reference and
    the profiled runs (in their order), and the fit ({elasticity, speed_ns, spread, narrowing}:
    how much the factors narrow the reference runs' spread, see :func:`narrows`); None where a run
    has no speed or a side has fewer than MIN_RUNS runs."""
    if any(s is None or s <= 0 for s in (*ref_speed, *prof_speed)):
        return None
    if len(ref_speed) < MIN_RUNS or len(prof_speed) < MIN_RUNS:
        return None
    rs = [float(s) for s in ref_speed if s is not None]
    ps = [float(s) for s in prof_speed if s is not None]
    b = elasticity([list(zip(ref, rs, strict=True)), list(zip(prof, ps, strict=True))])
    center = statistics.median(rs + ps)
    fr, fp = [(center / s) ** b for s in rs], [(center / s) ** b for s in ps]
    before, after = _log_spread(ref), _log_spread([t * f for t, f in zip(ref, fr, strict=True)])
    fit = {
        "elasticity": b,
        "speed_ns": center,
        "spread": max(rs + ps) / min(rs + ps) - 1.0,  # between the slowest and the fastest run
        "narrowing": 1.0 - after / before if before > 0 else 0.0,
    }
    return fr, fp, fit


def narrows(fit: dict[str, float]) -> bool:
    """Whether a fit's factors narrow the reference runs' spread enough to be applied (module doc)."""
    return fit["narrowing"] >= MIN_NARROWING


def _log_spread(times: Sequence[float]) -> float:
    logs = [math.log(t) for t in times if t > 0]
    return statistics.pstdev(logs) if len(logs) >= 2 else 0.0
