"""Per-language confidence thresholds of the language filter, chosen on FLORES-200 and reported on held-out lines.

`--lang-filter` and the `language` pair filter drop a sentence that the default backend
(`mining.langid`, fastText lid.176) identifies as another language than its side's with at least
a confidence threshold. One threshold for every language drops too many of a language's own
sentences where the detector is weak on it, and catches fewer other-language lines than it could
where the detector is strong. This measures, for every FLORES-200 language the backend knows (L):
- own sentences dropped: L's own sentences identified as a language `langid.accepts` does not
  merge with L, with confidence >= t (a filter on an L side would lose them);
- other sentences caught: the sentences of every other FLORES variety (those merged with L
  excluded) that a filter on an L side drops at t; and the same for English alone (the usual
  intruder of a web-crawled side).

The choice is made on lines 0-505 of every devtest file: t_L = the smallest threshold of `GRID`
at or above `floor` at which at most `target` of L's own sentences are dropped (none of the grid:
`NEVER`, the filter never drops on an L side). It is reported on lines 506-1011 against the
one global threshold, and on MASSIVE test utterances (short commands, another family), for the
MASSIVE locales whose language has a table entry. `--write-table` writes the table
`mining/lid_thresholds.json` that `mining.langid` reads.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np

#: Thresholds tried, low to high; fastText's confidences crowd near 1, hence the fine top.
GRID = tuple(round(x, 2) for x in np.arange(0.50, 0.99, 0.01)) + (0.99, 0.995, 0.999, 1.0)
#: A table value above any confidence: the filter never drops a sentence on that language's side.
NEVER = 1.01
HALF = 506  # FLORES devtest lines 0-505 choose, 506-1011 report


def flores_corpus(data: Path, rows: int | None = None) -> tuple[list[str], list[str], list[int], list[Path]]:
    """The first `rows` lines (stripped) of every FLORES-200 devtest file: (texts, the language of
    each (`normalize_lang` of its file name), its line number, the files)."""
    from xmine.benchmarks.common import FLORES_DEVTEST, flores_lines
    from xmine.langs import normalize_lang

    texts, truth, row = [], [], []
    files = sorted((data / FLORES_DEVTEST).glob("*.devtest"))
    for f in files:
        lines = [s.strip() for s in flores_lines(f.parent, f.stem, rows=rows)]
        texts += lines
        truth += [normalize_lang(f.stem)] * len(lines)
        row += range(len(lines))
    return texts, truth, row, files


def _massive(data: Path) -> tuple[list[str], np.ndarray, list[str]]:
    from xmine.disentangle import massive
    from xmine.langs import normalize_lang

    folder = massive.locate(data / "massive")
    texts, truth = [], []
    locales = massive.available_locales(folder)
    for loc in locales:
        utts = list(massive.load_locale(folder, loc, partition="test").values())
        texts += utts
        truth += [normalize_lang(loc)] * len(utts)
    return texts, np.array(truth, dtype=object), locales


class Predictions:
    """The backend's answer for every sentence, and who would drop it."""

    def __init__(self, texts: list[str], truth: np.ndarray, backend: str):
        from xmine.mining.langid import identify

        codes, conf = identify(texts, backend)
        self.truth, self.codes, self.conf = truth.astype("U16"), np.array(codes, dtype="U16"), conf

    def wrong_for(self, lang: str) -> np.ndarray:
        """Sentences a filter on a `lang` side would judge another language (at any confidence)."""
        from xmine.mining.langid import ACCEPT_AS

        fits = {lang, *ACCEPT_AS.get(lang, ())}
        return (self.codes != "") & ~np.isin(self.codes, list(fits))

    def others_of(self, lang: str) -> np.ndarray:
        from xmine.mining.langid import ACCEPT_AS

        return ~np.isin(self.truth, [lang, *ACCEPT_AS.get(lang, ())])


def _rate(hit: np.ndarray, sel: np.ndarray) -> float | None:
    n = int(sel.sum())
    return float((hit & sel).sum() / n) if n else None


def choose(p: Predictions, langs, part: np.ndarray, *, target: float, floor: float) -> dict[str, float]:
    """t_L for every language of `langs`, on the sentences of `part`."""
    out = {}
    for lang in langs:
        own, wrong = (p.truth == lang) & part, p.wrong_for(lang)
        t = next((t for t in GRID if t >= floor - 1e-9 and _rate(wrong & (p.conf >= t), own) <= target), NEVER)
        out[lang] = t
    return out


def measure(p: Predictions, langs, part: np.ndarray, thresholds: dict[str, float]) -> dict[str, dict]:
    """Per language: own sentences dropped and others caught (all others, English) at its threshold."""
    out = {}
    for lang in langs:
        t = thresholds[lang]
        dropped = p.wrong_for(lang) & (p.conf >= t)
        out[lang] = {"threshold": t, "own_dropped": _rate(dropped, (p.truth == lang) & part),
                     "others_caught": _rate(dropped, p.others_of(lang) & part),
                     "english_caught": _rate(dropped, (p.truth == "eng") & part) if lang != "eng" else None}
    return out


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def summarise(per: dict[str, dict]) -> dict:
    own = {k: v["own_dropped"] for k, v in per.items() if v["own_dropped"] is not None}
    worst = sorted(own, key=own.get, reverse=True)[:8]
    return {"languages": len(per), "mean_own_dropped": _mean(own.values()),
            "languages_over_1pct_own_dropped": sum(x > 0.01 for x in own.values()),
            "mean_others_caught": _mean(v["others_caught"] for v in per.values()),
            "mean_english_caught": _mean(v["english_caught"] for v in per.values()),
            "worst_own_dropped": {k: own[k] for k in worst}}


def run(data: Path, *, backend: str = "fasttext", target: float = 0.01, floor: float = 0.8,
        global_threshold: float = 0.8, massive: bool = True) -> dict:
    from xmine.mining.langid import backend_model, supported_languages

    texts, truth, row, files = flores_corpus(data)
    truth, row = np.array(truth, dtype=object), np.array(row)
    p = Predictions(texts, truth, backend)
    langs = sorted(supported_languages(backend) & set(truth.tolist()))
    choose_part, report_part = row < HALF, row >= HALF
    rules = {"global": {lang: global_threshold for lang in langs},
             "per_language": choose(p, langs, choose_part, target=target, floor=floor),
             "per_language_no_floor": choose(p, langs, choose_part, target=target, floor=GRID[0])}
    result = {"backend": backend, "model": backend_model(backend), "files": len(files), "languages": langs, "target": target, "floor": floor,
              "global": global_threshold, "grid": list(GRID), "never": NEVER,
              "thresholds": rules["per_language"], "thresholds_no_floor": rules["per_language_no_floor"],
              "choose": {name: measure(p, langs, choose_part, t) for name, t in rules.items()},
              "flores_heldout": {name: measure(p, langs, report_part, t) for name, t in rules.items()}}
    result["flores_heldout_summary"] = {name: summarise(v) for name, v in result["flores_heldout"].items()}
    if massive:
        m_texts, m_truth, locales = _massive(data)
        mp = Predictions(m_texts, m_truth, backend)
        m_langs = sorted(set(m_truth.tolist()) & set(langs))
        every = np.ones(len(m_texts), dtype=bool)
        result["massive"] = {name: measure(mp, m_langs, every, t) for name, t in rules.items()}
        result["massive_summary"] = {name: summarise(v) for name, v in result["massive"].items()}
        result["massive_locales"] = locales
    return result


def table(result: dict, *, made_by: str, provenance: dict) -> dict:
    """The table `mining.langid` reads (mining/lid_thresholds.json)."""
    from xmine.mining.langid import THRESHOLDS_KIND, backend_model

    return {"kind": THRESHOLDS_KIND, "format_version": 1, "backend": result["backend"],
            "model": backend_model(result["backend"]), "default": result["global"],
            "recipe": {"data": f"FLORES-200 devtest, lines 0-{HALF - 1} of each of {result['files']} files",
                       "rule": (f"the smallest threshold of the grid at or above {result['floor']} at which at most "
                                f"{100 * result['target']:g}% of the language's own sentences are identified as "
                                f"a language it does not accept; {NEVER} where none is (never drop)"),
                       "grid": "0.50 to 0.98 in steps of 0.01, then 0.99, 0.995, 0.999, 1.0",
                       "target_own_dropped": result["target"], "floor": result["floor"],
                       "made_by": made_by, "reported": "benchmarks/results/lid_thresholds.json"},
            "provenance": provenance,
            "thresholds": result["thresholds"]}


def _pct(x):
    return float("nan") if x is None else 100 * x


@click.command("lid-thresholds")
@click.option("--data-dir", default=None, help="The data root (default: $XMINE_DATA, else ../shared/data).")
@click.option("--target", type=float, default=0.01, show_default=True,
              help="Most own sentences dropped on the choosing half.")
@click.option("--floor", type=float, default=0.8, show_default=True, help="No threshold below this.")
@click.option("--global-threshold", type=float, default=0.8, show_default=True,
              help="The one threshold the table is compared with.")
@click.option("--no-massive", is_flag=True, help="Skip the MASSIVE report.")
@click.option("--write-table", is_flag=True, help="Write mining/lid_thresholds.json into the package.")
@click.option("--out", default=None, help="Result JSON (default benchmarks/results/lid_thresholds.json).")
def command(data_dir, target, floor, global_threshold, no_massive, write_table, out) -> None:
    """Per-language thresholds of the language filter: chosen on FLORES-200 lines 0-505, reported on 506-1011 and MASSIVE."""
    import sys

    from measure import write_result_json
    from xmine.artefacts.directory import provenance
    from xmine.benchmarks.common import machine, results_dir
    from xmine.benchmarks.mining import locate
    from xmine.artefacts.fileio import atomic_write_json
    from xmine.mining.langid import THRESHOLDS_PATH

    started = time.time()
    prov = provenance(task="lid_thresholds", target=target, floor=floor, global_threshold=global_threshold)
    r = run(locate(data_dir), target=target, floor=floor, global_threshold=global_threshold,
            massive=not no_massive)
    cols = ["data", "thresholds", "languages", "own dropped % (mean)", "languages > 1% own dropped",
            "others caught % (mean)", "English caught % (mean)"]
    rows = [[data_name, name, s["languages"], _pct(s["mean_own_dropped"]), s["languages_over_1pct_own_dropped"],
             _pct(s["mean_others_caught"]), _pct(s["mean_english_caught"])]
            for data_name, key in (("FLORES lines 506-1011", "flores_heldout_summary"),
                                   ("MASSIVE test", "massive_summary"))
            for name, s in r.get(key, {}).items()]
    g, t = r["flores_heldout"]["global"], r["flores_heldout"]["per_language"]
    per_rows = [[lang, t[lang]["threshold"], _pct(g[lang]["own_dropped"]), _pct(t[lang]["own_dropped"]),
                 _pct(g[lang]["others_caught"]), _pct(t[lang]["others_caught"])]
                for lang in r["languages"] if t[lang]["threshold"] != r["global"]]
    extra = [{"title": "FLORES lines 506-1011, languages whose threshold is not the global one: own dropped % and "
                       "others caught %, global / per-language",
              "columns": ["lang", "t_L", "own global", "own table", "caught global", "caught table"],
              "rows": per_rows}]
    out = Path(out) if out else results_dir() / "lid_thresholds.json"
    write_result_json(out, {"format_version": 1, "task": "lid_thresholds",
                            "machine": machine(), "seconds": round(time.time() - started, 2),
                            "provenance": prov | {"parameters": prov["parameters"] | {"backend": r["backend"],
                                                                                      "model": r["model"]}},
                            "table": {"columns": cols, "rows": rows}, "extra_tables": extra, "details": r})
    print(f"wrote {out}")
    if write_table:
        atomic_write_json(THRESHOLDS_PATH, table(r, provenance=prov, made_by="benchmarks/lab/run.py lid-thresholds "
                                   + " ".join(sys.argv[2:])))
        print(f"wrote {THRESHOLDS_PATH}")
    for row in rows:
        print(row)

