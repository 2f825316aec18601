"""Top-k lists: the one merge, and the one order every search path keeps.

A top-k list is a pair of (rows, k) arrays: similarities and the indices of the neighbours they
belong to, index -1 (similarity -inf) where a row has fewer than k neighbours. The exact product's
workers, its Ray tiles, the approximate path's exact rescoring and an index's shards all produce
such lists over parts of the data and merge them with `merge_topk`, so a pair ranks the same
whichever path found it: highest similarity first, then the lower index, missing entries last.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

_LAST = np.iinfo(np.int64).max


def merge_topk(sims: Sequence[np.ndarray], idx: Sequence[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best k of several top-k lists (or of one wider list), row by row, in the canonical
    order; padded with (-inf, -1) to k columns."""
    s = np.concatenate(sims, axis=1)
    i = np.concatenate(idx, axis=1).astype(np.int64, copy=False)
    missing = i < 0
    s = np.where(missing, -np.inf, s).astype(s.dtype, copy=False)
    order = np.lexsort((np.where(missing, _LAST, i), -s), axis=1)[:, :k]
    s, i = np.take_along_axis(s, order, 1), np.take_along_axis(i, order, 1)
    i = np.where(np.isfinite(s), i, -1)
    if s.shape[1] < k:
        pad = ((0, 0), (0, k - s.shape[1]))
        s, i = np.pad(s, pad, constant_values=-np.inf), np.pad(i, pad, constant_values=-1)
    return s, i
