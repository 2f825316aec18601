"""Which FAISS index to build, and why, following FAISS's guidelines and stopes' choices.

- up to 10,000 vectors: exact `Flat` (inner product) - exhaustive search is cheap there (stopes);
- beyond, with no GPU and the raw vectors plus the HNSW graph within the memory budget and at most
  `HNSW_MAX` vectors: `HNSW32` (FAISS: "if memory is not a concern, HNSW is the best option";
  it has no GPU implementation);
- otherwise `OPQ{m},IVF{n},PQ{m}` (stopes' choice; FAISS: PQ when memory is tight), with m = 64
  sub-quantisers (or the largest divisor of dim below it) and n lists by corpus size as stopes
  does (1024; 4096 past 250k; 32768 past 4M; 65536 past 10M; 262144 past 500M), kept within
  FAISS's 4*sqrt(N)..16*sqrt(N) and so that every list gets >= 39 training vectors.
IVF indexes train on 30..256 vectors a list (a seeded sample) and search `nprobe` lists: a quarter
of them, at least 8 (all of fewer), at most 128.

The index types are xmine's one set (`INDEX_TYPES`), each built from the factory string
`index_factory` gives; `build-index --index-type` offers `BUILD_TYPES` of them, `mine --approximate
--index-type` `APPROXIMATE_TYPES`.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass, replace

from xmine.errors import ConfigError
from xmine.artefacts.records import Record

log = logging.getLogger(__name__)

INDEX_TYPES = ("auto", "flat", "ivf", "hnsw", "ivfpq", "ivfpqfs", "opq")
#: What `build-index` builds: all but ivfpqfs, whose fast-scan codes FAISS cannot reconstruct (it
#: crashes), as an index directory read as a mining side must be.
BUILD_TYPES = tuple(t for t in INDEX_TYPES if t != "ivfpqfs")
#: What `mine --approximate` searches with: IVF indexes whose lists its refinement reads by the
#: query itself (OPQ rotates queries before its lists; Flat and HNSW have none). ivfpqfs (4-bit PQ
#: with fast-scan SIMD kernels) first: the fastest to search on CPU.
APPROXIMATE_TYPES = ("ivfpqfs", "ivfpq", "ivf")
FLAT_MAX = 10_000
HNSW_MAX = 2_000_000
HNSW_M = 32
# Bytes per HNSW graph link (int32) on level 0, where each vector has 2*M links.
_HNSW_LINK_BYTES = 4
MIN_TRAIN_PER_LIST = 39  # FAISS warns below this many training points per centroid
TRAIN_PER_LIST = 64
STOPES_NLIST = ((500_000_000, 262_144), (10_000_000, 65_536), (4_000_000, 32_768), (250_000, 4_096), (0, 1_024))


@dataclass(frozen=True, kw_only=True)
class IndexChoice(Record):
    """A resolved index: the FAISS factory string and its parameters (an index manifest's `choice`)."""

    kind: str  #: requested type ("auto" resolved to one of the others)
    factory: str  #: FAISS index_factory string (metric: inner product)
    nlist: int = 0  #: IVF lists (0 when not IVF)
    nprobe: int = 0  #: IVF lists visited per query (0 when not IVF)
    ef_search: int = 0  #: HNSW search breadth (0 when not HNSW)
    train_size: int = 0  #: vectors sampled to train (0: no training needed)
    reason: str = ""  #: human-readable reason for the choice


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def ivf_lists(n: int) -> int:
    """Number of IVF lists for n vectors (stopes' table, bounded by FAISS's guidance)."""
    nlist = next(v for floor, v in STOPES_NLIST if n > floor)
    lo, hi = 4 * math.sqrt(n), 16 * math.sqrt(n)
    nlist = int(min(max(nlist, lo), hi))
    nlist = min(nlist, max(1, n // MIN_TRAIN_PER_LIST))
    return max(1, nlist)


def pq_subquantisers(dim: int, preferred: int = 64, *, even: bool = False) -> int:
    """The largest m <= preferred dividing dim (PQ needs dim % m == 0); `even`: the largest even one
    (fast-scan packs codes in pairs) where m is odd, else the smallest above it (`--pq-m 1`), and a
    ConfigError for an odd dimension, which no even m divides (was: StopIteration, a traceback)."""
    m = next(m for m in range(min(preferred, dim), 0, -1) if dim % m == 0)
    if even and m % 2:
        if dim % 2:
            raise ConfigError(f"dimension {dim}: fast-scan PQ (--index-type ivfpqfs, the --approximate default) needs "
                              "an even number of sub-quantisers dividing the dimension, and an odd one has none; use "
                              "--index-type ivf (exact vectors), or ivfpq, whose sub-quantisers must divide the "
                              f"dimension too: {pq_subquantisers(dim, preferred)} here at --pq-m {preferred}")
        m = next(d for d in [*range(m, 0, -1), *range(m + 1, dim + 1)] if dim % d == 0 and d % 2 == 0)
    return m


def coarse_pq(dim: int, m: int, preferred: int) -> bool:
    """Whether the dimension's divisors leave PQ `m` sub-quantisers, a quarter of those asked for or
    fewer (a prime dimension: one byte a vector)."""
    return 4 * m <= min(preferred, dim)


def warn_if_coarse(dim: int, m: int | None, preferred: int) -> None:
    """Say where PQ's codes are coarse (`coarse_pq`; `m` None: no PQ), `preferred` given or default
    (was: PQ1 built without a word)."""
    if m is not None and coarse_pq(dim, m, preferred):
        log.warning(f"PQ{m}: the dimension {dim} splits into no more than {m} sub-quantisers up to {preferred} "
                    f"(they must divide it), {dim // m} dimensions a code byte: codes that coarse lose most "
                    "neighbours; use --index-type ivf (exact vectors) for vectors of this dimension")


def index_factory(kind: str, nlist: int, m: int, pq_bits: int = 8) -> str:
    """The FAISS index_factory string of IVF type `kind` ("ivf", "ivfpq", "ivfpqfs", "opq") with
    `nlist` lists and `m` PQ sub-quantisers of `pq_bits` bits (ivfpqfs: always 4)."""
    pq = f"PQ{m}" if pq_bits == 8 else f"PQ{m}x{pq_bits}"
    return {"ivf": f"IVF{nlist},Flat", "ivfpq": f"IVF{nlist},{pq}", "ivfpqfs": f"IVF{nlist},PQ{m}x4fs",
            "opq": f"OPQ{m},IVF{nlist},{pq}"}[kind]


def memory_budget_bytes(memory_budget: int | None) -> int:
    """The memory an index (a shard of it) may take: `memory_budget` bytes, or by default a quarter
    of physical memory."""
    return memory_budget if memory_budget is not None else total_memory_bytes() // 4


def pq_code(factory: str) -> tuple[int, int] | None:
    """(sub-quantisers, bits each) of the PQ codes a factory string names (`PQ64`, `PQ64x4fs`), or None.
    Only a component of its own: OPQ's rotation (`OPQ64_256,`) is not one (was: read as 8-bit codes,
    before a `PQ64x4`)."""
    pq = re.search(r"(?:^|,)PQ(\d+)(?:x(\d+))?", factory)
    return (int(pq[1]), int(pq[2] or 8)) if pq else None


def index_row_bytes(choice: IndexChoice, dim: int) -> int:
    """Bytes an index of `choice` holds per vector: its code (4 x dim for exact vectors, the PQ
    code's bytes), the id an IVF list keeps beside it, an HNSW graph's level-0 links. An HNSW graph,
    one shard whatever its size, counts its vectors twice: FAISS copies its storage into a larger
    buffer as vectors are added, the old one still held (was: once, and a graph chosen within the
    budget took more at its build's peak; measured in docs/scaling.md)."""
    pq = pq_code(choice.factory)
    code = pq[0] * pq[1] // 8 if pq else 4 * dim
    if choice.kind == "hnsw":
        return 2 * code + 2 * HNSW_M * _HNSW_LINK_BYTES
    return code + (8 if choice.nlist else 0)


def index_fixed_bytes(choice: IndexChoice, dim: int) -> int:
    """Bytes every shard of an index of `choice` holds whatever its rows: the IVF lists' centroids,
    the PQ codebooks (2^bits centroids of each sub-vector), OPQ's rotation."""
    pq = pq_code(choice.factory)
    return 4 * (choice.nlist * dim + (2 ** pq[1] * dim if pq else 0)
                + (dim * dim if choice.factory.startswith("OPQ") else 0))


def default_shard_rows(choice: IndexChoice, n: int, dim: int, budget: int) -> int:
    """Rows a shard holds where none are given: all `n` while the index fits `budget` bytes, else
    as few shards as keep each within it, of equal size (at least one row a list of an IVF index),
    so that building or searching holds one shard, not the corpus."""
    fixed = index_fixed_bytes(choice, dim)
    most = max(1, (budget - fixed) // index_row_bytes(choice, dim))
    shards = -(-n // most)
    rows = max(-(-n // shards), choice.nlist)
    if rows > most:  # (was: shards of a list's rows each, over the budget, unsaid: a helper's budget of 1 byte)
        log.warning(f"a memory budget of {budget:,} bytes cannot hold a shard of the {choice.factory} index of {dim} "
                    f"dimensions (its lists and codebooks take {fixed:,}, and a shard at "
                    f"least one row a list): shards of {rows:,} rows, {-(-n // rows):,} of them")
    return rows


def unused_settings(kind: str, *, nlist: int | None, nprobe: int | None, pq_m: int | None,
                    chosen: str | None = None) -> None:
    """ConfigError for a setting the index `kind` has no use for (was: read and dropped without a
    word): IVF lists of a flat or HNSW index, PQ codes of one without them. `chosen`: how to say
    an index "auto" chose ("the index chosen for N vectors is flat, which")."""
    what = chosen or {"flat": "a flat index", "hnsw": "an HNSW index", "ivf": "an IVF index"}.get(kind, kind)
    if kind in ("flat", "hnsw") and (nlist or nprobe):
        given = " and ".join(o for o, v in (("--nlist", nlist), ("--nprobe", nprobe)) if v)
        raise ConfigError(f"{given}: {what} has no IVF lists (give --index-type ivf, ivfpq or opq)")
    if kind in ("flat", "hnsw", "ivf") and pq_m is not None:
        raise ConfigError(f"--pq-m: {what} has no PQ codes (give --index-type ivfpq or opq)")


def choose_index(
    n: int,
    dim: int,
    *,
    kind: str = "auto",
    gpu: bool = False,
    memory_budget: int | None = None,
    nlist: int | None = None,
    nprobe: int | None = None,
    pq_m: int | None = None,
    pq_bits: int = 8,
) -> IndexChoice:
    """Resolve `kind` (one of `BUILD_TYPES`) for n vectors of size dim.

    memory_budget: bytes the index may use (default: a quarter of physical memory); only "auto"
    looks at it. nlist overrides the number of IVF lists, nprobe the lists searched a query (both
    refused for an index without lists, and nprobe above nlist); pq_m is the preferred number of PQ
    sub-quantisers (bytes per vector) for "ivfpq"/"opq" (None: 64, not said where the dimension
    takes fewer: was a warning naming --pq-m to a user who gave none); pq_bits the bits of each
    code (8: 256 centroids per sub-quantiser; 4 trains far faster on small corpora). PQ on fewer
    vectors than its centroids is a ConfigError.
    """
    if kind not in BUILD_TYPES:
        raise ConfigError(f"unknown index type {kind!r}; choose one of {', '.join(BUILD_TYPES)}")
    if n < 1 or dim < 1:
        raise ConfigError(f"cannot index {n} vectors of dimension {dim}")
    budget = memory_budget_bytes(memory_budget)
    reason = ""
    hnsw = IndexChoice(kind="hnsw", factory=f"HNSW{HNSW_M},Flat", ef_search=128)
    if kind == "auto":
        hnsw_bytes = n * index_row_bytes(hnsw, dim)
        if n <= FLAT_MAX:
            kind, reason = "flat", f"{n:,} vectors <= {FLAT_MAX:,}: exact search is cheap"
        elif not gpu and n <= HNSW_MAX and hnsw_bytes <= budget:
            kind = "hnsw"
            reason = (f"{n:,} vectors > {FLAT_MAX:,}, no GPU, HNSW needs ~{hnsw_bytes / 2**30:.2f} GiB "
                      f"<= budget {budget / 2**30:.2f} GiB: HNSW is the most accurate fast index")
        else:
            kind = "opq"
            why = "GPU present" if gpu else (f"> {HNSW_MAX:,} vectors" if n > HNSW_MAX else
                                              f"HNSW would need {hnsw_bytes / 2**30:.2f} GiB > budget")
            reason = f"{n:,} vectors, {why}: compressed OPQ+IVF+PQ index (stopes' choice)"
    unused_settings(kind, nlist=nlist, nprobe=nprobe, pq_m=pq_m,
                    chosen=f"the index chosen for {n:,} vectors is {kind}, which" if reason else None)
    if kind == "flat":
        return IndexChoice(kind="flat", factory="Flat", reason=reason or "exact inner product")
    if kind == "hnsw":
        return replace(hnsw, reason=reason or f"graph index, M={HNSW_M}")
    nl = int(nlist) if nlist else ivf_lists(n)
    if nl > n:
        raise ConfigError(f"nlist={nl} is more than the {n} vectors to index")
    # 64 vectors a list: inside FAISS's 30..256 range, and training cost stays moderate.
    train = int(min(n, TRAIN_PER_LIST * nl))
    if kind in ("ivfpq", "opq") and pq_m is not None and pq_m > dim:  # (was: PQ{dim} of 1-d codebooks, minutes)
        raise ConfigError(f"--pq-m {pq_m}: more sub-quantisers than the {dim} dimensions they split; give at most "
                          f"{dim} (a code of --pq-m bytes a vector; 64 is the usual)")
    m = pq_subquantisers(dim, pq_m or 64)
    # (was: --pq-m 5 built PQ4, a quarter of the code asked for, unsaid)
    if kind in ("ivfpq", "opq") and pq_m is not None and m != pq_m:
        near = ", ".join(str(d) for d in range(1, dim + 1) if dim % d == 0 and pq_m / 2 <= d <= pq_m * 2)
        log.warning(f"--pq-m {pq_m}: {m} sub-quantisers used (they must divide the dimension {dim}; its divisors "
                    f"near {pq_m}: {near})")
    if kind in ("ivfpq", "opq"):
        least = max(2**pq_bits, 256 if kind == "opq" else 0)  # (OPQ's rotation trains a PQ of 8 bits)
        if n < least:  # (was: two warnings, then FAISS's error, each advising a smaller --nlist at nlist 1)
            raise ConfigError(f"--index-type {kind}: PQ learns {least} centroids per sub-quantiser, so it needs at "
                              f"least {least} vectors, and there are {n:,}; use --index-type flat (exact, and fast "
                              "at this size) or ivf")
        if kind == "opq" and n < dim:  # (a helper: FAISS's OPQ training corrupted the heap, exit 134 or 139)
            raise ConfigError(f"--index-type opq: its rotation is learnt from at least as many vectors as the {dim} "
                              f"dimensions it rotates, and there are {n:,}; use --index-type flat (exact, and fast at "
                              "this size), ivf or ivfpq")
        warn_if_coarse(dim, m, pq_m or 64)
        # PQ codebooks have 256 entries per sub-quantiser: train on at least ~40 points each (and
        # OPQ's rotation on at least a vector a dimension).
        train = int(min(n, max(train, 2**pq_bits * MIN_TRAIN_PER_LIST, dim if kind == "opq" else 0)))
        codebook = 2**pq_bits * MIN_TRAIN_PER_LIST
        if n < codebook:  # k-means of 2**bits centroids per sub-quantiser on too few points: poor
            log.warning(f"PQ{m}: {m} codebooks of {2**pq_bits} centroids trained on {n:,} vectors (FAISS advises >= "
                        f"{codebook:,}): the codes are coarse; for so few vectors "
                        "--index-type flat or ivf is exact or close to it, and fast")
    factory = index_factory(kind, nl, m, pq_bits)
    # stopes searches 128 lists; a quarter of them on smaller indexes, but at least 8 (all of a
    # handful: searching one list of two would miss half the neighbours).
    if nprobe and nprobe > nl:
        raise ConfigError(f"--nprobe {nprobe} is more than the index's {nl} lists")
    nprobe_given = bool(nprobe)
    nprobe = int(nprobe) if nprobe else min(nl, max(8, min(128, nl // 4)))
    lo, hi = 4 * math.sqrt(n), 16 * math.sqrt(n)
    if nlist:
        lists_note = f"{nl} lists (as given)"
    elif nl < lo:
        lists_note = (f"{nl} list{'s' * (nl != 1)} (fewer than 4*sqrt(N)={lo:.0f}, so that each trains on >= "
                      f"{MIN_TRAIN_PER_LIST} vectors)")
    else:
        lists_note = f"{nl} lists (4*sqrt(N)={lo:.0f}..16*sqrt(N)={hi:.0f})"
    return IndexChoice(kind=kind, factory=factory, nlist=nl, nprobe=nprobe, train_size=train,
                       reason=(reason + "; " if reason else "") + lists_note
                       + f", {nprobe} searched a query{' (as given)' if nprobe_given else ''}, trained on "
                       f"{train:,} vectors")
