"""The automatic operations' cost per module call: rlscope's wrapper of ``nn.Module.__call__``.

Under automatic operations every module call (submodules too) runs rlscope's wrapper
(rlscope/runtime/auto_ops.py): Python, paid in every window, inside the operation that makes the
call. The trace counts the calls per operation (collectors/module_calls.py) and the correction
removes this cost per call (rlscope/overhead/correct/module_calls.py).
"""

from __future__ import annotations

import shutil
import statistics
import time
from typing import Any

import rlscope
from rlscope.overhead.calibrate.rounds import Plan, Stable, _with_reference, until_stable
from rlscope.overhead.calibrate.workloads import ABBA, _rl_units, _Traces

# timings a round: each a quad of the RL unit with the wrapper on, off, off, on
QUADS = 16


def measure_module_call(torch: Any, plan: Plan, traces: _Traces) -> tuple[Stable, dict[str, float]]:
    """Per module call: the acting unit of a synthetic actor-critic loop (``_rl_units``' ``act``:
    four steps of a no-grad forward of two 64-64 MLPs, 12 module calls a step, and a Categorical
    sample), inside a user's ``inference`` scope (so no automatic operation opens: the wrapper alone),
    with the wrapper put on and taken off between timings in one session: quads on, off, off, on,
    thread CPU time, the median quad's difference over the calls the wrapper counted.

    In an RL loop, not a tight loop of empty modules: there the wrapper cost 840-880 ns a call on the
    2-core VM, in this unit about twice that (the loop's own work evicts what the wrapper touches,
    as it does a scope boundary's). All of it is stored inside (the call runs in the operation that
    pays for it). A Python cost, judged per ns of the reference loop and stored at the machine's
    fastest speed as the writer's is."""
    from torch.nn.modules import module as nn_module

    from rlscope.runtime import auto_ops

    act = _rl_units(torch)["act"]
    reps = max(int(4 * plan.scale), 1)  # units per timing

    def unit() -> None:
        for _ in range(reps):
            act()

    def one() -> dict[str, float]:
        s = traces.session(auto_ops=True)
        diffs, calls = [], 0
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a descheduled intra-op worker is load, not the wrapper's cost
        with s, rlscope.scope("inference"):
            wrapped = nn_module.Module.__call__
            original = getattr(wrapped, "__wrapped__", None)
            if original is None:
                raise RuntimeError("the automatic operations did not wrap nn.Module.__call__")
            try:
                unit()  # warm: the session's first calls
                for _ in range(QUADS * max(plan.timings // 4, 1)):
                    quad = []
                    for on in ABBA:
                        nn_module.Module.__call__ = wrapped if on else original
                        seen = auto_ops._tls.seen
                        c0 = time.thread_time_ns()
                        unit()
                        quad.append(float(time.thread_time_ns() - c0))
                        if on:
                            calls = auto_ops._tls.seen - seen
                    diffs.append((quad[0] + quad[3] - quad[1] - quad[2]) / 2)
            finally:
                nn_module.Module.__call__ = wrapped
                torch.set_num_threads(threads)
        shutil.rmtree(s.trace_dir, ignore_errors=True)
        if not calls:
            raise RuntimeError("the wrapper counted no module call")
        return {"total": statistics.median(diffs) / calls, "calls": float(calls)}

    one()  # warm-up: the wrapper's first calls, caches
    # the median rule, as the backend's (every round counts; stable once the median is known to
    # TOLERANCE): a round's quads move 15-30% from one round to the next beside a busy core, and k
    # rounds in a row within 20% then came too rarely (refused in one calibration of three)
    st = until_stable(
        _with_reference(one, "total"), "per_ref", plan.k, 2 * plan.budget_s, cost_field="total", rule="median"
    )
    return st, {"inside": st.cost, "outside": 0.0, "total": st.cost, "calls_per_unit": st.median("calls")}
