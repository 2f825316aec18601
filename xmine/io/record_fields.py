"""Fields of a corpus's records that travel with its sentences into mined outputs (`--keep-field`:
a document's URL, its domain), read again from the corpus for the records that were mined.

The store keeps only each sentence's record number (and id); the fields are read from the corpus
when the output is written, for the records the output needs, one record at a time, into a file
of their values that the writers read a pair at a time: memory is two integers per mined pair,
never the values (a URL each: ten times the pairs' own arrays) and never the corpus. A record
without the field gives None; a field that none of the first `FIELD_SAMPLE` records holds is
refused (most likely a typo), naming the file and the first record's fields. Values are kept as
strings (objects, lists and booleans as JSON).
"""

from __future__ import annotations

import json
import tempfile
from array import array
from contextlib import closing
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from xmine.io.delimited import check_named_once, delimited_rows, same_width
from xmine.errors import ConfigError, InputError
from xmine.artefacts.input_artefacts import artefact_kind
from xmine.io.reader_base import MISSING, InputFormat, field_at, text_problem
from xmine.io.readers import detect_format, jsonl_records, open_corpus
from xmine.io.table_readers import dataset_rows, open_parquet, parquet_rows
from xmine.store.text import TextColumn

#: formats whose records have fields (a text file's lines have none)
FIELD_FORMATS = ("jsonl", "parquet", "hf", "csv", "tsv")


#: the columns xmine writes of each side itself (as `src_<name>`, `tgt_<name>`), which a kept field's may not take
SIDE_COLUMNS = {"file": "the input's name", "record": "the record number", "id": "the record's --id-field value",
                "sentence_index": "the sentence's index in its record (--split-sentences)",
                "lid": "the language the filter identified", "lid_score": "the filter's confidence in it"}


def kept_field_columns(names: Sequence[str], role: str) -> list[str]:
    """The output column of each kept record field of a side (`--keep-field meta.url` -> `src_meta_url`);
    a ConfigError where one is a column xmine writes itself (was: a traceback after the search in the
    parquet and hf formats, jsonl's own `src_file` silently replaced) or two fields share one (was:
    one value silently lost)."""
    columns = [f"{role}_{name.replace('.', '_')}" for name in names]
    for name, column in zip(names, columns):
        own = SIDE_COLUMNS.get(column.removeprefix(f"{role}_"))
        if own is not None:
            hint = "; pass --id-field id for the ids" if name == "id" else ""
            raise ConfigError(f"--keep-field {name!r}: its column {column} is xmine's own ({own}){hint}")
    for name, column in zip(names, columns):
        twins = [other for other, c in zip(names, columns) if c == column]
        if len(twins) > 1:
            raise ConfigError(f"--keep-field {' and '.join(repr(t) for t in twins)}: both would be the column {column}; "
                              "keep one of them")
    return columns


def check_fields_readable(path: str | Path, spec: InputFormat | None, names: Sequence[str], *, option: str) -> None:
    """Refuse `--keep-field` for an input whose records have no fields, or one of `names` that none of
    its first `FIELD_SAMPLE` records holds (before anything is written)."""
    path = Path(path)
    if artefact_kind(path, spec) != "text":
        raise ConfigError(f"{option}: {path} is an xmine artefact; the fields are read from a corpus: give the "
                          "JSON Lines, Parquet, CSV or dataset input itself")
    fmt = detect_format(path, spec)
    if fmt not in FIELD_FORMATS:  # (the advice: a .tsv name alone is read as text)
        raise ConfigError(f"{option}: {path} is read as plain text, whose lines have no fields; a file of records "
                          "is named .jsonl, .csv or .parquet, or given as such with --input-format (or "
                          "--src-input-format/--tgt-input-format), e.g. tsv")
    if fmt in ("csv", "tsv") and open_corpus(path, spec or InputFormat(), check=False).has_header():
        with closing(delimited_rows(path, fmt)) as rows:
            header = next(rows, None)
        for name in names if header is not None else ():  # (was: the last of them, without a word)
            check_named_once(name, [n.strip() for n in header[1]], path, option=option, header_line=header[0],
                             advice="which to keep is not defined; rename one")
    check = _FieldCheck(path, names, option)
    with closing(_records(path, spec or InputFormat())) as records:
        for number, record in records:
            if check.saw(number, record):
                break
        else:
            check.done()


#: the records a kept field is looked for in before the run: a field none of them holds is taken for a
#: typo (a sparse field, missing from some records, is written as null; was: refused where the first
#: record alone lacked it, so whether a run started depended on the records' order)
FIELD_SAMPLE = 1000


class _FieldCheck:
    """Refuses the kept fields that none of a corpus's first `FIELD_SAMPLE` records holds."""

    def __init__(self, path: Path, names: Sequence[str], option: str):
        self.path, self.option, self.missing, self.seen, self.first = path, option, list(names), 0, None

    def saw(self, number: int, record: dict) -> bool:
        """Note a record (in file order); True once the check is over (passed, or refused by raising)."""
        if self.first is None:
            self.first = (number, record)
        self.missing = [name for name in self.missing if field_at(record, name) is MISSING]
        self.seen += 1
        if not self.missing:
            return True
        if self.seen >= FIELD_SAMPLE:
            self.done()
        return False

    def done(self) -> None:
        """The records are over (or the sample is): refuse what is still missing."""
        if not self.missing or self.first is None:
            return
        number, record = self.first
        shown = ", ".join(list(record)[:12]) if isinstance(record, dict) else f"a {type(record).__name__}"
        names = " and ".join(repr(name) for name in self.missing)
        where = "any record" if self.seen < FIELD_SAMPLE else f"any of the first {FIELD_SAMPLE:,} records"
        raise InputError(self.path, f"{self.option} {names}: no such field in {where} (fields of the first: "
                                    f"{shown})", line=number)


def _records(path: Path, spec: InputFormat) -> Iterator[tuple[int, dict]]:
    """(record number, record as a dict) of every record, numbered as the corpus readers number them."""
    reader = open_corpus(path, spec, check=False)
    fmt = reader.format
    if fmt == "jsonl":
        yield from jsonl_records(path)
    elif fmt in ("csv", "tsv"):
        with closing(delimited_rows(path, fmt)) as rows:
            header = next(rows, None) if reader.has_header() else None
            names = [n.strip() for n in header[1]] if header is not None else None
            for number, fields in same_width(rows, path, fmt, header=header):
                keys = names or [str(i) for i in range(1, len(fields) + 1)]
                yield number, dict(zip(keys, fields))
    elif fmt in ("parquet", "hf"):
        batches = (parquet_rows(open_parquet(path)[0], path) if fmt == "parquet" else
                   dataset_rows(reader.open_dataset()[0], path))
        yield from enumerate((row for batch in batches for row in batch), 1)
    else:
        raise ConfigError(f"{path} is read as plain text, whose lines have no fields")


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    # (a bool as JSON spells it: was Python's "True")
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, bool)) else str(value)


class KeptFieldColumn:
    """One kept field's value (str or None) of each mined pair, in output order, read from the file
    `record_fields` wrote (a line per record: the JSON list of its kept values)."""

    #: what the writers' schemas read instead of the values (strings; None where a record lacks it)
    dtype = np.dtype(object)

    def __init__(self, lines: TextColumn, line_of_pair: np.ndarray, position: int, last: list | None = None):
        self.lines, self.line_of_pair, self.position = lines, line_of_pair, position
        # [line, its values] of the line read last, shared by the columns of one file: the writers
        # ask for each of a pair's values, some more than once (was: the line read from disk and
        # parsed for every value asked, 18x slower than the values held in memory)
        self._last = last if last is not None else [-1, []]

    def __len__(self) -> int:
        return len(self.line_of_pair)

    def __getitem__(self, i: int) -> str | None:
        line = int(self.line_of_pair[i])
        if line < 0:
            return None
        if self._last[0] != line:
            self._last[:] = line, json.loads(self.lines[line])
        return self._last[1][self.position]


def record_fields(path: str | Path, spec: InputFormat | None, names: Sequence[str],
                  records: np.ndarray, directory: Path) -> list[KeptFieldColumn]:
    """Per name, the field's value (str or None) in the record `records[i]` (1-based record numbers),
    the values written to a file in `directory` (the caller's to remove) as they are read."""
    path = Path(path)
    spec = spec or InputFormat()
    records = np.asarray(records, dtype=np.int64)
    wanted = np.unique(records)
    line_of_record = np.full(len(wanted), -1, dtype=np.int64)  # (-1: the record was not found)
    offsets, lines = array("q", [0]), 0  # (8 bytes a record, not a Python int's 36)
    fd, values_file = tempfile.mkstemp(dir=directory, prefix="kept-fields-", suffix=".jsonl")
    # (checked before the command started; the file may have changed since)
    check = _FieldCheck(path, names, "--keep-field")
    checking = True
    with open(fd, "wb") as out, closing(_records(path, spec)) as read:
        for number, record in read:
            if checking:
                checking = not check.saw(number, record)
            if lines == len(wanted):  # (every record wanted found: the rest is read only while the check runs)
                if not checking:
                    break
                continue
            k = min(int(np.searchsorted(wanted, number)), len(wanted) - 1)
            if wanted[k] != number or line_of_record[k] >= 0:
                continue
            values = [_as_text(None if (v := field_at(record, name)) is MISSING else v) for name in names]
            for name, value in zip(names, values):  # (was: an encoding error writing the output)
                if value is not None and (why := text_problem(value)) is not None:
                    raise InputError(path, f"record {number}: --keep-field {name!r} holds {why}")
            line = json.dumps(values, ensure_ascii=False).encode("utf-8") + b"\n"
            out.write(line)
            offsets.append(offsets[-1] + len(line))
            line_of_record[k], lines = lines, lines + 1
        else:
            check.done()
    column = TextColumn(Path(values_file), np.frombuffer(offsets, dtype=np.int64))
    line_of_pair = line_of_record[np.searchsorted(wanted, records)] if len(records) else line_of_record[:0]
    last: list = [-1, []]
    return [KeptFieldColumn(column, line_of_pair, j, last) for j in range(len(names))]


__all__ = ["FIELD_FORMATS", "FIELD_SAMPLE", "SIDE_COLUMNS", "KeptFieldColumn", "check_fields_readable", "kept_field_columns", "record_fields"]
