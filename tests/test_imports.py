"""The import rules of docs/architecture.md: no cycles, and each layer imports only what it may.

Two checks of the same rules: ``lint-imports`` (import-linter, contracts in pyproject.toml), and a
graph built here from the AST of every module of the installed layout (``collectors/``, ``viz/`` and
``workloads/`` as ``rlscope.collectors``, ``rlscope.viz`` and ``rlscope.workloads``), imports inside
functions included: rlscope defers its heavy imports into functions, so a cycle or a forbidden
import hides there most easily. Imports under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# package -> folder, as pyproject.toml's package-dir installs them
ROOTS = {
    "rlscope": REPO / "rlscope",
    "rlscope.collectors": REPO / "collectors",
    "rlscope.viz": REPO / "viz",
    "rlscope.workloads": REPO / "workloads",
}
CORE = (
    "rlscope.annotate",
    "rlscope.session",
    "rlscope.collectors",
    "rlscope.trace",
    "rlscope.analysis",
    "rlscope.viz",
    "rlscope.runtime",
)
TOOLS = ("rlscope.overhead.calibrate", "rlscope.overhead.validate")
MAX_LOOSE_MODULES = 12

Graph = dict[str, set[str]]


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg, folder in ROOTS.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if pkg == "rlscope" and parts[0] in ("collectors", "viz", "workloads"):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = f
    return mods


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(id(x) for x in ast.walk(stmt))
    return skip


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, mods: dict) -> list[str]:
    """The modules an import statement names: ``from a import b`` is ``a.b`` when that is a module."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]


def import_graph(mods: dict[str, Path]) -> Graph:
    """Module -> the rlscope modules it imports anywhere in its body (the nearest known module of a
    dotted name: ``rlscope.trace.schema.X`` is ``rlscope.trace.schema``)."""
    graph: Graph = {}
    for module, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_only(tree)
        deps: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skip:
                continue
            for target in _targets(module, path.name == "__init__.py", node, mods):
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in mods and target != module:
                    deps.add(target)
        graph[module] = deps
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def reachable(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(_modules())


def test_the_graph_sees_imports_inside_functions_and_skips_type_checking_ones(graph):
    # session.py imports the trace writer (pyarrow) inside Session.start only
    assert "rlscope.trace.writer" in graph["rlscope.session"]
    # the package-dir layout: collectors/ is rlscope.collectors, whose GPU collectors start together
    assert "rlscope.collectors.cupti_native" in graph["rlscope.collectors.gpu"]
    # annotate names Session under TYPE_CHECKING only: no edge (session imports annotate)
    assert "rlscope.session" not in graph["rlscope.annotate"]


def test_cycles_and_reachability_on_a_known_graph():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(cycles(g)) == [["a", "b", "c"], ["e", "e2"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert reachable(g, "d") == set() and reachable(g, "a") == {"a", "b", "c", "d"}


def test_no_import_cycles_between_modules(graph):
    assert cycles(graph) == []


def test_the_core_never_imports_calibrate_or_validate(graph):
    bad = {m: sorted(x for x in reachable(graph, m) if _in(x, TOOLS)) for m in graph if _in(m, CORE)}
    assert {m: xs for m, xs in bad.items() if xs} == {}


def test_the_analysis_imports_only_the_correction_of_the_overhead_package(graph):
    bad = {
        (m, x)
        for m in graph
        if _in(m, ("rlscope.analysis",))
        for x in graph[m]
        if _in(x, ("rlscope.overhead",)) and not _in(x, ("rlscope.overhead.correct",))
    }
    assert bad == set()


def test_at_most_twelve_modules_loose_at_the_top_of_rlscope():
    loose = sorted(p.name for p in (REPO / "rlscope").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_lint_imports_keeps_every_contract():
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    exe = shutil.which("lint-imports")
    assert exe is not None, "import-linter is installed but lint-imports is not on PATH"
    r = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_import_rlscope_loads_no_tool_and_no_heavy_library():
    """The public entries of the overhead packages are imported when called, never at ``import rlscope``."""
    code = (
        "import sys, rlscope\n"
        "tools = ('rlscope.overhead.calibrate', 'rlscope.overhead.validate')\n"
        "bad = [m for m in sys.modules if m.startswith(tools) or m in ('numpy', 'pyarrow', 'torch')]\n"
        "print(bad)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
