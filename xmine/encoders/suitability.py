"""Can this encoder mine at all? A check on sentences shipped with xmine, run once per encoder.

48 FLORES-200 devtest sentences in English, German, Russian, Chinese (simplified) and Arabic
(`xmine/data/suitability_flores200.tsv`, CC BY-SA 4.0; see xmine/data/README.md) are encoded, and
each language is mined against English as `xmine mine` scores pairs: ratio margin over the k = 4
nearest neighbours, each sentence's best candidate, both directions. The accuracy is the share of
sentences whose best candidate is their translation. A multilingual sentence encoder finds nearly
all (me5-small and use-m3: 100%); one that does not align languages (a BERT with random weights, a
monolingual model, a broken conversion) finds few, and every pair it mines will be mostly noise.
Below `MIN_ACCURACY`, one warning line gives the measured accuracy.

It runs on the first use of every encoder that xmine does not ship (the shipped ones are checked
by the test suite), and on demand with `xmine encoders --check NAME`. The verdict is cached per
encoder fingerprint (weights, prompt, precision, runtime) and version of the sentences in
`$XMINE_HOME/suitability/`, so the check costs one encoding of 240 sentences per encoder.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from importlib.resources import files
from typing import Any

import numpy as np

from xmine.artefacts.fileio import atomic_write_json
from xmine.paths import xmine_home

log = logging.getLogger("xmine.encoders")

#: below this share of translations found, the encoder is warned about
MIN_ACCURACY = 0.8
#: neighbours of the margin, as `xmine mine`'s default
MARGIN_K = 4
_DATA = "suitability_flores200.tsv"
ENGLISH = "eng_Latn"


@dataclass(frozen=True, kw_only=True)
class Suitability:
    """The verdict on one encoder."""

    #: the encoder's name
    encoder: str
    #: its fingerprint id
    id: str
    #: share of sentences (every language, both directions) whose best candidate is their translation
    accuracy: float
    #: the same per language (FLORES code) paired with English
    per_language: dict[str, float]
    #: sentences per language
    sentences: int
    #: sha256 of the shipped sentences the verdict was measured on
    data_sha256: str

    @property
    def suitable(self) -> bool:
        return self.accuracy >= MIN_ACCURACY

    def describe(self) -> str:
        """One line: what was measured, and what it means."""
        langs = ", ".join(f"{code.split('_')[0]} {acc:.0%}" for code, acc in self.per_language.items())
        found = (f"{self.encoder}: found {self.accuracy:.0%} of the translations of {self.sentences} FLORES-200 "
                 f"sentences ({langs} <-> eng)")
        if self.suitable:
            return f"{found}: it aligns languages"
        return (f"{found}, below {MIN_ACCURACY:.0%}: this encoder does not align translations, so most pairs it "
                "mines will be wrong (a multilingual sentence encoder such as me5-small finds 100%)")


@lru_cache(maxsize=1)
def check_sentences() -> tuple[dict[str, list[str]], str]:
    """({FLORES code: sentences}, sha256 of the file) of the shipped sentences."""
    raw = files("xmine").joinpath("data", _DATA).read_bytes()
    header, *rows = raw.decode("utf-8").splitlines()
    codes = header.split("\t")[1:]
    cells = [row.split("\t")[1:] for row in rows]
    return {code: [r[i] for r in cells] for i, code in enumerate(codes)}, hashlib.sha256(raw).hexdigest()


def _best_by_margin(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best candidate on the other side by ratio margin (`xmine mine`'s default score)."""
    sim = a @ b.T
    k = min(MARGIN_K, sim.shape[1])
    fwd = np.sort(sim, axis=1)[:, -k:].mean(axis=1)  # mean of each a-row's k nearest in b
    bwd = np.sort(sim, axis=0)[-k:, :].mean(axis=0)  # and each b-row's in a
    margin = sim / ((fwd[:, None] + bwd[None, :]) / 2)
    return margin.argmax(axis=1), margin.argmax(axis=0)


def measure(encoder: Any) -> Suitability:
    """Mine the shipped sentences of each language against English with `encoder` (module doc)."""
    sentences, digest = check_sentences()
    english = np.asarray(encoder.encode(sentences[ENGLISH]), dtype=np.float32)
    truth = np.arange(len(english))
    per_language = {}
    for code, lines in sentences.items():
        if code == ENGLISH:
            continue
        other = np.asarray(encoder.encode(lines), dtype=np.float32)
        to_en, from_en = _best_by_margin(other, english)
        per_language[code] = float(((to_en == truth).mean() + (from_en == truth).mean()) / 2)
    fp = encoder.fingerprint()
    return Suitability(encoder=encoder.name, id=fp["id"], accuracy=float(np.mean(list(per_language.values()))),
                       per_language=per_language, sentences=len(english), data_sha256=digest)


def _cache_path(fingerprint: dict[str, Any]):
    _, digest = check_sentences()
    key = hashlib.sha256(f"{fingerprint['id']}|{fingerprint['dim']}|{digest}".encode()).hexdigest()[:24]
    return xmine_home() / "suitability" / f"{key}.json"


def suitability(encoder: Any, *, fresh: bool = False) -> Suitability:
    """The cached verdict on `encoder`, measured now when there is none (or `fresh`)."""
    path = _cache_path(encoder.fingerprint())
    if not fresh and path.is_file():
        try:  # (named as given now: the same model measured from another folder was named as that one)
            return replace(Suitability(**json.loads(path.read_text(encoding="utf-8"))), encoder=encoder.name)
        except (ValueError, TypeError):
            pass  # damaged or from another version: measured again
    verdict = measure(encoder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, asdict(verdict))
    except OSError as e:  # an unwritable cache costs a measurement next time, nothing more
        log.info("could not cache the suitability check of %s in %s (%s)", encoder.name, path, e)
    return verdict


def check_on_first_use(encoder: Any) -> None:
    """Warn (one line) when `encoder` does not align translations; measured once per fingerprint."""
    verdict = suitability(encoder)
    if not verdict.suitable:
        log.warning(verdict.describe())


__all__ = ["MIN_ACCURACY", "Suitability", "check_on_first_use", "check_sentences", "measure", "suitability"]
