"""Disentangler quality: every method x every task, one table, one command.

What it does:

1. Trains each method on two training recipes drawn from `parallel/` of the data folder:
   - `qe6`: the six WMT20 QE languages (de, zh, et, ro, ne, si, each with English), mixed
     domains: WMT newstest/newsdev, FLORES v1 (Wikipedia) and Tatoeba-challenge, at most
     `--qe6-pairs` (4,700) pairs per language, ~28k in all. Sentences that occur in the QE test
     sets are removed first (the test sources are Wikipedia, and so is FLORES v1).
   - `xtreme36`: 1,000 Tatoeba-challenge pairs for each XTREME-36 language (that folder is
     already free of the Tatoeba test sentences), ~33.5k pairs.
   - `mixed` (optional): the union of the two samples above (WMT news + FLORES v1 Wikipedia +
     Tatoeba, short and long sentences, 40 languages), trained with RECIPE_SETTINGS["mixed"]; the
     candidate recipe for a shipped default projection. Encodes nothing the other two did not.
   Training settings are the papers' (TrainConfig: batch 512, Adam lr 1e-4, patience 5, at most
   200 epochs) unless a recipe (RECIPE_SETTINGS) or --lr/--max-epochs/--batch-size/--patience say
   otherwise; `--paper-defaults qe6/seed` adds the papers' settings as an extra row next to tuned
   ones. `--train-only` trains and stops (several can run in parallel on disjoint methods); a
   later full run with the same options reuses the finished projections.
2. Evaluates raw embeddings and each projection's meaning (and language) part on
   - WMT20 QE test20: Pearson r x 100 of cos(source, translation) with z_mean, six-pair mean;
   - Tatoeba XTREME-36: accuracy@1, mean of both directions, cosine and k=4 ratio margin;
     for the language part too (ORACLE's "semantic leakage": low is good);
   - transfer: FLORES-200 devtest retrieval (long Wikipedia sentences) between English and
     languages that neither recipe trains on, cosine and margin. A projection is worth shipping
     only where it is never worse than raw here.
3. Prints one table (rows: recipe/method/part, columns: tasks) and writes a JSON result with
   provenance, which `xmine bench report` turns into RESULTS.md.

All text is embedded through the shared per-sentence cache (`xmine.encoders.embed_cache`), so a second
run, or another method, encodes nothing again; trained projections are kept in `--out-dir` and
reused (training itself resumes from its checkpoint if interrupted).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import click
import numpy as np

from xmine.benchmarks.common import (FLORES_DEVTEST, RESULT_KIND, RawEmbedder, Variant, flores_lines, format_table,
                                     projected, retrieval_scores, write_result)
from xmine.benchmarks.tatoeba import XTREME36, evaluate_tatoeba
from xmine.encoders import PRECISIONS
from xmine.paths import REPO_ROOT, default_data_dir

METHODS = ("center", "dream", "meat", "oracle", "seed", "intra", "inter")

#: language pairs of the qe6 recipe: (QE pair, sources under parallel/ as glob patterns)
QE6_SOURCES: dict[str, list[str]] = {
    "de": ["wmt-newstest/*/de-en", "wmt-newstest/*/en-de", "tatoeba-challenge/deu-eng"],
    "zh": ["wmt-newstest/*/zh-en", "wmt-newstest/*/en-zh", "tatoeba-challenge/eng-cmn_Hans",
           "tatoeba-challenge/eng-zho"],
    "et": ["wmt-newstest/*/et-en", "wmt-newstest/*/en-et", "tatoeba-challenge/eng-est"],
    "ro": ["wmt-newstest/*/ro-en", "wmt-newstest/*/en-ro", "tatoeba-challenge/eng-ron"],
    "ne": ["flores-v1/flores_test_sets/wikipedia.*.ne-en.*"],
    "si": ["flores-v1/flores_test_sets/wikipedia.*.si-en.*"],
}

#: WMT newstest years no recipe trains on: `xmine bench mining` hides their pairs among distractors
#: (benchmarks/mining.py), so a projection is never measured on its own training sentences.
HELDOUT_NEWSTEST_YEARS = ("2019", "2020", "2021")

#: Training settings a recipe uses instead of the papers' defaults (TrainConfig); command-line
#: --lr/--max-epochs/--batch-size/--patience override these too. See RECIPE_NOTES for why.
RECIPE_SETTINGS: dict[str, dict[str, Any]] = {"qe6": {}, "xtreme36": {}, "mixed": {"lr": 1e-3}}
RECIPE_NOTES = {
    "mixed": "lr 1e-3: with a few thousand pairs per language an epoch is a handful of Adam steps; at the "
             "papers' 1e-4 SEED (qe6, 1000 pairs/lang) is still improving at epoch 200 (valid loss 0.98, QE 38.2, "
             "Tatoeba-36 84.3/87.8, language part retrieves 57%), at 1e-3 it early-stops at epoch 48 (valid 0.88, "
             "QE 38.8, Tatoeba 85.8/89.0, leakage 37%); measured 2026-11-22, quality-me5-small.json.",
}

#: FLORES-200 languages that no recipe trains on (transfer), with English as the pivot. Lower-
#: resource languages, because raw me5-small is already at 99.5% (cosine) on Czech, Polish,
#: Ukrainian and Swedish (measured 2026-11-22), which leaves nothing for a projection to gain or lose.
TRANSFER_LANGS = ("amh_Ethi", "hau_Latn", "khm_Khmr", "som_Latn", "gle_Latn", "kir_Cyrl")


# ----------------------------------------------------------------------------------- Training data


def _qe_test_sentences(data: Path) -> set[str]:
    from xmine.benchmarks.qe import PAIRS, load_qe, qe_file

    sets = [load_qe(qe_file(data / "mlqe", pair), pair) for pair in PAIRS]
    return {s for qe in sets for s in qe.sources + qe.translations}


def _write_filtered(src: Path, tgt: Path, exclude: set[str], dest: Path) -> tuple[Path, Path, int]:
    """Copy a line-aligned pair without lines whose either side is in `exclude` (derived data)."""
    from xmine.artefacts.fileio import atomic_write_text
    from xmine.io.corpus import read_parallel

    s, t = read_parallel(src, tgt)
    keep = [(a, b) for a, b in zip(s, t) if a not in exclude and b not in exclude]
    ds, dt = dest / src.name, dest / tgt.name
    if not (ds.is_file() and dt.is_file()):
        atomic_write_text(ds, "".join(a + "\n" for a, _ in keep))
        atomic_write_text(dt, "".join(b + "\n" for _, b in keep))
    return ds, dt, len(s) - len(keep)


def _heldout(rel: Path) -> bool:
    """True for a newstest folder of a held-out year (`wmt-newstest/2019/de-en`)."""
    return len(rel.parts) >= 2 and rel.parts[0] == "wmt-newstest" and rel.parts[1] in HELDOUT_NEWSTEST_YEARS


def qe6_pair_specs(data: Path, work: Path) -> tuple[list[str], dict[str, Any]]:
    """`--pairs` specs of the qe6 recipe, QE-test sentences removed; and what was removed."""
    from xmine.disentangle.data import discover_pairs

    exclude = _qe_test_sentences(data)
    parallel = data / "parallel"
    specs, removed = [], {}
    for lang, patterns in QE6_SOURCES.items():
        dirs = sorted({p for pat in patterns for p in parallel.glob(pat)
                       if not _heldout(p.relative_to(parallel))})
        folders = sorted({p if p.is_dir() else p.parent for p in dirs})
        for f in discover_pairs([str(d) for d in folders], langs=[lang, "en"]):
            if not any(f.src.match(pat) or f.src.parent.match(pat) for pat in patterns):
                continue
            dest = work / "qe6-data" / f.src.parent.relative_to(parallel)
            ds, dt, n = _write_filtered(f.src, f.tgt, exclude, dest)
            specs.append(f"{f.src_lang}={ds}:{f.tgt_lang}={dt}")
            if n:
                removed[str(f.src)] = n
    return specs, {"qe_test_sentences_removed": removed}


def xtreme36_pair_specs(data: Path) -> list[str]:
    return [str(data / "parallel" / "tatoeba-challenge")]


def mixed_pair_specs(data: Path, work: Path, *, qe6_pairs: int, xtreme36_pairs: int, seed: int) -> tuple[list[str], dict[str, Any]]:
    """`--pairs` specs of the mixed recipe: the union of the qe6 and xtreme36 samples.

    Exactly the pairs (training and held-out) the two recipes draw with the same seed and sizes,
    written per recipe and language pair under `work/mixed-data/` and then pooled per language
    pair by the trainer (German, Chinese, Estonian get WMT news + FLORES v1 Wikipedia + Tatoeba
    sentences; the other XTREME-36 languages Tatoeba). Mixed domains and lengths, and, being a
    union of the other recipes' samples, nothing to encode that they did not already encode.
    """
    from xmine.artefacts.fileio import atomic_write_text
    from xmine.disentangle.data import discover_pairs
    from xmine.disentangle.sample import sample_pairs

    qe6_specs, extra = qe6_pair_specs(data, work)
    parts = {
        "qe6": (discover_pairs(qe6_specs), qe6_pairs),
        "xtreme36": (discover_pairs(xtreme36_pair_specs(data), langs=list(XTREME36) + ["eng"]), xtreme36_pairs),
    }
    dest = work / "mixed-data" / f"q{qe6_pairs}-x{xtreme36_pairs}-s{seed}"
    counts = {}
    for recipe, (files, per_lang) in parts.items():
        sample = sample_pairs(files, max_pairs_per_lang=per_lang, valid_fraction=0.1, seed=seed,
                              fingerprint_files=False, valid_split="per-pair")
        for g, (a, b) in enumerate(sample.lang_pairs):
            rows = np.flatnonzero(sample.group == g)
            folder = dest / f"{a}-{b}"
            for lang, side in ((a, sample.src), (b, sample.tgt)):
                path = folder / f"{recipe}.{lang}"
                if not path.is_file():
                    atomic_write_text(path, "".join(side[i] + "\n" for i in rows))
            counts[f"{recipe}:{a}-{b}"] = int(len(rows))
    return [str(dest)], extra | {"mixed_counts": counts}


# -------------------------------------------------------------------------------------- Evaluation


def evaluate_transfer(embed_fn, data: Path, langs: Sequence[str], *, rows: int | None = None) -> dict[str, Any]:
    """FLORES-200 devtest xx<->eng retrieval, accuracy@1 (x100), cosine and margin."""
    folder = data / FLORES_DEVTEST
    eng = embed_fn(flores_lines(folder, "eng_Latn", rows=rows))
    per_lang = {}
    for code in langs:
        s = retrieval_scores(embed_fn(flores_lines(folder, code, rows=rows)), eng[: rows or None], margin=True)
        per_lang[code] = {"cos": (s["fwd"] + s["bwd"]) / 2, "margin": (s["fwd_margin"] + s["bwd_margin"]) / 2}
    return {"per_lang": per_lang,
            "average": {m: float(np.mean([r[m] for r in per_lang.values()])) for m in ("cos", "margin")}}


def evaluate_variant(embed_fn, data: Path, *, quick: bool, language_part: bool = False,
                     transfer_langs: Sequence[str] = TRANSFER_LANGS, transfer_rows: int | None = None) -> dict[str, Any]:
    """Every task for one embedding function (the language part only needs the leakage numbers)."""
    from xmine.benchmarks.qe import evaluate_qe

    tatoeba_langs = [l for l in XTREME36 if l in ("deu", "fra", "rus", "cmn", "ara", "hin")] if quick else list(XTREME36)
    tat = evaluate_tatoeba(embed_fn, data / "tatoeba" / "v1", tatoeba_langs,
                           max_pairs=200 if quick else None, margin=True)
    out = {"tatoeba": tat["xtreme36"], "tatoeba_per_lang": tat["per_lang"],
           "transfer": evaluate_transfer(embed_fn, data, list(transfer_langs)[:3] if quick else transfer_langs,
                                         rows=200 if quick else transfer_rows)}
    if not language_part:
        out["qe"] = evaluate_qe(embed_fn, data / "mlqe", max_rows=200 if quick else None)
    return out


def _row(label: str, res: dict[str, Any]) -> list[Any]:
    qe = res.get("qe", {}).get("average", {}).get("pearson", float("nan"))
    tat, tr = res["tatoeba"], res["transfer"]["average"]
    return [label, qe, tat["avg"], tat["avg_margin"], tr["cos"], tr["margin"]]


COLUMNS = ["variant", "QE r x100", "Tatoeba-36 cos", "Tatoeba-36 margin", "FLORES unseen cos",
           "FLORES unseen margin"]


@click.command("quality")
@click.option("--methods", default=",".join(METHODS), show_default=True, help="Comma-separated methods.")
@click.option("--recipes", default="qe6,xtreme36", show_default=True, help="Training recipes (qe6, xtreme36, mixed).")
@click.option("--encoder", default="me5-small", show_default=True)
@click.option("--precision", default="auto", type=click.Choice(PRECISIONS), show_default=True,
              help="Encoder precision (auto: bf16 on CPUs with native bf16, else fp32).")
@click.option("--runtime", default="auto", type=click.Choice(("auto", "torch", "openvino")), show_default=True,
              help="What runs the encoder (auto: openvino on x86 CPUs when installed, else torch).")
@click.option("--data-dir", default=None, help="Data folder (default: $XMINE_DATA or ../shared/data).")
@click.option("--out-dir", default=str(REPO_ROOT / "out" / "quality"), show_default=True,
              help="Where trained projections and derived training files are kept.")
@click.option("--out", default=None, help="Result JSON (default: benchmarks/results/quality-<encoder>.json).")
@click.option("--qe6-pairs", type=int, default=4700, show_default=True, help="Pairs per language pair, qe6 recipe.")
@click.option("--xtreme36-pairs", type=int, default=1000, show_default=True,
              help="Pairs per language pair, xtreme36 recipe.")
@click.option("--transfer-langs", default=",".join(TRANSFER_LANGS), show_default=True,
              help="FLORES-200 codes for the transfer task (English is the pivot; six lower-resource languages "
                   "no recipe trains on).")
@click.option("--transfer-rows", type=int, default=None, help="First N FLORES-200 devtest rows per language (all 1012).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--lr", type=float, default=None, help="Adam learning rate (default: TrainConfig, 1e-4).")
@click.option("--max-epochs", type=int, default=None, help="Epoch limit (default: TrainConfig, 200).")
@click.option("--batch-size", type=int, default=None, help="Pairs per batch (default: TrainConfig, 512).")
@click.option("--patience", type=int, default=None, help="Early-stopping patience (default: TrainConfig, 5).")
@click.option("--mixed-methods", default="center,seed,inter", show_default=True,
              help="Methods trained on the mixed recipe (the candidates for a shipped projection).")
@click.option("--paper-defaults", default="",
              help="Comma-separated RECIPE/METHOD (e.g. qe6/seed) also trained and evaluated with the papers' "
                   "settings (TrainConfig defaults, ignoring --lr etc.), as rows 'RECIPE/METHOD[paper]'.")
@click.option("--quick", is_flag=True, help="Small subsets everywhere (smoke run).")
@click.option("--train-only", is_flag=True,
              help="Train (or finish training) the projections and stop: no evaluation, no result file; a later "
                   "run with the same settings evaluates them without retraining.")
def command(**options) -> None:
    """Disentangler quality: every method x every task (QE, Tatoeba, FLORES transfer), one table."""
    run(**options)


def run(**options) -> dict[str, Any]:
    """Train each recipe x method (or reuse the trained ones) and evaluate raw and every projection
    (see the module doc): the `quality` command with its options as keywords (the others at their
    defaults). Returns the table's rows and the results."""
    defaults = {p.name: p.get_default(click.Context(command)) for p in command.params}
    args = SimpleNamespace(**(defaults | options))
    overrides = {k: getattr(args, k) for k in ("lr", "max_epochs", "batch_size", "patience")
                 if getattr(args, k) is not None}
    transfer = {"transfer_langs": [c for c in args.transfer_langs.split(",") if c],
                "transfer_rows": args.transfer_rows}

    from xmine.disentangle.projection import load_projection
    from xmine.disentangle.trainer import TrainConfig, train
    from xmine.encoders import load_encoder
    from xmine.artefacts.outputs import claim_output

    data = Path(args.data_dir) if args.data_dir else default_data_dir()
    if data is None:
        sys.exit("no data folder: pass --data-dir or set XMINE_DATA")
    work = Path(args.out_dir)
    methods = [m for m in args.methods.split(",") if m]
    paper_defaults = [p for p in args.paper_defaults.split(",") if p]
    for spec in paper_defaults:
        if "/" not in spec:
            sys.exit(f"--paper-defaults {spec!r}: expected RECIPE/METHOD, e.g. qe6/seed")
    recipes = [r for r in args.recipes.split(",") if r]
    encoder = load_encoder(args.encoder, precision=args.precision, runtime=args.runtime)
    raw = RawEmbedder(encoder)
    started = time.time()

    results: dict[str, Any] = {} if args.train_only else {
        "raw": evaluate_variant(raw, data, quick=args.quick, **transfer)}
    rows = [] if args.train_only else [_row("raw", results["raw"])]
    trained: dict[str, Any] = {}
    qe6_pairs, xtreme36_pairs = (300, 100) if args.quick else (args.qe6_pairs, args.xtreme36_pairs)
    for recipe in recipes:
        if recipe == "qe6":
            (specs, extra), per_lang, langs = qe6_pair_specs(data, work), qe6_pairs, None
        elif recipe == "xtreme36":
            specs, extra, per_lang, langs = xtreme36_pair_specs(data), {}, xtreme36_pairs, list(XTREME36) + ["eng"]
        elif recipe == "mixed":
            specs, extra = mixed_pair_specs(data, work, qe6_pairs=qe6_pairs, xtreme36_pairs=xtreme36_pairs,
                                            seed=args.seed)
            per_lang, langs = None, None  # already sampled: every pair of the two recipes' samples
        else:
            sys.exit(f"unknown recipe {recipe!r}")
        recipe_methods = [m for m in args.mixed_methods.split(",") if m] if recipe == "mixed" else methods
        jobs = [(method, False) for method in recipe_methods]
        jobs += [(spec.split("/", 1)[1], True) for spec in paper_defaults if spec.split("/", 1)[0] == recipe]
        for method, paper in jobs:
            name = f"{recipe}/{method}" + ("[paper]" if paper else "")
            # The folder names every setting that changes the data or the run, so results never mix.
            tag = ("quick" if args.quick else f"q{args.qe6_pairs}-x{args.xtreme36_pairs}") + (
                "" if paper else "".join(f"-{k}{v}" for k, v in sorted(overrides.items())))
            settings = {} if paper else RECIPE_SETTINGS.get(recipe, {}) | overrides
            out_dir = work / tag / recipe / method
            # (the split the shipped projection was trained with: its recipe reproduces it)
            config = TrainConfig(method=method, base="dream" if method == "oracle" else None,
                                 max_pairs_per_lang=per_lang, langs=langs, seed=args.seed, valid_split="per-pair",
                                 **settings)
            t0 = time.time()
            # Its own work folder: a finished projection there resumes from its checkpoint (a no-op).
            train(specs, out_dir, encoder=encoder, config=config, overwrite=True)
            proj = load_projection(out_dir)
            if args.train_only:
                print(f"{name}: trained in {out_dir} (best epoch {proj.config.get('best_epoch')} of "
                      f"{len(proj.config.get('history') or [])})", flush=True)
                continue
            trained[name] = {"path": str(out_dir), "fingerprint": proj.fingerprint(),
                             "train_seconds": round(time.time() - t0, 1), "recipe_notes": extra,
                             "best_epoch": proj.config.get("best_epoch"),
                             "epochs_run": len(proj.config.get("history") or []),
                             "hyperparameters": proj.config.get("hyperparameters"),
                             "langid_accuracy": (proj.config.get("langid") or {}).get("accuracy")}
            for part in ("meaning", "language"):
                results[f"{name}:{part}"] = evaluate_variant(projected(raw, proj, part), data, quick=args.quick,
                                                             language_part=part == "language", **transfer)
                rows.append(_row(f"{name}:{part}", results[f"{name}:{part}"]))
            print(format_table(COLUMNS, rows[-2:]), flush=True)

    if args.train_only:
        return {"rows": [], "results": {}}
    print()
    print(format_table(COLUMNS, rows))
    out = Path(args.out) if args.out else REPO_ROOT / "benchmarks" / "results" / (
        f"quality-{args.encoder}{'-quick' if args.quick else ''}.json")
    variants = [Variant(name, "meaning", raw, info["fingerprint"]) for name, info in trained.items()]
    data_files = sorted({f for res in results.values() for f in res.get("qe", {}).get("files", [])})
    # This script regenerates its own result: an earlier one is replaced, anything else refused.
    with claim_output(out, kind=RESULT_KIND, form="json", overwrite=True):
        write_result(
            out, task="quality", encoder=encoder, variants=variants, data_files=data_files,
            parameters={k: v for k, v in vars(args).items() if k not in ("out", "encoder")},
            columns=COLUMNS, rows=[[None if isinstance(v, float) and np.isnan(v) else v for v in r] for r in rows],
            details={"results": results, "projections": trained, "recipe_settings": RECIPE_SETTINGS,
                     "recipe_notes": RECIPE_NOTES},
            seconds=time.time() - started,
        )
    print(f"\nwrote {out}")
    return {"rows": rows, "results": results}

