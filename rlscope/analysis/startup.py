"""Start-up as its own phase: imports, CUDA's context and model construction, not ``[no phase]`` filler.

Under ``rlscope run`` every process opens a ``startup`` phase at its session's start and closes it
as the program's first line runs (rlscope/runtime/autorun.py): that is the interpreter's own
start-up only. What follows until the program's first phase or operation (its imports, building
its environments, its model and optimizer, creating CUDA's context) is start-up too, and a user
asks for it as such: it was counted as ``[no phase]`` / ``[unannotated]``, seconds of it in a
short run. The analysis moves the ``startup`` phase's end on the main thread to the first phase or
operation that begins after it, so that time is the ``startup`` phase's.

It is done on the events before the timeline is built: the end row's time becomes the later
begin's (the stable sort by thread and time keeps it before that begin), so every table made from
the timeline (phases, intervals, exports) sees the same phase. A process without a ``startup``
phase (``rlscope.profile`` in the program) is left as recorded.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rlscope.keys import compute
from rlscope.trace import schema as S
from rlscope.trace.header import main_thread, session_span

STARTUP_PHASE = "startup"  # the phase rlscope/runtime/autorun.py opens (a user's of that name too)


def extended(events: pa.Table, names: list[str]) -> pa.Table:
    """``events`` with the main thread's ``startup`` phase ending where its first phase or operation
    after it begins; unchanged without such a phase, or when nothing begins after it."""
    if STARTUP_PHASE not in names or not events.num_rows:
        return events
    startup = [i for i, n in enumerate(names) if n == STARTUP_PHASE]
    ts = events.column("ts_ns").to_numpy()
    kind = events.column("kind").to_numpy()
    thread = events.column("thread").to_numpy()
    name = events.column("name").to_numpy()
    main = thread == main_thread(ts, kind, thread, session_span(ts, kind)[0])
    ends = np.flatnonzero(main & (kind == S.PHASE_END) & np.isin(name, startup))
    if not len(ends):
        return events
    end = int(ends[0])
    later = main & (ts >= ts[end]) & ((kind == S.PHASE_BEGIN) | (kind == S.OP_BEGIN))
    later[: end + 1] = False  # rows are in the order written: a begin after the end row
    begins = np.flatnonzero(later)
    if not len(begins):
        return events
    first = int(begins[np.argmin(ts[begins])])
    if ts[first] <= ts[end]:
        return events
    new_ts = ts.copy()
    new_ts[end] = ts[first]
    col = events.schema.get_field_index("ts_ns")
    moved = events.set_column(col, events.schema.field(col), pa.array(new_ts, events.schema.field(col).type))
    # the end row goes where its new time puts it, right before that begin: the main thread's rows
    # written between them (a window switch, the rows a detail stretch resumes with) stay in time order
    order = np.r_[np.arange(end), np.arange(end + 1, first), end, np.arange(first, len(ts))]
    return compute("take", moved, pa.array(order))  # Table.take imports pyarrow.compute
