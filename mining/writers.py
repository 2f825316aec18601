"""Writing mined pairs: TSV (the default), Moses, TMX, JSON Lines, Parquet, a Hugging Face dataset.

`write_mined` streams the pairs, best first, each sentence read from its side's store by offset,
into the output the pipeline has claimed (`xmine.artefacts.outputs.claim_output`, atomically).
What each format holds (columns, Moses file names by language, the dataset card) is described in
docs/inputs-outputs.md, "Outputs of `xmine mine`"; TSV is byte for byte what `xmine mine` always
wrote, and the `translation` keys are `translation_keys`.

Further per-pair columns are `PairColumn`s handed to `write_mined` (the language filter's
`*_lid`/`*_lid_score`, the records' kept fields): the jsonl, parquet and hf rows and the TMX
props carry them, TSV the kept fields only, Moses none.

TMX 1.4b (Translation Memory eXchange, `write_tmx`), the format OPUS tools and CAT tools read:
one `<tu>` a pair, best first: a `<prop type="x-score">` with the score (and further `x-NAME`
props, e.g. carried document fields), then one `<tuv xml:lang="...">` per side. The structure
follows the TMX 1.4b DTD (`tmx14.dtd`): `tmx (header, body)`, `tu ((note|prop)*, tuv+)`, `tuv
((note|prop)*, seg)`; the header's required attributes are all set. Language tags are BCP 47
(`xmine.langs.bcp47_tag`): the ISO 639-1 code where a language has one (de), else its ISO 639-3 code, with the
region and script given (pt-BR, zh-Hant). Text is
escaped, and each character XML 1.0 forbids (C0 controls but tab, line feed, carriage return)
is written as a space, so that every reader parses the file.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gzip
import io
import json
import logging
import re
import tempfile
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from xmine import __version__
from xmine.artefacts.ownership import register_own_files, temporary_folder
from xmine.artefacts.output_state import check_named_format, names_another_format
from xmine.errors import ConfigError
from xmine.io.reader_base import one_line
from xmine.langs import bcp47_tag, language_subtag
from xmine.mining.dataset_card import dataset_card

log = logging.getLogger(__name__)

OUTPUT_FORMATS = ("tsv", "moses", "jsonl", "parquet", "hf", "tmx")
#: the kind `xmine mine` records in its OUT.json; its TSV's columns are the score, the source and
#: the target (then line numbers and fields: `_write_tsv`), so its sentences are these columns
MINING_KIND = "mining-result"
MINED_TSV_TEXT_COLUMNS = ("2", "3")
# Pairs per Parquet row group / batch: bounded memory whatever the number of pairs.
_BATCH = 65_536


@dataclass(kw_only=True)
class PairColumn:
    """A further column of the jsonl/parquet/hf outputs: one value per written pair, in output
    order (best first); numbers or strings."""

    #: the column name (must not be one of the standard columns)
    name: str
    #: len(values) == the number of pairs; one with a `dtype` is read a pair at a time
    #: (`xmine.io.record_fields.KeptFieldColumn`), else the writers read it whole for its type
    values: Sequence[Any] | np.ndarray


@dataclass(kw_only=True)
class MinedRows:
    """What to write: the two sides (xmine.inputs.Side) and, per pair, their rows, score and direction."""

    sx: Any
    sy: Any
    src_rows: np.ndarray
    tgt_rows: np.ndarray
    score: np.ndarray
    #: int codes of mining.select.DIRECTION_NAMES
    direction: np.ndarray


def output_format(out: str | Path, fmt: str | None) -> str:
    """The format to write: the named one, else by the name of `out` (.jsonl, .tmx, .parquet, each
    also with .gz; an existing directory: hf), else tsv (.tsv, .tsv.gz, anything else). A name
    ending in .gz is written gzip-compressed (tsv, jsonl, tmx); Parquet and dataset folders
    compress inside, so they are refused such a name rather than written uncompressed under it."""
    name = Path(out).name.lower()
    named = next((by_name for by_name, endings in _NAMED_BY.items() if name.removesuffix(".gz").endswith(endings)), None)
    if fmt is not None:
        if fmt not in OUTPUT_FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(OUTPUT_FORMATS)}, not {fmt!r}")
        check_named_format(out, fmt, named)
    else:
        fmt = named or ("hf" if Path(out).is_dir() else "tsv")
        if names_another_format(out, named):  # (was: TSV written as out.csv or out.tsv.xz)
            raise ConfigError(f"{out}: mine writes {', '.join(OUTPUT_FORMATS)} (tsv, jsonl and tmx also gzip-compressed, "
                              f"as .gz), not what its name says; choose a name (or --format) of one of them")
    if name.endswith(".gz") and fmt not in GZIP_FORMATS:
        raise ConfigError(f"{out}: a {fmt} output is not gzip-compressed (only {', '.join(GZIP_FORMATS)} are); "
                          "name it without .gz")
    return fmt


#: the formats an output's name says (its ending, also before .gz)
_NAMED_BY = {"jsonl": (".jsonl", ".ndjson"), "tmx": (".tmx",), "parquet": (".parquet", ".pq"), "tsv": (".tsv",)}
#: the formats written gzip-compressed when the output's name ends in .gz
GZIP_FORMATS = ("tsv", "jsonl", "tmx")


@contextlib.contextmanager
def text_output(claim):
    """The claimed output opened for text (UTF-8, \n), gzip-compressed when its name ends in .gz
    (mtime 0: the same pairs give the same bytes); written atomically."""
    with claim.atomic_file() as tmp, contextlib.ExitStack() as stack:
        if claim.path.name.lower().endswith(".gz"):
            raw = stack.enter_context(open(tmp, "wb"))
            gz = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
            yield stack.enter_context(io.TextIOWrapper(gz, encoding="utf-8", newline="\n"))
        else:
            yield stack.enter_context(open(tmp, "w", encoding="utf-8", newline="\n"))


# Files written beside OUT instead of it (Moses without both languages: OUT.src, OUT.tgt). Every
# mining output claims them whatever its format, so that replacing a result in another format
# removes the old one's; with both languages it also claims `moses_suffixes`.
COMPANIONS = (".src", ".tgt")


def moses_suffixes(src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """The suffixes of the Moses files: `.de`, `.en` by language (ISO 639-1 where the language has
    one, else ISO 639-3), or `.src`, `.tgt` without both languages or for one language twice."""
    ks, kt = translation_keys(src_lang, tgt_lang)
    if (ks, kt) == ("src", "tgt") or language_subtag(ks) == language_subtag(kt):
        return COMPANIONS
    return f".{language_subtag(ks)}", f".{language_subtag(kt)}"


def translation_keys(src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """The keys of the `translation` dict: the language codes as the user gave them (zho_Hans and
    zho_Hant stay two), or src/tgt where a side has none or both have the same."""
    s = src_lang.strip() if src_lang and src_lang != "und" else None
    t = tgt_lang.strip() if tgt_lang and tgt_lang != "und" else None
    return (s, t) if s and t and s != t else ("src", "tgt")


def tsv_field(text: str) -> str:
    # A tab or line break inside a sentence would break the TSV; corpora read by xmine have none
    # (they are replaced on reading), a CSV or JSON bitext given to `score` may, and so may a kept
    # field. Every line break a sentence loses on reading (U+2028, \x0b, ...) goes, not only \n and
    # \r (was: a kept field's U+2028 split a row for readers that split at every line break).
    return one_line(text)


def write_mined(claim, fmt: str, rows: MinedRows, *, line_numbers: bool = False,
                extra: Sequence[PairColumn] = (), fields: Sequence[PairColumn] = (),
                summary: dict | None = None) -> None:
    """Write the pairs to the claimed output in `fmt` (see the module doc). `summary`: what the
    dataset card of `hf` reports (the mining summary). `fields`: the records' kept fields
    (--keep-field), which every format but Moses carries (TSV: as columns after the others)."""
    extra = [*extra, *fields]
    n = len(rows.score)
    for col in extra:
        if len(col.values) != n:
            raise ValueError(f"column {col.name!r} has {len(col.values)} values for {n} pairs")
    if fmt == "tsv":
        _write_tsv(claim, rows, line_numbers=line_numbers, fields=fields)
    elif fmt == "moses":
        suffixes = moses_suffixes(rows.sx.lang, rows.sy.lang)
        if not set(suffixes) <= set(getattr(claim, "companions", suffixes)):  # not claimed by these names
            suffixes = COMPANIONS
        for suffix, side, picked in zip(suffixes, (rows.sx, rows.sy), (rows.src_rows, rows.tgt_rows)):
            with claim.atomic_file(suffix) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(tsv_field(side.text[r]) + "\n" for r in picked.tolist())
    elif fmt == "jsonl":
        with text_output(claim) as f:
            for rec in chain.from_iterable(_record_batches(rows, extra)):
                rec["score"] = round(rec["score"], 6)
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    elif fmt == "parquet":
        with claim.atomic_file() as tmp:
            _write_parquet(tmp, rows, extra)
    elif fmt == "hf":
        _write_dataset(claim, rows, extra, summary or {})
    elif fmt == "tmx":
        _write_tmx(claim, rows, extra, summary)
    else:
        raise ConfigError(f"--format must be one of {', '.join(OUTPUT_FORMATS)}, not {fmt!r}")


def _write_tsv(claim, rows: MinedRows, *, line_numbers: bool, fields: Sequence[PairColumn] = ()) -> None:
    sx, sy = rows.sx, rows.sy
    split = sx.sentence_index is not None or sy.sentence_index is not None
    with text_output(claim) as f:
        for i, (s, t, sc) in enumerate(zip(rows.src_rows.tolist(), rows.tgt_rows.tolist(), rows.score.tolist())):
            row = f"{sc:.6f}\t{tsv_field(sx.text[s])}\t{tsv_field(sy.text[t])}"
            if line_numbers:
                row += f"\t{sx.line_numbers[s]}\t{sy.line_numbers[t]}"
                if split:
                    row += f"\t{_sentence_of(sx, s)}\t{_sentence_of(sy, t)}"
            f.write(row + _field_cells(fields, i) + "\n")


def _write_tmx(claim, rows: MinedRows, extra: Sequence[PairColumn], summary: dict | None) -> None:
    langs = [side.lang for side in (rows.sx, rows.sy)]
    if any(lang in (None, "und") for lang in langs):
        raise ConfigError("--format tmx needs the language of each side: give --src-lang and --tgt-lang")
    def ids(s: int, t: int) -> list[tuple[str, object]]:  # (--id-field: was carried by every format but TMX)
        return [(f"{role}_id", side.ids[r]) for role, side, r in (("src", rows.sx, s), ("tgt", rows.sy, t))
                if side.ids is not None]

    units = ((rows.sx.text[int(s)], rows.sy.text[int(t)],
              tmx_props(float(sc), [*ids(int(s), int(t)), *((col.name, _plain(col.values[i])) for col in extra)]))
             for i, (s, t, sc) in enumerate(zip(rows.src_rows, rows.tgt_rows, rows.score)))
    with text_output(claim) as f:
        changed = write_tmx(f, units, langs=(bcp47_tag(langs[0]), bcp47_tag(langs[1])))
    if changed:  # (was: written as spaces without a word)
        note = (f"{changed:,} pair(s) hold characters XML 1.0 forbids (C0 controls, U+FFFE, U+FFFF), written in the "
                "TMX as spaces; every other format keeps them")
        log.warning("%s: %s", claim.path, note)
        if summary is not None:
            summary["tmx_note"] = note


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value) -> str:
    """`value` as XML text: a character XML forbids is a space (was: dropped, which glued the words
    around it), a carriage return a character reference (a parser reads a raw one as a line feed)."""
    return escape(_NOT_XML.sub(" ", str(value)), {"\r": "&#13;"})


def write_tmx(f: IO[str], units: Iterable[tuple[str, str, dict]], *, langs: tuple[str, str]) -> int:
    """Write `units` ((source text, target text, props)) as a TMX 1.4b document to `f`;
    `langs`: the two sides' BCP 47 tags (`xmine.langs.bcp47_tag`). Returns how many units held a
    character XML forbids (written as a space)."""
    changed = 0
    src, tgt = langs
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE tmx SYSTEM "tmx14.dtd">\n<tmx version="1.4">\n')
    f.write(f'  <header creationtool="xmine" creationtoolversion={quoteattr(__version__)} '
            f'datatype="plaintext" segtype="sentence" adminlang="en" srclang={quoteattr(src)} o-tmf="xmine"/>\n')
    f.write("  <body>\n")
    for i, (s, t, props) in enumerate(units, 1):
        changed += any(_NOT_XML.search(str(v)) for v in (s, t, *props.values()) if v is not None)
        f.write(f'    <tu tuid="{i}">\n')
        for name, value in props.items():
            if value is not None and value != "":
                f.write(f"      <prop type={quoteattr(name)}>{_text(value)}</prop>\n")
        for lang, text in ((src, s), (tgt, t)):
            f.write(f'      <tuv xml:lang={quoteattr(lang)}><seg>{_text(text)}</seg></tuv>\n')
        f.write("    </tu>\n")
    f.write("  </body>\n</tmx>\n")
    return changed


def tmx_props(score: float, extra: Sequence[tuple[str, object]] = ()) -> dict:
    """A pair's `<prop>`s: `x-score`, then `x-NAME` for each further (name, value)."""
    return {"x-score": f"{score:.6f}", **{f"x-{name}": value for name, value in extra}}



def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _field_cells(fields: Sequence[PairColumn], i: int) -> str:
    """Pair i's kept fields as TSV cells after a tab each ("" for a record without the field)."""
    return "".join("\t" + tsv_field("" if col.values[i] is None else str(col.values[i])) for col in fields)


def _sentence_of(side, row: int) -> str:
    """Row's 1-based index in its record, or "" for a side not split into sentences."""
    return "" if side.sentence_index is None else str(int(side.sentence_index[row]))


def _record_batches(rows: MinedRows, extra: Sequence[PairColumn]) -> Iterator[list[dict]]:
    """The rows of the structured formats, `_BATCH` pairs at a time (one empty batch for no pairs)."""
    from xmine.mining.select import DIRECTION_NAMES

    sx, sy = rows.sx, rows.sy
    ks, kt = translation_keys(sx.lang, sy.lang)
    src_file, tgt_file = str(sx.source or sx.path), str(sy.source or sy.path)
    for lo in range(0, max(len(rows.score), 1), _BATCH):
        hi = min(lo + _BATCH, len(rows.score))
        batch = []
        for i in range(lo, hi):
            s, t = int(rows.src_rows[i]), int(rows.tgt_rows[i])
            rec = {"translation": {ks: sx.text[s], kt: sy.text[t]}, "score": float(rows.score[i]),
                   "direction": DIRECTION_NAMES[int(rows.direction[i])],
                   "src_file": src_file, "src_record": int(sx.line_numbers[s]),
                   "tgt_file": tgt_file, "tgt_record": int(sy.line_numbers[t])}
            sides = (("src", sx, s), ("tgt", sy, t))
            rec.update({f"{p}_id": side.ids[r] for p, side, r in sides if side.ids is not None})
            rec.update({f"{p}_sentence_index": int(side.sentence_index[r]) for p, side, r in sides
                        if side.sentence_index is not None})
            batch.append(rec | {col.name: _plain(col.values[i]) for col in extra})
        yield batch


def _schema(rows: MinedRows, extra: Sequence[PairColumn]):
    import pyarrow as pa

    ks, kt = translation_keys(rows.sx.lang, rows.sy.lang)
    fields = [("translation", pa.struct([(ks, pa.string()), (kt, pa.string())])), ("score", pa.float32()),
              ("direction", pa.string()), ("src_file", pa.string()), ("src_record", pa.int64()),
              ("tgt_file", pa.string()), ("tgt_record", pa.int64())]
    sides = (("src", rows.sx), ("tgt", rows.sy))
    fields += [(f"{p}_id", pa.string()) for p, side in sides if side.ids is not None]
    fields += [(f"{p}_sentence_index", pa.int32()) for p, side in sides if side.sentence_index is not None]
    taken = {name for name, _ in fields}
    for col in extra:
        if col.name in taken:
            raise ValueError(f"extra column {col.name!r} clashes with a standard column")
        # (a column that says its type is not read whole: kept fields are read from a file, a pair at a time)
        dtype = col.values.dtype if hasattr(col.values, "dtype") else np.asarray(col.values).dtype
        fields.append((col.name, pa.from_numpy_dtype(dtype) if dtype.kind in "biuf" else pa.string()))
    return pa.schema(fields)


def _write_parquet(path: Path, rows: MinedRows, extra: Sequence[PairColumn]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema(rows, extra)
    with pq.ParquetWriter(path, schema) as w:
        for batch in _record_batches(rows, extra):
            w.write_table(pa.Table.from_pylist(batch, schema=schema))


def _write_dataset(claim, rows: MinedRows, extra: Sequence[PairColumn], summary: dict) -> None:
    """A `save_to_disk` folder with README.md, built beside OUT and renamed onto it."""
    import datasets

    with claim.atomic_dir() as tmp, tempfile.TemporaryDirectory(dir=claim.path.parent,
                                                                prefix=f".{claim.path.name}.", suffix=".build") as b:
        parquet = Path(b) / "pairs.parquet"
        _write_parquet(parquet, rows, extra)
        ks, kt = translation_keys(rows.sx.lang, rows.sy.lang)
        features = datasets.Features.from_arrow_schema(_schema(rows, extra))
        # The feature MT recipes look for (its struct's fields are sorted by name).
        features["translation"] = datasets.Translation(languages=[ks, kt])
        parquet_to_dataset(parquet, tmp, features=features, rows=len(rows.score), build_dir=b)
        (Path(tmp) / "README.md").write_text(dataset_card(summary, keys=(ks, kt), pairs=len(rows.score),
                                                          columns=_schema(rows, extra).names), encoding="utf-8")


def _dataset_file(path: Path) -> bool:
    """A file of a `save_to_disk` folder with its card (one a killed run left: xmine.artefacts.leftovers)."""
    return path.name in ("dataset_info.json", "state.json", "README.md") or fnmatch.fnmatchcase(path.name, "data-*.arrow")


register_own_files(folder=temporary_folder, file=_dataset_file)


def parquet_to_dataset(parquet: Path, out_dir, *, features, rows: int, build_dir) -> None:
    """The Parquet file of `rows` rows as a Hugging Face `save_to_disk` folder `out_dir`, its columns
    of `features` (a `Translation` among them), `build_dir` holding datasets' cache meanwhile."""
    import datasets

    datasets.disable_progress_bars()
    if rows:
        ds = datasets.Dataset.from_parquet(str(parquet), cache_dir=str(Path(build_dir) / "cache"), features=features)
    else:  # (datasets fails on a Parquet file of no rows)
        ds = datasets.Dataset.from_dict({name: [] for name in features}, features=features)
    # (of no rows, datasets writes no data file unless told to write one, and cannot load the folder)
    ds.save_to_disk(str(out_dir), **({} if rows else {"num_shards": 1}))


def write_meta(claim, mined, sx, sy, src_rows, tgt_rows, *, fields: Sequence[PairColumn] = ()) -> None:
    """OUT.meta in the layout of stopes' mined `bimeta.tsv`: `score<TAB>src_meta<TAB>tgt_meta`, row i
    the metadata of OUT's pair i. stopes carries the user's own per-sentence metadata (a line of a
    meta file beside each text file, e.g. its URL); xmine's per-sentence metadata is, for each side:
    the record's kept fields (--keep-field: one field its value, several a JSON object by name),
    else the record's id (--id-field), else where the sentence came from (`file:line`); a sentence
    split out of a record adds `#k`, its 1-based index in the record, to the id or `file:line`."""
    by_side = {role: [col for col in fields if col.name.startswith(f"{role}_")] for role in ("src", "tgt")}
    with claim.atomic_file(".meta") as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for i, (s, t, sc) in enumerate(zip(src_rows.tolist(), tgt_rows.tolist(), mined.score.tolist())):
            cells = (_sentence_meta(sx, s, by_side["src"], i, "src_"), _sentence_meta(sy, t, by_side["tgt"], i, "tgt_"))
            f.write(f"{sc:.6f}\t{tsv_field(cells[0])}\t{tsv_field(cells[1])}\n")


def _sentence_meta(side, row: int, fields: Sequence[PairColumn], i: int, prefix: str) -> str:
    """One side's meta cell of OUT.meta (see `write_meta`)."""
    if fields:
        values = [col.values[i] for col in fields]
        if len(values) == 1:  # (a missing one: an empty cell, as in tsv)
            return ("" if values[0] is None else values[0] if isinstance(values[0], str) else
                    json.dumps(values[0], ensure_ascii=False, default=str))
        # a missing one null, as in the JSON outputs (was: "", the same as an empty value)
        return json.dumps({col.name.removeprefix(prefix): v for col, v in zip(fields, values)},
                          ensure_ascii=False, default=str)
    # the file the line is of: a store's or an index's input, as the JSON Lines rows name it (was: the store)
    cell = str(side.ids[row]) if side.ids is not None else f"{side.source or side.path}:{side.line_numbers[row]}"
    return cell if side.sentence_index is None else f"{cell}#{int(side.sentence_index[row])}"


__all__ = ["COMPANIONS", "OUTPUT_FORMATS", "MinedRows", "PairColumn", "output_format",
           "parquet_to_dataset", "text_output", "tmx_props", "translation_keys", "write_meta", "write_mined", "write_tmx"]
