"""The hidden temporaries a killed writer left beside its output, and their removal by the next run.

A writer builds its output beside it under a hidden name (`atomic_path`'s `.STEM.XXXXXXXX.tmpSUFFIX`,
`atomic_dir`'s `.NAME.XXXXXXXX.tmp`, build-index's work folder `.NAME.work-XXXXXXXX`) and renames it
into place; one killed (SIGKILL, a power cut) leaves it there. The next run of the same output,
holding its lock (so no live writer of it exists), removes it, and says so, with its size.

Only what is xmine's goes. A temporary is made private to its user by `tempfile` (0600, 0700): a
user's own file or folder of such a name is not, and stays. A folder goes only when every file in it
is xmine's (`xmine.artefacts.ownership`, the question every clean-up asks); one holding anything else
(a user's notes put into it) is left where it is, and said (was: removed with all it held).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

from xmine.artefacts.fileio import remove_path
from xmine.artefacts.ownership import RANDOM_PART, own_files, private

log = logging.getLogger(__name__)


def _temporary_names(path: Path) -> re.Pattern:
    """The hidden temporaries a writer of `path` makes beside it (see the module doc)."""
    return re.compile("|".join((re.escape(f".{path.name}.") + RANDOM_PART + re.escape(".tmp"),
                                re.escape(f".{path.stem}.") + RANDOM_PART + re.escape(f".tmp{path.suffix}"),
                                re.escape(f".{path.name}.work-") + RANDOM_PART)))


def _foreign(folder: Path) -> list[str]:
    """The files (and links) under `folder` that are not xmine's, by path relative to it."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        d = Path(dirpath)
        own = own_files(d)
        found += [(d / n).relative_to(folder).as_posix() for n in filenames + [n for n in dirnames
                                                                             if (d / n).is_symlink()]
                  if not own(d / n)]
    return sorted(found)


def remove_leftover_temporaries(claimed: list[Path]) -> None:
    """Remove the hidden temporaries of the claimed outputs that a killed writer left (see the module
    doc). Called with every claimed path locked."""
    for folder in dict.fromkeys(path.parent for path in claimed):  # each listed once, for all its claimed files
        patterns = [(path, _temporary_names(path)) for path in claimed if path.parent == folder]
        with contextlib.suppress(OSError):
            for entry in folder.iterdir():
                owner = next((path for path, names in patterns if names.fullmatch(entry.name)), None)
                if owner is None or entry.is_symlink() or not private(entry):
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


__all__ = ["remove_leftover_temporaries"]
