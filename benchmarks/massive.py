"""MASSIVE cross-lingual retrieval (FitzGerald et al. 2022), as in FMDA's Table 2 but for every locale.

Task (FMDA, section 4.3.1): each locale's test utterances are paired with en-US's by `id` (2,974
per locale). For each source utterance (query) the benchmark finds its translation among all
target-locale test utterances, by cosine and by xSIM-style ratio margin (k=4); the metric is
accuracy@1 (%), en->xx and xx->en, for every locale xx against en-US, averaged over the locales
and reported for FMDA's three pairs (EN-DE, EN-ES, EN-JA).

Repeated utterances: test splits repeat utterances (km-KH 188, ka-GE 94, en-US 4), and identical
candidates get identical embeddings, so no embedding can tell which copy is the gold one. The main
number counts a hit when the retrieved utterance's TEXT equals the gold utterance's text; the
strict number (exact row only, as Tatoeba counts) is reported beside it.

The data is read and checked by `xmine.disentangle.massive` (one reader for benchmarks and training).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.disentangle import massive as data
from xmine.benchmarks.common import EmbedFn, mean_of, retrieval_scores
from xmine.errors import ConfigError
from xmine.langs import codes_among

#: FMDA's locales (EN-DE, EN-ES, EN-JA)
FMDA_LOCALES = ("de-DE", "es-ES", "ja-JP")
#: --quick: FMDA's three pairs and km-KH (the most repeated utterances), first QUICK_ROWS test rows
QUICK_LOCALES = ("de-DE", "es-ES", "ja-JP", "km-KH")
QUICK_ROWS = 300
#: the per-locale metrics, in table order
METRICS = ("en2xx", "xx2en", "avg", "en2xx_strict", "xx2en_strict", "avg_strict",
           "en2xx_margin", "xx2en_margin", "avg_margin", "en2xx_margin_strict", "xx2en_margin_strict",
           "avg_margin_strict")

locate = data.locate
available_locales = data.available_locales


def parse_locales(spec: str | Sequence[str] | None, available: Sequence[str]) -> list[str]:
    """'all' / None -> every locale but en-US; 'fmda' -> de-DE,es-ES,ja-JP; else a comma list."""
    if spec is None or spec == "all":
        out = [loc for loc in available if loc != data.PIVOT]
    elif spec == "fmda":
        out = list(FMDA_LOCALES)
    else:
        out = [s.strip() for s in spec.split(",") if s.strip()] if isinstance(spec, str) else list(spec)
        out, unknown = codes_among(out, available)  # `de` and `deu` are de-DE
        out += unknown
    unknown = [loc for loc in out if loc not in available]
    if unknown:
        raise ConfigError(f"unknown MASSIVE locale(s) {', '.join(unknown)}; available: {' '.join(available)}")
    if data.PIVOT in out:
        raise ConfigError(f"{data.PIVOT} is the pivot every locale is paired with; list the other locales only")
    if not out:
        raise ConfigError("no MASSIVE locales to evaluate")
    if data.PIVOT not in available:
        raise ConfigError(f"the pivot locale {data.PIVOT} is missing from the MASSIVE folder")
    return out


def load_test_sets(folder: Path, locales: Sequence[str], *, partition: str = "test",
                   max_rows: int | None = None) -> dict[str, tuple[list[str], list[str]]]:
    """{locale: (en-US utterances, locale utterances)} joined by id (first `max_rows` ids)."""
    out = {}
    for loc in locales:
        ids, utts = data.aligned(folder, [data.PIVOT, loc], partition)
        n = len(ids) if max_rows is None else min(max_rows, len(ids))
        out[loc] = (utts[data.PIVOT][:n], utts[loc][:n])
    return out


def evaluate_massive(embed_fn: EmbedFn, data_dir: str | Path | None = None, locales: str | Sequence[str] | None = None,
                     *, partition: str = "test", max_rows: int | None = None) -> dict[str, Any]:
    """Accuracy@1 (%) en->xx and xx->en per locale (cosine and margin; text-equal and strict hits).

    Returns {"per_locale": {loc: {metric: value, "rows", "repeated_en", "repeated_xx"}},
    "average": {metric: value, "locales": n}, "fmda": {...} (the FMDA locales evaluated),
    "locales", "files"}. All sentences go to `embed_fn` in one call (one progress bar, and
    an encoder sorts them by length across locales).
    """
    folder = data.locate(data_dir)
    locs = parse_locales(locales, data.available_locales(folder))
    sets = load_test_sets(folder, locs, partition=partition, max_rows=max_rows)
    # FMDA's locales first: an interrupted first run leaves their sentences in the cache
    first = [loc for loc in locs if loc in FMDA_LOCALES] + [loc for loc in locs if loc not in FMDA_LOCALES]
    texts = list(dict.fromkeys(t for loc in first for t in sets[loc][0] + sets[loc][1]))
    row_of = {t: i for i, t in enumerate(texts)}
    emb = embed_fn(texts)

    def vectors(utts: list[str]) -> np.ndarray:
        return emb[[row_of[u] for u in utts]]

    per_locale: dict[str, dict[str, float]] = {}
    for loc, (en, xx) in sets.items():
        s = retrieval_scores(vectors(en), vectors(xx), margin=True, x_texts=en, y_texts=xx)
        row: dict[str, float] = {}
        for kind in ("", "_margin"):
            for strict in ("", "_strict"):
                f, b = s["fwd" + kind + strict], s["bwd" + kind + strict]
                row |= {f"en2xx{kind}{strict}": f, f"xx2en{kind}{strict}": b, f"avg{kind}{strict}": (f + b) / 2}
        row |= {"rows": len(en), "repeated_en": len(en) - len(set(en)), "repeated_xx": len(xx) - len(set(xx))}
        per_locale[loc] = row

    def average(subset: list[str]) -> dict[str, float]:
        return {m: mean_of(per_locale[loc][m] for loc in subset) for m in METRICS} | {"locales": len(subset)}

    return {
        "per_locale": per_locale,
        "average": average(locs),
        "fmda": average([loc for loc in locs if loc in FMDA_LOCALES]),
        "locales": locs,
        "partition": partition,
        "files": [str(folder / f"{loc}.jsonl") for loc in [data.PIVOT, *locs]],
    }


def tables(details: dict[str, dict], locales: Sequence[str]) -> tuple[list[str], list[list], dict[str, Any]]:
    """`bench massive`'s table (one row per variant: the averages, then FMDA's pairs both ways) and
    its per-locale table, from each variant's `evaluate_massive` result."""
    fmda_codes = {loc: loc.split("-")[0].upper() for loc in FMDA_LOCALES if loc in locales}
    average = ("en2xx", "xx2en", "avg", "avg_strict", "en2xx_margin", "xx2en_margin", "avg_margin", "avg_margin_strict")
    rows = [[name] + [r["average"][m] for m in average]
            + [r["per_locale"][loc][d] for loc in fmda_codes for d in ("en2xx", "xx2en")] for name, r in details.items()]
    n = len(locales)
    columns = ["variant", f"en->xx ({n})", f"xx->en ({n})", "avg", "avg strict", "en->xx margin",
               "xx->en margin", "avg margin", "avg margin strict"]
    columns += [c for code in fmda_codes.values() for c in (f"EN-{code}", f"{code}-EN")]
    first = next(iter(details.values()))
    locale_table = {
        "title": "Per locale: accuracy@1 (%), cosine, mean of en->xx and xx->en (text-equal hits); "
                 "`rep.` = repeated utterances in the locale's test rows",
        "columns": ["locale", "rep."] + list(details),
        "rows": [[loc, first["per_locale"][loc]["repeated_xx"]] + [r["per_locale"][loc]["avg"] for r in details.values()]
                 for loc in locales],
    }
    return columns, rows, locale_table
