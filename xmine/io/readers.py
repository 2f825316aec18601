"""Corpus readers, one per input format, each streaming `(record number, text, record id)`.

Every command that reads a corpus (embed, build-index, search, mine) opens it with `open_corpus`,
which picks the format and checks every record before anything is written, then hands
`sentences()` to the store writer (`xmine.store.writer.embed_corpus`) exactly as a text file's
lines: everything downstream (stores, resume, dedup, mining) is the same for every format.

Formats (`FORMATS`; the options that go with each: docs/inputs-outputs.md), chosen by
`detect_format` from the name or the folder, or named (`--input-format`). What a record number
counts: the file line for `text` and `jsonl`; the line a record starts on for `csv` and `tsv`
(`xmine.io.delimited`: a quoted csv field may hold line breaks); the 1-based row for `parquet`
(read one record batch at a time) and for `hf` (of the split; a `save_to_disk` folder is
memory-mapped, data files are streamed).

A record whose text is empty or white space is skipped (counted, its number kept); tabs and line
breaks inside a text become spaces, as in a text file. A missing field, a value that is not a
string, invalid JSON or an unreadable file raises `InputError` naming the file, the record and
the problem. `id_field` keeps each record's own id (a string or number, as a string; one holding
a tab or line break is refused, as a boolean is) beside its number, as provenance. With
`split_sentences` each record is a document or paragraph: `split_into_sentences` yields its
sentences (xmine.io.sentences), each with the record's number and id and its own 1-based index in
the record.
"""

from __future__ import annotations

import json
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from xmine.io.compression import count_lines
from xmine.io.corpus import DEFAULT_MAX_CHARS, CorpusStats, iter_corpus, iter_lines
from xmine.io.delimited import column_index, delimited_rows, field_of, same_width
from xmine.errors import ConfigError, InputError
from xmine.artefacts.fileio import missing, sha256_file
from xmine.io.reader_base import (CorpusReader, InputFormat, format_by_path, option_named, options_given, record_id,
                                  text_of)
from xmine.io.stdin import STDIN, origin_of
from xmine.io.table_readers import DatasetReader, ParquetReader

def detect_format(path: str | Path, spec: InputFormat | None = None) -> str:
    """The format to read `path` as: the named one, else by its extension or folder contents."""
    p = Path(path)
    if why := missing(p):
        raise InputError(p, why)
    if spec is not None and spec.format != "auto":
        return spec.format
    if origin_of(p) == STDIN:
        _refuse_unnamed_jsonl(p)
    return format_by_path(p, default="text", not_dataset="a directory that is neither an xmine artefact nor a "
                          "Hugging Face save_to_disk folder; for a folder of data files pass --input-format hf")


def _refuse_unnamed_jsonl(copy: Path) -> None:
    """Standard input (its local `copy`) has no name to say its format, so it is read as text unless
    --input-format names another; one whose first non-blank line is a JSON object is refused rather
    than mined as its JSON source (was: `cat x.jsonl | xmine mine - ...`, exit 0, pairs of JSON)."""
    with closing(iter_lines(copy)) as lines:
        number, line = next(((n, t) for n, t in lines if t.strip()), (0, ""))
    if not line.lstrip().startswith("{"):
        return
    try:
        record = json.loads(line)
    except ValueError:
        return
    if isinstance(record, dict):
        raise InputError(STDIN, "looks like JSON Lines (a JSON object), and standard input is read as text unless "
                                "--input-format names its format: pass --input-format jsonl (or, for mine, "
                                "--src-input-format/--tgt-input-format), or --input-format text to read its lines "
                                "as they are", line=number)


class TextReader(CorpusReader):
    """One sentence a line (xmine.io.corpus); identity as a text file's always was."""

    def check(self) -> None:
        self.count = count_lines(self.path)  # validates missing / empty; lines are checked as read

    def identity(self) -> dict[str, Any]:
        return {"path": origin_of(self.path) or str(self.path.resolve()), "size": self.path.stat().st_size,
                "sha256": sha256_file(self.path), "lines": self.count}

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        for number, text in iter_lines(self.path):
            yield number, text, None

    def sentences(self, *, max_chars: int = DEFAULT_MAX_CHARS, stats: CorpusStats | None = None,
                  ids: list | None = None, keep_breaks: bool = False) -> Iterator[tuple[int, str]]:
        # (a line of a text file holds no line break: `keep_breaks` changes nothing here)
        for item in iter_corpus(self.path, max_chars=max_chars, stats=stats, warn=False):
            if ids is not None:
                ids.append(None)
            yield item


class JsonlReader(CorpusReader):
    """JSON Lines, one object a line. A blank line is an empty record: skipped, its number kept, and
    counted in the "empty line(s) skipped" warning, as a text file's blank line is (not refused:
    a blank line, often the last, is common in JSON Lines files and holds nothing to lose)."""

    format = "jsonl"
    _blank_lines = 0

    def check(self) -> None:
        super().check()
        self.n_records -= self._blank_lines  # a blank line holds no record (was: counted as one)

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        self._blank_lines = 0
        for number, record in jsonl_records(self.path, blank=True):
            if record is BLANK:  # (a line `null` is a record, and refused as one: was taken for a blank line)
                self._blank_lines += 1
                yield number, "", None
                continue
            text, rid = text_of(record, self.spec, self.path, "", number)
            yield number, text, rid


#: what `jsonl_records(..., blank=True)` gives for a blank line (None is a line `null`)
BLANK = object()


class _DuplicateName(ValueError):
    pass


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateName(next(name for name, _ in pairs if name in seen or seen.add(name)))
    return record


#: JSON whose objects name each field once: Python's parser keeps the last of two values of a name
#: without a word, other tools the first, so a record naming one twice is refused, never read as either
_JSON = json.JSONDecoder(object_pairs_hook=_unique_names)


def jsonl_records(path: Path, *, blank: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of every non-blank line of a JSON Lines file; invalid JSON, or an
    object that names a field twice, is an InputError naming the line. `blank`: a blank line is
    (line number, BLANK) too."""
    with closing(iter_lines(path)) as lines:
        for number, line in lines:
            if not line.strip():
                if blank:
                    yield number, BLANK
                continue
            try:
                yield number, _JSON.decode(line)
            except _DuplicateName as e:
                raise InputError(path, f"an object names the field {e.args[0]!r} twice: which of its values to read "
                                       "is not defined (JSON readers differ), so it is not read; keep one",
                                 line=number) from None
            except ValueError as e:
                # (was the parser's word alone for a JSON array, which is valid JSON but not JSON Lines)
                hint = ("; JSON Lines holds one object a line, and this one opens a JSON array: write one "
                        "record a line (e.g. jq -c '.[]')" if line.lstrip().startswith("[") else "")
                raise InputError(path, f"invalid JSON ({e}){hint}", line=number) from None


class DelimitedReader(CorpusReader):
    """A CSV or TSV file (`xmine.io.delimited`): the text in one column, chosen by name or number."""

    def __init__(self, path: Path, spec: InputFormat):
        self.format = spec.format
        super().__init__(path, spec)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "header": self.has_header()}

    def has_header(self) -> bool:
        return self.spec.header if self.spec.header is not None else self.format == "csv"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        with closing(delimited_rows(self.path, self.format)) as rows:
            names, first = None, None
            if self.has_header():
                first = next(rows, None)
                names = [n.strip() for n in first[1]] if first is not None else []
            at = None if first is None else first[0]
            text = column_index(self.spec.text_field, names, self.path, header_line=at,
                                option=option_named(self.spec, "--text-column"))
            rid = None if self.spec.id_field is None else column_index(
                self.spec.id_field, names, self.path, option=option_named(self.spec, "--id-field"), header_line=at)
            for number, fields in same_width(rows, self.path, self.format, header=first):
                yield (number, field_of(fields, text, self.path, number, what="text"),
                       None if rid is None else record_id(field_of(fields, rid, self.path, number, what="id"),
                                                          self.spec.id_field, self.path, "", number))


_READERS = {"text": TextReader, "jsonl": JsonlReader, "parquet": ParquetReader, "hf": DatasetReader,
            "csv": DelimitedReader, "tsv": DelimitedReader}


#: the record options (`InputFormat.given`) each format has a use for
FIELD_OPTIONS = {"text": frozenset(), "jsonl": frozenset({"--text-field", "--id-field"}),
                 "parquet": frozenset({"--text-field", "--id-field"}),
                 "hf": frozenset({"--text-field", "--id-field", "--split"}),
                 "csv": frozenset({"--text-field", "--id-field", "--header"}),
                 "tsv": frozenset({"--text-field", "--id-field", "--header"})}
_SIDES = ("--src-", "--tgt-")


def _option(given: str) -> str:
    """The shared option a per-side one stands for ("--src-split": "--split")."""
    return "--" + given[len(_SIDES[0]):] if given.startswith(_SIDES) else given


def _check_given(path: Path, fmt: str, spec: InputFormat) -> None:
    unused = sorted(o for o in spec.given if _option(o) not in FIELD_OPTIONS[fmt])
    if unused:
        uses = ", ".join(f for f in FIELD_OPTIONS if _option(unused[0]) in FIELD_OPTIONS[f])
        raise InputError(path, f"{unused[0]} does not apply to a {fmt} input"
                               + (" (one sentence a line, no fields)" if fmt == "text" else "")
                               + f"; it is for {uses} inputs: leave it out or give --input-format")


def for_each_input(specs: list[InputFormat], paths) -> list[InputFormat | None]:
    """The spec for each of a command's corpus inputs (None for a path None: not a corpus): a shared
    record option that another input uses is left out for one with no use for it (`mine a.jsonl
    b.txt --text-field t`); one that no input uses, a per-side one (`--tgt-split`) that its input has
    no use for, and any where no input is a corpus, are refused."""
    def format_of(path, spec: InputFormat) -> str | None:
        if path is None:
            return None
        if str(path) == STDIN:  # read as --input-format names it, text by default
            return "text" if spec.format == "auto" else spec.format
        return detect_format(path, spec)

    fmts = [format_of(p, spec) for p, spec in zip(paths, specs)]
    if all(f is None for f in fmts) and any(options_given(spec) for spec in specs):  # (was: ignored without a word)
        option = next(o for spec in specs for o in options_given(spec))
        raise ConfigError(f"{option}: every input is an xmine store or index, read as stored; {option} is for "
                          "reading a corpus (text, JSON Lines, Parquet, CSV/TSV, a dataset)")
    for spec, f in zip(specs, fmts):
        own = [o for o in options_given(spec) if o.startswith(_SIDES)]
        if f is None and own:
            raise ConfigError(f"{own[0]}: that side is an xmine store or index, read as stored; {own[0]} is for "
                              "reading a corpus")
    used = frozenset().union(*(FIELD_OPTIONS[f] for f in fmts if f is not None))
    out = [None if f is None else replace(spec, given=frozenset(
        o for o in spec.given if o.startswith(_SIDES) or o in FIELD_OPTIONS[f] or o not in used))
        for spec, f in zip(specs, fmts)]
    for path, spec, f in zip(paths, out, fmts):  # refused now, before any input is read or embedded
        if f is not None:
            _check_given(Path(path), f, spec)
    return out


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


def reading_of(path: str | Path, spec: InputFormat | None = None) -> tuple:
    """What is read of the corpus at `path` under `spec`, resolved: its format and the column,
    field or split its text comes from. Two sides of one file that read the same are one input
    however it is spelt (a format named or detected, a column by name or number, a dataset's only
    split named or not)."""
    spec, path = spec or InputFormat(), Path(path)
    fmt = detect_format(path, spec)
    if fmt == "text":
        return ("text",)
    if fmt in ("csv", "tsv"):
        header = spec.header if spec.header is not None else fmt == "csv"
        names = first = None
        if header:
            with closing(delimited_rows(path, fmt)) as rows:
                first = next(rows, None)
            names = [n.strip() for n in first[1]] if first is not None else []
        return fmt, header, column_index(spec.text_field, names, path, option=option_named(spec, "--text-column"),
                                         header_line=None if first is None else first[0])
    split = spec.split
    if fmt == "hf" and split is None and (path / "dataset_dict.json").is_file():
        try:
            splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8")).get("splits")
        except (OSError, ValueError, AttributeError):
            splits = None
        split = splits[0] if isinstance(splits, list) and len(splits) == 1 else None
    return fmt, spec.text_field, split


def check_has_text(path: str | Path, spec: InputFormat | None = None) -> None:
    """InputError, reading no further than its first sentence, where the corpus at `path` holds none
    (an empty file, only empty records): a command that reads two inputs fails on either before it
    encodes the other (was: `mine` encoded SRC, then refused an empty TGT, leaving its work)."""
    with closing(open_corpus(path, spec, check=False).sentences()) as sentences:
        next(sentences, None)


__all__ = ["FIELD_OPTIONS", "check_has_text", "detect_format", "for_each_input", "jsonl_records", "open_corpus",
           "reading_of"]
