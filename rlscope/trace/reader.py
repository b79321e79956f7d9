"""Reading a trace directory back: every problem becomes a one-line :class:`TraceError` or a warning.

A trace directory holds one ``process-<pid>`` subdirectory per profiled process (a process
directory may also be given directly). Files are Arrow IPC streams; a stream cut short (the
process was killed) is read up to its last complete record batch, with a warning. Every process's
events are checked and repaired as they are read (:mod:`rlscope.trace.validate`), so that no
analysis sees rows the writer never makes; what was repaired is in the process's warnings and
``findings``. Other entries of a trace directory (its manifest, its lock) are not the reader's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlscope.errors import TraceError
from rlscope.trace import glue
from rlscope.trace import schema as S
from rlscope.trace.auto_names import merge_automatic
from rlscope.trace.budget import Drop
from rlscope.trace.drops import Before, Drops, as_left_out
from rlscope.trace.header import ProcessHeader as ProcessHeader
from rlscope.trace.header import clock_offset as clock_offset
from rlscope.trace.header import main_thread, session_span
from rlscope.trace.header import parent_pid as parent_pid
from rlscope.trace.ownership import read_manifest
from rlscope.trace.runs import runs_warning
from rlscope.trace.validate import Finding, plausible_rows, validate_events, validate_table


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
    stacks: pa.Table | None = None  # Python stack samples (stacks.arrows), when sampled
    frames: pa.Table | None = None  # their stacks' frames (frames.arrows): no times, never cut or joined
    compile: pa.Table | None = None  # JAX compilations (compile.arrows): own clock, never cut or joined
    # the automatic operations' module calls per flush, thread and operation (module_calls.arrows): read whole
    module_calls: pa.Table | None = None
    hlo: pa.Table | None = None  # JAX executables' kernels and their named scopes (hlo.arrows): read whole
    # the whole run's aggregates (aggregates.arrows) summed per key over the run (full loads only):
    # AGGREGATE_COLUMNS less ts_ns (rlscope/trace/aggregate.py, rlscope/analysis/whole_run.py)
    aggregates: pa.Table | None = None
    # the stretches without event detail, on the process's own clock; every table above is on the
    # joined clock, as if the run had been only its detail stretches (rlscope/trace/glue.py)
    gaps: glue.Gaps | None = None
    # what rlscope.trace.validate found and repaired in the events (each also one of ``warnings``)
    findings: list[Finding] = dataclasses.field(default_factory=list)
    # each operation and phase name the process used: whether every instance of it was automatic
    # (rlscope/runtime/auto_ops.py); the events hold one id per name (rlscope/trace/auto_names.py)
    automatic: dict[str, bool] = dataclasses.field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """True when the session ended normally (its end event reached disk)."""
        kinds = self.events.column("kind").to_numpy()  # one chunk: read in place
        return bool((kinds == S.SESSION_END).any())

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


def open_stream(
    path: Path,
    required: list[str],
    keep: list[str] | None = None,
    warnings: list[str] | None = None,
    text: tuple[str, ...] = (),
) -> tuple[pa.ipc.RecordBatchStreamReader, dict[str, str]]:
    """An IPC stream's reader and metadata, after checking its header; raise TraceError if unusable.

    ``keep``: read only these columns (the others are not decompressed). ``warnings``: where to say
    metadata that is not UTF-8 text (read with its bad bytes escaped). Required columns are
    integers, but for the ``text`` ones (strings).
    """
    if not path.is_file():  # also a FIFO, a device or a symlink loop: never opened (a read could block)
        raise TraceError(path, "missing trace file")
    try:
        source = _map(path)
    except OSError as e:
        raise TraceError(path, f"cannot open: {e.strerror or e}") from None
    except Exception as e:  # an unexpected error of the filesystem or Arrow: the file is unusable
        raise TraceError(path, f"cannot open ({_short(e)})") from None
    try:
        reader = pa.ipc.open_stream(source, options=S.read_options())
        schema = reader.schema
    except Exception as e:  # ArrowInvalid, OSError, and whatever a damaged schema message raises
        if path.stat().st_size == 0:
            raise TraceError(path, "empty file (the process died before its first flush?)") from None
        raise TraceError(path, f"not an Arrow IPC stream, or corrupt ({_short(e)})") from None
    meta, undecodable = _metadata(schema.metadata or {})
    if undecodable and warnings is not None:
        warnings.append(
            f"{path}: metadata {', '.join(undecodable[:4])} not UTF-8 text (damaged?): read with the bad"
            " bytes escaped"
        )
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
    if v < 1:
        raise TraceError(path, f"schema version {v} is not one rlscope ever wrote (damaged?)")
    try:
        names = schema.names
    except Exception as e:  # a column name that is not UTF-8
        raise TraceError(path, f"unreadable column names (damaged? {_short(e)})") from None
    missing = [c for c in required if c not in names]
    if missing:
        raise TraceError(path, f"schema lacks column(s) {', '.join(missing)}")
    for c in required:
        typ = schema.field(c).type
        if schema.get_all_field_indices(c) != [schema.get_field_index(c)] or not (
            pa.types.is_string(typ) if c in text else pa.types.is_integer(typ)
        ):
            raise TraceError(path, f"column {c} is of type {typ}, not one rlscope writes (damaged?)")
    if keep is not None:
        options = S.read_options([schema.get_field_index(c) for c in keep])
        try:
            reader = pa.ipc.open_stream(_map(path), options=options)
        except Exception as e:
            raise TraceError(path, f"not an Arrow IPC stream, or corrupt ({_short(e)})") from None
    return reader, meta


def _map(path: Path) -> pa.NativeFile:
    """The file memory-mapped. Arrow takes paths as UTF-8: one with bytes that are not (a folder
    name, kept by Python as surrogate escapes) is mapped through Python's own ``mmap``."""
    try:
        name = str(path).encode()
    except UnicodeEncodeError:
        import mmap

        with open(path, "rb") as f:
            if not os.fstat(f.fileno()).st_size:
                return pa.BufferReader(b"")
            return pa.BufferReader(pa.py_buffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)))
    return pa.memory_map(name.decode(), "r")


def _metadata(raw: dict[bytes, bytes]) -> tuple[dict[str, str], list[str]]:
    """Schema metadata as text, and the keys that were not UTF-8 (their bad bytes escaped)."""
    meta: dict[str, str] = {}
    bad: list[str] = []
    for k, v in raw.items():
        try:
            key, value = k.decode(), v.decode()
        except UnicodeDecodeError:
            key, value = k.decode(errors="backslashreplace"), v.decode(errors="backslashreplace")
            bad.append(key)
        meta[key] = value
    return meta, bad


def _read_stream(
    path: Path,
    required: list[str],
    optional: list[str] | None = None,
    keep: list[str] | None = None,
    text: tuple[str, ...] = (),
    rows: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
    before: Before | None = None,
) -> tuple[pa.Table, dict[str, str], list[str]]:
    """Read an IPC stream up to its last complete batch; raise TraceError if nothing is usable.

    ``optional`` columns are kept when the file has them (columns added after a file kind existed);
    ``keep``: only these of the ``required`` columns are read; ``text``: required columns of strings
    (the others and the optional ones are integers: an optional column of another type is damage,
    left out). A batch that decodes but whose buffers are inconsistent, or that has nulls in integer
    columns (a damaged file), is left out and said. ``rows``: applied to each good batch, the rows of
    it to keep (the detail budget's cut, rlscope/trace/budget.py), so the file is never held whole.
    ``before``: that cut for a table of times (it is then ``rows``); the batches at the stream's end
    whose every row it leaves out are not decoded (:func:`_dropped_tail`).
    """
    warnings: list[str] = []
    reader, meta = open_stream(path, required, keep, warnings, text)
    tail = _dropped_tail(path, before) if before is not None else None
    schema = reader.schema
    extra = [c for c in optional or [] if c in schema.names]  # readable: open_stream read them
    wrong = [
        c
        for c in extra
        if not pa.types.is_integer(schema.field(c).type) or len(schema.get_all_field_indices(c)) > 1
    ]
    if wrong:
        warnings.append(
            f"{path}: column(s) {', '.join(wrong)} of a type rlscope does not write (damaged?) left out"
        )
    columns = keep if keep is not None else required + [c for c in extra if c not in wrong]
    batches = []
    bad = 0
    present: list[str] | None = None  # the columns the batches hold: the stream's schema's, read once
    while True:
        if tail is not None and len(batches) + bad == tail[0]:  # the rest lie inside the drops
            assert before is not None
            before.rows += tail[1]
            break
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        except Exception as e:  # ArrowInvalid, OSError, a decompression error: the stream ends here
            warnings.append(
                f"{path}: truncated or corrupt after {len(batches) + bad} complete batch(es) ({_short(e)});"
                " reading what came before"
            )
            break
        if present is None:
            names = set(batch.schema.names)
            present = [c for c in columns if c in names]
        problem = _batch_problem(batch, present)
        if problem:
            bad += 1
            warnings.append(
                f"{path}: record batch {len(batches) + bad} of {batch.num_rows} rows {problem}: left out"
            )
            continue
        batches.append(batch if rows is None else rows(batch))
    try:
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except Exception as e:
        raise TraceError(path, f"batches that do not match the file's schema ({_short(e)})") from None
    # one chunk per column, copied once here: the checks, the joining of detail stretches and the
    # analysis each read columns as numpy arrays, and each read of a column of many batches copied it
    return table.select(columns).combine_chunks(), meta, warnings


def _dropped_tail(path: Path, before: Before) -> tuple[int, int] | None:
    """How many batches the stream holds before its last run of batches whose every row starts
    inside a drop, and the rows of that run; None where no such run ends the stream, or where the
    stream does not read to its end by the time column alone (damage: read whole, which says it).

    Why: a budget that keeps a long run's first minutes drops the rest of it, most of a torch-op
    file; read by its time column alone (one of four decompressed), those batches are left out
    unread. Their other columns are not checked: their rows are left out either way."""
    try:
        schema = pa.ipc.open_stream(_map(path)).schema
        i = schema.get_field_index(before.column)
        reader = pa.ipc.open_stream(_map(path), options=S.read_options([i]))
        n = kept = rows = 0
        for batch in reader:
            n += 1
            ts = batch.column(0)
            if not len(ts):
                continue
            if ts.null_count:
                kept, rows = n, 0
                continue
            # every row inside one drop where its first and last time are (drops are intervals)
            values = ts.to_numpy()
            k = before.drops.inside(np.asarray([values.min(), values.max()], np.int64))
            if k[0] < 0 or k[0] != k[1]:
                kept, rows = n, 0
            else:
                rows += len(ts)
    except Exception:
        return None
    return (kept, rows) if kept < n else None


_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # Arrow's end-of-stream marker: continuation, length 0


def _closed(path: Path) -> bool:
    """Whether the file ends with Arrow's end-of-stream marker: a writer that closed it wrote every
    row it had; a stream without it was cut short (the process killed, or the file damaged)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(path.stat().st_size - 8, 0))
            tail = f.read(8)
    except OSError:
        return False
    return tail == _EOS


def _batch_problem(batch: pa.RecordBatch, columns: list[str]) -> str:
    """Why a decoded batch cannot be used ("" when it can): inconsistent buffers, nulls in a column
    rlscope never leaves empty. Strings are checked as bytes: names that are not UTF-8 are escaped."""
    try:
        for c in columns:
            arr = batch.column(c)
            if pa.types.is_string(arr.type):
                arr = arr.view(pa.binary())
            arr.validate(full=True)
            if arr.null_count:
                return f"has empty values in column {c}"
    except Exception as e:
        return f"is damaged ({_short(e)})"
    return ""


def _short(e: BaseException) -> str:
    text = str(e).strip()
    first = text.splitlines()[0][:160] if text else ""
    return (
        f"{type(e).__name__}: {first}"
        if first and not isinstance(e, pa.ArrowException)
        else first or type(e).__name__
    )


# the events columns a driver reads to plan an analysis it hands out: session bounds, window modes
LIGHT_COLUMNS = ["ts_ns", "kind", "id"]

# metadata read as integers (pids, clock anchors and offsets) and as JSON objects (session options)
_INT_KEYS = (
    "pid",
    "ppid",
    "run_parent",
    "clock_anchor_ns",
    "clock_anchor_unix_ns",
    "clock.offset_ns",
    "clock.driver_anchor_ns",
    "clock.driver_anchor_unix_ns",
)
_NUMBER_KEYS = ("clock.uncertainty_ns", "clock.uncertainty_end_ns", "clock.drift_ns", "clock.offset_end_ns")
_JSON_OBJECT_KEYS = ("options",)
# pairs that only mean something together: one unreadable drops both
_PAIRS = {
    "clock_anchor_ns": "clock_anchor_unix_ns",
    "clock_anchor_unix_ns": "clock_anchor_ns",
    "clock.driver_anchor_ns": "clock.offset_ns",
    "clock.driver_anchor_unix_ns": "clock.offset_ns",
}
_MAX_META_INT = 1 << 62  # a clock anchor plus an event time stays inside int64


def _checked_metadata(meta: dict[str, str], path: Path, warnings: list[str]) -> dict[str, str]:
    """The metadata with values the analysis cannot read (damage) left out, and said: a pid from the
    directory's name, no clock alignment for unreadable anchors, default session options."""
    bad: list[str] = []
    for key in _INT_KEYS:
        value = meta.get(key, "")
        try:
            ok = value == "" or abs(int(value)) < _MAX_META_INT
        except ValueError:
            ok = False
        if not ok:
            bad.append(key)
    for key in _NUMBER_KEYS:
        try:
            ok = meta.get(key, "") == "" or abs(float(meta[key])) < _MAX_META_INT
        except ValueError:
            ok = False
        if not ok:
            bad.append(key)
    for key in _JSON_OBJECT_KEYS:
        try:
            ok = key not in meta or isinstance(json.loads(meta[key] or "{}"), dict)
        except ValueError:
            ok = False
        if not ok:
            bad.append(key)
    anchors = ("clock_anchor_ns", "clock_anchor_unix_ns")
    if sum(k in meta for k in anchors) == 1:  # half a pair: the other's key was damaged
        bad += [k for k in anchors if k in meta and k not in bad]
    if not bad:
        return meta
    meta = dict(meta)
    for key in bad:
        meta.pop(key, None)
        if key in _PAIRS:
            meta.pop(_PAIRS[key], None)
    if "pid" in bad:
        digits = path.name.removeprefix(S.PROCESS_PREFIX)
        meta["pid"] = digits if digits.isdigit() and len(digits) < 18 else "0"
    warnings.append(
        f"{path}: metadata {', '.join(bad)} unreadable (damaged?): left out (the pid from the directory's"
        " name, no clock alignment from an unreadable anchor, default session options)"
    )
    return meta


def load_process(
    path: Path,
    light: bool = False,
    drops: list[Drop] | None = None,
    observe: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> ProcessTrace:
    """One process directory. ``light``: only the events' ``LIGHT_COLUMNS``, no names and no optional
    tables (their headers are read for the metadata), with the same metadata and errors as a full load:
    what a driver needs of a process that a worker analyzes (:mod:`rlscope.analysis.parallel`).

    A full load checks and repairs the events as :mod:`rlscope.trace.validate` says; a light load
    drops only the rows no writer makes (:func:`~rlscope.trace.validate.plausible_rows`), so the
    driver's survey costs a read of three columns and no repair: the bounds and window modes it reads
    agree with the full load's on any intact trace, and on a damaged one they bound it.

    ``drops``: the stretches of detail the analysis's budget leaves out (rlscope/trace/budget.py), on
    the process's own clock: left out as they are read, the aggregates stand for them (drops.py).
    ``observe``: a light load's hook on each intact event batch as read, before any row is dropped
    (the detail budget's count, rlscope/trace/budget.py); it returns the batch.
    """
    if not path.is_dir():  # a process-* entry that is a file, a broken link or a symlink loop
        raise TraceError(path, "not a directory (a broken or looping symlink?)")
    dropping = Drops(drops) if drops and not light else None
    events, meta, warnings = _read_stream(
        path / S.EVENTS_FILE,
        S.EVENT_COLUMNS,
        [] if light else [S.EVENT_COST_COLUMN[0]],
        keep=LIGHT_COLUMNS if light else None,
        rows=dropping.split if dropping is not None else observe if light else None,
    )
    cut_rows: dict[str, int] = {}
    if dropping is not None and (dropping.rows or dropping.end_row is not None) and events.num_rows:
        events = _with_cut_rows(events, dropping)
        cut_rows["events"] = dropping.rows
    read = [S.EVENTS_FILE]  # the files read whole: each should end with its end-of-stream marker
    meta = _checked_metadata(meta, path, warnings)
    if light:  # the rows no writer makes dropped; the repairs and their findings come with the full load
        events, findings = plausible_rows(events), []
    else:
        events, findings = validate_events(events, str(path))
    warnings += [f.warning for f in findings]
    span = _session_bounds(events) if events.num_rows else None
    gaps = glue.gaps_of(events, span[1] if span else None) if events.num_rows else None
    if gaps is not None and len(gaps):  # the detail stretches joined (the span stays the real one)
        events = glue.join(events, "events", gaps)
        meta["detail.gaps"] = gaps.to_json()
    else:
        gaps = None
    if light:
        events = events.select(LIGHT_COLUMNS)
    names, auto_ids = ([], frozenset()) if light else _read_names(path, warnings)
    if not light and (path / S.NAMES_FILE).is_file():
        read.append(S.NAMES_FILE)
    optional = {}
    for attr, filename, columns, optional_columns in (
        ("gpu", S.GPU_FILE, S.GPU_COLUMNS, S.GPU_KERNEL_COLUMNS),
        ("nvml", S.NVML_FILE, S.NVML_COLUMNS, None),
        ("backend", S.BACKEND_FILE, S.BACKEND_COLUMNS, None),
        ("memory", S.MEMORY_FILE, S.MEMORY_COLUMNS, None),
        ("collectives", S.COLLECTIVES_FILE, S.COLLECTIVES_COLUMNS, None),
        ("stacks", S.STACKS_FILE, S.STACKS_COLUMNS, None),
        ("frames", S.FRAMES_FILE, S.FRAMES_COLUMNS, None),
        ("compile", S.COMPILE_FILE, S.COMPILE_COLUMNS, None),
        ("module_calls", S.MODULE_CALLS_FILE, S.MODULE_CALLS_COLUMNS, None),
        ("hlo", S.HLO_FILE, S.HLO_COLUMNS, None),
    ):
        if (path / filename).exists():
            try:
                if light:
                    _, file_meta = open_stream(path / filename, columns)
                else:
                    timed = attr in glue.TIME_COLUMNS
                    before = Before(dropping, columns[0]) if dropping is not None and timed else None
                    table, file_meta, more = _read_stream(
                        path / filename, columns, optional_columns, rows=before, before=before
                    )
                    if before is not None and before.rows:
                        cut_rows[attr] = before.rows
                    read.append(filename)
                    table, found = validate_table(table, attr, str(path / filename), span)
                    warnings += more + [f.warning for f in found]
                    findings += found
                    optional[attr] = glue.join(table, attr, gaps) if gaps is not None and timed else table
                if "rlscope.collector" in file_meta:  # which collector wrote it: its overhead differs
                    meta[f"{attr}.collector"] = file_meta["rlscope.collector"]
                for key in (S.OWN_DIRS_METADATA_KEY, S.LIBRARY_DIRS_METADATA_KEY):  # stack samples' folders
                    if key in file_meta:
                        meta[key] = file_meta[key]
                if S.DEVICES_METADATA_KEY in file_meta:  # device limits (occupancy, sharing)
                    meta.setdefault(S.DEVICES_METADATA_KEY, file_meta[S.DEVICES_METADATA_KEY])
            except TraceError as e:
                warnings.append(f"{e}; its data is left out")
    # metadata written beside the streams: a Ray worker's role, node and clock offset (rlscope/ray.py),
    # and what the session learned only at its end (rlscope/session.py)
    for side, lost in (
        (S.RAY_META_FILE, "no role or clock offset"),
        (S.END_META_FILE, "no end-of-run facts"),
    ):
        if not (path / side).exists():
            continue
        try:
            if not (path / side).is_file():  # a FIFO would block the read
                raise ValueError("not a regular file")
            extra = json.loads((path / side).read_text())
            if not isinstance(extra, dict):
                raise ValueError("not a JSON object")
            side_meta = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()}
            meta = _checked_metadata({**meta, **side_meta}, path, warnings)
        except (OSError, ValueError) as e:
            warnings.append(f"{path / side}: unreadable ({e}); {lost}")
    manifest = None if light else read_manifest(path.parent)  # a light load's warnings go unread
    was_cut = manifest is not None and path.name in manifest.cuts
    if was_cut:
        warnings.append(
            f"{path}: recording stopped early, a write failed ({manifest.cuts[path.name] or 'no reason'}):"
            " the figures cover the run up to then"
        )
    cut = " ".join(warnings)
    unclosed = [f for f in read if f"{path / f}: truncated" not in cut and not _closed(path / f)]
    if not light and (path / S.AGGREGATES_FILE).exists():
        try:
            optional["aggregates"], last = read_aggregates(
                path / S.AGGREGATES_FILE, dropping if cut_rows else None
            )
        except TraceError as e:
            warnings.append(f"{e}; the whole run is analyzed from its detail only")
        else:
            gaps = _after_cut(span, gaps, last, was_cut, meta)
    if cut_rows:  # what the summary says of the detail left out (rlscope.analysis.summary)
        assert dropping is not None
        left = dropping.detail_left_out_s(span[1] if span else 0)
        meta["detail.budget"] = json.dumps(
            {"drops": [list(d) for d in drops or []], "rows_left_out": cut_rows, "detail_left_out_s": left}
        )
    proc = ProcessTrace(
        path=path,
        events=events,
        names=names,
        metadata=meta,
        warnings=warnings,
        findings=findings,
        gaps=gaps,
        **optional,
    )
    if proc.complete and unclosed:
        # the session ended normally, so its writer closed every file: one without its end marker
        # was cut short at a batch boundary, and may lack its last rows
        warnings.append(
            f"{path}: {', '.join(unclosed)} cut short (no end-of-stream marker though the session ended"
            " normally): its last rows may be missing"
        )
    if not light and events.num_rows:
        _placeholder_names(proc, path, warnings)
        proc.events, proc.automatic = merge_automatic(proc.events, proc.aggregates, proc.names, auto_ids)
    if events.num_rows == 0:
        warnings.append(f"{path}: no events (the process ended before its first flush)")
    elif not proc.complete and not was_cut:  # a cut recording is said above, with its reason
        warnings.append(
            f"{path}: the session did not end normally (process killed or crashed?); analyzed up to"
            " where its data ends, with scopes still open closed there"
        )
    return proc


AGGREGATE_KEYS = ["thread", "mode", "phase", "operation", "category"]
AGGREGATE_SUMS = ["time_ns", "calls", "boundaries", "cost_ns"]


def read_aggregates(path: Path, drops: Drops | None = None) -> tuple[pa.Table, int]:
    """aggregates.arrows summed per key over the run, one record batch at a time; ``drops``: the
    detail the analysis's budget leaves out, whose flushes count as summarized time (drops.py).

    Why batch by batch: the file grows with the run (a few rows a second), and summing as it reads
    keeps the memory to the distinct keys, however long the run. A file cut short is read up to
    its last whole batch, like the events. Also returns the last row's time (-1: no rows).
    """
    reader, _ = open_stream(path, S.AGGREGATE_COLUMNS)
    columns = AGGREGATE_KEYS + AGGREGATE_SUMS
    parts: list[pa.Table] = []
    batches: list[pa.RecordBatch] = []
    rows, last = 0, -1

    def fold() -> None:  # what is read so far, summed: memory stays at the distinct keys
        nonlocal batches, rows
        if batches:
            read = pa.Table.from_batches(batches).select(columns)
            parts[:] = [_sum_aggregates(pa.concat_tables([*parts, read]))]
        batches, rows = [], 0

    try:
        for batch in reader:
            if batch.num_rows:
                batches.append(batch if drops is None else as_left_out(batch, drops))
                rows += batch.num_rows
                # a batch is one flush's: every row carries that flush's time
                last = max(last, int(batch.column("ts_ns")[batch.num_rows - 1].as_py()))
            if rows > 200_000:
                fold()
    except Exception:  # a batch cut short or damaged: the rows up to it count, as for the events
        pass
    fold()
    if not parts:
        return pa.table({c: pa.array([], pa.int64()) for c in columns}), last
    return parts[0], last


def _sum_aggregates(table: pa.Table) -> pa.Table:
    """``table``'s rows summed per key (the keys in Arrow's grouping order, which the whole run's
    float sums follow)."""
    return sum_by(table, AGGREGATE_KEYS, AGGREGATE_SUMS)


def sum_by(table: pa.Table, keys: list[str], sums: list[str]) -> pa.Table:
    """The ``sums`` columns of ``table`` summed per distinct ``keys``, as ``Table.group_by`` sums
    them (the groups in its order), the columns named as in ``table``. Arrow's aggregate node is
    built from ``pyarrow._acero`` where that module is: ``Table.group_by`` imports ``pyarrow.acero``,
    which imports pyarrow's datasets, parquet and TLS (35 ms of the analysis's start) for a table of
    a few thousand rows."""
    try:
        from pyarrow._acero import AggregateNodeOptions, Declaration, TableSourceNodeOptions
    except ImportError:  # a pyarrow whose private module moved: its public grouping
        summed = table.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in sums])
        return summed.rename_columns([c.removesuffix("_sum") for c in summed.column_names])
    plan = Declaration.from_sequence(
        [
            Declaration("table_source", TableSourceNodeOptions(table)),
            Declaration(
                "aggregate", AggregateNodeOptions([([c], "hash_sum", None, c) for c in sums], keys=keys)
            ),
        ]
    )
    return plan.to_table(use_threads=False)


def _with_cut_rows(events: pa.Table, dropping: Drops) -> pa.Table:
    """The kept events with the rows the detail budget's drops put in (drops.Drops)."""
    ts = events.column("ts_ns").to_numpy()
    kind = events.column("kind").to_numpy()
    start, _ = session_span(ts, kind)
    main = main_thread(ts, kind, events.column("thread").to_numpy(), start)
    return dropping.rows_at_cuts(events, main)


def _after_cut(
    span: tuple[int, int] | None, gaps: glue.Gaps | None, last: int, was_cut: bool, meta: dict
) -> glue.Gaps | None:
    """A recording whose events were cut by a failed write, but whose aggregates went on: the time
    from the end of its events (``span``, on the process's own clock, as the gaps are) to the last
    aggregates is one more gap, which the aggregates cover (rlscope.analysis.whole_run)."""
    if not was_cut or span is None or last <= span[1]:
        return gaps
    start = gaps.start if gaps is not None else np.zeros(0, np.int64)
    stop = gaps.end if gaps is not None else np.zeros(0, np.int64)
    out = glue.Gaps(np.append(start, span[1]), np.append(stop, last))
    meta["detail.gaps"] = out.to_json()
    return out


def _placeholder_names(proc: ProcessTrace, path: Path, warnings: list[str]) -> None:
    """Name ids not in names.arrows (a file cut short, a damaged id) of operation and phase rows and of
    the collectors' records get a name ``<unknown name N>`` appended to ``proc.names``, their rows
    pointing to it: the analysis sizes its tables by name ids, so none may be a damaged one's size."""
    names = proc.names
    named = [
        t for t in (proc.events, proc.gpu, proc.backend, proc.collectives) if t is not None and t.num_rows
    ]
    if all(_names_within(t.column("name").to_numpy(), len(names)) for t in named):
        return  # no row names an id out of range: no masks of the millions of rows
    tables: dict[str, tuple[pa.Table, np.ndarray]] = {}
    kind = proc.events.column("kind").to_numpy()
    tables["events"] = (proc.events, np.isin(kind, (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END)))
    for attr in ("gpu", "backend", "collectives"):
        table = getattr(proc, attr)
        if table is not None and table.num_rows:
            tables[attr] = (table, np.ones(table.num_rows, bool))
    missing = {}
    for attr, (table, rows) in tables.items():
        name = table.column("name").to_numpy()  # compared in its own type: no copy of millions of ids
        missing[attr] = rows & ((name >= len(names)) | (name < -1))
    if not any(m.any() for m in missing.values()):
        return
    unnamed = np.unique(
        np.concatenate(
            [t.column("name").to_numpy().astype(np.int64)[missing[a]] for a, (t, _) in tables.items()]
        )
    )
    if not len(unnamed):
        return
    warnings.append(
        f"{path}: {len(unnamed)} name id(s) missing from {S.NAMES_FILE} (cut short or damaged?): shown as"
        " <unknown name N>"
    )
    first = len(names)
    names.extend(f"<unknown name {i}>" for i in unnamed.tolist())
    for attr, (table, _) in tables.items():
        if missing[attr].any():
            name = table.column("name").to_numpy().astype(np.int64)
            new = np.where(missing[attr], first + np.searchsorted(unnamed, name), name)
            i = table.schema.get_field_index("name")
            table = table.set_column(i, table.schema.field(i), pa.array(new, table.schema.field(i).type))
            setattr(proc, attr, table)


def _names_within(name: np.ndarray, n_names: int) -> bool:
    """Whether every name id is -1 (none) or a name's: two reductions, no mask."""
    return int(name.min()) >= -1 and int(name.max()) < n_names


def _read_names(path: Path, warnings: list[str]) -> tuple[list[str], frozenset[int]]:
    """The process's names by id, and the ids of automatic operations and phases (names.arrows'
    ``auto`` column; none in older traces); unreadable names are a warning (operations then show as ids).

    An automatic name reads as the name itself: ``backprop``, the same operation as a user's scope of
    that name (rlscope/trace/auto_names.py). Ids are positions (names are appended in order): one
    far beyond the file's rows is damage, left out; a name that is not UTF-8 is read with its bad
    bytes escaped."""
    try:
        names_table, _, name_warnings = _read_stream(
            path / S.NAMES_FILE, ["id", "name"], optional=[S.NAMES_AUTO_COLUMN], text=("name",)
        )
    except TraceError as e:
        warnings.append(f"{e}; operation names will show as ids")
        return [], frozenset()
    warnings += name_warnings
    ids = names_table.column("id").to_numpy().astype(np.int64)
    ok = (ids >= 0) & (ids < 2 * len(ids) + 1024)
    if not ok.all():
        warnings.append(
            f"{path / S.NAMES_FILE}: {int((~ok).sum())} name(s) with an id beyond the file's rows (damaged?)"
            " left out"
        )
    # read as bytes (a view, not a cast: casts import pyarrow.compute, keys.compute)
    raw = [b for chunk in names_table.column("name").chunks for b in chunk.view(pa.binary()).to_pylist()]
    values, undecodable = [], 0
    for b in raw:  # one per name (interned), not per event
        try:
            values.append(b.decode())
        except UnicodeDecodeError:
            values.append(b.decode(errors="backslashreplace"))
            undecodable += 1
    if undecodable:
        warnings.append(
            f"{path / S.NAMES_FILE}: {undecodable} name(s) not UTF-8 text (damaged?): read with the bad"
            " bytes escaped"
        )
    auto: list[int | None] = [0] * len(values)
    if S.NAMES_AUTO_COLUMN in names_table.column_names:
        auto = names_table.column(S.NAMES_AUTO_COLUMN).to_pylist()
    kept = ids[ok].tolist()
    holes = max(kept, default=-1) + 1 - len(set(kept))
    if holes or len(set(kept)) != len(kept):
        warnings.append(
            f"{path / S.NAMES_FILE}: ids are not the names' positions ({holes} missing,"
            f" {len(kept) - len(set(kept))} repeated; damaged?): missing names show as <unknown name N>"
        )
    names = [f"<unknown name {i}>" for i in range(max(kept, default=-1) + 1)]
    auto_of: dict[int, bool] = {}
    for i, n, a, keep in zip(ids.tolist(), values, auto, ok.tolist(), strict=True):
        if keep:
            names[i], auto_of[i] = n, bool(a)
    return names, frozenset(i for i, a in auto_of.items() if a)


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
    # every process-* entry: one that is no directory (a broken or looping symlink) is then said
    # unreadable, not passed over; other entries (a manifest, a lock file) are not the reader's
    dirs = sorted(p for p in path.iterdir() if p.name.startswith(S.PROCESS_PREFIX))
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


def _session_bounds(proc: ProcessTrace | pa.Table) -> tuple[int, int]:
    ev = proc.events if isinstance(proc, ProcessTrace) else proc
    return session_span(ev.column("ts_ns").to_numpy(), ev.column("kind").to_numpy())
