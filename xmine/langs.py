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

import functools
import re

@functools.lru_cache(maxsize=1)
def _iso1_to_3() -> dict[str, str]:
    """ISO 639-1 -> ISO 639-3 (pycountry's table)."""
    import pycountry

    return {lg.alpha_2: lg.alpha_3 for lg in pycountry.languages if hasattr(lg, "alpha_2")}


# ISO 639-3 individual/macro codes merged into the one the benchmarks use.
_MERGE = {"zho": "cmn", "fas": "pes", "swa": "swh", "msa": "zsm", "nor": "nob", "arb": "ara",
          "hbs": "srp", "ekk": "est", "npi": "nep", "pbt": "pus", "uzn": "uzb", "azj": "aze"}


def normalize_lang(code: str) -> str:
    """Canonical ISO 639-3 code of `code` (`de`, `deu`, `deu_Latn`, `de-DE`, `cmn_Hans` ...)."""
    c = code.strip()
    c = re.split(r"[_-]", c, maxsplit=1)[0].lower()  # drop script (_Latn) or region (-DE)
    c = _iso1_to_3().get(c, c)
    return _MERGE.get(c, c)


def is_known_lang(code: str) -> bool:
    """True when `code` (any form normalize_lang accepts) names an ISO 639-1/639-3 language."""
    c = normalize_lang(code)
    if not re.fullmatch(r"[a-z]{2,3}", c):
        return False
    import pycountry

    return c in _MERGE.values() or pycountry.languages.get(alpha_3=c) is not None


def iso1_code(lang: str) -> str | None:
    """ISO 639-1 code of a language code (`deu`, `deu_Latn` -> `de`; `cmn`, `zho` -> `zh`), None if
    it has none. A code that is itself the language's ISO 639-3 code wins over one merged into it."""
    c = normalize_lang(lang)
    exact = [two for two, three in _iso1_to_3().items() if three == c]
    merged = [two for two, three in _iso1_to_3().items() if _MERGE.get(three) == c]
    return (exact + merged + [None])[0]
