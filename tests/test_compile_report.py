"""The summary's ``compile`` in the reports (viz/compile.py): the table's footer and the HTML section,
exact text from a summary written by hand, names escaped as every other name."""

from __future__ import annotations

import io

from rich.console import Console

from rlscope.viz.compile import footer_lines, html_line, html_section, render_footer
from rlscope.viz.html import render_html
from rlscope.viz.terminal import summary_text

TORCH = {
    "compilations": 7,
    "seconds": 4.2,
    "persistent_cache_hits": 0,
    "stages": {"dynamo": 1.0, "aot_autograd": 0.0, "inductor": 3.0, "autotune": 0.0, "runtime": 0.2},
    "functions": [
        {"function": "Policy.forward (policy.py:41)", "compilations": 3, "seconds": 3.1, "recompiles": 2},
        {"function": "loss (ppo.py:90)", "compilations": 1, "seconds": 0.9, "recompiles": 0},
        {"function": "value (ppo.py:12)", "compilations": 2, "seconds": 0.15, "recompiles": 1},
        {"function": "fourth", "compilations": 1, "seconds": 0.05, "recompiles": 0},
    ],
    "recompiles": 3,
    "recompile_reasons": [
        {
            "function": "Policy.forward (policy.py:41)",
            "reason": "tensor 'x' size mismatch at index 0",
            "count": 2,
        },
        {"function": "value (ppo.py:12)", "reason": "___check_type_id(x)", "count": 1},
        {"function": "third", "reason": "not shown", "count": 1},
    ],
}
JAX = {
    "compilations": 2,
    "seconds": 0.5,
    "persistent_cache_hits": 1,
    "stages": {"trace": 0.1, "lower": 0.05, "backend_compile": 0.35},
    "functions": [{"function": "jit(update)", "compilations": 1, "seconds": 0.35}],
}
EVIL = "f\x1b]0;title\x07<b>[bold]x[/]"  # an escape sequence, HTML and rich markup in a function's name


def _summary(compile_: dict | None, wall: float = 10.0) -> dict:
    op = {"total_s": wall, "exclusive_s": wall, "calls": 1, "categories": {"python": wall}}
    out = {
        "schema": "rlscope.summary/1",
        "trace_dir": "/tmp/t",
        "wall_s": wall,
        "unannotated_s": 0.0,
        "categories": {"python": wall},
        "operations": {"update": op},
        "processes": [{"pid": 1, "host": "h", "wall_s": wall, "complete": True}],
    }
    if compile_ is not None:
        out["compile"] = compile_
    return out


def test_torch_footer_lists_stages_top_functions_and_recompile_reasons() -> None:
    assert footer_lines(_summary(TORCH)) == [
        "compile: 4.20 s compiling (42% of the wall): 7 compilations (3 recompiles);"
        " dynamo 1.00 s, inductor 3.00 s, runtime 200.0 ms",
        "  Policy.forward (policy.py:41): 3.10 s, 3 compilations, 2 recompiles",
        "  loss (ppo.py:90): 900.0 ms, 1 compilation",
        "  value (ppo.py:12): 150.0 ms, 2 compilations, 1 recompile",
        "  recompiled Policy.forward (policy.py:41) (2×): tensor 'x' size mismatch at index 0",
        "  recompiled value (ppo.py:12) (1×): ___check_type_id(x)",
    ]


def test_jax_footer_counts_persistent_cache_hits_and_has_no_recompiles() -> None:
    assert footer_lines(_summary(JAX)) == [
        "compile: 500.0 ms compiling (5% of the wall): 2 compilations (1 loaded from the persistent cache);"
        " trace 100.0 ms, lower 50.0 ms, backend_compile 350.0 ms",
        "  jit(update): 350.0 ms, 1 compilation",
    ]


def test_nothing_compiled_shows_nothing() -> None:
    summary = _summary(None)
    assert footer_lines(summary) == [] and html_section(summary) == "" and html_line(summary) == ""
    assert "compile" not in summary_text(summary, width=200)
    assert "Compilation" not in render_html(summary)


def test_the_footer_sits_under_the_table() -> None:
    text = summary_text(_summary(TORCH), width=200)
    assert "compile: 4.20 s compiling (42% of the wall)" in text
    assert "  recompiled value (ppo.py:12) (1×): ___check_type_id(x)" in text


def test_names_are_escaped_in_the_terminal_and_in_html() -> None:
    evil = {
        **TORCH,
        "functions": [{"function": EVIL, "compilations": 1, "seconds": 1.0, "recompiles": 1}],
        "recompile_reasons": [{"function": EVIL, "reason": f"guard {EVIL}", "count": 1}],
    }
    summary = _summary(evil)
    buf = io.StringIO()
    render_footer(summary, Console(file=buf, width=300, color_system=None, force_terminal=False))
    shown = "f\\x1b]0;title\\x07<b>[bold]x[/]"  # the escape shown, the markup kept as text
    assert buf.getvalue().splitlines()[1:] == [
        f"  {shown}: 1.00 s, 1 compilation, 1 recompile",
        f"  recompiled {shown} (1×): guard {shown}",
    ]
    html = html_section(summary)
    assert "\x1b" not in html and "<b>[bold]" not in html
    assert "<td>f\\x1b]0;title\\x07&lt;b&gt;[bold]x[/]</td>" in html


def test_html_section_tables_exact() -> None:
    assert html_section(_summary(JAX)) == (
        "<h2 id='compilation'>Compilation</h2>\n"
        "<p>500.0 ms compiling (5% of the wall): 2 compilations (1 loaded from the persistent cache)."
        " Stages: trace 100.0 ms, lower 50.0 ms, backend_compile 350.0 ms."
        " Compile time is the <code>compile</code> category of the operation that compiled.</p>\n"
        "<table class='kernels'><tr><th>function</th><th>compile s</th><th>compilations</th></tr>"
        "<tr><td>jit(update)</td><td>0.350</td><td>1</td></tr></table>"
    )
    torch = html_section(_summary(TORCH))
    assert "<th>recompiles</th>" in torch
    assert "<tr><td>Policy.forward (policy.py:41)</td><td>3.100</td><td>3</td><td>2</td></tr>" in torch
    assert "<tr><td>value (ppo.py:12)</td><td>___check_type_id(x)</td><td>1</td></tr>" in torch


def test_the_report_says_so_on_top_only_when_compiling_dominates() -> None:
    some, most = _summary(TORCH), _summary(TORCH, wall=6.0)
    assert html_line(some) == ""
    assert html_line(most) == (
        "<p class='note'><b>Most of this run was compiling</b>: 4.20 s compiling (70% of the wall):"
        " 7 compilations (3 recompiles). <a href='#compilation'>Compilation</a> below says what and why.</p>"
    )
    page = render_html(most)
    assert page.index("Most of this run was compiling") < page.index(
        "<h2>Time by operation and category</h2>"
    )
    assert page.index("<h2>Phases</h2>") < page.index("<h2 id='compilation'>Compilation</h2>")
    assert "Most of this run" not in render_html(some) and "id='compilation'" in render_html(some)
