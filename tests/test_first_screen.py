"""Reports that lead with the answer, measured in headless Chromium.

The report's first screen (1366×768 and 1920×1080) holds the advice and the top rows of the
per-operation table, and folds the overhead correction's details below them; the diff page's legend
shows each bar as it is drawn (a change within noise hatched in its category's colour, never a faded
colour that reads as another category). Positions and colours are the page's own: a script added to
the page writes element boxes and computed fills into the DOM that ``--dump-dom`` returns.

Chromium is found and run as in tests/test_browser.py: missing, these tests skip, except under
``CI`` where they fail.
"""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.analysis.diff import diff_summaries
from rlscope.viz.advice import FIRST_SCREEN_FINDINGS
from rlscope.viz.colors import category_color
from rlscope.viz.diff import WITHIN_NOISE_MARK, diff_html
from rlscope.viz.first_screen import CORRECTION_ID, TOP_OPERATIONS_ID, TOP_ROWS
from tests.test_browser import _html_report, _run_chromium
from tests.test_colors import _summary

VIEWPORTS = [(1366, 768), (1920, 1080)]
_OUT_RE = re.compile(r'<pre id="rlscope-measured">(.*?)</pre>', re.DOTALL)

# Writes, once the page's scripts have run, the boxes of the first screen's parts (page coordinates:
# from the page's top), then opens the correction's fold and measures its
# contents again: the control that a folded box of height 0 is the fold, not the measuring.
_FIRST_SCREEN_JS = """
function rlscopeBox(el) {
  var r = el.getBoundingClientRect();
  var y = window.scrollY;
  return {top: r.top + y, bottom: r.bottom + y, height: r.height, text: el.textContent.trim().slice(0, 80)};
}
function rlscopeFolded() {
  var fold = document.getElementById('__CORRECTION__');
  return Array.prototype.map.call(fold.querySelectorAll(':scope > :not(summary)'), function (el) {
    var b = rlscopeBox(el);
    b.drawn = el.checkVisibility();
    return b;
  });
}
window.addEventListener('load', function () { setTimeout(function () {
  var fold = document.getElementById('__CORRECTION__');
  var out = {
    width: window.innerWidth,
    advice: rlscopeBox(document.getElementById('advice')),
    findings: Array.prototype.map.call(document.querySelectorAll('#advice > ol.advice > li'), rlscopeBox),
    rows: Array.prototype.map.call(
      document.querySelectorAll('#__TABLE__ tbody tr'),
      function (tr) { var b = rlscopeBox(tr); b.text = tr.cells[0].textContent.trim(); return b; }),
    fold_open: fold.open,
    fold: rlscopeBox(fold),
    fold_summary: rlscopeBox(fold.querySelector('summary')),
    folded: rlscopeFolded(),
    first_chart: rlscopeBox(document.querySelector('.plotly-graph-div')),
  };
  fold.open = true;
  out.opened = rlscopeFolded();
  out.fold_opened = rlscopeBox(fold);
  var pre = document.createElement('pre');
  pre.id = 'rlscope-measured';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 300); });
""".replace("__CORRECTION__", CORRECTION_ID).replace("__TABLE__", TOP_OPERATIONS_ID)

# Every drawn bar of the diff chart and every legend swatch: its fill as the browser paints it (a
# colour, or a pattern's background and stroke colours) and its opacity.
_LEGEND_JS = """
function rlscopePaint(el) {
  var cs = getComputedStyle(el);
  var m = /url\\(["']?#([^"')]+)["']?\\)/.exec(cs.fill);
  var paint = {opacity: cs.opacity, fill_opacity: cs.fillOpacity};
  if (!m) { paint.fill = cs.fill; return paint; }
  var pattern = document.getElementById(m[1]);
  paint.pattern_bg = pattern.querySelector('rect').getAttribute('fill');
  paint.pattern_fg = pattern.querySelector('path').getAttribute('stroke');
  return paint;
}
window.addEventListener('load', function () { setTimeout(function () {
  var bars = [];
  document.querySelectorAll('.barlayer .point path').forEach(function (p) {
    if (p.getBoundingClientRect().width > 0.5) bars.push(rlscopePaint(p));
  });
  var legend = [];
  document.querySelectorAll('.legend .traces').forEach(function (t) {
    legend.push({name: t.querySelector('.legendtext').textContent,
                 paint: rlscopePaint(t.querySelector('.legendpoints path'))});
  });
  var pre = document.createElement('pre');
  pre.id = 'rlscope-measured';
  pre.textContent = JSON.stringify({bars: bars, legend: legend});
  document.body.appendChild(pre);
}, 300); });
"""


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def measured(page: Path, script: str, tmp: Path, viewport: tuple[int, int] = VIEWPORTS[0]) -> dict:
    """What ``script`` (added to a copy of ``page``) wrote, with the window at ``viewport``."""
    probe = tmp / f"measured-{page.stem}-{viewport[0]}x{viewport[1]}.html"
    probe.write_text(
        page.read_text(encoding="utf-8").replace("</body>", f"<script>{script}</script></body>"),
        encoding="utf-8",
    )
    res = _run_chromium(probe, tmp, f"--window-size={viewport[0]},{viewport[1]}", "--dump-dom")
    assert res.returncode == 0, f"chromium exited {res.returncode}:\n{res.stderr[-3000:]}"
    found = _OUT_RE.search(res.stdout)
    assert found, "the measuring script wrote nothing"
    return json.loads(html.unescape(found.group(1)))


@pytest.fixture(scope="module")
def simulation_bound_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A small profiled run that is simulation-bound (so the advice has a finding), its report made
    by ``rlscope-analyze --html``, and its summary."""
    tmp = tmp_path_factory.mktemp("first-screen")
    trace = tmp / "trace"
    with rlscope.profile(str(trace), gpu=False), rlscope.phase("training"):
        for _ in range(10):
            with rlscope.scope("simulation"), rlscope.simulator():
                _busy(0.004)
            with rlscope.scope("inference"):
                _busy(0.001)
            with rlscope.scope("backprop"):
                _busy(0.002)
    page = _html_report(trace, tmp / "report.html")
    return page, dict(analyze(str(trace)).summary)


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v[0]}x{v[1]}")
def test_first_screen_leads_with_the_answer(
    simulation_bound_report: tuple[Path, dict], tmp_path: Path, viewport: tuple[int, int]
) -> None:
    page, summary = simulation_bound_report
    assert summary["advice"] and summary["corrected_for_overhead"]
    m = measured(page, _FIRST_SCREEN_JS, tmp_path, viewport)
    width, height = viewport
    # the layout depends on the width alone (no height-relative sizes): at this width, the first
    # screen of a window this high is the page's top ``height`` pixels
    assert m["width"] == width

    # the advice, every finding it shows open, within the first screen
    assert m["advice"]["top"] >= 0 and m["advice"]["bottom"] <= height, m["advice"]
    assert len(m["findings"]) == len(summary["advice"][:FIRST_SCREEN_FINDINGS])
    assert summary["advice"][0]["change"][:40] in m["findings"][0]["text"]
    assert all(f["bottom"] <= height for f in m["findings"])

    # the top operations, largest first, then [unannotated], each row within the first screen
    ops = sorted(summary["operations"], key=lambda n: -summary["operations"][n]["total_s"])
    assert [r["text"] for r in m["rows"]] == [*ops[:TOP_ROWS], "[unannotated]"]
    assert all(r["top"] >= 0 and r["bottom"] <= height for r in m["rows"]), m["rows"]

    # the correction's details: folded (not drawn; the fold no taller than its summary line), its
    # summary line after the advice and before the first chart; opened, the same elements are drawn
    # and take room (the control)
    assert m["fold_open"] is False
    assert m["folded"] and not any(f["drawn"] for f in m["folded"]), m["folded"]
    assert m["fold"]["height"] == pytest.approx(m["fold_summary"]["height"], abs=1.0)
    texts = " ".join(f["text"] for f in m["opened"])
    assert "profiled run" in texts and "uncertainty" in texts  # the details, the corrected ± raw table
    assert all(f["drawn"] for f in m["opened"]), m["opened"]
    assert m["fold_opened"]["height"] > m["fold"]["height"] + sum(f["height"] for f in m["opened"]) / 2
    assert m["advice"]["bottom"] <= m["fold_summary"]["top"] < m["first_chart"]["top"]
    assert max(r["bottom"] for r in m["rows"]) <= m["advice"]["top"]


def _op(cats: dict[str, float], noise: float) -> dict:
    total = sum(cats.values())
    return {
        "total_s": total,
        "exclusive_s": total,
        "calls": 100,
        "categories": cats,
        "noise_s": {"total_s": noise, "exclusive_s": noise, "categories": dict.fromkeys(cats, noise)},
    }


def _rgb(colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))


def test_diff_legend_shows_what_the_bars_show(tmp_path: Path) -> None:
    # backend: beyond noise in inference (2.0 -> 1.0 s), within it in backprop (1.0 -> 1.01 s); python
    # the other way round: both categories have solid and hatched bars
    noise = 0.01
    a = {
        "inference": _op({"python": 1.0, "backend": 2.0}, noise),
        "backprop": _op({"python": 0.5, "backend": 1.0}, noise),
    }
    b = {
        "inference": _op({"python": 1.005, "backend": 1.0}, noise),
        "backprop": _op({"python": 0.8, "backend": 1.01}, noise),
    }
    d = diff_summaries(_summary("/a", a, {}), _summary("/b", b, {}))
    cats = d["operations"]["inference"]["categories"]
    assert cats["backend"]["significant"] and not cats["python"]["significant"]
    page = tmp_path / "diff.html"
    page.write_text(diff_html(d), encoding="utf-8")
    m = measured(page, _LEGEND_JS, tmp_path)

    def look(paint: dict) -> tuple:
        return tuple(sorted(paint.items()))

    legend = {entry["name"]: look(entry["paint"]) for entry in m["legend"]}
    bars = {look(p) for p in m["bars"]}
    assert set(legend) == {c + s for c in ("backend", "python") for s in ("", f" {WITHIN_NOISE_MARK}")}
    assert bars == set(legend.values())  # every bar's look has its legend entry, and every entry its bars
    for cat in ("backend", "python"):
        solid, hatched = dict(legend[cat]), dict(legend[f"{cat} {WITHIN_NOISE_MARK}"])
        assert solid["fill"] == _rgb(category_color(cat)) and solid["opacity"] == "1"
        # within noise: the category's own colour, hatched on white, not a paler colour
        assert hatched["pattern_fg"] == _rgb(category_color(cat)) and hatched["pattern_bg"] == _rgb("#ffffff")
        assert hatched["opacity"] == "1" and "fill" not in hatched
