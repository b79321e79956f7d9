"""The wheel installs one top-level name, and importing rlscope stays light."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_top_level_is_only_rlscope(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    wheel = next(tmp_path.glob("rlscope-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        top = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert z.read(top).decode().split() == ["rlscope"]
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"rlscope"}
    for sub in (
        "collectors/torch_ops.py",
        "collectors/cupti_native.c",
        "collectors/scope_native.c",
        "runtime/boot/sitecustomize.py",  # `rlscope run` puts its directory on the program's PYTHONPATH
        "viz/terminal.py",
        "viz/timeline.js",  # the HTML timeline draws with it
        "workloads/ppo_cartpole.py",
        "analysis/overlap.py",
        "analysis/native/timeline.c",  # the C loops compile on first use from their sources
        "trace/native/intact.c",
        "clib.py",
    ):
        assert f"rlscope/{sub}" in names


def test_import_rlscope_is_light():
    code = (
        "import sys, rlscope; heavy = ('torch', 'gymnasium', 'pyarrow', 'plotly', 'rich', 'pynvml',"
        " 'triton', 'jax'); print([m for m in heavy if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
