"""Per-event cost of rlscope's annotations: inactive scope, active scope, simulator wrapper, backend op.

    python benchmarks/scope_overhead.py [--n 1000000] [--json FILE]

Prints nanoseconds per enter+exit pair (the fastest of 7 repeats), measured with the same loop with and
without the annotation, so the loop's own cost is subtracted; the backend op is one ``torch.add`` on
4 floats, recorded by the default (native) recorder. ``--json``: the same figures, keyed as
benchmarks/baseline.json's ``costs.*``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import rlscope


def _time(fn, n: int, repeats: int = 7) -> float:
    """The fastest of ``repeats`` timings, ns per call: other processes on a shared machine only add time."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn(n)
        samples.append((time.perf_counter_ns() - t0) / n)
    return min(samples)


def loop_empty(n: int) -> None:
    for _ in range(n):
        pass


def loop_scope(n: int) -> None:
    scope = rlscope.scope
    for _ in range(n):
        with scope("inference"):
            pass


def loop_simulator(n: int) -> None:
    sim = rlscope.simulator()
    for _ in range(n):
        with sim:
            pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args()
    n = args.n
    base = _time(loop_empty, n)
    rows = [("scope_inactive_ns", "inactive scope (no session)", _time(loop_scope, n) - base)]
    with tempfile.TemporaryDirectory() as d:
        with rlscope.profile(d, backend=False):
            rows.append(("scope_active_ns", "active scope (enter+exit)", _time(loop_scope, n // 5) - base))
            rows.append(
                ("simulator_active_ns", "active simulator category", _time(loop_simulator, n // 5) - base)
            )
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            x = torch.ones(4)
            m = 20_000

            def loop_torch(k: int) -> None:
                for _ in range(k):
                    torch.add(x, 1)

            plain, recorded = [], []
            for r in range(7):  # interleaved: a drift of the machine's speed hits both alike
                plain.append(_time(loop_torch, m, 1))
                with rlscope.profile(f"{d}/b{r}", backend=True, windows=False):  # recording on throughout
                    recorded.append(_time(loop_torch, m, 1))
            plain, recorded = min(plain), min(recorded)
            rows.append(("torch_add_unprofiled_ns", "torch.add (1 op), unprofiled", plain))
            rows.append(("backend_op_ns", "backend recording per torch op", recorded - plain))
    print(f"{'what':40s} {'ns per event pair':>18s}")
    for _, name, ns in rows:
        print(f"{name:40s} {ns:18.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({key: round(ns, 1) for key, _, ns in rows}, f, indent=1)


if __name__ == "__main__":
    main()
