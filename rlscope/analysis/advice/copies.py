"""Pageable host<->device copies: copies from or to ordinary (pageable) host memory.

The driver stages them through a pinned bounce buffer, at lower bandwidth, and the calling thread
blocks for the copy (even ``cudaMemcpyAsync``); from pinned memory the copy is asynchronous and runs at
full bandwidth. RL code makes them every step: ``torch.as_tensor(obs).to(device)`` from a numpy array.
"""

from __future__ import annotations

from rlscope.analysis.advice.base import Facts, Finding, count, secs

__all__ = ["MIN_PAGEABLE_COPIES", "pageable_copies"]

MIN_PAGEABLE_COPIES = 10
"""Traced pageable copies an operation needs before they are a habit of its loop, not a one-off."""


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def pageable_copies(facts: Facts) -> list[Finding]:
    """Per operation whose traced copies include pageable host memory.

    Time at stake: the run's time in the API calls that launched those copies (the host blocks in them;
    from pinned memory with ``non_blocking=True`` the call returns at once).

    Pageable copies are seen in traces whose GPU collector names them (the native CUPTI consumer's
    ``memcpy HtoD pageable``, Kineto's ``Memcpy HtoD (Pageable -> Device)``); older traces name the
    copy direction only, and the rule stays silent on them.
    """
    out = []
    for name, op in facts.operations():
        c = facts.calls(name)
        if c is None or c.pageable_copies < MIN_PAGEABLE_COPIES or c.pageable_api_s <= 0:
            continue
        blocked = facts.api_run_s(name, op, c.pageable_api_s)
        per_call = f", {c.pageable_copies / c.instances:.1f} a call" if c.instances else ""
        evidence = (
            f"{name}: {count(c.pageable_copies)} traced copies between pageable host memory and the GPU"
            f" ({_bytes(c.pageable_bytes)}{per_call}, {secs(c.pageable_copy_s)} on the GPU); the calls that"
            f" made them took {secs(c.pageable_api_s)} traced, {secs(blocked)} over the run"
        )
        change = (
            "copy through pinned memory: allocate the host tensor once with pin_memory=True, fill it in"
            " place (copy_ from the numpy array) and move it with .to(device, non_blocking=True)"
        )
        out.append(Finding("pageable_copies", name, evidence, blocked, change))
    return out
