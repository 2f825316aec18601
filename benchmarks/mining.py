"""`xmine bench mining`: BUCC-style mining sets built from the data here, and their F1.

BUCC 2018 hides translations among unrelated sentences of two comparable corpora (about 2-3% of
the sentences on each side have a translation) and scores the mined pairs against the hidden gold.
The BUCC data cannot be obtained on these machines, so this benchmark builds sets of the same kind
from `parallel/` of the data folder, one per language paired with English, and writes them in
BUCC's own file format (`{xx}-en.sample.{xx}`, `{xx}-en.sample.en`: `id<TAB>sentence`;
`{xx}-en.sample.gold`: `xx-id<TAB>en-id`), so `xmine bench bucc --data-dir <sets> --pair xx-en`
reads them too. Mining, the threshold sweep and F1 are `bench bucc`'s own code
(`bucc.mine_candidates`, `bucc.best_threshold`, `bucc.evaluate`): the two benchmarks' numbers are
comparable.

How a set is built (per language xx, seeded, deterministic):
- Units: the 1,012 FLORES-200 devtest lines (xx, English: Wikinews, Wikivoyage, Wikibooks) and the
  WMT newstest pairs of xx-en and en-xx of the held-out years 2019-2021 (`NEWS_SETS`; no training
  recipe reads those years: `quality.HELDOUT_NEWSTEST_YEARS`), exact duplicates dropped, at most
  `max_news` (1,500) news pairs drawn. About 1,310 sentences a side, 100-104 of them gold.
- Each source (FLORES, news) is split on its own, so the gold and the distractors have the same
  mix of domains: a fraction of its pairs becomes gold (both sides kept); of the rest, alternate
  pairs keep only their xx side or only their English side. A distractor is then a real sentence
  of the same language and domain whose translation was removed from the other side: the
  Wikipedia-style FLORES sentences beside their own gold, the news sentences beside theirs.
- The gold share is `gold_fraction` of each side (default 8%; BUCC 2018 has 2-3%): with n units and
  g gold pairs a side holds g + (n - g) / 2 sentences, so g = f n / (2 - f). 8% is the least share
  that gives every default language >= 100 gold pairs (Khmer, the smallest source, exactly 100), so
  that one pair moves a set's F1 by at most about one point.
- A distractor whose text equals a gold sentence of its side, or whose translation's text is
  present on the other side (the same sentence in two sets), is dropped, so no unlisted true pair
  is left in the set. Each side is shuffled; ids are `xx-000000001`, `en-000000001` as in BUCC.

The sets are written under `$XMINE_HOME/bench-mining/<hash of data and settings>/` (or
`--sets-dir`) with a manifest of their source files' hashes; building them takes a second.

Reported, per language and averaged, for raw embeddings and each projection's meaning part:
precision, recall and F1 at the threshold that maximises F1 (the oracle threshold, as BUCC papers
report) and at the threshold plain `xmine mine` keeps that set at (`variant_threshold`: the same
`run_threshold` record, and its rule applied to the set's own candidates as `mine` applies it, the
rows rounded as `mine`'s store keeps them), with k = 4 (`SHIPPED_K`), max retrieval and the margin `xmine mine`
uses in the variant's space (ratio; distance for raw use-m3), as its defaults. The sets are mined
as they are, without `mine`'s language filter and pre-search cleaning (they hold no noise;
`--noisy` measures both): where the language filter drops a row of a clean set (2 of 256 Japanese
lines of the quick set), `mine`'s candidates, and so its threshold, differ by those rows. Each
language's result also holds its curve: precision, recall, F1 and the number of mined pairs at
every ratio threshold of `CURVE_THRESHOLDS` (1.000-1.080, step 0.001), so a default threshold can
be judged against the whole curve, not one point.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.artefacts.directory import file_fingerprint
from xmine.benchmarks.bucc import (at_least, best_threshold, evaluate, margin_of, mine_candidates, prf_curve,
                                   read_bucc_file, read_gold)
from xmine.benchmarks.common import FLORES_DEVTEST, flores_lines, read_lines
from xmine.errors import ArtefactError, ConfigError, DataNotFoundError, InputError, OutputError
from xmine.artefacts.fileio import (MARKER, atomic_write_manifest, atomic_write_text, load_manifest, read_manifest,
                                    sha256_file)
from xmine.mining.config import SelectionConfig
from xmine.mining.defaults import SHIPPED_K
from xmine.mining.filters import PairFilterConfig
from xmine.mining.select import MiningConfig
from xmine.mining.threshold_rule import run_threshold
from xmine.artefacts.outputs import claim_output
from xmine.paths import data_root, xmine_home

#: xx (the BUCC-style short code used in file names) -> FLORES-200 code and newstest folders
#: (under parallel/wmt-newstest/) holding xx-en / en-xx pairs of the held-out years.
NEWS_SETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "de": ("deu_Latn", ("2019/de-en", "2019/en-de", "2020/de-en", "2020/en-de")),
    "cs": ("ces_Latn", ("2019/en-cs",)),
    "ru": ("rus_Cyrl", ("2019/ru-en", "2019/en-ru", "2020/ru-en", "2020/en-ru")),
    "zh": ("zho_Hans", ("2019/zh-en", "2019/en-zh", "2020/zh-en", "2020/en-zh", "2021/zh-en")),
    "ja": ("jpn_Jpan", ("2020/ja-en", "2020/en-ja", "2021/ja-en", "2021/en-ja")),
    "fi": ("fin_Latn", ("2019/fi-en", "2019/en-fi")),
    "kk": ("kaz_Cyrl", ("2019/kk-en", "2019/en-kk")),
    "pl": ("pol_Latn", ("2020/pl-en", "2020/en-pl")),
    "lt": ("lit_Latn", ("2019/lt-en", "2019/en-lt")),
    "km": ("khm_Khmr", ("2020/km-en", "2020/en-km")),
    "ha": ("hau_Latn", ("2021/ha-en", "2021/en-ha")),
    "is": ("isl_Latn", ("2021/is-en", "2021/en-is")),
}
#: Default languages: ten, four of which (cs, pl, lt, km) no training recipe has seen.
DEFAULT_LANGS = ("de", "cs", "ru", "zh", "ja", "fi", "kk", "pl", "lt", "km")
QUICK_LANGS = ("de", "zh", "lt")
DEFAULT_GOLD_FRACTION = 0.08
DEFAULT_MAX_NEWS = 1500
QUICK_FLORES_ROWS, QUICK_MAX_NEWS = 250, 250
#: The ratio-margin threshold `xmine mine` users are pointed to (WikiMatrix; the README's demo).
DEFAULT_THRESHOLD = 1.04
#: The ratio-margin thresholds at which every set's precision / recall / F1 curve is reported
#: (details.<variant>.per_lang.<lang>.curve): 1.000 to 1.080 in steps of 0.001, the 3-decimal
#: values a calibrated threshold is rounded to (benchmarks/lab/calibrate.py), so each is on the curve.
CURVE_THRESHOLDS = tuple(round(1.0 + 0.001 * i, 3) for i in range(81))
SPLIT = "sample"
SETS_KIND = "mining-sets"
#: gold pairs below which a set's F1 moves by more than a point per pair (warned about)
MIN_GOLD = 100

HOW_TO_GET = ("Get FLORES-200 devtest (github.com/facebookresearch/flores) into parallel/flores200/devtest/ and WMT "
              "newstest 2019-2021 (statmt.org) into parallel/wmt-newstest/<year>/<xx>-en/ (or en-<xx>/), as "
              "newstest<year>.<xx> and newstest<year>.en, line-aligned.")


def locate(data_dir: str | Path | None) -> Path:
    """The data root holding parallel/flores200/devtest and parallel/wmt-newstest."""
    root = data_root(data_dir)
    needs = (str(FLORES_DEVTEST), "parallel/wmt-newstest")
    missing = list(needs) if root is None else [n for n in needs if not (root / n).is_dir()]
    if missing:
        raise DataNotFoundError(f"{root or '(no --data-dir, no $XMINE_DATA, no ../shared/data)'}: no "
                                f"{' and no '.join(missing)}. {HOW_TO_GET} Pass --data-dir DIR or set XMINE_DATA.")
    return root


@dataclasses.dataclass
class MiningSet:
    """One language's set: the two sides as (ids, sentences), the gold id pairs, and counts."""

    lang: str
    src: tuple[list[str], list[str]]
    en: tuple[list[str], list[str]]
    gold: list[tuple[str, str]]
    counts: dict[str, Any]
    files: list[Path]


def _rng(seed: int, *keys: str) -> np.random.Generator:
    # crc32, not hash(): Python salts str hashes per process.
    return np.random.default_rng([seed] + [zlib.crc32(k.encode()) for k in keys])


def _read(path: Path) -> list[str]:
    return read_lines(path, what="mining-set source")


def _news_pairs(news_root: Path, lang: str, folders: Sequence[str]) -> tuple[list[tuple[str, str]], list[Path]]:
    """The `newstest{year}` pairs of `folders` (not the second references `newstestB{year}`), each
    sentence once: a pair repeating either side of an earlier one is dropped (en-km and km-en of
    2020 are the same set; one source with two references would make two golds)."""
    pairs, files, seen_src, seen_en = [], [], set(), set()
    for rel in folders:
        folder = news_root / rel
        year = rel.split("/")[0]
        xx, en = folder / f"newstest{year}.{lang}", folder / f"newstest{year}.en"
        if not (xx.is_file() and en.is_file()):
            raise InputError(folder, f"expected newstest{year}.{lang} and newstest{year}.en. {HOW_TO_GET}")
        a, b = _read(xx), _read(en)
        if len(a) != len(b):
            raise InputError(en, f"{len(b)} lines, but {xx.name} has {len(a)}: not line-aligned")
        files += [xx, en]
        for s, t in zip(a, b):
            s, t = s.strip(), t.strip()
            if s and t and s not in seen_src and t not in seen_en:
                seen_src.add(s)
                seen_en.add(t)
                pairs.append((s, t))
    return pairs, files


def build_set(data: Path, lang: str, *, seed: int = 0, gold_fraction: float = DEFAULT_GOLD_FRACTION,
              max_news: int = DEFAULT_MAX_NEWS, flores_rows: int | None = None) -> MiningSet:
    """Build language `lang`'s mining set in memory (see the module doc)."""
    if lang not in NEWS_SETS:
        raise InputError(Path(lang), f"no mining set for {lang!r}; known: {', '.join(NEWS_SETS)}")
    if not 0 < gold_fraction < 1:
        raise ValueError(f"gold_fraction must be in (0, 1), not {gold_fraction}")
    flores_code, news_folders = NEWS_SETS[lang]
    flores = data / FLORES_DEVTEST
    fx, fe = flores / f"{flores_code}.devtest", flores / "eng_Latn.devtest"
    a, b = flores_lines(flores, flores_code), flores_lines(flores, "eng_Latn")
    if len(a) != len(b):
        raise InputError(fx, f"{len(a)} lines, but {fe.name} has {len(b)}: not line-aligned")
    flores_pairs = [(s.strip(), t.strip()) for s, t in zip(a, b) if s.strip() and t.strip()]
    if flores_rows:
        order = _rng(seed, lang, "flores-rows").permutation(len(flores_pairs))[:flores_rows]
        flores_pairs = [flores_pairs[i] for i in sorted(order)]
    news, news_files = _news_pairs(data / "parallel" / "wmt-newstest", lang, news_folders)
    flores_text = {s for p in flores_pairs for s in p}
    news = [p for p in news if p[0] not in flores_text and p[1] not in flores_text]
    if len(news) > max_news:
        keep = _rng(seed, lang, "news-sample").permutation(len(news))[:max_news]
        news = [news[i] for i in sorted(keep)]

    return compose_set(lang, (("flores", flores_pairs), ("news", news)), files=[fx, fe] + news_files, seed=seed,
                       gold_fraction=gold_fraction)


def compose_set(lang: str, sources: Sequence[tuple[str, list[tuple[str, str]]]], *, files: list[Path], seed: int = 0,
                gold_fraction: float = DEFAULT_GOLD_FRACTION) -> MiningSet:
    """Hide a `gold_fraction` of each source's pairs among the other pairs' single sides (module doc)."""
    gold, src_only, en_only, counts = [], [], [], {}
    for source, pairs in sources:
        n = len(pairs)
        g = int(round(gold_fraction * n / (2 - gold_fraction)))
        order = _rng(seed, lang, source).permutation(n)
        gold += [pairs[i] for i in order[:g]]
        rest = order[g:]
        src_only += [pairs[i] for i in rest[0::2]]
        en_only += [pairs[i] for i in rest[1::2]]
        counts[source] = {"pairs": n, "gold": g}
    if not gold:  # (was: a ZeroDivisionError in the small sets' note; F1 has no meaning without one)
        raise ConfigError(f"the {lang} set would hold no gold pair ({sum(len(p) for _, p in sources)} pairs at a gold "
                          f"fraction of {gold_fraction:g}): raise --flores-rows, --max-news or --gold-fraction")
    # No distractor may repeat a gold sentence of its side, or have its translation on the other side.
    gold_src, gold_en = {s for s, _ in gold}, {t for _, t in gold}
    src_only_en = {t for _, t in src_only}
    en_only_src = {s for s, _ in en_only}
    src_keep = [s for s, _ in src_only if s not in gold_src and s not in en_only_src]
    en_keep = [t for _, t in en_only if t not in gold_en and t not in src_only_en]
    src_keep, en_keep = list(dict.fromkeys(src_keep)), list(dict.fromkeys(en_keep))
    counts["dropped_distractors"] = (len(src_only) - len(src_keep)) + (len(en_only) - len(en_keep))

    def side(prefix: str, gold_texts: list[str], distractors: list[str], key: str):
        """Ids in shuffled order: (ids, sentences) sorted by id, and the ids of the gold texts."""
        texts = gold_texts + distractors
        order = _rng(seed, lang, key).permutation(len(texts))
        ids = [f"{prefix}-{pos + 1:09d}" for pos in range(len(texts))]
        id_of = {int(i): ids[pos] for pos, i in enumerate(order)}  # text index -> its id
        return (ids, [texts[int(i)] for i in order]), [id_of[i] for i in range(len(gold_texts))]

    src_side, s_gold = side(lang, [s for s, _ in gold], src_keep, "side-src")
    en_side, e_gold = side("en", [t for _, t in gold], en_keep, "side-en")
    s_ids, e_ids = src_side[0], en_side[0]
    counts.update(src_sentences=len(s_ids), en_sentences=len(e_ids), gold=len(gold),
                  gold_share_src=len(gold) / max(len(s_ids), 1), gold_share_en=len(gold) / max(len(e_ids), 1))
    return MiningSet(lang=lang, src=src_side, en=en_side, gold=sorted(zip(s_gold, e_gold)), counts=counts, files=files)


def set_files(root: Path, lang: str) -> dict[str, Path]:
    """BUCC file names of `lang`'s set under `root` (the `{pair}/` sub-folder layout)."""
    pair = f"{lang}-en"
    base = root / pair
    return {"src": base / f"{pair}.{SPLIT}.{lang}", "en": base / f"{pair}.{SPLIT}.en",
            "gold": base / f"{pair}.{SPLIT}.gold"}


def write_set(ms: MiningSet, root: Path) -> dict[str, Path]:
    """Write a set in BUCC's format (atomically); returns its files."""
    files = set_files(root, ms.lang)

    def clean(s: str) -> str:  # one sentence a line, whatever the source held
        return " ".join(s.split())

    atomic_write_text(files["src"], "".join(f"{i}\t{clean(s)}\n" for i, s in zip(*ms.src)))
    atomic_write_text(files["en"], "".join(f"{i}\t{clean(s)}\n" for i, s in zip(*ms.en)))
    atomic_write_text(files["gold"], "".join(f"{a}\t{b}\n" for a, b in ms.gold))
    return files


def build_sets(data: Path, langs: Sequence[str], *, sets_dir: Path | None = None, seed: int = 0,
               gold_fraction: float = DEFAULT_GOLD_FRACTION, max_news: int = DEFAULT_MAX_NEWS,
               flores_rows: int | None = None) -> tuple[Path, dict[str, Any]]:
    """Build and write the sets of `langs`; returns (folder, manifest).

    The default folder is keyed by the settings and the sizes of the source files, so a changed
    setting never reuses another's files; files are rewritten each run (deterministically equal).
    """
    settings = {"seed": seed, "gold_fraction": gold_fraction, "max_news": max_news, "flores_rows": flores_rows,
                "split": SPLIT}
    built = {lang: build_set(data, lang, seed=seed, gold_fraction=gold_fraction, max_news=max_news,
                             flores_rows=flores_rows) for lang in langs}
    sources = sorted({p for ms in built.values() for p in ms.files})
    fps = [file_fingerprint(p) for p in sources]
    if sets_dir is None:
        key = json.dumps([settings, [(f["sha256"]) for f in fps]], sort_keys=True)
        sets_dir = xmine_home() / "bench-mining" / hashlib.sha256(key.encode()).hexdigest()[:16]
    manifest = {"kind": SETS_KIND, "settings": settings, "languages": {}, "sources": fps}

    # Its own artefact only: a foreign or other-kind directory is refused; an earlier set folder is
    # rewritten only when it was built from the same data and settings (then the bytes are equal).
    with claim_output(sets_dir, kind=SETS_KIND, form="dir", in_place=True, reopen=True, inputs=sources):
        old = (load_manifest(sets_dir / "manifest.json", advice="delete the folder or choose another --sets-dir")
               if (sets_dir / "manifest.json").is_file() else None)
        if old is not None and (old.get("settings") != settings or old.get("sources") != fps):
            raise OutputError(f"{sets_dir}: holds mining sets of other settings or data; choose another --sets-dir")
        for lang, ms in built.items():
            files = write_set(ms, sets_dir)
            manifest["languages"][lang] = {"counts": ms.counts,
                                           "files": {k: file_fingerprint(p) for k, p in files.items()}}
        if old is not None:  # languages built earlier into the same folder stay listed
            manifest["languages"] = old.get("languages", {}) | manifest["languages"]
        atomic_write_manifest(sets_dir / "manifest.json", manifest)
    return sets_dir, manifest


def small_sets_note(manifest: dict[str, Any], langs: Sequence[str]) -> str | None:
    """The note on the sets of `langs` with fewer than MIN_GOLD gold pairs (None: none): one moves F1 by >= 1."""
    small = {lang: manifest["languages"][lang]["counts"]["gold"] for lang in langs
             if manifest["languages"][lang]["counts"]["gold"] < MIN_GOLD}
    if not small:
        return None
    return (f"{', '.join(f'{k}: {v}' for k, v in small.items())} gold pairs, fewer than {MIN_GOLD}: one pair moves a "
            f"set's F1 by {100 / min(small.values()):.1f} points or more (the default sizes, without --quick, give "
            "each set >= 100)")


class MiningSets:
    """A folder of sets `build_sets` wrote, opened to be checked (`xmine verify`): every file its
    manifest records, by name in the folder, has the recorded size and sha256, and no other file is
    there."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.manifest = read_manifest(self.path, SETS_KIND)

    def verify(self) -> int:
        """Bytes checked; ArtefactError naming the first file that differs."""
        recorded = {}  # file -> its fingerprint, where the folder is now (`set_files`' layout)
        for lang, entry in sorted((self.manifest.get("languages") or {}).items()):
            where = set_files(self.path, lang)
            recorded.update({where[k]: fp for k, fp in (entry.get("files") or {}).items() if k in where})
        for f, fp in recorded.items():
            if not f.is_file() or f.stat().st_size != fp["size"] or sha256_file(f) != fp["sha256"]:
                raise ArtefactError(f"{f}: missing, or its size or sha256 differs from {self.path / 'manifest.json'}: "
                                    "changed or damaged since xmine wrote it")
        own = set(recorded) | {self.path / "manifest.json", self.path / MARKER}
        extra = sorted(e for e in self.path.rglob("*") if e.is_file() and e not in own)
        if extra:
            raise ArtefactError(f"{extra[0]}: not recorded in {self.path / 'manifest.json'} (added since xmine wrote "
                                "the sets)")
        return sum(int(fp["size"]) for fp in recorded.values())


def variant_threshold(variant, given: float | None = None, *, margin: str | None = None,
                      encoder_name: str | None = None, point: str | None = None,
                      langs: tuple[str | None, str | None] = (None, None)) -> dict[str, Any]:
    """The threshold record `xmine mine` makes for a variant's space (`threshold_rule.run_threshold`,
    the same call): `given`, else the calibrated default of the space at `point` (default: balanced;
    a projection's SHIPPED.json, raw `encoder_name`'s `mining/calibration.json`) with the rule that
    moves it with each run where the space has one, else the rule that estimates it from each run (a
    space without a calibration). Its "value" before a run, "source", "rule" (where a run decides:
    `bucc.run_threshold_of`), "score_max" (the cap, {"value", "source"}) and, for `langs` (source and
    target) the calibration does not reach, "language_notes"."""
    path = (variant.projection or {}).get("path")
    selection = SelectionConfig(margin=margin, threshold="default" if given is None else given, operating_point=point)
    config = MiningConfig(k=SHIPPED_K, margin=selection.given_margin, retrieval="max",
                          threshold=selection.given_threshold)
    return run_threshold(selection, config, PairFilterConfig(), path, encoder_name, langs=langs)[2]


def threshold_label(record: dict[str, Any]) -> str:
    """How a table names a variant's default: the rule each run's threshold comes from
    ("mutual-null-share", "estimated-from-run"), else the value, or "all" (every pair kept)."""
    rule = (record.get("rule") or {}).get("rule")
    return rule or ("all" if record["value"] is None else f"{record['value']:g}")


def curve(scores, correct, n_gold: int, thresholds: Sequence[float] = CURVE_THRESHOLDS) -> dict[str, list]:
    """Precision / recall / F1 / mined pairs of keeping the candidates scoring >= each threshold."""
    c = prf_curve(scores, correct, n_gold, thresholds)
    return {"thresholds": [float(t) for t in thresholds]} | {
        m: [int(x) for x in c[m]] if m == "pairs" else [float(x) for x in c[m]] for m in ("precision", "recall", "f1", "pairs")}


def evaluate_set(embed_fn, files: dict[str, Path], *, threshold: float | dict | None = DEFAULT_THRESHOLD,
                 k: int = SHIPPED_K, margin: str | None = None, retrieval: str = "max") -> dict[str, Any]:
    """P/R/F1 at the best threshold and at `threshold` (None: every pair kept; a `variant_threshold`
    record: what `xmine mine` keeps this set at, its rule applied to the set's own candidates) for one
    set, with `bench bucc`'s code, its gap (best F1 - F1 at `threshold`), its sizes, and (ratio margin)
    the curve over `CURVE_THRESHOLDS`. The default's record holds the share its rule read (`share`,
    as `xmine mine`'s OUT.json does; None without a rule)."""
    gold = read_gold(files["gold"])
    margin = margin_of(threshold, margin)
    cands, scores, kept_at, share = mine_candidates(read_bucc_file(files["src"]), read_bucc_file(files["en"]),
                                                    embed_fn, k=k, margin=margin, retrieval=retrieval,
                                                    threshold=threshold)
    correct = np.array([c in gold for c in cands], dtype=bool)
    best_t, _ = best_threshold(scores, correct, len(gold))
    best = evaluate({c for c, s in zip(cands, scores) if s >= best_t}, gold)
    at_default = evaluate({c for c, kept in zip(cands, at_least(scores, kept_at)) if kept}, gold)
    out = {"best": {"threshold": best_t, **best}, "default": {"threshold": kept_at, "share": share, **at_default},
           "gap": best["f1"] - at_default["f1"], "candidates": len(cands),
           "sizes": {"src": sum(1 for _ in open(files["src"], encoding="utf-8")),
                     "en": sum(1 for _ in open(files["en"], encoding="utf-8")), "gold": len(gold)}}
    if margin == "ratio":
        out["curve"] = curve(scores, correct, len(gold))
    return out


def evaluate_mining(embed_fn, sets_dir: Path, langs: Sequence[str], **kwargs) -> dict[str, Any]:
    """Every language's set, then the averages (x100) over languages."""
    per_lang = {lang: evaluate_set(embed_fn, set_files(sets_dir, lang), **kwargs) for lang in langs}
    avg = {at: {m: float(100 * np.mean([r[at][m] for r in per_lang.values()]))
                for m in ("precision", "recall", "f1")} for at in ("best", "default")}
    avg["gap"] = float(100 * np.mean([r["gap"] for r in per_lang.values()]))
    avg["worst_gap"] = float(100 * max(r["gap"] for r in per_lang.values()))
    return {"per_lang": per_lang, "average": avg}


#: `bench mining`'s table: one row per variant and set, then the variant's averages
TABLE_COLUMNS = ["variant", "default", "set", "xx", "en", "gold", "F1 best", "F1 default", "gap", "P default", "R default",
                 "best at"]


def table_rows(details: dict[str, Any], langs: Sequence[str]) -> list[list]:
    """Per variant (its `evaluate_mining` result with `default_threshold`) and set: the threshold it
    was kept at ('all': every pair kept; the average row: "rule: NAME" where each set's comes from the
    variant's rule, else its one value), the sizes, F1 at the best and at the default, the gap, P and R
    at the default (x100), the best threshold; then the averages."""
    rows = []
    for name, r in details.items():
        for lg in langs:
            x, t = r["per_lang"][lg], r["per_lang"][lg]["default"]["threshold"]
            rows.append([name, "all" if t is None else f"{t:.4f}", lg, x["sizes"]["src"], x["sizes"]["en"],
                         x["sizes"]["gold"], 100 * x["best"]["f1"], 100 * x["default"]["f1"], 100 * x["gap"],
                         100 * x["default"]["precision"], 100 * x["default"]["recall"], f"{x['best']['threshold']:.4f}"])
        a, label = r["average"], threshold_label(r["default_threshold"])
        rows.append([name, f"rule: {label}" if (r["default_threshold"].get("rule") or {}).get("rule") else label,
                     "average", "", "", "", a["best"]["f1"], a["default"]["f1"], a["gap"], a["default"]["precision"],
                     a["default"]["recall"], ""])
    return rows
