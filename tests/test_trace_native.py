"""The trace checks' C pass (rlscope/trace/native/intact.c): it confirms intact event tables, and
never one that validate_events' numpy checks would change or say anything about.

The recorded traces of the trace tests go through both on every table (the ``validation_audited``
fixture of tests/conftest.py); here, synthetic tables that use every feature the checks read (nested
and recursive operations on interleaved threads, phases, categories, flush marks, measured costs,
windows and detail rows, reference speeds, sessions ended or not), then thousands of damaged copies
of them: bits flipped, values changed, rows repeated, dropped, swapped or moved to another thread.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlscope import categories
from rlscope.trace import native
from rlscope.trace import schema as S
from rlscope.trace import validate as V
from tests import trace_fuzz as F

pytestmark = pytest.mark.skipif(native.unavailable() is not None, reason="no C pass here")


def _verdict(table: pa.Table, complete: bool | None) -> str | None:
    return native.check(V._columns(table), V._KIND_OK, V._CATEGORY_OK, complete)


def _numpy_clean(table: pa.Table, complete: bool | None) -> bool:
    """Whether the numpy checks find nothing and change nothing."""
    own = {k: v.copy() for k, v in V._columns(table).items()}
    t = V._Table(table, "p", own)
    V._check(t, complete)
    return not t.changed and not t.findings


def _table(rows: dict[str, list[int]]) -> pa.Table:
    """The columns of ``rows`` in the writer's types (``cost`` where it has one)."""
    fields = list(S.events_schema({}))
    if "cost" in rows:
        fields.append(pa.field("cost", pa.int64()))
    return pa.Table.from_arrays(
        [pa.array(np.array(rows[f.name], np.int64), f.type) for f in fields], schema=pa.schema(fields)
    )


def synthetic(seed: int, complete: bool = True, detail: bool = False, threads: int = 3) -> pa.Table:
    """An intact events table: each thread's scopes nested as the writer nests them (ids counted per
    thread, so that in time order they are not increasing), names from a few (so some operations
    recurse), measured costs within their rows' gaps, flush marks, a session started and, when
    ``complete``, ended after every scope closed."""
    rng = np.random.default_rng(seed)
    per_thread: list[list[list[int]]] = []
    next_id = {0: 0, 1: 0}  # operations, phases
    for thread in range(1, threads + 1):
        rows: list[list[int]] = []  # ts, thread, kind, id, parent, name, flags
        ts = int(rng.integers(0, 50))
        ops: list[tuple[int, int]] = []  # open (id, name)
        phases: list[tuple[int, int]] = []
        cats: list[int] = []
        for _ in range(int(rng.integers(5, 120))):
            ts += int(rng.integers(0, 40))  # equal times too (a coarse clock)
            act = rng.integers(0, 9)
            flags = S.FLAG_SUMMARIZED if rng.random() < 0.05 else 0
            if act <= 1 or (act == 2 and not ops):
                i, name = next_id[0], int(rng.integers(0, 3))
                next_id[0] += int(rng.integers(1, 3))  # ids with gaps, as where a sample is kept
                if any(n == name for _, n in ops):
                    flags |= S.FLAG_RECURSIVE
                rows.append([ts, thread, S.OP_BEGIN, i, ops[-1][0] if ops else -1, name, flags])
                ops.append((i, name))
            elif act == 2:
                i, name = ops.pop()
                forced = S.FLAG_FORCED_CLOSE if rng.random() < 0.1 else 0
                rows.append([ts, thread, S.OP_END, i, ops[-1][0] if ops else -1, name, flags | forced])
            elif act == 3 and len(phases) < 2:
                i = next_id[1]
                next_id[1] += int(rng.integers(1, 3))
                rows.append([ts, thread, S.PHASE_BEGIN, i, phases[-1][0] if phases else -1, 9, flags])
                phases.append((i, 9))
            elif act == 3:
                i, name = phases.pop()
                rows.append([ts, thread, S.PHASE_END, i, phases[-1][0] if phases else -1, name, flags])
            elif act in (4, 5) and (act == 4 or not cats):
                codes = sorted(categories.CATEGORY_NAMES) if rng.random() < 0.5 else [categories.PYTHON, 3]
                code = int(rng.choice(codes))
                rows.append(
                    [ts, thread, S.CAT_BEGIN, code, cats[-1] if cats else categories.PYTHON, -1, flags]
                )
                cats.append(code)
            elif act == 5:
                code = cats.pop()
                rows.append([ts, thread, S.CAT_END, code, cats[-1] if cats else categories.PYTHON, -1, flags])
            elif act == 6:
                rows.append([ts, thread, int(rng.choice([9, 10])), int(rng.integers(-5, 5)), -1, -1, 0])
            elif act == 7 and detail:
                rows.append([ts, thread, S.DETAIL, int(rng.integers(0, 2)), -1, -1, 0])
            else:
                speed = int(rng.choice([-1, 1_000, 300_000, 1_000_000_000]))
                rows.append([ts, thread, S.WINDOW, int(rng.integers(0, 2)), speed, -1, 0])
        if complete:
            while ops or phases or cats:
                ts += int(rng.integers(0, 5))
                if cats:
                    code = cats.pop()
                    rows.append([ts, thread, S.CAT_END, code, cats[-1] if cats else 0, -1, 0])
                elif ops:
                    i, name = ops.pop()
                    rows.append([ts, thread, S.OP_END, i, ops[-1][0] if ops else -1, name, 0])
                else:
                    i, name = phases.pop()
                    rows.append([ts, thread, S.PHASE_END, i, phases[-1][0] if phases else -1, name, 0])
        per_thread.append(rows)
    start = [0, 1, S.SESSION_START, -1, int(rng.choice([-1, 250_000])), -1, 0]
    window = [0, 1, S.WINDOW, S.WINDOW_FULL, -1, -1, 0]
    body = sorted((r for rows in per_thread for r in rows), key=lambda r: r[0])  # stable: per thread
    rows = [start, window, *body]
    end_ts = max(r[0] for r in rows) + 1
    if complete:  # the end row on the main thread or a thread of its own (the writer's)
        rows.append([end_ts, int(rng.choice([0, 1])), S.SESSION_END, -1, -1, -1, 0])
        # a flush running as the session stopped: the writer's mark may end after the end row
        rows.append([end_ts, 2, S.CAT_BEGIN, categories.PROFILER, categories.PYTHON, -1, 0])
        rows.append([end_ts + 7, 2, S.CAT_END, categories.PROFILER, categories.PYTHON, -1, 0])
    cols = dict(
        zip(
            ["ts_ns", "thread", "kind", "id", "parent", "name", "flags"], zip(*rows, strict=True), strict=True
        )
    )
    cols = {k: list(v) for k, v in cols.items()}
    # measured costs (pre | post << 32) within the gaps to the thread's neighbours; flush marks carry
    # the flush's CPU time, which no gap bounds
    n, ts, thread = len(rows), np.array(cols["ts_ns"]), np.array(cols["thread"])
    cost = np.zeros(n, np.int64)
    for t in np.unique(thread):
        at = np.flatnonzero(thread == t)
        gaps = np.diff(ts[at])
        for j, row in enumerate(at):
            if rng.random() < 0.5:
                continue
            before = int(gaps[j - 1]) if j else 1 << 31
            after = int(gaps[j]) if j < len(at) - 1 else 1 << 31
            cost[row] = int(rng.integers(0, min(before, 1 << 32 - 1) + 1)) | (
                int(rng.integers(0, min(after, 1 << 31 - 1) + 1)) << 32
            )
    flush = (np.array(cols["kind"]) == S.CAT_END) & (np.array(cols["id"]) == categories.PROFILER)
    cost[flush] = rng.integers(0, S.FLUSH_CPU_MAX + 1, int(flush.sum()))
    cols["cost"] = list(cost)
    return _table(cols)


def test_the_c_constants_are_the_schemas():
    source = (Path(native.__file__).parent / "intact.c").read_text()

    def value(name: str) -> int:
        m = re.search(rf"\b{name} = (\d+)|#define {name} \(?\(?(?:int64_t|uint64_t)?\)?([0-9xA-F]+)", source)
        assert m, name
        return int(m.group(1) or m.group(2), 0)

    for name in ("OP_BEGIN", "OP_END", "CAT_BEGIN", "CAT_END", "PHASE_BEGIN", "PHASE_END"):
        assert value(name) == getattr(S, name)
    for name in ("SESSION_START", "SESSION_END", "WINDOW", "DETAIL"):
        assert value(name) == getattr(S, name)
    for name in ("FLAG_RECURSIVE", "FLAG_FORCED_CLOSE", "FLAG_SUMMARIZED", "FLUSH_CPU_MAX"):
        assert value(name) == getattr(S, name)
    assert value("PROFILER") == categories.PROFILER and value("PYTHON") == categories.PYTHON
    assert value("NS_PER_SCOPE") == V.NS_PER_SCOPE
    assert (S.WINDOW_LIGHT, S.WINDOW_FULL) == (0, 1) == (S.DETAIL_PAUSE, S.DETAIL_RESUME)
    assert "MAX_TS_NS ((uint64_t)1 << 60)" in source and V.MAX_TS_NS == 1 << 60
    assert "ID_SPREAD ((int64_t)1 << 22)" in source and V._ID_SPREAD == 1 << 22
    assert f"REFERENCE_PS_MIN {V._REFERENCE_PS[0]}" in source
    assert f"REFERENCE_PS_MAX {V._REFERENCE_PS[1]}" in source
    reasons = re.search(r"enum \{\s*INTACT = 0,([^}]*)\}", source).group(1)
    names = [w.strip()[2:].lower().replace("_", " ") for w in reasons.split(",") if w.strip()]
    assert ("intact", *names) == native.REASONS


@pytest.mark.parametrize("seed", range(40))
def test_intact_synthetic_tables_are_confirmed(seed: int):
    complete = seed % 4 != 3
    table = synthetic(seed, complete=complete, detail=seed % 3 == 0, threads=1 + seed % 4)
    if seed % 5 == 4:
        table = table.drop_columns(["cost"])
    for given in (None, complete):
        assert _numpy_clean(table, given)
        assert _verdict(table, given) == "intact"
        out, findings = V.validate_events(table, "p", given)
        assert out is table and findings == []
    if not complete and _verdict(table, True) != "intact":  # scopes open at the end of a finished run
        assert not _numpy_clean(table, True)


def _damage(t: pa.Table, rng: np.random.Generator) -> pa.Table:
    """Damages: of the kinds a file meets (a bit flipped, a value moved by a little, set to -1 or
    copied from another row, a run of rows repeated, dropped or swapped with the next, the tail cut,
    a row moved to another thread, a thread's first rows lost), and damages that keep the rows
    otherwise consistent, so that each check alone stands between them and a wrong "intact": an
    instance renumbered or renamed (its begin, end and children alike), a flag bit flipped, a
    thread's last row moved past the session's end, a measured cost set at the edge of its gap, a
    flush mark's CPU time past its bound."""
    cols = {k: t.column(k).to_numpy().copy() for k in t.column_names}
    names = list(cols)
    n = len(cols["ts_ns"])
    # half the tables: one damage that keeps the rest consistent; the others: one to three of any kind
    one = rng.random() < 0.5
    for _ in range(1 if one else int(rng.integers(1, 4))):
        what = int(rng.integers(9, 20)) if one or rng.random() < 0.5 else int(rng.integers(0, 9))
        k = names[int(rng.integers(0, len(names)))]
        if what == 0 and n:
            i, b = int(rng.integers(0, n)), int(rng.integers(0, cols[k].dtype.itemsize * 8))
            v = cols[k].view(np.dtype(f"u{cols[k].dtype.itemsize}"))
            v[i] ^= np.array(1 << b).astype(v.dtype)
        elif what in (1, 2, 3) and n > 4:
            a = int(rng.integers(0, n - 2))
            m = int(rng.integers(1, min(8, (n - a) // 2 + 1) + 1))
            for kk, v in cols.items():
                if what == 1:
                    cols[kk] = np.concatenate([v[: a + m], v[a : a + m], v[a + m :]])
                elif what == 2:
                    cols[kk] = np.concatenate([v[:a], v[a + m :]])
                else:
                    cols[kk] = np.concatenate([v[:a], v[a + m : a + 2 * m], v[a : a + m], v[a + 2 * m :]])
            n = len(cols["ts_ns"])
        elif what == 4 and n:
            i = int(rng.integers(0, n))
            cols[k][i] = cols[k][i] + int(rng.integers(-3, 4))
        elif what == 5 and n:
            cols[k][int(rng.integers(0, n))] = -1
        elif what == 6 and n:
            i, j = rng.integers(0, n, 2)
            cols[k][i] = cols[k][j]
        elif what == 7 and n > 2:
            m = int(rng.integers(1, n))
            cols = {kk: v[:m] for kk, v in cols.items()}
            n = m
        elif what == 8 and n:
            cols["thread"][int(rng.integers(0, n))] = cols["thread"][int(rng.integers(0, n))]
        elif what == 9 and n:
            begins = np.flatnonzero((cols["kind"] == S.OP_BEGIN) | (cols["kind"] == S.PHASE_BEGIN))
            row = int(rng.choice(begins)) if len(begins) and rng.random() < 0.5 else int(rng.integers(0, n))
            cols["flags"].view(np.uint8)[row] ^= np.uint8(1 << int(rng.choice([0, 1, 1, 2, 3, 7])))
        elif what in (10, 11) and n:
            _instance(cols, rng, rename=what == 11)
        elif what == 12 and n:
            last = np.unique([np.flatnonzero(cols["thread"] == t)[-1] for t in np.unique(cols["thread"])])
            row = int(rng.choice(last))
            cols["ts_ns"][row] = cols["ts_ns"].max() + int(rng.integers(0, 3))
        elif what == 13 and "cost" in cols and n > 1:
            i = int(rng.integers(1, n))
            same = np.flatnonzero(cols["thread"][:i] == cols["thread"][i])
            if len(same):
                gap = int(cols["ts_ns"][i] - cols["ts_ns"][same[-1]])
                edge = max(gap + int(rng.integers(-1, 2)), 0)
                if rng.random() < 0.5:
                    cols["cost"][i] = edge | (cols["cost"][i] >> 32 << 32)
                else:
                    cols["cost"][same[-1]] = (cols["cost"][same[-1]] & 0xFFFFFFFF) | (edge << 32)
        elif what == 14 and "cost" in cols:
            flush = np.flatnonzero((cols["kind"] == S.CAT_END) & (cols["id"] == categories.PROFILER))
            if len(flush):
                cols["cost"][flush[-1]] = S.FLUSH_CPU_MAX + int(rng.integers(0, 2))
            if rng.random() < 0.5:  # negative: of a row, or of a flush mark
                row = int(rng.choice(flush)) if len(flush) and rng.random() < 0.5 else int(rng.integers(0, n))
                cols["cost"][row] = -(int(rng.integers(1, 4)) << int(rng.choice([0, 32])))
        elif what == 15:
            windows = np.flatnonzero((cols["kind"] == S.WINDOW) | (cols["kind"] == S.DETAIL))
            if len(windows):
                cols["id"][int(rng.choice(windows))] = int(rng.choice([-1, 2, 3]))
        elif what == 18:
            cat = np.flatnonzero((cols["kind"] == S.CAT_BEGIN) | (cols["kind"] == S.CAT_END))
            if len(cat):
                row = int(rng.choice(cat))
                column = "parent" if cols["kind"][row] == S.CAT_BEGIN or rng.random() < 0.5 else "id"
                cols[column][row] = int(rng.choice(sorted(categories.CATEGORY_NAMES)))
        elif what == 19 and n:
            # a thread's first rows lost (its categories then end where none of its rows opened one)
            rows = np.flatnonzero(cols["thread"] == cols["thread"][int(rng.integers(0, n))])
            keep = np.ones(n, bool)
            keep[rows[: int(rng.integers(0, len(rows) + 1))]] = False
            cols = {kk: v[keep] for kk, v in cols.items()}
            n = len(cols["ts_ns"])
        elif what == 17:
            ends = np.flatnonzero((cols["kind"] == S.OP_END) | (cols["kind"] == S.PHASE_END))
            if len(ends):
                cols["name"][int(rng.choice(ends))] += int(rng.integers(1, 3))
        elif what == 16 and n > 1:
            i = int(rng.integers(1, n))
            same = np.flatnonzero(cols["thread"][:i] == cols["thread"][i])
            if len(same):
                cols["ts_ns"][i] = cols["ts_ns"][same[-1]] - int(rng.integers(0, 2))
    return pa.Table.from_arrays([pa.array(cols[k], t.schema.field(k).type) for k in names], schema=t.schema)


def _instance(cols: dict[str, np.ndarray], rng: np.random.Generator, rename: bool) -> None:
    """One operation or phase changed in all its rows (begin, end, its children's parent): its id
    set to another instance's, below its parent's, far away or -1; or its name set to its parent's,
    another's or -1."""
    kind = cols["kind"]
    begins = np.flatnonzero((kind == S.OP_BEGIN) | (kind == S.PHASE_BEGIN))
    if not len(begins):
        return
    b = int(rng.choice(begins))
    stack = (kind == kind[b]) | (kind == kind[b] + 1)
    ids = cols["id"][stack & (kind == kind[b])]
    old, parent = int(cols["id"][b]), int(cols["parent"][b])
    mine = stack & (cols["id"] == old)
    if rename:
        parents = stack & (cols["id"] == parent) & (kind == kind[b])
        other = int(cols["name"][np.flatnonzero(parents)[0]]) if parents.any() else 0
        cols["name"][mine] = int(rng.choice([other, int(rng.integers(0, 4)), -1]))
        return
    new = int(rng.choice([int(rng.choice(ids)), parent - 1, parent, old + (1 << 40), -1]))
    cols["id"][mine] = new
    cols["parent"][stack & (cols["parent"] == old)] = new


def _fuzz(seed: int, tables: int) -> tuple[int, int]:
    """Damaged synthetic tables, each checked with the session ended, not, and as the rows say: the
    C pass never confirms one the numpy checks change or say anything about; validate_events gives
    the same table and findings with the C pass and without it. Returns (tables the C pass
    confirmed, tables the numpy checks found nothing in)."""
    rng = np.random.default_rng(seed)
    confirmed = clean = 0
    for i in range(tables):
        complete = rng.random() < 0.7
        table = synthetic(
            seed * 100_000 + i, complete=complete, detail=rng.random() < 0.3, threads=int(rng.integers(1, 4))
        )
        if rng.random() < 0.15:
            table = table.drop_columns(["cost"])
        damaged = _damage(table, rng)
        for given in (None, True, False):
            verdict = _verdict(damaged, given)
            ok = _numpy_clean(damaged, given)
            assert verdict != "intact" or ok, (seed, i, given)
            confirmed += verdict == "intact"
            clean += ok
    return confirmed, clean


def test_no_damaged_table_is_confirmed():
    confirmed, clean = _fuzz(seed=1, tables=800)
    assert confirmed == clean  # every table the numpy checks pass, the C pass confirms too
    assert 0 < confirmed < 800  # damages the checks pass (a value changed to what it was) and others


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 8))
def test_no_damaged_table_is_confirmed_thousands(seed: int):
    confirmed, clean = _fuzz(seed=seed, tables=3000)
    assert confirmed == clean


def test_the_c_pass_changes_nothing_validate_events_returns(monkeypatch):
    """Damaged or not: validate_events gives the same table and findings with the C pass and without."""
    rng = np.random.default_rng(5)
    for i in range(60):
        table = synthetic(i, complete=bool(i % 2))
        if i % 3:
            table = _damage(table, rng)
        monkeypatch.delenv(native.clib.ENV, raising=False)
        with_c = V.validate_events(table, "p")
        monkeypatch.setenv(native.clib.ENV, "0")
        without = V.validate_events(table, "p")
        assert (with_c[0] is table) == (without[0] is table)
        assert with_c[0].equals(without[0]) and with_c[1] == without[1]


def test_switched_off_or_without_a_compiler_the_numpy_checks_run(monkeypatch, tmp_path):
    table = synthetic(3)
    damaged = _table({k: [*v, v[-1]] for k, v in table.to_pydict().items()})  # the last row twice
    assert _verdict(table, None) == "intact"
    monkeypatch.setenv(native.clib.ENV, "0")
    assert _verdict(table, None) is None
    assert native.unavailable() == f"{native.clib.ENV}=0"
    assert V.validate_events(table, "p") == (table, [])
    assert V.validate_events(damaged, "p")[1]
    monkeypatch.delenv(native.clib.ENV)
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(native, "_LIB", native._library())
    assert _verdict(table, None) is None
    assert native.unavailable() == "no C compiler (cc)"
    assert V.validate_events(table, "p") == (table, [])
    assert V.validate_events(damaged, "p")[1]


def test_columns_of_other_types_are_left_to_the_numpy_checks():
    table = synthetic(4)
    wide = table.set_column(
        table.schema.get_field_index("kind"),
        "kind",
        pa.array(table.column("kind").to_numpy().astype(np.int16)),
    )
    assert _verdict(wide, None) is None
    assert V.validate_events(wide, "p") == (wide, [])


def test_a_library_of_another_version_is_not_called(monkeypatch):
    monkeypatch.setattr(native, "_LIB", native._library())
    monkeypatch.setattr(native, "ABI", native.ABI + 1)
    assert _verdict(synthetic(2), None) is None
    assert "version mismatch" in native.unavailable()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda c: c["kind"].__setitem__(3, 12), "kind"),
        (lambda c: c["ts_ns"].__setitem__(3, 1 << 60), "time"),
        (lambda c: c["flags"].__setitem__(-1, 8), "flags"),
        (lambda c: c["parent"].__setitem__(0, 999), "reference speed"),
    ],
)
def test_each_check_is_named(change, reason):
    table = synthetic(6)
    cols = {k: list(v) for k, v in table.to_pydict().items()}
    arrays = {k: np.array(v, np.int64) for k, v in cols.items()}
    change(arrays)
    assert _verdict(_table({k: list(v) for k, v in arrays.items()}), None) == reason


def _cat_table(*rows: tuple[int, int, int, int, int]) -> pa.Table:
    """A session with category rows (ts, thread, kind, id, parent) and nothing else of note."""
    body = [
        (0, 1, S.SESSION_START, -1, -1),
        (0, 1, S.WINDOW, S.WINDOW_FULL, -1),
        *rows,
        (100, 1, S.SESSION_END, -1, -1),
    ]
    cols = dict(
        zip(["ts_ns", "thread", "kind", "id", "parent"], map(list, zip(*body, strict=True)), strict=True)
    )
    cols["name"] = [-1] * len(body)
    cols["flags"] = [0] * len(body)
    return _table(cols)


def test_a_category_end_where_none_is_open_is_followed_as_the_numpy_checks_follow_it():
    """A thread's first category row may end a category its rows never began (its rows before were
    lost, or began before the session): the checks say nothing where it leaves the category the
    thread is in, and the thread is then in the one it names as its parent."""
    python, cuda = categories.PYTHON, categories.CUDA_API
    followed = _cat_table(
        (10, 2, S.CAT_END, python, cuda),  # leaves Python for CUDA
        (20, 2, S.CAT_BEGIN, python, cuda),  # begun from CUDA, as the rows say
        (30, 2, S.CAT_END, python, cuda),
        (40, 2, S.CAT_END, cuda, python),  # leaves CUDA, where none is open either
    )
    contradicted = _cat_table(
        (10, 2, S.CAT_END, python, cuda),
        (20, 2, S.CAT_BEGIN, cuda, python),  # begun from Python: the thread is in CUDA
        (30, 2, S.CAT_END, cuda, python),
    )
    wrong_end = _cat_table((10, 2, S.CAT_END, cuda, python))  # leaves CUDA: the thread is in Python
    for table, clean in ((followed, True), (contradicted, False), (wrong_end, False)):
        assert _numpy_clean(table, None) is clean
        assert (_verdict(table, None) == "intact") is clean


# load.c: the load's passes, each against the numpy code it mirrors


def _times_numpy(start: np.ndarray, end: np.ndarray | None, after: int) -> tuple[bool, bool, bool] | None:
    """times_scan's answer from numpy: None where a time (or ``after``) is not one a clock gives."""
    times = [start] if end is None else [start, end]
    if any(((t < 0) | (t >= V.MAX_TS_NS)).any() for t in times) or not 0 <= after < V.MAX_TS_NS:
        return None
    if end is None:
        return False, bool((start[1:] > start[:-1]).all()), False
    return bool((end < start).any()), bool((start[1:] > start[:-1]).all()), bool((end > after).any())


def _times_cases() -> list[tuple[np.ndarray, np.ndarray, int]]:
    rng = np.random.default_rng(11)
    big, top = 1 << 59, V.MAX_TS_NS
    a = np.array
    cases = [
        (a([], np.int64), a([], np.int64), 5),
        (a([7]), a([7]), 7),
        (a([7]), a([8]), 7),
        (a([7]), a([6]), 7),
        (a([0, 0]), a([0, 0]), 0),  # equal starts: not increasing
        (a([0, 1]), a([1, 1]), 0),
        (a([top - 2, top - 1]), a([top - 1, top - 1]), top - 1),
        (a([0, top - 1]), a([top - 1, 0]), 0),  # ends before starts by the most a clock gives
        (a([5, 4]), a([5, 4]), 4),
        (a([1, top]), a([2, 3]), 0),  # a time no clock gives: numpy decides
        (a([1, 2]), a([2, -1]), 0),
        (a([-1, 2]), a([2, 3]), 0),
        (a([1, 2]), a([2, 3]), -1),  # an end past no time a clock gives
        (a([1, 2]), a([2, 3]), top),
        (a([1, 2]), a([2, np.iinfo(np.int64).max]), 0),
        (a([np.iinfo(np.int64).min, 2]), a([2, 3]), 0),
    ]
    for trial in range(300):
        n = int(rng.integers(1, 60))
        start = np.cumsum(rng.integers(0 if trial % 3 else 1, 3, n)) + int(rng.choice([0, big]))
        if trial % 5 == 1:
            start = rng.permutation(start)
        end = start + rng.integers(-1 if trial % 4 == 0 else 0, 5, n)
        if trial % 7 == 0:
            (start if trial % 2 else end)[rng.integers(0, n)] = rng.choice([-1, top, top + 5, -(1 << 62)])
        after = int(rng.choice([start.min(), end.max(), end.max() - 1, int(np.median(end))]))
        cases.append((start.astype(np.int64), end.astype(np.int64), after))
    return cases


def test_times_scan_is_the_numpy_reductions():
    for start, end, after in _times_cases():
        assert native.times_scan(start, end, after) == _times_numpy(start, end, after), (start, end, after)
        assert native.times_scan(start, None, after) == _times_numpy(start, None, after), (start, after)


def test_times_scan_leaves_other_columns_to_numpy():
    start = np.arange(10, dtype=np.int64)
    assert native.times_scan(start, start + 1, 3) == (False, True, True)
    assert native.times_scan(start.astype(np.int32), None, 3) is None
    assert native.times_scan(start[::2], None, 3) is None  # not contiguous
    assert native.times_scan(start, start[:5], 3) is None


def _validated(table: pa.Table, kind: str, session: tuple[int, int] | None) -> tuple[pa.Table, list[str]]:
    out, found = V.validate_table(table, kind, "w", session)
    return out, [f.message for f in found]


@pytest.mark.parametrize("kind", ["backend", "collectives", "nvml", "stacks", "compile", "memory"])
def test_validate_table_is_the_same_with_the_c_pass_and_without(kind: str, monkeypatch):
    """validate_table with the C pass's reductions and with numpy's: the same table back (the same
    object where intact) and the same findings, on intact tables, tables out of order, repeated rows,
    impossible times, intervals ending first, and torch ops past the session."""
    rng = np.random.default_rng(3)
    tables = []
    for trial in range(80):
        table, start = F.collector_table(rng, kind, trial, 120, late=V.MAX_TS_NS)
        session = None if trial % 9 == 0 else (0, int(np.median(start)) + int(rng.integers(-2, 3)))
        tables.append((table, session))
    with_c = [_validated(t, kind, s) for t, s in tables]
    monkeypatch.setenv(native.clib.ENV, "0")
    for (table, session), (out, said) in zip(tables, with_c, strict=True):
        ref, ref_said = _validated(table, kind, session)
        assert said == ref_said and out.equals(ref) and (out is table) == (ref is table)


def _names_numpy(kind: np.ndarray, name: np.ndarray, n_names: int) -> np.ndarray:
    rows = np.isin(kind, (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END))
    ids = np.unique(name[rows]).astype(np.int64)
    used = np.zeros(n_names, bool)
    used[ids[(ids >= 0) & (ids < n_names)]] = True
    return used


def test_names_used_is_the_numpy_unique():
    rng = np.random.default_rng(4)
    assert native.names_used(np.zeros(0, np.int8), np.zeros(0, np.int32), 3).tolist() == [False] * 3
    assert native.names_used(np.zeros(2, np.int8), np.array([0, 0], np.int32), 0).tolist() == []
    for trial in range(200):
        n, n_names = int(rng.integers(1, 300)), int(rng.integers(0, 40))
        kind = rng.integers(-3, 13, n).astype(np.int8)
        name = rng.integers(-3, n_names + 4, n).astype(np.int32)
        if trial % 5 == 0:
            name[:] = np.iinfo(np.int32).max if trial % 2 else np.iinfo(np.int32).min
        got = native.names_used(kind, name, n_names)
        assert got is not None and got.tolist() == _names_numpy(kind, name, n_names).tolist()
    assert native.names_used(np.zeros(3, np.int16), np.zeros(3, np.int32), 3) is None
    assert native.names_used(np.zeros(3, np.int8), np.zeros(3, np.int64), 3) is None


def test_merge_automatic_is_the_same_with_the_c_pass_and_without(monkeypatch):
    """The names in use, merged per name, and the recursive flags: the same on both paths."""
    from rlscope.trace.auto_names import merge_automatic

    rng = np.random.default_rng(8)
    cases = []
    for trial in range(40):
        table = synthetic(trial % 7)
        names = [f"n{i % 4}" for i in range(8)]  # ids 0-7, four names: merged in pairs
        ids = table.column("name").to_numpy().copy()
        ids[ids >= 0] = rng.integers(0, 9 if trial % 3 else 8, int((ids >= 0).sum()))  # 8: out of range
        table = table.set_column(
            table.schema.get_field_index("name"), table.schema.field("name"), pa.array(ids, pa.int32())
        )
        aggregates = pa.table(
            {
                "phase": pa.array(rng.integers(-1, 8, 3), pa.int32()),
                "operation": pa.array([-1, 7, 2], pa.int32()),
            }
        )
        cases.append(
            (table, aggregates if trial % 2 else None, names, frozenset(rng.integers(0, 8, 3).tolist()))
        )
    with_c = [merge_automatic(*case) for case in cases]
    monkeypatch.setenv(native.clib.ENV, "0")
    for case, (events, automatic) in zip(cases, with_c, strict=True):
        ref_events, ref_automatic = merge_automatic(*case)
        assert events.equals(ref_events) and automatic == ref_automatic
