"""The files of an embedding store's directory that its writer owns: their exact names, the
writer's lock, clearing them for a rebuild, the hidden folder a replacement is built in, and
finishing the store: the shards' line numbers, texts and ids joined into the store's files (with
the row index: offsets, hashes, lengths), the manifest written, the build's scaffolding removed.
Nothing else in the directory is ever touched."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterator

import numpy as np
from filelock import FileLock, Timeout

from xmine.errors import ArtefactError, OutputError
from xmine.artefacts.directory import provenance
from xmine.artefacts.fileio import MANIFEST, MARKER, atomic_path, atomic_write_json, atomic_write_manifest, sha256_file
from xmine.artefacts.output_state import dir_kind
from xmine.artefacts.ownership import register_own_files
from xmine.artefacts.records import EncoderFingerprint, FileRecord, ProjectionFingerprint, ShardRecord, StoreManifest, read_field
from xmine.store.layout import (
    FORMAT_VERSION, HASHES, ID_OFFSETS, IDS, JOINED_FILES, LENGTHS, LINE_NUMBERS, LOCK, OFFSETS, OPTIONAL_FILES,
    PROGRESS, SENTENCE_INDEX, SENTENCES, STORE_KIND,
)
from xmine.store.text import RowIndex, sentence_hash



@contextlib.contextmanager
def lock_store_dir(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the store directory, so two runs cannot write it at once."""
    lock = FileLock(out_dir / LOCK, timeout=0)  # the lock file is the store's own (_OWN_NAMES)
    made = not (out_dir / LOCK).exists()
    try:
        lock.acquire()
    except Timeout:
        raise ArtefactError(f"{out_dir}: another xmine process is writing this embedding store") from None
    written = False
    try:
        yield
        written = True
    finally:
        lock.release()
        if made and not written:  # a refused or failed run leaves no lock file of its own behind (the
            (out_dir / LOCK).unlink(missing_ok=True)  # claim's lock beside the store still holds writers off)


# The names the writer itself makes, exactly: per-shard files, the joined files, and the hidden
# temporaries of its atomic writes (`atomic_path`: ".STEM.<8 random>.tmp.SUFFIX").
_SHARD_FILE = re.compile(r"^(emb-\d{5}\.npy|lines-\d{5}\.npy|text-\d{5}\.txt|ids-\d{5}\.txt|sent-\d{5}\.npy)$")
_OWN_TEMPORARY = re.compile(r"^\.(emb-\d{5}|lines-\d{5}|text-\d{5}|ids-\d{5}|sent-\d{5}|manifest|progress|sentences|"
                            r"line_numbers|offsets|hashes|lengths|ids|id_offsets|sentence_index|\.xmine-output)"
                            r"\.[a-z0-9_]{8}\.tmp\.(npy|txt|json)$")
_OWN_NAMES = frozenset({MANIFEST, PROGRESS, SENTENCES, LINE_NUMBERS, OFFSETS, HASHES, LENGTHS, IDS, ID_OFFSETS,
                        SENTENCE_INDEX, LOCK, MARKER})


def store_file(name: str) -> bool:
    """Whether `name` is one the store writer makes in a store directory (its files, temporaries, lock, marker)."""
    return name in _OWN_NAMES or bool(_SHARD_FILE.match(name) or _OWN_TEMPORARY.match(name))


# the store writer's files, in a folder marked as a store's (`xmine.artefacts.ownership`)
register_own_files(folder=lambda folder: dir_kind(folder)[0] == STORE_KIND, file=lambda path: store_file(path.name))


def refuse_foreign(out_dir: Path, *, built: Path | None = None) -> None:
    """OutputError when the store directory holds anything the writer did not make (a user's
    notes, an analysis folder): rebuilding it in place or replacing it would delete them.
    `built`: the finished replacement, kept where it is for the same command run again."""
    foreign = sorted(e.name for e in out_dir.iterdir() if not (store_file(e.name) and e.is_file()))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        kept = (f"; the new store is kept in {built.name}: the same command, run again once they are moved, "
                "puts it in place" if built is not None else " or choose another output directory")
        raise OutputError(f"{out_dir}: holds files that are not part of the embedding store ({shown}); "
                          f"refusing to rebuild it (move them away first{kept})")


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
        if entry.name not in keep and store_file(entry.name) and entry.is_file():
            entry.unlink()


def remove_temporaries(out_dir: Path) -> None:
    """Remove half-written files a killed run left (the writer's own hidden temporaries only)."""
    for entry in out_dir.iterdir():
        if _OWN_TEMPORARY.match(entry.name) and entry.is_file():
            entry.unlink()



def finalise(out_dir: Path, identity: dict, shards: list[ShardRecord], stats: dict, *, params: dict) -> dict:
    """Join per-shard line numbers and texts (with the row index: offsets, hashes, lengths), write
    the manifest, drop the progress file. Memory: one shard's text at a time, plus 8 bytes a row
    to count the distinct sentences at the end (16 to count the records sharing an id). Returns
    the input statistics recorded."""
    count = sum(s.rows for s in shards)
    with contextlib.ExitStack() as stack:
        arrays = {}
        for name, dtype, shape in ((LINE_NUMBERS, np.int64, count), (OFFSETS, np.uint64, count + 1),
                                   (HASHES, np.uint64, count), (LENGTHS, np.int32, count)):
            tmp = stack.enter_context(atomic_path(out_dir / name))
            arrays[name] = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(shape,))
        text_tmp = stack.enter_context(atomic_path(out_dir / SENTENCES))
        arrays[OFFSETS][0] = 0
        pos, offset = 0, 0
        with open(text_tmp, "wb") as out:
            for s in shards:
                rows = s.rows
                arrays[LINE_NUMBERS][pos: pos + rows] = np.load(out_dir / s.lines_file)
                with open(out_dir / s.text_file, "rb") as f:
                    raw = f.read()
                out.write(raw)
                index = RowIndex.scan([line + b"\n" for line in raw.split(b"\n")[:-1]], count=rows)
                arrays[OFFSETS][pos + 1: pos + rows + 1] = index.offsets[1:] + np.uint64(offset)
                arrays[HASHES][pos: pos + rows] = index.hashes
                arrays[LENGTHS][pos: pos + rows] = index.lengths
                pos += rows
                offset += len(raw)
        for a in arrays.values():
            a.flush()
        unique = int(len(np.unique(np.asarray(arrays[HASHES])))) if count else 0
        arrays.clear()
        if shards and all(s.ids_file for s in shards):
            stats = {**stats, **_join_ids(out_dir, shards, count, stack)}
        if shards and all(s.sent_file for s in shards):
            tmp = stack.enter_context(atomic_path(out_dir / SENTENCE_INDEX))
            joined = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.int32, shape=(count,))
            pos = 0
            for s in shards:
                joined[pos: pos + s.rows] = np.load(out_dir / s.sent_file)
                pos += s.rows
            joined.flush()
            del joined
    manifest = StoreManifest(
        kind=STORE_KIND, format_version=FORMAT_VERSION,
        encoder=EncoderFingerprint.from_dict(identity["encoder"], where="the encoder's fingerprint"),
        projection=read_field(identity, "projection", ProjectionFingerprint | None, where="the projection"),
        **{k: identity[k] for k in ("part", "dtype", "lang", "max_chars")},
        count=count, dim=shards[0].dim, input=identity["input"], input_stats={**stats, "unique_sentences": unique},
        shards=tuple(s.manifest_entry() for s in shards),
        files={name: FileRecord(bytes=(out_dir / name).stat().st_size, sha256=sha256_file(out_dir / name))
               for name in JOINED_FILES + OPTIONAL_FILES if name in JOINED_FILES or (out_dir / name).is_file()},
        provenance=provenance(**params))
    body = atomic_write_manifest(out_dir / MANIFEST, manifest.to_dict())
    remove_leftovers(out_dir, body)
    return manifest.input_stats


def _join_ids(out_dir: Path, shards: list[ShardRecord], count: int, stack: contextlib.ExitStack) -> dict:
    """`ids.txt` (one record id a row) and its byte offsets `id_offsets.npy`, from the shards'.
    Returns how many records share their id with another record, and the first such id with two of
    its records' line numbers: pairs named by id cannot tell those records apart. (A record split
    into sentences gives several rows of one id and one line: those are one record.)"""
    offsets_tmp = stack.enter_context(atomic_path(out_dir / ID_OFFSETS))
    offsets = np.lib.format.open_memmap(offsets_tmp, mode="w+", dtype=np.uint64, shape=(count + 1,))
    offsets[0] = 0
    keys = np.empty(count, dtype=[("id", np.uint64), ("line", np.int64)])
    pos, offset = 0, 0
    ids_tmp = stack.enter_context(atomic_path(out_dir / IDS))
    with open(ids_tmp, "wb") as out:
        for s in shards:
            with open(out_dir / s.ids_file, "rb") as f:
                raw = f.read()
            out.write(raw)
            ids = raw.split(b"\n")[:-1]
            sizes = np.fromiter((len(x) + 1 for x in ids), dtype=np.uint64, count=s.rows)
            offsets[pos + 1: pos + s.rows + 1] = offset + np.cumsum(sizes, dtype=np.uint64)
            keys["id"][pos: pos + s.rows] = np.fromiter((sentence_hash(x.decode("utf-8")) for x in ids),
                                                        dtype=np.uint64, count=s.rows)
            keys["line"][pos: pos + s.rows] = np.load(out_dir / s.lines_file)
            pos += s.rows
            offset += len(raw)
    offsets.flush()
    records = np.unique(keys)  # one entry a record, sorted by id hash, then line
    same = np.flatnonzero(records["id"][1:] == records["id"][:-1])
    if not len(same):
        return {"records_sharing_an_id": 0}
    sharing = np.unique(np.concatenate([same, same + 1]))
    first = records[sharing[np.argmin(records["line"][sharing])]]  # of the records sharing an id, the first read
    row = int(np.flatnonzero((keys["id"] == first["id"]) & (keys["line"] == first["line"]))[0])
    with open(ids_tmp, "rb") as f:
        f.seek(int(offsets[row]))
        shared = f.read(int(offsets[row + 1] - offsets[row]) - 1).decode("utf-8")
    lines = np.unique(records["line"][records["id"] == first["id"]])[:2]
    del offsets
    return {"records_sharing_an_id": int(len(sharing)), "shared_id": {"id": shared, "lines": lines.tolist()}}
