"""The filtering steps of `xmine mine` around the search (mining/pipeline.py calls them), in
order: the language filter of each side (`language_filter`, set up by `lang_filter_langs`), the
check of the declared languages (`check_declared_languages`), the cleaning of both sides
(`pre_search`), and after the selection the pair filters (`filter_pairs`). Every language
judgement is made by mining/langid.py. Sentences are read from their side by offset
(`SideTexts`), chunk by chunk; memory is one byte a row or pair beside the chunk.

What the steps before the search leave of a side is its `Mineable` rows, the rows that take part
in mining: first occurrences of each sentence, within the length bounds, in the side's language
(the automatic language filter), then what the pre-search cleaning keeps; with the map from every
row to its representative among them.

The declared-language check: a declared language (--src-lang / --tgt-lang) is taken as given (it
is recorded, compared with the artefacts' own, and a `center` projection subtracts its mean), so
`--src-lang en --tgt-lang de` on German/English input would otherwise pass unnoticed. When the
projection in use identifies languages, a sample of each side is labelled with it
(`langid.identify_by_projection`) and one warning line names the side, the declared language and
the language most of the sample looks like. It warns and never refuses: the labels are a model's
guess. A declared language that is not one of the projection's, or one it does not identify
reliably, is not checked (the summary says why), and only a trusted label can contradict it. The
stored rows hold the meaning part only, so the sample (at most SAMPLE_ROWS rows a side, spread
over the side) is encoded again, only when a language is declared.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Iterable

import numpy as np

from xmine.errors import ConfigError
from xmine.io.corpus import truncate_for_encoding
from xmine.langs import normalize_lang
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.mining.filters import PairFilterConfig, apply_pair_filters
from xmine.mining.filters import counts as filter_counts
from xmine.mining.langid import UNKNOWN, knows, language_mask, thresholds_record
from xmine.mining.presearch import clean_sides
from xmine.mining.select import MinedPairs, MiningConfig, length_mask
from xmine.mining.writers import PairColumn, tsv_field
from xmine.store.rows import RowSubset
from xmine.langs import UNDETERMINED

log = logging.getLogger(__name__)

LANG_FILTER_CHUNK = 65536
# The automatic language filter leaves a side alone when more than this share of it is identified
# as another language (a wrong --src-lang/--tgt-lang, not noise).
MISLABELLED_SHARE = 0.5
#: rows labelled per side by the declared-language check: enough that a majority is clear (the
#: share's standard error <= 3.5%)
SAMPLE_ROWS = 200
#: share of a sample that must look like one other (trusted) language before a declared language is doubted
MISMATCH_SHARE = 0.5


def language_filter(side, ids: np.ndarray, lang_filter: tuple[str, str, float | None], *,
                    forced: bool = False) -> tuple[np.ndarray, np.ndarray, float | None]:
    """(rows kept, rows dropped, share left alone) of the language filter over rows `ids` of `side`
    (`lang_filter`: language, LID backend, min confidence; None: the language's own threshold,
    `langid.min_confidence_for`): rows identified as another language are dropped. When more than
    MISLABELLED_SHARE of the side is (and not `forced`), its --*-lang is more likely wrong than the
    side is noise, and the filter would leave nothing to mine: the side is left as it is, and that
    share is returned third (else None), for `note_side_left` to say."""
    lang, backend, min_confidence = lang_filter
    keep = np.zeros(len(ids), dtype=bool)
    for start in range(0, len(ids), LANG_FILTER_CHUNK):
        chunk = ids[start:start + LANG_FILTER_CHUNK]
        keep[start:start + len(chunk)], _ = language_mask([side.text[int(r)] for r in chunk], lang, backend,
                                                          min_confidence=min_confidence)
    share = float((~keep).mean()) if len(keep) else 0.0
    if share > MISLABELLED_SHARE and not forced:
        return ids, ids[:0], share
    return ids[keep], ids[~keep], None


def note_side_left(role: str, shown, share: float, lang: str, check: dict | None) -> None:
    """The one warning for a side (`shown`: its role and input, as the user knows it) the language filter left
    as it is (`language_filter`: a `share` of it in another language than `lang`), with what the
    declared-language check found (`check`, `check_declared`'s record; was: two lines a side, one
    of them not naming the language)."""
    # (two measures: the filter's share counts the sentences not surely `lang` too, the check's the lines
    # whose likeliest language is another; was: "95% ... another language; 100% ... look like 'eng'", which read
    # as a contradiction)
    looks = (f"; the likeliest language of {check['share']:.0%} of {check['sample']} sampled lines is "
             f"{check['looks_like']!r}" if check and check.get("status") == "mismatch" else "")
    log.warning(f"{shown}: {share:.0%} of its sentences fail the language filter for --{role}-lang {lang} (another "
                f"language, or not surely {lang}){looks}; the automatic language filter leaves this side as it is (check "
                f"--{role}-lang; --lang-filter forces the filter; recorded in the summary)")


#: the dropped sentences' line numbers OUT.json lists per side (was: counts alone, so a true
#: sentence the language filter dropped could not be found without mining again)
AUDITED_LINES = 100


class SideTexts:
    """The sentences of `rows` of a side, read by offset when indexed (a lazy sequence)."""

    def __init__(self, side, rows: np.ndarray):
        self.side, self.rows = side, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> str:
        return self.side.text[int(self.rows[i])]


class Mineable:
    """A side's rows that take part: first occurrences within the length bounds (then `restrict`)."""

    def __init__(self, side, config: MiningConfig, *, lang_filter: tuple[str, str, float] | None = None,
                 forced: bool = False):
        first, self.representative = side.unique_rows()
        self.side = side
        self.unique = len(first)
        lengths = np.asarray(side.row_index.lengths)
        ok = length_mask(lengths[first], config)
        self.ids = first[ok] if ok is not None else first
        if ok is not None and len(first) and not ok.any():  # (was: "mined 0 pairs" and nothing more)
            bounds = " and ".join(f"{name} {value:,}" for name, value in (
                ("--min-length", config.min_length), ("--max-length", config.max_length)) if value)
            log.warning(f"warning: {side.path}: none of its {len(first):,} distinct sentences is within {bounds} "
                        "(characters): nothing of it is searched")
        #: row -> its near-duplicates' rows that differ from it in a number (`restrict`)
        self.number_variants: dict[int, list[int]] = {}
        self.other_language, self.lang_filter_skipped = 0, None
        #: input line numbers of the first AUDITED_LINES sentences the language filter dropped
        self.other_language_lines: list[int] = []
        if lang_filter is not None:  # (language, LID backend, min confidence): drop other languages
            self.ids, dropped, self.lang_filter_skipped = language_filter(
                side, self.ids, lang_filter, forced=forced)
            self.other_language = len(dropped)
            self.other_language_lines = [int(n) for n in np.asarray(side.line_numbers)[dropped[:AUDITED_LINES]]]
        self._index()

    def restrict(self, clean) -> None:
        """Search only the rows the pre-search cleaning keeps (`presearch.SideClean` over `ids`);
        a near-duplicate's rows stand for its representative, as an exact repeat's do."""
        to = np.arange(len(self.representative), dtype=np.int64)
        to[self.ids] = self.ids[clean.representative]
        self.representative = to[self.representative]
        self.number_variants = {int(self.ids[r]): [int(self.ids[v]) for v in vs]
                                for r, vs in clean.number_variants.items()}
        self.ids = self.ids[clean.keep]
        self._index()

    def _index(self) -> None:
        lengths = np.asarray(self.side.row_index.lengths)
        self.lengths = lengths[self.ids].astype(np.int64)
        self.rows = RowSubset(self.side.rows, self.ids)
        # For a side's own index: row -> position of its representative among self.ids (-1: not mined)
        pos = np.full(len(lengths), -1, dtype=np.int64)
        pos[self.ids] = np.arange(len(self.ids))
        self.position_of_row = pos[self.representative]


def pre_search(mx, my, *, langs, config, filters: PairFilterConfig, margin: str) -> dict:
    """Clean the rows `mx`, `my` (`Mineable`s) would search (`presearch.clean_sides`),
    restrict them to what it keeps; what the summary records."""
    langs = tuple(None if lang in (None, UNDETERMINED) else lang for lang in langs)
    src, tgt, record = clean_sides(SideTexts(mx.side, mx.ids), SideTexts(my.side, my.ids), langs=langs, config=config,
                                   identical_filter="identical" in filters.active(margin), lid=filters.lid)
    mx.restrict(src)
    my.restrict(tgt)
    emptied = [(role, side) for role, m, side in (("source", mx, src), ("target", my, tgt))
               if len(m.ids) == 0 and any(side.removed.values())]
    if emptied:  # say why nothing can be mined, and how to keep them
        steps = "; ".join(f"{role}: " + ", ".join(f"{n} by {step}" for step, n in side.removed.items() if n)
                          for role, side in emptied)
        hint = (": each is also on the other side (the same input?); --no-pre-clean-step copies keeps them, "
                "and --no-filter identical a sentence paired with itself"
                if any(side.removed.get("copies") for _, side in emptied) else "")
        log.warning(f"the pre-search cleaning removed every sentence of the {' and '.join(r for r, _ in emptied)} "
                    f"side{'s' if len(emptied) > 1 else ''} ({steps}){hint}")
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
    if on is None:  # (True with a language missing: refused by `MineConfig`, before anything runs)
        unknown = [] if missing else [lang for lang in langs if not knows(backend, lang)]
        if missing or unknown:
            why = (f"{' and '.join(missing)} not given" if missing
                   else f"{', '.join(unknown)} not known to {backend}")
            return [None, None], {"on": False, "backend": backend, "source": f"default, off: {why}"}
    source = "--lang-filter" if on else f"default: both languages given and known to {backend}"
    return [(lang, backend, min_confidence) for lang in langs], {"on": True, "backend": backend, "source": source,
                                                                 **thresholds_record(langs, backend, min_confidence)}


def filter_pairs(mined: MinedPairs, sx, sy, src_rows, tgt_rows, *, langs, config: PairFilterConfig, margin: str,
                  dropped_claim=None, line_numbers: bool = False):
    """The pairs the pair filters keep (and their rows), what the summary records, and the output
    columns of the language identification done on the way (`src_lid`, `src_lid_score`, ...: the
    jsonl, parquet and hf outputs carry them); the dropped ones go to `dropped_claim` when
    --keep-filtered asked for them, whose caller finishes it after the mined output (`dropped_summary`),
    with each side's line number where `line_numbers` (--line-numbers, as the mined TSV has them)."""
    langs = tuple(None if lang in (None, UNDETERMINED) else lang for lang in langs)
    lid: dict[str, np.ndarray] = {}
    keep, reasons = apply_pair_filters(SideTexts(sx, src_rows), SideTexts(sy, tgt_rows), mined.score, langs=langs,
                                       config=config, margin=margin, lid_out=lid)
    record = config.record(margin, langs) | {"languages": list(langs), "pairs_before": len(mined),
                                             "removed": filter_counts(reasons, config, margin, langs)}
    if dropped_claim is not None:
        gone = np.flatnonzero(~keep)
        with dropped_claim.atomic_file() as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for i in gone.tolist():
                s, t = int(src_rows[i]), int(tgt_rows[i])
                where = f"\t{sx.line_numbers[s]}\t{sy.line_numbers[t]}" if line_numbers else ""  # (was: never)
                f.write(f"{float(mined.score[i]):.6f}\t{tsv_field(sx.text[s])}\t{tsv_field(sy.text[t])}\t"
                        f"{FILTER_RULES[int(reasons[i])]}{where}\n")
    kept = mined.take(keep)
    columns = [PairColumn(name=name, values=values[keep]) for name, values in lid.items()]
    return kept, src_rows[keep], tgt_rows[keep], record, columns


def dropped_summary(record: dict[str, Any], kept: int, sx, sy) -> dict[str, Any]:
    """The summary of --keep-filtered's file: `filter_pairs`' record, and the pairs it dropped."""
    return {"pairs": record["pairs_before"] - kept, "src": str(sx.path), "tgt": str(sy.path), "filters": record}


def _sample_texts(side, ids: np.ndarray) -> list[str]:
    """The text of up to SAMPLE_ROWS of `ids`, evenly spread (deterministic)."""
    if len(ids) == 0:
        return []
    picks = np.unique(np.linspace(0, len(ids) - 1, min(SAMPLE_ROWS, len(ids))).round().astype(np.int64))
    return [side.text[int(ids[i])] for i in picks]


def check_declared_languages(sides, *, encoders, warned: Iterable[str] = (),
                             shown: dict[str, str] | None = None) -> dict[str, Any]:
    """{role: record} for each (role, side, mined row ids, declared language) whose language was
    declared; warns (one line) for each side whose sample looks like another language, except the
    roles `warned` (the language filter left them as they are: `note_side_left` says both). `shown`:
    each role's side as the user knows it (default: the role and the side's path).

    A record is `check_declared`'s ("consistent", "mismatch" or "not-checked").
    """
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
            labels, _, _ = projection.identify(emb, texts)
        out[role] = check_declared(labels, lang, table)
    check_not_swapped(out, {role: lang for role, _, _, lang in declared})
    for role, side, _, lang in declared:
        record = out[role]
        if record["status"] == "mismatch" and role not in warned:  # (was: two lines a side saying one thing)
            log.warning(f"warning: {(shown or {}).get(role, f'{role} {side.path}')}: declared --{role}-lang {lang!r}, "
                        f"but {record['share']:.0%} of "
                        f"{record['sample']} sampled lines look like {record['looks_like']!r} (mining goes on; "
                        "recorded in the summary)")
    return out


def check_not_swapped(records: dict[str, dict[str, Any]], declared: dict[str, str]) -> None:
    """ConfigError where both sides' samples look like the other side's declared language (`records`:
    `check_declared`'s, by role): the languages given the wrong way round, which every output would
    label so (was: two warnings, and pairs written under each other's language; `score` refused it)."""
    if len(records) < 2 or any(r["status"] != "mismatch" for r in records.values()):
        return
    src, tgt = records["src"], records["tgt"]
    if normalize_lang(src["looks_like"]) == normalize_lang(declared["tgt"]) and \
            normalize_lang(tgt["looks_like"]) == normalize_lang(declared["src"]):
        raise ConfigError(f"--src-lang {declared['src']} and --tgt-lang {declared['tgt']} look swapped: "
                          f"{src['share']:.0%} of the source's sampled lines look like {src['looks_like']!r} and "
                          f"{tgt['share']:.0%} of the target's like {tgt['looks_like']!r}; give each side its language")


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
    others = [(n, lang) for lang, n in counts.items() if lang not in (code, UNKNOWN)]
    if others and labels:
        n, lang = max(others)
        if n / len(labels) > MISMATCH_SHARE:
            return {**record, "status": "mismatch", "looks_like": lang, "share": round(n / len(labels), 3)}
    return {**record, "status": "consistent"}
