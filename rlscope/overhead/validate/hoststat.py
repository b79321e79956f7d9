"""What the machine did to a run: CPU time the hypervisor took from the run's cores.

On a virtual machine the host can run other guests on the cores a run was given; the guest kernel
counts that time as *steal* (``/proc/stat``). A run that lost 10% of its cores' time is slower for a
reason that is neither the program nor the profiler, so ``rlscope validate`` records it per run.
Linux only; elsewhere the counters are ``None``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_STAT = Path("/proc/stat")


def core_seconds(cores: Iterable[int] | None = None) -> dict[str, float] | None:
    """``{"busy": s, "steal": s}`` summed over ``cores`` (all of them when None) since boot.

    busy: user + nice + system + irq + softirq; steal: time the hypervisor ran something else on
    the core. None when /proc/stat is missing or unreadable."""
    want = None if cores is None else {f"cpu{c}" for c in cores}
    try:
        lines = _STAT.read_text().splitlines()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    busy = steal = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or (want is not None and name not in want):
            continue
        f = [int(x) for x in rest.split()]
        busy += f[0] + f[1] + f[2] + f[5] + f[6]
        steal += f[7] if len(f) > 7 else 0
    return {"busy": busy / hz, "steal": steal / hz}


def delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """What happened between two readings (None if either is missing)."""
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in before}
