"""The BUCC-style sets that `calibrate-defaults` chooses xmine's default thresholds on.

Four families that differ the way users' corpora do, each set a list of unique sentences a side and
its hidden gold pairs (`StudySet`), built deterministically from the data folder (seeded):

- `news`: WMT newstest of every year (2008-2021), 10 languages x English (Latin, Cyrillic, Han,
  Japanese). Gold: pairs of the language's newstest sets; distractors, as in `bench mining` and
  BUCC's comparable corpora: the language's other pairs split in two, one half giving xx sentences
  whose translation is not on the English side, the other English sentences whose translation is
  not on the xx side; where a side needs more, a shared pool of English newstest sentences (all
  years, all pairs: `EN_NEWS_POOL` sentences in one seeded order, each set taking a prefix of it).
  Sizes 2k to 50k a side; the largest set is 15k x 50k (the pool is larger than 50k because
  the sentences aligned to a set's xx side are dropped from it).
- `wiki`: FLORES-200 devtest (1,012 lines, multi-way), 12 languages in 10 scripts. Gold and the two
  sides' distractors are disjoint lines (25% gold); for five languages also a second set with the
  FLORES gold hidden among that language's news, split in two as for news (1.5-6% gold).
- `short`: Tatoeba-challenge (short everyday sentences), 10 languages; distractors from the same
  language's other pairs split in two as for news, then a shared pool of the English sides of all ten.
- `templated`: MASSIVE 1.1 (virtual-assistant utterances, multi-way by id), 8 locales; gold from
  the test partition, distractors from disjoint ids of train (English ids shared by every locale).

No unlisted translation is left in a set: every source is read as aligned (xx, en) pairs, and an
English sentence is dropped when any xx text aligned to it anywhere in the source is on the xx
side (a multi-way year, a second reference, a templated utterance repeated under another id), an xx
distractor is dropped when it is aligned to a gold English text, and each side holds each text once.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

NEWSTEST = Path("parallel/wmt-newstest")
FLORES = Path("parallel/flores200/devtest")
TATOEBA = Path("parallel/tatoeba-challenge")
MASSIVE = Path("massive/data")
#: the English newstest pool the news sets' English distractors are a prefix of
EN_NEWS_POOL = 58_000
#: the English Tatoeba pool (the English sides of `SHORT`) the short sets draw from
EN_SHORT_POOL = 5_000
#: MASSIVE train ids whose English utterances are the templated sets' English distractors
EN_TEMPLATED_POOL = 4_000


@dataclasses.dataclass
class StudySet:
    """One set: unique sentences a side and the gold pairs as (xx row, en row)."""

    name: str
    family: str
    lang: str
    xx: list[str]
    en: list[str]
    gold: np.ndarray  # (g, 2) int
    dropped: int  # distractors dropped as possible translations

    @property
    def iso(self) -> str:
        """The xx side's language as xmine's canonical code (ISO 639-3: "deu", "cmn")."""
        from xmine.langs import normalize_lang

        return normalize_lang(next(p for p in self.lang.split("-") if p != "eng") if self.family == "short"
                              else self.lang)

    @property
    def counts(self) -> dict:
        return {"family": self.family, "lang": self.lang, "iso": self.iso, "xx": len(self.xx), "en": len(self.en),
                "gold": len(self.gold), "gold_share": round(len(self.gold) / max(len(self.xx), len(self.en)), 4),
                "dropped_distractors": self.dropped}


def _rng(seed: int, *keys: str) -> np.random.Generator:
    return np.random.default_rng([seed] + [zlib.crc32(k.encode()) for k in keys])


def _lines(path: Path) -> list[str]:
    from xmine.benchmarks.common import read_lines

    return [s.strip() for s in read_lines(path, what="calibration source")]


def _clean_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((" ".join(a.split()), " ".join(b.split())) for a, b in pairs if a.strip() and b.strip()))


# ---------------------------------------------------------------- sources: aligned (xx, en) pairs
def news_pairs(data: Path, lang: str) -> list[tuple[str, str]]:
    """Every newstest (xx, en) pair of `lang`: the multi-way years and the xx-en / en-xx folders."""
    root = data / NEWSTEST
    pairs = []
    for year in sorted(p.name for p in root.iterdir()):
        ydir = root / year
        for stem in (f"newstest{year}", f"newssyscomb{year}"):
            if (ydir / f"{stem}.{lang}").is_file():
                pairs += zip(_lines(ydir / f"{stem}.{lang}"), _lines(ydir / f"{stem}.en"))
        for folder in (ydir / f"{lang}-en", ydir / f"en-{lang}"):
            for f in sorted(folder.glob(f"*.{lang}")) if folder.is_dir() else ():
                pairs += zip(_lines(f), _lines(f.with_suffix(".en")))
    return _clean_pairs(pairs)


def english_news(data: Path) -> list[str]:
    """Every English newstest sentence once, in a seeded order (the pool's order)."""
    root = data / NEWSTEST
    texts = dict.fromkeys(" ".join(s.split()) for f in sorted(root.glob("*/*.en")) + sorted(root.glob("*/*/*.en"))
                          for s in _lines(f) if s.strip())
    texts = sorted(texts)
    order = _rng(0, "english-news").permutation(len(texts))
    return [texts[i] for i in order]


def flores_pairs(data: Path, code: str) -> list[tuple[str, str]]:
    from xmine.benchmarks.common import flores_lines

    return [(" ".join(a.split()), " ".join(b.split())) for a, b in
            zip(flores_lines(data / FLORES, code), flores_lines(data / FLORES, "eng_Latn"))]


def tatoeba_pairs(data: Path, pair: str) -> list[tuple[str, str]]:
    other = next(p for p in pair.split("-") if p != "eng")
    folder = data / TATOEBA / pair
    return _clean_pairs(zip(_lines(folder / f"{pair}.{other}"), _lines(folder / f"{pair}.eng")))


def massive_rows(data: Path, locale: str) -> dict[str, tuple[str, str]]:
    """id -> (partition, utterance)."""
    out = {}
    with open(data / MASSIVE / f"{locale}.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out[r["id"]] = (r["partition"], " ".join(r["utt"].split()))
    return out


# ---------------------------------------------------------------- composing a set
def compose(name: str, family: str, lang: str, *, gold: Sequence[tuple[str, str]], xx_distractors: Sequence[str],
            en_distractors: Sequence[str], aligned: Sequence[tuple[str, str]], xx_size: int, en_size: int) -> StudySet:
    """A set of at most `xx_size` x `en_size` sentences: the gold pairs, then distractors in the
    order given, minus every one that may be a translation of a sentence on the other side
    (`aligned`: every (xx, en) pair of the sources, by text; module doc)."""
    gold = list(dict.fromkeys(gold))
    seen_x, seen_e, g = set(), set(), []
    for a, b in gold:  # one gold pair per text
        if a not in seen_x and b not in seen_e:
            seen_x.add(a)
            seen_e.add(b)
            g.append((a, b))
    en_of, xx_of = collections.defaultdict(set), collections.defaultdict(set)
    for a, b in aligned:
        en_of[a].add(b)
        xx_of[b].add(a)
    xx, en = [a for a, _ in g], [b for _, b in g]
    # An xx distractor aligned to a gold English text, or an English one aligned to any xx text of
    # the set, may be a translation of a sentence on the other side.
    dropped = _fill(xx, seen_x, xx_distractors, xx_size, en_of, set(en))
    dropped += _fill(en, seen_e, en_distractors, en_size, xx_of, seen_x)
    # Shuffle both sides so the gold is not the first rows (the search is order-free; the record is not).
    px, pe = _rng(0, name, "xx").permutation(len(xx)), _rng(0, name, "en").permutation(len(en))
    xx, en = [xx[i] for i in px], [en[i] for i in pe]
    row_x, row_e = {s: i for i, s in enumerate(xx)}, {s: i for i, s in enumerate(en)}
    pairs = np.array(sorted((row_x[a], row_e[b]) for a, b in g), dtype=np.int64).reshape(-1, 2)
    return StudySet(name=name, family=family, lang=lang, xx=xx, en=en, gold=pairs, dropped=dropped)


def _fill(side: list[str], seen: set[str], candidates: Sequence[str], size: int, aligned: dict, other: set[str]) -> int:
    """Append `candidates` to `side` (texts not `seen` yet) until it holds `size`, skipping those
    aligned (`aligned`: text -> texts of the other language) to a text in `other`; how many were skipped."""
    dropped = 0
    for text in candidates:
        if len(side) >= size:
            break
        if text in seen:
            continue
        if aligned.get(text, set()) & other:
            dropped += 1
            continue
        seen.add(text)
        side.append(text)
    return dropped


def _split(pairs: list, n_gold: int, key: str) -> tuple[list, list]:
    """The first `n_gold` of `pairs` in the order seeded by `key`, and the rest in that order. One
    order per source (not per set), so the sets of one language share their sentences (each is
    embedded once) and its sets of several sizes hide the same gold (a ladder)."""
    order = _rng(0, key, "order").permutation(len(pairs))
    return [pairs[i] for i in order[:n_gold]], [pairs[i] for i in order[n_gold:]]


#: news sets: (lang, gold pairs, xx side, en side)
NEWS = (("de", 500, 15_000, 50_000), ("de", 250, 2_000, 2_000), ("ru", 300, 8_000, 50_000), ("ru", 200, 2_000, 3_000),
        ("zh", 300, 8_000, 50_000), ("zh", 200, 2_000, 2_000), ("cs", 200, 4_000, 10_000), ("fi", 200, 3_000, 10_000),
        ("tr", 200, 3_000, 5_000), ("ja", 250, 3_000, 5_000), ("et", 250, 2_000, 2_000), ("kk", 250, 2_000, 2_000),
        ("lt", 500, 2_000, 2_000))
#: FLORES-200 codes of the wiki sets; those in WIKI_IN_NEWS also hidden among news: (lang, xx side, en side)
WIKI = ("deu_Latn", "rus_Cyrl", "zho_Hans", "jpn_Jpan", "kor_Hang", "arb_Arab", "hin_Deva", "tha_Thai", "heb_Hebr",
        "ell_Grek", "tam_Taml", "swh_Latn")
WIKI_GOLD = 150
WIKI_IN_NEWS = (("deu_Latn", "de", 8_000, 10_000), ("rus_Cyrl", "ru", 5_000, 10_000), ("zho_Hans", "zh", 5_000, 20_000),
                ("jpn_Jpan", "ja", 3_000, 5_000), ("fin_Latn", "fi", 3_000, 5_000))
#: Tatoeba-challenge pairs: (pair, gold, xx side, en side)
SHORT = (("deu-eng", 300, 3_000, 5_000), ("eng-rus", 300, 3_000, 5_000), ("eng-jpn", 200, 2_000, 3_000),
         ("eng-tur", 200, 2_000, 3_000), ("ara-eng", 200, 2_000, 2_000), ("eng-heb", 200, 2_000, 2_000),
         ("eng-ita", 500, 2_000, 2_000), ("eng-pol", 100, 2_000, 3_000), ("eng-fin", 200, 2_000, 2_000),
         ("ell-eng", 150, 2_000, 2_000))
#: MASSIVE locales: (locale, gold, xx side, en side)
TEMPLATED = (("de-DE", 300, 2_500, 4_000), ("ru-RU", 200, 2_000, 2_000), ("ja-JP", 200, 2_000, 2_000),
             ("ar-SA", 150, 2_000, 3_000), ("hi-IN", 500, 2_000, 2_000), ("ko-KR", 200, 2_000, 2_000),
             ("th-TH", 150, 2_000, 4_000), ("sw-KE", 200, 2_000, 2_000))
FAMILIES = ("news", "wiki", "short", "templated")


def build_sets(data: Path, *, families: Sequence[str] = FAMILIES) -> list[StudySet]:
    """Every set of `families` (deterministic: the same data gives the same sets)."""
    sets: list[StudySet] = []
    news_cache: dict[str, list] = {}

    def news(lang):
        if lang not in news_cache:
            news_cache[lang] = news_pairs(data, lang)
        return news_cache[lang]

    en_pool = english_news(data)[:EN_NEWS_POOL] if {"news", "wiki"} & set(families) else []
    if "news" in families:
        for lang, n_gold, nx, ne in NEWS:
            pairs = news(lang)
            name = f"news-{lang}-{nx // 1000}k"
            gold, rest = _split(pairs, n_gold, f"news-{lang}")
            sets.append(compose(name, "news", lang, gold=gold, xx_distractors=[a for a, _ in rest[0::2]],
                                en_distractors=[b for _, b in rest[1::2]] + en_pool, aligned=pairs,
                                xx_size=nx, en_size=ne))
    if "wiki" in families:
        for code in WIKI:
            pairs = flores_pairs(data, code)
            name = f"wiki-{code}"
            gold, rest = _split(pairs, WIKI_GOLD, "flores")
            # the other lines split in two disjoint halves: one side's distractors each
            sets.append(compose(name, "wiki", code, gold=gold, xx_distractors=[a for a, _ in rest[0::2]],
                                en_distractors=[b for _, b in rest[1::2]], aligned=pairs,
                                xx_size=len(pairs), en_size=len(pairs)))
        for code, lang, nx, ne in WIKI_IN_NEWS:
            pairs, npairs = flores_pairs(data, code), news(lang)
            name = f"wiki-{code}-in-news"
            gold, _ = _split(pairs, 2 * WIKI_GOLD, "flores")
            _, rest = _split(npairs, 0, f"news-{lang}")
            sets.append(compose(name, "wiki", code, gold=gold, xx_distractors=[a for a, _ in rest[0::2]],
                                en_distractors=[b for _, b in rest[1::2]] + en_pool, aligned=pairs + npairs,
                                xx_size=nx, en_size=ne))
    if "short" in families:
        all_pairs = {pair: tatoeba_pairs(data, pair) for pair, *_ in SHORT}
        en_short = sorted({b for ps in all_pairs.values() for _, b in ps})
        en_short = [en_short[i] for i in _rng(0, "english-short").permutation(len(en_short))[:EN_SHORT_POOL]]
        for pair, n_gold, nx, ne in SHORT:
            pairs = all_pairs[pair]
            name = f"short-{pair}"
            gold, rest = _split(pairs, n_gold, name)
            sets.append(compose(name, "short", pair, gold=gold, xx_distractors=[a for a, _ in rest[0::2]],
                                en_distractors=[b for _, b in rest[1::2]] + en_short, aligned=pairs, xx_size=nx, en_size=ne))
    if "templated" in families:
        en_rows = massive_rows(data, "en-US")
        train = sorted(i for i, (part, _) in en_rows.items() if part == "train")
        train = [train[i] for i in _rng(0, "massive-train").permutation(len(train))]
        en_ids, xx_ids = train[:EN_TEMPLATED_POOL], train[EN_TEMPLATED_POOL:]
        for locale, n_gold, nx, ne in TEMPLATED:
            rows = massive_rows(data, locale)
            both = [i for i in en_rows if i in rows]
            aligned = [(rows[i][1], en_rows[i][1]) for i in both]
            test = [(rows[i][1], en_rows[i][1]) for i in both if rows[i][0] == "test"]
            name = f"templated-{locale}"
            gold, _ = _split(test, n_gold, "massive-test")
            sets.append(compose(name, "templated", locale, gold=gold,
                                xx_distractors=[rows[i][1] for i in xx_ids if i in rows],
                                en_distractors=[en_rows[i][1] for i in en_ids], aligned=aligned,
                                xx_size=nx, en_size=ne))
    return sets


def source_files(data: Path) -> list[Path]:
    """Every data file the sets are built from (for the result's provenance)."""
    files = [p for p in (data / NEWSTEST).rglob("*") if p.is_file() and p.suffix[1:] in
             {lang for lang, *_ in NEWS} | {"en"}]
    files += [data / FLORES / f"{code}.devtest" for code in (*WIKI, *(c for c, *_ in WIKI_IN_NEWS), "eng_Latn")]
    files += [p for pair, *_ in SHORT for p in (data / TATOEBA / pair).iterdir()]
    files += [data / MASSIVE / f"{loc}.jsonl" for loc in (*(loc for loc, *_ in TEMPLATED), "en-US")]
    return sorted(set(files))


def sentences(sets: Sequence[StudySet]) -> list[str]:
    """Every sentence of `sets` once, smallest sets first (so a budgeted encoding finishes whole sets)."""
    out: dict[str, None] = {}
    for s in sorted(sets, key=lambda s: len(s.xx) + len(s.en)):
        out.update(dict.fromkeys(s.xx))
        out.update(dict.fromkeys(s.en))
    return list(out)


def fingerprint(sets: Sequence[StudySet]) -> str:
    h = hashlib.sha256()
    for s in sets:
        h.update(json.dumps([s.name, s.xx, s.en, s.gold.tolist()]).encode())
    return h.hexdigest()


__all__ = ["FAMILIES", "StudySet", "build_sets", "fingerprint", "sentences", "source_files"]
