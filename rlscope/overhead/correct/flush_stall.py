"""How much of the trace writer's flush time stalled the job, measured in the run it corrects.

A flush runs on the writer's thread. The part of it that holds the GIL stalls the job's threads;
the rest (CUPTI's and the memory tracker's buffers, drained in C; Arrow's writes, which release
the GIL; the kernel's file I/O) runs beside them on another core. The flush measures its own CPU
time (rlscope/trace/writer.py), which bounds the stall but is not it: against the job's own
operation instances, the instances a flush overlapped ran 13-50% of that time slower than the
same operation's other instances, on a CPU VM and on an H200. Removing all of it had taken
0.1-2.1 points off every VM row's corrected total and up to 2.4 off PPO-GPU's on the H200.

So the removal is each flush's CPU time spread over its interval (the bound) times a *share*
measured here: per operation and kind of window, the excess of the overlapped instances over the
median of the clear ones, summed, over the bound summed over the same instances. Operations
compared with themselves in the same window kind carry the machine's speed and the collectors'
state on both sides. A run with too few clear instances to compare takes ``ASSUMED`` with an
uncertainty as wide as the share's range.

The median, not the mean, stands for a clear instance: a cold call or a collection among the clear
ones would move a mean. For right-skewed operations that makes the share an upper estimate: on the
VM's and the H200's traces the clear instances' mean (or their mean weighted by the chance to
overlap a flush) gave shares 0.02-0.16 lower, 1-6 ms a flush.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from rlscope.analysis import native
from rlscope.analysis.timeline import Timeline
from rlscope.keys import factorize, factorize_rows
from rlscope.overhead.correct import windows
from rlscope.overhead.correct.sums import sum_at_rows
from rlscope.trace import schema as S

MIN_CLEAR = 5  # clear instances of an operation (same window kind) for a median to compare with
MIN_BOUND_SHARE = 0.05  # an overlap under this share of the operation's median is noise, not evidence
MAX_SIGMA = 0.35  # a measured share less certain than this gives way to the assumed one
ASSUMED = 0.5  # the share where the run cannot measure it, ±0.5: anywhere in [0, 1]
# residual_instance_sums' arguments: first row, end, op, the segments (Timeline.segments), bound,
# instances, excl, over
_INSTANCE_SUMS = (
    native.N, native.N, native.I32, native.SEGMENTS, native.F64, native.N, native.F64, native.F64,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class StallShare:
    """The share of the flushes' CPU time that stalled the job, and the evidence."""

    share: float
    sigma: float
    method: str  # "measured" | "assumed"
    overlapped: int  # instances compared
    bound_ns: float  # the flushes' CPU time over those instances
    excess_ns: float  # what those instances took over their operation's clear median
    main_bound_ns: float  # the flushes' CPU time over the main thread (the wall's): sigma times it

    def as_dict(self) -> dict[str, float | int | str]:
        return dataclasses.asdict(self)


def measure(
    tl: Timeline, bound: np.ndarray, rows: np.ndarray | None = None, excl: np.ndarray | None = None
) -> StallShare:
    """The stall share from the main thread's operation instances, each compared within the kind of
    window it began in (read from the trace's window rows; a run without windows is one kind).

    ``bound``: per row, the flush CPU time over the row's segment (overhead._flush_stall). ``rows``
    (sorted) and ``excl``, where the caller has them: the rows off which the bound is 0, and each
    instance's time on the main thread (Timeline.instance_time, read with the correction's own pass
    over the rows): ``bound`` then holds the bound at ``rows`` only (no column of every row).
    """
    main = tl.main_rows()
    n_inst = len(tl.inst_name)
    # each instance's exclusive time, and the flushes' share of it
    sums = native.function("residual_instance_sums", *_INSTANCE_SUMS)
    if rows is not None and excl is not None:
        on_main = (rows >= main.start) & (rows < main.stop)
        at, at_bound = rows[on_main], bound[on_main]
        op = tl.op[at]
        hit = (at_bound != 0) & (op >= 0)
        over = np.bincount(op[hit], weights=at_bound[hit], minlength=n_inst)  # in row order, as below
    elif (
        sums is None
        or tl.op.dtype != np.int32
        or tl.ts.dtype != np.int64
        or bound.dtype != np.float64
        or not bound.flags.c_contiguous
    ):
        excl = tl.instance_time(main, n_inst)
        op = tl.op[main]
        # the flushes' share by instance: over the rows that met one (the others add exact zeros)
        main_bound = bound[main]
        hit = np.flatnonzero(main_bound != 0)  # a comparison first: numpy's nonzero of doubles is slower
        hit = hit[op[hit] >= 0]
        over = np.bincount(op[hit], weights=main_bound[hit], minlength=n_inst)
    else:  # both in one pass over the main thread's rows (residual.c)
        excl, over = np.zeros(n_inst), np.zeros(n_inst)
        sums(main.start, main.stop, tl.op, tl.segments(), bound, n_inst, excl, over)
    # the main thread's operation begins, among the rows that begin a scope (found with the timeline)
    begins = tl.scope_begins()  # sorted: the main thread's a slice of them
    begins = begins[np.searchsorted(begins, main.start) : np.searchsorted(begins, main.stop)]
    begins = begins[tl.kind[begins] == S.OP_BEGIN]
    inst = tl.id[begins]
    name = tl.inst_name[inst]
    mode = _modes(tl, begins)
    e, b = excl[inst], over[inst]
    del begins, inst, over  # each column of the instances dropped once read: less memory at the peak
    if rows is not None and excl is not None:  # 0 off ``at``: read there (bound[main].sum())
        main_bound_ns = sum_at_rows(main.stop - main.start, at - main.start, at_bound)
        del at, at_bound, op, hit
    else:
        main_bound_ns = float(bound[main].sum())
    bound_sum = excess = var = 0.0
    used = 0
    # each (operation, window kind)'s instances, in the order they began: one stable sort of their
    # keys' codes, then a slice per key (in the keys' order, as the sums across keys add up)
    keys, code = _keys(name, mode)
    del name, mode
    if len(keys) <= np.iinfo(np.int16).max:  # a few keys: numpy's stable sort of int16 is a radix sort
        code = code.astype(np.int16)
    order = np.argsort(code, kind="stable")
    starts = np.searchsorted(code[order], np.arange(len(keys) + 1)).tolist()
    del code
    e, b = e[order], b[order]
    del order
    for lo, hi in itertools.pairwise(starts):
        ge, gb = e[lo:hi], b[lo:hi]
        clear = gb == 0
        if np.count_nonzero(clear) < MIN_CLEAR:
            continue
        clear_e = ge[clear]
        med = float(np.median(clear_e))
        hit = gb > MIN_BOUND_SHARE * med
        n_hit = int(np.count_nonzero(hit))
        if not n_hit:
            continue
        mad = 1.4826 * float(np.median(np.abs(clear_e - med)))
        bound_sum += float(gb[hit].sum())
        excess += float((ge[hit] - med).sum())
        var += n_hit * mad**2
        used += n_hit
    if bound_sum > 0:
        sigma = float(np.sqrt(var)) / bound_sum
        if sigma <= MAX_SIGMA:
            share = min(max(excess / bound_sum, 0.0), 1.0)
            return StallShare(share, sigma, "measured", used, bound_sum, excess, main_bound_ns)
    return StallShare(ASSUMED, 0.5, "assumed", used, bound_sum, excess, main_bound_ns)


def _keys(name: np.ndarray, mode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct (name, mode) pairs in lexicographic order, each instance's index into them), as
    keys.factorize_rows of the two rows gives them: one key per pair (the name's offset times the
    modes' range, plus the mode's offset) factorized once, where the keys fit in int64."""
    if not len(name):
        return factorize_rows(np.stack([name, mode]))
    lo_n, hi_n, lo_m, hi_m = int(name.min()), int(name.max()), int(mode.min()), int(mode.max())
    span = hi_m - lo_m + 1
    if (hi_n - lo_n + 1) * span >= 2**62:
        return factorize_rows(np.stack([name, mode]))
    return factorize((name.astype(np.int64) - lo_n) * span + (mode.astype(np.int64) - lo_m))


def _modes(tl: Timeline, begins: np.ndarray) -> np.ndarray:
    """The kind of window each of the rows ``begins`` began in (windows.mode_at of their times): read
    off the rows' windows where the timeline has them already (windows.row_window, made by
    windows.toggled), else searched among the window switches."""
    win_ts, win_mode = windows.window_rows(tl)
    if not len(win_ts):  # a run without windows: one kind
        return np.zeros(len(begins), np.int64)
    row_window = tl.memo.get("row_window")
    if row_window is not None:
        return windows.mode_table(win_mode)[row_window[begins]]
    return windows.mode_at(win_ts, win_mode, tl.ts[begins])
