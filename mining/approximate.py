"""Approximate k nearest neighbours in both directions through IVF / IVF-PQ indexes, resumable:
the index shards of each direction in the work folder (where they live, how one is opened or
built), their search, the exact rescoring of each query's candidates, and the refinement of the
neighbourhoods where the threshold decides.

The approximate twin of `knn.exact_knn_both`: the same inputs (two row views in one space, rows
L2-normalised) and output (each side's k best neighbours on the other), so margin scoring and
one-to-one selection (`select.select_pairs`) are shared with the exact path, and so is the
neighbourhood: both sides arrive deduplicated and length-filtered (k real candidates).

How: ONE coarse quantiser (and PQ codebook) is trained on a seeded sample of both sides (they
live in one space), then for each direction the base side is added to copies of that trained
index in shards (`shard_rows` rows, by default as few equal ones as each fit the memory budget),
and the other side is searched against each shard in blocks of `query_block` rows
(`xmine.index.blocked_search.search_blocks`), each block's top-k merged across the shards. Each
step is a set of units (`xmine.exec.executor`): here one after another, or Ray tasks, with the
same result. Memory per running unit: one shard (IVF-PQ fast-scan: pq_m/2 + 8 bytes a row) and
its answers; on the driver both directions' k-state ((n + m) * k * 12 bytes).

Exact rescoring (default): the index proposes `fetch_factor * k` candidates per row by its
approximate (PQ) similarity; their exact cosines are then computed from the rows themselves with
the exact path's scorer (`rescore.exact_dot`: a pair both paths find has the same score, bit for
bit) and the best k kept (`rescore_candidates`, shared with mining/search_pairs.py). PQ
similarities err by hundredths of a cosine, which moves a margin ratio by 0.1 or more; rescored,
the margin is the exact path's over the candidates found, and a threshold means the same thing.

Refinement (`passing`, `refine_passing`): the neighbourhoods, searched again wider where the
threshold decides. Why: an approximate search misses some of a sentence's true neighbours (lists
it does not visit, PQ similarities that rank a true neighbour below the candidates fetched). Every
neighbour it keeps is re-scored exactly, so a missed one is replaced by a lower one: the
neighbourhood mean, the margin's denominator, is too low and the margin too high, and pairs the
exact search drops pass the threshold. A fuller neighbourhood can only raise the mean (the k best
of a larger set of exact similarities are at least as high), so the margin can only fall: a pair
below the threshold stays below it. Only pairs at or above it can be wrong.

How: the rows of every candidate pair scoring at least the threshold (`select.passing_rows`)
are searched again in the same index shards (they stay in the work folder until then), visiting
`refine_nprobe_factor` times as many IVF lists, and every row in those lists is compared by its
stored vector (read from the store), not by its PQ code, whose errors (a few hundredths of a
cosine) are larger than the gaps between a real sentence's nearest neighbours. The best
`fetch_factor * k` of them and the row's current k neighbours are re-scored exactly
(`rescore_candidates`) and the best k kept. A refined row may gain a new best candidate whose
other side was never refined, so rounds repeat until every row of a passing candidate has been
refined (each round only the new rows).

Cost: for the refined rows only (about twice the mined pairs), a product with the rows of the
lists they visit, list by list. Memory: one shard, one list's rows, one chunk of `REFINE_CHUNK`
query rows, and the refined rows' candidates (fetch_factor * k a row, as the search's own).

Resuming (`work_dir`): the trained index, every built shard, every answered query block and each
refinement round (`refined.npz`) are written atomically; a rerun does only what is missing."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from xmine.artefacts.checkpoints import KeyedDir
from xmine.artefacts.fileio import atomic_path
from xmine.errors import ConfigError, check_field_types
from xmine.exec.executor import LOCAL, Executor, ShardProgress
from xmine.index.blocked_search import search_blocks
from xmine.index.build import Training, add_unit, few_rows_advice, train_index, with_threads
from xmine.index.choose import (APPROXIMATE_TYPES, default_shard_rows, index_factory, ivf_lists, memory_budget_bytes,
                                pq_code, pq_subquantisers, warn_if_coarse)
from xmine.index.faiss_index import (IndexChoice, IndexShard, is_serialised_index, ivf_list_members, read_index,
                                     shard_plan)
from xmine.mining.knn import check_knn_inputs
from xmine.mining.rescore import exact_dot
from xmine.store.rows import RowSubset, as_f32
from xmine.topk import merge_topk

log = logging.getLogger(__name__)

# Refined rows searched at once (their float32 vectors: REFINE_CHUNK x dim x 4 bytes).
REFINE_CHUNK = 16_384


@dataclass(frozen=True, kw_only=True)
class ApproximateConfig:
    """How approximate mining searches."""

    #: one of `xmine.index.choose.APPROXIMATE_TYPES`: "ivfpqfs" (IVF + 4-bit PQ with fast-scan SIMD
    #: kernels: the fastest to search on CPU), "ivfpq" (8-bit PQ codes: more accurate, slower) or
    #: "ivf" (exact vectors: recall limited only by nprobe, memory 4 * dim bytes a row)
    index_type: str = "ivfpqfs"
    #: IVF lists (None: by the larger side's size, `xmine.index.choose.ivf_lists`, at most 4096)
    nlist: int | None = None
    #: lists visited per query (None: max(32, nlist // 16), about 6% of the lists; with half as
    #: many, approximate mining lost 4% of the pairs exact mining keeps on newstest fr-en)
    nprobe: int | None = None
    #: PQ sub-quantisers (must divide the dimension; fast-scan needs an even number). 64 at 384
    #: dimensions: with 32, PQ errors rank a real sentence's nearest neighbours so badly that
    #: approximate mining lost 9% of exact mining's pairs (benchmarks/lab/approximate_agreement.py)
    pq_m: int = 64
    #: rows per index shard (None: the larger side in as few equal shards as each fit `memory_budget`)
    shard_rows: int | None = None
    #: bytes an index shard may take where `shard_rows` is None (None: a quarter of physical memory)
    memory_budget: int | None = None
    #: query rows searched at once
    query_block: int = 65_536
    #: training vectors per IVF list (from both sides together)
    train_per_list: int = 50
    #: seed of the training sample
    seed: int = 0
    #: recompute the candidates' similarities exactly from the rows and keep the best k
    rescore: bool = True
    #: candidates fetched per row from the index when rescoring: fetch_factor * k
    fetch_factor: int = 2
    #: query rows rescored at once (memory: rescore_block * fetch_factor * k * dim * 4 bytes)
    rescore_block: int = 8192
    #: search the rows of candidate pairs at or above the threshold again (`refine_passing`), so
    #: missed neighbours do not lift their margins (needs `rescore`)
    refine: bool = True
    #: ... in this many times `nprobe` IVF lists (at most all), by the rows' vectors, not PQ codes
    refine_nprobe_factor: int = 2
    #: the command takes --index-type and --nlist (`xmine score` does not: its remedies name neither)
    tunable: bool = True

    def __post_init__(self):
        check_field_types(self, integers=("nlist", "nprobe", "shard_rows", "memory_budget", "pq_m", "query_block", "seed",
                                          "train_per_list", "fetch_factor", "rescore_block", "refine_nprobe_factor"))
        if self.index_type not in APPROXIMATE_TYPES:
            raise ConfigError(f"index type must be one of {', '.join(APPROXIMATE_TYPES)} (got {self.index_type!r})")
        for name in ("nlist", "nprobe", "shard_rows", "memory_budget"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"{name} must be >= 1 (got {v})")
        if min(self.pq_m, self.query_block, self.train_per_list, self.fetch_factor, self.rescore_block,
               self.refine_nprobe_factor) < 1:
            raise ConfigError("pq_m, query_block, train_per_list, fetch_factor, rescore_block and "
                              "refine_nprobe_factor must be >= 1")

    def resolved(self, n_max: int, dim: int) -> dict:
        """nlist, nprobe and the FAISS factory string for a base of up to n_max rows."""
        nlist = self.nlist or min(4096, ivf_lists(n_max))
        nlist = max(1, min(nlist, n_max))
        nprobe = min(nlist, self.nprobe or max(32, nlist // 16))
        m = pq_subquantisers(dim, self.pq_m, even=self.index_type == "ivfpqfs")
        return {"nlist": nlist, "nprobe": nprobe, "factory": index_factory(self.index_type, nlist, m)}


#: what an approximate run writes in its work folder
WORK_FILES = ("trained.faiss", "*-shard*.faiss", "*-block-*.npz", "*-rescored.npz", "refined.npz")
#: what to do about a damaged index file in the work folder (written atomically: damaged from outside)
WORK_REMEDY = "delete it: the next run builds it again"


def approximate_plan(config: ApproximateConfig, n: int, m: int, dim: int) -> dict:
    """{nlist, nprobe, factory, shard_rows} of the indexes searching `n` x `m` rows of `dim`, warning of
    each setting given that it cannot take as given (was: --nlist 50000 on 300 rows: IVF299, silently).
    Without `shard_rows` the memory budget cuts the shards, as build-index's (was: one shard a side)."""
    shard_rows = config.shard_rows or max(n, m)
    plan = config.resolved(min(shard_rows, max(n, m)), dim)
    if plan["nlist"] > min(n, m, shard_rows):
        plan = replace(config, nlist=max(1, min(n, m, shard_rows))).resolved(min(shard_rows, max(n, m)), dim)
    pq = (pq_code(plan["factory"]) or (None,))[0]
    warn_if_coarse(dim, pq, config.pq_m)
    for option, given, used, why in (
            ("--nlist", config.nlist, plan["nlist"], "at most the rows of the smaller side or shard: more lists "
             "than a side indexes rows would stay empty"),
            ("--nprobe", config.nprobe, plan["nprobe"], "a query visits at most every list"),
            ("--pq-m", config.pq_m if config.pq_m != ApproximateConfig.pq_m else None, pq, f"the sub-quantisers "
             f"must divide the dimension {dim}" + (" in an even number (fast-scan)" * (config.index_type == "ivfpqfs")))):
        if given is not None and used is not None and used != given:
            log.warning(f"{option} {given}: {used} used ({why})")
    choice = IndexChoice(kind=config.index_type, factory=plan["factory"], nlist=plan["nlist"], nprobe=plan["nprobe"])
    return {**plan, "shard_rows": config.shard_rows or default_shard_rows(
        choice, max(n, m), dim, memory_budget_bytes(config.memory_budget))}


def approximate_knn_both(x, y, k: int, *, config: ApproximateConfig = ApproximateConfig(),
                         work_dir: str | Path, key: str = "", show_progress: bool = False,
                         executor: Executor = LOCAL, passing=None, passing_key: str = "", used: dict | None = None):
    """Approximate kNN x->y and y->x: (fwd_sims (n, kx), fwd_idx, bwd_sims (m, ky), bwd_idx), sorted,
    float32 / int64, -1 where fewer neighbours were found; kx = min(k, m), ky = min(k, n).

    `executor`: where the training, adding and searching units run (`xmine.exec.executor`: this
    process, or tasks on the connected Ray cluster); the same result.
    `passing(fwd_sims, fwd_idx, bwd_sims, bwd_idx)`: (source mask, target mask) of the rows whose
    neighbourhood decides whether a pair passes the threshold (`select.passing_rows`), or None;
    those rows are searched again wider (`refine_passing`; needs `rescore`). `passing_key` names
    what `passing` depends on, for resuming. `used` (a dict), where given, receives the indexes' plan."""
    (n, m), dim = check_knn_inputs(x, y, k), x.shape[1]
    plan = approximate_plan(config, n, m, dim)
    shard_rows = plan["shard_rows"]
    (used if used is not None else {}).update(plan)  # (what OUT.json records: the lists and probes used)
    full_key = hashlib.sha256(json.dumps([key, n, m, k, asdict(config), plan], sort_keys=True).encode()).hexdigest()
    work = KeyedDir(work_dir, full_key, owned=WORK_FILES)
    log.info("approximate kNN: %s, nprobe %d, shards of %d rows", plan["factory"], plan["nprobe"], shard_rows)

    trained_file = work.path("trained.faiss")  # serialised = the bytes faiss.write_index writes
    trained_bytes = trained_file.read_bytes() if trained_file.is_file() else None
    if trained_bytes is not None and not is_serialised_index(trained_bytes):  # (was: FAISS's traceback, exit 1)
        log.warning(f"{trained_file}: damaged checkpoint, not a FAISS index; training it again")
        trained_bytes = None
    if trained_bytes is None:
        threads = executor.node_cpus()
        want = min(n + m, max(plan["nlist"] * config.train_per_list, 256 * 40 if pq_code(plan["factory"]) else 0))
        exact = "exact mining (no --approximate)"  # (was: "--index-type ivf" to score, which has none)
        advice = (few_rows_advice(plan, exact, dim=dim) if config.tunable
                  else "use exact search (no --approximate) for corpora this small")
        training = Training(factory=plan["factory"], size=want, seed=config.seed, sides=("src", "tgt"),
                            where="--approximate: ", advice=advice)
        trained_bytes = executor.call(with_threads, threads, train_index, training, executor.share(x),
                                      executor.share(y), cpus=threads)
        with atomic_path(trained_file) as tmp:
            tmp.write_bytes(trained_bytes)

    fetch = config.fetch_factor if config.rescore else 1
    shared = dict(plan=plan, shard_rows=shard_rows, trained=trained_bytes, work=work, config=config,
                  show_progress=show_progress)
    knn = (*_direction("fwd", queries=x, base=y, k=min(k, m), fetch=fetch, executor=executor, **shared),
           *_direction("bwd", queries=y, base=x, k=min(k, n), fetch=fetch, executor=executor, **shared))
    if passing is not None and config.rescore and config.refine:
        knn = refine_passing(x, y, knn, passing=passing, key=passing_key, **shared)
    for tag, nb in (("fwd", m), ("bwd", n)):  # searched (and refined): the states resume past them
        shards = len(shard_plan(nb, shard_rows))
        for s in range(shards if shards > 1 else 0):
            work.path(shard_file(tag, s)).unlink(missing_ok=True)
    return knn


def _direction(tag, *, queries, base, k, fetch, plan, shard_rows, trained, work: KeyedDir, config, show_progress,
               executor):
    """k neighbours of every query row in `base`: `fetch * k` candidates through the index shards,
    then (fetch > 1) rescored exactly. The base side's shards are added to the trained index
    (`add_unit`, one unit each, written to the work folder), then every shard searched by the
    queries in blocks of `config.query_block` (`search_blocks`), each block's merged top-k saved
    as it completes. A rerun builds only the missing shards and searches only the missing blocks."""
    final = work.path(f"{tag}-rescored.npz")
    if (saved := work.load_arrays(final.name, ("sims", "idx"))) is not None:
        return saved
    nq, block = len(queries), config.query_block
    bounds = shard_plan(len(base), shard_rows)
    files = [str(work.path(shard_file(tag, s))) for s in range(len(bounds))]

    def block_file(q0: int) -> Path:
        return work.path(f"{tag}-block-{q0:012d}-{min(nq, q0 + block):012d}.npz")

    done = {}
    for q0 in range(0, nq, block):  # blocks merged by an earlier (killed) run; absent or damaged: searched again
        if (saved := work.load_arrays(block_file(q0).name, ("sims", "idx"))) is not None:
            done[q0] = saved
    all_done = len(done) == -(-nq // block)  # then the shards (deleted once searched) are not needed
    missing = [] if all_done else [s for s, f in enumerate(files) if not Path(f).is_file()]
    if missing:
        trained_ref, base_ref = executor.share(trained), executor.share(base)
        units = ((trained_ref, base_ref, s, *bounds[s], block, False, files[s], base_side(tag)) for s in missing)
        with ShardProgress(shards=len(missing), rows=sum(bounds[s][1] - bounds[s][0] for s in missing),
                           desc=f"indexing {tag}", unit=" rows", enabled=show_progress) as bar:
            for _, count, _ in executor.map(add_unit, units, progress=bar):
                bar.done(count)

    def save(q0: int, sims, idx) -> None:
        with atomic_path(block_file(q0)) as tmp, open(tmp, "wb") as f:
            np.savez(f, sims=sims, idx=idx)

    # The shard files stay for the refinement (approximate_knn_both removes them after it); the
    # blocks' files are what resumes past the search.
    choice = IndexChoice(kind="ivf", factory=plan["factory"], nlist=plan["nlist"], nprobe=plan["nprobe"])
    sims, idx = search_blocks(partial(open_work_shard, files, bounds, choice), len(bounds), queries,
                              min(len(base), fetch * k), executor=executor, block=block, done=done, on_block=save,
                              desc=f"searching {tag}", show_progress=show_progress)
    if fetch == 1:
        return sims, idx
    sims, idx = rescore_candidates(queries, base, idx, k, block=config.rescore_block, show_progress=show_progress, tag=tag)
    with atomic_path(final) as tmp:
        np.savez(tmp, sims=sims, idx=idx)
    return sims, idx


def open_work_shard(files: list[str], bounds: list[tuple[int, int]], choice: IndexChoice, s: int):
    """(index, shard, choice) of shard s of one direction in the work folder, by path (what a search
    unit opens), as `shard_searcher` takes them."""
    lo, hi = bounds[s]
    return read_index(files[s], remedy=WORK_REMEDY), IndexShard(file=files[s], start=lo, rows=hi - lo), choice


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


def refine_passing(x, y, knn, *, passing, key: str, plan: dict, shard_rows: int, trained: bytes, work,
                   config, show_progress: bool = False):
    """`knn` (fwd_sims, fwd_idx, bwd_sims, bwd_idx, exact similarities) with the neighbourhoods of
    every row of a passing candidate searched again wider (module doc). `passing(*knn)` gives
    (source mask, target mask) of the rows that matter, or None (then nothing is refined); `key`
    names what decides passing (threshold, margin, filters), checked when resuming."""
    fwd_s, fwd_i, bwd_s, bwd_i = (np.array(a) for a in knn)
    done_x, done_y = np.zeros(len(x), bool), np.zeros(len(y), bool)
    state = work.path("refined.npz")
    names = ("key", "fwd_s", "fwd_i", "bwd_s", "bwd_i", "done_x", "done_y")
    if (saved := work.load_arrays(state.name, names)) is not None and str(saved[0]) == key:
        fwd_s, fwd_i, bwd_s, bwd_i, done_x, done_y = saved[1:]
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


__all__ = ["REFINE_CHUNK", "ApproximateConfig", "approximate_knn_both", "approximate_plan", "base_side",
           "drop_repeats", "open_shard", "refine_passing", "rescore_candidates", "shard_file"]
