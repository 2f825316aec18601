"""Raw embeddings against a projection's meaning part on every task, per language: where it is worse.

The check `ship-projection --evaluate` runs before a projection may become the default (the
gate: at least raw on every benchmark in every language).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

#: Tatoeba languages that no recipe trains on (a language it has never seen is measured too)
UNSEEN_TATOEBA = ("ces", "pol", "lit", "ukr", "swe", "dan", "slk", "hrv", "ast", "kab", "oci", "cym")
COLUMNS = ["variant", "QE r x100", "Tatoeba XTREME cos", "Tatoeba XTREME margin", "Tatoeba unseen cos",
           "Tatoeba unseen margin", "FLORES unseen cos", "FLORES unseen margin"]


def evaluate(projection_dir: Path | None, data: Path, *, encoder_name: str, out: Path, tatoeba_pairs: int | None = 200,
             qe_rows: int | None = 500, flores_rows: int | None = 500, tatoeba_langs: Sequence[str] | None = None,
             transfer_langs: Sequence[str] | None = None) -> dict[str, Any]:
    """Raw against the projection's meaning part on every task, per language; lists where it is worse.

    Tasks: WMT20 QE test20 (six pairs, first `qe_rows` rows each), Tatoeba XTREME-36 and 12
    languages no recipe saw (first `tatoeba_pairs` pairs each, cosine and margin), FLORES-200
    devtest retrieval in six unseen languages (quality.TRANSFER_LANGS; first `flores_rows` rows).
    None = all rows. Without a projection, only raw (fills the cache). `encoder_name`: the
    encoder the projection was trained on.
    Writes a benchmark result JSON (task "default_projection") to `out`.
    """
    import time

    import numpy as np

    from xmine.benchmarks.common import RawEmbedder, Variant, format_table, projected, write_result
    from xmine.benchmarks.qe import evaluate_qe
    from quality import TRANSFER_LANGS, evaluate_transfer
    from xmine.benchmarks.tatoeba import XTREME36, evaluate_tatoeba
    from xmine.encoders import load_encoder

    started = time.time()
    encoder = load_encoder(encoder_name)
    raw = RawEmbedder(encoder)
    variants = [Variant("raw", "raw", raw)]
    if projection_dir is not None:
        from xmine.disentangle import load_projection

        proj = load_projection(projection_dir)
        proj.check_encoder(encoder.fingerprint())
        variants.append(Variant("default", "meaning", projected(raw, proj, "meaning"), proj.fingerprint()))
    langs = list(tatoeba_langs or list(XTREME36) + list(UNSEEN_TATOEBA))
    unseen_langs = [lg for lg in langs if lg in UNSEEN_TATOEBA]
    transfer_langs = list(transfer_langs or TRANSFER_LANGS)
    results, rows, files = {}, [], set()
    for v in variants:
        tat = evaluate_tatoeba(v.embed, data / "tatoeba" / "v1", langs, max_pairs=tatoeba_pairs, margin=True)
        qe = evaluate_qe(v.embed, data / "mlqe", max_rows=qe_rows)
        tr = evaluate_transfer(v.embed, data, transfer_langs, rows=flores_rows)
        files.update(map(str, tat["files"]))
        files.update(map(str, qe.get("files", [])))
        unseen = [tat["per_lang"][lg] for lg in unseen_langs]
        results[v.name] = {"tatoeba": tat, "qe": qe, "transfer": tr}
        rows.append([v.name, qe["average"]["pearson"], tat["xtreme36"]["avg"], tat["xtreme36"]["avg_margin"],
                     float(np.mean([r["avg"] for r in unseen])), float(np.mean([r["avg_margin"] for r in unseen])),
                     tr["average"]["cos"], tr["average"]["margin"]])
    worse = []
    if len(variants) == 2:
        r, d = results["raw"], results["default"]
        for task, key, per, metrics in (("tatoeba", "tatoeba", "per_lang", ("avg", "avg_margin")),
                                        ("qe", "qe", "per_pair", ("pearson",)),
                                        ("flores", "transfer", "per_lang", ("cos", "margin"))):
            for lg, raw_row in r[key][per].items():
                for m in metrics:
                    if d[key][per][lg][m] < raw_row[m]:
                        worse.append({"task": task, "lang": lg, "metric": m, "raw": raw_row[m],
                                      "default": d[key][per][lg][m]})
    print(format_table(COLUMNS, rows))
    for w in worse:
        print(f"default below raw: {w['task']} {w['lang']} {w['metric']}: {w['default']:.2f} < {w['raw']:.2f}")
    write_result(out, task="default_projection", encoder=encoder, variants=variants, data_files=sorted(files),
                 parameters={"tatoeba_pairs": tatoeba_pairs, "qe_rows": qe_rows, "flores_rows": flores_rows,
                            "tatoeba_langs": langs,
                             "transfer_langs": transfer_langs, "projection": str(projection_dir)},
                 columns=COLUMNS, rows=rows, details={"results": results, "worse_than_raw": worse},
                 seconds=time.time() - started)
    print(f"wrote {out}")
    return {"rows": rows, "worse": worse}
