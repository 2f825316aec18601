"""The records artefacts are made of: encoder and projection fingerprints, file and shard records, the
store manifest (the index's: `xmine.index.faiss_index.IndexManifest`).

Each is a frozen, keyword-only dataclass named and shaped as its JSON. `from_dict(d, where=...)`
validates what was read (required fields, types, non-negative sizes, 64-hex sha256) and raises
ArtefactError in one line naming `where` (the file, and the entry in it) and the field;
`to_dict()` gives back exactly the JSON xmine writes (same keys, order, optional keys omitted).
"""

from __future__ import annotations

import ast
import re
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any

from xmine.errors import ArtefactError

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _parse(v: Any, want: Any, where: str, name: str) -> Any:
    """`v` read as a value of type `want`: a record, a tuple or dict of records, or a JSON scalar."""
    origin, args = typing.get_origin(want), typing.get_args(want)
    if type(None) in args:  # "X | None"
        return None if v is None else _parse(v, next(t for t in args if t is not type(None)), where, name)
    if isinstance(want, type) and issubclass(want, Record):
        return want.from_dict(v, where=f"{where}: {name}")
    if want is EncoderId:
        if not isinstance(v, str):
            raise ArtefactError(f"{where}: field {name!r} is {repr(v)[:80]}, not str")
        return EncoderId.parse(v)
    types = (list,) if origin is tuple else (dict,) if origin is dict else (want,)
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
        raise ArtefactError(f"{where}: field {name!r} is {repr(v)[:80]}, not {' or '.join(t.__name__ for t in types)}")
    if origin is tuple:
        return tuple(_parse(x, args[0], where, f"{name}[{i}]") for i, x in enumerate(v))
    if origin is dict:
        return {k: _parse(x, args[1], where, f"{name}[{k!r}]") for k, x in v.items()}
    if isinstance(v, int) and not isinstance(v, bool) and v < 0:
        raise ArtefactError(f"{where}: field {name!r} is {v}, negative")
    if name == "sha256" and not _SHA256.fullmatch(v):
        raise ArtefactError(f"{where}: field 'sha256' is {repr(v)[:80]}, not 64 hexadecimal digits")
    return v


def to_json(v: Any) -> Any:
    """`v` with every record in it as its JSON."""
    if isinstance(v, Record):
        return v.to_dict()
    if isinstance(v, EncoderId):
        return str(v)
    if isinstance(v, (tuple, list)):
        return [to_json(x) for x in v]
    return {k: to_json(x) for k, x in v.items()} if isinstance(v, dict) else v


class Record:
    """Read from a JSON object by the dataclass's field types: int, str, dict, "X | None", another
    record, tuple[record, ...] (a JSON list) or dict[str, record]."""

    @classmethod
    def from_dict(cls, d: Any, *, where: str):
        if not isinstance(d, dict):
            raise ArtefactError(f"{where}: a JSON object expected, found {type(d).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = [k for k in d if k not in names]
        if unknown:
            raise ArtefactError(f"{where}: unknown field {unknown[0]!r}")
        hints = typing.get_type_hints(cls)
        missing = [f.name for f in fields(cls) if f.name not in d and f.default is MISSING]
        if missing:
            raise ArtefactError(f"{where}: field {missing[0]!r} missing")
        return cls(**{k: _parse(d[k], hints[k], where, k) for k in names if k in d})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: fields in order, those None by default left out."""
        return {f.name: to_json(getattr(self, f.name)) for f in fields(self)
                if not (f.default is None and getattr(self, f.name) is None)}


def _is_word(text: str) -> bool:
    """A precision or runtime name as an id holds one: lower-case ASCII letters and digits."""
    return text.isascii() and text.isalnum() and text == text.lower()


def legacy_folder_note(made: "EncoderId") -> str:
    """What a refusal of an artefact's encoder id adds where the id is a model folder's ("st:"): the
    id once covered a folder's weights alone, so that the artefacts made before it also covered its
    tokenizer and modules are refused as another model's; else ""."""
    if not made.weights.startswith("st:"):
        return ""
    return ", or it was made by an earlier xmine, which identified a model folder by its weights alone: rebuild it (--overwrite)"


@dataclass(frozen=True, kw_only=True)
class EncoderId:
    """An encoder fingerprint's `id`: the weights (with pooling and prefix) and the precision and
    runtime that run them, kept apart; manifests hold it as one string (`str`, `parse`).

    The string is the weights' identity, then "|precision=<p>" unless fp32 and "|runtime=<r>" unless
    torch (with "+<build key>" for a converted model): so an fp32 torch id is the weights' alone,
    and fingerprints written before precisions and runtimes existed read as fp32 on torch."""

    weights: str  #: what identifies the weights, pooling and prefix
    precision: str = "fp32"
    runtime: str = "torch"
    build: str | None = None  #: a converted model's build key (xmine.encoders.ov_build)

    def __str__(self) -> str:
        text = self.weights
        if self.precision != "fp32":
            text += f"|precision={self.precision}"
        if self.runtime != "torch":
            text += f"|runtime={self.runtime}" + (f"+{self.build}" if self.build else "")
        return text

    def __repr__(self) -> str:  # as messages have always shown an id: the string
        return repr(str(self))

    def other_prompt_only(self, other: "EncoderId") -> tuple[str, str] | None:
        """(this id's prompt, `other`'s), as the ids write them ("'query: '"), where the two are the
        same weights with another prompt (a transformer's weights end in "|prefix=<repr>"); else None."""
        mine, _, prompt = self.weights.rpartition("|prefix=")
        theirs, _, other_prompt = other.weights.rpartition("|prefix=")
        return (prompt, other_prompt) if mine and mine == theirs and prompt != other_prompt else None

    @property
    def model(self) -> str:
        """The weights and pooling alone, without the prompt: one model, whatever prompt, precision
        or runtime runs it."""
        return self.weights.partition("|prefix=")[0]

    @property
    def prompt(self) -> str | None:
        """The text prefix (prompt) the encoder ran with, as a transformer's weights record it
        ("|prefix=<repr>"); None where the id records none (use-m3, vectors made elsewhere)."""
        head, found, written = self.weights.partition("|prefix=")  # the first: the prompt itself may hold one
        if not found:
            return None
        try:
            value = ast.literal_eval(written)
        except (ValueError, SyntaxError):
            return None
        return value if isinstance(value, str) else None

    @classmethod
    def parse(cls, text: str) -> "EncoderId":
        """The id a manifest holds; text whose tags are not the form above is all weights."""
        weights, precision, runtime, build = text, "fp32", "torch", None
        head, _, tag = weights.rpartition("|runtime=")
        name, _, key = tag.partition("+")
        if head and _is_word(name) and (not key or all(c in "0123456789abcdef" for c in key)):
            weights, runtime, build = head, name, key or None
        head, _, tag = weights.rpartition("|precision=")
        if head and _is_word(tag):
            weights, precision = head, tag
        found = cls(weights=weights, precision=precision, runtime=runtime, build=build)
        return found if str(found) == text else cls(weights=text)


@dataclass(frozen=True, kw_only=True)
class EncoderFingerprint(Record):
    """What identifies an encoder's embeddings: equal `id` and `dim` = the same encoder."""

    name: str  #: the encoder's name ("me5-small")
    dim: int  #: embedding dimension
    id: EncoderId  #: the weights, and the precision and runtime that ran them
    precision: str | None = None  #: the precision it runs at (absent in fingerprints older than precisions: fp32)
    runtime: str | None = None  #: the runtime, when not torch

    @property
    def run_precision(self) -> str:
        """The precision, "fp32" for fingerprints without one."""
        return self.precision or self.id.precision


@dataclass(frozen=True, kw_only=True)
class ProjectionFingerprint(Record):
    """What identifies a projection (`Projection.fingerprint()`): equal `id` = the same projection."""

    path: str  #: its directory
    method: str  #: how it was trained
    id: str  #: hash of its weights
    shipped: str | None = None  #: the encoder whose default projection, shipped inside xmine, it is

    def __str__(self) -> str:
        return f"projection {self.path} (id {self.id})"


@dataclass(frozen=True, kw_only=True)
class FileRecord(Record):
    """A file of an artefact as its manifest records it."""

    bytes: int  #: size in bytes
    #: sha256 of the content, 64 hexadecimal digits
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ShardFile(Record):
    """An embedding store's shard as the store's manifest records it."""

    file: str  #: the shard's .npy file, relative to the store
    rows: int  #: rows it holds
    bytes: int  #: size of `file` in bytes
    #: sha256 of `file`
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ShardRecord(ShardFile):
    """A shard being built, as `progress.json` records it: the files beside its embeddings."""

    lines_file: str  #: its line numbers (.npy, int64)
    text_file: str  #: its sentences, one a line
    dim: int  #: embedding dimension
    ids_file: str | None = None  #: its record ids, one a line (inputs read with an id field)
    sent_file: str | None = None  #: its sentence indices (.npy, int32; inputs split into sentences)
    #: size and sha256 of each of those files by name, checked before a resumed run joins them into
    #: the store (None: a run of an xmine that did not record them; was: only `file` was checked, so
    #: a damaged text or line-number file went into a store that verified OK)
    companions: dict[str, FileRecord] | None = None

    def manifest_entry(self) -> ShardFile:
        return ShardFile(file=self.file, rows=self.rows, bytes=self.bytes, sha256=self.sha256)


@dataclass(frozen=True, kw_only=True)
class StoreManifest(Record):
    """`manifest.json` of an embedding store (xmine.store)."""

    kind: str  #: "embedding-store"
    format_version: int  #: the store format (xmine.store.layout.FORMAT_VERSION)
    encoder: EncoderFingerprint  #: the encoder its embeddings come from
    projection: ProjectionFingerprint | None  #: the projection its rows went through (None: raw embeddings)
    part: str  #: "raw", "meaning" or "language"
    dtype: str  #: "float16" or "float32"
    lang: str  #: the corpus language code
    max_chars: int | None  #: the characters of a line kept for encoding (None: stores written from arrays)
    count: int  #: rows
    dim: int  #: embedding dimension
    input: dict  #: the input's identity (path, size, sha256, how it was read)
    input_stats: dict  #: what reading the input found (lines, empty lines, ...)
    shards: tuple[ShardFile, ...]  #: the shards in row order
    files: dict[str, FileRecord]  #: the store's other files by name
    provenance: dict  #: what made it (xmine.artefacts.directory.provenance)


def read_field(d: dict[str, Any], name: str, want: Any, *, where: str) -> Any:
    """Field `name` of the JSON object `d` read as type `want`, as a record reads its fields."""
    if name not in d:
        raise ArtefactError(f"{where}: field {name!r} missing")
    return _parse(d[name], want, where, name)
