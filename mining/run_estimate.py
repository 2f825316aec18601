"""What a run's own candidate scores say without gold: how many translations they hold, and the
threshold of a space xmine ships no calibration for.

The candidates that are no translation (best of neighbours) are taken to follow a Gumbel law,
fitted to the lower quantiles of the scores (`null_fit`); the rest above it are counted as
translations (`estimate_true_pairs`, which the run-following rule of a calibrated space reads,
`threshold_rule.mutual_null_share`). A space without a calibration keeps the cut of the largest
estimated F1 under that law (`estimated_threshold`), unless the law fits every score and few of
the candidates are mutual best pairs (`mutual_low_share`): then only the tail of their law.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: the quantiles of the no-translation law the Gumbel is matched at (both in its bulk)
GUMBEL_LO, GUMBEL_HI = 0.05, 0.5
#: the no-translation law's quantile below which its share of the candidates is counted
NULL_SHARE_Q = 0.9
#: fewer candidates than this: no estimate (every candidate is taken for no translation)
MIN_CANDIDATES = 20


def _gumbel_q(p: float) -> float:
    return float(-np.log(-np.log(p)))


def gumbel_matched(asc: np.ndarray, pi0: float) -> tuple[float, float]:
    """(mu, beta) of the Gumbel law whose GUMBEL_LO and GUMBEL_HI quantiles are the quantiles pi0 *
    GUMBEL_LO and pi0 * GUMBEL_HI of the ascending scores `asc`."""
    qa, qb = np.quantile(asc, GUMBEL_LO * pi0), np.quantile(asc, GUMBEL_HI * pi0)
    beta = max((qb - qa) / (_gumbel_q(GUMBEL_HI) - _gumbel_q(GUMBEL_LO)), 1e-9)
    return float(qa - beta * _gumbel_q(GUMBEL_LO)), float(beta)


def null_fit(scores: np.ndarray, iterations: int = 20) -> tuple[float, float, float]:
    """(mu, beta, n_true): the Gumbel law (location mu, scale beta) of the candidates scoring
    `scores` that are no translation, and the estimated number of translations (no gold).

    The candidates that are no translation hold a share pi0 of them; their law is a Gumbel matched
    at its GUMBEL_LO and GUMBEL_HI quantiles, which are the observed quantiles pi0 * q when the
    translations lie above them; pi0 is the observed share below that law's NULL_SHARE_Q quantile
    over NULL_SHARE_Q, iterated from 1. Fewer than MIN_CANDIDATES scores: no fit (nan, nan, 0)."""
    n = len(scores)
    if n < MIN_CANDIDATES:
        return float("nan"), float("nan"), 0.0
    asc = np.sort(np.asarray(scores, dtype=np.float64))
    pi0 = 1.0
    for _ in range(iterations):
        mu, beta = gumbel_matched(asc, pi0)
        below = np.searchsorted(asc, mu + beta * _gumbel_q(NULL_SHARE_Q), side="right") / n
        new = float(np.clip(below / NULL_SHARE_Q, 0.05, 1.0))
        done = abs(new - pi0) < 1e-4
        pi0 = new
        if done:
            break
    return float(mu), float(beta), n * (1 - pi0)


def estimate_true_pairs(scores: np.ndarray) -> float:
    """The estimated number of translations among candidates scoring `scores` (`null_fit`)."""
    return null_fit(scores)[2]


def null_above(desc: np.ndarray, mu: float, beta: float, n_true: float) -> np.ndarray:
    """For each score of `desc` (candidates' scores, descending), how many of the candidates that are
    no translation score at or above it under `null_fit`'s Gumbel null (mu, beta) and estimate n_true."""
    return (len(desc) - n_true) * -np.expm1(-np.exp(-(desc - mu) / beta))


class ThresholdEstimate(NamedTuple):
    """A threshold estimated from a run's own scores (`estimated_threshold`)."""

    value: float  #: the cut
    translations: float  #: the estimated translations among the candidates
    translations_kept: float  #: the estimated translations among the candidates the cut keeps
    #: the estimated precision of the cut of the largest estimated F1 (before any tail cut)
    f1_cut_precision: float
    #: whether the fit found a share of translations (pi0 < 1); where it did not, the translations
    #: may be most of the candidates, and neither the cut nor the counts are to be trusted
    mixture_found: bool
    #: whether the candidates were taken to be mostly no translation (no share found, and too few
    #: mutual best pairs among the lower scores), so the cut is the tail of their law
    tail_cut: bool = False


#: where the fit finds no share of translations, the least share of mutual best pairs among the
#: candidates scoring below their median (`mutual_low_share`) for them to be taken for translations
#: (nearly all translations are mutual; among candidates that are none, fewer are): below it, the
#: candidates are taken to be mostly no translation. Chosen leave one family out on real text of
#: three families, with no, some, mostly and only translations, for fewest pairs wrong (`python
#: benchmarks/lab/run.py estimate-no-share`, benchmarks/results/notes/estimate_no_share.md): each
#: held-out family's choice lies in 0.63-0.68. The shares of the two kinds overlap (no translation 0.09-0.89,
#: 70% translations 0.39-0.92), so some runs of either kind are misread: said in the run's note.
MUTUAL_LOW_TRANSLATIONS = 0.66


def mutual_low_share(score: np.ndarray, mutual: np.ndarray) -> float | None:
    """The share of mutual best pairs (`mutual`, booleans) among the candidates scoring below their
    median (all of them where none does); None: no candidate."""
    if len(score) == 0:
        return None
    low = score < np.median(score)
    return float(np.mean(mutual[low] if low.any() else mutual))


def estimated_threshold(scores: np.ndarray, *, mutual_low: float | None = None) -> ThresholdEstimate | None:
    """The threshold of a space without a calibration, with the estimated translations: among the
    candidates scoring `scores`, the cut that keeps the largest estimated F1, the false pairs above
    a cut counted by `null_fit`'s null and the translations by its estimate. None: too few
    candidates to fit (MIN_CANDIDATES).

    The translations kept are the excess of the kept over the null's count above the cut. Where the
    fit's share of translations is below that excess (pi0 stops at 1 when the translations barely
    move the quantiles it is read from), the total is at least the kept: that is reported.

    Where the fit finds no share (the null law fits every score), the candidates are either nearly
    all translations (a bitext parallel already) or none (sides that hold no translation of each
    other), and the scores alone cannot tell which: the cut of the largest F1 then keeps most
    candidates either way (on real text without translations, 60-80% of them, all false).
    `mutual_low` (`mutual_low_share` of the candidates) tells them apart: below
    MUTUAL_LOW_TRANSLATIONS the candidates are taken to be mostly no translation, and the cut is raised
    to the tail of the Gumbel law matched to all of them, where one is expected above by chance: what
    stands out there is likely a translation (`tail_cut`). None: not told apart (the cut of the largest
    F1)."""
    mu, beta, n_true = null_fit(scores)
    if not np.isfinite(mu):
        return None
    desc = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    kept = np.arange(1, len(desc) + 1)
    true_kept = np.clip(kept - null_above(desc, mu, beta, n_true), 0, None)
    f1 = 2 * true_kept / (kept + max(n_true, 1.0))
    cut = int(np.argmax(f1))
    value, tail_cut = float(desc[cut]), False
    if n_true == 0 and mutual_low is not None and mutual_low < MUTUAL_LOW_TRANSLATIONS:
        value, tail_cut = max(value, null_tail(desc)), True
    return ThresholdEstimate(value=float(np.float32(value)), translations=max(n_true, float(true_kept[cut])),
                             translations_kept=float(true_kept[cut]),
                             f1_cut_precision=float(true_kept[cut] / kept[cut]), mixture_found=n_true > 0,
                             tail_cut=tail_cut)


def null_tail(scores: np.ndarray) -> float:
    """The quantile 1 - 1/n of the Gumbel law matched to all n `scores` (as `null_fit` matches it
    with pi0 = 1): where about one of them lies by chance."""
    mu, beta = gumbel_matched(np.sort(np.asarray(scores, dtype=np.float64)), 1.0)
    return float(mu - beta * np.log(-np.log1p(-1 / len(scores))))


__all__ = ["GUMBEL_HI", "GUMBEL_LO", "MIN_CANDIDATES", "MUTUAL_LOW_TRANSLATIONS", "NULL_SHARE_Q", "ThresholdEstimate",
           "estimate_true_pairs", "estimated_threshold", "gumbel_matched", "mutual_low_share", "null_above",
           "null_fit", "null_tail"]
