"""The candidate lists of the exact kNN (`knn.py`): entries of a block product screened into
them by threshold, the lower bounds (tau) that decide what may still enter a row's top-k, and a
list finalised by rescoring exactly what can reach it (`rescore.exact_dot`)."""

from __future__ import annotations

import numpy as np

from xmine.errors import NonFiniteRowError
from xmine.mining.products import RowTerms, eta, pair_bounds
from xmine.mining.rescore import U32, exact_dot, gamma
from xmine.mining.screen import screen_merge
from xmine.store.rows import as_f32


def merge_sparse(run_s: np.ndarray, run_i: np.ndarray, rows, vals, cols, *, by_index: bool = True) -> None:
    """Merge candidates (rows, vals, cols) into the sorted top-k lists run_s/run_i (r, k), in place.

    Only rows with candidates are touched. Order: value descending, then (`by_index`) index
    ascending: the canonical order of the exact lists (-1 pads sort after every real index at
    -inf). Lists of product values skip the index key: their ties need no order, and a candidate
    not above its list's last value is dropped first (it would change no value of the list)."""
    if len(rows) == 0:
        return
    if not by_index:
        above = vals > run_s[rows, -1]
        if not above.all():
            rows, vals, cols = rows[above], vals[above], cols[above]
            if len(rows) == 0:
                return
    k = run_s.shape[1]
    aff, local = np.unique(rows, return_inverse=True)
    all_r = np.concatenate((np.repeat(np.arange(len(aff)), k), local))
    all_v = np.concatenate((run_s[aff].ravel(), vals))
    all_c = np.concatenate((run_i[aff].ravel(), cols))
    if by_index:
        order = np.lexsort((np.where(all_c < 0, np.iinfo(np.int64).max, all_c), -all_v, all_r))
    else:  # one int64 key (row, then value descending): numpy's vectorised sort, not a lexsort
        order = np.argsort((all_r.astype(np.int64) << 32) | _descending_key(all_v))
    sr = all_r[order]
    counts = np.bincount(sr, minlength=len(aff))
    starts = np.cumsum(counts) - counts
    keep = order[(np.arange(len(order)) - starts[sr]) < k]
    run_s[aff] = all_v[keep].reshape(len(aff), k)
    run_i[aff] = all_c[keep].reshape(len(aff), k)


def _descending_key(v: np.ndarray) -> np.ndarray:
    """uint32 keys (as int64) of float32 values whose ascending order is the values' descending
    order (-inf last; NaN never occurs: inputs are checked finite)."""
    b = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
    asc = np.where(b & np.uint32(0x80000000), ~b, b | np.uint32(0x80000000))  # ascending with v
    return (~asc).astype(np.int64)


def screen_into(prod, s, t_rows, t_cols, run_p, run_i, j0: int, cp, ci, i0: int) -> None:
    """Merge the entries of block s (x rows i0.., y rows j0..) that reach their row's threshold into
    the row lists (run_p, run_i) and those reaching their column's into the column lists (cp, ci):
    one compiled pass (`screen.screen_merge`), or numpy's passes where numba or keys are missing."""
    keyed = prod.keyed(s, t_rows, t_cols) if screen_merge is not None else None
    if keyed is not None:
        block, key_rows, key_cols, shift = keyed
        screen_merge(block, shift, key_rows, key_cols, run_p, run_i, j0, cp, ci, i0)
        return
    (r, c, v), (r2, c2, v2) = prod.screen(s, t_rows, t_cols)
    merge_sparse(run_p, run_i, r, v, c + j0, by_index=False)
    merge_sparse(cp, ci, c2, v2, r2 + i0, by_index=False)


# Rows of the other side sampled to start the thresholds.
THRESHOLD_SAMPLE = 1024


def sample_floor(a_block: np.ndarray, a_norms: np.ndarray, b, b_norms: np.ndarray, k: int) -> np.ndarray:
    """A lower bound (float64) of each a_block row's final k-th best exact score against b.

    The sample (evenly spaced rows of b) is split into k groups; each group's best belongs to a
    distinct entry, so the smallest of the k maxima, minus the float32 product's bound (see
    products.py), is <= the k-th best exact score. (-inf when b is too small.)"""
    m = len(b)
    group = min(THRESHOLD_SAMPLE, m) // k
    if group < 2 or group * k >= m:  # no sample smaller than b itself: no floor
        return np.full(len(a_block), -np.inf)
    take = np.linspace(0, m - 1, group * k).astype(np.int64)
    sims = a_block @ np.asarray(b[take], dtype=np.float32).T
    best = sims.reshape(len(a_block), k, group).max(axis=2).min(axis=1).astype(np.float64)
    d = a_block.shape[1]
    return best - ((gamma(d, U32) + U32) * a_norms * b_norms[take].max() * (1 + 2.0**-30) + eta(d))


def screen_t(tau: np.ndarray, ebar: np.ndarray) -> np.ndarray:
    """The product value every entry of a row's final top-k reaches: tau - E-bar, lowered by
    2^-40 (|tau| + E-bar) for the float64 rounding of this subtraction."""
    return (tau - ebar) - 2.0**-40 * (np.abs(tau) + ebar)


def tau_bound(floor: np.ndarray, kth_product: np.ndarray, ebar: np.ndarray, product) -> np.ndarray:
    """A lower bound (float64) of each row's final k-th best exact score: the sample floor, or the
    k-th best product value so far minus its bound (k real entries score at least that)."""
    return np.maximum(floor, product.lower(kth_product) - ebar)


def finalize_lists(prod_v, prod_i, a, a_rows, ta: RowTerms, b, tb: RowTerms, floor, ebar, k: int, product):
    """Exact top-k of rows a[a_rows] from their W-wide lists of product values (prod_v, prod_i).

    The list's k best are rescored first: their k-th exact score (or the floor) is tau, a lower
    bound of the final k-th best. Then a listed entry can still enter only if its product reaches
    tau - E(x, y); those are rescored. Entries pushed out of a full list were below its last one:
    if that one still reaches tau - E-bar, the row overflows (returned with its threshold for a
    second pass over b)."""
    r_all = len(prod_v)
    top_s = np.full((r_all, k), -np.inf, dtype=np.float32)
    top_i = np.full((r_all, k), -1, dtype=np.int64)
    rows, pos = np.nonzero(prod_i[:, :k] >= 0)
    cols = prod_i[rows, pos]
    merge_sparse(top_s, top_i, rows, _rescore(a, a_rows[rows], b, cols, ta.n, tb.n), cols)
    tau = np.maximum(floor, top_s[:, -1].astype(np.float64))
    rows, pos = np.nonzero(prod_i[:, k:] >= 0)
    pos += k
    cols = prod_i[rows, pos]
    e = pair_bounds(ta[a_rows[rows]], tb[cols], product)
    ok = product.upper(prod_v[rows, pos]) >= screen_t(tau[rows], e)
    rows, cols = rows[ok], cols[ok]
    merge_sparse(top_s, top_i, rows, _rescore(a, a_rows[rows], b, cols, ta.n, tb.n), cols)
    t = screen_t(tau, ebar)
    full = prod_i[:, -1] >= 0 if prod_v.shape[1] < len(b) else np.zeros(r_all, bool)
    over = np.flatnonzero(full & (product.upper(prod_v[:, -1]) >= t))
    return top_s, top_i, over, t


def _rescore(a, a_rows, b, b_rows, na, nb, chunk: int = 1 << 14) -> np.ndarray:
    """exact_dot of rows a[a_rows[i]] and b[b_rows[i]], gathered chunk by chunk (bounded memory:
    a chunk's two float32 gathers are 2 * chunk * dim * 4 bytes, 50 MB at 384 dimensions)."""
    out = np.empty(len(a_rows), dtype=np.float32)
    for s in range(0, len(a_rows), chunk):
        ar, br = a_rows[s : s + chunk], b_rows[s : s + chunk]
        out[s : s + len(ar)] = exact_dot(np.asarray(a[ar], dtype=np.float32), np.asarray(b[br], dtype=np.float32),
                                         na[ar], nb[br])
    return out


def side_terms(a, product, side: str, chunk: int = 8192) -> RowTerms:
    """Per-row norms of a side (one streaming pass); refuses non-finite rows."""
    parts = [product.terms(as_f32(a[i:i + chunk])) for i in range(0, len(a), chunk)]
    terms = RowTerms(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("n", "nh", "r")),
                     tiny=any(p.tiny for p in parts))
    bad = np.flatnonzero(~np.isfinite(terms.n))
    if len(bad):
        raise NonFiniteRowError(side, int(bad[0]))
    return terms
