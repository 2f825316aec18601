"""The search step of `xmine mine`: both directions' k nearest neighbours among the mined rows
(`Mineable`) by the chosen search (exact blocked kNN, approximate IVF indexes, or a side's own
index directory), its units here or on Ray (`xmine.exec.executor`), then margin scoring and one-to-one
selection."""

from __future__ import annotations

import json
import logging
from functools import partial

import numpy as np

from xmine.exec.executor import Executor
from xmine.index.blocked_search import FlatChunks, IndexDirShards, search_blocks
from xmine.index.choose import pq_code
from xmine.index.faiss_index import units_use_gpus
from xmine.mining.approximate import approximate_knn_both, drop_repeats, rescore_candidates
from xmine.mining.filter_step import Mineable
from xmine.mining.select import MinedPairs, mine_embeddings, passing_rows, select_pairs
from xmine.store.rows import RowSubset
from xmine.topk import merge_topk

log = logging.getLogger(__name__)

#: query rows rescored at once (memory: RESCORE_BLOCK x candidates x dim x 4 bytes)
RESCORE_BLOCK = 8192


def index_side_note(side, role: str) -> str | None:
    """What a side searched through its own index does to the margins, where that search is not
    exact (was: said nowhere; a helper found an IVF index visiting 4 of its 100 lists keep more
    pairs than exact mining, and a PQ index 17% fewer): None for an exact (flat) index."""
    why = _inexact_search(side.index.manifest.choice)
    if not why:
        return None
    return (f"{role} side {side.path} is a {side.index.manifest.choice.factory} index: {'; '.join(why)}. The "
            "thresholds were calibrated with exact neighbours; mine the embedding store the index was built from "
            "for those (exact, or --approximate, which refines its candidates with the stored vectors)")


def _inexact_search(choice) -> list[str]:
    """Why a search through the index `choice` describes is not exact, and what that does to the
    margins; [] for an exact one (flat, or IVF visiting every list, of stored vectors)."""
    why = []
    if pq_code(choice.factory):
        why.append("it holds PQ codes, so every score is computed on decoded vectors, which score translations "
                   "otherwise than exact ones (fewer pairs reach the threshold)")
    if choice.nlist and choice.nprobe < choice.nlist:
        why.append(f"it visits {choice.nprobe} of its {choice.nlist} lists a query, so neighbourhoods miss neighbours and "
                   "margins run higher than an exact search's (more pairs reach the threshold)")
    if "HNSW" in choice.factory:
        why.append("its graph search may miss neighbours, so margins may run higher than an exact search's")
    return why


def _neighbours(base_side, base: Mineable, queries, k: int, *, executor: Executor, show_progress: bool, tag: str):
    """k nearest mined rows of `base_side` to each query row: (sims, positions among `base.ids`).

    Through the side's own index when it has one (`_distinct_index_hits`), else through flat
    indexes over the mined rows in chunks. Either way in the same query blocks whatever runs the
    units, so here and on Ray the bytes are the same (xmine.index.blocked_search). The candidates
    are then rescored with the exact path's scorer (`rescore.exact_dot`, on the rows the exact path
    would compare), so a pair found by any search has the same score."""
    kk = min(k, len(base.ids))
    # 2k more candidates than kept either way: FAISS keeps the later of rows that tie (and its
    # similarities differ from the exact scorer's in the last bits), so the rows the exact path keeps
    # at a tie, the first, are among them unless more than 2k rows tie at the k-th neighbour (was:
    # the flat chunks asked for k, and a duplicated vector could move a pair)
    fetch = min(kk + 2 * k, len(base.ids))
    search = dict(executor=executor, use_gpu=units_use_gpus(executor), desc=f"{tag} ({executor.name})",
                  show_progress=show_progress)
    # An index searched exactly (flat, or IVF visiting every list) finds what flat chunks over the
    # mined rows find, and those hold only the rows mined (was: the index's first 1,024 hits, where
    # --min-length or the language filter left few of them mined: fewer than k, and other pairs)
    if base_side.index is None or not _inexact_search(base_side.index.manifest.choice):
        chunks = FlatChunks(base.rows)
        _, rows = search_blocks(chunks, len(chunks), queries, fetch, **search)
    else:
        rows = _distinct_index_hits(base_side, base, queries, fetch, kk=kk, search=search)
    return rescore_candidates(queries, base.rows, rows, kk, block=RESCORE_BLOCK, show_progress=show_progress,
                              tag=tag)


#: the most hits an index side is asked for a query whose first hits repeat a few sentences
MAX_INDEX_FETCH = 1024
#: hits held at once while an index side's queries are asked again (16M: 200 MB of ids and scores)
_HITS_AT_ONCE = 1 << 24


def _distinct_index_hits(base_side, base: Mineable, queries, want: int, *, kk: int, search: dict) -> np.ndarray:
    """Per query row, the positions among `base.ids` of its first `want` distinct mined rows in the
    side's index (-1 pads). The index holds every row of its corpus, repeats and filtered ones, so
    each hit is mapped to its representative among the mined rows (or dropped) and repeats are
    dropped; a query whose hits held fewer than `want` distinct rows is asked again for twice as
    many, up to MAX_INDEX_FETCH, in blocks of queries that hold _HITS_AT_ONCE hits (was: asked once
    for `want`, so a corpus repeating a sentence more than 2k times gave its queries fewer than k
    neighbours, and lower margins than its text)."""
    opener = IndexDirShards(base_side.index)
    cap = min(len(base_side.index), MAX_INDEX_FETCH)

    def ask(rows_q, asked: int) -> tuple[np.ndarray, np.ndarray]:
        """(hits, whether still short) of the queries `rows_q` (None: all), asked for `asked` rows."""
        sims, rows = search_blocks(opener, len(opener), queries if rows_q is None else RowSubset(queries, rows_q),
                                   asked, **search)
        found = np.where(rows >= 0, base.position_of_row[np.maximum(rows, 0)], -1)
        # Repeats dropped (the first is the best), then `want` columns (-1 pads).
        _, found = merge_topk([sims.astype(np.float32)], [drop_repeats(found)], want)
        # (a list the index did not fill holds every row it can give: asking for more finds none)
        return found, ((found >= 0).sum(axis=1) < want) & (rows[:, -1] >= 0)

    asked = want
    hits, is_short = ask(None, asked)
    short = np.flatnonzero(is_short)
    while len(short) and asked < cap:
        asked = min(2 * asked, cap)
        step = max(1, _HITS_AT_ONCE // asked)  # (the queries asked again, a block at a time)
        still = []
        for lo in range(0, len(short), step):
            block = short[lo:lo + step]
            hits[block], is_short = ask(block, asked)
            still.append(block[is_short])
        short = np.concatenate(still)
    few = short[(hits[short] >= 0).sum(axis=1) < kk]  # (short of k itself, not of the 2k more asked for)
    if len(few):
        log.warning(f"{base_side.path}: {len(few):,} query row(s) found fewer than k = {kk} distinct sentences "
                    f"among their {asked:,} nearest rows of the index: its corpus repeats sentences that often, or "
                    f"what is mined of it ({len(base.ids):,} of its {len(base_side.index):,} rows, after the filters "
                    "and pre-clean) is that sparse; their margins run over fewer neighbours (mine its embedding store "
                    "or text instead)")
    return hits


def search_pairs(search, mx, my, sx, sy, *, config, select_config, approximate_config, work, key, executor,
                 show_progress, used: dict | None = None) -> MinedPairs:
    """Both directions' neighbours by the chosen search, then margin and one-to-one selection;
    `used` receives the approximate search's index plan (lists, probes, factory)."""
    lengths = {"src_lengths": mx.lengths, "tgt_lengths": my.lengths}
    if len(mx.ids) == 0 or len(my.ids) == 0:
        return MinedPairs.empty()
    if search == "faiss-index":
        knn = (*_neighbours(sy, my, mx.rows, config.k, executor=executor, show_progress=show_progress,
                            tag="searching tgt"),
               *_neighbours(sx, mx, my.rows, config.k, executor=executor, show_progress=show_progress,
                            tag="searching src"))
    elif search == "approximate":  # `passing`: rows whose neighbourhood decides a pair, searched again wider
        knn = approximate_knn_both(mx.rows, my.rows, config.k, config=approximate_config, work_dir=work / "ann",
                                   key=key, show_progress=show_progress, executor=executor, used=used,
                                   passing=partial(passing_rows, config=select_config, **lengths),
                                   passing_key=json.dumps({f: getattr(select_config, f) for f in (
                                       "threshold", "margin", "retrieval", "max_length_ratio")}, sort_keys=True,
                                       default=str))  # what decides passing, checked when resuming
    else:  # exact: tiles of the product (`xmine.mining.knn`)
        return mine_embeddings(mx.rows, my.rows, config=select_config, checkpoint_key=key, executor=executor,
                               checkpoint_dir=work / "knn", show_progress=show_progress, **lengths)
    return select_pairs(*knn, config=select_config, **lengths)
