"""Calibrated defaults of a space (the embeddings a search scores in): threshold and score cap.

A space's margin scores have their own scale, so its defaults are recorded beside it: a shipped
projection's in its SHIPPED.json, a raw encoder's in `xmine/mining/calibration.json`
(`xmine.mining.defaults`). This module reads one record: thresholds per operating point and
margin, the `score_max` cap per margin, each a finite number, and the margin the space mines with
by default (else one InputError naming the file and the field).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from xmine.artefacts.records import EncoderId
from xmine.errors import InputError
from xmine.langs import same_language

#: the margin of a search that names none and of a space whose record names none: LASER's ratio
DEFAULT_MARGIN = "ratio"
#: the score of a margin that says nothing (a pair no closer than its neighbourhoods: cos = m): a
#: cap, and a threshold rule's steps, are measured from it, and no threshold lies below it (it
#: would keep nearly every candidate)
NEUTRAL = {"ratio": 1.0, "distance": 0.0}
#: the `kind` of the record `xmine calibrate` writes (xmine.mining.calibrate), which `xmine verify`
#: checks too, and what to do with one edited or damaged since it was written
CALIBRATION_KIND = "xmine-calibration"
CALIBRATION_DAMAGED_ADVICE = "none of its thresholds can be trusted; run xmine calibrate again (--overwrite replaces it)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpaceDefaults:
    """The calibrated values of one space."""

    #: operating point -> margin -> threshold
    thresholds: dict
    #: margin -> the `score_max` pair filter's cap (pairs scoring above it are dropped)
    score_max: dict
    #: where the values come from (a file), for the summary
    source: str
    #: operating point -> margin -> a rule that moves the threshold with the run
    #: (`xmine.mining.threshold_rule`): {"rule", "intercept", "slope", "centre", "floor"}
    rules: dict = dataclasses.field(default_factory=dict)
    #: the margin a search in this space scores with unless one is given (`default_margin` in the
    #: record; DEFAULT_MARGIN where it records none)
    margin: str = DEFAULT_MARGIN
    #: per FLORES-200 code and margin, the balanced threshold of the language's `xmine calibrate`
    #: record against English (`languages.values` in the record)
    languages: dict = dataclasses.field(default_factory=dict)
    #: margin -> [lowest, highest] of those thresholds over the languages of the calibration sets
    #: (`languages.calibration_range`): a language below it lies outside what the defaults were fitted on
    language_range: dict = dataclasses.field(default_factory=dict)
    #: the neighbours (k) of the margins the values were measured with (`k`, or a calibration
    #: record's `data.k`); None where the record does not say. Margins over another k run on
    #: another scale (higher with more neighbours), so the values hold for that k only.
    k: int | None = None
    #: the weights, pooling and prompt of the encoder the values were measured with
    #: (`EncoderId.weights` of the record's `encoder_id`, or of a calibration record's
    #: `encoder_fingerprint.id`); None where the record does not say. Embeddings of other weights or
    #: another prompt are another space. Precision and runtime are not part of it: they move few
    #: pairs across a threshold (int8 against bf16: 65 of about 3,970 mined pairs differ,
    #: benchmarks/results/notes/embed_speed.md, "End to end").
    encoder_weights: str | None = None

    def threshold(self, margin: str, point: str) -> float | None:
        return (self.thresholds.get(point) or {}).get(margin)

    def rule(self, margin: str, point: str) -> dict | None:
        return (self.rules.get(point) or {}).get(margin)


def _number(value, path: Path, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(path, f"{where}: expected a finite number, not {value!r}")
    return float(value)


def parse_defaults(record: dict, path: Path, where: str, source: str) -> SpaceDefaults:
    """`record`: {"operating_points": {point: {margin: t}}, "score_max": {margin: cap}} or the older
    {"default_thresholds": {margin: t}} (the balanced point)."""
    if not isinstance(record, dict):
        raise InputError(path, f"{where}: expected an object")
    points, legacy = record.get("operating_points"), False
    if points is None and "default_thresholds" in record:
        points, legacy = {"balanced": record["default_thresholds"]}, True
    points = points or {}
    caps = record.get("score_max") or {}
    for name, value in (("operating_points", points), ("score_max", caps)):
        if not isinstance(value, dict):
            raise InputError(path, f"{where}{name}: expected an object")
    thresholds = {}
    for point, per_margin in points.items():
        if not isinstance(per_margin, dict):
            raise InputError(path, f"{where}operating_points.{point}: expected an object")
        label = f"{where}default_thresholds" if legacy else f"{where}operating_points.{point}"
        thresholds[point] = {m: _number(t, path, f"{label}.{m}") for m, t in per_margin.items()}
        for m, t in thresholds[point].items():  # (mine refuses such a --threshold; was: taken from a record)
            if t < NEUTRAL.get(m, -math.inf):
                raise InputError(path, f"{label}.{m}: {t:g} is below an ordinary pair's {m} margin ({NEUTRAL[m]:g}): "
                                       "it would keep nearly every candidate")
    margin = record.get("default_margin", DEFAULT_MARGIN)
    if "default_margin" in record and margin not in thresholds.get("balanced", {}):  # it comes with its threshold
        raise InputError(path, f"{where}default_margin: {margin!r} is not a margin of {where}operating_points.balanced")
    languages, language_range = _languages(record.get("languages"), path, f"{where}languages")
    return SpaceDefaults(thresholds=thresholds, score_max={m: _number(c, path, f"{where}score_max.{m}")
                                                           for m, c in caps.items()}, source=source,
                         rules=_rules(record.get("threshold_rules") or {}, path, where), margin=margin,
                         languages=languages, language_range=language_range, k=_k(record, path, where),
                         encoder_weights=_encoder_weights(record, path, where))


def _encoder_weights(record: dict, path: Path, where: str) -> str | None:
    """`EncoderId.weights` of the encoder a record's values were measured with: its `encoder_id`,
    or `encoder_fingerprint.id` (the records of `xmine calibrate`); None where it records neither."""
    fingerprint = record.get("encoder_fingerprint")
    if "encoder_id" in record:
        label, text = f"{where}encoder_id", record["encoder_id"]
    elif isinstance(fingerprint, dict) and "id" in fingerprint:
        label, text = f"{where}encoder_fingerprint.id", fingerprint["id"]
    else:
        return None
    if not isinstance(text, str):
        raise InputError(path, f"{label}: expected an encoder id (a string), not {text!r}")
    return EncoderId.parse(text).weights


def _k(record: dict, path: Path, where: str) -> int | None:
    """The `k` a record's values were measured with: its own `k`, or `data.k` (the records of
    `xmine calibrate`); None where it records neither."""
    if "k" in record:
        label, k = f"{where}k", record["k"]
    elif isinstance(record.get("data"), dict):
        label, k = f"{where}data.k", record["data"].get("k")
    else:
        return None
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise InputError(path, f"{label}: expected a whole number of neighbours >= 1, not {k!r}")
    return k


def language_threshold(values: dict, lang: str | None, margin: str) -> tuple[str, float] | None:
    """(FLORES-200 code, threshold) of `lang` in `values` (`SpaceDefaults.languages`: code -> margin ->
    threshold): the one code of that language, script-aware (`langs.same_language`); None where no
    code or several match (`zh`: Simplified and Traditional) or that code has no value for `margin`."""
    codes = [c for c in values if lang and same_language(c, lang)]
    if len(codes) != 1 or margin not in values[codes[0]]:
        return None
    return codes[0], values[codes[0]][margin]


def _languages(record, path: Path, where: str) -> tuple[dict, dict]:
    """`languages`: {"values": {code: {margin: t}}, "calibration_range": {margin: [low, high]}}, each
    number checked; none recorded: ({}, {})."""
    if record is None:
        return {}, {}
    if not isinstance(record, dict) or not isinstance(record.get("values"), dict) \
            or not isinstance(record.get("calibration_range"), dict):
        raise InputError(path, f"{where}: expected an object with 'values' and 'calibration_range'")
    values = {}
    for code, per_margin in record["values"].items():
        if not isinstance(per_margin, dict):
            raise InputError(path, f"{where}.values.{code}: expected an object")
        values[code] = {m: _number(t, path, f"{where}.values.{code}.{m}") for m, t in per_margin.items()}
    span = {}
    for margin, pair in record["calibration_range"].items():
        if not isinstance(pair, list) or len(pair) != 2:
            raise InputError(path, f"{where}.calibration_range.{margin}: expected [low, high]")
        span[margin] = [_number(x, path, f"{where}.calibration_range.{margin}") for x in pair]
    return values, span


#: the threshold rules a record may hold, and their numbers (`xmine.mining.threshold_rule`)
RULES = {"mutual-null-share": ("intercept", "slope", "centre", "floor")}


def _rules(rules, path: Path, where: str) -> dict:
    """`threshold_rules`: {point: {margin: {"rule": name, number: value, ...}}}, each checked."""
    if not isinstance(rules, dict):
        raise InputError(path, f"{where}threshold_rules: expected an object")
    parsed: dict = {}
    for point, per_margin in rules.items():
        if not isinstance(per_margin, dict):
            raise InputError(path, f"{where}threshold_rules.{point}: expected an object")
        for margin, rule in per_margin.items():
            label = f"{where}threshold_rules.{point}.{margin}"
            if not isinstance(rule, dict) or rule.get("rule") not in RULES:
                got = rule.get("rule") if isinstance(rule, dict) else rule
                raise InputError(path, f"{label}: expected a rule of {', '.join(RULES)}, not {got!r}")
            parsed.setdefault(point, {})[margin] = {
                "rule": rule["rule"], **{k: _number(rule.get(k), path, f"{label}.{k}") for k in RULES[rule["rule"]]}}
    return parsed


__all__ = ["CALIBRATION_DAMAGED_ADVICE", "CALIBRATION_KIND", "DEFAULT_MARGIN", "SpaceDefaults", "language_threshold", "parse_defaults"]
