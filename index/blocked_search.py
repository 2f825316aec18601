"""Top-k search over shards in query blocks, the same cut in one process and on Ray.

FAISS's similarities can differ in the last bits with the number of queries in one call (BLAS
picks other kernels for other shapes). So `search_blocks` cuts the queries the same way whatever
runs it: blocks of `QUERY_BLOCK` rows, each searched in every shard by `shard_searcher`, merged
per query by `merge_topk`; its units (a run of blocks x one shard) run here or as Ray tasks
(`xmine.exec.executor`), with the same bytes.

A "shard opener" is a picklable callable, `open_shard(s) -> (index, shard, choice)`, as
`shard_searcher` takes them (an `IndexShard` and an `IndexChoice`):
- `IndexDirShards(index_dir)`: the shards of an index directory (an open `IndexDir` or a path);
- `FlatChunks(rows)`: exact inner-product search over rows, as flat indexes of `FLAT_CHUNK` rows
  built when opened (memory: one chunk, not the whole side).
"""

from __future__ import annotations

import dataclasses

from pathlib import Path

import numpy as np

from xmine.exec.executor import LOCAL, Executor, ShardProgress
from xmine.index.faiss_index import IndexChoice, IndexDir, IndexShard, faiss_computing, shard_searcher
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

    def __reduce__(self):
        return IndexDirShards, (self.path,)

    def __len__(self) -> int:
        return len(self._open().manifest.shards)

    def __call__(self, s: int):
        """(index, shard, choice) of shard s, as `shard_searcher` takes them."""
        ix = self._open()
        shard = dataclasses.replace(ix.manifest.shards[s], file=str(ix.path / ix.manifest.shards[s].file))  # (named)
        return ix.load_shard(s), shard, ix.manifest.choice


class FlatChunks:
    """Exact inner-product search over `rows` (an array or a row view; for Ray tasks one from
    `rows_for_workers`), as shards of `chunk` rows each, built into a flat index when opened."""

    def __init__(self, rows, chunk: int | None = None):
        self.rows, self.chunk = rows, int(chunk or FLAT_CHUNK)

    def __len__(self) -> int:
        return -(-len(self.rows) // self.chunk)

    def __call__(self, s: int):
        faiss = faiss_computing()

        lo, hi = s * self.chunk, min(len(self.rows), (s + 1) * self.chunk)
        block = np.ascontiguousarray(self.rows[lo:hi], dtype=np.float32)
        index = faiss.IndexFlatIP(block.shape[1])
        index.add(block)
        return index, IndexShard(file="", start=lo, rows=hi - lo), IndexChoice(kind="flat", factory="Flat")


#: Queries one search unit runs against its shard. A unit opens (reads) its shard once, so at
#: scale a unit must cover many query blocks: with 16k-query units, 1B queries would read every
#: shard 61,000 times (3,800 at this size). A block is checkpointed once every shard's unit holding
#: it has returned, so this is also what an interruption loses (was 1M queries: a run stopped at
#: 327k of 500k kept none of them).
QUERIES_PER_UNIT = 1 << 18


#: Queries per FAISS call within a block. FAISS's working memory grows with the queries of one call
#: (an IVF-PQ fast-scan search at nprobe 111: about 7 KB a query, 450 MB for a 65,536-query block),
#: so a large block is searched in calls of this many, cut at the same offsets wherever it runs. A
#: multiple of FAISS's own BLAS query block (4096 rows), so the coarse quantiser sees the same
#: products as in one call.
SEARCH_CALL = 8192


def search_unit(open_shard, s: int, queries, starts: list[int], block: int, k: int, nprobe, use_gpu: bool,
                on_rows=None):
    """Shard s opened once, searched by the query blocks starting at `starts` (each in calls of
    `SEARCH_CALL` queries): (s, [(q0, sims, rows)])."""
    search = shard_searcher(*open_shard(s), nprobe=nprobe, use_gpu=use_gpu)
    found = []
    for q0 in starts:
        q1 = min(q0 + block, len(queries))
        parts = []
        for c0 in range(q0, q1, SEARCH_CALL):
            q = np.ascontiguousarray(queries[c0 : min(c0 + SEARCH_CALL, q1)], dtype=np.float32)
            parts.append(search(q, k))
            if on_rows is not None:
                on_rows(len(q))
        found.append((q0, *(np.concatenate(a) for a in zip(*parts))))
    return s, found


def search_blocks(open_shard, n_shards: int, queries, k: int, *, executor: Executor = LOCAL,
                  block: int | None = None, nprobe: int | None = None, use_gpu: bool = False,
                  done: dict | None = None, on_block=None, desc: str = "search",
                  show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (sims, rows; -inf and -1 where fewer) of every query over `n_shards` shards, each
    opened by `open_shard(s)` (a picklable callable returning (index, shard, choice)).

    Units (`search_unit`, run by `executor`): one shard x a run of up to QUERIES_PER_UNIT
    queries, in blocks of `block` (QUERY_BLOCK by default); on a cluster at least two units per
    CPU (or GPU) when there are blocks enough. Each block's answers are merged into its running
    top-k (`merge_topk`: the same k best whatever order the shards answer in).
    `done`: {q0: (sims, rows)} of blocks finished earlier (not searched again); `on_block(q0,
    sims, rows)` is called when every shard has answered a block (a checkpoint).

    Memory: one shard and one unit's answers per running unit, and the (len(queries), k) result."""
    nq, block = len(queries), block or QUERY_BLOCK
    done = done or {}
    out_s = np.full((nq, k), -np.inf, dtype=np.float32)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    for q0, (sims, rows) in done.items():
        out_s[q0 : q0 + len(sims)], out_i[q0 : q0 + len(rows)] = sims, rows
    blocks = [q0 for q0 in range(0, nq, block) if q0 not in done]
    if not blocks:
        return out_s, out_i
    runs = -(-len(blocks) * block // QUERIES_PER_UNIT)
    if executor.slots(gpu=use_gpu) > 1:  # enough units to keep every slot busy
        runs = max(runs, -(-2 * executor.slots(gpu=use_gpu) // n_shards))
    groups = [[int(q) for q in g] for g in np.array_split(np.asarray(blocks), min(len(blocks), runs))]
    opener, shared = executor.share(open_shard), executor.share(queries)
    units = ((opener, s, shared, g, block, k, nprobe, use_gpu) for g in groups for s in range(n_shards))
    answered = dict.fromkeys(blocks, 0)
    todo_rows = sum(min(block, nq - q0) for q0 in blocks)
    with ShardProgress(shards=len(groups) * n_shards, rows=todo_rows * n_shards, desc=desc, unit=" queries",
                       enabled=show_progress) as bar:
        for s, found in executor.map(search_unit, units, gpus=int(use_gpu), progress=bar):
            for q0, sims, rows in found:
                q1 = q0 + len(sims)
                out_s[q0:q1], out_i[q0:q1] = merge_topk([out_s[q0:q1], sims], [out_i[q0:q1], rows], k)
                answered[q0] += 1
                if answered[q0] == n_shards and on_block is not None:
                    on_block(q0, out_s[q0:q1], out_i[q0:q1])
            bar.done(sum(len(sims) for _, sims, _ in found))
    return out_s, out_i
