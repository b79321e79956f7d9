"""What a process's trace says of it (its metadata): identity, versions, machine, options, clock anchors."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from rlscope._version import __version__
from rlscope._version import package_version as _package_version
from rlscope.runtime import hooks
from rlscope.trace import schema as S


def _rank() -> str:
    for var in ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if var in os.environ:
            return os.environ[var]
    return ""


def stack_info() -> dict[str, str]:
    """Machine and CUDA facts that key overhead calibrations (correct/calibration.py); no torch import."""
    import platform

    from rlscope.overhead.correct.calibration import cpu_model, gpu_model, torch_cuda_version

    return {
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "gpu": gpu_model(),
        "cuda": torch_cuda_version(),
    }


def _cgroup_cpu_quota() -> float | None:
    """The CPUs a cgroup's quota allows this process (a container's ``--cpus``), None when unlimited or
    unknown: cgroup v2's ``cpu.max``, else v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``."""
    from pathlib import Path

    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        v1 = Path("/sys/fs/cgroup/cpu")
        quota_us = int((v1 / "cpu.cfs_quota_us").read_text())
        period_us = int((v1 / "cpu.cfs_period_us").read_text())
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None


def cpu_facts() -> dict[str, str]:
    """What bounds torch's intra-op threads (advice: ``intra_op_oversubscription``): the cores this
    process may use (its affinity, capped by a cgroup quota: torch's default thread count ignores both),
    the thread variables torch reads at import, and torch's thread count if torch is imported already
    (a program that profiles itself; under ``rlscope run`` torch comes later, and a program may set the
    count after the session starts, so this reading is of the start only). No torch import."""
    import math

    count = os.cpu_count() or 0
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = count
    quota = _cgroup_cpu_quota()
    usable = min(affinity, math.ceil(quota)) if quota else affinity
    torch = sys.modules.get("torch")
    threads = ""
    if torch is not None:
        try:
            threads = str(torch.get_num_threads())
        except Exception:  # a torch half imported, or one without the call: no reading
            threads = ""
    return {
        "cpu.count": str(count),
        "cpu.affinity": str(affinity),
        "cpu.quota": f"{quota:g}" if quota else "",
        "cpu.usable": str(usable),
        **{k.lower(): os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ},
        "torch.intra_op_threads.start": threads,
    }


def end_facts(process_dir: Path | None) -> None:
    """Write what is known only at the session's end beside its streams (schema.END_META_FILE): the
    intra-op threads torch ran with, which a program sets after importing it (after the session
    started). Never raises: the trace is written already, a missing fact only silences advice."""
    torch = sys.modules.get("torch")
    if process_dir is None or torch is None:
        return
    try:
        facts = {"torch.intra_op_threads.end": str(torch.get_num_threads())}
        (process_dir / S.END_META_FILE).write_text(json.dumps(facts))
    except Exception:  # a torch half torn down at exit, a full disk: the fact is lost, nothing else
        return


def process_metadata(options: dict[str, Any], origin_ns: int, start_ns: int, unix_ns: int) -> dict[str, str]:
    """The metadata of this process's trace: who it is, what it runs on, how it was profiled, and the
    pair of clock readings (``start_ns`` on the events' clock, ``unix_ns``) that maps its clock onto
    every other process's."""
    from rlscope.collectors import scope_native

    return {
        "rlscope.version": __version__,
        "host": socket.gethostname(),
        "pid": str(os.getpid()),
        "ppid": str(os.getppid()),
        # the profiled process that started this one, whatever became of it: a helper spawned
        # just before its parent exits reads ppid 1 (rlscope.trace.reader.parent_pid)
        "run_parent": os.environ.get(hooks.RUN_PARENT_ENV, ""),
        "rank": _rank(),
        # torchrun / torch.distributed: which rank of how many (rlscope.analysis.roles labels ranks)
        **{k.lower(): os.environ[k] for k in ("LOCAL_RANK", "WORLD_SIZE") if k in os.environ},
        "python": sys.version.split()[0],
        "torch": _package_version("torch"),
        **stack_info(),
        **cpu_facts(),
        "gymnasium": _package_version("gymnasium"),
        "clock": "perf_counter_ns",
        # native | python: the scope methods a session here runs (a calibration key field)
        "scopes": scope_native.calibration_key(),
        "clock_anchor_ns": str(start_ns),
        "clock_anchor_unix_ns": str(unix_ns),
        "argv": json.dumps(sys.argv),
        "orig_argv": json.dumps(getattr(sys, "orig_argv", sys.argv)),  # the interpreter's arguments too
        "options": json.dumps(options),
        # the detail schedule's origin (rlscope/trace/detail.py), on the events' clock
        "detail_origin_ns": str(origin_ns),
    }
