"""A default threshold that follows the run: the calibrated threshold moved by the run's own scores.

One threshold per space leaves corpora of near-duplicates far from their best F1 (issue #39): where
many sentences have near-duplicates on the other side (virtual-assistant utterances, boilerplate),
a translation's margin is small, and few of the candidates that are no translation are each
other's best in both directions. That share is read off the run itself, without gold, and the
threshold moves down with it, linearly (`rule_threshold`):

    t = intercept + slope * (min(max(share, floor), centre) - centre)

Only down: a share above the centre leaves the calibrated intercept. Moved up too, the rule did
better still on the calibration sets (held out), but corpora denser in translations than any of
them (the demo: 70% of the sentences have theirs) read as high shares and lost a tenth of their
translations (benchmarks/results/notes/threshold_rules.md).

`share` (`mutual_null_share`): among the candidates of max retrieval (each source's and each
target's best, one to one, before any threshold), the share found in both directions
(`select.BOTH`) once the estimated translations are taken out. Translations are mutual best pairs,
so the plain share rises with their number, which would raise the threshold of the corpora richest
in translations; their number is estimated by `estimate_true_pairs`: a Gumbel law (that of a best
of neighbours) fitted to the lower quantiles of the candidates' scores as the law of the
candidates that are no translation, the rest above it counted as translations.

`floor`: the lowest share of the calibration sets; the rule is not extrapolated below it (where
it would keep nearly every pair). The intercept, slope, centre and floor are calibrated per space with its other defaults
(`benchmarks/lab/threshold_rules.py`, held out by family) and recorded beside its single
thresholds as `threshold_rules` (`xmine.calibration.SpaceDefaults.rules`).
"""

from __future__ import annotations

import numpy as np

from xmine.mining.select import BOTH, MinedPairs

RULE_NAME = "mutual-null-share"
#: the quantiles of the no-translation law the Gumbel is matched at (both in its bulk)
GUMBEL_LO, GUMBEL_HI = 0.05, 0.5
#: the no-translation law's quantile below which its share of the candidates is counted
NULL_SHARE_Q = 0.9
#: fewer candidates than this: no estimate (every candidate is taken for no translation)
MIN_CANDIDATES = 20


def _gumbel_q(p: float) -> float:
    return float(-np.log(-np.log(p)))


def estimate_true_pairs(scores: np.ndarray, iterations: int = 20) -> float:
    """The estimated number of translations among candidates scoring `scores` (no gold).

    The candidates that are no translation hold a share pi0 of them; their law is a Gumbel matched
    at its GUMBEL_LO and GUMBEL_HI quantiles, which are the observed quantiles pi0 * q when the
    translations lie above them; pi0 is the observed share below that law's NULL_SHARE_Q quantile
    over NULL_SHARE_Q, iterated from 1."""
    n = len(scores)
    if n < MIN_CANDIDATES:
        return 0.0
    asc = np.sort(np.asarray(scores, dtype=np.float64))
    pi0 = 1.0
    for _ in range(iterations):
        qa, qb = np.quantile(asc, GUMBEL_LO * pi0), np.quantile(asc, GUMBEL_HI * pi0)
        beta = max((qb - qa) / (_gumbel_q(GUMBEL_HI) - _gumbel_q(GUMBEL_LO)), 1e-9)
        mu = qa - beta * _gumbel_q(GUMBEL_LO)
        below = np.searchsorted(asc, mu + beta * _gumbel_q(NULL_SHARE_Q), side="right") / n
        new = float(np.clip(below / NULL_SHARE_Q, 0.05, 1.0))
        done = abs(new - pi0) < 1e-4
        pi0 = new
        if done:
            break
    return n * (1 - pi0)


def mutual_null_share(mined: MinedPairs) -> float:
    """Among `mined` (max retrieval, no threshold), the share found in both directions once the
    estimated translations (all mutual) are taken out."""
    n = len(mined)
    if n == 0:
        return 0.0
    n_true = estimate_true_pairs(mined.score)
    mutual = float(np.count_nonzero(mined.direction == BOTH))
    return float(np.clip((mutual - n_true) / max(n - n_true, 1), 0, 1))


def rule_threshold(rule: dict, share: float) -> float:
    """The threshold `rule` ({"rule", "intercept", "slope", "centre", "floor"}) gives a run of share
    `share`: at most the intercept."""
    return float(rule["intercept"] + rule["slope"] * (min(max(share, rule["floor"]), rule["centre"]) - rule["centre"]))


def keep_at_least(mined: MinedPairs, threshold: float) -> MinedPairs:
    """The pairs of `mined` scoring >= threshold (it is sorted by score, highest first), compared in
    float32 as `select_pairs` compares."""
    n = int(np.count_nonzero(mined.score >= np.float32(threshold)))
    return MinedPairs(src_idx=mined.src_idx[:n], tgt_idx=mined.tgt_idx[:n], score=mined.score[:n],
                      direction=mined.direction[:n])


__all__ = ["RULE_NAME", "estimate_true_pairs", "keep_at_least", "mutual_null_share", "rule_threshold"]
