"""Which files are xmine's own: the one question every clean-up asks before it removes a file.

Two clean-ups remove only what xmine wrote: a finished run's work folder (`xmine.mining.work`) and
a killed writer's hidden temporary (`xmine.artefacts.leftovers`). A file is xmine's when a writer
that makes the folder holding it says the file's name is one it writes there: each writer
registers that word where it is defined (`register_own_files`: the folders it makes, by their
marker or name, and the files it writes in them), so that this module knows none of them. Two
rules are this module's own: a checkpoint folder's files are those its key file declares
(`xmine.artefacts.checkpoints.declared_files`), and in a writer's hidden temporary folder, which
`tempfile` makes private, a private file and the artefacts' scaffolding (manifest, marker, locks)
are xmine's. A symbolic link never is: xmine writes none in these folders.

Recognised by where it lies, not by its name alone: a user's `README.md` in a work folder stays,
though a dataset folder's card has that name.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from xmine.artefacts.checkpoints import KEY_FILE, declared_files
from xmine.artefacts.fileio import MANIFEST, MARKER

#: `tempfile`'s random part of a name (8 characters of its alphabet)
RANDOM_PART = "[a-z0-9_]{8}"
#: the hidden temporary folders writers make beside their output: `atomic_dir`'s
#: `.NAME.<8 random>.tmp`, build-index's work folder `.NAME.work-<8 random>`
_TEMPORARY_FOLDER = re.compile(rf"^\..+\.({RANDOM_PART}\.tmp|work-{RANDOM_PART})$")
#: the scaffolding every artefact writer may leave in its temporary folder
_SCAFFOLDING = (MANIFEST, MARKER, KEY_FILE, ".lock", ".*.lock")


@dataclass(frozen=True)
class OwnFiles:
    """A writer's word on its own files: `folder` says whether a folder is one it makes (read once
    per folder), `file` whether a file there is one it writes."""

    folder: Callable[[Path], bool]
    file: Callable[[Path], bool]


_WRITERS: list[OwnFiles] = []


def register_own_files(*, folder: Callable[[Path], bool], file: Callable[[Path], bool]) -> None:
    """Add a writer's word on its own files (see the module doc)."""
    own = OwnFiles(folder=folder, file=file)
    if own not in _WRITERS:
        _WRITERS.append(own)


def private(entry: Path) -> bool:
    """Whether `entry` is this user's and private to them, as `tempfile` makes every temporary."""
    st = entry.lstat()
    return st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0


def temporary_folder(folder: Path) -> bool:
    """Whether `folder` is a writer's hidden temporary folder (see `_TEMPORARY_FOLDER`), private as
    `tempfile` makes it, or lies inside one."""
    for d in (folder, *folder.parents):
        if _TEMPORARY_FOLDER.match(d.name):
            return not d.is_symlink() and private(d)
    return False


def _scaffolding_or_private(path: Path) -> bool:
    return private(path) or any(fnmatch.fnmatchcase(path.name, p) for p in _SCAFFOLDING)


register_own_files(folder=temporary_folder, file=_scaffolding_or_private)


def own_files(folder: Path) -> Callable[[Path], bool]:
    """The test of whether a file in `folder` is xmine's (see the module doc). The folder's records
    (its marker, its key file) are read here, once, not for each file."""
    declared = declared_files(folder)
    tests = [own.file for own in _WRITERS if own.folder(folder)]

    def is_own(path: Path) -> bool:
        if path.is_symlink():
            return False
        return any(fnmatch.fnmatchcase(path.name, p) for p in declared) or any(test(path) for test in tests)
    return is_own


__all__ = ["RANDOM_PART", "OwnFiles", "own_files", "private", "register_own_files", "temporary_folder"]
