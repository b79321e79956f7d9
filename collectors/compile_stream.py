"""The one ``compile.arrows`` stream of a session, shared by every framework's compile recorder.

JAX's (collectors/jax_compile.py) and torch.compile's (collectors/torch_compile.py) compilations are
rows of one file: the analysis carves them out of their thread's timeline alike, as the ``compile``
category, and counts them in one summary. A program may import both frameworks, and two streams of one
file would write over each other, so the first recorder to need the stream makes it and the other gets
the same queue.
"""

from __future__ import annotations

import collections
import threading
import weakref
from typing import Any

from rlscope.trace import schema as S

_streams: weakref.WeakKeyDictionary[Any, collections.deque[tuple]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def rows(session: Any, collector: str) -> collections.deque[tuple]:
    """The queue of ``session``'s compile stream (start, end, thread, stage, name), made on first use;
    ``collector`` names the recorder that made it, in the file's metadata."""
    writer = session.writer
    with _lock:
        got = _streams.get(writer)
        if got is None:
            schema = S.columns_schema(S.COMPILE_COLUMNS_DOC, collector=collector)
            got = _streams[writer] = writer.add_stream(S.COMPILE_FILE, schema)
        return got


def aggregator(session: Any) -> Any:
    """The session's writer's fold of the events into aggregates (rlscope/trace/aggregate.py), which
    a compile collector tells its compilations (None when the session has none)."""
    return getattr(getattr(session, "writer", None), "aggregator", None)
