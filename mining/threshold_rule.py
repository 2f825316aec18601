"""The threshold a run of `xmine mine` keeps pairs at, and the rules that move it with the run.

`run_threshold` decides before the search: a threshold given, none, or the default of the space
mined in (`xmine.mining.defaults`: the calibrated value per margin and operating point, and the
`score_max` cap), and whether a rule will replace that value once the run's candidates are known;
`apply_run_threshold` applies such a rule to the candidates (selected without a threshold). The
summary line and OUT.json record which it was and why.

**A calibrated space** (balanced point, max retrieval) follows the run: one threshold per space
leaves corpora of near-duplicates far from their best F1 (issue #39): where many sentences have
near-duplicates on the other side (virtual-assistant utterances, boilerplate), a translation's
margin is small, and few of the candidates that are no translation are each other's best in both
directions. That share is read off the run itself, without gold, and the threshold moves down with
it, linearly (`rule_threshold`):

    t = intercept + slope * (min(max(share, floor), centre) - centre)

Only down: a share above the centre leaves the intercept (chosen apart from the space's single
threshold, benchmarks/results/notes/threshold_rules.md); moved up too, corpora denser in
translations than any calibration set (the demo) lost a tenth of their translations.

`share` (`mutual_null_share`): among the candidates of max retrieval (each source's and each
target's best, one to one, before any threshold), the share found in both directions
(`select.BOTH`) once the estimated translations are taken out. Translations are mutual best pairs,
so the plain share rises with their number; it is estimated by `run_estimate.estimate_true_pairs`
(a Gumbel law, a best of neighbours', fitted to the lower quantiles of the candidates' scores as
the null, the rest above it counted as translations).

`floor`: the lowest share of the calibration sets (below it the rule would keep nearly every
pair). The four are calibrated per space (`benchmarks/lab/threshold_rules.py`, held out by
family) and recorded as `threshold_rules` (`xmine.calibration.SpaceDefaults.rules`).

**A space without a calibration** (a user's projection, an encoder xmine ships no values for) has
no scale to read a threshold on, so its default is estimated from the run alone
(`run_estimate.estimated_threshold`): the cut of the largest estimated F1 under the same null. It
errs towards fewer, cleaner pairs where translations lie inside the null's bulk (short, templated
sentences); it never keeps every pair. Where the null fits every score, the mutual share of the
lower-scoring candidates (`run_estimate.mutual_low_share`) tells nearly all translations from none,
and a run taken for none keeps only the tail of its scores' law.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import replace

import numpy as np

from xmine.artefacts.directory import file_fingerprint
from xmine.artefacts.records import EncoderId
from xmine.calibration import DEFAULT_MARGIN, SpaceDefaults, language_threshold
from xmine.errors import ConfigError
from xmine.langs import UNDETERMINED, normalize_lang
from xmine.mining.calibrate import calibration_pair_note, read_calibration
from xmine.mining.config import SelectionConfig
from xmine.mining.defaults import DEFAULT_OPERATING_POINT, space_defaults
from xmine.mining.filters import PairFilterConfig
from xmine.mining.run_estimate import (MUTUAL_LOW_TRANSLATIONS, estimate_true_pairs, estimated_threshold,
                                       mutual_low_share)
from xmine.mining.select import BOTH, MinedPairs, MiningConfig

log = logging.getLogger(__name__)

RULE_NAME = "mutual-null-share"
#: the rule of a space without a calibration (`estimated_threshold`)
ESTIMATED = "estimated-from-run"


class RuleUse(enum.Enum):
    """What a caller of `run_threshold` can do with a rule of the run; the value is what a threshold
    record's source then says of a calibrated space's rule the caller cannot apply."""

    #: `xmine mine`: either rule, on its candidates after the search (`apply_run_threshold`)
    AFTER_SEARCH = ""
    #: `xmine mine --approximate`: the share read off candidates it does not refine runs low
    #: (MASSIVE de-en 8k x 7.5k: 0.61-0.62 against exact's 0.72, docs/mining.md), so a calibrated
    #: space keeps the rule's intercept, what exact mining keeps where the share is at or above the
    #: rule's centre (the single value, 1.025 against 1.0255, added 2-4% more pairs than exact on
    #: two of three families); the estimate of a space without one is taken after the search
    APPROXIMATE = (" (approximate search: the rule's intercept, which exact mining keeps where the run's share is "
                   "at or above the rule's centre, as ordinary corpora's are; the share is not read off approximate "
                   "candidates)")
    #: `xmine score`: a bitext's own pairs are no run's candidates, so a calibrated space keeps its
    #: single value, and a space without one keeps every pair
    NONE = (" (its single value: mine moves it with the share of translations among a run's candidates, "
            "which a bitext's own pairs are not)")


def mutual_null_share(mined: MinedPairs) -> float:
    """Among `mined` (max retrieval, no threshold), the share found in both directions once the
    estimated translations (all mutual) are taken out."""
    n = len(mined)
    if n == 0:
        return 0.0
    n_true = estimate_true_pairs(mined.score)
    mutual = float(np.count_nonzero(mined.direction == BOTH))
    return float(np.clip((mutual - n_true) / max(n - n_true, 1), 0, 1))


def rule_threshold(rule: dict, share: float) -> float:
    """The threshold `rule` ({"rule", "intercept", "slope", "centre", "floor"}) gives a run of share
    `share`: at most the intercept. Rounded to six decimals, finer than a float32 margin near 1 tells
    apart, so that the value recorded and applied is the one the summary prints (not 1.0311910000000002)."""
    return round(float(rule["intercept"] + rule["slope"] * (min(max(share, rule["floor"]), rule["centre"])
                                                            - rule["centre"])), 6)


def language_notes(found, margin: str, langs: tuple[str | None, str | None], what: str) -> list[dict]:
    """What the run's languages mean for the default of a shipped space (`found`, a SpaceDefaults):
    for each language whose FLORES-200 threshold (`found.languages`, its `xmine calibrate` record
    against English) lies below those of every language the space was calibrated on
    (`found.language_range`), a note: its translations score lower than any the default was fitted
    to, so the default is likely to keep too few of them (measured: benchmarks/results/notes/
    heldout_wiki.md, heldout_short.md), and its own calibration is one command away:
    {"language", "flores_threshold", "calibration_range", "note"}.
    A language without a FLORES-200 value (or English, the values' other side) gets none. A pair
    with no English side gets one too: every calibration set has English on one side.
    Each note's `summary` is what the command's summary line says of it."""
    notes = []
    codes = [normalize_lang(lang) if lang and lang != UNDETERMINED else None for lang in langs]
    if all(codes) and "eng" not in codes:
        pair = f"{langs[0]}-{langs[1]}"
        notes.append({"language": pair, "summary": f"{pair}: no English side, see above", "note": (
            f"{pair}: neither side is English, and the default of {what} was calibrated on pairs with English on "
            "one side; pairs of two other languages score lower, so it is likely to keep too few of them (the shipped "
            "me5-small projection on FLORES-200, 60% of one side's sentences hidden among the other's: recall at the "
            "default de-fr 0.89, zh-fr 0.46, ja-sw 0.34, against de-en 0.99, ja-en 0.82, sw-en 0.86, precision 1.00); "
            f"`xmine calibrate --src-lang {langs[0]} --tgt-lang {langs[1]}` measures this pair's own, for --calibration")})
    span = found.language_range.get(margin)
    if not span or not found.languages:
        return notes
    for lang, other in ((langs[0], langs[1]), (langs[1], langs[0])):
        found_lang = language_threshold(found.languages, lang, margin)
        if found_lang is not None and found_lang[1] < span[0]:
            code, value = found_lang
            notes.append({"language": code, "flores_threshold": value, "calibration_range": span,
                          "summary": f"{code}: below the calibration's languages, see above", "note": (
                f"{code}: its translations score lower in {what} than those of every language its default "
                f"was calibrated on (its FLORES-200 {margin} threshold {value:g}, theirs {span[0]:g}-{span[1]:g}), "
                f"so the default is likely to keep too few of them (and, where the encoder barely knows the language, "
                f"many false pairs); `xmine calibrate --src-lang {lang} --tgt-lang "
                f"{other or 'eng_Latn'}` measures its own, for --calibration")})
    return notes


def note_few_neighbours(record: dict, neighbourhoods: dict[str, int], k: int, *, remedy: str) -> None:
    """Where a threshold applies (`record`: `run_threshold`'s, its value final) to margins taken over
    fewer than `k` neighbours (a calibrated one's: fewer than the k it was measured at): the note why
    it may drop translations, with `remedy`, logged as a warning and recorded (`record["few_neighbours"]`).

    `neighbourhoods`: what each side's neighbourhoods are drawn from -> how many distinct sentences
    it holds (e.g. {"target side": 1}). A margin compares a pair's cosine with the mean cosine of
    each side's k nearest neighbours, the pair's own among them; where fewer than k are there, that
    mean leans on the pair itself (one sentence a side: both means are the pair's cosine, and the
    ratio margin is exactly 1), so margins run lower than on the sides of thousands every threshold
    was set on, and the threshold drops pairs it would keep in a larger corpus."""
    set_for = min(k, record.get("calibrated_k", k))  # (a calibrated value: the k it was measured at)
    short = {name: n for name, n in neighbourhoods.items() if n < set_for}
    if record["value"] is None or not short or 0 in short.values():  # (no sentence: nothing to drop)
        return
    sides = " and ".join(f"the {name} holds {n:,} distinct sentence{'' if n == 1 else 's'}" for name, n in short.items())
    record["few_neighbours"] = (f"{sides}, fewer than k={set_for}: margins over so few neighbours run lower than those the "
                                f"threshold was set for, so it may drop pairs it would keep in a larger corpus; {remedy}")
    log.warning("%s", record["few_neighbours"])


def note_cap_not_above(record: dict, filters: PairFilterConfig, margin: str) -> None:
    """Where the score cap is not above the threshold (`record`: `run_threshold`'s, its value
    final): the cap then drops every pair the threshold keeps. Logged as a warning and recorded
    (`record["cap_note"]`); a threshold given beside the cap is refused before (`check_score_cap`)."""
    value = record["value"]
    if value is None or "score_max" not in filters.active(margin) or filters.score_max > value:
        return
    record["cap_note"] = (f"the score cap {filters.score_max:g} is not above the threshold {value:g}: it drops every "
                          "pair the threshold keeps (a cap is for copies and boilerplate, far above translations; "
                          "the summary names the calibrated one)")
    log.warning("%s", record["cap_note"])


def keep_at_least(mined: MinedPairs, threshold: float) -> MinedPairs:
    """The pairs of `mined` (sorted, highest first) scoring >= threshold in float64, as `select_pairs` compares."""
    n = int(np.count_nonzero(mined.score >= np.float64(threshold)))
    return mined.take(np.arange(n))


def run_threshold(selection: SelectionConfig, config: MiningConfig, filters: PairFilterConfig, projection_dir,
                  encoder_name: str | None, *, rules: RuleUse = RuleUse.AFTER_SEARCH,
                  langs: tuple[str | None, str | None] = (None, None), encoder_id: EncoderId | None = None,
                  side_rows: int | None = None) -> tuple[MiningConfig, PairFilterConfig, dict]:
    """The config and filters to search and select with, and the summary's `threshold` record.

    `selection.threshold` a number or None: that (None: every pair kept). "default": the space's
    calibrated value (`selection.calibration`, the user's `xmine calibrate` record, before the
    shipped ones) at `selection.operating_point` for the margin (`selection.margin`, else the space's
    calibrated margin, which `config` then takes); where the space has a rule for it (max
    retrieval), `record["rule"]` says so and `apply_run_threshold` replaces the value after the
    search. A space without a calibration gets the `ESTIMATED` rule. Only the rules the caller can
    apply (`rules`) are given; without one, the record's source says what holds instead.
    `filters.score_max` None: the space's calibrated cap for the margin mined in (none without a
    calibration). Noted, logged and recorded: languages (`langs`) a shipped space's calibration does
    not reach (`language_notes`); calibrated values used at another k (`note_other_k`: over
    `side_rows`, the smaller side's rows, where fewer) or other embeddings (`note_other_encoder`)."""
    found, what = space_defaults(projection_dir, encoder_name, encoder_id=encoder_id)
    if selection.calibration is not None:
        found = read_calibration(selection.calibration, encoder_name=encoder_name, projection_dir=projection_dir,
                                 margin=found.margin if found is not None else DEFAULT_MARGIN, encoder_id=encoder_id)
    point = selection.operating_point or DEFAULT_OPERATING_POINT
    if selection.margin is not None:
        margin_source = "given (--margin)"
    elif not selection.calibrated:  # a number given (or none) is on the default margin's scale
        margin_source = "the default: the threshold is given or none"
    elif found is None:
        margin_source = f"the default: no calibration for {what}"
    else:
        config = config.replace(margin=found.margin)
        margin_source = (f"the calibrated margin of {what}" if selection.calibration is None
                         else f"the calibration record's: {found.source}")
    record = {"value": config.threshold, "margin": config.margin, "margin_source": margin_source,
              "operating_point": None}
    if selection.calibration is not None:  # which record, whole (was: its name inside the source's sentence)
        record["calibration"] = file_fingerprint(selection.calibration)
    if config.threshold is not None:
        record["source"] = f"given (--threshold), on the {config.margin} margin"
    elif not selection.calibrated:
        record["source"] = f"every pair kept (--threshold none), scored with the {config.margin} margin"
    elif found is None:
        record["source"] = f"no calibrated default for this space ({what})"
        if rules is RuleUse.NONE:
            record["source"] += ": every pair kept; pass --threshold or --calibration to choose one"
            log.info("threshold none: %s", record["source"])
        else:
            record["rule"] = {"rule": ESTIMATED}
    elif (value := found.threshold(config.margin, point)) is None:
        if selection.calibration is not None:  # (a helper: every pair kept, the space's own default set aside)
            held = sorted(found.thresholds.get(point) or {})  # (was: "--margin distance" to a run in it)
            other = [p for p, margins in found.thresholds.items() if p != point and config.margin in (margins or {})]
            raise ConfigError(f"{selection.calibration}: holds no {config.margin} threshold for the {point} operating "
                              f"point (it holds {', '.join(held) or 'none'}); mine with " + (f"--margin {held[0]}" if held
                              else f"--operating-point {other[0]}" if other else "another record") + ", or pass --threshold")
        record["source"] = f"every pair kept: {what} has no calibrated {config.margin} {point} threshold; pass --threshold"
        log.warning("%s", record["source"])  # (was: recorded only)
    else:
        config = config.replace(threshold=value)
        record |= {"value": value, "operating_point": point,
                   "source": f"the {point} {config.margin} threshold {found.source}"}
        if selection.calibration is None:
            notes = language_notes(found, config.margin, langs, what)
        else:  # a record of the user's own: noted only where it is another language pair's
            notes = [n for n in (calibration_pair_note(selection.calibration, langs),) if n is not None]
        if notes:
            record["language_notes"] = notes
            for note in notes:
                log.warning("%s", note["note"])
        rule = found.rule(config.margin, point)
        if rule is not None and config.retrieval == "max":
            if rules is RuleUse.AFTER_SEARCH:
                record["rule"] = {**rule, "calibrated_value": value}
            else:
                if rules is RuleUse.APPROXIMATE:  # (was: the intercept named as the calibrated value)
                    config = config.replace(threshold=float(rule["intercept"]))
                    record |= {"value": config.threshold, "calibrated_value": value,
                               "source": f"the intercept of the {point} {config.margin} threshold rule {found.source}"}
                # the summary line says where the value came from; why it is not moved is logged once
                record["source_brief"] = record["source"]
                record["source"] += rules.value
    cap_calibrated = filters.score_max is None  # (else given: --score-max)
    if cap_calibrated:
        cap = None if found is None else found.score_max.get(config.margin)
        filters = replace(filters, score_max=cap, score_margin=config.margin)
        record["score_max"] = {"value": cap, "source": f"{found.source}" if cap is not None else
                               f"no calibrated {filters.score_margin} cap for {what}: not applied"}
    else:
        record["score_max"] = {"value": filters.score_max, "source": "given (--score-max)"}
        if filters.score_margin != config.margin:
            record["score_max"]["source"] += (f", on the {filters.score_margin} scale: not applied when mining "
                                              f"with the {config.margin} margin")
    if found is not None:
        uses = calibrated_uses(record, cap=cap_calibrated and "score_max" in filters.active(config.margin))
        if uses and found.k is not None:
            record["calibrated_k"] = found.k  # what `note_few_neighbours` compares the sides with
        # A side of fewer rows than k gives margins over those rows (was: -k 170 on 167 rows, no word of
        # k=4, but "margins run lower"); under the calibration's k it is `note_few_neighbours`'
        used = config.k if side_rows is None else min(config.k, side_rows)
        if used == config.k or found.k is None or used >= found.k:
            note_other_k(record, found, config.k, what if selection.calibration is None else
                         f"the calibration record {selection.calibration}", uses, used=used)
        if encoder_id is not None:
            note_other_encoder(record, found, encoder_id, what, uses)
    if record["value"] is not None and "rule" not in record:  # a rule's value is logged once it is known
        log.info("threshold %g: %s", record["value"], record["source"])
    return config, filters, record


def calibrated_uses(record: dict, *, cap: bool) -> list[str]:
    """Which calibrated values the run (`record`: `run_threshold`'s) uses: "threshold" (the
    threshold, or the rule it starts from), "score cap" (`cap`: a calibrated cap applies)."""
    return [name for name, used in (("threshold", record.get("operating_point") is not None), ("score cap", cap))
            if used]


def _remedy_flags(uses: list[str]) -> str:
    return " and ".join({"threshold": "--threshold", "score cap": "--score-max"}[use] for use in uses)


def note_other_encoder(record: dict, found: SpaceDefaults, encoder_id: EncoderId, what: str, uses: list[str]) -> None:
    """Where the calibrated values the run uses (`uses`, `calibrated_uses`) were measured with
    embeddings of other weights, pooling or prompt than the run's (`encoder_id`): the note, logged as
    a warning and recorded (`record["other_encoder"]`). Another prompt is another space, whose
    margins the values do not fit (measured: docs/mining.md, "The margin")."""
    if found.encoder_weights is None or found.encoder_weights == encoder_id.weights or not uses:
        return
    calibrated, run = found.encoder_weights.split("|"), encoder_id.weights.split("|")
    differs = ([f"{a} (this run: {b})" for a, b in zip(calibrated, run) if a != b]
               if len(calibrated) == len(run) and calibrated[0] == run[0] else [found.encoder_weights])
    several = len(uses) > 1
    note = (f"the calibrated {' and '.join(uses)} of {what} {'were' if several else 'was'} measured with "
            f"{', '.join(differs)}: embeddings of other weights or another prompt score on another scale, so "
            f"{'they keep' if several else 'it keeps'} pairs that are no translations or "
            f"{'drop' if several else 'drops'} translations unpredictably; embed as the calibration did, calibrate "
            f"the space as this run embeds "
            f"(xmine calibrate with the same --prompt or --prompt-name, then --calibration), or pass "
            f"{_remedy_flags(uses)}")
    record["other_encoder"] = {"calibrated": found.encoder_weights, "run": encoder_id.weights, "note": note}
    log.warning("%s", note)


def note_other_k(record: dict, found: SpaceDefaults, k: int, what: str, uses: list[str], *,
                 used: int | None = None) -> None:
    """Where the calibrated values the run uses (`uses`, `calibrated_uses`) were measured with
    another k than the run's (`used`, the neighbours its margins are taken over where a side holds
    fewer rows than `k`): the note why they do not fit, with the remedies, logged as a warning and
    recorded (`record["other_k"]`).

    A margin divides (ratio) or offsets (distance) a pair's cosine by the mean cosine of each side's
    k nearest neighbours; with more neighbours that mean is lower and every margin higher, so a
    threshold set at k=4 keeps more at k=16, and precision falls (measured: docs/mining.md, "The
    margin")."""
    used = k if used is None else used
    if found.k is None or found.k == used or not uses:
        return
    higher = used > found.k
    effects = {"threshold": f"keeps pairs it would drop at k={found.k}" if higher else
                            f"drops translations it would keep at k={found.k}",
               "score cap": "drops pairs it would keep" if higher else "keeps pairs it would drop"}
    over = f"{k}" if used == k else f"{used} (the smaller side's rows)"
    note = (f"-k {k}: the calibrated {' and '.join(uses)} of {what} {'were' if len(uses) > 1 else 'was'} measured with "
            f"k={found.k} neighbours; margins over {over} run {'higher' if higher else 'lower'}, so "
            + " and ".join(f"the {use} {effects[use]}" for use in uses)
            + f": mine with -k {found.k}, calibrate the space at -k {k} (xmine calibrate -k {k}, then --calibration), "
              f"or pass {_remedy_flags(uses)}")
    record["other_k"] = {"k": k, "k_used": used, "calibrated_k": found.k, "note": note}
    log.warning("%s", note)


def apply_run_threshold(mined: MinedPairs, record: dict) -> MinedPairs:
    """The pairs of `mined` (every candidate, no threshold) at the threshold `record["rule"]` gives
    this run; `record` (`run_threshold`'s) then holds that threshold and how it was found."""
    rule = record["rule"]
    if rule["rule"] == ESTIMATED:
        mutual_low = mutual_low_share(mined.score, mined.direction == BOTH)
        estimate = estimated_threshold(mined.score, mutual_low=mutual_low)
        if estimate is None:  # (the record keeps its shape: what was not estimated is null)
            record |= {"mutual_low": None, "estimated_translations": None, "estimated_translations_kept": None}
            record["source"] += (f": every pair kept (too few candidates, {len(mined)}, to estimate a threshold "
                                 "from the run); pass --threshold to choose one")
            log.info("%s", record["source"])
            return mined
        found = estimate.mixture_found  # (else the counts are not estimated: recorded as null)
        cut = "the tail of the law of" if estimate.tail_cut else "the cut of the largest estimated F1 among"
        record |= {"value": estimate.value, "mutual_low": round(mutual_low, 4),
                   "estimated_translations": round(estimate.translations, 1) if found else None,
                   "estimated_translations_kept": round(estimate.translations_kept, 1) if found else None,
                   "source": f"{record['source']}: estimated from this run's scores ({cut} its {len(mined):,} "
                             "candidates); pass --threshold or --calibration to choose one",
                   "source_brief": f"estimated from this run's scores: {record['source']}; --threshold chooses one"}
        if estimate.tail_cut:
            above = int(np.count_nonzero(mined.score >= np.float64(estimate.value)))
            record["estimate_note"] = (
                f"this run's {len(mined):,} candidate scores show no share of translations apart from the rest, "
                f"and only {mutual_low:.2f} of the lower-scoring ones are each other's best in both directions "
                f"(translations nearly all are; {MUTUAL_LOW_TRANSLATIONS:.2f} or more is read as mostly "
                "translations): the candidates are taken to be mostly no translation, and only the pairs above the "
                f"tail of their scores' law are kept ({above:,} here, where about one would lie by chance: those "
                "that stand out are likely translations); if the sides hold more translations than that (sentences "
                "the encoder knows poorly can read so), pass --threshold or --calibration")
            record["estimate_summary"] = (f"no share of translations apart in the scores and few mutual pairs, only the "
                                          f"{above:,} above the tail of their law kept")
        elif not estimate.mixture_found:
            record["estimate_note"] = (
                f"this run's {len(mined):,} candidate scores show no share of translations apart from the "
                f"rest (the null law fits them all), and {mutual_low:.2f} of the lower-scoring ones are each "
                "other's best in both directions, as when translations are most of the candidates: the "
                "threshold read from them is not to be trusted (where the sides hold no translation after all, "
                "it keeps most candidates, all false), and the translations are not estimated; pass "
                "--threshold or --calibration")
            record["estimate_summary"] = "no share of translations apart in the scores, the estimate is not to be trusted"
        if "estimate_note" in record:
            log.warning("%s", record["estimate_note"])
    elif len(mined) == 0:  # no candidate to read a share off: the rule's value where it does not move
        record |= {"value": float(rule["intercept"]), "share": None,
                   "source": f"{record['source']}, the rule's intercept (no candidates to read this run's "
                             f"{rule['rule']} from)"}
    else:
        share = mutual_null_share(mined)
        value = rule_threshold(rule, share)
        record |= {"value": value, "share": round(share, 4),
                   "source_brief": f"{record['source']}, from this run's {rule['rule']} {share:.3f}",
                   "source": f"{record['source']}, from this run's {rule['rule']} {share:.3f} (rule: t = "
                             f"{rule['intercept']:g} + {rule['slope']:g} x (s - {rule['centre']:g}), s the share held "
                             f"to [{rule['floor']:g}, {rule['centre']:g}])"}
    log.info("threshold %g: %s", record["value"], record["source"])
    return keep_at_least(mined, record["value"])


__all__ = ["ESTIMATED", "RULE_NAME", "RuleUse", "apply_run_threshold", "calibrated_uses", "keep_at_least",
           "language_notes", "mutual_null_share", "note_cap_not_above", "note_few_neighbours", "note_other_encoder",
           "note_other_k",
           "rule_threshold", "run_threshold"]
