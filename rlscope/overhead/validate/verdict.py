"""``rlscope validate``'s comparison: per repetition errors, their medians and intervals, and the verdict.

Errors are paired by repetition (the runs of one repetition ran back to back, or in turns); the
verdict is on their medians, and each checked figure's distribution-free 90% interval says how
sure it is (:func:`median_interval`, :func:`judge`).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from rlscope.overhead.validate import speed_adjust
from rlscope.overhead.validate.options import Options

SHOWN_SHARE = 0.01  # operations above this share of the run are shown
CHECKED_SHARE = 0.05  # and above this one checked against the operation tolerance
# correction_noise_note: runs for two spreads to compare, and how far apart they must be
CORRECTION_NOISE_RUNS = 5
CORRECTION_NOISE_RATIO = 1.5  # the corrected totals' coefficient of variation over the reference runs'
CORRECTION_NOISE_MIN = 0.02  # and at least this much above it


def _by_rep(runs: list[dict[str, Any]], mode: str) -> list[float]:
    return [r["measured_s"] for r in sorted(runs, key=lambda r: r["rep"]) if r["mode"] == mode]


def _speeds(runs: list[dict[str, Any]], mode: str) -> list[float | None]:
    """Per repetition, the main thread's speed of the run of ``mode`` (speed_probe.py; None: none)."""
    return [r.get("speed_ns") for r in sorted(runs, key=lambda r: r["rep"]) if r["mode"] == mode]


def _errors(cor: list[float], ref: list[float]) -> list[float | None]:
    """Per repetition, the corrected time's error against its reference (None: no reference)."""
    return [c / r - 1 if r > 0 else None for c, r in zip(cor, ref, strict=True)]


def _median(errors: list[float | None]) -> float | None:
    known = [e for e in errors if e is not None]
    return statistics.median(known) if known else None


def _row(
    name: str,
    share: float,
    ref: list[float],
    prof: list[dict[str, float]],
    tol: float | None,
    looks: int = 1,
    speeds: tuple[list[float | None], list[float | None]] | None = None,
) -> dict:
    """One table row: per repetition reference, raw, corrected; errors paired by repetition.

    ``speeds``: each reference and profiled run's main-thread speed; with them, every time is set
    at the row's median speed first (speed_adjust.py), and the row keeps the unadjusted error."""
    raw = [p["raw"] for p in prof]
    cor = [p["corrected"] for p in prof]
    adjusted = left = None
    if speeds is not None:
        fit = speed_adjust.factors(*speeds, ref, cor)
        if fit is not None and not speed_adjust.narrows(fit[2]):
            left = fit[2]  # the speeds do not explain the reference runs' times: left as measured
        elif fit is not None:
            fr, fp, info = fit
            adjusted = {**info, "unadjusted_median_error": _median(_errors(cor, ref))}
            ref = [r * f for r, f in zip(ref, fr, strict=True)]
            cor = [c * f for c, f in zip(cor, fp, strict=True)]
            raw = [a * f if a is not None else None for a, f in zip(raw, fp, strict=True)]
    err = _errors(cor, ref)
    slow = [a / r if r > 0 and a is not None else None for a, r in zip(raw, ref, strict=True)]
    known = [e for e in err if e is not None]
    median_err = _median(err)
    return {
        "operation": name,
        "share": share,
        "reference_s": ref,
        "raw_s": raw,
        "corrected_s": cor,
        "error": err,
        "raw_slowdown": slow,
        "median_error": median_err,
        "interval": median_interval(known, looks),
        "tolerance": tol,
        "ok": None if tol is None else median_err is not None and abs(median_err) <= tol,
        "speed_adjusted": adjusted,
        "speed_left": left,
    }


def median_interval(errors: list[float], looks: int = 1) -> list[float] | None:
    """Distribution-free 90% interval of the median error over repetitions, from order statistics:
    where the correction's typical error lies, given how much the repetitions disagree. None when
    there are too few repetitions for that confidence (fewer than 5 at 90%).

    The verdict is on medians, so the interval is too; and it assumes nothing about the errors'
    distribution, which on the machines measured is not normal (a process draws one of the
    machine's speeds for seconds at a time): one run in the slow speed widens a t-interval of the mean
    by its whole distance, and an order-statistic interval of the median by one rank. The interval
    [x(k), x(n+1-k)] of the sorted errors holds the median with probability 1 - 2 P(Bin(n, 1/2) < k);
    the narrowest one with at least the confidence asked is taken. ``looks``: how many times a
    sequential rule (``--max-reps``) may look at it to decide whether to stop; each look then asks
    1 - 10%/looks (Bonferroni), so stopping at the first interval that clears its band keeps the
    90% claim."""
    n = len(errors)
    want = 1 - 0.10 / max(1, looks)
    xs = sorted(errors)
    best = None
    below = 0  # P(Bin(n, 1/2) <= k - 1), k counting up from 1
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2**n
        if 1 - 2 * below < want:
            break
        best = [xs[k - 1], xs[n - k]]
    return best


def judge(row: dict[str, Any]) -> str:
    """``systematic`` (every plausible error is outside the band), ``confirmed`` (every plausible
    error is inside it) or ``inconclusive``, from the row's interval and tolerance."""
    iv, tol = row.get("interval"), row["tolerance"]
    if iv is None or tol is None:
        return "inconclusive"
    if iv[0] > tol or iv[1] < -tol:
        return "systematic"
    if -tol <= iv[0] and iv[1] <= tol:
        return "confirmed"
    return "inconclusive"


def compare(result: dict[str, Any], opts: Options) -> dict[str, Any]:
    """Rows (the total, then operations above 1% of the run) and the verdict.

    Total: unprofiled in-process time vs the profiled trace's wall (twin runs: the timed run's time,
    its timers' own cost taken off). Operations: inclusive time under the timers vs the trace's.
    Errors are paired by repetition (the runs of one repetition ran back to back, or in turns);
    the verdict is on their medians.
    """
    twin_runs = bool(result.get("twin"))
    if twin_runs:
        timed = sorted((r for r in result["runs"] if r["mode"] == "timers"), key=lambda r: r["rep"])
        unprof = [r["net_s"] for r in timed]
    else:
        unprof = _by_rep(result["runs"], "unprofiled")
    base = statistics.median(unprof)
    walls = [{"raw": p["raw_wall_s"], "corrected": p["corrected_wall_s"]} for p in result["profiled"]]
    looks = result.get("looks", 1)
    # plain runs: each process drew its own speeds; twin runs share one core's (no probe there)
    prof_speed = _speeds(result["runs"], "profiled")
    total_speeds = None if twin_runs else (_speeds(result["runs"], "unprofiled"), prof_speed)
    op_speeds = None if twin_runs else (_speeds(result["runs"], "timers"), prof_speed)
    rows = [_row("[total]", 1.0, unprof, walls, opts.tolerance_total, looks, total_speeds)]
    names: dict[str, float] = {}
    for t in result["timers"]:
        for op in t:
            names[op] = statistics.median(x.get(op, {}).get("inclusive_s", 0.0) for x in result["timers"])
    for op, med in sorted(names.items(), key=lambda kv: -kv[1]):
        share = med / base if base > 0 else 0.0
        if share < SHOWN_SHARE:
            continue
        ref = [t.get(op, {}).get("inclusive_s", 0.0) for t in result["timers"]]
        prof = [
            {
                # twin runs: an operation's raw time holds the waits for the twin's turns inside it
                "raw": None if twin_runs else p["operations"].get(op, {}).get("raw_s", 0.0),
                "corrected": p["operations"].get(op, {}).get("corrected_s", 0.0),
            }
            for p in result["profiled"]
        ]
        tol = opts.tolerance_op if share >= CHECKED_SHARE else None
        rows.append(_row(op, share, ref, prof, tol, looks, op_speeds))
        rows[-1].update(speed_rows(result, op))
        rows[-1].update(matched_row(result, op, ref, prof))
    misses = [r["operation"] for r in rows if r["ok"] is False]
    corrected = all(p["corrected_for_overhead"] for p in result["profiled"])
    noise = noise_floor(unprof)
    # how sure: each checked row's 90% interval against its band
    checked = [r for r in rows if r["tolerance"] is not None]
    for r in checked:
        r["judged"] = judge(r)
    systematic = [r for r in checked if r["ok"] is False and r["judged"] == "systematic"]
    unsure = [r for r in checked if r["ok"] is False and r["judged"] != "systematic"]
    unconfirmed = [r for r in checked if r["ok"] and r["judged"] != "confirmed"]
    drift = speed_drift(checked)
    matched = light_level_clause(checked, opts.tolerance_op)
    status, reason = _status(
        checked, systematic, unsure, unconfirmed, len(unprof), result.get("looks", 1), opts
    )
    notes = []
    if not corrected:
        notes.append(f"the profiled runs were not corrected: {result['profiled'][0]['calibration']}")
    if len(unprof) >= 2:  # a spread needs two runs at least
        runs = "timed" if twin_runs else "unprofiled"
        notes.append(f"the {runs} runs vary by ±{noise:.0%} ({len(unprof)} runs)")
    adjusted = adjustment_note(rows)
    if adjusted:
        notes.append(adjusted)
    own = correction_noise_note(rows, "timed" if twin_runs else "unprofiled")
    if own:
        notes.append(own)
    if matched:
        notes.append(matched["line"])
    if drift and (misses or unconfirmed):
        notes.append(drift_text(drift))
    verdict = {
        "status": status,
        "reason": reason,
        "pass": status == "PASS",
        "misses": misses,
        "line": f"{status}: {reason}",
        "notes": notes,
        "noise": noise if len(unprof) >= 2 else None,
        "systematic": [r["operation"] for r in systematic],
        "inconclusive": [r["operation"] for r in unsure],
        "not_confirmed": [r["operation"] for r in unconfirmed],
        "speed_drift": drift,
        "speed_matched": matched,
    }
    return {"rows": rows, "verdict": verdict}


def correction_noise_note(rows: list[dict[str, Any]], runs: str) -> str | None:
    """One line where the profiled runs' corrected totals spread well beyond the reference runs'
    (each set at one speed where validate did): that excess is the correction's own noise in each
    run, not the host's draw of speeds, and a longer run (more window switches) narrows it. None
    where it is not well beyond, or with under CORRECTION_NOISE_RUNS runs.

    Why: on the h100, set at one speed, the unprofiled totals varied by 4-7% and the profiled runs'
    corrected totals by 8-10%: most of a repetition's error spread came from the correction of runs
    of 4-6 s, which the unprofiled runs' spread did not show."""
    total = next((r for r in rows if r["operation"] == "[total]"), None)
    if total is None or len(total["corrected_s"]) < CORRECTION_NOISE_RUNS:
        return None
    ref, cor = _cv(total["reference_s"]), _cv(total["corrected_s"])
    if cor < CORRECTION_NOISE_RATIO * ref or cor - ref < CORRECTION_NOISE_MIN:
        return None
    at = " set at one speed" if total.get("speed_adjusted") else ""
    return (
        f"the profiled runs' corrected totals vary by {cor:.1%} (coefficient of variation) against"
        f" {ref:.1%} for the {runs} runs{at}: the rest is the correction's own noise in each run;"
        " a longer run (more window switches) narrows it"
    )


def _cv(values: list[float]) -> float:
    good = [v for v in values if v]
    return statistics.stdev(good) / statistics.mean(good) if len(good) >= 2 else 0.0


def adjustment_note(rows: list[dict[str, Any]]) -> str | None:
    """What setting the runs at one speed changed, in one line, and which rows it left as measured;
    None where no row was adjusted or left."""
    done = [r for r in rows if r.get("speed_adjusted")]
    left = [r["operation"] for r in rows if r.get("speed_left")]
    why = (
        f"left as measured (setting them at one speed did not narrow their reference runs' spread"
        f" by {speed_adjust.MIN_NARROWING:.0%}): " + ", ".join(left)
    )
    kept = f"; {why}" if left else ""
    if not done:
        return f"times {why}" if left else None
    first = done[0]  # the total where it was adjusted: its speeds are every run's
    total = first["speed_adjusted"]
    whose = "" if first["operation"] == "[total]" else f" ({first['operation']}'s runs)"
    parts = []
    for r in done:
        a = r["speed_adjusted"]
        before = a["unadjusted_median_error"]
        was = "-" if before is None else f"{before:+.1%}"
        parts.append(f"{r['operation']} {was} (elasticity {a['elasticity']:.2f})")
    return (
        f"times set at one main-thread speed ({total['speed_ns']:.1f} ns a probe iteration; the runs"
        f"{whose} drew speeds {total['spread']:.0%} apart); unadjusted median errors: "
        + ", ".join(parts)
        + kept
    )


def _bands(opts: Options) -> str:
    return (
        f"total ±{opts.tolerance_total:.0%}, operations above {CHECKED_SHARE:.0%} of the run"
        f" ±{opts.tolerance_op:.0%}"
    )


def _status(
    checked: list[dict[str, Any]],
    systematic: list[dict[str, Any]],
    unsure: list[dict[str, Any]],
    unconfirmed: list[dict[str, Any]],
    runs: int,
    looks: int,
    opts: Options,
) -> tuple[str, str]:
    """PASS, FAIL or INCONCLUSIVE, and the one reason for it.

    FAIL: a checked figure's error is outside its band, and every plausible error is (its 90%
    interval lies wholly outside), or there are too few runs for an interval and its median is.
    PASS: every checked figure's 90% interval lies inside its band, or, too few runs for an
    interval, every median does. INCONCLUSIVE: an interval reaches across its band's edge.
    """

    def named(rows: list[dict[str, Any]]) -> str:
        return ", ".join(r["operation"] for r in rows)

    def errors(rows: list[dict[str, Any]]) -> str:
        return ", ".join(f"{r['operation']} {r['median_error']:+.1%}" for r in rows)

    per_mode = f"{runs} run{'s' if runs != 1 else ''} per mode"
    no_interval = [r for r in checked if r.get("interval") is None]
    if systematic:
        ivs = ", ".join(
            f"{r['operation']} {r['interval'][0]:+.1%}..{r['interval'][1]:+.1%}" for r in systematic
        )
        return (
            "FAIL",
            f"errors outside their bands ({_bands(opts)}) in every plausible case: {ivs} (90% intervals)",
        )
    if unsure and len(no_interval) == len(checked):
        return "FAIL", (
            f"median errors outside their bands ({_bands(opts)}): {errors(unsure)}, from {per_mode}"
            " (5 runs per mode or more also give a 90% interval)"
        )
    if opts.merge:  # pooled from separate validations: one more, merged in, adds repetitions
        more = "another validation of the same command, merged in, narrows them"
    elif looks > 1:
        more = f"not settled after {runs} repetitions, the most --max-reps allowed"
    else:
        more = "more --reps, --max-reps or a longer run narrow them"
    if unsure:
        return "INCONCLUSIVE", (
            f"median errors outside their bands ({_bands(opts)}): {errors(unsure)}, but their 90%"
            f" intervals reach inside after {per_mode}; {more}"
        )
    if unconfirmed and len(no_interval) < len(checked):
        return "INCONCLUSIVE", (
            f"median errors within their bands ({_bands(opts)}), but the 90% intervals of"
            f" {named(unconfirmed)} reach across them after {per_mode}; {more}"
        )
    if unconfirmed:
        return "PASS", (
            f"median errors within their bands ({_bands(opts)}) from {per_mode}"
            " (5 runs per mode or more also give a 90% interval)"
        )
    return "PASS", f"every checked figure's 90% interval lies inside its band ({_bands(opts)})"


def matched_row(
    result: dict[str, Any], op: str, ref: list[float], prof: list[dict[str, float]]
) -> dict[str, Any]:
    """``op``'s corrected error per repetition against the timed reference scaled to the profiled
    run's mix of the machine's speeds (overhead/validate/speed_match.py): ``speed_mix`` is that scale (1: no
    two speeds seen, or nothing to place them by), ``matched_error`` the error, ``matched_median``
    its median. The profiled side's levels come from its light windows and its mix of speeds from
    all its windows (speed_match.profiled), the timed side's from its quarter-second blocks."""
    from rlscope.overhead.validate import speed_match

    samples = result.get("timer_block_samples") or []
    mixes: list[float] = []
    errors: list[float | None] = []
    levels: list[float | None] = []
    for i, p in enumerate(prof):
        ops = result["profiled"][i].get("overhead", {}).get("windows", {}).get("operations", {})
        windows = ops.get(op) or {}
        timed = (samples[i] if i < len(samples) else {}).get(op) or []
        t_speeds = speed_match.split(timed)
        p_speeds = speed_match.profiled(windows.get("light_windows") or [], windows.get("full_windows") or [])
        mix = speed_match.mix_factor(t_speeds, p_speeds)
        mixes.append(mix)
        levels.append(speed_match.level_ratio(t_speeds, p_speeds))
        scaled = ref[i] * mix
        errors.append(p["corrected"] / scaled - 1 if scaled > 0 else None)
    known = [e for e in errors if e is not None]
    seen = [lv for lv in levels if lv is not None]
    return {
        "speed_mix": mixes,
        "matched_error": errors,
        "matched_median": statistics.median(known) if known else None,
        # the light windows' level over the timed runs' at the same speed, less one, per repetition
        "light_level": [None if lv is None else lv - 1 for lv in levels],
        "light_level_median": statistics.median(seen) - 1 if seen else None,
    }


def light_level_clause(checked: list[dict[str, Any]], tolerance: float) -> dict[str, Any] | None:
    """The light state's own cost per checked operation, at the same speed on both sides
    (``light_level``), when some repetition gave one; None otherwise.

    Only this goes in the line. The mix-scaled errors (``matched_error``) stay in the JSON: they
    hold for a loop whose instances are alike, but a loop with phases of its own 1.25-2x apart
    reads them as speeds, and its light windows sample its phases unevenly (DQN on the VM: the
    reference scaled by 0.82-0.96x where the plain errors were right, matched errors up to +31%).
    A level ratio compares like with like, speed or phase, and needs no mix.
    """
    level = [r for r in checked if r.get("light_level_median") is not None]
    if not level:
        return None
    over = [r["operation"] for r in level if abs(r["light_level_median"]) > tolerance]
    figures = ", ".join(
        f"{r['operation']} {r['light_level_median']:+.1%}"
        f" ({sum(x is not None for x in r['light_level'])} of {len(r['light_level'])})"
        for r in level
    )
    return {
        "light_level": {r["operation"]: r["light_level_median"] for r in level},
        "over_tolerance": over,
        "line": (
            "light windows over timed runs at the same machine speed (the light state's own cost;"
            f" repetitions where both showed one): {figures}"
        ),
    }


def speed_rows(result: dict[str, Any], op: str) -> dict[str, Any]:
    """How fast the machine ran ``op`` over time, in the profiled and in the timed runs.

    Profiled runs: ``op``'s median exclusive time per light window (rlscope/overhead/correct/windows.py,
    ``light_window_ns``); timed runs: per quarter second (``TimerAggregate.block_quantiles``). Each
    as the 10th / 50th / 90th percentile over the windows or blocks, the widest over the
    repetitions:

    - ``light_spread`` and ``timer_spread``: p10 and p90 around p50. How far the machine's own
      speed moved within one run (other tenants, CPU frequency). The windows pair neighbours and do
      not feel it; a comparison between two processes does, by up to that much.
    - ``fast_error``: the profiled runs' p10 over the timed runs' p10, less one. The two kinds of
      run compared at the machine's fast end, where the speed moves least: a light state that
      costs the job nothing but its residual events gives about zero, whatever the machine did.
    """
    ops = [p.get("overhead", {}).get("windows", {}).get("operations", {}) for p in result["profiled"]]
    light = [q for o in ops if (q := o.get(op, {}).get("light_window_ns"))]
    timed = [q for b in result.get("timer_blocks", []) if (q := b.get(op))]

    def spread(qs: list[list[float]]) -> list[float] | None:
        rel = [(q[0] / q[1] - 1, q[2] / q[1] - 1) for q in qs if q[1] > 0]
        return [min(lo for lo, _ in rel), max(hi for _, hi in rel)] if rel else None

    fast = None
    if light and timed:
        ref = statistics.median(q[0] for q in timed)
        fast = statistics.median(q[0] for q in light) / ref - 1 if ref > 0 else None
    return {"light_spread": spread(light), "timer_spread": spread(timed), "fast_error": fast}


def speed_drift(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The checked operation whose speed moved the most within runs (profiled or timed), with its
    fast-end comparison (:func:`speed_rows`)."""
    width = lambda sp: sp[1] - sp[0] if sp else -1.0  # noqa: E731
    known = [r for r in rows if r.get("light_spread") or r.get("timer_spread")]
    if not known:
        return None
    r = max(known, key=lambda r: max(width(r.get("light_spread")), width(r.get("timer_spread"))))
    return {
        "operation": r["operation"],
        "light_spread": r.get("light_spread"),
        "timer_spread": r.get("timer_spread"),
        "fast_error": r.get("fast_error"),
        "light_level": r.get("light_level_median"),
    }


def drift_text(drift: dict[str, Any]) -> str:
    """The verdict's clause on the machine's own speed (:func:`speed_drift`)."""
    labels = (("light windows", "light_spread"), ("timed runs' quarter seconds", "timer_spread"))
    parts = [f"{label} {drift[key][0]:+.0%}..{drift[key][1]:+.0%}" for label, key in labels if drift.get(key)]
    text = (
        f"the machine's speed moved within runs ({drift['operation']}'s median time, 10th-90th percentile"
        f" around the median: {', '.join(parts)})"
    )
    # the same-speed level says the fast end's thing better (a run's p10 can be its other speed, or
    # a phase: DQN's read +19% at the fast end on the VM where its light state costs 0%)
    if drift.get("fast_error") is not None and drift.get("light_level") is None:
        fast = drift["fast_error"]
        text += f"; at the fast end (10th percentiles) light windows are {fast:+.1%} from timed runs"
    return text


def noise_floor(values: list[float]) -> float:
    """Half the relative range of the unprofiled runs: how far apart two runs of the same program are."""
    good = [v for v in values if v]
    if len(good) < 2:
        return 0.0
    return (max(good) - min(good)) / 2 / statistics.median(good)
