"""The input layer: what the user named (text file, embedding store, index directory) -> rows.

Every command that reads a corpus side goes through here. `load_side` turns a path into a `Side`:
its rows in the space to search (raw encoder output, or a projection's meaning part) as a view
read block by block, its text by offset, its row index (offsets, 64-bit hashes, lengths) and its
line numbers, checking that every artefact involved was made with the same encoder and projection.
Nothing in a Side grows with the corpus beyond a few bytes a row (offsets, hashes, lengths).

- A text file is embedded into a store in `work_dir` by the one encoding path, `embed_corpus`
  (streaming, resumable, with the projection applied per chunk), never through the per-sentence
  cache. Without a `work_dir` a temporary directory is used and removed with the Side.
- A store is read through `EmbeddingStore.rows()`. A raw store given a projection is projected
  block by block into `work_dir/projected-rows.npy` once (resumable by its marker), because
  mining reads one side many times.
- An index directory gives its stored vectors (`reconstruct`, in memory: an index is the user's
  own, already built structure) and its text.

Projections and indexes belong to feature packages; this module reaches them only through
`xmine.projection.resolve_projection` and the artefact readers of `xmine.plugins`.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.fileio import MANIFEST, atomic_path, atomic_write_json
from xmine.dedup import normalise_whitespace
from xmine.errors import ArtefactError, ConfigError, EncoderMismatchError, InputError
from xmine.plugins import open_artefact
from xmine.projection import ProjectionLike, choose_projection, resolve_projection
from xmine.store.rows import ShardRows
from xmine.store.text import RowIndex, TextColumn, iter_raw_lines


def artefact_kind(path: str | Path, input_format: Any = None) -> str:
    """"text" for a corpus (a file, a Hugging Face dataset folder, or with `--input-format hf` a
    folder of data files: `xmine.readers`), else the `kind` in the directory's manifest
    ("embedding-store", "index")."""
    from xmine.readers import is_dataset_dir

    p = Path(path)
    hf_files = getattr(input_format, "format", None) == "hf" and p.is_dir() and not (p / MANIFEST).is_file()
    if p.is_file() or is_dataset_dir(p) or hf_files:
        return "text"
    if p.is_dir():
        m = p / MANIFEST
        if not m.is_file():
            from xmine.output_state import dir_kind

            kind, _ = dir_kind(p)
            if kind is not None or (p / "progress.json").is_file():
                what = (kind or "embedding-store").replace("-", " ")
                raise InputError(p, f"an unfinished {what} (its run was interrupted or failed); run the same "
                                    "command again to finish it")
            raise InputError(p, "a directory without manifest.json: expected a corpus file, a Hugging Face "
                                "save_to_disk folder, an embedding store (xmine embed) or an index (xmine "
                                "build-index); for a folder of data files pass --input-format hf")
        try:
            return json.loads(m.read_text(encoding="utf-8"))["kind"]
        except (ValueError, KeyError) as e:
            raise ArtefactError(f"{m}: unreadable manifest ({e})") from e
    if p.exists():  # a pipe, process substitution or device: inputs are read more than once
        raise InputError(p, "is a pipe or another non-regular file, which is not supported as input; "
                            "save it to a file first")
    raise InputError(p, "no such file or directory")


def check_same_projection(expected: dict | None, actual: dict | None, *, what: str) -> None:
    """Raise EncoderMismatchError unless both are None or both have the same projection id."""
    e_id = expected.get("id") if expected else None
    a_id = actual.get("id") if actual else None
    if e_id != a_id:
        def name(fp):
            return "no projection (raw embeddings)" if not fp else f"projection {fp.get('path')} (id {fp.get('id')})"
        raise EncoderMismatchError(f"{what} was made with {name(expected)}, but {name(actual)} was given; "
                                   "use the same --projection")


def first_occurrences(keys: np.ndarray, same) -> np.ndarray:
    """representative[i]: the first position whose 64-bit key equals keys[i] (i itself when first).

    `same(i, j)` is asked only for the positions that repeat an earlier key, and says whether the
    two really are the same (a hash collision keeps position i as its own representative, so no
    item is ever dropped by one). The dedup of `Side.unique_rows` and of the pre-search
    near-duplicates (mining/presearch.py). Memory: about 24 bytes a key while it runs."""
    n = len(keys)
    _, first_of_key, inverse = np.unique(keys, return_index=True, return_inverse=True)
    representative = first_of_key[inverse.reshape(-1)].astype(np.int64)
    for r in np.flatnonzero(representative != np.arange(n)).tolist():
        if not same(r, int(representative[r])):
            representative[r] = r  # a hash collision: an item of its own
    return representative


@dataclass(kw_only=True)
class Side:
    """One side in the space to search: rows read on demand, text by offset, row index."""

    #: what the user named
    path: Path
    #: "text", "embedding-store" or "index"
    kind: str
    #: (n, dim) view (xmine.store.rows) or array, float16/float32, in the space to search
    rows: Any
    #: offsets/hashes/lengths of the rows' sentences (xmine.store.text.RowIndex)
    row_index: RowIndex
    #: row i's sentence, read by offset
    text: TextColumn
    #: int64 (n,) 1-based input line of each row (may be memory-mapped)
    line_numbers: np.ndarray
    #: encoder fingerprint the embeddings come from
    encoder: dict
    #: projection fingerprint (None: raw embeddings)
    projection: dict | None
    #: "raw" or "meaning"
    part: str
    lang: str | None
    #: the IndexDir when kind == "index"
    index: Any = None
    #: what identifies the inputs (for checkpoint keys)
    fingerprint: dict = field(default_factory=dict)
    #: row i's record id (inputs read with an id field, xmine.readers), else None
    ids: Any = None
    #: int (n,) row i's 1-based index among its record's sentences (inputs read with
    #: --split-sentences, xmine.sentences), else None
    sentence_index: Any = None
    #: the corpus the rows come from (a store's or index's recorded input; else `path`)
    source: str | None = None
    #: a temporary directory owned by this side (text embedded without a work_dir)
    _tmp: Any = None

    def __len__(self) -> int:
        return len(self.line_numbers)

    def fingerprint_key(self) -> str:
        blob = json.dumps([self.fingerprint, self.encoder, self.projection, self.part], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def unique_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Deduplication by 64-bit hashes: (first, representative).

        `first` (increasing int64) holds the first row of every distinct sentence (white space
        normalised); `representative[i]` is the row that stands for row i. Rows whose hash equals
        an earlier row's are compared by text: a collision (different sentences, same hash; about
        n^2 / 2^65 expected, 3e-6 at 10M rows) keeps both rows, so no sentence is ever dropped by
        one. Memory: about 24 bytes a row while it runs.
        """
        representative = first_occurrences(
            np.asarray(self.row_index.hashes),
            lambda r, rep: normalise_whitespace(self.text[r]) == normalise_whitespace(self.text[rep]))
        return np.flatnonzero(representative == np.arange(len(representative))), representative

    def close(self) -> None:
        self.text.close()
        if self.ids is not None:
            self.ids.close()
        if hasattr(self.rows, "close"):
            self.rows.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def artefact_encoder(paths) -> dict | None:
    """The encoder fingerprint recorded by the first artefact directory among `paths` (None: only text)."""
    for p in paths:
        if Path(p).is_dir() and (Path(p) / MANIFEST).is_file():
            try:
                fp = json.loads((Path(p) / MANIFEST).read_text(encoding="utf-8"))["encoder"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(fp, dict) and fp.get("name"):
                return fp
    return None


def artefact_encoder_name(paths) -> str | None:
    """The encoder name recorded by the first artefact directory among `paths` (None: only text)."""
    fp = artefact_encoder(paths)
    return fp["name"] if fp else None


def artefact_precision(paths) -> str | None:
    """The encoder precision of the first artefact directory among `paths` (fp32 for artefacts
    written before precisions existed; None: only text)."""
    from xmine.encoders import fingerprint_precision

    fp = artefact_encoder(paths)
    return fingerprint_precision(fp) if fp else None


def artefact_projection(paths) -> tuple[bool, dict | None]:
    """(whether one of `paths` is a store/index, the projection fingerprint the first one records)."""
    for p in paths:
        if Path(p).is_dir() and (Path(p) / MANIFEST).is_file():
            try:
                return True, json.loads((Path(p) / MANIFEST).read_text(encoding="utf-8")).get("projection")
            except (ValueError, AttributeError):
                continue
    return False, None


class Encoders:
    """Loads the encoder and projection once, only if a side needs them.

    `projection`: the `--projection` value (None/"default", "none" or a directory), resolved by
    `xmine.projection.choose_projection`; `inputs`: the paths named, so an implicit default
    follows a store's or index's own projection. `precision`: what the user asked for (None: not
    given); `default_precision`: what to use when it was not given (the input artefacts'
    precision, so that text encoded beside a store or an index matches it), else "auto".
    """

    def __init__(self, encoder_name: str | None, projection: str | Path | None, precision: str | None = None,
                 *, default_precision: str | None = None, inputs=()):
        self.encoder_name = encoder_name
        self.projection_spec = projection
        self.precision = precision
        self.default_precision = default_precision
        self._artefact = artefact_projection(inputs)
        self._artefact_encoder = artefact_encoder(inputs)  # its runtime is the default one
        self._choice = None
        self._encoder = None
        self._projection = None

    @property
    def choice(self):
        """The resolved `ProjectionChoice` (path or raw, and why)."""
        if self._choice is None:
            from xmine.encoders import DEFAULT_ENCODER

            self._choice = choose_projection(
                self.projection_spec, encoder_name=self.encoder_name or DEFAULT_ENCODER,
                encoder_fp=lambda: self.encoder.fingerprint(), artefact_projection=self._artefact)
        return self._choice

    @property
    def encoder(self):
        if self._encoder is None:
            from xmine.encoders import DEFAULT_ENCODER, DEFAULT_PRECISION, load_encoder
            from xmine.encoders.runtime import runtime_for_artefact

            self._encoder = load_encoder(self.encoder_name or DEFAULT_ENCODER,
                                         precision=self.precision or self.default_precision or DEFAULT_PRECISION,
                                         runtime=runtime_for_artefact(self._artefact_encoder))
            # Not through `self.projection`: choosing it may ask for this encoder's fingerprint
            # (and would then be chosen, and its notice logged, twice).
            if self._projection is not None:
                self._projection.check_encoder(self._encoder.fingerprint())
        return self._encoder

    @property
    def projection(self):
        if self._projection is None and self.choice.path is not None:
            self._projection = resolve_projection(self.choice.path)
            if self._encoder is not None:
                self._projection.check_encoder(self._encoder.fingerprint())
        return self._projection

    def projection_fp(self) -> dict | None:
        return self.projection.fingerprint() if self.projection is not None else None

    def check_artefact_encoder(self, fp: dict, *, what: str) -> None:
        """Refuse an artefact of another encoder than the one named (or the projection's), or of
        another precision than the one asked for."""
        from xmine.encoders import check_same_encoder, encoder_precision, fingerprint_precision

        if self.encoder_name is not None and self.encoder_name != fp.get("name"):
            check_same_encoder(fp, self.encoder.fingerprint(), what=what)
        if self.precision is not None:
            made, asked = fingerprint_precision(fp), encoder_precision(fp.get("name") or "", self.precision)
            if made != asked:
                raise EncoderMismatchError(
                    f"{what} was made at precision {made}, but --precision {self.precision} means {asked} here; "
                    f"embeddings of two precisions are never mixed: pass --precision {made} (or rebuild it at {asked})")
        if self.projection is not None:
            self.projection.check_encoder(fp)


def load_side(path: str | Path, *, lang: str | None, encoders: Encoders, work_dir: str | Path | None = None,
              show_progress: bool = True, rebuild: bool = False, input_format: Any = None) -> Side:
    """Open `path` (a corpus, embedding store or index dir) as a Side in the requested space.

    `work_dir` holds what this side needs built (a corpus's store, a projected copy of a raw
    store's rows); an interrupted command resumes from it. `rebuild`: a damaged store found there
    is built again (the command's --overwrite) instead of refused. `input_format`
    (xmine.readers.InputFormat) says how to read a corpus that is not one sentence a line.
    """
    path = Path(path)
    kind = artefact_kind(path, input_format)
    proj = encoders.projection
    tmp = None
    if work_dir is None and (kind == "text" or (kind == "embedding-store" and proj is not None)):
        tmp = tempfile.TemporaryDirectory(prefix="xmine-side-")
        work_dir = tmp.name
    work = Path(work_dir) if work_dir is not None else None
    if kind == "text":
        from xmine.store.writer import UNDETERMINED, embed_corpus

        store = embed_corpus(path, work / "store", encoder=encoders.encoder, lang=lang or UNDETERMINED,
                             projection=proj, part="meaning", show_progress=show_progress, overwrite=rebuild,
                             input_format=input_format)
        side = _store_side(store, path, lang, kind, fingerprint=store.manifest["input"])
        side._tmp = tmp
        return side
    if kind == "embedding-store":
        from xmine.store import EmbeddingStore

        store = EmbeddingStore.open(path)
        what = f"embedding store {path}"
        encoders.check_artefact_encoder(store.encoder_fingerprint, what=what)
        if store.part == "language":
            raise ConfigError(f"{what} holds the language part; mining and search need raw or meaning embeddings")
        check_lang(lang, store.lang, what)
        side = _store_side(store, path, lang, kind, fingerprint={"manifest": _manifest_hash(path)})
        if proj is not None and store.projection_fingerprint is None:
            side.rows = project_rows(store, proj, work / "projected-rows.npy", lang=lang or store.lang,
                                     show_progress=show_progress)
            side.projection, side.part = encoders.projection_fp(), "meaning"
        elif proj is not None:
            check_same_projection(store.projection_fingerprint, encoders.projection_fp(), what=what)
        side._tmp = tmp
        return side
    if kind == "index":
        ix = open_artefact(path, "index")  # xmine.index's IndexDir
        what = f"index {path}"
        encoders.check_artefact_encoder(ix.manifest["encoder"], what=what)
        if proj is not None:
            check_same_projection(ix.manifest.get("projection"), encoders.projection_fp(), what=what)
        check_lang(lang, ix.manifest.get("lang"), what)
        with open(ix.path / "sentences.txt", "rb") as f:
            row_index = RowIndex.scan(iter_raw_lines(f), count=len(ix))
        return Side(path=path, kind=kind, rows=ix.reconstruct(), row_index=row_index,
                    text=TextColumn(ix.path / "sentences.txt", row_index.offsets), line_numbers=ix.line_numbers,
                    encoder=ix.manifest["encoder"], projection=ix.manifest.get("projection"),
                    part=ix.manifest.get("part") or "raw", lang=lang or ix.manifest.get("lang"), index=ix,
                    fingerprint={"manifest": _manifest_hash(path)}, sentence_index=ix.sentence_index,
                    source=(ix.manifest.get("input") or {}).get("path") or str(path))
    raise InputError(path, f"is an xmine {kind!r}; expected a text file, an embedding store or an index")


def _store_side(store, path: Path, lang: str | None, kind: str, *, fingerprint: dict) -> Side:
    source = str(path) if kind == "text" else (store.manifest.get("input") or {}).get("path") or str(path)
    return Side(path=path, kind=kind, rows=store.rows(), row_index=store.row_index(), text=store.text_column(),
                line_numbers=store.line_numbers, encoder=store.encoder_fingerprint,
                projection=store.projection_fingerprint, part=store.part, lang=lang or store.lang,
                fingerprint=fingerprint, ids=store.id_column(), sentence_index=store.sentence_index(), source=source)


# Rows projected at once: the projection's float32 input and output (2 x 64k x dim x 4 bytes).
PROJECT_BLOCK = 65_536


def project_rows(store, projection: ProjectionLike, out: Path, *, lang: str | None = None,
                 show_progress: bool = True) -> ShardRows:
    """The store's rows through `projection` ("meaning"), written block by block to `out` (.npy,
    the store's dtype) once; a marker beside it records what was projected, so a later call with
    the same store and projection reuses the file."""
    from tqdm.auto import tqdm

    marker = out.with_suffix(".json")
    want = {"store": _manifest_hash(store.directory), "projection": projection.fingerprint().get("id"),
            "rows": len(store), "lang": lang}
    if marker.is_file() and out.is_file():
        try:
            if json.loads(marker.read_text(encoding="utf-8")) == want:
                return ShardRows([out])
        except ValueError:
            pass
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = store.rows()
    first = projection.transform(rows[0:1].astype(np.float32), "meaning", lang=lang)
    with atomic_path(out) as tmp:
        dst = np.lib.format.open_memmap(tmp, mode="w+", dtype=rows.dtype, shape=(len(store), first.shape[1]))
        bar = tqdm(total=len(store), desc=f"projecting {store.directory.name}", unit="rows",
                   disable=not show_progress, leave=False)
        for start in range(0, len(store), PROJECT_BLOCK):
            block = rows[start: start + PROJECT_BLOCK].astype(np.float32)
            dst[start: start + len(block)] = projection.transform(block, "meaning", lang=lang)
            bar.update(len(block))
        bar.close()
        dst.flush()
        del dst
    rows.close()
    atomic_write_json(marker, want)
    return ShardRows([out])


def check_lang(given: str | None, recorded: str | None, what: str) -> None:
    """Refuse a language that differs from the artefact's; codes compare normalised (de = deu =
    deu_Latn = de-DE, xmine.langs)."""
    from xmine.langs import normalize_lang

    if given and recorded and normalize_lang(given) != normalize_lang(recorded):
        raise ConfigError(f"{what} holds language {recorded!r}, but --lang/--*-lang says {given!r}")


def check_compatible(a: Side, b: Side) -> None:
    """Both sides must live in the same space (same encoder, same projection, same part)."""
    from xmine.encoders import check_same_encoder

    check_same_encoder(a.encoder, b.encoder, what=f"{a.path} (vs {b.path})")
    check_same_projection(a.projection, b.projection, what=f"{a.path} (vs {b.path})")
    if a.part != b.part:
        raise EncoderMismatchError(f"{a.path} holds {a.part!r} embeddings but {b.path} holds {b.part!r}")


def _manifest_hash(path: Path) -> str:
    return hashlib.sha256((path / MANIFEST).read_bytes()).hexdigest()


def check_split_languages(sides: Sequence[tuple[Any, str | None, str]], input_format: Any) -> None:
    """Before a command writes anything: every corpus side (path, lang, its option) that will be
    split has a language and the splitter can be loaded; stores and indexes are not split."""
    from xmine.sentences import sentence_splitter

    for path, lang, option in sides:
        if artefact_kind(path, input_format) == "text":
            sentence_splitter(lang, what=str(path), option=option)
