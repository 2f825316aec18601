"""The work folder beside a mining or scoring result (`OUT.work/`), and its removal when the run is done.

`mine` and `score` encode text sides into embedding stores there and checkpoint their searches
(exact tiles, approximate indexes) so that an interrupted run resumes. When the run has finished
the folder goes, unless --keep-work; but only what xmine wrote there goes: a file or folder of the
user's (notes, an analysis, put into a kept or interrupted run's folder) stays, and so does the
folder holding it, with its marker, said in the log (was: the whole folder removed, theirs too).

xmine's own files are known by where they are (`xmine.artefacts.ownership`, the question every
clean-up asks): the folder's marker; the files an embedding store writer makes in a folder marked as
a store; the files a checkpoint folder's key file declares; a killed writer's hidden temporaries;
and, registered here, what the run itself writes in the work folder's own folders: score's staged
sides, a side's rows files (`xmine.inputs.ROWS_FILES`), the kept-field values of a run killed while
it wrote them. A symbolic link is never xmine's (it writes none there).
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
from pathlib import Path

from xmine.artefacts.fileio import MARKER
from xmine.artefacts.output_state import dir_kind
from xmine.artefacts.ownership import own_files, register_own_files
from xmine.inputs import ROWS_FILES

log = logging.getLogger(__name__)

#: folders of the work folder itself, and the files xmine writes in each (name patterns)
_OWN_BY_FOLDER = {"sides": ("src.txt", "tgt.txt"),  # score's bitext sides, staged as text
                  "fields-*": ("kept-fields-*.jsonl",),  # --keep-field values, while the output is written
                  # a side's: a projected store's rows, an index's vectors, its store's lock (a killed run's)
                  "*": (*ROWS_FILES, ".store.lock")}


def _in_a_work_folder(folder: Path) -> bool:
    """Whether `folder` is one of a work folder's own (that folder marked as an output's work, `*-work`)."""
    return (dir_kind(folder.parent)[0] or "").endswith("-work")


def _run_file(path: Path) -> bool:
    """A file the run writes in one of the work folder's own folders (`_OWN_BY_FOLDER`)."""
    return any(fnmatch.fnmatchcase(path.name, p) for name, own in _OWN_BY_FOLDER.items()
               if fnmatch.fnmatchcase(path.parent.name, name) for p in own)


register_own_files(folder=_in_a_work_folder, file=_run_file)


def remove_work(work: Path, *, only: str | None = None) -> list[Path]:
    """Remove xmine's own files from the work folder `work` (those of its entries matching `only`,
    a name pattern, when given) and the folders left empty; return what stays, the user's files."""
    if not work.is_dir() or work.is_symlink():
        return []
    kept: list[Path] = []
    tops = [e for e in work.iterdir() if only is None or fnmatch.fnmatchcase(e.name, only)]
    for top in tops:
        if top.name == MARKER and top.is_file():
            continue  # the folder's own marker: last, and only when nothing else stays
        if top.is_symlink() or not top.is_dir():
            kept.append(top)
            continue
        # deepest first, so that a folder is looked at after its contents went
        for dirpath, dirnames, filenames in os.walk(top, topdown=False):
            d = Path(dirpath)
            own = own_files(d)  # (read before any file goes: a checkpoint's key file declares the rest)
            for name in filenames + [n for n in dirnames if (d / n).is_symlink()]:
                p = d / name
                if own(p):  # (never a link: xmine writes none there)
                    p.unlink(missing_ok=True)
                else:
                    kept.append(p)
            with contextlib.suppress(OSError):  # (only an empty one goes)
                d.rmdir()
    if only is None and not kept:
        (work / MARKER).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            work.rmdir()
    return kept


def discard_work(work: Path) -> None:
    """`remove_work` at the end of a run; a folder that stays because it holds the user's files is
    said, with what it holds."""
    kept = remove_work(work)
    if kept:
        shown = ", ".join(str(p.relative_to(work)) for p in sorted(kept)[:3])
        more = f" and {len(kept) - 3} more" if len(kept) > 3 else ""
        log.warning(f"{work}: kept, with xmine's own files removed from it: it holds files xmine did not write "
                    f"({shown}{more})")


__all__ = ["discard_work", "remove_work"]
