"""The core (`xmine/`) does not import the feature packages; only the CLI assembles them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "xmine"
FEATURES = ("xmine.disentangle", "xmine.index", "xmine.mining", "xmine.benchmarks")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_modules_import_no_feature_package():
    offenders = {}
    for path in CORE.rglob("*.py"):
        if path.name == "cli.py" and path.parent == CORE:
            continue  # the command-line group gathers every package's commands
        bad = sorted(n for n in _imports(path) if n.startswith(FEATURES))
        if bad:
            offenders[str(path.relative_to(CORE))] = bad
    assert not offenders, offenders


def test_importing_the_input_layer_and_store_loads_no_feature_package():
    code = ("import sys, xmine.inputs, xmine.store, xmine.projection, xmine.plugins; "
            f"print([m for m in sys.modules if m.startswith({FEATURES!r})])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_projection_and_index_readers_are_registered():
    from xmine.plugins import reader_for

    assert reader_for("projection").__module__ == "xmine.disentangle.projection"
    assert reader_for("index").__qualname__ == "IndexDir.open"


# The import package's folders (pyproject `package-dir`): the core and its four subpackages.
ROOT = CORE.parent
PACKAGE_DIRS = {"xmine": ROOT / "xmine", "xmine.mining": ROOT / "mining", "xmine.index": ROOT / "index",
                "xmine.disentangle": ROOT / "disentangle", "xmine.benchmarks": ROOT / "benchmarks"}


def _package_modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a folder's `__init__.py` is the folder's)."""
    modules = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            modules[".".join([package, *parts])] = path
    return modules


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a `from ... import` in `package` reads (relative levels resolved)."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = package
    for _ in range(node.level - 1):
        anchor = anchor.rpartition(".")[0]
    return f"{anchor}.{base}" if base else anchor


def _import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package's modules it imports, at module level or inside any function.

    `from P import n` imports P (its namespace is read) and, when P.n is a module, P.n too; a name
    that is not a module counts as its module's."""

    def owner(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _from_module(node, package)
                targets.add(base)
                targets.update(f"{base}.{a.name}" for a in node.names)
        graph[module] = {owner(t) for t in targets if t == "xmine" or t.startswith("xmine.")} - {module, ""}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_at_any_level():
    # A cycle closed by an import inside a function is still a cycle: the two modules cannot be
    # understood, tested or moved apart. Each module's imports point one way, down the layers.
    graph = _import_graph(_package_modules())
    assert len(graph) > 100 and "xmine.mining.pipeline" in graph  # every folder was read
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        " <-> ".join(c) + "\n    " + "; ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    sources = {"xmine.a": "from xmine.b import f\n", "xmine.b": "def f():\n    from xmine import a\n",
               "xmine.c": "import xmine.a\n"}
    modules = {}
    for name, source in sources.items():
        modules[name] = tmp_path / f"{name}.py"
        modules[name].write_text(source, encoding="utf-8")
    graph = _import_graph(modules)
    assert graph == {"xmine.a": {"xmine.b"}, "xmine.b": {"xmine.a"}, "xmine.c": {"xmine.a"}}
    assert _cycles(graph) == [["xmine.a", "xmine.b"]]


#: The modules that talk to Ray: the engine (`xmine.cluster`) and the executor that schedules every
#: step's units on it. A step calls an executor instead.
RAY_MODULES = {"xmine.cluster", "xmine.executor"}


def test_only_the_executor_and_the_engine_use_ray():
    users = set()
    for module, path in _package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "ray" or n.startswith("ray.") for n in names):
                users.add(module)
    assert "xmine.executor" in users  # the walk saw the imports inside functions
    assert users <= RAY_MODULES, f"scheduling of its own on Ray: {sorted(users - RAY_MODULES)}"


def test_every_imported_name_exists_where_it_is_imported_from():
    # An import inside a function runs only when that function does: a name moved to another
    # module must be imported from its new home everywhere, including in rarely run commands.
    import importlib

    modules = _package_modules()
    missing = []
    for module, path in sorted(modules.items()):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _from_module(node, package)
            if base != "xmine" and not base.startswith("xmine."):
                continue
            target = importlib.import_module(base)
            for alias in node.names:
                if not hasattr(target, alias.name) and f"{base}.{alias.name}" not in modules:
                    missing.append(f"{module}:{node.lineno}: {base} has no {alias.name}")
    assert not missing, "\n".join(missing)


def test_floors_file_pins_the_floors_pyproject_states():
    """scripts/floors.txt (scripts/check-floors.sh) pins each dependency at its stated floor; a pin
    above a floor says why in the comment line above it."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    repo = CORE.parent
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]
            + project["optional-dependencies"]["split"]]
    floors = {r.name: Version(s.version) for r in reqs for s in r.specifier if s.operator == ">="}
    lines = (repo / "scripts" / "floors.txt").read_text(encoding="utf-8").splitlines()
    pins = {}
    for before, line in zip([""] + lines, lines):
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name] = version
            req = next(r for r in reqs if r.name == name)
            assert req.specifier.contains(version), line
            if Version(version) != floors[name]:
                assert before.startswith("#") and name in before, f"{line}: above the floor without a reason"
    assert set(floors) - {"torch"} <= set(pins), set(floors) - set(pins)


def test_no_product_module_is_longer_than_the_limit():
    # A module does one job its name says; past ~400 lines it is doing several. The lab
    # (benchmarks/lab/, not installed) is measuring scripts, not product.
    limit = 420
    long = {str(path.relative_to(ROOT)): n for folder in PACKAGE_DIRS.values() for path in folder.rglob("*.py")
            if "lab" not in path.relative_to(ROOT).parts
            and (n := len(path.read_text(encoding="utf-8").splitlines())) > limit}
    assert not long, f"modules over {limit} lines: {long}"
