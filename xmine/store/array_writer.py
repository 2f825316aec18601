"""`StoreWriter`: an embedding store from embeddings computed elsewhere (a cluster job, a
synthetic benchmark), written shard by shard as `xmine.store.writer.embed_corpus` writes them."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.errors import ConfigError
from xmine.artefacts.outputs import claim_output
from xmine.artefacts.records import ShardRecord
from xmine.store.directory import clear_dir, finalise, lock_store_dir
from xmine.store.layout import DEFAULT_DTYPE, DTYPES, PARTS, STORE_KIND
from xmine.store.reader import EmbeddingStore
from xmine.store.shards import write_shard_record


class StoreWriter:
    """Write a store from embeddings computed elsewhere (a cluster job, a synthetic benchmark).

        with StoreWriter(out_dir, encoder=fp, lang="de", dim=384) as w:
            for emb, sentences, line_numbers in blocks:
                w.add(emb, sentences, line_numbers)
        store = w.store

    Rows are buffered to `shard_rows` and written as `embed_corpus` writes them; `close()` (the
    end of the `with`) finalises the store. The directory is claimed like every output
    (xmine.artefacts.outputs): new or empty, an unfinished store (started again), or a finished one with
    `overwrite=True`; a foreign directory and a second writer are refused. Not resumable:
    `embed_corpus` is the resumable path from text. Memory: one shard.
    """

    def __init__(self, out_dir: str | Path, *, encoder: dict[str, Any], lang: str, dim: int,
                 part: str = "raw", projection: dict[str, Any] | None = None, dtype: str = DEFAULT_DTYPE,
                 shard_rows: int = 50_000, source: dict[str, Any] | None = None,
                 params: dict[str, Any] | None = None, overwrite: bool = False):
        if dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if part not in ("raw",) + PARTS or (part == "raw") != (projection is None):
            raise ConfigError(f"part {part!r} with projection {projection}: raw needs no projection, "
                              "meaning/language need one")
        if shard_rows < 1 or dim < 1:
            raise ConfigError("shard_rows and dim must be >= 1")
        self.out_dir = Path(out_dir)
        self.dim, self.dtype, self.shard_rows = dim, dtype, shard_rows
        self.identity = {"input": source or {"path": None}, "encoder": encoder, "projection": projection,
                         "part": part, "dtype": dtype, "lang": lang, "max_chars": None}
        self.params = {"lang": lang, "part": part, "dtype": dtype, "shard_rows": shard_rows, **(params or {})}
        self.overwrite = overwrite
        self.shards: list[ShardRecord] = []
        self.store: EmbeddingStore | None = None
        self._emb: list[np.ndarray] = []
        self._text: list[str] = []
        self._lines: list[np.ndarray] = []
        self._rows = 0
        self._next_line = 1
        self._lock = contextlib.ExitStack()

    def __enter__(self) -> "StoreWriter":
        d = self.out_dir
        # The same rules as every output (xmine.artefacts.outputs): new, empty, an unfinished store (redone),
        # or a finished one with overwrite; never a foreign directory; one writer.
        claim = self._lock.enter_context(claim_output(d, kind=STORE_KIND, form="dir", in_place=True,
                                                      overwrite=self.overwrite))
        try:
            self._lock.enter_context(lock_store_dir(d))
            if claim.state != "new":
                clear_dir(d)
        except BaseException:
            self._lock.close()
            raise
        return self

    def add(self, emb: np.ndarray, sentences: Sequence[str], line_numbers: Sequence[int] | None = None) -> None:
        """Append rows: embeddings (r, dim), their sentences, and 1-based input lines (default: running)."""
        emb = np.asarray(emb)
        if emb.ndim != 2 or emb.shape[1] != self.dim or len(emb) != len(sentences):
            raise ConfigError(f"add(): embeddings {emb.shape} for {len(sentences)} sentences, dim {self.dim}")
        with np.errstate(over="ignore"):  # a value beyond float16's range becomes inf, refused here
            finite = np.isfinite(emb.astype(self.dtype, copy=False)).all(axis=1)
        if not finite.all():
            raise ConfigError(f"add(): embedding {int(np.argmin(finite))} of this batch is not finite (NaN or inf)")
        bad = next((i for i, s in enumerate(sentences) if "\n" in s or "\r" in s), None)
        if bad is not None:
            raise ConfigError(f"add(): sentence {bad} contains a line break")
        if line_numbers is None:
            line_numbers = np.arange(self._next_line, self._next_line + len(sentences))
        line_numbers = np.asarray(line_numbers, dtype=np.int64)
        if len(line_numbers):
            self._next_line = int(line_numbers[-1]) + 1
        pos = 0
        while pos < len(sentences):
            take = min(self.shard_rows - self._rows, len(sentences) - pos)
            self._emb.append(emb[pos: pos + take].astype(self.dtype, copy=False))
            self._text.extend(sentences[pos: pos + take])
            self._lines.append(line_numbers[pos: pos + take])
            self._rows += take
            pos += take
            if self._rows == self.shard_rows:
                self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        self.shards.append(write_shard_record(self.out_dir, len(self.shards), np.concatenate(self._emb),
                                       np.concatenate(self._lines), self._text))
        self._emb, self._text, self._lines, self._rows = [], [], [], 0

    def close(self) -> EmbeddingStore:
        """Write the last shard and finalise; returns the opened store."""
        self._flush()
        if not self.shards:
            raise ConfigError(f"{self.out_dir}: no rows were added")
        count = sum(s.rows for s in self.shards)
        finalise(self.out_dir, self.identity, self.shards, {"sentences": count}, params=self.params)
        self.store = EmbeddingStore.open(self.out_dir)
        return self.store

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.close()
        finally:
            self._lock.close()
