"""`threshold-rules`: would a threshold rule other than one number per space fit the data better?

    .venv/bin/python benchmarks/lab/run.py threshold-rules knn [--space S]   # kNN lists (embeddings cached)
    .venv/bin/python benchmarks/lab/run.py threshold-rules study             # -> benchmarks/results/threshold-rules.json
    .venv/bin/python benchmarks/lab/run.py threshold-rules install           # the winning rule into the records
    .venv/bin/python benchmarks/lab/run.py threshold-rules margins           # -> threshold-margins.json (ratio vs distance)
    .venv/bin/python benchmarks/lab/run.py threshold-rules install-margins   # the distance rules, caps, default margins
    .venv/bin/python benchmarks/lab/run.py threshold-rules uncalibrated-margins   # an unknown space's estimate per margin
    .venv/bin/python benchmarks/lab/run.py threshold-rules calibrate-margin  # -> threshold-calibrate-margin.json
    .venv/bin/python benchmarks/lab/run.py threshold-rules uncalibrated      # -> threshold-uncalibrated.json
    .venv/bin/python benchmarks/lab/run.py threshold-rules per-language|per-language-joint|per-language-distance  # printed
    .venv/bin/python benchmarks/lab/run.py threshold-rules length|size|size-smaller|cosine|density  # looks, printed
    .venv/bin/python benchmarks/lab/run.py threshold-rules decoys|decoy-term|oracle                 # looks, printed
    .venv/bin/python benchmarks/lab/run.py threshold-rules mixture-down     # a look, printed
    .venv/bin/python benchmarks/lab/run.py threshold-rules precision-point  # -> threshold-precision.json

Issue #39: with one calibrated threshold per space (`calibrate-defaults`), the held-out mean F1 gap
to each set's best is 6-8 points, the templated (MASSIVE) family costing 13-23. This study scores
other rules on the same 48 sets (`calibration_sets`), mined as `xmine mine` mines
(`select_pairs`, k = 4, ratio margin), held out the same way: every free parameter of a rule is
chosen on three families by `calibrate_defaults`' balanced criterion (smallest mean gap to each
set's best F1, each family weighing the same, at a mean precision >= 0.85 over the news/wiki/short
families among them) and each family is reported at the parameters chosen without it.

Rules (each a way to turn one run's candidates into a threshold):
- `single`: one threshold (max retrieval): the shipped rule, the baseline.
- `retrieval`: the retrieval mode (max, intersect, fwd, bwd) chosen jointly with its threshold.
- `bulk`: a threshold relative to the run's own score distribution, t = median + c * MAD of its
  candidates' scores (no gold): the candidates are mostly sentences without a translation, so
  median and MAD locate the null bulk; c is chosen.
- `bulk-bounded`: `bulk` clipped to [t1 - w, t1 + w] around the single calibrated t1 (the
  calibrated value as a prior), w chosen.
- `mixture`: an estimate of the number of true pairs from the run's scores (a Gumbel null, the law
  of a best-of-neighbours score, fitted to the lower part of the candidates' scores, whose upper
  tail is the translations), the threshold keeping the estimated-F1-best count, shifted by a
  chosen d (in MADs); its estimated precision of the kept pairs is reported against the truth.
- `mixture-bounded`: `mixture` clipped to [t1 - w, t1 + w].
- `mutual-linear`: t = a + b (t1 - 1) (m - centre) / 0.1, m the run's share of candidates that are
  each other's best in both directions (no gold; lower where many sentences have near-duplicates on
  the other side, as in templated corpora, whose translations' margins are lower too); a, b chosen,
  centre the median share of the training sets.
- `mutual-low-linear`: the same with the mutual share of the lower half of the candidates (mostly
  sentences without a translation: the null's structure, not the number of translations).
- `mutual-null-linear`: the same with the mutual share once the translations the mixture estimates
  are taken out (the product's `threshold_rule.mutual_null_share`); `mutual-null-down`: the share
  read as at most the centre (the threshold only lowered).
- `single-nested`, `mutual-null-down-nested`: the same rules, each choice at an in-sample precision
  floor that is itself chosen held out (`nested_floor`: the lowest of 0.85, 0.86, ... at which
  leaving each of the training families out in turn gives a mean precision >= 0.85 over the
  news/wiki/short ones among them). A choice made at exactly 0.85 in sample sits on the floor's
  edge and misses it held out (0.84-0.85 over news/wiki/short, issue #39);
  `mutual-null-down-nested` is the rule shipped (`install`).
Every linear rule reads the share as at least the lowest share of its training sets.
`margins` scores the shipped rule in the ratio and the distance margin, and with the margin chosen
with its parameters (each family held out, every gap to the set's best over both margins); a
space mines with the distance margin by default only where what ships in it beats what ships in
ratio held out (`default_margin`).
The gap is to each set's best F1 over every threshold with max retrieval (`calibrate_defaults`'
reference), so the single rule's numbers are those of calibration-defaults.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from calibrate_defaults import (KNN, PRECISION_FAMILIES, PRECISION_FLOOR, SPACE_LANGUAGES, SPACES, WORK, _sets,
                                _vectors, exact_knn)
from xmine.mining.calibrate import NEUTRAL, score_cap, threshold_sweep

RETRIEVALS = ("max", "intersect", "fwd", "bwd")
FAMILY_ORDER = ("news", "wiki", "short", "templated")
MARGIN = "ratio"


def knn_path(space: str) -> Path:
    return WORK / f"knn-{space}.npz"


def _cached(space: str, sets) -> list:
    """The sets whose sentences are all in the embedding cache of the space's encoder."""
    from calibrate_defaults import _encoder
    from xmine.io.corpus import truncate_for_encoding
    from xmine.encoders.embed_cache import EmbeddingCache, _key

    enc = _encoder(SPACES[space][0])
    cache = EmbeddingCache(enc.fingerprint())
    try:
        out = []
        for st in sets:
            keys = [_key(s) for s in truncate_for_encoding(st.xx + st.en)]
            have = {}
            for i in range(0, len(keys), 20_000):
                have.update(cache.lookup(keys[i:i + 20_000]))
            if len(have) == len(set(keys)):
                out.append(st)
        return out
    finally:
        cache.close()


@click.group("threshold-rules")
def command() -> None:
    """Threshold rules beside one number per space (retrieval mode, the run's own scores), held out by family."""


@command.command("knn")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: every space.")
@click.option("--partial", is_flag=True, help="Only the sets fully cached (a look while embedding runs).")
def knn_command(spaces, partial):
    """Exact kNN lists (k = 4, both directions) of every set in every space, and its gold."""
    from calibration_sets import fingerprint

    sets = _sets()
    WORK.mkdir(parents=True, exist_ok=True)
    for space in spaces or SPACES:
        t0 = time.monotonic()
        mine = _cached(space, sets) if partial else sets
        arrays = {"sets_sha256": np.array(fingerprint(sets)), "names": np.array([s.name for s in mine])}
        for st in mine:
            x, y = _vectors(space, st.xx), _vectors(space, st.en)
            fs, fi = exact_knn(x, y, KNN)
            bs, bi = exact_knn(y, x, KNN)
            arrays.update({f"{st.name}|fs": fs, f"{st.name}|fi": fi, f"{st.name}|bs": bs, f"{st.name}|bi": bi,
                           f"{st.name}|gold": st.gold})
        tmp = knn_path(space).with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(knn_path(space))
        click.echo(f"{space}: {len(mine)} of {len(sets)} sets in {time.monotonic() - t0:.0f} s")


# ---------------------------------------------------------------- one run's candidates
class Run:
    """One set mined in one retrieval mode (no threshold): scores best first, correct flags, sweep."""

    def __init__(self, score: np.ndarray, correct: np.ndarray, n_gold: int, mutual: np.ndarray | None = None):
        self.n_gold = n_gold
        if mutual is not None and len(score):
            # the mutual share of the lower half of the candidates (mostly sentences without a
            # translation: the null's own structure, not the number of translations)
            low = score < np.median(score)
            self.mutual_low = float(mutual[low].mean()) if low.any() else float(mutual.mean())
            self.mutual_all = float(np.mean(mutual))
        s, p, r, f1, cut = threshold_sweep(score.astype(np.float64), correct, n_gold)
        self.s, self.p, self.r, self.f1, self.cut = s, p, r, f1, cut
        self.best = float(f1[cut].max()) if len(s) else 0.0
        self.med = float(np.median(s)) if len(s) else 0.0
        self.mad = float(np.median(np.abs(s - self.med))) * 1.4826 if len(s) else 1.0

    def at(self, t: float) -> tuple[float, float, float, int]:
        """(precision, recall, F1, kept) keeping the candidates scoring >= t."""
        n = int(np.searchsorted(-self.s, -t, side="right"))  # s is descending
        if n == 0:
            return 1.0, 0.0, 0.0, 0
        return float(self.p[n - 1]), float(self.r[n - 1]), float(self.f1[n - 1]), n


def runs_of(space: str, sets_meta: list[dict], margin: str = MARGIN,
            retrievals: tuple[str, ...] = RETRIEVALS) -> dict[str, dict[str, Run]]:
    """Per set name and retrieval mode, its Run (candidates scored by `margin`)."""
    from xmine.mining.select import BOTH, MiningConfig, select_pairs

    arrays = np.load(knn_path(space))
    have = set(arrays["names"].tolist())
    out = {}
    for s in sets_meta:
        if s["name"] not in have:
            continue
        n = s["name"]
        fs, fi, bs, bi, gold = (arrays[f"{n}|{a}"] for a in ("fs", "fi", "bs", "bi", "gold"))
        gold_of = np.full(len(fs), -1)
        gold_of[gold[:, 0]] = gold[:, 1]
        out[n] = {}
        for r in retrievals:
            mined = select_pairs(fs, fi, bs, bi, config=MiningConfig(k=KNN, margin=margin, retrieval=r))
            out[n][r] = Run(mined.score, gold_of[mined.src_idx] == mined.tgt_idx, len(gold),
                            mutual=mined.direction == BOTH)
    return out


# ---------------------------------------------------------------- the no-gold estimate
GUMBEL_LO, GUMBEL_HI = 0.05, 0.5  # null quantiles the Gumbel is matched at (both in the null's bulk)
PI0_Q = 0.9  # the null quantile below which the share of the null is counted


def _gumbel_q(p):
    return -np.log(-np.log(p))


def mixture_estimate(s: np.ndarray, iters: int = 20) -> tuple[float, float, float]:
    """(mu, beta, n_true): a Gumbel null (location mu, scale beta) matched to the lower quantiles of
    the scores `s` (descending) and the number of true pairs it leaves above it. The null holds a
    share pi0 of the candidates; the observed quantile q is the null's q / pi0 when the true pairs
    all lie above it, so pi0 and the fit are iterated."""
    n = len(s)
    asc = s[::-1]
    pi0 = 1.0
    mu = beta = 0.0
    for _ in range(iters):
        qa, qb = np.quantile(asc, GUMBEL_LO * pi0), np.quantile(asc, GUMBEL_HI * pi0)
        beta = max((qb - qa) / (_gumbel_q(GUMBEL_HI) - _gumbel_q(GUMBEL_LO)), 1e-9)
        mu = qa - beta * _gumbel_q(GUMBEL_LO)
        # pi0: the observed count below the null's PI0_Q quantile is pi0 * n * PI0_Q (few trues lie there)
        q9 = mu + beta * _gumbel_q(PI0_Q)
        below = np.searchsorted(asc, q9, side="right") / n
        new = float(np.clip(below / PI0_Q, 0.05, 1.0))
        if abs(new - pi0) < 1e-4:
            pi0 = new
            break
        pi0 = new
    return mu, beta, n * (1 - pi0)


def estimated_precision(run: Run, t: float) -> float:
    """The mixture's estimate of the precision of the candidates scoring >= t (no gold)."""
    if len(run.s) < 20:
        return float("nan")
    mu, beta, n_true = mixture_estimate(run.s)
    kept = int(np.searchsorted(-run.s, -t, side="right"))
    if kept == 0:
        return float("nan")
    null_above = (len(run.s) - n_true) * (1 - np.exp(-np.exp(-(t - mu) / beta)))
    return float(np.clip(1 - null_above / kept, 0, 1))


def mixture_threshold(run: Run) -> tuple[float, float, float]:
    """(threshold, estimated precision of the kept pairs, estimated true pairs): the cut of the
    largest estimated F1 under `mixture_estimate`'s null."""
    s = run.s
    if len(s) < 20:
        return (float(s[-1]) if len(s) else 0.0), float("nan"), float("nan")
    mu, beta, n_true = mixture_estimate(s)
    n0 = len(s) - n_true
    kept = np.arange(1, len(s) + 1)
    null_above = n0 * (1 - np.exp(-np.exp(-(s - mu) / beta)))
    tp = np.clip(kept - null_above, 0, None)
    f1 = 2 * tp / (kept + max(n_true, 1))
    i = int(np.argmax(f1))
    return float(s[i]), float(tp[i] / kept[i]), n_true


# ---------------------------------------------------------------- rules: parameters -> per-set thresholds
def _grid(runs, r="max", step=0.001):
    lo = min(float(x[r].s[-1]) for x in runs.values() if len(x[r].s))
    hi = max(float(x[r].s[0]) for x in runs.values() if len(x[r].s))
    return np.round(np.arange(np.floor(lo / step), np.ceil(hi / step) + 1) * step, 6)


def rule_single(runs, retrievals=("max",)):
    """Candidates: (params, {set: (retrieval, threshold)}) for one threshold (per retrieval)."""
    for r in retrievals:
        for t in _grid(runs, r):
            yield {"retrieval": r, "t": float(t)}, {n: (r, float(t)) for n in runs}


def rule_bulk(runs):
    for c in np.round(np.arange(-2, 40.01, 0.1), 2):
        yield {"c": float(c)}, {n: ("max", x["max"].med + c * x["max"].mad) for n, x in runs.items()}


def rule_bulk_bounded(runs, t1: float, c_values=None):
    for w in (0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05):
        for c in (c_values if c_values is not None else np.round(np.arange(0, 30.01, 0.25), 2)):
            yield {"c": float(c), "w": w}, {n: ("max", float(np.clip(x["max"].med + c * x["max"].mad, t1 - w, t1 + w)))
                                            for n, x in runs.items()}


def rule_mixture_bounded(runs, est, t1: float):
    for w in (0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05):
        for d in np.round(np.arange(-2, 3.01, 0.25), 2):
            yield {"d": float(d), "w": w}, {n: ("max", float(np.clip(est[n][0] + d * x["max"].mad, t1 - w, t1 + w)))
                                            for n, x in runs.items()}


def mutual_share(x: dict) -> float:
    """The share of the max-retrieval candidates that are mutual best pairs (no gold): lower where
    many sentences have near-duplicates on the other side (templated corpora), where the
    translations' margins are lower too."""
    return x["max"].mutual_all  # the candidates marked "both" (select.BOTH): found in both directions


def product_rule(params: dict, t1: float, name: str, margin: str = MARGIN) -> dict:
    """The study's linear parameters (a, b, centre; b in units of the distance of t1 from the
    margin's NEUTRAL score per 0.1 of share, t1 the single threshold they were searched around,
    recorded in `params` where known) as the product's rule: t = intercept + slope (min(max(share,
    floor), centre) - centre)."""
    t1 = params.get("t1", t1)
    slope = params["b"] * (t1 - NEUTRAL[margin]) / 0.1
    return {"rule": name, "intercept": round(params["a"], 5), "slope": round(slope, 5), "centre": params["centre"],
            "floor": params["floor"]}


def rule_feature_linear(runs, t1: float, feature, centre: float, floor: float, down_only: bool = False,
                        margin: str = MARGIN):
    """t = a + b (t1 - n) (f - centre) / 0.1, f the run's feature (a share, no gold, read as at least
    `floor`, the lowest share of the training sets, and at most 0.85), n the margin's NEUTRAL score
    (1 for ratio): a 0.1 lower share moves the threshold b times the calibrated threshold's distance
    to n; t1 the single threshold chosen on the same families, a searched around it. `down_only`: f
    read as at most the centre (never above a), computed as the product computes it
    (`threshold_rule.rule_threshold`)."""
    from xmine.mining.threshold_rule import rule_threshold

    centre, floor = round(centre, 4), round(floor, 4)
    shares = {n: feature(x) for n, x in runs.items()}
    for a in np.round(t1 + np.arange(-0.2, 0.2001, 0.01) * (t1 - NEUTRAL[margin]), 5):
        for b in np.round(np.arange(-0.5, 1.5001, 0.1), 2):
            params = {"a": float(a), "b": float(b), "centre": centre, "floor": floor, "t1": float(t1)}
            rule = product_rule(params, t1, "", margin)
            yield params, {n: ("max", rule_threshold(rule, shares[n]) if down_only else float(
                rule["intercept"] + rule["slope"] * (min(max(shares[n], floor), 0.85) - centre))) for n in runs}


def linear_rule(runs, family, fams, floor: float, feature, down_only: bool = False, margin: str = MARGIN):
    """`rule_feature_linear`'s candidates around the single threshold chosen on `fams` at `floor`,
    the feature's centre and floor those of the `fams` sets: the candidates `held_out` chooses among."""
    t1 = choose(rule_single(runs), runs, family, fams, floor)["t"]
    train = [feature(x) for n, x in runs.items() if family[n] in fams]
    return rule_feature_linear(runs, t1, feature, float(np.median(train)), float(min(train)), down_only, margin)


def mutual_null_share(x: dict) -> float:
    """The mutual share of the candidates the mixture does not count as translations: (mutual
    candidates - estimated true pairs) / (candidates - estimated true pairs), true pairs being
    mutual best pairs (no gold); as the product computes it (`threshold_rule.mutual_null_share`)."""
    from xmine.mining.run_estimate import estimate_true_pairs

    r = x["max"]
    n_true = estimate_true_pairs(r.s)
    return float(np.clip((r.mutual_all * len(r.s) - n_true) / max(len(r.s) - n_true, 1), 0, 1))


FEATURES = {"mutual": mutual_share, "mutual-low": lambda x: x["max"].mutual_low, "mutual-null": mutual_null_share}


def estimated_thresholds(runs) -> dict[str, tuple[str, float]]:
    """Per set, the default of a space without a calibration (`run_estimate.estimated_threshold`
    of its max-retrieval candidates, with their low-half mutual share as `xmine mine` gives it;
    where too few to estimate, every pair kept)."""
    from xmine.mining.run_estimate import estimated_threshold

    out = {}
    for n, x in runs.items():
        estimate = estimated_threshold(x["max"].s.astype(np.float32), mutual_low=getattr(x["max"], "mutual_low", None))
        out[n] = ("max", float(x["max"].s[-1]) if estimate is None else estimate[0])
    return out


def rule_mixture(runs, est):
    for d in np.round(np.arange(-3, 6.01, 0.1), 2):
        yield {"d": float(d)}, {n: ("max", est[n][0] + d * x["max"].mad) for n, x in runs.items()}


# ---------------------------------------------------------------- choosing and reporting
def evaluate(runs, family: dict, thresholds: dict) -> list[dict]:
    rows = []
    for n, (r, t) in thresholds.items():
        p, rec, f1, kept = runs[n][r].at(t)
        rows.append({"set": n, "family": family[n], "retrieval": r, "threshold": round(t, 5), "precision": p,
                     "recall": rec, "f1": f1, "kept": kept, "best_f1": runs[n]["max"].best,
                     "gap": runs[n]["max"].best - f1})
    return rows


def _fam_mean(rows, key, families):
    vals = [np.mean([r[key] for r in rows if r["family"] == f]) for f in families
            if any(r["family"] == f for r in rows)]
    return float(np.mean(vals)) if vals else float("nan")


def choose(candidates, runs, family, train_fams, floor: float = PRECISION_FLOOR):
    """The candidate (params, thresholds) of the smallest family-mean gap on `train_fams` among those of
    family-mean precision >= `floor` over its precision families (else the smallest gap)."""
    train = {n for n in runs if family[n] in train_fams}
    prec_fams = [f for f in train_fams if f in PRECISION_FAMILIES] or list(train_fams)
    best = best_any = None
    for params, th in candidates:
        rows = evaluate(runs, family, {n: th[n] for n in train})
        gap, prec = _fam_mean(rows, "gap", train_fams), _fam_mean(rows, "precision", prec_fams)
        if best_any is None or gap < best_any[0]:
            best_any = (gap, params)
        if prec >= floor and (best is None or gap < best[0]):
            best = (gap, params)
    return (best or best_any)[1]


def summarise(rows) -> dict:
    return {"sets": len(rows), "gap": 100 * float(np.mean([r["gap"] for r in rows])),
            "worst_gap": 100 * float(max(r["gap"] for r in rows)),
            "over_8": int(sum(r["gap"] > 0.08 for r in rows)),
            "precision": 100 * float(np.mean([r["precision"] for r in rows])),
            # the precision the floor and the target are over: the news, wiki and short
            # families (each weighing the same), not the templated one (its labels miss translations)
            "precision_families": (100 * _fam_mean(rows, "precision", PRECISION_FAMILIES)
                                   if any(r["family"] in PRECISION_FAMILIES for r in rows) else None),
            "recall": 100 * float(np.mean([r["recall"] for r in rows])),
            "f1": 100 * float(np.mean([r["f1"] for r in rows]))}


#: the in-sample precision floors `nested_floor` tries, lowest first
FLOOR_GRID = (0.85, 0.86, 0.87, 0.88, 0.89, 0.90, 0.91, 0.92)


def nested_floor(make, runs, family, fams, target: float = PRECISION_FLOOR, grid=FLOOR_GRID) -> float:
    """The lowest in-sample precision floor (`grid`) at which the choice, held out within `fams`
    (leave one of them out, chosen on the others at that floor), reaches a mean precision >=
    `target` over the precision families among `fams` (each weighing the same): a floor met
    in sample is missed held out (the choice sits at the floor's edge), so the margin it needs is
    itself chosen without the family reported. `make(train, floor)` gives the candidates."""
    for floor in grid:
        prec = []
        for g in fams:
            if g not in PRECISION_FAMILIES:
                continue
            train = [h for h in fams if h != g]
            params = choose(make(train, floor), runs, family, train, floor)
            th = _params_thresholds(make(train, floor), params)
            prec.append(np.mean([runs[n][th[n][0]].at(th[n][1])[0] for n in runs if family[n] == g]))
        if prec and np.mean(prec) >= target:
            return floor
    return grid[-1]


def held_out(make, runs, family, nested: bool = False, target: float = PRECISION_FLOOR, grid=FLOOR_GRID) -> dict:
    """Leave one family out: `make(train_runs)` gives the candidates (a fresh generator each call).
    `nested`: the precision floor of each choice is `nested_floor` on its training families
    (`make(train_runs, floor)`, the floors of `grid`, each held out against `target`), recorded in
    its parameters as `precision_floor`; else every choice is made at `target` in sample."""
    fams = [f for f in FAMILY_ORDER if f in set(family.values())]

    def fit(train):
        floor = nested_floor(make, runs, family, train, target, grid) if nested else target
        cands = (lambda: make(train, floor)) if nested else (lambda: make(train))
        params = choose(cands(), runs, family, train, floor)
        return (params | {"precision_floor": floor} if nested else params), dict(_params_thresholds(cands(), params))

    per, all_rows = {}, []
    for f in fams:
        params, th = fit([g for g in fams if g != f])
        rows = evaluate(runs, family, {n: th[n] for n in runs if family[n] == f})
        per[f] = {"params": params, **summarise(rows), "per_set": rows}
        all_rows += rows
    return {"held_out": per, "mean": summarise(all_rows), "params_all": fit(fams)[0]}


def _params_thresholds(candidates, params):
    for p, th in candidates:
        if p == params:
            return th
    raise KeyError(params)


def study_space(space: str, meta: list[dict]) -> dict:
    langs = SPACE_LANGUAGES.get(space)
    meta = [s for s in meta if langs is None or s["iso"] in langs]
    runs = runs_of(space, meta)
    family = {s["name"]: s["family"] for s in meta if s["name"] in runs}
    est = {n: mixture_threshold(x["max"]) for n, x in runs.items()}
    out = {"sets": len(runs), "rules": {}}
    out["rules"]["single"] = held_out(lambda fams: rule_single(runs), runs, family)
    out["rules"]["single-nested"] = held_out(lambda fams, floor: rule_single(runs), runs, family, nested=True)
    out["rules"]["retrieval"] = held_out(lambda fams: rule_single(runs, RETRIEVALS), runs, family)
    for r in RETRIEVALS[1:]:
        out["rules"][f"single-{r}"] = held_out(lambda fams, r=r: rule_single(runs, (r,)), runs, family)
    out["rules"]["bulk"] = held_out(lambda fams: rule_bulk(runs), runs, family)

    def bounded(fams):
        t1 = choose(rule_single(runs), runs, family, fams)["t"]
        return rule_bulk_bounded(runs, t1)

    out["rules"]["bulk-bounded"] = held_out(bounded, runs, family)
    out["rules"]["mixture"] = held_out(lambda fams: rule_mixture(runs, est), runs, family)

    def mixture_bounded(fams):
        t1 = choose(rule_single(runs), runs, family, fams)["t"]
        return rule_mixture_bounded(runs, est, t1)

    out["rules"]["mixture-bounded"] = held_out(mixture_bounded, runs, family)

    for name, feature in FEATURES.items():
        for down_only in ((False, True) if name == "mutual-null" else (False,)):
            def linear(fams, floor=PRECISION_FLOOR, feature=feature, down_only=down_only):
                return linear_rule(runs, family, fams, floor, feature, down_only)

            out["rules"][f"{name}-{'down' if down_only else 'linear'}"] = held_out(linear, runs, family)
            if name == "mutual-null" and down_only:
                # the same, at an in-sample precision floor chosen held out (`nested_floor`)
                out["rules"]["mutual-null-down-nested"] = held_out(linear, runs, family, nested=True)
        out[f"{name}_share"] = {n: round(feature(x), 4) for n, x in runs.items()}
    # the estimated precision at each held-out threshold of the rules, against the truth
    out["precision_estimates"] = {}
    for rule in ("single", "mixture", "mixture-bounded"):
        rows = [{"set": r["set"], "family": r["family"], "threshold": r["threshold"], "precision": r["precision"],
                 "estimated": estimated_precision(runs[r["set"]]["max"], r["threshold"])}
                for h in out["rules"][rule]["held_out"].values() for r in h["per_set"]]
        out["precision_estimates"][rule] = {
            "per_set": rows,
            "mean_abs_error": {f: float(np.nanmean([abs(r["estimated"] - r["precision"]) for r in rows
                                                    if r["family"] == f])) for f in FAMILY_ORDER
                               if any(r["family"] == f for r in rows)},
            "within_0.05": {f: float(np.nanmean([abs(r["estimated"] - r["precision"]) <= 0.05 for r in rows
                                                 if r["family"] == f])) for f in FAMILY_ORDER
                            if any(r["family"] == f for r in rows)}}
    # the estimate's own precision of the kept pairs (at d = 0: its own cut) against the truth
    rows = []
    for n, (t, p_est, n_true) in est.items():
        p, rec, f1, kept = runs[n]["max"].at(t)
        rows.append({"set": n, "family": family[n], "threshold": t, "estimated_precision": p_est,
                     "precision": p, "estimated_true": n_true, "true_kept": int(round(p * kept)),
                     "n_gold": runs[n]["max"].n_gold, "gap": runs[n]["max"].best - f1})
    out["mixture_estimate"] = {
        "per_set": rows,
        "abs_error_by_family": {f: float(np.mean([abs(r["estimated_precision"] - r["precision"]) for r in rows
                                                  if r["family"] == f])) for f in FAMILY_ORDER
                                if any(r["family"] == f for r in rows)},
        "within_0.05": {f: float(np.mean([abs(r["estimated_precision"] - r["precision"]) <= 0.05 for r in rows
                                          if r["family"] == f])) for f in FAMILY_ORDER
                        if any(r["family"] == f for r in rows)}}
    return out


def table(result) -> str:
    lines = [f"{'space':<14} {'rule':<17} " + " ".join(f"{f:>9}" for f in FAMILY_ORDER)
             + f" {'mean':>6} {'worst':>6} {'>8':>3} {'P':>5} {'P3':>5} {'R':>5}  params (all families)"]
    for space, r in result["spaces"].items():
        for rule, h in r["rules"].items():
            cells = [f"{h['held_out'][f]['gap']:9.1f}" if f in h["held_out"] else f"{'-':>9}" for f in FAMILY_ORDER]
            m = h["mean"]
            lines.append(f"{space:<14} {rule:<17} " + " ".join(cells) + f" {m['gap']:6.1f} {m['worst_gap']:6.1f} "
                         f"{m['over_8']:3d} {m['precision']:5.1f} {m['precision_families']:5.1f} {m['recall']:5.1f}  "
                         f"{h['params_all']}")
        for rule, e in r["precision_estimates"].items():
            lines.append(f"{space:<14} estimated precision at the {rule} thresholds: |est - true| "
                         + ", ".join(f"{f} {v:.3f}" for f, v in e["mean_abs_error"].items())
                         + "; share within 0.05: " + ", ".join(f"{f} {v:.2f}" for f, v in e["within_0.05"].items()))
    return "\n".join(lines)


@command.command("study")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
@click.option("--no-write", is_flag=True, help="Print the table only.")
def study_command(spaces, no_write):
    """Score every rule held out by family; write benchmarks/results/threshold-rules.json."""
    from calibration_sets import fingerprint

    started = time.monotonic()
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    sha = fingerprint(sets)
    result = {"command": "python benchmarks/lab/run.py threshold-rules study", "k": KNN, "margin": MARGIN,
              "precision_floor": PRECISION_FLOOR, "sets_sha256": sha, "spaces": {}}
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        arrays = np.load(knn_path(space))
        if str(arrays["sets_sha256"]) != sha:
            raise click.ClickException(f"{knn_path(space)}: made on other sets; run `knn` again")
        result["spaces"][space] = study_space(space, meta)
    click.echo(table(result))
    if not no_write:
        _write(result, "threshold-rules.json", "threshold_rules", started, table_rows(result), COLUMNS)


def _write(result: dict, name: str, task: str, started: float, rows: list, columns: list) -> None:
    """`result` as benchmarks/results/`name`, with the machine, data and encoders that made it."""
    from calibrate_defaults import DATA, _encoder, _projection
    from calibration_sets import source_files
    from xmine.benchmarks.common import RawEmbedder, Variant, results_dir, write_result

    out = results_dir() / name
    # the record's top-level encoder and variants are me5-small's; `encoders` names each space's own
    result["encoders"] = {space: _encoder(SPACES[space][0]).fingerprint() for space in result["spaces"]}
    enc = _encoder("me5-small")
    raw = RawEmbedder(enc)
    write_result(out, task=task, encoder=enc,
                 variants=[Variant("raw", "raw", raw), Variant("default", "meaning", raw, _projection(enc).fingerprint())],
                 data_files=source_files(DATA), parameters={"command": result["command"], "k": KNN,
                                                            "margin": result.get("margin", result.get("margins"))},
                 columns=columns, rows=rows, details=result, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")


COLUMNS = (["space", "rule"] + [f"{f} gap" for f in FAMILY_ORDER]
           + ["mean gap", "worst gap", "sets > 8", "P", "P news/wiki/short", "R", "parameters (all families)"])


def table_rows(result) -> list[list]:
    """Per space and rule: the held-out gap per family, mean, worst, sets > 8 below their best, mean
    precision and recall (x100), and the parameters chosen on every family."""
    rows = []
    for space, r in result["spaces"].items():
        for rule, h in r["rules"].items():
            m = h["mean"]
            rows.append([space, rule] + [round(h["held_out"][f]["gap"], 1) if f in h["held_out"] else None
                                         for f in FAMILY_ORDER]
                        + [round(m["gap"], 1), round(m["worst_gap"], 1), m["over_8"], round(m["precision"], 1),
                           round(m["precision_families"], 1),
                           round(m["recall"], 1), json.dumps(h["params_all"])])
    return rows



# ---------------------------------------------------------------- per-language offsets on the shipped rule
#: the shrinkages of a language's offset `per_language_command` reports (0: the shipped rule alone)
OFFSET_SHRINKS = (0.0, 0.5, 1.0)


def per_language_offsets(result: dict, runs, meta: list[dict]) -> dict:
    """Would a per-language offset on top of the shipped rule beat the rule alone? Each language's
    offset is read off its FLORES-only wiki set (its FLORES-200 calibration set, the one every
    language has): the threshold of that set's best F1 minus the rule's held-out threshold there.
    It is added (times a shrinkage) to the rule's held-out threshold of the same language's sets of
    the other families (news, short, templated), which no offset read. Nothing is chosen on those."""
    iso = {m["name"]: m["iso"] for m in meta}
    rows = [r for h in result["rules"][SHIPPED_RULE]["held_out"].values() for r in h["per_set"]]
    offsets = {}
    for r in rows:
        if r["family"] == "wiki" and not r["set"].endswith("-in-news"):
            run = runs[r["set"]]["max"]
            if len(run.s):
                best_t = float(run.s[int(np.argmax(run.f1))])
                offsets[iso[r["set"]]] = best_t - r["threshold"]
    out = {"offsets": {k: round(v, 5) for k, v in sorted(offsets.items())}, "shrinks": {}}
    report = [r for r in rows if r["family"] != "wiki" and iso[r["set"]] in offsets]
    for shrink in OFFSET_SHRINKS:
        got = []
        for r in report:
            t = r["threshold"] + shrink * offsets[iso[r["set"]]]
            got += evaluate(runs, {r["set"]: r["family"]}, {r["set"]: ("max", t)})
        out["shrinks"][str(shrink)] = {"families": {f: summarise([g for g in got if g["family"] == f])
                                                    for f in FAMILY_ORDER if any(g["family"] == f for g in got)},
                                       "mean": summarise(got), "per_set": got}
    return out


def held_out_thresholds(space: str, margin: str) -> dict[str, float]:
    """The shipped rule's threshold of each calibration set, chosen without the set's family
    (threshold-margins.json, the rule in `margin`)."""
    from xmine.benchmarks.common import read_result, results_dir

    study = read_result(results_dir() / "threshold-margins.json")["details"]["spaces"][space]
    held = study["margins"][margin]["rules"][SHIPPED_RULE]["held_out"]
    return {row["set"]: row["threshold"] for fam in held.values() for row in fam["per_set"]}


def default_margin_of(space: str) -> str:
    """The margin `xmine mine` scores the space with by default (threshold-margins.json's choice)."""
    from xmine.benchmarks.common import read_result, results_dir

    return read_result(results_dir() / "threshold-margins.json")["details"]["spaces"][space][
        "default_margin"]


def space_runs(space: str, meta: list[dict], margin: str = MARGIN, retrievals: tuple[str, ...] = RETRIEVALS):
    """(the sets of the space's languages, their Runs scored with `margin`, their families)."""
    langs = SPACE_LANGUAGES.get(space)
    smeta = [m for m in meta if langs is None or m["iso"] in langs]
    runs = runs_of(space, smeta, margin, retrievals)
    return smeta, runs, {m["name"]: m["family"] for m in smeta if m["name"] in runs}


@command.command("per-language")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def per_language_command(spaces):
    """Per-language offsets (each language's own FLORES set) on the shipped rule's held-out
    thresholds, scored on that language's sets of the other families; prints the table (a look:
    nothing is written, nothing shipped)."""
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    click.echo(f"{'space':<14} {'shrink':>6} {'sets':>4} " + " ".join(f"{f:>9}" for f in FAMILY_ORDER)
               + f" {'mean':>6} {'worst':>6} {'>8':>3} {'P':>5} {'R':>5}")
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        smeta, runs, family = space_runs(space, meta)
        result = {"rules": {}}
        t0 = time.monotonic()

        def linear(fams, floor=PRECISION_FLOOR):
            return linear_rule(runs, family, fams, floor, mutual_null_share, True)

        result["rules"][SHIPPED_RULE] = held_out(linear, runs, family, nested=True)
        pl = per_language_offsets(result, runs, smeta)
        for shrink, h in pl["shrinks"].items():
            m = h["mean"]
            cells = [f"{h['families'][f]['gap']:9.1f}" if f in h["families"] else f"{'-':>9}" for f in FAMILY_ORDER]
            click.echo(f"{space:<14} {shrink:>6} {m['sets']:4d} " + " ".join(cells)
                       + f" {m['gap']:6.1f} {m['worst_gap']:6.1f} {m['over_8']:3d} {m['precision']:5.1f} {m['recall']:5.1f}")
        click.echo(f"{space:<14} offsets {pl['offsets']} ({time.monotonic() - t0:.0f} s)")


def rule_plus_term(runs, family, shares, fams, floor, values, term):
    """Candidates of the shipped rule's form (a, b around the single threshold t1 chosen on `fams`
    at `floor`, the share's centre and floor from them) plus v * term(n, t1, fams) for v in
    `values`: an extra feature of the run chosen jointly with the rule."""
    from xmine.mining.threshold_rule import rule_threshold

    t1 = choose(rule_single(runs), runs, family, fams, floor)["t"]
    train = [shares[n] for n in runs if family[n] in fams]
    centre, low = round(float(np.median(train)), 4), round(float(min(train)), 4)
    x = {n: term(n, t1, fams) for n in runs}
    for a in np.round(t1 + np.arange(-0.2, 0.2001, 0.01) * (t1 - 1), 5):
        for b in np.round(np.arange(-0.5, 1.5001, 0.1), 2):
            rule = product_rule({"a": float(a), "b": float(b), "centre": centre, "floor": low, "t1": float(t1)}, t1, "")
            base = {n: rule_threshold(rule, shares[n]) for n in runs}
            for v in values:
                yield {"a": float(a), "b": float(b), "v": float(v)}, {n: ("max", base[n] + v * x[n]) for n in runs}


#: the shrinkages of the per-language offsets `per-language-joint` chooses among
JOINT_SHRINKS = (0.0, 0.25, 0.5, 0.75, 1.0)


@command.command("per-language-joint")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def per_language_joint_command(spaces):
    """Per-language offsets chosen with the rule under the precision floor: each language's offset
    is its FLORES set's best-F1 threshold less the median of the languages' (so the offsets leave
    the average where it is), and the rule's intercept and slope are chosen with the offsets'
    shrinkage (JOINT_SHRINKS) by the balanced criterion at the nested precision floor. The wiki
    family gives the offsets, so it is no training family: news, short and templated are each
    reported at the choice made on the other two, beside the rule alone chosen the same way
    (prints the table: a look, nothing written)."""

    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        t0 = time.monotonic()
        smeta, runs, family = space_runs(space, meta)
        iso = {m["name"]: m["iso"] for m in smeta}
        best_t = {iso[n]: float(x["max"].s[int(np.argmax(x["max"].f1))]) for n, x in runs.items()
                  if family[n] == "wiki" and not n.endswith("-in-news") and len(x["max"].s)}
        median = float(np.median(list(best_t.values())))
        offset = {lang: t - median for lang, t in best_t.items()}
        shares = {n: mutual_null_share(x) for n, x in runs.items()}
        report = [f for f in ("news", "short", "templated") if f in set(family.values())]

        def make(fams, floor=PRECISION_FLOOR, shrinks=JOINT_SHRINKS):
            return rule_plus_term(runs, family, shares, fams, floor, shrinks,
                                  lambda n, t1, fams: offset.get(iso[n], 0.0))

        for label, shrinks in (("rule alone", (0.0,)), ("rule + offsets", JOINT_SHRINKS)):
            rows, chosen = [], []
            for f in report:
                train = [g for g in report if g != f]
                cands = lambda fams, floor=PRECISION_FLOOR: make(fams, floor, shrinks)
                floor = nested_floor(cands, runs, family, train)
                params = choose(cands(train, floor), runs, family, train, floor)
                th = _params_thresholds(cands(train, floor), params)
                rows += evaluate(runs, family, {n: th[n] for n in runs if family[n] == f and iso[n] in offset})
                chosen.append(f"{f}: shrink {params['v']:g} at floor {floor:.2f}")
            m = summarise(rows)
            click.echo(f"{space:<14} {label:<15} {m['sets']:3d} sets: " + " ".join(
                f"{f} {summarise([r for r in rows if r['family'] == f])['gap']:.1f}" for f in report)
                + f" | mean {m['gap']:.1f} worst {m['worst_gap']:.1f} >8 {m['over_8']} P {m['precision']:.1f} "
                  f"(news/short {m['precision_families']:.1f}) R {m['recall']:.1f} [{'; '.join(chosen)}]")
        click.echo(f"{space:<14} offsets {dict(sorted((k, round(v, 4)) for k, v in offset.items()))} "
                   f"({time.monotonic() - t0:.0f} s)")


#: the slopes a term study chooses among, in units of (t1 - 1) per unit of the run's feature:
#: `length`'s (down only), and both signs for the features whose direction is not known beforehand
#: (`size`: larger runs of the me5-small spaces want a higher threshold, use-m3's a lower one;
#: `density`, `decoy-term`)
TERM_SLOPES = tuple(np.round(np.arange(0, 0.501, 0.05), 2))
SIGNED_SLOPES = tuple(np.round(np.arange(-0.5, 0.501, 0.05), 2))


def term_study(spaces, feature, down_only: bool, slopes, label: str) -> None:
    """The shipped rule plus a term in a feature of the run (no gold), its slope chosen with the
    rule's intercept and slope at the nested precision floor, each family held out, beside the rule
    alone chosen the same way. The feature is read within the training sets' range (at most their
    median with `down_only`) and centred at their median; prints the table (a look: nothing written).
    `feature`: set name -> value, or `feature(space, runs)` giving `f(set name, t1)` (a feature
    read at the single threshold)."""
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        t0 = time.monotonic()
        _, runs, family = space_runs(space, meta)
        shares = {n: mutual_null_share(x) for n, x in runs.items()}
        value = feature(space, runs) if callable(feature) else (lambda n, t1: feature[n])

        def term(n, t1, fams):
            train = [value(m, t1) for m in runs if family[m] in fams]
            centre = float(np.median(train))
            return (t1 - 1) * (min(max(value(n, t1), min(train)), centre if down_only else max(train)) - centre)

        def make(fams, floor=PRECISION_FLOOR, values=slopes):
            return rule_plus_term(runs, family, shares, fams, floor, values, term)

        for name, values in (("rule alone", (0.0,)), (f"rule + {label}", slopes)):
            res = held_out(lambda fams, floor=PRECISION_FLOOR, values=values: make(fams, floor, values), runs, family,
                           nested=True)
            m = res["mean"]
            click.echo(f"{space:<14} {name:<14} " + " ".join(f"{f} {h['gap']:.1f}" for f, h in res["held_out"].items())
                       + f" | mean {m['gap']:.1f} worst {m['worst_gap']:.1f} >8 {m['over_8']} P3 "
                         f"{m['precision_families']:.1f} P48 {m['precision']:.1f} R {m['recall']:.1f} ["
                       + "; ".join(f"{f}: c {h['params']['v']:g} at floor {h['params']['precision_floor']:.2f}"
                                   for f, h in res["held_out"].items()) + "]")
        click.echo(f"{space:<14} ({time.monotonic() - t0:.0f} s)")


@command.command("length")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def length_command(spaces):
    """The shipped rule with a down-only term in the run's sentence length: the log of the median
    length in characters of the shorter side (short sentences' translations have low margins)."""
    sets = _sets()
    log_len = {s.name: float(np.log(min(np.median([len(x) for x in s.xx]), np.median([len(x) for x in s.en]))))
               for s in sets}
    term_study(spaces, log_len, True, TERM_SLOPES, "length")


@command.command("size")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def size_command(spaces):
    """The shipped rule with a term in the run's size: log10 of the geometric mean of the two
    sides' sentence counts (a sentence without a translation has its best neighbour among more
    candidates in a larger run, and larger corpora hold a smaller share of translations)."""
    sets = _sets()
    term_study(spaces, {s.name: 0.5 * float(np.log10(len(s.xx) * len(s.en))) for s in sets}, False, SIGNED_SLOPES,
               "size")


@command.command("size-smaller")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def size_smaller_command(spaces):
    """The shipped rule with a term in log10 of the smaller side's sentence count: each sentence of
    the smaller side without a translation can add one false pair, so that side, not the sides'
    geometric mean (`size`), bounds the false pairs (a small language mined against a large English
    crawl has a small side)."""
    sets = _sets()
    term_study(spaces, {s.name: float(np.log10(min(len(s.xx), len(s.en)))) for s in sets}, False, SIGNED_SLOPES,
               "smaller side")


#: how many of a side's highest best-neighbour cosines `cosine` reads (every set holds >= 100 translations)
TOP_COSINES = 100


@command.command("cosine")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def cosine_command(spaces):
    """The shipped rule with a term in how close the run's closest pairs are: the median of the
    TOP_COSINES highest best-neighbour cosines of each side, averaged over the two (no gold; in a
    run with >= 100 translations these are mostly translations, so the value says how well the
    encoder brings this language and text together, where the margins divide that out)."""
    def feature(space, runs):
        arrays = np.load(knn_path(space))
        # in hundredths of a cosine: the sets span 0.04-0.07, so that SIGNED_SLOPES can move the threshold
        top = {n: 100 * float(np.mean([np.median(np.sort(arrays[f"{n}|{d}"][:, 0])[-TOP_COSINES:])
                                       for d in ("fs", "bs")])) for n in runs}
        return lambda n, t1: top[n]

    term_study(spaces, feature, False, SIGNED_SLOPES, "cosine")


# ---------------------------------------------------------------- a null from decoys: each sentence's second best
def _second_best_u(q: float) -> float:
    """u = exp(-z) at which the law of the second largest of a Gumbel sample, exp(-u) (1 + u), is q."""
    lo, hi = 1e-12, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.exp(-mid) * (1 + mid) > q else (lo, mid)
    return (lo + hi) / 2


def decoy_null_estimates(scores: np.ndarray, t: float, scale: float) -> dict:
    """Two estimates of the number of candidates of one direction scoring >= t that are no
    translation, from each sentence's own decoy, its second-best neighbour (no translation but
    where a sentence has two), `scores` (n, k) its neighbours' margins:
    - `gumbel`: the best no-translation margin is Gumbel; its law is read off the second bests,
      whose law (that of the second largest) is matched at their quartiles; the share of sentences
      without a translation is Storey's (p-values of the best margins above 0.5, over 0.5).
    - `spacing`: each sentence's best no-translation margin lies above its own second best by an
      exponential spacing of scale `scale` times the mean spacing of second and third bests (the
      top spacings of an exponential tail are exponential, the first twice the second's)."""
    m = np.sort(np.where(np.isfinite(scores), scores, -np.inf), axis=1)[:, ::-1]
    ok = np.isfinite(m[:, 2])
    m1, m2, m3 = m[ok, 0], m[ok, 1], m[ok, 2]
    ua, ub = _second_best_u(0.25), _second_best_u(0.75)
    sa, sb = np.quantile(m2, 0.25), np.quantile(m2, 0.75)
    beta = max((sb - sa) / (np.log(ua) - np.log(ub)), 1e-9)
    mu = sa + beta * np.log(ua)
    surv = lambda x: -np.expm1(-np.exp(-(np.asarray(x) - mu) / beta))
    pi0 = min(1.0, float(np.count_nonzero(surv(m1) > 0.5)) / (0.5 * len(m1)))
    spacing = max(scale * float(np.mean(m2 - m3)), 1e-9)
    return {"gumbel": pi0 * len(m1) * float(surv(t)),
            "spacing": float(np.minimum(1.0, np.exp(-(t - m2) / spacing)).sum())}


@command.command("decoys")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
@click.option("--scale", "scales", type=float, multiple=True, default=(1.0, 2.0), show_default=True,
              help="The spacing estimate's scale (2 is the exponential tail's).")
def decoys_command(spaces, scales):
    """The estimated precision of the kept pairs from a null of decoys (each sentence's second-best
    neighbour), at the shipped rule's held-out thresholds (threshold-rules.json), against the
    truth; prints the table (a look: nothing is written, nothing shipped)."""
    from xmine.benchmarks.common import read_result, results_dir
    from xmine.mining.select import MiningConfig, candidate_scores, select_pairs

    study = read_result(results_dir() / "threshold-rules.json")["details"]["spaces"]
    cfg = MiningConfig(k=KNN, margin=MARGIN, retrieval="max")
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        arrays = np.load(knn_path(space))
        rows = []
        for fam, h in study[space]["rules"][SHIPPED_RULE]["held_out"].items():
            for r in h["per_set"]:
                n, t = r["set"], r["threshold"]
                fs, fi, bs, bi, gold = (arrays[f"{n}|{a}"] for a in ("fs", "fi", "bs", "bi", "gold"))
                fwd, _, bwd, _ = candidate_scores(fs, fi, bs, bi, config=cfg, report=False)
                mined = select_pairs(fs, fi, bs, bi, config=cfg)
                gold_of = np.full(len(fs), -1)
                gold_of[gold[:, 0]] = gold[:, 1]
                kept = mined.score >= np.float32(t)
                if not kept.any():
                    continue
                row = {"family": fam, "truth": float((gold_of[mined.src_idx] == mined.tgt_idx)[kept].mean())}
                for scale in scales:
                    # the null candidates of max retrieval: each direction's, counted once (their mean)
                    e = [decoy_null_estimates(d, t, scale) for d in (fwd, bwd)]
                    for how in ("gumbel", "spacing"):
                        false = (e[0][how] + e[1][how]) / 2
                        row[(how, scale)] = 1 - min(float(kept.sum()), false) / float(kept.sum())
                rows.append(row)
        for key in [k for k in rows[0] if isinstance(k, tuple)]:
            if key[0] == "gumbel" and key[1] != scales[0]:
                continue  # the Gumbel estimate has no scale
            name = "gumbel" if key[0] == "gumbel" else f"spacing x{key[1]:g}"
            cells = []
            for fam in FAMILY_ORDER:
                err = np.array([r[key] - r["truth"] for r in rows if r["family"] == fam])
                if len(err):
                    cells.append(f"{fam} bias {err.mean():+.3f} |err| {np.abs(err).mean():.3f} "
                                 f"within 0.05 {np.mean(np.abs(err) <= 0.05):.2f}")
            click.echo(f"{space:<14} {name:<12} " + " | ".join(cells))


@command.command("density")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def density_command(spaces):
    """The shipped rule with a term in the run's estimated density of translations: log10 of the
    translations the product's mixture estimates (`run_estimate.estimate_true_pairs`) over the
    candidates. Dense runs (FLORES sets, 26% gold) want a lower threshold than the rule's, sparse
    large ones (1%) a higher one (`oracle`'s per-set look); prints the table (a look)."""
    from xmine.mining.run_estimate import estimate_true_pairs

    def feature(space, runs):
        density = {n: float(np.log10(max(estimate_true_pairs(x["max"].s), 1.0) / max(len(x["max"].s), 1)))
                   for n, x in runs.items()}
        return lambda n, t1: density[n]

    term_study(spaces, feature, False, SIGNED_SLOPES, "density")


@command.command("decoy-term")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def decoy_term_command(spaces):
    """The shipped rule with a term in the run's estimated precision at the single threshold t1
    (the decoys' spacing estimate at scale 1, `decoy_null_estimates`): not within 0.05 of the truth
    as a number, but perhaps in the right order, and a run whose kept pairs look precise can afford
    a lower threshold (prints the table: a look, nothing written)."""
    from functools import lru_cache

    from xmine.mining.select import MiningConfig, candidate_scores

    cfg = MiningConfig(k=KNN, margin=MARGIN, retrieval="max")

    def feature(space, runs):
        arrays = np.load(knn_path(space))
        both = {n: candidate_scores(*(arrays[f"{n}|{a}"] for a in ("fs", "fi", "bs", "bi")), config=cfg,
                                    report=False)[0::2] for n in runs}

        @lru_cache(maxsize=None)
        def estimated_precision_at(n, t1):
            kept = runs[n]["max"].at(t1)[3]
            if kept == 0:
                return 1.0
            false = np.mean([decoy_null_estimates(d, t1, 1.0)["spacing"] for d in both[n]])
            return 1 - min(float(kept), false) / kept

        return estimated_precision_at

    term_study(spaces, feature, False, SIGNED_SLOPES, "decoy P")


def mixture_precision_cut(scores: np.ndarray, precision: float) -> float:
    """The lowest of the candidates' `scores` (descending) at which the product's Gumbel null
    (`run_estimate.null_fit`) estimates the precision of the candidates kept at or above it to be
    at least `precision` (no gold); inf where it is nowhere (or too few candidates to fit)."""
    from xmine.mining.run_estimate import null_above, null_fit

    mu, beta, n_true = null_fit(scores)
    if not np.isfinite(mu):
        return float("inf")
    estimated = 1 - null_above(scores, mu, beta, n_true) / np.arange(1, len(scores) + 1)
    ok = np.flatnonzero(estimated >= precision)
    return float(scores[ok[-1]]) if len(ok) else float("inf")


#: `mixture-down`'s grid: the estimated precision the lowered threshold keeps, and how far below the
#: rule's threshold it may go (a share of that threshold's distance from the margin's neutral score)
MIXTURE_DOWN_PRECISIONS = (0.9, 0.93, 0.95, 0.97, 0.98, 0.99)
MIXTURE_DOWN_WIDTHS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


@command.command("mixture-down")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def mixture_down_command(spaces):
    """The shipped rule, lowered where the run's own scores say it may be: to the lowest threshold
    at which the mixture estimates the kept pairs' precision at p* (`mixture_precision_cut`), never
    more than w below the rule's threshold and never above it. The mixture is good on news and wiki
    and sees few translations on short and templated sets (threshold_rules.md), where this cut then
    lies high and the rule stands, so the move is down only. (p*, w) are chosen per fold on the
    training families at the fold's own nested floor, over the rule's held-out parameters of that
    fold (threshold-rules.json); printed beside the rule alone (a look: nothing written)."""
    from xmine.benchmarks.common import read_result, results_dir
    from xmine.mining.threshold_rule import rule_threshold

    study = read_result(results_dir() / "threshold-rules.json")["details"]["spaces"]
    meta = [dict(name=s.name, **s.counts) for s in _sets()]
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        _, runs, family = space_runs(space, meta)
        shares = {n: mutual_null_share(x) for n, x in runs.items()}
        cuts = {p: {n: mixture_precision_cut(x["max"].s, p) for n, x in runs.items()} for p in MIXTURE_DOWN_PRECISIONS}
        held = study[space]["rules"][SHIPPED_RULE]["held_out"]
        rule_rows, down_rows, chosen = [], [], []
        for f, h in held.items():
            rule = product_rule(h["params"], h["params"]["t1"], "")
            rt = {n: rule_threshold(rule, shares[n]) for n in runs}

            def candidates(rt=rt):
                for p in MIXTURE_DOWN_PRECISIONS:
                    for w in MIXTURE_DOWN_WIDTHS:
                        yield {"p": p, "w": w}, {n: ("max", min(t, max(t - w * (t - NEUTRAL[MARGIN]), cuts[p][n])))
                                                 for n, t in rt.items()}

            pick = choose(candidates(), runs, family, [g for g in held if g != f], h["params"]["precision_floor"])
            th = _params_thresholds(candidates(), pick)
            test = [n for n in runs if family[n] == f]
            rule_rows += evaluate(runs, family, {n: ("max", rt[n]) for n in test})
            down_rows += evaluate(runs, family, {n: th[n] for n in test})
            chosen.append(f"{f}: p* {pick['p']:g} w {pick['w']:g}")
        for label, rows in (("rule alone", rule_rows), ("rule + mixture-down", down_rows)):
            m = summarise(rows)
            click.echo(f"{space:<14} {label:<20} " + " ".join(
                f"{f} {summarise([r for r in rows if r['family'] == f])['gap']:.1f}" for f in held)
                + f" | mean {m['gap']:.2f} worst {m['worst_gap']:.1f} >8 {m['over_8']} P3 "
                  f"{m['precision_families']:.1f} R {m['recall']:.1f}")
        click.echo(f"{space:<14} chosen: " + "; ".join(chosen))


# ---------------------------------------------------------------- a space without a calibration
@command.command("uncalibrated")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
@click.option("--no-write", is_flag=True, help="Print the table only.")
def uncalibrated_command(spaces, no_write):
    """The default of a space without a calibration (`run_estimate.estimated_threshold`, the run's
    own estimate) on every set of every space taken as uncalibrated, beside keeping every pair;
    write benchmarks/results/threshold-uncalibrated.json.

    Nothing is chosen here (the estimate has no parameter fitted to these sets; its Gumbel quantiles
    are those of the shipped rule's translation count), so every set is reported, per family."""
    from calibration_sets import fingerprint

    started = time.monotonic()
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    sha = fingerprint(sets)
    result = {"command": "python benchmarks/lab/run.py threshold-rules uncalibrated", "k": KNN, "margin": MARGIN,
              "retrieval": "max", "sets_sha256": sha, "spaces": {}}
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        arrays = np.load(knn_path(space))
        if str(arrays["sets_sha256"]) != sha:
            raise click.ClickException(f"{knn_path(space)}: made on other sets; run `knn` again")
        langs = SPACE_LANGUAGES.get(space)  # the languages the space is calibrated on, as `study`
        runs = runs_of(space, [m for m in meta if langs is None or m["iso"] in langs])
        family = {m["name"]: m["family"] for m in meta}
        per_rule = {}
        kept = {"every pair kept": {n: ("max", float(x["max"].s[-1])) for n, x in runs.items()},
                "estimated from the run": estimated_thresholds(runs)}
        for rule, thresholds in kept.items():
            rows = evaluate(runs, family, thresholds)
            per_rule[rule] = {"families": {f: summarise([r for r in rows if r["family"] == f]) for f in FAMILY_ORDER
                                           if any(r["family"] == f for r in rows)},
                              "mean": summarise(rows), "sets": rows}
        result["spaces"][space] = per_rule
    lines = [f"{'space':<14} {'rule':<23} " + " ".join(f"{f:>9}" for f in FAMILY_ORDER)
             + f" {'mean':>6} {'worst':>6} {'>8':>3} {'P':>5} {'P3':>5} {'R':>5}"]
    rows_out = []
    for space, per_rule in result["spaces"].items():
        for rule, h in per_rule.items():
            m = h["mean"]
            cells = [h["families"][f]["gap"] if f in h["families"] else None for f in FAMILY_ORDER]
            lines.append(f"{space:<14} {rule:<23} " + " ".join(f"{c:9.1f}" if c is not None else f"{'-':>9}"
                                                                for c in cells)
                         + f" {m['gap']:6.1f} {m['worst_gap']:6.1f} {m['over_8']:3d} {m['precision']:5.1f} "
                           f"{m['precision_families']:5.1f} {m['recall']:5.1f}")
            rows_out.append([space, rule] + [None if c is None else round(c, 1) for c in cells]
                            + [round(m["gap"], 1), round(m["worst_gap"], 1), m["over_8"], round(m["precision"], 1),
                               round(m["precision_families"], 1), round(m["recall"], 1)])
    click.echo("\n".join(lines))
    if no_write:
        return
    from calibrate_defaults import DATA, _encoder
    from calibration_sets import source_files
    from xmine.benchmarks.common import RawEmbedder, Variant, results_dir, write_result

    out = results_dir() / "threshold-uncalibrated.json"
    # the record's top-level encoder is the first space's; `encoders` names each space's own
    result["encoders"] = {space: _encoder(SPACES[space][0]).fingerprint() for space in result["spaces"]}
    enc = _encoder(SPACES[next(iter(result["spaces"]))][0])
    write_result(out, task="threshold_uncalibrated", encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=source_files(DATA), parameters={"command": result["command"], "k": KNN, "margin": MARGIN},
                 columns=COLUMNS[:-1], rows=rows_out, details=result, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")


# ---------------------------------------------------------------- shipping the rule
#: the study's rule `install` ships, and its name in the product (`xmine.mining.threshold_rule`)
SHIPPED_RULE, PRODUCT_RULE = "mutual-null-down-nested", "mutual-null-share"
#: space -> its record: the projection's SHIPPED.json, or the raw encoder's entry of mining/calibration.json
RECORDS = {"projection": "projection", "raw-me5-small": "me5-small", "raw-use-m3": "use-m3"}


def shipped(studies: dict, margin: str = MARGIN, floor: float = PRECISION_FLOOR) -> dict:
    """Per studied space (`studies`: space -> its held-out rules), the rule to ship in `margin`
    (chosen on every family), or None where it does not beat that margin's single threshold held
    out (a smaller mean gap and worst gap, a mean precision >= `floor` over news/wiki/short: the
    balanced point's floor, or the precision point's target)."""
    out = {}
    for space, rules in studies.items():
        rule, single = rules[SHIPPED_RULE], rules["single"]
        wins = (rule["mean"]["gap"] < single["mean"]["gap"] and rule["mean"]["worst_gap"] < single["mean"]["worst_gap"]
                and rule["mean"]["precision_families"] >= 100 * floor)
        out[space] = (product_rule(rule["params_all"], single["params_all"]["t"], PRODUCT_RULE, margin) | {
            "held_out": {"gap": round(rule["mean"]["gap"], 2), "worst_gap": round(rule["mean"]["worst_gap"], 2),
                         "sets_over_8": rule["mean"]["over_8"], "precision": round(rule["mean"]["precision"], 2),
                         "precision_news_wiki_short": round(rule["mean"]["precision_families"], 2),
                         "precision_floor_in_sample": rule["params_all"]["precision_floor"],
                         "single_gap": round(single["mean"]["gap"], 2),
                         "single_worst_gap": round(single["mean"]["worst_gap"], 2),
                         "single_sets_over_8": single["mean"]["over_8"]}}) if wins else None
    return out


def update_record(space: str, update) -> Path:
    """Apply `update(record)` (in place) to the space's record and write it atomically: the
    projection's SHIPPED.json (and its manifest, which records SHIPPED.json's sha256), a raw
    encoder's entry of mining/calibration.json."""
    from xmine.disentangle.projection import write_projection_manifest
    from xmine.artefacts.fileio import atomic_write_json
    from xmine.encoders.projection import SHIPPED_ROOT

    if RECORDS[space] == "projection":
        path = SHIPPED_ROOT / "me5-small" / "SHIPPED.json"
        info = json.loads(path.read_text(encoding="utf-8"))
        update(info)
        atomic_write_json(path, info)
        write_projection_manifest(path.parent, json.loads((path.parent / "config.json").read_text(encoding="utf-8")))
    else:
        path = Path(__file__).resolve().parents[2] / "mining" / "calibration.json"
        info = json.loads(path.read_text(encoding="utf-8"))
        update(info["encoders"][RECORDS[space]])
        atomic_write_json(path, info)
    return path


def _set_rule(record: dict, margin: str, rule: dict | None) -> None:
    """The balanced point's rule of `margin` in `record` (None: none), the other margins' kept."""
    rules = record.pop("threshold_rules", None) or {}
    balanced = rules.setdefault("balanced", {})
    balanced.pop(margin, None)
    if rule:
        balanced[margin] = rule
    if any(rules.values()):
        record["threshold_rules"] = {p: v for p, v in rules.items() if v}


def install(result: dict, result_path: Path) -> list[str]:
    """Each studied space's ratio-margin rule (`shipped`) into its record beside its single thresholds.
    A space whose rule does not win gets none (and loses an old one)."""
    how = (f"{SHIPPED_RULE} of benchmarks/lab/threshold_rules.py (benchmarks/results/{result_path.name}): chosen on "
           "every family of the calibration sets; held_out: leave one family out, against the single threshold")
    done = []
    for space, rule in shipped({space: r["rules"] for space, r in result["spaces"].items()}).items():
        path = update_record(space, lambda record, rule=rule: _set_rule(record, MARGIN, rule and rule | {"how": how}))
        done.append(f"{space}: {rule['rule'] if rule else 'no rule (the single threshold)'} -> {path}")
    return done


def install_margins(result: dict, result_path: Path) -> list[str]:
    """Each studied space's distance-margin rule (`shipped`, against the distance single threshold),
    its distance score cap, and its default margin (`default_margin`; ratio is left unrecorded)."""
    how = (f"{SHIPPED_RULE} of benchmarks/lab/threshold_rules.py margins (benchmarks/results/{result_path.name}): "
           "chosen on every family of the calibration sets; held_out: leave one family out, against the single "
           "threshold, every gap to the set's best F1 over both margins")
    done = []
    rules = shipped({space: r["margins"]["distance"]["rules"] for space, r in result["spaces"].items()}, "distance")
    for space, rule in rules.items():
        r = result["spaces"][space]

        def update(record, rule=rule, r=r):
            _set_rule(record, "distance", rule and rule | {"how": how})
            record["score_max"] = record.get("score_max", {}) | {"distance": r["margins"]["distance"]["score_max"]}
            record.pop("default_margin", None)
            if r["default_margin"] != "ratio":
                record["default_margin"] = r["default_margin"]

        path = update_record(space, update)
        done.append(f"{space}: distance {rule['rule'] if rule else 'single threshold'}, cap "
                    f"{r['margins']['distance']['score_max']:g}, default margin {r['default_margin']} -> {path}")
    return done


@command.command("install")
def install_command():
    """Write each studied space's rule (benchmarks/results/threshold-rules.json) into its record."""
    from xmine.benchmarks.common import read_result, results_dir

    out = results_dir() / "threshold-rules.json"
    result = read_result(out)["details"]
    for line in install(result, out):
        click.echo(f"installed {line}")


# ---------------------------------------------------------------- how far any rule could go: thresholds chosen with the gold
def oracle_choice(runs, family: dict, lam: float, max_gap: float | None = None) -> dict[str, int]:
    """Per set, the number of candidates to keep (>= 1) that maximises F1 + lam * weight * precision,
    weight the set's share of the family-weighted precision over PRECISION_FAMILIES relative to its
    share of the mean gap (0 for the templated sets): the Lagrangian of "smallest mean gap at a
    mean precision >= the floor", solved set by set. `max_gap`: only counts whose F1 is at most that
    far below the set's best (the issue's "no set more than 8 below")."""
    fams = [f for f in PRECISION_FAMILIES if f in set(family.values())]
    size = {f: sum(family[n] == f for n in runs) for f in fams}
    kept = {}
    for n, x in runs.items():
        run = x["max"]
        w = len(runs) / (len(fams) * size[family[n]]) if family[n] in size else 0.0
        objective = run.f1 + lam * w * run.p
        if max_gap is not None:
            objective = np.where(run.best - run.f1 <= max_gap, objective, -np.inf)
        kept[n] = int(np.argmax(objective)) + 1
    return kept


def oracle_rows(runs, family: dict, kept: dict[str, int]) -> list[dict]:
    rows = []
    for n, k in kept.items():
        run = runs[n]["max"]
        rows.append({"set": n, "family": family[n], "threshold": float(run.s[k - 1]), "precision": float(run.p[k - 1]),
                     "recall": float(run.r[k - 1]), "f1": float(run.f1[k - 1]), "kept": k, "best_f1": run.best,
                     "gap": run.best - float(run.f1[k - 1])})
    return rows


def oracle_bound(runs, family: dict, floor: float = PRECISION_FLOOR, max_gap: float | None = None) -> dict:
    """The smallest mean gap that thresholds chosen per set WITH the gold reach at a mean precision
    >= `floor` over PRECISION_FAMILIES: no rule without gold does better. `achieved` is the
    Lagrangian point at the smallest multiplier that meets the floor (bisection), `lower_bound`
    the dual bound, max over the multipliers lam of min (mean gap - lam (P - floor)) (the exact
    optimum lies between: the per-set curves are not concave). `max_gap`: every set kept within it
    of its best (`oracle_choice`); where no multiplier meets the floor, `achieved` is the point of
    the largest one tried (its precision says by how much it misses)."""
    fams = [f for f in PRECISION_FAMILIES if f in set(family.values())]

    def point(lam):
        rows = oracle_rows(runs, family, oracle_choice(runs, family, lam, max_gap))
        gap = float(np.mean([r["gap"] for r in rows]))
        return rows, gap, _fam_mean(rows, "precision", fams)

    at_best = summarise(point(0.0)[0])
    lo, hi = 0.0, 1.0
    while point(hi)[2] < floor and hi < 1e4:
        hi *= 2
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if point(mid)[2] >= floor else (mid, hi)
    rows = point(hi)[0]
    # weak duality: for every multiplier, the per-set maximiser gives min over all choices of
    # mean gap - lam (P3 - floor), which is at most the constrained optimum
    dual = max(g - lam * (p - floor) for lam in np.linspace(0, hi, 41) for _, g, p in [point(lam)])
    return {"at_each_best": at_best, "achieved": summarise(rows), "multiplier": hi,
            "lower_bound": 100 * dual, "per_set": rows}


@command.command("oracle")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def oracle_command(spaces):
    """How far any threshold rule could go: per set, the threshold chosen WITH the gold, at the
    issue's mean precision floor over news/wiki/short; beside it every set at its own best F1
    (whatever its precision), and one threshold per family chosen with the gold. A rule without
    gold can at most reach the first (prints: a look)."""
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        _, runs, family = space_runs(space, meta)
        res = oracle_bound(runs, family)
        per_family = " ".join(f"{f} {summarise([r for r in res['per_set'] if r['family'] == f])['gap']:.1f}"
                              for f in FAMILY_ORDER if f in set(family.values()))
        for label, m, more in (("each set's best", res["at_each_best"], ""),
                               ("oracle at P3 >= 0.85", res["achieved"], f" | {per_family}")):
            click.echo(f"{space:<14} {label:<22} mean gap {m['gap']:.1f} worst {m['worst_gap']:.1f} >8 {m['over_8']:2d} "
                       f"P3 {m['precision_families']:.1f} P48 {m['precision']:.1f} R {m['recall']:.1f}{more}")
        click.echo(f"{space:<14} lower bound on the mean gap at P3 >= 0.85: {res['lower_bound']:.2f}")
        # one threshold per family, chosen on that family with its gold (precision >= the floor
        # on news/wiki/short): how much the family alone would tell a rule
        th = {}
        for f in sorted(set(family.values())):
            sub = {n: x for n, x in runs.items() if family[n] == f}
            t = choose(rule_single(sub), sub, family, [f], PRECISION_FLOOR if f in PRECISION_FAMILIES else 0.0)["t"]
            th.update({n: ("max", t) for n in sub})
        m = summarise(evaluate(runs, family, th))
        click.echo(f"{space:<14} one threshold per family, in sample: mean gap {m['gap']:.1f} worst {m['worst_gap']:.1f} "
                   f"P3 {m['precision_families']:.1f}")


#: the margins `margins` chooses among (`xmine mine --margin`)
MARGINS = ("ratio", "distance")


def margin_runs(space: str, meta: list[dict]):
    """(runs, family) for `margins`: per set, the max-retrieval Run of each margin (keyed by the
    margin's name; "max" is the ratio margin's, as every rule's reference) and each Run's `best` the
    set's best F1 over both margins, so that the gaps of either margin are to the same number."""
    langs = SPACE_LANGUAGES.get(space)
    smeta = [m for m in meta if langs is None or m["iso"] in langs]
    by_margin = {m: runs_of(space, smeta, m, ("max",)) for m in MARGINS}
    runs = {}
    for n in by_margin[MARGINS[0]]:
        per = {m: by_margin[m][n]["max"] for m in MARGINS}
        best = max(r.best for r in per.values())
        for r in per.values():
            r.best = best
        runs[n] = per | {"max": per["ratio"]}
    return runs, {m["name"]: m["family"] for m in smeta if m["name"] in runs}


def shipped_rule_of(runs, family, margins):
    """`make(fams, floor)` for `held_out(nested=True)`: the shipped rule's candidates (mutual share
    of the null, down only, around the single threshold chosen on `fams` at `floor`) in each of
    `margins`, its parameters tagged with the margin, so that choosing among them chooses the margin."""
    def make(fams, floor=PRECISION_FLOOR):
        for m in margins:
            view = {n: {"max": x[m]} for n, x in runs.items()}
            for params, th in linear_rule(view, family, fams, floor, mutual_null_share, True, m):
                yield params | {"margin": m}, {n: (m, t) for n, (_, t) in th.items()}
    return make


def margins_study(space: str, meta: list[dict], gold_max: dict) -> dict:
    """Per margin, the single threshold and the shipped rule held out (every gap to the set's best
    over both margins), that margin's score cap (`gold_max`: its highest gold margin over the
    calibration sets, from calibration-defaults.json); and the rule with the margin chosen with its
    parameters (`margin_chosen`)."""
    runs, family = margin_runs(space, meta)
    out = {"sets": len(runs), "margins": {}}
    for m in MARGINS:
        view = {n: {"max": x[m]} for n, x in runs.items()}
        out["margins"][m] = {"rules": {"single": held_out(lambda fams, view=view: rule_single(view), view, family),
                                       SHIPPED_RULE: held_out(shipped_rule_of(runs, family, (m,)), runs, family,
                                                              nested=True)},
                             "score_max": score_cap(gold_max[m], m), "gold_max": gold_max[m]}
    out["margin_chosen"] = held_out(shipped_rule_of(runs, family, MARGINS), runs, family, nested=True)
    return out


def shipped_in(study: dict, margin: str) -> str:
    """What a space would ship in `margin`: its rule where the rule beats that margin's single
    threshold held out (`shipped`), else the single threshold."""
    return SHIPPED_RULE if shipped({"": study["margins"][margin]["rules"]}, margin)[""] else "single"


def default_margin(study: dict) -> str:
    """The margin `xmine mine` uses by default in a space: the one chosen with the rule's parameters
    on every family, where what would ship in it (`shipped_in`) has, held out, a smaller mean and
    worst gap than what ships in the ratio margin and a mean precision >= the floor over
    news/wiki/short; else ratio."""
    chosen = study["margin_chosen"]["params_all"]["margin"]
    a, b = (study["margins"][m]["rules"][shipped_in(study, m)]["mean"] for m in (chosen, "ratio"))
    wins = (a["gap"] < b["gap"] and a["worst_gap"] < b["worst_gap"]
            and a["precision_families"] >= 100 * PRECISION_FLOOR)
    return chosen if wins else "ratio"


def margin_entries(study: dict) -> list[tuple[str, str, dict]]:
    """(margin, rule, held-out result) of a space's `margins_study`: each margin's single threshold
    and rule, then the rule with the margin chosen (margin "chosen")."""
    return ([(m, rule, study["margins"][m]["rules"][rule]) for m in MARGINS for rule in ("single", SHIPPED_RULE)]
            + [("chosen", SHIPPED_RULE, study["margin_chosen"])])


def margins_table(result: dict) -> str:
    lines = []
    for space, r in result["spaces"].items():
        for margin, rule, h in margin_entries(r):
            m = h["mean"]
            label = "margin chosen" if margin == "chosen" else f"{margin} {rule}"
            chosen = "; ".join(f"{f}: {p['params'].get('margin', '')}" for f, p in h["held_out"].items())
            gaps = " ".join(f"{f} {x['gap']:5.2f}" for f, x in h["held_out"].items())
            lines.append(f"{space:<14} {label:<34} {gaps}"
                         + f" | mean {m['gap']:.2f} worst {m['worst_gap']:.1f} >8 {m['over_8']:2d} "
                           f"P3 {m['precision_families']:.1f} P48 {m['precision']:.1f} R {m['recall']:.1f}"
                         + (f" [{chosen}]" if margin == "chosen" else ""))
        lines.append(f"{space:<14} shipped: " + ", ".join(f"{m} {shipped_in(r, m)}" for m in MARGINS)
                     + f"; default margin: {r['default_margin']}; caps "
                     + ", ".join(f"{m} {r['margins'][m]['score_max']:g}" for m in MARGINS))
    return "\n".join(lines)


@command.command("margins")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
@click.option("--no-write", is_flag=True, help="Print the table only.")
def margins_command(spaces, no_write):
    """The shipped rule in each margin (ratio, distance) and with the margin chosen with its parameters,
    each family held out (nested precision floor), every gap to the set's best F1 over both margins;
    writes benchmarks/results/threshold-margins.json, which `install-margins` installs."""
    from calibration_sets import fingerprint
    from xmine.benchmarks.common import read_result, results_dir

    started = time.monotonic()
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    sha = fingerprint(sets)
    calibration = read_result(results_dir() / "calibration-defaults.json")["details"]
    result = {"command": "python benchmarks/lab/run.py threshold-rules margins", "k": KNN, "margins": list(MARGINS),
              "precision_floor": PRECISION_FLOOR, "sets_sha256": sha, "spaces": {}}
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        if str(np.load(knn_path(space))["sets_sha256"]) != sha:
            raise click.ClickException(f"{knn_path(space)}: made on other sets; run `knn` again")
        gold_max = {m: calibration["spaces"][space]["margins"][m]["gold_max"] for m in MARGINS}
        study = margins_study(space, meta, gold_max)
        result["spaces"][space] = study | {"default_margin": default_margin(study)}
    click.echo(margins_table(result))
    if no_write:
        return
    _write(result, "threshold-margins.json", "threshold_margins", started, margins_rows(result),
           ["space", "margin", "rule"] + [f"{f} gap" for f in FAMILY_ORDER]
           + ["mean gap", "worst gap", "sets > 8", "P", "P news/wiki/short", "R"])


def margins_rows(result: dict) -> list[list]:
    """The result table: per space, each margin's single threshold and rule, then the margin chosen."""
    rows = []
    for space, r in result["spaces"].items():
        for m, rule, h in margin_entries(r):
            mean = h["mean"]
            rows.append([space, m, rule, *(round(h["held_out"][f]["gap"], 2) if f in h["held_out"] else None
                                           for f in FAMILY_ORDER),
                         round(mean["gap"], 2), round(mean["worst_gap"], 2), mean["over_8"],
                         round(mean["precision"], 2), round(mean["precision_families"], 2), round(mean["recall"], 2)])
    return rows


@command.command("install-margins")
def install_margins_command():
    """Write each space's distance-margin rule and cap and its default margin
    (benchmarks/results/threshold-margins.json) into its record, beside the ratio margin's."""
    from xmine.benchmarks.common import read_result, results_dir

    out = results_dir() / "threshold-margins.json"
    result = read_result(out)["details"]
    for line in install_margins(result, out):
        click.echo(f"installed {line}")


@command.command("uncalibrated-margins")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: those with kNN lists.")
def uncalibrated_margins_command(spaces):
    """The default of a space without a calibration (`run_estimate.estimated_threshold`) in each
    margin, every gap to the set's best over both margins (prints: a look). Which margin an
    unknown encoder should mine with: the one that does better in every space taken as uncalibrated."""
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    for space in spaces or [s for s in SPACES if knn_path(s).exists()]:
        runs, family = margin_runs(space, meta)
        for m in MARGINS:
            view = {n: {"max": x[m]} for n, x in runs.items()}
            rows = evaluate(view, family, estimated_thresholds(view))
            s = summarise(rows)
            gaps = " ".join(f"{f} {summarise([r for r in rows if r['family'] == f])['gap']:5.1f}"
                            for f in FAMILY_ORDER if f in set(family.values()))
            click.echo(f"{space:<14} {m:<9} {gaps}"
                       + f" | mean {s['gap']:.2f} worst {s['worst_gap']:.1f} >8 {s['over_8']} "
                         f"P3 {s['precision_families']:.1f} P48 {s['precision']:.1f} R {s['recall']:.1f}")


# ---------------------------------------------------------------- the margin of `xmine calibrate`'s records
def best_f1_threshold(run: Run) -> float:
    """The threshold of `run`'s best F1 at a cut (`xmine calibrate`'s balanced point)."""
    return float(run.s[int(np.argmax(np.where(run.cut, run.f1, -1)))])


def calibrated_margin_rows(space: str, meta: list[dict]) -> list[dict]:
    """Each set of a language with a FLORES-200 wiki set (`wiki-<code>`, as `xmine calibrate` builds
    from FLORES-200 devtest: 581 a side, 150 gold), other than that set and its `-in-news` sets
    (which hide the same FLORES lines), at the best-F1 threshold of the language's wiki set in each
    margin: its gap to its best over both margins, and its precision."""
    runs, family = margin_runs(space, meta)
    iso = {m["name"]: m["iso"] for m in meta}
    rows = []
    for cal in (n for n in runs if family[n] == "wiki" and not n.endswith("-in-news")):
        t = {m: best_f1_threshold(runs[cal][m]) for m in MARGINS}
        for n in runs:
            if iso[n] != iso[cal] or family[n] == "wiki":
                continue
            at = {m: runs[n][m].at(t[m]) for m in MARGINS}
            rows.append({"calibrated_on": cal, "set": n, "family": family[n],
                         **{f"{m}_threshold": t[m] for m in MARGINS},
                         **{f"{m}_gap": runs[n][m].best - at[m][2] for m in MARGINS},
                         **{f"{m}_precision": at[m][0] for m in MARGINS}})
    return rows


@command.command("calibrate-margin")
@click.option("--no-write", is_flag=True, help="Print the table only.")
def calibrate_margin_command(no_write):
    """Which margin the thresholds of `xmine calibrate` (one FLORES-200 set of a language) transfer
    in: each space taken as a space xmine ships no calibration for, each language's other sets mined at
    its FLORES set's best-F1 threshold in each margin (-> threshold-calibrate-margin.json). A
    margin other than ratio is chosen only where it has the smaller mean gap in every space."""
    from calibration_sets import fingerprint

    started = time.monotonic()
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    result = {"command": "python benchmarks/lab/run.py threshold-rules calibrate-margin", "k": KNN,
              "margins": list(MARGINS), "sets_sha256": fingerprint(sets), "spaces": {}}
    table = []
    for space in [s for s in SPACES if knn_path(s).exists()]:
        rows = calibrated_margin_rows(space, meta)
        summary = {}
        for fam in ("all", *FAMILY_ORDER):
            sub = [r for r in rows if fam == "all" or r["family"] == fam]
            if not sub:
                continue
            summary[fam] = {m: {"sets": len(sub), "gap": round(100 * float(np.mean([r[f"{m}_gap"] for r in sub])), 2),
                                "worst_gap": round(100 * max(r[f"{m}_gap"] for r in sub), 2),
                                "precision": round(100 * float(np.mean([r[f"{m}_precision"] for r in sub])), 1)}
                            for m in MARGINS}
            table.append([space, fam, len(sub)] + [summary[fam][m][k] for m in MARGINS
                                                    for k in ("gap", "worst_gap", "precision")])
        result["spaces"][space] = {"summary": summary, "per_set": rows,
                                   "languages": sorted({r["calibrated_on"] for r in rows})}
    wins = {m: all(r["summary"]["all"][m]["gap"] < r["summary"]["all"]["ratio"]["gap"]
                   for r in result["spaces"].values()) for m in MARGINS if m != "ratio"}
    result["chosen"] = next((m for m, w in wins.items() if w), "ratio")
    columns = ["space", "family", "sets"] + [f"{m} {k}" for m in MARGINS for k in ("gap", "worst", "P")]
    for row in [columns] + table:
        click.echo("  ".join(f"{c!s:>14}" for c in row))
    click.echo(f"chosen: {result['chosen']}")
    if not no_write:
        _write(result, "threshold-calibrate-margin.json", "threshold_calibrate_margin", started, table, columns)


@command.command("per-language-distance")
def per_language_distance_command():
    """Per-language intercepts in the distance margin (prints: a look): each language's FLORES-200
    set's best-F1 threshold, shifted by delta times its distance from 0, as the intercept of the
    shipped distance rule (its share term chosen without the reported family), on the language's
    sets of the other families. Delta chosen held out (on the two other families of news, short,
    templated, at a mean precision >= 0.85 over news and short among them), then the whole
    trade-off (one delta for all) beside the shipped rule's point."""
    from xmine.benchmarks.common import read_result, results_dir
    from xmine.mining.threshold_rule import rule_threshold

    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    margins = read_result(results_dir() / "threshold-margins.json")["details"]["spaces"]
    fams, deltas = ("news", "short", "templated"), np.round(np.arange(-0.3, 0.5001, 0.02), 2)
    for space, study in margins.items():
        runs, family = margin_runs(space, meta)
        iso = {m["name"]: m["iso"] for m in meta}
        flores = {iso[n]: best_f1_threshold(runs[n]["distance"]) for n in runs
                  if family[n] == "wiki" and not n.endswith("-in-news")}
        names = [n for n in runs if family[n] in fams and iso[n] in flores]
        shipped_margin = study["default_margin"]
        # each set's share, in the two margins the rules read it in (once: every delta reads the same)
        share = {m: {n: mutual_null_share({"max": runs[n][m]}) for n in names} for m in {"distance", shipped_margin}}

        def rule(margin: str, held_out_of: str) -> dict:
            p = study["margins"][margin]["rules"][SHIPPED_RULE]["held_out"][held_out_of]["params"]
            return product_rule(p, p.get("t1"), "", margin)

        def at(n: str, margin: str, t: float) -> tuple[float, float]:
            precision, _, f1, _ = runs[n][margin].at(t)
            return runs[n][margin].best - f1, precision

        def per_language(n: str, delta: float) -> tuple[float, float]:
            t = flores[iso[n]] * (1 + delta)  # the distance margin's neutral score is 0
            return at(n, "distance", rule_threshold(rule("distance", family[n]) | {"intercept": t},
                                                    share["distance"][n]))

        def report(label: str, rows: dict) -> None:
            gap = {f: 100 * np.mean([rows[n][0] for n in rows if family[n] == f]) for f in fams}
            prec = {f: 100 * np.mean([rows[n][1] for n in rows if family[n] == f]) for f in fams}
            click.echo(f"{space:<14} {label:<24} " + " ".join(f"{f} {gap[f]:5.2f}" for f in fams)
                       + f" | mean {100 * np.mean([r[0] for r in rows.values()]):.2f} worst "
                         f"{100 * max(r[0] for r in rows.values()):.1f} P(news, short) "
                         f"{np.mean([prec['news'], prec['short']]):.1f}")

        shipped_rows = {n: at(n, shipped_margin, rule_threshold(rule(shipped_margin, family[n]),
                                                                share[shipped_margin][n])) for n in names}
        report(f"shipped ({shipped_margin})", shipped_rows)
        held, chosen = {}, {}
        for fam in fams:
            train = [f for f in fams if f != fam]
            best = None
            for d in deltas:
                rows = {n: per_language(n, d) for n in names if family[n] in train}
                gap = np.mean([np.mean([rows[n][0] for n in rows if family[n] == f]) for f in train])
                prec = np.mean([np.mean([rows[n][1] for n in rows if family[n] == f])
                                for f in train if f != "templated"])
                if prec >= PRECISION_FLOOR and (best is None or gap < best[0]):
                    best = (gap, d)
            chosen[fam] = float(best[1] if best else deltas[-1])
            held.update({n: per_language(n, chosen[fam]) for n in names if family[n] == fam})
        report("per-language, held out", held)
        click.echo(f"{space:<14} delta chosen without each family: {chosen}")
        for d in deltas[::4]:
            report(f"per-language, delta {d:+.2f}", {n: per_language(n, d) for n in names})


# ---------------------------------------------------------------- the precision operating point as a rule
#: the precision point's target (calibrate_defaults.PRECISION_TARGET), and the in-sample floors its
#: nested choice tries (the balanced point's FLOOR_GRID, moved up to the target)
PRECISION_POINT_TARGET = 0.95
PRECISION_POINT_GRID = (0.95, 0.955, 0.96, 0.965, 0.97, 0.975, 0.98, 0.985, 0.99)


def precision_point_study(space: str, meta: list[dict]) -> dict:
    """The precision point held out in the space's default margin, as the shipped balanced rule is
    (`single`: one threshold chosen in sample at the target, as `calibrate-defaults` ships it;
    `single-nested` and SHIPPED_RULE: at an in-sample floor chosen held out against the target)."""
    margin = default_margin_of(space)
    _, runs, family = space_runs(space, meta, margin, ("max",))
    at = {"target": PRECISION_POINT_TARGET, "grid": PRECISION_POINT_GRID}

    def rule(fams, floor):
        return linear_rule(runs, family, fams, floor, mutual_null_share, True, margin)

    rules = {"single": held_out(lambda fams: rule_single(runs), runs, family, target=PRECISION_POINT_TARGET),
             "single-nested": held_out(lambda fams, floor: rule_single(runs), runs, family, nested=True, **at),
             SHIPPED_RULE: held_out(rule, runs, family, nested=True, **at)}
    return {"margin": margin, "sets": len(runs), "rules": rules,
            "shipped": shipped({space: rules}, margin, PRECISION_POINT_TARGET)[space]}


#: the study's name of a space -> its label in the held-out checks
CHECK_SPACES = {"projection": "projection", "raw-me5-small": "raw me5-small", "raw-use-m3": "raw use-m3"}
#: each held-out check and the calibration family its sets count as
CHECKS = {"heldout-news": "news", "heldout-wiki": "wiki", "heldout-short": "short"}


def precision_point_checks(space: str, study: dict) -> dict:
    """Each held-out check at the shipped precision point (its single value) and at the rule chosen
    on every calibration family (the share each set's rule reads: `check_candidates`): nothing is
    chosen here."""
    from heldout_news import check_candidates, stats
    from xmine.benchmarks.common import read_result, results_dir
    from xmine.mining.threshold_rule import rule_threshold

    h = study["rules"][SHIPPED_RULE]
    rule = product_rule(h["params_all"], h["params_all"]["t1"], PRODUCT_RULE, study["margin"])
    out = {}
    for check in CHECKS:
        found = check_candidates(check, CHECK_SPACES[space])
        if not found:
            continue
        reported = read_result(results_dir() / f"{check}.json")["details"]["spaces"][
            f"{CHECK_SPACES[space]} ({study['margin']}, the precision point)"]
        rows = {"single": [], "rule": []}
        for s in found:
            run = s["run"]
            for key, t in (("single", reported[s["set"]]["default"]["threshold"]),
                           ("rule", rule_threshold(rule, s["share"]))):
                p, r, f1, kept = run.at(float(np.float32(t)))
                # an empty output's precision counts as 0, as the checks count it (`bucc.evaluate`)
                rows[key].append({"gap": run.best - f1, "precision": p if kept else 0.0, "recall": r})
            want = reported[s["set"]]["default"]
            if any(abs(rows["single"][-1][m] - want[m]) > 1e-9 for m in ("precision", "recall")):
                raise RuntimeError(f"{check} {s['set']}: the precision point's figures differ from the check's")
        out[check] = {key: stats(v) for key, v in rows.items()}
    return out


@command.command("precision-point")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: every space.")
@click.option("--no-write", is_flag=True, help="Print only.")
def precision_point_command(spaces, no_write):
    """The precision operating point as a rule (the balanced point's, chosen for precision >= 0.95),
    held out by family; reported on the held-out checks (-> threshold-precision.json)."""
    from calibration_sets import fingerprint

    started = time.monotonic()
    sets = _sets()
    meta = [dict(name=s.name, **s.counts) for s in sets]
    result = {"command": "python benchmarks/lab/run.py threshold-rules precision-point", "k": KNN,
              "target": PRECISION_POINT_TARGET, "floor_grid": list(PRECISION_POINT_GRID),
              "sets_sha256": fingerprint(sets), "margins": {}, "spaces": {}}
    rows = []
    for space in spaces or SPACES:
        study = precision_point_study(space, meta)
        study["checks"] = precision_point_checks(space, study)
        result["margins"][space] = study["margin"]
        result["spaces"][space] = study
        for name, h in study["rules"].items():
            m = h["mean"]
            rows.append([space, study["margin"], name] + [round(h["held_out"][f]["gap"], 2) if f in h["held_out"]
                                                          else None for f in FAMILY_ORDER]
                        + [round(m["gap"], 2), round(m["worst_gap"], 1), m["over_8"],
                           round(m["precision_families"], 1), round(m["recall"], 1), str(h["params_all"])])
            click.echo("  ".join(str(v) for v in rows[-1]))
        for check, c in study["checks"].items():
            click.echo(f"  {check}: single {c['single']}  rule {c['rule']}")
        click.echo(f"  ships: {study['shipped']}")
    if not no_write:
        _write(result, "threshold-precision.json", "threshold_precision", started, rows,
               ["space", "margin", "rule"] + [f"{f} gap" for f in FAMILY_ORDER]
               + ["mean gap", "worst", "sets > 8", "P news/wiki/short", "R", "parameters (all families)"])
