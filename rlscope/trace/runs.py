"""Which processes of a trace directory belong to one run.

Every process writes its own ``process-<pid>`` directory, so profiling twice into the same
directory leaves both runs side by side, and an analysis of all of them would span both (a wall
from the first run's start to the second's end, every operation summed over the two). Processes of
one run overlap in time (children inside their parent's session, DDP ranks and Ray workers beside
the driver); runs made one after the other do not. So the processes are grouped by overlapping
sessions on the shared Unix-anchored clock and the latest group is the run analyzed; the earlier
ones stay on disk and are named in a warning. Nothing is recorded for this: any trace, old ones
included, can be split.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from rlscope.trace.reader import ProcessHeader, clock_offset

# sessions closer than this count as one run: a launcher whose children start right after it stops
GAP_NS = 0


def groups(spans: Sequence[tuple[int, int] | None], offsets: Sequence[int]) -> list[list[int]]:
    """Indices of processes grouped into runs (overlapping [start, end] on the shared clock), in
    order of their start; a process without events has no span and goes with the latest run."""
    timed = sorted(
        (span[0] + o, span[1] + o, i) for i, (span, o) in enumerate(zip(spans, offsets, strict=True)) if span
    )
    runs: list[list[int]] = []
    end = None
    for s, e, i in timed:
        if end is None or s > end + GAP_NS:
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


def latest_run(
    headers: Sequence[ProcessHeader], spans: Sequence[tuple[int, int] | None]
) -> tuple[list[int], str | None]:
    """(indices of the latest run's processes, the warning naming the earlier runs, or None)."""
    offsets = [clock_offset(h) for h in headers]
    runs = groups(spans, offsets)
    if len(runs) == 1:
        return sorted(runs[0]), None
    kept = sorted(runs[-1])
    earlier = [i for run in runs[:-1] for i in run]
    first = min(spans[i][0] + offsets[i] for i in earlier if spans[i])  # type: ignore[index]
    start = min(spans[i][0] + offsets[i] for i in kept if spans[i])  # type: ignore[index]
    n = len(runs) - 1
    warning = (
        f"this trace directory holds {n} earlier run{'s' if n > 1 else ''} ({len(earlier)} process"
        f"{'es' if len(earlier) > 1 else ''}, from {_when(first)}) besides the latest, started"
        f" {_when(start)}: only the latest is analyzed (give each run its own trace directory)"
    )
    return kept, warning
