"""A table's columns joined into one chunk each, the integer ones in memory numpy allocates.

Why numpy's memory: a trace's tables are read in batches, and Arrow's join of them is a second copy
from Arrow's own pool, which gives its pages back to the system once the table is let go. Joined
by numpy, the columns come from the heap the analysis's own arrays are made from, which keeps freed
pages (rlscope/cli/heap.py): the torch ops' table (millions of rows) is let go once the timeline
holds them (rlscope/analysis/parallel.py), and the timeline's next arrays reuse its pages instead of
faulting in fresh ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def one_chunk(table: pa.Table) -> pa.Table:
    """``table`` with each column in one chunk: the integer columns without nulls joined by numpy (a
    zero-copy Arrow array over the joined array), the others by Arrow; one chunk already is kept."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if column.num_chunks > 1 and pa.types.is_integer(field.type) and column.null_count == 0:
            joined = np.concatenate([c.to_numpy() for c in column.chunks])
            columns.append(pa.array(joined, field.type))
        else:
            columns.append(column.combine_chunks())
    return pa.Table.from_arrays(columns, schema=table.schema)
