"""Exact k-nearest neighbours in both directions from ONE blocked low-precision product: the
work of one unit of the exact kNN step (`xmine.mining.knn`), a tile of x rows against y rows.

Mining needs, for every source row, its k most similar target rows (x->y) and, for every target
row, its k most similar source rows (y->x). Both come from the same similarities S = X @ Y.T, so
we compute S block by block (`block_rows` rows of X times `block_cols` rows of Y) and keep, per
row and per column, a running top-k. Memory is bounded by one block and the per-worker y->x
state (m * W entries, below), plus the (n + m) * k results and O(n + m) per-row bounds; the N x M
matrix never exists, and inputs (float16, memory-mapped) are read one block at a time.

Exact means canonical: a pair's score is `rescore.exact_dot`, the float32 nearest the exact dot
product of the two stored rows, and among equal scores the lower index ranks first. The block
product (bf16 by default on CPUs with avx512_bf16/AMX, fp32 otherwise, fp16 on CUDA: see
`products.py`) only finds CANDIDATES, with a proven bound E(x, y) >= |product - score|:
- while scanning, each row (column) keeps its W best PRODUCT values (W = 2k + 4 for columns,
  3k + 4 for rows). tau, a lower bound of the row's final k-th best score, is the larger of a
  floor from a sample of the other side and (k-th best product so far) - E-bar, E-bar being E
  maximised over the other side (per-row norms |x|, |h_x|, |x - h_x|, computed once). An entry
  can be in the final top-k only if its product >= tau - E-bar, so only those are taken, by
  threshold, in one compiled pass over the block (`screen.py`: per tile of rows, the column
  maxima say where to look);
- when a row has seen all of y (a column, all of x), its k best products are rescored exactly;
  their k-th exact score is a tighter tau, and the rest of the list is rescored where its
  product reaches tau - E(x, y). Entries pushed out of a full list rank below its last one: if
  that one still reaches tau - E-bar, the list may have lost some, and the row (column) gets a
  second, exact pass over the other side with that final threshold.
So every true top-k entry is rescored, and the result is the same whatever the product, block
shape, worker count or BLAS kernel: byte-identical pairs and scores. Rescoring costs about
(n + m) (k + a few) exact dots.

Parallelism: row blocks are independent, so `workers` threads each take whole row blocks, with
BLAS and torch limited to one thread and a y->x state of their own (merged at checkpoints and at
the end): one thread's screening and rescoring overlap the other's product.

The y->x state (product values) lives only inside the unit; the step checkpoints finished tiles,
whose lists hold exact scores, so a checkpoint does not depend on the product.
"""

from __future__ import annotations

import ctypes
import os
import queue
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import numpy as np

from xmine.errors import NonFiniteRowError
from xmine.mining.products import RowTerms, eta, make_product, pair_bounds, resolve_product, row_bounds
from xmine.mining.rescore import U32, exact_dot, gamma
from xmine.mining.screen import screen_merge
from xmine.store.rows import as_f32
from xmine.topk import merge_topk

# A 1024 x 4096 float32 block (16 MB) stays in the 32-MB L3 cache between the product and the
# row/column passes that follow it, which then need not read it from memory again; with two workers
# their two blocks together fill that cache. The measurements behind the choice (made before the
# compiled screen, which also wants the block in cache) are in benchmarks/results/notes/mining_speed.md.
DEFAULT_BLOCK_ROWS = 1024
DEFAULT_BLOCK_COLS = 4096
# On a GPU a block's product takes microseconds, and what each block costs on the host (screening
# its candidates into the lists, the thresholds) decides the speed: blocks 16 times larger (256 MB
# of float32 scores on the GPU per worker thread). Measured on an H200 against the CPU blocks and
# larger ones: benchmarks/results/notes/gpu_check.md.
CUDA_BLOCK_ROWS = 4096
CUDA_BLOCK_COLS = 16384


def default_blocks(product: str) -> tuple[int, int]:
    """(block_rows, block_cols) of the exact search with `product` ("auto" is resolved here)."""
    if resolve_product(product) == "cuda":
        return CUDA_BLOCK_ROWS, CUDA_BLOCK_COLS
    return DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_COLS


def candidate_width(k: int) -> int:
    """Entries kept per column while scanning: the k best product values and a margin for the
    entries within the bound of them (wider bands overflow to an exact second pass). Measured on
    random 384-d unit vectors at 100k (bf16): the band holds k + 1.3 entries on average, and
    0.1% of lists of 2k + 4 overflow."""
    return 2 * k + 4


# Memory for the workers' own y->x states: m * candidate_width(k) * 12 bytes each. Fewer workers past this.
WORKER_STATE_BUDGET_BYTES = 1 << 30


def default_workers(m: int, k: int) -> int:
    """Worker threads for the kNN: BLAS's own thread count (which follows OMP_NUM_THREADS and the
    CPUs this process may use), capped by the memory of the per-worker y->x states; 1 without
    threadpoolctl."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return 1
    blas = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = max(blas) if blas else cpus
    return max(1, min(threads, WORKER_STATE_BUDGET_BYTES // max(1, m * candidate_width(k) * 12)))


def _malloc_trim():
    """glibc's malloc_trim, or None (another C library)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


# Why: each row block reads, converts and rounds every block of y (several MB each, in each worker
# thread's own malloc arena); glibc keeps what was freed for reuse, and with two workers that grew
# the resident set by 50-150 MB over a 200k x 20k search, as much as the per-row state. The pages
# handed back are faulted in again by the next round, once per round: measured within the noise of
# the run's time.
def release_freed_memory() -> None:
    """Hand the heap's free pages back to the kernel (glibc; elsewhere nothing)."""
    if _TRIM is not None:
        _TRIM(0)


@contextmanager
def _single_threaded(workers: int, product):
    """BLAS and torch limited to one thread while `workers` > 1 threads each run their own products;
    CUDA: no reduced-precision reductions (the bound assumes fp32 accumulation)."""
    with ExitStack() as stack:
        if workers > 1:
            try:
                from threadpoolctl import threadpool_limits

                stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
            except ImportError:  # still exact, only oversubscribed
                pass
        torch = getattr(product, "torch", None)
        if torch is not None and workers > 1 and product.name == "bf16":
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            stack.callback(torch.set_num_threads, before)
        if torch is not None and product.name == "cuda":
            m = torch.backends.cuda.matmul
            before16 = m.allow_fp16_reduced_precision_reduction
            m.allow_fp16_reduced_precision_reduction = False
            stack.callback(setattr, m, "allow_fp16_reduced_precision_reduction", before16)
        yield


# Columns whose y->x lists are merged and finalised at once: merging sorts a (columns, workers * W)
# copy of the lists, and finalising gathers the norms of every listed entry, a few hundred bytes
# a column; in chunks this stays a block, not a multiple of the whole side's state.
FINAL_COLS = 16_384


def _merged_cols(states: list[tuple[np.ndarray, np.ndarray]], c0: int, c1: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns c0:c1 of the y->x lists of several workers' (values, idx), each (m, w) sorted in the
    canonical order (`xmine.topk`), merged into one (a view when there is one worker)."""
    if len(states) == 1:
        return states[0][0][c0:c1], states[0][1][c0:c1]
    return merge_topk([s[c0:c1] for s, _ in states], [i[c0:c1] for _, i in states], states[0][0].shape[1])


class _Worker:
    """One thread's y->x running state (the W best product values of each column: their values
    bound the column's final k-th best score) and product buffer."""

    def __init__(self, m: int, w: int, buffer):
        self.bwd_prod = np.full((m, w), -np.inf, dtype=np.float32)
        self.bwd_idx = np.full((m, w), -1, dtype=np.int64)
        # Empty column lists: the first row block sets floors from its own k-th best products.
        self.fresh = True
        self.col_floor = None
        # Reused: a fresh 16-MB array per block costs page faults every time.
        self.buf = buffer


def product_knn_both(x: np.ndarray, y: np.ndarray, k: int, *, block_rows: int, block_cols: int, workers: int | None,
                     product: str, on_rows) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact inner-product kNN x->y and y->x from one blocked product: what `knn.exact_knn_both`
    returns (it checks the arguments and gives the defaults), for one tile (`knn.tile_knn`).
    `workers` threads share the row blocks (None: `default_workers`); `on_rows(rows)` (or None) as
    blocks of x rows finish.
    """
    n, m = len(x), len(y)
    kx, ky = min(k, m), min(k, n)
    # Row lists live for one row block only: wider costs little memory and rarely overflows (an
    # overflowing row costs a pass over y; an overflowing column, only at the end, one over x).
    wx, wy = min(candidate_width(k) + k, m), min(candidate_width(k), n)
    prod = make_product(resolve_product(product), x.shape[1])
    if workers is None:
        workers = min(default_workers(m, ky), prod.max_workers(block_rows * block_cols) or n)
    workers = min(workers, -(-n // block_rows))  # at most one per row block
    fwd_sims = np.empty((n, kx), dtype=np.float32)
    fwd_idx = np.empty((n, kx), dtype=np.int64)

    # Per-row norms of both sides and each row's bound E-bar over the whole other side.
    tx, ty = side_terms(x, prod, "src"), side_terms(y, prod, "tgt")
    ebar_x, ebar_y = row_bounds(tx, ty.max(), prod), row_bounds(ty, tx.max(), prod)
    y_in_memory = y.dtype == np.float32 and not isinstance(y, np.memmap) and isinstance(y, np.ndarray)
    y32 = np.ascontiguousarray(y) if y_in_memory else None

    def y_block(j0: int, j1: int) -> np.ndarray:
        return y32[j0:j1] if y32 is not None else as_f32(y[j0:j1])

    # y already in memory: its blocks are rounded for the product once, not once per row block (a
    # bf16 copy is half of y; on a GPU, fp16 and only where it fits; a store read from disk is
    # rounded block by block, memory bounded).
    y_prepared = {}
    if y32 is not None and n > block_rows and prod.fits_prepared(y32):
        y_prepared = {j0: prod.prepare(y_block(j0, j0 + block_cols), ty.tiny) for j0 in range(0, m, block_cols)}

    def y_block_prepared(j0: int, j1: int):
        p = y_prepared.get(j0)
        return p if p is not None else prod.prepare(y_block(j0, j1), ty.tiny)

    # Column floors: each y's k-th best against a sample of x (a lower bound of its final k-th).
    col_floor = np.empty(m)
    for j0 in range(0, m, block_cols):
        yb = y_block(j0, j0 + block_cols)
        col_floor[j0 : j0 + len(yb)] = sample_floor(yb, ty.n[j0 : j0 + len(yb)], x, tx.n, ky)

    # One buffer serves both directions: row blocks and overflowed rows (up to block_rows rows of x
    # against block_cols rows of y), and overflowed columns at the end (up to block_rows rows of y
    # against block_cols rows of x), so it holds the larger of the two when the sides differ.
    buffer_size = max(min(block_rows, n) * min(block_cols, m), min(block_rows, m) * min(block_cols, n))
    pool = [_Worker(m, wy, prod.buffer(buffer_size)) for _ in range(workers)]
    idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
    for w in pool:
        idle.put(w)

    def row_block(i0: int) -> tuple[np.ndarray, np.ndarray]:
        """x rows i0.. against all of y: their exact top-k, and the y->x lists of one idle worker updated."""
        w = idle.get()  # never waits: at most `workers` blocks run at once
        try:
            i1 = min(i0 + block_rows, n)
            xb = as_f32(x[i0:i1])
            px = prod.prepare(xb, tx.tiny)
            run_p = np.full((i1 - i0, wx), -np.inf, dtype=np.float32)
            run_i = np.full((i1 - i0, wx), -1, dtype=np.int64)
            row_floor = sample_floor(xb, tx.n[i0:i1], y, ty.n, kx)
            eb_x = ebar_x[i0:i1]
            fresh, w.fresh = w.fresh, False
            if w.col_floor is None:
                w.col_floor = col_floor.copy()
            for j0 in range(0, m, block_cols):
                j1 = min(j0 + block_cols, m)
                s = prod.scores(px, y_block_prepared(j0, j1), w.buf)
                cp, ci = w.bwd_prod[j0:j1], w.bwd_idx[j0:j1]
                # A row's (column's) first block: k of its entries reach their k-th best product,
                # a far better floor than the sample's, before anything is taken from the block.
                if j0 == 0 and j1 - j0 >= kx:
                    row_floor = np.maximum(row_floor, prod.lower(prod.kth_floor(s, kx, 1)) - eb_x)
                if fresh and i1 - i0 >= ky:
                    w.col_floor[j0:j1] = np.maximum(w.col_floor[j0:j1],
                                                    prod.lower(prod.kth_floor(s, ky, 0)) - ebar_y[j0:j1])
                t_rows = screen_t(tau_bound(row_floor, run_p[:, kx - 1], eb_x, prod), eb_x)
                t_cols = screen_t(tau_bound(w.col_floor[j0:j1], cp[:, ky - 1], ebar_y[j0:j1], prod), ebar_y[j0:j1])
                screen_into(prod, s, t_rows, t_cols, run_p, run_i, j0, cp, ci, i0)
            # All of y seen: rescore what can reach each row's top-k.
            top_s, top_i, over, t = finalize_lists(run_p, run_i, xb, np.arange(i1 - i0), tx[i0:i1], y, ty,
                                              row_floor, eb_x, kx, prod)
            if len(over):
                _second_pass(xb[over], tx.n[i0 + over], t[over], top_s, top_i, over, y, ty.n, m, block_cols, w.buf)
            return top_s, top_i
        finally:
            idle.put(w)

    def _second_pass(a_rows, a_norms, t, top_s, top_i, where, b, b_norms, nb, block, buf):
        """Rows whose band overflowed: every entry reaching t against all of b, rescored exactly
        (this finds their whole top-k again: their lists restart empty)."""
        top_s[where], top_i[where] = -np.inf, -1
        pa = prod.prepare(a_rows)  # flushes subnormals if any
        for j0 in range(0, nb, block):
            bb = as_f32(b[j0:j0 + block])
            s = prod.scores(pa, prod.prepare(bb), buf)
            (r, c, _), _ = prod.screen(s, t, np.full(len(bb), np.inf))
            exact = exact_dot(a_rows[r], bb[c], a_norms[r], b_norms[j0 + c])
            merge_sparse(top_s, top_i, where[r], exact, c + j0)

    with _single_threaded(workers, prod), ThreadPoolExecutor(workers, thread_name_prefix="xmine-knn") as ex:
        # Rounds of `workers` row blocks, the freed heap handed back after each.
        for r0 in range(0, n, block_rows * workers):
            starts = range(r0, min(r0 + block_rows * workers, n), block_rows)
            for i0, (top_s, top_i) in zip(starts, ex.map(row_block, starts)):
                fwd_sims[i0 : i0 + len(top_s)] = top_s
                fwd_idx[i0 : i0 + len(top_i)] = top_i
                if on_rows is not None:
                    on_rows(len(top_s))
            release_freed_memory()
        # All of x seen: rescore what can reach each column's top-k, FINAL_COLS columns at a time.
        states = [(w.bwd_prod, w.bwd_idx) for w in pool]
        floor = np.max([col_floor] + [w.col_floor for w in pool if w.col_floor is not None], axis=0)
        bwd_sims, bwd_idx = np.empty((m, ky), dtype=np.float32), np.empty((m, ky), dtype=np.int64)
        t, overflowed = np.empty(m), []
        for c0 in range(0, m, FINAL_COLS):
            c1 = min(c0 + FINAL_COLS, m)
            bwd_sims[c0:c1], bwd_idx[c0:c1], over_c, t[c0:c1] = finalize_lists(
                *_merged_cols(states, c0, c1), y, np.arange(c0, c1), ty, x, tx, floor[c0:c1], ebar_y[c0:c1], ky, prod)
            overflowed.append(over_c + c0)
        for w in pool:  # the lists are final: only the product buffer is used again
            w.bwd_prod = w.bwd_idx = None
        over = np.concatenate(overflowed)
        for o0 in range(0, len(over), block_rows):  # overflowed columns, block by block
            o = over[o0 : o0 + block_rows]
            yo = np.ascontiguousarray(np.asarray(y[o]), dtype=np.float32)
            _second_pass(yo, ty.n[o], t[o], bwd_sims, bwd_idx, o, x, tx.n, n, block_cols, pool[0].buf)
    return fwd_sims, fwd_idx, bwd_sims, bwd_idx


# ------------------------------------------------------------------------------ the candidate lists
# Entries of a block product screened into them by threshold, the lower bounds (tau) that decide
# what may still enter a row's top-k, and a list finalised by rescoring exactly what can reach it.


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
