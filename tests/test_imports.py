"""The import rules of docs/architecture.md: no cycles, and each layer imports only what it may.

import-linter is the checker: its contracts (pyproject.toml) are written in the installed names,
``rlscope.collectors``, ``rlscope.viz`` and ``rlscope.workloads`` for the top-level folders
``collectors/``, ``viz/`` and ``workloads/``. It finds a package by walking its folder, so from the
repo root an import of those names resolves to nothing and a contract about them passes whatever the
code imports; scripts/lint_imports.py builds the installed layout in a temporary folder (one symlink
per file) and runs lint-imports there. Below: every contract holds, lint-imports' graph has every
import of the source, and a wrong import added to a copy of the layout breaks the contract it should.

The second graph is built here from the AST of every module of the installed layout, imports inside
functions included (rlscope defers its heavy imports into functions, so a cycle or a forbidden
import hides there most easily); imports under ``if TYPE_CHECKING:`` are left out: they never run.
It is the reference for lint-imports' graph, and checks what no contract says: every ``rlscope``
import names a module, no cycle anywhere (the contract looks at the siblings of a package), and the
analysis imports only the ``overhead.correct`` package entry of the overhead package.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scripts.lint_imports import PYPROJECT, build_layout, layout_env, lint_imports, package_dirs

REPO = Path(__file__).resolve().parents[1]
# package -> folder, as pyproject.toml's package-dir installs them
ROOTS = package_dirs()
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
MAX_LOOSE_MODULES = 13
IMPORTLINTER = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]

Graph = dict[str, set[str]]


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg, folder in ROOTS.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = f
    return mods


@functools.cache
def _parse(path: Path) -> ast.Module:
    """One parse per file for the whole module's tests (the trees are only read)."""
    return ast.parse(path.read_text(), str(path))


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(id(x) for x in ast.walk(stmt))
    return skip


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from ... import`` statement of ``module`` imports from."""
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    return base


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, mods: dict) -> list[str]:
    """The modules an import statement names: ``from a import b`` is ``a.b`` when that is a module."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = _absolute(module, is_package, node)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]


def _bound_names(tree: ast.Module) -> set[str] | None:
    """The names a module binds at its top level (inside if/try/with blocks too), which ``from m
    import name`` finds; None when any name may be found (a module ``__getattr__``, ``import *``)."""
    names: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif not isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            todo.extend(ast.iter_child_nodes(node))
    return names


def unresolved_imports(mods: dict[str, Path], root: Path = REPO) -> list[str]:
    """``file:line: statement`` for each import of rlscope that names no module of the installed
    layout (nor a top-level name of one), and each import of a folder name (``viz``) that exists
    only in the checkout. Imports under ``if TYPE_CHECKING:`` are included: they must resolve too."""
    checkout_only = {folder.name for pkg, folder in ROOTS.items() if pkg != "rlscope"}
    bound: dict[str, set[str] | None] = {}
    bad: list[str] = []
    for module, path in mods.items():
        tree = _parse(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                pairs = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path.name == "__init__.py", node)
                pairs = [(base, a.name) for a in node.names]
            else:
                continue
            for base, name in pairs:
                top = base.split(".")[0]
                if top != "rlscope" and top not in checkout_only:
                    continue
                ok = base in mods
                if ok and name not in (None, "*") and f"{base}.{name}" not in mods:
                    if base not in bound:
                        bound[base] = _bound_names(_parse(mods[base]))
                    ok = bound[base] is None or name in bound[base]
                if not ok:
                    bad.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return bad


def import_graph(mods: dict[str, Path]) -> Graph:
    """Module -> the rlscope modules it imports anywhere in its body (the nearest known module of a
    dotted name: ``rlscope.trace.schema.X`` is ``rlscope.trace.schema``)."""
    graph: Graph = {}
    for module, path in mods.items():
        tree = _parse(path)
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


def test_the_analysis_imports_only_the_corrections_one_entry_of_the_overhead_package(graph):
    """The correction is one entry, the ``rlscope.overhead.correct`` package itself: the analysis
    never reaches into its modules, nor into calibrate or validate."""
    bad = {
        (m, x)
        for m in graph
        if _in(m, ("rlscope.analysis",))
        for x in graph[m]
        if _in(x, ("rlscope.overhead",)) and x != "rlscope.overhead.correct"
    }
    assert bad == set()


def test_at_most_thirteen_modules_loose_at_the_top_of_rlscope():
    loose = sorted(p.name for p in (REPO / "rlscope").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_every_rlscope_import_resolves_in_the_installed_layout():
    assert unresolved_imports(_modules()) == []


def test_an_import_of_a_missing_module_or_name_is_unresolved(tmp_path):
    pkg = tmp_path / "rlscope"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from rlscope.a import f\nX = 1\n")
    (pkg / "a.py").write_text(
        "from rlscope import X, a, gone\nfrom . import missing\nimport rlscope.b\nimport viz.terminal\n"
        "def f(): from rlscope.a import g\n"
    )
    mods = {"rlscope": pkg / "__init__.py", "rlscope.a": pkg / "a.py"}
    assert unresolved_imports(mods, tmp_path) == [
        "rlscope/a.py:1: from rlscope import X, a, gone",
        "rlscope/a.py:2: from . import missing",
        "rlscope/a.py:3: import rlscope.b",
        "rlscope/a.py:4: import viz.terminal",
        "rlscope/a.py:5: from rlscope.a import g",
    ]


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed layout of the working tree, as lint-imports is run on it."""
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    return build_layout(tmp_path_factory.mktemp("layout"))


# grimp's graph of the layout, as lint-imports builds it
GRIMP_GRAPH = (
    "import json, sys, grimp\n"
    "g = grimp.build_graph('rlscope', cache_dir=None, exclude_type_checking_imports=True)\n"
    "json.dump({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}, sys.stdout)\n"
)


def _packages_above(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def test_lint_imports_sees_every_import_of_the_source(layout, graph):
    """Nothing drops out of the contracts' graph unresolved: it has every module of a package
    (``runtime/boot/sitecustomize.py`` runs as a top-level module, outside any) and, for each, the
    imports the AST graph has."""
    # both graphs leave out the imports under TYPE_CHECKING
    assert IMPORTLINTER.get("exclude_type_checking_imports") is True
    r = subprocess.run(
        [sys.executable, "-c", GRIMP_GRAPH],
        cwd=layout,
        env=layout_env(layout),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    seen = {m: set(xs) for m, xs in json.loads(r.stdout).items()}
    packaged = {m for m in graph if all(p in graph for p in _packages_above(m))}
    assert sorted(seen) == sorted(packaged)
    differ = {m: (graph[m] & packaged, seen[m]) for m in packaged if graph[m] & packaged != seen[m]}
    assert differ == {}


def test_lint_imports_keeps_every_contract(layout):
    r = lint_imports(layout)
    kept = len(IMPORTLINTER["contracts"])
    assert r.returncode == 0 and f"Contracts: {kept} kept, 0 broken." in r.stdout, r.stdout + r.stderr


@pytest.fixture
def own_layout(tmp_path: Path) -> Path:
    """A layout for one test to edit."""
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    return build_layout(tmp_path)


def _add_import(layout: Path, module: str, statement: str) -> None:
    """Swap the module's link in ``layout`` for a copy that also imports ``statement`` inside a
    function, where rlscope defers its imports and a wrong one is easiest to miss."""
    path = layout.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    text = path.read_text()
    path.unlink()
    path.write_text(f"{text}\n\ndef _added() -> None:\n    {statement}\n")


# (module, the import it gains, the contracts it must break), one or more per folder
WRONG_IMPORTS = [
    pytest.param("rlscope.analysis", "from rlscope.viz import terminal", ["pipeline"], id="analysis-renders"),
    pytest.param(
        "rlscope.collectors", "from rlscope.analysis import analyze", ["pipeline"], id="collectors-analyze"
    ),
    pytest.param("rlscope.trace", "from rlscope.cli import parser", ["pipeline"], id="trace-imports-cli"),
    # not directly: rlscope's __init__ imports the session, a layer above the trace
    pytest.param("rlscope.trace.schema", "import rlscope", ["pipeline"], id="trace-reaches-the-session"),
    pytest.param("rlscope.viz", "from rlscope.cli import output", ["pipeline"], id="viz-imports-cli"),
    pytest.param("rlscope.viz.colors", "from rlscope.viz import html", ["acyclic-siblings"], id="viz-cycle"),
    pytest.param(
        "rlscope.workloads",
        "from rlscope.analysis import analyze",
        ["workloads-public-api"],
        id="workload-analyzes",
    ),
    pytest.param(
        "rlscope.overhead.correct",
        "from rlscope.overhead.validate import verdict",
        ["core-no-tools", "overhead-layers"],
        id="correct-imports-validate",
    ),
]


@pytest.mark.parametrize(("module", "statement", "contracts"), WRONG_IMPORTS)
def test_a_wrong_import_breaks_its_contract(own_layout, module, statement, contracts):
    _add_import(own_layout, module, statement)
    r = lint_imports(own_layout, *(a for c in contracts for a in ("--contract", c)))
    assert r.returncode == 1 and f"Contracts: 0 kept, {len(contracts)} broken." in r.stdout, (
        r.stdout + r.stderr
    )


def test_an_allowed_import_added_the_same_way_keeps_every_contract(own_layout):
    _add_import(own_layout, "rlscope.analysis", "from rlscope.trace import schema")
    r = lint_imports(own_layout)
    assert r.returncode == 0 and " 0 broken." in r.stdout, r.stdout + r.stderr


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
