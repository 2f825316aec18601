"""Atomic writes, file fingerprints and the provenance every saved artefact carries.

Every artefact directory xmine writes (embedding store, projection, index, benchmark result)
holds a `manifest.json` with `kind` (what it is), `format_version`, and `provenance`
(xmine version, git commit, date, host, library versions, and the parameters that made it).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
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
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, kind: str | None = None, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory beside `path`; on success it becomes `path` as a whole.

    An existing `path` is replaced only when it is an empty directory, or when `overwrite` is
    given and it is an xmine directory artefact of `kind` (its manifest says so). Anything else
    raises OutputError before any work is done and is never touched: nothing is moved aside or
    deleted that is not the artefact being replaced. Callers claim the output first
    (`xmine.outputs.claim_output`), which also locks it and refuses inputs.
    """
    from xmine.outputs import _state_of

    path = Path(path)

    def replaceable() -> bool:
        if not os.path.lexists(path):
            return False
        state = _state_of(path, kind or "artefact", "dir", (), None) if kind else (
            "new" if path.is_dir() and not path.is_symlink() and not any(path.iterdir()) else "foreign")
        if state == "new":
            return True
        if state == "finished" and overwrite:
            return True
        raise OutputError(f"{path}: already exists; refusing to replace it"
                          + (" (pass --overwrite to replace an xmine artefact of the same kind)" if kind else ""))

    replaceable()  # refuse before the work, not after it
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, _DIR_MODE)
        if replaceable():
            # Move the old artefact to a fresh hidden name, put the new one in place, then delete
            # the old one: it is ours (checked above), and a failure restores it.
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
            os.replace(path, old / "x")
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old / "x", path)
                old.rmdir()
                raise
            shutil.rmtree(old, ignore_errors=True)
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
