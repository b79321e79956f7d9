"""Which processes of a trace directory belong to one run.

Every process writes its own ``process-<pid>`` directory, so profiling twice into the same
directory leaves both runs side by side, and an analysis of all of them would span both (a wall
from the first run's start to the second's end, every operation summed over the two). Processes of
one run overlap in time (children inside their parent's session, DDP ranks and Ray workers beside
the driver); runs made one after the other do not. So the processes are grouped by overlapping
sessions on the shared Unix-anchored clock, and more than one group is said in a warning. The
analysis still reads every process: processes that a user's pipeline runs one after the other into
one directory are one job to them, and this module cannot tell that apart from a rerun. Nothing is
recorded for this: any trace, old ones included, can be checked.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from rlscope.trace.header import ProcessHeader, clock_offset, parent_pid


def groups(spans: Sequence[tuple[int, int] | None], offsets: Sequence[int]) -> list[list[int]]:
    """Indices of processes grouped into runs (overlapping [start, end] on the shared clock), in
    order of their start; a process without events has no span and goes with the latest run."""
    timed = sorted(
        (span[0] + o, span[1] + o, i) for i, (span, o) in enumerate(zip(spans, offsets, strict=True)) if span
    )
    runs: list[list[int]] = []
    end = None
    for s, e, i in timed:
        if end is None or s > end:
            runs.append([i])
            end = e
        else:
            runs[-1].append(i)
            end = max(end, e)
    untimed = [i for i, span in enumerate(spans) if not span]
    if not runs:
        return [untimed]
    runs[-1].extend(untimed)
    return runs


def _when(unix_ns: int) -> str:
    return datetime.datetime.fromtimestamp(unix_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def _join_children(runs: list[list[int]], headers: Sequence[ProcessHeader]) -> list[list[int]]:
    """Runs merged where a process's parent (same host, :func:`parent_pid`) is in another run: a child is part
    of its parent's run whatever the clocks say."""
    run_of = {i: r for r, run in enumerate(runs) for i in run}
    where = {(h.metadata.get("host", ""), h.pid): i for i, h in enumerate(headers)}
    parent = list(range(len(runs)))

    def root(r: int) -> int:
        while parent[r] != r:
            r = parent[r]
        return r

    for i, h in enumerate(headers):
        j = where.get((h.metadata.get("host", ""), parent_pid(h.metadata)))
        if j is not None:
            a, b = root(run_of[i]), root(run_of[j])
            parent[max(a, b)] = min(a, b)
    merged: dict[int, list[int]] = {}
    for r, run in enumerate(runs):
        merged.setdefault(root(r), []).extend(run)
    return list(merged.values())


def runs_warning(headers: Sequence[ProcessHeader], spans: Sequence[tuple[int, int] | None]) -> str | None:
    """The warning for a directory whose processes fall into runs that do not overlap, or None."""
    offsets = [clock_offset(h) for h in headers]
    runs = _join_children(groups(spans, offsets), headers)
    if len(runs) == 1:
        return None
    starts = [min(spans[i][0] + offsets[i] for i in run if spans[i]) for run in runs]  # type: ignore[index]
    parts = ", ".join(
        f"{len(run)} process{'es' if len(run) > 1 else ''} from {_when(t)}"
        for run, t in zip(runs, starts, strict=True)
    )
    return (
        f"this trace directory holds {len(runs)} runs that do not overlap in time ({parts}): the figures"
        " span all of them, the gaps between them included (give each run its own trace directory)"
    )
