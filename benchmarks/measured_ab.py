"""Measured boundary costs against calibrated ones, on the same kept validation traces.

    python benchmarks/measured_ab.py OUT    (OUT: a benchmarks/cpu_matrix.sh or trust_pass.sh result
                                             folder with val_<row>.json and trace-<row>/rep-<k>)

Each profiled trace of a validation is analyzed twice: as `rlscope validate` did (each scope and
category boundary's own measured cost, plus the calibrated dispatch around it) and with
``RLSCOPE_MEASURED_COSTS=0`` (the calibrated costs for every boundary, as before boundaries measured
themselves). Both are compared, repetition by repetition, with the same references validate used
(the unprofiled run's total, the timer runs' per-operation times). The same traces, so the
difference between the two columns is the correction alone, not the machine's noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

CHECKED = 0.05  # operations above this share of the run, as validate checks them


def _errors(result: dict, figures: list[dict]) -> dict[str, list[float]]:
    rows = {r["operation"]: r for r in result["rows"]}
    out: dict[str, list[float]] = {}
    for name, row in rows.items():
        if name != "[total]" and (row.get("share") or 0) < CHECKED:
            continue
        errs = []
        for ref, fig in zip(row["reference_s"], figures, strict=True):
            got = (
                fig["corrected_wall_s"]
                if name == "[total]"
                else fig["operations"].get(name, {}).get("corrected_s")
            )
            if ref and got is not None:
                errs.append(got / ref - 1)
        out[name] = errs
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    args = p.parse_args()
    from rlscope.analysis import analyze
    from rlscope.overhead.correct.residual import MEASURED_ENV
    from rlscope.overhead.validate.runner import profiled_figures

    for path in sorted(args.out.glob("val_*.json")):
        row = path.stem[len("val_") :]
        result = json.loads(path.read_text())
        traces = sorted((args.out / f"trace-{row}").glob("rep-*"), key=lambda d: int(d.name.split("-")[1]))
        if len(traces) != len(result["profiled"]):
            print(f"{row}: {len(traces)} kept traces for {len(result['profiled'])} profiled runs, skipped")
            continue
        both = {}
        for label, env in (("measured", None), ("calibrated", "0")):
            if env is None:
                os.environ.pop(MEASURED_ENV, None)
            else:
                os.environ[MEASURED_ENV] = env
            figs = [
                profiled_figures(analyze(str(t), intervals=False, progress=False).summary) for t in traces
            ]
            both[label] = _errors(result, figs)
        os.environ.pop(MEASURED_ENV, None)
        print(f"{row}:")
        for name in both["measured"]:
            cells = []
            for label in ("measured", "calibrated"):
                e = both[label][name]
                cells.append(f"{label} {statistics.median(e):+.1%} [{min(e):+.1%}, {max(e):+.1%}]")
            print(f"  {name:18s} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
