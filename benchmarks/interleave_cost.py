"""What scope boundaries cost the job's own code between them, measured in one process.

    python benchmarks/interleave_cost.py [--rounds 40] [--iters 250] [--device cpu] [--json FILE]

A boundary's cost in a tight loop (``rlscope calibrate``) and its cost inside the user's loop differ:
between two boundaries the job runs its own code, which evicts the boundary's data and code from the
caches, and the boundary then evicts the job's. The boundaries time themselves, so the first part is
in the trace; the second is paid by the job's code after the boundary and is in nobody's clock.
This measures both on `loops.py`'s eager CartPole step (16 envs, three scopes per ~250 us iteration
on the VM), each configuration in short blocks of ``--iters`` iterations (~70 ms: the machine's speed drifts
between seconds, not within a block), rotated over ``--rounds`` rounds; traces are analyzed after:

- ``bare``: the step with no scope calls at all;
- ``inactive``: the step with its three scopes and no session: what the unprofiled run executes,
  the truth a corrected figure is held to;
- ``timers``: the step with three plain timers (two clock reads and a list append each), the shape
  of ``rlscope validate``'s timer mode;
- ``vtimers``: the step under `rlscope validate`'s timer mode (``TimerSession``): the block's
  time, and its per-operation truth summed over the three operations (the timers' cost taken off);
- ``session``: the step in a session with scopes only (no GPU, backend ops or memory recorder): raw,
  and corrected by the analyzer (raw minus what the correction removed, per iteration);
- ``quiet``: the same session with its writer's thread asleep through the block (no flush, no
  check of the event buffer): what the thread beside the job costs it;
- ``full``: the session on the full C path (``RLSCOPE_LEAN_SCOPES=0``: per-thread state in the
  session's Python objects) instead of the lean one, raw and corrected (each path calibrated);
- ``tight``: empty scope pairs back to back, in a session (lean path and full C path) and without
  one (per pair).

Reported: per-iteration medians over rounds, each configuration's ratio to the same round's
``inactive`` block with the 90% interval of its median (order statistics, as `rlscope validate`'s
verdicts), and per scope pair the in-loop cost of an active pair, its tight-loop cost, what the
correction removed, and what it left. Results: BENCHMARKS.md §9, thirteenth session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable


def steps(device: str) -> dict[str, Callable[[], None]]:
    """The eager CartPole step three ways: bare, in rlscope scopes, in plain timers."""
    import torch

    import rlscope
    from rlscope.workloads import cartpole as cp

    env = cp.make_vec("torch", 16, device=device)
    weight = torch.tensor([[0.0, 0.1], [0.0, 0.5], [0.0, 2.0], [0.0, 1.0]], device=device)
    state = {"obs": env.reset(seed=0)[0], "total": torch.zeros((), device=device)}
    policy, step, stats = rlscope.scope("policy"), rlscope.scope("step"), rlscope.scope("stats")
    rows: list[tuple[int, int, int]] = []
    clock = time.perf_counter_ns

    def bare() -> None:
        action = (state["obs"] @ weight).argmax(dim=-1)
        out = env.step(action)
        state["obs"] = out[0]
        state["total"] += out[1].sum()

    def scoped() -> None:
        with policy:
            action = (state["obs"] @ weight).argmax(dim=-1)
        with step:
            out = env.step(action)
            state["obs"] = out[0]
        with stats:
            state["total"] += out[1].sum()

    def timed() -> None:
        t = clock()
        action = (state["obs"] @ weight).argmax(dim=-1)
        rows.append((0, t, clock()))
        t = clock()
        out = env.step(action)
        state["obs"] = out[0]
        rows.append((1, t, clock()))
        t = clock()
        state["total"] += out[1].sum()
        rows.append((2, t, clock()))
        if len(rows) > 300_000:
            rows.clear()

    return {"bare": bare, "scoped": scoped, "timed": timed}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--iters", type=int, default=250)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    os.environ["RLSCOPE_GPU_MEMORY"] = "0"  # scopes only: the memory recorder is measured elsewhere
    import rlscope
    from rlscope import annotate
    from rlscope.analysis import analyze
    from rlscope.collectors import scope_native
    from rlscope.overhead.calibrate.cli import ensure_calibration
    from rlscope.overhead.validate import aggregate as validate_aggregate
    from rlscope.overhead.validate import child as validate_child
    from rlscope.overhead.validate.verdict import median_interval
    from rlscope.trace import writer

    ensure_calibration(quiet=True)  # as `rlscope run` does: the residual costs need the machine's
    os.environ[scope_native.LEAN_ENV] = "0"
    ensure_calibration(quiet=True)  # the full C path's, for ``full``
    del os.environ[scope_native.LEAN_ENV]
    fns = steps(args.device)
    opts = {"gpu": False, "backend": False, "nvml_hz": 0}
    empty = rlscope.scope("empty")

    def block(fn: Callable[[], None], n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    def pair() -> None:
        with empty:
            pass

    def in_session(
        tmp: str, fn: Callable[[], None], n: int, quiet: bool = False, full: bool = False
    ) -> float:
        """Seconds per call of ``fn`` in a scopes-only session (trace in ``tmp``, analyzed later).

        ``quiet``: the writer's thread sleeps through the block (no flush, no buffer check);
        ``full``: the session keeps the full C path."""
        ahead = writer.AHEAD_CHECK_S
        if quiet:
            writer.AHEAD_CHECK_S = 1e6
        if full:
            os.environ[scope_native.LEAN_ENV] = "0"
        session = rlscope.profile(tmp, **opts, **({"flush_interval": 1e6} if quiet else {})).start()
        os.environ.pop(scope_native.LEAN_ENV, None)
        writer.AHEAD_CHECK_S = ahead
        raw = block(fn, n)
        session.stop()
        return raw

    timer_costs = validate_child.measure_timer_costs()

    def validate_timers(fn: Callable[[], None], n: int) -> tuple[float, float]:
        """(block, truth) seconds per call under `rlscope validate`'s timer mode: the block's time,
        and the sum of its operations' inclusive times less the timers' cost (its per-operation truth)."""
        agg = validate_aggregate.TimerAggregate()
        record = validate_child.ChildRecord(None, "timers")
        session = validate_child.TimerSession(record=record, aggregate=agg).start()
        raw = block(fn, n)
        session.stop()
        counters = agg.counters(list(annotate._names))
        ops = {k: counters[k] for k in ("policy", "step", "stats")}
        truth = validate_aggregate.corrected_timers(ops, timer_costs)
        return raw, sum(t["inclusive_s"] for t in truth.values()) / n

    def removed_per_call(tmp: str, n: int) -> float:
        """What the analyzer's correction removed from a session's trace, per call."""
        s = analyze(rlscope.load_trace(tmp)).summary
        assert s["corrected_for_overhead"], s["warnings"]
        return (s["raw"]["wall_s"] - s["corrected"]["wall_s"]) / n

    configs = ["bare", "inactive", "timers", "vtimers", "session", "quiet", "full", "tight"]
    rows: dict[str, list[dict[str, float]]] = {c: [] for c in configs}
    for fn in fns.values():
        block(fn, 200)  # warm-up: torch's first calls
    with tempfile.TemporaryDirectory() as tmp:
        in_session(os.path.join(tmp, "warm"), fns["scoped"], 200)  # builds/loads the C scopes
        for r in range(args.rounds):
            order = configs[r % len(configs) :] + configs[: r % len(configs)]
            for c in order:
                d = os.path.join(tmp, f"{c}-{r}")
                if c == "bare":
                    rows[c].append({"s": block(fns["bare"], args.iters)})
                elif c == "inactive":
                    rows[c].append({"s": block(fns["scoped"], args.iters)})
                elif c == "timers":
                    rows[c].append({"s": block(fns["timed"], args.iters)})
                elif c == "session":
                    rows[c].append({"s": in_session(d, fns["scoped"], args.iters)})
                elif c == "vtimers":
                    raw, truth = validate_timers(fns["scoped"], args.iters)
                    rows[c].append({"s": raw, "truth_s": truth})
                elif c == "quiet":
                    rows[c].append({"s": in_session(d, fns["scoped"], args.iters, quiet=True)})
                elif c == "full":
                    rows[c].append({"s": in_session(d, fns["scoped"], args.iters, full=True)})
                else:  # per pair, 100x the iterations: a pair is ~1000x shorter than a step
                    active = in_session(d, pair, 100 * args.iters)
                    full = in_session(d + "-full", pair, 100 * args.iters, full=True)
                    inactive = block(pair, 100 * args.iters)
                    rows[c].append({"s": active, "full_s": full, "inactive_s": inactive})
        for c in ("session", "full"):  # analyzed after the timed blocks: no analysis between them
            for r, row in enumerate(rows[c]):
                row["corrected_s"] = row["s"] - removed_per_call(os.path.join(tmp, f"{c}-{r}"), args.iters)
    med = statistics.median

    def span(xs: list[float], scale: float = 1.0, fmt: str = ".3f") -> str:
        """The median's 90% interval (order statistics, as validate's verdicts) and the range."""
        iv = median_interval(xs) or [float("nan")] * 2
        lo, hi = (f"{v * scale:{fmt}}" for v in iv)
        return f"[{lo}, {hi}] (range {min(xs) * scale:{fmt}}-{max(xs) * scale:{fmt}})"

    base = [x["s"] for x in rows["inactive"]]
    out: dict = {"device": args.device, "iters": args.iters, "rounds": args.rounds, "rows": rows}
    print(f"\nper iteration, median over {args.rounds} rounds; ratio to the same round's inactive block:")
    for c in ("bare", "inactive", "timers", "vtimers", "session", "quiet", "full"):
        xs = [x["s"] for x in rows[c]]
        ratio = [x / b for x, b in zip(xs, base, strict=True)]
        print(f"  {c:9} {med(xs) * 1e6:8.2f} us  x{med(ratio):.3f} {span(ratio)}")
        out[f"{c}_ratio"] = med(ratio)
    for c, key in (("session", "corrected"), ("full", "full_corrected")):
        cor = [x["corrected_s"] / b for x, b in zip(rows[c], base, strict=True)]
        us = med([x["corrected_s"] for x in rows[c]]) * 1e6
        print(f"  {key:9} {us:8.2f} us  x{med(cor):.3f} {span(cor)}")
        out[f"{key}_ratio"] = med(cor)
    truth = [x["truth_s"] / b for x, b in zip(rows["vtimers"], base, strict=True)]
    print(f"  validate's truth (its operations' sum) x{med(truth):.3f} {span(truth)}")
    out["vtimers_truth_ratio"] = med(truth)
    # per scope pair (three per iteration), paired per round
    in_loop = [(s["s"] - b) / 3 for s, b in zip(rows["session"], base, strict=True)]
    removed = [(s["s"] - s["corrected_s"]) / 3 for s in rows["session"]]
    left = [(s["corrected_s"] - b) / 3 for s, b in zip(rows["session"], base, strict=True)]
    tight = [t["s"] - t["inactive_s"] for t in rows["tight"]]
    tight_full = [t["full_s"] - t["inactive_s"] for t in rows["tight"]]
    inactive_loop = [(b - x["s"]) / 3 for b, x in zip(base, rows["bare"], strict=True)]
    print("per scope pair, ns (median [90% interval] over rounds):")
    for name, xs in (
        ("inactive pair in the loop (inactive - bare)", inactive_loop),
        ("active over inactive, in the loop", in_loop),
        ("active over inactive, tight loop", tight),
        ("the same on the full C path", tight_full),
        ("removed by the correction", removed),
        ("left after it", left),
    ):
        print(f"  {name:44} {med(xs) * 1e9:7.0f} {span(xs, 1e9, '.0f')}")
        out[f"{name}, ns"] = med(xs) * 1e9
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
