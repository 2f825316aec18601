"""Rebuild the default projection shipped inside xmine, with one seeded command.

    python -m xmine.benchmarks.ship_projection [--data-dir DIR] [--work-dir out/ship] [--install]
        [--results benchmarks/results/mining-me5-small.json ...]

1. Trains the recipe below (`benchmarks/quality.py`'s `mixed` recipe, method `inter`) from
   `parallel/` of the data folder with the embedded default encoder at its default settings,
   seeded: the same data and settings give the same weights (training runs on one thread).
2. With `--install`, copies the projection (config.json, model.safetensors, manifest.json) into
   `xmine/projections/<encoder>/` and writes `SHIPPED.json` beside it: this command, the recipe's
   settings, the sha256 of every training file, the encoder fingerprint, the git commit, and the
   benchmark numbers of the result JSONs named with `--results` (raw and default rows).

The recipe (why each choice: benchmarks/results/notes/quality.md): the union of `qe6` (de, zh, et,
ro with English from WMT newstest 2008-2018, FLORES v1 ne/si Wikipedia, Tatoeba-challenge; QE test
sentences removed; at most 150 pairs per language) and `xtreme36` (Tatoeba-challenge, at most
40 pairs per XTREME-36 language), 2,234 pairs in 40 languages. That is a thirtieth of the quality
table's 4,700 / 1,000: the day it was trained, the shared 2-core machine encoded 1-15 sentences a
second per process (a load of 20-26 from six jobs at once). Retrain with more data (the
`--qe6-pairs` / `--xtreme36-pairs` of RECIPE) when the machine is free. `inter` (the intra/inter-
constraints paper's inter-component terms on a SEED-style residual) was the one method above raw
on every task and never below raw on unseen languages. Newstest 2019-2021 and FLORES-200 stay
unseen: `xmine bench mining` and the transfer task measure on them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

from xmine.paths import REPO_ROOT, default_data_dir

ENCODER = "me5-small"
#: the recipe: quality.py options (everything else is quality.py's default, incl. seed 0)
RECIPE = ["--recipes", "mixed", "--mixed-methods", "inter", "--qe6-pairs", "150", "--xtreme36-pairs", "40",
          "--lr", "1e-3", "--max-epochs", "80", "--seed", "0"]
COMMAND = "python -m xmine.benchmarks.ship_projection --install"


def trained_dir(work: Path) -> Path:
    """Where quality.py puts the recipe's projection (its folder naming)."""
    return work / "q150-x40-lr0.001-max_epochs80" / "mixed" / "inter"


def train(data: Path, work: Path) -> Path:
    from xmine.benchmarks import quality

    quality.main(RECIPE + ["--encoder", ENCODER, "--data-dir", str(data), "--out-dir", str(work), "--train-only"])
    return trained_dir(work)


def _numbers(paths: Sequence[Path]) -> dict[str, Any]:
    """The raw and default rows of benchmark result JSONs (table columns and per-language details)."""
    out = {}
    for p in paths:
        res = json.loads(Path(p).read_text(encoding="utf-8"))
        cols = res["table"]["columns"]
        rows = {r[0]: dict(zip(cols[1:], r[1:])) for r in res["table"]["rows"]
                if r[0] == "raw" or str(r[0]).startswith("default")}
        out[res["task"]] = {"file": Path(p).name, "rows": rows,
                            "commit": res.get("provenance", {}).get("git_commit")}
    return out


def source_files(data: Path) -> list[dict[str, Any]]:
    """sha256 of every data-folder file the recipe draws from (relative paths)."""
    from xmine.artefacts import sha256_file
    from xmine.benchmarks.quality import QE6_SOURCES, _heldout
    from xmine.benchmarks.tatoeba import XTREME36
    from xmine.langs import normalize_lang

    parallel = data / "parallel"
    found: set[Path] = set()
    for patterns in QE6_SOURCES.values():
        for pat in patterns:
            for p in parallel.glob(pat):
                if not _heldout(p.relative_to(parallel)):
                    found.update(f for f in ([p] if p.is_file() else p.iterdir()) if f.is_file())
    xtreme = {normalize_lang(l) for l in XTREME36}
    for d in (parallel / "tatoeba-challenge").iterdir():
        langs = {normalize_lang(c.split("_")[0]) for c in d.name.split("-")}
        if d.is_dir() and langs - {"eng"} and langs - {"eng"} <= xtreme:
            found.update(f for f in d.iterdir() if f.is_file())
    return [{"path": str(f.relative_to(data)), "sha256": sha256_file(f)} for f in sorted(found)]


def install(trained: Path, *, data: Path, results: Sequence[Path] = ()) -> Path:
    """Copy `trained` into the package and write SHIPPED.json; returns the installed folder."""
    from xmine.artefacts import atomic_write_json, git_commit, sha256_file
    from xmine.projection import SHIPPED_INFO, SHIPPED_ROOT
    from xmine.disentangle import load_projection

    proj = load_projection(trained)  # verifies the weights against config.json
    dest = SHIPPED_ROOT / ENCODER
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("model.safetensors", "config.json", "manifest.json"):
        shutil.copyfile(trained / name, dest / f".{name}.tmp")
    for name in ("model.safetensors", "config.json", "manifest.json"):  # the manifest last
        (dest / f".{name}.tmp").replace(dest / name)
    td = proj.config.get("training_data") or {}
    info = {
        "name": f"xmine default projection for {ENCODER}",
        "command": COMMAND,
        "recipe": ["python -m xmine.benchmarks.quality"] + RECIPE + ["--train-only"],
        "method": proj.method,
        "encoder": proj.config["encoder"],
        "weights_sha256": proj.config["weights_sha256"],
        "best_epoch": proj.config.get("best_epoch"),
        # the files the trainer read (the recipe's seeded sample, written under --work-dir) ...
        "training_files": [{"path": str(Path(f[side]).resolve().relative_to(trained.resolve().parents[2])),
                            "sha256": f.get(f"{side}_sha256")}
                           for f in td.get("files", []) for side in ("src", "tgt")],
        "training_counts": td.get("counts"),
        # ... and the data-folder files they were drawn from
        "source_files": source_files(data),
        "commit": git_commit(),
        "benchmarks": _numbers(results),
    }
    atomic_write_json(dest / SHIPPED_INFO, info)
    print(f"installed {trained} -> {dest} (weights {sha256_file(dest / 'model.safetensors')[:16]})")
    return dest


#: Tatoeba languages that no recipe trains on (the issue: "a language it has never seen is measured too")
UNSEEN_TATOEBA = ("ces", "pol", "lit", "ukr", "swe", "dan", "slk", "hrv", "ast", "kab", "oci", "cym")
COLUMNS = ["variant", "QE r x100", "Tatoeba XTREME cos", "Tatoeba XTREME margin", "Tatoeba unseen cos",
           "Tatoeba unseen margin", "FLORES unseen cos", "FLORES unseen margin"]


def evaluate(projection_dir: Path | None, data: Path, *, out: Path, tatoeba_pairs: int | None = 200,
             qe_rows: int | None = 500, flores_rows: int | None = 500, tatoeba_langs: Sequence[str] | None = None,
             transfer_langs: Sequence[str] | None = None) -> dict[str, Any]:
    """Raw against the projection's meaning part on every task, per language; lists where it is worse.

    Tasks: WMT20 QE test20 (six pairs, first `qe_rows` rows each), Tatoeba XTREME-36 and 12
    languages no recipe saw (first `tatoeba_pairs` pairs each, cosine and margin), FLORES-200
    devtest retrieval in six unseen languages (quality.TRANSFER_LANGS; first `flores_rows` rows).
    None = all rows. Without a projection, only raw (fills the cache).
    Writes a benchmark result JSON (task "default_projection") to `out`.
    """
    import time

    import numpy as np

    from xmine.benchmarks.common import RawEmbedder, Variant, format_table, projected, write_result
    from xmine.benchmarks.qe import evaluate_qe
    from xmine.benchmarks.quality import TRANSFER_LANGS, evaluate_transfer
    from xmine.benchmarks.tatoeba import XTREME36, evaluate_tatoeba
    from xmine.encoders import load_encoder

    started = time.time()
    encoder = load_encoder(ENCODER)
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
        for lg in langs:
            for m in ("avg", "avg_margin"):
                a, b = r["tatoeba"]["per_lang"][lg][m], d["tatoeba"]["per_lang"][lg][m]
                if b < a:
                    worse.append({"task": "tatoeba", "lang": lg, "metric": m, "raw": a, "default": b})
        for pair, a in r["qe"]["per_pair"].items():
            if d["qe"]["per_pair"][pair]["pearson"] < a["pearson"]:
                worse.append({"task": "qe", "lang": pair, "metric": "pearson", "raw": a["pearson"],
                              "default": d["qe"]["per_pair"][pair]["pearson"]})
        for lg in transfer_langs:
            for m in ("cos", "margin"):
                a, b = r["transfer"]["per_lang"][lg][m], d["transfer"]["per_lang"][lg][m]
                if b < a:
                    worse.append({"task": "flores", "lang": lg, "metric": m, "raw": a, "default": b})
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


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m xmine.benchmarks.ship_projection", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=None, help="data folder (default: $XMINE_DATA or ../shared/data)")
    ap.add_argument("--work-dir", default=str(REPO_ROOT / "out" / "ship"),
                    help="where training files and the trained projection are kept (default: out/ship)")
    ap.add_argument("--install", action="store_true",
                    help="copy the trained projection into xmine/projections/ with SHIPPED.json")
    ap.add_argument("--results", nargs="*", default=[],
                    help="benchmark result JSONs whose raw and default rows go into SHIPPED.json")
    ap.add_argument("--evaluate", metavar="JSON", default=None,
                    help="also compare raw with the trained projection on QE, Tatoeba (XTREME-36 and 12 unseen "
                         "languages) and FLORES unseen languages, per language, into this result JSON")
    ap.add_argument("--tatoeba-pairs", type=int, default=200, help="first N Tatoeba pairs per language (--evaluate)")
    ap.add_argument("--qe-rows", type=int, default=500, help="first N QE test20 rows per pair (--evaluate)")
    ap.add_argument("--flores-rows", type=int, default=500, help="first N FLORES-200 devtest rows (--evaluate)")
    ap.add_argument("--tatoeba-langs", default=None, help="comma-separated Tatoeba codes (default: XTREME-36 + 12 unseen)")
    ap.add_argument("--transfer-langs", default=None, help="comma-separated FLORES-200 codes (default: quality's six)")
    ap.add_argument("--raw-only", action="store_true", help="with --evaluate: only raw (fills the cache), no training")
    args = ap.parse_args(argv)
    data = Path(args.data_dir) if args.data_dir else default_data_dir()
    if data is None:
        sys.exit("no data folder: pass --data-dir or set XMINE_DATA")
    split = lambda v: [x for x in v.split(",") if x] if v else None  # noqa: E731
    eval_args = dict(tatoeba_pairs=args.tatoeba_pairs, qe_rows=args.qe_rows, flores_rows=args.flores_rows,
                     tatoeba_langs=split(args.tatoeba_langs), transfer_langs=split(args.transfer_langs))
    if args.raw_only:
        evaluate(None, data, out=Path(args.evaluate or "out/raw-check.json"), **eval_args)
        return
    trained = train(data, Path(args.work_dir))
    if args.evaluate:
        evaluate(trained, data, out=Path(args.evaluate), **eval_args)
    if args.install:
        install(trained, data=data, results=[Path(r) for r in args.results])
    else:
        print(f"trained: {trained} (add --install to ship it)")


if __name__ == "__main__":
    main()
