"""Corpus readers, one per input format, each streaming `(record number, text, record id)`.

Every command that reads a corpus (embed, build-index, search, mine) opens it with `open_corpus`,
which picks the format and checks every record before anything is written, then hands
`sentences()` to the store writer (`xmine.store.writer.embed_corpus`) exactly as a text file's
lines: everything downstream (stores, resume, dedup, mining) is the same for every format.

Formats (`FORMATS`), chosen by `detect_format` from the name or the folder, or named
(`--input-format`):

- `text`: one sentence a line (`xmine.corpus`: plain, gzip, xz, bzip2 or zstd).
- `jsonl`: JSON Lines (`.jsonl`, `.ndjson`, `.json`, also compressed): one JSON object a line,
  the text at `text_field`, a dotted path for nested objects (`meta.text`). Record = file line.
- `parquet`: the column `text_field` (a dotted path reaches into a struct column), read one
  record batch at a time. Record = 1-based row.
- `hf`: a Hugging Face dataset through `datasets`: a `save_to_disk` folder (Arrow, memory-mapped;
  a DatasetDict needs `split` unless it has one split), or data files (a `.parquet`, `.jsonl`,
  `.csv`, `.txt` file or a folder of them, with `--input-format hf`) read with streaming.
  Record = 1-based row of the split.

A record whose text is empty or white space is skipped (counted, its number kept); tabs and line
breaks inside a text become spaces, as in a text file. A missing field, a value that is not a
string, invalid JSON or an unreadable file raises `InputError` naming the file, the record and
the problem. `id_field` keeps each record's own id (any JSON scalar, as a string) beside its
number, as provenance. With `split_sentences` each record is a document or paragraph:
`split_into_sentences` yields its sentences (xmine.sentences), each with the record's number and
id and its own 1-based index in the record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from xmine.compression import count_lines
from xmine.corpus import DEFAULT_MAX_CHARS, WARN_LIST, CorpusStats, iter_corpus, iter_lines
from xmine.errors import ConfigError, InputError

log = logging.getLogger("xmine.corpus")

FORMATS = ("text", "jsonl", "parquet", "hf")
_COMPRESSED = (".gz", ".xz", ".zst", ".zstd", ".bz2")
_JSONL = (".jsonl", ".ndjson", ".json")
_PARQUET = (".parquet", ".pq")
# Files a `save_to_disk` folder holds (Dataset: state.json; DatasetDict: dataset_dict.json).
_HF_MARKERS = ("state.json", "dataset_dict.json")
# Data-file builders of `datasets`, by extension.
_HF_BUILDERS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".json": "json", ".ndjson": "json",
                ".csv": "csv", ".txt": "text", ".arrow": "arrow"}
# Rows per batch read from Parquet / Arrow: bounded memory whatever the file.
_BATCH = 4096
_MISSING = object()
# What a text or id from a record may not hold in a one-line-a-row store: tabs and every line break
# (a text file's reader splits on \n itself; a JSON string or a table cell may hold one).
_BREAKERS = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(kw_only=True, frozen=True)
class InputFormat:
    """How to read a corpus file or folder (the --input-format options)."""

    #: "auto" (by extension, compression suffix ignored, or by folder contents) or one of FORMATS
    format: str = "auto"
    #: jsonl / hf: dotted path of the text field; parquet: the column (dotted: into a struct)
    text_field: str = "text"
    #: optional dotted path of each record's own id, kept as provenance
    id_field: str | None = None
    #: hf: the split of a DatasetDict or of data files (default: the only one, else "train")
    split: str | None = None
    #: split each record (line) into sentences with the corpus language's splitter
    #: (xmine.sentences); each sentence becomes a row that keeps its record and its index in it
    split_sentences: bool = False

    def __post_init__(self) -> None:
        if self.format not in ("auto",) + FORMATS:
            raise ConfigError(f"--input-format must be auto or one of {', '.join(FORMATS)}, not {self.format!r}")
        if not self.text_field:
            raise ConfigError("--text-field must not be empty")


def is_dataset_dir(path: str | Path) -> bool:
    """True for a Hugging Face `save_to_disk` folder."""
    p = Path(path)
    return p.is_dir() and any((p / m).is_file() for m in _HF_MARKERS)


def _stem_suffix(path: Path) -> str:
    """The extension that names the format: `.jsonl` of `x.jsonl.zst`."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _COMPRESSED:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def detect_format(path: str | Path, spec: InputFormat | None = None) -> str:
    """The format to read `path` as: the named one, else by its extension or folder contents."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or directory")
    if spec is not None and spec.format != "auto":
        return spec.format
    if p.is_dir():
        if is_dataset_dir(p):
            return "hf"
        raise InputError(p, "a directory that is neither an xmine artefact nor a Hugging Face save_to_disk "
                            "folder; for a folder of data files pass --input-format hf")
    suffix = _stem_suffix(p)
    if suffix in _JSONL:
        return "jsonl"
    if suffix in _PARQUET:
        return "parquet"
    return "text"


def _field(record: Any, dotted: str) -> Any:
    """The value at `dotted` (`meta.text`) in nested mappings; a key that itself holds dots wins."""
    if isinstance(record, dict) and dotted in record:
        return record[dotted]
    value = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _text_of(record: Any, spec: InputFormat, path: Path, where: str, line: int | None) -> tuple[str, str | None]:
    """(text, id) of one record, or InputError saying what is wrong with it."""
    if not isinstance(record, dict):
        raise InputError(path, f"{where}is a JSON {type(record).__name__}, expected an object with a "
                               f"{spec.text_field!r} field", line=line)
    text = _field(record, spec.text_field)
    if text is _MISSING:
        keys = ", ".join(list(record)[:8])
        raise InputError(path, f"{where}no field {spec.text_field!r} (fields: {keys}); choose one with "
                               "--text-field / --text-column", line=line)
    if not isinstance(text, str):
        shown = "null" if text is None else f"{type(text).__name__} {str(text)[:40]!r}"
        raise InputError(path, f"{where}field {spec.text_field!r} is {shown}, not a string", line=line)
    rid = None
    if spec.id_field is not None:
        value = _field(record, spec.id_field)
        if value is _MISSING or value is None or isinstance(value, (dict, list)):
            what = "missing" if value is _MISSING else "null" if value is None else f"a {type(value).__name__}"
            raise InputError(path, f"{where}id field {spec.id_field!r} is {what}, expected a string or number",
                             line=line)
        rid = _BREAKERS.sub(" ", str(value))
    return text, rid


class CorpusReader:
    """One corpus in one format. `count` (records; lines for text) and `identity()` are known
    once `open_corpus` has checked every record."""

    format = "text"

    def __init__(self, path: Path, spec: InputFormat):
        self.path, self.spec = path, spec
        self.count = 0
        self.has_ids = spec.id_field is not None and self.format != "text"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        """(record number, raw text, id or None) of every record, empty ones included."""
        raise NotImplementedError

    def check(self) -> None:
        """Read every record once (raises InputError on the first bad one) and count them."""
        n = 0
        for n, _, _ in self.records():
            pass
        self.count = n

    def identity(self) -> dict[str, Any]:
        """What identifies the input (a store made from it records this; resume compares it)."""
        from xmine.fileio import sha256_file

        if self.path.is_dir():
            h, size = hashlib.sha256(), 0
            for f in sorted(p for p in self.path.rglob("*") if p.is_file()):
                rel = f.relative_to(self.path).as_posix()
                h.update(f"{rel}\0{sha256_file(f)}\n".encode())
                size += f.stat().st_size
            digest = h.hexdigest()
        else:
            size, digest = self.path.stat().st_size, sha256_file(self.path)
        return {"path": str(self.path.resolve()), "size": size, "sha256": digest, "format": self.format,
                "text_field": self.spec.text_field, "id_field": self.spec.id_field, "split": self.spec.split,
                "records": self.count}

    def sentences(self, *, max_chars: int = DEFAULT_MAX_CHARS, stats: CorpusStats | None = None,
                  ids: list | None = None) -> Iterator[tuple[int, str]]:
        """(record number, text) of each non-empty record, cleaned as a text file's lines are;
        with `ids` (a list), each yielded record's id is appended to it first."""
        st = stats if stats is not None else CorpusStats(path=self.path)
        for number, text, rid in self.records():
            st.lines = number
            if not text.strip():
                st.empty_lines += 1
                continue
            if _BREAKERS.search(text):
                text = _BREAKERS.sub(" ", text)
                st.replaced_count += 1
            if len(text) > max_chars:
                st.long_count += 1
                if len(st.long_lines) < WARN_LIST:
                    st.long_lines.append(number)
            st.sentences += 1
            if ids is not None:
                ids.append(rid)
            yield number, text
        if st.sentences == 0:
            raise InputError(self.path, f"no text in the {self.format} input ({st.lines} record(s), all empty)")


    def split_into_sentences(self, split: Callable[[str], list[str]], *, max_chars: int = DEFAULT_MAX_CHARS,
                        stats: CorpusStats | None = None, ids: list | None = None,
                        positions: list | None = None) -> Iterator[tuple[int, str]]:
        """`sentences()` with each record split by `split` (xmine.sentences): (record number,
        sentence) of every sentence; with `ids`, each sentence's record id is appended to it
        first, with `positions` its 1-based index in its record. One record in memory at a time."""
        record_ids: list | None = [] if ids is not None else None
        for number, text in self.sentences(max_chars=max_chars, stats=stats, ids=record_ids):
            rid = record_ids.pop() if record_ids is not None else None
            for i, sentence in enumerate((s for s in split(text) if s.strip()), 1):
                if ids is not None:
                    ids.append(rid)
                if positions is not None:
                    positions.append(i)
                yield number, sentence


class TextReader(CorpusReader):
    """One sentence a line (xmine.corpus); identity as a text file's always was."""

    def check(self) -> None:
        self.count = count_lines(self.path)  # validates missing / empty; lines are checked as read

    def identity(self) -> dict[str, Any]:
        from xmine.fileio import sha256_file

        return {"path": str(self.path.resolve()), "size": self.path.stat().st_size,
                "sha256": sha256_file(self.path), "lines": self.count}

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        for number, text in iter_lines(self.path):
            yield number, text, None

    def sentences(self, *, max_chars: int = DEFAULT_MAX_CHARS, stats: CorpusStats | None = None,
                  ids: list | None = None) -> Iterator[tuple[int, str]]:
        for item in iter_corpus(self.path, max_chars=max_chars, stats=stats, warn=False):
            if ids is not None:
                ids.append(None)
            yield item


class JsonlReader(CorpusReader):
    """JSON Lines, one object a line (blank lines skipped, their numbers kept)."""

    format = "jsonl"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        for number, line in iter_lines(self.path):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise InputError(self.path, f"invalid JSON ({e})", line=number) from None
            text, rid = _text_of(record, self.spec, self.path, "", number)
            yield number, text, rid


def _columns(spec: InputFormat, names: list[str]) -> list[str]:
    """The top-level columns a dotted field needs (a column whose name holds the dots wins)."""
    wanted = []
    for dotted in (spec.text_field, spec.id_field):
        if dotted is None:
            continue
        top = dotted if dotted in names else dotted.split(".")[0]
        if top in names and top not in wanted:
            wanted.append(top)
    return wanted


def _table_records(batches: Iterator[list[dict]], spec: InputFormat, path: Path,
                   names: list[str]) -> Iterator[tuple[int, str, str | None]]:
    """Records of a table read in batches of row dicts; row numbers are 1-based."""
    top = spec.text_field if spec.text_field in names else spec.text_field.split(".")[0]
    if top not in names:
        raise InputError(path, f"no column {top!r} (columns: {', '.join(names[:12])}); choose one with "
                               "--text-column / --text-field")
    number = 0
    for batch in batches:
        for row in batch:
            number += 1
            text, rid = _text_of(row, spec, path, f"row {number}: ", None)
            yield number, text, rid


class ParquetReader(CorpusReader):
    """A Parquet file, one record batch at a time, only the columns needed."""

    format = "parquet"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError(self.path, "reading Parquet needs the pyarrow package (pip install pyarrow)") from None
        try:
            f = pq.ParquetFile(self.path)
            names = f.schema_arrow.names
        except Exception as e:  # noqa: BLE001  (pyarrow raises ArrowInvalid, OSError, ...)
            raise InputError(self.path, f"not a readable Parquet file ({_one_line(e)})") from None
        columns = _columns(self.spec, names)

        def batches() -> Iterator[list[dict]]:
            done = 0
            try:
                for batch in f.iter_batches(batch_size=_BATCH, columns=columns):
                    done += batch.num_rows
                    yield batch.to_pylist()
            except Exception as e:  # noqa: BLE001
                raise InputError(self.path, f"damaged Parquet data after row {done} ({_one_line(e)})") from None

        yield from _table_records(batches(), self.spec, self.path, names)


class DatasetReader(CorpusReader):
    """A Hugging Face dataset: a `save_to_disk` folder, or data files read with streaming."""

    format = "hf"

    def _open(self):
        try:
            import datasets
        except ImportError:
            raise InputError(self.path, "reading a Hugging Face dataset needs the datasets package") from None
        datasets.disable_progress_bars()
        try:
            if is_dataset_dir(self.path):
                ds = datasets.load_from_disk(str(self.path))
                if isinstance(ds, datasets.DatasetDict):
                    ds = ds[self._split(list(ds))]
                return ds, list(ds.column_names)
            if self.path.is_dir():
                ds = datasets.load_dataset(str(self.path), split=self.spec.split or "train", streaming=True)
            else:
                builder = _HF_BUILDERS.get(_stem_suffix(self.path))
                if builder is None:
                    raise InputError(self.path, f"no datasets loader for {self.path.suffix or 'a file without extension'} "
                                                f"(known: {', '.join(sorted(_HF_BUILDERS))})")
                ds = datasets.load_dataset(builder, data_files=str(self.path), split=self.spec.split or "train",
                                           streaming=True)
            names = list(ds.column_names or []) or list(ds.features or [])
            return ds, names
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001  (datasets raises many kinds)
            raise InputError(self.path, f"cannot open as a Hugging Face dataset ({_one_line(e)})") from None

    def _split(self, splits: list[str]) -> str:
        if self.spec.split is not None:
            if self.spec.split not in splits:
                raise InputError(self.path, f"no split {self.spec.split!r} (splits: {', '.join(splits)})")
            return self.spec.split
        if len(splits) == 1:
            return splits[0]
        if "train" in splits:
            return "train"
        raise InputError(self.path, f"a DatasetDict with splits {', '.join(splits)}: choose one with --split")

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        ds, names = self._open()
        columns = _columns(self.spec, names)

        def batches() -> Iterator[list[dict]]:
            try:
                for batch in ds.select_columns(columns).iter(batch_size=_BATCH):
                    n = len(next(iter(batch.values()))) if batch else 0
                    yield [{c: batch[c][i] for c in batch} for i in range(n)]
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001
                raise InputError(self.path, f"cannot read the dataset ({_one_line(e)})") from None

        yield from _table_records(batches(), self.spec, self.path, names)


_READERS = {"text": TextReader, "jsonl": JsonlReader, "parquet": ParquetReader, "hf": DatasetReader}


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:300] or type(e).__name__


def open_corpus(path: str | Path, spec: InputFormat | None = None, *, check: bool = True) -> CorpusReader:
    """The reader for `path`; `check=True` reads every record once first (InputError on the first
    bad one), so a command fails before it writes anything."""
    spec = spec or InputFormat()
    path = Path(path)
    fmt = detect_format(path, spec)
    if fmt != "hf" and path.is_dir():
        raise InputError(path, f"is a directory; --input-format {fmt} reads a file")
    reader = _READERS[fmt](path, replace(spec, format=fmt))
    if check:
        reader.check()
    return reader


__all__ = ["FORMATS", "CorpusReader", "InputFormat", "detect_format", "is_dataset_dir", "open_corpus"]
