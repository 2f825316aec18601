"""A projection's own default mining threshold, calibrated on data that no benchmark scores.

Margin scores in a projection's meaning space are distributed differently from raw ones: the
ratio margin sits lower (the F1-best thresholds of the shipped projection on `bench mining` are
1.018-1.039 per language, raw's 1.024-1.056; for a 1,500 / 400 projection 1.010-1.021). A threshold tuned for raw embeddings (the ratio
margin 1.04 of WikiMatrix, `mining.DEFAULT_THRESHOLD`) is therefore the wrong one for a projection. `xmine mine` uses a projection's calibrated threshold when no
`--threshold` is given (`xmine.projection.calibrated_threshold`); raw embeddings keep their own
default (every pair; users pass 1.04).

Calibration sets (`CALIBRATION_SETS`) are BUCC-style sets built exactly as `bench mining`'s
(`mining.compose_set`: 5% of each side has a translation, the distractors are real sentences of
the same language and domain) from data disjoint from every evaluation set and from the shipped
recipe's training data:
- news: WMT newstest 2017 cs, ru, fi, tr, lv with English (`bench mining` reads newstest
  2019-2021 and FLORES-200 devtest; the recipe trains on the news of de, zh, et, ro only);
- Wikipedia: FLORES v1 *dev* km-en and ps-en (`bench mining`'s km is FLORES-200 devtest and
  newstest 2020; the recipe's FLORES v1 sets are ne and si).
Pairs repeating a sentence of those evaluation sets are dropped. At most `MAX_PAIRS` (2,500) pairs
per set, about the size of a `bench mining` set (~1,300 sentences a side), because margin scores
depend on how crowded the neighbourhoods are.

The threshold, per margin (ratio, distance, absolute): the one that maximises the F1 averaged over
the seven sets, one threshold for all languages (as a user mines with one), scanned over every
candidate score with `bench bucc`'s mining code (k=4, max retrieval, `xmine mine`'s defaults),
then rounded to 3 decimals; the mean F1 reported is the one at the rounded value. One threshold
for every language is the limit: the per-language optima differ by more than the F1 curves'
width in the meaning space (benchmarks/results/notes/mining.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

#: lang -> ("news", newstest folder) or ("wikipedia", FLORES v1 dev pair); see the module doc.
CALIBRATION_SETS: dict[str, tuple[str, str]] = {
    "cs": ("news", "2017/cs-en"),
    "ru": ("news", "2017/ru-en"),
    "fi": ("news", "2017/fi-en"),
    "tr": ("news", "2017/tr-en"),
    "lv": ("news", "2017/lv-en"),
    "km": ("wikipedia", "km-en"),
    "ps": ("wikipedia", "ps-en"),
}
MAX_PAIRS = 2500
MARGINS = ("ratio", "distance", "absolute")


def build_calibration_set(data: Path, lang: str, *, seed: int = 0, max_pairs: int = MAX_PAIRS):
    """One calibration set in memory (a `mining.MiningSet`)."""
    from xmine.benchmarks import mining
    from xmine.errors import InputError

    domain, where = CALIBRATION_SETS[lang]
    if domain == "news":
        pairs, files = mining._news_pairs(data / "parallel" / "wmt-newstest", lang, (where,))
    else:
        base = data / "parallel" / "flores-v1" / "flores_test_sets"
        fx, fe = base / f"wikipedia.dev.{where}.{lang}", base / f"wikipedia.dev.{where}.en"
        a, b = mining._read(fx), mining._read(fe)
        if len(a) != len(b):
            raise InputError(fx, f"{len(a)} lines, but {fe.name} has {len(b)}: not line-aligned")
        pairs, files = list(dict.fromkeys((s.strip(), t.strip()) for s, t in zip(a, b) if s.strip() and t.strip())), [fx, fe]
    held_out = evaluation_sentences(data)
    pairs = [p for p in pairs if p[0] not in held_out and p[1] not in held_out]
    if len(pairs) > max_pairs:
        keep = mining._rng(seed, lang, "calibration-sample").permutation(len(pairs))[:max_pairs]
        pairs = [pairs[i] for i in sorted(keep)]
    return mining.compose_set(lang, ((domain, pairs),), files=files, seed=seed)


_EVALUATION_CACHE: dict[Path, frozenset[str]] = {}


def evaluation_sentences(data: Path) -> frozenset[str]:
    """Every sentence the benchmarks score mining on (FLORES-200 devtest, newstest of the held-out
    years): a calibration pair repeating one is dropped (FLORES v1 km dev shares a sentence with them)."""
    from xmine.benchmarks import mining
    from xmine.benchmarks.quality import HELDOUT_NEWSTEST_YEARS

    if data not in _EVALUATION_CACHE:
        parallel = data / "parallel"
        files = sorted((parallel / "flores200" / "devtest").glob("*.devtest"))
        files += sorted(f for y in HELDOUT_NEWSTEST_YEARS for f in (parallel / "wmt-newstest" / y).glob("*/*") if f.is_file())
        _EVALUATION_CACHE[data] = frozenset(line.strip() for f in files for line in mining._read(f))
    return _EVALUATION_CACHE[data]


def best_common_threshold(runs: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> tuple[float, float]:
    """The threshold t maximising the mean over runs of F1 when keeping scores >= t; (t, mean F1).

    `runs`: (scores, correct, number of gold pairs) of each set's candidates.
    """
    candidates = np.unique(np.concatenate([np.asarray(s, np.float64) for s, _, _ in runs]))
    mean_f1 = np.mean([f1_at(s, c, g, candidates) for s, c, g in runs], axis=0)
    i = int(np.argmax(mean_f1))
    return float(candidates[i]), float(mean_f1[i])


def f1_at(scores, correct, n_gold: int, thresholds: np.ndarray) -> np.ndarray:
    """F1 of keeping the candidates scoring >= each threshold."""
    order = np.argsort(scores, kind="stable")
    s = np.asarray(scores, np.float64)[order]
    c = np.asarray(correct, bool)[order]
    below = np.searchsorted(s, thresholds, side="left")  # candidates dropped
    kept = len(s) - below
    correct_below = np.concatenate([[0], np.cumsum(c)])[below]
    tp = c.sum() - correct_below
    prec = np.where(kept > 0, tp / np.maximum(kept, 1), 0.0)
    rec = tp / max(n_gold, 1)
    return np.where(prec + rec > 0, 2 * prec * rec / np.maximum(prec + rec, 1e-12), 0.0)


def candidate_runs(embed, sets: dict[str, Any], *, margin: str, k: int = 4, retrieval: str = "max") -> dict[str, tuple]:
    """Per set: (scores, correct, gold count) of every mined candidate, with `bench bucc`'s code."""
    from xmine.benchmarks.bucc import mine_candidates

    runs = {}
    for lg, ms in sets.items():
        gold = set(ms.gold)
        cands, scores = mine_candidates(ms.src, ms.en, embed, k=k, margin=margin, retrieval=retrieval)
        runs[lg] = (np.asarray(scores, np.float64), np.array([c in gold for c in cands], bool), len(gold))
    return runs


def calibrate(embed_fns: dict[str, Any], data: Path, *, langs: Sequence[str] | None = None, k: int = 4,
              retrieval: str = "max", margins: Sequence[str] = MARGINS, seed: int = 0,
              keep_runs: bool = False) -> dict[str, Any]:
    """Each embedding's calibrated threshold per margin, with per-set F1 at it (module doc).

    `embed_fns`: name -> `embed(sentences)` (e.g. {"projection": ..., "raw": ...}).
    """
    from xmine.artefacts import file_fingerprint

    langs = list(langs or CALIBRATION_SETS)
    sets = {lg: build_calibration_set(data, lg, seed=seed) for lg in langs}
    out: dict[str, Any] = {"sets": {lg: ms.counts for lg, ms in sets.items()},
                           "files": [file_fingerprint(p) for p in sorted({p for ms in sets.values() for p in ms.files})],
                           "k": k, "retrieval": retrieval, "seed": seed, "thresholds": {}, "runs": {}}
    for name, embed in embed_fns.items():
        per_margin = {}
        for margin in margins:
            runs = candidate_runs(embed, sets, margin=margin, k=k, retrieval=retrieval)
            if keep_runs:
                out["runs"][(name, margin)] = runs
            t, _ = best_common_threshold(list(runs.values()))
            t = round(t, 3)
            per_lang = {lg: float(f1_at(s, c, g, np.array([t]))[0]) for lg, (s, c, g) in runs.items()}
            per_margin[margin] = {"threshold": t, "mean_f1": float(np.mean(list(per_lang.values()))),
                                  "per_lang_f1": per_lang}
        out["thresholds"][name] = per_margin
    if not keep_runs:
        out.pop("runs")
    return out


__all__ = ["CALIBRATION_SETS", "best_common_threshold", "build_calibration_set", "calibrate", "candidate_runs", "f1_at"]
