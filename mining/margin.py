"""Margin scores (Artetxe & Schwenk 2019, "Margin-based Parallel Corpus Mining").

For a candidate pair (x, y) with cosine c, the neighbourhood mean is
    m = (mean of x's k nearest target cosines + mean of y's k nearest source cosines) / 2
and the scores are
    ratio    = c / m     (default; ~1.0 for an unremarkable pair, 1.04-1.06 a typical threshold)
    distance = c - m     (~0.0 for an unremarkable pair)
    absolute = c         (plain cosine, no margin: ignores hubness)

The ratio is defined only where m > 0. Where m <= 0 (both neighbourhoods are unrelated or
anti-correlated, seen with some projections' meaning parts) c / m would flip sign or explode and
rank nonsense first, so such candidates get the score -inf: they are never mined with `ratio`
(select_pairs counts and reports them; `distance` scores them). Exact and approximate mining
share this function, and both average exactly k neighbours (the k nearest allowed ones).
"""

from __future__ import annotations

import numpy as np

MARGINS = ("ratio", "distance", "absolute")


def margin_score(cos, mean_x, mean_y, kind: str = "ratio") -> np.ndarray:
    """Vectorised margin score; arguments broadcast against each other."""
    cos = np.asarray(cos, dtype=np.float32)
    if kind == "absolute":
        return cos.copy()
    m = (np.asarray(mean_x, dtype=np.float32) + np.asarray(mean_y, dtype=np.float32)) / 2
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(m > 0, cos / np.where(m > 0, m, 1), -np.inf).astype(np.float32)
    if kind == "distance":
        return cos - m
    raise ValueError(f"unknown margin {kind!r}; choose one of {', '.join(MARGINS)}")
