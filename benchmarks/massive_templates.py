"""Monolingual template retrieval pairs from MASSIVE (FMDA Sec. 4.3.2, Table 3), seeded.

A pair is (source, target): a test utterance and the same utterance with EVERY slot value
replaced by another value of the same slot type seen in the locale's annotated rows ("I like
[artist_name : senatra] songs" -> "I like [artist_name : taylor swift] songs"). Utterances
without a slot are skipped, as in the paper (about 1.9k pairs per language remain there), and so
are those with a slot type that has no other value. Values are drawn uniformly (numpy, `seed`)
from the sorted distinct values of the type; a value equal to the original (ignoring case) is
never drawn.

Task: every source retrieves among all targets by cosine; accuracy@1 (%) counts the source's
own target. Only locales with `annot_utt` on their test split can have pairs (en-US, de-DE and
sw-KE here).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np


def slot_values(rows) -> dict[str, list[str]]:
    """Sorted distinct values of each slot type over the annotated `rows` (fmda_data.MassiveRow)."""
    from xmine.disentangle.fmda_data import slot_spans

    values: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.annot_utt is None:
            continue
        for s, e, kind in slot_spans(r.annot_utt, r.utt, where=f"line {r.line}: "):
            values[kind].add(r.utt[s:e])
    return {k: sorted(v) for k, v in values.items()}


def template_pairs(test_rows, value_rows, *, seed: int = 0) -> list[dict[str, Any]]:
    """[{id, source, target}] for the annotated `test_rows`, values from `value_rows` (see module doc)."""
    from xmine.disentangle.fmda_data import slot_spans

    values = slot_values(value_rows)
    rng = np.random.default_rng(seed)
    pairs = []
    for r in test_rows:
        if r.annot_utt is None:
            continue
        spans = slot_spans(r.annot_utt, r.utt, where=f"line {r.line}: ")
        if not spans:
            continue
        pieces, pos, ok = [], 0, True
        for s, e, kind in spans:
            original = r.utt[s:e]
            options = [v for v in values.get(kind, []) if v.lower() != original.lower()]
            if not options:
                ok = False
                break
            pieces += [r.utt[pos:s], options[int(rng.integers(len(options)))]]
            pos = e
        if not ok:
            continue
        target = "".join(pieces) + r.utt[pos:]
        if target != r.utt:
            pairs.append({"id": r.id, "source": r.utt, "target": target})
    return pairs


def template_accuracy(src: np.ndarray, tgt: np.ndarray, *, targets: Sequence[str] | None = None) -> dict[str, float]:
    """Accuracy@1 (%) of source i retrieving target i among all targets (rows L2-normalised).

    With `targets` (texts) also `acc_text`: a hit when the retrieved target's text equals the gold
    one (generated targets can repeat).
    """
    best = (np.asarray(src, np.float32) @ np.asarray(tgt, np.float32).T).argmax(1)
    gold = np.arange(len(src))
    out = {"acc": float(100.0 * np.mean(best == gold)), "pairs": int(len(src))}
    if targets is not None:
        t = np.asarray(targets, dtype=object)
        out["acc_text"] = float(100.0 * np.mean(t[best] == t[gold]))
    return out
