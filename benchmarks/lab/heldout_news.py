"""`heldout-news`: the mining defaults on data nothing in the project reads: WMT newstest of ten languages.

    .venv/bin/python benchmarks/lab/run.py heldout-news      # -> benchmarks/results/heldout-news.json

The defaults are chosen leave one family out on the calibration sets (`calibrate-defaults`,
`threshold-rules`), and `bench mining` draws on the same sources (FLORES-200 devtest, newstest),
so neither is data the calibration never read (`calibrate-defaults overlap`). This command builds
sets from the newstest pairs of ten languages (`LANGS`) that no calibration set and no `bench
mining` folder reads: a pair is kept only where neither of its sentences is in any calibration set
and its English is in no newstest folder `bench mining` reads (its languages' 2019-2021 folders).
The projection's training files are Tatoeba and WMT20 QE (SHIPPED.json), no newstest. Seven of the
languages are in no calibration family at all; Hindi and Tamil are (their FLORES-200 and MASSIVE
text), Italian is in the short family (Tatoeba); their newstest text is read here only. One
exception, said: Latvian's pairs (newstest 2017) are also in the sets of the first calibration
(`calibrate.py`, calibration-me5-small.json), which no shipped value comes from any more.

Per language, from its kept pairs in one seeded order (`calibration_sets.compose`, so no unlisted
translation is left in a set): G gold pairs (a fifth of the pairs, 100 to 300), the rest alternately
xx-only and English-only distractors. Two sets share the gold and the xx side:
- `{lang}-dense`: those sentences alone, a third of each side gold (a small comparable corpus);
- `{lang}-sparse`: the English side filled to `SPARSE_EN` with English newstest sentences that
  nothing else reads (one seeded pool for every language, minus any aligned to the xx side), so
  1-3% of it has a translation: one side much larger, as when a smaller language is mined
  against a large English crawl.
French and Spanish, whose pools are larger, add `{lang}-large`: the English side filled with the
whole pool. Each set is mined as `bench mining` mines it (`evaluate_set`: exact, k = 4, max
retrieval, unique sentences) in each space xmine ships, at the default `xmine mine` keeps it at
(the space's margin and rule, `variant_threshold`); raw use-m3 only on the languages it was
trained on (`USE_M3_LANGUAGES`: French, Spanish, Italian here), and also at its ratio rule. Reported
per set and per space: F1 at the set's best threshold and at the default, the gap, precision and
recall at the default, and (ratio margin) how far the default is from the best F1 of the
thresholds that keep a precision of 0.85 (`best_at_floor`); and at the precision point
(`--operating-point precision`). Nothing is chosen on these sets.

Second, what a user of `xmine calibrate` gets (`calibrated`): per space and language, the record
`xmine calibrate --src-lang LANG --tgt-lang eng_Latn` writes from FLORES-200 devtest
(`mining.calibrate.calibrate`, as the command runs it), and each of the language's sets mined at
that record's balanced threshold in the ratio and in the distance margin, each gap to the set's
best F1 over both margins, and at the record's precision point. This is the path of a space xmine
ships no calibration for (the three spaces are measured as if it shipped none). `heldout_wiki`
runs the same check (`run_check`) on another domain.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np

from calibrate_defaults import DATA, PRECISION_FLOOR, USE_M3_LANGUAGES, WORK, _encoder, _projection, _sets
from calibration_sets import NEWSTEST, _lines, _rng, compose, news_pairs

#: the languages whose newstest pairs are read here (xx-en / en-xx folders and the multi-way years)
LANGS = ("fr", "es", "it", "hu", "ro", "lv", "hi", "gu", "ta", "ps")
#: FLORES-200 codes where the ISO 639-1 code names a macrolanguage FLORES files under another code
FLORES_CODES = {"lv": "lvs_Latn", "ps": "pbt_Arab", "km": "khm_Khmr"}
#: languages the shipped calibration reads in other text (FLORES-200, MASSIVE, Tatoeba)
IN_CALIBRATION = frozenset({"hi", "ta", "it"})
#: the English side of the sparse sets, and the languages with a large set too
SPARSE_EN = 10_000
LARGE = ("fr", "es")
MIN_GOLD, MAX_GOLD = 100, 300


def _norm(s: str) -> str:
    return " ".join(s.split())


def _read_elsewhere(data: Path) -> tuple[set[str], set[str]]:
    """(every sentence of the calibration sets, every English sentence of `bench mining`'s folders)."""
    from xmine.benchmarks.mining import NEWS_SETS

    calibration: set[str] = set()
    for st in _sets():
        calibration.update(st.xx)
        calibration.update(st.en)
    bench = {_norm(s) for _, folders in NEWS_SETS.values() for folder in folders
             for f in sorted((data / NEWSTEST / folder).glob("*.en")) for s in _lines(f)}
    return calibration, bench


def english_pool(data: Path, unread) -> list[str]:
    """Every English newstest sentence that `unread` keeps, once, in one seeded order."""
    root = data / NEWSTEST
    texts = sorted({_norm(s) for f in sorted(root.glob("*/*.en")) + sorted(root.glob("*/*/*.en"))
                    for s in _lines(f) if s.strip()})
    order = _rng(0, "heldout-news", "english").permutation(len(texts))
    return [texts[i] for i in order if unread(texts[i])]


def build(data: Path, folder: Path) -> dict:
    """Every set of every language in BUCC's format under `folder` (`{name}-en/`); their counts."""
    calibration, bench = _read_elsewhere(data)
    pool = english_pool(data, lambda en: en not in calibration and en not in bench)
    counts: dict = {"english_pool": len(pool), "languages": {}, "sets": {}}
    for lang in LANGS:
        write_sets(folder, lang, news_pairs(data, lang), pool, calibration, bench, counts,
                   large=lang in LARGE, key="heldout-news")
    return counts


def write_sets(folder: Path, lang: str, aligned: list, pool: list[str], calibration: set[str], bench: set[str],
               counts: dict, *, large: bool, key: str, sparse_en: int | None = SPARSE_EN,
               max_pairs: int | None = None, spaces: list[str] | None = None) -> None:
    """The sets of one language (module doc) from its `aligned` pairs (every pair of its source:
    what may translate what), those read elsewhere left out, and the English `pool`, written under
    `folder` and counted in `counts`; each set checked against `calibration` and `bench` as written.
    `sparse_en` None: the sparse set's English side filled with the whole pool. `max_pairs`: the
    kept pairs drawn from, at most (the first of the seeded order; every pair stays `aligned`).
    `spaces`: the only spaces the sets are measured in (`measure`; None: every space)."""
    from xmine.benchmarks.mining import MiningSet, write_set

    pairs = [(xx, en) for xx, en in aligned if xx not in calibration and en not in calibration and en not in bench]
    order = _rng(0, key, lang).permutation(len(pairs))
    kept = len(pairs)
    pairs = [pairs[i] for i in order][:max_pairs]
    n_gold = min(MAX_GOLD, max(MIN_GOLD, len(pairs) // 5))
    gold, rest = pairs[:n_gold], pairs[n_gold:]
    xx_rest, en_rest = [xx for xx, _ in rest[0::2]], [en for _, en in rest[1::2]]
    counts["languages"][lang] = {"pairs": len(aligned), "kept": kept, "gold": n_gold} | (
        {"drawn": len(pairs)} if max_pairs is not None else {})
    shapes = [("dense", n_gold + len(en_rest)), ("sparse", sparse_en or n_gold + len(en_rest) + len(pool))]
    if large:
        shapes.append(("large", n_gold + len(en_rest) + len(pool)))
    for shape, en_size in shapes:
        name = f"{lang}-{shape}"
        st = compose(name, "heldout", lang, gold=gold, xx_distractors=xx_rest, en_distractors=en_rest + pool,
                     aligned=aligned, xx_size=n_gold + len(xx_rest), en_size=en_size)
        xx_ids = [f"{name}-{lang}-{i:06d}" for i in range(len(st.xx))]
        en_ids = [f"{name}-en-{i:06d}" for i in range(len(st.en))]
        write_set(MiningSet(lang=name, src=(xx_ids, st.xx), en=(en_ids, st.en),
                            gold=[(xx_ids[a], en_ids[b]) for a, b in st.gold], counts={}, files=[]), folder)
        # what the filters promise, checked on the set as written: no sentence read elsewhere
        read = sum(s in calibration for s in st.xx + st.en) + sum(s in bench for s in st.en)
        if read:
            raise RuntimeError(f"{name}: {read} sentences of the set are read elsewhere")
        counts["sets"][name] = {"lang": lang, "shape": shape, "xx": len(st.xx), "en": len(st.en),
                                "gold": len(st.gold), "dropped": st.dropped, "read_elsewhere": read} | (
                                   {"spaces": spaces} if spaces is not None else {})


#: the thresholds each space is mined at: (margin, operating point); None: what plain `xmine mine` uses
POINTS = ((None, None), (None, "precision"))


def _spaces():
    """(label, encoder name, projection or None, the (margin, point) pairs it is mined at)."""
    return (("projection", "me5-small", "default", POINTS), ("raw me5-small", "me5-small", None, POINTS),
            ("raw use-m3", "use-m3", None, (*POINTS, ("ratio", None))))


#: `calibrated`'s key of the record's precision point (in its default margin, `CALIBRATED_MARGIN`)
PRECISION_KEY = "distance, precision point"


def flores200_devtest(lang: str) -> tuple[list[Path], str]:
    """The files `xmine calibrate --src-lang LANG --tgt-lang eng_Latn` reads (FLORES-200 devtest), and their name."""
    from xmine.mining.calibrate import flores_file

    flores = DATA / "parallel/flores200/devtest"
    return [flores_file(flores, FLORES_CODES.get(lang, lang)), flores_file(flores, "eng_Latn")], "FLORES-200 devtest"


def calibrated(space: str, encoder_name: str, projection, variant, names: list[str], counts: dict, folder: Path,
               log, source=flores200_devtest) -> tuple[dict, list[list]]:
    """Per language of `names`, the `xmine calibrate` record on the aligned files `source(lang)`
    gives (FLORES-200 devtest of LANG-eng_Latn, as the command reads it without --gold), and its sets
    at the record's balanced threshold in each margin and at its precision point in its default
    margin (`PRECISION_KEY`; gaps to the best over the two margins)."""
    from xmine.benchmarks.mining import evaluate_set, set_files
    from xmine.mining.calibrate import calibrate, read_aligned

    per, rows = {}, []
    for lang in dict.fromkeys(counts[n]["lang"] for n in names):
        files, name_of_source = source(lang)
        record = calibrate(read_aligned(*files), encoder=encoder_name, projection=projection or "none",
                           src_lang=FLORES_CODES.get(lang, lang), tgt_lang="eng_Latn",
                           data={"source": name_of_source, "files": [f.name for f in files]})
        balanced = record["operating_points"]["balanced"]
        # the record's precision point in the margin `mine --calibration` mines in
        mined_in = record.get("default_margin", "ratio")
        precise = record["operating_points"].get("precision", {}).get(mined_in)
        for name in (n for n in names if counts[n]["lang"] == lang):
            at = {m: (m, balanced[m]) for m in ("ratio", "distance")}
            if precise is not None:
                at[PRECISION_KEY] = (mined_in, precise)
            runs = {key: evaluate_set(variant.embed, set_files(folder, name), threshold=t, margin=m)
                    for key, (m, t) in at.items()}
            best = max(runs[m]["best"]["f1"] for m in ("ratio", "distance"))
            per[name] = {key: {"threshold": at[key][1], "f1": r["default"]["f1"], "best_f1": best,
                               "gap": best - r["default"]["f1"], "precision": r["default"]["precision"],
                               "recall": r["default"]["recall"]} for key, r in runs.items()}
            for m, r in per[name].items():
                rows.append([space, m, name, round(r["threshold"], 4), round(100 * best, 1), round(100 * r["f1"], 1),
                             round(100 * r["gap"], 1), round(100 * r["precision"], 1), round(100 * r["recall"], 1)])
            log(f"{space} calibrated ({name_of_source}) {name:<10} " + "  ".join(
                f"{m} t {r['threshold']:.4f} gap {r['gap']:.3f} P {r['precision']:.3f}" for m, r in per[name].items()))
    summary = {m: stats([r[m] for r in per.values() if m in r]) for m in ("ratio", "distance", PRECISION_KEY)
               if any(m in r for r in per.values())}
    log(f"{space} calibrated: {summary}")
    return {"sets": per, "summary": summary}, rows


def stats(rows: list[dict]) -> dict:
    """Over `rows` (each one set's "gap", "precision" and "recall", fractions): the mean and worst gap,
    the sets more than 8 below their best, the mean P and R (x100)."""
    gaps = np.array([100 * r["gap"] for r in rows])
    return {"sets": len(rows), "mean_gap": round(float(gaps.mean()), 2), "worst_gap": round(float(gaps.max()), 2),
            "over_8": int((gaps > 8).sum()),
            "precision": round(float(np.mean([100 * r["precision"] for r in rows])), 1),
            "recall": round(float(np.mean([100 * r["recall"] for r in rows])), 1)}


def best_at_floor(curve: dict) -> dict | None:
    """The best F1 of a set's ratio-margin curve (`bench mining`'s grid, steps of 0.001) among the
    thresholds that keep a precision of at least PRECISION_FLOOR: what a threshold can reach on
    the set at the precision the defaults are held to (None where none does)."""
    ok = [i for i, (p, n) in enumerate(zip(curve["precision"], curve["pairs"])) if p >= PRECISION_FLOOR and n > 0]
    if not ok:
        return None
    i = max(ok, key=lambda j: curve["f1"][j])
    return {m: curve[m][i] for m in ("precision", "recall", "f1")} | {"threshold": curve["thresholds"][i]}


def summarise(per: dict, sets: dict) -> dict:
    """`stats` of `evaluate_set` results at their default, and the gold pairs they hold; with the
    ratio margin's curve, the mean gap to each set's best F1 at the precision floor (`best_at_floor`;
    no less than 0: the curve's grid is coarser than the default's threshold)."""
    out = stats([{"gap": r["gap"], **r["default"]} for r in per.values()]) | {
        "gold": int(sum(sets[n]["gold"] for n in per))}
    if all(r.get("best_at_floor") for r in per.values()):
        out["mean_gap_at_floor"] = round(float(np.mean(
            [100 * max(r["best_at_floor"]["f1"] - r["default"]["f1"], 0.0) for r in per.values()])), 2)
    return out


def variant_of(encoder_name: str, projection):
    """The `bench mining` variant of a space: its encoder's raw embeddings, or its projection's meaning part."""
    from xmine.benchmarks.common import RawEmbedder, Variant, projected

    enc = _encoder(encoder_name)
    raw = RawEmbedder(enc, show_progress=False)
    if projection:
        proj = _projection(enc)
        return Variant("default", "meaning", projected(raw, proj, "meaning"), proj.fingerprint())
    return Variant("raw", "raw", raw)


def median_chars(a: list[str], b: list[str]) -> float:
    """The larger of two sides' median sentence lengths, in characters."""
    return float(max(np.median([len(x) for x in a]), np.median([len(x) for x in b])))


def check_candidates(check: str, space: str) -> list[dict]:
    """Every set of the held-out `check` (its sets under WORK, its result JSON) measured in `space` (a
    label of `_spaces`), mined once at the space's default: its candidates (a study `Run`), the
    threshold the shipped default gives it (and the share its rule read), its language and its
    sentences' median length (`median_chars`). The default's F1 and the best F1 are checked against
    the check's own result."""
    from threshold_rules import Run
    from xmine.benchmarks.bucc import mine_candidates, read_bucc_file, read_gold
    from xmine.benchmarks.common import read_result, results_dir
    from xmine.benchmarks.mining import set_files, variant_threshold

    result = read_result(results_dir() / f"{check}.json")
    counts = result["details"]["counts"]["sets"]
    _, encoder_name, projection, _ = next(s for s in _spaces() if s[0] == space)
    variant = variant_of(encoder_name, projection)
    record = variant_threshold(variant, None, encoder_name=encoder_name)
    reported = result["details"]["spaces"].get(f"{space} ({record['margin']}, the default)", {})
    out = []
    for name in (n for n in counts if n in reported):  # the sets measured in the space
        files = set_files(WORK / check, name)
        gold = read_gold(files["gold"])
        src, en = read_bucc_file(files["src"]), read_bucc_file(files["en"])
        c = mine_candidates(src, en, variant.embed, k=4, threshold=record)
        run = Run(c.scores, np.array([p in gold for p in c.pairs], dtype=bool), len(gold))
        at_default = run.at(float(np.float32(c.threshold)))[2]  # compared as `xmine mine` compares (float32)
        for what, got, want in (("F1 at the default", at_default, reported[name]["default"]["f1"]),
                                ("best F1", run.best, reported[name]["best"]["f1"])):
            if abs(got - want) > 1e-9:
                raise RuntimeError(f"{check} {name}: {what} {got} != the check's {want}")
        lang = counts[name]["lang"]
        out.append({"set": name, "lang": FLORES_CODES.get(lang, lang), "run": run, "t_rule": c.threshold,
                    "share": c.share, "chars": median_chars(src[1], en[1])})
    return out


def measure(folder: Path, counts: dict, *, languages_in_calibration=IN_CALIBRATION,
            sources=(("calibrated", flores200_devtest),)) -> tuple[list, dict, dict[str, list]]:
    """Every set of `counts` (written under `folder`) mined in each space at each of its points, and
    at the `xmine calibrate` records made from each of `sources` ((details key, `calibrated`'s
    source)): (the rows, the details, per source key its rows). A set whose counts name `spaces` is
    measured in those only."""
    from xmine.benchmarks.mining import evaluate_set, set_files, variant_threshold
    from xmine.langs import normalize_lang

    rows, details = [], {"counts": counts, "spaces": {}, "summary": {}} | {key: {} for key, _ in sources}
    calibrated_rows: dict[str, list] = {key: [] for key, _ in sources}
    for space, encoder_name, projection, points in _spaces():
        names = [n for n, c in counts["sets"].items()
                 if (encoder_name != "use-m3" or normalize_lang(c["lang"]) in USE_M3_LANGUAGES)
                 and space in c.get("spaces", [space])]
        if not names:
            continue
        variant = variant_of(encoder_name, projection)
        for margin, point in points:
            record = variant_threshold(variant, None, margin=margin, encoder_name=encoder_name, point=point)
            how = "precision point" if point else "default" if margin is None else "given"
            label = f"{space} ({record['margin']}{', the ' + how if how != 'given' else ''})"
            per, noted = {}, {}
            for name in names:
                r = evaluate_set(variant.embed, set_files(folder, name), threshold=record)
                lang = counts["sets"][name]["lang"]
                if lang not in noted:  # the note `xmine mine --src-lang LANG --tgt-lang en` gives
                    noted[lang] = [n["language"] for n in variant_threshold(
                        variant, None, margin=margin, encoder_name=encoder_name, point=point,
                        langs=(FLORES_CODES.get(lang, lang), "eng_Latn")).get("language_notes", [])]
                r["language_notes"] = noted[lang]
                curve = r.pop("curve", None)  # the P/R/F1 curve of every set: not what this check reports
                if curve is not None:
                    r["best_at_floor"] = best_at_floor(curve)
                per[name] = r
                rows.append([space, record["margin"], how, name,
                             r["sizes"]["src"], r["sizes"]["en"], r["sizes"]["gold"], round(100 * r["best"]["f1"], 1),
                             round(100 * r["default"]["f1"], 1), round(100 * r["gap"], 1),
                             round(100 * r["default"]["precision"], 1), round(100 * r["default"]["recall"], 1)])
                click.echo(f"{label:<40} {name:<10} best {r['best']['f1']:.3f} default {r['default']['f1']:.3f} "
                           f"gap {r['gap']:.3f} P {r['default']['precision']:.3f} R {r['default']['recall']:.3f} "
                           f"(threshold {r['default']['threshold']:.5g})")
            details["spaces"][label] = per
            details["summary"][label] = {
                "all": summarise(per, counts["sets"]),
                **{shape: summarise({n: r for n, r in per.items() if counts["sets"][n]["shape"] == shape},
                                    counts["sets"]) for shape in ("dense", "sparse", "large")
                   if any(counts["sets"][n]["shape"] == shape for n in per)}}
            outside = {n: r for n, r in per.items() if counts["sets"][n]["lang"] not in languages_in_calibration}
            if outside:
                details["summary"][label]["languages_not_in_calibration"] = summarise(outside, counts["sets"])
            # whether the language note marks the sets the default misses
            for key, want in (("language_noted", True), ("language_not_noted", False)):
                subset = {n: r for n, r in per.items() if bool(r["language_notes"]) is want}
                if subset and len(subset) < len(per):
                    details["summary"][label][key] = summarise(subset, counts["sets"])
            click.echo(f"{label}: {details['summary'][label]}")
        for key, source in sources:
            details[key][space], more = calibrated(space, encoder_name, projection, variant, names, counts["sets"],
                                                   folder, click.echo, source)
            calibrated_rows[key] += more
    return rows, details, calibrated_rows


#: the result's columns, and the title of each `calibrated` source's table
COLUMNS = ["space", "margin", "threshold", "set", "xx", "en", "gold", "F1 best", "F1 default", "gap", "P default",
           "R default"]
CALIBRATED_COLUMNS = ["space", "margin", "set", "threshold", "F1 best", "F1", "gap", "P", "R"]
CALIBRATED_TITLE = ("At the balanced threshold of `xmine calibrate` on FLORES-200 devtest, in each margin (gap to the "
                    "best over both margins)")


def run_check(name: str, build_sets, data_files: list[Path], parameters: dict, *,
              sources=(("calibrated", flores200_devtest, CALIBRATED_TITLE),), **measure_options) -> None:
    """One held-out check: its sets (`build_sets(folder)` -> their counts) under WORK/`name`, measured
    (`measure`, with `sources`: (details key, `calibrated`'s source, its table's title)), written as
    benchmarks/results/`name`.json."""
    from xmine.benchmarks.common import RawEmbedder, Variant, results_dir, write_result

    started = time.monotonic()
    folder = WORK / name
    counts = build_sets(folder)
    click.echo(f"sets in {folder}: {counts['sets']}")
    rows, details, calibrated_rows = measure(folder, counts, sources=[(key, source) for key, source, _ in sources],
                                             **measure_options)
    out = results_dir() / f"{name}.json"
    enc = _encoder("me5-small")
    write_result(out, task=name.replace("-", "_"), encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=data_files, parameters={"command": f"python benchmarks/lab/run.py {name}", **parameters},
                 columns=COLUMNS, rows=rows, details=details, seconds=time.monotonic() - started,
                 extra_tables=[{"title": title, "columns": CALIBRATED_COLUMNS, "rows": calibrated_rows[key]}
                               for key, _, title in sources])
    click.echo(f"-> {out}")


def data_files() -> list[Path]:
    """The files the sets are built from."""
    return sorted({f for lang in LANGS for f in (DATA / NEWSTEST).rglob(f"*.{lang}")} |
                  {f for f in (DATA / NEWSTEST).rglob("*.en")})


@click.command("heldout-news")
def command():
    """The mining defaults of every space on newstest of ten languages that nothing else in the project reads."""
    run_check("heldout-news", lambda folder: build(DATA, folder), data_files(),
              {"languages": list(LANGS), "sparse_en": SPARSE_EN, "large": list(LARGE), "gold": [MIN_GOLD, MAX_GOLD]})
