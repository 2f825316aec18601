"""The filtering steps of `xmine mine` around the search (mining/pipeline.py calls them), in
order: the language filter (`language_rows`, set up by `lang_filter_langs`), the cleaning of
both sides (`pre_search`), and after the selection the pair filters (`filter_pairs`). Sentences
are read from their side by offset (`SideTexts`), chunk by chunk; memory is one byte a row or
pair beside the chunk.
"""

from __future__ import annotations

import numpy as np

from xmine.errors import ConfigError
from xmine.langs import normalize_lang
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.mining.filters import PairFilterConfig, apply_pair_filters
from xmine.mining.filters import counts as filter_counts
from xmine.mining.langid import language_mask, supported_languages, thresholds_record
from xmine.mining.presearch import clean_sides
from xmine.mining.select import MinedPairs
from xmine.mining.writers import PairColumn, tsv_field
from xmine.store.writer import UNDETERMINED

LANG_FILTER_CHUNK = 65536


def language_rows(side, ids: np.ndarray, lang: str, backend: str, min_confidence: float | None) -> np.ndarray:
    """keep[i]: row ids[i] of `side` is not identified as another language (`--lang-filter`;
    `min_confidence` None: `lang`'s own threshold, `langid.min_confidence_for`)."""
    keep = np.zeros(len(ids), dtype=bool)
    for start in range(0, len(ids), LANG_FILTER_CHUNK):
        chunk = ids[start:start + LANG_FILTER_CHUNK]
        keep[start:start + len(chunk)], _ = language_mask([side.text[int(r)] for r in chunk], lang, backend,
                                                          min_confidence=min_confidence)
    return keep


class SideTexts:
    """The sentences of `rows` of a side, read by offset when indexed (a lazy sequence)."""

    def __init__(self, side, rows: np.ndarray):
        self.side, self.rows = side, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> str:
        return self.side.text[int(self.rows[i])]


def pre_search(mx, my, *, langs, config, filters: PairFilterConfig, margin: str) -> dict:
    """Clean the rows `mx`, `my` (`mineable.Mineable`s) would search (`presearch.clean_sides`),
    restrict them to what it keeps; what the summary records."""
    langs = tuple(None if lang in (None, UNDETERMINED) else lang for lang in langs)
    src, tgt, record = clean_sides(SideTexts(mx.side, mx.ids), SideTexts(my.side, my.ids), langs=langs, config=config,
                                   identical_filter="identical" in filters.active(margin), lid=filters.lid)
    mx.restrict(src)
    my.restrict(tgt)
    return record


def lang_filter_langs(on: bool | None, langs, backend: str, min_confidence: float | None) -> tuple[list, dict]:
    """Per side, (language, backend, min confidence) for the language filter, or None when it is
    off; and what the summary records (with the thresholds: `langid.thresholds_record`;
    `min_confidence` None: each language's own). `on` None (the default): on when both languages are given
    and `backend` knows them (on the `bench mining` sets it cost nothing on the clean sets and gave
    2-4 points of recall on the noisy ones); True: required (a missing language is an error)."""
    if on is False:
        return [None, None], {"on": False, "backend": backend, "source": "--no-lang-filter"}
    missing = [side for side, lang in zip(("--src-lang", "--tgt-lang"), langs) if lang in (None, UNDETERMINED)]
    if on and missing:
        raise ConfigError(f"--lang-filter needs the language of each side: give {' and '.join(missing)}")
    if on is None:
        known = supported_languages(backend)
        unknown = [] if missing else [lang for lang in langs if normalize_lang(lang) not in known]
        if missing or unknown:
            why = (f"{' and '.join(missing)} not given" if missing
                   else f"{', '.join(unknown)} not known to {backend}")
            return [None, None], {"on": False, "backend": backend, "source": f"default, off: {why}"}
    source = "--lang-filter" if on else f"default: both languages given and known to {backend}"
    return [(lang, backend, min_confidence) for lang in langs], {"on": True, "backend": backend, "source": source,
                                                                 **thresholds_record(langs, backend, min_confidence)}


def filter_pairs(mined: MinedPairs, sx, sy, src_rows, tgt_rows, *, langs, config: PairFilterConfig, margin: str,
                  dropped_claim=None):
    """The pairs the pair filters keep (and their rows), what the summary records, and the output
    columns of the language identification done on the way (`src_lid`, `src_lid_score`, ...: the
    jsonl, parquet and hf outputs carry them); the dropped ones go to `dropped_claim` when
    --keep-filtered asked for them."""
    langs = tuple(None if lang in (None, UNDETERMINED) else lang for lang in langs)
    lid: dict[str, np.ndarray] = {}
    keep, reasons = apply_pair_filters(SideTexts(sx, src_rows), SideTexts(sy, tgt_rows), mined.score, langs=langs,
                                       config=config, margin=margin, lid_out=lid)
    record = config.record(margin) | {"languages": list(langs), "pairs_before": len(mined),
                                      "removed": filter_counts(reasons, config, margin)}
    if "language" in config.active(margin):
        record["lid_thresholds"] = thresholds_record(langs, config.lid, config.lid_min_confidence)
    if dropped_claim is not None:
        gone = np.flatnonzero(~keep)
        with dropped_claim.atomic_file() as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for i in gone.tolist():
                f.write(f"{float(mined.score[i]):.6f}\t{tsv_field(sx.text[int(src_rows[i])])}\t"
                        f"{tsv_field(sy.text[int(tgt_rows[i])])}\t{FILTER_RULES[int(reasons[i])]}\n")
        dropped_claim.finish({"pairs": len(gone), "src": str(sx.path), "tgt": str(sy.path), "filters": record})
    kept = MinedPairs(src_idx=mined.src_idx[keep], tgt_idx=mined.tgt_idx[keep], score=mined.score[keep],
                      direction=mined.direction[keep])
    columns = [PairColumn(name=name, values=values[keep]) for name, values in lid.items()]
    return kept, src_rows[keep], tgt_rows[keep], record, columns
