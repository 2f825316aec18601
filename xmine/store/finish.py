"""Finishing an embedding store: the shards' line numbers, texts and ids joined into the store's
files (with the row index: offsets, hashes, lengths), the manifest written, the build's
scaffolding removed."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.artefacts.fileio import MANIFEST, atomic_path, atomic_write_json, sha256_file
from xmine.artefacts.records import EncoderFingerprint, FileRecord, ProjectionFingerprint, ShardRecord, StoreManifest, read_field
from xmine.store.directory import remove_leftovers
from xmine.store.layout import (
    FORMAT_VERSION, HASHES, ID_OFFSETS, IDS, JOINED_FILES, LENGTHS, LINE_NUMBERS, OFFSETS, OPTIONAL_FILES,
    SENTENCE_INDEX, SENTENCES, STORE_KIND,
)
from xmine.store.text import RowIndex


def finalise(out_dir: Path, identity: dict, shards: list[ShardRecord], stats: dict, *, params: dict) -> None:
    """Join per-shard line numbers and texts (with the row index: offsets, hashes, lengths), write
    the manifest, drop the progress file. Memory: one shard's text at a time, plus 8 bytes a row
    to count the distinct sentences at the end."""
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
            _join_ids(out_dir, shards, count, stack)
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
    body = manifest.to_dict()
    atomic_write_json(out_dir / MANIFEST, body)
    remove_leftovers(out_dir, body)


def _join_ids(out_dir: Path, shards: list[ShardRecord], count: int, stack: contextlib.ExitStack) -> None:
    """`ids.txt` (one record id a row) and its byte offsets `id_offsets.npy`, from the shards'."""
    offsets_tmp = stack.enter_context(atomic_path(out_dir / ID_OFFSETS))
    offsets = np.lib.format.open_memmap(offsets_tmp, mode="w+", dtype=np.uint64, shape=(count + 1,))
    offsets[0] = 0
    pos, offset = 0, 0
    with open(stack.enter_context(atomic_path(out_dir / IDS)), "wb") as out:
        for s in shards:
            with open(out_dir / s.ids_file, "rb") as f:
                raw = f.read()
            out.write(raw)
            sizes = np.fromiter((len(x) + 1 for x in raw.split(b"\n")[:-1]), dtype=np.uint64, count=s.rows)
            offsets[pos + 1: pos + s.rows + 1] = offset + np.cumsum(sizes, dtype=np.uint64)
            pos += s.rows
            offset += len(raw)
    offsets.flush()
    del offsets

