"""Reading a trace directory back: every problem becomes a one-line :class:`TraceError` or a warning.

A trace directory holds one ``process-<pid>`` subdirectory per profiled process (a process
directory may also be given directly). Files are Arrow IPC streams; a stream cut short (the
process was killed) is read up to its last complete record batch, with a warning.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from rlscope.errors import TraceError
from rlscope.trace import schema as S
from rlscope.trace.header import ProcessHeader as ProcessHeader
from rlscope.trace.header import clock_offset as clock_offset
from rlscope.trace.header import parent_pid as parent_pid
from rlscope.trace.header import session_span
from rlscope.trace.runs import runs_warning


@dataclasses.dataclass
class ProcessTrace(ProcessHeader):
    """One process's events (Arrow table), names and metadata."""

    events: pa.Table
    names: list[str]
    gpu: pa.Table | None = None  # GPU activity and CUDA API calls (gpu.arrows), when traced
    nvml: pa.Table | None = None  # NVML samples (nvml.arrows), when sampled
    backend: pa.Table | None = None  # torch ops from the native backend recorder (backend.arrows)
    memory: pa.Table | None = None  # CUDA caching allocator events (memory.arrows), when recorded
    collectives: pa.Table | None = None  # torch.distributed collectives (collectives.arrows), when recorded

    @property
    def complete(self) -> bool:
        """True when the session ended normally (its end event reached disk)."""
        kinds = self.events.column("kind")
        return bool(pc.any(pc.equal(kinds, S.SESSION_END)).as_py() or False)

    def name(self, i: int) -> str:
        return name_of(self.names, i)


def name_of(names: list[str], i: int, none: str = "") -> str:
    """The name with id ``i``; ``none`` for -1 (no name), a visible placeholder for an id out of range."""
    if i < 0:
        return none
    return names[i] if i < len(names) else f"<unknown name {i}>"


@dataclasses.dataclass
class TraceHeader:
    """A trace directory by its processes' headers: what merging per-process results needs."""

    path: Path
    processes: list[ProcessHeader]

    @property
    def warnings(self) -> list[str]:
        return [w for p in self.processes for w in p.warnings]


@dataclasses.dataclass
class Trace(TraceHeader):
    """A loaded trace directory: its processes, and warnings met while reading it."""

    processes: list[ProcessTrace]  # type: ignore[assignment]  # loaded: events and all

    @property
    def num_events(self) -> int:
        return sum(p.events.num_rows for p in self.processes)


def _open_stream(
    path: Path, required: list[str], keep: list[str] | None = None
) -> tuple[pa.ipc.RecordBatchStreamReader, dict[str, str]]:
    """An IPC stream's reader and metadata, after checking its header; raise TraceError if unusable.

    ``keep``: read only these columns (the others are not decompressed).
    """
    if not path.is_file():
        raise TraceError(path, "missing trace file")
    try:
        source = pa.memory_map(str(path), "r")
    except OSError as e:
        raise TraceError(path, f"cannot open: {e.strerror or e}") from None
    try:
        reader = pa.ipc.open_stream(source)
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as e:
        if path.stat().st_size == 0:
            raise TraceError(path, "empty file (the process died before its first flush?)") from None
        raise TraceError(path, f"not an Arrow IPC stream, or corrupt ({_short(e)})") from None
    schema = reader.schema
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    version = meta.get("rlscope.schema_version")
    if version is None:
        raise TraceError(path, "not an rlscope trace file (no rlscope.schema_version in its metadata)")
    try:
        v = int(version)
    except ValueError:
        raise TraceError(path, f"unreadable schema version {version!r}") from None
    if v > S.SCHEMA_VERSION:
        raise TraceError(
            path, f"schema version {v} is newer than this rlscope reads ({S.SCHEMA_VERSION}); upgrade rlscope"
        )
    missing = [c for c in required if c not in schema.names]
    if missing:
        raise TraceError(path, f"schema lacks column(s) {', '.join(missing)}")
    if keep is not None:
        options = pa.ipc.IpcReadOptions(included_fields=[schema.get_field_index(c) for c in keep])
        reader = pa.ipc.open_stream(pa.memory_map(str(path), "r"), options=options)
    return reader, meta


def _read_stream(
    path: Path, required: list[str], optional: list[str] | None = None, keep: list[str] | None = None
) -> tuple[pa.Table, dict[str, str], list[str]]:
    """Read an IPC stream up to its last complete batch; raise TraceError if nothing is usable.

    ``optional`` columns are kept when the file has them (columns added after a file kind existed);
    ``keep``: only these of the ``required`` columns are read.
    """
    warnings: list[str] = []
    reader, meta = _open_stream(path, required, keep)
    schema = reader.schema
    batches = []
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            break
        except (pa.ArrowInvalid, pa.ArrowException, OSError) as e:
            warnings.append(
                f"{path}: truncated or corrupt after {len(batches)} complete batch(es) ({_short(e)});"
                " reading what came before"
            )
            break
    table = pa.Table.from_batches(batches, schema=schema)
    columns = keep if keep is not None else required + [c for c in optional or [] if c in schema.names]
    return table.select(columns), meta, warnings


def _short(e: BaseException) -> str:
    return str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__


# the events columns a driver reads to plan an analysis it hands out: session bounds, window modes
LIGHT_COLUMNS = ["ts_ns", "kind", "id"]


def load_process(path: Path, light: bool = False) -> ProcessTrace:
    """One process directory. ``light``: only the events' ``LIGHT_COLUMNS``, no names and no optional
    tables (their headers are read for the metadata), with the same metadata and errors as a full load:
    what a driver needs of a process that a worker analyzes (:mod:`rlscope.analysis.parallel`)."""
    events, meta, warnings = _read_stream(
        path / S.EVENTS_FILE, S.EVENT_COLUMNS, [S.EVENT_COST_COLUMN[0]], keep=LIGHT_COLUMNS if light else None
    )
    names = [] if light else _read_names(path, warnings)
    optional = {}
    for attr, filename, columns, optional_columns in (
        ("gpu", S.GPU_FILE, S.GPU_COLUMNS, S.GPU_KERNEL_COLUMNS),
        ("nvml", S.NVML_FILE, S.NVML_COLUMNS, None),
        ("backend", S.BACKEND_FILE, S.BACKEND_COLUMNS, None),
        ("memory", S.MEMORY_FILE, S.MEMORY_COLUMNS, None),
        ("collectives", S.COLLECTIVES_FILE, S.COLLECTIVES_COLUMNS, None),
    ):
        if (path / filename).exists():
            try:
                if light:
                    _, file_meta = _open_stream(path / filename, columns)
                else:
                    table, file_meta, more = _read_stream(path / filename, columns, optional_columns)
                    warnings += more
                    optional[attr] = table
                if "rlscope.collector" in file_meta:  # which collector wrote it: its overhead differs
                    meta[f"{attr}.collector"] = file_meta["rlscope.collector"]
                if S.DEVICES_METADATA_KEY in file_meta:  # device limits (occupancy, sharing)
                    meta.setdefault(S.DEVICES_METADATA_KEY, file_meta[S.DEVICES_METADATA_KEY])
            except TraceError as e:
                warnings.append(f"{e}; its data is left out")
    if (path / S.RAY_META_FILE).exists():  # role, node and clock offset of a Ray worker (rlscope/ray.py)
        try:
            extra = json.loads((path / S.RAY_META_FILE).read_text())
            meta.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()})
        except (OSError, ValueError) as e:
            warnings.append(f"{path / S.RAY_META_FILE}: unreadable ({e}); no role or clock offset")
    proc = ProcessTrace(path=path, events=events, names=names, metadata=meta, warnings=warnings, **optional)
    if events.num_rows == 0:
        warnings.append(f"{path}: no events (the process ended before its first flush)")
    elif not proc.complete:
        warnings.append(
            f"{path}: the session did not end normally (process killed or crashed?); analyzed up to"
            " where its data ends, with scopes still open closed there"
        )
    return proc


def _read_names(path: Path, warnings: list[str]) -> list[str]:
    """The process's names by id; unreadable names are a warning (operations then show as ids).

    Automatic operations and phases (names.arrows' ``auto`` column) come labelled
    (``inference (auto)``, schema.auto_label): every output shows them as such, and a user's scope
    of the same name stays apart from them."""
    try:
        names_table, _, name_warnings = _read_stream(
            path / S.NAMES_FILE, ["id", "name"], optional=[S.NAMES_AUTO_COLUMN]
        )
    except TraceError as e:
        warnings.append(f"{e}; operation names will show as ids")
        return []
    warnings += name_warnings
    ids = names_table.column("id").to_pylist()
    values = names_table.column("name").to_pylist()
    if S.NAMES_AUTO_COLUMN in names_table.column_names:
        auto = names_table.column(S.NAMES_AUTO_COLUMN).to_pylist()
        values = [S.auto_label(n) if a else n for n, a in zip(values, auto, strict=True)]
    names = [f"<unknown name {i}>" for i in range(max(ids, default=-1) + 1)]
    for i, n in zip(ids, values, strict=True):
        names[i] = n
    return names


def process_dirs(trace_dir: str | Path) -> tuple[Path, list[Path], bool]:
    """(trace path, its process directories in order, whether the path is itself one process).

    Raises :class:`TraceError` for a missing path, a file, or a directory with no process in it.
    """
    path = Path(trace_dir)
    if not path.exists():
        raise TraceError(path, "no such file or directory")
    if not path.is_dir():
        raise TraceError(path, "not a directory (expected an rlscope trace directory)")
    if (path / S.EVENTS_FILE).exists():
        return path, [path], True
    dirs = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith(S.PROCESS_PREFIX))
    if not dirs:
        if not any(path.iterdir()):
            raise TraceError(path, "empty directory, not an rlscope trace")
        raise TraceError(path, f"not an rlscope trace (no {S.PROCESS_PREFIX}* directories inside)")
    return path, dirs, False


def skipped_warnings(errors: list[TraceError]) -> list[str]:
    """The warnings of the processes left out because they could not be read (said with the first one's)."""
    return [f"{e} (process skipped)" for e in errors]


def load_trace(trace_dir: str | Path, light: bool = False) -> Trace:
    """Load every process of a trace directory. Raises :class:`TraceError` with a one-line reason.

    ``light``: each process as :func:`load_process` loads it light (event times and kinds only).
    """
    path, dirs, single = process_dirs(trace_dir)
    if single:
        return Trace(path=path, processes=[load_process(path, light)])
    processes, errors = [], []
    for p in dirs:
        try:
            processes.append(load_process(p, light))
        except TraceError as e:
            errors.append(e)
    if not processes:
        raise errors[0]
    # a directory profiled into twice: said
    spans = [_session_bounds(p) if p.events.num_rows else None for p in processes]
    earlier = runs_warning(processes, spans)
    trace = Trace(path=path, processes=processes)
    # keep what is readable: one bad process must not hide the others
    trace.processes[0].warnings.extend(skipped_warnings(errors) + ([earlier] if earlier else []))
    return trace


def _session_bounds(proc: ProcessTrace) -> tuple[int, int]:
    ev = proc.events
    return session_span(ev.column("ts_ns").to_numpy(), ev.column("kind").to_numpy())
