"""Damaged traces never crash, hang or lie: one line and exit 2, or a result whose warnings name the
damage, the process and where; never a traceback, a negative time or an operation longer than its
process without a word. Each damage the reader repairs has its test here; tests/trace_fuzz.py's
corpus checks hundreds more (thousands under ``-m slow``)."""

from __future__ import annotations

import collections
import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rlscope.analysis import analyze
from rlscope.cli import analyze as analyze_cli
from rlscope.trace import schema as S
from rlscope.trace.check import check_trace
from rlscope.trace.reader import load_trace
from tests import trace_fuzz as F

# every events table checked is also checked by the numpy checks (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("validation_audited")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return F.build_base(tmp_path_factory.mktemp("fuzz") / "base")


@pytest.fixture
def trace(base: Path, tmp_path: Path) -> Path:
    """A fresh copy of the base trace to damage."""
    out = tmp_path / "trace"
    shutil.copytree(base, out)
    return out


@pytest.fixture(autouse=True)
def _alarm() -> Iterator[None]:
    """A damaged trace must never hang the analysis: each test fails after 60 s instead."""

    def fail(signum: int, frame: object) -> None:
        raise TimeoutError("the analysis of a damaged trace did not end within 60 s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _events(trace: Path, which: int = 0) -> tuple[Path, pa.Schema, list[pa.RecordBatch], pa.Table]:
    path = sorted(trace.glob("process-*"))[which] / S.EVENTS_FILE
    schema, batches = F.read_stream(path)
    return path, schema, batches, pa.Table.from_batches(batches, schema=schema)


def _rewrite(trace: Path, change, which: int = 0) -> None:
    """The events of process ``which`` changed by ``change(table) -> table``, in the original batch sizes."""
    path, schema, batches, table = _events(trace, which)
    F._write_stream(path, schema, F._cut(schema, change(table), [b.num_rows for b in batches]))


def _set(table: pa.Table, column: str, values: np.ndarray) -> pa.Table:
    return F._column(table, column, values)


def _warned(result, *words: str) -> str:
    """The result's warning that has every one of ``words`` (the test fails without one)."""
    hits = [w for w in result.warnings if all(x in w for x in words)]
    assert hits, (words, result.warnings)
    return hits[0]


def _no_impossible_figure(result) -> None:
    for part in ("raw", "corrected"):
        s = result.summary[part]
        assert s["wall_s"] >= 0
        for name, op in s["operations"].items():
            assert op["total_s"] >= 0 and op["exclusive_s"] >= 0, (part, name, op)
        for p in s["processes"]:
            for name, op in p["operations"].items():
                assert op["total_s"] <= p["wall_s"] + 1e-9, (part, p["pid"], name, op["total_s"], p["wall_s"])


def _figures_equal(a, b) -> None:
    fa, fb = F.figures(a.summary), F.figures(b.summary)
    assert fa.keys() == fb.keys()
    for k in fa:
        assert fa[k] == pytest.approx(fb[k], abs=1e-9), k


def test_rows_written_twice_are_dropped_and_said_not_looped_over(base: Path, trace: Path):
    """A batch written twice made the interval depths' parent links a cycle, and the analysis loop
    forever; the copies are dropped, and the figures are the intact trace's."""
    path, schema, batches, _ = _events(trace)
    i = max(range(len(batches)), key=lambda k: batches[k].num_rows)
    F._write_stream(path, schema, [*batches[: i + 1], batches[i], *batches[i + 1 :]])
    result = analyze(trace)
    warning = _warned(result, "written twice", str(path.parent))
    assert "into the process" in warning  # where
    _figures_equal(result, analyze(base))
    assert result.interval_tables().operations.num_rows == analyze(base).interval_tables().operations.num_rows


def test_a_batch_written_again_at_the_end_is_dropped(base: Path, trace: Path):
    path, schema, batches, _ = _events(trace)
    F._write_stream(path, schema, [*batches, batches[2]])
    result = analyze(trace)
    _warned(result, str(path.parent))
    _figures_equal(result, analyze(base))


def test_an_event_kind_out_of_range_is_dropped_with_a_warning(trace: Path, capsys):
    def change(table: pa.Table) -> pa.Table:
        kind = F._np(table, "kind").copy()
        kind[5] = 100
        return _set(table, "kind", kind)

    _rewrite(trace, change)
    assert analyze_cli.main([str(trace), "-q", "--json", str(trace / "s.json")]) == 0
    warnings = json.loads((trace / "s.json").read_text())["warnings"]
    assert any("unknown kind (100) dropped" in w for w in warnings), warnings
    assert "Traceback" not in capsys.readouterr().err


def test_metadata_that_is_not_utf8_is_read_escaped_and_said(trace: Path, capsys):
    path, schema, batches, _ = _events(trace)
    F._write_stream(path, schema.with_metadata({**schema.metadata, b"host": b"vm\xff\xfe"}), batches)
    assert analyze_cli.main([str(trace), "-q", "--json", str(trace / "s.json")]) == 0
    summary = json.loads((trace / "s.json").read_text())
    assert any("metadata host not UTF-8" in w for w in summary["warnings"]), summary["warnings"]
    assert summary["processes"][0]["host"] == "vm\\xff\\xfe"


def test_names_that_are_not_utf8_are_read_escaped_and_said(trace: Path):
    F._non_utf8_names(0)(trace)
    result = analyze(trace)
    _warned(result, "not UTF-8")
    assert any(name.endswith("\\xff\\xfe") for name in result.operations)


def test_missing_scope_ends_close_where_their_thread_left_them(base: Path, trace: Path):
    """Every operation end lost: each call lasted to the end of the data (a 0.02 s run gave its
    operations 10 times the run); each is closed where its thread went on, and said."""

    def change(table: pa.Table) -> pa.Table:
        keep = F._np(table, "kind") != S.OP_END
        return F._take(table, np.flatnonzero(keep))

    _rewrite(trace, change)
    result = analyze(trace)
    _warned(result, "begun but never ended: closed where their thread left them")
    _no_impossible_figure(result)
    intact = analyze(base)
    assert result.summary["wall_s"] == pytest.approx(intact.summary["wall_s"])
    for name, op in intact.operations.items():
        assert result.operations[name]["calls"] == op["calls"]
    # each call ends at its thread's next operation row: time the rows do not place (the simulator
    # step after an inference) goes to the call, and the main thread's time still adds up to the wall
    damaged = next(p for p in result.processes if p["pid"] == intact.processes[0]["pid"])
    on_main = sum(op["exclusive_s"] for name, op in damaged["operations"].items() if name != "prefetch")
    assert on_main + damaged["unannotated_s"] == pytest.approx(damaged["wall_s"])


def test_one_missing_end_is_closed_where_its_parent_goes_on(base: Path, trace: Path):
    def change(table: pa.Table) -> pa.Table:
        kind, name = F._np(table, "kind"), F._np(table, "name")
        names = pa.ipc.open_stream(str(sorted(base.glob("process-*"))[0] / S.NAMES_FILE)).read_all()
        inference = names.column("name").to_pylist().index("inference")
        end = np.flatnonzero((kind == S.OP_END) & (name == inference))[1]
        return F._take(table, np.setdiff1d(np.arange(table.num_rows), [end]))

    _rewrite(trace, change)
    result = analyze(trace)
    _warned(result, "1 operation(s) begun but never ended")
    # nothing in the rows says the call ended before its rollout did: it is closed there, and has
    # the simulator step after it (0.4 ms)
    intact = analyze(base)
    assert result.operations["inference"]["total_s"] == pytest.approx(
        intact.operations["inference"]["total_s"] + 0.0004
    )
    assert result.operations["rollout"]["total_s"] == pytest.approx(intact.operations["rollout"]["total_s"])


def test_reversed_timestamps_give_no_negative_wall(trace: Path):
    """Times of every row reversed: the wall read -1.6 s; the rows are put back in time order,
    what then does not nest is repaired, all of it said."""

    def change(table: pa.Table) -> pa.Table:
        return _set(table, "ts_ns", F._np(table, "ts_ns")[::-1].copy())

    _rewrite(trace, change)
    result = analyze(trace)
    _warned(result, "timestamps go backwards")
    _no_impossible_figure(result)
    assert result.summary["wall_s"] > 0


def test_a_stretch_of_reversed_times_is_said_with_its_thread_and_span(trace: Path):
    def change(table: pa.Table) -> pa.Table:
        ts = F._np(table, "ts_ns").copy()
        ts[10:30] = ts[10:30][::-1]
        return _set(table, "ts_ns", ts)

    _rewrite(trace, change)
    result = analyze(trace)
    warning = _warned(result, "timestamps go backwards", "thread", "between")
    assert "s into the process" in warning
    _no_impossible_figure(result)


def test_a_lone_damaged_timestamp_is_dropped(base: Path, trace: Path):
    def change(table: pa.Table) -> pa.Table:
        ts = F._np(table, "ts_ns").copy()
        ts[20] += 1 << 50  # a flipped high bit: 13 days later
        return _set(table, "ts_ns", ts)

    _rewrite(trace, change)
    result = analyze(trace)
    _warned(result, "out of time order with both neighbours")
    _no_impossible_figure(result)
    assert result.summary["wall_s"] == pytest.approx(analyze(base).summary["wall_s"])


def _overwrite_uncompressed(trace: Path, seed: int) -> None:
    """The events written without compression (as pyarrow writes by default, and readers accept),
    then 4 KB in the middle overwritten: the values decode, garbled."""
    path, schema, _, table = _events(trace)
    big = pa.concat_tables([table] * 40).combine_chunks()
    ts = F._np(big, "ts_ns")
    step = int(ts.max() - ts.min()) + 1_000_000
    big = _set(big, "ts_ns", ts + np.repeat(np.arange(40), table.num_rows) * step)
    ids = F._np(big, "id")
    scoped = np.isin(F._np(big, "kind"), (S.OP_BEGIN, S.OP_END, S.PHASE_BEGIN, S.PHASE_END))
    copy = np.repeat(np.arange(40), table.num_rows) * 1000
    big = _set(big, "id", np.where(scoped, ids + copy, ids))
    parents = F._np(big, "parent")
    big = _set(big, "parent", np.where(scoped & (parents >= 0), parents + copy, parents))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        for b in big.to_batches(max_chunksize=500):
            w.write_batch(b)
    data = bytearray(sink.getvalue().to_pybytes())
    rng = np.random.default_rng(seed)
    at = len(data) // 2
    data[at : at + 4096] = rng.bytes(4096)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("seed", range(4))
def test_4kb_overwritten_gives_no_negative_operation_or_slice(trace: Path, tmp_path: Path, seed: int):
    """4 KB of events.arrows overwritten read as an operation of -1.5 s and Chrome slices of
    negative duration; what no writer makes is dropped, said, and no figure or slice is negative."""
    _overwrite_uncompressed(trace, seed)
    result = analyze(trace)
    assert result.warnings
    _no_impossible_figure(result)
    chrome = tmp_path / "t.json"
    assert analyze_cli.main(["export", str(trace), "--chrome", str(chrome)]) == 0
    assert F.chrome_problem(chrome) == ""
    ops = result.interval_tables().operations
    assert (ops.column("end_ns").to_numpy() >= ops.column("start_ns").to_numpy()).all()


def test_check_lists_the_findings_the_analysis_warns_of(trace: Path, capsys):
    path, schema, batches, _ = _events(trace)
    F._write_stream(path, schema, [*batches, batches[2]])
    findings = check_trace(str(trace))
    errors = [f for f in findings if f.level == "error"]
    assert errors and all(str(path.parent) == f.where for f in errors)
    warnings = analyze(trace).warnings
    for f in errors:
        assert f.warning in warnings  # the same words, from the same validation
    assert analyze_cli.main(["check", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "written twice" in err or "repeating" in err


def test_the_cli_says_an_unexpected_exception_in_one_line(trace: Path, monkeypatch, capsys):
    import rlscope.analysis as analysis

    def broken(*a, **kw):
        raise ValueError("a case no check foresaw\nsecond line")

    monkeypatch.setattr(analysis, "analyze", broken)
    assert analyze_cli.main([str(trace), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"rlscope-analyze: error: cannot analyze {trace}: ValueError: a case no check foresaw"
    )
    assert f"'rlscope-analyze check {trace}' lists what is wrong; -v shows the traceback" in err
    assert analyze_cli.main([str(trace), "-q", "-v"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_an_intact_trace_passes_validation_unchanged(base: Path):
    trace = load_trace(base)
    assert not trace.warnings
    assert all(not p.findings for p in trace.processes)
    assert not [f for f in check_trace(str(base)) if f.level in ("error", "warning")]


def _corpus(base: Path, scratch: Path, seed: int, per_kind: int) -> collections.Counter:
    results = F.run_corpus(base, scratch, seed, per_kind)
    counts = collections.Counter(o.cls for _, o in results)
    safety_net = sum(F.SAFETY_NET in o.stderr for _, o in results)
    bad = [(c.kind, c.label, o.cls, o.detail[:1000]) for c, o in results if o.cls not in F.ACCEPTED]
    assert safety_net == 0, bad
    assert not bad, bad
    assert set(F.DAMAGE_KINDS) <= {c.kind for c, _ in results}
    return counts


def test_fuzz_corpus_damaged_traces_never_crash_hang_or_lie(base: Path, tmp_path: Path, capsys):
    """Over 300 damaged copies of a real trace (tests/trace_fuzz.py): each a clean error, a
    warning naming the damage, the intact figures, or times moved within a valid trace."""
    counts = _corpus(base, tmp_path, seed=0, per_kind=14)
    assert sum(counts.values()) >= 300
    with capsys.disabled():
        print(f"\ndamaged traces: {dict(sorted(counts.items()))}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 6))
def test_fuzz_corpus_thousands(base: Path, tmp_path: Path, capsys, seed: int):
    counts = _corpus(base, tmp_path, seed=seed, per_kind=60)
    with capsys.disabled():
        print(f"\ndamaged traces, seed {seed}: {dict(sorted(counts.items()))}")


def _rows(*rows: tuple[int, int, int, int, int, int]) -> pa.Table:
    """An events table of (ts, thread, kind, id, parent, name) rows, flags 0."""
    cols = list(zip(*rows, strict=True))
    names = ["ts_ns", "thread", "kind", "id", "parent", "name"]
    data = {n: np.array(v, np.int64) for n, v in zip(names, cols, strict=True)}
    data["flags"] = np.zeros(len(rows), np.int64)
    schema = S.events_schema({})
    return pa.table({f.name: pa.array(data[f.name], f.type) for f in schema}, schema=schema)


def test_a_flush_running_as_the_session_stops_is_no_damage():
    """The writer's last flush mark may end after the session's end row (the end is stamped before
    the writer closes): an intact trace, left as it is; a row of the job after the end is clipped."""
    from rlscope import categories
    from rlscope.trace.validate import validate_events

    intact = _rows(
        (0, 1, S.SESSION_START, -1, -1, -1),
        (0, 1, S.WINDOW, S.WINDOW_FULL, -1, -1),
        (10, 1, S.OP_BEGIN, 0, -1, 0),
        (20, 1, S.OP_END, 0, -1, 0),
        (90, 2, S.CAT_BEGIN, categories.PROFILER, 0, -1),
        (100, 1, S.SESSION_END, -1, -1, -1),
        (120, 2, S.CAT_END, categories.PROFILER, 0, -1),
    )
    out, findings = validate_events(intact, "p")
    assert out is intact and findings == []
    damaged = _rows(
        (0, 1, S.SESSION_START, -1, -1, -1),
        (0, 1, S.WINDOW, S.WINDOW_FULL, -1, -1),
        (10, 1, S.OP_BEGIN, 0, -1, 0),
        (100, 1, S.SESSION_END, -1, -1, -1),
        (130, 1, S.OP_END, 0, -1, 0),
    )
    out, findings = validate_events(damaged, "p")
    assert any("after the session's end clipped" in f.message for f in findings)
    assert out.column("ts_ns").to_numpy().max() == 100


def test_flags_ends_and_nesting_on_several_threads_are_said_and_repaired():
    """A close flag on a begin, an end of another name and a category row contradicting its thread's
    nesting, among intact rows of other threads: each found once, with its count, and repaired."""
    from rlscope import categories
    from rlscope.trace.validate import validate_events

    table = _rows(
        (0, 1, S.SESSION_START, -1, -1, -1),
        (0, 1, S.WINDOW, S.WINDOW_FULL, -1, -1),
        (10, 1, S.OP_BEGIN, 0, -1, 0),
        (12, 2, S.OP_BEGIN, 1, -1, 1),
        (13, 3, S.OP_BEGIN, 2, -1, 1),
        (14, 1, S.CAT_BEGIN, categories.PROFILER, categories.CUDA_API, -1),
        (15, 2, S.OP_END, 1, -1, 5),
        (16, 1, S.CAT_END, categories.PROFILER, categories.CUDA_API, -1),
        (17, 3, S.OP_END, 2, -1, 1),
        (20, 1, S.OP_END, 0, -1, 0),
        (100, 1, S.SESSION_END, -1, -1, -1),
    )
    flags = np.zeros(table.num_rows, np.int64)
    flags[2] = S.FLAG_FORCED_CLOSE  # a begin never carries it
    i = table.schema.get_field_index("flags")
    table = table.set_column(i, table.schema.field(i), pa.array(flags, table.schema.field(i).type))
    out, findings = validate_events(table, "p")
    said = [f.message.split(" (")[0] for f in findings]
    assert said == [
        "1 operation end(s) not on their begin's thread, before it or of another name dropped",
        "1 operation(s) begun but never ended in a session that ended normally: closed at the end of the"
        " data",
        "1 row(s) with flags no writer sets: cleared",
        "1 category row(s) whose nesting contradicts the rows before them: times there are counted as"
        " recorded",
    ]
    assert out.num_rows == table.num_rows - 1
    assert not (out.column("flags").to_numpy() & S.FLAG_FORCED_CLOSE).any()


def test_an_instance_id_repeated_in_time_order_is_dropped_and_one_of_another_kind_kept():
    """Instance ids are unique per kind in a process: an operation begin repeating one (later, in time
    order: no batch copy) is dropped; a phase of the same id as an operation is no repeat."""
    from rlscope.trace.validate import validate_events

    table = _rows(
        (0, 1, S.SESSION_START, -1, -1, -1),
        (0, 1, S.WINDOW, S.WINDOW_FULL, -1, -1),
        (10, 1, S.OP_BEGIN, 7, -1, 0),
        (11, 1, S.PHASE_BEGIN, 7, -1, 1),
        (12, 1, S.PHASE_END, 7, -1, 1),
        (20, 1, S.OP_END, 7, -1, 0),
        (30, 1, S.OP_BEGIN, 7, -1, 0),
        (100, 1, S.SESSION_END, -1, -1, -1),
    )
    out, findings = validate_events(table, "p")
    assert [f.message.split(" (")[0] for f in findings] == [
        "1 operation or phase row(s) repeating an earlier row's instance id dropped"
    ]
    assert out.column("ts_ns").to_pylist() == [0, 0, 10, 11, 12, 20, 100]
    intact = pa.concat_tables([table.slice(0, 6), table.slice(7)])
    assert validate_events(intact, "p") == (intact, [])


def test_code_and_mode_lookups_agree_with_isin():
    """The lookups that read category codes and window modes say what np.isin says, for every int64
    (negative ones, ones past the last code, the extremes)."""
    from rlscope.trace import validate as V

    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.integers(-20, 40, 5000),
            rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, 1000, dtype=np.int64),
            [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0, len(V._CATEGORY_OK) - 1],
        ]
    ).astype(np.int64)
    assert np.array_equal(V._category_code(values), np.isin(values, V._CATEGORY_CODES))
    assert not V._category_code(values[:0]).size
    kinds = np.array([S.WINDOW, S.DETAIL, S.OP_BEGIN, S.CAT_BEGIN], np.int64)[rng.integers(0, 4, 2000)]
    modes = rng.integers(-3, 6, 2000)
    expected = ((kinds == S.WINDOW) & ~np.isin(modes, [S.WINDOW_LIGHT, S.WINDOW_FULL])) | (
        (kinds == S.DETAIL) & ~np.isin(modes, [S.DETAIL_PAUSE, S.DETAIL_RESUME])
    )
    assert np.array_equal(V._unknown_mode(kinds, modes), expected)


def test_measured_costs_that_do_not_fit_their_rows_are_found_as_the_bounds_say():
    """Each row's measured cost (pre | post << 32) against the gaps to its thread's neighbours, flush
    marks against the flush bound, on random rows of several threads: the rows found are those the
    bounds give, row by row."""
    from rlscope import categories
    from rlscope.trace import validate as V

    rng = np.random.default_rng(1)
    n = 3000
    kinds = np.array([S.CAT_BEGIN, S.CAT_END, S.OP_BEGIN], np.int64)
    table = _rows(
        *[
            (
                int(ts),
                int(th),
                int(k),
                categories.PROFILER if k == S.CAT_END and rng.random() < 0.3 else 1,
                0,
                -1,
            )
            for ts, th, k in zip(
                np.sort(rng.integers(0, 10 * n, n)),
                rng.integers(1, 4, n),
                kinds[rng.integers(0, 3, n)],
                strict=True,
            )
        ]
    )
    pre, post = rng.integers(0, 40, n), rng.integers(0, 40, n)
    cost = pre | post << 32
    cost[rng.random(n) < 0.1] = 0
    cost[rng.random(n) < 0.02] = -5
    cost[rng.random(n) < 0.05] = S.FLUSH_CPU_MAX + rng.integers(-2, 3)
    table = table.append_column("cost", pa.array(cost, pa.int64()))
    t = V._Table(table, "p")
    t.group()
    c = {k: v.copy() for k, v in t.c.items()}
    V._costs(t)
    ts, th, co = c["ts_ns"], c["thread"], c["cost"]
    p, q = S.unpack_cost(co)
    expected = np.zeros(len(ts), bool)
    for i in range(len(ts)):
        if co[i] == 0:
            continue
        if co[i] < 0:
            expected[i] = True
        elif c["kind"][i] == S.CAT_END and c["id"][i] == categories.PROFILER:
            expected[i] = co[i] > S.FLUSH_CPU_MAX
        else:
            before = ts[i] - ts[i - 1] if i and th[i - 1] == th[i] else V.MAX_TS_NS
            after = ts[i + 1] - ts[i] if i + 1 < len(ts) and th[i + 1] == th[i] else V.MAX_TS_NS
            expected[i] = p[i] > before or q[i] > after
    assert expected.any() and (~expected & (co != 0)).any()
    assert np.array_equal(t.c["cost"], np.where(expected, 0, co))


def test_unknown_kinds_of_the_writers_type_are_found_as_isin_says():
    """An int8 kind read as its byte (one comparison) is unknown exactly where np.isin says, for every
    int8 value; kinds of another type take the lookup, with the same answer."""
    from rlscope.trace import validate as V

    kinds = np.arange(-128, 128, dtype=np.int8)
    expected = ~np.isin(kinds, S.WRITTEN_KINDS)
    assert np.array_equal(V._unknown_kind(kinds), expected)
    assert np.array_equal(V._unknown_kind(kinds.astype(np.int64)), expected)
    wide = np.array([-1, 256, 257, 1 << 40], np.int64)
    assert V._unknown_kind(wide).all()


def test_one_sort_key_orders_category_rows_as_lexsort_by_thread_and_level():
    """_group_order sorts (group, level) in one key: the order lexsort gives with the row index last,
    for 16-bit keys (radix) and wider ones (many groups or deep levels), negative levels, one row."""
    from rlscope.trace import validate as V

    rng = np.random.default_rng(3)
    for n, groups, depth in [
        (1, 1, 1),
        (2, 1, 3),
        (500, 1, 8),
        (500, 7, 40),
        (3000, 2000, 30),
        (800, 3, 40000),
    ]:
        first = np.zeros(n, bool)
        first[0] = True
        first[rng.choice(np.arange(1, n), min(groups - 1, n - 1), replace=False)] = True
        level = rng.integers(-depth, depth + 1, n)
        order, key = V._group_order(first, level)
        group = np.cumsum(first)
        assert np.array_equal(order, np.lexsort((np.arange(n), level, group)))
        same = key[order][1:] == key[order][:-1]
        assert np.array_equal(
            same, (group[order][1:] == group[order][:-1]) & (level[order][1:] == level[order][:-1])
        )


def test_grouping_by_runs_orders_rows_as_a_stable_sort_by_first_appearance(monkeypatch):
    """Rows grouped by thread from their runs (slices, or one index past _RUN_SLICES runs): each
    thread's rows in file order, threads by first appearance, as a stable sort by thread would; a
    grouped table is left as it is (read in place)."""
    from rlscope.trace import validate as V

    rng = np.random.default_rng(4)
    for slices in (V._RUN_SLICES, 0):
        monkeypatch.setattr(V, "_RUN_SLICES", slices)
        for n, threads, grouped in [
            (1, 1, False),
            (5, 1, False),
            (400, 3, False),
            (400, 3, True),
            (3000, 40, False),
        ]:
            thread = rng.integers(0, threads, n) * 1000 + 7
            if grouped:
                thread = np.sort(thread)
            table = pa.table({"ts_ns": np.arange(n, dtype=np.int64), "thread": thread})
            t = V._Table(table, "p")
            t.group()
            _, first_seen = np.unique(thread, return_index=True)
            rank = np.argsort(np.argsort(first_seen))[np.unique(thread, return_inverse=True)[1]]
            order = np.argsort(rank, kind="stable")
            assert np.array_equal(t.c["ts_ns"], order) and np.array_equal(t.c["thread"], thread[order])
            assert np.array_equal(t.first, np.r_[True, t.c["thread"][1:] != t.c["thread"][:-1]])
            if len(np.unique(thread)) == np.count_nonzero(np.r_[True, thread[1:] != thread[:-1]]):
                assert np.shares_memory(t.c["ts_ns"], table.column("ts_ns").chunk(0).to_numpy())


def test_a_repair_of_columns_read_in_place_writes_a_copy():
    """One thread's intact rows are read in place (read-only views of the table); a repair that
    writes into a column (an end's parent set to its begin's) makes it the checks' own, and the
    table it came from stays as it was."""
    from rlscope.trace.validate import validate_events

    table = _rows(
        (0, 1, S.SESSION_START, -1, -1, -1),
        (0, 1, S.WINDOW, S.WINDOW_FULL, -1, -1),
        (10, 1, S.OP_BEGIN, 0, -1, 0),
        (11, 1, S.OP_BEGIN, 1, 0, 1),
        (12, 1, S.OP_END, 1, 5, 1),
        (20, 1, S.OP_END, 0, -1, 0),
        (100, 1, S.SESSION_END, -1, -1, -1),
    )
    before = table.column("parent").to_pylist()
    out, findings = validate_events(table, "p")
    assert [f.message.split(" (")[0] for f in findings] == [
        "1 operation end(s) naming another parent than their begin: set to the begin's"
    ]
    assert out.column("parent").to_pylist() == [-1, -1, -1, 0, 0, -1, -1]
    assert table.column("parent").to_pylist() == before


def test_any_less_says_what_a_whole_mask_says_at_block_edges():
    from rlscope.trace import validate as V

    for n in (0, 1, V._BLOCK - 1, V._BLOCK, V._BLOCK + 1, 3 * V._BLOCK + 5):
        a = np.arange(n, dtype=np.int64)
        assert not V._any_less(a, a) and V._any_less(a, a, np.less_equal) == (n > 0)
        for at in {0, n // 2, n - 1} if n else set():
            b = a.copy()
            b[at] += 1
            assert V._any_less(a, b) and not V._any_less(b, a)


# ids other than "gpu": a test with that keyword is one that needs a CUDA GPU (tests/conftest.py)
@pytest.mark.parametrize(
    "kind", ["backend", "gpu", "collectives", "nvml"], ids=["backend", "cuda-records", "collectives", "nvml"]
)
def test_collector_tables_are_checked_as_whole_masks_say(kind: str):
    """validate_table, which makes masks only where reductions find rows to mark: the rows it drops
    and the counts it says are those of the masks over every row, on intact tables (in time order or
    not), copies, impossible times and torch ops ending after the session."""
    from rlscope.trace import validate as V

    rng = np.random.default_rng(5)
    times, code, codes = V._TABLE_RULES[kind]
    for trial in range(60):
        table, start = F.collector_table(rng, kind, trial, 200)
        session = (0, int(np.median(start)))
        out, found = V.validate_table(table, kind, "w", session)
        m = len(table)
        t = {c: table.column(c).to_numpy() for c in table.column_names}
        bad = np.zeros(m, bool)
        for c in times:
            bad |= (t[c] < 0) | (t[c] >= V.MAX_TS_NS)
        if len(times) == 2:
            bad |= t[times[1]] < t[times[0]]
        if code:
            bad |= ~np.isin(t[code], codes)
        rows = list(zip(*(t[c].tolist() for c in table.column_names), strict=True))
        seen: set = set()
        copy = np.zeros(m, bool)
        if kind in V._UNIQUE_ROWS:
            for i, r in enumerate(rows):
                copy[i] = r in seen and not bad[i]
                seen.add(r)
        said = [f.message for f in found]
        expected = []
        if bad.any():
            expected.append(f"{bad.sum()} of {m} row(s) with impossible times or codes (damaged?) dropped")
        if copy.any():
            expected.append(f"{copy.sum()} row(s) written twice (a batch repeated) dropped")
        late = ~bad & (t[times[-1]] > session[1]) if kind == "backend" else np.zeros(m, bool)
        assert said[: len(expected)] == expected and len(said) == len(expected) + bool(late.any())
        keep = ~(bad | copy)
        assert (out is table) == keep.all() and out.equals(table.filter(pa.array(keep)))
