"""What ``rlscope validate`` was asked to do (parsed by :mod:`rlscope.overhead.validate.cli`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlscope.overhead.validate import twin

TURN_MS = twin.TURN_NS / 1e6  # --turn-ms's default


@dataclass
class Options:
    """What ``rlscope validate`` was asked to do."""

    command: list[str]
    reps: int = 5
    max_reps: int = 0  # --max-reps: more repetitions (doubling) until the verdict is settled
    trace_dir: Path | None = None
    json_path: str | None = None
    gpu: str | None = None  # None: the script's own choice, else rlscope's default
    backend: bool = True
    tolerance_total: float = 0.05
    tolerance_op: float = 0.08
    calibration: str | None = None
    calibrate: bool = True
    warmup: bool = True
    verbose: bool = False
    session: dict[str, Any] = field(default_factory=dict)  # --set KEY=VALUE: rlscope.profile options
    cpus: frozenset[int] | None = None  # --cpus: every run pinned to these CPUs
    time_limit: float | None = None  # --time-limit: start no repetition that would end past it (seconds)
    twin: bool = False  # --twin: timed and profiled runs side by side, in turns on one core
    turn_ms: float = TURN_MS
    speed_probe: bool = True  # plain runs: sample each run's main-thread speed (speed_probe.py)
    merge: tuple[str, ...] = ()  # --merge: pool these results' repetitions instead of running (merge.py)


def _cpu_list(cpus: Iterable[int]) -> str:
    """CPUs as ranges, e.g. ``0-3,6``."""
    out: list[str] = []
    for _, group in itertools.groupby(enumerate(sorted(cpus)), lambda ic: ic[1] - ic[0]):
        ids = [c for _, c in group]
        out.append(f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0]))
    return ",".join(out)
