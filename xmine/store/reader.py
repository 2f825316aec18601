"""Reading a finished embedding store (see xmine.store for the layout).

`EmbeddingStore.open(dir)` validates the manifest and every file (existence, size, array shape and
dtype; `verify()` also checks sha256). `iter_blocks` and `to_array` read the shards memory-mapped
and convert to float32 block by block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from xmine.artefacts import MANIFEST, read_manifest, sha256_file
from xmine.errors import ArtefactError, ConfigError
from xmine.store.layout import FORMAT_VERSION, LINE_NUMBERS, PROGRESS, SENTENCES, STORE_KIND


class EmbeddingStore:
    """A finished embedding store directory, opened read-only (use `EmbeddingStore.open`)."""

    def __init__(self, directory: Path, manifest: dict[str, Any]):
        self.directory = directory
        self.manifest = manifest
        self.build_info: Any = None  # what built it, when opened by embed_corpus (writer.BuildInfo)
        self._line_numbers: np.ndarray | None = None
        starts = np.cumsum([0] + [s["rows"] for s in manifest["shards"]])
        self._shard_starts = starts

    @classmethod
    def open(cls, directory: str | Path) -> "EmbeddingStore":
        """Open and validate a store; `ArtefactError` says what is missing or inconsistent."""
        directory = Path(directory)
        if not (directory / MANIFEST).is_file() and (directory / PROGRESS).is_file():
            raise ArtefactError(
                f"{directory}: unfinished embedding store (an interrupted `xmine embed`); "
                "run the same command again to resume it"
            )
        manifest = read_manifest(directory, STORE_KIND)
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ArtefactError(
                f"{directory}: embedding store format {manifest.get('format_version')}, "
                f"this xmine reads format {FORMAT_VERSION}"
            )
        missing = [k for k in ("encoder", "count", "dim", "dtype", "shards", "part", "lang") if k not in manifest]
        if missing:
            raise ArtefactError(f"{directory / MANIFEST}: missing field(s) {', '.join(missing)}")
        store = cls(directory, manifest)
        store._validate()
        return store

    def _validate(self) -> None:
        d, m = self.directory, self.manifest
        total = 0
        for shard in m["shards"]:
            path = d / shard["file"]
            if not path.is_file():
                raise ArtefactError(f"{path}: shard missing from the embedding store")
            if path.stat().st_size != shard["bytes"]:
                raise ArtefactError(
                    f"{path}: {path.stat().st_size} bytes, the manifest says {shard['bytes']} (damaged?)"
                )
            arr = np.load(path, mmap_mode="r")
            if arr.shape != (shard["rows"], m["dim"]) or arr.dtype != np.dtype(m["dtype"]):
                raise ArtefactError(
                    f"{path}: array {arr.shape} {arr.dtype}, expected ({shard['rows']}, {m['dim']}) {m['dtype']}"
                )
            total += shard["rows"]
        if total != m["count"]:
            raise ArtefactError(f"{d}: shards hold {total} rows, the manifest says {m['count']}")
        lines = d / LINE_NUMBERS
        if not lines.is_file() or np.load(lines, mmap_mode="r").shape != (m["count"],):
            raise ArtefactError(f"{lines}: missing or not {m['count']} line numbers")
        if not (d / SENTENCES).is_file():
            raise ArtefactError(f"{d / SENTENCES}: missing")

    def verify(self) -> None:
        """Check every shard and the text against the sha256 sums in the manifest (reads all)."""
        for shard in self.manifest["shards"]:
            if sha256_file(self.directory / shard["file"]) != shard["sha256"]:
                raise ArtefactError(f"{self.directory / shard['file']}: sha256 differs from the manifest")
        files = self.manifest.get("files", {})
        for name in (SENTENCES, LINE_NUMBERS):
            want = files.get(name, {}).get("sha256")
            if want and sha256_file(self.directory / name) != want:
                raise ArtefactError(f"{self.directory / name}: sha256 differs from the manifest")

    # --- what it is
    def __len__(self) -> int:
        return int(self.manifest["count"])

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def encoder_fingerprint(self) -> dict[str, Any]:
        return self.manifest["encoder"]

    @property
    def projection_fingerprint(self) -> dict[str, Any] | None:
        return self.manifest.get("projection")

    @property
    def part(self) -> str:
        """"raw" (no projection), "meaning" or "language"."""
        return self.manifest["part"]

    @property
    def lang(self) -> str:
        return self.manifest["lang"]

    # --- the text
    @property
    def line_numbers(self) -> np.ndarray:
        """int64 (count,): the 1-based input line of every row."""
        if self._line_numbers is None:
            self._line_numbers = np.load(self.directory / LINE_NUMBERS)
        return self._line_numbers

    def iter_sentences(self) -> Iterator[str]:
        """The text of every row, in order, streamed."""
        with open(self.directory / SENTENCES, encoding="utf-8", newline="\n") as f:
            for line in f:
                yield line[:-1] if line.endswith("\n") else line

    def sentences(self) -> list[str]:
        """The text of every row, in order."""
        out = list(self.iter_sentences())
        if len(out) != len(self):
            raise ArtefactError(f"{self.directory / SENTENCES}: {len(out)} lines, expected {len(self)}")
        return out

    # --- the embeddings
    def shard_arrays(self) -> list[np.ndarray]:
        """The shards, memory-mapped read-only, in their stored dtype."""
        return [np.load(self.directory / s["file"], mmap_mode="r") for s in self.manifest["shards"]]

    def iter_blocks(self, block_rows: int = 65536) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (start_row, float32 array of up to `block_rows` rows) over the whole store.

        Blocks have exactly `block_rows` rows (except the last) whatever the shard boundaries;
        only one block is in memory at a time.
        """
        if block_rows < 1:
            raise ConfigError(f"block_rows must be >= 1, got {block_rows}")
        shards = self.shard_arrays()
        starts = self._shard_starts
        n = len(self)
        for start in range(0, n, block_rows):
            end = min(start + block_rows, n)
            block = np.empty((end - start, self.dim), dtype=np.float32)
            first = int(np.searchsorted(starts, start, side="right") - 1)
            pos = start
            i = first
            while pos < end:
                lo = pos - starts[i]
                hi = min(end, starts[i + 1]) - starts[i]
                block[pos - start: pos - start + (hi - lo)] = shards[i][lo:hi]
                pos += hi - lo
                i += 1
            yield start, block

    def to_array(self, dtype: Any = np.float32) -> np.ndarray:
        """All embeddings in one (count, dim) array of `dtype` (float32 by default)."""
        out = np.empty((len(self), self.dim), dtype=dtype)
        for start, arr in zip(self._shard_starts, self.shard_arrays()):
            out[start: start + len(arr)] = arr
        return out

    def check_encoder(self, encoder_fingerprint: dict[str, Any], *, what: str = "query encoder") -> None:
        """Raise `EncoderMismatchError` unless `encoder_fingerprint` is the store's encoder."""
        from xmine.encoders import check_same_encoder

        check_same_encoder(self.encoder_fingerprint, encoder_fingerprint, what=f"{what} vs store {self.directory}")

    def __repr__(self) -> str:
        m = self.manifest
        return (
            f"EmbeddingStore({str(self.directory)!r}, count={m['count']}, dim={m['dim']}, "
            f"dtype={m['dtype']}, lang={m['lang']!r}, encoder={m['encoder'].get('name')!r}, part={m['part']!r})"
        )


__all__ = ["EmbeddingStore"]
