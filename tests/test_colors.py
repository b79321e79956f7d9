"""One colour per operation and per category, in every chart and every report, whatever else is in it."""

from __future__ import annotations

import json
import re

from rlscope.analysis.diff import diff_summaries
from rlscope.viz import html as viz_html
from rlscope.viz.colors import CATEGORY_COLORS, category_color, operation_color
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
