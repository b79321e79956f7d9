"""Which part of the active C scope path costs the job's code: variants of scope_native.c, one each.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/scope_path_variants.py VARIANT [--rounds 120]

`benchmarks/interleave_cost.py` finds an active scope pair costing the eager simulator's loop ~5x
its tight-loop cost. This builds ``collectors/scope_native.c`` with one part of the active path
taken out (into a temporary build cache; the installed extension is untouched), then times the
eager simulator's step in one process: a block in a scopes-only session against a block with no
session, alternating which goes first, ``--rounds`` times. The variants record wrong or no
events: the traces are thrown away and only the job's time is read.

Variants: ``base`` (as shipped), ``notimed`` (no self-timing), ``noevent`` (no event rows),
``noopen`` (no per-name open counts), ``nodue`` (no window or tick checks at the exit), ``noids`` (no
instance ids), ``minimal`` (the methods return at once: a session, nothing recorded). A variant
whose source text no longer matches fails with the snippet it looked for.
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

TIMED_ENTER = """    long long t0 = now_ns();
    boundary_start();
    PyObject *r = impl(self, s);
    if (r != NULL) boundary_stamp(t0);
    return r;
}"""
TIMED_EXIT = """    long long t0 = now_ns();
    boundary_start();
    PyObject *r = impl(self, s, args, nargs);
    if (r != NULL) boundary_stamp(t0);
    return r;
}"""
OPEN_ENTER = """    PyObject *nobj = PyDict_GetItemWithError(open_names, nid);
    long n = 0;
    if (nobj == NULL) {
        if (PyErr_Occurred()) return NULL;
    } else {
        n = PyLong_AsLong(nobj);
    }
    PyObject *n1 = PyLong_FromLong(n + 1);
    if (n1 == NULL) return NULL;
    rc = PyDict_SetItem(open_names, nid, n1);
    Py_DECREF(n1);
    if (rc < 0) return NULL;"""
OPEN_EXIT = """        PyObject *nobj = PyDict_GetItemWithError(open_names, nid);
        long n = nobj ? PyLong_AsLong(nobj) - 1 : 0;
        if (n > 0) {
            PyObject *nn = PyLong_FromLong(n);
            rc = nn ? PyDict_SetItem(open_names, nid, nn) : -1;
            Py_XDECREF(nn);
        } else {
            rc = PyDict_DelItem(open_names, nid);
        }
        if (rc < 0) {
            Py_DECREF(inst);
            return NULL;
        }"""
SCOPE_ENTER = (
    "static PyObject *scope_enter(PyObject *self, PyObject *unused) {"
    " return timed_enter(scope_enter_impl, self); }"
)
SCOPE_EXIT = """static PyObject *scope_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return timed_exit(scope_exit_impl, self, args, nargs);"""
ACTIVE = "PyDict_GetItemWithError(annotate_dict, s_active)"

VARIANTS: dict[str, list[tuple[str, str]]] = {
    "base": [],
    "notimed": [
        (TIMED_ENTER, "    boundary_start();\n    return impl(self, s);\n}"),
        (TIMED_EXIT, "    boundary_start();\n    return impl(self, s, args, nargs);\n}"),
    ],
    "noevent": [
        (
            "    PyObject *events = PyDict_GetItemWithError(d, s_events);\n",
            "    return 0; /* no row */\n    PyObject *events = PyDict_GetItemWithError(d, s_events);\n",
        )
    ],
    "noopen": [
        (OPEN_ENTER, "    long n = 0;\n    (void)open_names;"),
        (OPEN_EXIT, "        (void)open_names;"),
    ],
    "nodue": [
        (
            "    PyObject *due = PyDict_GetItemWithError(d, s_window_due);",
            "    PyObject *due = NULL;",
        ),
        ("    due = PyDict_GetItemWithError(d, s_tick_due);", "    due = NULL;"),
    ],
    "noids": [
        (
            "    PyObject *inst = PyIter_Next(ids);",
            "    PyObject *inst = Py_NewRef(minus_one);\n    (void)ids;",
        )
    ],
    "minimal": [
        (
            SCOPE_ENTER,
            "static PyObject *scope_enter(PyObject *self, PyObject *unused) {\n"
            f"    (void){ACTIVE};\n    return Py_NewRef(self);\n}}",
        ),
        (
            SCOPE_EXIT,
            f"static PyObject *scope_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {{\n"
            f"    (void){ACTIVE};\n    Py_RETURN_NONE;",
        ),
    ],
}


def variant_source(name: str) -> str:
    src = (ROOT / "collectors" / "scope_native.c").read_text()
    for old, new in VARIANTS[name]:
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
    from rlscope.validate import median_interval

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
