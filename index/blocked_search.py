"""Top-k search over shards in query blocks, one cut shared by the single process and Ray.

FAISS's similarities can differ in the last bits with the number of queries in one call (BLAS
picks other kernels for other shapes). So the paths that must give the same bytes in one process
and on Ray cut the queries the same way: blocks of `QUERY_BLOCK` rows, each searched in every
shard by `shard_searcher` (what `search_shard` runs), merged per query in shard order by
`merge_topk`. `search_blocks` does that here, shard by shard (each shard is opened once);
`xmine.index.ray_build.search_blocks_ray` runs runs of blocks x one shard as tasks and merges the
same way.

A "shard opener" is a picklable callable, `open_shard(s) -> (index, shard, choice)`, as
`search_shard` and `shard_searcher` take them:
- `IndexDirShards(index_dir)`: the shards of an index directory (an open `IndexDir` or a path);
- `FlatChunks(rows)`: exact inner-product search over rows, as flat indexes of `FLAT_CHUNK` rows
  built when opened (memory: one chunk, not the whole side).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xmine.index.faiss_index import IndexDir, shard_searcher
from xmine.topk import merge_topk

#: Queries per search call, in one process and on Ray alike (see the module doc).
QUERY_BLOCK = 16_384
#: Rows per flat index of `FlatChunks` (100 MB of float32 at 384 dimensions).
FLAT_CHUNK = 65_536


class IndexDirShards:
    """The shards of an index directory (what a search opens, here or in a Ray task).

    Built from an open `IndexDir`, it searches that one; pickled (to a Ray task) it travels as the
    path, and the task opens, and so checks, the directory itself once."""

    def __init__(self, index: IndexDir | str | Path):
        self.path = str(index.path if isinstance(index, IndexDir) else index)
        self._ix = index if isinstance(index, IndexDir) else None

    def _open(self) -> IndexDir:
        if self._ix is None:
            self._ix = IndexDir.open(self.path)
        return self._ix

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.path, self._ix = state["path"], None

    def __len__(self) -> int:
        return len(self._open().manifest["shards"])

    def __call__(self, s: int):
        """(index, shard, choice) of shard s, as `shard_searcher` takes them."""
        ix = self._open()
        return ix.load_shard(s), ix.manifest["shards"][s], ix.manifest["choice"]


class FlatChunks:
    """Exact inner-product search over `rows` (an array or a row view; for Ray tasks one from
    `rows_for_workers`), as shards of `chunk` rows each, built into a flat index when opened."""

    def __init__(self, rows, chunk: int | None = None):
        self.rows, self.chunk = rows, int(chunk or FLAT_CHUNK)

    def __len__(self) -> int:
        return -(-len(self.rows) // self.chunk)

    def __call__(self, s: int):
        import faiss

        lo, hi = s * self.chunk, min(len(self.rows), (s + 1) * self.chunk)
        block = np.ascontiguousarray(self.rows[lo:hi], dtype=np.float32)
        index = faiss.IndexFlatIP(block.shape[1])
        index.add(block)
        return index, {"start": lo, "rows": hi - lo}, {}


def search_blocks(open_shard, n_shards: int, queries, k: int, *, block: int | None = None,
                  nprobe: int | None = None, use_gpu: bool = False, desc: str = "search",
                  show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (sims, rows; -inf and -1 where fewer) of every query over `n_shards` shards, in this
    process: the arrays `search_blocks_ray` returns for the same arguments (see the module doc).
    `block`: queries per search call, QUERY_BLOCK by default.

    Memory: one shard, one block of queries, and the (len(queries), k) result."""
    from tqdm.auto import tqdm

    nq, block = len(queries), block or QUERY_BLOCK
    out_s = np.full((nq, k), -np.inf, dtype=np.float32)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    with tqdm(total=nq * n_shards, desc=desc, unit=" queries", disable=not show_progress, dynamic_ncols=True) as bar:
        for s in range(n_shards):
            search = shard_searcher(*open_shard(s), nprobe=nprobe, use_gpu=use_gpu)
            for q0 in range(0, nq, block):
                q1 = min(nq, q0 + block)
                sims, rows = search(np.ascontiguousarray(queries[q0:q1], dtype=np.float32), k)
                out_s[q0:q1], out_i[q0:q1] = merge_topk([out_s[q0:q1], sims], [out_i[q0:q1], rows], k)
                bar.update(q1 - q0)
            del search  # the shard's memory (and GPU copy) before the next one is opened
    return out_s, out_i
