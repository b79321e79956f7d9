"""``run_calibration``: every cost measured until stable, and the calibration file's contents.

Method (docs/overhead.md): every cost is a differential measurement (:mod:`.workloads`), repeated
in rounds until it is stable (:mod:`.rounds`), stored or refused (:mod:`.store`).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlscope.overhead.calibrate import measure, module_calls
from rlscope.overhead.calibrate.rounds import FULL, QUICK, TOLERANCE, Stable, _c_methods, _ref
from rlscope.overhead.calibrate.store import _finite, _ns, at_speed, backend_at_speed, figure, refusal
from rlscope.overhead.calibrate.workloads import _Traces
from rlscope.overhead.correct import calibration as cal_mod


def _stderr(msg: str) -> None:
    print(f"rlscope calibrate: {msg}", file=sys.stderr, flush=True)


def run_calibration(
    rounds: int | None = None,
    scale: float | None = None,
    gpu: bool = True,
    log: Callable[[str], None] = print,
    *,
    quick: bool = False,
    budget_s: float | None = None,
    warn: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """Measure every event cost until stable; the calibration dict (overhead.correct.calibration).

    ``rounds``: round estimates that must agree (k, default 5; 4 with ``quick``). ``scale``: loop
    sizes. ``budget_s``: seconds per cost before an unstable one is refused. A refused cost is
    left out of ``costs_ns``, listed in ``refused`` and reported through ``warn`` (one line each).
    """
    base = QUICK if quick else FULL
    plan = dataclasses.replace(
        base,
        k=base.k if rounds is None else rounds,
        scale=base.scale if scale is None else scale,
        budget_s=base.budget_s if budget_s is None else budget_s,
    )
    t0 = time.perf_counter()
    costs: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    refused: list[dict[str, Any]] = []
    rounds_ns: dict[str, list[float | None]] = {}  # every round's estimate, for whoever doubts a cost
    kept: dict[str, tuple[Stable, dict[str, float]]] = {}
    refs: list[float] = []  # the reference loop of every round: the machine's speed over the calibration

    def keep(entry: str, measured: tuple[Stable, dict[str, float]]) -> None:
        st, cost = measured
        refs.extend(r["ref"] for r in st.rounds if "ref" in r)
        rounds_ns[entry] = [_finite(v, 1) for v in st.estimates]
        why = refusal(entry, st)
        if why is None:
            kept[entry] = (st, cost)
            return
        warn(why)
        refused.append(
            {
                "entry": entry,
                "reason": why,
                "estimates_ns": [_finite(v, 1) for v in st.estimates[-st.k :]],
                "spread": _finite(st.spread, 4),
                "ref_ns": _finite(_ref(st), 1),
            }
        )

    with tempfile.TemporaryDirectory(prefix="rlscope-calibrate-") as tmp:
        traces = _Traces(Path(tmp))
        log("scopes ...")
        boundaries = {"scope": measure.measure_scope(plan, traces, {})}
        log("simulator/category boundaries ...")
        boundaries["category"] = measure.measure_category(plan, traces)
        for st, _ in boundaries.values():
            refs.extend(r["ref"] for r in st.rounds if "ref" in r)
        if _c_methods():
            # each flush of the native event buffer times itself in the run (its end row's cost);
            # a per-row cost measured here varies by +-25% from one process to the next
            skipped["writer"] = "measured in the run: each flush times itself (native event buffer)"
        else:
            log("trace writer ...")
            keep("writer", measure.measure_writer(plan, traces))
        torch = _import_torch()
        if torch is None:
            skipped["backend"] = skipped["module_call"] = "torch is not installed"
        else:
            log("backend-op recording ...")
            # the speed record is read again inside (_until_stable_at_speed): only this run's refs here
            measured = measure.measure_backend(torch, plan, traces, min(refs, default=None))
            measured = measure._measure_backend_again(
                measured, lambda fastest: measure.measure_backend(torch, plan, traces, fastest), refs, log
            )
            keep("backend", measured)
            log("automatic operations' module calls ...")
            keep("module_call", module_calls.measure_module_call(torch, plan, traces))
        measure._measure_boundaries_again(boundaries, plan, traces, refs, log)
        for entry, measured in boundaries.items():
            keep(entry, measured)
        cuda = torch is not None and gpu and torch.cuda.is_available()
        if not cuda:
            why = "no CUDA GPU" if gpu else "--no-gpu"
            for kind in ("scope_nvtx", "cuda_api.native", "cuda_api.kineto", "nvml", "memory"):
                skipped[kind] = why
        else:
            log("GPU memory recorder ...")
            try:
                measured = measure.measure_memory(torch, plan)
            except Exception as e:  # no tracker here (no CUDA headers, no compiler): not calibrated
                skipped["memory"] = f"{type(e).__name__}: {e}"
            else:
                keep("memory", measured)
            log("scopes with NVTX ranges ...")
            keep(
                "scope_nvtx", measure.measure_scope(plan, traces, {"gpu": "auto", "nvml_hz": 0, "nvtx": True})
            )
            for mode in ("cupti", "kineto"):
                name = f"cuda_api.{measure._collector_name(mode)}"
                log(f"CUDA API calls under the {measure._collector_name(mode)} collector ...")
                try:
                    measured = measure.measure_cuda_api(torch, plan, traces, mode)
                except Exception as e:  # a collector that cannot run here is not calibrated
                    skipped[name] = f"{type(e).__name__}: {e}"
                else:
                    keep(name, measured)
            log("NVML sampler ...")
            try:
                measured = measure.measure_nvml(plan, traces)
            except Exception as e:
                skipped["nvml"] = f"{type(e).__name__}: {e}"
            else:
                keep("nvml", measured)
    # costs of Python code in ns at the fastest the machine ran Python: the host's speed switches
    # between regimes for seconds at a time; its fastest is reached in nearly every calibration,
    # its mix of regimes is not the same in any two. The fastest seen in this calibration, or the
    # machine's record of earlier ones where that is faster (a calibration held in the slow regime
    # throughout: calibration.machine_fastest_ref)
    run_fastest = min(refs) if refs else float("nan")
    fastest_ref, record = (
        cal_mod.machine_fastest_ref(run_fastest) if math.isfinite(run_fastest) else (run_fastest, None)
    )
    if record is not None and record < run_fastest * (1 - TOLERANCE):
        log(
            f"the reference loop ran at {run_fastest:.0f} ns at best here, this machine's record is"
            f" {record:.0f} ns: costs of Python code stored at the record's speed"
        )
    for entry, (st, cost) in kept.items():
        if st.field == "per_ref" and math.isfinite(fastest_ref):
            cost = at_speed(cost, st, fastest_ref)
        elif entry == "backend" and math.isfinite(fastest_ref):
            cost = backend_at_speed(cost, st, fastest_ref)
        costs[entry] = {**cost, "spread": st.spread, "rounds": float(len(st.rounds))}
        if "ref_ns" not in cost and math.isfinite(_ref(st)):
            costs[entry]["ref_ns"] = _ref(st)
        log(f"{entry}: {_ns(figure(cost))} ({len(st.rounds)} rounds, spread {st.spread:.0%})")
    return {
        "schema": cal_mod.SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - t0, 1),
        "key": cal_mod.current_key(),
        "method": (
            "differential micro-workloads in rounds (per-round minimum of short interleaved timings) until"
            f" the last {plan.k} agree within {TOLERANCE:.0%}; split inside/outside by the analyzer"
            " (docs/overhead.md)"
        ),
        "reps": plan.k,
        "plan": dataclasses.asdict(plan),
        "costs_ns": {
            k: {f: round(v, 4 if f == "spread" else 1) for f, v in c.items()} for k, c in costs.items()
        },
        "refused": refused,
        "skipped": skipped,
        "rounds_ns": rounds_ns,
        # ns per iteration of the reference loop: the fastest of this calibration, this machine's
        # record before it (None: none yet), and the one the costs of Python code are stored at
        "reference_ns": {
            "run_fastest": _finite(run_fastest, 1),
            "machine_record": None if record is None else _finite(record, 1),
            "used": _finite(fastest_ref, 1),
        },
    }


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch
