"""What the summary says of a process's window correction: the evidence behind it per operation, and
notes on the operations the windows could not measure well.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlscope import categories
from rlscope.analysis.timeline import Timeline
from rlscope.overhead.correct.full_windows import full_share
from rlscope.overhead.correct.windows import MIN_PAIR_INSTANCES, WindowEstimate, nested_names
from rlscope.trace.reader import name_of


def _name(names: list[str], i: int) -> str:
    return name_of(names, i, categories.UNANNOTATED)


def window_notes(est: WindowEstimate, names: list[str]) -> list[str]:
    """Notes on the operations seen only in light windows, then on those too few windows paired."""
    notes = [
        f"{_name(names, k)} ran only in light windows ({n} calls): its CPU categories and"
        " GPU work were not recorded (shown as python, no GPU time); a longer run samples it"
        for k, n in sorted(est.light_only.items())
    ]
    few = _few_windows_note(est, names)
    return [*notes, few] if few else notes


def _few_windows_note(est: WindowEstimate, names: list[str]) -> str | None:
    """A note naming the operations whose correction could not pair windows, or None.

    Why: a short run holds a few windows (switches are spaced so that they cost at most 3% of the
    run: ~0.2 s apart with GPU tracing on an H100), and an operation seen in too few of them is
    corrected from all its full-window instances against all its light ones. That estimate cannot
    follow the machine's speed through the run nor take out what a switch leaves for the next call:
    PPO with its policy on an H100, 1.3 s profiled (five switches), read `backprop` +11% over 10 runs
    where 4-5 s read +1% over 5. The user should know that
    a longer run gives a better figure.
    """
    # only operations frequent enough to pair in more windows: one called once a rollout (PPO's
    # compute_advantages) never pairs, however long the run, and its uncertainty already says so
    enough = MIN_PAIR_INSTANCES * (est.switches + 1)  # instances for a few in each window
    ops = sorted(
        (e["removed_ns"], _name(names, k))
        for k, e in est.per_op.items()
        if e.get("method") == "unpaired" and e["light_n"] + e["full_n"] >= enough
    )
    if not ops:
        return None
    listed = ", ".join(n for _, n in reversed(ops))
    return (
        f"only {est.switches} window switches in this run: {listed} corrected from all their full-window"
        " calls against all their light-window ones, not window by window (half of what was removed is"
        " its uncertainty); a run several times longer pairs windows"
    )


def window_info(
    est: WindowEstimate, names: list[str], tl: Timeline, switched: dict[str, bool]
) -> dict[str, Any]:
    """The evidence behind the window correction, for the summary (per operation and in total).
    ``tl`` (the corrected timeline, of the estimate's rows) keeps the estimate's WINDOW rows for the
    window lookups after this one (windows.window_rows): not a pass over its rows to find them again."""
    if est.window_idx is not None:
        tl.memo.setdefault("window_indices", est.window_idx)
    sigma = {k: e["sigma_ns"] for k, e in est.per_op.items()}
    nested = nested_names(tl, est.begins)
    ops = {}
    for key, e in est.per_op.items():
        inner = [y for (x, y) in nested if x == key and y != key]
        incl = np.sqrt(sigma[key] ** 2 + sum(sigma.get(y, 0.0) ** 2 for y in set(inner)))
        ops[_name(names, key)] = {
            "method": e["method"],
            "factor": e["factor"],
            "light_instances": e["light_n"],
            "full_instances": e["full_n"],
            "removed_s": e["removed_ns"] / 1e9,
            # of which: work a window switch left for the instance right after it (windows.switch_transient)
            "after_switch_removed_s": e.get("after_switch_removed_ns", 0.0) / 1e9,
            "exclusive_uncertainty_s": sigma[key] / 1e9,
            "uncertainty_s": float(incl) / 1e9,
            # the machine's speed over the run: percentiles of the light windows' medians (ns)
            "light_window_ns": e.get("light_window_ns"),
            # each light window's [median ns, instances] (rlscope validate's speed matching)
            "light_windows": e.get("light_windows"),
            "full_windows": e.get("full_windows"),
        }
        if "pooled_ns" in e:  # what the pooled cost would have removed, beside its own instances' cap
            ops[_name(names, key)]["pooled_s"] = e["pooled_ns"] / 1e9
        if "pieces" in e:  # its pieces' classes, by how each was compared (overhead/correct/pieces.py)
            ops[_name(names, key)]["pieces"] = e["pieces"]
    total_sigma = float(np.sqrt(sum(v**2 for v in sigma.values()))) / 1e9
    return {
        "switched": [k for k, on in switched.items() if on],
        "full_share": full_share(est, tl),
        "cost_per_event_ns": est.cost_per_event_ns,
        "uncertainty_s": total_sigma,
        "operations": ops,
    }
