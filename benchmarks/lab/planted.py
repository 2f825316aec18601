"""`planted`: do known translations planted in a run say how its own translations score? (issue #39)

    .venv/bin/python benchmarks/lab/run.py planted      # -> benchmarks/results/planted.json

The last of the threshold study's untried ideas (threshold_study.md, "What would close it"): plant
known translations of the run's language pair (FLORES-200 devtest, the one parallel text every
language has, and what `xmine calibrate` reads) and read the run's recall at any threshold off the
planted pairs. With a recall curve R(t) from the plants and the count N(t) of the run's candidates
at or above t, the number of translations T is at most N(t) / R(t) at every t (false pairs are never
negative), so T' = min N(t) / R(t) over the thresholds where R(t) >= r0, and the estimated F1(t) =
2 T' R(t) / (N(t) + T') gives a threshold with no gold: a recall side for the mixture's null, one
measured in the run's own neighbourhoods.

Everything rests on one assumption: that planted pairs score as the run's own translations do. It is
measured here on the calibration sets of the news, short and templated families (a FLORES-200 file
for the language; not the wiki family, whose sets are FLORES-200 devtest itself), in each space at
its default margin, on the kNN lists of `threshold-rules knn`:
- each of 200 FLORES-200 pairs (seeded; neither side in the set) scored as if planted alone: its
  two sentences' neighbourhoods are the set's other side plus its partner (exact), its score the
  space's margin, and it counts as found where it is the best candidate of either sentence (max
  retrieval; the corpus rows' own neighbourhoods are taken as unchanged by one plant);
- `excess`: the median margin of the set's gold candidates above the margin's neutral score over the
  plants' (1.0: plants score as the translations do);
- the plants' recall at the set's best-F1 threshold against its true recall there;
- the threshold of the estimate above at r0 = 0.5 and 0.8 (stated before the run, not chosen), and at
  the true T (the curve alone judged), each as its F1 gap to the set's best and precision, beside the
  shipped rule's held-out threshold on the same set (threshold-margins.json, leave one family out).

What would have shipped (stated before the run): an option of `xmine mine` with FLORES-200 at hand,
only if at a stated r0 the estimate is within the shipped rule's held-out gap on each family at a mean
precision >= 0.85 over the news and short sets; it would then be reported on the held-out checks.
"""

from __future__ import annotations

import time

import click
import numpy as np

from calibrate_defaults import DATA, KNN, SPACE_LANGUAGES, SPACES, _sets, _vectors, exact_knn
from threshold_rules import _write, default_margin_of, held_out_thresholds, knn_path, runs_of
from xmine.mining.calibrate import NEUTRAL

#: the plants per set (FLORES-200 devtest has 1,012 lines)
PLANTS = 200
#: the r0 values the estimate is shown at, fixed before the run
R0 = (0.5, 0.8)
FAMILIES = ("news", "short", "templated")
#: the FLORES-200 file of a set language that FLORES writes in two scripts: the script of the set's text
FLORES_OF = {"cmn": "zho_Hans", "ara": "arb_Arab"}


def flores_pairs(iso: str) -> list[tuple[str, str]] | None:
    """FLORES-200 devtest (xx, English) pairs of the language, None where FLORES has no file for it."""
    from xmine.langs import same_language
    from xmine.mining.calibrate import flores_file, read_aligned

    folder = DATA / "parallel/flores200/devtest"
    code = FLORES_OF.get(iso) or next((p.stem for p in sorted(folder.glob("*.devtest"))
                                       if same_language(p.stem, iso)), None)
    if code is None:
        return None
    return read_aligned(flores_file(folder, code), flores_file(folder, "eng_Latn"))


def plant_scores(xp, yp, x, y, mean_x, mean_y, margin: str) -> tuple[np.ndarray, np.ndarray]:
    """Each plant (row i of xp with row i of yp) scored as if planted alone among x and y, whose rows'
    neighbourhood means are mean_x and mean_y: (its margin, whether it is the best candidate of
    either of its sentences)."""
    from xmine.mining.select import margin_score

    c = np.sum(xp * yp, axis=1)
    fs, fi = exact_knn(xp, y, KNN)
    bs, bi = exact_knn(yp, x, KNN)
    # a plant's neighbourhood: its k nearest among the other side and its partner
    m_xp = -np.sort(-np.concatenate([fs, c[:, None]], axis=1), axis=1)[:, :KNN].mean(axis=1)
    m_yp = -np.sort(-np.concatenate([bs, c[:, None]], axis=1), axis=1)[:, :KNN].mean(axis=1)
    score = margin_score(c, m_xp, m_yp, margin)
    best_other_f = margin_score(fs, m_xp[:, None], mean_y[fi], margin).max(axis=1)
    best_other_b = margin_score(bs, m_yp[:, None], mean_x[bi], margin).max(axis=1)
    return score.astype(np.float64), (score >= best_other_f) | (score >= best_other_b)


def recall_curve(score: np.ndarray, found: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The plants' recall at each threshold of t: found and scoring >= t."""
    s = np.sort(score[found])
    return (len(s) - np.searchsorted(s, t, side="left")) / len(score)


def estimated_threshold(run, plant_r: np.ndarray, r0: float | None) -> float:
    """The threshold of the best estimated F1 over the run's candidate scores (`run.s`, descending):
    T' = min N/R over the thresholds where R >= r0 (or the set's true count where r0 is None)."""
    n = np.arange(1, len(run.s) + 1)  # candidates at or above each run.s[i]
    if r0 is None:
        t_count = run.n_gold
    else:
        ok = plant_r >= r0
        t_count = float(np.min(n[ok] / plant_r[ok])) if ok.any() else float(n[-1])
    f1 = 2 * t_count * plant_r / (n + t_count)
    return float(run.s[int(np.argmax(f1))])


def measure_space(space: str, sets, log) -> list[dict]:
    """One row per set of FAMILIES that FLORES-200 has the language of (module doc), each line `log`ged."""
    margin = default_margin_of(space)
    langs = SPACE_LANGUAGES.get(space)
    mine = [s for s in sets if s.family in FAMILIES and (langs is None or s.iso in langs)]
    runs = runs_of(space, [{"name": s.name} for s in mine], margin, ("max",))
    arrays = np.load(knn_path(space))
    rule = held_out_thresholds(space, margin)
    neutral = NEUTRAL[margin]
    rows = []
    for st in mine:
        pairs = flores_pairs(st.iso)
        if pairs is None or st.name not in runs:
            continue
        on_x, on_y = set(st.xx), set(st.en)
        pool = [(a, b) for a, b in pairs if a not in on_x and b not in on_y]
        pick = np.random.default_rng(0).permutation(len(pool))[:PLANTS]
        xp, yp = (_vectors(space, [pool[i][j] for i in pick]) for j in (0, 1))
        x, y = _vectors(space, st.xx), _vectors(space, st.en)
        mean_x, mean_y = arrays[f"{st.name}|fs"].mean(axis=1), arrays[f"{st.name}|bs"].mean(axis=1)
        score, found = plant_scores(xp, yp, x, y, mean_x, mean_y, margin)
        run = runs[st.name]["max"]
        plant_r = recall_curve(score, found, run.s)
        gold_scores = run.s[np.diff(np.concatenate([[0], np.round(run.p * np.arange(1, len(run.s) + 1))])) > 0]
        cuts = np.flatnonzero(run.cut)  # the positions a threshold can cut at (after ties)
        best_i = int(cuts[np.argmax(run.f1[cuts])])
        row = {"set": st.name, "family": st.family, "lang": st.iso, "xx": len(st.xx), "en": len(st.en),
               "gold": run.n_gold, "plants": len(pick), "plants_found": float(found.mean()),
               "median_chars": {"xx": float(np.median([len(t) for t in st.xx])),
                                "plants": float(np.median([len(pool[i][0]) for i in pick]))},
               "median_score": {"gold": float(np.median(gold_scores)), "plants": float(np.median(score))},
               "excess": float((np.median(gold_scores) - neutral) / (np.median(score) - neutral)),
               "at_best": {"threshold": float(run.s[best_i]), "recall": float(run.r[best_i]),
                           "plants_recall": float(plant_r[best_i])},
               "best_f1": run.best, "thresholds": {}}
        for label, t in [*((f"estimate r0={r0}", estimated_threshold(run, plant_r, r0)) for r0 in R0),
                         ("estimate, true count", estimated_threshold(run, plant_r, None)),
                         ("shipped rule (held out)", rule.get(st.name))]:
            if t is None:
                continue
            p, r, f1, _ = run.at(float(np.float32(t)))
            row["thresholds"][label] = {"threshold": t, "precision": p, "recall": r, "f1": f1, "gap": run.best - f1}
        rows.append(row)
        log(f"{space:<14} {st.name:<22} excess {row['excess']:.2f}  plants' R at best {plant_r[best_i]:.2f} "
                   f"(true {run.r[best_i]:.2f})  " + "  ".join(
                       f"{k.split(' (')[0]} gap {100 * v['gap']:.1f}" for k, v in row["thresholds"].items()))
    return rows


def summary(rows: list[dict]) -> dict:
    """Per family and over all: median excess, mean plants' and true recall at each set's best, and per
    threshold the mean gap (F1 points), worst, mean precision (x100)."""
    out = {}
    for fam in (*FAMILIES, "all"):
        sub = [r for r in rows if fam in ("all", r["family"])]
        if not sub:
            continue
        out[fam] = {"sets": len(sub), "excess_median": float(np.median([r["excess"] for r in sub])),
                    "recall_at_best": 100 * float(np.mean([r["at_best"]["recall"] for r in sub])),
                    "plants_recall_at_best": 100 * float(np.mean([r["at_best"]["plants_recall"] for r in sub])),
                    "thresholds": {k: {"gap": 100 * float(np.mean([r["thresholds"][k]["gap"] for r in sub])),
                                       "worst": 100 * float(max(r["thresholds"][k]["gap"] for r in sub)),
                                       "precision": 100 * float(np.mean([r["thresholds"][k]["precision"]
                                                                         for r in sub]))}
                                   for k in sub[0]["thresholds"]}}
    return out


@click.command("planted")
@click.option("--space", "spaces", type=click.Choice(list(SPACES)), multiple=True, help="Default: every space.")
def command(spaces):
    """Planted FLORES-200 translations as a run's recall curve, against its own translations."""
    started = time.monotonic()
    sets = _sets()
    result = {"command": "python benchmarks/lab/run.py planted", "plants": PLANTS, "r0": list(R0), "k": KNN,
              "margins": {}, "spaces": {}}
    table = []
    for space in spaces or SPACES:
        rows = measure_space(space, sets, click.echo)
        result["margins"][space] = default_margin_of(space)
        result["spaces"][space] = {"summary": summary(rows), "per_set": rows}
        for fam, s in result["spaces"][space]["summary"].items():
            for label, v in s["thresholds"].items():
                table.append([space, fam, s["sets"], round(s["excess_median"], 2), round(s["recall_at_best"], 1),
                              round(s["plants_recall_at_best"], 1), label, round(v["gap"], 2), round(v["worst"], 1),
                              round(v["precision"], 1)])
    _write(result, "planted.json", "planted", started, table,
           ["space", "family", "sets", "excess (median)", "R at best", "plants' R at best", "threshold", "gap",
            "worst", "P"])
