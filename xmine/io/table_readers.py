"""Corpus readers of tables (`xmine.io.readers`): a Parquet file, and a Hugging Face dataset (a
`save_to_disk` folder, or data files read with streaming), one batch of rows at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from xmine.errors import InputError
from xmine.io.reader_base import CorpusReader, InputFormat, is_dataset_dir, stem_suffix, text_of

# Data-file builders of `datasets`, by extension.
_HF_BUILDERS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".json": "json", ".ndjson": "json",
                ".csv": "csv", ".txt": "text", ".arrow": "arrow"}
# Rows per batch read from Parquet / Arrow: bounded memory whatever the file.
_BATCH = 4096


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:300] or type(e).__name__


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
            text, rid = text_of(row, spec, path, f"row {number}: ", None)
            yield number, text, rid


def open_parquet(path: Path):
    """(the `pyarrow.parquet.ParquetFile` at `path`, its column names); InputError when pyarrow is
    missing or the file is not readable Parquet."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(path, "reading Parquet needs the pyarrow package (pip install pyarrow)") from None
    try:
        f = pq.ParquetFile(path)
        names = f.schema_arrow.names
    except Exception as e:  # noqa: BLE001  (pyarrow raises ArrowInvalid, OSError, ...)
        raise InputError(path, f"not a readable Parquet file ({_one_line(e)})") from None
    if len(set(names)) != len(names):  # (was: read as rows of dicts, the last column of a name kept)
        twice = sorted({name for name in names if names.count(name) > 1})
        raise InputError(path, f"two columns are named {twice[0]!r}: which to read is not defined; rename one")
    return f, names


def parquet_rows(f, path: Path, columns: list[str] | None = None) -> Iterator[list[dict]]:
    """The rows of the opened Parquet file `f` (only `columns`; None: all) as dicts, one record
    batch at a time; InputError naming the row after which the data is damaged."""
    done = 0
    try:
        for batch in f.iter_batches(batch_size=_BATCH, columns=columns):
            done += batch.num_rows
            yield batch.to_pylist()
    except Exception as e:  # noqa: BLE001
        raise InputError(path, f"damaged Parquet data after row {done} ({_one_line(e)})") from None


def dataset_rows(ds, path: Path, columns: list[str] | None = None) -> Iterator[list[dict]]:
    """The rows of the opened dataset `ds` (only `columns`; None: all) as dicts, `_BATCH` at a time;
    InputError when it cannot be read."""
    try:
        for batch in (ds if columns is None else ds.select_columns(columns)).iter(batch_size=_BATCH):
            n = len(next(iter(batch.values()))) if batch else 0
            yield [{c: batch[c][i] for c in batch} for i in range(n)]
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001
        raise InputError(path, f"cannot read the dataset ({_one_line(e)})") from None


class ParquetReader(CorpusReader):
    """A Parquet file, one record batch at a time, only the columns needed."""

    format = "parquet"

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        f, names = open_parquet(self.path)
        rows = parquet_rows(f, self.path, _columns(self.spec, names))
        yield from _table_records(rows, self.spec, self.path, names)


def _saved_without_shards(folder: Path) -> bool:
    """A `save_to_disk` Dataset of no rows, written without a data file (its `state.json` lists none)."""
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and state.get("_data_files") == []


class DatasetReader(CorpusReader):
    """A Hugging Face dataset: a `save_to_disk` folder, or data files read with streaming."""

    format = "hf"

    def open_dataset(self):
        try:
            import datasets
        except ImportError:
            raise InputError(self.path, "reading a Hugging Face dataset needs the datasets package") from None
        datasets.disable_progress_bars()
        try:
            if is_dataset_dir(self.path):
                if _saved_without_shards(self.path):  # (datasets cannot load one: was "list index out of range")
                    raise InputError(self.path, "no text in the hf input (0 record(s): a dataset saved with no rows)")
                ds = datasets.load_from_disk(str(self.path))
                if isinstance(ds, datasets.DatasetDict):
                    ds = ds[self._split(list(ds))]
                elif self.spec.split is not None:  # a single Dataset: the split asked for is not there
                    raise InputError(self.path, f"a single Dataset, without splits: --split {self.spec.split} "
                                                "names none of its rows (leave it out to read them all)")
                return ds, list(ds.column_names)
            if self.path.is_dir():
                ds = datasets.load_dataset(str(self.path), split=self.spec.split or "train", streaming=True)
            else:
                builder = _HF_BUILDERS.get(stem_suffix(self.path))
                if builder is None:
                    raise InputError(self.path, f"no datasets loader for {self.path.suffix or 'a file without extension'} "
                                                f"(known: {', '.join(sorted(_HF_BUILDERS))})")
                ds = datasets.load_dataset(builder, data_files=str(self.path), split=self.spec.split or "train",
                                           streaming=True)
            names = list(ds.column_names or []) or list(ds.features or [])
            if not names:  # older datasets releases resolve a streamed file's columns only when read
                first = next(iter(ds), None)
                names = list(first or [])
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
        # (not "train" by default: mining the train split of a dataset asked for as a whole, without
        # a word, is a wrong result)
        raise InputError(self.path, f"a DatasetDict with splits {', '.join(splits)}: choose one with --split")

    def records(self) -> Iterator[tuple[int, str, str | None]]:
        ds, names = self.open_dataset()
        rows = dataset_rows(ds, self.path, _columns(self.spec, names))
        yield from _table_records(rows, self.spec, self.path, names)
