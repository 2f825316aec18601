"""Lab study: can `xmine mine` choose its margin threshold from the run's own data, without gold?

    .venv/bin/python benchmarks/lab/run.py threshold-study collect   # embeddings (cached) and kNN lists
    .venv/bin/python benchmarks/lab/run.py threshold-study report    # every rule, leave one family out

Sets: BUCC-style sets (`xmine.benchmarks.mining.compose_set`: gold pairs hidden among distractors
of the same language and domain) from three families that differ the way real corpora do:
- news: FLORES-200 devtest + held-out WMT newstest (`bench mining`'s own sets, 600 news pairs),
- massive: MASSIVE 1.1 test utterances (short, templated: many near-paraphrases across sides),
- tatoeba: Tatoeba-challenge pairs (very short),
10 languages x English each, gold densities 1%, 3%, 10% of each side, seeds 0-2: 90 sets a family,
mined exactly (k = 4, ratio margin, max retrieval, `select_pairs`) in raw me5-small space and in
the shipped projection's meaning space.

Each rule picks a threshold per set from an estimated precision curve: N0(t), the expected number
of kept candidates that are not translations, against K(t), the candidates kept. The threshold is
the one maximising the estimated F1, 2 (K - N0) / (K + G) with G = max(K - N0). The estimated curve
is compared with the true one, and the rule's F1 with the set's best F1 and with the fixed default
(raw 1.04, projection 1.029). High-scoring false candidates are mutual best pairs of two distractors,
so N0 averages the two directions' null counts rather than adding them.

Null models compared (`NULLS`):
- `oracle`: the true null (best margins of the sentences without a translation; needs gold). An
  upper bound: it shows what the F1 rule gives with a perfect null.
- `spacing`: top-k order statistics as exponential spacings (D_i ~ beta E_i / i), beta per sentence
  from its lower spacings with an empirical-Bayes Gamma prior; the null predictive of the top cosine
  is a Lomax, mapped to the margin.
- `decoy`: target-decoy with the same sentences against their own side (self excluded): a side
  holds none of its own translations. Affine-matched to the real best margins on their 20-80%
  quantiles.
- `zscore`: a universal tail of the null in robust z units ((s - median) / IQR of a side's best
  margins), learned on the two other families (leave one family out).
"""

from __future__ import annotations

import collections
import glob
import itertools
import json
import sys
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
#: the `kind` of this study's result JSON (xmine.artefacts.verify.RESULT_KINDS)
STUDY_KIND = "threshold-study"
DATA = Path(__import__("os").environ.get("XMINE_DATA", ROOT.parent / "shared" / "data"))
SETS = Path(__import__("os").environ.get("XMINE_STUDY_DIR", ROOT / "out" / "threshold-study"))
K, KNN = 4, 8
DENSITIES, SEEDS = (0.01, 0.03, 0.10), (0, 1, 2)
FAMILIES = {
    "news": ("de", "cs", "ru", "zh", "ja", "fi", "kk", "pl", "lt", "km"),
    "massive": ("de-DE", "ru-RU", "ja-JP", "ar-SA", "hi-IN", "km-KH", "sw-KE", "fi-FI", "ko-KR", "am-ET"),
    "tatoeba": ("deu-eng", "eng-rus", "eng-jpn", "ara-eng", "eng-hin", "eng-fin", "eng-tur", "eng-vie",
                "eng-heb", "eng-ukr"),
}
FIXED = {"raw": 1.04, "proj": 1.029}
TS = np.round(np.arange(0.99, 1.2, 0.0005), 4)


# ---------------------------------------------------------------- sets
def _massive_pairs(locale: str, n: int = 1500):
    def utts(loc):
        rows = (json.loads(x) for x in open(DATA / f"massive/data/{loc}.jsonl", encoding="utf-8"))
        return [r["utt"] for r in rows if r["partition"] == "test"]
    return [(s.strip(), t.strip()) for s, t in zip(utts(locale), utts("en-US")) if s.strip() and t.strip()][:n]


def _tatoeba_pairs(pair: str, n: int = 1500):
    folder = DATA / "parallel/tatoeba-challenge" / pair
    other = next(p for p in pair.split("-") if p != "eng")
    a = (folder / f"{pair}.{other}").read_text(encoding="utf-8").split("\n")
    b = (folder / f"{pair}.eng").read_text(encoding="utf-8").split("\n")
    pairs = [(s.strip(), t.strip()) for s, t in zip(a, b) if s.strip() and t.strip()]
    keep = sorted(np.random.default_rng(0).permutation(len(pairs))[:n])
    return [pairs[i] for i in keep]


def build(family: str, lang: str, seed: int, density: float):
    from xmine.benchmarks import mining as bm

    if family == "news":
        return bm.build_set(DATA, lang, seed=seed, gold_fraction=density, max_news=600)
    pairs = _massive_pairs(lang) if family == "massive" else _tatoeba_pairs(lang)
    return bm.compose_set(lang, ((family, pairs),), files=[], seed=seed, gold_fraction=density)


def _knn(a, b, k, *, exclude_self=False):
    s = a @ b.T
    if exclude_self:
        np.fill_diagonal(s, -np.inf)
    idx = np.argsort(-s, axis=1)[:, :k]
    return np.take_along_axis(s, idx, 1).astype(np.float32), idx


def _self_best(x):
    """Same-side decoy: each sentence's best ratio margin against its own side, self excluded."""
    from xmine.mining.select import margin_score

    c, idx = _knn(x, x, K, exclude_self=True)
    mean = c.mean(1)
    return margin_score(c, mean[:, None], mean[idx], "ratio").max(1)


def collect(families) -> None:
    from xmine.benchmarks.common import RawEmbedder, l2_normalise
    from xmine.io.dedup import dedup
    from xmine.encoders import load_encoder
    from xmine.encoders.projection import DEFAULT, choose_projection, resolve_projection

    SETS.mkdir(parents=True, exist_ok=True)
    enc = load_encoder("me5-small")
    raw = RawEmbedder(enc, show_progress=False)
    proj = resolve_projection(choose_projection(DEFAULT, encoder_name=enc.name, encoder_fp=enc.fingerprint()).path)
    for family in families:
        for lang, seed, density in itertools.product(FAMILIES[family], SEEDS, DENSITIES):
            path = SETS / f"{family}_{lang}_s{seed}_f{density}.npz"
            if path.exists():
                continue
            ms = build(family, lang, seed, density)
            us, _ = dedup(ms.src[1])
            ue, _ = dedup(ms.en[1])
            src_text, en_text = dict(zip(*ms.src)), dict(zip(*ms.en))
            gold_of = {src_text[a]: en_text[b] for a, b in ms.gold}
            pos = {t: i for i, t in enumerate(ue)}
            out = {"gold": np.array([pos.get(gold_of.get(t), -1) for t in us])}
            xr, yr = raw(us), raw(ue)
            for space in ("raw", "proj"):
                x, y = xr, yr
                if space == "proj":
                    x, y = proj.transform(xr, "meaning"), proj.transform(yr, "meaning")
                x, y = l2_normalise(x), l2_normalise(y)
                fs, fi = _knn(x, y, KNN)
                bs, bi = _knn(y, x, KNN)
                out |= {f"{space}_fs": fs, f"{space}_fi": fi, f"{space}_bs": bs, f"{space}_bi": bi,
                        f"{space}_dx": _self_best(x), f"{space}_dy": _self_best(y)}
            np.savez_compressed(path, **out)
            print(path.name, flush=True)


# ---------------------------------------------------------------- rules
class MiningCase:
    """One set in one space: the mined candidates, their truth, and each direction's best margins."""

    def __init__(self, d, space: str):
        from xmine.mining.select import MiningConfig, margin_score, select_pairs

        self.d, self.space = d, space
        fs, fi, bs, bi = (d[f"{space}_{n}"] for n in ("fs", "fi", "bs", "bi"))
        self.fs, self.bs = fs, bs
        self.mined = select_pairs(fs[:, :K], fi[:, :K], bs[:, :K], bi[:, :K], config=MiningConfig(k=K))
        gold = d["gold"]
        self.correct = gold[self.mined.src_idx] == self.mined.tgt_idx
        self.n_gold = int((gold >= 0).sum())
        self.mx, self.my = fs[:, :K].mean(1), bs[:, :K].mean(1)
        # every candidate's ratio margin in each direction, and each sentence's best
        self.fm = margin_score(fs[:, :K], self.mx[:, None], self.my[fi[:, :K]], "ratio")
        self.bm = margin_score(bs[:, :K], self.my[:, None], self.mx[bi[:, :K]], "ratio")
        self.fbest, self.bbest = self.fm.max(1), self.bm.max(1)
        self.null_x = gold < 0
        has = np.zeros(len(bs), bool)
        has[gold[gold >= 0]] = True
        self.null_y = ~has

    def prf(self, t):
        keep = self.mined.score >= t
        tp, k = int(self.correct[keep].sum()), int(keep.sum())
        p, r = (tp / k if k else 1.0), tp / max(self.n_gold, 1)
        return p, r, (2 * p * r / (p + r) if p + r else 0.0)

    def best(self) -> tuple[float, float]:
        """(threshold, F1) at the set's own best threshold (the gold's view)."""
        order = np.argsort(-self.mined.score, kind="stable")
        f = 2 * np.cumsum(self.correct[order]) / (np.arange(1, len(order) + 1) + self.n_gold)
        if not len(f):
            return 1.0, 0.0
        i = int(np.argmax(f))
        return float(self.mined.score[order][i]), float(f[i])

    def best_f1(self):
        return self.best()[1]


def _survival(sample):
    s = np.sort(np.asarray(sample, np.float64))
    return lambda t: 1 - np.searchsorted(s, t, side="left") / max(len(s), 1)


def _fit_gamma_prior(S, a):
    from scipy.optimize import minimize
    from scipy.special import gammaln

    S = S[S > 0]

    def nll(th):
        a0, b0 = np.exp(th)
        return -np.sum(gammaln(a + a0) - gammaln(a0) + a0 * np.log(b0) - (a + a0) * np.log(b0 + S))

    return np.exp(minimize(nll, [np.log(3.0), np.log(3.0 * S.mean() / a)], method="Nelder-Mead").x)


def _spacing_tail(sims, my_best, rest_best):
    """P_null(best ratio margin >= t) per sentence (function of t) under the spacing model."""
    c = sims[:, :K].astype(np.float64)
    D = c[:, :-1] - c[:, 1:]
    a = K - 2
    S = np.maximum(sum((i + 1) * D[:, i] for i in range(1, K - 1)), 1e-12)
    a0, b0 = _fit_gamma_prior(S, a)
    R = c[:, 1:].sum(1)

    def count(t):
        t = np.asarray(t, np.float64)[:, None]
        need = t * (R / (2 * K) + my_best / 2) / (1 - t / (2 * K))  # cosine at which the margin is t
        d = np.maximum(need - c[:, 1], 0)
        p = (1 + d / (S + b0)) ** (-(a + a0))
        return np.where(rest_best >= t, 1.0, p).sum(1)
    return count


def null_counts(case: MiningCase, model: str, zscore_tail=None):
    """(N0_src(t), N0_tgt(t)) functions: expected null best margins >= t on each side."""
    nx, ny = len(case.fbest), len(case.bbest)
    if model == "oracle":
        sx, sy = _survival(case.fbest[case.null_x]), _survival(case.bbest[case.null_y])
    elif model == "decoy":
        qs = np.linspace(0.2, 0.8, 21)

        def matched(decoy, real):
            b, a = np.polyfit(np.quantile(decoy, qs), np.quantile(real, qs), 1)
            return _survival(a + b * decoy)
        sx = matched(case.d[f"{case.space}_dx"], case.fbest)
        sy = matched(case.d[f"{case.space}_dy"], case.bbest)
    elif model == "zscore":
        def standardised(b):
            q25, q50, q75 = np.quantile(b, [0.25, 0.5, 0.75])
            return lambda t: zscore_tail((np.asarray(t) - q50) / (q75 - q25))
        sx, sy = standardised(case.fbest), standardised(case.bbest)
    elif model == "spacing":
        fi, bi = case.d[f"{case.space}_fi"], case.d[f"{case.space}_bi"]
        return (_spacing_tail(case.fs, case.my[fi[:, 0]], case.fm[:, 1:].max(1)),
                _spacing_tail(case.bs, case.mx[bi[:, 0]], case.bm[:, 1:].max(1)))
    else:
        raise ValueError(model)
    return (lambda t: nx * sx(t)), (lambda t: ny * sy(t))


def f1_rule(case: MiningCase, model: str, zscore_tail=None):
    """(threshold, estimated precision there) of the estimated-F1 maximum."""
    cx, cy = null_counts(case, model, zscore_tail)
    n0 = (cx(TS) + cy(TS)) / 2
    scores = np.sort(case.mined.score)[::-1]
    kept = np.searchsorted(-scores, -TS, side="right")
    n0 = np.minimum(n0, kept)
    tp = kept - n0
    i = int(np.argmax(2 * tp / np.maximum(kept + max(tp.max(), 1), 1e-9)))
    return float(TS[i]), float(1 - n0[i] / max(kept[i], 1))


def learn_zscore_tail(families):
    """Pooled null z-scores of both directions and spaces; exponential tail beyond the 99th percentile."""
    z = []
    for fam in families:
        for path in sorted(glob.glob(str(SETS / f"{fam}_*.npz"))):
            d = np.load(path)
            for space in ("raw", "proj"):
                case = MiningCase(d, space)
                for b, null in ((case.fbest, case.null_x), (case.bbest, case.null_y)):
                    q25, q50, q75 = np.quantile(b, [0.25, 0.5, 0.75])
                    z.append((b[null] - q50) / (q75 - q25))
    z = np.sort(np.concatenate(z))
    z0 = np.quantile(z, 0.99)
    lam = 1 / (z[z > z0] - z0).mean()

    def tail(x):
        x = np.asarray(x, np.float64)
        return np.where(x > z0, 0.01 * np.exp(-lam * (x - z0)), 1 - np.searchsorted(z, x, side="left") / len(z))
    return tail


def report(models=("oracle", "spacing", "decoy", "zscore")) -> dict:
    rows = collections.defaultdict(list)
    for family in FAMILIES:
        tail = learn_zscore_tail([f for f in FAMILIES if f != family]) if "zscore" in models else None
        for path in sorted(glob.glob(str(SETS / f"{family}_*.npz"))):
            d = np.load(path)
            density = Path(path).stem.split("_f")[-1]
            for space in ("raw", "proj"):
                case = MiningCase(d, space)
                best = case.best_f1()
                fixed = case.prf(FIXED[space])[2]
                rows[(family, space, "fixed", density)].append((best, fixed, np.nan, np.nan))
                for model in models:
                    t, est_p = f1_rule(case, model, tail)
                    p, _, f = case.prf(t)
                    rows[(family, space, model, density)].append((best, f, est_p, p))
    out = {}
    for (family, space, rule, density), r in sorted(rows.items()):
        a = np.array(r, float)
        gap = 100 * (a[:, 0] - a[:, 1])
        out[f"{family}/{space}/{rule}/{density}"] = {
            "sets": len(a), "best_f1": round(100 * a[:, 0].mean(), 1), "rule_f1": round(100 * a[:, 1].mean(), 1),
            "gap_mean": round(gap.mean(), 1), "gap_max": round(gap.max(), 1),
            "est_minus_true_precision": None if rule == "fixed" else round(float(np.mean(a[:, 2] - a[:, 3])), 3),
            "abs_precision_error": None if rule == "fixed" else round(float(np.mean(np.abs(a[:, 2] - a[:, 3]))), 3)}
    return out


def _robust_scale(case: MiningCase) -> tuple[float, float]:
    """(median, IQR) of both directions' best margins: a set's own location and spread."""
    q25, q50, q75 = np.quantile(np.r_[case.fbest, case.bbest], [0.25, 0.5, 0.75])
    return float(q50), float(q75 - q25)


def bounds() -> dict:
    """What a rule mapping a set to ONE number can reach, per family x space x density cell.

    - `cell_fixed` / `cell_z`: the best constant threshold, or multiplier z in t = median + z IQR,
      chosen per cell WITH the gold of its 30 sets (an optimistic bound for such rules);
    - `adaptive_z`: z as a linear function of log(share of candidates above median + 6 IQR) (a
      gold-free density estimate), fitted on two families and reported on the third.
    Each value: F1 points below each set's own best threshold, mean over the cell's sets."""
    cases = collections.defaultdict(list)
    for path in sorted(glob.glob(str(SETS / "*.npz"))):
        family, density = Path(path).stem.split("_")[0], Path(path).stem.split("_f")[-1]
        d = np.load(path)
        for space in ("raw", "proj"):
            cases[(family, space, density)].append(MiningCase(d, space))
    grid_t, grid_z = np.arange(1.0, 1.1, 0.0005), np.arange(0.0, 8.0, 0.05)
    out = {}
    for cell, cc in sorted(cases.items()):
        best = np.array([c.best_f1() for c in cc])
        scale = [_robust_scale(c) for c in cc]
        ft = np.array([[c.prf(t)[2] for t in grid_t] for c in cc])
        fz = np.array([[c.prf(m + z * iqr)[2] for z in grid_z] for c, (m, iqr) in zip(cc, scale)])
        out["/".join(cell)] = {"cell_fixed": round(100 * float((best - ft[:, ft.mean(0).argmax()]).mean()), 1),
                               "cell_z": round(100 * float((best - fz[:, fz.mean(0).argmax()]).mean()), 1)}

    def features(c):
        m, iqr = _robust_scale(c)
        n = (len(c.fbest) + len(c.bbest)) / 2
        return np.array([1.0, np.log((np.sum(c.mined.score > m + 6 * iqr) + 1) / n)]), m, iqr

    for family in FAMILIES:
        train = [(features(c), c) for cell, cc in cases.items() if cell[0] != family for c in cc]
        x = np.array([f[0] for f, _ in train])
        y = np.array([(c.best()[0] - f[1]) / f[2]
                      for f, c in train])
        w = np.linalg.lstsq(x, y, rcond=None)[0]
        for cell, cc in cases.items():
            if cell[0] == family:
                gaps = [c.best_f1() - c.prf(m + (f @ w) * iqr)[2] for c in cc for f, m, iqr in [features(c)]]
                out["/".join(cell)]["adaptive_z"] = round(100 * float(np.mean(gaps)), 1)
                out["/".join(cell)]["adaptive_z_max"] = round(100 * float(np.max(gaps)), 1)
    return out



@click.command("threshold-study")
@click.argument("step", type=click.Choice(["collect", "report", "bounds"]))
@click.argument("families", nargs=-1, type=click.Choice(list(FAMILIES)))
def command(step, families):
    """Choosing the mining threshold without gold: collect kNN lists, or report every rule.

    collect [FAMILY ...]: embeddings (cached) and kNN lists of every set; report: every rule,
    leave one family out, into benchmarks/results/threshold_study.json; bounds: what any rule that
    maps a set to one number can reach (added to the same file).
    """
    if step == "collect":
        collect(list(families) or list(FAMILIES))
        return
    from measure import write_result_json
    from xmine.benchmarks.common import read_result

    dest = ROOT / "benchmarks" / "results" / "threshold_study.json"
    if step == "bounds":
        result = read_result(dest) | {"bounds": bounds()}
        for key, v in result["bounds"].items():
            print(f"{key:24s} " + "  ".join(f"{k} {x:5.1f}" for k, x in v.items()))
        write_result_json(dest, result, kind=STUDY_KIND)
        print(f"wrote {dest}", file=sys.stderr)
        return
    res = report()
    print(f"{'family/space/rule/density':42s} {'best':>6s} {'rule':>6s} {'gap':>6s} {'max':>6s} {'P err':>7s}")
    for key, v in res.items():
        err = "" if v["est_minus_true_precision"] is None else f"{v['est_minus_true_precision']:+.3f}"
        print(f"{key:42s} {v['best_f1']:6.1f} {v['rule_f1']:6.1f} {v['gap_mean']:6.1f} {v['gap_max']:6.1f} {err:>7s}")
    write_result_json(dest, {"sets_per_cell": "10 languages x 3 seeds", "fixed_thresholds": FIXED, "k": K, "results": res},
                      kind=STUDY_KIND)
    print(f"wrote {dest}", file=sys.stderr)
