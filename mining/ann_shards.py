"""The index shards and candidate rescoring shared by approximate mining's search
(mining/approximate.py) and its refinement
(mining/refine.py): where a direction's shards live in the work folder, how one is opened or
built, and the exact rescoring of each query's candidates."""

from __future__ import annotations

import numpy as np

from xmine.artefacts.checkpoints import KeyedDir
from xmine.index.build import add_unit
from xmine.index.faiss_index import read_index
from xmine.mining.rescore import exact_dot
from xmine.store.rows import as_f32
from xmine.topk import merge_topk


def base_side(tag: str) -> str:
    """The side ("src"/"tgt") whose rows are the index of direction `tag` (fwd: x -> y)."""
    return "tgt" if tag == "fwd" else "src"


def rescore_candidates(queries, base, cand: np.ndarray, k: int, *, block: int, show_progress: bool, tag: str):
    """Exact similarities of each query with its candidates (ids, -1 none); the best k, sorted."""
    from tqdm.auto import tqdm

    nq = len(queries)
    out_s = np.full((nq, k), -np.inf, dtype=np.float32)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    bar = tqdm(total=nq, desc=f"rescoring {tag}", unit="rows", disable=not show_progress, leave=False)
    for q in range(0, nq, block):
        qe = min(nq, q + block)
        ids = cand[q:qe]
        valid = ids >= 0
        uniq, inv = np.unique(ids[valid], return_inverse=True)
        vecs = as_f32(base[uniq])
        qv = as_f32(queries[q:qe])
        rows = np.nonzero(valid)[0]
        sims = np.full(ids.shape, -np.inf, dtype=np.float32)
        sims[valid] = exact_dot(qv[rows], vecs[inv.reshape(-1)])  # the exact path's scorer
        out_s[q:qe], out_i[q:qe] = merge_topk([sims], [ids], k)  # the exact path's order
        bar.update(qe - q)
    bar.close()
    return out_s, out_i


def drop_repeats(ids: np.ndarray) -> np.ndarray:
    """Each row's ids with every repeat of an earlier id replaced by -1 (scored once)."""
    order = np.argsort(ids, axis=1, kind="stable")
    srt = np.take_along_axis(ids, order, axis=1)
    rep = np.zeros(ids.shape, bool)
    rep[:, 1:] = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    out = ids.copy()
    np.put_along_axis(out, order, np.where(rep, -1, srt), axis=1)
    return out


#: what to do about a damaged index file in the work folder (written atomically: damaged from outside)
WORK_REMEDY = "delete it: the next run builds it again"


def shard_file(tag: str, s: int) -> str:
    return f"{tag}-shard{s:05d}.faiss"


def open_shard(tag, s: int, lo: int, hi: int, *, base, trained: bytes, work: KeyedDir, config, show_progress):
    """Shard s (base rows lo:hi) of direction `tag`: read from the work folder, built there first
    (`index.build.add_unit`) when it is not."""
    from tqdm.auto import tqdm

    index_file = work.path(shard_file(tag, s))
    if not index_file.is_file():
        with tqdm(total=hi - lo, desc=f"indexing {tag} shard {s + 1}", unit="rows",
                  disable=not show_progress, leave=False) as bar:
            add_unit(trained, base, s, lo, hi, config.query_block, False, str(index_file), base_side(tag),
                     on_rows=bar.update)
    return read_index(index_file, remedy=WORK_REMEDY)


__all__ = ["base_side", "drop_repeats", "open_shard", "rescore_candidates", "shard_file"]
