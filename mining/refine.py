"""Approximate mining's neighbourhoods, searched again wider where the threshold decides.

Why: an approximate search misses some of a sentence's true neighbours (lists it does not visit,
PQ similarities that rank a true neighbour below the candidates fetched). Every neighbour it
keeps is re-scored exactly, so a missed one is replaced by a lower one: the neighbourhood mean,
the margin's denominator, is too low and the margin too high, and pairs the exact search drops
pass the threshold. A fuller neighbourhood can only raise the mean (the k best of a larger set
of exact similarities are at least as high), so the margin can only fall: a pair below the
threshold stays below it. Only pairs at or above it can be wrong.

How: the rows of every candidate pair scoring at least the threshold (`select.passing_rows`)
are searched again in the same index shards, visiting `refine_nprobe_factor` times as many IVF
lists, and every row in those lists is compared by its stored vector (read from the store), not
by its PQ code, whose errors (a few hundredths of a cosine) are larger than the gaps between a
real sentence's nearest neighbours. The best `fetch_factor * k` of them and the row's current k
neighbours are re-scored exactly (`ann_shards.rescore_candidates`) and the best k kept. A refined row may
gain a new best candidate whose other side was never refined, so rounds repeat until every row
of a passing candidate has been refined (each round only the new rows).

Cost: for the refined rows only (about twice the mined pairs, not the corpus), a product with
the rows of the lists they visit (refine_nprobe_factor * nprobe / nlist of the other side each),
list by list. Memory: one shard, one list's rows, one chunk of `REFINE_CHUNK` query rows, and the
refined rows' candidates (fetch_factor * k a row, as the search's own). Resuming: the lists after
each round are written to the work folder (`refined.npz`, with what they were refined for).
"""

from __future__ import annotations

import logging

import numpy as np

from xmine.artefacts.fileio import atomic_path
from xmine.index.faiss_index import ivf_list_members, shard_plan
from xmine.mining.ann_shards import drop_repeats, open_shard, rescore_candidates
from xmine.store.rows import RowSubset, as_f32
from xmine.topk import merge_topk

log = logging.getLogger(__name__)

# Refined rows searched at once (their float32 vectors: REFINE_CHUNK x dim x 4 bytes).
REFINE_CHUNK = 16_384


def refine_passing(x, y, knn, *, passing, key: str, plan: dict, shard_rows: int, trained: bytes, work,
                   config, show_progress: bool = False):
    """`knn` (fwd_sims, fwd_idx, bwd_sims, bwd_idx, exact similarities) with the neighbourhoods of
    every row of a passing candidate searched again wider (module doc). `passing(*knn)` gives
    (source mask, target mask) of the rows that matter, or None (then nothing is refined); `key`
    names what decides passing (threshold, margin, filters), checked when resuming."""
    fwd_s, fwd_i, bwd_s, bwd_i = (np.array(a) for a in knn)
    done_x, done_y = np.zeros(len(x), bool), np.zeros(len(y), bool)
    state = work.path("refined.npz")
    if state.is_file():
        with np.load(state) as st:
            if str(st["key"]) == key:
                fwd_s, fwd_i, bwd_s, bwd_i = st["fwd_s"], st["fwd_i"], st["bwd_s"], st["bwd_i"]
                done_x, done_y = st["done_x"], st["done_y"]
    wide = {**plan, "nprobe": min(plan["nlist"], plan["nprobe"] * config.refine_nprobe_factor)}
    rounds = 0
    while (need := passing(fwd_s, fwd_i, bwd_s, bwd_i)) is not None:
        new_x, new_y = np.flatnonzero(need[0] & ~done_x), np.flatnonzero(need[1] & ~done_y)
        if not len(new_x) and not len(new_y):
            break
        rounds += 1
        log.info("refining the neighbourhoods of %d source and %d target rows (%d lists each)",
                 len(new_x), len(new_y), wide["nprobe"])
        for tag, queries, base, ids, sims, idx in (("fwd", x, y, new_x, fwd_s, fwd_i),
                                                  ("bwd", y, x, new_y, bwd_s, bwd_i)):
            if len(ids):
                sims[ids], idx[ids] = _refine_rows(tag, queries, base, ids, idx[ids], plan=wide,
                                                   shard_rows=shard_rows, trained=trained, work=work,
                                                   config=config, show_progress=show_progress)
        done_x[new_x], done_y[new_y] = True, True
        with atomic_path(state) as tmp, open(tmp, "wb") as f:
            np.savez(f, key=np.str_(key), fwd_s=fwd_s, fwd_i=fwd_i, bwd_s=bwd_s, bwd_i=bwd_i, done_x=done_x,
                     done_y=done_y)
    if rounds:
        log.info("refined %d source and %d target rows in %d round(s)", int(done_x.sum()), int(done_y.sum()),
                 rounds)
    return fwd_s, fwd_i, bwd_s, bwd_i


def _refine_rows(tag, queries, base, ids: np.ndarray, current: np.ndarray, *, plan, shard_rows, trained, work,
                 config, show_progress):
    """Rows `ids` of `queries`: every base row in the `plan["nprobe"]` IVF lists nearest to each
    of them (all shards of direction `tag`) compared by its stored vector, the best
    `fetch_factor * k` and the `current` neighbours re-scored exactly; the best k (k = current's width)."""
    from tqdm.auto import tqdm

    k = current.shape[1]
    fetch = min(len(base), max(config.fetch_factor, 1) * k)
    bounds = shard_plan(len(base), shard_rows)
    run_s = np.full((len(ids), fetch), -np.inf, dtype=np.float32)
    run_i = np.full((len(ids), fetch), -1, dtype=np.int64)
    bar = tqdm(total=len(ids) * len(bounds), desc=f"refining {tag}", unit="rows", disable=not show_progress,
               leave=False)
    for s, (lo, hi) in enumerate(bounds):  # one shard in memory, read once
        index = open_shard(tag, s, lo, hi, base=base, trained=trained, work=work, config=config,
                           show_progress=show_progress)
        for c in range(0, len(ids), REFINE_CHUNK):
            qv = as_f32(queries[ids[c: c + REFINE_CHUNK]])
            for rows, members in ivf_list_members(index, qv, plan["nprobe"]):
                vecs = as_f32(base[members + lo])
                sims = qv[rows] @ vecs.T  # candidates only: the kept ones are re-scored exactly below
                kk = min(fetch, len(members))
                top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk] if kk < len(members) else \
                    np.broadcast_to(np.arange(len(members)), sims.shape)
                at = rows + c
                run_s[at], run_i[at] = merge_topk([run_s[at], np.take_along_axis(sims, top, axis=1)],
                                                  [run_i[at], members[top] + lo], fetch)
            bar.update(len(qv))
        del index
    bar.close()
    cand = drop_repeats(np.concatenate([current, run_i], axis=1))
    del run_s, run_i
    # Rescored in blocks as large, in bytes, as the search's own rescoring.
    block = max(1, config.rescore_block * config.fetch_factor * k // cand.shape[1])
    return rescore_candidates(RowSubset(queries, ids), base, cand, k, block=block, show_progress=False, tag=f"{tag} (refined)")


__all__ = ["REFINE_CHUNK", "refine_passing"]
