"""Sentence splitters measured on paragraphs rebuilt from FLORES-200 devtest.

FLORES-200 devtest holds 1012 sentences per language, the same sentences in every language, in
article order (the lines of one article are consecutive). No article metadata is kept here, so
paragraphs are rebuilt from seeded windows of 2 to 6 consecutive lines, the same windows in every
language (a window may cross an article boundary; that does not change what a splitter has to
do). The lines of a paragraph are joined with one space, except in scripts written without
spaces between sentences (Han, Japanese), where they are joined directly.

Each candidate splits every paragraph; a produced sentence counts when it equals one of the
paragraph's lines (white space at its ends ignored). Per language:
- `exact`: the share of paragraphs split back into exactly their lines (%);
- `f1`: line-level exact-match F1 (%), from precision = matched / produced and recall =
  matched / lines, summed over the language's paragraphs;
- `boundary_recall` (Brec): the share of the boundaries between a paragraph's lines that the
  splitter breaks at (%). Some FLORES lines hold two sentences, which a good splitter breaks
  (costing exact and F1 but not Brec), so no candidate can reach 100 on the first two;
- `ceiling` (report half): the share of paragraphs none of whose lines the splitter breaks when
  given the line alone, i.e. what `exact` could reach with every line boundary found.
The lines are cut in two halves: the choice of `xmine.io.sentences` (its OVERRIDES: the baseline
where it beats sentencex by 2 points on exact in every script of a language) is made on the
first half's paragraphs, and the table reports the second half's: per script, the mean over its
languages of each candidate and of the chosen splitter. `details.per_language` has every
language, both halves; `details.product_matches_rule` says whether xmine's table is the rule's.

Candidates (each through its ordinary API, no model downloaded): sentencex (Wikimedia's
rule-based splitter, language fallback chains), pysbd (its 23 languages, else English rules),
blingfire (language-neutral), sentence-splitter (Moses rules; its 24 languages, else English),
syntok (European rules), spaCy's rule-based `sentencizer` on a blank multilingual pipeline, and
a baseline: a break after terminal punctuation of any script followed by a space or a closing
quote (`xmine.io.sentences.split_terminal`). A candidate that is not installed is reported missing
(`pip install sentencex pysbd blingfire sentence-splitter syntok spacy` installs them all).
"""

from __future__ import annotations

import functools
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import click

from measure import installed_version, write_result_json
from xmine.benchmarks.common import flores_lines, machine
CANDIDATES = ("sentencex", "pysbd", "blingfire", "sentence_splitter", "syntok", "spacy", "terminal")
# Scripts whose sentences follow each other without a space.
NO_SPACE_JOIN = ("Hans", "Hant", "Jpan")
# A splitter: (ISO 639-1 code or None, ISO 639-3 code, paragraph) -> sentences.
Splitter = Callable[[str | None, str, str], list[str]]


def windows(n: int, *, seed: int, low: int = 2, high: int = 6) -> list[tuple[int, int]]:
    """Consecutive [start, end) windows of low..high lines covering 0..n (the last may be shorter)."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < n:
        w = rng.randint(low, high)
        out.append((i, min(n, i + w)))
        i += w
    return [(a, b) for a, b in out if b - a >= 2]


def _per_language(make: Callable[[str], Callable[[str], list[str]]], known) -> Splitter:
    """A splitter with rules per ISO 639-1 code (English's for a language not `known`), each made once."""
    make = functools.lru_cache(maxsize=None)(make)
    return lambda iso1, iso3, text: make(iso1 if iso1 in known else "en")(text)


def make_splitter(name: str) -> Splitter:
    """The candidate `name` as a Splitter (ImportError when its package is not installed)."""
    if name == "sentencex":
        from sentencex import segment

        return lambda iso1, iso3, text: list(segment(iso1 or iso3, text))
    if name == "pysbd":
        import pysbd
        from pysbd.languages import LANGUAGE_CODES

        return _per_language(lambda code: pysbd.Segmenter(language=code, clean=False).segment, LANGUAGE_CODES)
    if name == "blingfire":
        import blingfire

        return lambda iso1, iso3, text: blingfire.text_to_sentences(text).split("\n")
    if name == "sentence_splitter":
        import os

        import sentence_splitter

        known = {f[:-4] for f in os.listdir(Path(sentence_splitter.__file__).parent / "non_breaking_prefixes")}
        return _per_language(lambda code: sentence_splitter.SentenceSplitter(language=code).split, known)
    if name == "syntok":
        import syntok.segmenter as seg

        return lambda iso1, iso3, text: ["".join(str(t) for t in s) for p in seg.process(text) for s in p]
    if name == "spacy":
        import spacy

        nlp = spacy.blank("xx")
        nlp.add_pipe("sentencizer")
        nlp.max_length = 10**7
        return lambda iso1, iso3, text: [s.text for s in nlp(text).sents]
    if name == "terminal":
        from xmine.io.sentences import split_terminal

        return lambda iso1, iso3, text: split_terminal(text)
    raise ValueError(f"unknown splitter {name!r} (known: {', '.join(CANDIDATES)})")


def score(pred: list[str], gold: list[str], paragraph: str, starts: list[int]) -> tuple[bool, int, int, int, int]:
    """(exact, matched, produced, lines, line boundaries found) of one paragraph; `starts`: where
    each gold line after the first starts in `paragraph`."""
    p = [s.strip() for s in pred if s.strip()]
    g = [s.strip() for s in gold]
    left = list(g)
    matched = 0
    for s in p:
        if s in left:
            left.remove(s)
            matched += 1
    found, cursor = set(), 0
    for i, s in enumerate(p):  # where each produced sentence starts (a splitter may alter text: skipped)
        at = paragraph.find(s, cursor)
        if at >= 0:
            if i:
                found.add(at)
            cursor = at + len(s)
    return p == g, matched, len(p), len(g), len(found & set(starts))


def measure(splitter: Splitter, lang: str, lines: list[str], spans: list[tuple[int, int]], *,
            ceiling: bool = False) -> dict:
    from xmine.langs import iso1_code

    iso3, script = lang.split("_")
    iso1 = iso1_code(iso3)
    joiner = "" if script in NO_SPACE_JOIN else " "
    exact = matched = produced = gold = boundaries = found = 0
    for a, b in spans:
        para = [x.strip() for x in lines[a:b]]
        text = joiner.join(para)
        starts = [sum(len(x) + len(joiner) for x in para[:i]) for i in range(1, len(para))]
        e, m, p, g, f = score(splitter(iso1, iso3, text), para, text, starts)
        exact += e
        matched, produced, gold, boundaries, found = matched + m, produced + p, gold + g, boundaries + len(starts), found + f
    prec, rec = matched / max(produced, 1), matched / max(gold, 1)
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    out = {"exact": round(100 * exact / len(spans), 1), "f1": round(100 * f1, 1),
           "precision": round(100 * prec, 1), "recall": round(100 * rec, 1),
           "boundary_recall": round(100 * found / max(boundaries, 1), 1), "paragraphs": len(spans)}
    if ceiling:
        # The paragraphs none of whose lines this splitter breaks when given the line alone: the
        # lines that are one sentence by its own rules. `exact` cannot exceed it by much.
        multi = {i: len(splitter(iso1, iso3, lines[i].strip())) > 1 for a, b in spans for i in range(a, b)}
        out["ceiling"] = round(100 * sum(not any(multi[i] for i in range(a, b)) for a, b in spans) / len(spans), 1)
    return out


@click.command("splitters-flores")
@click.option("--data-dir", default=None,
              help="Data root holding parallel/flores200/devtest (default: $XMINE_DATA or ../shared/data).")
@click.option("--langs", default=None, help="Comma-separated FLORES codes (default: every file).")
@click.option("--splitters", default=",".join(CANDIDATES), show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Result JSON (default: benchmarks/results/splitters_flores.json).")
def command(**kw) -> None:
    """Sentence splitters on paragraphs rebuilt from FLORES-200 devtest (chooses xmine.io.sentences')."""
    from xmine.benchmarks.common import FLORES_DEVTEST, results_dir
    from xmine.paths import resolve_data_dir

    args = SimpleNamespace(**kw)
    args.data_dir = resolve_data_dir(args.data_dir, needs=str(FLORES_DEVTEST), how_to_get="See ../shared/data/README.md.")
    args.out = args.out or results_dir() / "splitters_flores.json"
    t0 = time.perf_counter()
    files = sorted(args.data_dir.glob("*.devtest"))
    if args.langs:
        wanted = set(args.langs.split(","))
        files = [f for f in files if f.stem in wanted]
    if not files:
        raise SystemExit(f"no FLORES-200 devtest files in {args.data_dir}")
    names, splitters, missing = [], {}, []
    for name in args.splitters.split(","):
        try:
            splitters[name] = make_splitter(name)
            names.append(name)
        except ImportError:
            missing.append(name)
    versions = {n: installed_version({"sentence_splitter": "sentence-splitter", "terminal": "xmine"}.get(n, n))
                for n in names}
    n_lines = len(flores_lines(args.data_dir, files[0].stem))
    half = n_lines // 2
    # The choice (OVERRIDES) is made on the first half's paragraphs, the table reports the second.
    halves = {"choose": windows(half, seed=args.seed),
              "report": [(a + half, b + half) for a, b in windows(n_lines - half, seed=args.seed + 1)]}
    per_lang: dict[str, dict] = {}
    for f in files:
        lines = flores_lines(args.data_dir, f.stem)
        if len(lines) != n_lines:
            raise SystemExit(f"{f}: {len(lines)} lines, expected {n_lines} (multi-way parallel)")
        per_lang[f.stem] = {part: {n: measure(splitters[n], f.stem, lines, spans, ceiling=part == "report")
                                   for n in names} for part, spans in halves.items()}
    result = summarise({lang: v["report"] for lang, v in per_lang.items()}, names)
    rule = rule_overrides({lang: v["choose"] for lang, v in per_lang.items()}) \
        if {"sentencex", "terminal"} <= set(names) else None
    from xmine.artefacts.directory import provenance
    from xmine.langs import normalize_lang
    from xmine.io.sentences import OVERRIDES

    product = sorted(OVERRIDES & {normalize_lang(lang) for lang in per_lang})  # of the languages measured

    result.update({
        "task": "splitters_flores", "machine": machine(), "seconds": round(time.perf_counter() - t0, 1),
        "data": [{"folder": str(args.data_dir.resolve()), "files": len(files), "lines": n_lines,
                  "sha256_of_files": _folder_hash(files)}],
        "details": {"versions": versions, "missing": missing,
                    "paragraphs": {k: len(v) for k, v in halves.items()},
                    "rule": f"terminal where it beats sentencex by >= {MARGIN} points exact on the choose half "
                            "in every script of the language",
                    "rule_overrides": rule, "product_overrides": product,
                    "product_matches_rule": None if rule is None else product == rule,
                    "per_language_columns": list(_COMPACT),
                    "per_language": {lang: {part: {n: [m.get(k) for k in _COMPACT] for n, m in by_name.items()}
                                            for part, by_name in v.items()} for lang, v in per_lang.items()}},
        "provenance": provenance(task="splitters_flores", seed=args.seed, splitters=names,
                                 windows="2-6 consecutive lines; choose: lines 1-506, report: 507-1012",
                                 langs=len(files)),
    })
    write_result_json(args.out, result)
    print(_text_table(result))
    if rule is not None and product != rule:
        print(f"xmine.io.sentences.OVERRIDES differs from the rule's choice: {rule}")


# What the result JSON keeps of each language's measure (as a list, in this order).
_COMPACT = ("exact", "f1", "boundary_recall", "ceiling")
#: Points of exactly recovered paragraphs by which the baseline must beat sentencex to override it.
MARGIN = 2.0


def rule_overrides(choose: dict[str, dict]) -> list[str]:
    """Languages (canonical ISO 639-3) where terminal beats sentencex by MARGIN in every script."""
    from xmine.langs import normalize_lang

    verdict: dict[str, bool] = {}
    for lang, m in choose.items():
        code = normalize_lang(lang)
        wins = m["terminal"]["exact"] >= m["sentencex"]["exact"] + MARGIN
        verdict[code] = verdict.get(code, True) and wins
    return sorted(c for c, v in verdict.items() if v)


def _folder_hash(files: list[Path]) -> str:
    import hashlib

    from xmine.artefacts.fileio import sha256_file

    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def summarise(per_lang: dict[str, dict], names: list[str]) -> dict:
    """The table: per script, the mean exact/F1 of each candidate over its languages."""
    from xmine.io.sentences import splitter_name

    by_script: dict[str, list[str]] = {}
    for lang in per_lang:
        by_script.setdefault(lang.split("_")[1], []).append(lang)
    columns = ["script", "langs"] + [f"{n} exact/F1/Brec" for n in names] + ["chosen", "chosen exact/F1/Brec"]
    rows = []
    order = sorted(by_script, key=lambda s: (-len(by_script[s]), s))
    for script in order + ["all"]:
        langs = by_script[script] if script != "all" else list(per_lang)
        chosen = [splitter_name(lang.split("_")[0]) for lang in langs]
        picked = [per_lang[lang].get(c) for lang, c in zip(langs, chosen)]
        rows.append([script, len(langs)] + [_pair([per_lang[lang][n] for lang in langs]) for n in names]
                    + ["/".join(sorted(set(chosen))), _pair([p for p in picked if p]) if all(picked) else "n/a"])
    named = ["zho_Hans", "zho_Hant", "yue_Hant", "jpn_Jpan", "kor_Hang", "tha_Thai", "lao_Laoo", "khm_Khmr",
             "mya_Mymr", "amh_Ethi", "tir_Ethi", "hin_Deva", "mar_Deva", "npi_Deva", "ben_Beng", "bod_Tibt",
             "arb_Arab", "eng_Latn", "deu_Latn", "rus_Cyrl"]
    lang_rows = []
    for lang in (x for x in named if x in per_lang):
        chosen = splitter_name(lang.split("_")[0])
        lang_rows.append([lang] + [_pair([per_lang[lang][n]]) for n in names]
                         + [chosen, per_lang[lang].get(chosen, {}).get("ceiling", "n/a")])
    return {"table": {"columns": columns, "rows": rows},
            "extra_tables": [{"title": "Languages of note (exact / F1 / boundary recall, %)",
                              "columns": ["language"] + [f"{n} exact/F1/Brec" for n in names]
                              + ["chosen", "chosen's ceiling"],
                              "rows": lang_rows}]}


def _pair(measures: list[dict]) -> str:
    """"exact / F1 / boundary recall", each the mean over the languages."""
    return " / ".join(f"{statistics.fmean(m[k] for m in measures):.1f}" for k in ("exact", "f1", "boundary_recall"))


def _text_table(result: dict) -> str:
    t = result["table"]
    out = ["\t".join(t["columns"])] + ["\t".join(str(v) for v in r) for r in t["rows"]]
    for extra in result["extra_tables"]:
        out += ["", extra["title"], "\t".join(extra["columns"])] + ["\t".join(str(v) for v in r)
                                                                     for r in extra["rows"]]
    return "\n".join(out)
