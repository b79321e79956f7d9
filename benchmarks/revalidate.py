"""A kept `rlscope validate` result, its profiled traces analyzed again with the analyzer as it is now.

    python benchmarks/revalidate.py VAL.json TRACE_DIR [--json OUT.json] [--quiet]

Why: a change to the correction (the analyzer alone) can be checked against every validation whose
traces were kept (``--trace-dir``; `benchmarks/cpu_matrix.sh` keeps them under ``$OUT/trace-NAME``,
`benchmarks/trust_pass.sh` with ``KEEP_TRACES=1``), with the same unprofiled and timer runs as the
reference: no run is repeated, so the machine's speed cannot move the comparison. ``TRACE_DIR`` holds
``rep-1``, ``rep-2``, ... as validate wrote them. Prints validate's table for the new analysis and,
per row, the median error before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlscope.analysis import analyze
from rlscope.overhead.validate import options as validate_options
from rlscope.overhead.validate import render as validate_render
from rlscope.overhead.validate import runner as validate_runner
from rlscope.overhead.validate import verdict as validate_verdict


def revalidate(result: dict, traces: Path) -> dict:
    """``result`` with each profiled repetition's figures from a fresh analysis of its trace."""
    opts = validate_options.Options(
        command=result["command"],
        tolerance_total=result["tolerance"]["total"],
        tolerance_op=result["tolerance"]["operation"],
    )
    out = dict(result)
    out["profiled"] = []
    reps = len(result["profiled"])
    for i in range(reps):
        rep = traces / f"rep-{i + 1}"
        if not rep.is_dir():
            raise SystemExit(f"revalidate: {rep}: no such trace ({reps} reps in the result)")
        summary = analyze(str(rep), intervals=False).summary
        out["profiled"].append({"trace_dir": str(rep), **validate_runner.profiled_figures(summary)})
    out.update(validate_verdict.compare(out, opts))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", type=Path)
    ap.add_argument("traces", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--quiet", action="store_true", help="only the before/after lines")
    a = ap.parse_args(argv)
    before = json.loads(a.result.read_text())
    after = revalidate(before, a.traces)
    if not a.quiet:
        validate_render.render(after)
    old = {r["operation"]: r for r in before["rows"]}
    for r in after["rows"]:
        o = old.get(r["operation"], {})
        if r.get("tolerance") is None:
            continue
        b, n = o.get("median_error"), r.get("median_error")
        fmt = lambda x: "-" if x is None else f"{100 * x:+.1f}%"  # noqa: E731
        print(f"{a.result.stem} {r['operation']}: {fmt(b)} -> {fmt(n)}")
    print(f"{a.result.stem} verdict: {before['verdict']['pass']} -> {after['verdict']['pass']}")
    if a.json:
        a.json.write_text(json.dumps(after, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
