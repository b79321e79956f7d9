"""Following a trace while its run writes it: each poll reads only what reached disk since the last.

A live view (``rlscope top``, ``rlscope run --live``) reads the trace from another process, every few
seconds, for as long as the run lasts. Each stream file is read on from the byte after the last
complete message read before (:class:`StreamTail`), not re-opened and walked from its start: an IPC
stream has no index, so skipping the batches already seen would cost every refresh a walk over the
whole run's messages, while a stream is only ever appended to, so the offset of the last complete
message is where the next read starts. A poll then costs the new bytes only, whatever the run's
length. A message still being written (its bytes fewer than its header says) is left for the next
poll; the end-of-stream marker says its writer closed the file.

Per process (:class:`ProcessFollower`), a poll reads the new aggregate batches, then the events (only
their message headers once the session's start row is found), then the names: the writer writes
names, then events, then aggregates at each flush, so every name and the start row an aggregate row
needs are on disk by the time they are read. New process directories are picked up at every poll.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from rlscope.errors import TraceError
from rlscope.trace import schema as S
from rlscope.trace.header import ProcessHeader, clock_offset
from rlscope.trace.ownership import MANIFEST_FILE
from rlscope.trace.reader import _checked_metadata, name_of, open_stream, process_dirs

__all__ = ["AGGREGATE_COLUMNS", "ProcessFollower", "ProcessNews", "StreamTail", "TraceFollower", "pid_alive"]

_CONTINUATION = 0xFFFFFFFF  # every IPC message starts with it, then its metadata's length
_MAX_METADATA = 1 << 24  # a message header larger than this is damage, not a batch being written
_CHUNK = 64 << 20  # bytes read at once: what a refresh holds in memory at most, but for one larger batch
_T = TypeVar("_T")
# the aggregates' columns a live view reads (the boundaries and their cost are not decompressed)
AGGREGATE_COLUMNS = ("ts_ns", "thread", "phase", "operation", "category", "time_ns", "calls")


def _body_length(metadata: bytes) -> int:
    """The body length an IPC message's flatbuffer header (``Message.bodyLength``, field 3) gives.

    Read by hand so that a reader knows whether the whole message is on disk before it decodes it:
    Arrow's own reader cannot tell a message being written from a damaged one."""
    root = struct.unpack_from("<I", metadata, 0)[0]
    vtable = root - struct.unpack_from("<i", metadata, root)[0]
    vtable_size = struct.unpack_from("<H", metadata, vtable)[0]
    slot = 4 + 2 * 3
    if slot + 2 > vtable_size:
        return 0
    field = struct.unpack_from("<H", metadata, vtable + slot)[0]
    return struct.unpack_from("<q", metadata, root + field)[0] if field else 0


class StreamTail:
    """One Arrow IPC stream file that a writer appends to, read on from where the last read stopped.

    ``required`` columns are checked as the reader checks them (integers but the ``text`` ones) once
    the schema is on disk; a file that fails the check raises :class:`TraceError`. Damage met later (a
    message that does not decode) stops the following of this file only, said in ``damaged``.
    """

    def __init__(self, path: Path, required: Sequence[str], text: tuple[str, ...] = ()) -> None:
        self.path = path
        self.required = list(required)
        self.text = text
        self.offset = 0  # the byte after the last complete message read
        self.schema: pa.Schema | None = None
        self.metadata: dict[str, str] = {}
        self.closed = False  # its writer's end-of-stream marker was read
        self.removed = False  # the file went away after it was read
        self.damaged = ""  # why the file is no longer read
        self.bytes_read = 0  # what the reads have cost so far
        self.warnings: list[str] = []
        self._schema_message = b""

    def read(self, columns: Sequence[str] | None = None) -> list[pa.RecordBatch]:
        """The record batches completed since the last read (``columns`` of them: the others are not
        decompressed), read ``_CHUNK`` bytes at a time and decoded together."""
        out: list[pa.RecordBatch] = []
        while True:
            got, more = self._with_file(lambda fd: self._read_chunk(fd, columns)) or ([], False)
            out += got
            if not more:
                return out

    def read_one(self, columns: Sequence[str] | None = None) -> pa.RecordBatch | None:
        """The next completed record batch only (None: none yet)."""
        return self._with_file(lambda fd: self._read_one(fd, columns))

    def skip(self) -> None:
        """Move on over the messages completed since the last read, reading their headers only."""
        self._with_file(self._skip)

    def _with_file(self, read: Callable[[int], _T]) -> _T | None:
        if self.closed or self.damaged:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if self.schema is not None:
                self.removed = True
                self._stop("removed while being read (the trace replaced?)")
            return None
        except OSError as e:
            raise TraceError(self.path, f"cannot open: {e.strerror or e}") from None
        try:
            size = os.fstat(fd).st_size
            if size < self.offset:
                self._stop("shorter than already read (replaced?)")
                return None
            if self.schema is None and not self._read_schema(fd, size):
                return None
            return read(fd)
        finally:
            os.close(fd)

    def _next(self, data: Callable[[int, int], bytes], at: int, size: int) -> tuple[int, int] | None:
        """(header length, end) of the complete message at ``at``; None when it is not whole yet
        or the stream ends there (``closed``, or ``damaged``). ``data(n, pos)``: the file's bytes."""
        head = data(8, at)
        if len(head) < 8:
            return None
        mark, length = struct.unpack("<Ii", head)
        if mark != _CONTINUATION or length < 0 or length > _MAX_METADATA:
            self._stop(f"no Arrow message at byte {at}")
            return None
        if length == 0:
            self.closed = True
            return None
        header = data(length, at + 8)
        if len(header) < length:
            return None
        try:
            body = _body_length(header)
        except struct.error:
            self._stop(f"unreadable message header at byte {at}")
            return None
        end = at + 8 + length + body
        if body < 0 or end > size:
            return None  # being written: the next poll reads it
        return length, end

    def _pread(self, fd: int, n: int, at: int) -> bytes:
        data = os.pread(fd, n, at)
        self.bytes_read += len(data)
        return data

    def _read_schema(self, fd: int, size: int) -> bool:
        """Check the file's header as the reader does (version, columns) and keep its metadata;
        False while the header is not on disk whole."""
        got = self._next(lambda n, pos: self._pread(fd, n, pos), 0, size)
        if got is None:
            if self.damaged or self.closed:  # not even a header: no stream of rlscope's
                raise TraceError(
                    self.path, f"not an Arrow IPC stream, or corrupt ({self.damaged or 'empty'})"
                )
            return False
        reader, self.metadata = open_stream(self.path, self.required, warnings=self.warnings, text=self.text)
        self.schema = reader.schema
        self._schema_message = self._pread(fd, got[1], 0)
        self.offset = got[1]
        return True

    def _read_chunk(self, fd: int, columns: Sequence[str] | None) -> tuple[list[pa.RecordBatch], bool]:
        """The batches whole in the next chunk, and whether more may follow it."""
        size = os.fstat(fd).st_size
        base = self.offset
        want = min(size - base, _CHUNK)
        while True:
            chunk = self._pread(fd, want, base)
            ends = self._whole(chunk, base)
            if ends or want == size - base or self.closed or self.damaged:
                break
            want = size - base  # one message larger than a chunk: read whole
        batches = self._decode(chunk[: ends[-1] - base] if ends else b"", ends, base, columns)
        return batches, want == _CHUNK and bool(ends) and not self.damaged

    def _whole(self, chunk: bytes, base: int) -> list[int]:
        """The ends of the messages whole in ``chunk`` (the file's bytes from ``base`` on)."""

        def data(n: int, pos: int) -> bytes:
            return chunk[pos - base : pos - base + n]

        ends: list[int] = []
        while (got := self._next(data, ends[-1] if ends else base, base + len(chunk))) is not None:
            ends.append(got[1])
        return ends

    def _read_one(self, fd: int, columns: Sequence[str] | None) -> pa.RecordBatch | None:
        size = os.fstat(fd).st_size
        got = self._next(lambda n, pos: self._pread(fd, n, pos), self.offset, size)
        if got is None:
            return None
        message = self._pread(fd, got[1] - self.offset, self.offset)
        batches = self._decode(message, [got[1]], self.offset, columns)
        return batches[0] if batches else None

    def _skip(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        while (got := self._next(lambda n, pos: self._pread(fd, n, pos), self.offset, size)) is not None:
            self.offset = got[1]

    def _decode(
        self, messages: bytes, ends: list[int], base: int, columns: Sequence[str] | None
    ) -> list[pa.RecordBatch]:
        """Decode whole messages (ending at ``ends``, from byte ``base``) with one stream reader;
        a batch that does not decode stops the file there, those before it kept."""
        if not ends:
            return []
        assert self.schema is not None
        # on this thread: Arrow's pool costs more than it saves on batches of a flush's size
        options = pa.ipc.IpcReadOptions(use_threads=False)
        if columns is not None:
            fields = [self.schema.get_field_index(c) for c in columns if c in self.schema.names]
            options = pa.ipc.IpcReadOptions(included_fields=fields, use_threads=False)
        out: list[pa.RecordBatch] = []
        try:
            reader = pa.ipc.open_stream(pa.py_buffer(self._schema_message + messages), options=options)
            for _ in ends:
                batch = reader.read_next_batch()
                batch.validate(full=True)
                out.append(batch)
        except Exception as e:  # ArrowInvalid, a decompression error: damage, the file stops here
            at = ends[len(out) - 1] if out else base
            self.offset = at
            self._stop(f"record batch at byte {at} does not decode ({type(e).__name__})")
            return out
        self.offset = ends[-1]
        return out

    def _stop(self, why: str) -> None:
        self.damaged = why
        if self.schema is not None:  # else said by _read_schema, as an error
            self.warnings.append(f"{self.path}: {why}: read up to there")


@dataclasses.dataclass
class ProcessNews:
    """What one poll found of one process: its new aggregate and NVML rows, and what it is known by."""

    name: str  # the process directory's name
    header: ProcessHeader
    names: list[str]  # every name read so far (an automatic operation's is its plain name, as the reader's)
    main_thread: int  # the thread of the session's start row (-1: not on disk yet)
    start_ns: int | None  # the session's start on the process's clock (None: not on disk yet)
    offset_ns: int  # add to the process's clock for the clock all processes share (header.clock_offset)
    aggregates: list[pa.RecordBatch]
    nvml: list[pa.RecordBatch]
    ended: bool

    @property
    def pid(self) -> int:
        return self.header.pid

    def name_of(self, i: int, none: str) -> str:
        return name_of(self.names, i, none)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie counts: its parent has not reaped it yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProcessFollower:
    """One process directory of a live trace: its streams, followed."""

    def __init__(self, path: Path, alive: Callable[[int], bool], host: str) -> None:
        self.path = path
        self.alive = alive
        self.host = host
        self.events = StreamTail(path / S.EVENTS_FILE, S.EVENT_COLUMNS)
        self.names_tail = StreamTail(path / S.NAMES_FILE, ["id", "name"], text=("name",))
        self.aggregates = StreamTail(path / S.AGGREGATES_FILE, S.AGGREGATE_COLUMNS)
        self.nvml = StreamTail(path / S.NVML_FILE, S.NVML_COLUMNS)
        self.names: list[str] = []
        self.main_thread = -1
        self.start_ns: int | None = None
        self.header: ProcessHeader | None = None
        self.warnings: list[str] = []
        self._ray = False  # ray.json read (a Ray worker's role, node and clock offset)

    @property
    def tails(self) -> tuple[StreamTail, ...]:
        return (self.events, self.names_tail, self.aggregates, self.nvml)

    def poll(self) -> ProcessNews | None:
        """The process's news (None until its events' header is on disk). Raises TraceError for a
        process whose events stream is not an rlscope trace's."""
        aggregates = self.aggregates.read(AGGREGATE_COLUMNS) if self.aggregates.path.exists() else []
        nvml = self._optional(self.nvml, ["ts_ns", "device", "util_gpu"])
        while self.start_ns is None:  # the first batches: the session's start row is in them
            batch = self.events.read_one(columns=["ts_ns", "thread", "kind"])
            if batch is None:
                break
            self._find_start(batch)
        if self.start_ns is not None:
            self.events.skip()
        if self.events.schema is None:
            return None
        if self.header is None or (not self._ray and (self.path / S.RAY_META_FILE).is_file()):
            meta = {**self.events.metadata, **self._ray_metadata()}
            self.header = ProcessHeader(self.path, _checked_metadata(meta, self.path, self.warnings), [])
        self._read_names()
        for tail in self.tails:
            self.warnings += tail.warnings
            tail.warnings = []
        return ProcessNews(
            name=self.path.name,
            header=self.header,
            names=self.names,
            main_thread=self.main_thread,
            start_ns=self.start_ns,
            offset_ns=clock_offset(self.header),
            aggregates=aggregates,
            nvml=nvml,
            ended=self.ended,
        )

    @property
    def ended(self) -> bool:
        """Its writer closed the events stream (after the session's end row), or, for a process of
        this host, the process no longer runs (it was killed before it could close it); or its
        directory went away (a new run replaced the trace)."""
        if self.events.closed or self.events.removed:
            return True
        if self.header is None or self.header.metadata.get("host", "") != self.host:
            return False
        return self.header.pid > 0 and not self.alive(self.header.pid)

    def _ray_metadata(self) -> dict[str, str]:
        """ray.json's keys, as the reader merges them (rlscope/ray.py writes it beside the streams)."""
        path = self.path / S.RAY_META_FILE
        if not path.is_file():
            return {}
        self._ray = True
        try:
            extra = json.loads(path.read_text())
            if not isinstance(extra, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            self.warnings.append(f"{path}: unreadable ({e}); no role or clock offset")
            return {}
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()}

    def _optional(self, tail: StreamTail, columns: list[str] | None = None) -> list[pa.RecordBatch]:
        """A file the view can do without (NVML samples, names): unreadable, it is left out, said."""
        if tail.damaged or not tail.path.exists():
            return []
        try:
            return tail.read(columns)
        except TraceError as e:
            tail.damaged = e.problem
            self.warnings.append(f"{e}; its data is left out")
            return []

    def _find_start(self, batch: pa.RecordBatch) -> None:
        i = pc.index(
            batch.column("kind"), pa.scalar(S.SESSION_START, batch.schema.field("kind").type)
        ).as_py()
        if i >= 0:
            self.start_ns = int(batch.column("ts_ns")[i].as_py())
            self.main_thread = int(batch.column("thread")[i].as_py())

    def _read_names(self) -> None:
        """New names; ids are positions in the file. An automatic operation's name is its plain name,
        as the reader reads it: figures add up by name (rlscope/trace/auto_names.py)."""
        for batch in self._optional(self.names_tail):
            ids = batch.column("id").to_pylist()
            raw = batch.column("name").cast(pa.binary()).to_pylist()
            for i, b in zip(ids, raw, strict=True):
                if i is None or b is None or not 0 <= i < 2 * len(self.names) + 1024:
                    continue  # damage: the name shows as <unknown name N>
                name = b.decode(errors="backslashreplace")
                if i >= len(self.names):
                    self.names.extend(f"<unknown name {k}>" for k in range(len(self.names), i + 1))
                self.names[i] = name


class TraceFollower:
    """Every process of a trace directory, followed as its run writes it (see the module doc)."""

    def __init__(
        self,
        trace_dir: str | Path,
        alive: Callable[[int], bool] = pid_alive,
        host: str | None = None,
    ) -> None:
        """Raises :class:`TraceError` for a path that is no trace: missing, a file, or a directory
        with neither a process directory nor a manifest (a run's directory before its first process
        started has its manifest only: it is followed, and its processes show as they come)."""
        path = Path(trace_dir)
        try:
            self.path, dirs, self.single = process_dirs(path)
        except TraceError:
            if not (path.is_dir() and (path / MANIFEST_FILE).is_file()):
                raise
            self.path, dirs, self.single = path, [], False
        self.alive = alive
        self.host = host if host is not None else socket.gethostname()
        self.processes: dict[str, ProcessFollower] = {}
        self.unreadable: dict[str, str] = {}
        self.warnings: list[str] = []
        self._add(dirs)

    def _add(self, dirs: list[Path]) -> None:
        for d in dirs:
            if d.name not in self.processes and d.name not in self.unreadable and d.is_dir():
                self.processes[d.name] = ProcessFollower(d, self.alive, self.host)

    def _scan(self) -> None:
        if self.single:
            return
        try:
            dirs = sorted(p for p in self.path.iterdir() if p.name.startswith(S.PROCESS_PREFIX))
        except OSError as e:
            raise TraceError(self.path, f"cannot list: {e.strerror or e}") from None
        self._add(dirs)

    def poll(self) -> list[ProcessNews]:
        """Each process's news since the last poll, processes found since then included."""
        self._scan()
        out = []
        for name, proc in list(self.processes.items()):
            try:
                news = proc.poll()
            except TraceError as e:
                del self.processes[name]
                self.unreadable[name] = str(e)
                self.warnings.append(f"{e} (process skipped)")
                continue
            self.warnings += proc.warnings
            proc.warnings = []
            if news is not None:
                out.append(news)
        if not self.processes and self.unreadable:
            raise TraceError(self.path, f"no readable process ({next(iter(self.unreadable.values()))})")
        return out

    def take_warnings(self) -> list[str]:
        """The warnings met since the last call (each said once)."""
        out, self.warnings = self.warnings, []
        return out

    @property
    def ended(self) -> bool:
        """Every process found has ended, and there is one (see :attr:`ProcessFollower.ended`)."""
        return bool(self.processes) and all(p.ended for p in self.processes.values())

    @property
    def bytes_read(self) -> int:
        return sum(t.bytes_read for p in self.processes.values() for t in p.tails)
