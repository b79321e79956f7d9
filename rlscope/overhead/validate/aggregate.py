"""The plain timers' arithmetic: inclusive and exclusive time per operation from scope events,
less what the timers themselves cost.

A timed child run (:mod:`rlscope.overhead.validate.child`) feeds annotate's event rows into a
:class:`TimerAggregate`; the parent takes the timers' own cost off (:func:`corrected_timers`,
:func:`timer_cost_s`) with the per-boundary costs measured apart
(:func:`rlscope.overhead.validate.child.measure_timer_costs`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from rlscope.trace import schema as S

# timed runs: each operation's median exclusive time per block of this length, the unprofiled-side
# counterpart of the profiled runs' light windows (windows.light_quantiles)
BLOCK_NS = 250_000_000
MIN_BLOCK_INSTANCES = 5


def quantiles3(values: list[float]) -> list[float]:
    """10th, 50th and 90th percentiles (linear interpolation, as numpy's default)."""
    v = sorted(values)

    def q(p: float) -> float:
        x = p * (len(v) - 1)
        i = int(x)
        return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (x - i)

    return [q(0.1), q(0.5), q(0.9)]


class TimerAggregate:
    """Inclusive/exclusive nanoseconds per operation from scope events, plus what to subtract later.

    Nesting is per thread and exclusive time goes to the innermost operation, as in rlscope's
    analyzer; a recursive instance (same name already open) adds no inclusive time. Besides the
    raw sums it counts the timer boundaries nested in each operation, so that their cost, measured
    apart (:func:`measure_timer_costs`), can be taken off (:func:`corrected_timers`).
    """

    # per-name counters (list positions)
    FIELDS = (
        "calls",
        "exclusive_ns",
        "direct_ops",  # child operations closed directly inside (their cost outside them lands here)
        "direct_phase_events",
        "direct_cat_events",
        "inclusive_calls",  # non-recursive instances
        "inclusive_ns",
        "nested_ops",  # operations closed anywhere inside the non-recursive instances
        "nested_phase_events",
        "nested_cat_events",
    )

    def __init__(self) -> None:
        self.ops: dict[int, list[int]] = {}
        # per name: the exclusive times of the current block, and the medians of the blocks so far
        # (the machine's speed over the run, to set beside the light windows': block_quantiles)
        self._block: dict[int, tuple[int, list[int]]] = {}
        self.block_medians: dict[int, list[tuple[float, int]]] = {}  # (median, instances) per block
        # thread -> [frames, closed op pairs, phase events, category events, paused ns]
        self._threads: dict[int, list[Any]] = {}
        self.measured_ns = 0  # what measured boundaries cost, taken off as pauses (feed)
        self.measured_boundaries = 0
        self.paused_ns = 0  # timer bookkeeping (folds, twin hand-overs), taken off as pauses (pause)

    def _thread(self, thread: int) -> list[Any]:
        th = self._threads.get(thread)
        if th is None:
            th = self._threads[thread] = [[], 0, 0, 0, 0]
        return th

    def feed(self, events: Iterable[Sequence[int]]) -> None:
        """Fold annotate's event rows ``(ts, thread, kind, inst, parent, name, flags[, cost])`` in.

        ``cost``: what the boundary measured it cost (collectors/scope_native.c; 0: not measured).
        Taken off as a pause at the side of the timestamp where it was paid, so no operation counts
        it: ``pre`` before the boundary's state change, ``post`` after it. ``measured_ns`` and
        ``measured_boundaries`` add them up, for :func:`measure_timer_costs`.
        """
        for row in events:
            ts, thread, kind, inst, _parent, nid, flags = row[:7]
            cost = row[7] if len(row) > 7 else 0
            th = self._thread(thread)
            pre = post = 0
            if cost > 0:
                pre, post = S.unpack_cost(cost)
                th[4] += pre
                self.measured_ns += pre + post
                self.measured_boundaries += 1
            frames = th[0]
            if kind == S.OP_BEGIN:
                if inst < 0:  # the C timer path writes no instance ids: recursion by name
                    flags = S.FLAG_RECURSIVE if any(f[1] == nid for f in frames) else 0
                # frame: inst, name, begin, ops0, phase0, cat0, paused0, child_incl, d_ops, d_ph, d_cat, rec
                frames.append(
                    [inst, nid, ts, th[1], th[2], th[3], th[4], 0, 0, 0, 0, flags & S.FLAG_RECURSIVE]
                )
            elif kind == S.OP_END:
                # an end closes its own instance, or (no ids) the innermost open one of its name
                key, want = (0, inst) if inst >= 0 else (1, nid)
                if any(f[key] == want for f in frames):  # else: opened before this profile started
                    while True:
                        f = frames.pop()
                        self._close(th, f, ts)
                        if f[key] == want:
                            break
            elif kind in (S.PHASE_BEGIN, S.PHASE_END):
                th[2] += 1
                if frames:
                    frames[-1][9] += 1
            elif kind in (S.CAT_BEGIN, S.CAT_END):
                th[3] += 1
                if frames:
                    frames[-1][10] += 1
            th[4] += post

    def _close(self, th: list[Any], f: list[Any], end: int) -> None:
        incl = end - f[2] - (th[4] - f[6])
        o = self.ops.get(f[1])
        if o is None:
            o = self.ops[f[1]] = [0] * len(self.FIELDS)
        o[0] += 1
        o[1] += incl - f[7]
        self._add_to_block(f[1], end, incl - f[7])
        o[2] += f[8]
        o[3] += f[9]
        o[4] += f[10]
        if not f[11]:
            o[5] += 1
            o[6] += incl
            o[7] += th[1] - f[3]
            o[8] += th[2] - f[4]
            o[9] += th[3] - f[5]
        th[1] += 1
        frames = th[0]
        if frames:
            frames[-1][7] += incl
            frames[-1][8] += 1

    def _add_to_block(self, nid: int, end: int, excl: int) -> None:
        block = end // BLOCK_NS
        cur = self._block.get(nid)
        if cur is None or cur[0] != block:
            if cur is not None:
                self._fold(nid, cur[1])
            cur = self._block[nid] = (block, [])
        cur[1].append(excl)

    def _fold(self, nid: int, times: list[int]) -> None:
        if len(times) >= MIN_BLOCK_INSTANCES:
            self.block_medians.setdefault(nid, []).append((float(statistics.median(times)), len(times)))

    def _fold_open(self) -> None:
        """Fold every operation's current (last) block."""
        for nid, (_, times) in self._block.items():
            self._fold(nid, times)
        self._block.clear()

    def block_quantiles(self, names: list[str]) -> dict[str, list[float]]:
        """Per operation name with 3 blocks or more: the 10th, 50th and 90th percentiles of its
        blocks' median exclusive ns."""
        return {
            name: quantiles3([m for m, _ in blocks])
            for name, blocks in self.block_samples(names).items()
            if len(blocks) >= 3
        }

    def block_samples(self, names: list[str]) -> dict[str, list[list[float]]]:
        """Per operation name: ``[median exclusive ns, instances]`` of each block, for
        :mod:`rlscope.overhead.validate.speed_match`."""
        self._fold_open()
        out = {}
        for nid, blocks in self.block_medians.items():
            name = names[nid] if nid < len(names) else f"<name {nid}>"
            out[name] = [[m, float(n)] for m, n in blocks]
        return out

    def boundary_counts(self) -> dict[str, int]:
        """Boundaries folded in so far, by kind: what the timers' own dispatch cost adds up to
        over the run (validate's twin runs take it off the run's total)."""
        th = list(self._threads.values())
        return {
            "scope_pairs": sum(t[1] for t in th),
            "phase_events": sum(t[2] for t in th),
            "cat_events": sum(t[3] for t in th),
            "measured_ns": self.measured_ns,
        }

    def pause(self, thread: int, ns: int) -> None:
        """``ns`` of timer bookkeeping on ``thread``: not the job's time, taken off the open operations."""
        self._thread(thread)[4] += ns
        self.paused_ns += ns

    def close_all(self, end: int) -> None:
        """Close operations still open (a session stopped inside them), as Session.stop does."""
        for th in self._threads.values():
            while th[0]:
                self._close(th, th[0].pop(), end)

    def counters(self, names: list[str]) -> dict[str, dict[str, int]]:
        """Per operation name (several name ids may share one after a fork), counter name -> value."""
        out: dict[str, dict[str, int]] = {}
        for nid, vals in self.ops.items():
            name = names[nid] if nid < len(names) else f"<name {nid}>"
            acc = out.setdefault(name, dict.fromkeys(self.FIELDS, 0))
            for k, v in zip(self.FIELDS, vals, strict=True):
                acc[k] += v
        return out


def corrected_timers(counters: dict[str, dict[str, int]], costs: dict[str, float]) -> dict[str, Any]:
    """Seconds per operation from a child's counters, less the timers' own cost inside each.

    An operation's own boundaries leave ``inside`` in its interval; each operation nested in it
    leaves a whole ``pair`` in its inclusive time and ``pair - inside`` in its exclusive time;
    phase and category boundaries half a pair each.
    """
    pair, inside, cat = costs["pair"], costs["inside"], costs["category"]
    out = {}
    for name, c in counters.items():
        incl_cost = (
            c["inclusive_calls"] * inside
            + c["nested_ops"] * pair
            + c["nested_phase_events"] * pair / 2
            + c["nested_cat_events"] * cat / 2
        )
        excl_cost = (
            c["calls"] * inside
            + c["direct_ops"] * (pair - inside)
            + c["direct_phase_events"] * pair / 2
            + c["direct_cat_events"] * cat / 2
        )
        out[name] = {
            "inclusive_s": max(0.0, c["inclusive_ns"] - incl_cost) / 1e9,
            "exclusive_s": max(0.0, c["exclusive_ns"] - excl_cost) / 1e9,
            "calls": c["calls"],
            "raw_inclusive_s": c["inclusive_ns"] / 1e9,
            "raw_exclusive_s": c["exclusive_ns"] / 1e9,
        }
    return out


def timer_cost_s(record: dict[str, Any], costs: dict[str, float]) -> float:
    """Seconds a timed run's boundaries added to its whole run: what they measured themselves and
    the dispatch around each (:func:`measure_timer_costs`). 0 for a run without timers."""
    b = record.get("boundaries") or {}
    pair, cat = costs.get("pair", 0.0), costs.get("category", 0.0)
    ns = (
        b.get("measured_ns", 0)
        + b.get("scope_pairs", 0) * pair
        + b.get("phase_events", 0) * pair / 2
        + b.get("cat_events", 0) * cat / 2
    )
    return ns / 1e9
