"""Reading delimited text tables: TSV and CSV, plain or compressed, one record at a time.

- TSV: one record a line, fields split on tabs, no quoting (what Moses, OPUS and most bitext
  tools write: a sentence may hold a `"` of its own, which a quoting reader would take for the
  start of a quoted field and run into the next lines).
- CSV: RFC 4180 through Python's `csv` module: quoted fields may hold commas, quotes (`""`) and
  line breaks, so one record may span several lines.

Records are numbered by the line they start on (1-based), so an error names the line a user
sees in an editor. Blank lines are no records. A header line names the columns; a column is
chosen by its 1-based number or, with a header, by its name (`column_index`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator

from xmine.io.compression import file_head, open_binary, read_errors
from xmine.io.corpus import MAX_LINE_BYTES, CorpusStats, LineTooLong, raw_lines, decode_line, iter_lines
from xmine.errors import InputError

DELIMITED_FORMATS = ("tsv", "csv")
# csv's default field limit (128 KiB) refuses long documents; a line of a corpus may be longer.
_FIELD_LIMIT = 1 << 30


def delimited_rows(path: str | Path, fmt: str, *, blank_fields: bool = False,
                   stats: CorpusStats | None = None) -> Iterator[tuple[int, list[str]]]:
    """(line the record starts on, its fields) of every non-blank record of a TSV or CSV file.
    `blank_fields`: every line is a record, blank ones too (a bitext's rows are its lines, pair i the
    i-th: a pair of two empty sides is one of them, reported, not skipped); a line with no field at
    all is given as `[]`, which `same_width` widens to the file's columns. `stats`: a TSV file's lines
    as read (`iter_lines`)."""
    path = Path(path)
    if fmt == "tsv":
        for number, line in iter_lines(path, keep_tabs=True, stats=stats):
            if blank_fields and not line.strip() and "\t" not in line:
                yield number, []
            elif line.strip() or blank_fields:
                yield number, line.split("\t")
        return
    if fmt != "csv":
        raise ValueError(f"fmt must be one of {DELIMITED_FORMATS}, not {fmt!r}")

    csv.field_size_limit(_FIELD_LIMIT)
    # Lines end at "\n" alone (a CRLF's "\r" goes with it), as every other reader counts them, or at
    # "\r" in a file of lone CR line ends: a lone CR inside a quoted field is part of the field (was:
    # counted as a line, shifting the number of every later record by one).
    end = _csv_line_end(path)
    with open_binary(path) as raw:
        # each physical line decoded alone, so that invalid UTF-8 names its own line (was: the line of
        # the record being read when an 8 KB chunk was decoded: line 1 of a small file)
        def lines():
            for number, line in enumerate(raw_lines(raw, end == "\r"), start=1):
                body = line.rstrip(b"\r\n")
                text = decode_line(body, path, number) + line[len(body):].decode("ascii")
                # a BOM starting any line goes, as `iter_lines` does: a file joined from several
                # (`cat a.csv b.csv`) holds one at each file's start, before its quote
                yield text[1:] if text.startswith("\ufeff") else text
        reader = csv.reader(lines(), strict=True)
        start = 1
        try:
            for fields in reader:
                if blank_fields and not any(f.strip() for f in fields) and len(fields) <= 1:
                    yield start, []
                elif any(f.strip() for f in fields) or blank_fields:
                    yield start, fields
                start = reader.line_num + 1
        except LineTooLong:
            raise InputError(path, f"longer than {MAX_LINE_BYTES >> 20} MiB: no record xmine reads (a file without "
                                   "line breaks?)", line=reader.line_num + 1) from None
        except csv.Error as e:
            if "new-line character seen in unquoted field" in str(e):  # (csv's advice is for Python code)
                raise InputError(path, "a line break (\\r) inside an unquoted field: quote the field, or remove "
                                       "it", line=reader.line_num) from None
            raise InputError(path, f"malformed CSV ({e})", line=start) from None
        except read_errors() as e:
            raise InputError(path, f"cannot read (corrupt or truncated file?): {e}", line=start) from None


def _csv_line_end(path: Path) -> str:
    """"\r" for a CSV file whose lines end in a lone carriage return, else "\n": judged on its first
    MB outside quoted fields, where a field may hold either (a quoted line feed in a file of CR
    line ends made it read as one line)."""
    outside = file_head(path).split(b'"')[::2]  # the text between quoted fields ("" inside one splits it evenly)
    lone_cr = sum(part.count(b"\r") - part.count(b"\r\n") for part in outside)
    return "\r" if lone_cr and not any(b"\n" in part for part in outside) else "\n"


#: what most often gives a record more columns than the rest
_EXTRA_COLUMN = {"tsv": "a tab inside a sentence?",
                 "csv": 'a comma inside an unquoted field? quote it: "Hallo, Welt"'}
#: and fewer
_MISSING_COLUMN = {"tsv": "a field and its tab missing?", "csv": "a field and its comma missing?"}


def same_width(rows: Iterator[tuple[int, list[str]]], path: Path, fmt: str, *,
               header: tuple[int, list[str]] | None = None) -> Iterator[tuple[int, list[str]]]:
    """The records of `rows` (`delimited_rows`), each refused unless it has the file's column count:
    the `header`'s (line, names), else the first record's. A sentence cut at an unquoted comma (or
    a tab) would otherwise be read as its first part, the rest dropped without a word. A blank line
    (`[]`, from `delimited_rows(blank_fields=True)`) is a record of blank fields of the file's width;
    those before the width is known wait for it (a file of blank lines alone gives them as `[]`)."""
    width_line, width = (header[0], len(header[1])) if header is not None else (None, None)
    waiting: list[int] = []  # blank lines met before the first record gave the width
    for number, fields in rows:
        if not fields:
            if width is None:
                waiting.append(number)
            else:
                yield number, [""] * width
            continue
        if width is None:
            width_line, width = number, len(fields)
            yield from ((blank, [""] * width) for blank in waiting)
            waiting = []
        elif len(fields) != width:
            cause = (_EXTRA_COLUMN if len(fields) > width else _MISSING_COLUMN)[fmt]
            raise InputError(path, f"{len(fields)} column(s), but line {width_line} has {width}: every line needs "
                                   f"the same columns ({cause})", line=number)
        yield number, fields
    yield from ((blank, []) for blank in waiting)


def column_index(column: str, header: list[str] | None, path: Path, *, option: str,
                 header_line: int | None = None) -> int:
    """The 0-based index of `column`: a 1-based number, or with a header (on line `header_line`) a
    column name that the header holds once."""
    if header is not None and column in header:
        # (was: the first of them, without a word)
        check_named_once(column, header, path, option=option, header_line=header_line,
                         advice="give the number of the one to read")
        return header.index(column)
    if column.isdecimal() and int(column) >= 1:  # (isdigit: also "²", which int() refuses)
        return int(column) - 1
    if column.isdecimal():  # (was: "a column is named by its 1-based number" of the number 0)
        raise InputError(path, f"{option} {column!r}: columns are numbered from 1 (the first is 1)")
    if header is None:
        raise InputError(path, f"{option} {column!r}: without a header line a column is named by its 1-based "
                               "number (or pass --header)")
    shown = ", ".join(header[:12])
    raise InputError(path, f"{option} {column!r}: no such column (columns: {shown}); name one or give its number",
                     line=1)


def check_named_once(name: str, header: list[str], path: Path, *, option: str, header_line: int | None,
                     advice: str) -> None:
    """InputError (`advice` says what to do) where the `header` (on line `header_line`) names more
    than one column `name`: which of them `option` means is not defined."""
    numbers = [str(i + 1) for i, column in enumerate(header) if column == name]
    if len(numbers) > 1:
        raise InputError(path, f"{option} {name!r}: the header has {len(numbers)} columns of that name (columns "
                               f"{', '.join(numbers)}); {advice}", line=header_line)


def field_of(fields: list[str], index: int, path: Path, line: int, *, what: str) -> str:
    """fields[index], or an InputError naming the line and how many columns it has."""
    if index >= len(fields):
        raise InputError(path, f"{len(fields)} column(s), but the {what} is column {index + 1}", line=line)
    return fields[index]


__all__ = ["DELIMITED_FORMATS", "column_index", "delimited_rows", "field_of", "same_width"]
