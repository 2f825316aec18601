"""Exact kNN in both directions as tiles of the similarity matrix: the units of a cluster.

In one process `exact_knn_both` takes both directions' top-k from ONE blocked product, with the
machine's threads and its own checkpoint. On a cluster (`xmine.executor.OnRay`) the product is
cut into tiles (X rows i0:i1 x Y rows j0:j1); each tile is one unit, a one-CPU task, that runs
that same `exact_knn_both` on its two slices and returns the tile's top-k both ways: each of its
x rows' k best among the tile's y rows, and each of its y rows' k best among the tile's x rows.
The driver merges them (`xmine.topk.merge_topk`): a row's top-k over all tiles of its stripe is its
true top-k, so every neighbourhood mean in the margin is over the true k nearest, not a
per-tile one. Ties go to the lower index, as in the single-process search, and tiles are cut
on the boundaries of its blocks, so each similarity comes from the same block product: the kNN
lists, and the mined TSV, are byte-identical to the single-process run (tests/test_ray.py).

Work and memory: one product in all (no direction is computed twice); a task holds its two
slices and one block; the driver holds the (n + m) x k results, as the single-process search
does. Each finished tile is saved in `checkpoint_dir` (an .npz of 12 * k * (tile rows + tile
columns) bytes) before it is merged, so a killed driver, run again, skips the finished tiles.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from xmine.checkpoints import KeyedDir
from xmine.errors import NonFiniteRowError
from xmine.executor import Executor, ShardProgress
from xmine.fileio import atomic_path
from xmine.topk import merge_topk
from xmine.mining.knn import DEFAULT_BLOCK_COLS, DEFAULT_BLOCK_ROWS, exact_knn_both

#: Tile = TILE_BLOCKS_ROWS x TILE_BLOCKS_COLS blocks of the product. Large enough that a tile's
#: threshold sample (1024 rows of each side) costs a few percent of its product, small enough for
#: several tiles per CPU at 100k rows a side (32 x 1024 by 16 x 4096 = 32,768 x 65,536 rows).
TILE_BLOCKS_ROWS = 32
TILE_BLOCKS_COLS = 16


def tile_knn(x, y, i0: int, i1: int, j0: int, j1: int, k: int, block_rows: int, block_cols: int,
             product: str = "auto", on_rows=None):
    """One tile: x[i0:i1] against y[j0:j1], both directions, indices global, up to k columns each
    (fewer where the other slice has fewer rows; `merge_topk` pads the merged lists).

    A unit of one CPU, so BLAS gets one thread (the single-process search does the same in each of
    its worker threads).
    """
    from threadpoolctl import threadpool_limits

    try:
        with threadpool_limits(limits=1, user_api="blas"):
            fs, fi, bs, bi = exact_knn_both(x[i0:i1], y[j0:j1], k, block_rows=block_rows, block_cols=block_cols,
                                            workers=1, product=product)
    except NonFiniteRowError as e:  # the tile's row -> the side's row
        raise NonFiniteRowError(e.side, e.row + (i0 if e.side == "src" else j0)) from None
    return i0, i1, j0, j1, fs, np.where(fi >= 0, fi + j0, -1), bs, np.where(bi >= 0, bi + i0, -1)


def tiled_knn_both(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    executor: Executor,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    block_cols: int = DEFAULT_BLOCK_COLS,
    workers: int | None = None,
    product: str = "auto",
    checkpoint_dir: str | Path | None = None,
    checkpoint_key: str = "",
    checkpoint_seconds: float = 60.0,
    show_progress: bool = False,
    tile_rows: int | None = None,
    tile_cols: int | None = None,
):
    """`exact_knn_both` as tiles run by `executor` (same arguments, same result).

    `workers` and `checkpoint_seconds` do not apply (each tile is a one-CPU unit and is saved as
    it finishes). `tile_rows`/`tile_cols` override the tile size (rounded to whole blocks).
    """
    n, m = len(x), len(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x {x.shape} and y {y.shape} must be 2-D with the same dimension")
    if k < 1 or n == 0 or m == 0:
        raise ValueError(f"need k >= 1 and non-empty inputs (k={k}, n={n}, m={m})")
    kx, ky = min(k, m), min(k, n)
    tr = _whole_blocks(tile_rows or TILE_BLOCKS_ROWS * block_rows, block_rows)
    tc = _whole_blocks(tile_cols or TILE_BLOCKS_COLS * block_cols, block_cols)
    tiles = [(i0, min(i0 + tr, n), j0, min(j0 + tc, m)) for i0 in range(0, n, tr) for j0 in range(0, m, tc)]

    fwd_s = np.full((n, kx), -np.inf, dtype=np.float32)
    fwd_i = np.full((n, kx), -1, dtype=np.int64)
    bwd_s = np.full((m, ky), -np.inf, dtype=np.float32)
    bwd_i = np.full((m, ky), -1, dtype=np.int64)

    def merge(i0, i1, j0, j1, fs, fi, bs, bi):
        fwd_s[i0:i1], fwd_i[i0:i1] = merge_topk([fwd_s[i0:i1], fs[:, :kx]], [fwd_i[i0:i1], fi[:, :kx]], kx)
        bwd_s[j0:j1], bwd_i[j0:j1] = merge_topk([bwd_s[j0:j1], bs[:, :ky]], [bwd_i[j0:j1], bi[:, :ky]], ky)

    ckpt = _TileCheckpoint(checkpoint_dir, checkpoint_key, tr, tc, product) if checkpoint_dir is not None else None
    todo, done_rows = [], 0
    for t in tiles:  # finished tiles of an interrupted run are merged, not recomputed
        saved = ckpt.load(t) if ckpt is not None else None
        if saved is None:
            todo.append(t)
        else:
            merge(*t, *saved)
            done_rows += (t[1] - t[0]) * (t[3] - t[2])
    if todo:
        # The two sides are shared once as they are: a row view over a store travels as its paths
        # and row ids, and each unit reads its own tile's rows (a float32 copy of a side here would
        # cost the driver 4 x dim bytes a row).
        xs, ys = executor.share(x), executor.share(y)
        units = ((xs, ys, *t, k, block_rows, block_cols, product) for t in todo)
        with ShardProgress(shards=len(tiles), shards_done=len(tiles) - len(todo), rows=n * m, rows_done=done_rows,
                           desc=f"kNN tiles ({executor.name})", unit=" pairs", enabled=show_progress) as bar:
            for i0, i1, j0, j1, fs, fi, bs, bi in executor.map(tile_knn, units, progress=bar):
                if ckpt is not None:
                    ckpt.save((i0, i1, j0, j1), fs, fi, bs, bi)
                merge(i0, i1, j0, j1, fs, fi, bs, bi)
                bar.done((i1 - i0) * (j1 - j0))
    return fwd_s, fwd_i, bwd_s, bwd_i


def _whole_blocks(rows: int, block: int) -> int:
    return max(block, (int(rows) // block) * block)


class _TileCheckpoint:
    """Finished tiles, one .npz each, in a directory keyed by the inputs and the tiling."""

    def __init__(self, directory: str | Path, key: str, tile_rows: int, tile_cols: int, product: str):
        full_key = hashlib.sha256(json.dumps([key, tile_rows, tile_cols, product, "ray-tiles"]).encode()).hexdigest()
        self.dir = KeyedDir(directory, full_key, owned=("tile_*.npz",)).dir

    def _path(self, t) -> Path:
        return self.dir / ("tile_" + "_".join(f"{v:012d}" for v in t) + ".npz")

    def load(self, t):
        try:
            with np.load(self._path(t)) as z:
                return z["fs"], z["fi"], z["bs"], z["bi"]
        except (OSError, ValueError, KeyError):  # not run yet, or half-written by a killed driver: (re)do it
            return None

    def save(self, t, fs, fi, bs, bi) -> None:
        with atomic_path(self._path(t)) as tmp, open(tmp, "wb") as f:
            np.savez(f, fs=fs, fi=fi, bs=bs, bi=bi)
