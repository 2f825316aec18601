"""Approximate kNN on Ray: the steps of `mining/approximate.py`, scheduled as tasks.

The engine only schedules; every number comes from the functions the single-process path calls:
1. `train_on_ray`: `train_quantiser` (one seeded sample of both sides) in ONE task with as many
   threads as a single-process run has (`index.ray_build.train_task`);
2. per direction, the base side's shards are built by `add_rows` in parallel tasks
   (`index.ray_build.add_task`), each written to `OUT.work/ann/` as the single-process path
   writes it;
3. the queries are searched in tasks of (run of query blocks x shard), each opening its shard
   once (`index.ray_build.search_blocks_ray`, `search_shard`), blocks of `query_block` rows as in
   one process, since FAISS's kernels may
   depend on how many queries a call holds. Each block's per-shard top-k is merged in shard order
   (`merge_topk`): the same top-k the single-process loop keeps, so the candidates, and after the
   exact rescoring on the driver (`approximate._rescore`, shared), the mined TSV are identical.

Resuming: the trained index, every built shard and every merged query block (`{tag}-ray-block-
Q0-Q1.npz`) are files in the work directory, so a killed driver, run again, builds and searches
only what is missing. A worker that dies has its task re-run by Ray (`xmine.cluster.remote`).

Memory on the driver: both directions' candidates ((n + m) * fetch_factor * k * 12 bytes), as in
one process; the rows reach the tasks by path (`rows_for_workers`) or through the object store.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xmine.fileio import atomic_path
from xmine.cluster import ShardProgress, get, remote, run_tasks
from xmine.index.faiss_index import shard_plan
from xmine.index.ray_build import add_task, largest_node_cpus, rows_for_workers, search_blocks_ray, train_task
from xmine.mining.ann_shards import base_side, shard_bounds, shard_file
from xmine.mining.approximate import Engine, train_quantiser


def train_on_ray(x, y, plan: dict, config) -> bytes:
    """`train_quantiser` in one task on the largest node."""
    threads = largest_node_cpus()
    task = remote(train_task, num_cpus=threads)
    return get(task.remote(train_quantiser, threads, rows_for_workers(x), rows_for_workers(y), plan, config))


class WorkShards:
    """The index shards of one direction in the work directory, by path (what a search task opens)."""

    def __init__(self, files: list[str], bounds: list[tuple[int, int]], plan: dict):
        self.files, self.bounds, self.plan = files, bounds, plan

    def __call__(self, s: int):
        """(index, shard, choice) of shard s, as `search_shard` takes them."""
        import faiss

        return (faiss.read_index(self.files[s]), *shard_bounds(self.plan, *self.bounds[s]))


def search_on_ray(tag, *, queries, base, k, plan, shard_rows, trained, work, config, show_progress):
    """`approximate._search` on the connected Ray cluster (same arguments, same candidates)."""
    import ray

    nq = len(queries)
    bounds = shard_plan(len(base), shard_rows)
    files = [str(work.path(shard_file(tag, s))) for s in range(len(bounds))]
    block = config.query_block

    def block_file(q0: int) -> Path:
        return work.path(f"{tag}-ray-block-{q0:012d}-{min(nq, q0 + block):012d}.npz")

    done = {}
    for q0 in range(0, nq, block):  # blocks merged by an earlier (killed) driver
        try:
            with np.load(block_file(q0)) as z:
                done[q0] = z["sims"], z["idx"]
        except (OSError, ValueError, KeyError):  # absent, or half-written: search it again
            continue
    all_done = len(done) == -(-nq // block)  # then the shards (deleted once searched) are not needed
    missing = [] if all_done else [s for s, f in enumerate(files) if not Path(f).is_file()]
    if missing:
        trained_ref, base_ref = ray.put(trained), ray.put(rows_for_workers(base))
        add = remote(add_task, num_cpus=1)
        refs = (add.remote(trained_ref, base_ref, s, *bounds[s], block, False, files[s], side=base_side(tag))
                for s in missing)
        with ShardProgress(shards=len(bounds), shards_done=len(bounds) - len(missing), rows=len(base),
                           rows_done=len(base) - sum(bounds[s][1] - bounds[s][0] for s in missing),
                           desc=f"indexing {tag} (ray)", unit=" rows", enabled=show_progress) as bar:
            for _, count, _ in run_tasks(refs):
                bar.done(count)

    def save(q0: int, sims, idx) -> None:
        with atomic_path(block_file(q0)) as tmp, open(tmp, "wb") as f:
            np.savez(f, sims=sims, idx=idx)

    # The shard files stay for the refinement, which runs in the driver (approximate_knn_both
    # removes them after it); the blocks' files are what resumes past the search.
    return search_blocks_ray(WorkShards(files, bounds, plan), len(bounds), rows_for_workers(queries), k,
                             block=block, done=done, on_block=save, desc=f"searching {tag} (ray)",
                             show_progress=show_progress)


#: `approximate_knn_both(..., engine=RAY_ENGINE)`: its steps as tasks on the connected Ray cluster
RAY_ENGINE = Engine(train=train_on_ray, search=search_on_ray)

__all__ = ["RAY_ENGINE", "search_on_ray", "train_on_ray"]
