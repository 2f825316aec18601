"""Alignment and uniformity (Wang & Isola 2020) of raw, meaning and language embeddings.

As in the intra/inter-constraints paper (Nonomura et al.), on L2-normalised embeddings f:
- alignment  = E_{(x,y) parallel} ||f(x) - f(y)||^2          (lower: translations closer)
- uniformity = log E_{x,z independent} exp(-2 ||f(x) - f(z)||^2)  (lower: space used more evenly)
Uniformity's expectation runs over all distinct pairs of sentences of both languages together
(p_data is the marginal over sentences of all languages). Data: FLORES-200 devtest, which is
multi-way parallel, English paired with each chosen language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.benchmarks.common import EmbedFn, FLORES_DEVTEST, data_locator, flores_lines, l2_normalise, mean_of
from xmine.errors import ConfigError, InputError
from xmine.mining.calibrate import flores_file

NEEDS = str(FLORES_DEVTEST)
HOW_TO_GET = (
    "Get FLORES-200 devtest (https://github.com/facebookresearch/flores, flores200_dataset/devtest: "
    "<lang>_<Script>.devtest files) into parallel/flores200/devtest/."
)
locate = data_locator(NEEDS, HOW_TO_GET)
DEFAULT_LANGS = ("deu_Latn", "fra_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "swh_Latn")
PIVOT = "eng_Latn"
QUICK_ROWS = 200
DEFAULT_ROWS = 1012


def alignment(x: np.ndarray, y: np.ndarray) -> float:
    """Mean squared distance between row i of x and row i of y (rows normalised first)."""
    x, y = l2_normalise(x, np.float64), l2_normalise(y, np.float64)
    return float(((x - y) ** 2).sum(1).mean())


def uniformity(z: np.ndarray, *, t: float = 2.0) -> float:
    """log of the mean of exp(-t ||z_i - z_j||^2) over all pairs i < j (rows normalised first)."""
    z = l2_normalise(z, np.float64)
    n = len(z)
    if n < 2:
        raise ConfigError("uniformity needs at least 2 embeddings")
    sq = np.maximum(2.0 - 2.0 * (z @ z.T), 0.0)  # ||a-b||^2 = 2 - 2 cos for unit vectors
    iu = np.triu_indices(n, k=1)
    vals = -t * sq[iu]
    # log-mean-exp, stable
    m = vals.max()
    return float(m + np.log(np.mean(np.exp(vals - m))))


def load_flores(folder: Path, lang: str, *, rows: int | None = None) -> list[str]:
    lines = flores_lines(folder, lang)
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            raise InputError(folder / f"{lang}.devtest", "empty line in a multi-way parallel file", line=i)
    return lines[:rows or None]


def flores_codes(data_dir: str | Path | None, langs: Sequence[str], *, option: str) -> list[str]:
    """The FLORES-200 codes of `langs` as `xmine calibrate` reads them: a code as it is, an ISO code
    by its language's one file ("de" is deu_Latn; was: refused as "missing FLORES-200 file for 'de'")."""
    folder = locate(data_dir)
    return [flores_file(folder, lang, option=option).stem for lang in langs]


def measured_languages(data_dir: str | Path | None, langs: Sequence[str], pivot: str) -> tuple[list[str], str]:
    """`bench geometry`'s --langs and --pivot as FLORES-200 codes (`flores_codes`), the pivot not
    among the languages."""
    langs, [pivot] = flores_codes(data_dir, langs, option="--langs"), flores_codes(data_dir, [pivot], option="--pivot")
    twice = sorted({code for code in langs if langs.count(code) > 1})
    if twice:  # (was: `de,deu` measured once, without a word; the other benchmarks refuse it)
        raise ConfigError(f"--langs names {', '.join(twice)} twice (by two of its codes); list it once")
    if pivot in langs:  # a language's alignment with itself is 0: a number that measures nothing
        raise ConfigError(f"--langs holds the pivot {pivot}: each language is paired with the pivot, not itself")
    return langs, pivot


def flores_pairs(data_dir: str | Path | None, lang: str, *, rows: int | None = None, pivot: str = PIVOT):
    """(lang sentences, pivot sentences, files) for the first `rows` FLORES-200 devtest lines."""
    folder = locate(data_dir)
    x, y = load_flores(folder, lang, rows=rows), load_flores(folder, pivot, rows=rows)
    if len(x) != len(y):
        raise InputError(folder / f"{lang}.devtest", f"{len(x)} lines but {pivot}.devtest has {len(y)}")
    return x, y, [folder / f"{lang}.devtest", folder / f"{pivot}.devtest"]


def evaluate_geometry(embed_fn: EmbedFn, data_dir: str | Path | None = None, langs: Sequence[str] | None = None, *,
                      rows: int | None = DEFAULT_ROWS, pivot: str = PIVOT) -> dict[str, Any]:
    """Alignment and uniformity per language pair (lang-pivot) and averaged."""
    langs = list(langs) if langs else list(DEFAULT_LANGS)
    per_pair: dict[str, dict[str, float]] = {}
    files: list[str] = []
    for lang in langs:
        x_text, y_text, paths = flores_pairs(data_dir, lang, rows=rows, pivot=pivot)
        files += [str(p) for p in paths]
        x, y = embed_fn(x_text), embed_fn(y_text)
        per_pair[f"{lang}-{pivot}"] = {
            "alignment": alignment(x, y),
            "uniformity": uniformity(np.concatenate([x, y])),
            "rows": len(x_text),
        }
    return {
        "per_pair": per_pair,
        "average": {m: mean_of(r[m] for r in per_pair.values()) for m in ("alignment", "uniformity")},
        "files": sorted(set(files)),
    }
