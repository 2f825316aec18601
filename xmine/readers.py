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

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from xmine.compression import count_lines
from xmine.corpus import DEFAULT_MAX_CHARS, CorpusStats, iter_corpus, iter_lines
from xmine.errors import InputError
from xmine.reader_base import CorpusReader, InputFormat, is_dataset_dir, stem_suffix, text_of
from xmine.table_readers import DatasetReader, ParquetReader

_JSONL = (".jsonl", ".ndjson", ".json")
_PARQUET = (".parquet", ".pq")


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
    suffix = stem_suffix(p)
    if suffix in _JSONL:
        return "jsonl"
    if suffix in _PARQUET:
        return "parquet"
    return "text"


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
    """JSON Lines, one object a line. A blank line is an empty record: skipped, its number kept, and
    counted in the "empty line(s) skipped" warning, as a text file's blank line is (not refused:
    a blank line, often the last, is common in JSON Lines files and holds nothing to lose)."""

    format = "jsonl"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        for number, line in iter_lines(self.path):
            if not line.strip():
                yield number, "", None
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise InputError(self.path, f"invalid JSON ({e})", line=number) from None
            text, rid = text_of(record, self.spec, self.path, "", number)
            yield number, text, rid


_READERS = {"text": TextReader, "jsonl": JsonlReader, "parquet": ParquetReader, "hf": DatasetReader}
#: the record options (`InputFormat.given`) each format has a use for
FIELD_OPTIONS = {"text": frozenset(), "jsonl": frozenset({"--text-field", "--id-field"}),
                 "parquet": frozenset({"--text-field", "--id-field"}),
                 "hf": frozenset({"--text-field", "--id-field", "--split"})}


def _check_given(path: Path, fmt: str, spec: InputFormat) -> None:
    unused = sorted(spec.given - FIELD_OPTIONS[fmt])
    if unused:
        raise InputError(path, f"{unused[0]} does not apply to a {fmt} input"
                               + (" (one sentence a line, no fields)" if fmt == "text" else "")
                               + f"; it is for {', '.join(f for f in FIELD_OPTIONS if unused[0] in FIELD_OPTIONS[f])} "
                               "inputs: leave it out or give --input-format")


def for_each_input(spec: InputFormat, paths) -> list[InputFormat]:
    """The spec for each of a command's corpus inputs: a record option given for one input that has
    fields is left out for another that has none (`mine a.jsonl b.txt --text-field t`); one that
    applies to no input stays given, so reading refuses it."""
    fmts = [detect_format(p, spec) if p is not None else None for p in paths]
    used = frozenset().union(*(FIELD_OPTIONS[f] for f in fmts if f is not None))
    if spec.given - used:
        return [spec] * len(paths)
    return [replace(spec, given=spec.given & FIELD_OPTIONS[f]) if f is not None else spec for f in fmts]


def open_corpus(path: str | Path, spec: InputFormat | None = None, *, check: bool = True) -> CorpusReader:
    """The reader for `path`; `check=True` reads every record once first (InputError on the first
    bad one), so a command fails before it writes anything."""
    spec = spec or InputFormat()
    path = Path(path)
    fmt = detect_format(path, spec)
    if fmt != "hf" and path.is_dir():
        raise InputError(path, f"is a directory; --input-format {fmt} reads a file")
    _check_given(path, fmt, spec)
    reader = _READERS[fmt](path, replace(spec, format=fmt))
    if check:
        reader.check()
    return reader


__all__ = ["FIELD_OPTIONS", "detect_format", "for_each_input", "open_corpus"]
