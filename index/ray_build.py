"""Build and search FAISS index directories on Ray, with the same result as in one process.

Building (`build_index_ray`), as autofaiss and stopes do:
1. the coarse quantiser / PQ codebooks are trained in ONE task (a GPU one when the cluster has
   GPUs) on the same seeded sample as `build_index` draws (`train_index`);
2. rows are added in parallel tasks (`add_rows`), each on a copy of the trained index;
3. with `--shard-rows`, each task writes its shard file and the directory keeps the shards
   (searched as one, like faiss's IndexShards); without, the pieces are merged in row order into
   one index (`merge_from`, faiss's `merge_into`), which holds the same lists in the same order
   as adding every row to one index. HNSW graphs cannot be merged: they are built in one task.

Searching (`search_ray`, on `search_blocks_ray`): tasks of (run of query blocks x index shard),
each opening its shard once; each block's top-k is merged per query across the shards in shard
order (`merge_topk`), so a query's k hits are its k best over the whole index, exactly as
`IndexDir.search` returns them. Approximate mining on Ray (mining/ray_approximate.py) schedules
its steps with the same tasks (`train_task`, `add_task`, `search_blocks_ray`).

Embeddings reach the tasks either through Ray's object store (an array, put once) or, for an
embedding store, by path (`RowFiles`): each task reads only its rows from the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.artefacts import atomic_dir
from xmine.fileio import atomic_path
from xmine.cluster import ShardProgress, cluster_resources, get, remote, run_tasks
from xmine.errors import ConfigError
from xmine.index import blocked_search
from xmine.index.blocked_search import IndexDirShards
from xmine.index.build import IndexConfig, add_rows, count_newlines, resolve_choice, train_index, write_index_files
from xmine.index.faiss_index import KIND, IndexDir, shard_name, shard_plan, shard_searcher
from xmine.topk import merge_topk

#: Rows per add task when the index is kept as one shard (pieces merged on the driver).
ADD_PIECE_ROWS = 262_144


class RowFiles:
    """Rows of `.npy` files by path (xmine.store.rows.ShardRows): pickles as the paths, opens where
    it is used, so a task reads only its own rows from the shared file system."""

    def __init__(self, paths: Sequence[str]):
        self.paths = [str(p) for p in paths]
        self._view = None

    def _rows(self):
        if self._view is None:
            from xmine.store.rows import ShardRows

            self._view = ShardRows(self.paths)
        return self._view

    @property
    def shape(self):
        return self._rows().shape

    @property
    def dtype(self):
        return self._rows().dtype

    ndim = 2

    def __len__(self) -> int:
        return len(self._rows())

    def __getitem__(self, key):
        return self._rows()[key]

    def __getstate__(self):
        return {"paths": self.paths}

    def __setstate__(self, state):
        self.paths, self._view = state["paths"], None


def rows_for_workers(rows):
    """What tasks read a row view from: the `.npy` files behind it when they are files (a store's
    shards, or rows projected into a work file; also under a `RowSubset`), else the array itself."""
    from xmine.store.rows import RowSubset, ShardRows

    if isinstance(rows, ShardRows):
        return RowFiles(rows.paths)
    if isinstance(rows, RowSubset):
        return RowSubset(rows_for_workers(rows.base), rows.ids)
    return rows


def train_task(train, threads: int, *args, **kwargs) -> bytes:
    """`train(*args, **kwargs)` (an index trainer returning the serialised index) with `threads`
    threads: as many as a single-process run has on a machine of this size, because OPQ's
    rotation (an SVD) and k-means sum in an order that depends on the thread count, so equal
    counts give the same trained index."""
    import faiss
    from threadpoolctl import threadpool_limits

    faiss.omp_set_num_threads(threads)
    with threadpool_limits(limits=threads):
        return train(*args, **kwargs)


def largest_node_cpus() -> int:
    import ray

    cpus = [int(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node.get("Alive")]
    return max([c for c in cpus if c > 0], default=1)


def add_task(trained: bytes, rows, piece: int, start: int, stop: int, add_batch: int, use_gpu: bool,
             write_to: str | None, side: str | None = None):
    """`add_rows` start:stop; write the shard to `write_to` (atomically, kept shards) or return it
    serialised. `side`: check the rows are finite (mining; see `add_rows`)."""
    import faiss

    index = add_rows(trained, rows, start, stop, add_batch=add_batch, use_gpu=use_gpu, side=side)
    if write_to is not None:
        with atomic_path(write_to) as tmp:
            faiss.write_index(index, str(tmp))
        return piece, stop - start, None
    return piece, stop - start, bytes(faiss.serialize_index(index))


def _merge_pieces(pieces: list[bytes]):
    """One index holding the pieces' vectors in piece order (ids shifted to follow each other)."""
    import faiss

    def load(b):
        return faiss.deserialize_index(np.frombuffer(b, dtype=np.uint8))

    dst = load(pieces[0])
    for b in pieces[1:]:
        src = load(b)
        try:
            ivf_dst, ivf_src = faiss.extract_index_ivf(dst), faiss.extract_index_ivf(src)
        except RuntimeError:  # not IVF (Flat): plain concatenation of codes
            dst.merge_from(src)
            continue
        ivf_dst.merge_from(ivf_src, ivf_dst.ntotal)
        dst.ntotal = ivf_dst.ntotal  # an OPQ wrapper counts its own rows
    return dst


def build_index_ray(
    embeddings,
    out_dir: str | Path,
    *,
    sentences: Sequence[str],
    line_numbers: np.ndarray,
    encoder: dict,
    sentence_index: np.ndarray | None = None,
    projection: dict | None = None,
    part: str | None = None,
    lang: str | None = None,
    source: dict | None = None,
    config: IndexConfig = IndexConfig(),
    show_progress: bool = False,
    overwrite: bool = False,
) -> IndexDir:
    """`build_index` on the connected Ray cluster: same arguments, same index directory.

    `embeddings`: an array (sent to the workers once through the object store) or `RowFiles`
    (read by the workers from the files).
    """
    import faiss
    import ray

    n, dim = embeddings.shape
    n_text = count_newlines(Path(sentences)) if isinstance(sentences, (str, Path)) else len(sentences)
    if n_text != n or len(line_numbers) != n:
        raise ConfigError(f"{n} embeddings but {n_text} sentences / {len(line_numbers)} line numbers")
    use_gpu = config.gpu and cluster_resources()["GPU"] > 0
    choice, shard_rows = resolve_choice(n, dim, config, use_gpu)
    gpus = {"num_gpus": 1} if use_gpu else {}
    rows = embeddings if isinstance(embeddings, RowFiles) else ray.put(np.asarray(embeddings))

    threads = largest_node_cpus()
    trained = get(remote(train_task, num_cpus=threads, **gpus).remote(train_index, threads, rows, choice,
                                                                     seed=config.seed, use_gpu=use_gpu))
    kept = config.shard_rows is not None
    if kept:
        plan = shard_plan(n, shard_rows)
    elif choice.kind == "hnsw":
        plan = [(0, n)]  # a graph is built by one writer
    else:
        plan = shard_plan(n, ADD_PIECE_ROWS)
    trained_ref = ray.put(trained)
    add = remote(add_task, num_cpus=1, **gpus)
    with atomic_dir(out_dir, kind=KIND, overwrite=overwrite) as tmp:
        refs = (add.remote(trained_ref, rows, p, start, stop, config.add_batch, use_gpu,
                           str(tmp / shard_name(p)) if kept else None) for p, (start, stop) in enumerate(plan))
        pieces: dict[int, bytes] = {}
        with ShardProgress(shards=len(plan), rows=n, desc=f"indexing ({choice.factory}, ray)", unit=" vec",
                           enabled=show_progress) as bar:
            for p, count, blob in run_tasks(refs):
                if blob is not None:
                    pieces[p] = blob
                bar.done(count)
        if not kept:
            index = _merge_pieces([pieces[p] for p in range(len(plan))])
            pieces.clear()
            faiss.write_index(index, str(tmp / shard_name(0)))
            plan = [(0, n)]
        write_index_files(tmp, plan, sentences=sentences, line_numbers=line_numbers, sentence_index=sentence_index,
                          encoder=encoder,
                          projection=projection, part=part, lang=lang, dim=dim, choice=choice, use_gpu=use_gpu,
                          source=source, config=config)
    return IndexDir.open(out_dir)


#: Queries one search task runs against its shard. A task opens (reads) its shard once, so at
#: scale a task must cover many query blocks: with 16k-query tasks, 1B queries would read every
#: shard 61,000 times.
QUERIES_PER_TASK = 1 << 20


def _search_task(open_shard, s: int, queries, starts: list[int], block: int, k: int, nprobe, use_gpu: bool):
    """Shard s opened once, searched by the query blocks starting at `starts`: [(q0, sims, rows)]."""
    search = shard_searcher(*open_shard(s), nprobe=nprobe, use_gpu=use_gpu)
    found = []
    for q0 in starts:
        q = np.ascontiguousarray(queries[q0 : min(q0 + block, len(queries))], dtype=np.float32)
        found.append((q0, *search(q, k)))
    return s, found


def search_blocks_ray(open_shard, n_shards: int, queries, k: int, *, block: int | None = None,
                      nprobe: int | None = None, use_gpu: bool = False, done: dict | None = None,
                      on_block=None, desc: str = "search (ray)", show_progress: bool = False):
    """Top-k (sims, rows) of every query over `n_shards` shards, as Ray tasks, each running
    `shard_searcher` on `open_shard(s)` (a picklable callable returning (index, shard, choice))
    for a run of query blocks. A block's answers are merged in shard order (`merge_topk`), which is
    the top-k a loop over the shards keeps: each query's k best over the whole index, the arrays
    `xmine.index.blocked_search.search_blocks` computes in one process.

    Each task covers up to QUERIES_PER_TASK queries of one shard, in blocks of `block`, and there
    are at least two tasks per CPU (or GPU) of the cluster when there are blocks enough.
    `queries`: an array or a row view (`rows_for_workers`), put in the object store once.
    `done`: {q0: (sims, rows)} of blocks finished earlier (not searched again); `on_block(q0,
    sims, rows)` is called as each block is merged (a checkpoint)."""
    import ray

    nq, block = len(queries), block or blocked_search.QUERY_BLOCK
    done = done or {}
    out_s = np.empty((nq, k), dtype=np.float32)
    out_i = np.empty((nq, k), dtype=np.int64)
    for q0, (sims, rows) in done.items():
        out_s[q0 : q0 + len(sims)], out_i[q0 : q0 + len(rows)] = sims, rows
    blocks = [q0 for q0 in range(0, nq, block) if q0 not in done]
    if not blocks:
        return out_s, out_i
    res = cluster_resources()
    slots = max(1, int(res["GPU"] if use_gpu else res["CPU"]))
    runs = min(len(blocks), max(-(-len(blocks) * block // QUERIES_PER_TASK), -(-2 * slots // n_shards)))
    groups = [list(g) for g in np.array_split(np.asarray(blocks), runs)]
    q_ref = ray.put(np.ascontiguousarray(queries, dtype=np.float32) if isinstance(queries, np.ndarray)
                    else queries)
    task = remote(_search_task, num_cpus=1, **({"num_gpus": 1} if use_gpu else {}))
    refs = (task.remote(open_shard, s, q_ref, [int(q) for q in g], block, k, nprobe, use_gpu)
            for g in groups for s in range(n_shards))
    waiting: dict[int, dict[int, tuple]] = {q0: {} for q0 in blocks}
    n_blocks = -(-nq // block)
    with ShardProgress(shards=n_blocks * n_shards, shards_done=(n_blocks - len(blocks)) * n_shards,
                       rows=nq * n_shards, rows_done=(nq - sum(min(block, nq - q0) for q0 in blocks)) * n_shards,
                       desc=desc, unit=" queries", enabled=show_progress) as bar:
        for s, found in run_tasks(refs):
            for q0, sims, rows in found:
                waiting[q0][s] = (sims, rows)
                bar.done(len(sims))
                if len(waiting[q0]) == n_shards:  # every shard answered this block: merge in shard order
                    got = waiting.pop(q0)
                    ms, mi = merge_topk([got[i][0] for i in range(n_shards)], [got[i][1] for i in range(n_shards)], k)
                    out_s[q0 : q0 + len(ms)], out_i[q0 : q0 + len(mi)] = ms, mi
                    if on_block is not None:
                        on_block(q0, ms, mi)
    return out_s, out_i


def search_ray(ix: IndexDir, queries: np.ndarray, k: int, *, nprobe: int | None = None,
               show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`IndexDir.search` as Ray tasks of query blocks x shards: the same (sims, rows)."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if queries.ndim != 2 or queries.shape[1] != ix.dim:
        raise ConfigError(f"queries have shape {queries.shape}, index dimension is {ix.dim}")
    return search_blocks_ray(IndexDirShards(ix), len(ix.manifest["shards"]), queries, k, nprobe=nprobe,
                             use_gpu=cluster_resources()["GPU"] > 0, show_progress=show_progress)
