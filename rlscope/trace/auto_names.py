"""One name, one operation: an automatic operation and a user's scope of the same name are read as one.

The recorder gives automatic operations and phases (rlscope/runtime/auto_ops.py, the library adapters)
name ids of their own, flagged in names.arrows' ``auto`` column, so that while recording a user's
``backprop`` and the automatic one never share a recursion count. The analysis reads them as the same
operation, so an annotated and an unmodified run of the same code give the same keys, colours and
diff: the reader points the rows of every id of a name at one id (the smallest the events use), flags
an operation begun inside an open one of its name as recursive (as the recorder does for one id, so
its time is not counted twice), and keeps, per name, whether every instance was automatic (the
summary's ``auto`` flag).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pyarrow as pa

from rlscope.trace import native
from rlscope.trace import schema as S
from rlscope.trace.validate import inside_same_name

__all__ = ["merge_automatic"]

_NAMED_KINDS = (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END)


def _named_rows(kind: np.ndarray) -> np.ndarray:
    """The operation and phase rows: a comparison per kind, where np.isin builds a table of the values."""
    rows = kind == _NAMED_KINDS[0]
    for k in _NAMED_KINDS[1:]:
        rows |= kind == k
    return rows


def _used_ids(events: pa.Table, aggregates: pa.Table | None, n_names: int) -> np.ndarray:
    """The name ids in [0, n_names) in use by the events' operation and phase rows or by the aggregates."""
    kind, name = events.column("kind").to_numpy(), events.column("name").to_numpy()
    used = native.names_used(kind, name, n_names)  # one C pass: no mask of the rows, no sort
    if used is None:
        ids = name[_named_rows(kind)]  # in the column's own type: no int64 copy of every row
        used = np.zeros(n_names, bool)
        used[ids[(ids >= 0) & (ids < n_names)]] = True
    if aggregates is not None and aggregates.num_rows:
        for c in ("phase", "operation"):
            ids = aggregates.column(c).to_numpy().astype(np.int64)
            used[ids[(ids >= 0) & (ids < n_names)]] = True
    return np.flatnonzero(used)


def merge_automatic(
    events: pa.Table, aggregates: pa.Table | None, names: list[str], auto_ids: Collection[int]
) -> tuple[pa.Table, dict[str, bool]]:
    """The events with one name id per operation and phase name, and for each name they use whether
    every instance of it was automatic (aggregates included; they are read by name, so keep their ids).

    An intact table whose names are one id each comes back unchanged (the same object).
    """
    used = _used_ids(events, aggregates, len(names))
    by_name: dict[str, list[int]] = {}
    for i in used.tolist():
        by_name.setdefault(names[i], []).append(i)
    automatic = {n: all(i in auto_ids for i in ids) for n, ids in by_name.items()}
    merged = {n: ids for n, ids in by_name.items() if len(ids) > 1}
    if not merged:
        return events, automatic
    remap = np.arange(len(names), dtype=np.int64)
    for ids in merged.values():
        remap[ids] = ids[0]  # ids ascend: the smallest in use
    rows = _named_rows(events.column("kind").to_numpy())
    name = events.column("name").to_numpy().astype(np.int64)
    name = np.where(rows & (name >= 0) & (name < len(names)), remap[np.clip(name, 0, len(names) - 1)], name)
    events = _with_column(events, "name", name)
    kind = events.column("kind").to_numpy()
    begins = np.flatnonzero(kind == S.OP_BEGIN)
    if len(begins):
        nested = inside_same_name(
            events.column("id").to_numpy().astype(np.int64)[begins],
            events.column("parent").to_numpy().astype(np.int64)[begins],
            name[begins],
        )
        if nested.any():
            flags = events.column("flags").to_numpy().copy()
            flags[begins[nested]] |= S.FLAG_RECURSIVE
            events = _with_column(events, "flags", flags)
    return events, automatic


def _with_column(table: pa.Table, column: str, values: np.ndarray) -> pa.Table:
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))
