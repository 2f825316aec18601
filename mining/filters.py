"""Rules that drop mined pairs which are not translations, whatever their score.

In any embedding space a sentence copied verbatim from the other side is its own best
"translation", and boilerplate present on both sides (menus, copyright lines, numbers, URLs)
pairs with itself; such pairs fill the top of a mined web corpus. These rules, after bicleaner's
hard rules and stopes' score cap, drop them. Each is a small pure function
`rule(src, tgt, score, langs, config) -> True to drop` (`langs`: the two sides' language codes,
either may be None), on by default and switched off by name (`PairFilterConfig.disabled`):

- `identical`: the two sides are equal after `normalise` (NFKC, case folding, punctuation,
  symbols, digits and white space removed), or one side has nothing left after it;
- `score_max`: a margin above `score_max` (stopes' `score_max`, on the scale of `score_margin`):
  far above any translation, it is a copy, a near-copy or boilerplate. The cap is on the scale of
  the space mined in (use-m3's translations score 1.45-1.97 on the ratio margin, me5-small's far
  lower), so `xmine mine` takes each shipped space's calibrated cap (`mining.defaults`); a space
  without one is not capped;
- `script`: a side with less than `min_script_share` of its letters in a script its language is
  written in (`scripts.expected_scripts`; a language it does not know passes);
- `urls`: the sides' URLs and e-mail addresses differ;
- `numbers`: both sides hold numbers and neither side's digit groups are among the other's, read
  as written nor in the other readings of `number_readings` (not judged for Chinese, Japanese,
  Korean: `NUMBERS_SKIP`);
- `length_ratio`: the longer side is more than `max_length_ratio` times the shorter, by
  `scripts.text_length` (so a Chinese or Khmer sentence is comparable with its English translation);
- `language`: either side identified (`mining.langid`, backend `lid`) as another language than
  its own (close languages merged as `langid.accepts` says).

`apply_pair_filters` runs them in that order (cheapest first; a pair is charged to the first rule
that drops it) over pairs in chunks, so memory is bounded by the chunk. Defaults were chosen on
`xmine bench mining --noisy` (benchmarks/RESULTS.md), on some languages and checked on the others.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from typing import Sequence

import numpy as np

from xmine.errors import ConfigError, check_field_types
from xmine.langs import normalize_lang
from xmine.mining.langid import LID_BACKENDS, identify, is_other_language, knows, min_confidence_for, thresholds_record
from xmine.mining.scripts import expected_scripts, script_share, text_length

#: Rule names in the order they run; a dropped pair's reason is the first that fired.
RULES = ("identical", "score_max", "script", "urls", "numbers", "length_ratio", "language")
#: the rules that judge a side by its stated language (they judge nothing without one)
LANGUAGE_RULES = ("script", "language")
DEFAULT_MAX_LENGTH_RATIO = 3.0
#: Languages the `numbers` rule does not judge: they write large numbers with 万/億/만 units and
#: decades as "20 世纪 60 年代", so digit groups differ between correct translations.
NUMBERS_SKIP = frozenset({"cmn", "yue", "jpn", "kor"})
CHUNK_PAIRS = 65536


@dataclasses.dataclass(frozen=True, kw_only=True)
class PairFilterConfig:
    """Which pair filters run, and their limits."""

    #: False switches every rule off (the mined pairs are written as selected).
    enabled: bool = True
    #: Names of rules (from `RULES`) switched off.
    disabled: frozenset[str] = frozenset()
    #: `score_max`: drop pairs scoring above this. Stated on the scale of `score_margin`. None:
    #: the rule does not run (`xmine mine` fills in the calibrated cap of the space it mines in).
    score_max: float | None = None
    #: The margin `score_max` is stated in; mining with another margin skips the rule.
    score_margin: str = "ratio"
    #: `length_ratio`: the most the longer side may exceed the shorter, as a factor of
    #: `scripts.text_length` (characters without spaces, Chinese/Japanese letters x3, Korean x2).
    max_length_ratio: float = DEFAULT_MAX_LENGTH_RATIO
    #: `script`: a side is dropped when less than this share of its letters is in a script of its
    #: language (a Russian sentence quoting Latin-script names keeps a third or more).
    min_script_share: float = 0.25
    #: `language`: the language identification backend (`mining.langid.LID_BACKENDS`).
    lid: str = "fasttext"
    #: `language`: a side is rejected only when the detector gives the other language at least
    #: this confidence (short or mixed lines get low confidence and are kept). None: each side's
    #: language's own threshold (`mining.langid.min_confidence_for`: the per-language table of the
    #: default backend, else 0.8).
    lid_min_confidence: float | None = None

    def __post_init__(self):
        check_field_types(self, booleans=("enabled",), strings=("lid",),
                          reals=("score_max", "max_length_ratio", "min_script_share", "lid_min_confidence"))
        if self.lid not in LID_BACKENDS:  # (was: refused only where languages were given to judge by)
            raise ConfigError(f"lid must be one of {', '.join(LID_BACKENDS)}, not {self.lid!r}")
        if self.score_max is not None and not math.isfinite(self.score_max):
            raise ConfigError(f"score_max must be a finite number (got {self.score_max})")
        if isinstance(self.disabled, str):  # (was: "numbers" read as the rules n, u, m, b, e, r, s)
            raise ConfigError(f"disabled must be a set of rule names, not the string {self.disabled!r}; "
                              f"pass {{{self.disabled!r}}}")
        unknown = set(self.disabled) - set(RULES)
        if unknown:
            raise ConfigError(f"unknown pair filter(s) {', '.join(sorted(unknown))}; known: {', '.join(RULES)}")
        if not self.max_length_ratio >= 1:
            raise ConfigError(f"max_length_ratio must be at least 1, not {self.max_length_ratio}")
        if self.lid_min_confidence is not None and not 0 <= self.lid_min_confidence <= 1:
            raise ConfigError(f"lid_min_confidence must be in [0, 1], not {self.lid_min_confidence}")

    def active(self, margin: str, langs: tuple[str | None, str | None] | None = None) -> tuple[str, ...]:
        """The rules that run when mining with `margin`. `langs`, where given: the two sides' stated
        languages; the rules that judge a side by its language (`LANGUAGE_RULES`) do not run where
        neither side has one (was: listed as active while they could drop nothing)."""
        if not self.enabled:
            return ()
        unjudged = langs is not None and not any(langs)
        return tuple(r for r in RULES if r not in self.disabled
                     and not (r == "score_max" and (margin != self.score_margin or self.score_max is None))
                     and not (unjudged and r in LANGUAGE_RULES))

    def record(self, margin: str, langs: tuple[str | None, str | None] | None = None) -> dict:
        """What a summary records: the active rules and their values (see `active`), and where the
        language rule is active the per-language confidence it asks (`langid.thresholds_record`; mine's
        and score's summaries alike: was mine's alone)."""
        active = list(self.active(margin, langs))
        lid = ({"lid_thresholds": thresholds_record(langs, self.lid, self.lid_min_confidence)}
               if "language" in active and langs is not None else {})  # (None: languages unknown here)
        return dataclasses.asdict(self) | {"disabled": sorted(self.disabled), "active": active} | lid


_KEEP = {"L", "M"}  # letters and combining marks survive normalisation


def normalise(text: str, *, digits: bool = False) -> str:
    """The text compared by `identical`: NFKC, case-folded, only letters and marks kept (and
    decimal digits where `digits`: what tells a near-duplicate's number variants apart)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold()
                   if unicodedata.category(ch)[0] in _KEEP or (digits and ch.isdecimal()))


def identical(src: str, tgt: str, score: float, langs, config: PairFilterConfig) -> bool:
    a, b = normalise(src), normalise(tgt)
    return a == b or not a or not b


def score_max(src: str, tgt: str, score: float, langs, config: PairFilterConfig) -> bool:
    return score > config.score_max


def script(src: str, tgt: str, score: float, langs, config: PairFilterConfig) -> bool:
    for text, lang in zip((src, tgt), langs):
        want = expected_scripts(lang) if lang else None
        if want:
            share = script_share(text, want)
            if share is not None and share < config.min_script_share:
                return True
    return False


_URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"']+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.IGNORECASE)


def urls_of(text: str) -> set[str]:
    """URLs and e-mail addresses of `text`, lower-cased, without trailing punctuation or slash."""
    return {u.lower().rstrip(".,;:!?)]}»\"'/") for u in _URL.findall(text)}


def urls(src: str, tgt: str, score: float, langs, config: PairFilterConfig) -> bool:
    return urls_of(src) != urls_of(tgt)


# A number: digit groups joined by a locale's separators (. , : ' narrow/no-break space, the Arabic
# comma and decimal and thousands separators), or by a space before a group of exactly three digits
# ("17 500").
_NUMBER = re.compile(r"\d+(?:[.,:'\u00a0\u202f\u060c\u066b\u066c]\d+|\s\d{3}(?!\d))*")
# A clock time written with "h" between hours and minutes (French and others: "22 h 00", "21h19").
_H_TIME = re.compile(r"\b(\d{1,2})\s?h\s?(\d{2})\b")


def numbers_of(text: str) -> set[str]:
    """Numbers of `text` as their digits only (any script's digits as ASCII, NFKC; leading zeros
    dropped), so the separators of different locales do not matter: "1,000", "1.000", "1 000"
    and "1000" all give "1000"; "3.5" and "3,5" give "35". Hours and two-digit minutes, whatever
    joins them (`:`, `.`, `,`, "h"), are a clock time read on a 12-hour dial, with ":00" dropped:
    "12:00", "12.00", "12 h 00" and "12" give "12"; "20:30", "8.30" and "20 h 30" give "830"."""
    return {_canonical(g) for g in _NUMBER.findall(_H_TIME.sub(r"\1:\2", _ascii_digits(text)))}


def _ascii_digits(text: str) -> str:
    # A vulgar fraction as its decimal first ("29¾" is 29.75; NFKC would make it "293⁄4")
    t = _FRACTION.sub(lambda m: (m[1] or "0") + _FRACTIONS[m[2]], text) if _FRACTION_CHARS & set(text) else text
    t = unicodedata.normalize("NFKC", t)
    return "".join(str(unicodedata.digit(ch)) if ch.isdigit() and not ch.isascii() else ch for ch in t)


_FRACTIONS = {"½": ".5", "¼": ".25", "¾": ".75", "⅛": ".125", "⅜": ".375", "⅝": ".625", "⅞": ".875",
              "⅕": ".2", "⅖": ".4", "⅗": ".6", "⅘": ".8", "⅒": ".1"}
_FRACTION_CHARS = set(_FRACTIONS)
# (from the first digit of a run only: a long run of digits is scanned once, not from each digit)
_FRACTION = re.compile(f"(?<!\\d)(\\d*)\\s?([{''.join(_FRACTIONS)}])")
# Two numbers joined by a colon or a dash ("6:6", "6-6", "11-50" for 11:50): read as one pair,
# in order, on both sides (a score, a ratio, a time).
_PAIR = re.compile(r"(?<!\d)(?<!\d[.,:])(\d{1,3})\s?[-–—:]\s?(\d{1,3})(?!\d)(?![.,:]\d)")
_COLON_PAIR = re.compile(r"(\d{1,3}):(\d{1,3})")
# Three or more numbers joined by commas, not in groups of thousands: a list ("1,2,3" as "1, 2, 3").
_LIST = re.compile(r"\d+(?:,\d+){2,}")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+")
# A day.month. date ("17.9.1939", "24.8.–"): its day and year, the numbers a translation that
# writes the month as a word holds ("September 17, 1939").
_DAY_MONTH = re.compile(r"(\d{1,2})\.(\d{1,2})(?:\.(\d{4}))?")
# Four digits as a 24-hour time: only before a time zone or an hours word ("1200 GMT").
_TIME_WORD = re.compile(r"\s?(?:GMT|UTC|Z|h|hrs|hours|Uhr)\b")
# An hour on the 12-hour dial after noon ("7 pm").
_PM = re.compile(r"\s?(?:pm|p\.m\.|PM|P\.M\.)")
_WORD = re.compile(r"\s?([^\W\d_]+)")
#: digits of the longest number read otherwise than as written (a trillion in digits is 13)
_MAX_READ_DIGITS = 15
# A number before a scale word is that many thousands, millions or billions ("6 mil" is 6,000,
# "1,8 milliard" 1,800,000,000): words (lower-cased) and their prefixes, of the languages FLORES-200
# and newstest write so.
_SCALE_WORDS = {"mil": 3, "mille": 3, "mila": 3, "bin": 3, "tsd": 3, "mln": 6, "bn": 9, "mrd": 9}
_SCALE_PREFIXES = (
    ("billion", 9), ("milliard", 9), ("miliard", 9), ("miljard", 9), ("milyar", 9), ("млрд", 9),
    ("миллиард", 9), ("мільярд", 9), ("million", 6), ("millón", 6), ("millon", 6), ("milhão", 6), ("milhõ", 6),
    ("milion", 6), ("miljon", 6), ("miljoen", 6), ("milyon", 6), ("millió", 6), ("milijon", 6), ("миллион", 6),
    ("мільйон", 6), ("милион", 6), ("εκατομ", 6), ("triệu", 6), ("juta", 6), ("thousand", 3), ("tausend", 3),
    ("tys", 3), ("тыс", 3), ("тис", 3), ("хиляд", 3), ("tisíc", 3), ("tisuć", 3), ("tisoč", 3), ("tūkst", 3),
    ("tuhat", 3), ("tuhann", 3), ("ezer", 3), ("duizend", 3), ("tusen", 3), ("tusind", 3), ("χιλιάδ", 3),
    ("ngàn", 3), ("nghìn", 3), ("ribu", 3), ("elfu", 3), ("hazar", 3), ("هزار", 3), ("ألف", 3), ("آلاف", 3))


def _scaled(group: str, following: str) -> str | None:
    """`group` times the scale word that starts `following`, as digits; None without one."""
    word = _WORD.match(following)
    if word is None:
        return None
    w = word[1].lower()
    zeros = _SCALE_WORDS.get(w) or next((z for prefix, z in _SCALE_PREFIXES if w.startswith(prefix)), None)
    if zeros is None:
        return None
    decimal = re.fullmatch(r"(\d+)[.,](\d{1,2})", group)  # "1,8": a decimal (three digits: thousands)
    whole, fraction = (decimal[1], decimal[2]) if decimal else (re.sub(r"\D", "", group), "")
    return (whole + fraction.ljust(zeros, "0")).lstrip("0") or "0"


def number_readings(text: str, lang: str | None = None) -> list[set[frozenset[str]]]:
    """Each number of `text` (as `numbers_of` finds it) with the other ways a translation may write
    it, each reading the numbers the translation then holds: two numbers joined by a colon as one
    ordered pair ("6:6" as "6-6", "11:50" as "11-50"); a date's day and year ("17.9.1939" as
    "September 17, 1939"); a number before a scale word as its value ("6 mil" as "6,000"); four
    digits before a time zone as a 24-hour time ("1200 GMT" as "12:00"); an hour before "pm" on the
    24-hour dial ("7 pm" as "19 Uhr"); a decade ("1960s" as the "60" of "años 60"); the end of a
    year range ("2006-12" as 2006-2012); three or more numbers joined by commas, not as thousands, as
    a list ("1,2,3" as "1, 2, 3"); a Thai year of the Buddhist era as the common era's (2499
    as 1956). `pairs_written` gives the pairs a side holds. With them the rule drops 630 of
    FLORES-200 devtest's translations into English where the digits alone drop 892, and keeps 12
    more of 24,241 near-miss wrong pairs (`python benchmarks/lab/run.py numbers-filter`)."""
    t = _H_TIME.sub(r"\1:\2", _ascii_digits(text))
    thai = bool(lang) and normalize_lang(lang) == "tha"
    out = []
    for match in _NUMBER.finditer(t):
        # (what follows and precedes, in windows: a line of many numbers is read in linear time)
        group, after = match.group(), t[match.end():match.end() + 32]
        before = t[max(0, match.start() - 8):match.start()]
        number = _canonical(group)
        readings = {frozenset({number})}
        if len(number) > _MAX_READ_DIGITS:  # (an ID or a hash: no other reading, and no int() of it)
            out.append(readings)
            continue
        if (scaled := _scaled(group, after)) is not None:
            readings.add(frozenset({scaled}))
        if len(number) == 4 and int(number[:2]) < 24 and int(number[2:]) < 60 and _TIME_WORD.match(after):
            readings.add(frozenset({_canonical(f"{number[:2]}:{number[2:]}")}))
        if 1 <= int(number) <= 11 and _PM.match(after):
            readings.add(frozenset({str(int(number) + 12)}))  # "7 pm" as "19 Uhr"
        if len(number) == 4 and number[2] != "0" and number[3] == "0" and re.match(r"(?:['’]?s)\b", after):
            readings.add(frozenset({number[2:]}))  # the 1960s
        if len(group) == 2 and (start := re.search(r"(?<!\d)(\d\d)\d\d\s?[-–/]\s?$", before)):
            readings.add(frozenset({start[1] + group}))  # 2006-12
        if thai and len(number) == 4 and 2400 <= int(number) < 2700:
            readings.add(frozenset({str(int(number) - 543)}))
        if _LIST.fullmatch(group) and not _THOUSANDS.fullmatch(group):  # "1,2,3" as 1, 2 and 3
            readings.add(frozenset(p.lstrip("0") or "0" for p in group.split(",")))
        if pair := _COLON_PAIR.fullmatch(group):
            readings.add(frozenset({f"{int(pair[1])}:{int(pair[2])}"}))
        # (without a year, only where a dot and no space follow, "24.8.–5.9.": not a decimal ending
        # a sentence)
        date = _DAY_MONTH.fullmatch(group)
        if date and 1 <= int(date[1]) <= 31 and 1 <= int(date[2]) <= 12 and (date[3] or re.match(r"\.\S", after)):
            readings.add(frozenset(p.lstrip("0") or "0" for p in (date[1], date[3]) if p))
        out.append(readings)
    return out


def pairs_written(text: str) -> set[str]:
    """The ordered pairs of numbers `text` joins by a colon or a dash ("6-6" gives "6:6"), the
    form `number_readings` reads a colon pair in."""
    return {f"{int(a)}:{int(b)}" for a, b in _PAIR.findall(_ascii_digits(text))}


# Hours and minutes: also a decimal with two places ("3.50", "3,50"), which reads the same way in
# every language, so the two agree whichever it is.
_TIME = re.compile(r"(\d{1,2})[:.,\u060c\u066b](\d{2})")


def _canonical(number: str) -> str:
    # A clock time on the 12-hour dial: "23:35" and "11:35 pm" are the same time, "15.00" and "3 pm".
    t = _TIME.fullmatch(number)
    if t and int(t.group(1)) < 24 and int(t.group(2)) < 60:
        hour = int(t.group(1)) % 12
        if t.group(2) == "00":  # "12:00" is the "12" of "12 Uhr"
            return str(hour or 12)
        return f"{hour}{t.group(2)}".lstrip("0")  # ("0.25" and "12:25" give "25", as before)
    return re.sub(r"\D", "", number).lstrip("0") or "0"


def numbers(src: str, tgt: str, score: float, langs, config: PairFilterConfig) -> bool:
    # A subset is allowed: one side may spell out what the other writes in digits ("July" / 7月).
    if any(lang and normalize_lang(lang) in NUMBERS_SKIP for lang in langs):
        return False
    a, b = numbers_of(src), numbers_of(tgt)
    if not a or not b or a <= b or b <= a:
        return False
    # The digits alone disagree: keep the pair where one side's numbers, each in one of its readings,
    # are all among what the other side's numbers read.
    a, b = number_readings(src, langs[0]), number_readings(tgt, langs[1])
    return not (_read_in(a, _held(b, tgt)) or _read_in(b, _held(a, src)))


def _held(readings: list[set[frozenset[str]]], text: str) -> set[str]:
    """Every number a side's readings hold, and the pairs it writes."""
    return {n for alternatives in readings for reading in alternatives for n in reading} | pairs_written(text)


def _read_in(numbers: list[set[frozenset[str]]], held: set[str]) -> bool:
    """Whether each of `numbers` has a reading whose numbers are all in `held`."""
    return all(any(reading <= held for reading in readings) for readings in numbers)


def length_ratio(src: str, tgt: str, score: float, langs, config: PairFilterConfig) -> bool:
    a, b = text_length(src), text_length(tgt)
    return max(a, b) > config.max_length_ratio * max(min(a, b), 1)


def wrong_language(src_pred, tgt_pred, langs, config: PairFilterConfig, texts=(None, None)) -> bool:
    """`language` on predictions ((code, confidence) of each side, None where not identified)."""
    for pred, lang, text in zip((src_pred, tgt_pred), langs, texts):
        if (pred is not None and lang and is_other_language(
                lang, *pred, min_confidence_for(lang, config.lid, config.lid_min_confidence))):
            # Chinese written mostly in kanji-like characters is often labelled Japanese; Japanese
            # text nearly always holds kana.
            if pred[0] == "jpn" and normalize_lang(lang) == "cmn" and text is not None and not _KANA.search(text):
                continue
            return True
    return False


_KANA = re.compile(r"[\u3040-\u30ff]")


_TEXT_RULES = {"identical": identical, "score_max": score_max, "script": script, "urls": urls,
               "numbers": numbers, "length_ratio": length_ratio}


def apply_pair_filters(src_texts: Sequence[str], tgt_texts: Sequence[str], scores: Sequence[float], *,
                       langs: tuple[str | None, str | None] = (None, None),
                       config: PairFilterConfig = PairFilterConfig(), margin: str = "ratio",
                       lid_out: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(keep, reasons) for pairs i = (src_texts[i], tgt_texts[i]) scored scores[i].

    keep: bool per pair. reasons: int8 per pair, -1 where kept, else the index in `RULES` of the
    first rule that dropped it. The texts may be lazy sequences (indexed chunk by chunk).
    `lid_out`: when given and the `language` rule judges a side, filled with that side's
    `{side}_lid` (the identified language, "" where not identified) and `{side}_lid_score` (the
    detector's confidence, NaN where not identified) per pair, side "src" or "tgt"."""
    n = len(scores)
    if len(src_texts) != n or len(tgt_texts) != n:
        raise ValueError(f"{len(src_texts)} source and {len(tgt_texts)} target texts for {n} scores")
    reasons = np.full(n, -1, dtype=np.int8)
    active = config.active(margin, langs)
    text_rules = [(RULES.index(r), _TEXT_RULES[r]) for r in active if r in _TEXT_RULES]
    # per side: whether `language` judges it (a language the backend knows)
    lid_sides = ["language" in active and knows(config.lid, lang) for lang in langs]
    if lid_out is not None:
        for side, judged in zip(("src", "tgt"), lid_sides):
            if judged:
                lid_out[f"{side}_lid"] = np.full(n, "", dtype=object)
                lid_out[f"{side}_lid_score"] = np.full(n, np.nan, dtype=np.float32)
    for start in range(0, n, CHUNK_PAIRS):
        stop = min(start + CHUNK_PAIRS, n)
        src = [src_texts[i] for i in range(start, stop)]
        tgt = [tgt_texts[i] for i in range(start, stop)]
        sc = [float(scores[i]) for i in range(start, stop)]
        for j in range(stop - start):
            for code, rule in text_rules:
                if rule(src[j], tgt[j], sc[j], langs, config):
                    reasons[start + j] = code
                    break
        if any(lid_sides):
            _language_rule(src, tgt, reasons[start:stop], langs, lid_sides, config, lid_out=lid_out, offset=start)
    return reasons < 0, reasons


def _language_rule(src, tgt, reasons, langs, lid_sides, config, *, lid_out=None, offset=0) -> None:
    """Identify the languages of the still-kept pairs of a chunk (batched) and mark wrong ones."""
    todo = np.flatnonzero(reasons < 0)
    preds = []
    for side, texts, judged in zip(("src", "tgt"), (src, tgt), lid_sides):
        if judged and len(todo):
            codes, conf = identify([texts[i] for i in todo], config.lid)
            preds.append(list(zip(codes, conf.tolist())))
            if lid_out is not None:
                lid_out[f"{side}_lid"][offset + todo] = [c or "" for c in codes]
                lid_out[f"{side}_lid_score"][offset + todo] = conf
        else:
            preds.append([None] * len(todo))
    code = RULES.index("language")
    for j, i in enumerate(todo):
        if wrong_language(preds[0][j], preds[1][j], langs, config, texts=(src[i], tgt[i])):
            reasons[i] = code


def counts(reasons: np.ndarray, config: PairFilterConfig, margin: str,
           langs: tuple[str | None, str | None] | None = None) -> dict[str, int]:
    """Pairs removed by each active rule (a summary's `filters.removed`)."""
    return {r: int((reasons == RULES.index(r)).sum()) for r in config.active(margin, langs)}
