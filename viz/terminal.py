"""Terminal rendering of an analyzer summary (``rlscope.summary/1``) with rich.

Viz only sees the summary dict the analyzer produced; it never reads a trace. The small pure helpers
here (category order, GPU detection, op ordering) are shared with :mod:`rlscope.viz.html` so both
reports order and label things the same way. rich is imported inside functions so that importing this
module stays cheap.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rlscope import categories
from rlscope.analysis.roles import headline_wall_s
from rlscope.categories import UNANNOTATED, WAITING_ROW
from rlscope.text import printable
from rlscope.viz.colors import category_color, operation_color
from rlscope.viz.words import correction_details, correction_sentence, detail_sentence

if TYPE_CHECKING:
    from rich.console import Console
    from rich.style import Style
    from rich.table import Table
    from rich.text import Text

    from rlscope.analysis.result import AnalysisResult

__all__ = [
    "AUTO_NOTE",
    "CPU_CATEGORY_ORDER",
    "GPU_CATEGORY_ORDER",
    "RESOURCE_KEYS",
    "SCHEMA",
    "Columns",
    "any_automatic",
    "cell",
    "check_schema",
    "cpu_categories",
    "fit_table",
    "gpu_categories",
    "has_gpu_time",
    "operation_label",
    "render",
    "render_summary",
    "run_line",
    "sorted_operations",
    "summary_text",
    "text",
]

SCHEMA = "rlscope.summary/1"
# Display order follows the nesting in docs/architecture.md (python outermost, cuda_api innermost),
# then the GPU.
CPU_CATEGORY_ORDER: tuple[str, ...] = ("python", "simulator", "backend", "cuda_api")
GPU_CATEGORY_ORDER: tuple[str, ...] = ("gpu_kernel", "gpu_memcpy", "gpu_memset")
RESOURCE_KEYS: tuple[str, ...] = ("cpu_only", "gpu_only", "cpu_gpu")
RESOURCE_LABELS: dict[str, str] = {"cpu_only": "CPU only", "gpu_only": "GPU only", "cpu_gpu": "CPU+GPU"}

_WAITING = categories.CPU_CATEGORIES[categories.WAITING]  # the [waiting] row's category
# Relative mismatch between the summed exclusive times and wall_s above which we say so in the output.
_SUM_TOLERANCE = 0.005
# how reports mark an operation or phase every instance of which was automatic, and what the mark means
AUTO_MARK = " (auto)"
AUTO_NOTE = "(auto): found by rlscope in code with no scope of that name (docs/automatic-operations.md)"


# --------------------------------------------------------------------------- shared pure helpers


def check_schema(summary: Mapping[str, Any]) -> None:
    """Refuse summaries of another schema version rather than render them wrongly."""
    schema = summary.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise ValueError(f"unsupported summary schema {schema!r}; this renderer understands {SCHEMA!r}")


def _category_maps(summary: Mapping[str, Any]) -> Iterable[Mapping[str, float]]:
    """Every category dict in the summary, so columns cover categories seen anywhere."""
    yield summary.get("categories") or {}
    yield summary.get("unannotated_categories") or {}
    for op in (summary.get("operations") or {}).values():
        yield op.get("categories") or {}
    for phase in (summary.get("phases") or {}).values():
        for op in (phase.get("operations") or {}).values():
            yield op.get("categories") or {}


def _present(summary: Mapping[str, Any], known: tuple[str, ...], gpu: bool) -> list[str]:
    seen: set[str] = set()
    for cats in _category_maps(summary):
        seen.update(name for name, s in cats.items() if s)
    ordered = [c for c in known if c in seen]
    # Categories a newer analyzer may add: CPU unless their name says GPU, appended alphabetically.
    extra = sorted(
        c for c in seen - set(CPU_CATEGORY_ORDER) - set(GPU_CATEGORY_ORDER) if c.startswith("gpu") == gpu
    )
    return ordered + extra


def cpu_categories(summary: Mapping[str, Any]) -> list[str]:
    """CPU categories with nonzero time anywhere in the summary, in nesting order."""
    return _present(summary, CPU_CATEGORY_ORDER, gpu=False)


def gpu_categories(summary: Mapping[str, Any]) -> list[str]:
    """GPU categories with nonzero time anywhere in the summary."""
    return _present(summary, GPU_CATEGORY_ORDER, gpu=True)


def has_gpu_time(summary: Mapping[str, Any]) -> bool:
    """True when any GPU category or GPU resource time is recorded; decides whether GPU columns show."""
    if gpu_categories(summary):
        return True
    ops = list((summary.get("operations") or {}).values())
    for phase in (summary.get("phases") or {}).values():
        ops.extend((phase.get("operations") or {}).values())
    return any((op.get("resources") or {}).get(key, 0.0) for op in ops for key in ("gpu_only", "cpu_gpu"))


def sorted_operations(operations: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Operations by total time, largest first; ties by name so output is deterministic."""
    return sorted(operations.items(), key=lambda kv: (-float(kv[1].get("total_s", 0.0)), kv[0]))


def operation_label(name: str, entry: Mapping[str, Any]) -> str:
    """An operation's or phase's name as a report shows it: ``inference (auto)`` when every instance
    was automatic (the summary's ``auto``); its key and colour are the name's either way."""
    return name + AUTO_MARK if entry.get("auto") else name


def any_automatic(summary: Mapping[str, Any]) -> bool:
    """Whether a report of ``summary`` marks an operation or phase as automatic (it then says what the
    mark means)."""
    phases = (summary.get("phases") or {}).values()
    entries = [*(summary.get("operations") or {}).values(), *phases]
    entries += [op for ph in phases for op in (ph.get("operations") or {}).values()]
    return any(e.get("auto") for e in entries)


def _pct(part: float, whole: float) -> str:
    if whole <= 0:
        return "-"
    p = 100.0 * part / whole
    if 0 < p < 0.5:
        return "<1%"
    return f"{p:.0f}%"


def _secs(s: float) -> str:
    return f"{s:.3f}"


def _cat_cell(s: float, exclusive_s: float, compact: bool = False) -> str:
    """'1.234 (56%)': seconds and share of the row's exclusive time ('56%' when ``compact``); '-' when
    the category is absent."""
    if not s:
        return "-"
    return _pct(s, exclusive_s) if compact else f"{_secs(s)} ({_pct(s, exclusive_s)})"


# --------------------------------------------------------------------------- fitting the width
#
# A table never wraps a name or a number: every column is no_wrap, and when the table is wider than
# the console (a narrow terminal, or 80 columns when piped) the least useful columns are left out,
# then the layout turns compact (category cells as shares only, no vertical rules) and leaves out
# more, and a caption says what was left out.


def cell(value: object, style: str | Style = "") -> Text:
    """A name (or any text from the trace) as a table cell or a line: shown through
    :func:`rlscope.text.printable` (one line, no terminal control), and as rich ``Text``, never read
    as rich markup (``[bold]x[/]`` is a name like any other).

    Escaped before ``Text`` is made: rich drops some control characters (BEL, CR) on its own, which
    would hide them instead of showing them.
    """
    from rich.text import Text

    return Text(printable(value), style=style)


def _safe(value: Any) -> Any:
    """A cell of a :class:`Columns` table: text as :func:`cell` makes it (a ``Text`` made elsewhere
    keeps its style, its text escaped); other renderables as they are."""
    from rich.text import Text

    if isinstance(value, str):
        return cell(value)
    if isinstance(value, Text) and printable(value.plain) != value.plain:
        return cell(value.plain, style=value.style)
    return value


class Columns:
    """A table recorded column by column (the rich ``Table`` calls), so that it can be built with any
    subset of its columns: ``build(drop)``.

    Every header, cell and title is shown through :func:`cell`: a table never passes a name's control
    characters to the terminal nor reads it as markup.
    """

    def __init__(self, **table: Any) -> None:
        self.table = table
        self.columns: list[tuple[str, dict[str, Any]]] = []
        self.rows: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def add_column(self, header: str, **options: Any) -> None:
        # the row label (the first column) folds onto a second line when even the fewest columns
        # leave it too little room: a name is never cut short; every other cell stays on one line
        wrap = {"no_wrap": False, "overflow": "fold"} if not self.columns else {"no_wrap": True}
        self.columns.append((header, {**wrap, **options}))

    def add_row(self, *cells: Any, **options: Any) -> None:
        self.rows.append((cells, options))

    def add_section(self) -> None:
        if self.rows:
            self.rows[-1][1]["end_section"] = True

    def build(self, drop: Iterable[str] = (), **table: Any) -> Table:
        from rich.table import Table

        keep = [i for i, (header, _) in enumerate(self.columns) if header not in set(drop)]
        options = {**self.table, **table}
        if isinstance(options.get("title"), str):
            options["title"] = cell(options["title"], style="table.title")
        out = Table(**options)
        for i in keep:
            out.add_column(_safe(self.columns[i][0]), **self.columns[i][1])
        for cells, row_options in self.rows:
            out.add_row(*(_safe(cells[i]) for i in keep), **row_options)
        return out


def _too_wide(table: Table, console: Console) -> bool:
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(100_000), table).maximum
    return natural > console.options.max_width


def fit_table(
    build: Callable[[bool], Columns],
    console: Console,
    first: list[str],
    then: list[str],
    compact_note: str = "",
    all_in: str = "a wider terminal, or --json, has all",
) -> Table:
    """``build(compact)`` with the fewest columns left out that makes it fit the console's width.

    Headers in ``first`` go (in that order) before the compact layout is tried, those in ``then``
    after; what is left when nothing more may go is printed as it is. The caption says what went,
    and ``compact_note`` what the compact layout changed; ``all_in``: where every column can be seen.
    """
    from rich import box

    for compact, order in ((False, first), (True, first + then)):
        spec = build(compact)
        layout = {"box": box.SIMPLE_HEAD, "pad_edge": False} if compact else {}
        headers = {header for header, _ in spec.columns}
        dropped: list[str] = []
        table = spec.build(**layout)
        for header in order:
            if not _too_wide(table, console):
                break
            if header in headers:
                dropped.append(header)
                table = spec.build(dropped, **layout)
        if not _too_wide(table, console):
            break
    notes = [compact_note] if compact and compact_note else []
    if dropped:
        notes.append(f"not shown, for width: {', '.join(dropped)} ({all_in})")
    if notes:  # headers are names too (a category from the trace)
        table.caption, table.caption_justify = cell("; ".join(notes), style="table.caption"), "left"
    return table


def _summary_table(summary: Mapping[str, Any], compact: bool = False) -> Columns:
    wall = float(summary.get("wall_s", 0.0))
    ops = summary.get("operations") or {}
    cpu_cats = cpu_categories(summary)
    gpu = has_gpu_time(summary)

    corrected = bool(summary.get("corrected_for_overhead"))
    raw_ops = (summary.get("raw") or {}).get("operations") or {} if corrected else {}
    kind = "corrected for rlscope's overhead" if corrected else "raw (not corrected for overhead)"
    title = cell(f"rlscope summary — {summary.get('trace_dir', '?')} — wall {_secs(wall)} s — {kind}")
    table = Columns(title=title, title_justify="left", header_style="bold")
    table.add_column("operation")
    table.add_column("total s", justify="right")
    if corrected:
        table.add_column("± s", justify="right", style="dim")
        table.add_column("raw s", justify="right", style="dim")
    table.add_column("% run", justify="right")
    table.add_column("excl s", justify="right")
    for cat in cpu_cats:
        table.add_column(cat, justify="right", header_style=f"bold {category_color(cat)}")
    if gpu:
        for key in RESOURCE_KEYS:
            table.add_column(f"{RESOURCE_LABELS[key]} s", justify="right")
    table.add_column("calls", justify="right")

    def resource_cells(resources: Mapping[str, float] | None) -> list[str]:
        if not gpu:
            return []
        if resources is None:
            return ["-"] * len(RESOURCE_KEYS)
        return [_secs(float(resources.get(k, 0.0))) for k in RESOURCE_KEYS]

    def raw_cell(value: float | None, sigma: float | None = None) -> list[str]:
        if not corrected:
            return []
        return ["-" if not sigma else _secs(sigma), "-" if value is None else _secs(value)]

    excl_sum = 0.0
    for name, op in sorted_operations(ops):
        excl = float(op.get("exclusive_s", 0.0))
        excl_sum += excl
        cats = op.get("categories") or {}
        table.add_row(
            cell(operation_label(name, op), style=operation_color(name)),
            _secs(float(op.get("total_s", 0.0))),
            *raw_cell(float((raw_ops.get(name) or {}).get("total_s", 0.0)), op.get("uncertainty_s")),
            _pct(float(op.get("total_s", 0.0)), wall),
            _secs(excl),
            *[_cat_cell(float(cats.get(c, 0.0)), excl, compact) for c in cpu_cats],
            *resource_cells(op.get("resources") or {}),
            str(int(op.get("calls", 0))),
        )

    unann = float(summary.get("unannotated_s", 0.0))
    excl_sum += unann
    unann_cats = summary.get("unannotated_categories") or {}
    table.add_row(
        cell(UNANNOTATED, style="italic"),
        _secs(unann),
        *raw_cell(float((summary.get("raw") or {}).get("unannotated_s", 0.0))),
        _pct(unann, wall),
        _secs(unann),
        *[_cat_cell(float(unann_cats.get(c, 0.0)), unann, compact) for c in cpu_cats],
        *resource_cells(None),
        "-",
    )
    waiting = float(summary.get("waiting_s", 0.0))
    if waiting > 0:  # blocked for the next command outside operations: not work, not [unannotated]
        excl_sum += waiting
        table.add_row(
            cell(WAITING_ROW, style="italic dim"),
            _secs(waiting),
            *raw_cell(float((summary.get("raw") or {}).get("waiting_s", 0.0))),
            _pct(waiting, wall),
            _secs(waiting),
            *[_cat_cell(waiting if c == _WAITING else 0.0, waiting, compact) for c in cpu_cats],
            *resource_cells(None),
            "-",
        )

    table.add_section()
    run_cats = summary.get("categories") or {}
    resource_totals = {
        k: sum(float((op.get("resources") or {}).get(k, 0.0)) for op in ops.values()) for k in RESOURCE_KEYS
    }
    table.add_row(
        cell("total", style="bold"),
        _secs(wall),
        *raw_cell(float((summary.get("raw") or {}).get("wall_s", 0.0)), summary.get("uncertainty_s")),
        _pct(wall, wall),
        _secs(excl_sum),
        *[_cat_cell(float(run_cats.get(c, 0.0)), excl_sum, compact) for c in cpu_cats],
        *resource_cells(resource_totals),
        str(sum(int(op.get("calls", 0)) for op in ops.values())),
        style="bold",
    )
    return table


def _fitted_summary_table(summary: Mapping[str, Any], console: Console) -> Table:
    """The summary table with the columns the console's width has room for."""
    first = ["raw s", "± s", "calls", *(f"{RESOURCE_LABELS[k]} s" for k in reversed(RESOURCE_KEYS))]
    then = ["excl s", *reversed(cpu_categories(summary)), "% run"]
    note = "categories: share of the row's exclusive time"
    return fit_table(lambda compact: _summary_table(summary, compact), console, first, then, note)


def _phase_table(summary: Mapping[str, Any]) -> Columns:
    # phases add up every process's time: with several processes, share of the processes' time (the
    # run's wall would give "139% of run")
    several = len((summary.get("headline") or {}).get("pids") or summary.get("processes") or []) > 1
    wall = process_time_s(summary)
    of = "of process time" if several else "of run"
    table = Columns(title="per phase", title_justify="left", header_style="bold")
    table.add_column("phase / operation")
    table.add_column("total s", justify="right")
    table.add_column("% phase", justify="right")
    table.add_column("excl s", justify="right")
    table.add_column("calls", justify="right")
    phases = sorted(
        (summary.get("phases") or {}).items(), key=lambda kv: (-float(kv[1].get("wall_s", 0.0)), kv[0])
    )
    for i, (pname, phase) in enumerate(phases):
        if i:
            table.add_section()
        pwall = float(phase.get("wall_s", 0.0))
        label = operation_label(pname, phase)
        table.add_row(cell(f"{label} ({_pct(pwall, wall)} {of})", style="bold"), _secs(pwall), "", "", "")
        for name, op in sorted_operations(phase.get("operations") or {}):
            total = float(op.get("total_s", 0.0))
            table.add_row(
                cell(f"  {operation_label(name, op)}", style=operation_color(name)),
                _secs(total),
                _pct(total, pwall),
                _secs(float(op.get("exclusive_s", 0.0))),
                str(int(op.get("calls", 0))),
            )
        unann = float(phase.get("unannotated_s", 0.0))
        table.add_row(
            cell(f"  {UNANNOTATED}", style="italic"), _secs(unann), _pct(unann, pwall), _secs(unann), "-"
        )
        waiting = float(phase.get("waiting_s", 0.0))
        if waiting > 0:
            table.add_row(
                cell(f"  {WAITING_ROW}", style="italic dim"),
                _secs(waiting),
                _pct(waiting, pwall),
                _secs(waiting),
                "-",
            )
    return table


def render_summary(
    summary: dict, console: Console | None = None, warnings: bool = True, verbose: bool = False
) -> None:
    """Print the summary as rich tables: where the run's time went, per operation and category.

    ``warnings=False`` leaves the trace's warnings out (the CLI prints them on stderr instead);
    ``verbose`` adds the overhead correction's details under its one-sentence footer.
    """
    from rich.console import Console

    check_schema(summary)
    console = console or Console()
    console.print(_fitted_summary_table(summary, console))

    ops = summary.get("operations") or {}
    if not ops:
        console.print(cell(summary.get("hint") or "no operations recorded: all time is unannotated", "dim"))

    wall = float(summary.get("wall_s", 0.0))
    excl_sum = (
        sum(float(op.get("exclusive_s", 0.0)) for op in ops.values())
        + float(summary.get("unannotated_s", 0.0))
        + float(summary.get("waiting_s", 0.0))
    )
    several = len(summary.get("processes") or []) > 1  # then run_line explains the sum
    if wall > 0 and abs(excl_sum - wall) > _SUM_TOLERANCE * wall and not several:
        console.print(
            cell(
                f"note: exclusive times sum to {_secs(excl_sum)} s, not the wall time {_secs(wall)} s "
                "(several threads or processes inside operations?)",
                style="yellow",
            )
        )

    processes = summary.get("processes") or []
    incomplete = [p for p in processes if not p.get("complete", True)]
    if len(processes) > 1:
        console.print(_fitted_process_table(summary, console))
        if any(r.get("workers", 0) > 1 for r in (summary.get("roles") or {}).values()):
            console.print(_fitted_role_table(summary, console))
    if len(processes) > 1 or incomplete:
        console.print(cell(run_line(summary), style="yellow" if incomplete else "dim"))

    for warning in (summary.get("warnings") or []) if warnings else []:
        console.print(cell(f"warning: {warning}", style="yellow"))

    console.print(cell(correction_sentence(summary), style="dim"))
    if detail_sentence(summary):
        console.print(cell(detail_sentence(summary), style="dim"))
    if verbose:
        for line in correction_details(summary):
            console.print(cell(f"  {line}", style="dim"))
        from rlscope.viz.stacks import render_footer as render_stacks

        render_stacks(summary, console)  # where [unannotated] and each operation's time runs, by line

    gpu_line = gpu_utilization_line(summary)
    if gpu_line:
        console.print(cell(gpu_line, style="bold"))

    from rlscope.viz.compile import render_footer as render_compile

    render_compile(summary, console)  # what was compiled, how long, and why again (viz/compile.py)

    from rlscope.viz.device_scopes import render_footer as render_device_scopes

    render_device_scopes(summary, console)  # GPU time by jax.named_scope inside jitted code

    if len(summary.get("phases") or {}) > 1:
        console.print(
            fit_table(lambda compact: _phase_table(summary), console, ["calls", "excl s"], ["% phase"])
        )
    if any_automatic(summary):
        console.print(cell(AUTO_NOTE, style="dim"))

    from rlscope.viz.whatif import render_footer as render_what_if

    render_what_if(summary, console)  # what a speedup would save, from the critical path (viz/whatif.py)

    from rlscope.viz.advice import render_footer

    render_footer(summary, console)  # ranked findings last: what to change (rlscope.analysis.advice)


def _role_table(summary: Mapping[str, Any], compact: bool = False) -> Columns:
    """Per role: its workers' busy time (time in operations) spread, their waits for the next command
    (median worker), the stragglers, the top operations."""
    roles = summary.get("roles") or {}
    lagging = any(r.get("stragglers") for r in roles.values())  # a column of dashes says nothing
    waits = any(r.get("waiting") for r in roles.values())
    title = "per role (busy: time inside operations, per worker" + (
        f"; {WAITING_ROW}: blocked for the next command, not work)" if waits else ")"
    )
    title += "" if lagging else "; no stragglers"
    table = Columns(title=title, title_justify="left", header_style="bold")
    table.add_column("role")
    for col in ("workers", "median s", "p95 s", "max s"):
        table.add_column(col, justify="right")
    if waits:
        table.add_column(f"{WAITING_ROW} median s", justify="right")
    if lagging:
        table.add_column("lagging (x median)")
    table.add_column("top operations (total s)")
    for role, r in roles.items():
        spread = r.get("spread") or {}
        lag = ", ".join(f"pid {s['pid']} {s['ratio']:.2f}x" for s in r.get("stragglers") or [])
        ops = r.get("operations") or {}
        top = ", ".join(f"{n} {_secs(float(o.get('total_s', 0.0)))}" for n, o in list(ops.items())[:3])
        table.add_row(
            cell(role),
            str(r.get("workers", 0)),
            *(_secs(float(spread.get(k, 0.0))) for k in ("median_s", "p95_s", "max_s")),
            *([_secs(float(r["waiting"]["median_s"])) if r.get("waiting") else "-"] if waits else []),
            *([cell(lag or "-", style="yellow" if lag else "")] if lagging else []),
            cell(top or "-"),
        )
    return table


def _fitted_role_table(summary: Mapping[str, Any], console: Console) -> Table:
    first = ["top operations (total s)", "p95 s", "median s"]
    then = ["workers", "max s", f"{WAITING_ROW} median s"]
    return fit_table(lambda compact: _role_table(summary, compact), console, first, then)


def _process_table(summary: Mapping[str, Any], compact: bool = False) -> Columns:
    """One compact row per process: its wall, its operations' time, its unannotated, waiting and GPU time."""
    processes = summary.get("processes") or []
    gpu = any(float(p.get("gpu_bound_s", 0.0)) > 0 for p in processes)
    waits = any(float(p.get("waiting_s", 0.0)) > 0 for p in processes)
    table = Columns(title="per process", title_justify="left", header_style="bold")
    table.add_column("process")
    table.add_column("wall s", justify="right")
    table.add_column("in ops s", justify="right")
    table.add_column("unannot. s", justify="right")
    if waits:
        table.add_column("waiting s", justify="right")
    if gpu:
        table.add_column("GPU-bound s", justify="right")
    nccl = any("nccl_s" in p for p in processes)  # rlscope.analysis.nccl
    if nccl:
        table.add_column("NCCL s", justify="right")
        table.add_column("NCCL by operation (s)")
    table.add_column("top operations (total s)")
    roles = list(summary.get("roles") or {})  # rows grouped by role (rlscope.analysis.roles)
    procs = sorted(processes, key=lambda p: roles.index(p["role"]) if p.get("role") in roles else 0)
    for p in procs:
        ops = p.get("operations") or {}
        top = ", ".join(f"{n} {_secs(float(o.get('total_s', 0.0)))}" for n, o in sorted_operations(ops)[:3])
        done = "" if p.get("complete", True) else " (incomplete)"
        role = f"{p.get('label') or p['role']} " if p.get("role") else ""  # DDP ranks: "rank N"
        label = f"{role}pid {p.get('pid')}@{p.get('node') or p.get('host') or '?'}{done}"
        table.add_row(
            cell(label),
            _secs(float(p.get("wall_s", 0.0))),
            _secs(sum(float(o.get("exclusive_s", 0.0)) for o in ops.values())),
            _secs(float(p.get("unannotated_s", 0.0))),
            *([_secs(float(p["waiting_s"])) if p.get("waiting_s") else "-"] if waits else []),
            *([_secs(float(p.get("gpu_bound_s", 0.0)))] if gpu else []),
            *([_secs(float(p["nccl_s"])) if "nccl_s" in p else "-", cell(_nccl_by_op(p))] if nccl else []),
            cell(top or "-"),
        )
    return table


def _fitted_process_table(summary: Mapping[str, Any], console: Console) -> Table:
    first = ["top operations (total s)", "NCCL by operation (s)", "unannot. s"]
    return fit_table(lambda compact: _process_table(summary, compact), console, first, ["in ops s", "wall s"])


def _nccl_by_op(p: Mapping[str, Any]) -> str:
    """Per operation that launched NCCL kernels, its NCCL kernel time, largest first."""
    ops = [(n, float(o["nccl_s"])) for n, o in (p.get("operations") or {}).items() if o.get("nccl_s")]
    return ", ".join(f"{n} {_secs(v)}" for n, v in sorted(ops, key=lambda kv: -kv[1])) or "-"


def process_time_s(summary: Mapping[str, Any]) -> float:
    """What the headline tables add up to (rlscope.analysis.roles.headline_wall_s)."""
    return headline_wall_s(dict(summary))


def run_line(summary: Mapping[str, Any]) -> str:
    """The whole run's wall-clock view: processes, the run's wall, and how the tables add up."""
    processes = summary.get("processes") or []
    wall = float(summary.get("wall_s", 0.0))
    proc_s = process_time_s(summary)
    line = f"whole run: {len(processes)} process(es), wall {_secs(wall)} s from the first start to the last"
    why = (summary.get("headline") or {}).get("why")
    if len(processes) > 1 and why:
        line += f"; the tables above are {why}"
    elif len(processes) > 1:
        line += f"; the tables add up the processes' time ({_secs(proc_s)} s of process wall time)"
    incomplete = [p for p in processes if not p.get("complete", True)]
    if incomplete:
        line += "; incomplete: " + ", ".join(f"pid {p.get('pid')}@{p.get('host', '?')}" for p in incomplete)
    return line


# calibration entries with one figure (no inside/outside split) that are not a background thread's
# GIL stall, as the writer's and the NVML sampler's are: where they are paid
ONE_FIGURE_NOTES = {"memory": "per GPU allocator event, on the allocating thread"}


def render_calibration(cal: dict, console: Console | None = None) -> None:
    """A calibration's per-event costs as a table (``rlscope calibrate``)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    key = cal.get("key", {})
    title = (
        f"rlscope calibration — {key.get('host', '?')}, python {key.get('python', '?')},"
        f" torch {key.get('torch') or 'none'}"
    )
    table = Table(title=cell(title, style="table.title"), title_justify="left", header_style="bold")
    for col in ("event", "inside ns", "outside ns", "total ns", "spread", "note"):
        table.add_column(col, justify="left" if col in ("event", "note") else "right")

    def row(*cells: str) -> None:  # entries and reasons name hosts and files: cells, never markup
        table.add_row(*(cell(c) for c in cells))

    for kind, c in (cal.get("costs_ns") or {}).items():
        spread = f"{c['spread']:.0%}" if "spread" in c else "-"
        if "per_event" in c or "per_sample" in c:
            per = c.get("per_event", c.get("per_sample", 0.0))
            unit = "per event row" if "per_event" in c else "per sample"
            note = ONE_FIGURE_NOTES.get(kind, f"background (GIL stall), {unit}")
            row(kind, "-", "-", f"{per:.0f}", spread, note)
            continue
        inside, outside, total = (f"{c.get(f, 0):.0f}" for f in ("inside", "outside", "total"))
        row(kind, inside, outside, total, spread, "")
    for r in cal.get("refused") or []:  # "scope: refused: unstable, ..." (the whole line went to stderr)
        why = r.get("reason", "").partition("refused: ")[2].split(",")[0].split(" ")[0] or "see stderr"
        row(r.get("entry", "?"), "-", "-", "-", "-", f"refused: {why}")
    for kind, why in (cal.get("skipped") or {}).items():
        row(kind, "-", "-", "-", "-", f"not measured: {why}")
    console.print(table)


def gpu_utilization_line(summary: dict) -> str:
    """GPU-bound time from the kernel trace next to NVML's utilization (which overstates GPU use)."""
    gpu = summary.get("gpu") or {}
    if not gpu:
        return ""
    wall = summary.get("wall_s") or 0.0
    bound = f"{_secs(gpu.get('gpu_bound_s', 0.0))} s = {gpu.get('gpu_bound_fraction', 0):.1%}"
    line = f"GPU-bound (kernel trace): {bound} of wall {_secs(wall)} s"
    if gpu.get("nvml_samples", 0) > 1:
        line += (
            f" | NVML utilization (mean of {gpu['nvml_samples']} samples): {gpu['nvml_util_mean']:.1%}"
            f" | windows with any GPU activity: {gpu['trace_any_activity_fraction']:.1%}"
        )
    return line


def render(
    result: AnalysisResult, console: Console | None = None, warnings: bool = True, verbose: bool = False
) -> None:
    """Print an analysis as tables (per process too, when there are several)."""
    render_summary(dict(result.summary), console, warnings, verbose)


def text(result: AnalysisResult, width: int = 160) -> str:
    """An analysis as plain text (no colors), for tests, logs and files."""
    return summary_text(dict(result.summary), width)


def summary_text(summary: dict, width: int = 160, verbose: bool = False) -> str:
    """The summary as plain text (no colors), for tests, logs and files."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    render_summary(summary, console, verbose=verbose)
    return buf.getvalue()
