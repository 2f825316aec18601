"""What every corpus reader shares (`xmine.io.readers`): the --input-format options, the base class
that streams `(record number, text, record id)` and cleans texts as a text file's lines are, and
reading the text and id fields of one record."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from xmine.io.corpus import DEFAULT_MAX_CHARS, WARN_LIST, CorpusStats, is_blank
from xmine.errors import ConfigError, InputError, check_field_types
from xmine.artefacts.fileio import sha256_file
from xmine.artefacts.output_state import tree_record
from xmine.io.stdin import recorded_path

FORMATS = ("text", "jsonl", "parquet", "hf", "csv", "tsv")
#: the suffixes of the compressed files the readers decompress (by content: the suffix only names them)
COMPRESSED_SUFFIXES = (".gz", ".xz", ".zst", ".zstd", ".bz2")
# Files a `save_to_disk` folder holds (Dataset: state.json; DatasetDict: dataset_dict.json).
_HF_MARKERS = ("state.json", "dataset_dict.json")
#: what `field_at` returns for a field a record does not have
MISSING = object()
# What a text or id from a record may not hold in a one-line-a-row store: tabs and every line break
# (a text file's reader splits on \n itself; a JSON string or a table cell may hold one).
_BREAKERS = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: what no text holds: a NUL character, or a lone surrogate (a JSON escape of half a UTF-16 pair)
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """What makes a string read from a record (JSON Lines, Parquet, a dataset) no text, or None: a
    NUL character (a text file's NUL byte is refused alike) or a lone surrogate, which no UTF-8
    file can hold (was: a tokenizer's TypeError, or an encoding error while writing the output)."""
    found = _NOT_TEXT.search(value)
    if found is None:
        return None
    char = found.group()
    return ("a NUL character (U+0000): binary data, expected text" if char == "\x00" else
            f"a lone surrogate (\\u{ord(char):04x}), half of a UTF-16 pair: not valid Unicode text")


def one_line(text: str) -> str:
    """`text` with each tab and line break a space (one for one: the length stays)."""
    return _BREAKERS.sub(" ", text)


def fields_named(config, names: tuple[str, ...]) -> None:
    """The fields `names` of the frozen dataclass `config` given as an int (a tsv/csv column, 1-based,
    as a Python caller writes it) made the string the command line gives (was: an AttributeError)."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, int) and not isinstance(value, bool):
            object.__setattr__(config, name, str(value))


@dataclass(kw_only=True, frozen=True)
class InputFormat:
    """How to read a corpus file or folder (the --input-format options)."""

    #: "auto" (by extension, compression suffix ignored, or by folder contents) or one of FORMATS
    format: str = "auto"
    #: jsonl / hf: dotted path of the text field; parquet: the column (dotted: into a struct)
    text_field: str = "text"
    #: optional dotted path of each record's own id, kept as provenance
    id_field: str | None = None
    #: csv / tsv: whether the first line names the columns (None: csv yes, tsv no)
    header: bool | None = None
    #: hf: the split of a DatasetDict (default: the only one; several need it) or of data files
    #: (default "train")
    split: str | None = None
    #: split each record (line) into sentences with the corpus language's splitter
    #: (xmine.io.sentences); each sentence becomes a row that keeps its record and its index in it
    split_sentences: bool = False
    #: the record options given on the command line ("--text-field", "--id-field", "--split"): each
    #: must apply to the input's format (`FIELD_OPTIONS`), not be ignored without a word. None (an
    #: InputFormat made in Python): those whose value is not the default
    given: frozenset[str] | None = None
    #: the option that set `format`, as errors name it (a side's own: --src-input-format)
    format_option: str = "--input-format"

    def __post_init__(self) -> None:
        fields_named(self, ("text_field", "id_field"))
        check_field_types(self, strings=("format", "text_field", "id_field", "split", "format_option"),
                          booleans=("header", "split_sentences"))
        if self.format not in ("auto",) + FORMATS:
            raise ConfigError(f"{self.format_option} must be auto or one of {', '.join(FORMATS)}, not {self.format!r}")
        if not self.text_field:
            raise ConfigError("--text-field must not be empty")
        if self.given is None:  # (frozen: set once, here)
            not_default = {"--text-field": self.text_field != "text", "--id-field": self.id_field is not None,
                           "--header": self.header is not None, "--split": self.split is not None}
            object.__setattr__(self, "given", frozenset(o for o, differs in not_default.items() if differs))


def options_given(spec: InputFormat | None) -> list[str]:
    """The reading options `spec` holds that are not the default (`--input-format`, `--split-sentences`
    and the record options given), as the command line names them."""
    if spec is None:
        return []
    return ([spec.format_option] if spec.format != "auto" else []) + sorted(spec.given) + \
        (["--split-sentences"] if spec.split_sentences else [])


def file_change(was: dict[str, Any], now: dict[str, Any]) -> str | None:
    """How a file's record `now` differs from `was`, its record when a run began (each of "size" and
    "sha256", or a store's "manifest_sha256"; other fields, its path, are not compared), or None."""
    if was.get("size") is not None and now.get("size") != was.get("size"):
        return f"{was['size']:,} bytes when the run began, {now.get('size') or 0:,} now"
    compared = ("size", "sha256", "manifest_sha256")
    if all(was.get(k) == now.get(k) for k in compared):
        return None
    return "its content changed" + (", its size did not" if was.get("size") is not None else "")


def option_named(spec: InputFormat, option: str) -> str:
    """`option` (a shared record option, "--text-column" or "--id-field") as errors name it: the
    side's own (`--src-text-column`) where that one was given (was: the shared name, which the
    user had not typed)."""
    base = option.replace("-column", "-field")  # (--text-column is --text-field's other name)
    own = next((name for name in sorted(spec.given or ()) if name != base and name.endswith(base[1:])), None)
    return option if own is None else own.replace("-field", "-column") if option.endswith("-column") else own


def is_dataset_dir(path: str | Path) -> bool:
    """True for a Hugging Face `save_to_disk` folder."""
    p = Path(path)
    return p.is_dir() and any((p / m).is_file() for m in _HF_MARKERS)


def size_and_sha256(path: Path) -> tuple[int, str]:
    """(bytes, sha256) of a file, or of a folder over its files' names and sha256."""
    if path.is_dir():
        tree = tree_record(path)
        return tree["bytes"], tree["sha256"]
    return path.stat().st_size, sha256_file(path)


def stem_suffix(path: Path) -> str:
    """The extension that names the format: `.jsonl` of `x.jsonl.zst`."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


_FORMAT_OF_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet",
                     ".csv": "csv"}


def format_by_path(path: Path, *, default: str, not_dataset: str) -> str:
    """The format of an existing `path`: "hf" for a Hugging Face save_to_disk folder (another folder
    is an InputError saying `not_dataset`), else what its extension names (`stem_suffix`: jsonl,
    parquet, csv), else `default` (sentence inputs: text; bitexts: tsv)."""
    if path.is_dir():
        if is_dataset_dir(path):
            return "hf"
        raise InputError(path, not_dataset)
    return _FORMAT_OF_SUFFIX.get(stem_suffix(path), default)


def field_at(record: Any, dotted: str) -> Any:
    """The value at `dotted` (`meta.text`) in nested mappings; a key that itself holds dots wins. A
    null on the way is the value's null (`"translation": null`: was "no field translation.de")."""
    if isinstance(record, dict) and dotted in record:
        return record[dotted]
    value = record
    for part in dotted.split("."):
        if value is None and value is not record:
            return None
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def json_kind(value: Any) -> str:
    """What JSON calls the kind of a parsed value ("null", "number", "list", ...; was: "NoneType")."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    return {int: "number", float: "number", str: "string", list: "list", dict: "object"}.get(type(value),
                                                                                            type(value).__name__)


def a_kind(value: Any) -> str:
    """A value's kind with its article, as errors say it ("a number", "an object", "null")."""
    kind = json_kind(value)
    return kind if kind == "null" else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def text_of(record: Any, spec: InputFormat, path: Path, where: str, line: int | None) -> tuple[str, str | None]:
    """(text, id) of one record, or InputError saying what is wrong with it."""
    if not isinstance(record, dict):
        raise InputError(path, f"{where}is a JSON {json_kind(record)}, expected an object with a "
                               f"{spec.text_field!r} field", line=line)
    text = field_at(record, spec.text_field)
    if text is MISSING:
        keys = ", ".join(list(record)[:8])
        raise InputError(path, f"{where}no field {spec.text_field!r} (fields: {keys}); choose one with "
                               "--text-field / --text-column", line=line)
    if not isinstance(text, str):
        shown = "null" if text is None else f"{a_kind(text)} ({str(text)[:40]})"  # (was: Python's "int '5'")
        raise InputError(path, f"{where}field {spec.text_field!r} is {shown}, not a string", line=line)
    if (why := text_problem(text)) is not None:
        raise InputError(path, f"{where}field {spec.text_field!r} holds {why}", line=line)
    rid = None
    if spec.id_field is not None:
        value = field_at(record, spec.id_field)
        # a boolean is not an id (str() would store JSON's true as "True")
        if value is MISSING or value is None or isinstance(value, (dict, list, bool)):
            what = "missing" if value is MISSING else a_kind(value)
            raise InputError(path, f"{where}id field {spec.id_field!r} is {what}, expected a string or number",
                             line=line)
        rid = record_id(str(value), spec.id_field, path, where, line)
    return text, rid


def record_id(value: str, field: str, path: Path, where: str, line: int | None) -> str:
    """A record's id as kept (one a line in a store's ids.txt, a column of the outputs), or
    InputError: an id holding a tab or line break cannot be kept as it is, and one changed would
    no longer name its record."""
    if _BREAKERS.search(value):
        raise InputError(path, f"{where}id field {field!r} holds a tab or line break ({value[:40]!r}); ids are kept "
                               "one a line, so they must not", line=line)
    if (why := text_problem(value)) is not None:
        raise InputError(path, f"{where}id field {field!r} holds {why}", line=line)
    return value


class CorpusReader:
    """One corpus in one format. `count` (the last record's number; lines for text), `n_records`
    and `identity()` are known once `open_corpus` has checked every record."""

    format = "text"

    def __init__(self, path: Path, spec: InputFormat):
        self.path, self.spec = path, spec
        self.count = self.n_records = 0
        self.has_ids = spec.id_field is not None and self.format != "text"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        """(record number, raw text, id or None) of every record, empty ones included."""
        raise NotImplementedError

    def check(self) -> None:
        """Read every record once (raises InputError on the first bad one) and count them: `count`,
        the last record's number (a file line: the progress bars count those), `records`, how many
        there are (was recorded as the last number: a CSV's header and quoted line breaks counted)."""
        n = records = 0
        for n, _, _ in self.records():
            records += 1
        self.count, self.n_records = n, records

    def identity(self) -> dict[str, Any]:
        """What identifies the input (a store made from it records this; resume compares it)."""
        size, digest = size_and_sha256(self.path)
        return {"path": recorded_path(self.path), "size": size, "sha256": digest, "format": self.format,
                "text_field": self.spec.text_field, "id_field": self.spec.id_field, "split": self.spec.split,
                "records": self.n_records}

    def changed_since(self, was: dict[str, Any]) -> str | None:
        """How the input differs from `was` (its `identity()` when a run began), or None. A run that
        read it meanwhile (a file still being written) holds what that record does not name."""
        if not self.path.exists():
            return "removed"
        size, digest = size_and_sha256(self.path)
        return file_change(was, {"size": size, "sha256": digest})

    def sentences(self, *, max_chars: int = DEFAULT_MAX_CHARS, stats: CorpusStats | None = None,
                  ids: list | None = None, keep_breaks: bool = False) -> Iterator[tuple[int, str]]:
        """(record number, text) of each non-empty record, cleaned as a text file's lines are;
        with `ids` (a list), each yielded record's id is appended to it first. `keep_breaks`: its
        tabs and line breaks left in (the sentence splitter splits at its line breaks)."""
        st = stats if stats is not None else CorpusStats(path=self.path)
        for number, text, rid in self.records():
            st.lines = number
            if not st.note_line(number, text, max_chars):
                continue
            if not keep_breaks and _BREAKERS.search(text):  # one space for one character: the length counted stays
                text = one_line(text)
                st.replaced_count += 1
            if ids is not None:
                ids.append(rid)
            yield number, text.strip()  # (as a text file's lines: xmine.io.corpus)
        if st.sentences == 0:
            raise InputError(self.path, f"no text in the {self.format} input ({st.lines} record(s), all empty)")

    def split_into_sentences(self, split: Callable[[str], list[str]], *, max_chars: int = DEFAULT_MAX_CHARS,
                        stats: CorpusStats | None = None, ids: list | None = None,
                        positions: list | None = None) -> Iterator[tuple[int, str]]:
        """`sentences()` with each record split by `split` (xmine.io.sentences): (record number,
        sentence) of every sentence; with `ids`, each sentence's record id is appended to it
        first, with `positions` its 1-based index in its record. One record in memory at a time."""
        record_ids: list | None = [] if ids is not None else None
        st = stats if stats is not None else CorpusStats(path=self.path)
        # the sentences, not the records, are cut for encoding: counted below (was: a record of 3,000
        # short sentences said to be cut)
        for number, text in self.sentences(max_chars=sys.maxsize, stats=st, ids=record_ids, keep_breaks=True):
            rid = record_ids.pop() if record_ids is not None else None
            # split at its line breaks too (`split`'s doc); a tab inside a sentence becomes a space
            for i, sentence in enumerate((one_line(s).strip() for s in split(text) if not is_blank(s)), 1):
                if len(sentence) > max_chars:
                    st.long_count += 1
                    if len(st.long_lines) < WARN_LIST and number not in st.long_lines:
                        st.long_lines.append(number)
                if ids is not None:
                    ids.append(rid)
                if positions is not None:
                    positions.append(i)
                yield number, sentence
