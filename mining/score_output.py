"""Writing a scored bitext (`xmine score`): the bitext's own rows, in its order, with four columns
added: `cosine`, `margin`, `keep` and `rule` (the rule that dropped the pair; empty when kept).

- `tsv`: a TSV or CSV input's fields as they were, then the four columns (after a header line
  when the input had one); other inputs give `src<TAB>tgt` first, without a header line. `keep`
  is 1 or 0; a score that does not exist (a side without text) is empty. TSV has no quoting: a
  tab or line break inside a field is written as a space, with a warning.
- `csv`: the same as CSV (quoted where needed), always after a header line.
- `jsonl`, `parquet`, `hf` (a `save_to_disk` folder): a JSON Lines, Parquet or dataset input's
  records with the four fields added; other inputs give `src` and `tgt` (a TSV/CSV with a header:
  its named columns). `keep` is a boolean; a score that does not exist is null.

An output named `*.gz` is written gzip-compressed (tsv, csv, jsonl), as `xmine mine` writes its own.
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.errors import ConfigError, InputError
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.artefacts.fileio import read_json
from xmine.artefacts.output_state import check_named_format, names_another_format, sidecar_of
from xmine.mining.writers import parquet_to_dataset, text_output, tsv_field
from xmine.io.reader_base import stem_suffix

log = logging.getLogger(__name__)

#: the kind of the summary (OUT.json) of a `score` output
SCORE_KIND = "scored-pairs"

#: rule names of a dropped pair: its code in `PairScores.rule` is the index here
DROP_RULES = ("empty", "threshold") + FILTER_RULES


@dataclass(kw_only=True)
class PairScores:
    """Per pair of the bitext, in its order."""

    #: cosine of the two sides (NaN where a side is empty)
    cosine: np.ndarray
    #: the margin (`MiningConfig.margin`) against the neighbourhoods (NaN where a side is empty)
    margin: np.ndarray
    #: -1 kept, else the index in DROP_RULES of the first rule that dropped the pair
    rule: np.ndarray
    #: what each side's neighbourhoods were drawn from -> its distinct sentences (the sources'
    #: neighbours come from the targets or the target-language corpus, and the other way round)
    neighbourhoods: dict[str, int]

    @property
    def keep(self) -> np.ndarray:
        return self.rule < 0

    def counts(self, active_filters: Sequence[str]) -> dict[str, int]:
        """Pairs dropped by each rule: empty, threshold and the pair filters that ran (one that did
        not, as a cap on another margin's scale, is left out rather than read as dropping none)."""
        return {name: int((self.rule == i).sum()) for i, name in enumerate(DROP_RULES)
                if name in ("empty", "threshold") or name in active_filters}


SCORE_FORMATS = ("tsv", "csv", "jsonl", "parquet", "hf")
#: the formats written gzip-compressed when the output's name ends in .gz
_GZIP_SCORE_FORMATS = ("tsv", "csv", "jsonl")
#: compressions whose names score refuses rather than write plain text under them
_NOT_COMPRESSED_AS = (".xz", ".bz2", ".zst", ".zstd")
SCORE_COLUMNS = ("cosine", "margin", "keep", "rule")
_BATCH = 65_536


def resolve_score_format(out: str | Path, fmt: str | None) -> str:
    """The named format, else by the name of `out` (.csv, .jsonl, .parquet; else tsv); a format named
    against what the name says is refused (was: JSON Lines written into out.parquet). A name ending
    in .gz is written gzip-compressed (tsv, csv, jsonl); another compression's name, or .gz on a
    Parquet file or dataset folder, is refused (was: plain text written as out.tsv.gz)."""
    named = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
             ".tsv": "tsv"}.get(stem_suffix(Path(out)))
    if fmt is not None:
        if fmt not in SCORE_FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(SCORE_FORMATS)}, not {fmt!r}")
        check_named_format(out, fmt, named)
    # An existing directory: an earlier dataset, its format by default; another format given
    # replaces it as any earlier result (--overwrite), as `mine` does (was: "its name says hf")
    if fmt is None and names_another_format(out, named):  # (was: TSV written as out.json)
        raise ConfigError(f"{out}: score writes {', '.join(SCORE_FORMATS)} (tsv, csv and jsonl also gzip-compressed, "
                          "as .gz), not what its name says; choose a name (or --format) of one of them")
    fmt = fmt or named or ("hf" if Path(out).is_dir() else "tsv")
    compression = Path(out).suffix.lower()
    if compression in _NOT_COMPRESSED_AS or (compression == ".gz" and fmt not in _GZIP_SCORE_FORMATS):
        raise ConfigError(f"{out}: score writes tsv, csv and jsonl gzip-compressed (a name ending in .gz) and nothing "
                          "else compressed (Parquet and datasets compress inside); name the output without that ending")
    return fmt


def _number(value: float, exact: bool) -> float | None:
    """A score as written: None where it does not exist (a side without text; an undefined ratio);
    `exact`: the float32 value the threshold is compared with (Parquet, a dataset: binary columns,
    as `mine` writes them), else rounded to 6 decimals (text: TSV, CSV, JSON Lines)."""
    return (float(value) if exact else round(float(value), 6)) if math.isfinite(value) else None


def _scored_rows(bitext, scores, *, kept_only: bool, as_dict: bool, exact: bool = False):
    """(line or row number, record with the score columns as a list of strings or a dict) of every
    pair written; `exact`: the scores unrounded (`_number`)."""
    keep, rule = scores.keep, scores.rule
    cosine, margin = scores.cosine.tolist(), scores.margin.tolist()
    for i, pair in enumerate(bitext.pairs()):
        if i >= len(keep):
            raise InputError(bitext.path, "changed while it was scored (more pairs now); run the command again",
                             line=pair.number)
        if kept_only and not keep[i]:
            continue
        added = (_number(cosine[i], exact), _number(margin[i], exact), bool(keep[i]),
                 DROP_RULES[rule[i]] if rule[i] >= 0 else "")
        if as_dict:
            if isinstance(pair.record, dict):
                record = dict(pair.record)
            elif isinstance(pair.record, list) and bitext.columns:
                record = dict(zip(bitext.columns, pair.record))
            else:
                record = {"src": pair.src, "tgt": pair.tgt}
            clash = [c for c in SCORE_COLUMNS if c in record]
            if clash:
                raise InputError(bitext.path, f"already has a field {clash[0]!r}, which the scores would replace; "
                                              "rename it", line=pair.number)
            record.update(zip(SCORE_COLUMNS, added))
            yield pair.number, record
        else:
            fields = list(pair.record) if isinstance(pair.record, list) else [pair.src, pair.tgt]
            yield pair.number, fields + ["" if v is None else f"{v:.6f}" if isinstance(v, float) else str(int(v))
                            if isinstance(v, bool) else v for v in added]


def check_no_score_fields(bitext) -> None:
    """Before the output is claimed and anything encoded: refuse a bitext whose records already hold
    a score column (one scored before): its columns read (TSV, CSV, Parquet, a dataset), or its first
    record (JSON Lines; a later one is refused as it is written). Was: TSV and CSV written with the
    columns twice (a reader took the old `keep`), the others refused after the encoding."""
    if (read_json(sidecar_of(bitext.path)) or {}).get("kind") == SCORE_KIND:  # (a TSV without a header line too)
        raise InputError(bitext.path, f"is the output of an xmine score (says {sidecar_of(bitext.path).name}): its "
                                      "score columns would be written twice; score the bitext it was made from")
    first = None if bitext.columns or bitext.format != "jsonl" else next(iter(bitext.pairs()), None)
    fields = bitext.columns or (list(first.record) if first is not None and isinstance(first.record, dict) else [])
    if clash := [c for c in SCORE_COLUMNS if c in fields]:
        raise InputError(bitext.path, f"already has a field {clash[0]!r}, which the scores would replace (scored "
                                      "before?); rename it, or score the bitext it was made from",
                         line=first.number if first is not None else None)


def write_scored(claim, fmt: str, bitext, scores, *, kept_only: bool = False) -> int:
    """Write the scored bitext to the claimed output (atomically); returns the rows written. A TSV
    row whose cell holds a tab or a line break (a CSV or JSON input's) is written with a space
    there, as TSV has no quoting; a warning says how many and where the first was."""
    written = 0
    flattened, first_flattened = 0, None  # pairs written with a cell flattened, and the first one's line (or row)
    if fmt in ("tsv", "csv"):
        rows = _scored_rows(bitext, scores, kept_only=kept_only, as_dict=False)
        with text_output(claim) as f:
            writer = csv.writer(f, lineterminator="\n") if fmt == "csv" else None
            # TSV has a header line only where the input had one (its rows then stay the input's
            # lines); CSV always has one, as CSV readers expect; both with no row written too (was:
            # none where --kept-only kept nothing; the input's columns are read by now: write_sides)
            header = (list(bitext.columns) if bitext.columns and bitext.format in ("tsv", "csv")
                      else _column_names(bitext) if fmt == "csv" else [])
            if header:
                _write_row(f, writer, header + list(SCORE_COLUMNS))
            for number, row in rows:
                if _write_row(f, writer, row):
                    flattened += 1
                    first_flattened = first_flattened or number
                written += 1
        if flattened:
            where = "row" if bitext.format in ("parquet", "hf") else "line"
            log.warning(f"{bitext.path}: {flattened} pair(s) hold a tab or line break inside a field, written "
                        f"as a space in the TSV output (first at {where} {first_flattened}); write CSV, JSON Lines "
                        "or Parquet (--format) to keep them")
    elif fmt == "jsonl":
        with text_output(claim) as f:
            for _, record in _scored_rows(bitext, scores, kept_only=kept_only, as_dict=True):
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    elif fmt == "parquet":
        with claim.atomic_file() as tmp:
            written = _write_parquet(tmp, bitext, scores, kept_only=kept_only)
    elif fmt == "hf":
        written = _write_dataset(claim, bitext, scores, kept_only=kept_only)
    else:
        raise ConfigError(f"--format must be one of {', '.join(SCORE_FORMATS)}, not {fmt!r}")
    return written


def _write_parquet(path, bitext, scores, *, kept_only: bool) -> int:
    """The scored records as a Parquet file at `path`, a batch at a time; returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    written, writer = 0, None
    records = (r for _, r in _scored_rows(bitext, scores, kept_only=kept_only, as_dict=True, exact=True))
    while batch := list(itertools.islice(records, _BATCH)):
        table = pa.Table.from_pylist(batch, schema=writer.schema if writer else None)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
        written += len(batch)
    if writer is None:  # no row kept: an empty file of the columns a kept row would have (the input's
        # record's and the scores; was: src and tgt whatever the input's fields, so shards did not concatenate)
        first = next((r for _, r in _scored_rows(bitext, scores, kept_only=False, as_dict=True, exact=True)), None)
        writer = pq.ParquetWriter(path, pa.Table.from_pylist([first]).schema if first is not None else pa.schema(
            [("src", pa.string()), ("tgt", pa.string()), ("cosine", pa.float64()), ("margin", pa.float64()),
             ("keep", pa.bool_()), ("rule", pa.string())]))
    writer.close()
    return written


def _write_dataset(claim, bitext, scores, *, kept_only: bool) -> int:
    """The scored records as a Hugging Face `save_to_disk` folder (built beside OUT, renamed onto it),
    with a README.md; a `translation` column of two languages keeps the `Translation` feature."""
    import datasets
    import pyarrow.parquet as pq

    with claim.atomic_dir() as tmp, tempfile.TemporaryDirectory(dir=claim.path.parent, prefix=f".{claim.path.name}.",
                                                                suffix=".build") as build:
        parquet = Path(build) / "scored.parquet"
        written = _write_parquet(parquet, bitext, scores, kept_only=kept_only)
        features = datasets.Features.from_arrow_schema(pq.read_schema(parquet))
        translation = features.get("translation")
        if isinstance(translation, dict) and len(translation) == 2 and all(
                getattr(v, "dtype", None) == "string" for v in translation.values()):
            features["translation"] = datasets.Translation(languages=sorted(translation))
        parquet_to_dataset(parquet, tmp, features=features, rows=written, build_dir=build)
        (Path(tmp) / "README.md").write_text(
            f"# Scored bitext\n\n{written} sentence pairs of `{Path(bitext.path).name}` scored by `xmine score`"
            f"{' (the kept ones)' if kept_only else ''}: each record with `cosine`, `margin`, `keep` and `rule` (the "
            "rule that dropped the pair, empty when kept). Load with `datasets.load_from_disk(PATH)`; what made it "
            "(encoder, space, threshold, filters, inputs) is in the record written beside it (OUT.json).\n",
            encoding="utf-8")
    return written


def _column_names(bitext) -> list[str]:
    """A CSV output's names of an input's columns where it has no header line: `src` and `tgt` for the
    sides, the others by their number (`column_3`); `src`, `tgt` for a record of other formats (was:
    `src`, `tgt` over three columns or more, each score read under the name of the one before it)."""
    if bitext.format not in ("tsv", "csv") or not bitext.read_fields:
        return ["src", "tgt"]
    width = next((len(pair.record) for pair in bitext.pairs() if isinstance(pair.record, list)), 2)
    names = [f"column_{i + 1}" for i in range(max(width, 2))]
    for field, name in zip(bitext.read_fields, ("src", "tgt")):
        names[int(field) - 1] = name
    return names


def _write_row(f, writer, row) -> bool:
    """Write one row; True where a TSV cell's tab or line break became a space."""
    if writer is not None:
        writer.writerow(row)
        return False
    cells = [str(v) for v in row]
    flat = [tsv_field(c) for c in cells]
    f.write("\t".join(flat) + "\n")
    return flat != cells


__all__ = ["DROP_RULES", "PairScores", "SCORE_COLUMNS", "SCORE_FORMATS", "SCORE_KIND", "check_no_score_fields",
           "resolve_score_format", "write_scored"]
