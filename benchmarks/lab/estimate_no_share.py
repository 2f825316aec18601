"""`estimate-no-share`: a space without a calibration on runs whose scores show no share of translations.

    .venv/bin/python benchmarks/lab/run.py estimate-no-share      # -> benchmarks/results/estimate-no-share.json

A space xmine ships no calibration for (a user's projection, an encoder of the user's) keeps the
cut its run's own scores give (`run_estimate.estimated_threshold`: the largest estimated F1 under a
Gumbel null fitted to the candidates). Where that null fits every score (no share of translations
found), the run holds either no translation or mostly translations, and that cut keeps most
candidates either way. Two rules are studied here:
- `shipped`: where no share is found, the share of mutual best pairs among the candidates below the
  median score (`run_estimate.mutual_low_share`) decides; below `MUTUAL_LOW_TRANSLATIONS` the
  candidates are taken for no translation and only the tail of their scores' law is kept (its
  quantile 1 - 1/n). The cutoff is chosen leave one family out (`choice`: on the runs where no
  share is found, the value that gets fewest pairs wrong on the other two families, translations
  dropped that the old cut kept plus false pairs kept, the two alike as in F1; the middle of the
  tied values), and the shipped value is what the families give;
- `floor where found` (not shipped): where a share is found but the fit's own count puts its best
  cut's precision below 0.5, the same tail cut.

Measured on real text, each me5-small space taken as uncalibrated (the shipped projection and
raw), on every me5-small set of the held-out checks (`heldout-news`, `heldout-wiki`,
`heldout-short`: their sets rebuilt as they build them), mined as `xmine mine` mines (max
retrieval, ratio margin, k = 4, unique sentences) in four forms:
- `with gold`: the set as it is (a fifth to a third of a side has its translation);
- `without gold`: its gold pairs taken out (the distractors are drawn so that no unlisted
  translation is left): every pair kept is false;
- `mostly gold`: its gold pairs' sentences and as many distractors a side as make 30% of it (the
  README demo's share);
- `gold only`: only its gold pairs' sentences (a bitext parallel already);
and the README demo itself (`demo/`: 117 translations among 167 lines a side). Per form and rule:
F1, precision, recall, pairs kept and false, and the low-half mutual shares where no share is
found. Also `gumbel`: scores drawn from a Gumbel law alone, the pairs each rule keeps.
"""

from __future__ import annotations

import time

import click
import numpy as np

from calibrate_defaults import DATA, ROOT, WORK
from heldout_news import _spaces, variant_of

#: the held-out checks whose sets are read (their lab modules' `build` and `data_files`)
CHECKS = ("heldout-news", "heldout-wiki", "heldout-short")
SPACES = ("projection", "raw me5-small")
FORMS = ("with gold", "without gold", "mostly gold", "gold only")
#: `mostly gold`: the distractors' share of each side
MOSTLY_GOLD_DISTRACTORS = 0.3
#: the studied floor on the estimated precision of the best cut where a share is found (not shipped)
FLOOR = 0.5
#: the thresholds compared: the product's before the rule, with it, and the floor studied
RULES = ("before", "shipped", "floor where found")
#: the cutoffs the leave-one-family-out choice ranges over
GRID = np.round(np.arange(0.50, 1.0001, 0.01), 2)


def _check_module(check: str):
    import importlib

    return importlib.import_module(check.replace("-", "_"))


def thresholds(scores: np.ndarray, mutual_low: float | None) -> tuple[dict, dict]:
    """Per rule of RULES its threshold (None: no estimate, every pair kept), and the estimate's own
    figures: whether a share was found, its best cut's estimated precision, and the tail cut (None
    where a share is found)."""
    from xmine.mining.run_estimate import estimated_threshold, null_tail

    before = estimated_threshold(scores)
    if before is None:
        return dict.fromkeys(RULES), {}
    shipped = estimated_threshold(scores, mutual_low=mutual_low)
    precision = before.f1_cut_precision
    tail = float(np.float32(max(before.value, null_tail(scores))))
    found = before.mixture_found
    return ({"before": before.value, "shipped": shipped.value,
             "floor where found": tail if found and precision < FLOOR else before.value},
            {"mixture_found": found, "estimated_precision": round(precision, 4), "tail_cut": shipped.tail_cut,
             "tail": None if found else tail})


def _at(score: np.ndarray, correct: np.ndarray, n_gold: int, t: float | None) -> dict:
    kept = score >= np.float32(t) if t is not None else np.ones(len(score), bool)
    tp = int(np.count_nonzero(kept & correct))
    n = int(kept.sum())
    p = tp / n if n else 1.0
    r = tp / n_gold if n_gold else 0.0
    return {"kept": n, "false": n - tp, "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def measure_set(embed, files: dict, form: str) -> dict:
    """One set (BUCC files) in one of FORMS (`measure`)."""
    from xmine.benchmarks.bucc import read_bucc_file, read_gold

    (src_ids, src), (en_ids, en) = read_bucc_file(files["src"]), read_bucc_file(files["en"])
    text_src, text_en = dict(zip(src_ids, src)), dict(zip(en_ids, en))
    return measure(embed, src, en, {(text_src[a], text_en[b]) for a, b in read_gold(files["gold"])}, form)


def _form(side: list[str], gold_side: set[str], form: str) -> list[str]:
    """The unique sentences of one side that `form` keeps (the distractors in the side's order)."""
    unique = list(dict.fromkeys(side))
    if form == "with gold":
        return sorted(unique)
    if form == "without gold":
        return sorted(s for s in unique if s not in gold_side)
    if form == "gold only":
        return sorted(s for s in unique if s in gold_side)
    gold = [s for s in unique if s in gold_side]
    extra = round(len(gold) * MOSTLY_GOLD_DISTRACTORS / (1 - MOSTLY_GOLD_DISTRACTORS))
    return sorted(gold + [s for s in unique if s not in gold_side][:extra])


def measure(embed, src: list[str], en: list[str], gold: set[tuple[str, str]], form: str) -> dict:
    """Two sides and their gold (sentence pairs) in one of FORMS, mined as `xmine mine` mines, every
    candidate kept: sizes, the estimate's figures, the low-half mutual share, and each rule's
    threshold and result (and the tail cut's, where no share is found)."""
    from xmine.mining import MiningConfig, mine_embeddings
    from xmine.mining.run_estimate import mutual_low_share
    from xmine.mining.select import BOTH

    us, ue = _form(src, {a for a, _ in gold}, form), _form(en, {b for _, b in gold}, form)
    gold = {(a, b) for a, b in gold if a in set(us) and b in set(ue)}
    x, y = (np.asarray(embed(u), np.float32) for u in (us, ue))
    mined = mine_embeddings(x, y, config=MiningConfig(k=4, margin="ratio", retrieval="max"))
    score = mined.score.astype(np.float32)
    correct = np.array([(us[a], ue[b]) in gold for a, b in zip(mined.src_idx.tolist(), mined.tgt_idx.tolist())], bool)
    mutual_low = mutual_low_share(score, mined.direction == BOTH)
    ts, figures = thresholds(score, mutual_low)
    tail = figures.pop("tail", None)
    return {"xx": len(us), "en": len(ue), "gold": len(gold), "candidates": len(score),
            "mutual_low": None if mutual_low is None else round(mutual_low, 4)} | figures | {
        rule: {"threshold": t} | _at(score, correct, len(gold), t) for rule, t in ts.items()} | (
        {"tail": {"threshold": tail} | _at(score, correct, len(gold), tail)} if tail is not None else {})


def demo_set() -> tuple[list[str], list[str], set[tuple[str, str]]]:
    """The README demo (demo/de.txt, demo/en.txt, demo/gold.tsv: 1-based line numbers, a header)."""
    import csv

    folder = ROOT / "demo"
    de, en = ((folder / f"{lang}.txt").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))
    with open(folder / "gold.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:]
    return de, en, {(de[int(a) - 1], en[int(b) - 1]) for a, b in rows}


def gumbel_draws(sizes=(1_000, 5_000, 20_000, 100_000), draws: int = 30) -> dict:
    """Scores drawn from a Gumbel law alone (location 1.02, scale 0.005: no translation), seeded: per
    size, the draws where the fit finds a share, and the pairs each rule keeps (all false)."""
    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        kept = {rule: [] for rule in RULES}
        found = 0
        for _ in range(draws):
            score = rng.gumbel(1.02, 0.005, n).astype(np.float32)
            ts, figures = thresholds(score, None)
            found += figures["mixture_found"]
            for rule, t in ts.items():
                kept[rule].append(int(np.count_nonzero(score >= np.float32(t))))
        out[str(n)] = {"draws": draws, "share_found": found} | {
            rule: {"mean": round(float(np.mean(k)), 1), "max": int(max(k))} for rule, k in kept.items()}
    return out


def _cost(runs: list[tuple], c: float) -> tuple[int, int]:
    """(translations dropped that the cut of the largest F1 kept, false pairs kept) over `runs`
    ((mutual_low, its result at that cut, at the tail cut)) where those below `c` take the tail cut."""
    lost = false = 0
    for mutual_low, at_cut, at_tail in runs:
        got = at_tail if mutual_low < c else at_cut
        lost += (at_cut["kept"] - at_cut["false"]) - (got["kept"] - got["false"])
        false += got["false"]
    return lost, false


def choose_cutoff(per_family: dict[str, list[tuple]]) -> dict:
    """The cutoff of fewest pairs wrong (`_cost`), chosen on all families but one, per held-out
    family (the middle of the tied values), and its result there; and on all of them."""
    def best(runs):
        costs = [sum(_cost(runs, c)) for c in GRID]
        tied = [float(c) for c, v in zip(GRID, costs) if v == min(costs)]
        return {"cutoff": round(float(np.median(tied)), 3), "tied": [tied[0], tied[-1]], "train_wrong": min(costs)}

    out = {}
    for held in per_family:
        chosen = best([r for f, runs in per_family.items() if f != held for r in runs])
        lost, false = _cost(per_family[held], chosen["cutoff"])
        at_cut = per_family[held]
        out[held] = chosen | {"runs": len(at_cut), "held_out_translations_lost": lost, "held_out_false_kept": false,
                              "before_translations": sum(a["kept"] - a["false"] for _, a, _ in at_cut),
                              "before_false": sum(a["false"] for _, a, _ in at_cut)}
    out["all families"] = best([r for runs in per_family.values() for r in runs])
    return out


def summarise(per: dict) -> dict:
    out = {"sets": len(per), "not_found": sum(not r.get("mixture_found", True) for r in per.values())}
    for rule in RULES:
        for key in ("f1", "precision", "recall", "kept", "false"):
            out[f"{rule}: {key}"] = round(float(np.mean([r[rule][key] for r in per.values()])), 4)
    lows = [r["mutual_low"] for r in per.values() if r["mutual_low"] is not None and not r.get("mixture_found", True)]
    if lows:
        out["mutual_low where no share is found (min, max)"] = [min(lows), max(lows)]
    return out


@click.command("estimate-no-share")
@click.option("--checks", default=",".join(CHECKS), show_default=True,
              help="Comma-separated held-out checks whose sets are read.")
def command(checks: str):
    """The estimated threshold of a space without a calibration on runs with no translation or mostly translations."""
    from xmine.mining.run_estimate import MUTUAL_LOW_TRANSLATIONS
    from xmine.benchmarks.common import RawEmbedder, Variant, results_dir, write_result
    from xmine.benchmarks.mining import set_files
    from calibrate_defaults import _encoder

    names = [c.strip() for c in checks.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        raise click.BadParameter(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}",
                                 param_hint="--checks")
    started = time.monotonic()
    rows, details, files = [], {"sets": {}, "summary": {}, "demo": {}, "gumbel": gumbel_draws()}, []
    click.echo(f"Gumbel draws: {details['gumbel']}")
    for check in names:
        module = _check_module(check)
        counts = module.build(DATA, WORK / check)
        files += module.data_files()
        for space, encoder_name, projection, _ in _spaces():
            if space not in SPACES:
                continue
            variant = variant_of(encoder_name, projection)
            for form in FORMS:
                per = {}
                for name, c in counts["sets"].items():
                    if space not in c.get("spaces", [space]):
                        continue
                    r = per[name] = measure_set(variant.embed, set_files(WORK / check, name), form)
                    click.echo(f"{check} {space:<14} {form:<12} {name:<16} " + "  ".join(
                        f"{rule}: kept {r[rule]['kept']} ({r[rule]['false']} false, F1 {r[rule]['f1']:.3f})"
                        for rule in RULES))
                key = f"{check} | {space} | {form}"
                details["sets"][key] = per
                summary = details["summary"][key] = summarise(per)
                rows.append([check, space, form, summary["sets"], summary["not_found"],
                             *(v for rule in RULES for v in (round(summary[f"{rule}: kept"], 1),
                                                             round(summary[f"{rule}: false"], 1),
                                                             round(100 * summary[f"{rule}: f1"], 1),
                                                             round(100 * summary[f"{rule}: precision"], 1)))])
                click.echo(f"{key}: {details['summary'][key]}")
    de, en, gold = demo_set()
    for space, encoder_name, projection, _ in _spaces():
        if space in SPACES:
            r = details["demo"][space] = measure(variant_of(encoder_name, projection).embed, de, en, gold, "with gold")
            click.echo(f"demo {space}: {r}")
    no_share: dict[str, list[tuple]] = {}
    for key, per in details["sets"].items():
        no_share.setdefault(key.split(" | ")[0], []).extend(
            (r["mutual_low"], r["before"], r["tail"]) for r in per.values() if "tail" in r)
    details["choice"] = choose_cutoff(no_share) | {"shipped": MUTUAL_LOW_TRANSLATIONS}
    click.echo(f"the cutoff, leave one family out: {details['choice']}")
    out = results_dir() / "estimate-no-share.json"
    enc = _encoder("me5-small")
    parameters = {"command": "python benchmarks/lab/run.py estimate-no-share", "checks": names, "spaces": list(SPACES),
                  "floor": FLOOR, "mutual_low_translations": MUTUAL_LOW_TRANSLATIONS,
                  "mostly_gold_distractors": MOSTLY_GOLD_DISTRACTORS}
    write_result(out, task="estimate_no_share", encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=sorted(set(files)) + [ROOT / "demo" / f for f in ("de.txt", "en.txt", "gold.tsv")],
                 parameters=parameters,
                 columns=["check", "space", "form", "sets", "no share found",
                          *(f"{rule}: {what}" for rule in RULES for what in ("kept", "false", "F1", "P"))],
                 rows=rows, details=details, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")
