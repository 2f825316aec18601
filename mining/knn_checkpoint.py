"""The exact kNN's checkpoint folder: finished x->y row ranges (one .npz each) and the y->x running
state, keyed by the inputs (`xmine.checkpoints.KeyedDir`); a damaged checkpoint is detected on
load and costs a recomputation, never a crash or a wrong result."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xmine.checkpoints import KeyedDir
from xmine.fileio import atomic_path


class KnnCheckpoint(KeyedDir):
    """Finished x->y row ranges (one .npz each) + the y->x running state, keyed by the inputs
    (`clear` drops them and keeps the key: the next run starts from row 0)."""

    def __init__(self, directory: str | Path, key: str):
        super().__init__(directory, key, owned=("fwd_*.npz", "state.npz"))

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

    def save(self, start: int, stop: int, fwd_s, fwd_i, bwd_s, bwd_i) -> None:
        # x->y rows first, then the state that claims them: a crash between the two only loses them.
        if stop > start:
            with atomic_path(self.dir / f"fwd_{start:012d}_{stop:012d}.npz") as tmp:
                np.savez(tmp, sims=fwd_s, idx=fwd_i)
        with atomic_path(self.dir / "state.npz") as tmp:
            np.savez(tmp, done_rows=np.int64(stop), bwd_sims=bwd_s, bwd_idx=bwd_i)


def load_valid_checkpoint(ckpt: "KnnCheckpoint", *, n: int, m: int, kx: int, ky: int):
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
