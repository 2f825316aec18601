"""Building an index directory (layout: `xmine.index.faiss_index`): the configuration, the index
chosen for the corpus, training it once on a seeded sample, adding rows shard by shard, and the
text, line numbers and manifest written beside the shards."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.artefacts.directory import atomic_dir, provenance
from xmine.errors import ConfigError, NonFiniteRowError
from xmine.exec.executor import LOCAL, Executor, ShardProgress
from xmine.artefacts.fileio import atomic_path, sha256_file, write_failure, write_manifest
from xmine.index.choose import (MIN_TRAIN_PER_LIST, choose_index, coarse_pq, default_shard_rows, memory_budget_bytes,
                                pq_code, pq_subquantisers, unused_settings)
from xmine.io.compression import count_lines
from xmine.index.faiss_index import (FORMAT_VERSION, KIND, IndexDir, faiss_computing, faiss_reason, shard_name, shard_plan, to_cpu, to_gpu,
                                     units_use_gpus)
from xmine.artefacts.records import EncoderFingerprint, ProjectionFingerprint, to_json
from xmine.store.layout import LINE_NUMBERS, SENTENCE_INDEX, SENTENCES
from xmine.store.rows import as_f32

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """How to build an index."""

    #: "auto" (choose by size, see xmine.index.choose), "flat", "ivf", "hnsw", "ivfpq" or "opq"
    kind: str = "auto"
    #: rows per shard (each shard its own .faiss file); None = one shard while the index fits
    #: `memory_budget`, else equal shards that each fit it (`choose.default_shard_rows`)
    shard_rows: int | None = None
    #: IVF lists (None: by corpus size)
    nlist: int | None = None
    #: IVF lists searched per query (None: the choice's default)
    nprobe: int | None = None
    #: PQ sub-quantisers (bytes per vector) for "ivfpq"/"opq"; the largest divisor of dim <= this
    #: (None: 64, and one that does not divide the dimension is not said)
    pq_m: int | None = None
    #: bits per PQ code (8 = 256 centroids per sub-quantiser)
    pq_bits: int = 8
    #: seed of the training sample
    seed: int = 0
    #: use GPUs when FAISS reports some (False forces CPU)
    gpu: bool = True
    #: memory the index (a shard of it) may take, bytes (None: a quarter of physical memory): "auto"
    #: chooses the index by it, and without `shard_rows` it sets the shards' size
    memory_budget: int | None = None
    #: rows added per call (bounds the float32 copy of float16/memory-mapped embeddings)
    add_batch: int = 65_536

    def __post_init__(self):
        for name in ("shard_rows", "nlist", "nprobe", "pq_m"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be a whole number >= 1 (got {value!r})")
        if self.pq_bits < 1 or self.add_batch < 1:
            raise ConfigError(f"pq_bits and add_batch must be >= 1 (got {self.pq_bits}, {self.add_batch})")
        if self.memory_budget is not None and not self.memory_budget > 0:
            raise ConfigError(f"memory_budget must be > 0 bytes (got {self.memory_budget!r})")
        unused_settings(self.kind, nlist=self.nlist, nprobe=self.nprobe, pq_m=self.pq_m)  # before any work


#: Rows per add unit when the index is kept as one shard (the pieces merged in row order).
ADD_PIECE_ROWS = 262_144


def build_index(
    embeddings: np.ndarray,
    out_dir: str | Path,
    *,
    sentences: "Sequence[str] | Path",
    line_numbers: np.ndarray,
    encoder: EncoderFingerprint | dict,
    sentence_index: np.ndarray | None = None,
    projection: ProjectionFingerprint | dict | None = None,
    part: str | None = None,
    lang: str | None = None,
    source: dict | None = None,
    config: IndexConfig = IndexConfig(),
    executor: Executor = LOCAL,
    show_progress: bool = False,
    overwrite: bool = False,
) -> IndexDir:
    """Index `embeddings` (n, dim; float32/float16, memory-mapped or a row view read on demand) into
    `out_dir`. `sentences`: the text of every row, as a list or as a file of one sentence a line
    (copied, e.g. a store's sentences.txt).

    As autofaiss and stopes do, on any `executor` (`xmine.exec.executor`; the same directory here and
    on Ray): the index is trained in ONE unit on a seeded sample (`train_index`), then rows are
    added in units (`add_unit`), each on a copy of the trained index. With `shard_rows`, each unit
    writes its shard (searched as one, like faiss's IndexShards). Without, the rows are added in
    pieces of ADD_PIECE_ROWS, each merged into one index as soon as the pieces before it are
    (`merge_piece`), which then holds the same lists in the same order as adding every row to one
    index; HNSW graphs cannot be merged, so a graph is built by one unit.

    An existing `out_dir` is replaced only when it is an xmine index and `overwrite` is given
    (`xmine.artefacts.directory.atomic_dir`); callers that take user paths claim it first
    (`xmine.artefacts.outputs.claim_output`), which also refuses inputs and a second writer.
    """
    import faiss

    n, dim = embeddings.shape
    text_file = Path(sentences) if isinstance(sentences, (str, Path)) else None
    n_text = count_lines(text_file) if text_file is not None else len(sentences)
    if n_text != n or len(line_numbers) != n:
        raise ConfigError(f"{n} embeddings but {n_text} sentences / {len(line_numbers)} line numbers")
    use_gpu = config.gpu and units_use_gpus(executor)
    choice = choose_index(n, dim, kind=config.kind, gpu=use_gpu, memory_budget=config.memory_budget,
                          nlist=config.nlist, nprobe=config.nprobe, pq_m=config.pq_m, pq_bits=config.pq_bits)
    budget = memory_budget_bytes(config.memory_budget)
    # >= 1: IndexConfig checks it, choose_index checks n (was: one index of the whole corpus, whatever its size)
    shard_rows = int(config.shard_rows or default_shard_rows(choice, n, dim, budget))
    if choice.nlist and shard_rows < choice.nlist:
        raise ConfigError(f"shards of {shard_rows} rows cannot fill {choice.nlist} IVF lists; "
                          "use larger shards or --nlist")

    rows = executor.share(embeddings)
    threads = executor.node_cpus()
    # only what would help (was: "a smaller --nlist" where the PQ codebooks, not the lists, were short)
    remedies = ["--index-type flat or hnsw"]
    if pq_code(choice.factory):
        remedies.append("--index-type ivf (no codebook to train)")
    if choice.nlist and min(n, choice.train_size) < MIN_TRAIN_PER_LIST * choice.nlist:  # (FAISS's least a list)
        remedies.append("a smaller --nlist")
    training = Training(factory=choice.factory, size=choice.train_size, seed=config.seed, gpu=use_gpu,
                        advice=f"use {', '.join(remedies)}, or a larger corpus")
    trained = executor.call(with_threads, threads, train_index, training, rows, cpus=threads, gpus=int(use_gpu))
    plan = shard_plan(n, shard_rows)
    merged = config.shard_rows is None and shard_rows >= n and choice.kind != "hnsw" and n > ADD_PIECE_ROWS
    pieces = shard_plan(n, ADD_PIECE_ROWS) if merged else plan
    with atomic_dir(out_dir, kind=KIND, overwrite=overwrite) as tmp:
        trained_ref = executor.share(trained)
        units = ((trained_ref, rows, p, start, stop, config.add_batch, use_gpu,
                  None if merged else str(tmp / shard_name(p))) for p, (start, stop) in enumerate(pieces))
        index, next_piece, waiting = None, 0, {}  # pieces 0..next_piece-1 merged; later ones waiting
        # `with`: the bar ends its line before an error is printed, so the error stays one line.
        with ShardProgress(shards=len(pieces), rows=n, desc=f"indexing ({choice.factory}, {executor.name})",
                           unit=" vec", enabled=show_progress) as bar:
            for p, count, blob in executor.map(add_unit, units, gpus=int(use_gpu), progress=bar):
                if merged:  # in row order, each piece as soon as those before it are
                    waiting[p] = blob
                    while next_piece in waiting:
                        index, next_piece = merge_piece(index, waiting.pop(next_piece)), next_piece + 1
                bar.done(count)
        if merged:
            try:
                faiss.write_index(index, str(tmp / shard_name(0)))
            except RuntimeError as e:  # (a full disk: FAISS's words, a traceback)
                failed = write_failure(e, Path(out_dir) / shard_name(0))
                if failed is None:
                    raise
                raise failed from e
        # beside the shards: the text, line numbers (and sentence indices of a corpus split into sentences), manifest
        if text_file is not None:  # the text file of a store or of the input
            shutil.copyfile(text_file, tmp / SENTENCES)
        else:
            (tmp / SENTENCES).write_text("".join(f"{t}\n" for t in sentences), encoding="utf-8")
        np.save(tmp / LINE_NUMBERS, np.asarray(line_numbers, dtype=np.int64))
        if sentence_index is not None:
            if len(sentence_index) != n:
                raise ConfigError(f"{n} rows but {len(sentence_index)} sentence indices")
            np.save(tmp / SENTENCE_INDEX, np.asarray(sentence_index, dtype=np.int32))
        shards = [{"file": shard_name(s), "start": start, "rows": stop - start} for s, (start, stop) in enumerate(plan)]
        files = {p.name: {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in sorted(tmp.iterdir())}
        write_manifest(tmp, KIND, {
            "files": files,
            "encoder": to_json(encoder), "projection": to_json(projection), "part": part, "lang": lang,
            "count": n, "dim": dim, "choice": choice.to_dict(), "built_on_gpu": use_gpu,
            "shards": shards, "source": source,
            # the budget that chose the index (auto) and its shards, and the rows a shard holds
            "provenance": provenance(kind=config.kind, shard_rows=config.shard_rows, nlist=config.nlist,
                                     nprobe=config.nprobe, pq_m=config.pq_m, seed=config.seed,
                                     memory_budget=budget, gpu=config.gpu, resolved_shard_rows=shard_rows),
        }, format_version=FORMAT_VERSION)
    log.info("index: %s (%s)", choice.factory, choice.reason)
    return IndexDir.open(out_dir)


@dataclass(frozen=True, kw_only=True)
class Training:
    """What `train_index` trains and how it reports: the FAISS factory string, the rows sampled and
    the seed, on a GPU or not; `sides` names the parts in a NonFiniteRowError (mining checks the
    sample: FAISS would stop on it with a C++ message); `where` and `advice` frame the one-line
    error when FAISS cannot train."""

    factory: str
    size: int
    seed: int
    gpu: bool = False
    sides: tuple[str, ...] | None = None
    where: str = ""
    advice: str = "use --index-type flat or hnsw, a smaller --nlist, or a larger corpus"


def few_rows_advice(plan: dict, otherwise: str, *, dim: int) -> str:
    """What to do where an index of `plan` ({factory, nlist}) of `dim`-dimensional rows cannot be
    trained on the rows there are: only what would change something (was: "use ivfpqfs, a smaller
    --nlist" to an ivfpqfs run at nlist 1, and ivfpqfs for an odd dimension, which it refuses), then
    `otherwise`."""
    pq, fast_scan = pq_code(plan["factory"]) is not None, "x4fs" in plan["factory"]
    remedies = ["--index-type ivf (no codebook to train)"] * pq
    # (not where the dimension leaves fast-scan PQ coarse, `coarse_pq`: a helper at 766-d)
    fine_fast_scan = dim % 2 == 0 and not coarse_pq(dim, pq_subquantisers(dim, 64, even=True), 64)
    remedies += ["--index-type ivfpqfs (16 centroids a codebook, not 256)"] * (pq and not fast_scan and fine_fast_scan)
    remedies += ["a smaller --nlist"] * (plan["nlist"] > 1)
    return f"use {', '.join(remedies)}{', or ' if remedies else ''}{otherwise} for corpora this small"


def _fewer_than_faiss_wants(template, n: int, keep: list) -> str:
    """What of `template` (an untrained index) `n` training vectors leave short of FAISS's 39 per
    centroid ("" when nothing): said here once, and FAISS's own warning, printed once per
    sub-quantiser (64 lines for PQ64), turned off; it changes nothing but the warning. Objects the
    index now points at are put in `keep`, which must outlive its training (SWIG frees them with
    their last Python reference)."""
    import faiss

    try:
        ivf = faiss.downcast_index(faiss.extract_index_ivf(template))
    except RuntimeError:  # no inverted lists (HNSW, Flat are trained already)
        return ""
    short = []
    opq = _opq_of(template)
    if opq is not None:  # it trains a PQ of its own, 8 bits, per iteration: one warning a sub-quantiser each time
        pq = faiss.ProductQuantizer(opq.d_out, opq.M, 8)
        if n < pq.cp.min_points_per_centroid * pq.ksub:
            short.append(f"the OPQ rotation's PQ wants {pq.cp.min_points_per_centroid * pq.ksub:,} for its "
                         f"{pq.ksub} centroids")
            pq.cp.min_points_per_centroid = 1
            opq.pq = pq
            keep.append(pq)
    for name, params, centroids in (("the coarse quantiser", ivf.cp, ivf.nlist),
                                    *((("each PQ codebook", ivf.pq.cp, ivf.pq.ksub),) if hasattr(ivf, "pq") else ())):
        if n < params.min_points_per_centroid * centroids:
            short.append(f"{name} wants {params.min_points_per_centroid * centroids:,} for its {centroids} "
                         f"centroid{'s' if centroids > 1 else ''}")
            params.min_points_per_centroid = 1
    return "; ".join(short)


def _opq_of(template):
    """The OPQ rotation an index factory string put before the index (OPQ16,IVF...), else None."""
    import faiss

    if not isinstance(template, faiss.IndexPreTransform):
        template = faiss.downcast_index(template)
    if not isinstance(template, faiss.IndexPreTransform):
        return None
    for i in range(template.chain.size()):
        transform = faiss.downcast_VectorTransform(template.chain.at(i))
        if isinstance(transform, faiss.OPQMatrix):
            return transform
    return None


def _without_polysemous_training(index) -> None:
    """Turn off the polysemous training FAISS's factory asks of every PQ ("IVF64,PQ16", not "PQ16np"):
    it reorders each sub-quantiser's centroids for Hamming filtering (`polysemous_ht`), which xmine's
    searches never use, and costs seconds a sub-quantiser whatever the corpus (was: 2 minutes to train
    IVF15,PQ64 on 600 vectors; the codes' distances are the same, their numbering differs)."""
    faiss = faiss_computing()
    index = faiss.downcast_index(index)
    if hasattr(index, "do_polysemous_training"):
        index.do_polysemous_training = False
    for inner in ("index", "base_index", "storage"):  # a pre-transform (OPQ), a refinement, HNSW's codes
        if getattr(index, inner, None) is not None:
            _without_polysemous_training(getattr(index, inner))


def train_index(training: Training, *parts) -> bytes:
    """The empty index `training.factory`, trained on a seeded sample of `training.size` rows of
    `parts` (row views in one space: a corpus, or the two sides of a mining run), serialised.

    The sample depends only on the parts' lengths, the size and the seed, so every run (local or on
    Ray) trains on the same rows: each part but the last gives its share (size * n_i // N + 1), the
    last what is left."""
    faiss = faiss_computing()

    template = faiss.index_factory(parts[0].shape[1], training.factory, faiss.METRIC_INNER_PRODUCT)
    if template.is_trained:
        return bytes(faiss.serialize_index(template))
    rng = np.random.default_rng(training.seed)
    total, picks = sum(len(p) for p in parts), []
    for i, part in enumerate(parts):
        taken = sum(len(ids) for ids in picks)
        size = (min(len(part), training.size * len(part) // total + 1) if i < len(parts) - 1
                else min(len(part), training.size - taken) if training.size > taken else 0)
        picks.append(np.sort(rng.choice(len(part), size=size, replace=False)))
    sample = _stacked_f32(list(zip(parts, picks)))
    bad = np.flatnonzero(~np.isfinite(sample).all(axis=1)) if training.sides else ()
    if len(bad):
        part = int(np.searchsorted(np.cumsum([len(ids) for ids in picks]), bad[0], side="right"))
        raise NonFiniteRowError(training.sides[part], int(picks[part][bad[0] - sum(map(len, picks[:part]))]))
    _without_polysemous_training(template)
    keep: list = []
    short = _fewer_than_faiss_wants(template, len(sample), keep)
    if short:
        # (was: "fewer than FAISS's 39 per centroid" for IVF1 on 117 vectors, where the codebook was short)
        log.warning(f"{training.where}training {training.factory} on {len(sample):,} vectors, fewer than FAISS wants "
                    f"at 39 a centroid ({short}), so its centroids are coarse; {training.advice}")
    idx, res = to_gpu(template) if training.gpu else (template, None)
    t0 = time.perf_counter()
    try:
        idx.train(sample)
    except RuntimeError as e:  # FAISS: too few training points for the centroids, etc.
        advice = training.advice
        pq = pq_code(training.factory)
        codebook = 2 ** pq[1] if pq else 0  # centroids per PQ sub-quantiser
        if pq and len(sample) < codebook:  # a smaller --pq-m would not help
            advice = f"PQ learns {codebook} centroids per sub-quantiser, so it needs at least {codebook} vectors; {advice}"
        raise ConfigError(f"{training.where}cannot train {training.factory} on {len(sample):,} vectors "
                          f"({faiss_reason(e)}); {advice}") from None
    log.info("trained %s on %d vectors in %.0f s", training.factory, len(sample), time.perf_counter() - t0)
    return bytes(faiss.serialize_index(to_cpu(idx, res)))


# Sampled rows read at once: a sorted sample is read as the span it covers (`store.rows`), a few
# times its rows, so this bounds that read.
_SAMPLE_READ = 4096


def _stacked_f32(parts) -> np.ndarray:
    """Rows `ids` of each (view, ids) in `parts`, stacked in one float32 array filled `_SAMPLE_READ`
    rows at a time: memory is the sample itself, not copies of it in the stored dtype and float32."""
    out = np.empty((sum(len(ids) for _, ids in parts), parts[0][0].shape[1]), dtype=np.float32)
    at = 0
    for view, ids in parts:
        for c in range(0, len(ids), _SAMPLE_READ):
            got = view[ids[c : c + _SAMPLE_READ]]
            out[at : at + len(got)] = got
            at += len(got)
    return out


def with_threads(threads: int | None, fn, *args):
    """`fn(*args)` (a trainer, run as one unit) with `threads` BLAS and OpenMP threads: as many as a
    single-process run has on a machine of this size, because OPQ's rotation (an SVD) and k-means
    sum in an order that depends on the thread count, so equal counts give the same trained
    index. None: this process's own count."""
    import faiss
    from threadpoolctl import threadpool_limits

    if threads is None:
        return fn(*args)
    faiss.omp_set_num_threads(threads)
    with threadpool_limits(limits=threads):
        return fn(*args)


def add_unit(trained: bytes, rows, piece: int, start: int, stop: int, add_batch: int, use_gpu: bool,
             write_to: str | None, side: str | None = None, on_rows=None):
    """A unit of rows added (`add_rows` start:stop): (piece, rows, None) with the index written to
    `write_to` (atomically), or (piece, rows, the index serialised) without."""
    import faiss

    index = add_rows(trained, rows, start, stop, add_batch=add_batch, use_gpu=use_gpu, side=side, on_rows=on_rows)
    if write_to is not None:
        with atomic_path(write_to) as tmp:
            faiss.write_index(index, str(tmp))
        return piece, stop - start, None
    return piece, stop - start, bytes(faiss.serialize_index(index))


def merge_piece(dst, piece: bytes):
    """`dst` (None before the first piece) with the serialised piece's vectors after its own (ids
    shifted to follow them)."""
    import faiss

    src = faiss.deserialize_index(np.frombuffer(piece, dtype=np.uint8))
    if dst is None:
        return src
    try:
        ivf_dst, ivf_src = faiss.extract_index_ivf(dst), faiss.extract_index_ivf(src)
    except RuntimeError:  # not IVF (Flat): plain concatenation of codes
        dst.merge_from(src)
    else:
        ivf_dst.merge_from(ivf_src, ivf_dst.ntotal)
        dst.ntotal = ivf_dst.ntotal  # an OPQ wrapper counts its own rows
    return dst


def add_rows(trained: bytes, embeddings, start: int, stop: int, *, add_batch: int, use_gpu: bool,
             on_rows=None, side: str | None = None):
    """A copy of the trained index holding rows start:stop of `embeddings` (ids 0..stop-start-1),
    on CPU; `on_rows(count)` after each batch added. A row holding NaN or inf raises
    NonFiniteRowError(side, row) (`side`: "src"/"tgt" in mining, else "source"): FAISS would index
    it silently, and every search would then miss (was: checked in mining only)."""
    faiss = faiss_computing()

    index = faiss.deserialize_index(np.frombuffer(trained, dtype=np.uint8))
    idx, res = to_gpu(index) if use_gpu else (index, None)
    for b in range(start, stop, add_batch):
        block = as_f32(embeddings[b : min(b + add_batch, stop)])
        bad = np.flatnonzero(~np.isfinite(block).all(axis=1))
        if len(bad):
            raise NonFiniteRowError(side or "source", b + int(bad[0]))
        idx.add(block)
        if on_rows is not None:
            on_rows(min(b + add_batch, stop) - b)
    return to_cpu(idx, res)  # a GPU index must be on CPU before write_index
