"""`ExternalEmbeddings`: sentence embeddings made elsewhere (LASER, stopes, any script), read from a
file and stored by `xmine embed TEXT --embeddings FILE` as if an encoder had made them.

Formats (by extension):
- `.f32` / `.f16`: LASER's raw layout, rows of `dim`
  float32/float16 values one after the other, no header (`embed.py` writes it; stopes'
  `mine_bitexts.py --src-embeddings x.f32` reads it). `dim` must be given.
- `.npy`: a 2-D float array.
- `.parquet`: a list column (`--embeddings-column`, default "embedding") of one vector a row.
- a Hugging Face `save_to_disk` folder: the same column.

Rows are read a shard at a time (a byte range of a raw or .npy file, the Parquet row groups
holding the shard, an Arrow slice), never the whole file. Row i belongs to line i + 1 of the text, as LASER writes one vector for every line
(empty ones too); a file with one row per non-empty line is accepted as well. Any other count is
refused before anything is written. Rows are L2-normalised as they are stored (LASER's vectors are
not; stopes normalises them before its search too); a row that is not finite, or all zeros, is
refused naming its line.

The fingerprint is the name the user gives (`--encoder-name laser2`) and the dimension: two stores
of external embeddings mine together when both match, and never with an encoder xmine runs (it
cannot check that those are the same vectors). Such a store cannot have text encoded beside it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.encoders.base import BUILTIN_ENCODERS, Encoder
from xmine.artefacts.fileio import missing
from xmine.errors import ConfigError, EncoderError, InputError
from xmine.io.reader_base import is_dataset_dir, size_and_sha256

log = logging.getLogger(__name__)

#: the fingerprint id of external embeddings starts with this, then the user's encoder name
EXTERNAL_ID_PREFIX = "external:"
#: dtype of each raw format, by extension
RAW_DTYPES = {".f32": "float32", ".f16": "float16"}
DEFAULT_COLUMN = "embedding"


class _Rows:
    """Random access to contiguous row ranges of one embeddings file, as float32."""

    count: int
    dim: int
    values: str  #: the numpy name of the type the file holds its values in ("float16", "float32", ...)

    def read(self, lo: int, hi: int) -> np.ndarray:
        raise NotImplementedError


class _ArrayRows(_Rows):
    """Rows of a raw (.f32/.f16) or .npy file, `count` x `dim` values of `dtype` from byte `offset`
    on, read range by range (not memory-mapped: pages of a mapping stay in the resident set)."""

    def __init__(self, path: Path, *, dtype: str | np.dtype, count: int, dim: int, offset: int = 0):
        self.path, self.dtype, self.count, self.dim, self.offset = path, np.dtype(dtype), count, dim, offset
        self.values = self.dtype.name

    def read(self, lo: int, hi: int) -> np.ndarray:
        with open(self.path, "rb") as f:
            f.seek(self.offset + lo * self.dim * self.dtype.itemsize)
            block = np.fromfile(f, dtype=self.dtype, count=(hi - lo) * self.dim)
        if block.size != (hi - lo) * self.dim:
            raise InputError(self.path, f"ends before row {hi} (the file changed while it was read)")
        return block.reshape(hi - lo, self.dim).astype(np.float32, copy=False)


class _ParquetRows(_Rows):
    """A list column of a Parquet file, read row group by row group."""

    def __init__(self, path: Path, column: str):
        import pyarrow.parquet as pq

        self.file = pq.ParquetFile(path)
        if column not in self.file.schema_arrow.names:
            raise InputError(path, f"no column {column!r} (columns: {', '.join(self.file.schema_arrow.names[:8])}); "
                                   "choose one with --embeddings-column")
        self.path, self.column = path, column
        sizes = [self.file.metadata.row_group(i).num_rows for i in range(self.file.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.count = int(self.starts[-1])
        self.dim = self.read(0, 1).shape[1] if self.count else 0
        self.values = _value_type(self.file.schema_arrow.field(column).type)

    def read(self, lo: int, hi: int) -> np.ndarray:
        first = int(np.searchsorted(self.starts, lo, side="right") - 1)
        last = int(np.searchsorted(self.starts, hi, side="left"))
        table = self.file.read_row_groups(list(range(first, last)), columns=[self.column])
        column = table.column(0).slice(lo - int(self.starts[first]), hi - lo)
        return _vectors(column, self.path, lo)


class _DatasetRows(_Rows):
    """A column of a Hugging Face `save_to_disk` folder (memory-mapped Arrow)."""

    def __init__(self, path: Path, column: str):
        import datasets

        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            if len(ds) != 1:
                raise InputError(path, f"a dataset with splits {', '.join(ds)}: save the one split to use")
            ds = next(iter(ds.values()))
        if column not in ds.column_names:
            raise InputError(path, f"no column {column!r} (columns: {', '.join(ds.column_names[:8])}); choose one "
                                   "with --embeddings-column")
        self.path, self.table = path, ds.data.column(column)
        self.count = len(self.table)
        self.dim = self.read(0, 1).shape[1] if self.count else 0
        self.values = _value_type(self.table.type)

    def read(self, lo: int, hi: int) -> np.ndarray:
        return _vectors(self.table.slice(lo, hi - lo), self.path, lo)


def _value_type(list_type) -> str:
    """The numpy name of a list column's value type ("float32"), or its Arrow name where numpy has none."""
    value = getattr(list_type, "value_type", list_type)
    try:
        return np.dtype(value.to_pandas_dtype()).name
    except (NotImplementedError, TypeError):
        return str(value)


def _vectors(column, path: Path, lo: int) -> np.ndarray:
    """An Arrow (chunked) list column as an (n, dim) float32 array; InputError for ragged rows."""
    import pyarrow as pa
    import pyarrow.compute as pc  # (a submodule: `import pyarrow` alone does not load it)

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
            or pa.types.is_fixed_size_list(column.type)):
        raise InputError(path, f"the embeddings column is {column.type}, not a list of floats")
    if column.null_count:
        raise InputError(path, f"row {lo + column.is_null().index(True).as_py()}: no vector (null)")
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if len(lengths) and (lengths != lengths[0]).any():
        bad = int(np.flatnonzero(lengths != lengths[0])[0])
        raise InputError(path, f"row {lo + bad} has {lengths[bad]} values, row {lo} {lengths[0]}: rows of one "
                               "length expected")
    values = column.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.float32).reshape(len(column), int(lengths[0]) if len(lengths) else 0)


def _open_rows(path: Path, *, dim: int | None, column: str | None) -> _Rows:
    if why := missing(path):
        raise InputError(path, why)
    suffix = path.suffix.lower()
    if is_dataset_dir(path):
        return _DatasetRows(path, column or DEFAULT_COLUMN)
    if path.is_dir():
        raise InputError(path, "is a directory but not a Hugging Face save_to_disk folder")
    if suffix == ".parquet":
        return _ParquetRows(path, column or DEFAULT_COLUMN)
    if suffix == ".npy":
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as e:
            raise InputError(path, f"not a readable .npy array ({e})") from None
        if array.ndim != 2 or array.dtype.kind != "f":
            raise InputError(path, f"a {array.ndim}-D {array.dtype} array; expected 2-D floats (rows x dim)")
        if dim is not None and array.shape[1] != dim:
            raise InputError(path, f"rows of {array.shape[1]} values, but --dim says {dim}")
        if not array.flags.c_contiguous:
            raise InputError(path, "a Fortran-ordered array; save it in C order (np.ascontiguousarray)")
        return _ArrayRows(path, dtype=array.dtype, count=array.shape[0], dim=array.shape[1], offset=array.offset)
    dtype = RAW_DTYPES.get(suffix)
    if dtype is None:
        raise InputError(path, "unknown embeddings format: expected .f32/.f16 (LASER's raw rows, with --dim), .npy, "
                               ".parquet or a Hugging Face save_to_disk folder")
    if dim is None:
        raise ConfigError(f"{path}: raw {dtype} embeddings have no header; give their dimension with --dim")
    row_bytes = dim * np.dtype(dtype).itemsize
    size = path.stat().st_size
    if size == 0 or size % row_bytes:
        raise InputError(path, f"{size} bytes is not a whole number of {dim}-d {dtype} rows ({row_bytes} bytes each); "
                               "check --dim and the dtype")
    return _ArrayRows(path, dtype=dtype, count=size // row_bytes, dim=dim)


class ExternalEmbeddings(Encoder):
    """Embeddings read from a file, standing in for an encoder when a store is built (module doc)."""

    device = None  # (nothing runs here)

    def __init__(self, path: str | Path, *, name: str, dim: int | None = None, column: str | None = None):
        if not name or not name.strip():
            raise ConfigError("--embeddings needs --encoder-name: the name of the encoder that made them (laser2, ...)")
        self.path, self.name = Path(path), name.strip()
        if self.name in BUILTIN_ENCODERS:  # (was: said only as a projection "of other weights or prefix" dropped)
            log.warning(f"--encoder-name {self.name}: the name of an encoder xmine builds, but vectors made elsewhere "
                        f"are another encoder to it (id {EXTERNAL_ID_PREFIX}{self.name}): they mine only with stores "
                        f"made with --embeddings under this name, and take neither {self.name}'s projection nor its "
                        "calibrated thresholds")
        self._rows = _open_rows(self.path, dim=dim, column=column)
        self.dim = int(self._rows.dim)
        if dim is not None and self.dim != dim:
            raise InputError(self.path, f"rows of {self.dim} values, but --dim says {dim}")
        self._by_line = True
        self._shard_rows = 0

    def fingerprint(self) -> dict[str, Any]:
        # No precision: the model that made the vectors ran elsewhere, at a precision xmine cannot know
        # (was: "fp32", a claim). The type the file holds them in is in `identity()` ("values").
        return {"name": self.name, "dim": self.dim, "id": f"{EXTERNAL_ID_PREFIX}{self.name}", "precision": None}

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        raise EncoderError(f"{self.name}: embeddings made elsewhere ({self.path}) cannot encode new text")

    def identity(self) -> dict[str, Any]:
        """What identifies the file (a store made from it records this; resume compares it)."""
        size, digest = size_and_sha256(self.path)
        return {"path": str(self.path.resolve()), "size": size, "sha256": digest, "rows": self._rows.count,
                "values": self._rows.values, "by": "line" if self._by_line else "sentence"}

    def bind(self, reader, *, shard_rows: int) -> None:
        """Check the row count against the corpus `reader` (InputError naming both counts) and decide
        how rows map to sentences: row i = line i + 1, or the i-th non-empty line."""
        self._shard_rows = shard_rows
        rows, lines = self._rows.count, reader.count
        if rows == lines:
            self._by_line = True
            return
        sentences = sum(1 for _ in reader.sentences())
        if rows != sentences:
            raise InputError(self.path, f"{rows} embedding rows, but {reader.path} has {lines} lines ({sentences} "
                                        "non-empty): one row per line (or per non-empty line) expected")
        self._by_line = False

    def vectors(self, shard: int, lines: Sequence[int]) -> np.ndarray:
        """The L2-normalised float32 rows of shard `shard`, whose sentences are on `lines` (1-based)."""
        lines = np.asarray(lines, dtype=np.int64)
        if self._by_line:
            lo, hi = int(lines[0]) - 1, int(lines[-1])
            block = self._rows.read(lo, hi)[lines - 1 - lo]
        else:
            lo = shard * self._shard_rows
            block = self._rows.read(lo, lo + len(lines))
        norms = np.linalg.norm(block, axis=1)
        bad = np.flatnonzero(~np.isfinite(block).all(axis=1) | (norms == 0))
        if len(bad):
            i = int(bad[0])
            what = "all zeros" if np.isfinite(block[i]).all() else "not finite (NaN or inf)"
            raise InputError(self.path, f"the row of line {int(lines[i])} is {what}; such a vector cannot be mined "
                                        f"({len(bad)} such row(s) in this shard)")
        return block / norms[:, None]


__all__ = ["DEFAULT_COLUMN", "EXTERNAL_ID_PREFIX", "ExternalEmbeddings", "RAW_DTYPES"]
