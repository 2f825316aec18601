"""Editing an artefact's manifest in tests: content damage that its own checksum cannot catch.

A manifest carries a checksum of its content (`xmine.artefacts.fileio.SELF_CHECKSUM`), so a manifest
edited by hand is refused before anything in it is read. The tests of what comes after (a file
named outside the artefact, a field of the wrong type, an older format) need a manifest whose
checksum holds and whose content is wrong: written so by a faulty writer, or by an xmine from
before the checksum.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from xmine.artefacts.fileio import atomic_write_manifest, load_manifest


def rewrite_manifest(path: Path, change: Callable[[dict[str, Any]], Any], *, sealed: bool = True) -> None:
    """Apply `change` to the manifest file `path` (as xmine reads it) and write it back: with its
    checksum recomputed for the new content (`sealed`), or without one, as an older xmine wrote it."""
    manifest = load_manifest(path)
    change(manifest)
    if sealed:
        atomic_write_manifest(path, manifest)
    else:
        Path(path).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
