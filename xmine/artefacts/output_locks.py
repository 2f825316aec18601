"""One writer per output file: an exclusive `fcntl` lock on `.NAME.lock` beside every file a claim
covers (the output, its summary, its companions), held while the claim lasts
(`xmine.artefacts.outputs.claim_output`).

Locking each file, not only the output's name, is what stops two runs whose outputs differ but
share a file (`mine -o y --format moses` writes `y.src`; `mine -o y.src` too). Not `filelock`: it
creates and truncates the lock file, and a user's own file that happens to bear the name must be
left exactly as it is (it is only locked, read-only, and never removed).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Iterable, Iterator

from xmine.errors import OutputError

#: The content of a lock file xmine created: only such a file is ever removed again.
_LOCK_TAG = b"xmine output lock\n"


def _open_lock(lock: Path) -> tuple[int, bool]:
    """(fd, created): the lock file opened, created with xmine's tag when it did not exist. An
    existing file of that name is only locked (read-only), never written."""
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            try:
                return os.open(lock, os.O_RDONLY | os.O_NOFOLLOW), False
            except FileNotFoundError:
                continue  # removed by its holder in between: create it
            except OSError:
                raise OutputError(f"{lock}: exists and cannot be used as xmine's lock (not a plain file); "
                                  "move it away or choose another output") from None
        try:
            os.write(fd, _LOCK_TAG)
        except OSError as e:  # a full disk: name the output, leave nothing behind
            os.close(fd)
            os.unlink(lock)
            raise OSError(e.errno, e.strerror, str(lock)) from None
        return fd, True


def _ours(fd: int) -> bool:
    try:
        return os.pread(fd, len(_LOCK_TAG) + 1, 0) == _LOCK_TAG
    except OSError:
        return False


@contextlib.contextmanager
def lock_outputs(output: Path, files: Iterable[Path]) -> Iterator[None]:
    """Lock every one of `files` (those the claim of `output` may write), in one order (by name),
    so that of two runs that share a file one gets all its locks and the other is refused."""
    with contextlib.ExitStack() as held:
        for path in sorted(set(files), key=str):
            held.enter_context(_lock_file(output, path))
        yield


# A folder that takes no file: read-only, full, over quota (was: "PATH/.NAME.lock: read-only file
# system", a hidden file named instead of the output)
_FOLDER_ERRNOS = (errno.EROFS, errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def _lock_file(output: Path, path: Path) -> Iterator[None]:
    """Exclusive, non-blocking lock on `.NAME.lock` beside `path`. The file is removed on release
    only when it is xmine's (created by xmine, holding its tag): a user's file of that name is
    locked as it is and left in place."""
    lock = path.parent / f".{path.name}.lock"
    while True:
        try:  # (the first file made beside the output: its folder's trouble, named as the output's)
            fd, created = _open_lock(lock)
        except OSError as e:
            if not isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)) \
                    and e.errno not in _FOLDER_ERRNOS:
                raise
            raise OutputError(f"{output}: cannot write in {path.parent} ({e.strerror.lower()}); choose another "
                              "output") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            what = "this output" if path == output else f"{path.name}, a file of this output,"
            raise OutputError(f"{output}: another xmine process is writing {what} right now "
                              f"(lock {lock.name}); wait for it to finish or choose another output") from None
        # The previous holder removes the lock file when done: make sure we locked the live one.
        try:
            st, live = os.fstat(fd), os.stat(lock, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (live.st_dev, live.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        if created or _ours(fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
        os.close(fd)


__all__ = ["lock_outputs"]
