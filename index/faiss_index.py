"""Build, write, open and search FAISS index directories (optionally sharded, GPU if present).

An index directory holds:
- `manifest.json` (kind "index"): encoder and projection fingerprints, part, lang, count, dim, the
  index choice (factory, nlist, nprobe, reason), the shards (file, first row, rows), the source and
  provenance;
- `shard_00000.faiss`, ...: one FAISS index per `shard_rows` rows (all shards share one trained
  quantiser), searched one after another with their top-k merged;
- `sentences.txt` (one sentence a line) and `line_numbers.npy` (1-based input lines), so searches
  return text; for a corpus split into sentences (--split-sentences), `sentence_index.npy`
  (each row's 1-based index in its record).
The directory is written atomically (built beside the target, then renamed).

GPU: when FAISS reports GPUs (`faiss.get_num_gpus() > 0`, the `gpu` extra installs faiss-gpu),
training, adding and searching run there; indexes are moved back with `index_gpu_to_cpu` before
`write_index`. GPU symbols are looked up at run time only, so faiss-cpu works unchanged.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.artefacts import atomic_dir, provenance
from xmine.fileio import VerifiedFiles, read_manifest, sha256_file, write_manifest
from xmine.errors import ArtefactError, ConfigError, NonFiniteRowError
from xmine.index.choose import IndexChoice, choose_index
from xmine.store.layout import SENTENCE_INDEX
from xmine.topk import merge_topk

log = logging.getLogger(__name__)
KIND = "index"
FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """How to build an index."""

    #: "auto" (choose by size, see xmine.index.choose), "flat", "ivf", "hnsw", "ivfpq" or "opq"
    kind: str = "auto"
    #: rows per shard (each shard its own .faiss file); None = one shard
    shard_rows: int | None = None
    #: IVF lists (None: by corpus size)
    nlist: int | None = None
    #: IVF lists searched per query (None: the choice's default)
    nprobe: int | None = None
    #: PQ sub-quantisers (bytes per vector) for "ivfpq"/"opq"; the largest divisor of dim <= this
    pq_m: int = 64
    #: bits per PQ code (8 = 256 centroids per sub-quantiser)
    pq_bits: int = 8
    #: seed of the training sample
    seed: int = 0
    #: use GPUs when FAISS reports some (False forces CPU)
    gpu: bool = True
    #: memory the index may take, bytes (None: a quarter of physical memory); used by "auto"
    memory_budget: int | None = None
    #: rows added per call (bounds the float32 copy of float16/memory-mapped embeddings)
    add_batch: int = 65_536

    def __post_init__(self):
        for name in ("shard_rows", "nlist", "nprobe"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be a whole number >= 1 (got {value!r})")
        if self.pq_m < 1 or self.pq_bits < 1 or self.add_batch < 1:
            raise ConfigError(f"pq_m, pq_bits and add_batch must be >= 1 (got {self.pq_m}, {self.pq_bits}, "
                              f"{self.add_batch})")
        if self.memory_budget is not None and not self.memory_budget > 0:
            raise ConfigError(f"memory_budget must be > 0 bytes (got {self.memory_budget!r})")


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


def _gpu_options():
    """Cloner options that let every index type xmine builds move to the GPU.

    IVF-PQ with many sub-quantisers (PQ64 at 384 dimensions) does not fit the GPU's shared
    memory with float32 lookup tables; FAISS's GPU IVFPQ supports it with float16 tables.
    """
    import faiss

    options = faiss.GpuClonerOptions()
    options.useFloat16LookupTables = True
    return options


def _to_gpu(index):
    """(gpu_index, resources), or (index, None) with a WARNING when FAISS cannot put this index
    type on the GPU (HNSW has no GPU version): never silently."""
    import faiss

    try:
        res = faiss.StandardGpuResources()
        return faiss.index_cpu_to_gpu(res, 0, index, _gpu_options()), res
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        log.warning("%s stays on the CPU: FAISS cannot move it to the GPU even with float16 lookup "
                    "tables (%s); use --type ivf/ivfpq/opq/flat for GPU search, or --cpu",
                    type(index).__name__, reason)
        return index, None


def _to_cpu(index, res):
    import faiss

    return faiss.index_gpu_to_cpu(index) if res is not None else index


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def set_search_params(index, choice: dict, nprobe: int | None = None) -> None:
    import faiss

    ps = faiss.ParameterSpace()
    if choice.get("nlist"):
        ps.set_index_parameter(index, "nprobe", int(nprobe or choice["nprobe"]))
    if choice.get("ef_search"):
        ps.set_index_parameter(index, "efSearch", int(choice["ef_search"]))


def build_index(
    embeddings: np.ndarray,
    out_dir: str | Path,
    *,
    sentences: "Sequence[str] | Path",
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
) -> "IndexDir":
    """Index `embeddings` (n, dim; float32/float16, memory-mapped or a row view read on demand) into
    `out_dir`. `sentences`: the text of every row, as a list or as a file of one sentence a line
    (copied, e.g. a store's sentences.txt).

    An existing `out_dir` is replaced only when it is an xmine index and `overwrite` is given
    (`xmine.artefacts.atomic_dir`); callers that take user paths claim it first
    (`xmine.outputs.claim_output`), which also refuses inputs and a second writer.
    """
    import faiss
    from tqdm.auto import tqdm

    n, dim = embeddings.shape
    text_file = Path(sentences) if isinstance(sentences, (str, Path)) else None
    n_text = _count_lines(text_file) if text_file is not None else len(sentences)
    if n_text != n or len(line_numbers) != n:
        raise ConfigError(f"{n} embeddings but {n_text} sentences / {len(line_numbers)} line numbers")
    use_gpu = config.gpu and gpu_count() > 0
    choice, shard_rows = resolve_choice(n, dim, config, use_gpu)

    trained = train_index(embeddings, choice, seed=config.seed, use_gpu=use_gpu)
    plan = shard_plan(n, shard_rows)
    with atomic_dir(out_dir, kind=KIND, overwrite=overwrite) as tmp:
        # `with`: the bar ends its line before an error is printed, so the error stays one line.
        with tqdm(total=n, desc=f"indexing ({choice.factory})", unit="vec", disable=not show_progress) as bar:
            for s, (start, stop) in enumerate(plan):
                index = add_rows(trained, embeddings, start, stop, add_batch=config.add_batch, use_gpu=use_gpu,
                                 on_rows=bar.update)
                faiss.write_index(index, str(tmp / shard_name(s)))
                del index
        write_index_files(tmp, plan, sentences=sentences, line_numbers=line_numbers, sentence_index=sentence_index,
                          encoder=encoder,
                          projection=projection, part=part, lang=lang, dim=dim, choice=choice, use_gpu=use_gpu,
                          source=source, config=config)
    log.info("index: %s (%s)", choice.factory, choice.reason)
    return IndexDir.open(out_dir)


def resolve_choice(n: int, dim: int, config: IndexConfig, use_gpu: bool) -> tuple[IndexChoice, int]:
    """The index to build for n vectors of dim (see xmine.index.choose) and the rows per shard."""
    choice = choose_index(n, dim, kind=config.kind, gpu=use_gpu, memory_budget=config.memory_budget,
                          nlist=config.nlist, pq_m=config.pq_m, pq_bits=config.pq_bits)
    if config.nprobe:
        choice = IndexChoice(**{**choice.to_dict(), "nprobe": int(config.nprobe)})
    shard_rows = int(config.shard_rows or n)
    if shard_rows < 1:
        raise ConfigError(f"shard_rows must be >= 1 (got {config.shard_rows})")
    if choice.nlist and shard_rows < choice.nlist:
        raise ConfigError(f"shards of {shard_rows} rows cannot fill {choice.nlist} IVF lists; "
                          "use larger shards or --nlist")
    return choice, shard_rows


def shard_plan(n: int, shard_rows: int) -> list[tuple[int, int]]:
    """(start, stop) rows of each shard."""
    return [(start, min(start + shard_rows, n)) for start in range(0, n, shard_rows)]


def shard_name(s: int) -> str:
    return f"shard_{s:05d}.faiss"


def train_index(embeddings, choice: IndexChoice, *, seed: int, use_gpu: bool) -> bytes:
    """The empty index `choice.factory`, trained on a seeded sample of `embeddings`, serialised.

    The sample depends only on (n, seed), so every run (local or on Ray) trains on the same rows.
    """
    import faiss

    n, dim = embeddings.shape
    template = faiss.index_factory(dim, choice.factory, faiss.METRIC_INNER_PRODUCT)
    if not template.is_trained:
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(n, size=choice.train_size, replace=False))
        train = _f32(embeddings[sample])
        idx, res = _to_gpu(template) if use_gpu else (template, None)
        log.info("training %s on %d vectors", choice.factory, len(train))
        try:
            idx.train(train)
        except RuntimeError as e:  # FAISS: too few training points for the centroids, etc.
            raise ConfigError(f"cannot train {choice.factory} on {len(train):,} vectors ({faiss_reason(e)}); "
                              "use --type flat or hnsw, a smaller --nlist / --pq-m, or a larger corpus") from None
        template = _to_cpu(idx, res)
    return bytes(faiss.serialize_index(template))


def add_rows(trained: bytes, embeddings, start: int, stop: int, *, add_batch: int, use_gpu: bool,
             on_rows=None, side: str | None = None):
    """A copy of the trained index holding rows start:stop of `embeddings` (ids 0..stop-start-1),
    on CPU; `on_rows(count)` after each batch added. With `side` ("src"/"tgt", mining), a row
    holding NaN or inf raises NonFiniteRowError(side, row): FAISS would index it silently."""
    import faiss

    index = faiss.deserialize_index(np.frombuffer(trained, dtype=np.uint8))
    idx, res = _to_gpu(index) if use_gpu else (index, None)
    for b in range(start, stop, add_batch):
        block = _f32(embeddings[b : min(b + add_batch, stop)])
        if side is not None:
            bad = np.flatnonzero(~np.isfinite(block).all(axis=1))
            if len(bad):
                raise NonFiniteRowError(side, b + int(bad[0]))
        idx.add(block)
        if on_rows is not None:
            on_rows(min(b + add_batch, stop) - b)
    return _to_cpu(idx, res)  # a GPU index must be on CPU before write_index


def write_index_files(tmp: Path, plan, *, sentences, line_numbers, encoder, projection, part, lang, dim: int,
                      choice: IndexChoice, use_gpu: bool, source, config: IndexConfig,
                      sentence_index: np.ndarray | None = None) -> None:
    """The text, line numbers (and sentence indices of a corpus split into sentences) and manifest
    of an index directory whose shards are written."""
    n = plan[-1][1]
    if isinstance(sentences, (str, Path)):  # the text file of a store or of the input
        shutil.copyfile(sentences, tmp / "sentences.txt")
    else:
        (tmp / "sentences.txt").write_text("".join(f"{t}\n" for t in sentences), encoding="utf-8")
    np.save(tmp / "line_numbers.npy", np.asarray(line_numbers, dtype=np.int64))
    if sentence_index is not None:
        if len(sentence_index) != n:
            raise ConfigError(f"{n} rows but {len(sentence_index)} sentence indices")
        np.save(tmp / SENTENCE_INDEX, np.asarray(sentence_index, dtype=np.int32))
    shards = [{"file": shard_name(s), "start": start, "rows": stop - start} for s, (start, stop) in enumerate(plan)]
    files = {p.name: {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in sorted(tmp.iterdir())}
    write_manifest(tmp, KIND, {
        "files": files,
        "encoder": encoder, "projection": projection, "part": part, "lang": lang,
        "count": n, "dim": dim, "choice": choice.to_dict(), "built_on_gpu": use_gpu,
        "shards": shards, "source": source,
        "provenance": provenance(kind=config.kind, shard_rows=config.shard_rows, nlist=config.nlist,
                                 nprobe=config.nprobe, pq_m=config.pq_m, seed=config.seed),
    }, format_version=FORMAT_VERSION)


class IndexDir:
    """An index directory on disk (see module doc)."""

    def __init__(self, path: Path, manifest: dict):
        self.path = path
        self.manifest = manifest
        self._loaded: dict[str, object] = {}
        self._sentences: list[str] | None = None

    @classmethod
    def open(cls, path: str | Path) -> "IndexDir":
        path = Path(path)
        manifest = read_manifest(path, KIND)
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ArtefactError(f"{path}: index format {manifest.get('format_version')} not supported")
        for shard in manifest["shards"]:
            if not (path / shard["file"]).is_file():
                raise ArtefactError(f"{path}: shard {shard['file']} is missing")
        ix = cls(path, manifest)
        ix.content.check_if_small()
        return ix

    @property
    def content(self) -> VerifiedFiles:
        """sha256 of every file (indexes built before they were recorded have none to check)."""
        return VerifiedFiles(self.path, self.manifest.get("files") or {}, what="index")

    def verify(self) -> int:
        """Check every file against the manifest's sha256 and load every shard; return bytes checked."""
        n = self.content.check_all()
        for shard in self.manifest["shards"]:
            self._shard(shard, keep=False)
        self.sentences()
        self.line_numbers  # noqa: B018 - loads and checks it
        return n

    def __len__(self) -> int:
        return int(self.manifest["count"])

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def line_numbers(self) -> np.ndarray:
        path = self.path / "line_numbers.npy"
        self.content.check(path.name)
        try:
            numbers = np.load(path)
        except (ValueError, OSError, EOFError) as e:
            raise ArtefactError(f"{path}: unreadable ({e}); the index is damaged, rebuild it") from None
        if numbers.shape != (len(self),) or numbers.dtype.kind not in "iu":
            raise ArtefactError(f"{path}: {numbers.shape} {numbers.dtype}, expected {len(self)} integer line "
                                "numbers; the index is damaged, rebuild it")
        return numbers

    @property
    def sentence_index(self) -> np.ndarray | None:
        """Each row's 1-based index in its record (an index of a corpus split into sentences), else None."""
        path = self.path / SENTENCE_INDEX
        if SENTENCE_INDEX not in (self.manifest.get("files") or {}):
            return None
        self.content.check(path.name)
        try:
            numbers = np.load(path)
        except (ValueError, OSError, EOFError) as e:
            raise ArtefactError(f"{path}: unreadable ({e}); the index is damaged, rebuild it") from None
        if numbers.shape != (len(self),):
            raise ArtefactError(f"{path}: {numbers.shape}, expected {len(self)} sentence indices; rebuild the index")
        return numbers

    def sentences(self) -> list[str]:
        if self._sentences is None:
            path = self.path / "sentences.txt"
            self.content.check(path.name)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ArtefactError(f"{path}: missing; the index is damaged, rebuild it") from None
            except UnicodeDecodeError as e:
                raise ArtefactError(f"{path}: not UTF-8 ({e.reason}); the index is damaged, rebuild it") from None
            self._sentences = text.split("\n")[:-1]
            if len(self._sentences) != len(self):
                raise ArtefactError(f"{self.path}/sentences.txt: {len(self._sentences)} lines, expected {len(self)}")
        return self._sentences

    def _shard(self, shard: dict, *, keep: bool):
        import faiss

        index = self._loaded.get(shard["file"])
        if index is None:
            path = self.path / shard["file"]
            self.content.check(shard["file"])
            try:
                index = faiss.read_index(str(path))
            except RuntimeError as e:
                detail = str(e).strip().splitlines()[-1] if str(e).strip() else "FAISS could not read it"
                raise ArtefactError(f"{path}: unreadable FAISS index ({detail}); the index is damaged, "
                                    "rebuild it") from None
            if index.ntotal != shard["rows"] or index.d != self.dim:
                raise ArtefactError(f"{path}: holds {index.ntotal} vectors of dimension {index.d}, the manifest "
                                    f"says {shard['rows']} of {self.dim}; the index is damaged, rebuild it")
            if keep:
                self._loaded[shard["file"]] = index
        return index

    def search(self, queries: np.ndarray, k: int, *, nprobe: int | None = None,
               gpu: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (sims, rows) of each query over all shards, highest first; rows -1 when fewer hits."""
        queries = _f32(queries)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ConfigError(f"queries have shape {queries.shape}, index dimension is {self.dim}")
        shards = self.manifest["shards"]
        keep = len(shards) == 1  # several shards exist because they do not fit in memory together
        use_gpu = gpu and gpu_count() > 0
        all_s, all_i = [], []
        for shard in shards:
            s, i = search_shard(self._shard(shard, keep=keep), shard, self.manifest["choice"], queries, k,
                                nprobe=nprobe, use_gpu=use_gpu)
            all_s.append(s)
            all_i.append(i)
        return merge_topk(all_s, all_i, k)

    def load_shard(self, s: int):
        """Shard number s as a FAISS index (read from disk; not kept)."""
        return self._shard(self.manifest["shards"][s], keep=False)

    def reconstruct(self) -> np.ndarray:
        """The stored vectors (exact for Flat/HNSW/IVF-Flat, approximate for PQ), float32 (n, dim)."""
        import faiss

        out = np.empty((len(self), self.dim), dtype=np.float32)
        for shard in self.manifest["shards"]:
            index = self._shard(shard, keep=False)
            try:
                faiss.extract_index_ivf(index).make_direct_map()
            except RuntimeError:
                pass  # not an IVF index
            out[shard["start"] : shard["start"] + shard["rows"]] = index.reconstruct_n(0, shard["rows"])
        return out


def search_shard(index, shard: dict, choice: dict, queries: np.ndarray, k: int, *, nprobe: int | None,
                 use_gpu: bool) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of float32 `queries` in one shard: (sims, rows of the whole index; -1 when fewer)."""
    return shard_searcher(index, shard, choice, nprobe=nprobe, use_gpu=use_gpu)(queries, k)


def shard_searcher(index, shard: dict, choice: dict, *, nprobe: int | None, use_gpu: bool):
    """`search(queries, k)` over one shard, as `search_shard`, with the search parameters set and
    the index moved to the GPU once, for callers that search a shard block after block."""
    set_search_params(index, choice, nprobe)
    idx, res = _to_gpu(index) if use_gpu else (index, None)

    def search(queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        _ = res  # the GPU resources live as long as the index on them
        s, i = idx.search(queries, min(k, shard["rows"]))
        return s, np.where(i >= 0, i + shard["start"], -1)

    return search


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


