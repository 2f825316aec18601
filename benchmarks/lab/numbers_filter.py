"""The `numbers` pair filter against its digits alone, on translations and on near-miss wrong pairs.

`xmine.mining.filters.numbers` drops a mined pair whose sides both hold numbers that disagree. It
compares the numbers as digits (`numbers_of`: locale separators and clock times normalised) and,
where those disagree, as the other ways a translation writes them (`number_readings`: a score as a
dash pair, a date's day and year, "6 mil" as 6,000, "7 pm" as 19, decades, year ranges, Thai
Buddhist-era years). What that buys and costs, measured here:
- true pairs dropped: every FLORES-200 devtest language against English (line i with line i; the
  languages `NUMBERS_SKIP` leaves unjudged left out), and the newstest sets of `NEWS` (line-aligned
  references), by the digits alone and by the rule;
- near-miss wrong pairs caught: each true pair of `NEAR_FLORES` and `NEWS` that the digits alone
  keep, with one number of its target side changed (+-1 and x2 for a count, +-1 and +10 for a year,
  +1000 and x2 for a large number, +1 on either part of a colon pair or a decimal): the pair is then
  wrong on exactly that number, as a near-duplicate that a search ranks high is. After a helper's
  user test of the first version of the readings, whose pairs were met part by part.
Nothing is chosen here: the readings were written from FLORES-200's and newstest's drops, so both
sets are the data they were fitted on, and the near-misses are the check that they stay narrow.
"""

from __future__ import annotations

import collections
import re
import time
from pathlib import Path

import click

from measure import write_result_json
from xmine.benchmarks.common import machine

#: newstest sets (year, direction) whose line-aligned references are measured
NEWS = (("2019", "de-en"), ("2014", "fr-en"), ("2014", "cs-en"), ("2019", "ru-en"), ("2019", "fi-en"),
        ("2020", "pl-en"), ("2019", "lt-en"))
#: FLORES-200 languages whose pairs are also changed into near-misses
NEAR_FLORES = ("deu_Latn", "fra_Latn", "spa_Latn", "rus_Cyrl", "pol_Latn", "ces_Latn", "fin_Latn", "tur_Latn",
               "arb_Arab", "hin_Deva", "tha_Thai", "vie_Latn", "ind_Latn", "ita_Latn", "por_Latn")
_TOKEN = re.compile(r"(?<![\d.,:])\d+(?:[.,:]\d+)*(?!\d)")


def digits_drop(src: str, tgt: str, langs) -> bool:
    """The rule on the digits alone: both sides hold numbers and neither side's are among the other's."""
    from xmine.mining.filters import NUMBERS_SKIP, numbers_of
    from xmine.langs import normalize_lang

    if any(lang and normalize_lang(lang) in NUMBERS_SKIP for lang in langs):
        return False
    a, b = numbers_of(src), numbers_of(tgt)
    return bool(a) and bool(b) and not (a <= b or b <= a)


def near_misses(token: str) -> list[tuple[str, str]]:
    """(kind, changed token) for one number as written."""
    if re.fullmatch(r"\d+", token):
        v = int(token)
        if 1900 <= v <= 2099:
            return [("year", str(v + 1)), ("year", str(v - 1)), ("year", str(v + 10))]
        return [("count", str(v + 1))] + ([("count", str(v - 1))] if v > 1 else []) + [("count x2", str(v * 2))]
    if re.fullmatch(r"\d{1,3}(,\d{3})+", token):
        v = int(token.replace(",", ""))
        return [("large", f"{v + 1000:,}"), ("large", f"{v * 2:,}")]
    if re.fullmatch(r"\d+:\d+", token):
        a, b = token.split(":")
        return [("colon pair", f"{int(a) + 1}:{b}"), ("colon pair", f"{a}:{int(b) + 1:0{len(b)}d}")]
    if re.fullmatch(r"\d+[.,]\d+", token):
        sep = "," if "," in token else "."
        a, b = token.split(sep)
        return [("decimal", f"{a}{sep}{int(b) + 1:0{len(b)}d}"), ("decimal", f"{int(a) + 1}{sep}{b}")]
    return []


def _news_pairs(root: Path):
    for year, direction in NEWS:
        s, t = direction.split("-")
        folder = root / year / direction
        src = (folder / f"newstest{year}.{s}").read_text(encoding="utf-8").splitlines()
        tgt = (folder / f"newstest{year}.{t}").read_text(encoding="utf-8").splitlines()
        yield f"newstest{year} {direction}", src, tgt, (s, t)


@click.command("numbers-filter")
def command() -> None:
    """The numbers pair filter against its digits alone: true pairs dropped, near-misses caught."""
    from xmine.artefacts.directory import provenance
    from xmine.benchmarks.common import FLORES_DEVTEST, results_dir
    from xmine.mining.filters import PairFilterConfig, numbers, numbers_of
    from xmine.paths import resolve_data_dir

    how = "See ../shared/data/README.md."
    flores = resolve_data_dir(None, needs=str(FLORES_DEVTEST), how_to_get=how)
    newstest = resolve_data_dir(None, needs="parallel/wmt-newstest", how_to_get=how)
    t0 = time.perf_counter()
    config = PairFilterConfig()
    english = (flores / "eng_Latn.devtest").read_text(encoding="utf-8").splitlines()
    sets = [(f"FLORES-200 {f.stem}", f.read_text(encoding="utf-8").splitlines(), english,
             (f.stem.split("_")[0], "eng")) for f in sorted(flores.glob("*.devtest")) if f.stem != "eng_Latn"]
    sets += list(_news_pairs(newstest))
    dropped = collections.Counter()
    near = collections.defaultdict(collections.Counter)
    for name, src, tgt, langs in sets:
        family = name.split(" ")[0]
        near_set = not name.startswith("FLORES") or name.split(" ")[1] in NEAR_FLORES
        for a, b in zip(src, tgt):
            by_digits, by_rule = digits_drop(a, b, langs), numbers(a, b, 1.0, langs, config)
            dropped[family, "pairs"] += 1
            dropped[family, "digits"] += by_digits
            dropped[family, "rule"] += by_rule
            if not near_set or by_digits or not numbers_of(a) or not numbers_of(b):
                continue
            for m in _TOKEN.finditer(b):
                for kind, changed in near_misses(m.group()):
                    wrong = b[:m.start()] + changed + b[m.end():]
                    near[kind]["pairs"] += 1
                    near[kind]["digits"] += digits_drop(a, wrong, langs)
                    near[kind]["rule"] += numbers(a, wrong, 1.0, langs, config)
    families = ["FLORES-200"] + [f"newstest{y}" for y in dict.fromkeys(y for y, _ in NEWS)]
    rows = [[f"true pairs, {family}", dropped[family, "pairs"], dropped[family, "digits"], dropped[family, "rule"]]
            for family in families]
    total = collections.Counter()
    for kind, c in near.items():
        rows.append([f"near-misses, {kind}", c["pairs"], c["pairs"] - c["digits"], c["pairs"] - c["rule"]])
        total.update(c)
    rows.append(["near-misses, all", total["pairs"], total["pairs"] - total["digits"], total["pairs"] - total["rule"]])
    result = {
        "task": "numbers_filter", "machine": machine(), "seconds": round(time.perf_counter() - t0, 1),
        "table": {"columns": ["pairs", "count", "dropped or kept wrongly: digits alone", "rule"], "rows": rows},
        "data": [{"folder": str(flores), "languages": len(sets) - len(NEWS)},
                 {"newstest": [f"{y} {d}" for y, d in NEWS]}],
        "details": {"near_misses_from": list(NEAR_FLORES) + [f"newstest{y} {d}" for y, d in NEWS],
                    "true_rows": "true pairs dropped (fewer is better)",
                    "near_rows": "near-miss wrong pairs kept (fewer is better)"},
        "provenance": provenance(task="numbers_filter"),
    }
    out = results_dir() / "numbers_filter.json"
    write_result_json(out, result)
    for row in rows:
        print("\t".join(str(v) for v in row))
