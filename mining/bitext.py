"""Reading an existing bitext (pairs one already has) for `xmine score`, one pair at a time.

Formats (`BITEXT_FORMATS`), by `--pairs-format` or detected from the name:

- `tsv` (default for any other name): one pair a line, tab-separated, no quoting; the source and
  target are columns 1 and 2 unless `src_field`/`tgt_field` name others (1-based numbers, or
  names with a header line).
- `csv` (`.csv`): RFC 4180 with quotes honoured, a header line by default.
- `moses`: two line-aligned files, one sentence a line (`--src FILE --tgt FILE` or `a.de:a.en`).
- `stores`: two embedding stores (`xmine embed`) of line-aligned files, given as a Moses pair: pair
  i is line i of both, its texts and vectors the stores' (a line a store skipped, being empty, is
  an empty text; the texts as stores keep them, without surrounding whitespace); what scores
  vectors made elsewhere (`embed --embeddings`), nothing encoded. Stores of CSV files or files
  with a header line, whose rows are not numbered by line, are refused.
- `jsonl` (`.jsonl`, `.ndjson`, `.json`), `parquet` (`.parquet`), `hf` (a `save_to_disk`
  folder): the fields `src_field`/`tgt_field` (dotted: `translation.de`); by default a
  `translation` object's two entries (matched to the languages when given, as xmine's own outputs
  and the datasets `Translation` feature write them), else fields `src` and `tgt`.

Every pair comes with its record (the TSV/CSV fields, the JSON object or the table row), so the
output can repeat it with the scores added. A malformed record raises InputError naming the file
and its line (or row).
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import closing
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from xmine.io.corpus import CorpusStats, iter_lines
from xmine.io.delimited import column_index, delimited_rows, field_of, same_width
from xmine.artefacts.fileio import missing
from xmine.artefacts.input_artefacts import artefact_kind, manifest_hash
from xmine.artefacts.output_state import dir_kind
from xmine.errors import ConfigError, InputError, check_field_types
from xmine.langs import is_known_lang, normalize_lang
from xmine.io.reader_base import (MISSING, a_kind, field_at, fields_named, file_change, format_by_path,
                                   json_kind, size_and_sha256, text_problem)
from xmine.io.stdin import shown_path
from xmine.store import EmbeddingStore
from xmine.io.readers import jsonl_records
from xmine.io.table_readers import dataset_rows, open_parquet, parquet_rows
from xmine.mining.mined_output import mined_moses_summary, mined_summary
from xmine.mining.writers import MINED_TSV_TEXT_COLUMNS

log = logging.getLogger(__name__)

BITEXT_FORMATS = ("tsv", "csv", "moses", "jsonl", "parquet", "hf")


@dataclass(kw_only=True, frozen=True)
class BitextFormat:
    """How to read a bitext (the options of `xmine score`)."""

    #: "auto" (by name) or one of BITEXT_FORMATS
    format: str = "auto"
    #: the source's column (tsv/csv: 1-based number or header name) or dotted field; None: the default
    src_field: str | None = None
    #: the target's, likewise
    tgt_field: str | None = None
    #: tsv/csv: whether the first line names the columns (None: csv yes, tsv no)
    header: bool | None = None
    #: hf: the split of a DatasetDict (default: the only one; several need it)
    split: str | None = None

    def __post_init__(self) -> None:
        fields_named(self, ("src_field", "tgt_field"))
        check_field_types(self, strings=("format", "src_field", "tgt_field", "split"), booleans=("header",))
        if self.format not in ("auto",) + BITEXT_FORMATS:
            raise ConfigError(f"format must be auto or one of {', '.join(BITEXT_FORMATS)} (got {self.format!r})")


class StoredSides(NamedTuple):
    """The two embedding stores of a `stores` bitext, and its pairs: the lines of the files they
    were made from, the same in both."""

    src: EmbeddingStore
    tgt: EmbeddingStore
    lines: int


@dataclass(kw_only=True)
class BitextPair:
    """One pair: where it is, its two texts and the record they came from."""

    #: 1-based line (tsv, csv: where the record starts; jsonl; moses) or row (parquet, hf)
    number: int
    src: str
    tgt: str
    #: list of fields (tsv, csv), dict (jsonl, parquet, hf) or None (moses)
    record: Any


_MOSES_SIDES = "a Moses bitext is two line-aligned text files, or two embedding stores (xmine embed) of such files"


def bitext_format(paths: tuple[Path, ...], spec: BitextFormat) -> str:
    """The format to read `paths` (one, or two for Moses) as."""
    if len(paths) == 2:
        if spec.format not in ("auto", "moses"):
            raise ConfigError(f"two files (a Moses pair) cannot be read as {spec.format}")
        for p in paths:
            if p.is_dir() and dir_kind(p)[0] is None and not (p / "progress.json").is_file():  # (no xmine artefact)
                raise InputError(p, f"is a directory, but no embedding store: {_MOSES_SIDES}")
        kinds = [artefact_kind(p) for p in paths]  # (an unfinished store: refused, saying so)
        if kinds == ["embedding-store"] * 2:
            return "stores"
        if kinds != ["text"] * 2:  # (was: "is a directory, expected a text file")
            said = ["text" if kind == "text" else f"an {kind.replace('-', ' ')}" for kind in kinds]
            i = next((i for i, kind in enumerate(kinds) if kind not in ("text", "embedding-store")),
                     0 if kinds[0] != "text" else 1)
            if kinds[i] != "text" and kinds[1 - i] == kinds[i]:  # (was: "is an index, but the other side is an index")
                raise InputError(paths[i], f"is {said[i]}, as is the other side: {_MOSES_SIDES}")
            raise InputError(paths[i], f"is {said[i]}, but the other side is {said[1 - i]}: {_MOSES_SIDES}")
        return "moses"
    if spec.format == "auto" and paths[0].name.lower().endswith((".tmx", ".tmx.gz")):  # (was: read as TSV columns)
        raise InputError(paths[0], "TMX is not a format xmine score reads; mine to jsonl or tsv (or export the TMX "
                                   "as TSV) to score a bitext")
    if spec.format != "auto":
        if spec.format == "moses":
            raise ConfigError("a Moses bitext is two files: --src FILE --tgt FILE, or SRC_FILE:TGT_FILE")
        return spec.format
    return format_by_path(paths[0], default="tsv", not_dataset="a directory that is not a Hugging Face save_to_disk "
                          "folder; name a TSV, CSV, JSON Lines or Parquet file")


class Bitext:
    """A bitext opened for reading (`pairs()` may be called more than once)."""

    def __init__(self, paths: tuple[Path, ...], spec: BitextFormat = BitextFormat(), *,
                 langs: tuple[str | None, str | None] = (None, None), listed: tuple[bool, bool] = (False, False)):
        self.paths = tuple(Path(p) for p in paths)
        #: per side of a Moses pair, whether its file was written from a Python list (xmine.mining.api):
        #: messages then name the list and its 0-based items
        self.listed = listed
        for p in self.paths:
            if str(p) == "-":
                raise InputError(p, "xmine score reads its bitext twice (to embed it, then to write it with "
                                    "the scores); save standard input to a file first")
            if why := missing(p):
                raise InputError(p, why)
        self.spec, self.langs = spec, langs
        if spec.src_field is not None and spec.src_field == spec.tgt_field:
            raise ConfigError(f"--src-field and --tgt-field both name {spec.src_field!r}: every pair would be a "
                              "sentence against itself")
        self.format = bitext_format(self.paths, spec)
        self._stores: StoredSides | None = None
        # a reading option of another format (was: `--split` on a TSV ignored without a word)
        for given, formats in ((spec.split is not None and "--split", ("hf",)),
                               (spec.header is not None and "--header/--no-header", ("tsv", "csv"))):
            if given and self.format not in formats:
                raise ConfigError(f"{given} does not apply to PAIRS read as {self.format}; it is for "
                                  f"{' and '.join(formats)} bitexts")
        #: `xmine mine`'s summary (OUT.json) where the bitext is its output, else None
        self.mined_summary = (mined_summary(self.path, self.format) if len(self.paths) == 1
                              else mined_moses_summary(self.paths) if self.format == "moses" else None)
        if self.mined_summary is not None and self.mined_summary.get("pairs") == 0:  # (was: "file is empty")
            raise InputError(self.path, "holds no pair: the `xmine mine` run that wrote it kept none (its summary says "
                                        "0 pairs); nothing to score")
        if self.mined_summary is not None and self.format == "tsv" and spec.src_field is None and spec.tgt_field is None:
            # (was: its score column read as the source: "kept 0 of 91 pairs", exit 0)
            log.info("%s is an xmine mining result: its sentences are columns %s and %s", self.path,
                     *MINED_TSV_TEXT_COLUMNS)
            self.spec = spec = dataclasses.replace(spec, src_field=MINED_TSV_TEXT_COLUMNS[0],
                                                   tgt_field=MINED_TSV_TEXT_COLUMNS[1])
        #: tsv/csv with a header: the column names; jsonl/tables: filled as read (None before)
        self.columns: list[str] | None = None
        #: the source's and target's field (dotted) or column (1-based) as read (None before)
        self.read_fields: tuple[str, str] | None = None
        #: TSV and Moses files as read: the statistics of their lines (their line-break characters
        #: replaced by spaces, as every text input's: `replaced_count`), by file
        self.line_stats: dict[Path, CorpusStats] = {}

    @property
    def path(self) -> Path:
        return self.paths[0]

    def identity(self) -> dict[str, Any]:
        """What identifies the bitext read (an output records it): each file's path, size and sha256
        (a dataset folder's over its files), the format and the fields the sides were read from."""
        files = []
        for p in self.paths:
            if self.format == "stores":  # (a store is identified by its manifest, which holds every file's sha256)
                files.append({"path": str(p), "manifest_sha256": manifest_hash(p)})
                continue
            size, digest = size_and_sha256(p)
            files.append({"path": shown_path(p), "size": size, "sha256": digest})
        return {"files": files, "format": self.format, "src_field": self.spec.src_field,
                "tgt_field": self.spec.tgt_field, "header": self.spec.header, "split": self.spec.split,
                "fields_read": None if self.read_fields is None else list(self.read_fields)}

    def check_unchanged(self, began: dict[str, Any]) -> dict[str, Any]:
        """The bitext's `identity()`, or InputError where it differs from `began` (its identity when
        the run began): a file replaced or written to while it was read twice (staged, then read
        again beside its scores) would pair rows with another row's scores (was: caught only where
        it had grown)."""
        now = self.identity()
        for was, is_ in zip(began["files"], now["files"]):
            if (change := file_change(was, is_)) is not None:
                raise InputError(is_["path"], f"changed while it was scored ({change}); run the command again on a "
                                              "file no one writes")
        return now

    def pairs(self) -> Iterator[BitextPair]:
        reader = {"tsv": self._delimited, "csv": self._delimited, "moses": self._moses, "jsonl": self._jsonl,
                  "parquet": self._parquet, "hf": self._dataset, "stores": self._store_pairs}[self.format]
        return reader()

    def stores(self) -> StoredSides:
        """The two embedding stores of a `stores` bitext and its pair count, opened (and so checked)
        once."""
        if self._stores is None:
            stores = tuple(EmbeddingStore.open(p) for p in self.paths)
            lines = []
            for path, store in zip(self.paths, stores):
                if store.sentence_index() is not None:
                    raise InputError(path, "holds sentences split from its lines (--split-sentences); a bitext's "
                                           "side is one sentence a line: embed it without --split-sentences")
                made_from = store.manifest.input
                if made_from.get("format") == "csv" or made_from.get("header"):
                    # (was: a header line scored as an empty pair, and a quoted line break moved the pairs)
                    why = "a header line" if made_from.get("header") else "records that may span lines"
                    raise InputError(path, f"was made from a {made_from['format'].upper()} file with {why}, so "
                                           "its rows are not numbered as the other side's lines; score the "
                                           "bitext's own file(s) instead")
                count = store.manifest.input_stats.get("lines")
                if not isinstance(count, int) or count < (int(store.line_numbers[-1]) if len(store) else 0):
                    raise InputError(path, "records no line count of its input that its rows' line numbers fit "
                                           f"({count!r}); embed the file again")
                lines.append(count)
            if lines[0] != lines[1]:
                raise InputError(self.paths[1], f"was made from {lines[1]} lines, but {self.paths[0]} from "
                                                f"{lines[0]}: the two stores of a bitext are of line-aligned files")
            self._stores = StoredSides(*stores, lines=lines[0])
        return self._stores

    def _store_pairs(self) -> Iterator[BitextPair]:
        stores = self.stores()
        sides = [(s.line_numbers, s.text_column()) for s in (stores.src, stores.tgt)]
        at = [0, 0]
        try:
            for number in range(1, stores.lines + 1):
                texts = []
                for i, (numbers, column) in enumerate(sides):
                    here = at[i] < len(numbers) and int(numbers[at[i]]) == number
                    texts.append(column[at[i]] if here else "")
                    at[i] += here
                yield BitextPair(number=number, src=texts[0], tgt=texts[1], record=None)
        finally:
            for _, column in sides:
                column.close()

    def _delimited(self) -> Iterator[BitextPair]:
        header = self.spec.header if self.spec.header is not None else self.format == "csv"
        names, first = None, None
        stats = self.line_stats[self.path] = CorpusStats(path=self.path)
        with closing(delimited_rows(self.path, self.format, blank_fields=True, stats=stats)) as rows:
            if header:  # (blank lines before it are no pairs: the pairs start after it)
                first = next((row for row in rows if row[1]), None)
                if first is None:
                    raise InputError(self.path, "no header line (the file is empty)")
                names = [n.strip() for n in first[1]]
                self.columns = first[1]
            at = None if first is None else first[0]
            si = column_index(self.spec.src_field or "1", names, self.path, option="--src-field", header_line=at)
            ti = column_index(self.spec.tgt_field or "2", names, self.path, option="--tgt-field", header_line=at)
            if si == ti:
                raise ConfigError(f"--src-field and --tgt-field both name column {si + 1} of {self.path}: every "
                                  "pair would be a sentence against itself")
            self.read_fields = (str(si + 1), str(ti + 1))
            # Every record has the file's column count (the header's, else the first record's):
            # the scores are written after a record's own columns, so one more or less shifts them.
            for number, fields in same_width(rows, self.path, self.format, header=first):
                # a file of blank lines alone (no record gives the width): pairs of two empty sides, as
                # a blank line among records is (was: "0 column(s), but the source is column 1")
                fields = fields or [""] * (max(si, ti) + 1)
                src = field_of(fields, si, self.path, number, what="source")
                tgt = field_of(fields, ti, self.path, number, what="target")
                yield BitextPair(number=number, src=src, tgt=tgt, record=fields)

    def _moses(self) -> Iterator[BitextPair]:
        src_path, tgt_path = self.paths
        # each file as its reader knows it: a list given to the Python API by its name, not the file written from it
        src_shown, tgt_shown = (f"{role} (the list given)" if listed else path
                                for role, listed, path in zip(("src", "tgt"), self.listed, self.paths))
        number = 0
        # Closed when left early (a refused line): the reader's file is closed at once, not when collected.
        stats = [CorpusStats(path=p) for p in self.paths]
        self.line_stats.update(zip(self.paths, stats))
        with closing(iter_lines(src_path, stats=stats[0])) as src_lines, \
                closing(iter_lines(tgt_path, stats=stats[1])) as tgt_lines:
            for number, src in src_lines:
                tgt = next(tgt_lines, None)
                if tgt is None:
                    raise InputError(tgt_path, f"ends at line {number - 1}, but {src_shown} goes on", line=number)
                yield BitextPair(number=number, src=src, tgt=tgt[1], record=None)
            if next(tgt_lines, None) is not None:
                raise InputError(src_path, f"ends at line {number}, but {tgt_shown} goes on", line=number + 1)

    def _fields(self, record: dict) -> tuple[str, str]:
        """The dotted fields of the source and target in records like `record`."""
        if self.spec.src_field and self.spec.tgt_field:
            return self.spec.src_field, self.spec.tgt_field
        translation = record.get("translation") if isinstance(record, dict) else None
        if isinstance(translation, dict) and len(translation) >= 2:
            keys = list(translation)
            picked = _match_languages(keys, self.langs)
            if picked is None and all(self.langs) and not (self.spec.src_field or self.spec.tgt_field):
                # (was: its first two entries, whatever they hold: German read as "French")
                raise InputError(self.path, f"its `translation` objects hold no entries for {self.langs[0]} and "
                                            f"{self.langs[1]} (entries: {', '.join(map(str, keys[:8]))}); name them "
                                            "with --src-field translation.KEY --tgt-field translation.KEY")
            picked = picked or (keys[:2] if len(keys) == 2 else None)
            if picked:
                s, t = (f"translation.{k}" for k in picked)
                return self.spec.src_field or s, self.spec.tgt_field or t
            if not (self.spec.src_field or self.spec.tgt_field):  # (was: "no field 'src' (fields: translation)")
                raise InputError(self.path, f"its `translation` objects hold {len(keys)} languages "
                                            f"({', '.join(map(str, keys[:8]))}); say which two with --src-lang and "
                                            "--tgt-lang (or --src-field translation.KEY --tgt-field translation.KEY)")
        return self.spec.src_field or "src", self.spec.tgt_field or "tgt"

    def _texts(self, record: Any, fields: tuple[str, str], where: str, line: int | None) -> tuple[str, str]:
        if not isinstance(record, dict):
            raise InputError(self.path, f"{where}is a JSON {json_kind(record)}, expected an object", line=line)
        texts = []
        for dotted, option in zip(fields, ("--src-field", "--tgt-field")):
            value = field_at(record, dotted)
            if value is MISSING:
                shown = ", ".join(list(record)[:8])
                raise InputError(self.path, f"{where}no field {dotted!r} (fields: {shown}); choose one with {option}",
                                 line=line)
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise InputError(self.path, f"{where}field {dotted!r} is {a_kind(value)}, not a string", line=line)
            if (why := text_problem(value)) is not None:
                raise InputError(self.path, f"{where}field {dotted!r} holds {why}", line=line)
            texts.append(value)
        return texts[0], texts[1]

    def _record_pairs(self, records: Iterator[tuple[int, Any]], *, rows: bool = False) -> Iterator[BitextPair]:
        """The pairs of numbered records: JSON Lines lines, or (`rows`) table rows, as errors name them."""
        fields = None
        for number, record in records:
            fields = fields or self._fields(record)
            self.read_fields = fields
            src, tgt = self._texts(record, fields, f"row {number}: " if rows else "", None if rows else number)
            yield BitextPair(number=number, src=src, tgt=tgt, record=record)

    def _jsonl(self) -> Iterator[BitextPair]:
        return self._record_pairs(jsonl_records(self.path))

    def _parquet(self) -> Iterator[BitextPair]:
        f, self.columns = open_parquet(self.path)
        yield from self._record_pairs(enumerate(chain.from_iterable(parquet_rows(f, self.path)), 1), rows=True)

    def _dataset(self) -> Iterator[BitextPair]:
        import datasets

        datasets.disable_progress_bars()
        ds = datasets.load_from_disk(str(self.path))
        if isinstance(ds, datasets.DatasetDict):
            splits = list(ds)
            if self.spec.split is None and len(splits) > 1:  # (was: train, without a word; corpora refuse too)
                raise InputError(self.path, f"a DatasetDict with splits {', '.join(splits)}: choose one with --split")
            split = self.spec.split or splits[0]
            if split not in ds:
                raise InputError(self.path, f"no split {split!r} (splits: {', '.join(splits)}); choose one with "
                                            "--split")
            ds = ds[split]
        elif self.spec.split is not None:  # a single Dataset: the split asked for is not there
            raise InputError(self.path, f"a single Dataset, without splits: --split {self.spec.split} names none of "
                                        "its rows (leave it out to read them all)")
        self.columns = list(ds.column_names)
        yield from self._record_pairs(enumerate(chain.from_iterable(dataset_rows(ds, self.path)), 1), rows=True)


def _match_languages(keys: list[str], langs: tuple[str | None, str | None]) -> tuple[str, str] | None:
    """The two `translation` keys that are the source and target languages (codes compared
    normalised: de = deu = deu_Latn), or None."""
    if not all(langs):
        return None
    canon = {k: normalize_lang(k) for k in keys if is_known_lang(k)}
    picked = [next((k for k, c in canon.items() if c == normalize_lang(lang)), None) for lang in langs]
    return (picked[0], picked[1]) if None not in picked and picked[0] != picked[1] else None


def parse_pairs_argument(pairs: str | None, src: Path | None, tgt: Path | None) -> tuple[Path, ...]:
    """The bitext's path(s) from `PAIRS` (a file, a folder, or `SRC_FILE:TGT_FILE`) or `--src/--tgt`."""
    if (src is None) != (tgt is None):
        raise ConfigError("a Moses bitext needs both --src and --tgt")
    if src is not None:
        if pairs is not None:
            raise ConfigError("give PAIRS or --src/--tgt, not both")
        return (Path(src), Path(tgt))
    if pairs is None:
        raise ConfigError("name the bitext: PAIRS (a TSV, CSV, JSON Lines or Parquet file, a dataset folder, or "
                          "SRC_FILE:TGT_FILE), or --src FILE --tgt FILE")
    if not Path(pairs).exists() and ":" in pairs:
        a, b = pairs.rsplit(":", 1)
        if not a or not b:  # (was: the empty side read as ".", "is a directory, but no embedding store")
            raise ConfigError(f"{pairs}: a Moses pair SRC_FILE:TGT_FILE names both files; its "
                              f"{'source' if not a else 'target'} is empty")
        return (Path(a), Path(b))
    return (Path(pairs),)


__all__ = ["BITEXT_FORMATS", "Bitext", "BitextFormat", "BitextPair", "StoredSides", "bitext_format",
           "parse_pairs_argument"]
