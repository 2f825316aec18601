"""Does each side of `xmine mine` look like the language declared for it (--src-lang / --tgt-lang)?

A declared language is taken as given (it is recorded, compared with the artefacts' own, and a
`center` projection subtracts its mean), so `--src-lang en --tgt-lang de` on German/English
input would otherwise pass unnoticed. When the projection in use identifies languages (a
language part with centroids), a sample of each side is labelled with it
(its `identify`: `xmine.disentangle.language_trust`) and one warning line names the side, the declared language
and the language most of the sample looks like. It warns and never refuses: the labels are a
model's guess.

No false warnings by construction where it can be avoided: a declared language that is not one of
the projection's, or one it does not identify reliably, is not checked (the summary says why),
and only a trusted label can contradict it. The stored rows hold the meaning part only, so the
sample (at most SAMPLE_ROWS rows a side, spread over the side) is encoded again: under a second a
side on a 2-core CPU, and only when a language is declared.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import numpy as np

from xmine.langs import normalize_lang

log = logging.getLogger(__name__)

#: rows labelled per side: enough that a majority is clear (the share's standard error <= 3.5%)
SAMPLE_ROWS = 200


def _sample_texts(side, ids: np.ndarray) -> list[str]:
    """The text of up to SAMPLE_ROWS of `ids`, evenly spread (deterministic)."""
    if len(ids) == 0:
        return []
    picks = np.unique(np.linspace(0, len(ids) - 1, min(SAMPLE_ROWS, len(ids))).round().astype(np.int64))
    return [side.text[int(ids[i])] for i in picks]


def check_declared_languages(sides, *, encoders) -> dict[str, Any]:
    """{role: record} for each (role, side, mined row ids, declared language) whose language was
    declared; warns (one line) for each side whose sample looks like another language.

    A record is `check_declared`'s ("consistent", "mismatch" or "not-checked").
    """
    from xmine.corpus import truncate_for_encoding

    declared = [(role, side, ids, lang) for role, side, ids, lang in sides if lang]
    if not declared:
        return {}
    projection = encoders.projection
    if projection is None or not hasattr(projection, "identify") or getattr(projection, "token_level", False):
        why = ("raw embeddings have no language part" if projection is None
               else "the projection identifies no language from sentence vectors")
        return {role: {"declared": lang, "status": "not-checked", "why": why} for role, _, _, lang in declared}
    table = projection.trust_table()
    out = {}
    for role, side, ids, lang in declared:
        code = normalize_lang(lang)
        texts = _sample_texts(side, ids) if code in table and table[code]["trusted"] else []
        labels = []
        if texts:  # only what can be checked is encoded
            emb = np.asarray(encoders.encoder.encode(truncate_for_encoding(texts)), dtype=np.float32)
            labels, _, _ = projection.identify(emb)
        record = check_declared(labels, lang, table)
        if record["status"] == "mismatch":
            log.warning(f"warning: {role} {side.path}: declared --{role}-lang {lang!r}, but {record['share']:.0%} of "
                        f"{record['sample']} sampled lines look like {record['looks_like']!r} (mining goes on; "
                        "recorded in the summary)")
        out[role] = record
    return out


#: share of a sample that must look like one other (trusted) language before a declared language is doubted
MISMATCH_SHARE = 0.5


def check_declared(labels, declared: str, table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Whether a sample's `labels` (the projection's `identify`: codes or "unknown") contradict
    the `declared` language.

    Returns {"status", "declared", "sample", ...}: "mismatch" (with "looks_like" and "share")
    when more than MISMATCH_SHARE of the sample carries one trusted language other than the
    declared one; "consistent" otherwise; "not-checked" (with "why") when the declared language
    is not one of the projection's or its label is not trusted: the projection would then
    mislabel correct text as often as not, and a false warning is worse than none.
    """
    code = normalize_lang(declared)
    record: dict[str, Any] = {"declared": declared, "sample": len(labels)}
    if code not in table:
        return {**record, "status": "not-checked", "why": f"{code!r} is not one of the projection's languages"}
    if not table[code]["trusted"]:
        return {**record, "status": "not-checked", "why": f"the projection does not identify {code!r} reliably "
                                                          f"({table[code]['why']})"}
    counts = Counter(labels)
    record["labels"] = dict(counts.most_common(5))
    others = [(n, lang) for lang, n in counts.items() if lang not in (code, "unknown")]
    if others and labels:
        n, lang = max(others)
        if n / len(labels) > MISMATCH_SHARE:
            return {**record, "status": "mismatch", "looks_like": lang, "share": round(n / len(labels), 3)}
    return {**record, "status": "consistent"}
