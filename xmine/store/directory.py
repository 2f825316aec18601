"""The files of an embedding store's directory that its writer owns: their exact names, the
writer's lock, clearing them for a rebuild, the hidden folder a replacement is built in, and
removing the build's scaffolding once the store is finished. Nothing else in the directory is
ever touched."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from xmine.errors import ArtefactError, OutputError
from xmine.artefacts.fileio import MANIFEST, atomic_write_json
from xmine.artefacts.output_state import MARKER, dir_kind
from xmine.store.layout import (
    HASHES, ID_OFFSETS, IDS, LENGTHS, LINE_NUMBERS, LOCK, OFFSETS, PROGRESS, SENTENCE_INDEX, SENTENCES, STORE_KIND,
)


@contextlib.contextmanager
def lock_store_dir(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the store directory, so two runs cannot write it at once."""
    lock = FileLock(out_dir / LOCK, timeout=0)  # the lock file is the store's own (_OWN_NAMES)
    try:
        lock.acquire()
    except Timeout:
        raise ArtefactError(f"{out_dir}: another xmine process is writing this embedding store") from None
    try:
        yield
    finally:
        lock.release()


# The names the writer itself makes, exactly: per-shard files, the joined files, and the hidden
# temporaries of its atomic writes (`atomic_path`: ".STEM.<8 random>.tmp.SUFFIX").
_SHARD_FILE = re.compile(r"^(emb-\d{5}\.npy|lines-\d{5}\.npy|text-\d{5}\.txt|ids-\d{5}\.txt|sent-\d{5}\.npy)$")
_OWN_TEMPORARY = re.compile(r"^\.(emb-\d{5}|lines-\d{5}|text-\d{5}|ids-\d{5}|sent-\d{5}|manifest|progress|sentences|"
                            r"line_numbers|offsets|hashes|lengths|ids|id_offsets|sentence_index|\.xmine-output)"
                            r"\.[a-z0-9_]{8}\.tmp\.(npy|txt|json)$")
_OWN_NAMES = frozenset({MANIFEST, PROGRESS, SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS, IDS, ID_OFFSETS,
                        SENTENCE_INDEX, LOCK, MARKER})


def _own_file(name: str) -> bool:
    return name in _OWN_NAMES or bool(_SHARD_FILE.match(name) or _OWN_TEMPORARY.match(name))


def refuse_foreign(out_dir: Path) -> None:
    """OutputError when the store directory holds anything the writer did not make (a user's
    notes, an analysis folder): rebuilding it in place or replacing it would delete them."""
    foreign = sorted(e.name for e in out_dir.iterdir() if not (_own_file(e.name) and e.is_file()))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(f"{out_dir}: holds files that are not part of the embedding store ({shown}); "
                          "refusing to rebuild it (move them away first or choose another output directory)")


def clear_dir(out_dir: Path) -> None:
    """Remove the writer's own files from a store directory (one the claim recognised as an
    embedding store); refused, with nothing removed, when it holds anything else."""
    refuse_foreign(out_dir)
    for entry in out_dir.iterdir():
        if entry.name not in (LOCK, MARKER):
            entry.unlink()


def rebuild_dir(target: Path) -> Path:
    """The hidden directory beside a finished store where its replacement is built (and an
    interrupted replacement resumed): `.NAME.xmine-rebuild`, marked as an embedding store's."""
    d = target.parent / f".{target.name}.xmine-rebuild"
    if os.path.lexists(d):
        if d.is_symlink() or not d.is_dir() or dir_kind(d)[0] != STORE_KIND:
            raise OutputError(f"{d}: exists and is not xmine's (the rebuild of {target} is made there); "
                              "move it away first")
        return d
    d.mkdir()
    atomic_write_json(d / MARKER, {"kind": STORE_KIND})
    return d


def remove_leftovers(out_dir: Path, manifest: dict) -> None:
    """Remove the build's scaffolding (progress file, per-shard text and line numbers, temporaries),
    each by the exact name the writer gives it: nothing else in the directory is touched."""
    keep = (_OWN_NAMES - {PROGRESS}) | {s["file"] for s in manifest["shards"]}
    for entry in out_dir.iterdir():
        if entry.name not in keep and _own_file(entry.name) and entry.is_file():
            entry.unlink()


def remove_temporaries(out_dir: Path) -> None:
    """Remove half-written files a killed run left (the writer's own hidden temporaries only)."""
    for entry in out_dir.iterdir():
        if _OWN_TEMPORARY.match(entry.name) and entry.is_file():
            entry.unlink()

