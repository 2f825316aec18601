"""`heldout-wiki`: the mining defaults on Wikipedia text nothing in the project reads: FLORES v1 devtest.

    .venv/bin/python benchmarks/lab/run.py heldout-wiki      # -> benchmarks/results/heldout-wiki.json

`heldout-news` checks the defaults on news text only. This is the same check (`heldout_news`:
its sets, spaces, points and `xmine calibrate` records) on another domain: the Wikipedia sentences
of FLORES v1's devtest for Khmer-English and Pashto-English (Guzmán et al. 2019, v2 release),
which no calibration set, `bench mining` set or training recipe reads. The projection's recipe
reads FLORES v1's Nepali and Sinhala sets (so those are not used here), the first calibration
(`calibrate.py`, which no shipped value comes from any more) its Khmer and Pashto *dev* sets,
which share no sentence with the devtest (checked when the sets are built: no sentence of a set is
in any calibration set, any `bench mining` folder or those dev files). Neither language is in any
calibration family, and both are among the languages me5-small knows least (Pashto is
`heldout-news`'s worst set).

FLORES v1 mixes translations from and into English, and merges several references of one
sentence, so one text may have several translations: every pair of the language's devtest is
`aligned`, and no distractor that may translate a sentence on the other side is kept
(`calibration_sets.compose`). Per language, a fifth of its pairs (at most 300) is the gold:
`{lang}-dense` is those sentences and the language's other devtest sentences (a third of each side
has its translation); `{lang}-sparse` adds to the English side the other language's devtest
English (Wikipedia too; its sentences shared with this language's English count as aligned), so
about a tenth of it has a translation. raw use-m3 was trained on neither language, so only the
me5-small spaces are measured. Nothing is chosen on these sets.

Besides the defaults and `heldout-news`'s FLORES-200 records (`calibrated`), a user's own path:
`xmine calibrate --gold` on aligned lines of the same source, here FLORES v1's dev set of the
language (other sentences, same source and translators; `calibrated_dev`).
"""

from __future__ import annotations

from pathlib import Path

import click

from calibrate_defaults import DATA
from calibration_sets import _clean_pairs, _lines, _rng
from heldout_news import CALIBRATED_TITLE, _norm, _read_elsewhere, flores200_devtest, run_check, write_sets

#: FLORES v1's Wikipedia test sets, and the languages whose devtest is read here
FLORES_V1 = Path("parallel/flores-v1/flores_test_sets")
LANGS = ("km", "ps")


def devtest_pairs(data: Path, lang: str) -> list[tuple[str, str]]:
    """Every (xx, en) pair of FLORES v1's devtest of `lang`-English, white space folded, once."""
    base = data / FLORES_V1
    return _clean_pairs(zip(_lines(base / f"wikipedia.devtest.{lang}-en.{lang}"),
                            _lines(base / f"wikipedia.devtest.{lang}-en.en")))


def build(data: Path, folder: Path) -> dict:
    """Every set of both languages in BUCC's format under `folder`; their counts."""
    calibration, bench = _read_elsewhere(data)
    # the dev sets the first calibration read: no devtest sentence may be one of them
    dev = {_norm(s) for lang in LANGS for f in sorted((data / FLORES_V1).glob(f"wikipedia.dev.{lang}-en.*"))
           for s in _lines(f)}
    read = calibration | dev
    counts: dict = {"languages": {}, "sets": {}, "dev_sentences": len(dev)}
    for lang in LANGS:
        others = sorted({en for other in LANGS if other != lang for _, en in devtest_pairs(data, other)})
        pool = [others[i] for i in _rng(0, "heldout-wiki", lang, "english").permutation(len(others))]
        pool = [en for en in pool if en not in read and en not in bench]
        write_sets(folder, lang, devtest_pairs(data, lang), pool, read, bench, counts, large=False,
                   key="heldout-wiki", sparse_en=None)
    return counts


def dev_files(lang: str) -> tuple[list[Path], str]:
    """FLORES v1's dev set of `lang`-English: what `xmine calibrate --gold` would read from a user's own
    aligned lines of the corpus's source (other sentences, same source and translators)."""
    base = DATA / FLORES_V1
    return [base / f"wikipedia.dev.{lang}-en.{lang}", base / f"wikipedia.dev.{lang}-en.en"], "FLORES v1 dev"


def data_files() -> list[Path]:
    """The files the sets are built from."""
    return sorted(f for lang in LANGS for f in (DATA / FLORES_V1).glob(f"wikipedia.dev*.{lang}-en.*"))


@click.command("heldout-wiki")
def command():
    """The mining defaults of the me5-small spaces on FLORES v1 Wikipedia text (Khmer, Pashto) nothing else reads."""
    run_check("heldout-wiki", lambda folder: build(DATA, folder), data_files(), {"languages": list(LANGS)},
              languages_in_calibration=frozenset(),
              sources=(("calibrated", flores200_devtest, CALIBRATED_TITLE),
                       ("calibrated_dev", dev_files, "At the balanced threshold of `xmine calibrate --gold` on the "
                                                     "same source's dev set (FLORES v1 dev), in each margin (gap "
                                                     "to the best over both margins)")))
