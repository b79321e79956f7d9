"""Regenerate the docs' screenshots: docs/report.png (CPU demo), docs/report_gpu.png (GPU demo) and the
pictures of docs/find-fix-prove.md.

Runs ``rlscope demo`` briefly (the bundled PPO CartPole workload, profiled and corrected as a user
would see it), writes its HTML report, and renders the report to PNG with headless Chromium (the
browser tests/test_browser.py uses). The GPU screenshot needs a CUDA GPU. Whatever cannot be made
here is said in one line and its PNG is left as it is; the exit status is 0 either way.

    python scripts/screenshots.py [--seconds 10] [--only cpu|gpu] [--out-dir docs] [--gpu-trace DIR]

``--gpu-trace DIR`` draws the GPU screenshot from a trace already taken on a GPU machine (the GPU
machines we use have no browser), e.g. ``rlscope run --trace-dir DIR -- python
benchmarks/validation_workloads.py ppo_gpu`` there.

``--find-fix-prove BEFORE AFTER`` draws docs/find-fix-prove.md's pictures instead, from the two traces
that page's commands take (PPO on gymnasium's CartPole, then on the vectorized torch CartPole): the
first screen of BEFORE's report, its timeline and what-if sections, the first screen of AFTER's report,
and the top of ``rlscope-analyze diff BEFORE AFTER``'s page.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# width x height of each screenshot: the GPU report has more sections with content
SIZES = {"cpu": (1300, 1800), "gpu": (1300, 3000)}
FILES = {"cpu": "report.png", "gpu": "report_gpu.png"}
# docs/find-fix-prove.md: (file, which page, size, the sections shown: from the heading that starts with
# the first text up to the one that starts with the second; None: the page from its top)
FIND_FIX_PROVE = (
    ("find-fix-prove-before.png", "before", (1300, 830), None),
    ("find-fix-prove-whatif.png", "before", (1300, 900), ("Timeline", "The critical path")),
    ("find-fix-prove-after.png", "after", (1300, 830), None),
    ("find-fix-prove-diff.png", "diff", (1300, 720), None),
)
# Hides every element of the page's body outside the sections START..STOP (headings h1-h3 whose text
# starts so), before the screenshot: Chromium's --screenshot shows the top of the page only.
_CROP_SCRIPT = """<script>(function () {
  const kids = Array.from(document.body.children);
  const at = (e, p) => p !== null && /^H[123]$/.test(e.tagName) && e.textContent.startsWith(p);
  const a = kids.findIndex((e) => at(e, %s));
  if (a < 0) return;
  let b = kids.findIndex((e, i) => i > a && at(e, %s));
  if (b < 0) b = kids.length;
  kids.forEach((e, i) => { if (i < a || i >= b) e.style.display = "none"; });
})();</script>"""


def _say(msg: str) -> None:
    print(f"screenshots: {msg}", file=sys.stderr, flush=True)


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def _has_cuda() -> bool:
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def _html_from(cmd: list[str], html: Path, what: str) -> Path | None:
    """Run ``cmd``, which writes the report ``html``; None, said why, when it failed."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not html.exists():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        _say(f"{what} failed (status {r.returncode}): {last}")
        return None
    return html


def _report(device: str, seconds: float, tmp: Path) -> Path | None:
    """Run the demo on ``device`` and return its HTML report."""
    html = tmp / f"report-{device}.html"
    cmd = [sys.executable, "-m", "rlscope.cli.main", "demo", "--seconds", str(seconds), "--device", device]
    cmd += ["--trace-dir", str(tmp / f"trace-{device}"), "--html", str(html)]
    return _html_from(cmd, html, f"the {device} demo")


def _report_of_trace(trace: str, tmp: Path, label: str = "trace") -> Path | None:
    """The HTML report of an existing trace."""
    html = tmp / f"report-{label}.html"
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", trace, "--quiet", "--html", str(html)]
    return _html_from(cmd, html, f"analyzing {trace}")


def _cropped(html: Path, sections: tuple[str, str | None], out: Path) -> Path:
    """A copy of the page ``html`` that shows only ``sections`` (see :data:`FIND_FIX_PROVE`)."""
    script = _CROP_SCRIPT % tuple(json.dumps(s) for s in sections)
    page = html.read_text(encoding="utf-8")
    out.write_text(page.replace("</body>", script + "\n</body>", 1), encoding="utf-8")
    return out


def _find_fix_prove(chromium: str, before: str, after: str, out_dir: Path, tmp: Path) -> None:
    """docs/find-fix-prove.md's pictures from its two traces."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = {"before": _report_of_trace(before, tmp, "before")}
    pages["after"] = _report_of_trace(after, tmp, "after")
    diff = tmp / "report-diff.html"
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", "diff", before, after, "--quiet", "--html", str(diff)]
    pages["diff"] = _html_from(cmd, diff, f"diffing {before} and {after}")
    for name, which, size, sections in FIND_FIX_PROVE:
        html = pages[which]
        if html is None:
            continue
        if sections is not None:
            html = _cropped(html, sections, tmp / f"{Path(name).stem}.html")
        shot = tmp / name
        if _render(chromium, html, shot, size, tmp):
            shutil.copyfile(shot, out_dir / name)
            _say(f"wrote {out_dir / name}")


def _render(chromium: str, html: Path, png: Path, size: tuple[int, int], tmp: Path) -> bool:
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        "--virtual-time-budget=10000",  # plotly draws every chart before the shot
        f"--window-size={size[0]},{size[1]}",
        f"--screenshot={png}",
        html.resolve().as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not png.exists():
        _say(f"Chromium could not render {html.name} (status {r.returncode})")
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="how long each demo trains (default 10)")
    p.add_argument("--only", choices=sorted(SIZES), help="make only this screenshot")
    p.add_argument("--out-dir", default=str(Path(__file__).resolve().parent.parent / "docs"), metavar="DIR")
    p.add_argument("--gpu-trace", metavar="DIR", help="draw the GPU screenshot from this GPU trace")
    p.add_argument(
        "--find-fix-prove",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="draw docs/find-fix-prove.md's pictures from these two traces (and nothing else)",
    )
    args = p.parse_args(argv)
    chromium = _chromium()
    if chromium is None:
        _say(f"no headless Chromium ({', '.join(CHROMIUM_NAMES)}) found; the PNGs are left as they are")
        return 0
    if args.find_fix_prove:
        with tempfile.TemporaryDirectory(prefix="rlscope-screenshots-") as d:
            _find_fix_prove(chromium, *args.find_fix_prove, Path(args.out_dir), Path(d))
        return 0
    kinds = [args.only] if args.only else list(SIZES)
    if "gpu" in kinds and not args.gpu_trace and not _has_cuda():
        _say("no CUDA GPU here: docs/report_gpu.png is left as it is (run this on a GPU machine)")
        kinds.remove("gpu")
    with tempfile.TemporaryDirectory(prefix="rlscope-screenshots-") as d:
        tmp = Path(d)
        for kind in kinds:
            if kind == "gpu" and args.gpu_trace:
                html = _report_of_trace(args.gpu_trace, tmp)
            else:
                html = _report("cuda" if kind == "gpu" else "cpu", args.seconds, tmp)
            shot = tmp / FILES[kind]
            if html is not None and _render(chromium, html, shot, SIZES[kind], tmp):
                out = Path(args.out_dir) / FILES[kind]
                shutil.copyfile(shot, out)
                _say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
