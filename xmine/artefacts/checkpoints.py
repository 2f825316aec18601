"""Checkpoint folders keyed by what made them: the one way a resumable step keeps its partial work.

A step that can be interrupted (a run of the exact product, a Ray tile grid, an approximate search)
writes its finished work units as files in a folder of its own, beside a `key.json` naming the
inputs and parameters they were computed from. Opening the folder with another key drops the
step's own earlier files (they describe other inputs) and records the new key; opening it with the
same key keeps them, so the step resumes. Only the files the step declares as its own (`owned`
glob patterns, and the hidden temporaries `xmine.artefacts.fileio.atomic_path` makes for them) are ever
removed: anything else in the folder stays. The key file records those patterns too, so that what
clears a whole work folder later (`declared_files`) knows the step's files without knowing the step.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from xmine.artefacts.fileio import atomic_write_json, read_json

log = logging.getLogger(__name__)

KEY_FILE = "key.json"


class KeyedDir:
    """A checkpoint folder whose files belong to one key (see the module doc)."""

    def __init__(self, directory: str | Path, key: str, *, owned: Sequence[str]):
        self.dir = Path(directory)
        self.key = key
        self.owned = tuple(owned)
        recorded = read_json(self.dir / KEY_FILE) or {}  # (unreadable, or not an object: another key)
        if recorded.get("key") != key:  # other inputs or parameters: earlier partial results do not apply
            self.clear()
        if recorded != {"key": key, "owned": list(self.owned)}:  # (also a key file of before it named them)
            atomic_write_json(self.dir / KEY_FILE, {"key": key, "owned": list(self.owned)})  # (creates the folder)

    def recorded_key(self) -> str | None:
        return (read_json(self.dir / KEY_FILE) or {}).get("key")

    def path(self, name: str) -> Path:
        return self.dir / name

    def load_arrays(self, name: str, keys: Sequence[str], *, check: Callable[..., str | None] | None = None,
                    what: str = "checkpoint", again: str = "computing it again") -> tuple | None:
        """The arrays `keys` of the saved .npz `name`, or None: not saved yet, or damaged: unreadable,
        or (`check`, given the arrays) a problem it names. A damaged one is deleted with a warning
        ("<path>: damaged <what> (<why>); <again>"), so the step computes it again (was, for the
        approximate search's: a truncated file's traceback, exit 1, whatever --overwrite)."""
        path = self.path(name)
        if not path.is_file():
            return None
        try:
            with np.load(path) as saved:
                arrays = tuple(saved[key] for key in keys)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            why = f"unreadable ({type(e).__name__}: {e})"
        else:
            why = check(*arrays) if check is not None else None
            if why is None:
                return arrays
        log.warning(f"{path}: damaged {what} ({why}); {again}")
        path.unlink(missing_ok=True)
        return None

    def own_files(self) -> list[Path]:
        """The step's files here, with the temporaries a killed writer may have left."""
        if not self.dir.is_dir():
            return []
        found: dict[Path, None] = {}
        for glob in with_temporaries(self.owned):
            found.update((f, None) for f in self.dir.glob(glob) if f.is_file())
        return sorted(found)

    def clear(self) -> None:
        """Remove the step's own files (the key stays): the step starts again from nothing."""
        for f in self.own_files():
            f.unlink(missing_ok=True)


def with_temporaries(owned: Sequence[str]) -> list[str]:
    """The name patterns and those of their temporaries (`atomic_path`'s ".STEM.<random>.tmpSUFFIX")."""
    return [glob for pattern in owned for glob in (pattern, f".{Path(pattern).stem}.*.tmp{Path(pattern).suffix}")]


def declared_files(folder: Path) -> tuple[str, ...]:
    """The name patterns of a checkpoint folder's own files, as its key file records them: the key
    file, the step's patterns and their temporaries. () for a folder without a key file, or with
    one that records no patterns (written before they were): it owns nothing, whatever is in it stays."""
    recorded = read_json(folder / KEY_FILE) or {}
    if not isinstance(recorded.get("owned"), list):
        return ()
    return (KEY_FILE, *with_temporaries([str(p) for p in recorded["owned"]]))
