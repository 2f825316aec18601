"""The input layer: what the user named (text file, embedding store, index directory) -> rows.

Every command and benchmark that reads a corpus side goes through here. `load_side` turns a path
into sentences, their line numbers and embeddings in the space to search (raw encoder output, or
a projection's meaning part), checking that every artefact involved was made with the same
encoder and projection. Text is encoded through the shared embedding cache (`xmine.embed_cache`).

Projections and indexes belong to feature packages; this module reaches them only through
`xmine.projection.resolve_projection` and the artefact readers of `xmine.plugins`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xmine.artefacts import MANIFEST, file_fingerprint
from xmine.errors import ArtefactError, ConfigError, EncoderMismatchError, InputError
from xmine.plugins import open_artefact
from xmine.projection import resolve_projection


def artefact_kind(path: str | Path) -> str:
    """"text" for a file, else the `kind` in the directory's manifest ("embedding-store", "index")."""
    p = Path(path)
    if p.is_file():
        return "text"
    if p.is_dir():
        m = p / MANIFEST
        if not m.is_file():
            raise InputError(p, "a directory without manifest.json: expected a text file, an embedding "
                                "store (xmine embed) or an index (xmine build-index)")
        try:
            return json.loads(m.read_text(encoding="utf-8"))["kind"]
        except (ValueError, KeyError) as e:
            raise ArtefactError(f"{m}: unreadable manifest ({e})") from e
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


class RowView:
    """Rows of several memory-mapped shards seen as one (n, dim) array (slices and row lists)."""

    def __init__(self, shards: list[np.ndarray]):
        self.shards = shards
        self.starts = np.cumsum([0] + [len(s) for s in shards])
        self.shape = (int(self.starts[-1]), int(shards[0].shape[1]))
        self.dtype = shards[0].dtype
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return self[np.arange(start, stop, step)]
            parts = []
            for i, s in enumerate(self.shards):
                lo, hi = max(start, self.starts[i]), min(stop, self.starts[i + 1])
                if lo < hi:
                    parts.append(s[lo - self.starts[i] : hi - self.starts[i]])
            return np.concatenate(parts) if parts else np.empty((0, self.shape[1]), self.dtype)
        rows = np.asarray(key, dtype=np.int64)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        out = np.empty((len(rows), self.shape[1]), self.dtype)
        for i in np.unique(which):
            sel = which == i
            out[sel] = self.shards[i][rows[sel] - self.starts[i]]
        return out


@dataclass(kw_only=True)
class Side:
    """Sentences + embeddings of one side, in the space to search."""

    #: what the user named
    path: Path
    #: "text", "embedding-store" or "index"
    kind: str
    sentences: list[str]
    #: int64 1-based input line of each sentence
    line_numbers: np.ndarray
    #: (n, dim) float32/float16 array or RowView; None for an index whose vectors were not needed
    embeddings: Any
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

    def fingerprint_key(self) -> str:
        blob = json.dumps([self.fingerprint, self.encoder, self.projection, self.part], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


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


class Encoders:
    """Loads the encoder and projection once, only if a side needs them.

    `precision`: what the user asked for (None: not given); `default_precision`: what to use when
    it was not given (the input artefacts' precision, so that text encoded beside a store or an
    index matches it), else "auto".
    """

    def __init__(self, encoder_name: str | None, projection_path: str | Path | None, precision: str | None = None,
                 *, default_precision: str | None = None):
        self.encoder_name = encoder_name
        self.projection_path = projection_path
        self.precision = precision
        self.default_precision = default_precision
        self._encoder = None
        self._projection = None

    @property
    def encoder(self):
        if self._encoder is None:
            from xmine.encoders import DEFAULT_ENCODER, DEFAULT_PRECISION, load_encoder

            self._encoder = load_encoder(self.encoder_name or DEFAULT_ENCODER,
                                         precision=self.precision or self.default_precision or DEFAULT_PRECISION)
            if self.projection is not None:
                self.projection.check_encoder(self._encoder.fingerprint())
        return self._encoder

    @property
    def projection(self):
        if self._projection is None and self.projection_path is not None:
            self._projection = resolve_projection(self.projection_path)
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


def load_side(path: str | Path, *, lang: str | None, encoders: Encoders, need_vectors: bool = True,
              show_progress: bool = True) -> Side:
    """Load `path` (text file, embedding store or index dir) as a Side in the requested space."""
    path = Path(path)
    kind = artefact_kind(path)
    proj = encoders.projection
    if kind == "text":
        from xmine.corpus import read_corpus, truncate_for_encoding
        from xmine.embed_cache import cached_encode

        corpus = read_corpus(path)
        enc = encoders.encoder
        emb = cached_encode(enc, truncate_for_encoding(corpus.sentences), show_progress=show_progress,
                            desc=f"encoding {path.name}")
        if proj is not None:
            emb = proj.transform(emb, "meaning")
        return Side(path=path, kind=kind, sentences=corpus.sentences, line_numbers=corpus.line_numbers,
                    embeddings=emb, encoder=enc.fingerprint(), projection=encoders.projection_fp(),
                    part="meaning" if proj is not None else "raw", lang=lang,
                    fingerprint=file_fingerprint(path))
    if kind == "embedding-store":
        from xmine.store import EmbeddingStore

        store = EmbeddingStore.open(path)
        what = f"embedding store {path}"
        encoders.check_artefact_encoder(store.encoder_fingerprint, what=what)
        if store.part == "language":
            raise ConfigError(f"{what} holds the language part; mining and search need raw or meaning embeddings")
        shards = store.shard_arrays()
        emb: Any = shards[0] if len(shards) == 1 else RowView(shards)
        proj_fp, part = store.projection_fingerprint, store.part
        if proj is not None and store.projection_fingerprint is None:
            # A raw store: apply the projection here (block by block, into float32).
            emb = np.concatenate([proj.transform(b, "meaning") for _, b in store.iter_blocks()])
            proj_fp, part = encoders.projection_fp(), "meaning"
        elif proj is not None:
            check_same_projection(store.projection_fingerprint, encoders.projection_fp(), what=what)
        check_lang(lang, store.lang, what)
        return Side(path=path, kind=kind, sentences=store.sentences(), line_numbers=store.line_numbers,
                    embeddings=emb, encoder=store.encoder_fingerprint, projection=proj_fp, part=part,
                    lang=lang or store.lang, fingerprint={"manifest": _manifest_hash(path)})
    if kind == "index":
        ix = open_artefact(path, "index")  # xmine.index's IndexDir
        what = f"index {path}"
        encoders.check_artefact_encoder(ix.manifest["encoder"], what=what)
        if proj is not None:
            check_same_projection(ix.manifest.get("projection"), encoders.projection_fp(), what=what)
        check_lang(lang, ix.manifest.get("lang"), what)
        return Side(path=path, kind=kind, sentences=ix.sentences(), line_numbers=ix.line_numbers,
                    embeddings=ix.reconstruct() if need_vectors else None, encoder=ix.manifest["encoder"],
                    projection=ix.manifest.get("projection"), part=ix.manifest.get("part") or "raw",
                    lang=lang or ix.manifest.get("lang"), index=ix, fingerprint={"manifest": _manifest_hash(path)})
    raise InputError(path, f"is an xmine {kind!r}; expected a text file, an embedding store or an index")


def check_lang(given: str | None, recorded: str | None, what: str) -> None:
    if given and recorded and given != recorded:
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
