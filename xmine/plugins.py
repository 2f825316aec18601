"""Readers of artefact kinds that feature packages own, found without the core importing them.

The core (inputs, store, CLI plumbing) must open a projection directory (`xmine train`) or an
index directory (`xmine build-index`), but those formats belong to `xmine.disentangle` and
`xmine.index`, and the core never imports a feature package. So a feature package declares its
readers as entry points in the group `xmine.artefact_readers` (pyproject.toml), named by the
artefact kind in the directory's manifest:

    [project.entry-points."xmine.artefact_readers"]
    projection = "xmine.disentangle.projection:load_projection"
    index = "xmine.index.faiss_index:IndexDir.open"

and `open_artefact(path, kind)` loads the reader on first use.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

from xmine.errors import ConfigError

GROUP = "xmine.artefact_readers"

_loaded: dict[str, Callable[[Path], Any]] = {}


def reader_for(kind: str) -> Callable[[Path], Any]:
    """The reader of `kind`: the installed entry point (loaded once)."""
    if kind in _loaded:
        return _loaded[kind]
    found = [ep for ep in entry_points(group=GROUP) if ep.name == kind]
    if not found:
        raise ConfigError(
            f"no installed part of xmine reads {kind!r} artefacts (entry point group {GROUP}); "
            "after updating xmine, reinstall it (`pip install -e .` in the checkout, or "
            "`bash scripts/setup.sh`) so its entry points are registered"
        )
    reader = found[0].load()
    _loaded[kind] = reader
    return reader


def open_artefact(path: str | Path, kind: str) -> Any:
    """Open the artefact directory `path` of `kind` with its reader (which validates it)."""
    return reader_for(kind)(Path(path))
