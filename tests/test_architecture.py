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
