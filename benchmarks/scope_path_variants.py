"""Which part of the active C scope path costs the job's code: variants of scope_native.c, one each.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/scope_path_variants.py VARIANT [--rounds 120]

`benchmarks/interleave_cost.py` finds an active scope pair costing the eager simulator's loop ~5x
its tight-loop cost. This builds ``collectors/scope_native.c`` with one part of the active path
taken out (into a temporary build cache; the installed extension is untouched), then times the
eager simulator's step in one process: a block in a scopes-only session against a block with no
session, alternating which goes first, ``--rounds`` times. The variants record wrong or no
events: the traces are thrown away and only the job's time is read.

Variants of the lean path (ABI 6; the thirteenth session's variants took the full path apart):
``base`` (as shipped), ``full`` (the full C path, ``RLSCOPE_LEAN_SCOPES=0``), ``notimed`` (no
self-timing), ``norow`` (no event rows written), ``noclock`` (no clock read for the rows),
``noscan`` (no recursion check over the thread's stack), ``minimal`` (the methods return at once: a
session, nothing recorded). A variant whose source text no longer matches fails with the snippet it
looked for.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STAMP = """    long long t0 = now_ns();
    boundary_start();
    int lean = s == B.session;"""
ROW = """    if (eb_push(B.buf, ts, tid, kind, a, p, c, flags) < 0) return -1;
    row_buf = B.buf;"""
CLOCK = "static inline long long lean_clock(int *err) { return read_clock(B.clock, err); }"
STACK_SCAN = """    for (Py_ssize_t i = 0; i < t->depth; i++) {
        if (t->nid[i] == nid) {"""

# (old, new) replacements of scope_native.c; "env" entries are environment variables instead
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "base": [],
    "full": [("env", "RLSCOPE_LEAN_SCOPES=0")],  # the full C path, unchanged source
    "notimed": [  # no self-timing: no clock reads or cost stamps around the boundary
        (STAMP, "    long long t0 = 0;\n    int lean = s == B.session;"),
        ("    if (r != NULL) boundary_stamp(t0);\n    return r;", "    (void)t0;\n    return r;"),
    ],
    "norow": [(ROW, "    return 0;\n" + ROW)],  # no event row written
    "noclock": [(CLOCK, "static inline long long lean_clock(int *err) { (void)err; return 0; }")],
    "noscan": [(STACK_SCAN, "    for (Py_ssize_t i = 0; i < 0; i++) {\n        if (t->nid[i] == nid) {")],
    "minimal": [(STAMP, "    return Py_NewRef(done);\n" + STAMP)],  # a session, nothing recorded
}


def variant_source(name: str) -> str:
    src = (ROOT / "collectors" / "scope_native.c").read_text()
    for old, new in VARIANTS[name]:
        if old == "env":
            key, _, value = new.partition("=")
            os.environ[key] = value
            continue
        if old not in src:
            sys.exit(f"scope_path_variants: {name}: scope_native.c no longer has:\n{old}")
        src = src.replace(old, new, 1)
    return src


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variant", choices=sorted(VARIANTS))
    p.add_argument("--rounds", type=int, default=120)
    p.add_argument("--iters", type=int, default=250)
    args = p.parse_args()
    build = Path(tempfile.mkdtemp(prefix="rlscope-variant-"))
    (build / "scope_native.c").write_text(variant_source(args.variant))
    os.environ["RLSCOPE_CACHE_DIR"] = str(build / "cache")  # the variant's build, apart
    os.environ["RLSCOPE_GPU_MEMORY"] = "0"
    from rlscope.collectors import scope_native

    scope_native.SOURCE = build / "scope_native.c"
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from interleave_cost import steps

    import rlscope
    from rlscope.overhead.validate.verdict import median_interval

    step = steps("cpu")["scoped"]

    def block(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return (time.perf_counter() - t0) / n

    block(200)
    ratios = []
    opts = {"gpu": False, "backend": False, "nvml_hz": 0}
    with tempfile.TemporaryDirectory() as tmp:
        session = rlscope.profile(os.path.join(tmp, "warm"), **opts).start()
        block(200)
        session.stop()
        if scope_native._module is None:
            sys.exit(f"scope_path_variants: the variant did not load: {scope_native._failed}")
        for r in range(args.rounds):
            before = block(args.iters) if r % 2 else None
            session = rlscope.profile(os.path.join(tmp, f"s{r}"), **opts).start()
            profiled = block(args.iters)
            session.stop()
            ratios.append(profiled / (before if before is not None else block(args.iters)))
    med = statistics.median(ratios)
    lo, hi = median_interval(ratios) or [float("nan")] * 2
    per_pair = (med - 1) * statistics.median([block(args.iters) for _ in range(5)]) / 3
    print(
        f"{args.variant:8} session/inactive x{med:.4f} [{lo:.4f}, {hi:.4f}]"
        f"  ~{per_pair * 1e9:.0f} ns per pair"
    )


if __name__ == "__main__":
    main()
