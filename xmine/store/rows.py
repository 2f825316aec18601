"""Row views: a store's embeddings (or a subset of them) seen as one (n, dim) array, read on demand.

Mining and indexing take any object with `shape`, `dtype`, `ndim`, `len()` and `view[a:b]` /
`view[int_array]` returning a numpy array; these views give that without loading the corpus.

`ShardRows` reads `.npy` shards with `pread` rather than through a memory map: pages of a mapped
file stay in the process's resident set (RSS) until the kernel needs them back, so streaming a
7.7 GB store through a map would show (and be charged, e.g. in a container) 7.7 GB resident. A
read copies the block into a buffer that is freed with it; the page cache keeps the file warm
either way. Scattered rows (a row list far apart) are read the same way, one pread per run of
consecutive rows. (A map was tried for them: touching one row of a file in the page cache maps
the kernel's whole fault-around window or large folio, so a 1M-row exact mine held the source
store's 768 MB resident at its final rescoring, released only afterwards.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from xmine.errors import ArtefactError

def as_f32(rows) -> np.ndarray:
    """`rows` (an array, a memory map or a row view's block, any float dtype) as one float32,
    C-contiguous array: what FAISS and the BLAS products take."""
    return np.ascontiguousarray(np.asarray(rows, dtype=np.float32))


# Rows scattered further apart than this are gathered row by row rather than read as one span.
_SPAN_FACTOR = 4


class ShardRows:
    """The rows of `.npy` shard files (same dim and dtype), in order, read with pread.

    `on_first_read(i)` is called before anything is read from shard i the first time (the store
    reader checks the shard's sha256 there)."""

    def __init__(self, paths: Sequence[str | Path], *, on_first_read: Callable[[int], None] | None = None):
        self.paths = [Path(p) for p in paths]
        self._on_first_read = on_first_read
        self._offsets, lengths, dims, dtypes = [], [], set(), set()
        for p in self.paths:
            arr = np.load(p, mmap_mode="r")  # header only; the map is dropped at once
            if arr.ndim != 2 or not arr.flags.c_contiguous:
                raise ArtefactError(f"{p}: expected a C-ordered 2-D array, got {arr.shape}")
            self._offsets.append(int(arr.offset))
            lengths.append(len(arr))
            dims.add(arr.shape[1])
            dtypes.add(arr.dtype)
            del arr
        if len(dims) != 1 or len(dtypes) != 1:
            raise ArtefactError(f"shards of different shapes or dtypes: {sorted(dims)} {sorted(map(str, dtypes))}")
        self.dtype = dtypes.pop()
        dim = dims.pop()
        self.starts = np.cumsum([0] + lengths)
        self.shape = (int(self.starts[-1]), int(dim))
        self.ndim = 2
        self._row_bytes = dim * self.dtype.itemsize
        self._fds: list[int | None] = [None] * len(self.paths)

    def __len__(self) -> int:
        return self.shape[0]

    def __reduce__(self):
        """Pickled (to a Ray task) as its paths: the task reads only its own rows from the shared
        file system, and opens the files where it runs."""
        return ShardRows, ([str(p) for p in self.paths],)

    def check_all(self) -> None:
        """Run `on_first_read` for every shard now (before a progress bar or any work starts)."""
        for i in range(len(self.paths)):
            self._fd(i)

    def _fd(self, i: int) -> int:
        fd = self._fds[i]
        if fd is None:
            if self._on_first_read is not None:
                self._on_first_read(i)
            fd = self._fds[i] = os.open(self.paths[i], os.O_RDONLY)
        return fd

    def _read(self, shard: int, lo: int, hi: int, out: np.ndarray) -> None:
        """Rows lo..hi of one shard into `out` (a C-contiguous (hi-lo, dim) array of self.dtype)."""
        want = (hi - lo) * self._row_bytes
        buf = memoryview(out).cast("B")
        got = os.preadv(self._fd(shard), [buf], self._offsets[shard] + lo * self._row_bytes)
        if got != want:
            raise ArtefactError(f"{self.paths[shard]}: short read ({got} of {want} bytes); file truncated?")

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return self[np.arange(start, stop, step)]
            out = np.empty((max(0, stop - start), self.shape[1]), self.dtype)
            pos = start
            while pos < stop:
                s = int(np.searchsorted(self.starts, pos, side="right") - 1)
                hi = min(stop, int(self.starts[s + 1]))
                self._read(s, pos - int(self.starts[s]), hi - int(self.starts[s]), out[pos - start: hi - start])
                pos = hi
            return out
        if isinstance(key, (int, np.integer)):
            return self[int(key): int(key) + 1][0]
        rows = np.asarray(key, dtype=np.int64)
        out = np.empty((len(rows), self.shape[1]), self.dtype)
        if len(rows) == 0:
            return out
        if rows.min() < 0 or rows.max() >= len(self):
            raise IndexError(f"row index out of range 0..{len(self) - 1}")
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        lo, hi = int(srt[0]), int(srt[-1]) + 1
        if hi - lo <= _SPAN_FACTOR * len(rows):
            out[order] = self[lo:hi][srt - lo]
            return out
        # Scattered: one pread per run of consecutive rows, into the sorted buffer. (The loop is
        # kept lean, plain ints and one byte view: it runs once per row.)
        got = np.empty_like(out)
        view = memoryview(got).cast("B")
        shard = np.searchsorted(self.starts, srt, side="right") - 1
        breaks = np.flatnonzero((np.diff(srt) != 1) | (np.diff(shard) != 0)) + 1
        firsts = np.concatenate(([0], breaks))
        sizes = (np.diff(np.concatenate((firsts, [len(srt)]))) * self._row_bytes).tolist()
        starts_b = (firsts * self._row_bytes).tolist()
        run_shard = shard[firsts]
        offsets = (np.asarray(self._offsets)[run_shard] + (srt[firsts] - self.starts[run_shard]) * self._row_bytes)
        fds = {i: self._fd(i) for i in np.unique(run_shard).tolist()}  # only the shards read (first read checks them)
        preadv = os.preadv
        for sh, at, size, off in zip(run_shard.tolist(), starts_b, sizes, offsets.tolist()):
            if preadv(fds[sh], [view[at: at + size]], off) != size:
                raise ArtefactError(f"{self.paths[sh]}: short read at byte {off}; file truncated?")
        out[order] = got
        return out

    def close(self) -> None:
        for i, fd in enumerate(self._fds):
            if fd is not None:
                os.close(fd)
                self._fds[i] = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class RowSubset:
    """Rows `ids` (increasing) of another view, as a view of their own."""

    def __init__(self, base, ids: np.ndarray):
        self.base = base
        self.ids = np.asarray(ids, dtype=np.int64)
        self.shape = (len(self.ids), int(base.shape[1]))
        self.dtype = base.dtype
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            ids = self.ids[key]
            if len(ids) and ids[-1] - ids[0] + 1 <= _SPAN_FACTOR * len(ids):
                return self.base[int(ids[0]): int(ids[-1]) + 1][ids - ids[0]]
            return self.base[ids]
        if isinstance(key, (int, np.integer)):
            return self.base[int(self.ids[key])]
        return self.base[self.ids[np.asarray(key, dtype=np.int64)]]


__all__ = ["RowSubset", "ShardRows"]
