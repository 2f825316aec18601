"""Sentence-level language identification on FLORES-200 devtest, library backends and a projection.

The first `rows` lines of every FLORES-200 devtest file (204 language/script varieties) are
labelled by `mining.langid.identify` with each library backend (only the files of languages it
knows), and the first `projection_rows` lines of each of its training languages by the shipped
projection's language part. Reported:
- per backend: languages it knows among FLORES', accuracy averaged over those languages
  (macro) and over sentences, exact and with `mining.langid.accepts` (close languages merged, as
  the filters use it), and sentences per second on this machine;
- the same on the languages all libraries know, and on the projection's languages and rows, so
  each is compared on equal ground;
- confusions within close pairs (hr/sr/bs, ms/id, hi/mr, ...): of the sentences of one language,
  the share labelled as the other.
A FLORES file's language is `normalize_lang` of its name: srp_Cyrl and a Latin-script Serbian
are one language, zho_Hans and zho_Hant both `cmn`.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

CLOSE_GROUPS = (("hrv", "srp", "bos"), ("zsm", "ind"), ("hin", "mar", "nep"), ("ces", "slk"),
                ("nob", "dan", "swe"), ("spa", "glg", "por"), ("rus", "ukr", "bel"))


def _summary(truth: list[str], pred: list[str], langs: set[str]) -> dict:
    from xmine.mining.langid import accepts

    per, per_acc = {}, {}
    for lang in sorted(langs):
        idx = [i for i, t in enumerate(truth) if t == lang]
        if idx:
            per[lang] = float(np.mean([pred[i] == lang for i in idx]))
            per_acc[lang] = float(np.mean([accepts(lang, pred[i]) for i in idx]))
    sel = [i for i, t in enumerate(truth) if t in langs]
    return {"languages": len(per), "sentences": len(sel),
            "macro_accuracy": float(np.mean(list(per.values()))) if per else None,
            "macro_accuracy_merged": float(np.mean(list(per_acc.values()))) if per else None,
            "sentence_accuracy": float(np.mean([pred[i] == truth[i] for i in sel])) if sel else None,
            "per_language": per}


def _confusions(truth: list[str], pred: list[str]) -> dict:
    out = {}
    for group in CLOSE_GROUPS:
        for a in group:
            idx = [i for i, t in enumerate(truth) if t == a]
            if not idx:
                continue
            out[a] = {b: float(np.mean([pred[i] == b for i in idx])) for b in group if b != a}
    return out


def run(data: Path, *, rows: int = 300, projection_rows: int = 300, backends=("fasttext", "langid", "lingua"),
        projection_dir: Path | None = None) -> dict:
    from lid_thresholds import flores_corpus
    from xmine.mining.langid import identify, supported_languages

    texts, truth, row_of, files = flores_corpus(data, rows)
    flores_langs = set(truth)
    result = {"files": len(files), "rows_per_file": rows, "backends": {}}
    preds, known_by = {}, {}
    for b in backends:
        known = supported_languages(b) & flores_langs
        idx = [i for i, t in enumerate(truth) if t in known]  # others cannot be right: not run
        t0 = time.time()
        got, _ = identify([texts[i] for i in idx], b)
        sec = time.time() - t0
        codes = [""] * len(texts)
        for i, c in zip(idx, got):
            codes[i] = c
        preds[b] = codes
        known_by[b] = known
        result["backends"][b] = {"supported_in_flores": len(known), "sentences_per_second": len(idx) / sec,
                                 **_summary(truth, codes, known), "confusions": _confusions(truth, codes)}
    if projection_dir is not None:
        result["projection"] = _projection(projection_dir, files, texts, truth, row_of, preds, known_by,
                                           projection_rows)
    common = set.intersection(*(set(k) for k in known_by.values())) if known_by else set()
    result["common"] = {"languages": sorted(common),
                        **{b: _summary(truth, p, common) for b, p in preds.items()}}
    return result


def _projection(projection_dir, files, texts, truth, row_of, preds, known, projection_rows) -> dict:
    from xmine.io.corpus import truncate_for_encoding
    from xmine.disentangle.projection import load_projection
    from xmine.encoders.embed_cache import cached_encode
    from xmine.encoders import load_encoder

    proj = load_projection(projection_dir)
    langs = set(proj.languages)
    sel = [i for i, (t, r) in enumerate(zip(truth, row_of)) if t in langs and r < projection_rows]
    enc = load_encoder(proj.config["encoder"]["name"])
    proj.check_encoder(enc.fingerprint())
    sub_texts, sub_truth = [texts[i] for i in sel], [truth[i] for i in sel]
    emb = cached_encode(enc, truncate_for_encoding(sub_texts), show_progress=True, desc="flores (projection langid)")
    t0 = time.time()
    codes, _ = proj.langid(emb)
    sec = time.time() - t0
    out = {"path": str(projection_dir), "languages": sorted(langs), "rows_per_file": projection_rows,
           "projection": _summary(sub_truth, codes, langs) | {"confusions": _confusions(sub_truth, codes),
                                                              "sentences_per_second_after_encoding": len(sel) / sec}}
    for b, p in preds.items():  # on the projection's languages the backend knows
        out[b] = _summary(sub_truth, [p[i] for i in sel], langs & known[b])
    return out


@click.command("langid-flores")
@click.option("--data-dir", default=None, help="Data folder (default: $XMINE_DATA or ../shared/data).")
@click.option("--rows", type=int, default=300, show_default=True, help="First N lines of every FLORES file.")
@click.option("--projection-rows", type=int, default=300, show_default=True,
              help="First N lines per language for the shipped projection's language part.")
@click.option("--backends", default="fasttext,langid,lingua", show_default=True)
@click.option("--no-projection", is_flag=True, help="Leave the shipped projection out.")
@click.option("--out", default=None, help="Result JSON (default: benchmarks/results/langid.json).")
def command(**kw) -> None:
    """Sentence-level language identification on FLORES-200: library backends and a projection."""
    from measure import write_result_json
    from xmine.benchmarks.common import machine, results_dir
    from xmine.benchmarks.mining import locate
    from xmine.encoders.projection import SHIPPED_ROOT

    a = SimpleNamespace(**kw)
    started = time.time()
    data = locate(a.data_dir)
    proj = None if a.no_projection else SHIPPED_ROOT / "me5-small"
    r = run(data, rows=a.rows, projection_rows=a.projection_rows, backends=tuple(a.backends.split(",")),
            projection_dir=proj)
    cols = ["backend", "FLORES langs known", "macro acc", "macro acc (close merged)", "sentence acc", "sent/s"]

    def row(name: str, v: dict, known: int) -> list:
        return [name, known, 100 * v["macro_accuracy"], 100 * v["macro_accuracy_merged"], 100 * v["sentence_accuracy"]]

    rows = [row(b, v, v["supported_in_flores"]) + [round(v["sentences_per_second"])] for b, v in r["backends"].items()]
    c = r["common"]
    extra = [{"title": f"On the {len(c['languages'])} FLORES languages all three libraries know, first "
                       f"{a.rows} lines of each", "columns": cols[:5],
              "rows": [row(b, c[b], c[b]["languages"]) for b in r["backends"]]}]
    if "projection" in r:
        p = r["projection"]
        extra.append({"title": f"On the shipped projection's {len(p['languages'])} languages, first "
                               f"{p['rows_per_file']} lines of each", "columns": cols[:5],
                      "rows": [row(n, p[n], p[n]["languages"]) for n in ["projection", *r["backends"]]]})
    labelled = list(r["backends"].items())
    labelled += [("projection", r["projection"]["projection"])] if "projection" in r else []
    conf_rows = [[name, a_, b_, 100 * share] for name, v in labelled for a_, others in v["confusions"].items()
                 for b_, share in others.items() if share >= 0.01]
    extra.append({"title": "Confusions within close languages (% of lang's sentences labelled as other, >= 1%)",
                  "columns": ["backend", "lang", "labelled as", "%"], "rows": conf_rows})
    out = Path(a.out) if a.out else results_dir() / "langid.json"
    from xmine.artefacts.directory import provenance

    params = {"rows": a.rows, "projection_rows": a.projection_rows}
    write_result_json(out, {"format_version": 1, "task": "langid", "machine": machine(),
                            "seconds": round(time.time() - started, 2), "parameters": params,
                            "provenance": provenance(task="langid", **params),
                            "table": {"columns": cols, "rows": rows}, "extra_tables": extra, "details": r})
    print(f"wrote {out}")
    for row in rows:
        print(row)
    for t in extra:
        print(t["title"])
        for row in t["rows"]:
            print(row)

