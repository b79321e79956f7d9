"""Regenerate the README's screenshots: docs/report.png (CPU demo) and docs/report_gpu.png (GPU demo).

Runs ``rlscope demo`` briefly (the bundled PPO CartPole workload, profiled and corrected as a user
would see it), writes its HTML report, and renders the report to PNG with headless Chromium (the
browser tests/test_browser.py uses). The GPU screenshot needs a CUDA GPU. Whatever cannot be made
here is said in one line and its PNG is left as it is; the exit status is 0 either way.

    python scripts/screenshots.py [--seconds 10] [--only cpu|gpu] [--out-dir docs] [--gpu-trace DIR]

``--gpu-trace DIR`` draws the GPU screenshot from a trace already taken on a GPU machine (the GPU
machines we use have no browser), e.g. ``rlscope run --trace-dir DIR -- python
benchmarks/validation_workloads.py ppo_gpu`` there.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# width x height of each screenshot: the GPU report has more sections with content
SIZES = {"cpu": (1300, 1800), "gpu": (1300, 3000)}
FILES = {"cpu": "report.png", "gpu": "report_gpu.png"}


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


def _report_of_trace(trace: str, tmp: Path) -> Path | None:
    """The HTML report of an existing trace."""
    html = tmp / "report-trace.html"
    cmd = [sys.executable, "-m", "rlscope.cli.analyze", trace, "--quiet", "--html", str(html)]
    return _html_from(cmd, html, f"analyzing {trace}")


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
    args = p.parse_args(argv)
    chromium = _chromium()
    if chromium is None:
        _say(f"no headless Chromium ({', '.join(CHROMIUM_NAMES)}) found; the PNGs are left as they are")
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
