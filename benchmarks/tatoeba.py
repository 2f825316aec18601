"""Tatoeba cross-lingual retrieval (LASER / XTREME test set, 112 languages).

For each language xx, `tatoeba.<xx>-eng.<xx>` and `tatoeba.<xx>-eng.eng` are line-aligned. The
metric is accuracy@1 of nearest-neighbour retrieval (%), xx->eng (each xx sentence must find its
own English line among all English lines of that language) and eng->xx, averaged over all
languages and over XTREME's 36-language subset. As in LASER and XTREME, a hit means the exact
line index (duplicate sentences on the target side are not counted as hits). Optionally the same
with xSIM-style ratio-margin scores (k=4) in place of cosine, which discounts "hub" candidates.

For a projection the meaning part is measured, and the language part too: high accuracy from
the language part means meaning leaked into it ("semantic leakage", ORACLE, Ki et al. 2024).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from xmine.benchmarks.common import EmbedFn, data_locator, mean_of, read_lines, retrieval_scores
from xmine.errors import ConfigError, DataNotFoundError, InputError
from xmine.langs import codes_among

NEEDS = "tatoeba/v1"
HOW_TO_GET = (
    "Get the Tatoeba test set from https://github.com/facebookresearch/LASER (data/tatoeba/v1: "
    "files tatoeba.<lang>-eng.<lang> and tatoeba.<lang>-eng.eng)."
)
locate = data_locator(NEEDS, HOW_TO_GET)

#: XTREME's 36-language Tatoeba subset (Hu et al. 2020)
XTREME36 = (
    "afr ara ben bul cmn deu ell est eus fin fra heb hin hun ind ita jav jpn kat kaz kor mal mar "
    "nld pes por rus spa swh tam tel tgl tha tur urd vie"
).split()

#: --quick: six languages of different scripts and resources, first QUICK_PAIRS pairs each
QUICK_LANGS = ("deu", "fra", "rus", "cmn", "ara", "swh")
QUICK_PAIRS = 200


def available_languages(folder: Path) -> list[str]:
    """Languages with both files present, sorted."""
    langs = [p.name[len("tatoeba.") : -len("-eng.eng")] for p in sorted(folder.glob("tatoeba.*-eng.eng"))]
    return [lang for lang in langs if (folder / f"tatoeba.{lang}-eng.{lang}").is_file()]


def pair_files(folder: Path, lang: str) -> tuple[Path, Path]:
    return folder / f"tatoeba.{lang}-eng.{lang}", folder / f"tatoeba.{lang}-eng.eng"


def load_pairs(folder: Path, lang: str, *, max_pairs: int | None = None) -> tuple[list[str], list[str]]:
    """The line-aligned (xx, eng) sentences of one language (first `max_pairs` if given)."""
    src_path, eng_path = pair_files(folder, lang)
    for p in (src_path, eng_path):
        if not p.is_file():
            raise InputError(p, f"missing Tatoeba file for language {lang!r}")
    src, eng = read_lines(src_path, what="Tatoeba"), read_lines(eng_path, what="Tatoeba")
    if len(src) != len(eng):
        raise InputError(src_path, f"has {len(src)} lines but {eng_path.name} has {len(eng)}; they must be line-aligned")
    for i, (a, b) in enumerate(zip(src, eng), start=1):
        if not a.strip() or not b.strip():
            raise InputError(src_path if not a.strip() else eng_path, "empty line in a line-aligned test set", line=i)
    if max_pairs is not None:
        src, eng = src[:max_pairs], eng[:max_pairs]
    return src, eng


def evaluate_tatoeba(embed_fn: EmbedFn, data_dir: str | Path | None = None, langs: Sequence[str] | None = None, *,
                     max_pairs: int | None = None, margin: bool = False) -> dict[str, Any]:
    """Tatoeba accuracy@1 for `embed_fn`.

    Returns {"per_lang": {lang: {"xx2eng", "eng2xx", "avg", ["xx2eng_margin", ...], "pairs"}},
    "average": {...}, "xtreme36": {...} (over the XTREME-36 languages evaluated), "langs", "files"}.
    """
    folder = locate(data_dir)
    have = available_languages(folder)
    if not have:  # (a --data-dir holding other files: was "unknown Tatoeba language(s) deu, ...; /tmp has: ")
        raise DataNotFoundError(f"{folder}: no Tatoeba test files in it ({NEEDS}). {HOW_TO_GET} Then pass --data-dir "
                                "DIR or set XMINE_DATA.")
    langs, unknown = codes_among(langs, have) if langs else (have, [])  # `de` is Tatoeba's `deu`
    if unknown:
        raise ConfigError(f"unknown Tatoeba language(s) {', '.join(unknown)}; {folder} has: {' '.join(have)}")
    per_lang: dict[str, dict[str, float]] = {}
    files: list[Path] = []
    for lang in langs:
        src, eng = load_pairs(folder, lang, max_pairs=max_pairs)
        files += list(pair_files(folder, lang))
        s = retrieval_scores(embed_fn(src), embed_fn(eng), margin=margin)
        row = {"xx2eng": s["fwd"], "eng2xx": s["bwd"], "avg": (s["fwd"] + s["bwd"]) / 2, "pairs": len(src)}
        if margin:
            row.update(xx2eng_margin=s["fwd_margin"], eng2xx_margin=s["bwd_margin"],
                       avg_margin=(s["fwd_margin"] + s["bwd_margin"]) / 2)
        per_lang[lang] = row
    metrics = [k for k in next(iter(per_lang.values())) if k != "pairs"]

    def average(subset: list[str]) -> dict[str, float]:
        return {m: mean_of(per_lang[lang][m] for lang in subset) for m in metrics} | {"languages": len(subset)}

    return {
        "per_lang": per_lang,
        "average": average(langs),
        "xtreme36": average([lang for lang in langs if lang in XTREME36]),
        "langs": langs,
        "files": [str(f) for f in files],
    }


def table(details: dict[str, dict], *, margin: bool) -> tuple[list[str], list[list]]:
    """`bench tatoeba`'s columns and one row per variant, from each variant's `evaluate_tatoeba` result."""
    margins = ("xx2eng_margin", "eng2xx_margin", "avg_margin") if margin else ()
    rows = [[name, r["average"]["xx2eng"], r["average"]["eng2xx"], r["average"]["avg"], r["xtreme36"]["avg"]]
            + [r["average"][m] for m in margins] for name, r in details.items()]
    first = next(iter(details.values()))
    n_all, n_x = first["average"]["languages"], first["xtreme36"]["languages"]
    columns = ["variant", f"xx->eng ({n_all})", f"eng->xx ({n_all})", f"avg ({n_all})", f"avg XTREME ({n_x})"]
    return columns + (["xx->eng margin", "eng->xx margin", "avg margin"] if margin else []), rows
