"""Temporary folders of a run in the system's temporary directory (queries embedded for `search`,
standard input copied, a bitext staged), found again after the run was killed.

A run that ends, even by Ctrl-C or SIGTERM, removes its folder. SIGKILL or a power cut runs no
clean-up, and the folder (an embedding store of every query: sized by the input) would stay for
good. Each folder therefore names its owner (host and process id) in `OWNER`, and every new one
first removes those of this user whose owner on this host is no longer running, saying so with
their size. A folder of a live process, of another host or user, or without the owner file is
left alone.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from pathlib import Path

from xmine.artefacts.fileio import remove_path

log = logging.getLogger(__name__)

#: the file in each folder naming the process that made it: "HOST PID"
OWNER = ".xmine-owner"
#: what every such folder's name starts with (then the use: "side-", "input-", ...)
PREFIX = "xmine-"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that id: running
        return True
    return True


def _orphaned(folder: Path) -> bool:
    """Whether `folder` is this user's, made on this host by a process that no longer runs."""
    try:
        host, pid = (folder / OWNER).read_text(encoding="utf-8").split()
        return (folder.stat().st_uid == os.getuid() and host == socket.gethostname() and pid.isdigit()
                and int(pid) != os.getpid() and not _running(int(pid)))
    except (OSError, ValueError):  # no owner file (or not ours to read): left alone
        return False


def remove_orphans(root: Path | None = None) -> None:
    """Remove the folders of killed runs (see the module doc) from `root` (the system's temporary
    directory)."""
    root = Path(root or tempfile.gettempdir())
    try:
        candidates = [p for p in root.glob(f"{PREFIX}*") if p.is_dir() and not p.is_symlink()]
    except OSError:
        return
    for folder in candidates:
        if _orphaned(folder):
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            remove_path(folder)
            log.info(f"{folder}: removed, the temporary files of an earlier xmine run that was killed "
                     f"({size / 2**20:,.1f} MB)")


def temporary_directory(use: str) -> tempfile.TemporaryDirectory:
    """A new temporary folder `xmine-<use>-XXXXXXXX` naming this process as its owner (removed, as
    any TemporaryDirectory, when the run ends), after the folders of killed runs are removed."""
    remove_orphans()
    tmp = tempfile.TemporaryDirectory(prefix=f"{PREFIX}{use}-")
    (Path(tmp.name) / OWNER).write_text(f"{socket.gethostname()} {os.getpid()}\n", encoding="utf-8")
    return tmp


__all__ = ["OWNER", "remove_orphans", "temporary_directory"]
