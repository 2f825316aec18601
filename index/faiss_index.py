"""An index directory on disk: its layout, opening and checking it, and searching its FAISS shards
(GPU if present). Building one: `xmine.index.build`.

An index directory holds:
- `manifest.json` (kind "index", read as an `IndexManifest`): encoder and projection fingerprints,
  the index choice, the shards (file, first row, rows), the source and provenance;
- `shard_00000.faiss`, ...: one FAISS index per `shard_rows` rows (all shards share one trained
  quantiser), searched one after another with their top-k merged;
- `sentences.txt` (one sentence a line) and `line_numbers.npy` (1-based input lines), so searches
  return text; for a corpus split into sentences (--split-sentences), `sentence_index.npy`
  (each row's 1-based index in its record).
The directory is written atomically (built beside the target, then renamed).

FAISS at run time: the GPUs it reports, moving an index there and back (every index type xmine
builds, with a warning where FAISS cannot), and the reason in its errors. When FAISS reports GPUs
(`faiss.get_num_gpus() > 0`, the `gpu` extra installs faiss-gpu), training, adding and searching
run there; indexes are moved back with `index_gpu_to_cpu` before `write_index`. GPU symbols are
looked up at run time only, so faiss-cpu works unchanged.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xmine.errors import ArtefactError
from xmine.artefacts.fileio import MANIFEST, VerifiedFiles, atomic_path, check_names, read_manifest
from xmine.artefacts.ownership import register_own_files, temporary_folder
from xmine.artefacts.records import EncoderFingerprint, FileRecord, ProjectionFingerprint, Record
from xmine.index.choose import IndexChoice
from xmine.store.layout import LINE_NUMBERS, SENTENCE_INDEX, SENTENCES
from xmine.store.text import RowIndex, TextColumn, check_sentences, read_sentences

log = logging.getLogger(__name__)

KIND = "index"
FORMAT_VERSION = 2


def faiss_computing():
    """The faiss module, with FAISS's own Ctrl-C check switched off in this process: FAISS throws
    it from inside the OpenMP regions of some searches (IVF fast-scan), which ends the process
    (SIGABRT, exit 134: was so for Ctrl-C during `mine --approximate`), and from a training as
    "computation interrupted", which read as an index that cannot be trained. Ctrl-C is then
    Python's KeyboardInterrupt once the call returns (a block of queries, one training), which the
    command says as an interruption. Called by every function that has FAISS compute."""
    import faiss

    faiss.InterruptCallback.clear_instance()
    return faiss


@dataclass(frozen=True, kw_only=True)
class IndexShard(Record):
    """One FAISS shard of an index: its file and the rows of the index it holds."""

    file: str  #: its .faiss file, relative to the index directory
    start: int  #: its first row in the index
    rows: int  #: rows it holds


@dataclass(frozen=True, kw_only=True)
class IndexManifest(Record):
    """`manifest.json` of an index directory (see the module doc)."""

    kind: str  #: "index"
    format_version: int  #: `FORMAT_VERSION`
    files: dict[str, FileRecord]  #: every file but the manifest, by name
    encoder: EncoderFingerprint  #: the encoder its vectors come from
    projection: ProjectionFingerprint | None  #: the projection they went through (None: raw embeddings)
    part: str | None  #: "raw" or "meaning" (None: not recorded, raw)
    lang: str | None  #: the corpus language code, if known
    count: int  #: rows
    dim: int  #: vector dimension
    choice: IndexChoice  #: the FAISS index and its search parameters
    built_on_gpu: bool  #: whether FAISS trained and added on a GPU
    shards: tuple[IndexShard, ...]  #: the shards in row order
    source: dict | None  #: what was indexed (a text file or a store; `corpus`: what line numbers count in)
    provenance: dict  #: what made it (xmine.artefacts.directory.provenance)


def shard_plan(n: int, shard_rows: int) -> list[tuple[int, int]]:
    """(start, stop) rows of each shard."""
    return [(start, min(start + shard_rows, n)) for start in range(0, n, shard_rows)]


def _index_file(path: Path) -> bool:
    """A file build-index writes into its temporary folder (one a killed run left: xmine.artefacts.leftovers)."""
    return path.name in (SENTENCES, LINE_NUMBERS, SENTENCE_INDEX) or bool(re.fullmatch(r"shard_\d{5}\.faiss", path.name))


register_own_files(folder=temporary_folder, file=_index_file)


def shard_name(s: int) -> str:
    return f"shard_{s:05d}.faiss"


def read_index(path, *, remedy: str = "the index is damaged, rebuild it"):
    """The FAISS index in the file `path`; one FAISS cannot read is a one-line ArtefactError."""
    import faiss

    try:
        return faiss.read_index(str(path))
    except RuntimeError as e:
        detail = str(e).strip().splitlines()[-1] if str(e).strip() else "FAISS could not read it"
        raise ArtefactError(f"{path}: unreadable FAISS index ({detail}); {remedy}") from None


def is_serialised_index(data: bytes) -> bool:
    """Whether `data` (what faiss.serialize_index gives) is an index FAISS reads back."""
    import faiss

    try:
        faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except RuntimeError:
        return False
    return True


def faiss_reason(e: RuntimeError) -> str:
    """The reason in a FAISS RuntimeError ("Error in ... failed: <why>"), on one line."""
    detail = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    return detail.rpartition("failed: ")[2] or detail


def gpu_count() -> int:
    import faiss

    get = getattr(faiss, "get_num_gpus", None)
    try:
        return int(get()) if get is not None else 0
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not break CPU use
        return 0


def units_use_gpus(executor) -> bool:
    """Whether FAISS work units run on GPUs: the cluster's when `executor` knows them (the
    driver's own GPUs do not count there), else this machine's."""
    gpus = executor.gpus()
    return (gpu_count() if gpus is None else gpus) > 0


def to_gpu(index):
    """(gpu_index, resources), or (index, None) with a WARNING when FAISS cannot put this index
    type on the GPU (HNSW has no GPU version): never silently."""
    import faiss

    try:
        res = faiss.StandardGpuResources()
        # IVF-PQ with many sub-quantisers (PQ64 at 384 dimensions) does not fit the GPU's shared
        # memory with float32 lookup tables; FAISS's GPU IVFPQ supports it with float16 tables.
        options = faiss.GpuClonerOptions()
        options.useFloat16LookupTables = True
        return faiss.index_cpu_to_gpu(res, 0, index, options), res
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        log.warning("%s stays on the CPU: FAISS cannot move it to the GPU even with float16 lookup "
                    "tables (%s); use --index-type ivf/ivfpq/opq/flat for GPU search, or --cpu",
                    type(index).__name__, reason)
        return index, None


def to_cpu(index, res):
    import faiss

    return faiss.index_gpu_to_cpu(index) if res is not None else index


class IndexDir:
    """An index directory on disk (see module doc)."""

    def __init__(self, path: Path, manifest: IndexManifest):
        self.path, self.manifest = path, manifest
        #: the encoder its vectors come from, and its files (name -> bytes, sha256)
        self.encoder, self.files = manifest.encoder, manifest.files

    @classmethod
    def open(cls, path: str | Path) -> "IndexDir":
        path = Path(path)
        manifest = read_manifest(path, KIND, format_version=FORMAT_VERSION)
        ix = cls(path, IndexManifest.from_dict(manifest, where=str(path / MANIFEST)))
        ix._check_names()
        ix._check_shard_rows()
        ix.content.check_sizes()
        ix.content.check_if_small()
        return ix

    def _check_names(self) -> None:
        """Every file the manifest names is one the builder makes, by its exact name (shard i:
        `shard_0000i.faiss`), before any path is made of it; the shards and text are all recorded,
        so FAISS never parses a file the manifest's sha256 sums do not cover."""
        where, m = self.path / MANIFEST, self.manifest
        own = [shard_name(i) for i in range(len(m.shards))]
        for i, shard in enumerate(m.shards):
            check_names([shard.file], {own[i]}, where=f"{where}: shards[{i}]", what="index")
        check_names(self.files, {SENTENCES, LINE_NUMBERS, SENTENCE_INDEX, *own}, where=f"{where}: files", what="index")
        missing = [n for n in (SENTENCES, LINE_NUMBERS, *own) if n not in self.files]
        if missing:
            raise ArtefactError(f"{where}: files: {missing[0]} is not recorded; the index is damaged, rebuild it")

    def _check_shard_rows(self) -> None:
        """The shards hold the index's rows in order, each after the last, and all of them (was:
        shards[0] starting at row 5 read rows past the end)."""
        where, m = self.path / MANIFEST, self.manifest
        start = 0
        for i, shard in enumerate(m.shards):
            if shard.start != start or shard.rows < 0:
                raise ArtefactError(f"{where}: shards[{i}] starts at row {shard.start} with {shard.rows} rows, where "
                                    f"the shards before it end at row {start}; the index is damaged, rebuild it")
            start += shard.rows
        if start != m.count:
            raise ArtefactError(f"{where}: its shards hold {start} rows, not its count {m.count}; the index is "
                                "damaged, rebuild it")

    @property
    def content(self) -> VerifiedFiles:
        """sha256 of every file."""
        return VerifiedFiles(self.path, self.files, what="index")

    def verify(self) -> int:
        """Check every file against the manifest's sha256 and load every shard; return bytes checked."""
        n = self.content.check_all()
        for s in range(len(self.manifest.shards)):
            self.load_shard(s)
        check_sentences(self.path / SENTENCES, len(self), "index")  # (was: every sentence in a list)
        self.line_numbers  # noqa: B018 - loads and checks it
        return n

    def __len__(self) -> int:
        return self.manifest.count

    @property
    def dim(self) -> int:
        return self.manifest.dim

    def _integers(self, name: str, what: str) -> np.ndarray:
        """The index's array `name`: one integer a row (checked), or ArtefactError."""
        path = self.path / name
        self.content.check(name)
        try:
            numbers = np.load(path)
        except (ValueError, OSError, EOFError) as e:
            raise ArtefactError(f"{path}: unreadable ({e}); the index is damaged, rebuild it") from None
        if numbers.shape != (len(self),) or numbers.dtype.kind not in "iu":
            raise ArtefactError(f"{path}: {numbers.shape} {numbers.dtype}, expected {len(self)} integer {what}; "
                                "the index is damaged, rebuild it")
        if len(numbers) and numbers.min() < 1:  # (1-based, as every xmine output counts them; was: line -1 shown)
            raise ArtefactError(f"{path}: holds {int(numbers.min())}, where {what} count from 1; the index is "
                                "damaged, rebuild it")
        return numbers

    @property
    def line_numbers(self) -> np.ndarray:
        return self._integers(LINE_NUMBERS, "line numbers")

    @property
    def sentence_index(self) -> np.ndarray | None:
        """Each row's 1-based index in its record (an index of a corpus split into sentences), else None."""
        return self._integers(SENTENCE_INDEX, "sentence indices") if SENTENCE_INDEX in self.files else None

    def sentences(self) -> list[str]:
        self.content.check(SENTENCES)
        return read_sentences(self.path / SENTENCES, len(self), "index")

    def text_column(self) -> tuple:
        """(the text column: row i's sentence by offset, `xmine.store.text.TextColumn`; its row index,
        `RowIndex`), scanned from `sentences.txt` once that file is checked against the manifest; a
        wrong line count names the file."""
        path = self.path / SENTENCES
        self.content.check(SENTENCES)
        with open(path, "rb") as f:
            row_index = RowIndex.scan(f, count=len(self), where=path)
        return TextColumn(path, row_index.offsets), row_index

    def load_shard(self, s: int):
        """Shard number s as a FAISS index (read from disk and checked; not kept)."""
        shard = self.manifest.shards[s]
        path = self.path / shard.file
        self.content.check(shard.file)
        index = read_index(path)
        if index.ntotal != shard.rows or index.d != self.dim:
            raise ArtefactError(f"{path}: holds {index.ntotal} vectors of dimension {index.d}, the manifest "
                                f"says {shard.rows} of {self.dim}; the index is damaged, rebuild it")
        import faiss

        if index.metric_type != faiss.METRIC_INNER_PRODUCT:  # (an L2 index: distances ranked as similarities)
            raise ArtefactError(f"{path}: a FAISS index of another metric ({index.metric_type}) than xmine's inner "
                                "product; the index is damaged, rebuild it")
        # of the type the manifest's factory builds (was: an IndexIDMap shard aborted the process in
        # FAISS's reconstruct, or, with ids of its own, returned other rows without a word)
        made = _factory_type(self.dim, self.manifest.choice.factory)
        if not isinstance(index, made):
            raise ArtefactError(f"{path}: a FAISS {type(index).__name__}, not the {made.__name__} the manifest's "
                                f"{self.manifest.choice.factory!r} builds; the index is damaged, rebuild it")
        _check_unit_rows(index, path)
        return index

    def reconstruct_to(self, out: str | Path) -> None:
        """The stored vectors (exact for Flat/HNSW/IVF-Flat, approximate for PQ), float32 (n, dim),
        written to the .npy file `out` (atomically) one shard at a time, `RECONSTRUCT_BLOCK` rows at
        a time: memory holds one shard, not the corpus (was: one array of every row in memory;
        measured: docs/scaling.md)."""
        import faiss

        with atomic_path(out) as tmp:
            rows = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(self), self.dim))
            for s, shard in enumerate(self.manifest.shards):
                index = self.load_shard(s)
                try:
                    faiss.extract_index_ivf(index).make_direct_map()
                except RuntimeError:
                    pass  # not an IVF index
                for start in range(0, shard.rows, RECONSTRUCT_BLOCK):
                    count = min(RECONSTRUCT_BLOCK, shard.rows - start)
                    rows[shard.start + start: shard.start + start + count] = index.reconstruct_n(start, count)
                del index
            rows.flush()
            del rows


#: rows of a shard reconstructed at once (`IndexDir.reconstruct_to`): 64k x dim float32
RECONSTRUCT_BLOCK = 65_536


@functools.lru_cache(maxsize=8)
def _factory_type(dim: int, factory: str) -> type:
    """The FAISS class `index_factory` builds for `factory` (built once per index, not per shard)."""
    import faiss

    return type(faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT))


#: how many of a shard's stored rows `_check_unit_rows` reads, spread over the shard
_NORM_SAMPLE = 64


def _check_unit_rows(index, path: Path) -> None:
    """A Flat or HNSW shard stores its vectors as they were given: xmine gives unit rows, so a
    sample of them must be unit length (was: a shard of scaled vectors, its sha256 recomputed,
    passed `verify` and gave cosines above 1 and another threshold). Indexes that store codes
    (IVF, PQ) are left to their checks above."""
    import faiss

    if not isinstance(index, (faiss.IndexFlat, faiss.IndexHNSW)) or index.ntotal == 0:
        return
    rows = np.unique(np.linspace(0, index.ntotal - 1, min(_NORM_SAMPLE, index.ntotal)).astype(np.int64))
    norms = np.linalg.norm(np.stack([index.reconstruct(int(i)) for i in rows]), axis=1)
    if not np.all(np.abs(norms - 1) < 1e-2):
        worst = int(np.argmax(np.abs(norms - 1)))
        raise ArtefactError(f"{path}: row {int(rows[worst]) + 1} of the shard has length {float(norms[worst]):.4g}, where "
                            "xmine stores unit vectors; the index is damaged, rebuild it")


def shard_searcher(index, shard: IndexShard, choice: IndexChoice, *, nprobe: int | None, use_gpu: bool):
    """`search(queries, k)` over one shard: top-k of float32 `queries` (sims, rows of the whole index;
    -1 when fewer), with the search parameters set and the index moved to the GPU once."""
    faiss = faiss_computing()

    ps = faiss.ParameterSpace()
    if choice.nlist:
        ps.set_index_parameter(index, "nprobe", nprobe or choice.nprobe)
    if choice.ef_search:
        ps.set_index_parameter(index, "efSearch", choice.ef_search)
    idx, res = to_gpu(index) if use_gpu else (index, None)

    def search(queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        _ = res  # the GPU resources live as long as the index on them
        s, i = idx.search(queries, min(k, shard.rows))
        if (i >= shard.rows).any():  # (an id map's ids: was an IndexError where the text is looked up)
            raise ArtefactError(f"{shard.file}: returned row {int(i.max())} of a shard of {shard.rows} rows: not a "
                                "shard xmine built (its ids are not its rows); rebuild the index")
        return s, np.where(i >= 0, i + shard.start, -1)

    return search


def ivf_list_members(index, qv: np.ndarray, nprobe: int):
    """For each IVF list that some query of `qv` visits (its `nprobe` nearest centroids, as the
    index's own search visits them): (the queries visiting it, the list's row ids in the index).
    Approximate mining's refinement compares those rows by their stored vectors."""
    faiss = faiss_computing()

    ivf = faiss.extract_index_ivf(index)
    _, lists = ivf.quantizer.search(qv, min(nprobe, ivf.nlist))
    flat = lists.ravel()
    order = np.argsort(flat, kind="stable")
    qrow = order // lists.shape[1]
    starts = np.flatnonzero(np.r_[True, flat[order][1:] != flat[order][:-1]])
    invlists = ivf.invlists
    for a, b in zip(starts, np.r_[starts[1:], len(order)]):
        lst = int(flat[order[a]])
        if lst < 0 or invlists.list_size(lst) == 0:  # -1: fewer lists than asked for
            continue
        size = invlists.list_size(lst)
        ptr = invlists.get_ids(lst)
        members = faiss.rev_swig_ptr(ptr, size).astype(np.int64)  # a copy
        invlists.release_ids(lst, ptr)
        yield np.unique(qrow[a:b]), members
