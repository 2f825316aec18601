"""Cleaning both sides of `xmine mine` before the search (on by default; `PreSearchConfig`).

Some web text defeats the margin search in a way the pair filters (mining/filters.py), which run
after it, cannot repair: a sentence present on both sides pairs with itself at cosine 1, so it
takes its own line on the other side in the one-to-one selection (that line's translation is
lost) and raises the neighbourhood means of the lines near it. So, on the rows that would be
mined, keyed by `filters.normalise` (what the `identical` filter compares: letters and marks only,
so digits, punctuation and case do not count), steps in this order:

- `no_letters`: rows with nothing left after `normalise` (number, date, phone lines). Any pair
  with one is dropped by `identical`, so they are removed only while that filter is active.
- `near_duplicates`: a row whose key equals an earlier row's of its side (a templated line with
  another number, a line differing in punctuation or case) is mined through that first row, as
  exact repeats already are (`xmine.io.dedup.first_occurrences`, the same dedup). A line that
  differs from its first row in a number is a sentence of its own, with a translation of its own:
  after the search, `pair_number_variants` gives a pair mined through the first row to the
  variants whose numbers agree ("rose 5%" mined against the translation of "rose 7%", a pair the
  `numbers` filter would drop, becomes "rose 7%" with it, and "rose 5%" goes with its own
  translation where that is a variant on the other side). Searching the variants instead, beside
  each other, cost recall: a copy with another figure lowers its line's margins (1-1.6 points of
  recall on `bench mining --noisy`, benchmarks/results/notes/mining_noisy.md).
- `copies`: a key present on both sides. Each such text is identified (`langid.identify`, the
  pair filters' `lid` backend, its top language) when both languages are given and the backend
  knows them: a text identified as one side's language stays on that side only; a text given to
  neither side's language (a third language, boilerplate in one) or to both is dropped from both.
  Without both languages every shared text is dropped from both sides: it could only pair
  with itself, a pair `identical` drops anyway.

Memory: an 8-byte key per row of each side (and the dedup's 24 bytes a row while it runs); the
texts are read by offset, never held; language identification reads only the shared texts.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Sequence

import numpy as np

from xmine.io.dedup import first_occurrences
from xmine.errors import ConfigError, check_field_types
from xmine.mining.filters import normalise, numbers_of
from xmine.mining.langid import accepts, identify, knows

#: Step names in the order they run.
STEPS = ("no_letters", "near_duplicates", "copies")
_EMPTY = int.from_bytes(hashlib.blake2b(b"", digest_size=8).digest(), "little")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreSearchConfig:
    """Which pre-search steps run."""

    #: False switches every step off (both sides are searched as read).
    enabled: bool = True
    #: Names of steps (from `STEPS`) switched off.
    disabled: frozenset[str] = frozenset()
    #: `copies`: the least confidence at which the detector's language decides a shared text's
    #: side. 0: its top language decides (the choice is only between the two sides, and a text
    #: dropped from both loses its own translation: on the noisy mining sets a bar of 0.8 dropped
    #: 1-2 English gold lines a language from both sides).
    copies_min_confidence: float = 0.0

    def __post_init__(self):
        check_field_types(self, booleans=("enabled",), reals=("copies_min_confidence",))
        if isinstance(self.disabled, str):  # (was: "copies" read as the steps c, o, p, i, e, s)
            raise ConfigError(f"disabled must be a set of step names, not the string {self.disabled!r}; "
                              f"pass {{{self.disabled!r}}}")
        unknown = set(self.disabled) - set(STEPS)
        if unknown:
            raise ConfigError(f"unknown pre-search step(s) {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}")

    def active(self, identical_filter: bool) -> tuple[str, ...]:
        """The steps that run (`no_letters` only beside the `identical` pair filter)."""
        if not self.enabled:
            return ()
        return tuple(s for s in STEPS if s not in self.disabled and (s != "no_letters" or identical_filter))


@dataclasses.dataclass(kw_only=True)
class SideClean:
    """One side's outcome: which of its rows are searched, and what stands for the others."""

    #: keep[i]: text i is searched
    keep: np.ndarray
    #: representative[i]: the text that stands for text i (i itself unless a near-duplicate)
    representative: np.ndarray
    #: texts removed by each step
    removed: dict[str, int]
    #: near-duplicates that differ from their representative in a number: representative -> the
    #: first text of each other number variant of it, in order
    number_variants: dict[int, list[int]] = dataclasses.field(default_factory=dict)


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """uint64 per text: an 8-byte BLAKE2b hash of `normalise(text)` (texts may be a lazy sequence)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(normalise(texts[i]).encode("utf-8"), digest_size=8).digest(),
                                       "little") for i in range(len(texts))), dtype=np.uint64, count=len(texts))


def _within_side(texts: Sequence[str], keys: np.ndarray, steps) -> SideClean:
    n = len(keys)
    keep = np.ones(n, dtype=bool)
    removed = {}
    empty = keys == np.uint64(_EMPTY)
    if "no_letters" in steps:
        keep &= ~empty
        removed["no_letters"] = int(empty.sum())
    representative = np.arange(n, dtype=np.int64)
    if "near_duplicates" in steps:
        lettered = np.flatnonzero(~empty)  # lines without letters are never one another's duplicates
        rep = first_occurrences(keys[lettered], lambda i, j: normalise(texts[int(lettered[i])])
                                == normalise(texts[int(lettered[j])]))
        representative[lettered] = lettered[rep]
        dup = representative != np.arange(n)
        removed["near_duplicates"] = int((dup & keep).sum())
        keep &= ~dup
        return SideClean(keep=keep, representative=representative, removed=removed,
                         number_variants=_number_variants(texts, representative, np.flatnonzero(dup)))
    return SideClean(keep=keep, representative=representative, removed=removed)


def _number_variants(texts: Sequence[str], representative: np.ndarray, duplicates: np.ndarray) -> dict[int, list[int]]:
    """`SideClean.number_variants` (only the near-duplicates' texts are read again)."""
    seen: dict[int, set[str]] = {}
    out: dict[int, list[int]] = {}
    for d in duplicates.tolist():
        r = int(representative[d])
        keys = seen.setdefault(r, {normalise(texts[r], digits=True)})
        key = normalise(texts[d], digits=True)
        if key not in keys:
            keys.add(key)
            out.setdefault(r, []).append(d)
    return out


def pair_number_variants(src_rows: np.ndarray, tgt_rows: np.ndarray, src_variants: dict, tgt_variants: dict,
                         src_text, tgt_text) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The mined pairs (`src_rows[i]`, `tgt_rows[i]`: arrays of row ids), each side's row standing for
    its number variants (`SideClean.number_variants`, by row), paired by the numbers they hold:
    where a side has variants, the pairs of its variants and the other side's whose numbers
    (`filters.numbers_of`) are the same (one to one, in order) replace the pair, which stays as mined
    where its own numbers agree or no variant's do. Each inherits the mined pair's score (the
    variants differ in digits, punctuation and case only). Returns (take, src_rows, tgt_rows, n):
    `take[j]` the mined pair that pair j comes from; n the pairs that are not the mined rows."""
    if not src_variants and not tgt_variants:
        return np.arange(len(src_rows)), src_rows, tgt_rows, 0
    take, out_src, out_tgt = [], [], []
    used_src, used_tgt = set(), set()  # variants paired already
    for i, (s, t) in enumerate(zip(src_rows.tolist(), tgt_rows.tolist())):
        pairs = [(s, t)]
        if s in src_variants or t in tgt_variants:
            xs = [s] + [v for v in src_variants.get(s, []) if v not in used_src]
            ys = [t] + [v for v in tgt_variants.get(t, []) if v not in used_tgt]
            nx, ny = {x: numbers_of(src_text[x]) for x in xs}, {y: numbers_of(tgt_text[y]) for y in ys}
            matched, taken_x, taken_y = [], set(), set()
            for x in xs:
                y = next((y for y in ys if y not in taken_y and nx[x] and nx[x] == ny[y]), None)
                if y is not None:
                    matched.append((x, y))
                    taken_x.add(x)
                    taken_y.add(y)
            if matched:
                pairs = matched
                used_src.update(taken_x)
                used_tgt.update(taken_y)
        for x, y in pairs:
            take.append(i)
            out_src.append(x)
            out_tgt.append(y)
    out_src_a, out_tgt_a = np.asarray(out_src, dtype=src_rows.dtype), np.asarray(out_tgt, dtype=tgt_rows.dtype)
    take_a = np.asarray(take, dtype=np.int64)
    moved = int(((out_src_a != src_rows[take_a]) | (out_tgt_a != tgt_rows[take_a])).sum())
    return take_a, out_src_a, out_tgt_a, moved


def _copies(src_texts, src_keys, tgt_keys, src: SideClean, tgt: SideClean, langs, lid: str,
            min_confidence: float) -> dict:
    """Decide each text searched on both sides; update the keep masks; what the summary records."""
    src.removed["copies"] = tgt.removed["copies"] = 0
    sk, tk = src_keys[src.keep], tgt_keys[tgt.keep]
    shared, s_first, _ = np.intersect1d(sk, tk, assume_unique=False, return_indices=True)
    record = {"shared_texts": len(shared), "kept_on_src": 0, "kept_on_tgt": 0, "dropped_from_both": 0}
    if not len(shared):
        return record | {"method": None}
    judged = all(langs) and all(knows(lid, lang) for lang in langs)
    to_src, to_tgt = np.zeros(len(shared), dtype=bool), np.zeros(len(shared), dtype=bool)
    if judged:
        rows = np.flatnonzero(src.keep)[s_first]
        codes, conf = identify([src_texts[int(r)] for r in rows], lid)
        for j, (code, p) in enumerate(zip(codes, conf.tolist())):
            if code and p >= min_confidence:
                fits = [accepts(lang, code) for lang in langs]
                to_src[j], to_tgt[j] = fits[0] and not fits[1], fits[1] and not fits[0]
    record.update(kept_on_src=int(to_src.sum()), kept_on_tgt=int(to_tgt.sum()),
                  dropped_from_both=int((~to_src & ~to_tgt).sum()),
                  method=f"language identification ({lid}, confidence >= {min_confidence})" if judged
                  else "dropped from both sides (the language of a side is not given or not known to " + lid + ")")
    for side, keys, stays in ((src, src_keys, to_src), (tgt, tgt_keys, to_tgt)):
        gone = side.keep & np.isin(keys, shared[~stays])
        side.removed["copies"] = int(gone.sum())
        side.keep &= ~gone
    return record


def clean_sides(src_texts: Sequence[str], tgt_texts: Sequence[str], *, langs=(None, None),
                config: PreSearchConfig = PreSearchConfig(), identical_filter: bool = True,
                lid: str = "fasttext") -> tuple[SideClean, SideClean, dict]:
    """(src, tgt, record): which texts of each side are searched, and what the summary records.

    `src_texts`, `tgt_texts`: the rows that would be mined (lazy sequences are read by index).
    `langs`: the sides' language codes (None where unknown). `identical_filter`: whether the
    `identical` pair filter runs after the search (`no_letters` runs only then). `lid`: language
    identification of the shared texts (`copies`)."""
    steps = config.active(identical_filter)
    # No step, no keys to compute (that reads every text): every row is searched as itself.
    src_keys, tgt_keys = (text_keys(t) if steps else np.zeros(len(t), np.uint64) for t in (src_texts, tgt_texts))
    sides = [_within_side(t, k, steps) for t, k in ((src_texts, src_keys), (tgt_texts, tgt_keys))]
    copies = (_copies(src_texts, src_keys, tgt_keys, *sides, langs, lid, config.copies_min_confidence)
              if "copies" in steps else None)
    record = {"enabled": config.enabled, "disabled": sorted(config.disabled), "active": list(steps),
              "copies_min_confidence": config.copies_min_confidence,
              "removed": {"src": sides[0].removed, "tgt": sides[1].removed}, "copies": copies}
    return sides[0], sides[1], record
