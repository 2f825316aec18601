"""Atomic writes, file fingerprints and the provenance every saved artefact carries.

Every artefact directory xmine writes (embedding store, projection, index, benchmark result)
holds a `manifest.json` with `kind` (what it is), `format_version`, and `provenance`
(xmine version, git commit, date, host, library versions, and the parameters that made it).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from xmine import __version__
from xmine.errors import ArtefactError, OutputError

MANIFEST = "manifest.json"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files 0600; artefacts are meant to be shared like any file the user writes.
_FILE_MODE = 0o666 & ~_umask()
_DIR_MODE = 0o777 & ~_umask()


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never half."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed onto `path`.

    For writers that want a file name (np.save, faiss.write_index, safetensors) rather than bytes.
    The temporary keeps `path`'s suffix so such libraries do not append another one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    try:
        yield Path(tmp)
        # On disk before the rename, so a crash cannot leave `path` naming an empty file.
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            # Name the file the user asked for, not the hidden temporary that was being written.
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


def _renameat2_exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def swap_in_dir(new: Path, path: Path) -> None:
    """Put directory `new` in place of the existing directory `path` and delete the old one.

    Atomic where the system can exchange two paths in one step (Linux): a reader, or a kill at any
    moment, finds the old directory or the new one at `path`, never neither. Elsewhere the old one
    is moved to a hidden name first and put back if the second move fails."""
    new, path = Path(new), Path(path)
    if _renameat2_exchange(new, path):
        shutil.rmtree(new, ignore_errors=True)  # (the old directory, now at the temporary's name)
        return
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.replace(path, old / "x")
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old / "x", path)
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)


def foreign_entries(path: Path, own: set[str] | None = None) -> list[str]:
    """Names in the xmine directory artefact `path` that are not its own files: not its manifest
    or marker, not a file its manifest records, not in `own` (the names its writer makes)."""
    from xmine.outputs import MARKER

    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    recorded = {MANIFEST, MARKER, ".lock"} | set(own or ())
    if own is None and not (isinstance(manifest, dict) and ("files" in manifest or "shards" in manifest)):
        return []  # a manifest that lists no files: only the new artefact's names can tell (own)
    if isinstance(manifest, dict):
        for key in ("files", "shards"):
            entries = manifest.get(key) or {}
            names = entries if isinstance(entries, dict) else [e.get("file") for e in entries if isinstance(e, dict)]
            recorded |= {str(n).split("/")[0] for n in names if n}
    return sorted(e.name for e in path.iterdir() if e.name not in recorded)


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, kind: str | None = None, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory beside `path`; on success it becomes `path` as a whole.

    An existing `path` is replaced only when it is an empty directory, or when `overwrite` is
    given and it is an xmine directory artefact of `kind` (its manifest says so) that holds only
    its own files (those its manifest records, or that the new one has too): a directory where
    someone put other files is refused, since replacing it would delete them. Anything else
    raises OutputError before any work is done and is never touched. The swap is atomic
    (`swap_in_dir`). Callers claim the output first (`xmine.outputs.claim_output`), which also
    locks it and refuses inputs.
    """
    from xmine.outputs import _state_of

    path = Path(path)

    def replaceable(own: set[str] | None = None) -> bool:
        if not os.path.lexists(path):
            return False
        state = _state_of(path, kind or "artefact", "dir", (), None) if kind else (
            "new" if path.is_dir() and not path.is_symlink() and not any(path.iterdir()) else "foreign")
        if state == "new":
            return True
        if state == "finished" and overwrite:
            foreign = foreign_entries(path, own)
            if foreign:
                shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                raise OutputError(f"{path}: holds files that are not part of the xmine {kind.replace('-', ' ')} "
                                  f"({shown}); refusing to replace it (move them away first)")
            return True
        raise OutputError(f"{path}: already exists; refusing to replace it"
                          + (" (pass --overwrite to replace an xmine artefact of the same kind)" if kind else ""))

    replaceable()  # refuse before the work, not after it
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, _DIR_MODE)
        if replaceable({e.name for e in tmp.iterdir()}):
            swap_in_dir(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sha256_file(path: str | Path, *, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


#: Artefacts up to this size have every file hashed when opened; larger ones have each file
#: hashed the first time it is read (VerifiedFiles.check), before anything computed from it is
#: written, so the hashing rides on a read that happens anyway.
VERIFY_ON_OPEN_BYTES = 64 << 20

# (path, inode, size, mtime_ns) of files whose sha256 matched in this process: checked once.
_VERIFIED: set[tuple] = set()


class VerifiedFiles:
    """The sha256 sums an artefact's manifest records, checked against the files on disk.

    `expected` maps file names (relative to `directory`) to {"sha256", "bytes"}. A file is hashed
    at most once per process (while it stays the same inode, size and mtime). A mismatch raises
    ArtefactError naming the file: it was changed or damaged after xmine wrote it.
    """

    def __init__(self, directory: str | Path, expected: dict[str, dict[str, Any]], *, what: str):
        self.directory = Path(directory)
        self.expected = {name: rec for name, rec in expected.items() if rec and rec.get("sha256")}
        self.what = what

    @property
    def total_bytes(self) -> int:
        return sum(int(rec.get("bytes") or 0) for rec in self.expected.values())

    def check(self, name: str) -> None:
        rec = self.expected.get(name)
        if rec is None:
            return
        path = self.directory / name
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ArtefactError(f"{path}: missing from the {self.what}") from None
        key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _VERIFIED:
            return
        if rec.get("bytes") is not None and st.st_size != rec["bytes"]:
            raise ArtefactError(f"{path}: {st.st_size} bytes, the manifest of the {self.what} says "
                                f"{rec['bytes']} (damaged or replaced)")
        if sha256_file(path) != rec["sha256"]:
            raise ArtefactError(f"{path}: content differs from the manifest of the {self.what} (sha256 "
                                "mismatch): changed or damaged since xmine wrote it; rebuild it")
        _VERIFIED.add(key)

    def check_all(self) -> int:
        """Check every file; return the bytes verified."""
        for name in self.expected:
            self.check(name)
        return self.total_bytes

    def check_if_small(self) -> None:
        if self.total_bytes <= VERIFY_ON_OPEN_BYTES:
            self.check_all()


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """Path, size and sha256 of a file: enough to tell whether an input changed."""
    p = Path(path)
    return {"path": str(p.resolve()), "size": p.stat().st_size, "sha256": sha256_file(p)}


def git_commit() -> str | None:
    """The checkout's commit (with `-dirty` when it has uncommitted changes), or None."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        if not commit:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(**parameters: Any) -> dict[str, Any]:
    """What made an artefact: versions, commit, date, host, and the given parameters."""
    import numpy

    libs = {"numpy": numpy.__version__}
    for name in ("torch", "faiss", "sentence_transformers", "transformers"):
        mod = __import__("sys").modules.get(name)
        if mod is not None:
            libs[name] = getattr(mod, "__version__", "?")
    return {
        "xmine_version": __version__,
        "git_commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "libraries": libs,
        "parameters": parameters,
    }


def write_manifest(directory: str | Path, kind: str, body: dict[str, Any], *, format_version: int = 1) -> dict:
    """Write `directory/manifest.json` atomically: {kind, format_version, **body}."""
    manifest = {"kind": kind, "format_version": format_version, **body}
    atomic_write_json(Path(directory) / MANIFEST, manifest)
    return manifest


def read_manifest(directory: str | Path, kind: str | tuple[str, ...]) -> dict[str, Any]:
    """Read and check `directory/manifest.json`; raise ArtefactError if absent or of another kind."""
    path = Path(directory) / MANIFEST
    kinds = (kind,) if isinstance(kind, str) else kind
    if not path.is_file():
        raise ArtefactError(f"{directory}: not an xmine {' or '.join(kinds)} (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ArtefactError(f"{path}: unreadable manifest ({e})") from e
    if manifest.get("kind") not in kinds:
        raise ArtefactError(
            f"{directory}: is an xmine {manifest.get('kind')!r}, expected {' or '.join(kinds)}"
        )
    return manifest


def verify_artefact(path: str | Path) -> tuple[str, int, str]:
    """Check an artefact completely; return (kind, bytes checked, detail) or raise ArtefactError."""
    from xmine.outputs import MARKER, dir_kind, sidecar_of, verify_output_file

    p = Path(path)
    if p.is_dir() and not (p / MANIFEST).is_file() and sidecar_of(p).is_file():  # a dataset folder output
        return verify_output_file(p)
    if not os.path.lexists(p):
        if sidecar_of(p).is_file():  # OUT of a result written beside it (Moses: OUT.src, OUT.tgt)
            return verify_output_file(p)
        raise ArtefactError(f"{p}: does not exist")
    if p.suffix in (".src", ".tgt") and not sidecar_of(p).is_file() and sidecar_of(p.with_suffix("")).is_file():
        return verify_output_file(p.with_suffix(""))  # one file of a Moses pair: the pair is checked
    if p.is_dir():
        kind, finished = dir_kind(p)
        if kind is None:
            raise ArtefactError(f"{p}: not an xmine artefact (no {MANIFEST})")
        if not finished:
            raise ArtefactError(f"{p}: an unfinished xmine {kind.replace('-', ' ')} (no {MANIFEST}); run the "
                                "command that made it again to finish it")
        if kind == "embedding-store":
            from xmine.store.reader import verify_store

            nbytes, detail = verify_store(p)
            return kind, nbytes, detail
        from xmine.errors import ConfigError
        from xmine.plugins import open_artefact

        try:
            artefact = open_artefact(p, kind)  # the owning package's reader validates on open
        except ConfigError:  # no reader for this kind (an export): its manifest and files
            read_manifest(p, kind)
            files = [e for e in p.rglob("*") if e.is_file() and e.name != MARKER]
            return kind, sum(e.stat().st_size for e in files), f"{len(files)} files present (no sums recorded)"
        if hasattr(artefact, "verify"):
            return kind, int(artefact.verify()), "every recorded sha256 matches, every part loads"
        files = [e for e in p.rglob("*") if e.is_file()]
        return kind, sum(e.stat().st_size for e in files), "loads, and its reader's checks pass"
    if sidecar_of(p).is_file():
        kind, nbytes, detail = verify_output_file(p)
        return kind, nbytes, detail
    if p.suffix == ".json":
        try:
            kind = json.loads(p.read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError) as e:
            raise ArtefactError(f"{p}: not an xmine artefact (unreadable JSON: {e})") from None
        if kind:
            return kind, p.stat().st_size, "readable JSON (results record no sums)"
    raise ArtefactError(f"{p}: not an xmine artefact (no {MANIFEST}, no {sidecar_of(p).name} summary)")
