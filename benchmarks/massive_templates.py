"""Monolingual template retrieval on MASSIVE (FMDA, section 4.3.2 and Table 3).

FMDA builds evaluation pairs from MASSIVE's test split "by replacing the slot value of utterances,
such that the source and target utterances are from the same language, share the same template,
but differ in their slot values"; utterances without a slot are discarded, leaving about 1.9k
pairs per language ("I like [artist : Senatra] songs" -> "I like Taylor Swift songs"). Given a
source utterance, the target must be retrieved from the pool of all targets; accuracy@1.

The paper made its pairs by hand and did not publish them; this module generates them, seeded:

- sources: the annotated test rows of one locale with at least one slot, in file order; a
  repeated utterance is kept once (its first row), so every query has one target;
- target: EVERY slot value is replaced by another value of the same slot type, drawn uniformly
  from the distinct values of that type seen in the locale's annotated rows (`value_partitions`:
  all annotated partitions by default: en-US train+dev+test, de-DE and sw-KE dev+test). "Another"
  means different after lower-casing and stripping. A slot type with no other value keeps its
  value; a row none of whose slots can change is dropped;
- targets are unique: a draw that gives the text of an earlier target or of any source is redrawn
  (up to `MAX_DRAWS` times, then the row is dropped), so accuracy needs no tie rule.

Our choices where the paper is silent: values come from the same locale (so a German template
gets German values), and the pool of candidates is the targets only (as the paper describes).
`write_pairs` saves a set as JSON lines; `build_template_pairs` with the same data and seed gives
the same pairs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.disentangle import massive as data
from xmine.benchmarks.common import EmbedFn, cosine_matrix, retrieval_accuracy
from xmine.errors import InputError
from xmine.artefacts.outputs import claim_output

#: locales whose test split is annotated in the shared copy of MASSIVE 1.1 (FMDA: EN and DE)
DEFAULT_LOCALES = ("en-US", "de-DE")
MAX_DRAWS = 20


@dataclasses.dataclass(frozen=True)
class TemplatePair:
    """A source utterance and its slot-replaced target."""

    id: str
    source: str
    target: str
    #: the shared template, slots as "[type]"
    template: str
    #: (slot type, source value, target value) for every slot, in order
    replacements: tuple[tuple[str, str, str], ...]


@dataclasses.dataclass(frozen=True)
class TemplatePairSet:
    locale: str
    seed: int
    pairs: tuple[TemplatePair, ...]
    #: how the set was made and what was dropped, for the result JSON
    summary: dict[str, Any]

    @property
    def sources(self) -> list[str]:
        return [p.source for p in self.pairs]

    @property
    def targets(self) -> list[str]:
        return [p.target for p in self.pairs]

    def head(self, n: int) -> "TemplatePairSet":
        """The first `n` pairs (a smaller candidate pool, so not comparable with the full set)."""
        return dataclasses.replace(self, pairs=self.pairs[:n], summary=self.summary | {"pairs": min(n, len(self.pairs)),
                                                                                      "head": n})


def slot_values(records: Sequence[data.Record]) -> dict[str, list[str]]:
    """{slot type: distinct values in first-seen order} over annotated records."""
    values: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        ann = r.annotation
        for s in ann.slots if ann else ():
            values[s.type][s.value] = None
    return {t: list(v) for t, v in values.items()}


def _norm(value: str) -> str:
    return value.strip().lower()


def build_template_pairs(
    data_dir: str | Path | None, locale: str, *, seed: int = 0, partition: str = "test",
    value_partitions: Sequence[str] = data.PARTITIONS,
) -> TemplatePairSet:
    """The template-retrieval pairs of one locale (see the module doc); same inputs, same pairs."""
    folder = data.locate(data_dir)
    loc = data.read_locale(folder, locale)
    rows = loc.annotated(partition)
    if not rows:
        raise InputError(loc.path, f"no annotated (annot_utt) rows in partition {partition!r}: "
                                   "template retrieval needs the slot annotation")
    pool = [r for p in value_partitions for r in loc.annotated(p)]
    values = slot_values(pool)
    rng = np.random.default_rng(seed)
    taken: set[str] = {r.utt for r in rows}  # every source, and each target drawn
    pairs: list[TemplatePair] = []
    seen_src: set[str] = set()
    dropped = {"no_slot": 0, "repeated_source": 0, "no_other_value": 0, "no_unique_target": 0}
    for r in rows:
        ann = r.annotation
        if not ann.slots:
            dropped["no_slot"] += 1
            continue
        if r.utt in seen_src:
            dropped["repeated_source"] += 1
            continue
        seen_src.add(r.utt)
        choices = [[v for v in values[s.type] if _norm(v) != _norm(s.value)] for s in ann.slots]
        if not any(choices):
            dropped["no_other_value"] += 1
            continue
        for _ in range(MAX_DRAWS):
            new = [c[rng.integers(len(c))] if c else s.value for c, s in zip(choices, ann.slots)]
            target = ann.fill(new)
            if target not in taken:
                break
        else:
            dropped["no_unique_target"] += 1
            continue
        taken.add(target)
        pairs.append(TemplatePair(id=r.id, source=r.utt, target=target, template=ann.template,
                                  replacements=tuple((s.type, s.value, v) for s, v in zip(ann.slots, new))))
    summary = {
        "locale": locale, "seed": seed, "partition": partition, "value_partitions": list(value_partitions),
        "annotated_rows": len(rows), "pairs": len(pairs), "dropped": dropped,
        "slot_types": len(values), "slot_values": sum(len(v) for v in values.values()),
        "value_rows": len(pool), "file": str(loc.path),
    }
    return TemplatePairSet(locale=locale, seed=seed, pairs=tuple(pairs), summary=summary)


def evaluate_template_retrieval(embed_fn: EmbedFn, pairs: TemplatePairSet) -> dict[str, Any]:
    """Accuracy@1 (%) of source -> target retrieval among all targets of the set, by cosine."""
    emb = embed_fn(pairs.sources + pairs.targets)
    n = len(pairs.pairs)
    acc = retrieval_accuracy(cosine_matrix(emb[:n], emb[n:]))
    return {"acc": acc, "pairs": n, "locale": pairs.locale, "seed": pairs.seed}


PAIRS_KIND = "massive-template-pairs"


def write_pairs(files: dict[Path, TemplatePairSet], *, overwrite: bool = False, data: Path | None = None) -> None:
    """Each set as JSON lines (id, source, target, template, replacements) at its path, with the
    sidecar `PATH.json` (kind, generator summary, hash) that `xmine.artefacts.outputs` uses to
    recognise it: an earlier pair file is replaced only with `overwrite`, any other file never, nor
    one inside the data folder `data`.
    Every file is claimed before any is written, so a refused one leaves none (was: the first
    locale's file written, then the second's refused, and the rerun refused the first's)."""
    with contextlib.ExitStack() as claims:
        claimed = [(claims.enter_context(claim_output(path, kind=PAIRS_KIND, form="tsv", overwrite=overwrite,
                                                      inputs=[pairs.summary.get("file"), data])), pairs)
                   for path, pairs in files.items()]
        for claim, pairs in claimed:
            claim.write_text("".join(json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n" for p in pairs.pairs))
            claim.finish(pairs.summary)
