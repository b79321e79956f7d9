"""Is a profile's light state the unprofiled state? Offline, from a validation's kept traces.

    python benchmarks/light_state.py VALIDATE.json [--traces DIR] [--min-share 0.05] [--json FILE]

The windows correction brings each operation's full-window instances down to its light-window
level, so a corrected figure is only as right as the light windows are light. What runs there and
not in an unprofiled process (the scopes, the writer thread, the memory recorder, CUPTI attached
before and detached, the window switches) is in the light level, and no window can see it. The
plain-timer runs of the same validation give the operation's time without any of that, in other
processes. Per repetition and operation this prints:

- the light windows' median instance (exclusive time) against the timer runs' median
  quarter-second block (``timer_blocks`` in the JSON): above 1, the light state itself is slow;
- light instances by their index since the switch that opened their window (a transient the
  switch leaves decays over the first ones; a level that stays is a state of the process);
- light instances overlapping the writer's flushes (PROFILER intervals on other threads) and not;
- the main thread's PROFILER intervals (window switches, flush handoffs): count and time.

``rlscope validate --trace-dir D --json F`` keeps what this needs (``benchmarks/trust_pass.sh
KEEP_TRACES=1`` brings ``val_NAME.json`` back with the traces in ``traces-NAME/``). Results:
BENCHMARKS.md §9, fourteenth session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlscope import categories
from rlscope.analysis.timeline import build_timeline
from rlscope.overhead.correct import windows
from rlscope.trace import reader
from rlscope.trace import schema as S

# a light instance's index since the switch that opened its window: [lo, hi) bins
INDEX_BINS = ((0, 1), (1, 3), (3, 10), (10, 30), (30, 100), (100, 1 << 62))


class MainInstances(NamedTuple):
    """A process's operation instances on its main thread, in begin order, and its window switches."""

    tl: Any  # the raw timeline
    inst: np.ndarray  # each instance's id
    begin: np.ndarray  # its begin and end (ns)
    end: np.ndarray
    excl: np.ndarray  # its exclusive ns
    win_ts: np.ndarray  # the window switches: time and mode
    win_mode: np.ndarray


def main_instances(proc: Any) -> MainInstances:
    """The main thread's operation instances of a loaded process (``reader.load_process``)."""
    tl = build_timeline(proc.events)
    seg = tl.op >= 0
    excl = np.bincount(tl.op[seg], weights=(tl.seg_end - tl.ts)[seg], minlength=len(tl.inst_name))
    win_ts, win_mode = windows.window_rows(tl)
    begins = np.flatnonzero((tl.kind == S.OP_BEGIN) & (tl.thread == tl.main_thread))
    inst = tl.id[begins]
    return MainInstances(tl, inst, tl.ts[begins], tl.inst_end[inst], excl[inst], win_ts, win_mode)


def _light_instances(proc: Any) -> dict[str, Any]:
    """Per operation name on the main thread: each instance's exclusive ns (what validate's timer
    blocks hold), window kind at its start, index since its window's switch, and whether it
    overlapped a flush on another thread."""
    m = main_instances(proc)
    tl, b_ts, e_ts, win_ts, win_mode = m.tl, m.begin, m.end, m.win_ts, m.win_mode
    names = proc.names
    wi = np.searchsorted(win_ts, b_ts, side="right") - 1
    whole = wi == np.searchsorted(win_ts, e_ts, side="left") - 1
    mode = np.where(wi >= 0, win_mode[np.maximum(wi, 0)], S.WINDOW_FULL)
    # index since the window opened, per operation name
    name = tl.inst_name[m.inst]
    idx = np.zeros(len(m.inst), np.int64)
    last: dict[tuple[int, int], int] = {}
    for i, (n, w) in enumerate(zip(name.tolist(), wi.tolist(), strict=True)):
        idx[i] = last.get((n, w), -1) + 1
        last[(n, w)] = idx[i]
    # PROFILER intervals: the writer's flushes on other threads, switches and ticks on the main one
    cb = np.flatnonzero((tl.kind == S.CAT_BEGIN) & (tl.id == categories.PROFILER))
    ce = np.flatnonzero((tl.kind == S.CAT_END) & (tl.id == categories.PROFILER))
    k = min(len(cb), len(ce))
    other = tl.thread[cb[:k]] != tl.main_thread
    flush = np.stack([tl.ts[cb[:k]][other], tl.ts[ce[:k]][other]], axis=1)
    main_ns = (tl.ts[ce[:k]] - tl.ts[cb[:k]])[~other]
    overlap = np.zeros(len(m.inst), bool)
    for a, z in flush:
        overlap |= (b_ts < z) & (e_ts > a)
    out: dict[str, Any] = {"main_profiler_ms": main_ns / 1e6, "flush_ms": (flush[:, 1] - flush[:, 0]) / 1e6}
    for nid in np.unique(name).tolist():
        sel = (name == nid) & whole
        out.setdefault("ops", {})[reader.name_of(names, nid, str(nid))] = {
            "ns": m.excl[sel],
            "light": mode[sel] == S.WINDOW_LIGHT,
            "index": idx[sel],
            "overlap": overlap[sel],
        }
    return out


def _q(x: np.ndarray) -> float | None:
    return float(np.median(x)) if len(x) else None


def analyze_rep(trace_dir: Path, timer_blocks: dict[str, list[float]], ops: list[str]) -> dict[str, Any]:
    """One repetition's figures (see the module docstring), operations ``ops`` only."""
    _, dirs, _ = reader.process_dirs(trace_dir)
    rep: dict[str, Any] = {"trace": str(trace_dir), "ops": {}}
    for d in dirs:
        proc = reader.load_process(d)
        got = _light_instances(proc)
        rep["main_profiler"] = {"n": len(got["main_profiler_ms"]), "ms": float(got["main_profiler_ms"].sum())}
        rep["flushes"] = {"n": len(got["flush_ms"]), "ms": float(got["flush_ms"].sum())}
        for op in ops:
            x = got.get("ops", {}).get(op)
            if x is None or not x["light"].any():
                continue
            light, ns = x["light"], x["ns"]
            timed = timer_blocks.get(op)
            med = _q(ns[light])
            rep["ops"][op] = {
                "light_n": int(light.sum()),
                "light_median_ns": med,
                "light_mean_ns": float(ns[light].mean()),
                "full_median_ns": _q(ns[~light]),
                "timed_median_ns": timed[1] if timed else None,
                "light_over_timed": med / timed[1] if timed and med else None,
                "by_index": {
                    f"{lo}-{hi if hi < 1 << 60 else 'end'}": _q(
                        ns[light & (x["index"] >= lo) & (x["index"] < hi)]
                    )
                    for lo, hi in INDEX_BINS
                },
                "overlapping_flush": {
                    "n": int((light & x["overlap"]).sum()),
                    "median_ns": _q(ns[light & x["overlap"]]),
                    "others_median_ns": _q(ns[light & ~x["overlap"]]),
                },
            }
    return rep


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("validation", help="rlscope validate's --json file")
    p.add_argument("--traces", default=None, help="the kept traces (default: traces-NAME beside the JSON)")
    p.add_argument("--min-share", type=float, default=0.05, help="operations at least this share of the run")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    path = Path(args.validation)
    try:
        val = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        print(f"light_state: {path}: {e}", file=sys.stderr)
        return 2
    traces = Path(args.traces) if args.traces else path.parent / ("traces-" + path.stem.removeprefix("val_"))
    ops = [r["operation"] for r in val["rows"][1:] if r["share"] >= args.min_share]
    reps = []
    for i, blocks in enumerate(val["timer_blocks"]):
        d = traces / f"rep-{i + 1}"
        if not d.is_dir():
            print(f"light_state: {d}: no trace kept for repetition {i + 1}", file=sys.stderr)
            continue
        reps.append(analyze_rep(d, blocks, ops))
    if not reps:
        print(f"light_state: no kept traces under {traces}", file=sys.stderr)
        return 2
    us = lambda v: "-" if v is None else f"{v / 1e3:.0f}"  # noqa: E731
    for i, rep in enumerate(reps):
        print(
            f"rep {i + 1}: main-thread PROFILER {rep['main_profiler']['n']} intervals,"
            f" {rep['main_profiler']['ms']:.0f} ms; writer flushes {rep['flushes']['n']},"
            f" {rep['flushes']['ms']:.0f} ms"
        )
        for op, o in rep["ops"].items():
            ratio = "-" if o["light_over_timed"] is None else f"{o['light_over_timed']:.3f}"
            by = " ".join(f"{k}:{us(v)}" for k, v in o["by_index"].items())
            f = o["overlapping_flush"]
            print(
                f"  {op}: light median {us(o['light_median_ns'])} us (mean {us(o['light_mean_ns'])}), full"
                f" {us(o['full_median_ns'])}, timed runs {us(o['timed_median_ns'])}: light/timed {ratio};"
                f" by index since switch {by}; during a flush {f['n']} at {us(f['median_ns'])}, others"
                f" {us(f['others_median_ns'])}"
            )
    for op in ops:
        r = [
            rep["ops"][op]["light_over_timed"]
            for rep in reps
            if rep["ops"].get(op, {}).get("light_over_timed")
        ]
        if r:
            print(
                f"{op}: light/timed median over {len(r)} repetitions {statistics.median(r):.3f}"
                f" [{min(r):.3f}, {max(r):.3f}]"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(reps, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
