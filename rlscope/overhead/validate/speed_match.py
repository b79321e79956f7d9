"""Compare a profiled run with timed runs at the same machine speed (``rlscope validate``).

Why: on the cloud GPU machines measured, each core runs at one of two speeds about 1.5x apart, for
seconds at a time, independently of the other cores and of what the guest does (no steal, no
sibling inside the guest; pure Python slows as much as the eager simulator). Which speed a
process draws for how long is the host's doing, and it moves a run's time by up to 50%:
two processes compared raw measure that draw as much as the profiler. Both kinds of run time the
operation repeatedly (the profiled run per window, the timed runs per quarter second), so each
side shows its levels at each speed. This module splits each side's samples into the two speeds;
:func:`level_ratio` sets the profiled run's light level against the timed one at the same speed
(the light state's own cost: a light state that costs the job X% reads X% at either speed), and
:func:`mix_factor` scales the timed reference to the profiled run's mix of speeds. The mix holds
only for loops whose instances are alike: phases of a workload 1.25-2x apart look like speeds
(DQN learns on some steps only), so ``rlscope validate`` shows only the level ratio.

A side whose samples show one speed is placed at the other side's level it is close to
(``PLACE_TOLERANCE``), else nothing is adjusted: a real cost must never be read as a speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SPLIT_MIN_RATIO = 1.25  # two speeds: the slow group's median at least this over the fast group's
# and at most this: the machines' two speeds are 1.4-1.6x apart; groups further apart are the
# workload's own phases (DQN's exploring steps skip the network: 5 us against 60 us), not a speed
SPLIT_MAX_RATIO = 2.0
SPLIT_MIN_SHARE = 0.1  # and each group at least this share of the side's instances
PLACE_TOLERANCE = 0.1  # a one-speed side is at a level of the other side within this (log) distance


@dataclass(frozen=True)
class Speeds:
    """One side's samples at the machine's speeds: levels in ns, ``fast_share`` of its instances."""

    fast: float
    slow: float | None  # None: one speed only
    fast_share: float


def _weighted_median(xs: list[float], ws: list[float]) -> float:
    pairs = sorted(zip(xs, ws, strict=True))
    half, acc = sum(ws) / 2, 0.0
    for x, w in pairs:
        acc += w
        if acc >= half:
            return x
    return pairs[-1][0]


def split(samples: list[tuple[float, float]]) -> Speeds | None:
    """Two speeds in ``(level ns, instances)`` samples, or one; None without samples, or when the
    groups are too far apart for speeds (``SPLIT_MAX_RATIO``: phases of the workload).

    The cut maximizes the between-group variance of the log levels, weighted by instances (Otsu's
    threshold); it counts as two speeds only when the groups are far apart and both substantial.
    """
    good = sorted((lv, n) for lv, n in samples if lv > 0 and n > 0)
    if not good:
        return None
    xs, ws = [math.log(lv) for lv, _ in good], [float(n) for _, n in good]
    total = sum(ws)
    one = Speeds(math.exp(_weighted_median(xs, ws)), None, 1.0)
    best, cut = -1.0, 0
    w0 = s0 = 0.0
    s_all = sum(x * w for x, w in zip(xs, ws, strict=True))
    for i in range(len(xs) - 1):
        w0 += ws[i]
        s0 += xs[i] * ws[i]
        w1 = total - w0
        between = w0 * w1 * (s0 / w0 - (s_all - s0) / w1) ** 2
        if between > best:
            best, cut = between, i + 1
    if best <= 0:
        return one
    lo, hi = _weighted_median(xs[:cut], ws[:cut]), _weighted_median(xs[cut:], ws[cut:])
    share = sum(ws[:cut]) / total
    if not math.log(SPLIT_MIN_RATIO) <= hi - lo <= math.log(SPLIT_MAX_RATIO):
        return None if hi - lo > math.log(SPLIT_MAX_RATIO) else one
    if not SPLIT_MIN_SHARE <= share <= 1 - SPLIT_MIN_SHARE:
        return one
    return Speeds(math.exp(lo), math.exp(hi), share)


def profiled(light: list[tuple[float, float]], full: list[tuple[float, float]]) -> Speeds | None:
    """The profiled run's speeds: the light windows' levels (what the correction brings every
    instance to), and the mix over all its windows. Full windows run slower by the collectors'
    cost, so they are split on their own; their share joins the light windows' when they show two
    speeds too, weighted by instances. Light windows alone over-sample the run's start (the first
    window is light), where a loop's phases differ (DQN explores before it learns)."""
    lt = split(light)
    if lt is None or lt.slow is None:
        return lt
    fl = split(full)
    if fl is None or fl.slow is None:
        return lt
    n_light = sum(n for lv, n in light if lv > 0 and n > 0)
    n_full = sum(n for lv, n in full if lv > 0 and n > 0)
    share = (lt.fast_share * n_light + fl.fast_share * n_full) / (n_light + n_full)
    return Speeds(lt.fast, lt.slow, share)


def _place(one: Speeds, other: Speeds) -> float | None:
    """The fast share (1 or 0) of a one-speed side, by the other side's level it sits at."""
    assert other.slow is not None
    x = math.log(one.fast)
    if abs(x - math.log(other.fast)) <= PLACE_TOLERANCE:
        return 1.0
    if abs(x - math.log(other.slow)) <= PLACE_TOLERANCE:
        return 0.0
    return None


def mix_factor(timed: Speeds | None, profiled: Speeds | None) -> float:
    """How much longer the timed runs would have taken with the profiled run's mix of speeds.

    1.0 when neither side shows two speeds, or a one-speed side cannot be placed. The levels are
    the timed side's (the reference); the profiled side gives only its shares.
    """
    if timed is None or profiled is None:
        return 1.0
    two = [s for s in (timed, profiled) if s.slow is not None]
    if not two:
        return 1.0
    gap = math.exp(sum(math.log(s.slow / s.fast) for s in two) / len(two))  # type: ignore[operator]
    q = timed.fast_share if timed.slow is not None else _place(timed, profiled)
    p = profiled.fast_share if profiled.slow is not None else _place(profiled, timed)
    if q is None or p is None:
        return 1.0
    # per instance, relative to the fast level: 1 at the fast speed, gap at the slow one
    return (p + (1 - p) * gap) / (q + (1 - q) * gap)


def level_ratio(timed: Speeds | None, profiled: Speeds | None) -> float | None:
    """The profiled side's level over the timed side's at the same speed: what the light state
    costs the operation, the machine's speeds taken out. The mean of the two speeds' ratios where
    both sides show both; a one-speed side's level against the other side's at that speed (placed
    as in :func:`mix_factor`); None when no speed is seen on both sides."""
    if timed is None or profiled is None:
        return None
    if timed.slow is not None and profiled.slow is not None:
        return math.sqrt(profiled.fast / timed.fast * profiled.slow / timed.slow)
    if timed.slow is None and profiled.slow is None:
        # one speed each: the same one when they are within the placing distance
        near = abs(math.log(profiled.fast / timed.fast)) <= PLACE_TOLERANCE
        return profiled.fast / timed.fast if near else None
    one, two = (timed, profiled) if timed.slow is None else (profiled, timed)
    at = _place(one, two)
    if at is None:
        return None
    level = two.fast if at == 1.0 else two.slow
    assert level is not None
    return profiled.fast / level if one is profiled else level / timed.fast
