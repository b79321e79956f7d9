"""Several ``rlscope validate --json`` results of one program as one: ``rlscope validate --merge A B``.

Why: a validation's repetitions may not fit one job. On an H100 a repetition of PPO-GPU or SB3 PPO
takes 55-62 s (three processes of 16-30 s), so a batch job limited to ten minutes stops
after nine (``--time-limit``), where a verdict wants ten or more. Every error compares the runs of
one repetition with each other, so repetitions made by separate invocations of the same command,
options and regime pool like more repetitions of one: the merge renumbers them, concatenates what
each repetition measured and compares again (:func:`rlscope.overhead.validate.verdict.compare`).

The parts are meant for the same kind of machine; the speed probe's adjustment then sets every run
at the pooled median speed, as within one invocation. A part's number of looks at its intervals
(``--max-reps``) adds to the merged result's, and so does the merge itself: deciding to add a part
after seeing the first is one more look, and the 90% intervals widen for it (``median_interval``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlscope.errors import RLScopeError
from rlscope.overhead.validate.options import Options
from rlscope.overhead.validate.verdict import compare

SCHEMA = "rlscope.overhead.validate.runner/1"
# what the parts must share to be one validation's repetitions
SAME = (
    "command",
    "regime",
    "twin",
    "profile_overrides",
    "cpus",
    "script_calls_profile",
    "reference",
    "tolerance",
    "speed_probe",  # what speed_ns measures (absent: an older probe, 40 iterations timed cold)
)
RESULT_ONLY = ("rows", "verdict", "stopped", "signal")  # what a comparison or a stop wrote
# per repetition, one entry each, in repetition order
PER_REP = ("timers", "timer_blocks", "timer_block_samples", "profiled")


def load(path: str) -> dict[str, Any]:
    """One part: a validate JSON of this schema, else a one-line error."""
    try:
        result = json.loads(Path(path).read_text())
    except OSError as e:
        raise RLScopeError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise RLScopeError(f"{path}: not a validate JSON file ({e})") from None
    if not isinstance(result, dict) or result.get("schema") != SCHEMA:
        found = result.get("schema") if isinstance(result, dict) else type(result).__name__
        raise RLScopeError(f"{path}: not a validate result of schema {SCHEMA} (found {found!r})")
    missing = [k for k in (*SAME, *PER_REP, "runs", "reps") if k not in result and k != "speed_probe"]
    if missing:
        raise RLScopeError(f"{path}: incomplete validate result: no {', '.join(missing)}")
    if result["reps"] < 1:
        raise RLScopeError(f"{path}: holds no repetition")
    return result


def merge(parts: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """The parts' repetitions as one result, compared again at the first part's tolerances."""
    if len(parts) < 2:
        raise RLScopeError("validate --merge: give two result files or more")
    first = parts[0]
    for part, name in zip(parts[1:], names[1:], strict=True):
        differ = [k for k in SAME if part.get(k) != first.get(k)]
        if differ:
            raise RLScopeError(
                f"validate --merge: {name} is not a validation of the same kind as {names[0]}"
                f" (different {', '.join(differ)})"
            )
    merged: dict[str, Any] = {k: v for k, v in first.items() if k not in RESULT_ONLY}
    merged["runs"], offset = [], 0
    for part in parts:
        reps = len(part["profiled"])
        # a repetition a signal cut short has runs but no analyzed profile: left out with it
        merged["runs"] += [{**r, "rep": r["rep"] + offset} for r in part["runs"] if r["rep"] <= reps]
        offset += reps
    for key in PER_REP:
        merged[key] = [x for part in parts for x in part[key][: len(part["profiled"])]]
    merged["reps"] = merged["min_reps"] = merged["max_reps"] = offset
    merged["looks"] = sum(p.get("looks", 1) for p in parts) + 1  # the decision to merge is one more
    merged["merged"] = [
        {"file": name, "reps": len(p["profiled"]), "stopped": p.get("stopped")}
        for p, name in zip(parts, names, strict=True)
    ]
    tol = first["tolerance"]
    opts = Options(command=first["command"], merge=tuple(names))
    opts.tolerance_total, opts.tolerance_op = tol["total"], tol["operation"]
    merged.update(compare(merged, opts))
    merged["verdict"]["line"] += f" [merged: {offset} repetitions from {len(parts)} files]"
    return merged
