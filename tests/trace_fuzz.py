"""Damaged traces made from a small real trace, and how ``rlscope-analyze`` takes each one.

:func:`build_base` records a small trace with rlscope on a fake clock (two threads, phases, nested
scopes, simulator time, a flush per step, so several record batches) and adds a hand-written
``backend.arrows`` and ``gpu.arrows`` (torch ops, CUDA calls and the kernels and copies they
launched) and a second process (a copy under another pid). :func:`cases` makes a seeded list of
damaged copies of it; :func:`run_case` runs ``rlscope-analyze`` and ``rlscope-analyze export`` on one
in this process, under an alarm, and classifies the outcome against the intact trace (and runs
``rlscope-analyze check`` on it, which must not fail either).

Damage kinds (``Case.kind``):

- ``truncate_boundary``: a file cut at each Arrow IPC message boundary (schema, every record batch)
- ``truncate_random``: a file cut at a random offset
- ``bitflip``: one to eight bits flipped at random offsets of a file
- ``overwrite``: a stretch of a file (up to 4 KB) overwritten with random bytes or zeros
- ``duplicate_batch``: a record batch written twice (right after itself, or again at the end)
- ``reorder_batches``: two record batches of a file swapped
- ``missing_ends``: operation or phase end rows removed (one, some, all of one name)
- ``reversed_timestamps``: a stretch of a thread's rows with its times reversed
- ``huge_timestamps``: rows moved far into the future or before zero, or to the int64 limits
- ``bad_values``: a column of some rows set to values no writer makes (kinds, ids, parents, names,
  flags, threads, costs)
- ``schema_version``: the schema version changed (0, 2, 99, text) or removed
- ``non_utf8``: names, metadata keys or values, or a process folder's name that are not UTF-8
- ``bad_metadata``: metadata values no writer makes (pid, clock anchors, session options)
- ``empty_file`` / ``oversized_file``: a file emptied, or grown with garbage or zeros
- ``symlink_loop``: a file or a process folder replaced by a symlink to itself, a folder linking
  back to the trace
- ``missing_file``: a file every process has removed (a trace without an optional one is valid)

Outcomes (:class:`Outcome.cls`): ``clean-error`` (exit 2, one line on stderr), ``warned`` (exit 0,
a warning the intact trace does not have), ``unchanged`` (exit 0, the intact trace's figures),
``plausible`` (exit 0: the damage only moved recorded times or costs, put rows, a torch op or a
CUDA call on another thread, gave a whole instance another name, a GPU record another category,
stream or correlation, or changed a name's text, leaving a valid trace no reader can tell from one
recorded that way, as a bit flipped in a timestamp that stays between its neighbours: every
figure within what those changes span of the intact one, under the names as changed); and what
must never happen: ``traceback`` (an exception escaped, or the last-resort line of the CLI
fired), ``hang`` (over the alarm), ``silent`` (figures differ from the intact trace's without a
new warning), ``impossible`` (a negative duration or Chrome slice, or an operation longer than its
process without a new warning).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tests.conftest import FakeClock

DAMAGE_KINDS = (
    "truncate_boundary",
    "truncate_random",
    "bitflip",
    "overwrite",
    "duplicate_batch",
    "reorder_batches",
    "missing_ends",
    "reversed_timestamps",
    "huge_timestamps",
    "bad_values",
    "schema_version",
    "non_utf8",
    "bad_metadata",
    "empty_file",
    "oversized_file",
    "symlink_loop",
    "missing_file",
)
FILES = ("events.arrows", "names.arrows", "backend.arrows", "gpu.arrows")
REQUIRED = ("events.arrows", "names.arrows")
TOLERANCE_S = 1e-9  # figures are rounded to the nanosecond at most
SAFETY_NET = "(a damaged trace?"  # the CLI's last-resort line for an unexpected exception
ACCEPTED = ("clean-error", "warned", "unchanged", "plausible")  # the outcomes a damaged trace may have
# damage to what the terminal table shows as text: every such case prints it (others, one in four)
TEXT_KINDS = ("non_utf8", "bad_metadata", "schema_version")


# ---------------------------------------------------------------------------------------- the base


def build_base(out: Path) -> Path:
    """A small real trace in ``out`` (made anew): two processes, each with events, names, torch ops and
    GPU work."""
    import threading

    import rlscope
    from rlscope import annotate
    from rlscope import categories as C
    from rlscope.trace import schema as S

    shutil.rmtree(out, ignore_errors=True)
    clock = FakeClock()
    clock.now = 5_000_000_000
    sess = rlscope.profile(out, backend=False, gpu=False)
    sess.clock = clock
    ops: list[tuple[int, int, int, int]] = []  # backend ops: start, end, thread, name
    mm = annotate.intern("aten::mm")
    launch, kernel, copy = (annotate.intern(n) for n in ("cudaLaunchKernel", "sgemm_kernel", "memcpy HtoD"))
    gpu: list[tuple[int, ...]] = []  # category, start, end, correlation, thread, device, stream, name, bytes

    def worker() -> None:
        with rlscope.scope("prefetch"):
            clock.advance(700_000)

    with sess:
        main = threading.get_native_id()
        with rlscope.phase("training"):
            for step in range(5):
                with rlscope.scope("rollout"):
                    clock.advance(200_000 + 10_000 * step)
                    with rlscope.scope("inference"):
                        t0 = clock.now
                        clock.advance(300_000)
                        ops.append((t0 + 50_000, t0 + 250_000, main, mm))
                        c = 2 * step + 1
                        gpu += [
                            (C.CUDA_API, t0 + 60_000, t0 + 70_000, c, main, -1, -1, launch, 0),
                            (C.GPU_KERNEL, t0 + 80_000, t0 + 500_000, c, -1, 0, 7, kernel, 0),
                            (C.CUDA_API, t0 + 100_000, t0 + 110_000, c + 1, main, -1, -1, launch, 0),
                            (C.GPU_MEMCPY, t0 + 500_000, t0 + 520_000, c + 1, -1, 0, 7, copy, 4096),
                        ]
                    with rlscope.simulator():
                        clock.advance(400_000)
                with rlscope.scope("backprop"):
                    clock.advance(900_000 + 5_000 * step)
                    with rlscope.scope("backprop"):  # recursive
                        clock.advance(100_000)
                if step == 2:
                    t = threading.Thread(target=worker)
                    t.start()
                    t.join()
                sess.writer.flush()
        with rlscope.phase("evaluation"), rlscope.scope("evaluate"):
            clock.advance(1_500_000)
    recorded = next(out.glob(f"{S.PROCESS_PREFIX}*"))
    # the same bytes on every machine and run: the process's pid, threads, host and versions fixed,
    # its names only those it uses (the name table is the interpreter's, shared by every session)
    for f in out.iterdir():
        if f != recorded:
            f.unlink()  # the manifest and the lock name the process directory as recorded
    proc = out / f"{S.PROCESS_PREFIX}{PID}"
    recorded.rename(proc)
    schema, batches = read_stream(proc / S.EVENTS_FILE)
    table = pa.Table.from_batches(batches, schema=schema)
    threads = {t: PID + i for i, t in enumerate(dict.fromkeys(table.column("thread").to_pylist()))}
    used = {n for n in table.column("name").to_pylist() if n >= 0} | {mm, launch, kernel, copy}
    used = sorted(used, key=lambda n: annotate._names[n])  # not by id: the order names were first used
    rename = {n: i for i, n in enumerate(used)}
    fixed = []
    for b in batches:
        cols = b.to_pydict()
        cols["thread"] = [threads[t] for t in cols["thread"]]
        cols["name"] = [rename.get(n, n) for n in cols["name"]]
        # the reference loop's speed, timed at session start and end (ps per iteration): fixed too
        timed = [
            k in (S.SESSION_START, S.SESSION_END, S.WINDOW) and p > 0
            for k, p in zip(cols["kind"], cols["parent"], strict=True)
        ]
        cols["parent"] = [120_000 if t else p for t, p in zip(timed, cols["parent"], strict=True)]
        fixed.append(pa.RecordBatch.from_pydict(cols, schema=schema))
    meta = _fixed_metadata(schema.metadata, PID, 1)
    _write_stream(proc / S.EVENTS_FILE, schema.with_metadata(meta), fixed)
    names_schema, names = read_stream(proc / S.NAMES_FILE)
    rows = pa.Table.from_batches(names, schema=names_schema).to_pylist()
    kept = [{**rows[n], "id": rename[n]} for n in used]
    # names reach the file a few at a time, as each flush adds the new ones
    _write_stream(
        proc / S.NAMES_FILE, names_schema, pa.Table.from_pylist(kept, schema=names_schema).to_batches(2)
    )
    schema = S.columns_schema(S.BACKEND_COLUMNS_DOC, collector="native")
    ops = [(a, b, threads[t], rename[n]) for a, b, t, n in ops]
    cols = list(zip(*ops, strict=True))
    table = pa.table([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)
    _write_stream(proc / S.BACKEND_FILE, schema, table.to_batches(max_chunksize=2))
    schema = S.columns_schema(S.GPU_COLUMNS_DOC, collector="native")
    gpu = [(*r[:4], threads.get(r[4], r[4]), *r[5:7], rename[r[7]], r[8]) for r in gpu]
    cols = list(zip(*gpu, strict=True))
    table = pa.table([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)
    _write_stream(proc / S.GPU_FILE, schema, table.to_batches(max_chunksize=4))
    _reencode(proc)
    # a second process: the same rows under another pid (a child of the first)
    twin = out / f"{S.PROCESS_PREFIX}{PID + 1}"
    shutil.copytree(proc, twin)
    schema, batches = read_stream(twin / S.EVENTS_FILE)
    _write_stream(
        twin / S.EVENTS_FILE, schema.with_metadata(_fixed_metadata(schema.metadata, PID + 1, PID)), batches
    )
    return out


PID = 4000  # the base trace's first process (the second is PID + 1, its child)


def _fixed_metadata(meta: dict[bytes, bytes], pid: int, ppid: int) -> dict[bytes, bytes]:
    """The recorded metadata with what differs between machines and runs set to fixed values."""
    fixed = {
        b"host": b"fuzz-host",
        b"pid": str(pid).encode(),
        b"ppid": str(ppid).encode(),
        b"argv": b'["fuzz"]',
        b"clock_anchor_unix_ns": b"1700000000000000000",
        b"python": b"3.11.0",
        b"torch": b"",
        b"gymnasium": b"",
        b"machine": b"x86_64",
        b"cpu": b"fuzz-cpu",
        b"rlscope.version": b"0.0.0",
    }
    return {k: fixed.get(k, v) for k, v in meta.items()}


# ----------------------------------------------------------------------------------- Arrow streams


def read_stream(path: Path) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    reader = pa.ipc.open_stream(pa.memory_map(str(path)))
    return reader.schema, list(reader)


def encode(schema: pa.Schema, batches: list[pa.RecordBatch]) -> tuple[bytes, list[int]]:
    """The stream's bytes as rlscope's writer makes them (zstd), and where each message ends."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd", use_threads=False)
    ends = []
    with pa.ipc.new_stream(sink, schema, options=options) as w:
        ends.append(sink.tell())
        for b in batches:
            w.write_batch(b)
            ends.append(sink.tell())
    return sink.getvalue().to_pybytes(), ends


def _write_stream(path: Path, schema: pa.Schema, batches: list[pa.RecordBatch]) -> None:
    path.write_bytes(encode(schema, batches)[0])


def _reencode(proc: Path) -> None:
    """Every stream of a process written again as :func:`encode` does: its boundaries are then known."""
    for f in FILES:
        if (proc / f).exists():
            _write_stream(proc / f, *read_stream(proc / f))


def _events_table(path: Path) -> tuple[pa.Schema, list[pa.RecordBatch], pa.Table]:
    schema, batches = read_stream(path)
    return schema, batches, pa.Table.from_batches(batches, schema=schema)


# ------------------------------------------------------------------------------------------ cases


@dataclasses.dataclass(frozen=True)
class Case:
    """One damaged copy of the base trace: ``apply(copy_dir)`` damages a fresh copy in place."""

    kind: str
    label: str
    apply: Callable[[Path], None]


def _proc(trace: Path, which: int) -> Path:
    return sorted(p for p in trace.iterdir() if p.name.startswith("process-"))[which]


def _with_events(
    which: int, change: Callable[[pa.Table, np.random.Generator], pa.Table], seed: int
) -> Callable[[Path], None]:
    """Damage of the decoded events of process ``which``, written back in the original batch sizes."""

    def apply(trace: Path) -> None:
        path = _proc(trace, which) / "events.arrows"
        schema, batches, table = _events_table(path)
        new = change(table, np.random.default_rng(seed))
        sizes = [b.num_rows for b in batches]
        _write_stream(path, schema, _cut(schema, new, sizes))

    return apply


def _cut(schema: pa.Schema, table: pa.Table, sizes: list[int]) -> list[pa.RecordBatch]:
    out, at = [], 0
    for i, n in enumerate(sizes):
        n = table.num_rows - at if i == len(sizes) - 1 else min(n, table.num_rows - at)
        part = table.slice(at, n)
        out.append(
            pa.RecordBatch.from_arrays([part.column(k).combine_chunks() for k in schema.names], schema=schema)
        )
        at += n
    return out


def _column(table: pa.Table, name: str, values: np.ndarray) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _np(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy().astype(np.int64)


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    return table.take(pa.array(rows, pa.int64()))


def _missing_ends(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    kind, name = _np(table, "kind"), _np(table, "name")
    ends = np.flatnonzero((kind == 1) | (kind == 5))
    how = rng.integers(3)
    if how == 0:
        gone = rng.choice(ends, 1)
    elif how == 1:
        gone = rng.choice(ends, max(1, len(ends) // 3), replace=False)
    else:
        gone = ends[name[ends] == name[rng.choice(ends)]]
    return _take(table, np.setdiff1d(np.arange(table.num_rows), gone))


def _reversed_timestamps(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    ts, thread = _np(table, "ts_ns"), _np(table, "thread")
    rows = np.flatnonzero(thread == thread[0])
    if rng.random() < 0.3:
        a, b = 0, len(rows)  # every row of the thread
    else:
        a = int(rng.integers(0, len(rows) - 2))
        b = int(rng.integers(a + 2, len(rows) + 1))
    sel = rows[a:b]
    ts = ts.copy()
    ts[sel] = ts[sel][::-1]
    return _column(table, "ts_ns", ts)


def _huge_timestamps(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    ts = _np(table, "ts_ns").copy()
    rows = rng.choice(table.num_rows, int(rng.integers(1, 4)), replace=False)
    value = rng.choice(
        [2**62, 2**63 - 1, -(2**63), -1, -(10**12), int(ts.max()) + 10**15, int(ts.max()) + 3_600 * 10**9]
    )
    if rng.random() < 0.5:
        ts[rows] = value
    else:
        ts[rows] += int(rng.choice([1, -1])) * (1 << int(rng.integers(20, 62)))
    return _column(table, "ts_ns", ts)


_BAD = {
    "kind": [11, 15, 16, 19, 20, 100, -1, -128, 127],
    "id": [-1, -5, 2**40, 2**62, 0, 7],
    "parent": [-7, 2**40, 10**6, 0, 3],
    "name": [-1, -5, 2**31 - 1, 999, 0, 3],
    "flags": [4, 8, 127, -1, 2, 1],
    "thread": [0, -1, 2**62, 12345],
    "cost": [-1, 2**62, 2**40, 2**33 + 5, 123_456_789],
}


def _bad_values(column: str) -> Callable[[pa.Table, np.random.Generator], pa.Table]:
    def change(table: pa.Table, rng: np.random.Generator) -> pa.Table:
        values = _np(table, column).copy()
        rows = rng.choice(table.num_rows, int(rng.integers(1, 5)), replace=False)
        values[rows] = rng.choice(_BAD[column])
        return _column(table, column, values)

    return change


def _duplicate_batch(which: int, file: str, at_end: bool, seed: int) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        path = _proc(trace, which) / file
        schema, batches = read_stream(path)
        rng = np.random.default_rng(seed)
        full = [i for i, b in enumerate(batches) if b.num_rows]
        i = int(rng.choice(full))
        batches = [*batches, batches[i]] if at_end else [*batches[: i + 1], batches[i], *batches[i + 1 :]]
        _write_stream(path, schema, batches)

    return apply


def _reorder_batches(which: int, file: str, seed: int) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        path = _proc(trace, which) / file
        schema, batches = read_stream(path)
        rng = np.random.default_rng(seed)
        i, j = sorted(rng.choice(len(batches), 2, replace=False))
        batches[i], batches[j] = batches[j], batches[i]
        _write_stream(path, schema, batches)

    return apply


def _bytes(which: int, file: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        path = _proc(trace, which) / file
        path.write_bytes(change(path.read_bytes()))

    return apply


def _flip(seed: int, bits: int) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        rng = np.random.default_rng(seed)
        out = bytearray(data)
        for _ in range(bits):
            at = int(rng.integers(len(out)))
            out[at] ^= 1 << int(rng.integers(8))
        return bytes(out)

    return change


def _overwrite(seed: int) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, min(4096, len(data)) + 1))
        at = int(rng.integers(0, len(data) - n + 1))
        fill = bytes(n) if rng.random() < 0.3 else rng.bytes(n)
        return data[:at] + fill + data[at + n :]

    return change


def _metadata(which: int, file: str, change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        path = _proc(trace, which) / file
        schema, batches = read_stream(path)
        _write_stream(path, schema.with_metadata(change(dict(schema.metadata or {}))), batches)

    return apply


def _set_meta(key: bytes, value: bytes | None) -> Callable[[dict], dict]:
    def change(meta: dict) -> dict:
        meta = dict(meta)
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
        return meta

    return change


def _non_utf8_names(which: int) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        path = _proc(trace, which) / "names.arrows"
        schema, batches = read_stream(path)
        table = pa.Table.from_batches(batches, schema=schema)
        raw = [
            n.encode() + b"\xff\xfe" if i % 2 else n.encode()
            for i, n in enumerate(table.column("name").to_pylist())
        ]
        binary = pa.array(raw, pa.binary())
        bad = pa.Array.from_buffers(pa.string(), len(binary), binary.buffers())
        i = schema.get_field_index("name")
        table = table.set_column(i, schema.field(i), bad)
        _write_stream(path, schema, table.to_batches())

    return apply


def _rename_non_utf8(which: int) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        p = _proc(trace, which)
        os.rename(os.fsencode(p), os.fsencode(p) + b"\xff\xfe")

    return apply


def _symlink(which: int, what: str) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        p = _proc(trace, which)
        if what == "file":
            (p / "events.arrows").unlink()
            (p / "events.arrows").symlink_to("events.arrows")
        elif what == "names":
            (p / "names.arrows").unlink()
            (p / "names.arrows").symlink_to("names.arrows")
        elif what == "folder":
            shutil.rmtree(p)
            p.symlink_to(p.name)
        else:  # a process folder that is the trace itself
            (trace / "process-1").symlink_to(".")

    return apply


def _remove(which: int, file: str) -> Callable[[Path], None]:
    def apply(trace: Path) -> None:
        (_proc(trace, which) / file).unlink()

    return apply


def _boundaries(base: Path) -> dict[tuple[int, str], list[int]]:
    out = {}
    for which in (0, 1):
        for f in FILES:
            data = (_proc(base, which) / f).read_bytes()
            _, ends = encode(*read_stream(_proc(base, which) / f))
            assert len(data) == ends[-1] + 8 or len(data) == ends[-1], (f, len(data), ends[-1])
            out[(which, f)] = [0, *ends]
    return out


def cases(base: Path, seed: int = 0, per_kind: int = 16) -> list[Case]:
    """Damaged copies of ``base`` (:func:`build_base`): every message boundary of every file cut,
    and ``per_kind`` cases of every other damage kind (more of the kinds that have many variants)."""
    rng = np.random.default_rng(seed)
    out: list[Case] = []

    def pick() -> tuple[int, str]:
        return int(rng.integers(2)), str(rng.choice(FILES, p=[0.5, 0.2, 0.15, 0.15]))

    for (which, f), ends in _boundaries(base).items():
        for cut in ends:
            out.append(
                Case("truncate_boundary", f"{which}/{f}[:{cut}]", _bytes(which, f, lambda d, c=cut: d[:c]))
            )
    for _i in range(per_kind):
        which, f = pick()
        size = (_proc(base, which) / f).stat().st_size
        cut = int(rng.integers(1, size))
        out.append(Case("truncate_random", f"{which}/{f}[:{cut}]", _bytes(which, f, lambda d, c=cut: d[:c])))
    for _i in range(per_kind * 4):
        which, f = pick()
        s, bits = int(rng.integers(2**31)), int(rng.choice([1, 1, 1, 2, 8]))
        out.append(Case("bitflip", f"{which}/{f} seed {s} bits {bits}", _bytes(which, f, _flip(s, bits))))
    for _i in range(per_kind):
        which, f = pick()
        s = int(rng.integers(2**31))
        out.append(Case("overwrite", f"{which}/{f} seed {s}", _bytes(which, f, _overwrite(s))))
    for _i in range(per_kind):
        which, f = pick()
        at_end = bool(rng.integers(2))
        s = int(rng.integers(2**31))
        out.append(
            Case(
                "duplicate_batch",
                f"{which}/{f} at_end={at_end} seed {s}",
                _duplicate_batch(which, f, at_end, s),
            )
        )
    for _i in range(per_kind):
        which, f = pick()
        s = int(rng.integers(2**31))
        out.append(Case("reorder_batches", f"{which}/{f} seed {s}", _reorder_batches(which, f, s)))
    for name, change, count in (
        ("missing_ends", _missing_ends, per_kind),
        ("reversed_timestamps", _reversed_timestamps, per_kind),
        ("huge_timestamps", _huge_timestamps, per_kind),
    ):
        for _i in range(count):
            which, s = int(rng.integers(2)), int(rng.integers(2**31))
            out.append(Case(name, f"{which} seed {s}", _with_events(which, change, s)))
    for column in _BAD:
        for _i in range(max(2, per_kind // 3)):
            which, s = int(rng.integers(2)), int(rng.integers(2**31))
            out.append(
                Case("bad_values", f"{which} {column} seed {s}", _with_events(which, _bad_values(column), s))
            )
    for value in (b"0", b"2", b"99", b"x", b"-1", b"1e3", None):
        which, f = pick()
        change = _set_meta(b"rlscope.schema_version", value)
        out.append(Case("schema_version", f"{which}/{f} {value!r}", _metadata(which, f, change)))
    for which in (0, 1):
        out.append(Case("non_utf8", f"{which} names", _non_utf8_names(which)))
        out.append(Case("non_utf8", f"{which} folder", _rename_non_utf8(which)))
        for key, value in (
            (b"host", b"vm\xff\xfe"),
            (b"argv\xff", b"[]"),
            (b"pid", b"\xff"),
            (b"options", b"{\xff}"),
        ):
            f = "events.arrows"
            out.append(
                Case("non_utf8", f"{which} {key!r}={value!r}", _metadata(which, f, _set_meta(key, value)))
            )
    for key, value in (
        (b"pid", b"x"),
        (b"pid", b"99999999999999999999999"),
        (b"clock_anchor_ns", b"nan"),
        (b"clock_anchor_unix_ns", b"1e400"),
        (b"clock_anchor_unix_ns", str(2**63 - 1).encode()),
        (b"options", b"[1, 2]"),
        (b"options", b"{not json"),
        (b"ppid", b"-"),
        (b"run_parent", b"\x00"),
        (b"world_size", b"x"),
        (b"scopes", b""),
        (b"rlscope.schema_version", b"1\x00"),
    ):
        which = int(rng.integers(2))
        out.append(
            Case(
                "bad_metadata",
                f"{which} {key!r}={value!r}",
                _metadata(which, "events.arrows", _set_meta(key, value)),
            )
        )
    for which in (0, 1):
        for f in FILES:
            out.append(Case("empty_file", f"{which}/{f}", _bytes(which, f, lambda d: b"")))
            if f in REQUIRED:  # without an optional file a trace is valid: its collector was off
                out.append(Case("missing_file", f"{which}/{f}", _remove(which, f)))
            s = int(rng.integers(2**31))
            out.append(
                Case(
                    "oversized_file",
                    f"{which}/{f} garbage",
                    _bytes(which, f, lambda d, s=s: d + np.random.default_rng(s).bytes(3 << 20)),
                )
            )
            out.append(
                Case("oversized_file", f"{which}/{f} zeros", _bytes(which, f, lambda d: d + bytes(3 << 20)))
            )
        for what in ("file", "names", "folder", "trace"):
            out.append(Case("symlink_loop", f"{which} {what}", _symlink(which, what)))
    return out


# ------------------------------------------------------------------------------------------ running


@dataclasses.dataclass
class Outcome:
    """How the CLI took one case (module docstring's classes)."""

    cls: str
    code: int
    stderr: str
    detail: str = ""


class _Timeout(BaseException):
    """The alarm of a case: a BaseException, so that no ``except Exception`` of the CLI takes it."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _cli(argv: list[str], timeout_s: float) -> tuple[int | None, str, str, str]:
    """(exit status or None for a hang, stdout, stderr, an escaped exception's name) of the CLI run
    here; stdout is strict UTF-8 as a terminal's or a pipe's is, stderr escapes as Python's does."""
    from rlscope.cli.analyze import main

    out_b, err_b = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_b, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_b, encoding="utf-8", errors="backslashreplace", write_through=True)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    code: int | None
    escaped = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except _Timeout:
        code = None
    except BaseException as e:
        code, escaped = -1, f"{type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return code, out_b.getvalue().decode(errors="replace"), err_b.getvalue().decode(errors="replace"), escaped


def figures(summary: dict) -> dict[tuple, float]:
    """The figures two analyses of the same trace must agree on, flat: run and process walls and
    unannotated time, and every operation's total, exclusive time, categories and calls, per process
    and phase."""
    out: dict[tuple, float] = {}
    for part in ("raw", "corrected"):
        s = summary[part]
        out[(part, "wall_s")] = s["wall_s"]
        out[(part, "unannotated_s")] = s["unannotated_s"]
        for name, op in s["operations"].items():
            for k in ("total_s", "exclusive_s", "calls"):
                out[(part, "op", name, k)] = op[k]
            for cat, v in {**op["categories"], **op.get("gpu_categories", {})}.items():
                out[(part, "op", name, cat)] = v
        for ph, phase in s["phases"].items():
            for name, op in phase["operations"].items():
                out[(part, "phase", ph, name, "total_s")] = op["total_s"]
        for p in s["processes"]:
            out[(part, "pid", p["pid"], "wall_s")] = p["wall_s"]
            for name, op in p["operations"].items():
                out[(part, "pid", p["pid"], name, "total_s")] = op["total_s"]
    return out


def impossible(summary: dict) -> str:
    """A figure no real run has: a negative time, or an operation of a process longer than the
    process's threads ran ("" when there is none)."""
    for part in ("raw", "corrected"):
        s = summary[part]
        if s["wall_s"] < 0 or s["unannotated_s"] < -TOLERANCE_S:
            return f"{part}: wall {s['wall_s']} s, unannotated {s['unannotated_s']} s"
        for name, op in s["operations"].items():
            if op["total_s"] < -TOLERANCE_S or op["exclusive_s"] < -TOLERANCE_S:
                return f"{part}: {name} {op['total_s']} s ({op['exclusive_s']} s exclusive)"
        for p in s["processes"]:
            if p["wall_s"] < 0:
                return f"{part}: process {p['pid']} wall {p['wall_s']} s"
            for name, op in p["operations"].items():
                if op["total_s"] > p["wall_s"] + TOLERANCE_S:
                    return f"{part}: {name} {op['total_s']} s in process {p['pid']} of {p['wall_s']} s"
    return ""


def chrome_problem(path: Path) -> str:
    """A slice of the Chrome export with a negative duration ("" when none)."""
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    bad = [e for e in events if e.get("ph") == "X" and e["dur"] < 0]
    return f"{len(bad)} Chrome slices of negative duration, e.g. {bad[0]}" if bad else ""


def run_case(
    trace: Path,
    work: Path,
    intact: dict,
    timeout_s: float = 20.0,
    base: Path | None = None,
    table: bool = True,
    export: bool = True,
) -> Outcome:
    """Analyze and export the damaged ``trace`` (``work``: a scratch folder) and classify the outcome
    against ``intact``, the intact trace's summary (``base``: the intact trace, to tell how far the
    damage moved recorded times). ``table``: print the terminal table too (to a strict UTF-8
    stdout), the slowest part of a case; else ``-q``. ``export``: run ``rlscope-analyze export`` too
    (Chrome trace and CSV), when the analysis succeeded."""
    summary_path = work / "summary.json"
    quiet = [] if table else ["-q"]
    code, _, err, escaped = _cli([str(trace), "--json", str(summary_path), *quiet], timeout_s)
    if code is None:
        return Outcome("hang", -1, err)
    if escaped or SAFETY_NET in err:
        return Outcome("traceback", code, err, escaped or err)
    c_code, _, c_err, c_escaped = _cli(["check", str(trace)], timeout_s)
    if c_code is None:
        return Outcome("hang", -1, c_err, "check")
    if c_escaped or SAFETY_NET in c_err or c_code not in (0, 2):
        return Outcome("traceback", c_code, c_err, f"check: {c_escaped or c_err}")
    lines = err.strip().splitlines()
    if code == 2:
        one = len(lines) == 1 and lines[0].startswith("rlscope-analyze: error: ")
        return Outcome("clean-error" if one else "traceback", code, err, "" if one else "not one line")
    if code != 0:
        return Outcome("traceback", code, err, f"exit status {code}")
    summary = json.loads(summary_path.read_text())
    new = [w for w in summary["warnings"] if w not in intact["warnings"]]
    if export:
        chrome = work / "trace.json"
        e_code, _, e_err, e_escaped = _cli(
            ["export", str(trace), "--chrome", str(chrome), "--csv", str(work / "csv")], timeout_s
        )
        if e_code is None:
            return Outcome("hang", -1, e_err, "export")
        if e_escaped or SAFETY_NET in e_err or e_code != 0:
            return Outcome("traceback", e_code, e_err, f"export: {e_escaped or e_err}")
        bad = chrome_problem(chrome)
        if bad:
            return Outcome("impossible", 0, err, bad)
    bad = impossible(summary)
    if bad and not new:
        return Outcome("impossible", 0, err, bad)
    if bad and any(v < 0 for v in _durations(summary)):
        return Outcome("impossible", 0, err, bad)
    if new:
        return Outcome("warned", 0, err, new[0])
    a, b = figures(intact), figures(summary)
    moves = value_moves(base, trace) if base is not None else None
    if moves is not None and moves.renames:
        # names a flipped bit left valid text: each process's figures under its names as changed
        # (the run's, merged by name across processes, then differ in shape only)
        def renamed(k: tuple) -> tuple:
            table = moves.renames.get(k[2], {}) if k[1] == "pid" else {}
            return tuple(table.get(x, x) if isinstance(x, str) and i > 2 else x for i, x in enumerate(k))

        a = {renamed(k): v for k, v in a.items() if k[1] == "pid" or k[1].endswith("_s")}
        b = {k: v for k, v in b.items() if k[1] == "pid" or k[1].endswith("_s")}
    differ = sorted(
        (k for k in a.keys() | b.keys() if k not in a or k not in b or abs(a[k] - b[k]) > TOLERANCE_S),
        key=str,
    )
    if not differ:
        return Outcome("plausible" if moves and moves.renames else "unchanged", 0, err)
    k = differ[0]
    detail = f"{k}: {a.get(k)} -> {b.get(k)} ({len(differ)} figures)"
    # a category an operation had no time in is not in its figures: 0
    if moves is not None and all(
        abs(a.get(k, 0) - b.get(k, 0)) <= (moves.calls if k[-1] == "calls" else moves.seconds + TOLERANCE_S)
        for k in differ
    ):
        return Outcome("plausible", 0, err, f"{detail}; moved {moves.seconds:.9f} s, {moves.calls} calls")
    return Outcome("silent", 0, err, detail)


_TIME_COLUMNS = ("ts_ns", "start_ns", "end_ns")
_TIME_KEYS = ("clock_anchor_ns", "clock_anchor_unix_ns")


def _gpu_time_launched(proc: Path, start: int, end: int) -> int:
    """GPU time (ns) of the records whose launching call began in [start, end]: it goes where the
    operation open at the launch goes."""
    if not (proc / "gpu.arrows").exists():
        return 0
    gpu = pa.Table.from_batches(read_stream(proc / "gpu.arrows")[1]).to_pydict()
    launched = {
        c
        for k, s, c in zip(gpu["category"], gpu["start_ns"], gpu["correlation"], strict=True)
        if k == 3 and start <= s <= end
    }
    rows = zip(gpu["category"], gpu["start_ns"], gpu["end_ns"], gpu["correlation"], strict=True)
    return sum(e - s for k, s, e, c in rows if k != 3 and c in launched)


@dataclasses.dataclass
class Moves:
    """What a damage changed that leaves a valid trace: how far it can move any figure (s), how many
    calls it can move between operations, and names whose text it changed (per pid, old -> new)."""

    seconds: float = 0.0
    calls: int = 0
    renames: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)


def value_moves(base: Path, damaged: Path) -> Moves | None:
    """What the damage changed of the values the files decode to (:class:`Moves`) when it only moved
    recorded times (timestamps, measured costs, clock anchors), moved rows to another thread,
    renamed whole instances or records, or changed names' text; None when it changed anything else (a
    row, a kind, an id, half an instance) or the damaged files do not decode whole."""
    moves, moved = Moves(), 0
    procs = sorted(p.name for p in base.iterdir() if p.name.startswith("process-"))
    for name in procs:
        for f in FILES:
            try:
                schema_a, a = read_stream(base / name / f)
                schema_b, b = read_stream(damaged / name / f)
                ta, tb = pa.Table.from_batches(a, schema_a), pa.Table.from_batches(b, schema_b)
                tb.validate(full=True)
            except Exception:
                return None
            if ta.schema != tb.schema or ta.num_rows != tb.num_rows:
                return None
            # metadata: a clock anchor moves every time of the process; other keys move nothing (a
            # change that moves figures then shows, as it must be said)
            meta_a, meta_b = schema_a.metadata or {}, schema_b.metadata or {}
            for key in _TIME_KEYS:
                with contextlib.suppress(KeyError, ValueError):
                    moved += abs(int(meta_a[key.encode()]) - int(meta_b[key.encode()]))
            for col in ta.column_names:
                if ta.column(col).equals(tb.column(col)):
                    continue
                if f == "names.arrows" and col == "name":
                    old, new = ta.column(col).to_pylist(), tb.column(col).to_pylist()
                    pid = int(name.removeprefix("process-"))
                    moves.renames[pid] = {x: y for x, y in zip(old, new, strict=True) if x != y}
                    continue
                va = ta.column(col).to_numpy().astype(np.int64)
                vb = tb.column(col).to_numpy().astype(np.int64)
                changed = va != vb
                if col in _TIME_COLUMNS:
                    moved += int(np.abs(va - vb).sum())
                    # a boundary moved across a launch, or a launch across a boundary: that GPU work
                    # goes to another operation
                    for x, y in zip(va[changed].tolist(), vb[changed].tolist(), strict=True):
                        moved += _gpu_time_launched(base / name, min(x, y), max(x, y))
                elif col == "cost":  # a boundary's measured cost, pre | post << 32 ns
                    pre, post = np.abs((va & 0xFFFFFFFF) - (vb & 0xFFFFFFFF)), np.abs((va >> 32) - (vb >> 32))
                    moved += int((pre + post).sum())
                elif f == "events.arrows" and col in ("thread", "name"):
                    # rows on another thread, or an instance under another name (begin and end alike,
                    # else the reader says so): what they span may go to other operations
                    ts = ta.column("ts_ns").to_numpy()[changed]
                    moved += int(ts.max() - ts.min()) + _gpu_time_launched(base / name, ts.min(), ts.max())
                    kind = ta.column("kind").to_numpy()[changed]
                    moves.calls += int(np.isin(kind, (0, 4)).sum()) if col == "name" else 0
                elif f == "backend.arrows" and col in ("thread", "name"):  # a torch op elsewhere
                    ops = ta.column("end_ns").to_numpy() - ta.column("start_ns").to_numpy()
                    moved += int(ops[changed].sum())
                elif f == "gpu.arrows":
                    # a record's category, stream, thread or correlation: its time, and the time of the
                    # records its old and new correlation join it to, may go to another operation
                    dur = ta.column("end_ns").to_numpy() - ta.column("start_ns").to_numpy()
                    corr = ta.column("correlation").to_numpy()
                    linked = np.isin(corr, corr[changed])
                    if col == "correlation":
                        linked |= np.isin(corr, vb[changed])
                    moved += int(dur[changed | linked].sum())
                else:
                    return None
    moves.seconds = moved / 1e9
    return moves


def _durations(summary: dict) -> list[float]:
    out = []
    for part in ("raw", "corrected"):
        s = summary[part]
        out += [s["wall_s"], s["unannotated_s"]]
        out += [op[k] for op in s["operations"].values() for k in ("total_s", "exclusive_s")]
    return out


def run_corpus(base: Path, scratch: Path, seed: int = 0, per_kind: int = 16) -> list[tuple[Case, Outcome]]:
    """Every case of :func:`cases`, each on a fresh copy of ``base`` in ``scratch``: the terminal table
    printed for the cases of TEXT_KINDS and every fourth other one, every other one exported."""
    scratch.mkdir(parents=True, exist_ok=True)
    code, _, err, _ = _cli([str(base), "--json", str(scratch / "intact.json"), "-q"], 60.0)
    assert code == 0, err
    intact = json.loads((scratch / "intact.json").read_text())
    results = []
    for i, case in enumerate(cases(base, seed, per_kind)):
        trace = scratch / f"case{i}"
        work = scratch / f"work{i}"
        shutil.copytree(base, trace, symlinks=True)
        work.mkdir()
        case.apply(trace)
        table, export = case.kind in TEXT_KINDS or i % 4 == 0, i % 2 == 1
        results.append((case, run_case(trace, work, intact, base=base, table=table, export=export)))
        shutil.rmtree(os.fsencode(trace), ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return results


def collector_table(
    rng: np.random.Generator, kind: str, trial: int, max_rows: int, late: int | None = None
) -> tuple[pa.Table, np.ndarray]:
    """A random table of a collector ``kind`` (validate._TABLE_RULES) for trial number ``trial``, and
    its start times: in time order or not, repeated times, intervals ending before they start, codes no
    writer makes, a time below 0 (or, every other such trial, ``late`` where given: past the limit)
    and its first rows written twice, each in some trials."""
    from rlscope.trace import validate as V

    times, code, codes = V._TABLE_RULES[kind]
    n = int(rng.integers(1, max_rows))
    start = np.cumsum(rng.integers(1 if trial % 3 == 0 else 0, 4, n)) + 100
    if trial % 4 == 1:
        start = rng.permutation(start)
    cols = {times[0]: start}
    if len(times) == 2:
        cols[times[1]] = start + rng.integers(0 if trial % 5 else -1, 9, n)
    if code:
        cols[code] = rng.choice(list(codes) + ([99] if trial % 6 == 0 else []), n)
    cols["x"] = rng.integers(0, 2, n)
    if trial % 7 == 0:
        cols[times[0]][rng.integers(0, n)] = late if late is not None and trial % 2 == 0 else -5
    if trial % 8 == 0 and n > 3:
        cols = {k: np.concatenate([v, v[:3]]) for k, v in cols.items()}
    return pa.table({k: pa.array(v, pa.int64()) for k, v in cols.items()}), start
