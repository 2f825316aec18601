"""Exact k-nearest neighbours in both directions from ONE blocked matrix product.

Mining needs, for every source row, its k most similar target rows (x->y) and, for every target
row, its k most similar source rows (y->x). Both come from the same similarities S = X @ Y.T, so
we compute S block by block (`block_rows` rows of X times `block_cols` rows of Y), take the top-k
of each block row (merged into a running x->y top-k across Y blocks) and the top-k of each block
column (merged into a running y->x top-k across X blocks). Memory is bounded by one block
(block_rows * block_cols float32) and one y->x state (m * k) per worker plus the (n + m) * k
results, whatever the corpus sizes; the full N x M matrix never exists.

numpy's matmul (float32 BLAS, into a reused buffer) does the product; torch.mm measured the same
here. A dense top-k over each block costs far too much next to the product (measured: torch.topk
along rows ~35% of the product's time, along columns ~150%; torch's elementwise compare and
nonzero were 3-10x slower than numpy's). So top-k is taken by THRESHOLD: an entry can only belong to a
row's (column's) final top-k if it is >= that row's (column's) current k-th best, which only rises;
the block's row maxima and column maxima (two cheap reductions) say which rows/columns can hold
a candidate at all, only those are compared, and only the entries found are merged (a sort of a
few thousand values). The thresholds start from the k-th best against a small evenly spaced sample
of the other side (1024 rows, ~1% of the product at 100k; lowered by 1e-4 to absorb float rounding
between differently shaped products), so even the first block yields few candidates. The result is
exact. Inputs may be float16 or memory-mapped: blocks are converted to float32 one at a time.

Parallelism: row blocks are independent, so `workers` threads each take whole row blocks, with
BLAS limited to one thread and a y->x state of their own (merged at checkpoints and at the end).
One multi-threaded product per block leaves all but one core idle during the single-threaded
numpy passes that follow it (~40% of the product's time); with a worker per core the passes of
one block run while the other worker multiplies. benchmarks/mining_speed.py at 100k x 100k on 2
cores, two runs half an hour apart: one worker with 2-thread BLAS took 1.62x one plain product
(91 s against 56 s), two workers 1.28x (68 s against 53 s). Uses `threadpoolctl` to limit BLAS;
without it, one worker with BLAS's own threads.

Checkpointing: with `checkpoint_dir`, the finished x->y rows and the running y->x state are saved
atomically every `checkpoint_seconds`; a later call with the same `checkpoint_key` resumes after the
last saved X block (an interrupted mining run then loses at most that much work).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from xmine.artefacts import atomic_path, atomic_write_json

# A 1024 x 4096 float32 block (16 MB) stays in the 32-MB L3 cache between the product and the
# row/column passes that follow it; numpy runs those passes on one core, so re-reading a 268-MB
# block (4096 x 16384) from memory cost as much as the product itself. Measured at 40k x 40k:
# 1.9x the time of one plain product with these blocks, 3.0x with 4096 x 16384. (Other shapes
# of 2-8M entries measured within noise of this one.) With two workers, their two blocks together
# fill that cache; smaller blocks per worker were still slower (16k x 100k, 2 workers: 13.2 s with
# 1024 x 4096, 13.7 s with 512 x 4096, 14.4 s with 1024 x 2048).
DEFAULT_BLOCK_ROWS = 1024
DEFAULT_BLOCK_COLS = 4096


def _as_f32(a, start: int, stop: int) -> np.ndarray:
    block = np.asarray(a[start:stop])
    return np.ascontiguousarray(block, dtype=np.float32)


def _merge_sparse(run_s: np.ndarray, run_i: np.ndarray, rows, vals, cols) -> None:
    """Merge candidates (rows, vals, cols) into the sorted top-k lists run_s/run_i (r, k), in place.

    Only rows with candidates are touched; among equal values the earlier entry wins.
    """
    if len(rows) == 0:
        return
    k = run_s.shape[1]
    aff = np.unique(rows)
    local = np.searchsorted(aff, rows)
    all_r = np.concatenate((np.repeat(np.arange(len(aff)), k), local))
    all_v = np.concatenate((run_s[aff].ravel(), vals))
    all_c = np.concatenate((run_i[aff].ravel(), cols))
    order = np.lexsort((-all_v, all_r))  # by row, then value descending; stable
    sr = all_r[order]
    counts = np.bincount(sr, minlength=len(aff))
    starts = np.cumsum(counts) - counts
    keep = order[(np.arange(len(order)) - starts[sr]) < k]
    run_s[aff] = all_v[keep].reshape(len(aff), k)
    run_i[aff] = all_c[keep].reshape(len(aff), k)


def _candidates(s: np.ndarray, thr: np.ndarray, axis: int):
    """(rows, cols, values) of entries of s >= thr (thr per row if axis == 1, per column if axis == 0)."""
    best = s.max(axis=axis)
    hit = np.flatnonzero(best >= thr)
    if len(hit) == 0:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0, np.float32)
    # Many hits: one full comparison (rows/columns without a hit cannot pass it anyway) is cheaper
    # than gathering them (numpy's column gather in particular is slow).
    if len(hit) * 8 > s.shape[1 - axis]:
        flat = np.flatnonzero(s >= (thr[:, None] if axis == 1 else thr[None, :]))
        w = s.shape[1]
        return flat // w, flat % w, s.reshape(-1)[flat]
    if axis == 1:
        sub = s[hit]
        flat = np.flatnonzero(sub >= thr[hit, None])
        w = sub.shape[1]
        return hit[flat // w], flat % w, sub.reshape(-1)[flat]
    sub = np.take(s, hit, axis=1)
    flat = np.flatnonzero(sub >= thr[None, hit])
    w = sub.shape[1]
    return flat // w, hit[flat % w], sub.reshape(-1)[flat]


# Sample rows of the other side used to start the thresholds; float slack between products.
THRESHOLD_SAMPLE = 1024
_ROUNDING_SLACK = 1e-4


def _sample_kth(a_block: np.ndarray, b, k: int) -> np.ndarray:
    """A lower bound of each a_block row's k-th best similarity in b, from a sample of b.

    The sample (evenly spaced rows) is split into k groups; each group's maximum is a distinct
    entry, so the smallest of the k maxima is <= the k-th best overall. (-inf when b is too small.)
    """
    m = len(b)
    group = min(THRESHOLD_SAMPLE, m) // k
    if group < 2 or group * k >= m:  # no sample smaller than b itself: no floor
        return np.full(len(a_block), -np.inf, dtype=np.float32)
    take = np.linspace(0, m - 1, group * k).astype(np.int64)
    sims = a_block @ np.asarray(b[take], dtype=np.float32).T
    floor = sims.reshape(len(a_block), k, group).max(axis=2).min(axis=1)
    return (floor - _ROUNDING_SLACK).astype(np.float32)


# Memory for the workers' own y->x states: m * k * 12 bytes each. Fewer workers past this.
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
    return max(1, min(threads, WORKER_STATE_BUDGET_BYTES // max(1, m * k * 12)))


def _single_threaded_blas(workers: int):
    """BLAS limited to one thread while `workers` > 1 threads each run their own products."""
    if workers <= 1:
        return nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # still exact, only oversubscribed
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _merge_states(states: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One y->x top-k from several workers' (sims, idx), each (m, k) sorted: by similarity, highest
    first, then by lower index (what a single worker keeps among equal values)."""
    if len(states) == 1:
        return states[0][0].copy(), states[0][1].copy()
    k = states[0][0].shape[1]
    sims = np.concatenate([s for s, _ in states], axis=1)
    idx = np.concatenate([i for _, i in states], axis=1)
    order = np.lexsort((np.where(idx < 0, np.iinfo(np.int64).max, idx), -sims), axis=1)[:, :k]
    return np.take_along_axis(sims, order, 1), np.take_along_axis(idx, order, 1)


class _Worker:
    """One thread's y->x running state and product buffer."""

    def __init__(self, m: int, ky: int, buffer_size: int, state=None):
        if state is None:
            self.bwd_sims = np.full((m, ky), -np.inf, dtype=np.float32)
            self.bwd_idx = np.full((m, ky), -1, dtype=np.int64)
        else:
            self.bwd_sims, self.bwd_idx = state[0].copy(), state[1].copy()
        # Reused: a fresh 16-MB array per block costs page faults every time.
        self.buf = np.empty(buffer_size, dtype=np.float32)


class _Checkpoint:
    """Finished x->y row ranges (one .npz each) + the y->x running state, keyed by the inputs."""

    def __init__(self, directory: str | Path, key: str):
        self.dir = Path(directory)
        self.key = key
        key_file = self.dir / "key.json"
        if self.dir.exists():
            try:
                same = json.loads(key_file.read_text())["key"] == key
            except (OSError, ValueError, KeyError):
                same = False
            if not same:  # inputs or parameters changed: old partial results are useless
                shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        if not key_file.exists():
            atomic_write_json(key_file, {"key": key})

    def load(self):
        """(done_rows, fwd chunks [(start, sims, idx)], bwd_sims, bwd_idx) or None."""
        state_file = self.dir / "state.npz"
        if not state_file.exists():
            return None
        with np.load(state_file) as st:
            done = int(st["done_rows"])
            bwd_s, bwd_i = st["bwd_sims"], st["bwd_idx"]
        chunks = []
        for f in sorted(self.dir.glob("fwd_*.npz")):
            start, stop = (int(v) for v in f.stem.split("_")[1:3])
            if stop <= done:
                with np.load(f) as z:
                    chunks.append((start, z["sims"], z["idx"]))
        return done, chunks, bwd_s, bwd_i

    def clear(self) -> None:
        """Drop the saved partial results (keeps the key): the next run starts from row 0."""
        for f in list(self.dir.glob("fwd_*.npz")) + [self.dir / "state.npz"]:
            f.unlink(missing_ok=True)

    def save(self, start: int, stop: int, fwd_s, fwd_i, bwd_s, bwd_i) -> None:
        # x->y rows first, then the state that claims them: a crash between the two only loses them.
        if stop > start:
            with atomic_path(self.dir / f"fwd_{start:012d}_{stop:012d}.npz") as tmp:
                np.savez(tmp, sims=fwd_s, idx=fwd_i)
        with atomic_path(self.dir / "state.npz") as tmp:
            np.savez(tmp, done_rows=np.int64(stop), bwd_sims=bwd_s, bwd_idx=bwd_i)


def _load_valid_checkpoint(ckpt: "_Checkpoint", *, n: int, m: int, kx: int, ky: int):
    """`ckpt.load()` if it is whole and fits these inputs; else None (with a warning, and the
    checkpoint cleared), so a damaged checkpoint costs a recomputation, never a crash on every
    rerun or a result read from uninitialised memory.

    Checked: the files load; done_rows is within [0, n]; the x->y chunks cover rows [0, done_rows)
    exactly, without gaps or overlaps, each (rows, kx); the y->x state is (m, ky); every index is
    -1 or a valid row; similarities are finite or -inf (the value of a missing neighbour).
    """
    import logging
    import zipfile

    log = logging.getLogger("xmine.mining")
    try:
        loaded = ckpt.load()
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        why = f"unreadable ({type(e).__name__}: {e})"
    else:
        if loaded is None:
            return None
        why = _checkpoint_problem(loaded, n=n, m=m, kx=kx, ky=ky)
        if why is None:
            return loaded
    log.warning(f"{ckpt.dir}: damaged mining checkpoint ({why}); recomputing from the start")
    ckpt.clear()
    return None


def _checkpoint_problem(loaded, *, n: int, m: int, kx: int, ky: int) -> str | None:
    done, chunks, bwd_s, bwd_i = loaded
    if not 0 <= done <= n:
        return f"done_rows {done} outside 0..{n}"
    if bwd_s.shape != (m, ky) or bwd_i.shape != (m, ky):
        return f"y->x state {bwd_s.shape}/{bwd_i.shape}, expected ({m}, {ky})"
    if not _valid_topk(bwd_s, bwd_i, n):
        return "y->x state holds impossible values"
    pos = 0
    for start, sims, idx in sorted(chunks, key=lambda c: c[0]):
        if start != pos:
            return f"x->y rows {pos}..{start} missing" if start > pos else f"x->y rows from {start} overlap"
        if sims.shape != idx.shape or sims.ndim != 2 or sims.shape[1] != kx:
            return f"x->y chunk at row {start} has shape {sims.shape}/{idx.shape}, expected (rows, {kx})"
        if not _valid_topk(sims, idx, m):
            return f"x->y chunk at row {start} holds impossible values"
        pos += len(sims)
    if pos != done:
        return f"x->y rows {pos}..{done} missing"
    return None


def _valid_topk(sims: np.ndarray, idx: np.ndarray, n_other: int) -> bool:
    if not (np.issubdtype(idx.dtype, np.integer) and np.issubdtype(sims.dtype, np.floating)):
        return False
    ok_idx = bool(((idx >= -1) & (idx < n_other)).all())
    ok_sims = bool((np.isfinite(sims) | (sims == -np.inf)).all())
    return ok_idx and ok_sims


def exact_knn_both(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    block_cols: int = DEFAULT_BLOCK_COLS,
    workers: int | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_key: str = "",
    checkpoint_seconds: float = 60.0,
    show_progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact inner-product kNN x->y and y->x from one blocked product.

    Returns (fwd_sims (n, kx), fwd_idx (n, kx), bwd_sims (m, ky), bwd_idx (m, ky)) with
    kx = min(k, m), ky = min(k, n); each row sorted by similarity, highest first; sims float32,
    indices int64. Rows of x and y should be L2-normalised (then sims are cosines). `workers`
    threads share the row blocks (None: `default_workers`). The neighbours do not depend on it;
    similarities may differ in the last bit, as BLAS sums in another order with fewer threads.
    """
    from tqdm.auto import tqdm

    n, m = len(x), len(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x {x.shape} and y {y.shape} must be 2-D with the same dimension")
    if k < 1 or n == 0 or m == 0:
        raise ValueError(f"need k >= 1 and non-empty inputs (k={k}, n={n}, m={m})")
    if block_rows < 1 or block_cols < 1:
        raise ValueError("block sizes must be >= 1")
    kx, ky = min(k, m), min(k, n)
    n_blocks = -(-n // block_rows)
    workers = default_workers(m, ky) if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    workers = min(workers, n_blocks)

    fwd_sims = np.empty((n, kx), dtype=np.float32)
    fwd_idx = np.empty((n, kx), dtype=np.int64)

    ckpt = _Checkpoint(checkpoint_dir, checkpoint_key) if checkpoint_dir is not None else None
    done, resumed_state = 0, None
    if ckpt is not None:
        loaded = _load_valid_checkpoint(ckpt, n=n, m=m, kx=kx, ky=ky)
        if loaded is not None:
            done, chunks, bwd_s, bwd_i = loaded
            resumed_state = (bwd_s, bwd_i)
            for start, s_, i_ in chunks:
                fwd_sims[start : start + len(s_)] = s_
                fwd_idx[start : start + len(i_)] = i_
    unsaved_from, last_save = done, time.monotonic()

    y_in_memory = y.dtype == np.float32 and not isinstance(y, np.memmap) and isinstance(y, np.ndarray)
    y32 = np.ascontiguousarray(y) if y_in_memory else None

    # Column floors: each y's k-th best against a sample of x (a lower bound of its final k-th).
    col_floor = np.empty(m, dtype=np.float32)
    for j0 in range(0, m, block_cols):
        yb = y32[j0 : j0 + block_cols] if y32 is not None else _as_f32(y, j0, j0 + block_cols)
        col_floor[j0 : j0 + len(yb)] = _sample_kth(yb, x, ky)

    # The resumed y->x state goes to one worker only: merging duplicates would repeat entries.
    buffer_size = min(block_rows, n) * min(block_cols, m)
    pool = [_Worker(m, ky, buffer_size, resumed_state if w == 0 else None) for w in range(workers)]
    idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
    for w in pool:
        idle.put(w)

    def row_block(i0: int) -> tuple[np.ndarray, np.ndarray]:
        """x rows i0.. against all of y: their top-k, and the y->x state of one idle worker updated."""
        w = idle.get()  # never waits: at most `workers` blocks run at once
        try:
            i1 = min(i0 + block_rows, n)
            xb = _as_f32(x, i0, i1)
            run_s = np.full((i1 - i0, kx), -np.inf, dtype=np.float32)
            run_i = np.full((i1 - i0, kx), -1, dtype=np.int64)
            row_floor = _sample_kth(xb, y, kx)
            for j0 in range(0, m, block_cols):
                j1 = min(j0 + block_cols, m)
                yb = y32[j0:j1] if y32 is not None else _as_f32(y, j0, j1)
                s = w.buf[: (i1 - i0) * (j1 - j0)].reshape(i1 - i0, j1 - j0)
                np.matmul(xb, yb.T, out=s)
                # x -> y: entries reaching their row's current k-th best (or the sample floor).
                r, c, v = _candidates(s, np.maximum(run_s[:, -1], row_floor), axis=1)
                _merge_sparse(run_s, run_i, r, v, c + j0)
                # y -> x: the same for columns, merged into this worker's state of these columns.
                cs, ci = w.bwd_sims[j0:j1], w.bwd_idx[j0:j1]
                r, c, v = _candidates(s, np.maximum(cs[:, -1], col_floor[j0:j1]), axis=0)
                _merge_sparse(cs, ci, c, v, r + i0)
            return run_s, run_i
        finally:
            idle.put(w)

    bar = tqdm(total=n, initial=done, desc="kNN (both directions)", unit="rows",
               disable=not show_progress, leave=False)
    with _single_threaded_blas(workers), ThreadPoolExecutor(workers, thread_name_prefix="xmine-knn") as ex:
        # Rounds of `workers` row blocks: a checkpoint needs every block before it finished.
        for r0 in range(done, n, block_rows * workers):
            starts = range(r0, min(r0 + block_rows * workers, n), block_rows)
            for i0, (run_s, run_i) in zip(starts, ex.map(row_block, starts)):
                fwd_sims[i0 : i0 + len(run_s)] = run_s
                fwd_idx[i0 : i0 + len(run_i)] = run_i
                bar.update(len(run_s))
            i1 = min(starts[-1] + block_rows, n)
            if ckpt is not None and (time.monotonic() - last_save >= checkpoint_seconds or i1 == n):
                bwd_sims, bwd_idx = _merge_states([(w.bwd_sims, w.bwd_idx) for w in pool])
                ckpt.save(unsaved_from, i1, fwd_sims[unsaved_from:i1], fwd_idx[unsaved_from:i1], bwd_sims, bwd_idx)
                unsaved_from, last_save = i1, time.monotonic()
    bar.close()
    bwd_sims, bwd_idx = _merge_states([(w.bwd_sims, w.bwd_idx) for w in pool])
    return fwd_sims, fwd_idx, bwd_sims, bwd_idx
