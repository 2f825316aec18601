"""Splitting a record (a document or paragraph) into sentences, per language (--split-sentences).

The splitter of each language was chosen by measurement (`benchmarks/lab/splitters_flores.py`,
RESULTS.md): paragraphs rebuilt from consecutive FLORES-200 devtest lines, split by each
candidate, scored by how exactly the lines come back.

- Default: sentencex (Wikimedia's rule-based splitter with per-language abbreviation rules and
  language fallback chains; the optional extra `xmine[split]`). It was the best or close to it
  in most of the 204 languages, and clearly better than the baseline on Latin-script languages
  (abbreviations: English 65.7 vs 57.5 paragraphs exactly recovered).
- `OVERRIDES`: languages where the terminal-punctuation baseline below (`split_terminal`) beat
  sentencex by at least 2 points of exactly recovered paragraphs on the first half of FLORES
  (the benchmark reports the second half): among them Khmer (sentencex does not break at ។),
  Burmese and Shan (sentencex over-splits), Tibetan and Dzongkha (།), Chinese and Cantonese,
  Japanese, Amharic, Assamese, Manipuri, and several Latin-script African and Romance languages
  whose sentencex fallback rules split wrongly.
- Thai: no candidate finds Thai sentence boundaries (Thai marks them with a space, like clauses,
  and has no sentence punctuation); a Thai record stays mostly whole. Said in a warning.

A splitter returns the sentences of one record, white space at their ends removed, none empty.
A line break ends a sentence whatever the splitter: each line (or paragraph) of a record is split
on its own, as CCNet and stopes split web documents (a crawled page's headings and menu entries
are lines without sentence punctuation).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from xmine import __version__
from xmine.errors import ConfigError
from xmine.langs import iso1_code, normalize_lang

log = logging.getLogger("xmine.io.corpus")

# Terminal punctuation of many scripts: Latin/Cyrillic/Greek . ! ? and the ellipsis; Devanagari and
# Bengali danda । ॥; Ethiopic ። ፧; Burmese ။; Khmer ។ ៕; Arabic ؟ and Urdu ۔; Armenian ։; Tibetan །;
# Ol Chiki ᱾; double marks ‼ ⁇ ⁈ ⁉. A break needs white space (or a zero-width space) after it.
_TERMINAL = ".!?\u2026\u0964\u0965\u1362\u1367\u104b\u17d4\u17d5\u061f\u06d4\u0589\u0f0d\u1c7e\u203c\u2047\u2048\u2049"
# Full-width and ideographic marks 。！？．｡: Chinese and Japanese put no space after them.
_WIDE = "\u3002\uff01\uff1f\uff0e\uff61"
# Quotes and brackets that close a sentence after its punctuation.
_CLOSERS = "\"'\u201d\u2019\u00bb\u203a)\\]}\u300d\u300f\uff09\u3011"
_BREAK = re.compile(f"(?:[{re.escape(_TERMINAL)}]+[{re.escape(_CLOSERS)}]*(?=[\\s\u200b])|"
                    f"[{re.escape(_WIDE)}]+[{re.escape(_CLOSERS)}]*)[\\s\u200b]*")

#: The characters that break a line (or a paragraph, doubled): each line is split on its own.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")

#: The terminal-punctuation splitter's languages (canonical ISO 639-3, xmine.langs), chosen by
#: `benchmarks/lab/splitters_flores.py` (its rule: >= 2 points more paragraphs exactly recovered
#: than sentencex on the first half of FLORES-200 devtest, in every script of the language).
OVERRIDES = frozenset({
    "aka", "amh", "asm", "bod", "cmn", "dyu", "dzo", "ewe", "fon", "hne", "jpn", "kac", "kaz", "khm", "lim", "lmo",
    "mni", "mya", "shn", "twi", "vec", "yue",
})
#: Languages no measured splitter splits (FLORES-200: under 1% of paragraphs recovered).
UNSPLIT = frozenset({"tha"})

#: Per language, a piece ending so is joined with the next where that starts with a capital: German
#: ordinals ("im 19. Jahrhundert", "am Samstag, 26. Oktober"), which sentencex ends a sentence at
#: before a capitalised noun. Chosen on WMT newstest German (36,749 lines: 217 such splits joined,
#: 12 of 12 sampled wrong splits; 2 line ends would be joined, both cut-off lines "seit dem 10."),
#: reported on FLORES-200 devtest German: 11 of its 12 splits after "N." + capital joined, all 11
#: wrong splits, the one left a true end ("Cuddeback, 21."), no line end joined; on the paragraphs of
#: `benchmarks/lab/splitters_flores.py` (seed 0, its report half, 123 paragraphs) exactly recovered
#: 38.2 -> 40.7%, F1 70.0 -> 71.6, boundary recall 95.6 both. Not after "bis", "seit" or "ab", which
#: precede a count as often ("Kinder ab 6. Anmeldung ...", "bis 10. Dann ..."): they joined none of
#: the 290 pieces joined in all 45,606 newstest German lines, nor of FLORES-200's 11.
_DE_BEFORE_ORDINAL = ("am|im|vom|zum|zur|beim|dem|den|der|des|die|das|ins|ans|ihrem|ihren|ihre|ihr|"
                      "seinem|seinen|seine|sein|unserem|unseren|jedem|jeden")
_DE_DAYS = "Montag|Dienstag|Mittwoch|Donnerstag|Freitag|Samstag|Sonnabend|Sonntag"
JOINED_AFTER = {"deu": re.compile(rf"(?:^|\s)(?:(?:{_DE_BEFORE_ORDINAL})|(?:{_DE_DAYS}),)\s+\d{{1,2}}\.$",
                                  re.IGNORECASE)}


def split_terminal(text: str) -> list[str]:
    """Break after terminal punctuation of any script followed by white space (full-width
    Chinese/Japanese marks need none), closing quotes kept with the sentence; no abbreviation
    rules."""
    ends = [m.end() for m in _BREAK.finditer(text)]
    pieces = (text[start:end].strip() for start, end in zip([0, *ends], [*ends, len(text)]))
    return [piece for piece in pieces if piece]


def splitter_name(lang: str) -> str:
    """The splitter chosen for `lang` (any code xmine.langs reads): "terminal" or "sentencex"."""
    return "terminal" if normalize_lang(lang) in OVERRIDES else "sentencex"


@dataclass(kw_only=True, frozen=True)
class SentenceSplitter:
    """The splitter of one language; called on a record's text, returns its sentences."""

    #: canonical ISO 639-3 code (xmine.langs)
    lang: str
    #: "sentencex" or "terminal"
    library: str
    #: the library's version (xmine's for "terminal"); recorded in stores made with it
    version: str
    #: the library's call on one text
    _split: Callable[[str], Sequence[str]] = field(repr=False, compare=False)

    def __call__(self, text: str) -> list[str]:
        """The sentences of `text`, each of its lines (or paragraphs) split on its own: a line break
        ends a sentence (a crawled page's headings and menu entries are lines without punctuation;
        was: joined into the sentence after them, "Startseite Kontakt Das Museum ist ..."). Then a
        language's `JOINED_AFTER` rule joins pieces the library cut wrongly."""
        joined = JOINED_AFTER.get(self.lang)
        out: list[str] = []
        for line in _LINE_BREAK.split(text):
            first = len(out)  # pieces of this line only are joined (was: "bis 18." + the next line's "Kontakt")
            for piece in (s.strip() for s in self._split(line) if s.strip()):
                if len(out) > first and joined is not None and joined.search(out[-1]) and piece[:1].isupper():
                    out[-1] = f"{out[-1]} {piece}"
                else:
                    out.append(piece)
        return out

    def describe(self) -> dict[str, Any]:
        """What a store records (its input identity: a store split otherwise is not reused)."""
        return {"lang": self.lang, "library": self.library, "version": self.version, "line_breaks": "end sentences",
                **({"joined_after": "ordinals (2)"} if self.lang in JOINED_AFTER else {})}  # (its version)


def sentence_splitter(lang: str | None, *, what: str = "the corpus", option: str = "--lang",
                      warn: bool = True) -> SentenceSplitter:
    """The chosen splitter for `lang`; ConfigError (one line) when no language is given or the
    library is not installed. `warn=False`: a check before the run, which warns when it splits (was:
    the warning of a language without sentence punctuation said twice)."""
    if not lang or lang == "und":  # (was: "pass --lang" to a user who had passed --lang und)
        given = f"{option} und names no language" if lang == "und" else f"pass {option}"
        raise ConfigError(f"{what}: --split-sentences needs the language of the text (its splitter depends on "
                          f"it): {given}")
    code = normalize_lang(lang)
    if code in UNSPLIT and warn:
        log.warning("%s: no measured sentence splitter finds %s sentence boundaries (no sentence punctuation); "
                    "records are split only where they hold terminal punctuation", what, code)
    if splitter_name(code) == "terminal":
        return SentenceSplitter(lang=code, library="terminal", version=__version__, _split=split_terminal)
    try:
        from sentencex import segment
    except ImportError:
        raise ConfigError("--split-sentences needs the sentencex package: pip install 'xmine[split]' "
                          "(or pip install sentencex)") from None
    try:
        lib_version = version("sentencex")
    except PackageNotFoundError:
        lib_version = "unknown"
    key = iso1_code(code) or code
    return SentenceSplitter(lang=code, library="sentencex", version=lib_version,
                            _split=lambda text: segment(key, text))


__all__ = ["JOINED_AFTER", "OVERRIDES", "SentenceSplitter", "UNSPLIT", "sentence_splitter",
           "split_terminal", "splitter_name"]
