"""Every collective of torch.distributed, timed on the GPU, from torch's own flight recorder.

Why not the kernel trace alone: GPU tracing runs in full windows only (docs/overhead.md), and a
collective's length is mostly the wait for the slowest rank. That wait differs between the windows
(a full window slows this rank's launches, not its peer's), so NCCL time scaled up from the full
windows misread a two-rank DDP PPO by up to 2x. The flight recorder (``TORCH_FR_BUFFER_SIZE``) keeps an
entry per collective, and with ``TORCH_NCCL_ENABLE_TIMING`` the two CUDA events ProcessGroupNCCL
records around it on its stream give the collective's GPU time, in every window, for two event
records per collective.

:func:`arm` sets those variables (where the user has not) before a process group exists; torch reads
them once, when it builds the recorder. At flushes, paced to the collectives' rate (``_pace``), the
recorders' entries are read as JSON (ProcessGroupNCCL's ``_dump_nccl_trace_json``, then the generic
``_dump_fr_trace_json``, gloo's), and each completed collective not yet written becomes one row of
``collectives.arrows``: the time it was queued (the recorder's wall clock, moved onto the events'
clock), its GPU time (-1 for gloo's, which have none), the queuing thread, its name
(``nccl:all_reduce``) and its size. The analysis gives each to the operation open on that thread, or
to the one that called ``backward()`` when the autograd engine queued it (rlscope/analysis/nccl.py).

Only collectives queued after the profile started are recorded: a forked child inherits its parent's
recorder, entries and all.

Limits: a collective whose events have not been read by torch's watchdog (about 100 ms after it ends)
at the session's end is left out; more collectives between two flushes than the buffer holds
overwrite each other (the analysis counts the record ids missing between those it has and says so);
each read parses the whole ring (``BUFFER_SIZE``), so reads are paced: a quarter of the ring at
the rate seen, at most twice the last gap and 10 s apart; a burst that overfills the ring in between
loses its oldest entries.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from rlscope import annotate
from rlscope.errors import warn_once
from rlscope.trace import schema as S

BUFFER_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")  # the newer name, then the older
TIMING_ENV = "TORCH_NCCL_ENABLE_TIMING"
# entries in the ring: a read parses all it holds, 17 ms of JSON when full (70 ms for 8192, on cpu-vm),
# on the writer's thread holding the GIL
BUFFER_SIZE = 2048
# reads are paced to the collectives' rate: the next one when a quarter of the ring has filled since
# the last (the rest: room for bursts), at most twice the last gap and this long apart, and at the end
READ_SHARE = 0.25
MAX_READ_GAP_S = 10.0
DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1, "Char": 1}


def _torch_version() -> tuple[int, int]:
    """torch's (major, minor), without importing it; (0, 0) when unknown."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None:
            text = torch.__version__
        else:
            from importlib import metadata

            text = metadata.version("torch")
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except Exception:  # not installed, or an odd version string
        return 0, 0


def arm(environ: Any = os.environ, torch_version: tuple[int, int] | None = None) -> int:
    """Turn torch's flight recorder and its collective timing on for process groups made from now on.

    A value the user set is kept. Only the name this torch reads is set: torch 2.8 and later read
    ``TORCH_FR_BUFFER_SIZE`` and warn on every process group about the older one. Returns the
    entries the recorder will keep (0: none, the user turned it off)."""
    if not any(v in environ for v in BUFFER_ENV):
        new = (torch_version or _torch_version()) >= (2, 8)
        environ[BUFFER_ENV[0] if new else BUFFER_ENV[1]] = str(BUFFER_SIZE)
    environ.setdefault(TIMING_ENV, "1")
    size = next(environ[v] for v in BUFFER_ENV if v in environ).strip()
    return int(size) if size.isdigit() else 0


# torch keeps two recorders: ProcessGroupNCCL's own (FlightRecorder<CUDAEvent>, where NCCL's
# collectives go; absent from CPU builds) and the generic one (gloo's). Each is read, in this order.
RECORDERS = ("_dump_nccl_trace_json", "_dump_fr_trace_json")


def _dump_json() -> list[dict[str, Any] | None]:
    """Each recorder's dump (None where this torch has not that recorder), in ``RECORDERS``' order."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    out: list[dict[str, Any] | None] = []
    for name in RECORDERS:
        dump = getattr(c10d, name, None) if c10d is not None else None
        out.append(None if dump is None else json.loads(dump(True, False)))  # includeCollectives, onlyActive
    return out


def _key(e: dict[str, Any]) -> tuple:
    """What identifies a collective across recorders (a torch where both dumps read one recorder)."""
    return (e.get("pg_id"), e.get("collective_seq_id"), e.get("p2p_seq_id"), e.get("time_created_ns"))


def entry_row(e: dict[str, Any], offset_ns: int, threads: dict[int, int], recorder: int = 0) -> tuple | None:
    """One row of ``collectives.arrows`` from a recorder entry, or None until it is done.

    Done: it has its GPU time, or torch retired it without one (gloo's; duration -1).
    ``offset_ns``: wall clock minus the events' clock; ``threads``: 32-bit thread ident -> OS thread id."""
    ms = e.get("duration_ms")
    if ms is None and not e.get("retired"):
        return None
    try:
        ident = int(e.get("thread_id", -1)) & 0xFFFFFFFF
    except (TypeError, ValueError):
        ident = -1
    dtypes = e.get("input_dtypes") or []
    item = DTYPE_BYTES.get(dtypes[0], 0) if dtypes else 0
    return (
        int(e["time_created_ns"]) - offset_ns,
        -1 if ms is None else round(float(ms) * 1e6),
        threads.get(ident, -1),
        annotate.intern(str(e.get("profiling_name", "collective"))),
        sum(math.prod(shape) for shape in e.get("input_sizes") or []) * item,
        int(e.get("record_id", -1)),
        int(e.get("pg_id", -1)),
        recorder,
    )


class _Seen:
    """One recorder's read state: the record ids written, and the next id (a gap: overwritten)."""

    def __init__(self) -> None:
        self.written: set[int] = set()  # pruned below the oldest id the recorder still holds
        self.next_id: int | None = None  # None until the first read
        self.lost = 0


class CollectiveRecorder:
    """Reads torch's recorders at flushes once a process group exists; writes new entries."""

    def __init__(self, session: Any, dump: Any = _dump_json, clock: Any = time.monotonic) -> None:
        self.session = session
        self._dump = dump
        self._clock = clock
        self._seen = [_Seen() for _ in RECORDERS]
        self._seen_group = False
        self._lock = threading.Lock()
        self.rows: Any = None
        self._last_read: float | None = None
        self._next_read = 0.0

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self._seen)

    def start(self) -> CollectiveRecorder:
        # entries queued before this profile started are not its own (a forked child inherits its
        # parent's entries: a DataLoader worker of a DDP rank would count the rank's all-reduces again)
        self._since = self.session.clock()
        self.capacity = arm()
        self.armed = self.capacity > 0
        self.session.writer.before_flush(self.flush)
        return self

    def _pace(self, now: float, new: int) -> None:
        """When to read next: a quarter of the ring at the rate seen since the last read.

        Why: a full ring costs its whole parse at every read, though a flush a second finds few new
        entries (a DDP PPO queues about 15 all-reduces a second). The gap at most doubles from one
        read to the next, so collectives starting after a quiet stretch are read within a few
        seconds."""
        if self._last_read is not None and now > self._last_read:
            gap = now - self._last_read
            wait = READ_SHARE * self.capacity * gap / new if new else MAX_READ_GAP_S
            self._next_read = now + min(wait, 2 * max(gap, 1.0), MAX_READ_GAP_S)
        self._last_read = now

    def _group_exists(self) -> bool:
        if not self._seen_group:
            dist = sys.modules.get("torch.distributed")
            try:
                self._seen_group = bool(dist is not None and dist.is_available() and dist.is_initialized())
            except Exception:  # a torch without distributed support
                return False
        return self._seen_group

    def flush(self, last: bool = False) -> None:
        """Read the recorders: at a flush once a process group exists, and at the session's end
        (``last``) in any case, since a short program may make and destroy its group between flushes."""
        if not self.armed or not (last or self._group_exists()):
            return
        now = self._clock()
        if not last and now < self._next_read:
            return
        # wall clock minus the events' clock, read now: the pair drifts by microseconds over a run
        offset = time.time_ns() - self.session.clock()
        try:
            dumps = self._dump()
        except Exception as e:  # never the job: the NCCL figures fall back to the kernel trace
            warn_once(f"rlscope: cannot read torch's flight recorder ({e}); NCCL time from GPU tracing only")
            self.armed = False
            return
        since = self._since + offset  # the session's start on the recorder's clock
        found = [
            (i, [e for e in (d or {}).get("entries") or [] if int(e.get("time_created_ns", 0)) >= since])
            for i, d in enumerate(dumps)
        ]
        before = sum(s.next_id or 0 for s in self._seen)
        if not any(entries for _, entries in found):
            self._pace(now, 0)
            return
        if self.rows is None:  # the file exists only in processes that made a collective
            schema = S.columns_schema(S.COLLECTIVES_COLUMNS_DOC)
            self.rows = self.session.writer.add_stream(S.COLLECTIVES_FILE, schema)
        with self._lock:
            keys: set[tuple] = set()
            for i, entries in found:
                fresh = [e for e in entries if _key(e) not in keys]
                keys.update(_key(e) for e in entries)
                if fresh:
                    self._add(i, fresh, offset)
            self._pace(now, sum(s.next_id or 0 for s in self._seen) - before)

    def _add(self, recorder: int, entries: list[dict[str, Any]], offset: int) -> None:
        seen = self._seen[recorder]
        threads = {st.ident32: st.thread for st in self.session.thread_states()}
        ids = [int(e.get("record_id", -1)) for e in entries]
        oldest = min(ids)
        if seen.next_id is None:  # the first read: ids below the first one kept are not lost
            seen.next_id = oldest
        if oldest > seen.next_id:  # overwritten before this read
            seen.lost += oldest - seen.next_id
        seen.next_id = max(seen.next_id, max(ids) + 1)
        seen.written = {i for i in seen.written if i >= oldest}
        for rid, e in zip(ids, entries, strict=True):
            if rid in seen.written:
                continue
            row = entry_row(e, offset, threads, recorder)
            if row is None:  # not completed, or not yet read by torch's watchdog: the next flush
                continue
            seen.written.add(rid)
            self.rows.append(row)

    def stop(self) -> None:
        """Reads the recorder a last time; what is still pending then is left out (module doc)."""
        self.flush(last=True)
        if self.lost:
            warn_once(
                f"rlscope: {self.lost} collectives were overwritten in torch's flight recorder before"
                f" they were read; NCCL time misses them (raise {BUFFER_ENV[0]})"
            )

    def __repr__(self) -> str:
        return "CollectiveRecorder(torch flight recorder)"


ENV = "RLSCOPE_COLLECTIVES"  # 0: leave torch's flight recorder alone


def start_for(session: Any, started: Sequence[Any]) -> CollectiveRecorder | None:
    """The registry's factory (rlscope/collectors/registry.py): every collective, unless ENV is 0."""
    return CollectiveRecorder(session).start() if os.environ.get(ENV, "1") != "0" else None
