"""One code per language, whatever the corpus calls it.

The corpora xmine reads name languages differently: WMT uses ISO 639-1 (`de`, `zh`), Tatoeba
ISO 639-3 with script suffixes (`deu`, `cmn_Hans`, `zho`), FLORES-200 `deu_Latn`, MASSIVE
locales (`de-DE`). The disentanglers treat the language as a class (same-language negatives,
language identification), so one language under two names would become two classes.
`normalize_lang` maps all of them to one canonical ISO 639-3 code, for what treats a language as
a class (language filters, projections, sentence splitters); what a user names a language stays
as given in everything xmine records and writes (`--lang zho_Hant` is `zho_Hant` in stores,
columns and dataset features), and `same_language` compares codes keeping the script.

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
from typing import Sequence

from xmine.errors import ConfigError

#: The language code of a corpus whose language was not given (ISO 639-2 "undetermined"): a store
#: or index records it as such, a language given later stands for it, and a language-dependent
#: projection picks each row's nearest language itself.
UNDETERMINED = "und"
#: file-name suffixes that name a file's type, or a backup's, never its language, though many are
#: ISO 639-3 codes too (txt: Tita, dev: Gwede, log: Logo, sgm: Sing Sing Sogo, bak: Bashkir): a
#: file of Bashkir text is named by a code with its script (bak_Cyrl) or given as LANG=FILE
NOT_LANGUAGE_SUFFIXES = frozenset({
    "txt", "tsv", "csv", "json", "xml", "sgm", "tmx", "md", "sh", "py", "yml", "yaml", "ini", "cfg", "log", "lst",
    "doc", "pdf", "tar", "zip", "gz", "bz2", "xz", "bin", "dat", "raw", "out", "err", "ids", "src", "tgt", "ref",
    "hyp", "dev", "tok", "tmp", "bak", "old", "new", "swp", "sav"})
#: of those, the suffixes of files that hold no line-aligned text at all (backups, markup): a pairs
#: directory never reads them, not even as a split named by them (de.tmp beside en.tmp)
NOT_TEXT_SUFFIXES = frozenset({"tmp", "bak", "old", "swp", "sav", "tmx", "sgm", "xml", "pdf", "doc", "zip", "tar"})


@functools.lru_cache(maxsize=1)
def _iso1_to_3() -> dict[str, str]:
    """ISO 639-1 -> ISO 639-3 (pycountry's table)."""
    import pycountry

    return {lg.alpha_2: lg.alpha_3 for lg in pycountry.languages if hasattr(lg, "alpha_2")}


# ISO 639-3 individual/macro codes merged into the one the benchmarks use. The FLORES-200 members
# of a macrolanguage that language identifiers label by the macrolanguage (fastText: `lv`, `mn`,
# `yi`) are merged into it (was: `lvs_Latn` unknown to the language filter, `lv` known): Standard
# Latvian, Halh Mongolian, Plateau Malagasy, Odia, West Central Oromo, Ayacucho Quechua, Eastern
# Yiddish, Central Aymara, Central Kanuri, Northern Kurdish (Central Kurdish, `ckb`, is labelled
# as itself). Dari (`prs`) is not merged into Persian: `fa` would then name two FLORES-200 files.
_MERGE = {"zho": "cmn", "fas": "pes", "swa": "swh", "msa": "zsm", "nor": "nob", "arb": "ara",
          "hbs": "srp", "ekk": "est", "npi": "nep", "pbt": "pus", "uzn": "uzb", "azj": "aze",
          "lvs": "lav", "khk": "mon", "plt": "mlg", "ory": "ori", "gaz": "orm", "quy": "que", "ydd": "yid",
          "ayr": "aym", "knc": "kau", "kmr": "kur"}
# Retired ISO 639-3 codes that corpora still name their files by, so that pycountry (current codes
# only) does not know: South Levantine Arabic `ajp` (FLORES-200 `ajp_Arab`, merged into `apc` in
# 2023). Known, but not merged: FLORES keeps the two apart, and so do the tables measured on it.
_RETIRED = frozenset({"ajp"})


def given_or_recorded(given: str | None, recorded: str | None) -> str | None:
    """The language of a side: the one given, else the one its store or index records; None where
    neither names one (`UNDETERMINED` names none)."""
    return given or (None if recorded in (None, UNDETERMINED) else recorded)


def normalize_lang(code: str) -> str:
    """Canonical ISO 639-3 code of `code` (`de`, `deu`, `deu_Latn`, `de-DE`, `cmn_Hans` ...)."""
    c = code.strip()
    c = re.split(r"[_-]", c, maxsplit=1)[0].lower()  # drop script (_Latn) or region (-DE)
    c = _iso1_to_3().get(c, c)
    return _MERGE.get(c, c)


#: the shape of a code: a language subtag, then script, region or variant subtags (`_` or `-`)
_CODE_SHAPE = re.compile(r"[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{2,8})*")


def lang_script(code: str) -> str | None:
    """The ISO 15924 script a code names, or None: `zho_Hant` (FLORES/NLLB) and `zh-Hant`,
    `sr-Latn-RS` (BCP-47) -> Hant, Hant, Latn; `de`, `deu`, `de-DE` -> None."""
    for part in re.split(r"[_-]", code.strip())[1:]:
        if len(part) == 4 and part.isalpha():
            return part.title()
    return None


def lang_region(code: str) -> str | None:
    """The region a code names (ISO 3166 letters or a UN M.49 number), or None: `pt-BR`, `pt_br`,
    `zh-Hant-TW`, `es-419` -> BR, BR, TW, 419; `de`, `deu_Latn` -> None."""
    for part in re.split(r"[_-]", code.strip())[1:]:
        if (len(part) == 2 and part.isalpha()) or (len(part) == 3 and part.isdigit()):
            return part.upper()
    return None


def same_language(a: str, b: str) -> bool:
    """Whether two codes name one language: the same `normalize_lang` code and, where both name a
    script, the same script (`de` = `deu` = `deu_Latn` = `de-DE`; `zho_Hans` != `zho_Hant` = `zh-Hant`)."""
    if normalize_lang(a) != normalize_lang(b):
        return False
    sa, sb = lang_script(a), lang_script(b)
    return sa is None or sb is None or sa == sb


def codes_among(given: Sequence[str], available: Sequence[str]) -> tuple[list[str], list[str]]:
    """Each code of `given` as a data set names it among `available`: itself where listed, else the
    one available code of the same language (`same_language`: `de` is Tatoeba's `deu`, `deu` is
    MASSIVE's `de-DE`; a code naming a region, only that region's: `pt-BR` is not `pt-PT`). Returns
    (the codes found, in order; the given codes that name no available code, or several: `zh`
    among `zh-CN` and `zh-TW`). Two codes of one language are a ConfigError: counted twice, that
    language would weigh double in an average."""
    found: dict[str, str] = {}
    unknown = []
    for code in given:
        matches = [code] if code in available else [a for a in available if same_language(code, a)
                                                    and _region(code) in (None, _region(a))]
        if len(matches) != 1:
            unknown.append(code)
        elif matches[0] in found:
            raise ConfigError(f"{found[matches[0]]} and {code} name one language ({matches[0]}); list it once")
        else:
            found[matches[0]] = code
    return list(found), unknown


def _region(code: str) -> str | None:
    """The region subtag of a code (`zh-CN`: "CN", `es_419`: "419"), or None. A code naming a region
    names no other region's data (was: `zh-CN` run on MASSIVE's zh-TW without a word)."""
    for part in re.split(r"[-_]", code)[1:]:
        if re.fullmatch(r"[A-Za-z]{2}|\d{3}", part):
            return part.upper()
    return None


def is_known_lang(code: str) -> bool:
    """True when `code` (any form normalize_lang accepts: ISO 639-1/3, FLORES/NLLB `eng_Latn`,
    BCP-47 `zh-Hant`, `de-DE`) names an ISO 639-1/639-3 language."""
    if not isinstance(code, str) or not _CODE_SHAPE.fullmatch(code.strip()):
        return False
    c = normalize_lang(code)
    if not re.fullmatch(r"[a-z]{2,3}", c):
        return False
    import pycountry

    return c in _MERGE.values() or c in _RETIRED or pycountry.languages.get(alpha_3=c) is not None


def iso1_code(lang: str) -> str | None:
    """ISO 639-1 code of a language code (`deu`, `deu_Latn` -> `de`; `cmn`, `zho` -> `zh`), None if
    it has none. A code that is itself the language's ISO 639-3 code wins over one merged into it."""
    c = normalize_lang(lang)
    exact = [two for two, three in _iso1_to_3().items() if three == c]
    merged = [two for two, three in _iso1_to_3().items() if _MERGE.get(three) == c]
    return (exact + merged + [None])[0]


def language_subtag(lang: str) -> str:
    """The language alone of a code, as BCP 47 writes it (deu, de-DE, deu_Latn -> de; ace -> ace):
    Moses file suffixes (xmine.mining.writers)."""
    return iso1_code(lang) or normalize_lang(lang)


#: languages FLORES-200 holds in two scripts (ace_Arab, ace_Latn; zho_Hans, zho_Hant ...), as
#: `normalize_lang` names them (arb -> ara, zho -> cmn, knc -> kau): their FLORES code's script is kept. The
#: value is the script most of the language's text is written in (NLLB's data: Modern Standard
#: Arabic in Arabic script, not FLORES's romanised arb_Latn; Kashmiri in Perso-Arabic; Chinese
#: simplified; Tamasheq, Kanuri, Acehnese, Banjar and Minangkabau mostly in Latin script), what a
#: set that holds both is read in (`usual_script`).
_SEVERAL_SCRIPTS = {"ace": "Latn", "ara": "Arab", "bjn": "Latn", "kas": "Arab", "kau": "Latn", "min": "Latn",
                    "taq": "Latn", "cmn": "Hans"}


def usual_script(lang: str) -> str | None:
    """The script most text of a language FLORES-200 writes in two scripts is in (`arb_Latn` ->
    Arab), else None (one script, or a language this table does not list)."""
    return _SEVERAL_SCRIPTS.get(normalize_lang(lang))


def bcp47_tag(lang: str) -> str:
    """The BCP 47 tag of a language code: its language subtag, with the region given (pt-BR ->
    pt-BR, de-DE -> de-DE: the variant a translation memory is for) and a script given in BCP 47
    form (zh-Hant, sr-Latn) or in a FLORES code of a language FLORES writes in two scripts (zho_Hant
    -> zh-Hant, ace_Arab -> ace-Arab). Any other FLORES code's script is its language's usual one
    (deu_Latn -> de), which BCP 47 leaves out. TMX's xml:lang and a dataset card's languages."""
    tag = language_subtag(lang)
    script, region = lang_script(lang), lang_region(lang)
    if script and ("-" in lang or normalize_lang(lang) in _SEVERAL_SCRIPTS):
        tag += f"-{script}"
    return f"{tag}-{region}" if region else tag
