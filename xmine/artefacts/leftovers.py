"""The hidden temporaries a killed writer left beside its output, and their removal by the next run.

A writer builds its output beside it under a hidden name (`atomic_path`'s `.STEM.XXXXXXXX.tmpSUFFIX`,
`atomic_dir`'s `.NAME.XXXXXXXX.tmp`, build-index's work folder `.NAME.work-XXXXXXXX`) and renames it
into place; one killed (SIGKILL, a power cut) leaves it there. The next run of the same output,
holding its lock (so no live writer of it exists), removes it, and says so, with its size.

Only what is xmine's goes. A temporary is made private to its user by `tempfile` (0600, 0700): a
user's own file or folder of such a name is not, and stays. A folder goes only when every file in it
is one xmine writes there (`xmine_file`, which asks the writers that registered their files); one
holding anything else (a user's notes put into it) is left where it is, and said (was: removed with
all it held).
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import re
import stat
from pathlib import Path
from typing import Callable

from xmine.artefacts.checkpoints import KEY_FILE, declared_files
from xmine.artefacts.fileio import MANIFEST, MARKER, remove_path

log = logging.getLogger(__name__)

#: `tempfile`'s random part of a name (8 characters of its alphabet)
_RANDOM = "[a-z0-9_]{8}"
#: each writer's word on a file of its own (`register_own_files`): the store's, an index's, a
#: dataset folder's; registered where each writer is defined, so that this module knows none of them
_OWN_FILES: list[Callable[[Path], bool]] = []


def register_own_files(own: Callable[[Path], bool]) -> None:
    """Add a writer's test of whether a file (in a killed run's temporary folder) is one it writes."""
    if own not in _OWN_FILES:
        _OWN_FILES.append(own)


def _temporary_names(path: Path) -> re.Pattern:
    """The hidden temporaries a writer of `path` makes beside it (see the module doc)."""
    return re.compile("|".join((re.escape(f".{path.name}.") + _RANDOM + re.escape(".tmp"),
                                re.escape(f".{path.stem}.") + _RANDOM + re.escape(f".tmp{path.suffix}"),
                                re.escape(f".{path.name}.work-") + _RANDOM)))


def _private(entry: Path) -> bool:
    """Whether `entry` is this user's and private to them, as `tempfile` makes every temporary."""
    st = entry.lstat()
    return st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0


def xmine_file(path: Path) -> bool:
    """Whether a file in a killed writer's temporary folder is one xmine writes there: private (a
    temporary of its own), an artefact's scaffolding, a checkpoint's its key file declares, or one a
    writer registered says is its own. A link never is."""
    if path.is_symlink():
        return False
    if _private(path) or path.name in (MANIFEST, MARKER, KEY_FILE, ".lock") or fnmatch.fnmatchcase(path.name,
                                                                                                  ".*.lock"):
        return True
    if any(fnmatch.fnmatchcase(path.name, p) for p in declared_files(path.parent)):
        return True
    return any(own(path) for own in _OWN_FILES)


def _foreign(folder: Path) -> list[str]:
    """The files (and links) under `folder` that are not xmine's, by path relative to it."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        d = Path(dirpath)
        found += [(d / n).relative_to(folder).as_posix() for n in filenames + [n for n in dirnames
                                                                             if (d / n).is_symlink()]
                  if not xmine_file(d / n)]
    return sorted(found)


def remove_leftover_temporaries(claimed: list[Path]) -> None:
    """Remove the hidden temporaries of the claimed outputs that a killed writer left (see the module
    doc). Called with every claimed path locked."""
    for folder in dict.fromkeys(path.parent for path in claimed):  # each listed once, for all its claimed files
        patterns = [(path, _temporary_names(path)) for path in claimed if path.parent == folder]
        with contextlib.suppress(OSError):
            for entry in folder.iterdir():
                owner = next((path for path, names in patterns if names.fullmatch(entry.name)), None)
                if owner is None or entry.is_symlink() or not _private(entry):
                    continue
                if entry.is_dir() and (foreign := _foreign(entry)):
                    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                    log.warning(f"{entry}: left where it is: the hidden work of an earlier run of {owner.name} that "
                                f"was killed, but it holds files xmine did not write ({shown}); remove it once they "
                                "are moved")
                    continue
                size = (sum(f.stat().st_size for f in entry.rglob("*") if f.is_file()) if entry.is_dir()
                        else entry.stat().st_size)
                remove_path(entry)
                log.info(f"{entry}: removed, the hidden work of an earlier run of {owner.name} that was killed "
                         f"({size / 2**20:,.1f} MB)")


__all__ = ["register_own_files", "remove_leftover_temporaries", "xmine_file"]
