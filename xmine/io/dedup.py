"""Exact deduplication: of sentences after white-space normalisation (`dedup`), and of items by
64-bit keys, collisions checked (`first_occurrences`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def normalise_whitespace(sentence: str) -> str:
    """The sentence with surrounding white space removed and inner runs collapsed to one space."""
    return " ".join(sentence.split())


def dedup(
    sentences: Sequence[str], *, return_first: bool = False
) -> tuple[list[str], np.ndarray] | tuple[list[str], np.ndarray, np.ndarray]:
    """Exact deduplication after white-space normalisation, keeping first occurrences.

    Returns `(unique, inverse)`: `unique` holds the original text of each sentence's first
    occurrence, in order of first occurrence; `inverse[i]` (int64) is the index in `unique` of
    `sentences[i]`, so `unique[inverse[i]]` equals `sentences[i]` up to white space. With
    `return_first=True` also `first[j]`, the index in `sentences` of `unique[j]` (to map back to
    line numbers).
    """
    index: dict[str, int] = {}
    unique: list[str] = []
    first: list[int] = []
    inverse = np.empty(len(sentences), dtype=np.int64)
    for i, s in enumerate(sentences):
        key = normalise_whitespace(s)
        j = index.get(key)
        if j is None:
            j = index[key] = len(unique)
            unique.append(s)
            first.append(i)
        inverse[i] = j
    if return_first:
        return unique, inverse, np.asarray(first, dtype=np.int64)
    return unique, inverse


def first_occurrences(keys: np.ndarray, same) -> np.ndarray:
    """representative[i]: the first position whose 64-bit key equals keys[i] (i itself when first).

    `same(i, j)` is asked only for the positions that repeat an earlier key, and says whether the
    two really are the same (a hash collision keeps position i as its own representative, so no
    item is ever dropped by one). The dedup of `Side.unique_rows` and of the pre-search
    near-duplicates (mining/presearch.py). Memory: about 24 bytes a key while it runs."""
    n = len(keys)
    _, first_of_key, inverse = np.unique(keys, return_index=True, return_inverse=True)
    representative = first_of_key[inverse.reshape(-1)].astype(np.int64)
    for r in np.flatnonzero(representative != np.arange(n)).tolist():
        if not same(r, int(representative[r])):
            representative[r] = r  # a hash collision: an item of its own
    return representative
