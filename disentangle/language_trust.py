"""Language identification that says "unknown" instead of guessing: which labels a projection can be trusted with.

`Projection.langid` labels every line with its nearest training-language centroid, so a line in a
language the projection never saw still gets one of its languages, with a cosine as high as an
in-set line's. A cosine threshold cannot fix that: the nearest-centroid cosine of the shipped
projection's language part ranks in-set lines above out-of-set ones about as often as below
(AUC 0.56 on MASSIVE, 0.47 on FLORES-200; benchmarks/lab/langid_unknown.py). The label does
separate them: lines
of unseen languages (and of poorly modelled seen ones) fall onto a few "sink" centroids, the
training languages whose own held-out lines the projection identified worst. So a label is
*trusted* when, at training time, its language's held-out lines were identified at least
`min_recall` of the time, over at least `min_heldout` lines; a line whose nearest centroid is
an untrusted label is reported as `UNKNOWN`.

Everything the rule needs is in every projection's config.json (`langid.per_language`: held-out
accuracy per language; `training_data.counts`: held-out pairs per language pair). A projection
that lacks them has no trusted label: every line is unknown, and `trust_table` says why.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrustRule:
    """When a projection's language label is trusted.

    The defaults were chosen on MASSIVE (short utterances, 50 locales) and are reported on
    FLORES-200 (204 languages) in benchmarks/RESULTS.md ("Unknown languages").
    """

    #: least held-out identification accuracy of the label's language at training time
    min_recall: float = 0.85
    #: least number of held-out lines that accuracy was measured on (fewer: too noisy to trust)
    min_heldout: int = 50


def heldout_lines(config: dict[str, Any]) -> dict[str, int]:
    """Held-out (validation) lines per language at training time, from `training_data.counts`
    ({"deu-eng": {"valid": 540, ...}}): each pair's held-out lines count for both its languages."""
    from xmine.langs import normalize_lang

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
    """{language: {"recall", "heldout", "trusted", "why"}} for each of the projection's languages."""
    from xmine.langs import normalize_lang

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


def identify(projection, emb: np.ndarray, *, rule: TrustRule = TrustRule()
             ) -> tuple[list[str], np.ndarray, list[str]]:
    """(labels, scores, nearest) of raw encoder embeddings `emb`: `nearest` is the nearest training
    language, `scores` its cosine, `labels` that language where it is trusted, else `UNKNOWN`."""
    nearest, scores = projection.langid(emb)
    table = trust_table(projection.config, projection.languages, rule)
    labels = [n if table[n]["trusted"] else UNKNOWN for n in nearest]
    return labels, scores, nearest

