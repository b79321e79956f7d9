"""Arrow schemas of the trace files, and the schema version readers check.

Every event is a point in time on one thread. Begin/end pairs (operations, phases, categories)
are written as two rows rather than one closed interval so that a process killed mid-scope
still leaves the begin on disk: the analyzer closes it at the end of the data and flags it.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

EVENTS_FILE = "events.arrows"
NAMES_FILE = "names.arrows"
PROCESS_PREFIX = "process-"

# event kinds
OP_BEGIN = 0
OP_END = 1
CAT_BEGIN = 2
CAT_END = 3
PHASE_BEGIN = 4
PHASE_END = 5
SESSION_START = 6
SESSION_END = 7

KIND_NAMES = {
    OP_BEGIN: "op_begin",
    OP_END: "op_end",
    CAT_BEGIN: "cat_begin",
    CAT_END: "cat_end",
    PHASE_BEGIN: "phase_begin",
    PHASE_END: "phase_end",
    SESSION_START: "session_start",
    SESSION_END: "session_end",
}

# flags
FLAG_RECURSIVE = 1  # an operation opened while another of the same name was open on the thread
FLAG_FORCED_CLOSE = 2  # an end written by rlscope for a scope still open at session end

EVENT_FIELDS = [
    pa.field("ts_ns", pa.int64()),  # time.perf_counter_ns() (CLOCK_MONOTONIC on Linux)
    pa.field("thread", pa.int64()),  # OS thread id (threading.get_native_id)
    pa.field("kind", pa.int8()),
    # op/phase rows: the instance id; category rows: the category code entered (begin) or left (end)
    pa.field("id", pa.int64()),
    # op/phase rows: the enclosing instance (-1: none); category rows: the enclosing category
    pa.field("parent", pa.int64()),
    pa.field("name", pa.int32()),  # id into names.arrows (-1 for category rows)
    pa.field("flags", pa.int8()),
]
EVENT_COLUMNS = [f.name for f in EVENT_FIELDS]

NAME_FIELDS = [pa.field("id", pa.int32()), pa.field("name", pa.string())]


def events_schema(metadata: dict[str, str]) -> pa.Schema:
    """The events schema with this process's metadata attached (schema version first)."""
    return pa.schema(EVENT_FIELDS, metadata={"rlscope.schema_version": str(SCHEMA_VERSION), **metadata})


def names_schema() -> pa.Schema:
    return pa.schema(NAME_FIELDS, metadata={"rlscope.schema_version": str(SCHEMA_VERSION)})
