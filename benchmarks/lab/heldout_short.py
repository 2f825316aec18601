"""`heldout-short`: the mining defaults on short everyday sentences of 16 languages nothing else reads.

    .venv/bin/python benchmarks/lab/run.py heldout-short      # -> benchmarks/results/heldout-short.json

`heldout-news` and `heldout-wiki` check the defaults on news and Wikipedia text in ten and two
languages. This is the same check (`heldout_news.run_check`: its sets, spaces, points and `xmine
calibrate` records) on a third domain and on many more languages, most of them low-resource:
Tatoeba-challenge pairs (short everyday sentences) of 16 languages in 4 scripts (`LANGS`), none of
them in any calibration family, in `bench tatoeba` (whose sentences the data folder already removed
from Tatoeba-challenge) or in the projection's recipe (which reads the Tatoeba-challenge pairs of
the XTREME-36 languages). Their English sentences are shared with other Tatoeba pairs, so a pair is
kept only where neither sentence is in a calibration set and its English is in neither the
projection's training files (the recipe's Tatoeba pairs) nor a `bench mining` folder; every set
written is checked against all of them.

Per language, at most `MAX_DRAWN` of its kept pairs in one seeded order: a fifth of them (100 to
300) gold, the rest alternately xx-only and English-only distractors (`calibration_sets.compose`:
no unlisted translation of the same source is left). `{lang}-dense`: those sentences alone (an
eighth to a third of each side gold); `{lang}-sparse`: the English side filled to 10,000 with the
English of the other languages' kept pairs (one seeded pool; those aligned to the xx side dropped),
1-3% of it with a translation. Tatoeba links one English sentence to one translation, but another
English sentence of the pool can still translate an xx sentence (a paraphrase: "I'm hungry." and "I
am hungry."): such a pair counts as false, as in the calibration's short family. raw use-m3 knows
none of the 16 languages, so they are measured in the me5-small spaces; six languages use-m3 was
trained on and the calibration's short family does not read (French, Spanish, Portuguese, Dutch,
Korean, Chinese: `USE_M3_LANGS`) give raw use-m3 its sets the same way, measured in that space
only (the projection's recipe trains on their Tatoeba pairs; use-m3 is no recipe's, so only the
calibration's sentences are left out of them). Each set also records whether
`xmine mine` notes its language as below the calibration's range (`language_notes`), and the
summary splits the sets by it. Armenian and Irish, whose unread pairs hold fewer than 100 gold
once each text is kept once, are left out. Nothing is chosen on these sets.
"""

from __future__ import annotations

from pathlib import Path

import click

from calibrate_defaults import DATA
from calibration_sets import TATOEBA, _rng, tatoeba_pairs
from heldout_news import _read_elsewhere, run_check, write_sets

#: Tatoeba-challenge folder -> the FLORES-200 code its language is written under (the sets' language)
LANGS = {"eng-ukr": "ukr_Cyrl", "eng-mkd": "mkd_Cyrl", "bel-eng": "bel_Cyrl", "eng-tat": "tat_Cyrl",
         "dan-eng": "dan_Latn", "eng-swe": "swe_Latn", "eng-isl": "isl_Latn", "eng-slv": "slv_Latn",
         "cat-eng": "cat_Latn", "aze-eng": "azj_Latn", "eng-tuk": "tuk_Latn",
         "eng-kab": "kab_Latn", "eng-run": "run_Latn", "eng-ilo": "ilo_Latn", "eng-uig": "uig_Arab",
         "eng-yid": "ydd_Hebr"}
#: languages raw use-m3 was trained on (none of LANGS is), measured in that space only: the
#: projection's recipe trains on their Tatoeba pairs, so for the me5-small spaces they are not held out
USE_M3_LANGS = {"eng-fra": "fra_Latn", "eng-spa": "spa_Latn", "eng-por": "por_Latn", "eng-nld": "nld_Latn",
                "eng-kor": "kor_Hang", "eng-cmn_Hans": "zho_Hans"}
#: the kept pairs a language's sets are drawn from, at most (its sets a few thousand a side)
MAX_DRAWN = 4_000
SPARSE_EN = 10_000


def recipe_english(data: Path) -> set[str]:
    """Every English sentence of the Tatoeba-challenge pairs the projection's recipe reads (its
    training data: `ship_projection.recipe_files`)."""
    from ship_projection import recipe_files

    return {en for f in recipe_files(data) if f.parent.parent == data / TATOEBA and f.suffix == ".eng"
            for _, en in tatoeba_pairs(data, f.parent.name)}


def build(data: Path, folder: Path) -> dict:
    """Every set of every language in BUCC's format under `folder`; their counts (a set of
    `USE_M3_LANGS` says the one space it is measured in: `spaces`)."""
    calibration, bench = _read_elsewhere(data)
    training = recipe_english(data)
    counts: dict = {"languages": {}, "sets": {}, "training_english": len(training)}
    # raw use-m3 is no recipe's: its languages' sets need only be unread by the calibration
    for langs, read, key, spaces in ((LANGS, calibration | training, "english_pool", None),
                                     (USE_M3_LANGS, calibration, "english_pool_use_m3", ["raw use-m3"])):
        aligned = {pair: tatoeba_pairs(data, pair) for pair in langs}
        unread = sorted({en for pairs in aligned.values() for xx, en in pairs
                         if xx not in read and en not in read and en not in bench})
        pool = [unread[i] for i in _rng(0, "heldout-short", "english").permutation(len(unread))]
        counts[key] = len(pool)
        for pair, code in langs.items():
            # the pool without this language's own English: its sparse side's added sentences are others'
            own = {en for _, en in aligned[pair]}
            write_sets(folder, code, aligned[pair], [en for en in pool if en not in own], read, bench, counts,
                       large=False, key="heldout-short", sparse_en=SPARSE_EN, max_pairs=MAX_DRAWN, spaces=spaces)
    return counts


def data_files() -> list[Path]:
    """The files the sets are built from."""
    return sorted(f for pair in (*LANGS, *USE_M3_LANGS) for f in (DATA / TATOEBA / pair).iterdir())


@click.command("heldout-short")
def command():
    """The mining defaults on Tatoeba sentences nothing else reads: 16 languages (me5-small spaces), 6 (raw use-m3)."""
    run_check("heldout-short", lambda folder: build(DATA, folder), data_files(),
              {"languages": LANGS, "use_m3_languages": USE_M3_LANGS, "max_drawn": MAX_DRAWN, "sparse_en": SPARSE_EN},
              languages_in_calibration=frozenset())
