"""From kNN lists to mined pairs: margin scores, retrieval modes, one-to-one, threshold, filters.

Margin scores (Artetxe & Schwenk 2019, "Margin-based Parallel Corpus Mining", `margin_score`):
for a candidate pair (x, y) with cosine c, the neighbourhood mean is
    m = (mean of x's k nearest target cosines + mean of y's k nearest source cosines) / 2
and the scores are
    ratio    = c / m     (default; ~1.0 for an unremarkable pair, 1.04-1.06 a typical threshold)
    distance = c - m     (~0.0 for an unremarkable pair)
    absolute = c         (plain cosine, no margin: ignores hubness)

The ratio is defined only where m > 0. Where m <= 0 (both neighbourhoods are unrelated or
anti-correlated, seen with some projections' meaning parts) c / m would flip sign or explode and
rank nonsense first, so such candidates get the score -inf: they are never mined with `ratio`
(select_pairs counts and reports them; `distance` scores them). Exact and approximate mining
share this function, and both average exactly k neighbours (the k nearest allowed ones).

Everything here is vectorised over candidates (no Python loop per pair), except the tail of the
greedy one-to-one matching, which is inherently sequential and only runs on what the vectorised
rounds leave (see `greedy_one_to_one`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import numpy as np

from xmine.calibration import DEFAULT_MARGIN  # a calibrated space may record another (SpaceDefaults.margin)
from xmine.errors import ConfigError, check_field_types
from xmine.exec.executor import LOCAL, Executor
from xmine.mining.knn import exact_knn_both
from xmine.mining.products import PRODUCTS
from xmine.store.rows import RowSubset

#: threads sharing the exact product: each holds a score block (was: 10**20 accepted, then a block
#: memory refusal after both sides were embedded)
MAX_WORKERS = 1024
MARGINS = ("ratio", "distance", "absolute")
RETRIEVALS = ("max", "fwd", "bwd", "intersect")
# Direction codes in MinedPairs.direction (what found a pair).
FWD, BWD, BOTH = 0, 1, 2
DIRECTION_NAMES = {FWD: "fwd", BWD: "bwd", BOTH: "both"}


@dataclass(frozen=True, kw_only=True)
class MiningConfig:
    """How to mine pairs from two sets of embeddings."""

    #: neighbours per sentence: both the candidates considered and the size of the neighbourhood
    #: whose mean cosine forms the margin (Artetxe & Schwenk 2019 use 4).
    k: int = 4
    #: score: "ratio" (c/m, ~1 for an unremarkable pair), "distance" (c-m, ~0), "absolute" (c).
    margin: str = DEFAULT_MARGIN
    #: "max": union of each source's and each target's best candidate, sorted by score, then greedy
    #: one-to-one; "fwd": each source's best target; "bwd": each target's best source;
    #: "intersect": pairs that are each other's best in both directions.
    retrieval: str = "max"
    #: keep pairs whose score is >= threshold, in every retrieval mode (None keeps every pair).
    threshold: float | None = None
    #: drop candidates whose character lengths differ more than this factor (longer/shorter);
    #: None disables. Needs sentence lengths (mine_embeddings' src_lengths/tgt_lengths).
    max_length_ratio: float | None = None
    #: sentences shorter than this many characters are not mined (0 disables).
    min_length: int = 0
    #: sentences longer than this many characters are not mined (None disables).
    max_length: int | None = None
    #: rows of X per block of the exact product (memory: block_rows * block_cols * 4 bytes; None:
    #: the product's, `knn_product.default_blocks`).
    block_rows: int | None = None
    #: rows of Y per block of the exact product (None: the product's).
    block_cols: int | None = None
    #: threads sharing the exact product's row blocks, each with one BLAS thread (None: as many
    #: as BLAS would use, see `knn.default_workers`). Does not change the mined pairs.
    workers: int | None = None
    #: the block product that finds candidates for the exact search (mining/products.py): "auto"
    #: (CUDA if torch sees a GPU, else bf16 on CPUs with avx512_bf16 or AMX, else fp32), "fp32",
    #: "bf16" or "cuda". Candidates are rescored exactly: the mined pairs and scores are the same
    #: byte for byte whatever the product; only the speed differs.
    product: str = "auto"

    def __post_init__(self):
        check_field_types(self, integers=("k", "min_length", "max_length", "block_rows", "block_cols", "workers"),
                          reals=("threshold", "max_length_ratio"))
        if self.k < 1:
            raise ConfigError(f"k must be >= 1 (got {self.k})")
        if self.margin not in MARGINS:
            raise ConfigError(f"margin must be one of {', '.join(MARGINS)} (got {self.margin!r})")
        if self.retrieval not in RETRIEVALS:
            raise ConfigError(f"retrieval must be one of {', '.join(RETRIEVALS)} (got {self.retrieval!r})")
        for name in ("threshold", "max_length_ratio"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number (got {value})")
        if self.max_length_ratio is not None and self.max_length_ratio < 1:
            raise ConfigError(f"max_length_ratio must be >= 1 (got {self.max_length_ratio})")
        if self.min_length < 0:
            raise ConfigError(f"min_length (--min-length) must be >= 0 (got {self.min_length})")
        if self.max_length is not None and self.max_length < max(1, self.min_length):
            raise ConfigError(f"max_length (--max-length) {self.max_length} is below " + (
                f"min_length (--min-length) {self.min_length}: no sentence could be kept" if self.min_length else
                "1: no sentence could be kept"))
        if any(b is not None and b < 1 for b in (self.block_rows, self.block_cols)):
            raise ConfigError("block_rows and block_cols must be >= 1")
        if self.workers is not None and not 1 <= self.workers <= MAX_WORKERS:
            raise ConfigError(f"workers (--workers) must be 1 to {MAX_WORKERS:,} (got {self.workers:,})")
        if self.product not in PRODUCTS:
            raise ConfigError(f"product must be one of {', '.join(PRODUCTS)} (got {self.product!r})")

    def replace(self, **changes) -> "MiningConfig":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True)
class MinedPairs:
    """Mined pairs, sorted by score (highest first)."""

    #: row of each pair in the source embeddings
    src_idx: np.ndarray
    #: row of each pair in the target embeddings
    tgt_idx: np.ndarray
    #: the pair's score (margin or cosine, see MiningConfig.margin)
    score: np.ndarray
    #: what found it: 0 fwd (source's best), 1 bwd (target's best), 2 both
    direction: np.ndarray
    #: distinct candidate pairs (among each sentence's k nearest, either direction) that
    #: `max_length_ratio` dropped before one-to-one matching; None: no such bound
    length_ratio_dropped: int | None = None

    def __len__(self) -> int:
        return len(self.score)

    def pairs(self) -> set[tuple[int, int]]:
        return set(zip(self.src_idx.tolist(), self.tgt_idx.tolist()))

    def take(self, positions: np.ndarray) -> "MinedPairs":
        """The pairs at `positions` (indices, in that order, a position may repeat; or a mask), with
        the count of candidates the length ratio dropped before them."""
        return MinedPairs(src_idx=self.src_idx[positions], tgt_idx=self.tgt_idx[positions],
                          score=self.score[positions], direction=self.direction[positions],
                          length_ratio_dropped=self.length_ratio_dropped)

    @classmethod
    def empty(cls) -> "MinedPairs":
        """No pairs (an empty side), with the dtypes of mined ones."""
        e = np.zeros(0, np.int64)
        return cls(src_idx=e, tgt_idx=e, score=np.zeros(0, np.float32), direction=np.zeros(0, np.int8))


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Positions of the candidates kept by greedy one-to-one matching, in the greedy order.

    Greedy: visit candidates by score (highest first, ties by position) and keep one unless its
    source or target was already kept. Vectorised in rounds: a candidate that comes first among the
    remaining candidates of both its source and its target is kept by the greedy walk (nothing before
    it can block it); every remaining candidate sharing a source or target with a kept one is then
    dropped. When rounds stop paying off the short remainder is walked in Python.
    """
    order = np.argsort(-score.astype(np.float64), kind="stable")
    s, t = src[order], tgt[order]
    alive = np.arange(len(order))
    kept: list[np.ndarray] = []
    while len(alive) > 2000:
        as_, at = s[alive], t[alive]
        first_s = np.zeros(len(alive), bool)
        first_s[np.unique(as_, return_index=True)[1]] = True
        first_t = np.zeros(len(alive), bool)
        first_t[np.unique(at, return_index=True)[1]] = True
        win = first_s & first_t
        kept.append(alive[win])
        gone = np.isin(as_, as_[win]) | np.isin(at, at[win])
        before = len(alive)
        alive = alive[~gone]
        if before - len(alive) < 0.02 * before:  # long chains: the plain walk is cheaper now
            break
    done = np.concatenate(kept) if kept else np.zeros(0, np.int64)
    used_s, used_t = set(s[done].tolist()), set(t[done].tolist())
    tail: list[int] = []
    for p in alive.tolist():
        a, b = int(s[p]), int(t[p])
        if a not in used_s and b not in used_t:
            used_s.add(a)
            used_t.add(b)
            tail.append(p)
    chosen = np.sort(np.concatenate((done, np.asarray(tail, dtype=np.int64))))
    return order[chosen]


def margin_score(cos, mean_x, mean_y, kind: str = DEFAULT_MARGIN) -> np.ndarray:
    """Vectorised margin score; arguments broadcast against each other."""
    cos = np.asarray(cos, dtype=np.float32)
    if kind == "absolute":
        return cos.copy()
    m = (np.asarray(mean_x, dtype=np.float32) + np.asarray(mean_y, dtype=np.float32)) / 2
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(m > 0, cos / np.where(m > 0, m, 1), -np.inf).astype(np.float32)
    if kind == "distance":
        return cos - m
    raise ValueError(f"unknown margin {kind!r}; choose one of {', '.join(MARGINS)}")


def candidate_scores(fwd_sims, fwd_idx, bwd_sims, bwd_idx, *, config: MiningConfig, src_lengths=None,
                     tgt_lengths=None, report: bool = True, dropped: list | None = None):
    """Every kNN candidate's score: (fwd_scores (n, kx), fwd targets, bwd_scores (m, ky), bwd sources),
    -inf where a candidate is missing (-1) or filtered out; missing ids become 0 (their score is -inf).

    The margin's neighbourhood means are the means of the k similarities of each row (k = their
    width). `report`: warn about candidates whose ratio margin is undefined. `dropped` gets the
    number of distinct candidate pairs `max_length_ratio` dropped."""
    fwd_valid, bwd_valid = fwd_idx >= 0, bwd_idx >= 0
    mean_x = _masked_mean(fwd_sims, fwd_valid)  # x's k nearest target cosines
    mean_y = _masked_mean(bwd_sims, bwd_valid)  # y's k nearest source cosines
    fi, bi = np.where(fwd_valid, fwd_idx, 0), np.where(bwd_valid, bwd_idx, 0)
    fwd_scores = margin_score(fwd_sims, mean_x[:, None], mean_y[fi], config.margin)
    bwd_scores = margin_score(bwd_sims, mean_y[:, None], mean_x[bi], config.margin)
    fwd_scores[~fwd_valid] = -np.inf
    bwd_scores[~bwd_valid] = -np.inf
    if config.margin == "ratio" and report:  # candidates whose neighbourhood mean m <= 0: not mined
        n_bad = int((((mean_x[:, None] + mean_y[fi]) <= 0) & fwd_valid).sum()
                    + (((mean_y[:, None] + mean_x[bi]) <= 0) & bwd_valid).sum())
        if n_bad:
            logging.getLogger("xmine.mining").warning(
                f"{n_bad} candidate pair(s) have a neighbourhood mean cosine m <= 0: the ratio margin c/m is "
                "undefined there and they are not mined (--margin distance scores them)")
    if config.max_length_ratio is not None:
        if src_lengths is None or tgt_lengths is None:
            raise ConfigError("max_length_ratio needs the sentence lengths of both sides")
        sl, tl = np.maximum(src_lengths, 1).astype(np.float64), np.maximum(tgt_lengths, 1).astype(np.float64)
        fr = np.maximum(sl[:, None], tl[fi]) / np.minimum(sl[:, None], tl[fi])
        br = np.maximum(tl[:, None], sl[bi]) / np.minimum(tl[:, None], sl[bi])
        fwd_cut = (fr > config.max_length_ratio) & np.isfinite(fwd_scores)
        bwd_cut = (br > config.max_length_ratio) & np.isfinite(bwd_scores)
        fwd_scores[fwd_cut], bwd_scores[bwd_cut] = -np.inf, -np.inf
        if dropped is not None:  # each (source, target) once, whichever direction held it
            m = max(len(bwd_sims), 1)
            keys = np.concatenate((np.nonzero(fwd_cut)[0].astype(np.int64) * m + fi[fwd_cut],
                                   bi[bwd_cut].astype(np.int64) * m + np.nonzero(bwd_cut)[0]))
            dropped.append(len(np.unique(keys)))
    return fwd_scores, fi, bwd_scores, bi


def passing_rows(fwd_sims, fwd_idx, bwd_sims, bwd_idx, *, config: MiningConfig, src_lengths=None,
                 tgt_lengths=None) -> tuple[np.ndarray, np.ndarray] | None:
    """(source rows, target rows) as boolean masks: the rows of every candidate that scores at
    least the threshold, whichever direction found it; None when the threshold cannot drop a pair
    for its neighbourhood (no threshold, or the absolute margin, which has none)."""
    if config.threshold is None or config.margin == "absolute":
        return None
    fs, fi, bs, bi = candidate_scores(fwd_sims, fwd_idx, bwd_sims, bwd_idx, config=config,
                                      src_lengths=src_lengths, tgt_lengths=tgt_lengths, report=False)
    t = np.float64(config.threshold)  # (float32 scores compared in float64: `select_pairs`)
    fp, bp = fs >= t, bs >= t
    rows_x, rows_y = fp.any(axis=1), bp.any(axis=1)
    rows_y[fi[fp]] = True
    rows_x[bi[bp]] = True
    return rows_x, rows_y


def select_pairs(
    fwd_sims: np.ndarray,
    fwd_idx: np.ndarray,
    bwd_sims: np.ndarray,
    bwd_idx: np.ndarray,
    *,
    config: MiningConfig,
    src_lengths: np.ndarray | None = None,
    tgt_lengths: np.ndarray | None = None,
) -> MinedPairs:
    """Score the kNN candidates with the margin and pick pairs as `config.retrieval` says.

    fwd_*: (n, kx) each source's nearest targets (sims, target rows); bwd_*: (m, ky) each target's
    nearest sources; index -1 marks a missing neighbour (`candidate_scores` scores them).
    """
    n, m, dropped = len(fwd_sims), len(bwd_sims), []
    fwd_scores, fi, bwd_scores, bi = candidate_scores(fwd_sims, fwd_idx, bwd_sims, bwd_idx, config=config,
                                                      src_lengths=src_lengths, tgt_lengths=tgt_lengths, dropped=dropped)
    rows_x, rows_y = np.arange(n), np.arange(m)
    best_f = fwd_scores.argmax(axis=1)
    fwd_best, fwd_best_score = fi[rows_x, best_f], fwd_scores[rows_x, best_f]
    best_b = bwd_scores.argmax(axis=1)
    bwd_best, bwd_best_score = bi[rows_y, best_b], bwd_scores[rows_y, best_b]

    r = config.retrieval
    if r == "fwd":
        src, tgt, sc, d = rows_x, fwd_best, fwd_best_score, np.full(n, FWD)
    elif r == "bwd":
        src, tgt, sc, d = bwd_best, rows_y, bwd_best_score, np.full(m, BWD)
    elif r == "intersect":
        mutual = (fwd_best[bwd_best] == rows_y) & np.isfinite(bwd_best_score)
        src, tgt, sc = bwd_best[mutual], rows_y[mutual], bwd_best_score[mutual]
        d = np.full(len(sc), BOTH)
    else:  # max: union of both directions' best candidates, then greedy one-to-one
        src = np.concatenate((rows_x, bwd_best))
        tgt = np.concatenate((fwd_best, rows_y))
        sc = np.concatenate((fwd_best_score, bwd_best_score))
        d = np.concatenate((np.full(n, FWD), np.full(m, BWD)))
        ok = np.isfinite(sc)
        if config.threshold is not None:  # pairs below it can never be output: drop before matching
            ok &= sc >= np.float64(config.threshold)
        src, tgt, sc, d = src[ok], tgt[ok], sc[ok], d[ok]
        # A pair found in both directions is one candidate, marked "both".
        key = src.astype(np.int64) * max(m, 1) + tgt
        uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        d = d[first]
        d[counts > 1] = BOTH
        src, tgt, sc = src[first], tgt[first], sc[first]
        keep = greedy_one_to_one(src, tgt, sc)
        src, tgt, sc, d = src[keep], tgt[keep], sc[keep], d[keep]
    ok = np.isfinite(sc)
    if config.threshold is not None:
        # in float64: a Python float meeting float32 scores is cast to float32 (numpy 2), which
        # kept a score up to half a float32 step below the threshold
        ok &= sc >= np.float64(config.threshold)
    src, tgt, sc, d = (np.asarray(a)[ok] for a in (src, tgt, sc, d))
    # Sorted by score descending; ties broken by (src, tgt) so the output is reproducible.
    order = np.lexsort((tgt, src, -sc.astype(np.float64)))
    return MinedPairs(src_idx=src[order].astype(np.int64), tgt_idx=tgt[order].astype(np.int64),
                      score=sc[order].astype(np.float32), direction=d[order].astype(np.int8),
                      length_ratio_dropped=dropped[0] if dropped else None)


def _masked_mean(sims: np.ndarray, valid: np.ndarray) -> np.ndarray:
    counts = np.maximum(valid.sum(axis=1), 1)
    return (np.where(valid, sims, 0).sum(axis=1) / counts).astype(np.float32)


def length_mask(lengths: np.ndarray | None, config: MiningConfig) -> np.ndarray | None:
    """Rows allowed by min_length/max_length (None when no bound is set)."""
    if lengths is None or (config.min_length <= 0 and config.max_length is None):
        return None
    ok = lengths >= config.min_length
    if config.max_length is not None:
        ok &= lengths <= config.max_length
    return ok


def mine_embeddings(
    x: np.ndarray,
    y: np.ndarray,
    *,
    config: MiningConfig = MiningConfig(),
    src_lengths: np.ndarray | None = None,
    tgt_lengths: np.ndarray | None = None,
    checkpoint_dir=None,
    checkpoint_key: str = "",
    show_progress: bool = False,
    executor: Executor = LOCAL,
) -> MinedPairs:
    """Mine pairs between source embeddings x (n, d) and target embeddings y (m, d), exactly.

    Rows should be L2-normalised. Returned indices refer to rows of x and y. Sentences outside the
    length bounds (needs src_lengths/tgt_lengths, in characters) are left out before mining.
    The neighbours are `knn.exact_knn_both`'s, its tiles run by `executor`.
    """
    # Rows within the length bounds (None: every row), and those rows with their lengths.
    xr, yr = (None if ok is None else np.flatnonzero(ok)
              for ok in (length_mask(src_lengths, config), length_mask(tgt_lengths, config)))
    xs, sl = (x, src_lengths) if xr is None else (RowSubset(x, xr), src_lengths[xr])  # views: never a copy
    ys, tl = (y, tgt_lengths) if yr is None else (RowSubset(y, yr), tgt_lengths[yr])
    if len(xs) == 0 or len(ys) == 0:
        return MinedPairs.empty()
    neighbours = exact_knn_both(xs, ys, config.k, block_rows=config.block_rows, block_cols=config.block_cols,
                                workers=config.workers, product=config.product, executor=executor,
                                checkpoint_dir=checkpoint_dir, checkpoint_key=checkpoint_key,
                                show_progress=show_progress)
    mined = select_pairs(*neighbours, config=config, src_lengths=sl, tgt_lengths=tl)
    return dataclasses.replace(mined, src_idx=mined.src_idx if xr is None else xr[mined.src_idx],
                               tgt_idx=mined.tgt_idx if yr is None else yr[mined.tgt_idx])
