"""Device->host syncs every call: ``.cpu()``, ``.item()``, ``.numpy()`` of a GPU tensor inside a step.

Each one copies to the host and blocks until the GPU has finished everything queued before it, so the
CPU cannot run ahead and the GPU idles while the CPU catches up. One copy per step is the floor when a
CPU simulator needs the actions; more are usually values or statistics that could wait.
"""

from __future__ import annotations

from rlscope.analysis.advice.base import Facts, Finding, count, secs

__all__ = ["MERGEABLE_PER_CALL", "MIN_TRACED_CALLS", "SYNCS_PER_CALL", "device_to_host_sync"]

MIN_TRACED_CALLS = 10
"""Operation instances with CUDA work that GPU tracing must have seen before "every call" means much."""

SYNCS_PER_CALL = 1.0
"""Device->host copies per traced call at or above which the operation syncs every call (every step)."""

MERGEABLE_PER_CALL = 1.5
"""Copies per call from which some can be merged or deferred (more than the one a CPU env needs)."""


def device_to_host_sync(facts: Facts) -> list[Finding]:
    """Per operation that copies device->host on every call and waits for it.

    Time at stake: the operation's time in synchronizing CUDA API calls over the run (the copies' calls
    and explicit synchronizes): the time the host waits for the device there, which work kept on the
    device, or synced once per rollout, overlaps with the GPU instead.
    """
    out = []
    for name, op in facts.operations():
        c = facts.calls(name)
        if c is None or c.instances < MIN_TRACED_CALLS or c.sync_s <= 0:
            continue
        per_call = c.dtoh_copies / c.instances
        if per_call < SYNCS_PER_CALL:
            continue
        waited = facts.api_run_s(name, op, c.sync_s)
        top = sorted(c.sync_names.items(), key=lambda kv: -kv[1][1])[:3]
        named = ", ".join(f"{n} {count(k)}x {secs(s)}" for n, (k, s) in top)
        evidence = (
            f"{name}: {per_call:.1f} device->host copies and {c.sync_calls / c.instances:.1f} synchronizing"
            f" calls per call over {count(c.instances)} traced calls ({named}); the host waited"
            f" {secs(waited)} in them over the run"
        )
        if per_call >= MERGEABLE_PER_CALL:
            change = (
                f"{per_call:.0f} copies a call: fetch what the step needs in one copy (stack actions, values"
                " and log-probs, then one .cpu()), and keep values needed only later on the GPU until the"
                " rollout ends (no .item() per step)"
            )
        else:
            change = (
                "keep the step on the device: a GPU simulator (docs/simulators.md) or an on-device rollout"
                " buffer needs no copy per step; else copy with non_blocking=True into pinned memory and"
                " sync once, where the value is used"
            )
        out.append(Finding("device_to_host_sync", name, evidence, waited, change))
    return out
