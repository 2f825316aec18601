"""`xmine bench mining --noisy`: the mining sets of `bench mining` with web-like noise added.

Each language's clean set (`mining.build_set`: FLORES-200 and newstest gold pairs hidden among
same-language distractors) gets, seeded, in these proportions of its side's clean size (`NOISE`):
- `copies`: lines of the English side copied verbatim into the xx side (untranslated pages),
  drawn from the whole English side, gold lines included;
- `other_language`: FLORES-200 devtest lines of a third language (`OTHER_LANGS`, never xx or
  English) on each side;
- `boilerplate`: site furniture (copyright lines, menus, share buttons) built from templates, the
  same line on both sides;
- `numbers_urls`: lines of numbers, phone numbers, URLs and e-mail addresses; half the same on
  both sides, half with the same template and other numbers on each side;
- `near_duplicates`: copies of a side's own lines holding a number, with that number changed (as
  templated news pages repeat a story with another figure).
Every pair that is not a gold pair is wrong. Mining, the threshold and scoring are `bench mining`'s
(`bucc.mine_candidates`, k = 4, max retrieval, each variant's default margin and threshold);
then the pair filters (`mining.filters.apply_pair_filters`, default `PairFilterConfig`) run on the
mined pairs; then as `xmine mine` runs by default: the pre-search cleaning
(`mining.presearch.clean_sides`) before mining, then the filters; and with the language filter
before that (sentences identified as another language leave each side, `langid.language_mask`).
The cleaning and the language filter also run on the clean sets (without pair filters), to
measure what they cost there. Reported per language and averaged (`VARIANTS`): precision, recall
and F1 of each; what each rule and each step before the search removed (gold among them), and
the margins of gold pairs and of each kind of noise pair (to choose `score_max`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
import re
from typing import Any, Sequence

import numpy as np

from xmine.benchmarks.bucc import at_least, margin_of, mine_candidates
from xmine.benchmarks.common import FLORES_DEVTEST, flores_lines
from xmine.benchmarks.mining import NEWS_SETS, _rng as mining_rng, build_set, threshold_label
from xmine.mining.filters import PairFilterConfig, RULES, apply_pair_filters
from xmine.mining.langid import language_mask
from xmine.mining.presearch import PreSearchConfig, clean_sides, pair_number_variants

NOISE = {"copies": 0.08, "other_language": 0.04, "boilerplate": 0.02, "numbers_urls": 0.02, "near_duplicates": 0.02}
OTHER_LANGS = ("fra_Latn", "spa_Latn", "ita_Latn", "nld_Latn", "tur_Latn", "ukr_Cyrl", "kor_Hang", "vie_Latn",
               "swe_Latn", "ell_Grek")

_SITES = ("example-news.com", "dailyherald.net", "stadtblatt.de", "novosti.ru", "xinwen.cn", "uutiset.fi",
          "portal.pl", "zinios.lt", "kazinform.kz", "news.jp", "praha-dnes.cz", "phnompenhpost.com")
_SECTIONS = ("Politics", "Sport", "Business", "Culture", "World", "Science", "Travel", "Opinion", "Weather")
_NAMES = ("anna", "peter", "editor", "info", "redaktion", "support", "newsdesk", "webmaster")
_BOILER = ("Copyright © {y} {site}. All rights reserved.", "Home | News | {sec} | Contact | {site}",
           "Share on Facebook | Share on Twitter | Email this {sec} story",
           "Click here to subscribe to the {site} newsletter.", "Terms of use | Privacy policy | Cookies | {site}",
           "Read more {sec} news on {site}", "Follow {site} on social media for the latest {sec} updates.",
           "Advertisement - {sec} - continue reading below", "Back to top | {sec} | Sitemap | {site}")
_NUMBERS = ("Tel.: +{a} {b} {c}", "www.{site}/{sec_l}/{c}", "https://{site}/article?id={c}", "{name}@{site}",
            "{a}.{b} %", "ISBN 978-{a}-{c}-{b}", "{b}.{a}.{y}", "Fax +{a} {c} {b}", "{c} | {b} | {a}")


#: What `evaluate` reports: the clean set as is, after the pre-search cleaning, after --lang-filter
#: and the cleaning (neither with the pair filters); the noisy set as is, with the pair filters,
#: with the cleaning and the filters (`xmine mine`'s default), and with --lang-filter too.
VARIANTS = ("clean", "clean_pre", "clean_lang", "noisy", "filtered", "pre_filtered", "lang_filtered")


def _rng(seed: int, *keys: str) -> np.random.Generator:
    return mining_rng(seed, "noisy", *keys)


def _fill(template: str, rng: np.random.Generator) -> str:
    sec = _SECTIONS[rng.integers(len(_SECTIONS))]
    return template.format(y=int(rng.integers(2005, 2024)), site=_SITES[rng.integers(len(_SITES))], sec=sec,
                           sec_l=sec.lower(), name=_NAMES[rng.integers(len(_NAMES))], a=int(rng.integers(10, 99)),
                           b=int(rng.integers(100, 999)), c=int(rng.integers(10000, 999999)))


def _change_number(text: str, rng: np.random.Generator) -> str | None:
    groups = list(re.finditer(r"\d+", text))
    if not groups:
        return None
    g = groups[int(rng.integers(len(groups)))]
    new = str(int(g.group()) + int(rng.integers(1, 10)))
    return text[:g.start()] + new + text[g.end():]


def add_noise(ms, data: Path, *, seed: int = 0, noise: dict[str, float] = NOISE):
    """(src, en, kinds): the set's sides (ids, sentences) with noise lines appended, and the noise
    kind of every added id."""
    lang = ms.lang
    src_ids, src = list(ms.src[0]), list(ms.src[1])
    en_ids, en = list(ms.en[0]), list(ms.en[1])
    n_src, n_en = len(src), len(en)
    kinds: dict[str, str] = {}
    seen_src, seen_en = set(src), set(en)

    def add(side: str, text: str, kind: str) -> None:
        ids, texts, seen = (src_ids, src, seen_src) if side == "src" else (en_ids, en, seen_en)
        text = " ".join(text.split())
        if not text or text in seen:
            return
        seen.add(text)
        i = f"{lang if side == 'src' else 'en'}-n{len(ids):08d}"
        ids.append(i)
        texts.append(text)
        kinds[i] = kind

    rng = _rng(seed, lang, "copies")
    for j in rng.choice(n_en, size=int(noise["copies"] * n_src), replace=False):
        add("src", en[int(j)], "copies")

    own = NEWS_SETS[lang][0]
    others = [c for c in OTHER_LANGS if c != own]
    for side, n in (("src", n_src), ("en", n_en)):
        rng = _rng(seed, lang, side, "other")
        code = others[int(rng.integers(len(others)))]
        lines = flores_lines(data / FLORES_DEVTEST, code)
        for j in rng.choice(len(lines), size=int(noise["other_language"] * n), replace=False):
            add(side, lines[int(j)], "other_language")

    rng = _rng(seed, lang, "boilerplate")
    for _ in range(int(noise["boilerplate"] * min(n_src, n_en))):
        line = _fill(_BOILER[int(rng.integers(len(_BOILER)))], rng)
        add("src", line, "boilerplate")
        add("en", line, "boilerplate")

    rng = _rng(seed, lang, "numbers")
    for j in range(int(noise["numbers_urls"] * min(n_src, n_en))):
        template = _NUMBERS[int(rng.integers(len(_NUMBERS)))]
        line = _fill(template, rng)
        add("src", line, "numbers_urls")
        if j % 2:  # the same template, other numbers (else the same line)
            line = _fill(template, rng)
        add("en", line, "numbers_urls")

    for side, texts, n in (("src", src, n_src), ("en", en, n_en)):
        rng = _rng(seed, lang, side, "near")
        with_digits = [t for t in texts[:n] if any(ch.isdigit() for ch in t)]
        for j in rng.choice(len(with_digits), size=min(len(with_digits), int(noise["near_duplicates"] * n)),
                            replace=False):
            changed = _change_number(with_digits[int(j)], rng)
            if changed:
                add(side, changed, "near_duplicates")
    return (src_ids, src), (en_ids, en), kinds


def _prf(pairs: Sequence[tuple[str, str]], gold: set) -> dict[str, float]:
    tp = sum(p in gold for p in pairs)
    p = tp / len(pairs) if pairs else 0.0
    r = tp / len(gold) if gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "pairs": len(pairs)}


def evaluate_noisy(embed_fn, data: Path, ms, *, threshold: float | dict | None, seed: int = 0, filter_config=None,
                   flores_code: str | None = None) -> dict[str, Any]:
    """One language: clean, noisy and noisy-filtered P/R/F1 at `threshold` (a number, None: every
    pair kept, or a `mining.variant_threshold` record: each run kept where `xmine mine` would keep it,
    its rule applied to that run's own candidates), removals, score spreads."""
    cfg = filter_config or PairFilterConfig()
    gold = set(ms.gold)
    src, en, kinds = add_noise(ms, data, seed=seed)
    text_s, text_e = dict(zip(*src)), dict(zip(*en))
    cands, scores, t, _ = mine_candidates(src, en, embed_fn, threshold=threshold)
    clean_cands, clean_scores, clean_t, _ = mine_candidates(ms.src, ms.en, embed_fn, threshold=threshold)
    clean = _prf([c for c, kept in zip(clean_cands, at_least(clean_scores, clean_t)) if kept], gold)
    at = [(c, s) for c, s, kept in zip(cands, scores, at_least(scores, t)) if kept]
    noisy = _prf([c for c, _ in at], gold)
    keep, reasons = apply_pair_filters([text_s[a] for (a, _), _ in at], [text_e[b] for (_, b), _ in at],
                                       [s for _, s in at], langs=(flores_code, "eng_Latn"), config=cfg,
                                       margin=margin_of(threshold))
    filtered = _prf([c for (c, _), k in zip(at, keep) if k], gold)
    # As `xmine mine` now runs: the pre-search cleaning (mining/presearch.py), then mining, then the
    # filters; with --lang-filter the language filter first. On the clean sets too: their cost.
    langs = (flores_code, "eng_Latn")
    pre = _mine_cleaned(src, en, embed_fn, threshold, langs, cfg, gold, lang_filter=False)
    pre_lang = _mine_cleaned(src, en, embed_fn, threshold, langs, cfg, gold, lang_filter=True)
    clean_pre = _mine_cleaned(ms.src, ms.en, embed_fn, threshold, langs, cfg, gold, lang_filter=False, filters=False)
    clean_lang = _mine_cleaned(ms.src, ms.en, embed_fn, threshold, langs, cfg, gold, lang_filter=True, filters=False)
    def kind_of(pair: tuple[str, str]) -> str:
        return "gold" if pair in gold else kinds.get(pair[0]) or kinds.get(pair[1]) or "distractor"

    removed: dict[str, Counter] = {}
    for (pair, _), code in zip(at, reasons.tolist()):
        if code >= 0:
            removed.setdefault(RULES[code], Counter())[kind_of(pair)] += 1
    spread: dict[str, list[float]] = {}
    for pair, s in zip(cands, scores.tolist()):
        spread.setdefault(kind_of(pair), []).append(s)
    spreads = {k: {"n": len(v), "min": min(v), "median": float(np.median(v)), "max": max(v)} for k, v in spread.items()}
    unfiltered_kinds = Counter(kind_of(pair) for (pair, _), k in zip(at, keep) if k and pair not in gold)
    return {"clean": clean, "clean_pre": clean_pre["prf"], "clean_lang": clean_lang["prf"], "noisy": noisy,
            "filtered": filtered, "pre_filtered": pre["prf"], "lang_filtered": pre_lang["prf"],
            "removed_before_search": {"pre": pre["removed"], "lang": pre_lang["removed"],
                                      "clean_pre": clean_pre["removed"], "clean_lang": clean_lang["removed"]},
            "pre_search": {"noisy": pre["record"], "clean": clean_pre["record"]},
            "removed": {rule: dict(c) for rule, c in removed.items()}, "wrong_after_filters": dict(unfiltered_kinds),
            "scores": spreads,
            "sizes": {"src": len(src[0]), "en": len(en[0]), "noise_lines": len(kinds), "gold": len(gold)}}


def _mine_cleaned(src, en, embed_fn, threshold: float | dict | None, langs, cfg, gold: set, *, lang_filter: bool,
                  filters: bool = True, pre_config=None) -> dict[str, Any]:
    """Mine (ids, sentences) sides as `xmine mine` does: `--lang-filter` when asked, the pre-search
    cleaning (`presearch.clean_sides`), the search, then the pair filters (when `filters`).
    P/R/F1, the rows each step removed per side (gold rows among them), the cleaning's record."""
    pre_config = pre_config or PreSearchConfig()
    sides = [list(src[0]), list(src[1])], [list(en[0]), list(en[1])]
    removed: dict[str, dict[str, int]] = {}
    gold_ids = ({a for a, _ in gold}, {b for _, b in gold})

    def drop(step: str, j: int, keep) -> None:
        ids, texts = sides[j]
        gone = [i for i, k in zip(ids, keep) if not k]
        r = removed.setdefault(step, {})
        r[("src", "en")[j]] = len(gone)
        r[("gold_src", "gold_en")[j]] = sum(i in gold_ids[j] for i in gone)
        sides[j][0], sides[j][1] = [i for i, k in zip(ids, keep) if k], [t for t, k in zip(texts, keep) if k]

    if lang_filter:
        for j, lang in enumerate(langs):
            drop("language", j, language_mask(sides[j][1], lang, cfg.lid, min_confidence=cfg.lid_min_confidence)[0])
    s, t, record = clean_sides(sides[0][1], sides[1][1], langs=langs, config=pre_config, identical_filter=True,
                               lid=cfg.lid)
    variants = [{ids[r]: [ids[v] for v in vs] for r, vs in clean.number_variants.items()}
                for ids, clean in ((sides[0][0], s), (sides[1][0], t))]
    drop("pre_search", 0, s.keep)
    drop("pre_search", 1, t.keep)
    cands, scores, kept_at, _ = mine_candidates(tuple(sides[0]), tuple(sides[1]), embed_fn, threshold=threshold)
    at = [(c, sc) for c, sc, kept in zip(cands, scores, at_least(scores, kept_at)) if kept]
    text_s, text_e = dict(zip(*src)), dict(zip(*en))
    if at:  # as `xmine mine`: a near-duplicate's pair goes to its number variants whose numbers agree
        take, a_ids, b_ids, _ = pair_number_variants(np.asarray([a for (a, _), _ in at]),
                                                     np.asarray([b for (_, b), _ in at]), *variants, text_s, text_e)
        at = [((a, b), at[i][1]) for i, a, b in zip(take.tolist(), a_ids.tolist(), b_ids.tolist())]
    if filters:
        keep, _ = apply_pair_filters([text_s[a] for (a, _), _ in at], [text_e[b] for (_, b), _ in at],
                                     [sc for _, sc in at], langs=langs, config=cfg, margin=margin_of(threshold))
        at = [x for x, k in zip(at, keep) if k]
    return {"prf": _prf([c for c, _ in at], gold), "removed": removed, "record": record}


def evaluate(embed_fn, data: Path, langs: Sequence[str], *, threshold: float | dict | None, seed: int = 0,
             gold_fraction: float, max_news: int, flores_rows: int | None, filter_config=None) -> dict[str, Any]:
    """Every language, then averages (x100) of each P/R/F1 over languages (`threshold`: as
    `evaluate_noisy` takes it)."""
    per = {}
    for lang in langs:
        ms = build_set(data, lang, seed=seed, gold_fraction=gold_fraction, max_news=max_news, flores_rows=flores_rows)
        per[lang] = evaluate_noisy(embed_fn, data, ms, threshold=threshold, seed=seed, filter_config=filter_config,
                                   flores_code=NEWS_SETS[lang][0])
    avg = {v: {m: float(100 * np.mean([r[v][m] for r in per.values()])) for m in ("precision", "recall", "f1")}
           for v in VARIANTS}
    return {"per_lang": per, "average": avg, "noise": NOISE}


#: the main table's (variant of the set, metric) columns, and their labels
COLUMNS = tuple((v, m) for v in VARIANTS for m in ("precision", "recall"))
_SHORT = {"clean": "clean", "clean_pre": "clean+pre", "clean_lang": "clean+lang", "noisy": "noisy",
          "filtered": "filters", "pre_filtered": "+pre", "lang_filtered": "+lang"}
LABELS = [f"{_SHORT[v]} {m[0].upper()}" for v, m in COLUMNS]


def _before_search(removed: dict, step: str = "pre_search") -> str:
    r = removed.get(step, {})
    return f"{r.get('src', 0)}+{r.get('en', 0)} ({r.get('gold_src', 0)}+{r.get('gold_en', 0)})"


def tables(details: dict[str, dict]) -> tuple[list[str], list[list], list[dict]]:
    """`bench mining --noisy`'s table (one row per variant, at its default threshold) and one
    per-language table per variant, from each variant's `evaluate` result with its `default_threshold`."""
    rows = [[f"{name} @{threshold_label(r['default_threshold'])}"] + [r["average"][var][m] for var, m in COLUMNS]
            + [min(100 * x[var]["precision"] for x in r["per_lang"].values()) for var in ("pre_filtered", "lang_filtered")]
            + [r["average"]["pre_filtered"]["f1"]]
            for name, r in details.items()]
    extra = [{"title": f"{name}: per language (x100); rows removed before the search (gold among them) "
                       "on the noisy set by the cleaning, and on the clean set by the cleaning / --lang-filter",
              "columns": ["lang"] + LABELS + ["removed before search (noisy)", "clean: cleaning / lang-filter"],
              "rows": [[lg] + [100 * x[var][m] for var, m in COLUMNS]
                       + [_before_search(x["removed_before_search"]["pre"]),
                          _before_search(x["removed_before_search"]["clean_pre"]) + " / "
                          + _before_search(x["removed_before_search"]["clean_lang"], "language")]
                       for lg, x in r["per_lang"].items()]} for name, r in details.items()]
    extra += [_removed_table(name, r) for name, r in details.items()]
    return ["variant @threshold"] + LABELS + ["+pre min P", "+lang min P", "+pre F1"], rows, extra


def _removed_table(name: str, result: dict) -> dict:
    """What each pair filter removed from the noisy sets' kept pairs (mined without the cleaning),
    summed over languages, by kind of pair: gold, a distractor, or the kind of noise line it holds."""
    removed: dict[str, Counter] = {}
    for x in result["per_lang"].values():
        for rule, kinds in x["removed"].items():
            removed.setdefault(rule, Counter()).update(kinds)
    kinds = sorted({k for c in removed.values() for k in c}, key=lambda k: (k != "gold", k != "distractor", k))
    return {"title": f"{name}: pairs each pair filter removed on the noisy sets (mined without the cleaning), summed "
                     "over languages, by kind of pair",
            "columns": ["filter"] + kinds, "rows": [[rule] + [c.get(k, 0) for k in kinds] for rule, c in removed.items()]}


def data_files(data: Path, langs: Sequence[str], settings: dict[str, Any]) -> list[str]:
    """Every file the noisy sets of `langs` read: their mining sets' sources and the other-language lines."""
    return sorted({str(p) for lg in langs for p in build_set(data, lg, **settings).files}
                  | {str(data / FLORES_DEVTEST / f"{c}.devtest") for c in OTHER_LANGS})
