"""One pass over a block of products: keep every entry that may enter a row's or a column's top-k.

The exact search (`knn.py`) computes a block S of low-precision products, then takes, per row,
the entries reaching the row's threshold and, per column, those reaching the column's, and merges
them into running lists of the W best product values (descending). In numpy that is two
reductions, two extractions, a sort and a unique per direction, with a dozen calls' overhead per
block. `screen_merge` does it in one compiled call (numba) while the block is still in cache: per
tile of 32 rows, the column maxima (one vectorised pass) say which columns can hold an entry
reaching its row's or its column's threshold, single entries are read only there, and the few
that pass are inserted into the lists on the spot.

Entries are compared as integer KEYS whose order is the values' order (`keys_of`): the bit
patterns of bf16 (int16) or float32 (int32) values, negatives mapped to minus their magnitude.
Thresholds are keys too, made by the product from thresholds rounded DOWN to the block's format
(an entry is kept iff key >= threshold key, i.e. value >= the rounded threshold), so this module
only compares integers and decodes the few entries it keeps. The lists end up with the values
numpy's passes give them: a value joins a list iff it is strictly above the list's last value.
Which of several EQUAL values at a list's end is kept may differ; that needs no order, because
knn.py uses these lists only to bound and find candidates, which it rescores exactly.
"""

from __future__ import annotations

import numpy as np

try:  # numba is a dependency; a platform without its wheels still mines, slower (knn.py's numpy path)
    from numba import njit
except ImportError:  # pragma: no cover - exercised only where numba cannot be installed
    njit = None

# Rows whose column maxima are taken together: the maxima (one int16 or int32 per column) stay in
# L1 while the tile's rows stream past; a column whose maximum reaches a threshold costs reading
# this many entries.
_TILE_ROWS = 32


def keys_of(bits: np.ndarray) -> np.ndarray:
    """Integer keys of float bit patterns (int16 for bf16, int32 for float32) whose order is the
    values' order: a negative pattern's key is minus its magnitude bits, so -0 and +0 are equal
    (an entry of -0 reaches a threshold of 0, as the float comparison says)."""
    magnitude = bits.dtype.type(np.iinfo(bits.dtype).max)
    return np.where(bits < 0, -(bits & magnitude), bits).astype(bits.dtype)


def comparable_keys(bits: np.ndarray, *threshold_keys: np.ndarray) -> tuple[np.ndarray, bool]:
    """The block as something to compare with threshold keys, and whether it was keyed.

    With every threshold key >= 1 (above +0) the raw bit patterns serve: a negative value's
    pattern, -0 included, is a negative integer, below every such threshold. Otherwise the block
    is keyed (`keys_of`, a copy)."""
    if min(t.min(initial=1) for t in threshold_keys) >= 1:
        return bits, False
    return keys_of(bits), True


def _insert(vals, idx, r, v, c):
    """Insert (v, c) into the descending list vals[r], idx[r] if v is above its last value."""
    w = vals.shape[1]
    if not v > vals[r, w - 1]:
        return
    p = w - 1
    while p > 0 and vals[r, p - 1] < v:
        vals[r, p] = vals[r, p - 1]
        idx[r, p] = idx[r, p - 1]
        p -= 1
    vals[r, p] = v
    idx[r, p] = c


def _decode(key, keyed, low_bits, shift, word, value):
    """The float32 value of a key (`keyed` False: the key is the bit pattern itself)."""
    bits = ((-key) | (1 << (31 - shift))) if keyed and key < 0 else key
    word[0] = (np.uint32(bits) & low_bits) << np.uint32(shift)
    return value[0]


def _screen_merge_keys(keys, keyed, shift, row_t, col_t, row_vals, row_idx, col0, col_vals, col_idx, row0):
    """The kernel of `screen_merge` on a block of keys (see there). Per tile of rows, the column
    maxima (element-wise over the rows, vectorised, no horizontal work) say which columns can hold
    an entry reaching its row's or its column's threshold; only those entries are read."""
    rows, cols = keys.shape
    word = np.empty(1, dtype=np.uint32)
    value = word.view(np.float32)
    low_bits = np.uint32(0xFFFF) if shift else np.uint32(0xFFFFFFFF)
    col_max = np.empty(cols, dtype=keys.dtype)
    hit_cols = np.empty(cols, dtype=np.int64)
    for i0 in range(0, rows, _TILE_ROWS):
        i1 = min(i0 + _TILE_ROWS, rows)
        col_max[:] = keys[i0]
        for i in range(i0 + 1, i1):
            row = keys[i]
            for j in range(cols):
                col_max[j] = max(col_max[j], row[j])
        # A row's entry can reach its threshold only where the tile's column maximum reaches the
        # tile's smallest row threshold: one test per column finds the candidates of both directions.
        row_floor = row_t[i0]
        for i in range(i0 + 1, i1):
            row_floor = min(row_floor, row_t[i])
        n_hit = 0
        for j in range(cols):
            if col_max[j] >= min(col_t[j], row_floor):
                hit_cols[n_hit] = j
                n_hit += 1
        # The tile's rows (L2-resident) are read along each row at those columns only.
        for i in range(i0, i1):
            row = keys[i]
            t = row_t[i]
            for h in range(n_hit):
                j = hit_cols[h]
                key = row[j]
                to_row, to_col = key >= t, key >= col_t[j]
                if to_row or to_col:
                    v = _decode(key, keyed, low_bits, shift, word, value)
                    if to_row:
                        _insert(row_vals, row_idx, i, v, col0 + j)
                    if to_col:
                        _insert(col_vals, col_idx, j, v, row0 + i)


def screen_merge(bits, shift, row_t, col_t, row_vals, row_idx, col0, col_vals, col_idx, row0) -> None:
    """Merge the entries of a block of products into running top-W lists, in one compiled pass.

    `bits` (R x C): the block's bit patterns, int16 (bf16, `shift` 16: a bf16 pattern is the high
    half of a float32's) or int32 (float32, `shift` 0). `row_t`, `col_t`: threshold KEYS (`keys_of`
    of the thresholds rounded down to the block's format). An entry (i, j) whose key reaches
    row_t[i] goes into row list i of (row_vals, row_idx) with index col0 + j; one reaching col_t[j]
    into column list j of (col_vals, col_idx) with index row0 + i (`comparable_keys` decides
    whether the raw patterns can be compared)."""
    keys, keyed = comparable_keys(bits, row_t, col_t)
    _screen_merge_keys(keys, keyed, shift, row_t, col_t, row_vals, row_idx, col0, col_vals, col_idx, row0)


if njit is not None:
    _insert = njit(nogil=True, cache=True)(_insert)
    _decode = njit(nogil=True, cache=True)(_decode)
    _screen_merge_keys = njit(nogil=True, cache=True)(_screen_merge_keys)
else:  # pragma: no cover
    screen_merge = None  # noqa: F811 - knn.py then runs numpy's passes
