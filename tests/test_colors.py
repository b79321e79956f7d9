"""One colour per operation and per category, in every chart and every report, whatever else is in it."""

from __future__ import annotations

import colorsys
import io
import json
import re
from pathlib import Path

from rlscope.analysis.diff import diff_summaries
from rlscope.viz import colors
from rlscope.viz import html as viz_html
from rlscope.viz.colors import CATEGORY_COLORS, OPERATION_COLORS, category_color, operation_color
from rlscope.viz.diff import diff_html


def _op(total: float, cats: dict[str, float]) -> dict:
    return {
        "total_s": total,
        "exclusive_s": total,
        "calls": 10,
        "categories": cats,
        "resources": {"cpu_only": total, "gpu_only": 0.0, "cpu_gpu": 0.0},
    }


def _summary(trace_dir: str, ops: dict[str, dict], phases: dict[str, dict[str, dict]]) -> dict:
    cats: dict[str, float] = {}
    for op in ops.values():
        for c, s in op["categories"].items():
            cats[c] = cats.get(c, 0.0) + s
    wall = sum(o["total_s"] for o in ops.values()) + 1.0
    return {
        "schema": "rlscope.summary/1",
        "trace_dir": trace_dir,
        "wall_s": wall,
        "unannotated_s": 1.0,
        "categories": {**cats, "python": cats.get("python", 0.0) + 1.0},
        "unannotated_categories": {"python": 1.0},
        "operations": ops,
        "phases": {
            name: {"wall_s": sum(o["total_s"] for o in p.values()), "unannotated_s": 0.5, "operations": p}
            for name, p in phases.items()
        },
        "processes": [{"pid": 1, "host": "h", "wall_s": wall, "events": 10, "complete": True}],
        "warnings": [],
    }


def _trace_colours(page: str) -> dict[str, set[str]]:
    """Trace name -> the colours it is drawn in, over every plotly chart of the page."""
    out: dict[str, set[str]] = {}
    decoder = json.JSONDecoder()
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        traces, _ = decoder.raw_decode(page, m.end())
        for t in traces:
            colour = (t.get("marker") or {}).get("color") or (t.get("line") or {}).get("color")
            if isinstance(colour, str):
                out.setdefault(t["name"], set()).add(colour)
    return out


def test_colour_is_a_function_of_the_name():
    assert operation_color("inference") == operation_color("inference") != operation_color("backprop")
    assert operation_color("my_custom_op") == operation_color("my_custom_op")
    assert category_color("simulator") == CATEGORY_COLORS["simulator"]
    assert category_color("python") != category_color("simulator")
    # CRC-32, not hash(): the same in every process (a fixed expectation, PYTHONHASHSEED whatever it is)
    assert operation_color("my_custom_op") == operation_color("".join(["my_", "custom_op"]))


def test_same_name_same_colour_in_two_reports_with_other_operations_and_order():
    a = {
        "inference": _op(3.0, {"python": 1.0, "backend": 2.0}),
        "simulation": _op(2.0, {"simulator": 2.0}),
        "my_custom_op": _op(1.0, {"python": 1.0}),
    }
    b = {  # other operations, and the shared ones in another order of total time
        "my_custom_op": _op(9.0, {"python": 9.0}),
        "backprop": _op(4.0, {"backend": 3.0, "cuda_api": 1.0}),
        "zeta": _op(2.5, {"python": 2.5}),
        "inference": _op(0.5, {"python": 0.5}),
    }
    page_a = viz_html.render_html(
        _summary("/a", a, {"training": a, "evaluation": {"inference": a["inference"]}})
    )
    page_b = viz_html.render_html(_summary("/b", b, {"evaluation": {"zeta": b["zeta"]}, "training": b}))
    colours_a, colours_b = _trace_colours(page_a), _trace_colours(page_b)
    for colours in (colours_a, colours_b):
        for name, used in colours.items():
            assert len(used) == 1, (name, used)  # one colour per name across the page's charts
    shared = set(colours_a) & set(colours_b)
    assert {"inference", "my_custom_op", "python", "backend"} <= shared
    for name in shared:
        assert colours_a[name] == colours_b[name], name
    assert colours_a["inference"] == {operation_color("inference")}
    assert colours_b["backend"] == {category_color("backend")}


def test_diff_page_has_the_report_style_and_colours():
    a = {"inference": _op(3.0, {"python": 1.0, "backend": 2.0})}
    b = {"inference": _op(2.0, {"python": 1.0, "backend": 1.0}), "my_custom_op": _op(1.0, {"python": 1.0})}
    page = diff_html(diff_summaries(_summary("/a", a, {}), _summary("/b", b, {})))
    report = viz_html.render_html(_summary("/a", a, {}))
    head = report[: report.index("<body>")].replace("rlscope report — /a", "rlscope diff")
    assert page.startswith(head)  # the same page shell and style sheet
    assert "<h1>rlscope diff</h1>" in page and "class='sub'" in page
    assert _trace_colours(page)["backend"] == {category_color("backend")}
    assert "my_custom_op (only in B)" in page


def _hue_sat(colour: str) -> tuple[float, float]:
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    h, _, s = colorsys.rgb_to_hls(r, g, b)
    return 360.0 * h, s


def _is_category_hue(colour: str) -> bool:
    """Violet to pink (the category palette), greys excepted."""
    hue, sat = _hue_sat(colour)
    return sat > 0.1 and 250.0 <= hue <= 345.0


def test_operations_and_categories_have_visibly_different_palettes():
    op_colours = {*OPERATION_COLORS.values(), *colors._OPERATION_PALETTE}
    cat_colours = {*CATEGORY_COLORS.values(), *colors._CATEGORY_PALETTE}
    assert not op_colours & cat_colours
    assert not any(_is_category_hue(c) for c in op_colours), [c for c in op_colours if _is_category_hue(c)]
    grey = {CATEGORY_COLORS["rlscope"]}  # rlscope's own work: neutral, like no operation's colour
    assert all(_is_category_hue(c) for c in cat_colours - grey)
    assert _hue_sat(CATEGORY_COLORS["rlscope"])[1] < 0.1 and CATEGORY_COLORS["rlscope"] not in op_colours
    # whatever the names: hashed operations and categories land in their own palettes
    for name in ("my_custom_op", "python", "rollout_0", "learner-update", "gpu_kernel", "zeta"):
        assert not _is_category_hue(operation_color(name)) or name in CATEGORY_COLORS, name
        assert _is_category_hue(category_color(name)) or category_color(name) in grey, name
    # the CPU categories darken from the outermost to the innermost layer
    lightness = [
        colorsys.rgb_to_hls(*(int(CATEGORY_COLORS[c][i : i + 2], 16) / 255 for i in (1, 3, 5)))[1]
        for c in ("python", "simulator", "backend", "cuda_api")
    ]
    assert lightness == sorted(lightness, reverse=True)


def test_terminal_uses_the_same_colours():
    from rich.console import Console

    from rlscope.viz.terminal import render_summary

    ops = {"inference": _op(3.0, {"python": 1.0, "backend": 2.0}), "simulation": _op(1.0, {"simulator": 1.0})}
    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system="truecolor", force_terminal=True)
    render_summary(_summary("/a", ops, {"training": ops}), console)
    out = buf.getvalue()

    def ansi(colour: str) -> str:  # rich's truecolor foreground code
        r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        return f"38;2;{r};{g};{b}"

    for name in ("inference", "simulation"):
        assert re.search(re.escape(ansi(operation_color(name))) + r"[;0-9]*m\s*" + name, out), name
    for cat in ("python", "backend", "simulator"):
        assert re.search(re.escape(ansi(category_color(cat))) + r"[;0-9]*m\s*" + cat, out), cat


def test_the_rl_operations_have_the_documented_colours():
    """docs/reading-a-report.md names the three RL operations' colours; every report draws them so, and
    any other operation in a palette colour of its name."""
    doc = (Path(__file__).parents[1] / "docs" / "reading-a-report.md").read_text()
    named = dict(re.findall(r"`(inference|simulation|backprop)` (blue|green|red)", doc))
    assert named == {"inference": "blue", "simulation": "green", "backprop": "red"}
    hues = {"blue": (190.0, 250.0), "green": (80.0, 160.0), "red": (-20.0, 20.0)}
    for name, word in named.items():
        hue, sat = _hue_sat(operation_color(name))
        lo, hi = hues[word]
        hue = hue - 360.0 if hue > 180.0 and lo < 0 else hue
        assert lo <= hue <= hi and sat > 0.3, (name, word, operation_color(name))
        assert operation_color(name) == OPERATION_COLORS[name]
    for name in ("my_custom_op", "rollout", "update", "learner_step"):
        assert operation_color(name) in colors._OPERATION_PALETTE, name  # hashed from the name alone


def test_an_automatic_operation_is_drawn_in_its_names_colour():
    """``auto`` is a flag: the entry keeps its name's colour, and the report marks it ``(auto)``."""
    ops = {n: {**_op(1.0, {"python": 1.0}), "auto": True} for n in ("inference", "simulation", "backprop")}
    summary = _summary("/a", ops, {"rollout": ops, "update": {"backprop": ops["backprop"]}})
    page = viz_html.render_html(summary)
    colours = _trace_colours(page)
    for name in ops:
        assert colours[name] == {OPERATION_COLORS[name]}, name
    assert "backprop (auto)" in page and "(auto): found by rlscope" in page
    for op in ops.values():  # the same dicts in the phases: no entry automatic, nothing marked
        op["auto"] = False
    page = viz_html.render_html(summary)
    assert "backprop (auto)" not in page and "found by rlscope" not in page
    assert _trace_colours(page)["backprop"] == {OPERATION_COLORS["backprop"]}
