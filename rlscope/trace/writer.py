"""Buffered, crash-safe writer of one process's trace files.

Collectors append plain tuples to a deque (thread-safe, no lock on the hot path); a daemon
thread drains it into an Arrow record batch at least once per ``flush_interval`` seconds and
writes it to an IPC *stream*. Streams need no footer, so a process killed with SIGKILL leaves a
file that reads up to its last complete batch: at most one interval of events is lost.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rlscope.categories import PROFILER
from rlscope.trace import schema
from rlscope.trace.aggregate import Aggregator
from rlscope.trace.detail import DetailSchedule


def to_arrow(values: Sequence | np.ndarray, typ: pa.DataType) -> pa.Array:
    """Build an Arrow array straight from buffers, from a sequence or a numpy array.

    Not ``pa.array(values)``: that imports pandas where it is installed (0.3 s holding the GIL in
    the middle of the user's run), and importing pandas fails when the last flush runs at
    interpreter shutdown (atexit), which would lose the end of the trace.
    """
    n = len(values)
    if pa.types.is_string(typ):
        encoded = [v.encode() for v in values]
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])
    data = np.ascontiguousarray(values, dtype=schema.numpy_dtype(typ))
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)])


class StreamFile:
    """One Arrow IPC stream file that batches of rows (tuples) are appended to."""

    def __init__(self, path: Path, arrow_schema: pa.Schema, compression: str | None = "zstd") -> None:
        """``compression``: None for a stream of tiny batches, whose decompression costs a reader
        more than it saves (the aggregates: a few rows a flush)."""
        self.path = path
        self.schema = arrow_schema
        self._sink = pa.OSFile(str(path), "wb")  # unbuffered: each batch reaches the OS at once
        # zstd: event columns are regular (repeated kinds, threads, nearby timestamps) and shrink
        # several-fold; every Arrow reader (pyarrow, polars, DuckDB via pyarrow) decompresses it
        # use_threads=False: compress on the writer's own thread, not in Arrow's pool, which would
        # wake a thread per core at every flush beside the job (on an H100 host, threads waking
        # beside an unprofiled loop put it in the machine's slow speed more often)
        options = pa.ipc.IpcWriteOptions(compression=compression, use_threads=False)
        self._writer = pa.ipc.new_stream(self._sink, arrow_schema, options=options)
        # the schema (with the process metadata) reaches disk now, not with the first rows: a
        # process killed before its first flush still leaves a readable, empty trace
        self._writer.write_batch(
            pa.RecordBatch.from_arrays([to_arrow([], f.type) for f in arrow_schema], schema=arrow_schema)
        )
        self.rows_written = 0
        self._all_ints = all(pa.types.is_integer(f.type) for f in arrow_schema)
        self._cols: list[np.ndarray] = []  # column buffers reused by every flush (_table_columns)

    def write_rows(self, rows: Sequence[Any] | np.ndarray) -> None:
        """Append row tuples, ready record batches (a collector that builds columns itself), or
        all-integer rows as one (n, columns) int64 array (the native event buffer's)."""
        if isinstance(rows, np.ndarray):
            if len(rows):
                batch = pa.RecordBatch.from_arrays(self._table_columns(rows), schema=self.schema)
                self._writer.write_batch(batch)
                self.rows_written += len(rows)
            return
        if not rows:
            return
        if isinstance(rows[0], pa.RecordBatch):
            for batch in rows:
                self._writer.write_batch(batch)
                self.rows_written += batch.num_rows
            return
        if self._all_ints:
            arrays = self._int_columns(rows)
        else:
            columns = list(zip(*rows, strict=True))
            arrays = [to_arrow(col, f.type) for col, f in zip(columns, self.schema, strict=True)]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self.rows_written += len(rows)

    def _int_columns(self, rows: Sequence[tuple]) -> list[pa.Array]:
        """All-integer rows as one (n, columns) int64 array, then one strided cast per column.

        The writer thread holds the GIL while it converts, so this per-event cost stalls the
        profiled job (and is calibrated as ``writer``): ``np.fromiter`` over the chained tuples is
        about 4x cheaper than ``zip(*rows)`` plus one ``np.asarray`` per column.
        """
        width = len(self.schema)
        flat = np.fromiter(itertools.chain.from_iterable(rows), np.int64, count=len(rows) * width)
        return self._table_columns(flat.reshape(len(rows), width))

    def _table_columns(self, table: np.ndarray) -> list[pa.Array]:
        """One cast per column into this file's column buffers, kept from flush to flush.

        Not fresh arrays each flush: allocations that size come from fresh pages (glibc maps them,
        then returns them on free), and their page faults were half of a flush's cost: 108-118 ns
        per event row against 49-57 ns with them off (2-core VM, a session's flushes of 20,000
        rows). The batch is written before the next flush reuses them (the writer's lock).
        """
        n = len(table)
        if not self._cols or len(self._cols[0]) < n:
            self._cols = [
                np.empty(max(n, 2 * len(self._cols[0]) if self._cols else n), schema.numpy_dtype(f.type))
                for f in self.schema
            ]
        out = []
        for k, f in enumerate(self.schema):
            col = self._cols[k][:n]
            np.copyto(col, table[:, k], casting="unsafe")
            out.append(pa.Array.from_buffers(f.type, n, [None, pa.py_buffer(col)]))
        return out

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self._sink.close()


# rows the native event buffer is grown to, touched, before the session's first event: 32,768
# rows of 56 bytes (1.8 MB), a second of a loop of 16,000 scopes
AHEAD_MIN_ROWS = 32_768
AHEAD_CHECK_S = 0.05  # how often, between flushes, the writer checks that half the buffer is free


class TraceWriter:
    """Drains event rows into ``events.arrows`` (and new names into ``names.arrows``) periodically."""

    def __init__(
        self,
        process_dir: Path,
        metadata: dict[str, str],
        names: list[str],
        flush_interval: float = 1.0,
        clock: Callable[[], int] = time.perf_counter_ns,
        events: Any = None,
        auto_ids: Collection[int] = frozenset(),
        detail: DetailSchedule | None = None,
        origin_ns: int = 0,
        main_thread: int = -1,
    ) -> None:
        """``events``: the queue the session appends to: a deque (default), or the native
        ``EventBuffer`` (collectors/scope_native.c), drained as one int64 array. ``auto_ids``: the
        ids of ``names`` that name automatic operations or phases (annotate.auto_ids). ``detail``:
        when event rows are kept (default: the whole run), from ``origin_ns`` on the events' clock;
        every row also goes into the aggregates (aggregates.arrows), ``main_thread``'s the cut rows."""
        # the directory appears whole: its files are made in a hidden one renamed into place, so a
        # process killed while its session starts (a pool worker its pool ends at once) leaves no
        # half-made process directory behind (a later profile of the process reuses its directory)
        made = process_dir if process_dir.exists() else process_dir.with_name(f".{process_dir.name}")
        made.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self.process_dir = process_dir
        self.events: Any = events if events is not None else collections.deque()
        self._native = events is not None
        # the native buffer's rows, drained; they carry the boundaries' measured costs (schema.py)
        self._rows = np.empty((0, len(schema.EVENT_COLUMNS) + 1), np.int64)
        if self._native:  # its first pages touched now, not by the job's first scopes (_reserve_ahead)
            self.events.reserve_ahead(AHEAD_MIN_ROWS)
        self._names = names  # the process-wide interning table (append-only)
        self._names_written = 0
        self._auto_ids = auto_ids
        events_schema = schema.events_schema(metadata, cost=self._native)
        self._events_file = StreamFile(made / schema.EVENTS_FILE, events_schema)
        self._names_file = StreamFile(made / schema.NAMES_FILE, schema.names_schema(auto=True))
        aggregates_schema = schema.columns_schema(schema.AGGREGATE_COLUMNS_DOC)
        # uncompressed: one batch of a dozen rows a flush, which zstd barely shrinks (65.4 MB against
        # 62.4 MB uncompressed for 2 h of 9 processes) and which took a reader 0.2 ms each to inflate
        self._aggregates_file = StreamFile(made / schema.AGGREGATES_FILE, aggregates_schema, compression=None)
        if made != process_dir:
            made.rename(process_dir)
            for f in (self._events_file, self._names_file, self._aggregates_file):
                f.path = process_dir / f.path.name
        width = len(events_schema)
        self.aggregator: Aggregator | None = Aggregator(
            detail or DetailSchedule.parse("all"), origin_ns, main_thread, width
        )
        self._flush_interval = flush_interval
        # a write that failed (disk full, quota, I/O error): from then on flushes drain and drop the
        # events and the collectors' rows; the names and aggregates go on while they can be written
        # (summary_failed: they could not), so the whole run's figures outlast a cut detail
        self.failed: OSError | None = None
        self.summary_failed: OSError | None = None
        self._names_failed = False
        self.rows_dropped = 0
        self._streams: list[tuple[collections.deque[tuple], StreamFile]] = []
        self._before_flush: list[Callable[[], None]] = []
        # reentrant: a SIGTERM handler (rlscope/session.py) may close the writer on a thread that holds it
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlscope-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # wakes every AHEAD_CHECK_S between flushes to grow the native buffer before the job fills it
        step = min(self._flush_interval, AHEAD_CHECK_S) if self._native else self._flush_interval
        due = time.monotonic() + self._flush_interval
        while not self._stop.wait(max(min(step, due - time.monotonic()), 0.0)):
            if time.monotonic() >= due:
                self.flush(mark=True)
                due = time.monotonic() + self._flush_interval
            elif self._native and 2 * len(self.events) > self.events.capacity():
                self._reserve_ahead(2 * self.events.capacity())

    def session_ends(self) -> int:
        """The session's end, timed now under the flush's lock, so that no flush after it counts
        past it in the aggregates (Aggregator.session_ends): the session stops its collectors
        before it hands its end row over."""
        with self._lock:
            t = self._clock()
            if self.aggregator is not None:
                self.aggregator.session_ends(t)
        return t

    def add_stream(self, filename: str, arrow_schema: pa.Schema) -> collections.deque[tuple]:
        """A collector's own file in the process directory; append row tuples to the returned deque."""
        rows: collections.deque[tuple] = collections.deque()
        with self._lock:
            self._streams.append((rows, StreamFile(self.process_dir / filename, arrow_schema)))
        return rows

    def before_flush(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` at the start of every flush (a collector pushing out its own buffers)."""
        self._before_flush.append(hook)

    def flush(self, mark: bool = False) -> None:
        """Write everything buffered so far; names first so every written event can be resolved.

        ``mark``: record the flush as an ``rlscope`` category interval on the writer's thread. The
        flush holds the GIL while it converts events, stalling the job; the analyzer removes that
        stall where it happened (rlscope/overhead/correct/residual.py). With the native event buffer the
        interval's end row carries the flush's CPU time on this thread in its ``cost`` column: the
        stall measured in the run itself, instead of a calibrated cost per row, which varies by
        ±25% between processes at the same machine speed.
        """
        if mark:
            thread = threading.get_native_id()
            self.events.append((self._clock(), thread, schema.CAT_BEGIN, PROFILER, 0, -1, 0))
            cpu0 = time.thread_time_ns()
        for hook in list(self._before_flush):
            try:
                hook()
            except Exception as e:  # a collector's failure must not stop the events being written
                warnings.warn(f"rlscope: collector flush failed: {e}", stacklevel=1)
        with self._lock:
            if self._events_file is None:
                return
            # drain everything first, then write names, then rows: every name a row uses is on disk
            drained = [([q.popleft() for _ in range(len(q))], stream) for q, stream in self._streams]
            ahead = 0
            # the fold's time, read just before the drain: every row timed before it is drained now
            # (the native buffer times and appends a row at once), so no row of this flush's interval
            # comes with the next flush, which would count its change from this flush's time on
            now = self._clock()
            if not self._native:
                pop = self.events.popleft
                rows: Any = [pop() for _ in range(len(self.events))]
                rows = np.array(rows, np.int64).reshape(-1, len(self._events_file.schema))
            else:  # the native buffer: one copy into rows kept from flush to flush (_table_columns)
                want = len(self.events)
                if len(self._rows) < want:
                    self._rows = np.empty(
                        (max(want, 2 * len(self._rows)), len(self._events_file.schema)), np.int64
                    )
                rows = self._rows[: self.events.drain_into(self._rows)]
                ahead = 2 * want
            collected = sum(_row_count(r) for r, _ in drained)
            events, aggregates = (
                self._fold(rows, now, collected) if self.summary_failed is None else (rows, None)
            )
            if self.failed is None:
                try:  # names first: every name a row uses is on disk
                    self._write_names()
                    self._events_file.write_rows(events)
                    for stream_rows, stream in drained:
                        stream.write_rows(stream_rows)
                except OSError as e:
                    self._fail(e, int(rows[:, 0].min()) if len(rows) else self._clock())
                    if aggregates is not None:  # this flush's events are lost: its time is summary
                        aggregates[:, schema.AGGREGATE_COLUMNS.index("mode")] = schema.MODE_SUMMARY
            if self.summary_failed is None and aggregates is not None:
                try:  # the whole run's figures go on while anything can be written
                    if self.failed is not None:
                        self._write_names()
                    self._aggregates_file.write_rows(aggregates)
                except OSError as e:
                    self.summary_failed = e
                    if self.failed is None:
                        self._fail(e, self._clock())
            if self.failed is not None:
                self.rows_dropped += len(rows) + collected
        if ahead and not self._stop.is_set():
            self._reserve_ahead(ahead)
        if mark:  # written with the next flush
            end = (self._clock(), thread, schema.CAT_END, PROFILER, 0, -1, 0)
            # the 8th field: the measured cost column, which only the native buffer's rows have
            cpu = max(time.thread_time_ns() - cpu0, 1)
            self.events.append((*end, min(cpu, schema.FLUSH_CPU_MAX)) if self._native else end)

    def _fold(self, rows: np.ndarray, now: int, collected: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The rows to write as events, and the aggregates of this flush's interval, up to ``now``
        (``collected``: the collectors' rows drained with them, which fill a detail stretch too).

        A fault in the fold (a bug, never the job's) must not lose the events: they are then all
        written as they came, and the aggregates stop, with one warning."""
        if self.aggregator is None:
            return rows, np.zeros((0, len(schema.AGGREGATE_COLUMNS)), np.int64)
        try:
            folded = self.aggregator.fold(rows, now, collected)
        except Exception as e:
            from rlscope.errors import warn_once

            warn_once(f"cannot aggregate the trace's events ({e!r}): every event is kept from here on")
            self.aggregator = None
            return rows, np.zeros((0, len(schema.AGGREGATE_COLUMNS)), np.int64)
        return folded.events, folded.aggregates

    def _write_names(self) -> None:
        """The names interned since the last flush (the writer's lock held); none once a write of
        them failed (the stream ends at the failed batch: nothing after it could be read)."""
        n_names = len(self._names)
        if n_names > self._names_written and not self._names_failed:
            auto = self._auto_ids
            new = [(i, self._names[i], int(i in auto)) for i in range(self._names_written, n_names)]
            try:
                self._names_file.write_rows(new)
            except OSError:
                self._names_failed = True
                raise
            self._names_written = n_names

    def _fail(self, error: OSError, at: int) -> None:
        """A write failed: stop writing events, keep draining, say it once; the job goes on.

        Why drain: rows left in the queue would pile up in the profiled process's memory for the rest
        of the run. Why stop: the failed batch may be half on disk, and the stream's reader stops at
        it anyway, so nothing written after it could be read. What was written before stays readable,
        and the aggregates go on in their own file while it takes them (``summary_failed``).
        """
        from rlscope.errors import warn_once
        from rlscope.trace import ownership

        self.failed = error
        if self.aggregator is not None:  # the aggregates from ``at`` on stand for the whole run
            self.aggregator.detail_lost(at)
        ownership.note_cut(self.process_dir.parent, self.process_dir.name, str(error.strerror or error))
        warn_once(
            f"cannot write the trace in {self.process_dir} ({error.strerror or error}): event detail stops"
            " here and the job goes on; the trace keeps what was written until now, and the whole run's"
            " aggregates while they can still be written"
        )

    def _reserve_ahead(self, rows: int) -> None:
        """Keep room for twice the last flush interval's rows in the native buffer, its pages
        touched here, on the writer's thread without the GIL: a buffer the job's appends grow
        faults its new pages on the job's thread, 3-4 us a page on a VM, about 100 ns a scope pair.
        The memory is kept until the session ends, like the rows it holds."""
        with contextlib.suppress(MemoryError):  # the appends grow it as they need, as before
            self.events.reserve_ahead(max(rows, AHEAD_MIN_ROWS))

    def close(self) -> None:
        """Stop the flush thread, write what is left and close the files (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        self.flush()
        with self._lock:
            if self._events_file is not None:
                files = (self._events_file, self._names_file, self._aggregates_file)
                for f in (*files, *(stream for _, stream in self._streams)):
                    try:
                        f.close()
                    except OSError as e:  # the end-of-stream marker did not fit either
                        if self.failed is None:
                            self._fail(e, self._clock())
                self._events_file = None
                if self._native:  # the native buffer: its memory back, now drained
                    self.events.release()


def _row_count(items: list[Any]) -> int:
    """Rows in a stream's drained items: row tuples, or record batches a collector built itself."""
    return sum(i.num_rows if isinstance(i, pa.RecordBatch) else 1 for i in items)
