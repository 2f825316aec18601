"""Reading a finished embedding store (see xmine.store for the layout).

`EmbeddingStore.open(dir)` validates the manifest and every file (existence, size, array shape and
dtype) and, for stores up to `fileio.VERIFY_ON_OPEN_BYTES`, their sha256. In a larger store each
file's sha256 is checked the first time it is read (`shard(i)`, `rows()`, `line_numbers`,
`row_index`, `text_column`), once per process, so a changed or damaged file raises ArtefactError
before anything computed from it is written; `verify()` checks everything now. `rows()` is a view
of all rows read on demand, `row_index()` and `text_column()` give the text by offset.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from xmine.artefacts.fileio import MANIFEST, VerifiedFiles, check_names, read_manifest
from xmine.errors import ArtefactError, NonFiniteRowError, check_every
from xmine.artefacts.records import FileRecord, StoreManifest
from xmine.store.layout import (
    FORMAT_VERSION, HASHES, ID_OFFSETS, IDS, JOINED_FILES, LENGTHS, LINE_NUMBERS, OFFSETS, OPTIONAL_FILES, PROGRESS,
    SENTENCE_INDEX, SENTENCES, STORE_KIND, shard_names,
)
from xmine.store.rows import ShardRows
from xmine.store.text import RowIndex, TextColumn, read_sentences


class EmbeddingStore:
    """A finished embedding store directory, opened read-only (use `EmbeddingStore.open`)."""

    def __init__(self, directory: Path, manifest: StoreManifest):
        self.directory = directory
        self.manifest = manifest
        self.build_info: Any = None  # what built it, when opened by embed_corpus (writer.BuildInfo)
        self._row_index: RowIndex | None = None

    @classmethod
    def open(cls, directory: str | Path) -> "EmbeddingStore":
        """Open and validate a store; `ArtefactError` says what is missing or inconsistent."""
        directory = Path(directory)
        if not (directory / MANIFEST).is_file() and (directory / PROGRESS).is_file():
            raise ArtefactError(
                f"{directory}: unfinished embedding store (an interrupted `xmine embed`); "
                "run the same command again to resume it"
            )
        manifest = read_manifest(directory, STORE_KIND, format_version=FORMAT_VERSION)
        store = cls(directory, StoreManifest.from_dict(manifest, where=str(directory / MANIFEST)))
        store._check_names()
        store._validate()
        store._content.check_if_small()
        return store

    @functools.cached_property
    def _content(self) -> VerifiedFiles:
        """The manifest's sha256 sums; small stores are checked on open, large ones file by file
        on first read (see xmine.artefacts.fileio.VerifiedFiles)."""
        files = {s.file: FileRecord(bytes=s.bytes, sha256=s.sha256) for s in self.manifest.shards}
        return VerifiedFiles(self.directory, {**files, **self.manifest.files}, what="embedding store")

    def _check_names(self) -> None:
        """Every file the manifest names is one the writer makes, by its exact name (shard i:
        `emb-0000i.npy`), before any path is made of it; the joined files are all recorded."""
        where, m = self.directory / MANIFEST, self.manifest
        for i, shard in enumerate(m.shards):
            check_names([shard.file], {shard_names(i)["emb"]}, where=f"{where}: shards[{i}]", what="embedding store")
        check_names(m.files, JOINED_FILES + OPTIONAL_FILES, where=f"{where}: files", what="embedding store")
        missing = [n for n in JOINED_FILES + ((ID_OFFSETS,) if IDS in m.files else ()) if n not in m.files]
        if missing:
            raise ArtefactError(f"{where}: files: {missing[0]} is not recorded; the store is damaged, rebuild it")

    def _validate(self) -> None:
        d, m = self.directory, self.manifest
        self._content.check_sizes()  # shards, row index and text
        total = 0
        for shard in m.shards:
            path = d / shard.file
            arr = _mapped(path, "unreadable shard")
            if arr.shape != (shard.rows, m.dim) or arr.dtype != np.dtype(m.dtype):
                raise ArtefactError(f"{path}: array {arr.shape} {arr.dtype}, expected ({shard.rows}, {m.dim}) "
                                    f"{m.dtype}")
            total += shard.rows
        if total != m.count:
            raise ArtefactError(f"{d}: shards hold {total} rows, the manifest says {m.count}")
        lines = d / LINE_NUMBERS
        shape = _mapped(lines).shape if lines.is_file() else None
        if shape != (m.count,):
            raise ArtefactError(f"{lines}: missing or not {m.count} line numbers")

    def verify(self) -> int:
        """Check every shard and the text against the sha256 sums in the manifest (reads all);
        return the bytes verified."""
        return self._content.check_all()

    # --- what it is
    def __len__(self) -> int:
        return self.manifest.count

    @property
    def dim(self) -> int:
        return self.manifest.dim

    @property
    def part(self) -> str:
        """"raw" (no projection), "meaning" or "language"."""
        return self.manifest.part

    @property
    def lang(self) -> str:
        return self.manifest.lang

    # --- the text
    @functools.cached_property
    def line_numbers(self) -> np.ndarray:
        """int64 (count,), memory-mapped: the 1-based input line of every row (checked once to count
        from 1: a self-consistent store's -5 was written out as a record number)."""
        numbers = self._array(LINE_NUMBERS)
        if len(numbers) and int(numbers.min()) < 1:
            raise ArtefactError(f"{self.directory / LINE_NUMBERS}: holds {int(numbers.min())}, where line numbers "
                                "count from 1; the store is damaged, rebuild it")
        return numbers

    def sentences(self) -> list[str]:
        """The text of every row, in order."""
        self._content.check(SENTENCES)
        return read_sentences(self.directory / SENTENCES, len(self), "store")

    # --- the embeddings
    def _array(self, name: str) -> np.ndarray:
        """The store's .npy file `name`, memory-mapped read-only; its sha256 is checked against the
        manifest the first time (once per process), before any of it is used."""
        self._content.check(name)
        return _mapped(self.directory / name)

    def shard(self, i: int) -> np.ndarray:
        """Shard i in its stored dtype (see `_array`)."""
        return self._array(self.manifest.shards[i].file)

    def shard_arrays(self) -> list[np.ndarray]:
        """All shards (see `shard`): for random access over the whole store, so all are checked."""
        return [self.shard(i) for i in range(len(self.manifest.shards))]

    def rows(self) -> ShardRows:
        """All rows as one (count, dim) view in the stored dtype, read on demand (xmine.store.rows);
        each shard's sha256 is checked the first time the view reads from it (see `shard`)."""
        shards = self.manifest.shards
        return ShardRows([self.directory / s.file for s in shards],
                         on_first_read=lambda i: self._content.check(shards[i].file))

    # --- the row index of the text (offsets, 64-bit hashes, lengths)
    def row_index(self) -> RowIndex:
        """offsets/hashes/lengths of the rows: the store's own files, memory-mapped."""
        if self._row_index is None:
            arrays = [self._array(name) for name in (OFFSETS, HASHES, LENGTHS)]
            want = (len(self) + 1, len(self), len(self))
            if tuple(len(a) for a in arrays) != want:
                raise ArtefactError(f"{self.directory}: offsets/hashes/lengths do not have {want} rows")
            self._row_index = RowIndex(offsets=arrays[0], hashes=arrays[1], lengths=arrays[2])
        return self._row_index

    def text_column(self) -> TextColumn:
        """Row i's sentence by offset, without reading the others."""
        self._content.check(SENTENCES)
        return TextColumn(self.directory / SENTENCES, self.row_index().offsets)

    def id_column(self) -> TextColumn | None:
        """Row i's record id (a store made from an input read with an id field), else None."""
        if IDS not in self.manifest.files:
            return None
        self._content.check(IDS)
        offsets = self._array(ID_OFFSETS)
        if len(offsets) != len(self) + 1:
            raise ArtefactError(f"{self.directory / ID_OFFSETS}: {len(offsets)} offsets, expected {len(self) + 1}")
        return TextColumn(self.directory / IDS, offsets)

    def sentence_index(self) -> np.ndarray | None:
        """int32 (count,), memory-mapped: row i's 1-based index among the sentences of its record,
        for a store made with --split-sentences; else None."""
        if SENTENCE_INDEX not in self.manifest.files:
            return None
        arr = self._array(SENTENCE_INDEX)
        if arr.shape != (len(self),):
            raise ArtefactError(f"{self.directory / SENTENCE_INDEX}: {arr.shape[0]} rows, expected {len(self)}")
        return arr

    def __repr__(self) -> str:
        m = self.manifest
        return (f"EmbeddingStore({str(self.directory)!r}, count={m.count}, dim={m.dim}, dtype={m.dtype}, "
                f"lang={m.lang!r}, encoder={m.encoder.name!r}, part={m.part!r})")


def _mapped(path: Path, problem: str = "unreadable") -> np.ndarray:
    """The .npy file `path`, memory-mapped read-only; ArtefactError naming it when it cannot be read."""
    try:
        return np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as e:
        raise ArtefactError(f"{path}: {problem} ({e}); the store is damaged, rebuild it") from None


__all__ = ["EmbeddingStore"]


def verify_store(directory: str | Path) -> tuple[int, str]:
    """`xmine verify` of a store: open (sizes, shapes), every sha256, and every embedding finite
    (was: a store of NaN rows verified OK, and indexed); each shard is read once for both (was:
    twice, its sha256 then its rows). Every damaged file is reported, one line each (was: the
    first). (bytes, detail)"""
    store = EmbeddingStore.open(directory)
    dtype = np.dtype(store.manifest.dtype)
    starts = np.cumsum([0] + [shard.rows for shard in store.manifest.shards])

    def check_shard(i: int, shard) -> None:
        data_offset = shard.bytes - shard.rows * store.dim * dtype.itemsize  # (the .npy header's length)
        scan = _FiniteRows(dtype, store.dim, data_offset=data_offset)
        store._content.check(shard.file, consume=scan)
        if scan.first_bad is not None:
            row = int(starts[i]) + scan.first_bad
            raise ArtefactError(f"{directory}: {NonFiniteRowError.of_store_row(row, int(store.line_numbers[row]))}: "
                                "damaged, or not written by xmine")

    shard_files = [shard.file for shard in store.manifest.shards]
    check_every([*(functools.partial(check_shard, i, shard) for i, shard in enumerate(store.manifest.shards)),
                 functools.partial(store._content.check_all, skip=shard_files)])  # then the text and row files
    return store._content.total_bytes, (f"{len(store):,} sentences in {len(store.manifest.shards)} shard(s), every "
                                        "sha256 matches, every embedding finite")


class _FiniteRows:
    """Given a .npy shard's bytes in order (`VerifiedFiles.check`'s `consume`), finds its first row
    holding NaN or inf: `first_bad`, the row in the shard, or None. The array's data are the last
    rows x dim values of the file (C order, after its header)."""

    def __init__(self, dtype: np.dtype, dim: int, *, data_offset: int):
        self.dtype, self.dim, self.row_bytes = dtype, dim, dim * dtype.itemsize
        self.skip, self.pending, self.done = data_offset, b"", 0
        self.first_bad: int | None = None

    def __call__(self, block: bytes) -> None:
        if self.skip:
            cut = min(self.skip, len(block))
            block, self.skip = block[cut:], self.skip - cut
        if self.first_bad is not None or not block or not self.row_bytes:
            return
        data = self.pending + block
        whole = len(data) // self.row_bytes * self.row_bytes
        self.pending = data[whole:]
        rows = np.frombuffer(data[:whole], dtype=self.dtype).reshape(-1, self.dim)
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
        if len(bad):
            self.first_bad = self.done + int(bad[0])
        self.done += len(rows)
