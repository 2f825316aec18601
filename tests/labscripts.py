"""The lab scripts (benchmarks/lab: run from a checkout, not installed with xmine), for tests."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from xmine.paths import REPO_ROOT

LAB = REPO_ROOT / "benchmarks" / "lab"
#: the lab's one entry point: `python benchmarks/lab/run.py COMMAND ...`
RUN = LAB / "run.py"


def lab_module(name: str) -> ModuleType:
    """benchmarks/lab/<name>.py, imported as run.py imports it (the lab modules import each other by name)."""
    if str(LAB) not in sys.path:
        sys.path.insert(0, str(LAB))
    return importlib.import_module(name)
