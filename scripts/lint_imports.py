"""Run lint-imports on the installed layout of rlscope, where it sees every import.

collectors/, viz/ and workloads/ are folders at the top of the repo that install as
``rlscope.collectors``, ``rlscope.viz`` and ``rlscope.workloads`` (``[tool.setuptools.package-dir]``
in pyproject.toml). import-linter (grimp) finds a package by walking its folder, so from the repo
root it cannot resolve ``rlscope.viz...`` and the like: those edges drop out of the graph and a
contract about them passes whatever the code imports. Here the installed layout is built in a
temporary folder, one symlink per source file (``rlscope/`` with ``collectors/``, ``viz/`` and
``workloads/`` inside it), and lint-imports runs from there with pyproject.toml's contracts, which
are written in the installed names. tests/test_imports.py runs the same.

    python scripts/lint_imports.py [lint-imports options, e.g. --contract ID --show-timings]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
# the interpreter running this, not whichever lint-imports is first on PATH
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"]


def package_dirs(pyproject: Path = PYPROJECT) -> dict[str, Path]:
    """Package -> its source folder, as setuptools installs them: ``rlscope`` from ``rlscope/``, the
    others from ``[tool.setuptools.package-dir]``."""
    config = tomllib.loads(pyproject.read_text())
    dirs = {"rlscope": pyproject.parent / "rlscope"}
    for pkg, folder in config["tool"]["setuptools"].get("package-dir", {}).items():
        dirs[pkg] = pyproject.parent / folder
    return dirs


def build_layout(dest: Path, pyproject: Path = PYPROJECT) -> Path:
    """Make ``dest/rlscope`` the installed package tree, one symlink per ``.py`` file (folders are
    real, so a test can swap a single link for an edited copy). Returns ``dest``."""
    for pkg, folder in sorted(package_dirs(pyproject).items()):
        target_root = dest.joinpath(*pkg.split("."))
        for src in sorted(folder.rglob("*.py")):
            rel = src.relative_to(folder)
            if "__pycache__" in rel.parts:
                continue
            target = target_root / rel
            if target.exists() or target.is_symlink():
                raise FileExistsError(f"{target} comes from two source folders (second: {src})")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(src)
    return dest


def layout_env(layout: Path) -> dict[str, str]:
    """This environment with ``layout`` first on sys.path, so that importlib (and grimp through it)
    finds ``rlscope`` there, never in the checkout or the editable install."""
    path = [str(layout), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def lint_imports(layout: Path, *args: str, pyproject: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    """lint-imports with pyproject's contracts, its graph built from ``layout``."""
    cmd = [*LINT_IMPORTS, "--no-cache", "--no-logo", *args, str(pyproject)]
    return subprocess.run(cmd, cwd=layout, env=layout_env(layout), capture_output=True, text=True)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="rlscope-layout-") as tmp:
        r = lint_imports(build_layout(Path(tmp)), *argv)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
