"""Exact deduplication of sentences after white-space normalisation."""

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
