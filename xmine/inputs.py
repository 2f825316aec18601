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
`xmine.encoders.projection.resolve_projection` and the registered artefact readers (`xmine.artefacts.directory`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from xmine.artefacts.directory import open_artefact
from xmine.io.corpus import CorpusStats
from xmine.io.dedup import first_occurrences, normalise_whitespace
from xmine.encoders import check_same_encoder
from xmine.errors import ConfigError, EncoderMismatchError, InputError
from xmine.artefacts.checkpoints import with_temporaries
from xmine.artefacts.fileio import atomic_path, atomic_write_json, read_json
from xmine.artefacts.input_artefacts import artefact_kind, artefact_lang, manifest_hash
from xmine.encoders.input_encoders import Encoders, check_lang, check_same_projection
from xmine.encoders.projection import ProjectionLike
from xmine.artefacts.records import EncoderFingerprint, ProjectionFingerprint, to_json
from xmine.io.sentences import sentence_splitter
from xmine.io.stdin import as_given, is_stdin, shown_path, spool_stdin
from xmine.store import EmbeddingStore
from xmine.store.rows import ShardRows
from xmine.store.text import RowIndex, TextColumn
from xmine.langs import UNDETERMINED
from xmine.store.writer import embed_corpus
from xmine.tempdirs import temporary_directory


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
    encoder: EncoderFingerprint
    #: projection fingerprint (None: raw embeddings)
    projection: ProjectionFingerprint | None
    #: "raw" or "meaning"
    part: str
    lang: str | None
    #: the IndexDir when kind == "index"
    index: Any = None
    #: what identifies the inputs (for checkpoint keys)
    fingerprint: dict = field(default_factory=dict)
    #: row i's record id (inputs read with an id field, xmine.io.readers), else None
    ids: Any = None
    #: int (n,) row i's 1-based index among its record's sentences (inputs read with
    #: --split-sentences, xmine.io.sentences), else None
    sentence_index: Any = None
    #: the corpus the rows come from (a store's or index's recorded input; else `path`)
    source: str | None = None
    #: what ran the encoder for a store's rows ({"device", "runtime"}, as its manifest records them;
    #: None where that is not recorded: an index, a store made before it was)
    encoded_with: dict | None = None
    #: a temporary directory owned by this side (text embedded without a work_dir)
    _tmp: Any = None

    def __len__(self) -> int:
        return len(self.line_numbers)

    def fingerprint_key(self) -> str:
        blob = json.dumps(to_json([self.fingerprint, self.encoder, self.projection, self.part]), sort_keys=True,
                          default=str)
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


def load_side(path: str | Path, *, lang: str | None, encoders: Encoders, work_dir: str | Path | None = None,
              show_progress: bool = True, rebuild: bool = False, input_format: Any = None,
              reported_as: Callable[[CorpusStats], CorpusStats] | None = None, opened: Any = None) -> Side:
    """Open `path` (a corpus, embedding store or index dir) as a Side in the requested space.

    `work_dir` holds what this side needs built (a corpus's store, a projected copy of a raw
    store's rows); an interrupted command resumes from it. `rebuild`: a damaged store found there
    is built again (the command's --overwrite) instead of refused. `input_format`
    (xmine.io.reader_base.InputFormat) says how to read a corpus that is not one sentence a line;
    `reported_as`, what its warnings name (`xmine.store.embed_corpus`); `opened`, the store or index
    at `path` where the caller has opened (and so checked) it already.
    """
    path = Path(path)
    kind = artefact_kind(path, input_format)
    proj = encoders.projection
    tmp = None
    if work_dir is None and (kind in ("text", "index") or (kind == "embedding-store" and proj is not None)):
        tmp = temporary_directory("side")
        work_dir = tmp.name
    work = Path(work_dir) if work_dir is not None else None
    if kind == "text":
        try:
            store = embed_corpus(spool_stdin(work) if is_stdin(path) else path, work / "store",
                                 encoder=encoders.encoder, lang=lang or UNDETERMINED, projection=proj, part="meaning",
                                 show_progress=show_progress, overwrite=rebuild, input_format=input_format,
                                 reported_as=reported_as)
        except InputError as e:  # named as given (`-`), while the copy's origin record still exists
            raise as_given(e) from None
        side = _store_side(store, path, lang, kind, fingerprint=store.manifest.input)
        side._tmp = tmp
        return side
    if kind == "embedding-store":
        store = opened if opened is not None else EmbeddingStore.open(path)
        what = f"embedding store {path}"
        encoders.check_artefact_encoder(store.manifest.encoder, what=what)
        if store.part == "language":
            raise ConfigError(f"{what} holds the language part; mining and search need raw or meaning embeddings")
        check_lang(lang, store.lang, what)
        side = _store_side(store, path, lang, kind, fingerprint={"manifest": manifest_hash(path)})
        if proj is not None and store.manifest.projection is None:
            side.rows = project_rows(store, proj, work / PROJECTED_ROWS, lang=lang or store.lang,
                                     show_progress=show_progress)
            side.projection, side.part = encoders.projection_fp(), "meaning"
        else:  # used as it is: it must already be in the space asked for (a projected store is never raw)
            check_same_projection(store.manifest.projection, encoders.projection_fp(), what=what)
        side._tmp = tmp
        return side
    if kind == "index":
        ix = opened if opened is not None else open_artefact(path, "index")  # xmine.index's IndexDir
        what = f"index {path}"
        encoders.check_artefact_encoder(ix.encoder, what=what)
        check_same_projection(ix.manifest.projection, encoders.projection_fp(), what=what)
        check_lang(lang, ix.manifest.lang, what)
        text, row_index = ix.text_column()
        side = Side(path=path, kind=kind, rows=index_rows(ix, path, work / INDEX_ROWS), row_index=row_index,
                    text=text, line_numbers=ix.line_numbers,
                    encoder=ix.encoder, projection=ix.manifest.projection,
                    part=ix.manifest.part or "raw", lang=lang or ix.manifest.lang, index=ix,
                    fingerprint={"manifest": manifest_hash(path)}, sentence_index=ix.sentence_index,
                    source=(ix.manifest.source or {}).get("corpus") or str(path))
        side._tmp = tmp
        return side
    raise InputError(path, f"is an xmine {kind!r}; expected a text file, an embedding store or an index")


#: the rows files a side's work folder holds: a projected store's, an index's reconstructed vectors
#: (each with its .json marker; what removes a finished run's work folder knows them by these names)
PROJECTED_ROWS, INDEX_ROWS = "projected-rows.npy", "index-rows.npy"
ROWS_FILES = tuple(with_temporaries([name for rows in (PROJECTED_ROWS, INDEX_ROWS)
                                     for name in (rows, str(Path(rows).with_suffix(".json")))]))

# Rows projected at once: the projection's float32 input and output (2 x 64k x dim x 4 bytes).
PROJECT_BLOCK = 65_536


def project_rows(store, projection: ProjectionLike, out: Path, *, lang: str | None = None,
                 show_progress: bool = True) -> ShardRows:
    """The store's rows through `projection` ("meaning"), written block by block to `out` (.npy,
    the store's dtype) once; a marker beside it records what was projected, so a later call with
    the same store and projection reuses the file."""
    from tqdm.auto import tqdm

    def write(out: Path) -> None:
        rows = store.rows()
        first = projection.transform(rows[0:1].astype(np.float32), "meaning", lang=lang)
        with atomic_path(out) as tmp:
            dst = np.lib.format.open_memmap(tmp, mode="w+", dtype=rows.dtype, shape=(len(store), first.shape[1]))
            with tqdm(total=len(store), desc=f"projecting {store.directory.name}", unit="rows",
                      disable=not show_progress, leave=False) as bar:
                for start in range(0, len(store), PROJECT_BLOCK):
                    block = rows[start: start + PROJECT_BLOCK].astype(np.float32)
                    dst[start: start + len(block)] = projection.transform(block, "meaning", lang=lang)
                    bar.update(len(block))
            dst.flush()
            del dst
        rows.close()

    return _rows_file(out, {"store": manifest_hash(store.directory), "projection": projection.fingerprint()["id"],
                            "rows": len(store), "lang": lang}, write)


def index_rows(ix, path: Path, out: Path) -> ShardRows:
    """The vectors of the index `ix` (at `path`) as rows read from the file `out` (.npy, float32),
    written there shard by shard once (`IndexDir.reconstruct_to`), so a later call with the same
    index (a resumed run) reuses the file."""
    return _rows_file(out, {"index": manifest_hash(path), "rows": len(ix)}, ix.reconstruct_to)


def _rows_file(out: Path, want: dict, write: Callable[[Path], None]) -> ShardRows:
    """The rows of the .npy file `out`, written by `write(out)` unless the marker beside it
    (`out` with .json) records `want`, what they were made from; recorded once written."""
    marker = out.with_suffix(".json")
    if not (out.is_file() and read_json(marker) == want):
        out.parent.mkdir(parents=True, exist_ok=True)
        write(out)
        atomic_write_json(marker, want)
    return ShardRows([out])


def _store_side(store, path: Path, lang: str | None, kind: str, *, fingerprint: dict) -> Side:
    source = shown_path(path) if kind == "text" else store.manifest.input.get("path") or str(path)
    return Side(path=path, kind=kind, rows=store.rows(), row_index=store.row_index(), text=store.text_column(),
                line_numbers=store.line_numbers, encoder=store.manifest.encoder,
                projection=store.manifest.projection, part=store.part, lang=lang or store.lang,
                fingerprint=fingerprint, ids=store.id_column(), sentence_index=store.sentence_index(), source=source,
                encoded_with=encoded_with(store.manifest.provenance))


def encoded_with(provenance: dict | None) -> dict | None:
    """{"device", "runtime"} a store's provenance records, or None (made before it recorded them, or
    of vectors made elsewhere: no encoder ran)."""
    made = (provenance or {}).get("parameters") or {}
    return {k: made[k] for k in ("device", "runtime")} if made.get("device") is not None else None


def check_compatible(a: Side, b: Side) -> None:
    """Both sides must live in the same space (same encoder, same projection, same part)."""
    check_same_encoder(a.encoder, b.encoder, what=f"{a.path} (vs {b.path})")
    check_same_projection(a.projection, b.projection, what=f"{a.path} (vs {b.path})")
    if a.part != b.part:
        raise EncoderMismatchError(f"{a.path} holds {a.part!r} embeddings but {b.path} holds {b.part!r}")


def check_artefact_lang(path, lang: str | None, input_format: Any = None) -> None:
    """Before a command encodes or writes anything: a language that the store or index at `path`
    contradicts is refused (as `load_side` would, later: was after the other side was encoded, the
    output's record and work left behind); a corpus has none to contradict."""
    kind = artefact_kind(path, input_format)
    if kind != "text":
        check_lang(lang, artefact_lang(path), f"{'embedding store' if kind == 'embedding-store' else kind} {path}")


def check_split_languages(sides: Sequence[tuple[Any, str | None, str]], input_format: Any) -> None:
    """Before a command writes anything: every corpus side (path, lang, its option) that will be
    split has a language and the splitter can be loaded; stores and indexes are not split."""
    for path, lang, option in sides:
        if artefact_kind(path, input_format) == "text":
            sentence_splitter(lang, what=str(path), option=option, warn=False)
