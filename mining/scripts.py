"""Which Unicode script a text is written in, and which scripts a language is written in.

`script_share(text, scripts)`: the share of its letters in some scripts, by the first word of
each letter's Unicode name ("LATIN", "CYRILLIC", "CJK", "HIRAGANA", "ARABIC" ...), after NFKC
(so full-width Latin is Latin), dense scripts' letters weighted (`DENSE_SCRIPTS`).
`text_length`: a length comparable across scripts. `expected_scripts(lang)`: the scripts a
language may dominate in, from the ISO 15924 part of a FLORES/NLLB code (`srp_Cyrl`: Cyrillic
only) or else from `LANGUAGE_SCRIPTS` (Serbian and Kazakh: Cyrillic or Latin; Japanese: Han or
kana; Korean: Hangul or Han). None where the language is not listed: the `script` pair filter
then does not judge it.
"""

from __future__ import annotations

import functools
import unicodedata

from xmine.langs import normalize_lang

# ISO 15924 code -> the first word(s) of its letters' Unicode names.
ISO15924 = {
    "Latn": {"LATIN"}, "Cyrl": {"CYRILLIC"}, "Grek": {"GREEK"}, "Arab": {"ARABIC"}, "Hebr": {"HEBREW"},
    "Deva": {"DEVANAGARI"}, "Beng": {"BENGALI"}, "Guru": {"GURMUKHI"}, "Gujr": {"GUJARATI"}, "Orya": {"ORIYA"},
    "Taml": {"TAMIL"}, "Telu": {"TELUGU"}, "Knda": {"KANNADA"}, "Mlym": {"MALAYALAM"}, "Sinh": {"SINHALA"},
    "Thai": {"THAI"}, "Laoo": {"LAO"}, "Khmr": {"KHMER"}, "Mymr": {"MYANMAR"}, "Tibt": {"TIBETAN"},
    "Geor": {"GEORGIAN"}, "Armn": {"ARMENIAN"}, "Ethi": {"ETHIOPIC"}, "Hang": {"HANGUL", "CJK"},
    "Hans": {"CJK"}, "Hant": {"CJK"}, "Hani": {"CJK"}, "Jpan": {"CJK", "HIRAGANA", "KATAKANA"},
    "Kore": {"HANGUL", "CJK"}, "Thaa": {"THAANA"}, "Tfng": {"TIFINAGH"}, "Olck": {"OL"}, "Mtei": {"MEETEI"},
}
_L, _C = {"LATIN"}, {"CYRILLIC"}
#: Scripts by canonical language code (xmine.langs.normalize_lang) for codes without a script part.
LANGUAGE_SCRIPTS: dict[str, set[str]] = {
    **{c: _L for c in ("eng", "deu", "fra", "spa", "por", "ita", "nld", "ces", "pol", "fin", "lit", "lav", "est",
                       "hun", "ron", "slk", "slv", "hrv", "bos", "swe", "dan", "nob", "nno", "isl", "tur", "vie",
                       "ind", "zsm", "tgl", "swh", "hau", "yor", "ibo", "som", "afr", "eus", "cat", "glg", "cym",
                       "gle", "mlt", "sqi", "jav", "uzb", "aze", "tuk", "epo", "lat", "ltz")},
    **{c: _C for c in ("rus", "ukr", "bel", "bul", "mkd", "kir", "tgk", "tat", "bak")},
    "srp": _L | _C, "kaz": _C | _L, "mon": _C,
    "cmn": {"CJK"}, "yue": {"CJK"}, "jpn": {"CJK", "HIRAGANA", "KATAKANA"}, "kor": {"HANGUL", "CJK"},
    "ara": {"ARABIC"}, "pes": {"ARABIC"}, "urd": {"ARABIC"}, "pus": {"ARABIC"}, "snd": {"ARABIC"},
    "heb": {"HEBREW"}, "ell": {"GREEK"}, "hin": {"DEVANAGARI"}, "mar": {"DEVANAGARI"}, "nep": {"DEVANAGARI"},
    "ben": {"BENGALI"}, "pan": {"GURMUKHI"}, "guj": {"GUJARATI"}, "tam": {"TAMIL"}, "tel": {"TELUGU"},
    "kan": {"KANNADA"}, "mal": {"MALAYALAM"}, "sin": {"SINHALA"}, "tha": {"THAI"}, "lao": {"LAO"},
    "khm": {"KHMER"}, "mya": {"MYANMAR"}, "kat": {"GEORGIAN"}, "hye": {"ARMENIAN"}, "amh": {"ETHIOPIC"},
    "tir": {"ETHIOPIC"}, "bod": {"TIBETAN"}, "div": {"THAANA"},
}


@functools.lru_cache(maxsize=4096)
def _script_of(ch: str) -> str | None:
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return None
    return name.split(" ", 1)[0]


#: Letters of these scripts carry about as much text as this many Latin letters (a Chinese
#: sentence has about a third of the characters of its English translation), so a Chinese
#: sentence with a few Latin names is still Chinese.
DENSE_SCRIPTS = {"CJK": 3.0, "HIRAGANA": 3.0, "KATAKANA": 3.0, "HANGUL": 2.0}


def script_share(text: str, scripts: set[str]) -> float | None:
    """Share of `text`'s letters (after NFKC, `DENSE_SCRIPTS` weighted) in `scripts`; None when it
    has no letters."""
    tally: dict[str, float] = {}
    for ch in unicodedata.normalize("NFKC", text):
        if ch.isalpha() and (s := _script_of(ch)) is not None:
            tally[s] = tally.get(s, 0.0) + DENSE_SCRIPTS.get(s, 1.0)
    total = sum(tally.values())
    return sum(v for k, v in tally.items() if k in scripts) / total if total else None


def text_length(text: str) -> float:
    """Length comparable across scripts: characters without white space and format characters
    (zero-width spaces, as Khmer and Thai text holds), dense scripts' letters weighted."""
    n = 0.0
    for ch in text:
        if ch.isspace() or unicodedata.category(ch) == "Cf":
            continue
        n += DENSE_SCRIPTS.get(_script_of(ch), 1.0) if ch.isalpha() else 1.0
    return n


def expected_scripts(lang: str) -> set[str] | None:
    """Scripts `lang` may be dominated by (see the module doc); None where unknown."""
    code, _, script = lang.strip().partition("_")
    if script and script in ISO15924:
        return ISO15924[script]
    return LANGUAGE_SCRIPTS.get(normalize_lang(code))
