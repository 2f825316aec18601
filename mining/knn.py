"""Exact kNN in both directions, as a step: tiles of the similarity matrix, one unit each.

The product X @ Y.T is cut into tiles (x rows i0:i1 x y rows j0:j1). A unit (`tile_knn`) takes
one tile and returns its top-k both ways with exact scores (`knn_product.product_knn_both`): each
of its x rows' k best among the tile's y rows, and each of its y rows' k best among its x rows.
The merge (`xmine.topk.merge_topk`) is order-free: a row's top-k over all tiles of its stripe is
its true top-k, ties to the lower index, so the lists, and the mined TSV, are byte-identical
whatever the tiling and wherever the units run (tests/test_ray.py).

The executor (`xmine.exec.executor`) runs the units: where one unit runs at a time (this process) it
uses every thread and a tile spans all of y, a stripe of STRIPE_BLOCKS_ROWS blocks of x rows
over which one product keeps its y->x state; where several run at once (a Ray cluster), tiles
are TILE_BLOCKS_ROWS x TILE_BLOCKS_COLS blocks of one CPU each. A unit reads its own rows (a store's row view travels
as paths and row ids), so the driver holds the (n + m) x k results and never a side.

With `checkpoint_dir`, each finished tile is saved (12 * k * (tile rows + tile columns) bytes)
before it is merged, in a folder keyed by the inputs and the tiling: a run started again skips
the saved tiles, and a damaged one is recomputed, with a warning, never read.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from xmine.artefacts.checkpoints import KeyedDir
from xmine.errors import ConfigError, NonFiniteRowError
from xmine.exec.executor import LOCAL, Executor, ShardProgress
from xmine.index import choose
from xmine.artefacts.fileio import atomic_path
from xmine.mining.knn_product import default_blocks, default_workers, product_knn_both
from xmine.store.rows import RowSubset
from xmine.topk import merge_topk

#: Tile rows, in blocks: enough that a tile's threshold sample (1024 rows of each side) costs a
#: few percent of its product. Tile columns on a cluster, in blocks: several tiles per CPU at
#: 100k rows a side (32 x 1024 by 16 x 4096 = 32,768 x 65,536 rows).
TILE_BLOCKS_ROWS = 32
TILE_BLOCKS_COLS = 16
#: Stripe rows where one unit runs at a time, in blocks: each stripe starts its y->x lists, their
#: floors and their rescoring afresh, which cost 10-25% more time than one product at 65k x 65k
#: in stripes of 32 blocks (2 cores, busy); 128 blocks keep up to 131k rows one product.
STRIPE_BLOCKS_ROWS = 128


def _check_block_memory(rows: int, cols: int, workers: int) -> None:
    """ConfigError where the score blocks the workers hold at once (rows x cols float32 each) would
    take more than half of this machine's memory (was: `--block-rows 10**12 --block-cols 10**12`
    on 200k x 20k rows would have asked for 16 GB without a word)."""
    need, have = rows * cols * 4 * workers, choose.total_memory_bytes()
    if need > have // 2:
        given = "--block-rows/--block-cols" + (f" with --workers {workers:,}" if workers > 1 else "")
        raise ConfigError(f"{given}: {workers:,} block(s) of {rows:,} x {cols:,} scores take "
                          f"{need / 2**30:,.1f} GiB, more than half of this machine's {have / 2**30:.1f} GiB; leave "
                          "them out for the product's sizes, or give smaller ones")


def tile_knn(x, y, i0: int, i1: int, j0: int, j1: int, k: int, block_rows: int, block_cols: int,
             product: str = "auto", workers: int | None = None, threads: int | None = None, on_rows=None):
    """The unit: x[i0:i1] against y[j0:j1], both directions, indices global, up to k columns each
    (fewer where the other slice has fewer rows; `merge_topk` pads the merged lists).

    `threads`: the CPUs the unit was given (None: this machine's, shared by `workers` threads);
    `on_rows(pairs)` as its row blocks finish."""
    from threadpoolctl import threadpool_limits

    report = None if on_rows is None else (lambda rows: on_rows(rows * (j1 - j0)))
    try:
        with threadpool_limits(limits=threads, user_api="blas") if threads else nullcontext():
            fs, fi, bs, bi = product_knn_both(_rows(x, i0, i1), _rows(y, j0, j1), k, block_rows=block_rows,
                                              block_cols=block_cols, workers=threads or workers, product=product,
                                              on_rows=report)
    except NonFiniteRowError as e:  # the tile's row -> the side's row
        raise NonFiniteRowError(e.side, e.row + (i0 if e.side == "src" else j0)) from None
    return i0, i1, j0, j1, fs, np.where(fi >= 0, fi + j0, -1), bs, np.where(bi >= 0, bi + i0, -1)


def _rows(a, lo: int, hi: int):
    """Rows lo:hi of a side, read on demand (a view, never a copy of the rows)."""
    if lo == 0 and hi == len(a):
        return a
    return a[lo:hi] if isinstance(a, np.ndarray) else RowSubset(a, np.arange(lo, hi))


def check_knn_inputs(x, y, k: int) -> tuple[int, int]:
    """(n, m): the sizes of the two sides of a kNN search (exact or approximate), or a ConfigError
    for sides that are not 2-D arrays of rows of one dimension, an empty side or k < 1 (was: a
    ValueError, and an AttributeError for lists; `mine_embeddings` is public)."""
    for name, a in (("x", x), ("y", y)):
        if not hasattr(a, "ndim") or not hasattr(a, "shape"):
            raise ConfigError(f"{name} must be a 2-D numpy array of embeddings (rows), not a {type(a).__name__}")
    n, m = len(x), len(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ConfigError(f"x {x.shape} and y {y.shape} must be 2-D with the same dimension")
    if k < 1 or n == 0 or m == 0:
        raise ConfigError(f"need k >= 1 and non-empty inputs (k={k}, n={n}, m={m})")
    return n, m


def exact_knn_both(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    block_rows: int | None = None,
    block_cols: int | None = None,
    workers: int | None = None,
    product: str = "auto",
    executor: Executor = LOCAL,
    checkpoint_dir: str | Path | None = None,
    checkpoint_key: str = "",
    show_progress: bool = False,
    tile_rows: int | None = None,
    tile_cols: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact inner-product kNN x->y and y->x: (fwd_sims (n, kx), fwd_idx (n, kx), bwd_sims (m, ky),
    bwd_idx (m, ky)), kx = min(k, m), ky = min(k, n); each row by score, highest first, then by
    index; scores float32 (`rescore.exact_dot`), indices int64. Rows of x and y should be
    L2-normalised (then scores are cosines).

    `product` ("auto", "fp32", "bf16", "cuda": `products.py`), the blocks (None: the product's,
    `knn_product.default_blocks`), `workers` (threads of a unit here; None:
    `knn_product.default_workers`), the tiling (`tile_rows`/`tile_cols`, rounded to whole blocks)
    and the executor change the work, never the result.
    """
    n, m = check_knn_inputs(x, y, k)
    rows, cols = default_blocks(product)
    block_rows = rows if block_rows is None else block_rows
    block_cols = cols if block_cols is None else block_cols
    if block_rows < 1 or block_cols < 1:
        raise ValueError("block sizes must be >= 1")
    _check_block_memory(min(block_rows, n), min(block_cols, m), workers or default_workers(m, k))
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    kx, ky = min(k, m), min(k, n)
    one_at_a_time = executor.slots() == 1  # then a tile is a stripe: all of y, with every thread
    tr = _whole_blocks(tile_rows or (STRIPE_BLOCKS_ROWS if one_at_a_time else TILE_BLOCKS_ROWS) * block_rows,
                       block_rows)
    if tile_cols:
        tc = _whole_blocks(tile_cols, block_cols)
    else:  # one at a time: all of y, so the unit keeps its y->x lists across its row blocks
        tc = m if one_at_a_time else TILE_BLOCKS_COLS * block_cols
    tiles = [(i0, min(i0 + tr, n), j0, min(j0 + tc, m)) for i0 in range(0, n, tr) for j0 in range(0, m, tc)]

    fwd_s = np.full((n, kx), -np.inf, dtype=np.float32)
    fwd_i = np.full((n, kx), -1, dtype=np.int64)
    bwd_s = np.full((m, ky), -np.inf, dtype=np.float32)
    bwd_i = np.full((m, ky), -1, dtype=np.int64)

    def merge(i0, i1, j0, j1, fs, fi, bs, bi):
        fwd_s[i0:i1], fwd_i[i0:i1] = merge_topk([fwd_s[i0:i1], fs[:, :kx]], [fwd_i[i0:i1], fi[:, :kx]], kx)
        bwd_s[j0:j1], bwd_i[j0:j1] = merge_topk([bwd_s[j0:j1], bs[:, :ky]], [bwd_i[j0:j1], bi[:, :ky]], ky)

    key = json.dumps([checkpoint_key, n, m, int(x.shape[1]), k, tr, tc])
    ckpt = TileCheckpoint(checkpoint_dir, key, k) if checkpoint_dir is not None else None
    todo, done_pairs = [], 0
    for t in tiles:  # finished tiles of an interrupted run are merged, not recomputed
        saved = ckpt.load(t) if ckpt is not None else None
        if saved is None:
            todo.append(t)
        else:
            merge(*t, *saved)
            done_pairs += (t[1] - t[0]) * (t[3] - t[2])
    if todo:
        xs, ys, threads = executor.share(x), executor.share(y), executor.unit_threads(1)
        units = ((xs, ys, *t, k, block_rows, block_cols, product, workers, threads) for t in todo)
        with ShardProgress(shards=len(tiles), shards_done=len(tiles) - len(todo), rows=n * m, rows_done=done_pairs,
                           desc=f"exact kNN ({executor.name})", unit=" pairs", enabled=show_progress) as bar:
            for i0, i1, j0, j1, fs, fi, bs, bi in executor.map(tile_knn, units, cpus=1, progress=bar):
                if ckpt is not None:
                    ckpt.save((i0, i1, j0, j1), fs, fi, bs, bi)
                merge(i0, i1, j0, j1, fs, fi, bs, bi)
                bar.done((i1 - i0) * (j1 - j0))
    return fwd_s, fwd_i, bwd_s, bwd_i


def _whole_blocks(rows: int, block: int) -> int:
    return max(block, (int(rows) // block) * block)


class TileCheckpoint(KeyedDir):
    """Finished tiles, one .npz each, in a folder keyed by the inputs and the tiling."""

    def __init__(self, directory: str | Path, key: str, k: int):
        super().__init__(directory, hashlib.sha256(key.encode()).hexdigest(), owned=("tile_*.npz",))
        self.k = k

    def _path(self, t) -> Path:
        return self.dir / ("tile_" + "_".join(f"{v:012d}" for v in t) + ".npz")

    def load(self, t):
        """The saved (fs, fi, bs, bi) of tile t, or None: not run yet, or damaged (then deleted,
        with a warning, so it is computed again: `KeyedDir.load_arrays`)."""
        return self.load_arrays(self._path(t).name, ("fs", "fi", "bs", "bi"),
                                check=lambda *saved: self._problem(t, *saved), what="mining checkpoint",
                                again="recomputing that tile")

    def _problem(self, t, fs, fi, bs, bi) -> str | None:
        i0, i1, j0, j1 = t
        for name, sims, idx, rows, lo, hi in (("x->y", fs, fi, i1 - i0, j0, j1), ("y->x", bs, bi, j1 - j0, i0, i1)):
            want = (rows, min(self.k, hi - lo))
            if sims.shape != want or idx.shape != want:
                return f"{name} lists {sims.shape}/{idx.shape}, expected {want}"
            if not (np.issubdtype(idx.dtype, np.integer) and np.issubdtype(sims.dtype, np.floating)):
                return f"{name} lists of {sims.dtype}/{idx.dtype}"
            if not (((idx == -1) | ((idx >= lo) & (idx < hi))).all() and (np.isfinite(sims) | (sims == -np.inf)).all()):
                return f"{name} lists hold impossible values"
        return None

    def save(self, t, fs, fi, bs, bi) -> None:
        with atomic_path(self._path(t)) as tmp, open(tmp, "wb") as f:
            np.savez(f, fs=fs, fi=fi, bs=bs, bi=bi)
