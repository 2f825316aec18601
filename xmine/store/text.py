"""The text column of a store: `sentences.txt` read by byte offset, and the per-row index beside it.

Mining 10M sentences must not hold 10M Python strings. A finished store therefore carries, next
to `sentences.txt`, three arrays computed in one streaming pass when the store is finalised:

- `offsets.npy`  uint64 (count + 1): byte offset of each line; line i is [offsets[i], offsets[i+1]-1)
- `hashes.npy`   uint64 (count): 64-bit hash of each sentence after white-space normalisation
                 (BLAKE2b, 8-byte digest), what deduplication compares
- `lengths.npy`  int32 (count): length of each sentence in characters (length filters)

`TextColumn` returns the text of any row with one `pread`, so output is written from the store's
file, not from a list of strings.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from xmine.io.dedup import normalise_whitespace
from xmine.errors import ArtefactError

# Lines hashed per numpy batch while scanning.
_SCAN_BATCH = 65536


def sentence_hash(sentence: str) -> int:
    """64-bit hash of a sentence after white-space normalisation (the dedup key)."""
    key = normalise_whitespace(sentence).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


@dataclass(kw_only=True)
class RowIndex:
    """offsets (n+1), hashes (n) and lengths (n) of a text column (arrays may be memory-mapped)."""

    offsets: np.ndarray
    hashes: np.ndarray
    lengths: np.ndarray

    @classmethod
    def scan(cls, lines: Iterable[bytes], count: int | None = None, *, where: str | Path = "the text") -> "RowIndex":
        """Compute the index from the raw lines of a `sentences.txt` (each ending in b"\\n"); `where`
        (the file) names it in the error when it does not hold `count` lines."""
        offsets, hashes, lengths = [np.zeros(1, np.uint64)], [], []
        pos = 0
        batch: list[bytes] = []

        def flush() -> None:
            nonlocal pos
            sizes = np.fromiter((len(b) for b in batch), dtype=np.uint64, count=len(batch))
            offsets.append(pos + np.cumsum(sizes, dtype=np.uint64))
            pos += int(sizes.sum())
            texts = [b[:-1].decode("utf-8") for b in batch]
            hashes.append(np.fromiter(map(sentence_hash, texts), dtype=np.uint64, count=len(texts)))
            lengths.append(np.fromiter((len(t) for t in texts), dtype=np.int32, count=len(texts)))
            batch.clear()

        for raw in lines:
            batch.append(raw if raw.endswith(b"\n") else raw + b"\n")
            if len(batch) >= _SCAN_BATCH:
                flush()
        if batch:
            flush()
        index = cls(offsets=np.concatenate(offsets),
                    hashes=np.concatenate(hashes) if hashes else np.zeros(0, np.uint64),
                    lengths=np.concatenate(lengths) if lengths else np.zeros(0, np.int32))
        if count is not None and len(index.hashes) != count:
            raise ArtefactError(f"{where}: {len(index.hashes)} lines of text, expected {count}")
        return index


class TextColumn:
    """Row i's text from a sentences file by offset (one pread per row; nothing held in memory)."""

    def __init__(self, path: Path, offsets: np.ndarray):
        self.path = Path(path)
        self.offsets = offsets
        self._fd: int | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> str:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
            self._size = os.fstat(self._fd).st_size
            if len(self.offsets) and int(self.offsets[-1]) != self._size:  # (a line more or less than the rows)
                raise ArtefactError(f"{self.path}: {self._size} bytes, where offsets.npy ends its last line at byte "
                                    f"{int(self.offsets[-1])} (lines added or removed, or offsets.npy damaged)")
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        if not 0 <= lo < hi <= self._size:  # (was: a petabyte asked of pread, a MemoryError; or EINVAL, no file named)
            raise ArtefactError(f"{self.path}: line {i + 1} is at bytes {lo}..{hi} by offsets.npy, outside the file's "
                                f"{self._size} bytes or out of order (offsets.npy damaged, or the file changed)")
        raw = os.pread(self._fd, hi - lo, lo)
        if len(raw) != hi - lo or not raw.endswith(b"\n"):
            raise ArtefactError(f"{self.path}: line {i + 1} is not where offsets.npy says (file changed?)")
        return raw[:-1].decode("utf-8")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


def read_sentences(path: Path, count: int, what: str) -> list[str]:
    """Every line of a `sentences.txt`, in order; ArtefactError naming the file when it is not UTF-8
    or does not hold `count` lines (`what`: the store or index it belongs to)."""
    out = list(_sentence_lines(path, what))
    _check_count(path, len(out), count)
    return out


def check_sentences(path: Path, count: int, what: str) -> None:
    """`read_sentences`' checks, a line at a time: memory holds one line, not the file (`verify`)."""
    _check_count(path, sum(1 for _ in _sentence_lines(path, what)), count)


def _sentence_lines(path: Path, what: str) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        try:
            for line in f:
                yield line[:-1] if line.endswith("\n") else line
        except UnicodeDecodeError as e:
            raise ArtefactError(f"{path}: not UTF-8 ({e.reason}); the {what} is damaged, rebuild it") from None


def _check_count(path: Path, lines: int, count: int) -> None:
    if lines != count:
        raise ArtefactError(f"{path}: {lines} lines, expected {count}")


__all__ = ["RowIndex", "TextColumn", "check_sentences", "read_sentences", "sentence_hash"]
