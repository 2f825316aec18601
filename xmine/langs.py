"""One code per language, whatever the corpus calls it.

The corpora xmine reads name languages differently: WMT uses ISO 639-1 (`de`, `zh`), Tatoeba
ISO 639-3 with script suffixes (`deu`, `cmn_Hans`, `zho`), FLORES-200 `deu_Latn`, MASSIVE
locales (`de-DE`). The disentanglers treat the language as a class (same-language negatives,
language identification), so one language under two names would become two classes.
`normalize_lang` maps all of them to one canonical ISO 639-3 code.

Choices: Chinese (`zh`, `zho`, `cmn`, any script) -> `cmn`, as Tatoeba v1 names it; Persian
`fa`/`fas` -> `pes`; Swahili `sw`/`swa` -> `swh`; Malay `ms`/`msa`/`zsm` -> `zsm`; Arabic `ar` ->
`ara`; the script suffix is dropped (Serbian Cyrillic and Latin are one language).
Unknown codes are returned lower-cased and unchanged by `normalize_lang`, so any code works, it
just is not merged; `is_known_lang` says whether a code is a language at all (ISO 639-1, or ISO
639-3 from pycountry's table), which the CLI checks for every language option.
"""

from __future__ import annotations

import re

# ISO 639-1 -> ISO 639-3 for the languages of the data sets xmine ships loaders for.
_ISO1_TO_3 = {
    "af": "afr", "am": "amh", "ar": "ara", "az": "aze", "be": "bel", "bg": "bul", "bn": "ben",
    "bs": "bos", "ca": "cat", "cs": "ces", "cy": "cym", "da": "dan", "de": "deu", "el": "ell",
    "en": "eng", "eo": "epo", "es": "spa", "et": "est", "eu": "eus", "fa": "pes", "fi": "fin",
    "fr": "fra", "ga": "gle", "gl": "glg", "gu": "guj", "he": "heb", "hi": "hin", "hr": "hrv",
    "hu": "hun", "hy": "hye", "id": "ind", "is": "isl", "it": "ita", "ja": "jpn", "jv": "jav",
    "ka": "kat", "kk": "kaz", "km": "khm", "kn": "kan", "ko": "kor", "lt": "lit", "lv": "lav",
    "mk": "mkd", "ml": "mal", "mn": "mon", "mr": "mar", "ms": "zsm", "my": "mya", "ne": "nep",
    "nl": "nld", "no": "nob", "nb": "nob", "nn": "nno", "pl": "pol", "ps": "pus", "pt": "por",
    "ro": "ron", "ru": "rus", "si": "sin", "sk": "slk", "sl": "slv", "sq": "sqi", "sr": "srp",
    "sv": "swe", "sw": "swh", "ta": "tam", "te": "tel", "th": "tha", "tl": "tgl", "tr": "tur",
    "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie", "zh": "cmn", "iu": "iku", "lo": "lao",
    "pa": "pan", "so": "som", "tg": "tgk", "ky": "kir", "la": "lat", "lb": "ltz", "mt": "mlt",
}
# ISO 639-3 individual/macro codes merged into the one the benchmarks use.
_MERGE = {"zho": "cmn", "fas": "pes", "swa": "swh", "msa": "zsm", "nor": "nob", "arb": "ara",
          "hbs": "srp", "ekk": "est", "npi": "nep", "pbt": "pus", "uzn": "uzb", "azj": "aze"}


def normalize_lang(code: str) -> str:
    """Canonical ISO 639-3 code of `code` (`de`, `deu`, `deu_Latn`, `de-DE`, `cmn_Hans` ...)."""
    c = code.strip()
    c = re.split(r"[_-]", c, maxsplit=1)[0].lower()  # drop script (_Latn) or region (-DE)
    c = _ISO1_TO_3.get(c, c)
    return _MERGE.get(c, c)


def is_known_lang(code: str) -> bool:
    """True when `code` (any form normalize_lang accepts) names an ISO 639-1/639-3 language."""
    c = normalize_lang(code)
    if not re.fullmatch(r"[a-z]{2,3}", c):
        return False
    if c in _ISO1_TO_3.values() or c in _MERGE.values():
        return True
    try:
        import pycountry
    except ImportError:  # without the table, any well-formed code is accepted
        return True
    return pycountry.languages.get(alpha_3=c) is not None
